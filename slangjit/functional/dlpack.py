"""DLPack export / import for `spy.Tensor` (pure ctypes; no compiled helper).

Export: `Tensor.__dlpack__(stream=None)` returns a "dltensor" capsule (legacy, unversioned DLPack 0.x
struct, which numpy, PyTorch, CuPy and JAX all accept) that views the tensor's storage, and
`Tensor.__dlpack_device__()` returns (kDLCPU, 0) or (kDLCUDA, ordinal).  The element type must be a
scalar, vector, matrix or array of one scalar type; its own dimensions become trailing dimensions.

Import: `Tensor.from_dlpack(obj, device=None)` wraps the producer's memory without copying (CPU memory
on the CPU device, CUDA memory on a CUDA device of the same GPU).  The producer's deleter runs when the
last Tensor over the memory is gone.

Streams (CUDA): on export, `stream` is the consumer's stream (None or 1: the legacy default stream,
2: per-thread default, -1: no synchronisation); the device's queued work is made visible to it with an
event (cuStreamWaitEvent), so the consumer never waits on the host.  On import we pass our device's
stream to the producer, which orders its pending work before ours.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from ..runtime.device import Buffer, BufferDesc, DeviceType, MemoryType, create_device
from . import typeview as S

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_FROM_CODE = {0: "i", 1: "u", 2: "f", 6: "b"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_VDELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", _VDELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

_api = ctypes.pythonapi
_CapsuleNew = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api))
_CapsuleIsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_CapsuleGetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_CapsuleSetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
# Inside the capsule destructor the capsule's refcount is 0: use raw pointers only.
_RawIsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_RawGetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))

_live: dict = {}          # address of an exported DLManagedTensor -> what it keeps alive
_lock = threading.Lock()


@_DELETER
def _deleter(mt_ptr):
    addr = ctypes.cast(mt_ptr, ctypes.c_void_p).value
    with _lock:
        _live.pop(addr, None)


@_VDELETER
def _vdeleter(mt_ptr):
    addr = ctypes.cast(mt_ptr, ctypes.c_void_p).value
    with _lock:
        _live.pop(addr, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(cap):
    for name in (b"dltensor", b"dltensor_versioned"):
        if _RawIsValid(cap, name):             # never consumed: we still own the managed tensor
            p = _RawGetPointer(cap, name)
            if p:
                with _lock:
                    _live.pop(p, None)


_DESTRUCTOR_ADDR = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def _is_host(device) -> bool:
    return getattr(device, "_host_memory", True)


def dlpack_device(t) -> tuple:
    dev = t.device
    if _is_host(dev):
        return (kDLCPU, 0)
    return (kDLCUDA, int(getattr(dev._ctx, "ordinal", 0)))


def _scalar_np(t):
    dt = t.dtype
    if dt.kind in ("scalar", "vector", "matrix", "array") and dt.scalar is not None:
        nd = np.dtype(dt.np_dtype)
        return nd, tuple(dt.shape) if dt.shape else ()
    if dt.kind == "enum":
        return np.dtype(dt.underlying.np), ()
    raise TypeError(f"__dlpack__: tensors of {dt.name} cannot be exported (DLPack needs one scalar type)")


def _sync_to_consumer(t, stream) -> None:
    if _is_host(t.device) or stream == -1:
        return
    ctx = t.device._ctx
    d = ctx.d
    from ..runtime.cuda import _ck          # CUDA devices only (importing runtime.cuda costs ~4 ms, measured)
    ctx.make_current()
    consumer = d.CUstream(1 if stream is None else int(stream))
    if int(consumer) == int(ctx.stream):
        return
    ev = _ck(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    _ck(d.cuEventRecord(ev, ctx.stream), "cuEventRecord")
    _ck(d.cuStreamWaitEvent(consumer, ev, 0), "cuStreamWaitEvent")
    d.cuEventDestroy(ev)


def to_dlpack(t, stream=None, max_version=None, dl_device=None, copy=None):
    """The capsule for `Tensor.__dlpack__`."""
    if copy:
        raise BufferError("__dlpack__: copy=True is not supported (export is always a view)")
    if dl_device is not None and tuple(dl_device) != dlpack_device(t):
        raise BufferError(f"__dlpack__: cannot export to device {tuple(dl_device)}")
    nd, es = _scalar_np(t)
    k = max(1, t.dtype.size // nd.itemsize)
    shape = tuple(t.shape) + es
    inner = []
    acc = 1
    for d in reversed(es):
        inner.append(acc)
        acc *= d
    strides = tuple(s * k for s in t.strides) + tuple(reversed(inner))
    n = len(shape)
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    mt = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    shp = (ctypes.c_int64 * max(1, n))(*shape)
    st = (ctypes.c_int64 * max(1, n))(*strides)
    dt = mt.dl_tensor
    dt.data = t.storage.device_address
    dt.byte_offset = t.offset * t.dtype.size
    dev = dlpack_device(t)
    dt.device = DLDevice(dev[0], dev[1])
    dt.ndim = n
    code = "b" if t.dtype.scalar == "bool" else nd.kind
    dt.dtype = DLDataType(_CODES[code], nd.itemsize * 8, 1)
    dt.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    dt.strides = ctypes.cast(st, ctypes.POINTER(ctypes.c_int64))
    mt.manager_ctx = None
    if versioned:
        mt.version = DLPackVersion(1, 0)
        mt.flags = 0 if t.writable else 1      # DLPACK_FLAG_BITMASK_READ_ONLY
        mt.deleter = _vdeleter
    else:
        mt.deleter = _deleter
    addr = ctypes.addressof(mt)
    with _lock:
        _live[addr] = (mt, shp, st, t.storage, t)
    _sync_to_consumer(t, stream)
    return _CapsuleNew(addr, b"dltensor_versioned" if versioned else b"dltensor", _DESTRUCTOR_ADDR)


class _Owner:
    """Holds an imported DLManagedTensor and calls its deleter when released."""

    def __init__(self, mt_addr: int, producer: Any, versioned: bool = False):
        self.mt_addr = mt_addr
        self.producer = producer
        self.cls = DLManagedTensorVersioned if versioned else DLManagedTensor

    def __del__(self):
        addr, self.mt_addr = self.mt_addr, 0
        if addr:
            mt = self.cls.from_address(addr)
            if mt.deleter:
                try:
                    mt.deleter(ctypes.cast(addr, ctypes.POINTER(self.cls)))
                except Exception:  # noqa: BLE001  (interpreter shutdown)
                    pass


def _call_dlpack(obj, **kw):
    try:
        return obj.__dlpack__(max_version=(1, 0), **kw)
    except TypeError:
        return obj.__dlpack__(**kw)


def from_dlpack(obj, device, usage):
    """(buffer, element type, shape, strides) of a Tensor over the memory of a DLPack producer (an object with
    __dlpack__, or a capsule); Tensor.from_dlpack makes the Tensor."""
    if hasattr(obj, "__dlpack__"):
        kind, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (kDLCPU, 0)
        kind, dev_id = int(kind), int(dev_id)
        if device is None:
            device = create_device(type=DeviceType.cpu if kind in (kDLCPU, kDLCUDAHost) else DeviceType.cuda)
        if kind == kDLCUDA:
            if _is_host(device):
                raise BufferError("from_dlpack: CUDA memory needs a CUDA device")
            cap = _call_dlpack(obj, stream=int(device._ctx.stream))
        else:
            cap = _call_dlpack(obj)
    else:
        cap = obj
        if device is None:
            raise ValueError("from_dlpack: pass device= when importing a bare capsule")
    if _CapsuleIsValid(cap, b"dltensor"):
        versioned = False
        addr = _CapsuleGetPointer(cap, b"dltensor")
        mt = DLManagedTensor.from_address(addr)
    elif _CapsuleIsValid(cap, b"dltensor_versioned"):
        versioned = True
        addr = _CapsuleGetPointer(cap, b"dltensor_versioned")
        mt = DLManagedTensorVersioned.from_address(addr)
    else:
        raise BufferError("from_dlpack: not an unconsumed DLPack capsule")
    dt = mt.dl_tensor
    kind = int(dt.device.device_type)
    if kind in (kDLCPU, kDLCUDAHost):
        if not _is_host(device):
            raise BufferError("from_dlpack: host memory cannot be wrapped by a CUDA device tensor")
    elif kind == kDLCUDA:
        if _is_host(device):
            raise BufferError("from_dlpack: CUDA memory needs a CUDA device")
        if int(dt.device.device_id) != int(getattr(device._ctx, "ordinal", 0)):
            raise BufferError("from_dlpack: the tensor lives on another GPU")
    else:
        raise BufferError(f"from_dlpack: unsupported DLPack device type {kind}")
    if dt.dtype.lanes != 1 or int(dt.dtype.code) not in _FROM_CODE:
        raise BufferError(f"from_dlpack: unsupported dtype (code {dt.dtype.code}, {dt.dtype.bits} bits)")
    code = _FROM_CODE[int(dt.dtype.code)]
    npdt = np.dtype(np.bool_) if code == "b" else np.dtype(f"{code}{dt.dtype.bits // 8}")
    n = int(dt.ndim)
    shape = tuple(int(dt.shape[i]) for i in range(n))
    if dt.strides:
        strides = tuple(int(dt.strides[i]) for i in range(n))
    else:
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        strides = tuple(reversed(strides))
    if any(s < 0 for s in strides):
        raise BufferError("from_dlpack: negative strides are not supported")
    _CapsuleSetName(cap, b"used_dltensor_versioned" if versioned else b"used_dltensor")
    owner = _Owner(addr, obj, versioned)
    isz = npdt.itemsize
    count = 0 if any(d == 0 for d in shape) else 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    nbytes = max(count * isz, isz)
    base = int(dt.data or 0) + int(dt.byte_offset)
    desc = BufferDesc(nbytes, isz, usage, MemoryType.device_local, None, None, "dlpack")
    if _is_host(device):
        b = object.__new__(_HostExternalBuffer)
        b.device = device
        b.desc = desc
        b._mem = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(base)) if base else \
            np.zeros(nbytes, np.uint8)
        b._addr = base
        b._owner = owner
    else:
        from ..runtime.cuda import CudaBuffer   # CUDA devices only (importing runtime.cuda costs ~4 ms, measured)
        b = CudaBuffer.wrap(device, base, desc, owner)
    st = S.scalar("bool" if code == "b" else S.NUMPY_TO_SCALAR[npdt.name])
    if n == 0:
        shape, strides = (1,), (1,)
    return b, st, shape, strides


class _HostExternalBuffer(Buffer):
    """Host memory owned by a DLPack producer."""

    def __init__(self):   # never called: made with object.__new__
        raise TypeError
