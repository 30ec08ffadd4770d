"""The CUDA device: the same compute API as the CPU device, on NVIDIA GPUs.

    device = slangjit.create_device(type=slangjit.DeviceType.cuda)   # or automatic, with a GPU

Built on NVIDIA's `cuda-bindings` (`cuda.bindings.driver` + `cuda.bindings.nvrtc`); no nvcc, no
CUDA toolkit, no torch (`pip install 'slangjit[cuda]'`).

* Context: the device's *primary* context (cuDevicePrimaryCtxRetain), the one the CUDA runtime
  and PyTorch use, made current on whichever Python thread calls in.
* Stream: one stream per device, created with default flags, so it is ordered with the legacy
  default stream (PyTorch's default). `dispatch(..., cuda_stream=h)` launches on another stream.
* Buffers: cuMemAlloc, zero-filled; `device_address` is the device pointer (usable as a
  `uniform T*`); `to_numpy` waits for the stream and copies back; `copy_from_numpy` copies in
  stream order.
* Kernels: the front end emits CUDA C++ (emit/cuda.py documents the kernel ABI); NVRTC builds a
  cubin for the device's exact arch (sm_XY), cached in memory and on disk (cuda_compiler.py),
  keyed by source hash + arch + NVRTC version + options; modules are cached per context.
  The globals block goes to the module's `__constant__ sj_globals` with cuMemcpyHtoDAsync from
  a pinned staging ring (no host stall; skipped when the bytes did not change since the last
  launch of the module); the entry point's parameter block is the kernel argument.
* `device.wait()` synchronizes the device's stream only.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any, Optional, Sequence

import numpy as np

from ..compiler.passes.options import DEFAULT_OPTIONS, PipelineOptions
from ..compiler.emit.cuda import CUDA_STACK_BYTES, CUDA_STACK_SYMBOL
from ..compiler.reflection import CUDA_GLOBALS_SYMBOL, CompiledProgram
from . import cuda_compiler       # the image cache: every kernel load asks it (imports no NVRTC itself)
from . import layout_pack as _lp
from .kernel_errors import ERROR_RECORD_SYMBOL, ErrorRecord, raise_if_failed, sites_lookup
from .base import (Buffer, BufferDesc, Device, DeviceInfo, DeviceType, KernelBase,
                   ShaderProgram)


class CudaError(RuntimeError):
    """A CUDA driver call failed."""


class CudaUnavailableError(CudaError):
    """No usable CUDA GPU (or cuda-bindings / the driver is missing)."""


_driver = None


def _drv():
    global _driver
    if _driver is None:
        try:
            from cuda.bindings import driver  # noqa: PLC0415  (optional dependency: `import slangjit` needs no cuda-bindings)
        except ImportError as e:
            raise CudaUnavailableError("CUDA device: the 'cuda-bindings' package is not installed "
                                       "(pip install 'slangjit[cuda]')") from e
        _driver = driver
    return _driver


_LIBCUDA: list = []


def _direct_launcher(fn_obj):
    """(the CUfunction's handle, libcuda's cuLaunchKernel via ctypes), or False where that is not possible
    (then cuda-bindings' wrapper launches).  The same driver entry point cuda-bindings calls, without its
    per-call argument conversion."""
    try:
        if not _LIBCUDA:
            f = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            _LIBCUDA.append(f)
        h = int(fn_obj)
        return (h, _LIBCUDA[0]) if h else False
    except (OSError, AttributeError, TypeError, ValueError):
        return False


def _stream_int(stream) -> int:
    """A CUstream (or None / 0: the legacy default stream) as its handle value."""
    return int(stream) if stream is not None else 0


def _ck(res, what: str):
    """cuda-bindings returns (CUresult, *values)."""
    if isinstance(res, tuple):
        status, vals = res[0], res[1:]
    else:
        status, vals = res, ()
    if int(status) != 0:
        name = getattr(status, "name", str(status))
        raise CudaError(f"CUDA {what} failed: {name} ({int(status)})")
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else vals


_init_lock = threading.Lock()
_init_state: Optional[str] = None      # None: not tried; "" ok; else the error message


def _init() -> None:
    global _init_state
    with _init_lock:
        if _init_state is None:
            try:
                d = _drv()
                _ck(d.cuInit(0), "cuInit")
                n = _ck(d.cuDeviceGetCount(), "cuDeviceGetCount")
                _init_state = "" if n > 0 else "no CUDA GPU found"
            except CudaUnavailableError as e:
                _init_state = str(e)
            except Exception as e:  # noqa: BLE001  (driver library missing, ...)
                _init_state = f"the CUDA driver is not usable: {e}"
    if _init_state:
        raise CudaUnavailableError(f"CUDA device unavailable: {_init_state}")


def is_available() -> bool:
    """True when cuda-bindings, the driver and at least one GPU are there (never raises)."""
    try:
        _init()
        return cuda_compiler.available()
    except Exception:  # noqa: BLE001
        return False


# ------------------------------------------------------------------------------------------ context


class _Context:
    """Primary context of one GPU + the device's stream; shared by every CudaDevice on that GPU."""

    _by_ordinal: dict[int, "_Context"] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, ordinal: int = 0) -> "_Context":
        with cls._lock:
            c = cls._by_ordinal.get(ordinal)
            if c is None:
                c = cls._by_ordinal[ordinal] = _Context(ordinal)
            return c

    def __init__(self, ordinal: int):
        _init()
        d = _drv()
        self.d = d
        self.ordinal = ordinal
        self.dev = _ck(d.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = _ck(d.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self._tls = threading.local()
        self.make_current()
        A = d.CUdevice_attribute
        self.cc = (int(_ck(d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev), "attr")),
                   int(_ck(d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev), "attr")))
        self.sm_count = int(_ck(d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.dev), "attr"))
        name = _ck(d.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        self.name = bytes(name).split(b"\0", 1)[0].decode(errors="replace") if not isinstance(name, str) else name
        self.stream = _ck(d.cuStreamCreate(0), "cuStreamCreate")
        self.modules: dict[str, Any] = {}          # image key -> _Module
        self.modules_lock = threading.Lock()
        self._deferred: list = []                  # [(event, objects)] kept alive until the event completes
        self._events: list = []                    # free timing-less events

    def defer_release(self, objs) -> None:
        """Keep `objs` (e.g. temporary buffers a queued kernel reads) alive until the stream reaches here."""
        d = self.d
        keep = []
        for ev, held in self._deferred:
            r = d.cuEventQuery(ev)
            if int(r[0] if isinstance(r, tuple) else r) == 0:        # CUDA_SUCCESS: complete
                self._events.append(ev)
            else:
                keep.append((ev, held))
        self._deferred = keep
        ev = self._events.pop() if self._events else \
            _ck(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        _ck(d.cuEventRecord(ev, self.stream), "cuEventRecord")
        self._deferred.append((ev, objs))

    def make_current(self) -> None:
        if getattr(self._tls, "current", False):
            return
        _ck(self.d.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self._tls.current = True

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def synchronize(self, stream=None) -> None:
        self.make_current()
        _ck(self.d.cuStreamSynchronize(self.stream if stream is None else stream), "cuStreamSynchronize")


class _Staging:
    """Pinned host ring for small host->device copies that must not stall the host."""

    SLOTS = 64

    def __init__(self, ctx: _Context, slot_size: int):
        self.ctx = ctx
        self.slot = max(64, (slot_size + 63) // 64 * 64)
        d = ctx.d
        self.base = int(_ck(d.cuMemHostAlloc(self.slot * self.SLOTS, 0), "cuMemHostAlloc"))
        self.events = [None] * self.SLOTS
        self.i = 0

    def copy_to_device(self, dptr: int, data: np.ndarray, stream) -> None:
        d = self.ctx.d
        k = self.i
        self.i = (self.i + 1) % self.SLOTS
        ev = self.events[k]
        if ev is not None:
            _ck(d.cuEventSynchronize(ev), "cuEventSynchronize")    # normally long complete
        else:
            ev = self.events[k] = _ck(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        addr = self.base + k * self.slot
        n = int(data.nbytes)
        ctypes.memmove(addr, data.ctypes.data, n)
        _ck(d.cuMemcpyHtoDAsync(dptr, addr, n, stream), "cuMemcpyHtoDAsync")
        _ck(d.cuEventRecord(ev, stream), "cuEventRecord")


class _Module:
    """A loaded cubin: its functions, and the state of its __constant__ globals block."""

    def __init__(self, ctx: _Context, image: bytes):
        d = ctx.d
        self.ctx = ctx
        self._image = image
        self.module = _ck(d.cuModuleLoadData(image), "cuModuleLoadData")
        dptr, size = _ck(d.cuModuleGetGlobal(self.module, CUDA_GLOBALS_SYMBOL.encode()), "cuModuleGetGlobal")
        self.globals_ptr, self.globals_size = int(dptr), int(size)
        # A program with recursion (emit/cuda.py CUDA_STACK_SYMBOL): the size of that array is the per-thread
        # stack its depth-counted guard was sized for (at least CUDA_STACK_BYTES); raise the context's limit
        # to that (never lower it: other modules of the context may need more).
        err, _p, n = d.cuModuleGetGlobal(self.module, CUDA_STACK_SYMBOL.encode())
        if int(err) == 0:
            want = max(CUDA_STACK_BYTES, int(n))
            cur = int(_ck(d.cuCtxGetLimit(d.CUlimit.CU_LIMIT_STACK_SIZE), "cuCtxGetLimit"))
            if cur < want:
                _ck(d.cuCtxSetLimit(d.CUlimit.CU_LIMIT_STACK_SIZE, want), "cuCtxSetLimit")
        self.functions: dict[str, Any] = {}
        self.last_globals: Optional[bytes] = None
        self.last_stream = None
        # Pinned memory is slow to allocate: made on the first globals upload, not at load.
        self.staging: Optional[_Staging] = None
        self.lock = threading.Lock()

    def function(self, symbol: str):
        f = self.functions.get(symbol)
        if f is None:
            f = self.functions[symbol] = _ck(self.ctx.d.cuModuleGetFunction(self.module, symbol.encode()),
                                             "cuModuleGetFunction")
        return f

    def set_globals(self, block: np.ndarray, stream) -> None:
        raw = block.tobytes()[: self.globals_size]
        if raw == self.last_globals and stream is self.last_stream:
            return
        if self.staging is None:
            self.staging = _Staging(self.ctx, self.globals_size)
        self.staging.copy_to_device(self.globals_ptr, np.frombuffer(raw, np.uint8), stream)
        self.last_globals = raw
        self.last_stream = stream


# ------------------------------------------------------------------------------------------ buffers


class CudaBuffer(Buffer):
    """Device memory (cuMemAlloc), zero-initialised."""

    def __init__(self, device: "CudaDevice", desc: BufferDesc):   # noqa: super().__init__ allocates host memory
        self.device = device
        self.desc = desc
        ctx = device._ctx
        ctx.make_current()
        self._ctx = ctx
        self._addr = int(_ck(ctx.d.cuMemAlloc(desc.size), "cuMemAlloc"))
        _ck(ctx.d.cuMemsetD8Async(self._addr, 0, desc.size, ctx.stream), "cuMemsetD8Async")

    def __del__(self):
        addr = getattr(self, "_addr", 0)
        if addr:
            self._addr = 0
            try:
                self._ctx.make_current()
                self._ctx.d.cuMemFree(addr)
            except Exception:  # noqa: BLE001  (interpreter shutdown)
                pass

    @property
    def device_address(self) -> int:
        return self._addr

    def to_numpy(self) -> np.ndarray:
        """A copy of the contents as raw bytes (uint8, length `size`), after the device's queued work."""
        ctx = self._ctx
        ctx.make_current()
        out = np.empty(self.desc.size, np.uint8)
        _ck(ctx.d.cuMemcpyDtoHAsync(out.ctypes.data, self._addr, self.desc.size, ctx.stream), "cuMemcpyDtoHAsync")
        ctx.synchronize()
        return out

    def _upload(self, raw: np.ndarray, offset: int = 0) -> None:
        ctx = self._ctx
        ctx.make_current()
        raw = np.ascontiguousarray(raw)
        if raw.size:
            # From pageable memory the driver stages the data before returning: `raw` may be freed.
            _ck(ctx.d.cuMemcpyHtoDAsync(self._addr + offset, raw.ctypes.data, raw.size, ctx.stream),
                "cuMemcpyHtoDAsync")

    def copy_from_numpy(self, data) -> None:
        raw = np.ascontiguousarray(_lp.native(np.asarray(data))).reshape(-1).view(np.uint8)
        if raw.size > self.desc.size:
            raise ValueError(f"numpy array is larger than the buffer ({raw.size} > {self.desc.size})")
        self._upload(raw)

    def set_data(self, data, offset: int = 0) -> None:
        raw = np.ascontiguousarray(_lp.native(np.asarray(data))).reshape(-1).view(np.uint8)
        if offset < 0 or offset + raw.size > self.desc.size:
            raise ValueError("set_data: upload would exceed the size of the destination buffer")
        self._upload(raw, offset)

    def read_bytes(self, offset: int, nbytes: int) -> np.ndarray:
        """Bytes [offset, offset + nbytes) as a new uint8 array, after the device's queued work."""
        ctx = self._ctx
        ctx.make_current()
        if offset < 0 or offset + nbytes > self.desc.size:
            raise ValueError("read_bytes: range exceeds the buffer")
        out = np.empty(max(0, nbytes), np.uint8)
        if nbytes > 0:
            _ck(ctx.d.cuMemcpyDtoHAsync(out.ctypes.data, self._addr + offset, nbytes, ctx.stream), "cuMemcpyDtoHAsync")
        ctx.synchronize()
        return out

    def clear(self, offset: int = 0, nbytes: Optional[int] = None) -> None:
        """Zero-fill (in stream order)."""
        ctx = self._ctx
        ctx.make_current()
        n = self.desc.size - offset if nbytes is None else nbytes
        if n > 0:
            _ck(ctx.d.cuMemsetD8Async(self._addr + offset, 0, n, ctx.stream), "cuMemsetD8Async")

    def copy_from_device(self, src_addr: int, nbytes: int, offset: int = 0) -> None:
        """Device-to-device copy into this buffer (stream order)."""
        ctx = self._ctx
        ctx.make_current()
        if nbytes > 0:
            _ck(ctx.d.cuMemcpyDtoDAsync(self._addr + offset, src_addr, nbytes, ctx.stream), "cuMemcpyDtoDAsync")

    @classmethod
    def wrap(cls, device: "CudaDevice", addr: int, desc: BufferDesc, owner: Any) -> "CudaBuffer":
        """A buffer over memory this process does not own (DLPack import): never freed here; `owner`
        is kept alive as long as the buffer."""
        b = object.__new__(_ExternalCudaBuffer)
        b.device = device
        b.desc = desc
        b._ctx = device._ctx
        b._addr = int(addr)
        b._owner = owner
        return b

    @property
    def _mem(self):   # CPU-buffer internals are not available on the GPU
        raise AttributeError("a CUDA buffer has no host memory; use to_numpy() / copy_from_numpy()")

    def __repr__(self) -> str:
        return f"CudaBuffer(size={self.size}, struct_size={self.struct_size}, usage={self.usage!r})"


class _ExternalCudaBuffer(CudaBuffer):
    def __del__(self):
        self._addr = 0
        self._owner = None


# ------------------------------------------------------------------------------------------ kernels


def _stream_handle(s: Any):
    """A CUstream from an int handle, a CUstream, or an object with .cuda_stream / .ptr (torch)."""
    d = _drv()
    if s is None:
        return None
    if isinstance(s, d.CUstream):
        return s
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(s, attr, None)
        if isinstance(v, int):
            return d.CUstream(v)
    return d.CUstream(int(s))


class CudaComputeKernel(KernelBase):
    """A compiled, loaded entry point on the GPU. `dispatch` launches it on the device's stream."""
    _target = "cuda"

    # Loaded on first use (a launch, or reading one of these): the image may still be building in the
    # background (cuda_compiler.compile_async), and a module's next program goes through the front end
    # and starts its own build meanwhile.  An NVRTC error is raised there.
    _LAZY = frozenset({"_module", "_fn", "_dynamic_shared", "_check_ptr", "timings"})

    def __init__(self, device: "CudaDevice", program: Optional[ShaderProgram], compiled: CompiledProgram,
                 entry_name: str):
        self._init_entry(device, program, compiled, entry_name, "CUDA")
        self._ctx = device._ctx
        self._device = device
        self._load_lock = threading.Lock()
        self._grid_slots = int(getattr(self.entry, "grid_slots", 0))
        self._scratches: dict = {}
        self._init_layouts()
        self._resident: Optional[int] = None
        self._fast_launch = None        # (handle, cuLaunchKernel) or False, made at the first launch
        nt = self._numthreads[0] * self._numthreads[1] * self._numthreads[2]
        if nt > 1024:
            raise ValueError(f"[numthreads{self._numthreads}] has {nt} threads per group; CUDA allows at most 1024")

    def _load(self) -> None:
        """The image (waiting for its build), the module, the function and what depends on them."""
        with self._load_lock:
            if "_fn" in self.__dict__:
                return
            ctx, compiled = self._ctx, self.compiled
            t0 = time.perf_counter()
            img = cuda_compiler.compile_cached(lambda: compiled.source, ctx.arch, compiled.source_sha256())
            t1 = time.perf_counter()
            with ctx.modules_lock:
                ctx.make_current()
                mod = ctx.modules.get(img.key)
                if mod is None:
                    mod = ctx.modules[img.key] = _Module(ctx, img.image)
            fn = mod.function(self.entry.symbol)
            dynamic_shared = int(getattr(self.entry, "dynamic_shared", 0))
            need_arch = int(getattr(self.entry, "dynamic_shared_arch", 0))
            if need_arch and int(ctx.arch.split("_")[-1]) < need_arch:
                dynamic_shared = 0        # the kernel's fallback for this GPU uses no dynamic shared memory
            if dynamic_shared > 48 * 1024:
                self._allow_dynamic_shared(ctx, fn, dynamic_shared)
            timings = dict(compiled.timings)
            timings["nvrtc"] = img.compile_seconds
            timings["cubin_lookup"] = max(0.0, (t1 - t0) - img.compile_seconds)   # a background build overlaps it
            timings["cache_hit"] = float(img.cached)
            timings["load"] = time.perf_counter() - t1
            # The module's error record is read back after each launch (which synchronizes) in the checked mode,
            # and in the default mode for programs with a [MaxIters] loop in a reverse-mode derivative (an overrun
            # would otherwise be a silently wrong gradient) or with recursion (its stack guard, emit/cuda.py); the
            # other default-mode checks record nothing on CUDA.
            check_ptr = None
            sites = compiled.reflection.error_sites
            if self._device.checked or any("[MaxIters(" in site or ": recursion too deep in " in site for site in sites):
                r = ctx.d.cuModuleGetGlobal(mod.module, ERROR_RECORD_SYMBOL.encode())
                if int(r[0]) == 0:
                    check_ptr = int(r[1])
            self.__dict__.update(_module=mod, _dynamic_shared=dynamic_shared, timings=timings, _check_ptr=check_ptr)
            self.__dict__["_fn"] = fn                  # last: its presence says the kernel is loaded

    def _check_after(self) -> None:
        """Checked mode: wait for the launch, read the module's error record (kernel_errors.ErrorRecord),
        re-arm it, and raise KernelError naming the Slang file:line of the first failure."""
        if self._check_ptr is None:
            return
        c = self._ctx
        c.make_current()
        rec = ErrorRecord()
        size = ctypes.sizeof(rec)
        _ck(c.d.cuMemcpyDtoHAsync(ctypes.addressof(rec), self._check_ptr, size, c.stream), "cuMemcpyDtoHAsync")
        c.synchronize()
        if rec.code:
            _ck(c.d.cuMemsetD8Async(self._check_ptr, 0, size, c.stream), "cuMemsetD8Async")
            raise_if_failed(rec, sites_lookup(self.compiled.reflection.error_sites), self.entry_name)

    def _check_buffers(self, values: dict) -> None:
        for k, v in values.items():
            if getattr(v, "_sj_buffer", False) and not isinstance(v, CudaBuffer):
                raise TypeError(f"dispatch: '{k}' is a {type(v).__name__} of another device; "
                                "the CUDA device needs buffers from device.create_buffer")

    def dispatch(self, thread_count, vars: Optional[dict] = None, command_encoder=None, **kwargs) -> None:
        if command_encoder is not None:        # recorded: runs at submit (runtime/commands.py)
            command_encoder.append(lambda: self.dispatch(thread_count, vars, **kwargs))
            return
        stream = kwargs.pop("cuda_stream", None) if "cuda_stream" not in self._params else None
        (gx, gy, gz), gblock, pblock = self._bind(thread_count, vars, kwargs)
        if gx * gy * gz == 0:
            return
        if gx >= 1 << 31 or gy > 65535 or gz > 65535:
            raise ValueError(f"dispatch: too many thread groups ({gx} x {gy} x {gz}) for CUDA "
                             "(at most 2^31-1 x 65535 x 65535)")
        c = self._ctx
        c.make_current()
        s = c.stream if stream is None else _stream_handle(stream)
        with self._module.lock:
            self._module.set_globals(gblock, s)
            self._launch(pblock.ctypes.data, (gx, gy, gz), s)
        if self._check_ptr is not None:
            self._check_after()
        del pblock

    def launch_raw(self, pblock, gblock: Optional[np.ndarray], groups: int) -> None:
        """Launch `groups` x 1 x 1 groups with an already packed parameter block (a ctypes buffer) and,
        when given, the packed globals block (the functional API's fast path)."""
        c = self._ctx
        c.make_current()
        s = c.stream
        nx, ny, nz = self._numthreads
        with self._module.lock:
            if gblock is not None:
                self._module.set_globals(gblock, s)
            self._launch(ctypes.addressof(pblock), (groups, 1, 1), s)
        if self._check_ptr is not None:
            self._check_after()        # checked mode: raise what the kernel recorded

    def _launch(self, pblock_address: int, groups: tuple[int, int, int], stream) -> None:
        """cuLaunchKernel over `groups`; a grid-stride (coarsened) kernel gets about one resident wave
        of blocks and the group counts as its second parameter (emit/cuda.py coarse_kernel)."""
        nx, ny, nz = self._numthreads
        if self.entry.grid_stride:
            total = groups[0] * groups[1] * groups[2]
            if total >= 1 << 32:
                raise ValueError(f"dispatch: too many thread groups ({total}) for one coarsened kernel (< 2^32)")
            grid = (ctypes.c_uint32 * 3)(*groups)
            blocks = (min(total, self._resident_blocks()), 1, 1)
            if self._grid_slots:
                scratch = ctypes.c_uint64(self._scratch(stream))
                argp = (ctypes.c_void_p * 3)(pblock_address, ctypes.addressof(grid), ctypes.addressof(scratch))
            else:
                argp = (ctypes.c_void_p * 2)(pblock_address, ctypes.addressof(grid))
        else:
            argp = (ctypes.c_void_p * 1)(pblock_address)
            blocks = groups
        self._launch_args(ctypes.addressof(argp), blocks, stream)

    def _launch_args(self, argp_address: int, blocks: tuple[int, int, int], stream) -> None:
        """cuLaunchKernel of `blocks` with the kernel-parameter pointer array at `argp_address`."""
        nx, ny, nz = self._numthreads
        fast = self._fast_launch
        if fast is None:
            fast = self._fast_launch = _direct_launcher(self._fn)
        if fast:                         # libcuda's cuLaunchKernel through ctypes: a few us less per launch
            fn, launch = fast
            h = stream if type(stream) is int else _stream_int(stream)
            r = launch(fn, blocks[0], blocks[1], blocks[2], nx, ny, nz, self._dynamic_shared, h, argp_address, None)
            if r:
                _ck(self._ctx.d.CUresult(r), "cuLaunchKernel")
            return
        c = self._ctx
        _ck(c.d.cuLaunchKernel(self._fn, *blocks, nx, ny, nz, self._dynamic_shared, stream, argp_address, 0),
            "cuLaunchKernel")

    def launch_block(self, pblock_address: int, argp_address: int, groups: int, stream) -> None:
        """_launch over `groups` x 1 x 1 for a caller that keeps its parameter block and, at `argp_address`,
        a void*[1] holding its address (the torch bindings' reused block): no per-launch pointer array.
        A grid-stride kernel, which takes more parameters, goes through _launch."""
        if self.entry.grid_stride:
            self._launch(pblock_address, (groups, 1, 1), stream)
        else:
            self._launch_args(argp_address, (groups, 1, 1), stream)

    def _scratch(self, stream) -> int:
        """The grid flush's scratch buffer for launches on `stream` (emit/cuda.py ABI): zeroed once; every
        launch leaves it zeroed, and launches on one stream run in turn."""
        key = int(stream) if not hasattr(stream, "getPtr") else int(stream.getPtr())
        addr = self._scratches.get(key)
        if addr is None:
            c = self._ctx
            n = self._grid_slots
            size = 16 + 8 * n + 4 * n * self._resident_blocks()
            addr = int(_ck(c.d.cuMemAlloc(size), "cuMemAlloc"))
            _ck(c.d.cuMemsetD8Async(addr, 0, size, stream), "cuMemsetD8Async")
            self._scratches[key] = addr
        return addr

    def __del__(self):
        for addr in getattr(self, "_scratches", {}).values():
            try:
                self._ctx.make_current()
                self._ctx.d.cuMemFree(addr)
            except Exception:  # noqa: BLE001  (interpreter shutdown)
                pass

    def _allow_dynamic_shared(self, ctx, fn, dynamic_shared: int) -> None:
        """Raise the kernel's dynamic shared memory limit (over 48 KB must be asked for)."""
        d = ctx.d
        try:
            most = int(_ck(d.cuDeviceGetAttribute(
                d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx.dev), "attr"))
        except Exception:  # noqa: BLE001 - a driver without the query: let the launch report it
            most = dynamic_shared
        if dynamic_shared > most:
            raise RuntimeError(f"kernel '{self.entry_name}' keeps its gradient slots in {dynamic_shared} bytes "
                               f"of shared memory per group; this GPU allows {most}")
        _ck(d.cuFuncSetAttribute(fn, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 dynamic_shared), "cuFuncSetAttribute")

    def _resident_blocks(self) -> int:
        """Blocks of this kernel the whole GPU holds at once (occupancy x multiprocessors)."""
        if self._resident is None:
            nt = self._numthreads[0] * self._numthreads[1] * self._numthreads[2]
            c = self._ctx
            try:
                per_sm = int(_ck(c.d.cuOccupancyMaxActiveBlocksPerMultiprocessor(self._fn, nt, self._dynamic_shared),
                                 "occupancy"))
            except Exception:  # noqa: BLE001 - a driver without the query: assume registers allow 2048 threads
                per_sm = max(1, 2048 // nt)
            self._resident = max(1, per_sm) * c.sm_count
        return self._resident

    def __repr__(self) -> str:
        return f"CudaComputeKernel({self.entry_name!r}, numthreads={self._numthreads})"


# ------------------------------------------------------------------------------------------ device


class CudaDeviceInfo(DeviceInfo):
    def __init__(self, ctx: _Context):
        self.type = DeviceType.cuda
        self.api_name = "cuda"
        self.adapter_name = ctx.name
        self.adapter_luid = None
        self.compute_capability = ctx.cc
        self.multiprocessor_count = ctx.sm_count
        self.num_threads = ctx.sm_count * 2048

    def __repr__(self) -> str:
        return f"DeviceInfo(type={self.type!r}, adapter_name={self.adapter_name!r}, sm={self.compute_capability})"


class CudaDevice(Device):
    _target = "cuda"
    _host_memory = False            # buffers are device memory: no numpy view of their contents
    _kernel_class = CudaComputeKernel

    def __init__(self, include_paths: Sequence = (), compiler_args: Sequence = (), enable_debug_layers: bool = False,
                 ordinal: Optional[int] = None, compile_options: PipelineOptions = DEFAULT_OPTIONS):
        if ordinal is None:
            ordinal = int(os.environ.get("SLANGJIT_CUDA_DEVICE", "0") or 0)
        cuda_compiler.prefetch_toolchain()     # NVRTC's libraries into the page cache while the context starts
        self._ctx = _Context.get(ordinal)
        super().__init__(DeviceType.cuda, include_paths, compiler_args, enable_debug_layers, compile_options)

    def _make_info(self) -> DeviceInfo:
        return CudaDeviceInfo(self._ctx)

    def _compile(self, modules, entry_points, compile_options=None) -> CompiledProgram:
        prog = super()._compile(modules, entry_points, compile_options)
        # NVRTC starts now, in the background (cuda_compiler.compile_async): the kernel created from this
        # program waits for the image, and a module's next program goes through the front end meanwhile.
        cuda_compiler.compile_async(lambda: prog.source, self._ctx.arch, prog.source_sha256())
        return prog

    @property
    def cuda_stream(self) -> int:
        """The device's stream handle (an int), e.g. for torch.cuda.ExternalStream."""
        return int(self._ctx.stream)

    def _new_buffer(self, desc: BufferDesc, raw) -> CudaBuffer:
        b = CudaBuffer(self, desc)
        if raw is not None and raw.size:
            b._upload(raw)
        return b

    def wait(self) -> None:
        self._ctx.synchronize()

    def wait_for_idle(self, *args, **kwargs) -> None:
        self._ctx.synchronize()

    def close(self) -> None:
        if not self.closed:
            try:
                self._ctx.synchronize()
            except CudaError:
                pass
        self.closed = True

    def __repr__(self) -> str:
        return f"Device(type=cuda, adapter={self._ctx.name!r}, arch={self._ctx.arch})"
