"""`spy.Tensor`: a strided N-D view over a device `Buffer`, with optional gradient tensors.

Strides and offset are in elements.  The element layout is C natural layout (float3: 12 bytes), the same
the compiler uses for `T*` / `StructuredBuffer<T>` elements.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from .functional import dlpack as _dlpack
from .functional import layout as _layout
from .functional import typeview as S
from .functional import values as V
from .runtime import layout_pack as lp
from .runtime.device import Buffer, BufferUsage, MemoryType
from .functional.tensorbase import (DEFAULT_USAGE, Shape, _check_extent, _contig_strides, _host,  # noqa: F401
                                      _read_bytes, _small_buffer, _SmallBuffer, _write_bytes, resolve_dtype,
                                      staged, struct_np_dtype, POOL_MIN_BYTES, _pooled_buffer)


_ONE_STRIDE = tuple.__new__(Shape, (1,))


class Tensor:
    """A strided N-D view over a Buffer of elements of a Slang type."""

    _sj_tensor = True

    def __init__(self, storage: Any = None, dtype: Any = None, shape: Sequence[int] = None, strides: Sequence[int] = (),
                 offset: int = 0, grad_in: Optional["Tensor"] = None, grad_out: Optional["Tensor"] = None,
                 element_type: Any = None, usage=None):
        if dtype is None:
            dtype = element_type
        if shape is None:
            raise ValueError("Tensor needs a shape")
        if dtype is None:
            raise ValueError("Element type (dtype) must be specified")
        dt = resolve_dtype(dtype)
        shape = tuple(int(s) for s in shape)
        if len(shape) == 0:
            raise ValueError("Cannot create a tensor with zero dimensions")
        if not isinstance(storage, Buffer):
            device = storage
            n = max(1, math.prod(shape)) * max(dt.size, 1)
            storage = device.create_buffer(size=n, struct_size=max(dt.size, 1),
                                           usage=DEFAULT_USAGE if usage is None else usage)
        self.storage: Buffer = storage
        self.device = storage.device
        self.dtype: S.SType = dt
        self._shape = Shape(shape)
        self._strides = Shape(tuple(int(s) for s in strides) if strides else _contig_strides(shape))
        if len(self._strides) != len(self._shape):
            raise ValueError(f"Shape dimensions ({len(self._shape)}) must match stride dimensions "
                             f"({len(self._strides)})")
        self.offset = int(offset)
        _check_extent(self.storage, dt, self._shape, self._strides, self.offset)
        self.grad_in: Optional[Tensor] = grad_in
        self.grad_out: Optional[Tensor] = grad_out

    @classmethod
    def _alloc(cls, device, dt: S.SType, shape: tuple, fill: bool = True, sz: int = 0) -> "Tensor":
        """Fast allocation of a contiguous, writable tensor (used for auto-allocated call results).  `fill=False`:
        the caller writes every byte before anything reads it, so a big one on the CPU may reuse the memory of a
        dead result of the same size (tensorbase._pooled_buffer), uninitialised.  `sz`: dt's size when the caller
        knows it (computing it costs more than the rest of a small allocation)."""
        n = 1
        for d in shape:
            n *= d
        sz = sz or dt.size or 1
        nbytes = (n or 1) * sz
        t = object.__new__(cls)
        host = getattr(device, "_host_memory", True)
        if nbytes <= 65536 and host:
            t.storage = _small_buffer(device, nbytes, sz)
        elif not fill and nbytes >= POOL_MIN_BYTES and host and not staged(device):
            t.storage = _pooled_buffer(device, nbytes, sz)
        else:
            t.storage = device.create_buffer(size=nbytes, struct_size=sz, usage=DEFAULT_USAGE)
        t.device = device
        t.dtype = dt
        t._shape = tuple.__new__(Shape, shape)
        t._strides = _ONE_STRIDE if len(shape) == 1 else tuple.__new__(Shape, _contig_strides(shape))
        t.offset = 0
        t.grad_in = None
        t.grad_out = None
        return t

    # -- factories

    @staticmethod
    def empty(device, shape: Sequence[int] = None, dtype: Any = None, usage=DEFAULT_USAGE,
              memory_type=MemoryType.device_local, program_layout=None,
              element_count: Optional[int] = None) -> "Tensor":
        if dtype is None:
            raise ValueError("Element type (dtype) must be specified")
        if element_count is not None:             # SlangPy's older spelling of a 1-D shape
            if shape is not None:
                raise ValueError("Tensor.empty: give shape or element_count, not both")
            shape = (int(element_count),)
        if shape is None:
            raise ValueError("Tensor.empty: a shape (or element_count) must be specified")
        if isinstance(shape, int):
            shape = (shape,)
        return Tensor(device, dtype, tuple(shape), usage=usage)

    @staticmethod
    def zeros(device, shape: Sequence[int] = None, dtype: Any = None, usage=DEFAULT_USAGE,
              memory_type=MemoryType.device_local, program_layout=None,
              element_count: Optional[int] = None) -> "Tensor":
        if usage is None:
            usage = DEFAULT_USAGE
        if not int(usage) & int(BufferUsage.unordered_access):
            raise RuntimeError("Tensor.zeros: a read-only tensor (usage without unordered_access) cannot be "
                               "cleared; use Tensor.empty and copy_from_numpy")
        return Tensor.empty(device, shape, dtype, usage, element_count=element_count)   # buffers are zeroed

    @staticmethod
    def ones(device, shape: Sequence[int], dtype: Any = None, usage=DEFAULT_USAGE,
             memory_type=MemoryType.device_local, program_layout=None) -> "Tensor":
        t = Tensor.empty(device, shape, dtype, usage)
        if t.dtype.scalar is None:
            raise ValueError(f"Tensor.ones needs a numeric element type, got {t.dtype.name}")
        n = math.prod(t.shape) * (math.prod(t.dtype.shape) if t.dtype.shape else 1)
        _write_bytes(t.storage, 0, np.ones(n, t.dtype.np_dtype).view(np.uint8))
        return t

    @staticmethod
    def empty_like(other: "Tensor") -> "Tensor":
        return Tensor.empty(other.device, other.shape, other.dtype, other.usage)

    @staticmethod
    def zeros_like(other: "Tensor") -> "Tensor":
        return Tensor.zeros(other.device, other.shape, other.dtype, other.usage)

    @staticmethod
    def from_numpy(device, ndarray: np.ndarray, usage=DEFAULT_USAGE, memory_type=MemoryType.device_local,
                   program_layout=None, target_slang_dtype=None, dtype=None, shape=None) -> "Tensor":
        """A tensor holding a copy of `ndarray`; `dtype=` gives the Slang element type (needed for structured
        arrays), `shape=` the tensor's shape (it must hold the same number of elements)."""
        t = Tensor._from_numpy(device, ndarray, usage, target_slang_dtype, dtype)
        if shape is not None:
            shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
            if int(np.prod(shape, dtype=np.int64)) != t.element_count:
                raise ValueError(f"from_numpy: shape={shape} holds {int(np.prod(shape, dtype=np.int64))} elements, "
                                 f"the array {t.element_count} of {t.dtype.name}")
            if shape != tuple(t.shape):
                t = t.view(shape=shape)
        return t

    @staticmethod
    def _from_numpy(device, ndarray, usage, target_slang_dtype, dtype) -> "Tensor":
        a = np.asarray(ndarray)
        if target_slang_dtype is None:
            target_slang_dtype = dtype          # SlangPy's newer spelling
        if target_slang_dtype is not None:
            dt = resolve_dtype(target_slang_dtype)
            if a.dtype.names is not None or (dt.kind == "struct"):
                if a.dtype.itemsize != dt.size:
                    raise ValueError(f"numpy dtype itemsize ({a.dtype.itemsize}) does not match the size of "
                                     f"{dt.name} ({dt.size})")
                if not a.flags.c_contiguous:
                    raise ValueError("from_numpy: structured arrays must be C-contiguous")
                t = Tensor(device, dt, a.shape or (1,), usage=usage)
                _write_bytes(t.storage, 0, a.reshape(-1).view(np.uint8))
                return t
            es = tuple(dt.shape)
            shape = a.shape[: a.ndim - len(es)] if es else a.shape
            t = Tensor(device, dt, shape or (1,), usage=usage)
            t.copy_from_numpy(np.ascontiguousarray(a.astype(dt.np_dtype, copy=False)))
            return t
        if a.dtype.names is not None:
            raise ValueError(f"Structured numpy dtype {a.dtype} needs the Slang element type: pass dtype= (e.g. "
                             f"Tensor.from_numpy(device, data, dtype=module.MyStruct))")
        if a.dtype.name not in S.NUMPY_TO_SCALAR:
            raise ValueError(f"Unsupported numpy dtype {a.dtype}")
        dt = S.scalar(S.NUMPY_TO_SCALAR[a.dtype.name])
        if a.ndim == 0:
            a = a.reshape(1)
        t = Tensor(device, dt, a.shape, usage=usage)
        t.copy_from_numpy(np.ascontiguousarray(lp.native(a)))
        return t

    @staticmethod
    def numpy(device, ndarray: np.ndarray) -> "Tensor":
        warnings.warn("Tensor.numpy is deprecated, use Tensor.from_numpy", DeprecationWarning, stacklevel=2)
        return Tensor.from_numpy(device, ndarray)

    # -- properties

    shape = property(lambda self: self._shape)
    strides = property(lambda self: self._strides)

    @property
    def usage(self):
        return self.storage.usage

    @property
    def memory_type(self):
        return self.storage.memory_type

    @property
    def element_count(self) -> int:
        return math.prod(self._shape)

    @property
    def writable(self) -> bool:
        return bool(int(self.storage.desc.usage) & 16)

    is_writable = writable          # SlangPy's name

    @property
    def grad(self) -> "Tensor":
        if self.grad_out is None:
            raise ValueError("Tensor has no grad.")
        return self.grad_out

    def is_contiguous(self) -> bool:
        exp = 1
        for d, s in zip(reversed(self._shape), reversed(self._strides)):
            if d != 1 and s != exp:
                return False
            exp *= d
        return True

    # -- data

    def _span(self) -> tuple:
        """(first element, number of elements) of the storage that the view touches."""
        if any(d == 0 for d in self._shape):
            return self.offset, 0
        last = sum((d - 1) * st for d, st in zip(self._shape, self._strides))
        return self.offset, last + 1

    def _flat_scalar_dtype(self):
        dt = self.dtype
        if dt.kind in ("scalar", "vector", "matrix", "array") and dt.scalar is not None:
            nd = dt.np_dtype
            return nd, max(1, dt.size // nd.itemsize)
        if dt.kind == "enum":
            return dt.underlying.np, 1
        return None

    def to_numpy(self) -> np.ndarray:
        """A copy of the elements: numeric element types give their dims as trailing dims; a struct element
        type gives a numpy structured array (one field per struct field, as SlangPy)."""
        sz = self.dtype.size
        first, count = self._span()
        if any(st < 0 for st in self._strides):
            raise ValueError("to_numpy: negative strides are not supported")
        raw = _read_bytes(self.storage, first * sz, count * sz) if count else np.zeros(max(sz, 1), np.uint8)
        fs = self._flat_scalar_dtype()
        if fs is not None:
            nd, k = fs
            flat = raw[: (raw.size // nd.itemsize) * nd.itemsize].view(nd)
            es = tuple(self.dtype.shape)
            inner = _contig_strides(es) if es else ()
            isz = flat.itemsize
            strides = tuple(s * k * isz for s in self._strides) + tuple(s * isz for s in inner)
            return np.lib.stride_tricks.as_strided(flat, shape=tuple(self._shape) + es, strides=strides).copy()
        strides = tuple(s * sz for s in self._strides) + (1,)
        b = np.lib.stride_tricks.as_strided(raw, shape=tuple(self._shape) + (sz,), strides=strides).copy()
        sd = struct_np_dtype(self.dtype)
        return b.view(sd).reshape(tuple(self._shape)) if sd is not None else b

    # -- torch (the slangjit.torch path; torch is imported by the caller's code, not by slangjit)

    def to_torch(self):
        """A torch tensor over this tensor's memory (DLPack, no copy); element dims become trailing dims."""
        import torch  # reason: optional dependency, loaded only when a tensor is converted
        return torch.from_dlpack(self)

    @staticmethod
    def from_torch(device, tensor) -> "Tensor":
        """A Tensor over a torch tensor's memory (no copy; strides kept) on `device`, which must hold it
        (the CPU device for CPU tensors, the CUDA device of the tensor's GPU)."""
        if not hasattr(device, "create_buffer") and hasattr(tensor, "create_buffer"):
            device, tensor = tensor, device      # from_torch(tensor, device) order
        return Tensor.from_dlpack(tensor, device)

    def cursor(self, start: int = 0, count: Optional[int] = None) -> "TensorCursor":
        """Element access from Python (SlangPy's `tensor.cursor()`): `c[i].read()` gives element i (flat,
        row-major over the shape) as a Python value (float / int, float3, float2x2, a list for an array, a
        dict for a struct); `c[i].write(v)` changes it in the cursor and `c.apply()` writes the changes to
        the tensor.  `c[i]["field"]` reaches into a struct element."""
        return TensorCursor(self, start, count)

    def copy_from_torch(self, tensor) -> None:
        """Copy a torch tensor's elements into this (contiguous) tensor (SlangPy's `copy_from_torch`)."""
        a = np.ascontiguousarray(tensor.detach().cpu().numpy())
        if not self.is_contiguous():
            raise ValueError(f"Destination buffer view must be contiguous (shape {tuple(self.shape)}, strides "
                             f"{tuple(self.strides)})")
        start = self.offset * self.dtype.size
        if start + a.nbytes > self.storage.size:
            raise ValueError(f"Tensor is larger than the buffer storage ({a.nbytes} > {self.storage.size - start})")
        self.copy_from_numpy(a)

    def copy_from_numpy(self, data) -> None:
        a = lp.native(np.asarray(data))        # big-endian data is converted, never copied as raw bytes
        # SlangPy's wording
        if not a.flags.c_contiguous:
            raise ValueError("Source Numpy array must be contiguous")
        if not self.is_contiguous():
            # both of SlangPy's spellings (older versions say "buffer view")
            raise ValueError(f"Destination tensor must be contiguous (Destination buffer view must be contiguous: "
                             f"shape {tuple(self.shape)}, strides {tuple(self.strides)})")
        if a.dtype.names is not None and a.dtype.itemsize != self.dtype.size:
            raise ValueError(f"Structured numpy dtype {a.dtype}: its byte size ({a.dtype.itemsize}) differs from "
                             f"that of {self.dtype.name} ({self.dtype.size})")
        raw = a.reshape(-1).view(np.uint8)
        start = self.offset * self.dtype.size
        if start + raw.size > self.storage.size:
            raise ValueError(f"Numpy array is larger than the tensor storage ({raw.size} > "
                             f"{self.storage.size - start})")
        _write_bytes(self.storage, start, raw)

    def clear(self, command_encoder=None) -> None:
        """Zero the tensor's storage (now, or when `command_encoder`'s commands are submitted)."""
        if not self.writable:
            raise RuntimeError("Cannot clear a read-only tensor: its storage has no unordered_access usage "
                               "(clearing is a write)")
        if command_encoder is not None:
            command_encoder.append(self._clear_now)
            return
        self._clear_now()

    def _clear_now(self) -> None:
        if _host(self.storage):
            self.storage._mem[: self.storage.size] = 0
        elif hasattr(self.storage, "clear"):
            self.storage.clear()
        else:
            self.storage.set_data(np.zeros(self.storage.size, np.uint8))

    def _sj_fields(self) -> dict:
        return {"_data": self.storage._addr, "_shape": list(self._shape), "_strides": list(self._strides),
                "_offset": self.offset}

    def _sj_struct_fields(self, type_name: str) -> dict:
        """The fields of the slangpy.slang tensor struct `type_name` (a tensor inside a struct or array value):
        the primal's view, and for the differentiable kinds the gradient tensors they hold."""
        kind = type_name.split("<", 1)[0].strip()
        if kind in ("Tensor", "RWTensor", "WTensor", "AtomicTensor"):
            return self._sj_fields()
        if kind in ("PrimalTensor", "WPrimalTensor", "RWPrimalTensor"):
            return {"_primal": self._sj_fields()}
        need = {"DiffTensor": ("grad_out",), "WDiffTensor": ("grad_in",),
                "RWDiffTensor": ("grad_out", "grad_in")}.get(kind)
        if need is None:
            raise TypeError(f"a Tensor cannot be passed as {type_name}")
        out = {"_primal": self._sj_fields()}
        for g in need:
            t = getattr(self, g)
            if t is None:
                raise ValueError(f"a Tensor passed as {type_name} needs its {g} tensor (use with_grads)")
            out["_" + g] = t._sj_fields()
        return out

    def uniforms(self) -> dict:
        return {"_data": self.storage, "_shape": list(self._shape), "_offset": self.offset,
                "_strides": list(self._strides)}

    # -- grads

    def with_grads(self, grad_in: Optional["Tensor"] = None, grad_out: Optional["Tensor"] = None,
                   zero: bool = False) -> "Tensor":
        if grad_in is None and grad_out is None:
            d = self.dtype.derivative
            if d is None:
                raise ValueError(f"No derivative type found for {self.dtype.name}")
            g = Tensor(self.device, d, tuple(self._shape),
                       usage=DEFAULT_USAGE | BufferUsage.shared)
            grad_in = grad_out = g
        want = self.dtype.derivative
        for what, g in (("grad_in", grad_in), ("grad_out", grad_out)):
            if g is None:
                continue
            if not getattr(g, "_sj_tensor", False):
                raise TypeError(f"with_grads: {what} must be a spy.Tensor, got {type(g).__name__}")
            if want is not None and g.dtype != want:
                # a gradient of another element type would be read and written as the derivative type
                raise ValueError(f"with_grads: Invalid element type of {what}: {g.dtype.name}, expected "
                                 f"{want.name} (the derivative of {self.dtype.name})")
        if zero:
            for g in {id(x): x for x in (grad_in, grad_out) if x is not None}.values():
                g.clear()
        return Tensor(self.storage, self.dtype, self._shape, self._strides, self.offset, grad_in, grad_out)

    def detach(self) -> "Tensor":
        return Tensor(self.storage, self.dtype, self._shape, self._strides, self.offset)

    # -- views

    def view(self, shape: Sequence[int], strides: Sequence[int] = (), offset: int = 0) -> "Tensor":
        shape = tuple(shape)
        if strides and len(strides) != len(shape):
            raise ValueError(f"Shape dimensions ({len(shape)}) must match stride dimensions ({len(strides)})")
        if strides and any(s < 0 for s in strides):
            raise ValueError("Strides must be positive")
        if self.offset + offset < 0:
            raise ValueError("Tensor view offset is negative (Buffer view offset is negative)")
        return Tensor(self.storage, self.dtype, shape, tuple(strides), self.offset + offset)

    def broadcast_to(self, shape: Sequence[int]) -> "Tensor":
        shape = tuple(shape)
        if len(shape) < len(self._shape):
            raise ValueError("Broadcast shape must be larger than tensor shape")
        pad = len(shape) - len(self._shape)
        strides = [0] * pad
        for i, (d, s) in enumerate(zip(self._shape, self._strides)):
            nd = shape[pad + i]
            if d == nd:
                strides.append(s)
            elif d == 1:
                strides.append(0)
            else:
                raise ValueError(f"Current dimension {d} at index {i} must be equal to new dimension {nd} or 1")
        return Tensor(self.storage, self.dtype, shape, tuple(strides), self.offset, self.grad_in, self.grad_out)

    def __getitem__(self, idx) -> "Tensor":
        if not isinstance(idx, tuple):
            idx = (idx,)
        n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
        if n_real > len(self._shape):
            raise IndexError(f"Too many indices for tensor of dimension {len(self._shape)}")
        shape, strides, off = [], [], self.offset
        dim = 0
        for pos, i in enumerate(idx):
            if i is Ellipsis:
                n = len(self._shape) - n_real
                for _ in range(n):
                    shape.append(self._shape[dim])
                    strides.append(self._strides[dim])
                    dim += 1
            elif i is None:
                shape.append(1)
                strides.append(0)
            elif isinstance(i, (int, np.integer)):
                i = int(i)
                d = self._shape[dim]
                if i < 0:
                    i += d
                if not 0 <= i < d:
                    raise IndexError(f"Index {i} is out of bounds for dimension {dim} with size {d}")
                off += i * self._strides[dim]
                dim += 1
            elif isinstance(i, slice):
                start, stop, step = i.indices(self._shape[dim])
                if step <= 0:
                    raise ValueError("Slice step must be positive")
                n = max(0, (stop - start + step - 1) // step)
                off += start * self._strides[dim]
                shape.append(n)
                strides.append(self._strides[dim] * step)
                dim += 1
            else:
                raise ValueError(f"Illegal argument at dimension {pos}: Allowed are int, slice, ..., or None")
        while dim < len(self._shape):
            shape.append(self._shape[dim])
            strides.append(self._strides[dim])
            dim += 1
        if not shape:
            shape, strides = [1], [1]
        return Tensor(self.storage, self.dtype, tuple(shape), tuple(strides), off)

    def point_to(self, other: "Tensor") -> None:
        if tuple(other.shape) != tuple(self.shape) or other.dtype.size != self.dtype.size:
            raise ValueError("point_to: shape and element stride must match")
        self.storage = other.storage
        self._strides = other._strides
        self.offset = other.offset

    # -- DLPack

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule viewing this tensor (numpy / torch / cupy `from_dlpack(tensor)`)."""
        return _dlpack.to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple:
        return _dlpack.dlpack_device(self)

    @staticmethod
    def from_dlpack(obj, device=None) -> "Tensor":
        """A Tensor over another library's memory (no copy): `obj` has `__dlpack__` (numpy on the CPU device,
        torch / cupy CUDA tensors on a CUDA device), or is a DLPack capsule (then `device` is required)."""
        if device is not None and not hasattr(device, "create_buffer") and hasattr(obj, "create_buffer"):
            obj, device = device, obj           # from_dlpack(device, obj) order
        b, dt, shape, strides = _dlpack.from_dlpack(obj, device, DEFAULT_USAGE)
        return Tensor(b, dt, shape, strides, 0)

    def __str__(self) -> str:
        return str(self.to_numpy())

    def __repr__(self) -> str:
        return (f"Tensor(dtype={self.dtype.name}, shape={list(self._shape)}, "
                f"has_grad_in={self.grad_in is not None}, has_grad_out={self.grad_out is not None})")


class NDBuffer(Tensor):
    """SlangPy's NDBuffer: a contiguous N-D buffer of elements (a Tensor without gradients), made as
    `NDBuffer(device, dtype, element_count)` or `NDBuffer(device, dtype, shape=(...))`."""

    def __init__(self, device, dtype: Any = None, element_count: Optional[int] = None,
                 shape: Optional[Sequence[int]] = None, usage=None, memory_type=MemoryType.device_local,
                 program_layout=None):
        if isinstance(device, Buffer):
            raise TypeError("NDBuffer: pass the device (NDBuffer(device, dtype, element_count / shape))")
        if shape is None and element_count is None:
            raise ValueError("NDBuffer: Either element_count or shape must be provided")
        if shape is not None and element_count is not None:
            raise ValueError("NDBuffer: Only one of element_count or shape can be provided")
        if shape is None:
            shape = (int(element_count),)
        elif isinstance(shape, int):
            shape = (shape,)
        super().__init__(device, dtype, tuple(shape), usage=usage)

    def with_grads(self, *args, **kwargs):
        raise ValueError("NDBuffer carries no gradients: use a Tensor")

    # Tensor's factories, returning NDBuffers (an NDBuffer is a Tensor without gradients)
    @staticmethod
    def empty(*args, **kwargs) -> "NDBuffer":
        return NDBuffer._of(Tensor.empty(*args, **kwargs))

    @staticmethod
    def zeros(*args, **kwargs) -> "NDBuffer":
        return NDBuffer._of(Tensor.zeros(*args, **kwargs))

    @staticmethod
    def ones(*args, **kwargs) -> "NDBuffer":
        return NDBuffer._of(Tensor.ones(*args, **kwargs))

    @staticmethod
    def empty_like(other: Tensor) -> "NDBuffer":
        return NDBuffer._of(Tensor.empty_like(other))

    @staticmethod
    def zeros_like(other: Tensor) -> "NDBuffer":
        return NDBuffer._of(Tensor.zeros_like(other))

    @staticmethod
    def from_numpy(*args, **kwargs) -> "NDBuffer":
        return NDBuffer._of(Tensor.from_numpy(*args, **kwargs))

    @staticmethod
    def _of(t: Tensor) -> "NDBuffer":
        t.__class__ = NDBuffer
        return t


class _ElementLayout:
    def __init__(self, dt: S.SType):
        self.type = dt
        self.kind = _layout.TypeReflection(dt).kind          # TypeReflection.Kind (scalar, vector, struct, ...)
        self.size = dt.size
        self.stride = dt.size
        self.name = dt.name
        self.col_count = getattr(dt, "n", None) or getattr(dt, "cols", None) or 1
        self.row_count = getattr(dt, "rows", None) or 1


class TensorCursor:
    """A tensor's elements as Python values (Tensor.cursor)."""

    def __init__(self, tensor: Tensor, start: int = 0, count: Optional[int] = None):
        if not tensor.is_contiguous():
            raise ValueError("cursor: the tensor must be contiguous (use a contiguous copy)")
        n = tensor.element_count
        count = n - start if count is None else count
        if start < 0 or count < 0 or start + count > n:
            raise IndexError(f"cursor: elements {start}..{start + count} outside the tensor's {n}")
        self.tensor = tensor
        self.start, self.count = start, count
        dt = tensor.dtype
        self.element_type_layout = _ElementLayout(dt)
        self.element_type = self.element_type_layout
        sz = dt.size
        self._raw = _read_bytes(tensor.storage, (tensor.offset + start) * sz, count * sz).copy() if count \
            else np.zeros(0, np.uint8)

    def __len__(self) -> int:
        return self.count

    @property
    def element_count(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> "_ElementCursor":
        i = int(i)
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError(f"cursor index {i} outside the {self.count} elements")
        sz = self.tensor.dtype.size
        return _ElementCursor(self, self.tensor.dtype, i * sz)

    def write_from_numpy(self, data) -> None:
        a = lp.native(np.ascontiguousarray(data)).reshape(-1).view(np.uint8)
        if a.size != self._raw.size:
            raise ValueError(f"cursor.write_from_numpy: {a.size} bytes for {self._raw.size} bytes of elements")
        self._raw[:] = a

    def to_numpy(self) -> np.ndarray:
        return self._raw.copy()

    def apply(self) -> None:
        """Write the cursor's elements (with every change made through it) to the tensor."""
        if self.count:
            _write_bytes(self.tensor.storage, (self.tensor.offset + self.start) * self.tensor.dtype.size, self._raw)


class _ElementCursor:
    def __init__(self, owner: TensorCursor, dt: S.SType, offset: int):
        self._owner = owner
        self.type = dt
        self._offset = offset

    @property
    def element_type_layout(self):
        return _ElementLayout(self.type)

    def read(self):
        return V.python_value_of(self.type, self._owner._raw[self._offset:self._offset + self.type.size])

    def write(self, value) -> None:
        dt = self.type
        if isinstance(value, np.ndarray) and dt.scalar is not None and dt.kind in ("scalar", "vector", "matrix",
                                                                                   "array"):
            a = np.ascontiguousarray(value, dtype=dt.np_dtype).reshape(-1).view(np.uint8)
            if a.size != dt.size:
                raise ValueError(f"cursor write: {a.size} bytes for a {dt.name} of {dt.size} bytes")
            self._owner._raw[self._offset:self._offset + dt.size] = a
            return
        lp.pack_value(self._owner._raw, self._offset, dt.layout, value, "cursor", lp.PackContext("cursor"))

    def __getitem__(self, key):
        dt = self.type
        if isinstance(key, str):
            if not isinstance(dt, S.StructT):
                raise KeyError(f"cursor: {dt.name} has no field '{key}'")
            for n, off, ft in dt.field_offsets():
                if n == key:
                    return _ElementCursor(self._owner, ft, self._offset + off)
            raise KeyError(f"cursor: {dt.name} has no field '{key}'")
        if isinstance(dt, S.ArrayT):
            i = int(key)
            if not 0 <= i < dt.n:
                raise IndexError(f"cursor: index {i} outside {dt.name}")
            return _ElementCursor(self._owner, dt.elem, self._offset + i * dt.elem.size)
        raise TypeError(f"cursor: cannot index a {dt.name} element")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]


class BufferCursor(TensorCursor):
    """SlangPy's `BufferCursor(element_layout, buffer)`: a buffer's elements of one type as Python values
    (`cursor[i].read()`, `cursor[i]["field"].read()`, `cursor[i].write(v)`, `cursor.apply()`).  The layout is
    a `buffer_layout` (of a Struct, a TypeReflection or a tensor's dtype) or a dtype."""

    def __init__(self, element_layout, buffer: Buffer, load_before_write: bool = True):
        t = getattr(element_layout, "type", None)
        dt = resolve_dtype(t if isinstance(t, S.SType) else element_layout)
        if not isinstance(buffer, Buffer):
            raise TypeError(f"BufferCursor: expected a Buffer, got {type(buffer).__name__}")
        if dt.size <= 0:
            raise ValueError(f"BufferCursor: {dt.name} has no size")
        n = buffer.size // dt.size
        if n == 0:
            raise ValueError(f"BufferCursor: the buffer ({buffer.size} bytes) holds no {dt.name} ({dt.size} bytes)")
        super().__init__(Tensor(buffer, dt, (n,)))
