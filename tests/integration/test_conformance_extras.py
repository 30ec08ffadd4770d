"""Beyond the two conformance programs autodiff/buffers/diff-ptr-pair and
autodiff/generics/dynamic-dispatch: differentiable pointers (IDifferentiablePtrType /
DifferentialPtrPair) and run-time interface values (createDynamicObject), with gradients checked
against float64 finite differences of a numpy model, and the diagnostics for their misuse.
Expected primal values were cross-checked with the real Slang compiler where it accepts the
program (it crashes on some pointer programs that slangjit supports)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError


def run(src: str, buffers: dict, type_conformances=()) -> dict:
    """Dispatch computeMain once with float32 buffers {name: initial values}; their final contents."""
    device = spy.create_device(type=spy.DeviceType.cpu)
    module = device.load_module_from_source("extras", src)
    entry = module.entry_point("computeMain", type_conformances=list(type_conformances))
    kernel = device.create_compute_kernel(device.link_program([module], [entry]))
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    bufs = {name: device.create_buffer(element_count=len(v), struct_size=4, usage=usage,
                                       data=np.asarray(v, np.float32)) for name, v in buffers.items()}
    kernel.dispatch(thread_count=[1, 1, 1], vars=bufs)
    return {name: b.to_numpy().view(np.float32).astype(np.float64) for name, b in bufs.items()}


def fd_grad(f, xs, h=1e-6) -> np.ndarray:
    """Central float64 finite differences of f at the vector xs."""
    xs = np.asarray(xs, np.float64)
    g = np.zeros_like(xs)
    for i in range(len(xs)):
        e = np.zeros_like(xs)
        e[i] = h
        g[i] = (f(xs + e) - f(xs - e)) / (2 * h)
    return g


def expect_error(src: str, code: str, type_conformances=()) -> CompileError:
    """The program fails with `code` at the line marked //@ (a diagnostic, never a traceback)."""
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(text=src, name="m")], ["computeMain"], type_conformances=type_conformances)
    e = ei.value
    want = [i + 1 for i, ln in enumerate(src.splitlines()) if "//@" in ln]
    assert (e.code, [e.loc.line]) == (code, want), f"got {e.code} at line {e.loc.line}, want {code} at {want}:\n{e}"
    return e


# ============================================================================ differentiable pointers

PTR = """
RWStructuredBuffer<float> values;
RWStructuredBuffer<float> derivs;
RWStructuredBuffer<float> tangents;
RWStructuredBuffer<float> outputBuffer;

struct BufPtr : IDifferentiablePtrType
{
    typealias Differential = BufPtr;
    RWStructuredBuffer<float> buf;
    uint offset;
};

[BackwardDerivative(loadBwd)]
[ForwardDerivative(loadFwd)]
float load(BufPtr p, uint i) { return p.buf[p.offset + i]; }

void loadBwd(DifferentialPtrPair<BufPtr> p, uint i, float dOut) { p.d.buf[p.d.offset + i] += dOut; }

DifferentialPair<float> loadFwd(DifferentialPtrPair<BufPtr> p, uint i)
{
    return diffPair(p.p.buf[p.p.offset + i], p.d.buf[p.d.offset + i]);
}
"""

VALUES = [1.5, -2.0, 0.5, 3.0, 0.25, -0.75]


PTR_LOOP = PTR + """
[Differentiable]
float f(BufPtr a, BufPtr b, float x)
{
    BufPtr q = a;
    float s = 0.0;
    [MaxIters(4)]
    for (uint i = 0; i < 4; i++)
    {
        s = s * x + load(q, i % 2);
        q = (i % 2 == 0) ? b : a;
    }
    return s;
}

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    BufPtr a = { values, 0 };
    BufPtr b = { values, 2 };
    BufPtr da = { derivs, 0 };
    BufPtr db = { derivs, 2 };
    var x = diffPair(0.8, 0.0);
    bwd_diff(f)(DifferentialPtrPair<BufPtr>(a, da), DifferentialPtrPair<BufPtr>(b, db), x, 1.0);
    outputBuffer[0] = x.d;
    outputBuffer[1] = f(a, b, 0.8);
}
"""


def test_ptr_reverse_through_loop_reassigned_copies_and_select():
    # q switches between two pointer parameters inside a loop: the reverse sweep must restore
    # q *and* its gradient storage for every iteration.
    src = PTR_LOOP
    out = run(src, {"values": VALUES, "derivs": [0.0] * 6, "tangents": [0.0], "outputBuffer": [0.0] * 2})

    def model(z):                      # z = values..., x
        v, x = z[:6], z[6]
        s, q = 0.0, 0
        for i in range(4):
            s = s * x + v[q + i % 2]
            q = 2 if i % 2 == 0 else 0
        return s

    z = np.array(VALUES + [0.8])
    g = fd_grad(model, z)
    assert out["outputBuffer"][1] == pytest.approx(model(z), rel=1e-6)
    assert out["outputBuffer"][0] == pytest.approx(g[6], rel=1e-5)
    np.testing.assert_allclose(out["derivs"], g[:6], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["values"], np.float32(VALUES))        # inputs untouched


def test_ptr_forward_and_reverse_through_generated_derivatives():
    # g passes (a copy of) its pointer to inner, whose derivatives are generated: the pair is
    # handed down unchanged in both modes.
    src = PTR + """
[Differentiable]
float inner(BufPtr p, float x) { return load(p, 1) * x * x; }

[Differentiable]
float g(BufPtr p, float x)
{
    BufPtr q = p;
    return load(q, 0) * sin(x) + inner(q, x);
}

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    BufPtr p = { values, 3 };
    let r = fwd_diff(g)(DifferentialPtrPair<BufPtr>(p, BufPtr(tangents, 3)), diffPair(0.6, 0.25));
    outputBuffer[0] = r.p;
    outputBuffer[1] = r.d;
    var x = diffPair(0.6, 0.0);
    bwd_diff(g)(DifferentialPtrPair<BufPtr>(p, BufPtr(derivs, 3)), x, 2.0);
    outputBuffer[2] = x.d;
}
"""
    tangents = [0.0, 0.0, 0.0, 0.5, -1.25, 0.0]
    out = run(src, {"values": VALUES, "derivs": [0.0] * 6, "tangents": tangents, "outputBuffer": [0.0] * 3})

    def model(z):                      # z = values..., x
        return z[3] * math.sin(z[6]) + z[4] * z[6] * z[6]

    z = np.array(VALUES + [0.6])
    g = fd_grad(model, z)
    direction = np.array(tangents + [0.25])
    assert out["outputBuffer"][0] == pytest.approx(model(z), rel=1e-6)
    assert out["outputBuffer"][1] == pytest.approx(g @ direction, rel=1e-5)
    assert out["outputBuffer"][2] == pytest.approx(2.0 * g[6], rel=1e-5)
    np.testing.assert_allclose(out["derivs"], 2.0 * g[:6], rtol=1e-5, atol=1e-6)


def test_ptr_method_with_static_derivative_and_no_diff_pointer():
    # A pointer's method may name a static backward derivative taking the pair as `this`;
    # a no_diff pointer parameter stays a plain pointer in the derivative's signature.
    src = """
RWStructuredBuffer<float> values;
RWStructuredBuffer<float> derivs;
RWStructuredBuffer<float> outputBuffer;
struct BufPtr : IDifferentiablePtrType
{
    typealias Differential = BufPtr;
    RWStructuredBuffer<float> buf;
    uint offset;
    [BackwardDerivative(getBwd)]
    float get(uint i) { return buf[offset + i]; }
    static void getBwd(DifferentialPtrPair<BufPtr> p, uint i, float dOut) { p.d.buf[p.d.offset + i] += dOut; }
};

[Differentiable]
float f(BufPtr p, float x) { return p.get(0) * x + p.get(1) * x * x; }

[Differentiable]
float h(no_diff BufPtr p, float x) { return p.buf[p.offset + 2] * x * x; }

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    BufPtr p = { values, 1 };
    var x = diffPair(2.0, 0.0);
    bwd_diff(f)(DifferentialPtrPair<BufPtr>(p, BufPtr(derivs, 1)), x, 1.0);
    outputBuffer[0] = x.d;
    var y = diffPair(2.0, 0.0);
    bwd_diff(h)(p, y, 1.0);
    outputBuffer[1] = y.d;
}
"""
    out = run(src, {"values": VALUES, "derivs": [0.0] * 6, "outputBuffer": [0.0] * 2})
    v = VALUES
    # f = v1 x + v2 x^2: df/dx = v1 + 2 v2 x, df/dv1 = x, df/dv2 = x^2; h = v3 x^2
    assert out["outputBuffer"][0] == pytest.approx(v[1] + 2 * v[2] * 2.0)
    assert out["outputBuffer"][1] == pytest.approx(2 * v[3] * 2.0)
    np.testing.assert_allclose(out["derivs"], [0, 2.0, 4.0, 0, 0, 0])     # h wrote nothing


PTR_DECL = """
RWStructuredBuffer<float> values;
RWStructuredBuffer<float> outputBuffer;
struct BufPtr : IDifferentiablePtrType
{
    typealias Differential = BufPtr;
    RWStructuredBuffer<float> buf;
    uint offset;
};
[BackwardDerivative(loadBwd)]
float load(BufPtr p, uint i) { return p.buf[p.offset + i]; }
void loadBwd(DifferentialPtrPair<BufPtr> p, uint i, float dOut) { p.d.buf[p.d.offset + i] += dOut; }
"""

MAIN = """
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    BufPtr p = { values, 0 };
    var x = diffPair(1.0, 0.0);
    bwd_diff(f)(DifferentialPtrPair<BufPtr>(p, p), x, 1.0);
    outputBuffer[0] = x.d;
}
"""


def test_ptr_built_inside_the_body_has_no_gradient_storage():
    e = expect_error(PTR_DECL + """
[Differentiable]
float f(BufPtr p, float x)
{
    BufPtr r = { p.buf, p.offset + 1 };
    return load(r, 0) * x; //@
}
""" + MAIN, "E6015")
    assert "'p' of 'load'" in e.diagnostics[0].message


def test_no_diff_ptr_has_no_gradient_storage():
    expect_error(PTR_DECL + """
[Differentiable]
float f(no_diff BufPtr p, float x)
{
    return load(p, 0) * x; //@
}
""" + MAIN.replace("DifferentialPtrPair<BufPtr>(p, p), x", "p, x"), "E6015")


def test_ptr_inout_parameter_and_missing_differential():
    expect_error(PTR_DECL + """
[Differentiable]
float f(inout BufPtr p, float x) //@
{
    return load(p, 0) * x;
}
""" + MAIN.replace("DifferentialPtrPair<BufPtr>(p, p), x", "p, x"), "E6014")
    expect_error("""
RWStructuredBuffer<float> values;
RWStructuredBuffer<float> outputBuffer;
struct Ptr : IDifferentiablePtrType { RWStructuredBuffer<float> buf; }; //@
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    Ptr p = { values };
    DifferentialPtrPair<Ptr> pp = DifferentialPtrPair<Ptr>(p, p);
    outputBuffer[0] = 1.0;
}
""", "E6016")


@pytest.mark.parametrize("decl,code", [
    ("DifferentialPair<BufPtr> q = diffPair(p, p); //@", "E6010"),
    ("DifferentialPtrPair<float> q; //@", "E6010"),
    ("DifferentialPtrPair<BufPtr> q = DifferentialPtrPair<BufPtr>(p); //@", "E3030"),
])
def test_ptr_pair_type_misuse(decl, code):
    expect_error(PTR_DECL + """
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    BufPtr p = { values, 0 };
    """ + decl + """
    outputBuffer[0] = 1.0;
}
""", code)


# ============================================================================ dynamic interface values

ACTS = """
RWStructuredBuffer<float> outputBuffer;
interface IAct
{
    [Differentiable]
    float act(float x);
    [mutating] void bump(float v);
    float get();
}
struct Scale : IAct
{
    float k;
    [Differentiable] float act(float x) { return k * x * x; }
    [mutating] void bump(float v) { k += v; }
    float get() { return k; }
}
struct Affine : IAct
{
    float a; float b;
    [Differentiable] float act(float x) { return a * sin(x) + b; }
    [mutating] void bump(float v) { b += 2.0 * v; }
    float get() { return a + 10.0 * b; }
}
"""

CONFS = [("IAct", "Scale", 3), ("IAct", "Affine", 7)]


def test_dynamic_data_is_reinterpreted_and_unknown_ids_take_the_first_entry():
    # Values agree with real Slang: the data's bytes become the object, zero padded.
    got = run(ACTS + """
struct Two { float a; float b; }
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    Two t = { 3.0, 1.0 };
    outputBuffer[0] = createDynamicObject<IAct>(3, 2.5).act(2.0);      // Scale{2.5}
    outputBuffer[1] = createDynamicObject<IAct>(7, t).act(2.0);        // Affine{3, 1}
    outputBuffer[2] = createDynamicObject<IAct>(3, t).act(2.0);        // Scale{3}
    outputBuffer[3] = createDynamicObject<IAct>(7, 4.0).act(2.0);      // Affine{4, 0}
    outputBuffer[4] = createDynamicObject<IAct>(tid.x + 5, 1.5).act(2.0);  // unknown: Scale{1.5}
    outputBuffer[5] = createDynamicObject<IAct, float>(3, 1).act(2.0);    // data converted to float first
}
""", {"outputBuffer": [0.0] * 6}, CONFS)["outputBuffer"]
    np.testing.assert_allclose(got, [10.0, 3 * math.sin(2.0) + 1, 12.0, 4 * math.sin(2.0), 6.0, 4.0], rtol=1e-6)


def test_dynamic_mutating_is_as_returned_and_generic_arguments():
    got = run(ACTS + """
IAct pick(uint id, float v)
{
    if (id == 0) { Scale s = { v }; return s; }
    Affine a = { v, 1.0 };
    return a;
}
float twice<T : IAct>(T t, float x) { return t.act(t.act(x)); }
float apply(IAct a, float x) { return a.act(x); }

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    IAct a = pick(0, 2.0);
    a.bump(0.5);
    outputBuffer[0] = a.get();
    IAct b = pick(1, 2.0);
    b.bump(0.5);
    outputBuffer[1] = b.get();
    outputBuffer[2] = twice(b, 0.5);
    outputBuffer[3] = apply(a, 3.0);
    outputBuffer[4] = (a is Scale) ? 1.0 : 0.0;
    outputBuffer[5] = (b is Scale) ? 1.0 : 0.0;
    if (let s = b as Affine) outputBuffer[6] = s.b; else outputBuffer[6] = -1.0;
    if (let s = a as Affine) outputBuffer[7] = s.b; else outputBuffer[7] = -1.0;
    IAct arr[2] = { a, b };
    outputBuffer[8] = arr[1].act(1.0);
}
""", {"outputBuffer": [0.0] * 9}, CONFS)["outputBuffer"]
    act_b = lambda x: 2.0 * math.sin(x) + 2.0          # noqa: E731  (Affine{2, 1 + 2*0.5})
    np.testing.assert_allclose(got, [2.5, 22.0, act_b(act_b(0.5)), 2.5 * 9.0, 1, 0, 2.0, -1, act_b(1.0)],
                               rtol=1e-6)


DYN_CHAIN = ACTS + """
[Differentiable]
float chain(float x, uint code, no_diff float2 prm)
{
    [MaxIters(3)]
    for (uint i = 0; i < 3; i++)
    {
        IAct a = createDynamicObject<IAct>(((code >> i) & 1) == 0 ? 3 : 7, prm * float(i + 1));
        x = a.act(x) + 0.1 * x;
    }
    return x;
}

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    float2 prm = float2(0.7, -0.2);
    for (uint code = 0; code < 8; code++)
    {
        var x = diffPair(0.4, 0.0);
        bwd_diff(chain)(x, code, prm, 1.0);
        outputBuffer[3 * code] = chain(0.4, code, prm);
        outputBuffer[3 * code + 1] = x.d;
        outputBuffer[3 * code + 2] = fwd_diff(chain)(diffPair(0.4, 1.0), code, prm).d;
    }
}
"""


def test_dynamic_dispatch_gradients_in_a_loop():
    # Each iteration builds an activation from a run-time id and applies it: reverse mode stores
    # the dynamic objects per iteration; both modes must match finite differences of the chain.
    src = DYN_CHAIN
    got = run(src, {"outputBuffer": [0.0] * 24}, CONFS)["outputBuffer"].reshape(8, 3)

    def model(x, code):
        for i in range(3):
            k, c = 0.7 * (i + 1), -0.2 * (i + 1)
            ax = k * x * x if (code >> i) & 1 == 0 else k * math.sin(x) + c
            x = ax + 0.1 * x
        return x

    for code in range(8):
        g = fd_grad(lambda z: model(z[0], code), [0.4])[0]
        assert got[code, 0] == pytest.approx(model(0.4, code), rel=1e-5)
        assert got[code, 1] == pytest.approx(g, rel=1e-4)
        assert got[code, 2] == pytest.approx(g, rel=1e-4)


def test_dynamic_ids_default_to_declaration_order():
    got = run(ACTS + """
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    outputBuffer[0] = createDynamicObject<IAct>(0, 2.0).get();      // Scale
    outputBuffer[1] = createDynamicObject<IAct>(1, 2.0).get();      // Affine{2, 0}
}
""", {"outputBuffer": [0.0] * 2})["outputBuffer"]
    np.testing.assert_array_equal(got, [2.0, 2.0])


KMAIN = "[numthreads(1, 1, 1)]\nvoid computeMain(uint3 tid : SV_DispatchThreadID)\n{\n%s\n}\n"


@pytest.mark.parametrize("body,code", [
    ("    float f = createDynamicObject<float>(0, 1.0); //@", "E3063"),
    ("    IAct a = createDynamicObject<IAct>(0); //@", "E3030"),
    ("    IAct a = createDynamicObject<IAct>(0, 1.0);\n    outputBuffer[0] = a.k; //@", "E2040"),
    ("    IAct a = createDynamicObject<IAct>(0, 1.0);\n    outputBuffer[0] = a.act(1.0, 2.0); //@", "E3010"),
    ("    IAct a = Scale(1.0);\n    a = createDynamicObject<IAct>(0, 1.0); //@", "E3001"),
])
def test_dynamic_call_misuse(body, code):
    expect_error(ACTS + KMAIN % body, code)


@pytest.mark.parametrize("confs,code", [
    ([("IAct", "Nope", 0)], "E5010"),                                  # unknown type
    ([("IAct", "Plain", 0)], "E5010"),                                 # does not conform
    ([("IAct", "Scale", 1), ("IAct", "Affine", 1)], "E5010"),          # the same id twice
    ([("IAct", "Affine", 0)], "E5012"),                                # Scale has no id to be stored with
])
def test_dynamic_conformance_misuse(confs, code):
    expect_error(ACTS + "struct Plain { float z; }\n" + KMAIN % """
    Scale s = { 1.0 };
    IAct a = createDynamicObject<IAct>(0, 1.0); a = s; //@
    outputBuffer[0] = a.get();""", code, confs)


def test_dynamic_interface_misuse():
    expect_error("""
RWStructuredBuffer<float> outputBuffer;
interface INone { float f(); }
""" + KMAIN % "    outputBuffer[0] = createDynamicObject<INone>(0, 1.0).f(); //@", "E5011")
    expect_error(ACTS + "uniform IAct g; //@\n" + KMAIN % "    outputBuffer[0] = g.get();", "E5013")
    # interface values in memory (Slang's serialized existentials, tests/compiler/test_lang_existential_memory.py):
    # a conforming type larger than Slang's default 16-byte payload needs [anyValueSize(N)]
    big = "struct Big : IAct { float4 a; float b; [Differentiable] float act(float x) { return x; } " \
          "[mutating] void bump(float v) {} float get() { return b; } }\n"
    expect_error(ACTS + big + "uniform IAct* gp; //@\n" + KMAIN % "    outputBuffer[0] = gp[0].get();", "E5013")
    expect_error(ACTS + big + "RWStructuredBuffer<IAct> gb; //@\n" + KMAIN % "    outputBuffer[0] = gb[0].get();", "E5013")
    # an associated type without an interface constraint is a dynamic value of its own (session 12,
    # tests/compiler/slang_ports/dynamic-assoc-unconstrained-multi.slang): accepted
    compile_program([SourceSpec(text="""
RWStructuredBuffer<float> outputBuffer;
interface IG { associatedtype V; V twice(); }
struct A : IG { typealias V = float; float v; float twice() { return 2 * v; } }
""" + KMAIN % "    createDynamicObject<IG>(0, 1.0).twice();", name="m")], ["computeMain"])
    expect_error("""
RWStructuredBuffer<float> outputBuffer;
interface IG { void merge(inout This o); }
struct A : IG { float v; void merge(inout A o) { o.v += v; } }
""" + KMAIN % "    var g = createDynamicObject<IG>(0, 1.0); A a = { 2.0 };\n    g.merge(a); //@", "E3001")    # slangc: E30019
    expect_error("""
RWStructuredBuffer<float> outputBuffer;
interface ID { [Differentiable] float f(float x); }
struct A : ID { float f(float x) { return x * x; } } //@
[Differentiable] float use(float x, uint id) { return createDynamicObject<ID>(id, 0).f(x); }
""" + KMAIN % "    outputBuffer[0] = fwd_diff(use)(diffPair(1.0, 1.0), 0).d;", "E6017")


@pytest.mark.parametrize("name", ["PTR_LOOP", "DYN_CHAIN"])
def test_new_features_compile_for_cuda(name):
    # No GPU needed: the CUDA C++ must compile with NVRTC (skipped without the NVRTC wheel).
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    prog = compile_program([SourceSpec(text=globals()[name], name="m")], ["computeMain"], target="cuda",
                           type_conformances=CONFS)
    ptx, _ = cuda_compiler.compile_source(prog.source, "compute_90")
    assert b".entry" in ptx
