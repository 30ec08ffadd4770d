"""Functional API §1.7: return values, `_result`, `.return_type(...)`."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
float add(float a, float b) { return a + b; }
float3 vec(float a) { return float3(a, a * 2, a * 3); }
int3 ivec(int a) { return int3(a, a + 1, a + 2); }
float2x2 mat(float a) { return float2x2(a, 0, 0, a); }
struct P { float x; int y; };
P mk(float a) { P p; p.x = a; p.y = 7; return p; }
void nothing(float a) {}
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "rt", SRC)


def test_scalar_values(m):
    assert m.add(1.0, 2.0) == 3.0
    assert m.vec(1.0) == spy.float3(1, 2, 3)
    assert m.ivec(1) == spy.int3(1, 2, 3)
    assert isinstance(m.mat(2.0), spy.float2x2)
    assert m.mk(1.5) == {"x": 1.5, "y": 7}


def test_void_returns_none(m):
    assert m.nothing(1.0) is None
    assert m.nothing(np.zeros(3, np.float32)) is None


def test_vectorised_returns_tensor(m):
    a = np.arange(5, dtype=np.float32)
    r = m.add(a, 1.0)
    assert isinstance(r, spy.Tensor) and r.shape == (5,) and r.dtype.name == "float"
    np.testing.assert_array_equal(r.to_numpy(), a + 1)


def test_result_numpy(m):
    a = np.arange(5, dtype=np.float32)
    for how in ("numpy", np.ndarray):
        r = m.add(a, 1.0, _result=how)
        assert isinstance(r, np.ndarray)
        np.testing.assert_array_equal(r, a + 1)
    r = m.vec(a, _result="numpy")
    assert r.shape == (5, 3)
    np.testing.assert_array_equal(r[:, 1], 2 * a)
    assert m.ivec(np.arange(3, dtype=np.int32), _result="numpy").dtype == np.int32


def test_result_tensor(m):
    a = np.arange(5, dtype=np.float32)
    for how in ("tensor", spy.Tensor):
        r = m.add(a, 1.0, _result=how)
        assert isinstance(r, spy.Tensor)
    r = m.add.return_type(spy.Tensor)(a, 2.0)
    np.testing.assert_array_equal(r.to_numpy(), a + 2)
    r = m.add.return_type("numpy")(a, 3.0)
    np.testing.assert_array_equal(r, a + 3)


def test_preallocated_tensor(m):
    a = np.arange(4, dtype=np.float32)
    out = spy.Tensor.empty(m.device, (4,), float)
    r = m.add(a, 1.0, _result=out)
    assert r is out
    np.testing.assert_array_equal(out.to_numpy(), a + 1)
    out2 = spy.Tensor(m.device, element_type=m.float, shape=(4,))
    m.add(a, 2.0, _result=out2)
    np.testing.assert_array_equal(out2.to_numpy(), a + 2)


def test_preallocated_numpy(m):
    out = np.zeros((2, 3), np.float32)
    r = m.add(np.ones((2, 3), np.float32), 4.0, _result=out)
    assert r is out
    np.testing.assert_array_equal(out, 5 * np.ones((2, 3)))


def test_valueref_result(m):
    ref = spy.ValueRef(0.0)
    m.add(1.0, 2.0, _result=ref)
    assert ref.value == 3.0


def test_struct_tensor_result_numpy_structured(m):
    r = m.mk(np.arange(3, dtype=np.float32), _result="numpy")
    assert r.dtype.names == ("x", "y") and r.shape == (3,)
    np.testing.assert_array_equal(r["x"], [0, 1, 2])
    np.testing.assert_array_equal(r["y"], [7, 7, 7])


def test_struct_tensor_to_numpy_structured(m):
    r = m.mk(np.arange(3, dtype=np.float32))
    a = r.to_numpy()
    assert a.shape == (3,) and a.dtype.itemsize == 8 and a.dtype.fields["y"][1] == 4
    np.testing.assert_array_equal(a["x"], [0, 1, 2])
    np.testing.assert_array_equal(a["y"], [7, 7, 7])
    raw = a.view(np.uint8).reshape(3, 8)                 # the raw bytes are one view away
    np.testing.assert_array_equal(raw[:, :4].copy().view(np.float32)[:, 0], [0, 1, 2])


def test_module_module_is_the_device_module(m):
    assert m.module is m.device_module


def test_unknown_return_type(m):
    with pytest.raises(ValueError, match="Unknown return type 'x'"):
        m.add.return_type("x")
