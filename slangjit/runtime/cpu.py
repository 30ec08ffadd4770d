"""The CPU device: generated C++ built by the system compiler (cpu_compiler.py) and run on a persistent
pool of worker threads (cpu_pool.py: `os.cpu_count()`, or `$SLANGJIT_NUM_THREADS`), which claim chunks of
linear group indices (ctypes releases the GIL during the call).  Dispatch packs `vars` into the globals
block and keyword arguments into the entry point's parameter block (base.py KernelBase._bind)."""
from __future__ import annotations

import ctypes
import platform
import struct
import threading
import time
from typing import Optional, Sequence

from ..compiler.passes.options import DEFAULT_OPTIONS, PipelineOptions
from ..compiler.lazy_source import source_head
from ..compiler.reflection import CompiledProgram
from . import layout_pack as _lp
from .base import Buffer, BufferDesc, Device, DeviceInfo, DeviceType, KernelBase, ShaderProgram
from . import cpu_prepare  # noqa: F401  (registers the compiler-facts thread's first-miss hook)
from .cpu_compiler import load_library, load_library_async
from .cpu_pool import Chunks, _get_pool, num_threads
from .kernel_errors import ErrorRecord, raise_if_failed, sites_lookup


# ------------------------------------------------------------------------------------------ kernels


# globals block, parameter block, group counts, the range of groups, this dispatch's error record
# (kernel_errors.py; last, so launchers written to the five-argument ABI still work)
_ENTRY_ARGTYPES = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                   ctypes.c_void_p)


class ComputeKernel(KernelBase):
    """A compiled, loaded entry point on the CPU. `dispatch` runs it over a grid of threads."""
    _target = "cpp"

    # Loaded on first use (a dispatch, or reading one of these): the library may still be building in the
    # background (cpu_compiler.load_library_async, started when the program was loaded), and a module's next
    # program goes through the front end and starts its own build meanwhile.  A compiler error is raised there.
    _LAZY = frozenset({"library", "timings", "_fn", "_chunks"})

    def __init__(self, device: "CpuDevice", program: Optional[ShaderProgram], compiled: CompiledProgram,
                 entry_name: str):
        self._init_entry(device, program, compiled, entry_name, "CPU")
        self._load_lock = threading.Lock()
        self._init_layouts()
        self._plans: dict = {}          # keyword names (in call order) -> FastDispatch, or False (not possible)

    def _load(self) -> None:
        """The library (waiting for its build), the entry's function and the chunk runner."""
        with self._load_lock:
            if "_fn" in self.__dict__:
                return
            t0 = time.perf_counter()
            prog = self.compiled
            library = load_library(lambda: prog.source, prog.source_sha256(), source_head(prog))
            timings = dict(self.compiled.timings)
            timings["cxx"] = library.compile_seconds
            timings["load"] = max(0.0, time.perf_counter() - t0 - library.compile_seconds)
            fn = library.symbol(self.entry.symbol)
            fn.argtypes = _ENTRY_ARGTYPES
            fn.restype = None
            self.library = library
            self.timings = timings
            self._chunks = Chunks.of(library.lib, fn)
            self._fn = fn

    def dispatch(self, thread_count, vars: Optional[dict] = None, command_encoder=None, **kwargs) -> None:
        if command_encoder is not None:        # recorded: runs at submit (runtime/commands.py)
            command_encoder.append(lambda: self.dispatch(thread_count, vars, **kwargs))
            return
        if not vars:
            plan = self._plans.get(tuple(kwargs))
            if plan is None and len(self._plans) < 8:
                plan = self._plans[tuple(kwargs)] = FastDispatch.build(self, tuple(kwargs)) or False
            if plan and plan.run(thread_count, kwargs):
                return
        (gx, gy, gz), gblock, pblock = self._bind(thread_count, vars, kwargs)
        total = gx * gy * gz
        if total == 0:
            return
        if total >= 1 << 32:
            raise ValueError(f"dispatch: too many thread groups ({gx} x {gy} x {gz})")
        gc = (ctypes.c_uint32 * 3)(gx, gy, gz)
        rec = ErrorRecord()
        args = (gblock.ctypes.data, pblock.ctypes.data, ctypes.addressof(gc))
        _get_pool().run(self._fn, args, total, (ctypes.addressof(rec),), self._chunks)
        # keep the blocks, the group counts and the bound buffers alive until here
        del gblock, pblock, gc, vars, kwargs
        if rec.code:
            raise_if_failed(rec, sites_lookup(self.compiled.reflection.error_sites), self.entry_name)


    def __repr__(self) -> str:
        return f"ComputeKernel({self.entry_name!r}, numthreads={self._numthreads})"


class FastDispatch:
    """`ComputeKernel.dispatch` for one set of keyword names (in call order) when every entry-point parameter
    is a scalar or a pointer, all are given, no globals are bound and none is required: the values packed
    with one prebuilt `struct.Struct` into a parameter block of the plan's free list (with its error record),
    a shared zero globals block, cached group counts.  A value the struct does not take as it is (a bool or
    a non-int for a pointer, an out-of-range number, ...) makes `run` return False: the general path then
    packs it and gives its error."""

    # the general path's format codes (layout_pack); a bool's width and conversions stay with the general path
    _FORMATS = {k: v[0] for k, v in _lp._SCALARS.items() if k != "bool"}

    @classmethod
    def build(cls, kernel: "ComputeKernel", names: tuple) -> Optional["FastDispatch"]:
        params = kernel._params
        if kernel._globals_required or len(names) != len(params) or set(names) != set(params):
            return None
        fields = sorted((params[n] for n in names), key=lambda f: f.offset)
        fmt, pos, pointers = "<", 0, []
        for f in fields:
            lay = f.layout
            if lay.kind == "pointer" and lay.size == 8:
                c = "Q"
                pointers.append(names.index(f.name))
            elif lay.kind == "scalar":
                c = cls._FORMATS.get(lay.scalar or "")
                if c is None:
                    return None
            else:
                return None
            if f.offset < pos:
                return None
            fmt += "x" * (f.offset - pos) + c
            pos = f.offset + struct.calcsize("<" + c)
        if pos > kernel._params_size:
            return None
        return cls(kernel, struct.Struct(fmt), tuple(names.index(f.name) for f in fields), tuple(pointers))

    def __init__(self, kernel, st: struct.Struct, order: tuple, pointers: tuple):
        self.kernel = kernel
        self.pack_into = st.pack_into
        self.order = order
        self.pointers = pointers
        self.psize = kernel._params_size
        self.nt = kernel._numthreads
        self.zero_g = _lp.aligned_zeros(max(kernel._globals_size, 8))      # read only by the kernels
        self.zero_g_addr = self.zero_g.ctypes.data
        self.frames: list = []
        self.gcs: dict = {}

    def run(self, thread_count, kwargs: dict) -> bool:
        tc = thread_count
        if type(tc) in (list, tuple) and len(tc) == 3 and type(tc[0]) is int and type(tc[1]) is int \
                and type(tc[2]) is int and tc[0] >= 0 and tc[1] >= 0 and tc[2] >= 0:
            tx, ty, tz = tc
        else:
            return False
        vals = list(kwargs.values())
        for i in self.pointers:
            if type(vals[i]) is not int:
                return False
        nx, ny, nz = self.nt
        g = (-(-tx // nx), -(-ty // ny), -(-tz // nz))
        total = g[0] * g[1] * g[2]
        if total == 0 or total >= 1 << 32:
            return False                      # nothing to run, or the general path's error
        frames = self.frames
        try:
            fr = frames.pop()               # one frame per dispatch in flight (several Python threads)
        except IndexError:
            blk = _lp.aligned_zeros(self.psize)
            rec = ErrorRecord()
            fr = (blk, blk.ctypes.data, rec, ctypes.addressof(rec))
        blk, baddr, rec, raddr = fr
        try:
            self.pack_into(blk, 0, *[vals[i] for i in self.order])
        except (struct.error, OverflowError, TypeError, ValueError):
            frames.append(fr)
            return False
        gc = self.gcs.get(g)
        if gc is None:
            gc = (ctypes.c_uint32 * 3)(*g)
            if len(self.gcs) < 64:
                self.gcs[g] = gc
        k = self.kernel
        try:
            _get_pool().run(k._fn, (self.zero_g_addr, baddr, ctypes.addressof(gc)), total, (raddr,), k._chunks)
        finally:
            if not rec.code:
                frames.append(fr)
        if rec.code:
            raise_if_failed(rec, sites_lookup(k.compiled.reflection.error_sites), k.entry_name)
        return True


# ------------------------------------------------------------------------------------------ device


class CpuDevice(Device):
    """The CPU backend (the default without a GPU)."""
    _target = "cpp"
    _kernel_class = ComputeKernel

    def __init__(self, type: DeviceType = DeviceType.cpu, include_paths: Sequence = (), compiler_args: Sequence = (),
                 enable_debug_layers: bool = False, compile_options: PipelineOptions = DEFAULT_OPTIONS):
        super().__init__(type, include_paths, compiler_args, enable_debug_layers, compile_options)
        # The C++ compiler's facts are found in the background from the first front-end miss on
        # (cpu_prepare.prepare_async), not here: a warm process reads them in a few file reads.

    def _make_info(self) -> DeviceInfo:
        # platform.machine(), not platform.processor(): on Linux the latter runs `uname -p` in a subprocess
        # (~10 ms of a new process's device creation)
        return DeviceInfo(self.type, "cpu", platform.machine() or "cpu", num_threads())

    def _compile(self, modules, entry_points, compile_options=None) -> CompiledProgram:
        prog = super()._compile(modules, entry_points, compile_options)
        # The C++ compiler starts now, in the background (cpu_compiler.load_library_async): the kernel created
        # from this program waits for the library at its first dispatch, and a module's next program goes
        # through the front end (and starts its own build) meanwhile.
        # The source itself is read only if the library has to be built (a cache hit's stays on disk: lazy_source.py).
        load_library_async(lambda: prog.source, prog.source_sha256(), source_head(prog))
        return prog

    def _new_buffer(self, desc: BufferDesc, raw) -> Buffer:
        b = Buffer(self, desc)
        if raw is not None:
            b._mem[: raw.size] = raw
        return b
