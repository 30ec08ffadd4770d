"""The CPU device: generated C++ built by the system compiler (cpu_compiler.py) and run on a persistent
pool of worker threads (`os.cpu_count()`, or `$SLANGJIT_NUM_THREADS`), each taking a contiguous range of
linear group indices (ctypes releases the GIL during the call).  Dispatch packs `vars` into the globals
block and keyword arguments into the entry point's parameter block (base.py KernelBase._bind)."""
from __future__ import annotations

import ctypes
import os
import platform
import queue
import threading
import time
from typing import Optional, Sequence

from ..compiler.passes.options import DEFAULT_OPTIONS, PipelineOptions
from ..compiler.reflection import CompiledProgram
from .base import Buffer, BufferDesc, Device, DeviceInfo, DeviceType, KernelBase, ShaderProgram
from .cpu_compiler import load_library, load_library_async, prepare_async
from .kernel_errors import ErrorRecord, raise_if_failed, sites_lookup


# ------------------------------------------------------------------------------------------ thread pool


class _Pool:
    """Persistent worker threads; `run` splits [0, total) into one contiguous range per thread, or, given the
    library's chunk runner (`chunks`), into chunks that the workers claim from a shared counter."""

    def __init__(self, nthreads: int):
        self.nthreads = max(1, nthreads)
        self._lock = threading.Lock()
        self._done: "queue.SimpleQueue" = queue.SimpleQueue()
        self._queues: list[queue.SimpleQueue] = []
        self._next = ctypes.c_uint64(0)              # the chunk counter (used under self._lock only)
        self._next_addr = ctypes.addressof(self._next)
        for i in range(self.nthreads - 1):
            q: queue.SimpleQueue = queue.SimpleQueue()
            t = threading.Thread(target=self._worker, args=(q,), name=f"slangjit-cpu-{i}", daemon=True)
            t.start()
            self._queues.append(q)

    def _worker(self, q: "queue.SimpleQueue") -> None:
        while True:
            job = q.get()
            if job is None:
                return
            fn, args, b, e, tail = job
            try:
                fn(*args, b, e, *tail)
                self._done.put(None)
            except BaseException as ex:  # noqa: BLE001
                self._done.put(ex)

    def run(self, fn, args: tuple, total: int, tail: tuple = (), chunks=None) -> None:
        """fn(*args, begin, end, *tail) for ranges covering [0, total).  `chunks` = (the library's sj_run_chunks,
        fn's address): each worker runs sj_run_chunks(fn, *args, counter, total, chunk, *tail) instead, which claims chunks of
        `chunk` groups until none is left (a descheduled worker holds back one chunk, not 1/n of the work)."""
        n = min(self.nthreads, total)
        if n <= 1 or total < 4:
            fn(*args, 0, total, *tail)
            return
        if not self._lock.acquire(blocking=False):      # another Python thread is dispatching: go inline
            fn(*args, 0, total, *tail)
            return
        try:
            if chunks is not None and total >= 4 * n:
                self._next.value = 0
                chunk = max(1, total // (n * CHUNKS_PER_WORKER))
                runner, address = chunks
                job = (runner, (address, *args, self._next_addr), total, chunk, tail)
                for i in range(1, n):
                    self._queues[i - 1].put(job)
                first = job
            else:
                bounds = [total * i // n for i in range(n + 1)]
                for i in range(1, n):
                    self._queues[i - 1].put((fn, args, bounds[i], bounds[i + 1], tail))
                first = (fn, args, bounds[0], bounds[1], tail)
            err = None
            try:
                f, a, b, e, t = first
                f(*a, b, e, *t)
            except BaseException as ex:  # noqa: BLE001
                err = ex
            pending = n - 1
            while pending:          # always collect every worker (they write into memory we own)
                try:
                    r = self._done.get()
                except BaseException as ex:  # noqa: BLE001  (KeyboardInterrupt: keep waiting, re-raise after)
                    err = err or ex
                    continue
                pending -= 1
                if r is not None and err is None:
                    err = r
            if err is not None:
                raise err
        finally:
            self._lock.release()

    def shutdown(self) -> None:
        for q in self._queues:
            q.put(None)
        self._queues = []


# Chunks per worker in a chunked dispatch: enough that a descheduled worker holds back little, few enough
# that claiming one (an atomic add) and a privatised kernel's flush per chunk cost nothing measurable.
CHUNKS_PER_WORKER = 8

_pool: Optional[_Pool] = None
_pool_env: Optional[str] = None
_pool_lock = threading.Lock()


def _after_fork_in_child() -> None:      # worker threads do not survive fork()
    global _pool, _pool_env, _pool_lock
    _pool, _pool_env, _pool_lock = None, None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def num_threads() -> int:
    env = os.environ.get("SLANGJIT_NUM_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return max(1, os.cpu_count() or 1)


def _get_pool() -> _Pool:
    global _pool, _pool_env
    env = os.environ.get("SLANGJIT_NUM_THREADS")
    p = _pool
    if p is not None and env == _pool_env:
        return p
    with _pool_lock:
        if _pool is None or env != _pool_env:
            old = _pool
            _pool = _Pool(num_threads())
            _pool_env = env
            if old is not None:
                old.shutdown()
        return _pool


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
            runner = library.chunk_runner()
            self.library = library
            self.timings = timings
            self._chunks = (runner, ctypes.cast(fn, ctypes.c_void_p).value) if runner is not None else None
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
        prepare_async()                 # the C++ compiler's facts, found while the first front end runs

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
