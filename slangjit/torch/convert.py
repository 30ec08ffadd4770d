"""torch.Tensor <-> spy.Tensor without copies.

`to_spy(t, device, label)` views a torch tensor's memory as a `spy.Tensor` (its data pointer, shape and
strides in elements, so slices, transposes and `expand`ed stride-0 inputs are read in place); the view keeps
the torch tensor alive.  `check_writable` refuses, as an output, a tensor whose elements alias (stride 0
over an extent > 1, or overlapping strides): a kernel would write one element from several threads.
`torch_dtype_of` / `spy_dtype_of` map element types; bfloat16 has no Slang element type here and is an error
naming the argument.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import torch

from ..functional import typeview as S
from ..runtime.base import Buffer, BufferDesc
from ..runtime.device import MemoryType
from ..tensor import DEFAULT_USAGE, Tensor, Shape

_SCALAR_OF = {
    torch.bool: "bool", torch.int8: "int8_t", torch.int16: "int16_t", torch.int32: "int", torch.int64: "int64_t",
    torch.uint8: "uint8_t", torch.float16: "half", torch.float32: "float", torch.float64: "double",
}
for _n, _s in (("uint16", "uint16_t"), ("uint32", "uint"), ("uint64", "uint64_t")):
    if hasattr(torch, _n):
        _SCALAR_OF[getattr(torch, _n)] = _s
_TORCH_OF_NP = {"bool": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
                "int64": torch.int64, "uint8": torch.uint8, "float16": torch.float16, "float32": torch.float32,
                "float64": torch.float64}
for _n in ("uint16", "uint32", "uint64"):
    if hasattr(torch, _n):
        _TORCH_OF_NP[_n] = getattr(torch, _n)
_STYPE: dict = {}
_DESCS: dict = {}


class UnsupportedDtype(TypeError):
    pass


def spy_dtype_of(dtype, label: str) -> S.SType:
    st = _STYPE.get(dtype)
    if st is None:
        name = _SCALAR_OF.get(dtype)
        if name is None:
            hint = " (convert it with .float())" if dtype == torch.bfloat16 else ""
            raise UnsupportedDtype(f"{label}: torch dtype {dtype} has no Slang element type{hint}; supported: "
                                   + ", ".join(str(d).replace("torch.", "") for d in _SCALAR_OF))
        st = _STYPE[dtype] = S.scalar(name)
    return st


def torch_dtype_of(t: S.SType):
    """(torch dtype, element dims) of a Slang scalar / vector / matrix / array type, or None (structs)."""
    if t.scalar is None or t.kind not in ("scalar", "vector", "matrix", "array"):
        return None
    dt = _TORCH_OF_NP.get(t.np_dtype.name)
    if dt is None:
        return None
    return dt, tuple(t.shape) if t.shape else ()


class _TorchHostBuffer(Buffer):
    """CPU memory owned by a torch tensor (kept alive here); its numpy view is made on first use."""

    def __init__(self):   # made with object.__new__
        raise TypeError

    @property
    def _mem(self):
        m = self.__dict__.get("_np")
        if m is None:
            n = self.desc.size
            m = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(self._addr)) if self._addr else \
                np.zeros(n, np.uint8)
            self.__dict__["_np"] = m
        return m


def _desc(nbytes: int, isz: int) -> BufferDesc:
    key = (nbytes, isz)
    d = _DESCS.get(key)
    if d is None:
        d = BufferDesc(nbytes, isz, DEFAULT_USAGE, MemoryType.device_local, None, None, "torch")
        if len(_DESCS) < 4096:
            _DESCS[key] = d
    return d


def _wrap_cuda(device, addr: int, desc: BufferDesc, owner):
    from ..runtime.cuda import CudaBuffer   # CUDA tensors only (importing runtime.cuda costs ~4 ms, measured)
    return CudaBuffer.wrap(device, addr, desc, owner)


def to_spy(t: torch.Tensor, device, label: str, dtype: S.SType = None) -> Tensor:
    """A spy.Tensor over `t`'s memory (0-dim tensors become shape (1,))."""
    st = dtype or _STYPE.get(t.dtype) or spy_dtype_of(t.dtype, label)
    return host_view(t, device, st, t.is_cpu)


def host_view(t: torch.Tensor, device, st: S.SType, host: bool = True, isz: int = 0) -> Tensor:
    """`to_spy` with the element type known (a call plan's hot path); `host`: t is a CPU tensor; `isz`: its
    element size in bytes (0: ask t)."""
    shape = t.shape
    if shape:
        strides = t.stride()
        extent = 1
        for d, s in zip(shape, strides):
            if not d:
                extent = 0
                break
            extent += (d - 1) * s
    else:
        shape, strides, extent = (1,), (1,), 1
    isz = isz or t.element_size()
    nbytes = extent * isz or isz
    desc = _DESCS.get((nbytes, isz)) or _desc(nbytes, isz)
    b = _host_buffer(device, desc, t) if host else _wrap_cuda(device, t.data_ptr(), desc, t)
    return _spy_view(b, device, st, shape, strides)


def _host_buffer(device, desc, t: torch.Tensor):
    """A CPU torch tensor's memory as a slangjit buffer (no copy; the tensor is kept alive)."""
    b = object.__new__(_TorchHostBuffer)
    b.device = device
    b.desc = desc
    b._addr = t.data_ptr()
    b._owner = t
    return b


def _spy_view(b, device, st: S.SType, shape: tuple, strides: tuple) -> Tensor:
    """A spy.Tensor over buffer `b` (built directly: this is the per-call path)."""
    v = object.__new__(Tensor)
    v.storage = b
    v.device = device
    v.dtype = st
    v._shape = tuple.__new__(Shape, shape)
    v._strides = tuple.__new__(Shape, strides)
    v.offset = 0
    v.grad_in = None
    v.grad_out = None
    return v


_CONTIG: dict = {}


def contig_geometry(shape: tuple, isz: int):
    """(row-major strides in elements, size in bytes) of a contiguous tensor of `shape` (cached)."""
    r = _CONTIG.get((shape, isz))
    if r is None:
        st, acc = [], 1
        for d in reversed(shape):
            st.append(acc)
            acc *= d
        r = (tuple(reversed(st)), acc * isz or isz)
        if len(_CONTIG) < 4096:
            _CONTIG[(shape, isz)] = r
    return r


def contig_host_view(t: torch.Tensor, device, st: S.SType, shape: tuple, isz: int) -> Tensor:
    """`host_view` of a CPU tensor the caller has just made contiguous with `shape` (torch.empty / zeros; a
    0-dim one as (1,)): its geometry comes from the shape, only its address from torch."""
    strides, nbytes = contig_geometry(shape, isz)
    b = _host_buffer(device, _DESCS.get((nbytes, isz)) or _desc(nbytes, isz), t)
    return _spy_view(b, device, st, shape, strides)


def check_writable(t: torch.Tensor, label: str) -> None:
    """An output must not alias itself: no stride-0 dimension of extent > 1, no overlapping strides."""
    dims = sorted((s, d) for d, s in zip(t.shape, t.stride()) if d > 1)
    extent = 1
    for s, d in dims:
        if s < extent:
            what = "a stride-0 (expanded / broadcast) dimension" if s == 0 else "overlapping strides"
            raise ValueError(f"{label}: an output tensor with {what} (shape {tuple(t.shape)}, strides "
                             f"{tuple(t.stride())}) would be written by several threads at once; pass a "
                             "tensor that owns its elements (e.g. .contiguous() or torch.empty)")
        extent += (d - 1) * s


def from_spy(v: Tensor):
    """A torch tensor over a spy.Tensor's memory (DLPack; no copy).  Scalar / vector / matrix element types
    only: their dimensions become trailing dimensions."""
    return torch.from_dlpack(v)


def spy_from_torch(device, t: torch.Tensor) -> Tensor:
    """`spy.Tensor.from_torch`: a view over `t` (no copy) on `device` (which must hold t's memory)."""
    check_device(device, t.device, "tensor")
    return to_spy(t, device, "tensor")


def device_matches(device, tdev) -> bool:
    host = getattr(device, "_host_memory", True)
    if tdev.type == "cpu":
        return bool(host)
    if tdev.type == "cuda":
        ctx = getattr(device, "_ctx", None)
        idx = tdev.index if tdev.index is not None else torch.cuda.current_device()
        return not host and ctx is not None and int(getattr(ctx, "ordinal", 0)) == int(idx)
    return False


def check_device(device, tdev, label: str) -> None:
    if not device_matches(device, tdev):
        kind = "the CPU" if getattr(device, "_host_memory", True) else \
            f"cuda:{getattr(getattr(device, '_ctx', None), 'ordinal', 0)}"
        raise ValueError(f"{label} is a torch tensor on {tdev}, but the module's device is on {kind}; load the "
                         f"module on a device of the tensors' kind (spy.create_torch_device(torch.device"
                         f"('{tdev}')))")


def shape_view(t: torch.Tensor, device, label: str) -> Tensor:
    """A spy.Tensor with `t`'s element type and shape but no memory (a fake / meta tensor under
    torch.compile): enough to resolve a call and compute its call shape, never to launch."""
    st = spy_dtype_of(t.dtype, label)
    b = object.__new__(_TorchHostBuffer)
    b.device = device
    b.desc = _desc(max(t.element_size(), 1), t.element_size())
    b._addr = 0
    v = object.__new__(Tensor)
    v.storage = b
    v.device = device
    v.dtype = st
    v._shape = tuple.__new__(Shape, tuple(t.shape) or (1,))
    v._strides = tuple.__new__(Shape, tuple(t.stride()) or (1,))
    v.offset = 0
    v.grad_in = None
    v.grad_out = None
    return v
