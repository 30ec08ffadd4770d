"""Behavioural port of SlangPy's test_dtypes.py: Tensors and NDBuffers of every scalar type, vectors, arrays
(nested, in Slang's type syntax: `float[2][3]` is 3 arrays of float[2]) and a struct, filled from numpy and
read back with the right shape, strides and dtype; and the same through torch (DLPack)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, Shape, Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = "struct RGB { float x; float y; float z; };"

DTYPES = [("half", np.float16, ()), ("float", np.float32, ()), ("double", np.float64, ()), ("uint8_t", np.uint8, ()),
          ("uint16_t", np.uint16, ()), ("uint32_t", np.uint32, ()), ("uint64_t", np.uint64, ()),
          ("int8_t", np.int8, ()), ("int16_t", np.int16, ()), ("int32_t", np.int32, ()), ("int64_t", np.int64, ()),
          ("float2", np.float32, (2,)), ("float3", np.float32, (3,)), ("float[3]", np.float32, (3,)),
          ("float[2][3]", np.float32, (3, 2)), ("float3[2]", np.float32, (2, 3))]
TORCH = {np.float16: "half", np.float32: "float", np.float64: "double", np.uint8: "uint8", np.int8: "int8",
         np.int16: "int16", np.int32: "int32", np.int64: "int64"}


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_dtypes", SRC)


def _ref(np_type, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(np_type).kind == "f":
        return rng.random(shape, np.double).astype(np_type)
    ii = np.iinfo(np_type)
    return rng.integers(ii.min, ii.max, shape, np_type)


@pytest.mark.parametrize("buffer_type", [Tensor, NDBuffer])
@pytest.mark.parametrize("slang_dtype,np_type,dshape", DTYPES, ids=[d[0] for d in DTYPES])
def test_to_numpy(device, m, buffer_type, slang_dtype, np_type, dshape):
    shape = (5, 4)
    full = shape + dshape
    ref = _ref(np_type, full)
    buf = buffer_type.zeros(device, dtype=m[slang_dtype], shape=shape)
    assert buf.shape == shape and buf.strides == Shape(shape).calc_contiguous_strides() and buf.offset == 0
    buf.copy_from_numpy(ref)
    nd = buf.to_numpy()
    isz = np.dtype(np_type).itemsize
    assert nd.shape == full and nd.dtype == np.dtype(np_type)
    assert nd.strides == tuple(s * isz for s in Shape(full).calc_contiguous_strides())
    np.testing.assert_array_equal(nd, ref)


@pytest.mark.parametrize("buffer_type", [Tensor, NDBuffer])
def test_struct_to_numpy(device, m, buffer_type):
    # SlangPy's to_numpy gives a struct's raw bytes (uint8, last dimension 12); slangjit gives a numpy
    # structured array of the struct's fields (docs/slangpy-compat.md); the bytes are the same
    ref = _ref(np.uint8, (5, 4, 12))
    buf = buffer_type.zeros(device, dtype=m["RGB"], shape=(5, 4))
    buf.copy_from_numpy(ref)
    nd = buf.to_numpy()
    assert nd.shape == (5, 4) and nd.dtype.names == ("x", "y", "z")
    assert nd.tobytes() == ref.tobytes()
    np.testing.assert_array_equal(nd["y"], ref.view(np.float32).reshape(5, 4, 3)[..., 1])


@pytest.mark.parametrize("buffer_type", [Tensor, NDBuffer])
@pytest.mark.parametrize("slang_dtype,np_type,dshape", [d for d in DTYPES if d[1] in TORCH],
                         ids=[d[0] for d in DTYPES if d[1] in TORCH])
def test_to_torch(device, m, buffer_type, slang_dtype, np_type, dshape):
    torch = pytest.importorskip("torch")
    shape = (5, 4)
    full = shape + dshape
    st = m[slang_dtype].struct
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access | spy.BufferUsage.shared
    if buffer_type is Tensor:
        storage = device.create_buffer(element_count=math.prod(shape), struct_size=st.buffer_layout.reflection.size,
                                       usage=usage)
        buf = Tensor(storage, st, shape)
    else:
        buf = NDBuffer(device, dtype=st, shape=shape, usage=usage)
    buf.clear()
    assert buf.shape == shape and buf.strides == Shape(shape).calc_contiguous_strides() and buf.offset == 0
    ref = _ref(np_type, full, seed=1)
    buf.copy_from_numpy(ref)
    device.sync_to_device()
    t = buf.to_torch()
    assert tuple(t.shape) == full and t.stride() == Shape(full).calc_contiguous_strides().as_tuple()
    assert t.dtype == getattr(torch, TORCH[np_type])
    np.testing.assert_array_equal(t.cpu().numpy(), ref)
