"""The CPU device: generated C++ built by the system compiler (cpu_compiler.py) and run on a persistent
pool of worker threads (cpu_pool.py: `os.cpu_count()`, or `$SLANGJIT_NUM_THREADS`), which claim chunks of
linear group indices (ctypes releases the GIL during the call).  Dispatch packs `vars` into the globals
block and keyword arguments into the entry point's parameter block (base.py KernelBase._bind)."""
from __future__ import annotations

import ctypes
import platform
import threading
import time
from typing import Optional, Sequence

from ..compiler.passes.options import DEFAULT_OPTIONS, PipelineOptions
from ..compiler.reflection import CompiledProgram
from .base import Buffer, BufferDesc, Device, DeviceInfo, DeviceType, KernelBase, ShaderProgram
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

    def _load(self) -> None:
        """The library (waiting for its build), the entry's function and the chunk runner."""
        with self._load_lock:
            if "_fn" in self.__dict__:
                return
            t0 = time.perf_counter()
            library = load_library(self.compiled.source, self.compiled.source_sha256())
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


# ------------------------------------------------------------------------------------------ device


class CpuDevice(Device):
    """The CPU backend (the default without a GPU)."""
    _target = "cpp"
    _kernel_class = ComputeKernel

    def __init__(self, type: DeviceType = DeviceType.cpu, include_paths: Sequence = (), compiler_args: Sequence = (),
                 enable_debug_layers: bool = False, compile_options: PipelineOptions = DEFAULT_OPTIONS):
        super().__init__(type, include_paths, compiler_args, enable_debug_layers, compile_options)

    def _make_info(self) -> DeviceInfo:
        # platform.machine(), not platform.processor(): on Linux the latter runs `uname -p` in a subprocess
        # (~10 ms of a new process's device creation)
        return DeviceInfo(self.type, "cpu", platform.machine() or "cpu", num_threads())

    def _compile(self, modules, entry_points, compile_options=None) -> CompiledProgram:
        prog = super()._compile(modules, entry_points, compile_options)
        # The C++ compiler starts now, in the background (cpu_compiler.load_library_async): the kernel created
        # from this program waits for the library at its first dispatch, and a module's next program goes
        # through the front end (and starts its own build) meanwhile.
        load_library_async(prog.source, prog.source_sha256())
        return prog

    def _new_buffer(self, desc: BufferDesc, raw) -> Buffer:
        b = Buffer(self, desc)
        if raw is not None:
            b._mem[: raw.size] = raw
        return b
