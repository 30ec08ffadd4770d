"""Functional API §2.1: the Python spy.Tensor and §2.2: Slang-side tensor types."""
import warnings

import numpy as np
import pytest

import slangjit as spy

SRC = r"""
import "slangpy";
float sum_row(int i, ITensor<float, 2> t) { float s = 0; for (uint j = 0; j < t.shape[1]; j++) s += t[i, j]; return s; }
void write_sq(int i, IWTensor<float, 1> dst, float v) { dst[i] = v * v; }
void scale(int i, IRWTensor<float, 1> t, float k) { t[i] = t[i] * k; }
float row_slice(Tensor<float, 1> row) { return row[0] + 10.0 * row[1]; }
float load_forms(int2 idx, Tensor<float, 2> t) { return t.load(idx.y, idx.x) - t[idx.y, idx.x] + t.load(idx); }
void acc(int i, AtomicTensor<float, 1> t, float v) { t.add(0, v); }
float ro(Tensor<float, 1> t) { return t[0]; }
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "tens", SRC)


def test_from_numpy_roundtrip(device):
    for dt in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.uint32, np.int16):
        a = (np.arange(12).reshape(3, 4) % 7).astype(dt)
        t = spy.Tensor.from_numpy(device, a)
        assert t.shape == (3, 4) and t.strides == (4, 1) and t.offset == 0
        out = t.to_numpy()
        assert out.dtype == dt
        np.testing.assert_array_equal(out, a)
    assert spy.Tensor.from_numpy(device, np.zeros(2, np.float32)).dtype.name == "float"
    assert spy.Tensor.from_numpy(device, np.zeros(2, np.float64)).dtype.name == "double"


def test_numpy_alias_deprecated(device):
    with pytest.warns(DeprecationWarning, match="deprecated"):
        t = spy.Tensor.numpy(device, np.array([1, 2], np.float32))
    np.testing.assert_array_equal(t.to_numpy(), [1, 2])


def test_factories(device):
    t = spy.Tensor.empty(device, (2, 3), float)
    assert t.dtype.name == "float" and t.shape == (2, 3)
    z = spy.Tensor.zeros(device, shape=(4,), dtype="float3")
    assert z.to_numpy().shape == (4, 3) and not z.to_numpy().any()
    o = spy.Tensor.ones(device, shape=(4,), dtype=float)
    np.testing.assert_array_equal(o.to_numpy(), np.ones(4))
    assert spy.Tensor.empty_like(o).shape == (4,)
    assert spy.Tensor.zeros_like(o).dtype == o.dtype
    assert spy.Tensor.empty(device, (2,), spy.float32).dtype.name == "float"
    assert spy.Tensor.empty(device, (2,), spy.int3).dtype.name == "int3"
    assert spy.Tensor(device, element_type="float", shape=(3,)).shape == (3,)
    with pytest.raises(ValueError, match=r"Element type \(dtype\) must be specified"):
        spy.Tensor.empty(device, (2,))
    with pytest.raises(ValueError, match="Cannot create a tensor with zero dimensions"):
        spy.Tensor.empty(device, (), float)


def test_vector_dtype_layout(device):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    t = spy.Tensor.empty(device, (4,), spy.float3)
    t.copy_from_numpy(a)
    assert t.storage.size == 48                 # float3 stride is 12 bytes
    np.testing.assert_array_equal(t.to_numpy(), a)


def test_copy_from_numpy_and_storage(device):
    t = spy.Tensor.empty(device, (4,), float)
    t.copy_from_numpy(np.array([1, 2, 3, 4], np.float32))
    np.testing.assert_array_equal(t.to_numpy(), [1, 2, 3, 4])
    t.storage.copy_from_numpy(np.array([5, 6, 7, 8], np.float32))
    np.testing.assert_array_equal(t.to_numpy(), [5, 6, 7, 8])
    with pytest.raises(ValueError, match="contiguous"):
        t.copy_from_numpy(np.zeros(8, np.float32)[::2])
    t.clear()
    assert not t.to_numpy().any()


def test_grads(device):
    t = spy.Tensor.from_numpy(device, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="Tensor has no grad."):
        t.grad
    g = t.with_grads()
    assert g.grad_in is g.grad_out and g.grad.shape == (3,) and not g.grad.to_numpy().any()
    assert g.storage is t.storage and t.grad_out is None
    gi = spy.Tensor.ones(device, (3,), float)
    go = spy.Tensor.zeros(device, (3,), float)
    h = t.with_grads(grad_in=gi, grad_out=go)
    assert h.grad_in is gi and h.grad is go
    assert h.detach().grad_in is None
    with pytest.raises(ValueError, match="No derivative type found for int"):
        spy.Tensor.zeros(device, (2,), int).with_grads()
    assert repr(h) == "Tensor(dtype=float, shape=[3], has_grad_in=True, has_grad_out=True)"


def test_views_and_indexing(device):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = spy.Tensor.from_numpy(device, a)
    np.testing.assert_array_equal(t[1].to_numpy(), a[1])
    np.testing.assert_array_equal(t[:, 1:3, ::2].to_numpy(), a[:, 1:3, ::2])
    np.testing.assert_array_equal(t[..., -1].to_numpy(), a[..., -1])
    np.testing.assert_array_equal(t[None, 0].to_numpy(), a[None, 0])
    assert t[1, 2, 3].shape == (1,)
    with pytest.raises(IndexError, match="Too many indices for tensor of dimension 3"):
        t[0, 0, 0, 0]
    with pytest.raises(ValueError, match="Illegal argument at dimension 0"):
        t["x"]
    v = t.view((6, 4))
    np.testing.assert_array_equal(v.to_numpy(), a.reshape(6, 4))
    with pytest.raises(ValueError, match="must match stride dimensions"):
        t.view((6, 4), (4,))
    b = spy.Tensor.from_numpy(device, np.arange(4, dtype=np.float32)).broadcast_to((3, 4))
    assert b.strides == (0, 1)
    np.testing.assert_array_equal(b.to_numpy(), np.broadcast_to(np.arange(4), (3, 4)))
    with pytest.raises(ValueError, match="Broadcast shape must be larger than tensor shape"):
        t.broadcast_to((4,))


def test_views_in_calls(m, device):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = spy.Tensor.from_numpy(device, a)
    view = t[:, 1::2]
    r = m.sum_row(spy.grid((4,)), view, _result="numpy")
    np.testing.assert_array_equal(r, a[:, 1::2].sum(1))


def test_slang_tensor_interfaces(m, device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = spy.Tensor.from_numpy(device, a)
    np.testing.assert_array_equal(m.sum_row(spy.grid((3,)), t, _result="numpy"), a.sum(1))
    out = spy.Tensor.zeros(device, (5,), float)
    m.write_sq(spy.grid((5,)), out, np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(out.to_numpy(), np.arange(5) ** 2)
    rw = spy.Tensor.from_numpy(device, np.arange(4, dtype=np.float32))
    m.scale(spy.grid((4,)), rw, 3.0)
    np.testing.assert_array_equal(rw.to_numpy(), np.arange(4) * 3)


def test_higher_rank_tensor_gives_slices(m, device):
    a = np.arange(10, dtype=np.float32).reshape(5, 2)
    r = m.row_slice(spy.Tensor.from_numpy(device, a), _result="numpy")
    np.testing.assert_array_equal(r, a[:, 0] + 10 * a[:, 1])


def test_index_forms(m, device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = m.load_forms(spy.call_id(), spy.Tensor.from_numpy(device, a), _result=np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(r, a)


def test_atomic_tensor(m, device):
    acc = spy.Tensor.zeros(device, (1,), float)
    m.acc(spy.grid((1000,)), acc, 0.5)
    assert acc.to_numpy()[0] == 500.0


def test_read_only_tensor_to_writable_param(m, device):
    t = spy.Tensor.empty(device, (3,), float, usage=spy.BufferUsage.shader_resource)
    with pytest.raises(TypeError, match="Can't pass a read-only tensor to a writable tensor"):
        m.scale(spy.grid((3,)), t, 2.0)
    assert m.ro(t) == 0.0


def test_tensor_element_type_mismatch(m, device):
    t = spy.Tensor.zeros(device, (3,), int)
    with pytest.raises(TypeError, match="Can't convert tensor with element type int to tensor with element type float"):
        m.ro(t)
