"""SlangPy's broadcasting and vectorisation rules, case by case (issue 16 item 5).

Each row of the tables below is a case of SlangPy's documentation (docs/src/basics/broadcasting.rst and
mapping.rst) or of its vectorisation tests (test_vectorizing.py, test_vector_function_call.py,
test_scalar_parameter_conversion.py), with the value numpy computes for it.  Where slangjit deliberately
differs, docs/slangpy-compat.md says so and the case here checks slangjit's behaviour.
"""
import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = r"""
import "slangpy";
float add(float a, float b) { return a + b; }
float3 add_vectors(float3 a, float3 b) { return a + b; }
float multiply(float a, float b) { return a * b; }
float copy(float val) { return val; }
void copy_generic<T>(T src, out T dest) { dest = src; }
float sum3(float3 v) { return v.x + v.y + v.z; }
float neg(float x) { return -x; }
float foo(float a) { return a; }
float intfoo(int a) { return a; }
T genericfoo<T>(T a) { return a; }
T genericconstrainedfoo<T : IFloat>(T a) { return a; }
float3 foo3(float3 a) { return a; }
void add_numbers(float2 a, float2 b, out float2 res) { res = a + b; }
struct Uniform { float x; }
int scalar_to_field_test(Uniform u) { return int(u.x); }
int scalar_to_parameter_test(float x) { return int(x); }
int array_test(Array<float, 5> x) { return int(x[0] + x[1] + x[2] + x[3] + x[4]); }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "slangpy_broadcast", SRC)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed + 7 * len(shape)).random(shape).astype(np.float32)


# --------------------------------------------------------------------------- broadcasting.rst: floats

# (shape of A, shape of B): Out = A + B, numpy's broadcasting (the call's shape is numpy's)
FLOAT_CASES = [
    ((10, 3, 4), (10, 3, 4)),     # all dimensions match
    ((10, 1, 4), (10, 3, 4)),     # A's extent-1 dimension is broadcast
    ((), (10, 3, 4)),             # a single value goes to every thread
    ((1, 1, 1), (10, 3, 4)),      # ... the same as extent-1 dimensions
    ((3, 4), (10, 3, 4)),         # dimensions are added on the left (strict_broadcasting off, the default)
    ((4,), (10, 3, 4)),
    ((10, 3, 1), (1, 3, 4)),      # both sides broadcast
]


@pytest.mark.parametrize("sa,sb", FLOAT_CASES)
def test_float_broadcasting(m, sa, sb):
    a = rnd(*sa) if sa else 2.5
    b = rnd(*sb, seed=1)
    r = m.add(a, b, _result="numpy")
    want = np.asarray(a) + b
    assert r.shape == want.shape
    np.testing.assert_allclose(r, want, rtol=1e-6)


@pytest.mark.parametrize("sa,sb", [((10, 3, 4), (5, 3, 4)), ((10, 5), (10, 10)), ((2,), (3,))])
def test_incompatible_shapes_are_an_error(m, sa, sb):
    with pytest.raises(ValueError, match="Shape mismatch"):
        m.add(rnd(*sa), rnd(*sb), _result="numpy")


def test_strict_broadcasting_refuses_added_dimensions(device):
    mod = spy.Module.load_from_source(device, "slangpy_broadcast_strict", SRC, options={"strict_broadcasting": True})
    with pytest.raises(ValueError, match="Strict broadcasting is enabled"):
        mod.add(rnd(3, 4), rnd(10, 3, 4), _result="numpy")
    # a single value is still broadcast
    np.testing.assert_allclose(mod.add(1.0, rnd(2, 3), _result="numpy"), 1.0 + rnd(2, 3), rtol=1e-6)


# --------------------------------------------------------------------------- broadcasting.rst: other types

def test_vectors_into_scalar_parameters_are_containers(m, device):
    """float add(float, float) over two float3 values: each is a 1-D container of shape (3,)."""
    r = m.add(spy.float3(1, 2, 3), spy.float3(4, 5, 6), _result="numpy")
    np.testing.assert_array_equal(r, [5, 7, 9])
    t = spy.Tensor.empty(device, shape=(3,), dtype=float)
    m.add(spy.float3(1, 2, 3), spy.float3(4, 5, 6), _result=t)
    np.testing.assert_array_equal(t.to_numpy(), [5, 7, 9])
    # the same with a vector and a scalar, and with distinct values in each lane
    np.testing.assert_array_equal(m.add(spy.float3(1, 2, 3), 10.0, _result="numpy"), [11, 12, 13])
    np.testing.assert_array_equal(m.multiply(spy.float4(1, 2, 3, 4), spy.float4(5, 6, 7, 8), _result="numpy"),
                                  [5, 12, 21, 32])


def test_vectors_into_vector_parameters_are_single_values(m):
    r = m.add_vectors(spy.float3(1, 2, 3), spy.float3(4, 5, 6))
    assert isinstance(r, spy.float3) and list(r) == [5, 7, 9]


def test_vector_meets_array_of_vectors(m):
    b = rnd(10, 3)
    # float3 parameters: the array's last dimension is consumed, the call is (10,), `a` goes to every thread
    r = m.add_vectors(spy.float3(1, 2, 3), b, _result="numpy")
    assert r.shape == (10, 3)
    np.testing.assert_allclose(r, b + [1, 2, 3], rtol=1e-6)
    # float parameters: a is (3,) and b (10, 3); a is extended on the left (docs/slangpy-compat.md)
    r = m.add(spy.float3(1, 2, 3), b, _result="numpy")
    np.testing.assert_allclose(r, b + [1, 2, 3], rtol=1e-6)


def test_matrix_values(m):
    mat = spy.float2x3([[1, 2, 3], [4, 5, 6]])
    # over a float3 parameter: one thread per row
    np.testing.assert_allclose(m.sum3(mat, _result="numpy"), [6, 15])
    # over a float parameter: one thread per element
    np.testing.assert_allclose(m.neg(mat, _result="numpy"), -np.array([[1, 2, 3], [4, 5, 6]]))


def test_lists_over_scalar_parameters(m):
    np.testing.assert_allclose(m.neg([1.0, 2.0, 3.0], _result="numpy"), [-1, -2, -3])
    np.testing.assert_allclose(m.add([1.0, 2.0], [[10.0, 20.0], [30.0, 40.0]], _result="numpy"),
                               [[11, 22], [31, 42]])


def test_array_dimensions_consumed_by_vector_parameters(m, device):
    a = rnd(10, 3)
    np.testing.assert_allclose(m.sum3(a, _result="numpy"), a.sum(1), rtol=1e-5)
    t = spy.Tensor.from_numpy(device, a)
    r = m.foo3(t)
    assert r.shape == (10,) and r.dtype.name == "float3"
    np.testing.assert_allclose(r.to_numpy().reshape(10, 3), a, rtol=1e-6)


# --------------------------------------------------------------------------- mapping.rst

def test_map_identity(m):
    a, b = rnd(10, 3, 4), rnd(10, 3, 4, seed=1)
    np.testing.assert_allclose(m.add.map((0, 1, 2), (0, 1, 2))(a, b, _result="numpy"), a + b, rtol=1e-6)
    np.testing.assert_allclose(m.add.map(a=(0, 1, 2), b=(0, 1, 2))(a=a, b=b, _result="numpy"), a + b, rtol=1e-6)


def test_map_pads_smaller_arguments(m):
    a, b = rnd(8, 8), rnd(8, seed=3)
    np.testing.assert_allclose(m.add.map(a=(0, 1), b=(1,))(a=a, b=b, _result="numpy"), a + b, rtol=1e-6)
    np.testing.assert_allclose(m.add.map(b=(1,))(a=a, b=b, _result="numpy"), a + b, rtol=1e-6)
    # b along the first dimension instead: numpy's a + b[:, None]
    np.testing.assert_allclose(m.add.map(b=(0,))(a=a, b=b, _result="numpy"), a + b[:, None], rtol=1e-6)


def test_map_outer_product(m):
    a, b = rnd(10), rnd(20, seed=5)
    r = m.multiply.map(a=(0,), b=(1,))(a=a, b=b, _result="numpy")
    assert r.shape == (10, 20)
    np.testing.assert_allclose(r, np.outer(a, b), rtol=1e-6)


def test_map_transpose(m):
    a = rnd(10, 20)
    r = m.copy.map(val=(1, 0))(val=a, _result="numpy")
    assert r.shape == (20, 10)
    np.testing.assert_array_equal(r, a.T)


def test_map_resolves_generic_by_dimensions(m):
    src = rnd(100)
    dest = np.zeros_like(src)
    m.copy_generic.map(src=(0,), dest=(0,))(src=src, dest=dest)
    np.testing.assert_array_equal(dest, src)


def test_map_resolves_generic_by_type(m):
    src = np.random.default_rng(3).random(100)         # float64, as the documentation's example
    dest = np.zeros_like(src)
    m.copy_generic.map(src="float", dest="float")(src=src, dest=dest)
    np.testing.assert_allclose(dest, src.astype(np.float32), rtol=0, atol=0)


def test_generic_container_without_map_is_ambiguous(m):
    with pytest.raises(ValueError):
        m.copy_generic(src=rnd(10), dest=np.zeros(10, np.float32))


# --------------------------------------------------------------------------- test_vectorizing.py

@pytest.mark.parametrize("fn,mapping,arg,vtype,rtype", [
    ("foo", "none", 10.0, "float", "float"),
    ("foo", (), 10.0, "float", "float"),
    ("foo", "float", 10.0, "float", "float"),
    ("intfoo", "none", 10.0, "float", "float"),          # the value's own type; the kernel converts it to int
    ("genericfoo", "none", 10.0, "float", "float"),
    ("genericconstrainedfoo", "none", 10.0, "float", "float"),
])
def test_no_vectorization(m, fn, mapping, arg, vtype, rtype):
    f = getattr(m, fn)
    if mapping != "none":
        f = f.map(mapping)
    b = f.debug_build_call_data(arg).debug_only_bindings
    assert b.args[0].vector_mapping.as_tuple() == ()
    assert b.args[0].vector_type.name == vtype
    assert b.kwargs["_result"].vector_mapping.as_tuple() == ()
    assert b.kwargs["_result"].vector_type.name == rtype


@pytest.mark.parametrize("fn,mapping", [
    ("foo", "none"),
    ("intfoo", (0,)),              # explicit: the float elements are read as float and converted by the call
    ("intfoo", float),
    ("genericfoo", (0,)),
    ("genericconstrainedfoo", (0,)),
    ("genericconstrainedfoo", "float"),
])
def test_1d_vectorization(m, device, fn, mapping):
    data = np.arange(10, dtype=np.float32) * 1.5
    buf = spy.Tensor.from_numpy(device, data)
    f = getattr(m, fn)
    if mapping != "none":
        f = f.map(mapping)
    b = f.debug_build_call_data(buf).debug_only_bindings
    assert b.args[0].vector_mapping.as_tuple() == (0,)
    assert b.args[0].vector_type.name == "float"
    assert b.kwargs["_result"].vector_mapping.as_tuple() == (0,)
    assert b.kwargs["_result"].vector_type.name == "float"
    want = np.trunc(data) if fn == "intfoo" else data
    np.testing.assert_array_equal(f(buf).to_numpy(), want)


@pytest.mark.parametrize("fn,arg", [
    ("intfoo", "floatbuf"),                    # float elements into int: only with an explicit map
    ("genericconstrainedfoo", "floatbuf"),     # a generic element type needs a map
    ("genericconstrainedfoo", "int3"),         # int3 is not IFloat
])
def test_vectorization_failures(m, device, fn, arg):
    v = spy.Tensor.from_numpy(device, np.zeros(10, np.float32)) if arg == "floatbuf" else spy.int3(1, 1, 1)
    with pytest.raises(ValueError):
        getattr(m, fn)(v)


def test_implicit_tensor_to_vector(m, device):
    buf = spy.Tensor.empty(device, shape=(10, 3), dtype=float)
    b = m.foo3.debug_build_call_data(buf).debug_only_bindings
    assert b.args[0].vector_mapping.as_tuple() == (0,)
    assert b.args[0].vector_type.full_name == "vector<float,3>"
    assert b.kwargs["_result"].vector_mapping.as_tuple() == (0,)
    assert b.kwargs["_result"].vector_type.full_name == "vector<float,3>"


def test_implicit_dimension_adding(m, device):
    a = spy.Tensor.empty(device, shape=(10, 10), dtype=float)
    b = spy.Tensor.empty(device, shape=(10,), dtype=float)
    bb = m.add.debug_build_call_data(a, b).debug_only_bindings
    assert bb.args[0].vector_mapping.as_tuple() == (0, 1)
    assert bb.args[1].vector_mapping.as_tuple() == (1,)
    assert bb.kwargs["_result"].vector_mapping.as_tuple() == (0, 1)
    strict = spy.Module.load_from_source(device, "slangpy_broadcast_strict2", SRC,
                                         options={"strict_broadcasting": True})
    with pytest.raises(ValueError):
        strict.add.debug_build_call_data(a, b)


# --------------------------------------------------------------------------- test_vector_function_call.py

def test_vector_broadcast_against_tensor_of_vectors(m, device):
    rng = np.random.default_rng(11)
    a_data = rng.random(2).astype(np.float32)
    b_data = rng.random((100, 2)).astype(np.float32)
    b = spy.Tensor.empty(device, shape=(100,), dtype=spy.float2)
    b.copy_from_numpy(b_data)
    res = spy.Tensor.empty(device, shape=(100,), dtype=spy.float2)
    m.add_numbers(spy.float2(*a_data), b, res)
    np.testing.assert_allclose(res.to_numpy().reshape(-1, 2), a_data + b_data, rtol=1e-6)


def test_float_tensor_against_vector_parameter(m, device):
    rng = np.random.default_rng(12)
    a_data = rng.random((100, 2)).astype(np.float32)
    b_data = rng.random((100, 2)).astype(np.float32)
    a = spy.Tensor.from_numpy(device, a_data)                    # float, shape (100, 2)
    b = spy.Tensor.empty(device, shape=(100,), dtype=spy.float2)
    b.copy_from_numpy(b_data)
    for res in (spy.Tensor.empty(device, shape=(100,), dtype=spy.float2),
                spy.Tensor.empty(device, shape=(100, 2), dtype=float)):
        m.add_numbers(a, b, res)
        np.testing.assert_allclose(res.to_numpy().reshape(-1, 2), a_data + b_data, rtol=1e-6)


# --------------------------------------------------------------------------- test_scalar_parameter_conversion.py

def test_scalar_conversions(m):
    assert m.scalar_to_field_test({"x": 512}) == 512
    assert m.scalar_to_parameter_test(512) == 512
    assert m.array_test([1, 2, 3, 4, 5]) == 15


# --------------------------------------------------------------------------- _result shapes

def test_result_shapes(m, device):
    a, b = rnd(10, 3, 4), rnd(3, 4, seed=2)
    t = m.add(a, b, _result="tensor")
    assert isinstance(t, spy.Tensor) and t.shape == (10, 3, 4)
    np.testing.assert_allclose(t.to_numpy(), a + b, rtol=1e-6)
    pre = spy.Tensor.empty(device, shape=(10, 3, 4), dtype=float)
    assert m.add(a, b, _result=pre) is pre
    np.testing.assert_allclose(pre.to_numpy(), a + b, rtol=1e-6)
    out = np.zeros((10, 3, 4), np.float32)
    m.add(a, b, _result=out)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    # a single call returns a value, not a container
    assert m.add(1.0, 2.0) == 3.0
    assert np.asarray(m.add(1.0, 2.0, _result="numpy")) == 3.0


def test_result_of_the_wrong_shape_is_an_error(m, device):
    a, b = rnd(10, 3, 4), rnd(10, 3, 4)
    with pytest.raises(ValueError, match="Shape mismatch"):
        m.add(a, b, _result=spy.Tensor.empty(device, shape=(10, 3, 5), dtype=float))


# --------------------------------------------------------------------------- test_shapes.py: call shapes per argument

DOT_SRC = "float add_numbers(float3 a, float3 b) { return dot(a, b); }"


@pytest.fixture(scope="module")
def mdot(device):
    return spy.Module.load_from_source(device, "slangpy_broadcast_dot", DOT_SRC)


def _shapes(mdot, a, b, result, transforms=None):
    f = mdot.add_numbers
    if transforms is not None:
        f = f.map(**transforms)
    cd = f.debug_build_call_data(a=a, b=b, _result=result)
    cd.call(None, a=a, b=b, _result=result)
    nodes = []
    for node in cd.debug_only_bindings.kwargs.values():
        node.get_input_list(nodes)
    return {"call_shape": list(cd.last_call_shape), "node_call_dims": [x.call_dimensionality for x in nodes],
            "node_transforms": [list(x.vector_mapping) for x in nodes]}


def _fbuf(device, *shape):
    return spy.Tensor.empty(device, shape=shape, dtype=float)


@pytest.mark.parametrize("case", ["scalar", "scalar_ref", "broadcast_a", "broadcast_b", "broadcast_b_from_buffer",
                                  "broadcast_result", "big", "input_transform", "output_transform"])
def test_call_shapes(mdot, device, case):
    f3 = spy.float3
    a, b, r, tf, want = {
        "scalar": (f3(), f3(), None, None, ([], [0, 0, 0], [[], [], []])),
        "scalar_ref": (f3(), f3(), spy.floatRef(), None, ([], [0, 0, 0], [[], [], []])),
        "broadcast_a": (f3(), _fbuf(device, 100, 3), None, None, ([100], [0, 1, 1], [[], [0], [0]])),
        "broadcast_b": (_fbuf(device, 100, 3), f3(), None, None, ([100], [1, 0, 1], [[0], [], [0]])),
        "broadcast_b_from_buffer": (_fbuf(device, 100, 3), _fbuf(device, 1, 3), None, None,
                                    ([100], [1, 1, 1], [[0], [0], [0]])),
        "broadcast_result": (_fbuf(device, 100, 3), _fbuf(device, 3), spy.ValueRef(0.0), None,
                             ([100], [1, 0, 0], [[0], [], []])),
        "big": (_fbuf(device, 8, 1, 2, 3), _fbuf(device, 8, 4, 2, 3), _fbuf(device, 8, 4, 2), None,
                ([8, 4, 2], [3, 3, 3], [[0, 1, 2], [0, 1, 2], [0, 1, 2]])),
        "input_transform": (_fbuf(device, 8, 1, 2, 3), _fbuf(device, 4, 8, 2, 3), None, {"b": (1, 0, 2)},
                            ([8, 4, 2], [3, 3, 3], [[0, 1, 2], [1, 0, 2], [0, 1, 2]])),
        "output_transform": (_fbuf(device, 10, 3), _fbuf(device, 5, 3), None, {"a": (0,), "b": (1,)},
                             ([10, 5], [1, 2, 2], [[0], [1], [0, 1]])),
    }[case]
    got = _shapes(mdot, a, b, r, tf)
    assert got == {"call_shape": want[0], "node_call_dims": want[1], "node_transforms": want[2]}


@pytest.mark.parametrize("sa,sb,sr", [((100, 3), (1000, 3), None), ((100, 3), (3,), (3,))])
def test_call_shape_errors(mdot, device, sa, sb, sr):
    with pytest.raises(ValueError):
        _shapes(mdot, _fbuf(device, *sa), _fbuf(device, *sb), _fbuf(device, *sr) if sr else None)


def test_call_shape_values(mdot, device):
    rng = np.random.default_rng(5)
    a, b = rng.random((10, 3)).astype(np.float32), rng.random((5, 3)).astype(np.float32)
    r = mdot.add_numbers.map(a=(0,), b=(1,))(a=a, b=b, _result="numpy")
    np.testing.assert_allclose(r, a @ b.T, rtol=1e-5)


def test_implicit_cast_options(device):
    buf = spy.Tensor.from_numpy(device, np.arange(10, dtype=np.float32))
    no_elem = spy.Module.load_from_source(device, "slangpy_broadcast_noelem", SRC,
                                          options={"implicit_element_casts": False})
    with pytest.raises(ValueError):
        no_elem.foo(buf)
    np.testing.assert_array_equal(no_elem.foo.map((0,))(buf).to_numpy(), np.arange(10))
    no_tensor = spy.Module.load_from_source(device, "slangpy_broadcast_notensor", SRC,
                                            options={"implicit_tensor_casts": False})
    with pytest.raises(ValueError):
        no_tensor.foo3(spy.Tensor.from_numpy(device, np.ones((10, 3), np.float32)))
    np.testing.assert_array_equal(no_tensor.foo(buf).to_numpy(), np.arange(10))


# --------------------------------------------------------------------------- nested.rst: dicts for vectors / structs

NESTED_SRC = r"""
void copy(float4 src, out float4 dest) { dest = src; }
void copy_vector<let N : int>(vector<float, N> src, out vector<float, N> dest) { dest = src; }
void copy_generic<T>(T src, out T dest) { dest = src; }
"""


@pytest.mark.parametrize("how", ["plain", "specialised", "_type", "map"])
def test_nested_dict_sources(device, how):
    m = spy.Module.load_from_source(device, "slangpy_broadcast_nested", NESTED_SRC)
    src = {"x": 1.0, "y": spy.rand_float(min=0, max=1, dim=1), "z": 0.0, "w": 1.0}
    dest = spy.Tensor.zeros(device, shape=(64,), dtype=spy.float4)
    if how == "plain":
        m.copy(src=src, dest=dest)
    elif how == "specialised":
        m.require_function("copy_vector<4>")(src=src, dest=dest)
    elif how == "_type":
        m.copy_vector(src=dict(src, _type="float4"), dest=dest)
    else:
        m.copy_generic.map(src="float4", dest="float4")(src=src, dest=dest)
    a = dest.to_numpy().reshape(-1, 4)
    np.testing.assert_array_equal(a[:, 0], 1)
    np.testing.assert_array_equal(a[:, 2], 0)
    np.testing.assert_array_equal(a[:, 3], 1)
    assert np.all((a[:, 1] >= 0) & (a[:, 1] <= 1)) and len(np.unique(a[:, 1])) > 32     # one random value per thread


def test_nested_numpy_source(device):
    m = spy.Module.load_from_source(device, "slangpy_broadcast_nested", NESTED_SRC)
    src = np.random.default_rng(2).random((16, 16, 4)).astype(np.float32)
    dest = spy.Tensor.zeros(device, shape=(16, 16), dtype=spy.float4)
    m.copy(src=src, dest=dest)
    np.testing.assert_array_equal(dest.to_numpy().reshape(16, 16, 4), src)
