"""A stand-in for `cuda.bindings.driver`, so the CUDA device's Python side (program loading, the image
cache, module bookkeeping, argument packing) can be tested on a machine without a GPU.

    import cuda_stub_driver; cuda_stub_driver.install()
    dev = slangjit.create_device(type=slangjit.DeviceType.cuda)

Every call succeeds; nothing runs.  `calls` records (name, args) of each call, `images` the images given
to cuModuleLoadData.
"""
from __future__ import annotations

import ctypes
import enum
import sys

calls: list = []
images: list = []
_keep: list = []          # host allocations handed out by cuMemHostAlloc


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CUevent_flags(enum.IntEnum):
    CU_EVENT_DISABLE_TIMING = 2


class CUstream(int):
    pass


class CUlimit(enum.IntEnum):
    CU_LIMIT_STACK_SIZE = 0


_ATTRS = {16: 132, 75: 9, 76: 0}        # an H100: sm_90, 132 SMs


def _ok(name, *vals, args=()):
    calls.append((name, args))
    return (0, *vals)


def cuInit(flags): return _ok("cuInit")
def cuDeviceGetCount(): return _ok("cuDeviceGetCount", 1)
def cuDeviceGet(i): return _ok("cuDeviceGet", i)
def cuDevicePrimaryCtxRetain(dev): return _ok("cuDevicePrimaryCtxRetain", 1)
def cuCtxSetCurrent(ctx): return _ok("cuCtxSetCurrent")
def cuDeviceGetAttribute(attr, dev): return _ok("cuDeviceGetAttribute", _ATTRS[int(attr)])
def cuDeviceGetName(n, dev): return _ok("cuDeviceGetName", b"Stub GPU\0")
def cuStreamCreate(flags): return _ok("cuStreamCreate", CUstream(7))
def cuModuleGetGlobal(module, name): return _ok("cuModuleGetGlobal", 0x1000, 8, args=(name,))
def cuModuleGetFunction(module, name): return _ok("cuModuleGetFunction", object(), args=(name,))
def cuEventCreate(flags): return _ok("cuEventCreate", object())
def cuCtxGetLimit(limit): return _ok("cuCtxGetLimit", 1024, args=(limit,))      # the driver's default stack
def cuCtxSetLimit(limit, value): return _ok("cuCtxSetLimit", args=(limit, value))
def cuFuncSetAttribute(fn, attr, value): return _ok("cuFuncSetAttribute", args=(attr, value))


class CUfunction_attribute(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def cuModuleLoadData(image):
    images.append(bytes(image))
    return _ok("cuModuleLoadData", object())


def cuMemHostAlloc(n, flags):
    b = ctypes.create_string_buffer(n)
    _keep.append(b)
    return _ok("cuMemHostAlloc", ctypes.addressof(b), args=(n,))


def install() -> None:
    """Make slangjit's CUDA runtime use this module as its driver (before creating a CUDA device)."""
    from slangjit.runtime import cuda
    cuda._driver = sys.modules[__name__]
