"""Module-level API SlangPy programs use: `spy.pack` / `PackedArg`, `module.layout` reflection
(find_function_by_name, find_type_by_name, find_struct_by_name, find_function_by_name_in_type), and call
caching (the same signature re-uses its CallData and kernel; a new signature or shape builds or re-uses
correctly)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
struct Val { int x; }
struct TVal { Tensor<float, 1> t; }
struct Body : IDifferentiable {
    float3 pos;
    float mass;
    int id;
    [mutating] void push(float3 d) { pos += d; }
    [Differentiable] float energy(float v) { return 0.5 * mass * v * v; }
    static int twice(int a) { return 2 * a; }
}
int copy(int v) { return v; }
int inc(Val v) { return v.x + 1; }
float first_plus_one(TVal v) { return v.t[0] + 1; }
float foo(float a, float b) { return a + b; }
[Differentiable] float3 poly(float3 a, no_diff float3 b, out float c) { c = a.x; return a * a + b; }
float over(float a) { return a; }
float over(float a, float b) { return a * b; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "apimod", SRC)


def test_pack_values(m, device):
    assert m.copy(spy.pack(m, 42)) == 42
    assert m.inc(spy.PackedArg(m, {"_type": "Val", "x": 41})) == 42
    r = m.inc(spy.pack(m, [{"_type": "Val", "x": i} for i in range(1, 5)]), _result="numpy")
    assert r.dtype == np.int32 and r.tolist() == [2, 3, 4, 5]
    vals = []
    for i in range(4):
        t = spy.Tensor.zeros(device, dtype=float, shape=(1,))
        t.copy_from_numpy(np.array([i + 1.5], np.float32))
        vals.append({"_type": "TVal", "t": t})
    r = m.first_plus_one(spy.pack(m, vals), _result="numpy")
    assert r.dtype == np.float32 and r.tolist() == [2.5, 3.5, 4.5, 5.5]
    packed = spy.pack(m, [{"_type": "Val", "x": 7}] * 3)
    assert m.inc(packed, _result="numpy").tolist() == [8, 8, 8]          # re-used: packed once
    with pytest.raises(ValueError, match="no type named 'Nope'"):
        spy.pack(m, [{"_type": "Nope", "x": 1}])


def test_layout_functions(m):
    lay = m.layout
    f = lay.find_function_by_name("poly")
    assert f.name == "poly" and f.differentiable and not f.is_overloaded
    assert f.return_type.full_name == "float3" and f.return_type.kind == spy.TypeReflection.Kind.vector
    ps = f.parameters
    assert [(p.name, p.type.full_name) for p in ps] == [("a", "float3"), ("b", "float3"), ("c", "float")]
    assert ps[0].modifiers == ("in",) and "no_diff" in ps[1].modifiers and ps[2].has_modifier("out")
    g = lay.find_function_by_name("over")
    assert g.is_overloaded and sorted(len(o.parameters) for o in g.overloads) == [1, 2]
    assert lay.find_function_by_name("missing") is None
    assert not lay.find_function_by_name("copy").differentiable


def test_layout_types(m):
    lay = m.layout
    b = lay.find_type_by_name("Body")
    assert b.kind == spy.TypeReflection.Kind.struct and b.name == "Body" and b.differentiable
    assert [(f.name, f.type.full_name) for f in b.fields] == [("pos", "float3"), ("mass", "float"), ("id", "int")]
    assert lay.find_struct_by_name("Body") == b
    assert lay.find_struct_by_name("float3") is None and lay.find_struct_by_name("Missing") is None
    v = lay.find_type_by_name("float3")
    assert v.kind == spy.TypeReflection.Kind.vector and v.col_count == 3 and v.element_type.full_name == "float"
    mt = lay.find_type_by_name("float2x3")
    assert mt.kind == spy.TypeReflection.Kind.matrix and (mt.row_count, mt.col_count) == (2, 3)
    push = lay.find_function_by_name_in_type(b, "push")
    assert push.mutating and push.full_name == "Body::push" and push.return_type is None
    assert lay.find_function_by_name_in_type("Body", "twice").is_static
    assert lay.find_function_by_name("Body::energy").differentiable
    assert lay.find_function_by_name_in_type(b, "nothing") is None


def test_call_data_cached_per_signature(m, device):
    f = m.foo.as_func()
    ff, ff2 = f.debug_build_call_data(1.0, 2.0), f.debug_build_call_data(1.0, 2.0)
    ii, ii2 = f.debug_build_call_data(1, 2), f.debug_build_call_data(1, 2)
    i_f = f.debug_build_call_data(1, 2.0)
    assert ff is ff2 and ii is ii2 and ff is not ii and i_f is not ii
    b0 = spy.Tensor.zeros(device, dtype=float, shape=(100,))
    b1 = spy.Tensor.zeros(device, dtype=float, shape=(100,))
    plain = f.debug_build_call_data(b0, b1)
    mapped = f.map((0,), (0,)).debug_build_call_data(b0, b1)
    assert plain is not mapped and plain.pipeline == mapped.pipeline


def test_new_shapes_reuse_and_rebuild(m, device):
    rng = np.random.default_rng(3)
    f = m.foo
    for shape in [(5,), (17,), (4, 3), (2, 3, 4), (17,), (4, 3)]:
        a = rng.random(shape, dtype=np.float32)
        b = rng.random(shape, dtype=np.float32)
        cd = f.debug_build_call_data(a, b)
        r = f(a, b, _result="numpy")
        np.testing.assert_allclose(r, a + b, rtol=1e-6)
        assert f.debug_build_call_data(a, b) is cd
    a1 = f.debug_build_call_data(np.zeros(3, np.float32), np.zeros(3, np.float32))
    a2 = f.debug_build_call_data(np.zeros(9, np.float32), np.zeros(9, np.float32))
    a3 = f.debug_build_call_data(np.zeros((3, 3), np.float32), np.zeros((3, 3), np.float32))
    assert a1 is a2 and a1 is not a3                 # same dimensions: one kernel; new dimensions: another
    s = f(1.0, np.arange(4, dtype=np.float32), _result="numpy")
    assert s.tolist() == [1, 2, 3, 4]


CONF = """
interface IVal { int get(); }
struct Get10 : IVal { int get() { return 10; } }
struct Get20 : IVal { int get() { return 20; } }
int getval() { IVal v; return v.get(); }
int twice(IVal v) { return 2 * v.get(); }
"""


def test_type_conformances(device):
    mod = spy.Module.load_from_source(device, "apiconf", CONF)
    f = mod.getval
    assert f.type_conformances([spy.TypeConformance("IVal", "Get10")])() == 10
    assert f.type_conformances([spy.TypeConformance("IVal", "Get20")])() == 20
    assert f.type_conformances([("IVal", "Get20")])() == 20
    assert f.type_conformances([spy.TypeConformance(mod.layout.find_type_by_name("IVal"), "Get20")])() == 20
    with pytest.raises(ValueError, match="no type named 'Nope'"):
        f.type_conformances([spy.TypeConformance("IVal", "Nope")])
    with pytest.raises(ValueError, match="TypeConformance"):
        f.type_conformances([object()])
    assert mod.twice({"_type": "Get20"}) == 40


def test_raw_dispatch_thread_group_size(device):
    mod = spy.Module.load_from_source(device, "apiraw", "import \"slangpy\";\n"
                                      "void k(uint3 tid, RWTensor<int, 2> o) { o.store(int(tid.y), int(tid.x), "
                                      "int(tid.x + 100 * tid.y)); }")
    want = np.arange(5)[None, :] + 100 * np.arange(3)[:, None]
    for tgs in (None, spy.uint3(4, 2, 1), (1, 1, 1), 7):
        o = spy.Tensor.zeros(device, shape=(3, 5), dtype=int)
        fn = mod.k if tgs is None else mod.k.thread_group_size(tgs)
        fn.dispatch(spy.uint3(5, 3, 1), o=o)
        assert np.array_equal(o.to_numpy(), want), tgs
    for bad in (0, (2, 0, 1), (1, 2, 3, 4), 2048, True):
        with pytest.raises(ValueError, match="thread_group_size"):
            mod.k.thread_group_size(bad)


def test_function_node_properties(m):
    node = m.foo.map((0,), (0,)).return_type("numpy")
    assert node.name == "foo" and node.module is m and node.parent is not None


def test_method_this_is_differentiable(m, device):
    """`this` of a [Differentiable] method of a differentiable struct gets its gradient (dE/dmass = v^2/2);
    a `this` without gradients (a plain tensor, a dict) is read as a constant."""
    bodies = spy.Tensor.zeros(device, shape=(3,), dtype=m.Body)
    c = bodies.cursor()
    for i in range(3):
        c[i].write({"pos": float3(0, 0, 0), "mass": float(i + 1), "id": i})
    c.apply()
    vn = np.array([1, 2, 3], np.float32)
    v = spy.Tensor.from_numpy(device, vn).with_grads(zero=True)
    e = m.Body.energy(bodies, v, _result="tensor").with_grads()
    np.testing.assert_allclose(e.to_numpy(), 0.5 * np.arange(1, 4) * vn * vn)
    e.grad.copy_from_numpy(np.ones(3, np.float32))
    m.Body.energy.bwds(bodies, v, _result=e)
    np.testing.assert_allclose(v.grad.to_numpy(), np.arange(1, 4) * vn)
    v2 = spy.Tensor.from_numpy(device, vn).with_grads(zero=True)
    m.Body.energy.bwds({"pos": float3(0, 0, 0), "mass": 2.0, "id": 0}, v2, _result=e)
    np.testing.assert_allclose(v2.grad.to_numpy(), 2 * vn)
    bg = bodies.with_grads(zero=True)
    v3 = spy.Tensor.from_numpy(device, vn).with_grads(zero=True)
    m.Body.energy.bwds(bg, v3, _result=e)
    g = bg.grad.to_numpy().view(np.float32).reshape(3, -1)        # Body.Differential: pos, mass
    np.testing.assert_allclose(g, np.c_[np.zeros((3, 3)), 0.5 * vn * vn])


def test_layout_scalar_types(m):
    lay = m.layout
    f32 = lay.scalar_type(spy.TypeReflection.ScalarType.float32)
    assert f32.full_name == "float" and f32.kind == spy.TypeReflection.Kind.scalar
    assert lay.scalar_type(spy.TypeReflection.ScalarType.int32).full_name == "int"
    assert lay.scalar_type(spy.TypeReflection.ScalarType.float16).size == 2
    arr = lay.find_type_by_name("float2[4]")
    assert arr.kind == spy.TypeReflection.Kind.array and arr.element_count == 4 and arr.size == 32


RAW = """
import "slangpy";
extern static const int VAL;
void mul_const(uint3 tid, RWTensor<uint3, 1> buffer) { buffer[tid.x] = tid * VAL; }
[shader("compute")]
[numthreads(32, 1, 1)]
void entry_const(uint3 tid : SV_DispatchThreadID, RWTensor<uint3, 1> buffer) { buffer[tid.x] = tid * VAL + 1; }
"""


def test_raw_dispatch_constants(device):
    mod = spy.Module.load_from_source(device, "apirawc", RAW)
    for val in (5, 7):
        buf = spy.NDBuffer(device, mod.uint3, 32)
        mod.mul_const.constants({"VAL": val}).dispatch(spy.uint3(32, 1, 1), buffer=buf)
        assert np.array_equal(buf.to_numpy()[:, 0], np.arange(32) * val) and not buf.to_numpy()[:, 1:].any()
        buf = spy.NDBuffer(device, mod.uint3, 32)
        mod.entry_const.constants({"VAL": val}).dispatch(spy.uint3(32, 1, 1), buffer=buf)
        assert np.array_equal(buf.to_numpy()[:, 0], np.arange(32) * val + 1)
