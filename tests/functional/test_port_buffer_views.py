"""Behavioural port of SlangPy's test_buffer_views.py: numpy-style indexing of a Tensor (partial, ellipsis,
None, slices, full) giving the same shape / strides / offset as numpy, `view`, `point_to`, `broadcast_to`,
whole and per-row numpy / torch copies and their errors."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

INDICES = [3, (3, 4, 2, 1), (3, 4, ...), (..., 1), (3, ..., 1), (None,), (2, 6, None, None, 2, None),
           (2, slice(4, None, None)), (1, slice(None, -3, None)), (slice(None, None, 2), ..., 3),
           (slice(4, None, 3),), (0, 0, 0, 0, 0)]


@pytest.mark.parametrize("index", INDICES, ids=[str(i) for i in INDICES])
def test_indexing(device, index):
    shape = (10, 8, 5, 3, 5)
    ref = np.random.default_rng(0).random(shape, np.float32)
    t = Tensor.zeros(device, dtype="float", shape=shape)
    t.copy_from_numpy(ref)
    tv = t[index]
    nv = ref[index]
    if isinstance(nv, np.number):
        assert tv.shape.as_tuple() == (1,) and tv.strides.as_tuple() == (1,)
        assert tv.to_numpy()[0] == nv
    else:
        assert tv.shape.as_tuple() == nv.shape
        assert tuple(ref.itemsize * s for s in tv.strides) == nv.strides
        assert ref.itemsize * tv.offset == nv.ctypes.data - ref.ctypes.data
        np.testing.assert_array_equal(tv.to_numpy(), nv)


def test_view(device):
    t = Tensor.zeros(device, dtype="float", shape=(32 * 32 * 32,))
    v = t.view((32, 32), (1, 32), 64)
    assert v.offset == 64 and v.shape.as_tuple() == (32, 32) and v.strides.as_tuple() == (1, 32)
    back = v.view(t.shape, offset=-64)
    assert back.offset == t.offset and back.shape.as_tuple() == t.shape.as_tuple()
    assert back.strides.as_tuple() == t.strides.as_tuple()


def test_view_values(device):
    data = np.arange(64, dtype=np.float32)
    t = Tensor.from_numpy(device, data)
    np.testing.assert_array_equal(t.view((4, 4), (1, 4), 16).to_numpy(), data[16:32].reshape(4, 4).T)


def test_view_errors(device):
    t = Tensor.zeros(device, dtype="float", shape=(32 * 32 * 32,))
    with pytest.raises(Exception, match=r"Shape dimensions \([0-9]\) must match stride dimensions"):
        t.view((5, 4), (5,))
    with pytest.raises(Exception, match=r"Strides must be positive"):
        t.view((5, 4), (-5, 1))
    with pytest.raises(Exception, match=r"Buffer view offset is negative"):
        t.view((5, 4), offset=-100)


def test_point_to(device):
    rng = np.random.default_rng(1)
    a, b = rng.random((16, 16, 16)), rng.random((16, 16, 16))
    ta, tb = Tensor.from_numpy(device, a), Tensor.from_numpy(device, b)
    sa = ta[5]
    assert sa.shape == (16, 16) and sa.offset == 5 * 16 * 16
    np.testing.assert_array_equal(sa.to_numpy(), a[5])
    sa.point_to(tb[2])
    assert sa.shape == (16, 16)
    np.testing.assert_array_equal(sa.to_numpy(), b[2])


def test_broadcast_to(device):
    t = Tensor.zeros(device, dtype="float", shape=(32, 1, 1))
    assert t.broadcast_to((64, 64, 32, 54, 5)).shape == (64, 64, 32, 54, 5)
    with pytest.raises(Exception, match=r"Broadcast shape must be larger than tensor shape"):
        t.broadcast_to((32,))
    with pytest.raises(Exception, match=r"Current dimension"):
        t.broadcast_to((16, 5, 5))


def test_full_numpy_copy(device):
    ref = np.random.default_rng(2).random((5, 4), np.float32)
    t = Tensor.zeros(device, dtype="float", shape=(5, 4))
    t.copy_from_numpy(ref)
    np.testing.assert_array_equal(t.to_numpy(), ref)


def test_partial_numpy_copy(device):
    ref = np.random.default_rng(3).random((5, 4), np.float32)
    t = Tensor.zeros(device, dtype="float", shape=(5, 4))
    for i in range(5):
        t[i].copy_from_numpy(ref[i])
    np.testing.assert_array_equal(t.to_numpy(), ref)


def test_numpy_copy_errors(device):
    t = Tensor.zeros(device, dtype="float", shape=(5, 4))
    with pytest.raises(Exception, match=r"Numpy array is larger"):
        t.copy_from_numpy(np.zeros((5, 5), np.float32))
    with pytest.raises(Exception, match=r"Destination buffer view must be contiguous"):
        t.view((5, 4), (1, 5)).copy_from_numpy(np.zeros((5, 4), np.float32))


def _torch():
    return pytest.importorskip("torch")


def test_full_torch_copy(device):
    torch = _torch()
    ref = torch.randn((5, 4), dtype=torch.float32)
    t = Tensor.zeros(device, dtype="float", shape=(5, 4))
    t.copy_from_torch(ref)
    np.testing.assert_array_equal(t.to_torch().cpu().numpy(), ref.numpy())


def test_partial_torch_copy(device):
    torch = _torch()
    ref = torch.randn((5, 4), dtype=torch.float32)
    t = Tensor.zeros(device, dtype="float", shape=(5, 4))
    for i in range(5):
        t[i].copy_from_torch(ref[i])
    np.testing.assert_array_equal(t.to_torch().cpu().numpy(), ref.numpy())


def test_torch_copy_errors(device):
    torch = _torch()
    t = Tensor.zeros(device, dtype="float", shape=(5, 4))
    with pytest.raises(Exception, match=r"Tensor is larger"):
        t.copy_from_torch(torch.zeros((5, 5), dtype=torch.float32))
    with pytest.raises(Exception, match=r"Destination buffer view must be contiguous"):
        t.view((5, 4), (1, 5)).copy_from_torch(torch.zeros((5, 4), dtype=torch.float32))
