"""Gaps found by running SlangPy's own functional tests unchanged against slangjit (scripts/slangpy_literal.py):
each test here checks the behaviour that run needed, in our own words, against numpy / analytic values."""
import math

import numpy as np
import pytest

import slangjit as spy

# tests taking `device` run on the CPU and, on a GPU machine, on CUDA (skipped without one)
on_devices = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


# ---- spy.math: vector helpers on Python-side vectors (SlangPy programs compute expected values with them)

def test_math_length_normalize_dot_cross_match_numpy():
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = rng.normal(size=3), rng.normal(size=3)
        va, vb = spy.float3(*a), spy.float3(*b)
        assert spy.math.length(va) == pytest.approx(np.linalg.norm(a), rel=1e-6)
        assert spy.math.dot(va, vb) == pytest.approx(float(np.float32(a).astype(np.float64) @ np.float32(b)), rel=1e-6)
        n = spy.math.normalize(va)
        assert isinstance(n, spy.float3)
        np.testing.assert_allclose(n.to_numpy(), np.float32(a) / np.linalg.norm(np.float32(a)), rtol=1e-6)
        np.testing.assert_allclose(spy.math.cross(va, vb).to_numpy(), np.cross(np.float32(a), np.float32(b)),
                                   rtol=1e-5, atol=1e-6)
        assert spy.math.distance(va, vb) == pytest.approx(np.linalg.norm(np.float32(a) - np.float32(b)), rel=1e-6)


def test_math_elementwise_and_errors():
    v = spy.float2(-3.0, 4.0)
    assert spy.math.abs(v) == spy.float2(3.0, 4.0)
    assert spy.math.max(v, 0.0) == spy.float2(0.0, 4.0)
    assert spy.math.min(v, spy.float2(0.0, 0.0)) == spy.float2(-3.0, 0.0)
    assert spy.math.clamp(v, -1.0, 1.0) == spy.float2(-1.0, 1.0)
    np.testing.assert_allclose(spy.math.lerp(spy.float2(0, 0), spy.float2(2, 4), 0.25).to_numpy(), [0.5, 1.0])
    assert spy.math.length(spy.float2(3, 4)) == 5.0
    assert spy.math.sqrt(4.0) == 2.0 and math.isclose(spy.math.sqrt(spy.float2(4, 9)).y, 3.0)
    with pytest.raises(ValueError, match="length 0"):
        spy.math.normalize(spy.float2(0, 0))
    with pytest.raises(ValueError, match="3-component"):
        spy.math.cross(spy.float2(1, 0), spy.float2(0, 1))
    with pytest.raises(TypeError, match="vector"):
        spy.math.length([1.0, 2.0])


# ---- a vector compared with a scalar compares every component (as the arithmetic operators broadcast)

def test_vector_equals_scalar_componentwise():
    assert spy.float2(10, 10) == 10
    assert not (spy.float2(10, 9) == 10)
    assert spy.float2(10, 9) != 10
    assert spy.int3(2, 2, 2) == 2
    assert spy.float3(1, 2, 3) == spy.float3(1, 2, 3)
    assert spy.float3(1, 2, 3) != spy.float3(1, 2, 4)
    assert spy.float3(1, 2, 3) == [1, 2, 3]


# ---- Shape takes its dimensions as arguments too (SlangPy's Shape(4096, 4096, 8))

def test_shape_from_dimension_arguments():
    assert spy.Shape(4, 5, 6) == (4, 5, 6)
    assert spy.Shape(4, 5, 6) == spy.Shape((4, 5, 6))
    assert spy.Shape(7).as_tuple() == (7,)
    assert spy.Shape().as_tuple() == ()
    assert not spy.Shape(None).valid


@on_devices
def test_tensor_view_with_shape_of_arguments(device):
    data = np.arange(24, dtype=np.float32)
    t = spy.Tensor.from_numpy(device, data)
    v = t.view(shape=spy.Shape(2, 3, 4))
    assert v.shape == (2, 3, 4)
    np.testing.assert_array_equal(v.to_numpy(), data.reshape(2, 3, 4))


# ---- debug_only_bindings: a Python value reports its own type (the kernel converts it to the parameter's)

@on_devices
def test_debug_binding_reports_python_value_type(device):
    m = spy.Module(device.load_module_from_source(
        "lit_dbg", "float intfoo(int a) { return a; }\nfloat foo(float a) { return a; }"))
    b = m.intfoo.debug_build_call_data(10.0).debug_only_bindings.args[0]
    assert b.vector_type.name == "float" and b.vector_mapping.as_tuple() == ()
    b = m.intfoo.debug_build_call_data(10).debug_only_bindings.args[0]
    assert b.vector_type.name == "int"
    assert m.foo.debug_build_call_data(2.5).debug_only_bindings.args[0].vector_type.name == "float"
    # and the value is still converted to the parameter's type by the call
    assert m.intfoo(7.9) == 7.0


# ---- SlangModule.layout and slangjit.core.utils.find_type_layout_for_buffer

@on_devices
def test_device_module_layout_and_buffer_type_lookup(device):
    from slangjit.core.utils import find_type_layout_for_buffer
    src = """
struct P { float2 pos; float2 vel; }
float2[2] ends(P p) { return { p.pos, p.pos + p.vel }; }
"""
    dm = device.load_module_from_source("lit_layout", src)
    lay = dm.layout
    assert dm.layout is lay                       # built once
    assert lay.find_struct_by_name("P") is not None
    t = find_type_layout_for_buffer(lay, "float2[2]")
    res = spy.NDBuffer(device, t, 3)
    m = spy.Module(dm)
    pos = np.array([[0, 1], [2, 3], [4, 5]], np.float32)
    vel = np.array([[1, 1], [-1, 0], [0.5, 2]], np.float32)
    m.ends({"pos": pos, "vel": vel}, _result=res)
    got = res.storage.to_numpy().view(np.float32).reshape(3, 2, 2)
    np.testing.assert_allclose(got[:, 0], pos)
    np.testing.assert_allclose(got[:, 1], pos + vel)
    with pytest.raises(ValueError, match="no type named 'Nope'"):
        find_type_layout_for_buffer(lay, "Nope")
    with pytest.raises(TypeError, match="module layout"):
        find_type_layout_for_buffer(object(), "P")


# ---- from_numpy(..., shape=): the elements laid out in the given shape

@on_devices
def test_from_numpy_with_shape(device):
    data = np.arange(12, dtype=np.float32)
    t = spy.Tensor.from_numpy(device, data, shape=(3, 4))
    assert t.shape == (3, 4)
    np.testing.assert_array_equal(t.to_numpy(), data.reshape(3, 4))
    b = spy.NDBuffer.from_numpy(device, data, shape=(2, 6))
    assert isinstance(b, spy.NDBuffer) and b.shape == (2, 6)
    np.testing.assert_array_equal(b.to_numpy(), data.reshape(2, 6))
    pt = np.dtype([("x", np.float32), ("y", np.float32)])
    m = spy.Module(device.load_module_from_source("lit_fromnp", "struct P2 { float x; float y; }\n"
                                                                "float sum(P2 p) { return p.x + p.y; }"))
    s = np.zeros(4, dtype=pt)
    s["x"], s["y"] = [1, 2, 3, 4], [10, 20, 30, 40]
    sb = spy.NDBuffer.from_numpy(device, s, dtype=m.P2, shape=(4,))
    np.testing.assert_allclose(m.sum(sb, _result="numpy"), [11, 22, 33, 44])
    with pytest.raises(ValueError, match=r"shape=\(5,\) holds 5 elements, the array 12"):
        spy.Tensor.from_numpy(device, data, shape=(5,))
