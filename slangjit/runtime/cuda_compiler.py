"""NVRTC: generated CUDA C++ -> PTX / cubin, with an on-disk cache. Needs no GPU and no CUDA toolkit.

Needs `cuda-bindings` (`from cuda.bindings import nvrtc`) and the NVRTC library from the
`nvidia-cuda-nvrtc` wheel (or a system CUDA). `cuda_fp16.h` is taken from the
`nvidia-cuda-runtime` wheel's include directory (or $CUDA_HOME/include, /usr/local/cuda/include).

Options: C++17, `-default-device`, no fast math (`--ftz=false --prec-div=true --prec-sqrt=true`;
`--fmad=true` like nvcc and Slang's CUDA target; set SLANGJIT_CUDA_FMAD=0 to turn contraction off).

Cache: `$SLANGJIT_CACHE_DIR/cuda` (default `~/.cache/slangjit/cuda`), one file per
sha256(source, target kind, arch, NVRTC version, options); written atomically (temp + rename),
so concurrent processes and truncated files are safe (a file that fails to load is rebuilt).
"""
from __future__ import annotations

import glob
import hashlib
import os
import sys
import tempfile
import threading
import time
from typing import Optional


class NvrtcError(RuntimeError):
    """NVRTC rejected the generated source (an internal compiler error: the log is attached)."""


_lock = threading.Lock()
_nvrtc = None
_include_dirs: Optional[list[str]] = None


def nvrtc_module():
    """The cuda-bindings NVRTC module (ImportError when the wheel is absent)."""
    global _nvrtc
    if _nvrtc is None:
        from cuda.bindings import nvrtc  # noqa: PLC0415
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
        dirs += sorted(glob.glob(os.path.join(r, "cu*", "include")), reverse=True)
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
    import re
    for l in log.splitlines()[:limit]:
        out.append(l)
        m = re.match(r".*\((\d+)\): error", l)
        if m:
            k = int(m.group(1))
            if 0 < k <= len(lines):
                out.append(f"    | {lines[k - 1].strip()[:200]}")
    return "\n".join(out)


def cache_dir() -> str:
    base = os.environ.get("SLANGJIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "slangjit")
    return os.path.join(base, "cuda")


class CompiledImage:
    def __init__(self, image: bytes, key: str, seconds: float, cached: bool):
        self.image = image
        self.key = key
        self.compile_seconds = seconds
        self.cached = cached


_mem_cache: dict[str, bytes] = {}


def compile_cached(source: str, arch: str) -> CompiledImage:
    """cubin (arch "sm_XX") or PTX ("compute_XX") for `source`, from memory, disk, or NVRTC."""
    ver = nvrtc_version()
    opts = default_options(arch)
    h = hashlib.sha256()
    for part in (source, arch, repr(ver), repr(opts)):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()
    img = _mem_cache.get(key)
    if img is not None:
        return CompiledImage(img, key, 0.0, True)
    d = cache_dir()
    ext = "cubin" if arch.startswith("sm_") else "ptx"
    path = os.path.join(d, f"{key[:40]}.{ext}")
    try:
        with open(path, "rb") as f:
            data = f.read()
        # Stored as <8-byte length><image>: a truncated file fails the length check.
        if len(data) >= 8 and int.from_bytes(data[:8], "little") == len(data) - 8:
            img = data[8:]
            _mem_cache[key] = img
            return CompiledImage(img, key, 0.0, True)
    except OSError:
        pass
    t0 = time.perf_counter()
    img, _log = compile_source(source, arch)
    secs = time.perf_counter() - t0
    _mem_cache[key] = img
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix="." + ext)
        with os.fdopen(fd, "wb") as f:
            f.write(len(img).to_bytes(8, "little"))
            f.write(img)
        os.replace(tmp, path)
    except OSError:
        pass
    return CompiledImage(img, key, secs, False)
