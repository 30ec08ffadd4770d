"""Behavioural port of SlangPy's test_ndbuffer.py: NDBuffer construction (empty / zeros / from_numpy /
element_count / *_like / clear), argument checks, views and broadcasting, and NDBuffers as call arguments,
Tensor / StructuredBuffer parameters and return containers."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
void add_into(float a, float b, out float c) { c = a + b; }
void scale_into(float a, float k, out float r) { r = a * k; }
float first_of_tensor(Tensor<float, 1> t) { return t[0]; }
float first_of_buffer(StructuredBuffer<float> b) { return b[0]; }
float add_ret(float a, float b) { return a + b; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_ndbuffer", SRC)


def test_empty(device):
    b = NDBuffer.empty(device, shape=(10,), dtype=float)
    assert b.shape == (10,) and b.is_writable


def test_empty_readonly(device):
    b = NDBuffer.empty(device, shape=(8,), dtype=float, usage=spy.BufferUsage.shader_resource)
    assert b.shape == (8,) and not b.is_writable


def test_zeros(device):
    d = NDBuffer.zeros(device, shape=(16,), dtype=float).to_numpy()
    assert d.shape[0] == 16 and np.all(d == 0.0)


def test_from_numpy(device):
    src = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    np.testing.assert_array_equal(NDBuffer.from_numpy(device, src).to_numpy(), src)


def test_from_numpy_2d(device):
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = NDBuffer.from_numpy(device, src)
    assert b.shape == (3, 4)
    np.testing.assert_array_equal(b.to_numpy().reshape(3, 4), src)


def test_element_count(device):
    assert NDBuffer(device, dtype=float, element_count=20).shape == (20,)


def test_empty_like(device):
    a = NDBuffer.empty(device, shape=(5, 3), dtype=float)
    b = NDBuffer.empty_like(a)
    assert b.shape == a.shape and b.dtype.full_name == a.dtype.full_name == "float"


def test_zeros_like(device):
    a = NDBuffer.from_numpy(device, np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    assert np.all(NDBuffer.zeros_like(a).to_numpy() == 0.0)


def test_clear(device):
    b = NDBuffer.from_numpy(device, np.array([1.0, 2.0, 3.0], np.float32))
    b.clear()
    assert np.all(b.to_numpy() == 0.0)


def test_requires_shape_or_count(device):
    with pytest.raises(ValueError, match="Either element_count or shape must be provided"):
        NDBuffer(device, dtype=float)


def test_rejects_both_shape_and_count(device):
    with pytest.raises(ValueError, match="Only one of element_count or shape"):
        NDBuffer(device, dtype=float, element_count=10, shape=(10,))


def test_broadcast(device):
    b = NDBuffer.from_numpy(device, np.array([1.0, 2.0, 3.0], np.float32)).broadcast_to((4, 3))
    assert b.shape == (4, 3)
    np.testing.assert_array_equal(b.to_numpy(), np.tile([1.0, 2.0, 3.0], (4, 1)))


def test_view(device):
    b = NDBuffer.from_numpy(device, np.arange(12, dtype=np.float32))
    v = b.view(shape=(3, 4))
    assert v.shape == (3, 4)
    np.testing.assert_array_equal(v.to_numpy(), np.arange(12).reshape(3, 4))


def test_add_1d(device, m):
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    c = NDBuffer.zeros(device, shape=(4,), dtype=float)
    m.add_into(NDBuffer.from_numpy(device, a), NDBuffer.from_numpy(device, b), c)
    np.testing.assert_array_equal(c.to_numpy(), a + b)


def test_add_2d(device, m):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 10.0, np.float32)
    c = NDBuffer.zeros(device, shape=(2, 3), dtype=float)
    m.add_into(NDBuffer.from_numpy(device, a), NDBuffer.from_numpy(device, b), c)
    np.testing.assert_array_equal(c.to_numpy().reshape(2, 3), a + b)


def test_scalar_broadcast(device, m):
    a = np.array([2.0, 4.0, 6.0], np.float32)
    r = NDBuffer.zeros(device, shape=(3,), dtype=float)
    m.scale_into(NDBuffer.from_numpy(device, a), 3.0, r)
    np.testing.assert_array_equal(r.to_numpy(), a * 3.0)


def test_read_only_as_tensor(device, m):
    b = NDBuffer.from_numpy(device, np.array([42.0, 1.0, 2.0], np.float32), usage=spy.BufferUsage.shader_resource)
    assert m.first_of_tensor(b) == 42.0


def test_as_structured_buffer(device, m):
    b = NDBuffer.from_numpy(device, np.array([99.0, 1.0], np.float32), usage=spy.BufferUsage.shader_resource)
    assert m.first_of_buffer(b) == 99.0


def test_as_return_type(device, m):
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([3.0, 4.0], np.float32)
    r = m.add_ret.return_type(NDBuffer)(NDBuffer.from_numpy(device, a), NDBuffer.from_numpy(device, b))
    assert isinstance(r, NDBuffer)
    np.testing.assert_array_equal(r.to_numpy(), a + b)


def test_copy_from_numpy(device):
    b = NDBuffer.empty(device, shape=(4,), dtype=float)
    src = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    b.copy_from_numpy(src)
    np.testing.assert_array_equal(b.to_numpy(), src)


def test_int_dtype(device):
    src = np.array([1, 2, 3, 4], np.int32)
    out = NDBuffer.from_numpy(device, src).to_numpy()
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, src)
