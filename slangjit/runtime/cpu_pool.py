"""The CPU device's worker pool: `_get_pool().run(fn, args, total, tail, chunks)` runs a launcher over thread
groups [0, total) on `num_threads()` threads (`os.cpu_count()`, or `$SLANGJIT_NUM_THREADS`).

Two implementations behind one `run`:
* `NativePool` (Linux): native threads of a small C++ library (cpu_pool_native.py) built once per compiler
  and flags into the CPU cache, in the background at the first dispatch that could use several threads;
  until it is loaded (and where it cannot be built) dispatches use
* `PyPool`: Python threads woken through queues (each takes the GIL to call the library, which releases it).
Both claim chunks of groups from a shared counter through the kernel library's `sj_run_chunks_ctx`, leave
each participant's accumulators (privatised adds, combined atomics) in its own record and combine them on
the calling thread after the join (`sj_finish_chunks`: one add per slot and dispatch into memory).

A dispatch made while another Python thread's holds the pool runs on its own calling thread.
`$SLANGJIT_POOL=python` keeps the Python pool (for comparisons).  A pool does
not survive fork(): the child makes a new one at its first dispatch.  `$SLANGJIT_POOL_SPIN_US` (read when a
pool is made; default 100: a training loop's next dispatch comes sooner) is how long an idle native worker,
and a caller waiting for the others, spins before sleeping in the kernel (futex); a pool of more threads than
the process has cores never spins."""
from __future__ import annotations

import atexit
import ctypes
import os
import queue
import sys
import threading
from typing import Optional

from .cpu_compiler import library_key, load_library
from .cpu_pool_native import POOL_ABI, SOURCE

# Chunks per worker in a chunked dispatch (the native pool's kChunksPerWorker): enough that a descheduled
# worker holds back little, few enough that claiming one (an atomic add) costs nothing measurable.
CHUNKS_PER_WORKER = 8
_CTX = 64                   # bytes of a participant's accumulator record (emit/program.py sj::RangeCtx)
_SPIN_US = 100


def num_threads() -> int:
    env = os.environ.get("SLANGJIT_NUM_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return max(1, os.cpu_count() or 1)


def _spin_ns() -> int:
    env = os.environ.get("SLANGJIT_POOL_SPIN_US", "").strip()
    try:
        return max(0, int(float(env) * 1000)) if env else _SPIN_US * 1000
    except ValueError:
        return _SPIN_US * 1000


def _cores() -> int:
    """The cores this process may run on: more threads than that never spin (they would take turns)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Chunks:
    """A kernel library's chunk runner for one launcher (ComputeKernel._chunks): `runner` / `finish` are the
    library's sj_run_chunks_ctx / sj_finish_chunks (prototyped, for PyPool), `*_addr` their addresses and
    the launcher's (for NativePool)."""
    __slots__ = ("runner", "finish", "launcher", "runner_addr", "finish_addr")

    def __init__(self, library_lib, launcher_fn):
        self.runner = library_lib["sj_run_chunks_ctx"]
        self.runner.argtypes = (ctypes.c_void_p,) * 5 + (ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p,
                                                         ctypes.c_void_p)
        self.runner.restype = None
        self.finish = library_lib["sj_finish_chunks"]
        self.finish.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32)
        self.finish.restype = None
        self.launcher = ctypes.cast(launcher_fn, ctypes.c_void_p).value
        self.runner_addr = ctypes.cast(self.runner, ctypes.c_void_p).value
        self.finish_addr = ctypes.cast(self.finish, ctypes.c_void_p).value

    @staticmethod
    def of(library_lib, launcher_fn) -> Optional["Chunks"]:
        """None for a library without the chunk ABI."""
        try:
            return Chunks(library_lib, launcher_fn)
        except AttributeError:
            return None


# ------------------------------------------------------------------------------------------ Python threads


class PyPool:
    """Persistent Python worker threads; `run` splits [0, total) into one contiguous range per thread, or, given
    the library's chunk runner (`chunks`), into chunks that the participants claim from a shared counter."""
    native = False
    forced = False              # chosen by $SLANGJIT_POOL=python: not replaced by the native pool

    def __init__(self, nthreads: int):
        self.nthreads = max(1, nthreads)
        self._lock = threading.Lock()
        self._done: "queue.SimpleQueue" = queue.SimpleQueue()
        self._queues: list[queue.SimpleQueue] = []
        self._next = ctypes.c_uint64(0)              # the chunk counter (used under self._lock only)
        self._next_addr = ctypes.addressof(self._next)
        self._ctxs = ctypes.create_string_buffer(self.nthreads * _CTX + 64)
        base = (ctypes.addressof(self._ctxs) + 63) & ~63
        self._ctx_addrs = [base + i * _CTX for i in range(self.nthreads)]
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
            fn, args = job
            try:
                fn(*args)
                self._done.put(None)
            except BaseException as ex:  # noqa: BLE001
                self._done.put(ex)

    def run(self, fn, args: tuple, total: int, tail: tuple = (), chunks: Optional[Chunks] = None) -> None:
        """fn(*args, begin, end, *tail) for ranges covering [0, total) (tail = the error record's address)."""
        n = min(self.nthreads, total)
        if n <= 1 or total < 4:
            fn(*args, 0, total, *tail)
            return
        if not self._lock.acquire(blocking=False):      # another Python thread is dispatching: go inline
            fn(*args, 0, total, *tail)
            return
        try:
            jobs = []
            if chunks is not None:
                self._next.value = 0
                chunk = max(1, total // (n * CHUNKS_PER_WORKER))
                ctxs = self._ctx_addrs
                for i in range(n):
                    jobs.append((chunks.runner, (chunks.launcher, *args, self._next_addr, total, chunk, *tail, ctxs[i])))
            else:
                bounds = [total * i // n for i in range(n + 1)]
                for i in range(n):
                    jobs.append((fn, (*args, bounds[i], bounds[i + 1], *tail)))
            for i in range(1, n):
                self._queues[i - 1].put(jobs[i])
            err = None
            try:
                f, a = jobs[0]
                f(*a)
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
            if chunks is not None:
                chunks.finish(self._ctx_addrs[0], n, _CTX)      # the participants' accumulators, once
            if err is not None:
                raise err
        finally:
            self._lock.release()

    def shutdown(self) -> None:
        for q in self._queues:
            q.put(None)
        self._queues = []


# ------------------------------------------------------------------------------------------ native threads


class NativePool:
    """Native worker threads (cpu_pool_native.py): a dispatch is one ctypes call that releases the GIL."""
    native = True
    forced = False

    def __init__(self, lib, nthreads: int, spin_ns: int):
        self._lib = lib
        self._p = lib.sjp_create(nthreads, spin_ns)
        if not self._p:
            raise OSError("the native worker pool could not be created")
        self.nthreads = int(lib.sjp_threads(self._p))
        self._sjp_run = lib.sjp_run
        self._pid = os.getpid()

    def run(self, fn, args: tuple, total: int, tail: tuple = (), chunks: Optional[Chunks] = None) -> None:
        n = min(self.nthreads, total)
        if n <= 1 or total < 4:
            fn(*args, 0, total, *tail)
            return
        if chunks is None:          # a library without the chunk ABI: contiguous ranges
            self._sjp_run(self._p, None, ctypes.cast(fn, ctypes.c_void_p), *args, total, n, *tail, None)
            return
        self._sjp_run(self._p, chunks.runner_addr, chunks.launcher, *args, total, n, *tail, chunks.finish_addr)

    def stats(self) -> tuple[int, int, int]:
        """(dispatches run on the pool, dispatches run on their calling thread because the pool was taken,
        shares of dispatches that workers took)."""
        out = (ctypes.c_uint64 * 3)()
        self._lib.sjp_stats(self._p, out)
        return int(out[0]), int(out[1]), int(out[2])

    def shutdown(self) -> None:
        if self._p and os.getpid() == self._pid:
            self._lib.sjp_stop(self._p)       # waits for a dispatch in flight; later ones run inline


def library_name() -> str:
    """The file name of the native pool's library in the CPU cache folder (beside the kernels')."""
    return library_key(SOURCE)[:40] + (".dylib" if sys.platform == "darwin" else ".so")


def _load_native():
    """The native pool's library (built into the CPU cache on first use), with its functions prototyped."""
    lib = load_library(SOURCE).lib
    if lib.sjp_abi() != POOL_ABI:
        raise OSError("native pool ABI mismatch")
    lib.sjp_create.argtypes = (ctypes.c_uint32, ctypes.c_uint64)
    lib.sjp_create.restype = ctypes.c_void_p
    lib.sjp_threads.argtypes = (ctypes.c_void_p,)
    lib.sjp_threads.restype = ctypes.c_uint32
    lib.sjp_stats.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    lib.sjp_stats.restype = None
    lib.sjp_run.argtypes = (ctypes.c_void_p,) * 6 + (ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p)
    lib.sjp_run.restype = ctypes.c_int
    lib.sjp_stop.argtypes = (ctypes.c_void_p,)
    lib.sjp_stop.restype = None
    return lib


# ------------------------------------------------------------------------------------------ the process's pool

_NATIVE_OK = sys.platform.startswith("linux")

_pool = None
_pool_env: Optional[str] = None
_pool_lock = threading.Lock()
_native_lib = None                 # the loaded library, False when it cannot be built
_native_build: Optional[threading.Thread] = None


def _build_native() -> None:
    global _native_lib
    try:
        lib = _load_native()
    except Exception:  # noqa: BLE001  (no compiler, no futex, ...: the Python pool stays)
        lib = False
    _native_lib = lib


def _start_native_build() -> None:
    global _native_build
    if _native_build is None and _native_lib is None and _NATIVE_OK:
        _native_build = threading.Thread(target=_build_native, name="slangjit-pool-build", daemon=True)
        _native_build.start()


def _finish_native_build() -> None:
    """At exit: let a build under way finish (its compiler process would otherwise leave temporary files)."""
    t = _native_build
    if t is not None and t.is_alive():
        t.join(120)


atexit.register(_finish_native_build)


def native_ready(wait: bool = False, timeout: Optional[float] = None) -> bool:
    """Whether the native pool's library is loaded; `wait`: build it now (or wait for the background build)."""
    if wait and _native_lib is None and _NATIVE_OK:
        with _pool_lock:
            _start_native_build()
            t = _native_build
        if t is not None:
            t.join(timeout)
    return bool(_native_lib)


def _after_fork_in_child() -> None:      # worker threads do not survive fork()
    global _pool, _pool_env, _pool_lock, _native_build
    _pool, _pool_env, _pool_lock = None, None, threading.Lock()
    if _native_lib is None:
        _native_build = None             # the parent's build thread does not exist here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _get_pool():
    """The process's pool for the current `$SLANGJIT_NUM_THREADS` (and `$SLANGJIT_POOL`: `python` keeps the
    Python pool, for comparisons)."""
    global _pool, _pool_env
    env = os.environ.get("SLANGJIT_NUM_THREADS"), os.environ.get("SLANGJIT_POOL")
    p = _pool
    if p is not None and env == _pool_env and (p.native or _native_lib is None or p.nthreads == 1 or p.forced):
        return p
    with _pool_lock:
        p = _pool
        if p is None or env != _pool_env or (not p.native and _native_lib and p.nthreads > 1 and not p.forced):
            n = num_threads()
            new = None
            forced = (env[1] or "").strip().lower() == "python"
            if n > 1 and not forced:
                if _native_lib:
                    try:
                        new = NativePool(_native_lib, n, _spin_ns() if n <= _cores() else 0)
                    except OSError:
                        new = None
                else:
                    _start_native_build()
            _pool = new if new is not None else PyPool(n)
            _pool.forced = forced
            _pool_env = env
            if p is not None:
                p.shutdown()
        return _pool
