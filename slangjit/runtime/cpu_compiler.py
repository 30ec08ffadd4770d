"""C++ source -> loaded shared library, with an in-memory and an on-disk cache.

* Compiler: `$CXX` (may carry arguments, e.g. "ccache g++"), else `c++`, `g++`, `clang++` on PATH.
* Flags: `BASE_FLAGS`, the host's instruction-set flags (`isa_flags()`), `$SLANGJIT_CXXFLAGS`.
  The instruction set is chosen at run time from the CPU's features (x86-64: `portable`, `v2`
  SSE4.2, `v3` AVX2/FMA/F16C (native half conversions), `v4` AVX-512; `$SLANGJIT_CPU_ISA` picks one
  explicitly, `portable` = none) and spelled as explicit `-m` flags, so it is part of the cache key:
  a cache shared between machines never hands one a library built for another's features.  No
  `-march=native` and no `-ffast-math`: FP contraction is off (`-ffp-contract=off`, no FMA even
  where the ISA has it) and math stays IEEE, so results do not depend on the machine.
  A source whose first line is LANE_KERNELS_ONLY (all its kernels lane-loop kernels) is built by GCC
  without a few -O2 passes that cost those kernels compile time and no speed (LANE_KERNEL_FLAGS).
* Cache: `$SLANGJIT_CACHE_DIR`, else `$XDG_CACHE_HOME/slangjit`, else `~/.cache/slangjit`
  (sub-folder `cpu/`).  Key = sha256(sha256(source), compiler command + resolved path + `--version`
  output, flags).  The compiler's `--version` output is itself cached on disk, keyed by the
  (path, size, mtime) of the compiler executable(s), so a warm start in a new process runs no
  compiler process at all.
* Builds go to a unique temporary file in the cache folder that is then `os.replace`d into
  place: concurrent processes never see a partial library, and two processes building the same
  source both succeed.  Every cached library carries a trailer (magic, length, HMAC-SHA256 under
  the folder's per-user secret over key + ELF/Mach-O bytes, slangjit/cache_paths.py) appended after
  the image, checked before the library is loaded; a library whose trailer does not verify (or a
  directory in its place) is deleted and rebuilt.  A read-only cache folder's libraries are loaded
  where they are; new ones go to the private temp folder (docs/security.md).
* Latency: a program loaded for the CPU device starts its build in a background thread
  (load_library_async; the kernel waits at its first use), so a module's programs build in parallel.
  With GCC, the source's fixed prefix (prelude, up to PCH_END) is precompiled once per prefix, compiler
  and flags (`cpu/pch/`, made at a prefix's second build, HMAC-checked) and each build compiles the rest.
  The host's ISA level is kept per boot id (`compilers/isa-<boot id>.json`): /proc/cpuinfo is slow to read.
* A compiler failure is a slangjit bug (the front end accepted the program): it raises
  `InternalCompilerError` with the compiler's first 40 lines of diagnostics; the failing source
  is kept next to the cache as `failed-<key>.cpp`.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from .. import cache_paths
from ..compiler import frontend_cache
from ..atomic_file import write_atomic
from ..compiler.lazy_source import text_of as _text   # a callable source is read only for a build
from .cpu_pch import PCH_END, _run_process, _tls, _unlink, drop_pch, precompiled_prefix, stop_early
from .cpu_pch import _PCH_VERSION, _pch_ok, _pch_verify  # noqa: F401  (tests reach them through this module)
from ..cache_paths import cache_dir, cache_dirs, entry_mac, mac_ok, remove_entry   # per-user folders + entry MACs

BASE_FLAGS = ("-std=c++17", "-O2", "-fwrapv", "-fPIC", "-shared", "-fno-strict-aliasing",
              "-ffp-contract=off", "-fno-math-errno", "-fopenmp-simd")

_CACHE_VERSION = b"slangjit-cpu-v2"
_TRAILER_MAGIC = b"SJLIB\x02\x00\x00"
_TRAILER = struct.Struct("<8sQ32s")          # magic, image length, HMAC-SHA256(folder secret, key, image)


class InternalCompilerError(RuntimeError):
    """The system C++ compiler rejected code that slangjit generated (a slangjit bug)."""

    def __init__(self, message: str, stderr: str = "", source_path: Optional[str] = None):
        self.stderr = stderr
        self.source_path = source_path
        super().__init__(message)


class CompilerNotFoundError(RuntimeError):
    """No working C++ compiler was found."""


# ------------------------------------------------------------------------------------------ compiler


_compiler_lock = threading.Lock()
_compiler_cmd: Optional[tuple[tuple[str, ...], str]] = None     # (command, $CXX it came from)
_version_cache: dict[tuple[str, ...], str] = {}


def find_compiler() -> tuple[str, ...]:
    """The C++ compiler command as an argv prefix (first element resolved to an absolute path)."""
    global _compiler_cmd
    env = os.environ.get("CXX", "").strip()
    cached = _compiler_cmd
    if cached is not None and cached[1] == env:
        return cached[0]
    if env:
        parts = shlex.split(env)
        exe = shutil.which(parts[0])
        if exe is None:
            raise CompilerNotFoundError(f"$CXX is set to {env!r} but '{parts[0]}' was not found or is not executable")
        cmd = (exe, *parts[1:])
    else:
        for name in ("c++", "g++", "clang++"):
            exe = shutil.which(name)
            if exe:
                cmd = (exe,)
                break
        else:
            raise CompilerNotFoundError(
                "slangjit's CPU backend needs a C++17 compiler: none of $CXX, c++, g++, clang++ was found "
                "on PATH (install g++ or clang++, or set CXX)")
    _compiler_cmd = (cmd, env)
    return cmd


def _exe_stamp(cmd: tuple[str, ...]) -> str:
    parts = []
    for tok in cmd:
        if os.path.isabs(tok) and os.path.exists(tok):
            real = os.path.realpath(tok)
            st = os.stat(real)
            parts.append(f"{tok}={real}:{st.st_size}:{st.st_mtime_ns}")
        else:
            parts.append(tok)
    return "\0".join(parts)


def compiler_version(cmd: tuple[str, ...]) -> str:
    """`cmd --version` output; cached per process and on disk (keyed by the executables' stat)."""
    v = _version_cache.get(cmd)
    if v is not None:
        return v
    stamp = _exe_stamp(cmd)
    vname = hashlib.sha256(stamp.encode()).hexdigest()[:32] + ".json"
    try:
        folders = cache_dirs().read
    except OSError:
        folders = ()
    for d in folders:                   # JSON (no code runs on reading it); a read-only cache's is used too
        try:
            data = json.loads((d / "compilers" / vname).read_text())
            if data.get("stamp") == stamp and isinstance(data.get("version"), str):
                _version_cache[cmd] = data["version"]
                return data["version"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    try:
        vfile = cache_dir() / "compilers" / vname
    except OSError:
        vfile = None
    try:
        p = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CompilerNotFoundError(f"C++ compiler {' '.join(cmd)!r} cannot be run: {e}") from None
    if p.returncode != 0:
        raise CompilerNotFoundError(f"C++ compiler {' '.join(cmd)!r} does not work ('--version' exited with "
                                    f"{p.returncode}): {(p.stderr or p.stdout).strip()[:500]}")
    v = p.stdout.strip()
    try:
        if vfile is not None:
            write_atomic(str(vfile), (json.dumps({"stamp": stamp, "version": v}).encode(),))
    except OSError:                     # a read-only cache: ask the compiler again next process
        pass
    _version_cache[cmd] = v
    return v


# x86-64 instruction-set levels (the psABI's microarchitecture levels), as /proc/cpuinfo feature names
# and the `-m` flags g++ >= 5 and clang++ >= 4 accept for them; each level includes the ones before.
_X86_LEVELS = (
    ("v2", ("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"),
     ("-msse3", "-mssse3", "-msse4.1", "-msse4.2", "-mpopcnt", "-mcx16", "-msahf")),
    ("v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"),
     ("-mavx", "-mavx2", "-mbmi", "-mbmi2", "-mf16c", "-mfma", "-mlzcnt", "-mmovbe", "-mxsave")),
    ("v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
     ("-mavx512f", "-mavx512bw", "-mavx512cd", "-mavx512dq", "-mavx512vl", "-mprefer-vector-width=256")),
)
ISA_LEVELS = ("portable",) + tuple(name for name, _, _ in _X86_LEVELS)
_host_isa: Optional[str] = None


def _cpu_features() -> set:
    """The CPU's feature names (Linux /proc/cpuinfo `flags`); empty where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# Reading /proc/cpuinfo makes the kernel sample every CPU's clock (an interrupt to each): 1-13 ms on a busy
# 2-core VM, more than a whole cache hit.  The level found is kept in the cache folder under the kernel's boot
# id (new at every boot; a machine's features do not change while it runs), so later processes read a line.


def _boot_id() -> Optional[str]:
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:     # bytes: an "ascii" text file imports
            b = f.read().decode("utf-8", "replace").strip()          # that codec (0.2 ms of a warm start)
    except OSError:
        return None
    return b if len(b) == 36 and not b.strip("0123456789abcdef-") else None


def _isa_file(folder: Path, boot: str) -> Path:
    return folder / "compilers" / f"isa-{boot}.json"


def _remembered_isa() -> Optional[str]:
    boot = _boot_id()
    if boot is None:
        return None
    try:
        folders = cache_dirs().read
    except OSError:
        return None
    for d in folders:
        try:
            data = json.loads(_isa_file(d, boot).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("boot") == boot and data.get("isa") in ISA_LEVELS:
            return data["isa"]
    return None


def _remember_isa(level: str) -> None:
    boot = _boot_id()
    if boot is None:
        return
    try:
        write_atomic(str(_isa_file(cache_dir(), boot)), (json.dumps({"boot": boot, "isa": level}).encode(),))
    except OSError:
        pass


def host_isa() -> str:
    """The highest x86-64 level whose features this CPU has ('portable' elsewhere), or `$SLANGJIT_CPU_ISA`."""
    global _host_isa
    env = os.environ.get("SLANGJIT_CPU_ISA", "").strip().lower()
    if env:
        if env not in ISA_LEVELS:
            raise ValueError(f"$SLANGJIT_CPU_ISA={env!r}: expected one of {', '.join(ISA_LEVELS)}")
        return env
    if _host_isa is None:
        level = "portable"
        if platform.machine().lower() in ("x86_64", "amd64"):
            level = _remembered_isa()
            if level is None:
                have = _cpu_features()
                level = "portable"
                for name, need, _ in _X86_LEVELS:
                    if not set(need) <= have:
                        break
                    level = name
                _remember_isa(level)
        _host_isa = level
    return _host_isa


def isa_flags(isa: Optional[str] = None) -> tuple[str, ...]:
    """The compiler flags of an instruction-set level (host_isa() by default)."""
    isa = host_isa() if isa is None else isa
    if isa not in ISA_LEVELS:
        raise ValueError(f"unknown CPU instruction-set level {isa!r}: expected one of {', '.join(ISA_LEVELS)}")
    out: list[str] = []
    for name, _, flags in _X86_LEVELS:
        if isa == "portable":
            break
        out += flags
        if name == isa:
            break
    return tuple(out)


def link_libs() -> tuple[str, ...]:
    """Libraries linked after the source: glibc's vector math library (libmvec, glibc >= 2.22 on x86-64),
    whose functions the lane-blocked kernels' vectorised loops call (emit/cpu_lanes.py)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ()
    try:
        name, ver = (os.confstr("CS_GNU_LIBC_VERSION") or "").split()
        major, minor = (int(x) for x in ver.split(".")[:2])
    except (ValueError, OSError, AttributeError):
        return ()
    return ("-lmvec",) if name == "glibc" and (major, minor) >= (2, 22) else ()


_half_flags: dict[tuple[str, ...], tuple[str, ...]] = {}


def half_rounding_flags(cmd: tuple[str, ...]) -> tuple[str, ...]:
    """The flag that makes `_Float16` arithmetic round after every operation, as numpy's float16 and a GPU do.

    GCC >= 13 (C++) and clang >= 16 evaluate `_Float16` expressions in float on CPUs without native fp16
    arithmetic (excess precision) unless told otherwise, so `a * b + c` would round once instead of twice and
    results would depend on the compiler.  GCC 12 rounds every operation already and rejects the flag.
    Chosen from the compiler's version, then checked once per process by preprocessing an empty file."""
    got = _half_flags.get(cmd)
    if got is not None:
        return got
    kind, major = _compiler_major(compiler_version(cmd))
    cand: tuple[str, ...] = ()
    if kind == "clang" and major >= 16:
        cand = ("-ffloat16-excess-precision=none",)
    elif kind == "gcc" and major >= 13:
        cand = ("-fexcess-precision=16",)
    if cand:
        cand = _probed_flags(cmd, cand)
    _half_flags[cmd] = cand
    return cand


def _compiler_major(v: str) -> tuple[str, int]:
    """("clang" | "gcc" | "", major version) from `--version` output: the first of "clang version N",
    "(GCC) N", or a "g++" (or leading "c++ (") line's last " N.N.N" (Debian's "g++ (Debian 12.2.0-14) 12.2.0").  String
    operations, not a regular expression: compiling one is a tenth of a warm process's cache hit."""
    found = []
    i = v.find("clang version ")
    if i >= 0:
        found.append((i, "clang", _leading_int(v[i + 14:])))
    i = v.find("(GCC) ")
    if i >= 0:
        found.append((i, "gcc", _leading_int(v[i + 6:])))
    i = v.find("g++")
    if i < 0 and v.startswith("c++ ("):     # GCC installed as c++ (Ubuntu: "c++ (Ubuntu 13.3.0-6ubuntu2) 13.3.0")
        i = 0
    if i >= 0:
        line = v[i:].split("\n", 1)[0]
        for tok in reversed(line.split(" ")[1:]):
            parts = tok.split(".")
            if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit() and _leading_int(parts[2]) >= 0:
                found.append((i, "gcc", int(parts[0])))
                break
    found = [f for f in found if f[2] >= 0]
    if not found:
        return "", 0
    _, kind, major = min(found, key=lambda f: f[0])
    return kind, major


def _leading_int(s: str) -> int:
    """The decimal number at the start of `s` (ASCII digits), -1 when there is none."""
    n = 0
    while n < len(s) and "0" <= s[n] <= "9":
        n += 1
    return int(s[:n]) if n else -1


def _probed_flags(cmd: tuple[str, ...], cand: tuple[str, ...]) -> tuple[str, ...]:
    """`cand` if the compiler accepts it (preprocessing an empty file), else (); the answer is kept on disk
    beside the compiler's version (keyed by the executables' stat), so a warm process starts no compiler."""
    stamp = _exe_stamp(cmd) + "\0" + " ".join(cand)
    name = hashlib.sha256(stamp.encode()).hexdigest()[:32] + ".flags.json"
    try:
        folders = cache_dirs().read
    except OSError:
        folders = ()
    for d in folders:
        try:
            data = json.loads((d / "compilers" / name).read_text())
            if data.get("stamp") == stamp and isinstance(data.get("ok"), bool):
                return cand if data["ok"] else ()
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    try:
        p = subprocess.run([*cmd, "-std=c++17", *cand, "-x", "c++", "-E", os.devnull, "-o", os.devnull],
                           capture_output=True, timeout=60)
        ok = p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return ()                       # not recorded: asked again next process
    try:
        write_atomic(str(cache_dir() / "compilers" / name), (json.dumps({"stamp": stamp, "ok": ok}).encode(),))
    except OSError:
        pass
    return cand if ok else ()


# emit/program.py LANE_KERNELS_ONLY: the first line of a source whose kernels are all lane-loop kernels, which
# GCC builds at -O3 without these passes (CpuOptions.lane_compile_flags): the passes cost compile time, not speed;
# -O3 (GCC applies the -fno- flags whatever their order) makes the seed MLP's learnGradient 1.70 -> 1.62 ms of
# CPU (2-core AMD EPYC, one worker) for +0.03 s of g++ (0.32 -> 0.35 s).
LANE_KERNELS_ONLY = "// slangjit: lane-loop kernels only"
LANE_KERNEL_FLAGS = ("-O3", "-fno-tree-pre", "-fno-gcse", "-fno-code-hoisting", "-fno-tree-vrp",
                     "-fno-schedule-insns2", "-fno-expensive-optimizations")


def source_flags(source: str, cmd: tuple[str, ...], flags: tuple[str, ...]) -> tuple[str, ...]:
    """`flags` and what the source's first line asks for (LANE_KERNELS_ONLY, with GCC)."""
    if source.startswith(LANE_KERNELS_ONLY + "\n") and _is_gcc(cmd):
        return flags[:len(BASE_FLAGS)] + LANE_KERNEL_FLAGS + flags[len(BASE_FLAGS):]   # before $SLANGJIT_CXXFLAGS
    return flags


def compile_flags() -> tuple[str, ...]:
    extra = os.environ.get("SLANGJIT_CXXFLAGS", "").strip()
    with _facts_lock:                   # one thread at a time finds the compiler's facts (prepare_async)
        cmd = find_compiler()
        flags = BASE_FLAGS + half_rounding_flags(cmd) + isa_flags()
    return flags + (tuple(shlex.split(extra)) if extra else ())


# A cold process learns the compiler's facts (its `--version`, whether it takes the half-rounding flag, the host's
# ISA level: two compiler processes and /proc/cpuinfo, 3-30 ms) before its first build; cpu_prepare.prepare_async,
# called at the process's first front-end miss for the CPU target (frontend_cache.first_miss_hooks), has a daemon
# thread find them while that front end runs.  A warm process (front-end cache hits) starts no thread: it reads the facts from
# the cache folder (three small files, ~0.5 ms) at its first build request.  A thread started at device creation
# cost a warm process more than it saved: starting it and sharing the GIL with it took 1-3 ms of device creation
# and ~0.3 ms of the cache hit (its file reads and the hit's stat calls hand the GIL back and forth).
_facts_lock = threading.Lock()


# ------------------------------------------------------------------------------------------ cache dir





def _is_gcc(cmd: tuple[str, ...]) -> bool:
    v = compiler_version(cmd)
    return "Free Software Foundation" in v and "clang" not in v.lower()


# ------------------------------------------------------------------------------------------ library


_LIB_EXT = ".dylib" if sys.platform == "darwin" else ".so"


class CpuLibrary:
    """A loaded shared library built from C++ source."""

    def __init__(self, lib: ctypes.CDLL, path: str, key: str, from_disk: bool, compile_seconds: float,
                 load_seconds: float):
        self.lib = lib
        self.path = path
        self.key = key
        self.from_disk = from_disk              # True: found in the on-disk cache (no compiler ran)
        self.compile_seconds = compile_seconds  # 0.0 when from the cache
        self.load_seconds = load_seconds
        self._chunks = False                    # chunk_runner(), looked up on first use

    def symbol(self, name: str):
        try:
            return self.lib[name]
        except AttributeError:
            raise InternalCompilerError(f"generated library {self.path} has no symbol '{name}'") from None

    def chunk_runner(self):
        """The library's `sj_run_chunks` (emit/program.py CppTarget.trailer) with its argument types, or None."""
        if self._chunks is False:
            try:
                f = self.lib["sj_run_chunks"]
            except AttributeError:
                f = None
            else:
                f.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p)
                f.restype = None
            self._chunks = f
        return self._chunks

    def __repr__(self) -> str:
        return f"CpuLibrary({self.path!r})"


_libs: dict[str, CpuLibrary] = {}
_key_locks: dict[str, threading.Lock] = {}


def library_key(source: str, cmd: Optional[tuple[str, ...]] = None, flags: Optional[tuple[str, ...]] = None,
                source_sha256: Optional[bytes] = None) -> str:
    """The library's cache key: sha256 over the source's sha256 (`source_sha256` when the caller has it:
    CompiledProgram.source_sha256, computed once per program), the compiler and its version, the flags."""
    cmd = find_compiler() if cmd is None else cmd
    flags = compile_flags() if flags is None else flags
    if source_sha256 is None:
        source_sha256 = hashlib.sha256(source.encode("utf-8", "surrogatepass")).digest()
    h = hashlib.sha256()
    for part in (_CACHE_VERSION, source_sha256, "\0".join(cmd).encode(), compiler_version(cmd).encode(),
                 "\0".join(flags).encode(), "\0".join(link_libs()).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _verify(path: Path, folder: Path, key: str) -> bool:
    """True when `path` holds a complete library written by `_build` for `key` into `folder` (its trailer's
    MAC, made with the folder's secret, checks out): checked before the library is loaded."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    if len(data) < _TRAILER.size:
        return False
    magic, n, mac = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    if magic != _TRAILER_MAGIC or n != len(data) - _TRAILER.size:
        return False
    return mac_ok(folder, key, memoryview(data)[:n], mac)


# emit/cpu_lane_split.py PARTS_MARK: the header line `// slangjit: parts N on M+ cores` of a source whose long lane
# kernels are also in N parts (CpuOptions.lane_part_lines, lane_part_min_cpus), which a machine with M cores or more
# builds as N compiler processes at once (-DSJ_PART=p -c) and a link; elsewhere the source builds whole, as before.
# The seed MLP's learnGradient: g++ 0.35 s of CPU in one process, ~0.2 s in three.
_PARTS_LINE = re.compile(r"^// slangjit: parts (\d+) on (\d+)\+ cores$", re.M)


def source_parts(source: str, cpus: Optional[int] = None) -> int:
    """How many compiler processes build `source` on a machine with `cpus` cores (this one's by default): N of its
    `// slangjit: parts N on M+ cores` header line where cpus >= M, else 1."""
    m = _PARTS_LINE.search(source[:600])
    if m is None or int(m.group(1)) < 2:
        return 1
    n = (os.cpu_count() or 1) if cpus is None else cpus
    return int(m.group(1)) if n >= int(m.group(2)) else 1


def _compile(cmd: tuple[str, ...], flags: tuple[str, ...], extra: list, lib: str, src: str,
             parts: int) -> "subprocess.CompletedProcess":
    """The shared library `lib` from `src`: one compiler process, or `parts` at once (one object each) and a link."""
    if parts < 2:
        return _run_compiler([*cmd, *flags, *extra, "-o", lib, src, *link_libs()])
    objs = [f"{lib}.p{k}.o" for k in range(parts)]
    done: list = [None] * parts

    def part(k: int) -> None:
        try:
            done[k] = _run_compiler([*cmd, *flags, f"-DSJ_PART={k}", "-c", *extra, "-o", objs[k], src])
        except BaseException as e:          # raised again in the building thread
            done[k] = e

    try:
        others = [threading.Thread(target=part, args=(k,), daemon=True) for k in range(1, parts)]
        for t in others:
            t.start()
        part(0)                             # part 0 in this thread, the others beside it
        for t in others:
            t.join()
        for p in done:
            if isinstance(p, BaseException):
                raise p
            if p.returncode != 0:
                return p
        return _run_compiler([*cmd, *flags, "-o", lib, *objs, *link_libs()])
    finally:
        for o in objs:
            _unlink(o)


def _run_compiler(argv: list) -> "subprocess.CompletedProcess":
    try:
        return _run_process(argv)
    except OSError as e:
        raise CompilerNotFoundError(f"C++ compiler {argv[0]!r} cannot be run: {e}") from None


def _build(source: str, cmd: tuple[str, ...], flags: tuple[str, ...], key: str, final: Path, parts: int = 1) -> float:
    d = final.parent
    t0 = time.perf_counter()
    pch = precompiled_prefix(source, cmd, compiler_version(cmd), flags, d) if _is_gcc(cmd) else None
    # (the -include argument, the rest of the source) or None
    fd, src_tmp = tempfile.mkstemp(dir=str(d), prefix=f".build-{key[:16]}-", suffix=".cpp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(source if pch is None else pch[1])
    fd, lib_tmp = tempfile.mkstemp(dir=str(d), prefix=f".build-{key[:16]}-", suffix=_LIB_EXT)
    os.close(fd)
    try:
        p = None
        if pch is not None:
            p = _compile(cmd, flags, ["-include", pch[0]], lib_tmp, src_tmp, parts)
            if p.returncode != 0 or os.path.getsize(lib_tmp) == 0:     # the header is not usable: without it
                drop_pch(pch[0])
                with open(src_tmp, "w", encoding="utf-8") as f:
                    f.write(source)
                p = None
        if p is None:
            p = _compile(cmd, flags, [], lib_tmp, src_tmp, parts)
        if p.returncode != 0 or os.path.getsize(lib_tmp) == 0:
            keep = d / f"failed-{key[:16]}.cpp"
            try:
                os.replace(src_tmp, keep)
            except OSError:
                keep = None
            diag = (p.stderr or p.stdout or "").splitlines()
            head = "\n".join(diag[:40]) + ("\n..." if len(diag) > 40 else "")
            raise InternalCompilerError(
                f"internal compiler error: the C++ compiler rejected slangjit's generated code "
                f"(this is a slangjit bug; source kept at {keep}):\n"
                f"$ {' '.join(cmd)} {' '.join(flags)}\n{head}", stderr=p.stderr, source_path=str(keep) if keep else None)
        seconds = time.perf_counter() - t0
        _install(lib_tmp, d, key, final)
        return seconds
    finally:
        _unlink(src_tmp)
        _unlink(lib_tmp)


def _install(lib_tmp: str, d: Path, key: str, final: Path) -> None:
    """The built library `lib_tmp` with its trailer (length, HMAC) in place at `final`."""
    with open(lib_tmp, "rb") as f:
        image = f.read()
    mac = entry_mac(d, key, image)
    if mac is None:
        raise PermissionError(f"slangjit cache folder {d} has no usable secret.key")
    with open(lib_tmp, "ab") as f:
        f.write(_TRAILER.pack(_TRAILER_MAGIC, len(image), mac))
        f.flush()
        os.fsync(f.fileno())
    os.chmod(lib_tmp, 0o700)
    if os.path.lexists(final) and not os.path.isfile(final):
        remove_entry(final)             # a directory where the library goes would block os.replace forever
    os.replace(lib_tmp, final)


def _upgrade(source: str, cmd: tuple[str, ...], flags: tuple[str, ...], key: str, final: Path) -> None:
    """After a build in parts (faster to make, its kernels a few % slower: function boundaries between the parts),
    the same source built whole, in the background, over the cached library: the next process loads that one.  Its
    compiler is stopped at exit (an `early` build: cpu_pch.stop_early), which leaves the parts build in place."""
    _tls.early = True
    d = final.parent
    fd, src_tmp = tempfile.mkstemp(dir=str(d), prefix=f".upgrade-{key[:16]}-", suffix=".cpp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(source)
    fd, lib_tmp = tempfile.mkstemp(dir=str(d), prefix=f".upgrade-{key[:16]}-", suffix=_LIB_EXT)
    os.close(fd)
    try:
        p = _compile(cmd, flags, [], lib_tmp, src_tmp, 1)
        if p.returncode == 0 and os.path.getsize(lib_tmp) > 0 and os.path.isfile(final):
            _install(lib_tmp, d, key, final)
    except (OSError, CompilerNotFoundError):
        pass
    finally:
        _unlink(src_tmp)
        _unlink(lib_tmp)


def precompile_prefix(prefix: str) -> None:
    """Make the precompiled header of this prefix (emit/program.py cpp_prefix) now, unless it exists: the early
    prelude of CpuOptions.early_pch, run in a daemon thread per prefix while the front end runs.  A build of a
    unit with this prefix that comes meanwhile waits for it (the prefix's lock); at exit a header still being
    made is abandoned (its compiler stopped, its temporary files removed: _stop_early)."""
    _tls.early = True
    try:
        cmd = find_compiler()
        base = compile_flags()
        if os.environ.get("SLANGJIT_NO_PCH") or not _is_gcc(cmd):
            return
        precompiled_prefix(prefix + PCH_END + "\n", cmd, compiler_version(cmd), source_flags(prefix, cmd, base),
                           cache_dir(), early=True)
    except Exception:  # noqa: BLE001 -- an optimisation only: builds make or skip the header as before
        pass
    finally:
        _tls.early = False


_early_threads: list = []


def _stop_early() -> None:
    stop_early()
    for t in _early_threads:
        t.join(5.0)


def _early_pch(target: str, options) -> None:
    """frontend_cache's first-miss hook: start the early precompiled prelude (CpuOptions.early_pch)."""
    cpu = getattr(options, "cpu", None)
    if target != "cpp" or not getattr(cpu, "early_pch", False):
        return
    from ..compiler.emit.program import cpp_prefix   # reason: the emitter, imported only by a front-end miss
    for lanes in (True, False):         # the lane-loop kernels' first: theirs are the long builds
        prefix = cpp_prefix(cpu, lane_loops=lanes, privatised=lanes)
        if prefix:
            t = threading.Thread(target=precompile_prefix, args=(prefix,), name="slangjit-pch", daemon=True)
            _early_threads.append(t)
            t.start()


frontend_cache.first_miss_hooks.append(_early_pch)
atexit.register(_stop_early)


def _flags_for(source, head: Optional[str], cmd: tuple[str, ...]) -> tuple[str, ...]:
    if head is None:
        source = _text(source)
        i = source.find("\n")
        head = source if i < 0 else source[:i]
    return source_flags(head + "\n", cmd, compile_flags())


def load_library(source, source_sha256: Optional[bytes] = None, head: Optional[str] = None) -> CpuLibrary:
    """Compile `source` (C++) to a shared library, or find it in the cache (or a background build,
    load_library_async), and load it.  `source_sha256`, when given, must be the sha256 of `source`.  `source`
    may be a callable that returns it (read only when the library is built), with `source_sha256` and `head`
    (its first line, which picks flags: source_flags) given."""
    t0 = time.perf_counter()
    cmd = find_compiler()
    flags = _flags_for(source, head, cmd)
    if source_sha256 is None:
        source = _text(source)
    key = library_key(source, cmd, flags, source_sha256)
    lib = _libs.get(key)
    if lib is not None:
        if key in _pending:             # a background build that finished before anyone asked
            with _compiler_lock:
                b = _pending.get(key)
                if b is not None and b.done():
                    del _pending[key]
        return lib
    fut = _pending.get(key)
    if fut is not None:
        if not fut.done():              # this thread waits for the C++ compiler: a good time for the
            frontend_cache.write_trees_in_background()     # front end's deferred syntax-tree writes
        try:
            return fut.result()
        finally:
            with _compiler_lock:
                if _pending.get(key) is fut:
                    del _pending[key]
    return _load(source, cmd, flags, key, t0)


def _load(source, cmd: tuple[str, ...], flags: tuple[str, ...], key: str, t0: float) -> CpuLibrary:
    with _compiler_lock:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        lib = _libs.get(key)
        if lib is not None:
            return lib
        name = key[:40] + _LIB_EXT
        compile_seconds = 0.0
        from_disk = False
        handle = None
        final = None
        for folder in cache_dirs().read:    # a read-only cache's libraries are loaded from where they are
            path = folder / name
            if not os.path.lexists(path):
                continue
            if os.path.isfile(path) and _verify(path, folder, key):
                try:
                    handle = ctypes.CDLL(str(path))
                    from_disk, final = True, path
                    break
                except OSError:
                    pass
            if cache_paths.writable(folder):  # truncated / corrupt / forged / another key's / a directory: rebuild
                remove_entry(path)
        if handle is None:
            final = cache_dir() / name
            text = _text(source)
            parts = source_parts(text)
            compile_seconds = _build(text, cmd, flags, key, final, parts)
            try:
                handle = ctypes.CDLL(str(final))
            except OSError as e:
                raise InternalCompilerError(f"cannot load the freshly built library {final}: {e}") from None
            if parts > 1:
                t = threading.Thread(target=_upgrade, args=(text, cmd, flags, key, final), name="slangjit-cxx-whole",
                                     daemon=True)
                _early_threads.append(t)
                t.start()
        lib = CpuLibrary(handle, str(final), key, from_disk, compile_seconds,
                         time.perf_counter() - t0 - compile_seconds)
        _libs[key] = lib
        return lib


# ------------------------------------------------------------------------------------------ background builds
#
# A program loaded for the CPU device starts its C++ build at once, in a worker thread (load_library_async,
# called by runtime/cpu.py when the front end hands over the source); the kernel loads the library at its
# first use (load_library waits for the build there).  The compiler runs as a separate process, so a
# module's programs, loaded one after another, build in parallel with each other and with the front end of
# the next one.  A build's error reaches the caller of load_library, as before.

_pending: dict = {}                     # key -> _Build
_START_WAIT = 0.05                       # seconds load_library_async waits at most for a build's compiler to start
_build_slots = threading.BoundedSemaphore(max(1, min(8, os.cpu_count() or 1)))   # compiler processes at once


class _Build:
    """One background build: a daemon thread running _load; `result()` waits and returns or raises."""

    def __init__(self, fn, *args):
        self._done = threading.Event()
        self.started = threading.Event()    # set once its compiler process runs (or it waits for a slot, or ended)
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name="slangjit-cxx", daemon=True)
        self._thread.start()

    def _run(self, fn, args) -> None:
        _tls.started = self.started
        try:
            if not _build_slots.acquire(blocking=False):
                self.started.set()          # all slots busy: nobody should wait for this one to start
                _build_slots.acquire()
            try:
                self._value = fn(*args)
            finally:
                _build_slots.release()
        except BaseException as e:  # noqa: BLE001 -- handed to the waiter
            self._error = e
        finally:
            _tls.started = None
            self.started.set()
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self):
        self._done.wait()
        if self._error is not None:
            raise self._error.with_traceback(None)
        return self._value


def _known(key: str, name: str) -> bool:
    """The library is loaded, being built, or has a file in a cache folder (load_library verifies it)."""
    if key in _libs or key in _pending:
        return True
    try:
        folders = cache_dirs().read
    except OSError:
        return False
    return any(os.path.lexists(folder / name) for folder in folders)


def load_library_async(source, source_sha256: Optional[bytes] = None, head: Optional[str] = None) -> bool:
    """Start building `source` in the background unless its library is loaded, on disk or being built.
    True when a build was started; load_library(source) returns its library (or raises its error).  `source`
    may be a callable, as for load_library."""
    cmd = find_compiler()
    flags = _flags_for(source, head, cmd)
    if source_sha256 is None:
        source = _text(source)
    key = library_key(source, cmd, flags, source_sha256)
    name = key[:40] + _LIB_EXT
    with _compiler_lock:
        if _known(key, name):
            return False
        b = _pending[key] = _Build(_load, source, cmd, flags, key, time.perf_counter())
    # Let the build thread reach its compiler process before this thread goes on (to the next program's
    # front end, say): otherwise the compiler starts only when that thread next gets the GIL (5 ms or more
    # later).  Its work before the process starts (writing the source, the precompiled-header check) is
    # ~1-2 ms; the wait is bounded all the same.
    b.started.wait(_START_WAIT)
    return True


def _finish_builds() -> None:
    """At exit: let the builds under way finish (their compiler processes would otherwise be orphaned
    half way, leaving temporary files in the cache folder); their errors are nobody's to report now."""
    for b in list(_pending.values()):
        b._done.wait()


atexit.register(_finish_builds)


def _after_fork_in_child() -> None:      # a lock held by another thread at fork() would never be released
    global _compiler_lock, _key_locks, _build_slots, _facts_lock
    _compiler_lock = threading.Lock()
    _facts_lock = threading.Lock()
    _key_locks = {}
    _build_slots = threading.BoundedSemaphore(max(1, min(8, os.cpu_count() or 1)))
    _pending.clear()                    # the parent's build threads do not exist here: its builds are not ours
    _early_threads.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def clear_memory_cache() -> None:
    """Forget loaded libraries (they stay mapped); mainly for tests."""
    _libs.clear()
