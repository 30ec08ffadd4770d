"""Functional API §1.5-1.6: dimensionality, right-aligned broadcasting, shape errors, strict broadcasting."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
float add(float a, float b) { return a + b; }
float add3(float a, float b, float c) { return a + b + c; }
float dot3(float3 a, float3 b) { return dot(a, b); }
float3 add_v(float3 a, float3 b) { return a + b; }
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "bc", SRC)


def rnd(*shape):
    return np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("sa,sb", [((10, 3, 4), (10, 3, 4)), ((10, 1, 4), (10, 3, 4)), ((3, 4), (10, 3, 4)),
                                   ((4,), (10, 3, 4)), ((1,), (5,)), ((10, 3, 1), (1, 3, 4))])
def test_broadcast_matches_numpy(m, sa, sb):
    a, b = rnd(*sa), rnd(*sb)
    r = m.add(a, b, _result="numpy")
    np.testing.assert_allclose(r, a + b, rtol=1e-6)


def test_tensor_broadcast_result_shape(m):
    a = spy.Tensor.from_numpy(m.device, rnd(3, 4))
    b = spy.Tensor.from_numpy(m.device, rnd(10, 3, 4))
    r = m.add(a, b)
    assert isinstance(r, spy.Tensor) and r.shape == (10, 3, 4)
    np.testing.assert_allclose(r.to_numpy(), a.to_numpy() + b.to_numpy(), rtol=1e-6)


def test_scalar_broadcasts(m):
    a = rnd(7)
    np.testing.assert_allclose(m.add(a, 2.0, _result="numpy"), a + 2.0, rtol=1e-6)


def test_float3_value_broadcasts_over_vector_rows(m):
    t = rnd(10, 3)
    r = m.add(spy.float3(1, 2, 3), t, _result="numpy")
    np.testing.assert_allclose(r, t + np.array([1, 2, 3], np.float32), rtol=1e-6)


def test_dot3_dimensionality(m):
    t = rnd(100, 3)
    r = m.dot3(t, spy.float3(1, 2, 3), _result="numpy")
    assert r.shape == (100,)
    np.testing.assert_allclose(r, t @ np.array([1, 2, 3], np.float32), rtol=1e-5)


def test_vector_result_shape(m):
    t = spy.Tensor.from_numpy(m.device, rnd(100, 3))
    r = m.add_v(t, spy.float3(0, 0, 0))
    assert r.shape == (100,) and r.dtype.name == "float3"
    assert r.to_numpy().shape == (100, 3)


def test_three_way_broadcast(m):
    a, b, c = rnd(4, 1, 1), rnd(5, 1), rnd(6)
    np.testing.assert_allclose(m.add3(a, b, c, _result="numpy"), a + b + c, rtol=1e-6)


def test_shape_mismatch_error(m):
    with pytest.raises(ValueError) as e:
        m.add(np.zeros((10, 3, 4), np.float32), np.zeros((5, 3, 4), np.float32))
    assert str(e.value) == ("Shape mismatch for b between value (5) and call (10)\nThis is typically caused when "
                            "attempting to combine containers with the same dimensionality but different sizes.")


def test_result_shape_mismatch(m):
    with pytest.raises(ValueError, match=r"Shape mismatch for _result between value \(6\) and call \(5\)"):
        m.add(np.zeros(5, np.float32), 1.0, _result=np.zeros(6, np.float32))


def test_scalar_call_returns_python_value(m):
    r = m.add(1.0, 2.0)
    assert r == 3.0 and isinstance(r, float)


def test_strict_broadcasting(device):
    mod = spy.Module.load_from_source(device, "bcs", SRC, options={"strict_broadcasting": True})
    with pytest.raises(ValueError, match="Strict broadcasting is enabled"):
        mod.add(np.zeros((3, 4), np.float32), np.zeros(4, np.float32))
    # 0-dim values still broadcast; explicit maps are allowed
    np.testing.assert_array_equal(mod.add(np.ones((2, 2), np.float32), 1.0, _result="numpy"), 2 * np.ones((2, 2)))
    r = mod.add.map(b=(1,))(a=np.zeros((2, 3), np.float32), b=np.arange(3, dtype=np.float32), _result="numpy")
    np.testing.assert_array_equal(r, np.broadcast_to(np.arange(3), (2, 3)))


def test_zero_size_dispatch(m):
    r = m.add(np.zeros(0, np.float32), 1.0, _result="numpy")
    assert r.shape == (0,)
