"""NVRTC: generated CUDA C++ -> PTX / cubin, with an on-disk cache. Needs no GPU and no CUDA toolkit.

Needs `cuda-bindings` (`from cuda.bindings import nvrtc`) and the NVRTC library from the
`nvidia-cuda-nvrtc` wheel (or a system CUDA). `cuda_fp16.h` is taken from the
`nvidia-cuda-runtime` wheel's include directory (or $CUDA_HOME/include, /usr/local/cuda/include).

Options: C++17, `-default-device`, no fast math (`--ftz=false --prec-div=true --prec-sqrt=true`;
`--fmad=true` like nvcc and Slang's CUDA target; set SLANGJIT_CUDA_FMAD=0 to turn contraction off).

Cache: `$SLANGJIT_CACHE_DIR/cuda` (default `~/.cache/slangjit/cuda`), one file per
sha256(source, arch, options), holding the image and a stamp of the toolchain that built it (NVRTC
version, size + mtime of the loaded libnvrtc* files and of cuda_fp16.h/.hpp; see "image cache"
below); written atomically (temp + rename), so concurrent processes and truncated files are safe (a
file that fails to load, or whose toolchain changed, is rebuilt).  A hit does not import NVRTC.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
import threading
import time
from typing import Optional

from .. import cache_paths
from ..atomic_file import write_atomic
from ..compiler.lazy_source import text_of as _text   # a callable source is read only for a build


class NvrtcError(RuntimeError):
    """NVRTC rejected the generated source (an internal compiler error: the log is attached)."""


_lock = threading.Lock()
_nvrtc = None
_include_dirs: Optional[list[str]] = None


def nvrtc_module():
    """The cuda-bindings NVRTC module (ImportError when the wheel is absent)."""
    global _nvrtc
    if _nvrtc is None:
        from cuda.bindings import nvrtc  # noqa: PLC0415  (optional dependency, ~35 ms: only when compiling)
        _nvrtc = nvrtc
    return _nvrtc


def available() -> bool:
    try:
        nvrtc_module()
        nvrtc_version()
        return True
    except Exception:  # noqa: BLE001
        return False


def _check(res, what: str):
    """cuda-bindings returns (status, *values); raise on a non-success status."""
    if isinstance(res, tuple):
        status, vals = res[0], res[1:]
    else:
        status, vals = res, ()
    if int(status) != 0:
        raise NvrtcError(f"NVRTC {what} failed: {status!r}")
    return vals[0] if len(vals) == 1 else vals


def nvrtc_version() -> tuple[int, int]:
    major, minor = _check(nvrtc_module().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def supported_archs() -> list[int]:
    nv = nvrtc_module()
    n = _check(nv.nvrtcGetNumSupportedArchs(), "nvrtcGetNumSupportedArchs")
    archs = _check(nv.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
    return [int(a) for a in archs][: int(n)]


def cuda_include_dirs() -> list[str]:
    """Directories that hold cuda_fp16.h (searched once)."""
    global _include_dirs
    if _include_dirs is not None:
        return _include_dirs
    dirs = []
    env = os.environ.get("SLANGJIT_CUDA_INCLUDE")
    if env:
        dirs += env.split(os.pathsep)
    roots = []
    for p in sys.path:
        if p and os.path.isdir(os.path.join(p, "nvidia")):
            roots.append(os.path.join(p, "nvidia"))
    for r in roots:
        # CUDA 13 wheels: nvidia/cu13/include; CUDA 12 wheels: nvidia/cuda_runtime/include
        try:
            cu = sorted((n for n in os.listdir(r) if n.startswith("cu")), reverse=True)
        except OSError:
            cu = []
        dirs += [os.path.join(r, n, "include") for n in cu]
        dirs += [os.path.join(r, "cuda_runtime", "include"), os.path.join(r, "cuda_nvrtc", "include")]
    for v in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(v):
            dirs.append(os.path.join(os.environ[v], "include"))
    dirs.append("/usr/local/cuda/include")
    out = []
    for d in dirs:
        if os.path.isfile(os.path.join(d, "cuda_fp16.h")) and d not in out:
            out.append(d)
    _include_dirs = out
    return out


def nvrtc_library_files() -> list[str]:
    """The NVRTC shared libraries this process loads (libnvrtc*, libnvrtc-builtins*): once NVRTC is loaded, those
    beside the libnvrtc it mapped (a host may have several copies: a CUDA toolkit's and a wheel's); before, where they
    can be found without loading them: the nvidia wheels on sys.path, then $CUDA_HOME / /usr/local/cuda."""
    mapped = _loaded_nvrtc_libraries() or []
    dirs = sorted({os.path.dirname(m) for m in mapped})
    for p in sys.path:
        r = os.path.join(p or ".", "nvidia")
        if p and os.path.isdir(r):
            try:
                subs = sorted(os.listdir(r))
            except OSError:
                subs = []
            dirs += [os.path.join(r, n, "lib") for n in subs]
    for v in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(v):
            dirs.append(os.path.join(os.environ[v], "lib64"))
    dirs.append("/usr/local/cuda/lib64")
    out = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        out += [os.path.join(d, n) for n in names if n.startswith("libnvrtc") and ".so" in n
                and os.path.isfile(os.path.join(d, n))]
        if out:
            break                       # the first directory that has them is the one that gets loaded
    return out


_prefetch_thread: Optional[threading.Thread] = None


def _prefetch(paths: list[str]) -> None:
    extra = []
    bindings = sys.modules.get("cuda.bindings")          # the Python side of NVRTC, if cuda-bindings is in use
    for d in list(getattr(bindings, "__path__", ()))[:1]:
        try:
            extra += [os.path.join(d, n) for n in sorted(os.listdir(d)) if "nvrtc" in n and n.endswith(".so")]
        except OSError:
            pass
    for d in cuda_include_dirs()[:1]:                      # the headers every translation unit includes
        extra += [os.path.join(d, n) for n in ("cuda_fp16.h", "cuda_fp16.hpp")]
    for path in paths + extra:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)     # asynchronous readahead of the whole file
        except (OSError, AttributeError):
            pass
        finally:
            os.close(fd)


def prefetch_toolchain() -> Optional[threading.Thread]:
    """Ask the OS to read NVRTC's libraries into the page cache, in a background thread (once per process).

    On a machine whose disk cache is cold, NVRTC's first real compile pays for paging in the parts of
    libnvrtc (~140 MB) it touches, a fault at a time (2.4-2.6 s of the first process's 4.6 s on a fresh H100);
    one sequential readahead started when a CUDA device is created overlaps the device's context creation
    and the front end, and the faults then find the pages in memory.  Where the files are cached already
    this costs the background thread a page-cache walk and nothing else; the main thread does not wait."""
    global _prefetch_thread
    with _lock:
        if _prefetch_thread is None and hasattr(os, "posix_fadvise"):
            paths = nvrtc_library_files()
            _prefetch_thread = threading.Thread(target=_prefetch, args=(paths,), name="slangjit-nvrtc-prefetch",
                                                daemon=True)
            _prefetch_thread.start()
        return _prefetch_thread


def default_options(arch: str) -> list[str]:
    fmad = os.environ.get("SLANGJIT_CUDA_FMAD", "1") not in ("0", "false", "no")
    opts = [f"--gpu-architecture={arch}", "--std=c++17", "-default-device", "--ftz=false", "--prec-div=true",
            "--prec-sqrt=true", f"--fmad={'true' if fmad else 'false'}", "-w"]
    incs = cuda_include_dirs()
    if incs:
        opts.append(f"--include-path={incs[0]}")
    return opts


def _out_buffer(n: int) -> bytes:
    """A fresh, writable-by-C bytes object of at least n bytes for NVRTC to fill.

    Never `b" " * n`: for n <= 1 that is CPython's shared one-byte bytes singleton, and NVRTC writing its
    NUL terminator into it corrupts the interpreter (spaces vanish from unrelated strings)."""
    return bytes(bytearray(max(n, 16)))


def compile_source(source: str, arch: str = "compute_90", name: str = "slangjit.cu",
                   extra_options: tuple = ()) -> tuple[bytes, str]:
    """Compile with NVRTC. `arch` "compute_XX" gives PTX, "sm_XX" gives a cubin.

    Returns (image bytes, log). Raises NvrtcError with the log (and the source's line numbers
    quoted) when compilation fails."""
    prefetch_toolchain()                  # no-op when a CUDA device already started it
    nv = nvrtc_module()
    opts = default_options(arch) + list(extra_options)
    if not cuda_include_dirs():
        raise NvrtcError("cuda_fp16.h not found: install the CUDA runtime headers wheel "
                         "(pip install 'slangjit[cuda]', i.e. nvidia-cuda-runtime) or set SLANGJIT_CUDA_INCLUDE")
    prog = _check(nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        res = nv.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        status = res[0] if isinstance(res, tuple) else res
        n = _check(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = _out_buffer(int(n))
        nv.nvrtcGetProgramLog(prog, log)
        log_s = bytes(log[: int(n)]).rstrip(b"\0 ").decode(errors="replace")
        if int(status) != 0:
            raise NvrtcError(f"NVRTC failed to compile generated CUDA ({status!r}); log:\n{_annotate(log_s, source)}")
        if arch.startswith("sm_"):
            size = int(_check(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize"))
            buf = _out_buffer(size)
            _check(nv.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
        else:
            size = int(_check(nv.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize"))
            buf = _out_buffer(size)
            _check(nv.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
        return bytes(buf[:size]), log_s
    finally:
        nv.nvrtcDestroyProgram(prog)


def _annotate(log: str, source: str, limit: int = 40) -> str:
    """Keep the first errors, with the generated source line they point at."""
    lines = source.splitlines()
    out = []
    for l in log.splitlines()[:limit]:
        out.append(l)
        m = re.match(r".*\((\d+)\): error", l)
        if m:
            k = int(m.group(1))
            if 0 < k <= len(lines):
                out.append(f"    | {lines[k - 1].strip()[:200]}")
    return "\n".join(out)


def cache_dir() -> str:
    """Where new images are written (`<cache base>/cuda`, private to the user: slangjit/cache_paths.py)."""
    return str(cache_paths.cache_dir("cuda"))


class CompiledImage:
    def __init__(self, image: bytes, key: str, seconds: float, cached: bool):
        self.image = image
        self.key = key
        self.compile_seconds = seconds
        self.cached = cached


# ------------------------------------------------------------------------------------------ image cache
#
# The key covers what the image is a function of that is cheap to know: the source, the arch and
# the options (which name the header directory).  The NVRTC release is not in the key, because
# learning it means importing cuda.bindings.nvrtc and loading libnvrtc (~35 ms), which a warm
# start must not pay.  Instead each entry records the toolchain that built it: the NVRTC version
# and (path, size, mtime) of the libnvrtc* files the process had mapped and of the fp16 headers.
# A hit re-stats those files (microseconds); an upgraded wheel or CUDA install changes them and the
# entry is rebuilt.  Where the loaded libraries cannot be listed (no /proc/self/maps) the entry
# says so and a hit compares the NVRTC version instead (the slow, always-correct check).

_FORMAT = "slangjit-cuda-image-v3"
_MAGIC = b"SJCUIMG3"
_HEADER = struct.Struct("<8sIQ32s")       # magic, metadata length, image length, HMAC(secret, key, meta + image)
_mem_cache: dict[str, bytes] = {}
stats = {"memory_hits": 0, "disk_hits": 0, "compiles": 0, "stale": 0, "corrupt": 0}


def cache_key(source, arch: str, opts: list, source_sha256: Optional[bytes] = None) -> str:
    """The image's key: the source (by its sha256, which a cached program carries), arch and options."""
    if source_sha256 is None:
        source_sha256 = hashlib.sha256(_text(source).encode("utf-8", "surrogatepass")).digest()
    h = hashlib.sha256()
    for part in (_FORMAT.encode(), arch.encode(), repr(opts).encode(), source_sha256):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _loaded_nvrtc_libraries() -> Optional[list[str]]:
    """Paths of the libnvrtc* shared objects mapped into this process (None: cannot tell here)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return None
    out = set()
    for line in maps.splitlines():
        i = line.find("/")
        if i >= 0 and os.path.basename(line[i:]).startswith("libnvrtc"):
            out.add(line[i:].strip())
    return sorted(out) or None


def _file_stamp(path: str) -> Optional[list]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [path, st.st_size, st.st_mtime_ns]


def toolchain_stamp() -> dict:
    """What built an image, as recorded in its cache entry (call after a compile: libnvrtc-builtins
    is only mapped once NVRTC has compiled something)."""
    libs = _loaded_nvrtc_libraries()
    files = list(libs or [])
    for d in cuda_include_dirs()[:1]:
        files += [os.path.join(d, "cuda_fp16.h"), os.path.join(d, "cuda_fp16.hpp")]
    stamps = [s for s in (_file_stamp(p) for p in files) if s is not None]
    return {"nvrtc": list(nvrtc_version()), "files": stamps, "libraries_listed": libs is not None}


def _stamp_current(meta: dict) -> bool:
    """True when the toolchain recorded in `meta` is still the one installed (no NVRTC import when
    the libraries were listed)."""
    for rec in meta.get("files", ()):
        if _file_stamp(rec[0]) != list(rec):
            return False
    if not meta.get("libraries_listed"):
        return list(nvrtc_version()) == list(meta.get("nvrtc", ()))
    return True


def _read_entry(path: str, folder, key: str) -> Optional[bytes]:
    """The image stored at `path` if the file is whole, its MAC (made with `folder`'s secret over the key,
    metadata and image) checks out and its toolchain is current, else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError:                              # a directory (or unreadable file) where the entry goes
        data = b""
    try:
        magic, n_meta, n_img, mac = _HEADER.unpack_from(data, 0)
        if magic != _MAGIC or _HEADER.size + n_meta + n_img != len(data):
            raise ValueError("bad header")
        if not cache_paths.mac_ok(folder, key, memoryview(data)[_HEADER.size:], mac):
            raise ValueError("bad mac")
        meta = json.loads(data[_HEADER.size:_HEADER.size + n_meta])
        if not isinstance(meta, dict):
            raise ValueError("bad metadata")
    except (ValueError, struct.error):           # truncated, foreign, forged or corrupt: rebuilt and rewritten
        stats["corrupt"] += 1
        if cache_paths.writable(folder):
            cache_paths.remove_entry(path)
        return None
    if not _stamp_current(meta):
        stats["stale"] += 1
        return None
    return data[_HEADER.size + n_meta:]


def _write_entry(path: str, image: bytes, meta: dict, key: str) -> None:
    m = json.dumps(meta, sort_keys=True).encode()
    mac = cache_paths.entry_mac(os.path.dirname(path), key, m + image)
    if mac is None:
        raise OSError("no cache secret")
    if os.path.lexists(path) and not os.path.isfile(path):
        cache_paths.remove_entry(path)
    write_atomic(path, (_HEADER.pack(_MAGIC, len(m), len(image), mac), m, image))


def _disk_lookup(key: str, name: str) -> Optional[bytes]:
    try:
        folders = cache_paths.cache_dirs("cuda").read
    except OSError:
        folders = ()
    for folder in folders:                  # a read-only cache's images are served too
        img = _read_entry(os.path.join(folder, name), folder, key)
        if img is not None:
            stats["disk_hits"] += 1
            _mem_cache[key] = img
            return img
    return None


def _build(source, arch: str, key: str, name: str) -> tuple[bytes, float]:
    t0 = time.perf_counter()
    img, _log = compile_source(_text(source), arch)
    secs = time.perf_counter() - t0
    stats["compiles"] += 1
    try:
        _write_entry(os.path.join(cache_dir(), name), img, toolchain_stamp(), key)
    except OSError:
        pass
    return img, secs


def _entry_name(key: str, arch: str) -> str:
    return f"{key[:40]}.{'cubin' if arch.startswith('sm_') else 'ptx'}"


# ------------------------------------------------------------------------------------------ background builds
#
# A program loaded for a CUDA device starts its NVRTC build at once, in a worker thread (compile_async,
# called by runtime/cuda.py when the front end hands over the source), and the kernel that needs the image
# waits for it (compile_cached).  NVRTC releases the GIL and compiles separate programs concurrently, so a
# module's kernels, loaded one after another, build in parallel with each other and with the front end of
# the next one.  Errors reach the caller of compile_cached, as before.

_pending: dict = {}                           # key -> concurrent.futures.Future of (image, seconds)
_executor = None


def _workers():
    global _executor
    if _executor is None:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415  (only when a build is started)
        _executor = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)),
                                       thread_name_prefix="slangjit-nvrtc")
    return _executor


def _before_fork() -> None:
    """A fork waits for the builds under way: NVRTC's own locks may be held by a worker thread, which the
    child would not have (its first NVRTC call would then never return)."""
    for fut in list(_pending.values()):
        try:
            fut.exception()
        except BaseException:  # noqa: BLE001 -- cancelled: nothing runs any more
            pass


def _after_fork_in_child() -> None:
    """The child has none of the parent's threads; the finished builds in `_pending` are its own to collect."""
    global _executor, _prefetch_thread, _lock
    _executor = None
    _prefetch_thread = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def compile_async(source, arch: str, source_sha256: Optional[bytes] = None) -> bool:
    """Start building `source` (the text, or a callable returning it, read only for a build) for `arch` in the
    background unless the image is cached in memory or on disk (or already being built).  True when a build was
    started.  compile_cached(source, arch) returns it."""
    key = cache_key(source, arch, default_options(arch), source_sha256)
    with _lock:
        if key in _mem_cache or key in _pending:
            return False
    name = _entry_name(key, arch)
    if _disk_lookup(key, name) is not None:
        return False
    prefetch_toolchain()
    with _lock:
        if key in _mem_cache or key in _pending:
            return False
        _pending[key] = _workers().submit(_build, source, arch, key, name)
    return True


def compile_cached(source, arch: str, source_sha256: Optional[bytes] = None) -> CompiledImage:
    """cubin (arch "sm_XX") or PTX ("compute_XX") for `source` (the text, or a callable returning it), from
    memory, disk, a background build (compile_async), or NVRTC.

    A memory or disk hit neither imports cuda.bindings.nvrtc nor loads libnvrtc, nor reads a callable source.
    `source_sha256`, when given, must be the sha256 of the source (CompiledProgram.source_sha256)."""
    key = cache_key(source, arch, default_options(arch), source_sha256)
    img = _mem_cache.get(key)
    if img is not None:
        stats["memory_hits"] += 1
        return CompiledImage(img, key, 0.0, True)
    fut = _pending.get(key)
    if fut is not None:
        try:
            img, secs = fut.result()
            _mem_cache[key] = img
        finally:
            with _lock:
                if _pending.get(key) is fut:
                    del _pending[key]
        return CompiledImage(img, key, secs, False)
    name = _entry_name(key, arch)
    img = _disk_lookup(key, name)
    if img is not None:
        return CompiledImage(img, key, 0.0, True)
    img, secs = _build(source, arch, key, name)
    _mem_cache[key] = img
    return CompiledImage(img, key, secs, False)
