"""Interface values stored in memory (issue 19 group 3, session 12): `StructuredBuffer<IFoo>`,
`RWStructuredBuffer<IFoo>`, interface-typed fields of structs in buffers and `uniform IFoo* p`, in
Slang's serialized existential layout: an 8-byte RTTI handle (ignored when read, written as zero), the
conformance id in an 8-byte witness-table id (`[id, 0]`), then the any-value payload (`[anyValueSize(N)]`
bytes, 16 without the attribute) holding the concrete value's bytes.  The host writes
`[0, 0, id, 0, payload...]` per value; ids are the program's type conformances (`type_conformance
Impl:IFoo = id`, else declaration order).  The conformance harness cannot fill such buffers
(`new StructuredBuffer<IFoo>[...]` is reported as skip), so the bytes are written from numpy here.
Expected values: the formulas of the conforming types in numpy; gradients analytic."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError

from lang_programs import nvrtc_compiles

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
USAGE = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource


def load(device, tmp_path, src: str, confs=None):
    p = tmp_path / "exist_prog.slang"
    p.write_text(src)
    if confs:
        module = device.load_module(str(p))
        entry = module.entry_point("computeMain", type_conformances=confs)
        program = device.link_program(modules=[module], entry_points=[entry])
    else:
        program = device.load_program(str(p), ["computeMain"])
    return device.create_compute_kernel(program)


def existential(ident: int, payload_words: int, *values) -> np.ndarray:
    """One serialized existential: RTTI (2 words, zero), witness-table id [ident, 0], payload."""
    w = np.zeros(4 + payload_words, np.uint32)
    w[2] = ident
    raw = np.concatenate([np.atleast_1d(np.asarray(v)).view(np.uint32) for v in values]) if values else []
    w[4:4 + len(raw)] = raw
    return w


def f32(*v):
    return np.array(v, np.float32)


SHAPES = """
interface IShape
{
    float area();
    float scaled(float k);
}
struct Circle : IShape
{
    float r;
    float area() { return 3.0 * r * r; }
    float scaled(float k) { return k * r; }
}
struct Rect : IShape
{
    float w; float h;
    float area() { return w * h; }
    float scaled(float k) { return k * (w + h); }
}
"""

BUFFERS = SHAPES + """
StructuredBuffer<IShape> shapes;
RWStructuredBuffer<IShape> outShapes;
RWStructuredBuffer<float> outputBuffer;
[numthreads(4, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    if (i >= 3) return;
    IShape s = shapes[i];
    outputBuffer[i * 2] = s.area();
    outputBuffer[i * 2 + 1] = shapes[i].scaled(2.0);
    if (i == 0)
    {
        outShapes[0] = Rect(5.0, 6.0);
        outShapes[1] = shapes[1];
        Circle c = { 7.0 };
        IShape d = c;
        outShapes[2] = d;
    }
}
"""


@DEV
@pytest.mark.parametrize("ids", [None, {"Circle": 5, "Rect": 2}])
def test_structured_buffers_of_an_interface(device, tmp_path, ids):
    confs = [("IShape", t, i) for t, i in ids.items()] if ids else None
    cid, rid = (ids["Circle"], ids["Rect"]) if ids else (0, 1)    # without conformances: declaration order
    k = load(device, tmp_path, BUFFERS, confs)
    data = np.concatenate([existential(cid, 4, f32(2.0)), existential(rid, 4, f32(3.0, 4.0)),
                           existential(cid, 4, f32(1.0))])
    shapes = device.create_buffer(element_count=3, struct_size=32, usage=USAGE, data=data)
    outs = device.create_buffer(element_count=3, struct_size=32, usage=USAGE, data=np.zeros(24, np.uint32))
    out = device.create_buffer(element_count=6, struct_size=4, usage=USAGE, data=np.zeros(6, np.float32))
    k.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out, "shapes": shapes, "outShapes": outs})
    np.testing.assert_array_equal(out.to_numpy().view(np.float32), [12, 4, 12, 14, 3, 2])
    words = outs.to_numpy().view(np.uint32).reshape(3, 8)
    np.testing.assert_array_equal(words[0], existential(rid, 4, f32(5.0, 6.0)))
    np.testing.assert_array_equal(words[1], existential(rid, 4, f32(3.0, 4.0)))
    np.testing.assert_array_equal(words[2], existential(cid, 4, f32(7.0)))


FIELDS_AND_POINTERS = """
[anyValueSize(12)]
interface IShape
{
    float area();
    [mutating] void grow(float k);
}
struct Circle : IShape
{
    float r;
    float area() { return 3.0 * r * r; }
    [mutating] void grow(float k) { r += k; }
}
struct Box : IShape
{
    float w; float h; float d;
    float area() { return 2.0 * (w * h + h * d + w * d); }
    [mutating] void grow(float k) { w += k; h += k; d += k; }
}
struct Item { float weight; IShape shape; uint flags; }
StructuredBuffer<Item> items;
uniform IShape* ptr;
RWStructuredBuffer<float> outputBuffer;
[numthreads(2, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    Item it = items[i];
    outputBuffer[i * 5] = it.weight * it.shape.area() + float(it.flags);
    outputBuffer[i * 5 + 1] = ptr[i].area();
    IShape s = ptr[i];
    s.grow(1.0);
    outputBuffer[i * 5 + 2] = s.area();
    ptr[i].grow(2.0);
    outputBuffer[i * 5 + 3] = (*(ptr + i)).area();
    outputBuffer[i * 5 + 4] = items[i].shape.area();
}
"""


def box_area(w, h, d):
    return 2.0 * (w * h + h * d + w * d)


@DEV
def test_struct_fields_and_pointers_with_any_value_size(device, tmp_path):
    k = load(device, tmp_path, FIELDS_AND_POINTERS)
    # [anyValueSize(12)]: 16-byte header + 12-byte payload = 28 bytes a value; Item = 4 + 28 + 4
    def item(weight, ident, vals, flags):
        return np.concatenate([f32(weight).view(np.uint32), existential(ident, 3, vals),
                               np.array([flags], np.uint32)])
    items = np.concatenate([item(2.0, 0, f32(2.0), 5), item(0.5, 1, f32(1.0, 2.0, 3.0), 7)])
    ib = device.create_buffer(element_count=2, struct_size=36, usage=USAGE, data=items)
    pdata = np.concatenate([existential(1, 3, f32(1.0, 2.0, 0.5)), existential(0, 3, f32(1.0))])
    pb = device.create_buffer(element_count=2, struct_size=28, usage=USAGE, data=pdata)
    out = device.create_buffer(element_count=10, struct_size=4, usage=USAGE, data=np.zeros(10, np.float32))
    k.dispatch(thread_count=[2, 1, 1], vars={"outputBuffer": out, "items": ib, "ptr": pb.device_address})
    want = [2.0 * 12.0 + 5, box_area(1, 2, 0.5), box_area(2, 3, 1.5), box_area(3, 4, 2.5), 12.0,
            0.5 * box_area(1, 2, 3) + 7, 3.0, 12.0, 27.0, box_area(1, 2, 3)]
    np.testing.assert_allclose(out.to_numpy().view(np.float32), want, rtol=1e-6)
    # the pointer's values were changed in place ([mutating] through the pointer), headers kept
    words = pb.to_numpy().view(np.uint32).reshape(2, 7)
    np.testing.assert_array_equal(words[0], existential(1, 3, f32(3.0, 4.0, 2.5)))
    np.testing.assert_array_equal(words[1], existential(0, 3, f32(3.0)))


MATERIALS = """
interface IMaterial
{
    [Differentiable] float eval(float x);
}
struct Lin : IMaterial
{
    float a; float b;
    [Differentiable] float eval(float x) { return a * x + b; }
}
struct Sq : IMaterial
{
    float k;
    [Differentiable] float eval(float x) { return k * x * x; }
}
StructuredBuffer<IMaterial> materials;
RWStructuredBuffer<float> outputBuffer;
[Differentiable]
float shade(IMaterial m, float x) { return sin(m.eval(x)); }
[numthreads(3, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    IMaterial m = materials[i];
    float x = 0.25 + float(i);
    outputBuffer[i * 3] = shade(m, x);
    outputBuffer[i * 3 + 1] = fwd_diff(shade)(m, diffPair(x, 1.0)).d;
    var p = diffPair(x);
    bwd_diff(shade)(m, p, 1.0);
    outputBuffer[i * 3 + 2] = p.d;
}
"""


@DEV
def test_differentiable_materials_read_from_a_buffer(device, tmp_path):
    k = load(device, tmp_path, MATERIALS)
    mats = [(0, (2.0, -1.0)), (1, (0.5,)), (0, (-1.5, 0.75))]
    data = np.concatenate([existential(i, 4, f32(*v)) for i, v in mats])
    mb = device.create_buffer(element_count=3, struct_size=32, usage=USAGE, data=data)
    out = device.create_buffer(element_count=9, struct_size=4, usage=USAGE, data=np.zeros(9, np.float32))
    k.dispatch(thread_count=[3, 1, 1], vars={"outputBuffer": out, "materials": mb})
    want = []
    for j, (ident, v) in enumerate(mats):
        x = 0.25 + j
        e, de = (v[0] * x + v[1], v[0]) if ident == 0 else (v[0] * x * x, 2 * v[0] * x)
        want += [np.sin(e), np.cos(e) * de, np.cos(e) * de]
    np.testing.assert_allclose(out.to_numpy().view(np.float32), want, rtol=2e-5, atol=1e-6)


ENTRY_PARAMS = SHAPES + """
float total(StructuredBuffer<IShape> s, uint n)
{
    float t = 0;
    for (uint i = 0; i < n; i++)
        t += s[i].area();
    return t;
}
[numthreads(1, 1, 1)]
void computeMain(uniform StructuredBuffer<IShape> shapes, uniform RWStructuredBuffer<float> outputBuffer)
{
    outputBuffer[0] = total(shapes, 3);
}
"""


@DEV
def test_entry_point_and_function_parameters(device, tmp_path):
    k = load(device, tmp_path, ENTRY_PARAMS)
    data = np.concatenate([existential(0, 4, f32(2.0)), existential(1, 4, f32(3.0, 4.0)), existential(0, 4, f32(0.5))])
    sb = device.create_buffer(element_count=3, struct_size=32, usage=USAGE, data=data)
    out = device.create_buffer(element_count=1, struct_size=4, usage=USAGE, data=np.zeros(1, np.float32))
    k.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": out, "shapes": sb})
    np.testing.assert_allclose(out.to_numpy().view(np.float32)[0], 12.0 + 12.0 + 0.75, rtol=1e-6)


def _compile_error(src: str) -> CompileError:
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(text=src, name="mem")], ["computeMain"], target="cpp")
    return ei.value


def test_too_large_for_the_default_payload_is_diagnosed():
    big = SHAPES + """
struct Poly : IShape { float4 a; float b; float area() { return b; } float scaled(float k) { return k; } }
RWStructuredBuffer<float> outputBuffer;
StructuredBuffer<IShape> shapes;
[numthreads(1, 1, 1)]
void computeMain() { outputBuffer[0] = shapes[0].area(); }
"""
    e = _compile_error(big)
    assert e.code == "E5013" and "'shapes'" in str(e) and "Poly" in str(e) and "[anyValueSize(20)]" in str(e)
    assert e.loc.line == big.splitlines().index("StructuredBuffer<IShape> shapes;") + 1
    # a function parameter of such a buffer type likewise
    e = _compile_error(SHAPES + """
struct Poly : IShape { float4 a; float b; float area() { return b; } float scaled(float k) { return k; } }
RWStructuredBuffer<float> outputBuffer;
float first(StructuredBuffer<IShape> s) { return s[0].area(); }
[numthreads(1, 1, 1)]
void computeMain(uniform StructuredBuffer<IShape> shapes) { outputBuffer[0] = first(shapes); }
""")
    assert e.code == "E5013" and "Poly" in str(e)
    # a local of such a type stays fine: only memory needs Slang's payload size
    ok = SHAPES + """
struct Poly : IShape { float4 a; float b; float area() { return b; } float scaled(float k) { return k; } }
RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain() { IShape s = createDynamicObject<IShape>(2, float[5](1, 2, 3, 4, 5)); outputBuffer[0] = s.area(); }
"""
    compile_program([SourceSpec(text=ok, name="ok")], ["computeMain"], target="cpp")


def test_a_uniform_interface_value_stays_diagnosed():
    src = SHAPES + "RWStructuredBuffer<float> outputBuffer;\nuniform IShape g;\n" \
                   "[numthreads(1, 1, 1)]\nvoid computeMain() { outputBuffer[0] = g.area(); }\n"
    e = _compile_error(src)
    assert e.code == "E5013" and "'g'" in str(e)


def test_existentials_in_memory_compile_with_nvrtc():
    for src in (BUFFERS, FIELDS_AND_POINTERS, MATERIALS, ENTRY_PARAMS):
        assert nvrtc_compiles(src)
