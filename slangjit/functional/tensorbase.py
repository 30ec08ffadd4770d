"""The pieces of `spy.Tensor` that need no Tensor (split from tensor.py, which re-exports them): SlangPy's
`Shape`, dtype resolution, the small host buffers calls allocate, raw byte access to a buffer, the extent
check of a strided view and the numpy structured dtype of a struct element."""
from __future__ import annotations

import ctypes
import sys as _sys
import threading
from typing import Any

import numpy as np

from . import typeview as S
from . import values as V
from ..runtime.device import Buffer, BufferDesc, BufferUsage, MemoryType

DEFAULT_USAGE = BufferUsage.shader_resource | BufferUsage.unordered_access      # 24


class Shape(tuple):
    """A tuple of ints that also has SlangPy's `Shape` helpers.  `Shape(None)` is SlangPy's invalid shape
    (no dimensions, `valid` False, printed "[invalid]")."""

    _invalid = False

    def __new__(cls, dims=(), *more):
        if more:                          # Shape(4096, 4096, 8), as SlangPy's Shape takes its dimensions
            dims = (dims,) + more
        if dims is None:
            s = tuple.__new__(cls, ())
            s._invalid = True
            return s
        if isinstance(dims, int):
            dims = (dims,)
        return tuple.__new__(cls, (int(d) for d in dims))

    def as_tuple(self) -> tuple:
        return tuple(self)

    def as_list(self) -> list:
        return list(self)

    @property
    def valid(self) -> bool:
        return not self._invalid

    def __eq__(self, other):
        if isinstance(other, Shape) and (self._invalid or other._invalid):
            return self._invalid == other._invalid
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __add__(self, other):
        return Shape(tuple(self) + tuple(other))

    def __str__(self):
        return "[invalid]" if self._invalid else "[" + ", ".join(str(d) for d in self) + "]"

    __repr__ = __str__

    @property
    def concrete(self) -> bool:
        return all(d >= 0 for d in self)

    def calc_contiguous_strides(self) -> "Shape":
        """The element strides of a contiguous (row-major) array of this shape."""
        return Shape(_contig_strides(tuple(self)))


def resolve_dtype(dtype: Any, module=None) -> S.SType:
    """A dtype given as an SType, Struct, Python type, spy vector class, numpy dtype or string -> SType."""
    if isinstance(dtype, S.SType):
        return dtype
    t = getattr(dtype, "_sj_stype", None)            # functional.Struct
    if t is not None:
        return t
    if dtype is float:
        return S.scalar("float")
    if dtype is int:
        return S.scalar("int")
    if dtype is bool:
        return S.scalar("bool")
    if isinstance(dtype, type) and issubclass(dtype, (V.VectorValue, V.MatrixValue)):
        return V.slang_type_of_vector(dtype())
    if isinstance(dtype, str):
        refl = getattr(module, "_refl", None)
        t = refl.find_type(dtype) if refl is not None else S.builtin_type(dtype)
        if t is None:
            t = S.parse_type_string(dtype, refl)
        return t
    try:
        nd = np.dtype(dtype)
    except TypeError:
        nd = None
    if nd is not None and nd.name in S.NUMPY_TO_SCALAR:
        return S.scalar(S.NUMPY_TO_SCALAR[nd.name])
    raise TypeError(f"Unsupported dtype {dtype!r}")


def _contig_strides(shape) -> tuple:
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


class _SmallBuffer(Buffer):
    """A Buffer backed by a ctypes array (cheap to allocate); its numpy view is made on first use."""

    @property
    def _mem(self):
        m = self.__dict__.get("_np")
        if m is None:
            m = self.__dict__["_np"] = np.frombuffer(self._c, dtype=np.uint8)
        return m


def staged(device) -> bool:
    """Whether the functional layer moves host data through device buffers for this device: always for a device
    whose memory is not host-visible (CUDA); on the CPU when the device's `functional_staged` option is set
    (`device.functional_staged = True`: tests of the GPU path without a GPU)."""
    return not getattr(device, "_host_memory", True) or bool(getattr(device, "functional_staged", False))


def _host(buf) -> bool:
    """True when the buffer's bytes are read as a host numpy array (`buf._mem`); False for device memory (CUDA)
    and for staged CPU devices."""
    return not staged(buf.device)


def _read_bytes(buf, start: int, n: int) -> np.ndarray:
    """Bytes [start, start + n) of a buffer: a view on the CPU, a copy from device memory otherwise."""
    if _host(buf):
        return buf._mem[start: start + n]
    rb = getattr(buf, "read_bytes", None)
    if rb is not None:
        return rb(start, n)
    return buf.to_numpy()[start: start + n]


def _write_bytes(buf, start: int, raw: np.ndarray) -> None:
    if _host(buf):
        buf._mem[start: start + raw.size] = raw
    else:
        buf.set_data(raw, start)


_DESCS: dict = {}
_CTYPES: dict = {}


def _small_buffer(device, nbytes: int, sz: int) -> Buffer:
    key = (nbytes, sz)
    desc = _DESCS.get(key)
    if desc is None:
        desc = BufferDesc(nbytes, sz, DEFAULT_USAGE, MemoryType.device_local, None, None, "")
        if len(_DESCS) < 4096:
            _DESCS[key] = desc
    ct = _CTYPES.get(nbytes)
    if ct is None:
        ct = ctypes.c_uint8 * nbytes
        if len(_CTYPES) < 4096:
            _CTYPES[nbytes] = ct
    b = object.__new__(_SmallBuffer)
    b.device = device
    b.desc = desc
    c = ct()                                   # zero-initialised, malloc-aligned
    b._c = c
    b._addr = ctypes.addressof(c)
    return b


class _PooledBuffer(Buffer):
    """A big call result's storage (Tensor._alloc with `fill=False`) taken from the free list of its size and given
    back to it when the buffer dies, unless anything else still holds its memory (a numpy view of it, anything
    whose base it is): a freshly mapped buffer costs a page fault per page and the kernel zeroing it, which is
    as long as the call's own work for a streaming kernel (2^24 floats: 3.3 ms of system time).  The memory is
    handed out uninitialised: the call that allocates it writes every element."""

    def __del__(self):
        try:
            raw = self.__dict__.pop("_raw", None)
            if raw is None:
                return
            self.__dict__.pop("_mem", None)         # our view: with no other reference it releases `raw`
            if _sys.getrefcount(raw) == 2:          # this frame and the call's argument: nothing else has it
                _pool_put(raw)
        except Exception:  # noqa: BLE001  (interpreter shutdown: module globals may be gone)
            pass


# Free lists of big result buffers by size (bytes), at most POOL_BYTES in all, only for sizes >= POOL_MIN_BYTES.
POOL_MIN_BYTES = 1 << 20
POOL_BYTES = 1 << 30
_pool: dict = {}
_pool_total = [0]
_pool_lock = threading.Lock()


def _pool_put(raw: np.ndarray) -> None:
    n = raw.nbytes
    with _pool_lock:
        if _pool_total[0] + n <= POOL_BYTES:
            _pool.setdefault(n, []).append(raw)
            _pool_total[0] += n


def _pool_take(n: int):
    with _pool_lock:
        free = _pool.get(n)
        if not free:
            return None
        _pool_total[0] -= n
        return free.pop()


def clear_buffer_pool() -> None:
    """Drop the free big result buffers (their memory goes back to the system)."""
    with _pool_lock:
        _pool.clear()
        _pool_total[0] = 0


def _pooled_buffer(device, nbytes: int, sz: int) -> Buffer:
    desc = BufferDesc(nbytes, sz, DEFAULT_USAGE, MemoryType.device_local, None, None, "")
    raw = _pool_take(nbytes + 64)
    if raw is None:
        raw = np.empty(nbytes + 64, np.uint8)       # fresh pages read as zeros; written by the call anyway
    off = (-raw.ctypes.data) % 64
    b = object.__new__(_PooledBuffer)
    b.device = device
    b.desc = desc
    b._raw = raw
    b._mem = raw[off:off + nbytes]
    b._addr = raw.ctypes.data + off
    return b


def _check_extent(storage, dt, shape, strides, offset: int) -> None:
    """A view must lie inside its storage: kernels address it without further checks."""
    size = getattr(storage, "size", None)
    if size is None or not shape or any(d == 0 for d in shape):
        return
    lo = hi = offset
    for d, st in zip(shape, strides):
        if st > 0:
            hi += (d - 1) * st
        else:
            lo += (d - 1) * st
    esz = max(dt.size or 0, 1)
    if lo < 0 or (hi + 1) * esz > size:
        raise ValueError(f"Tensor view (shape {tuple(shape)}, strides {tuple(strides)}, offset {offset}) reaches "
                         f"elements {lo}..{hi} of a storage of {size // esz} {dt.name} elements")


def struct_np_dtype(t: S.SType):
    """The numpy structured dtype of a struct type (its layout's field offsets; nested structs nest, vector /
    matrix / array fields are subarrays); None for other types or a field numpy cannot hold."""
    if t.kind != "struct" or not t.is_concrete():
        return None
    names, formats, offsets = [], [], []
    for name, off, ft in t.field_offsets():
        if ft.kind == "struct":
            f = struct_np_dtype(ft)
        elif ft.kind == "enum":
            f = ft.underlying.np_dtype
        elif ft.scalar is not None and ft.kind in ("scalar", "vector", "matrix", "array"):
            f = np.dtype((ft.np_dtype, tuple(ft.shape))) if ft.shape else ft.np_dtype
        else:
            f = None
        if f is None:
            return None
        names.append(name)
        formats.append(f)
        offsets.append(off)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": t.size})
