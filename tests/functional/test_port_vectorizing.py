"""Behavioural port of SlangPy's test_vectorizing.py: which mapping (call dimensions) and vector type each
argument and the result get, explicit `.map` by dimensions and by type, implicit element / tensor casts and
their options, strict broadcasting, and a scalar function vectorised over vector arguments."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, float3, int3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
float ident(float a) { return a; }
float from_int(int a) { return a; }
T gen<T>(T a) { return a; }
T gen_float<T : IFloat>(T a) { return a; }
float3 ident3(float3 a) { return a; }
float add(float a, float b) { return a + b; }
"""


def _mod(device, name, **options):
    return spy.Module.load_from_source(device, name, SRC, options=options or None)


@pytest.fixture(scope="module")
def m(device):
    return _mod(device, "port_vec")


def _check(binding, mapping, type_name, full=False):
    assert binding.vector_mapping.as_tuple() == mapping
    assert binding.vector_type is not None
    assert (binding.vector_type.full_name if full else binding.vector_type.name) == type_name


def _buf(device, *shape):
    return NDBuffer(device=device, dtype=float, shape=shape)


@pytest.mark.parametrize("how", ["map_dims", "map_type", "implicit"])
def test_scalar_no_vectorization(m, how):
    f = {"map_dims": m.ident.map(()), "map_type": m.ident.map("float"), "implicit": m.ident}[how]
    _check(f.debug_build_call_data(10.0).debug_only_bindings.args[0], (), "float")


def test_implicit_cast_no_vectorization(m):
    # the binding reports the Python value's type; the kernel converts it (SlangPy's current test_vectorizing.py)
    _check(m.from_int.debug_build_call_data(10.0).debug_only_bindings.args[0], (), "float")


@pytest.mark.parametrize("fn", ["gen", "gen_float"])
def test_generic_no_vectorization(m, fn):
    b = getattr(m, fn).debug_build_call_data(10.0).debug_only_bindings
    _check(b.args[0], (), "float")
    _check(b.kwargs["_result"], (), "float")


def test_generic_constrained_fail_no_vectorization(m):
    with pytest.raises(Exception):
        m.gen_float.debug_build_call_data(int3(1, 1, 1))


def test_implicit_1d_vectorization(device, m):
    b = m.ident.debug_build_call_data(_buf(device, 10)).debug_only_bindings
    _check(b.args[0], (0,), "float")
    _check(b.kwargs["_result"], (0,), "float")


def test_fail_disabled_implicit_1d_vectorization(device):
    with pytest.raises(ValueError):
        _mod(device, "port_vec_noelem", implicit_element_casts=False).ident.debug_build_call_data(_buf(device, 10))


def test_fail_implicit_float_to_int_1d_vectorization(device, m):
    with pytest.raises(ValueError):
        m.from_int.debug_build_call_data(_buf(device, 10))


@pytest.mark.parametrize("fn,mapping", [("from_int", (0,)), ("from_int", float), ("gen", (0,)),
                                        ("gen_float", (0,)), ("gen_float", "float")])
def test_explicit_1d_vectorization(device, m, fn, mapping):
    b = getattr(m, fn).map(mapping).debug_build_call_data(_buf(device, 10)).debug_only_bindings
    _check(b.args[0], (0,), "float")
    _check(b.kwargs["_result"], (0,), "float")


def test_explicit_map_float_to_int_values(device, m):
    src = NDBuffer.from_numpy(device, np.array([1.0, 2.75, -3.5], np.float32))
    np.testing.assert_array_equal(m.from_int.map((0,))(src, _result="numpy"), [1.0, 2.0, -3.0])


def test_genericconstrained_1d_fail_implicit_vectorization(device, m):
    with pytest.raises(Exception):
        m.gen_float.debug_build_call_data(_buf(device, 10))


def test_implicit_tensor_to_vector(device, m):
    b = m.ident3.debug_build_call_data(_buf(device, 10, 3)).debug_only_bindings
    _check(b.args[0], (0,), "vector<float,3>", full=True)
    _check(b.kwargs["_result"], (0,), "vector<float,3>", full=True)


def test_fail_disabled_implicit_tensor_to_vector(device):
    with pytest.raises(ValueError):
        _mod(device, "port_vec_notensor", implicit_tensor_casts=False).ident3.debug_build_call_data(_buf(device, 10, 3))


def test_fail_implicit_dimension_adding_vectorization(device):
    f = _mod(device, "port_vec_strict", strict_broadcasting=True).add
    with pytest.raises(Exception):
        f.debug_build_call_data(_buf(device, 10, 10), _buf(device, 10))


def test_none_strict_implicit_dimension_adding_vectorization(device, m):
    b = m.add.debug_build_call_data(_buf(device, 10, 10), _buf(device, 10)).debug_only_bindings
    _check(b.args[0], (0, 1), "float")
    _check(b.args[1], (1,), "float")
    _check(b.kwargs["_result"], (0, 1), "float")


def test_none_strict_values(device, m):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([10.0, 20.0, 30.0], np.float32)
    r = m.add(NDBuffer.from_numpy(device, a), NDBuffer.from_numpy(device, b), _result="numpy")
    np.testing.assert_array_equal(r, a + b)


def test_broadcast_vector(device, m):
    res = NDBuffer(device=device, dtype=float, shape=(3,))
    m.add(float3(1, 2, 3), float3(4, 5, 6), _result=res)
    np.testing.assert_array_equal(res.to_numpy().view(np.float32), [5, 7, 9])
