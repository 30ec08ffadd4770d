"""The compiler-facts thread of a cold process, and the readahead of the C++ toolchain's files (CpuOptions.readahead).

At the process's first front-end miss for the CPU target (frontend_cache.first_miss_hooks; this module registers
the hook when runtime/cpu.py imports it) `prepare_async` starts a daemon thread that finds the compiler's facts
(cpu_compiler.compile_flags: `--version`, the half-rounding probe, the ISA level) while the front end runs, and then,
with CpuOptions.readahead, asks the kernel to read the toolchain's files.  A warm process (front-end cache hits)
starts no thread: device creation and the hit stay free of it (a thread started at device creation cost a warm
process 1-3 ms of device creation and GIL hand-overs during the hit).

The first process on a fresh machine finds none of the compiler's files in the page cache: the g++ driver, cc1plus
(~35 MB), as, ld and their shared libraries, the C runtime objects and the headers the prelude includes are read
from disk by the compiler processes as they need them, one page fault or `open` after another.  In the facts thread, after the
compiler's facts, this module asks the kernel to start reading them (`posix_fadvise(POSIX_FADV_WILLNEED)`: asynchronous, no extra process,
a few microseconds a file when they are cached already), so the reads overlap the front end (~0.2 s).

The list is found without running a process: the driver (realpath); cc1plus, collect2, as and ld where the driver
runs them from (beside it: a wrapper script passing -B its own folder, as a GCC installed under /opt; else cc1plus and
collect2 from the GCC program folder of the compiler's major version, as and ld from PATH), that folder's LTO plugin,
crtbeginS.o ...; the shared libraries those ELF
files name (DT_NEEDED), the link's C runtime files, and the headers the prelude includes, followed through their own
`#include` lines (a superset: conditionals are not evaluated).  It is kept beside the compiler's version in the cache
folder (keyed by the executables' stat), so later cold compiles on the folder list nothing again.  Nothing is listed
or read ahead where that cc1plus is mostly in the page cache (mincore): the toolchain is warm.  GCC only.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import mmap
import os
import re
import shutil
import struct
import threading
from typing import Optional

from ..atomic_file import write_atomic
from ..compiler import frontend_cache
from .cpu_compiler import _compiler_major, _exe_stamp, cache_dir, compile_flags, compiler_version, find_compiler

_facts_started = False


def prepare_async(readahead: bool = False) -> Optional[threading.Thread]:
    """Find the C++ compiler and its flags in a daemon thread (once per process; the thread, or None when one
    was started before); errors are left to the first build, which asks again.  `readahead`: then have the
    kernel start reading the toolchain's files (below)."""
    global _facts_started
    if _facts_started:
        return None
    _facts_started = True
    t = threading.Thread(target=_prepare, args=(readahead,), name="slangjit-cxx-facts", daemon=True)
    t.start()
    return t


def _prepare(readahead: bool) -> None:
    try:
        compile_flags()
        if readahead:
            toolchain_readahead()
    except Exception:  # noqa: BLE001 -- the build that needs the compiler raises it again, to its caller
        pass


def toolchain_readahead(force: bool = False) -> int:
    """posix_fadvise(WILLNEED) on the files a cold build reads (the list kept in the cache folder beside the
    compiler's version); returns how many files were advised.  Nothing (0) where the compiler proper (cc1plus)
    is mostly in the page cache already, unless `force`: the toolchain is warm, and listing its files for a new
    cache folder (~10 ms of the thread's CPU) would only slow the front end."""
    cmd = find_compiler()
    kind, major = _compiler_major(compiler_version(cmd))
    if not force and kind == "gcc":
        drivers = [os.path.realpath(t) for t in cmd if os.path.isabs(t) and os.path.isfile(t)]
        cc1 = _program(drivers[-1], _gcc_dirs(drivers[-1], major), "cc1plus") if drivers else None
        if cc1 and resident_fraction(cc1) >= 0.5:
            return 0
    try:
        stamp = _exe_stamp(cmd) + "\0" + _VERSION
        path = str(cache_dir() / "compilers" / (hashlib.sha256(stamp.encode()).hexdigest()[:32] + ".readahead.json"))
    except OSError:
        path = None
    return readahead(cached_files(cmd, major if kind == "gcc" else None, path))


def _prepare_on_miss(target: str, options) -> None:
    """frontend_cache's first-miss hook: a C++ build follows this front end, so find the compiler's facts now
    (and, with CpuOptions.readahead, start reading the toolchain's files)."""
    if target == "cpp":
        prepare_async(bool(getattr(getattr(options, "cpu", None), "readahead", False)))


frontend_cache.first_miss_hooks.append(_prepare_on_miss)


# ------------------------------------------------------------------------------------------ the toolchain's files

_VERSION = "slangjit-readahead-v2"
_GCC_FILES = ("lto-wrapper", "liblto_plugin.so", "crtbeginS.o", "crtendS.o", "libgcc.a",
              "libgcc_s.so", "libstdc++.so")
_LINK_FILES = ("crti.o", "crtn.o", "libc.so", "libc_nonshared.a", "libm.so", "libmvec.so", "libgcc_s.so.1",
               "libc.so.6", "libm.so.6", "libmvec.so.1")
_INCLUDE = re.compile(rb'#[ \t]*include(_next)?[ \t]*[<"]([^>"\n]+)[>"]')
_MAX_HEADERS = 600
_PRELUDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compiler", "emit")


def _gcc_dirs(driver: str, major: int) -> list:
    """(triple, GCC program folder, prefix) of every installed GCC whose version folder's major is `major`."""
    prefixes = []
    for p in (os.path.dirname(os.path.dirname(driver)), "/usr", "/usr/local"):
        if p not in prefixes:
            prefixes.append(p)
    out = []
    for pre in prefixes:
        for sub in ("lib/gcc", "libexec/gcc", "lib64/gcc"):
            for d in sorted(glob.glob(os.path.join(pre, sub, "*", "*"))):
                if os.path.basename(d).split(".")[0] == str(major) and os.path.isdir(d):
                    out.append((os.path.basename(os.path.dirname(d)), d, pre))
    return out


def _program(driver: str, gccs: list, prog: str) -> Optional[str]:
    """The `prog` (cc1plus, collect2, as, ld) that the driver runs: beside it (a wrapper script that passes -B its
    own folder), else in the GCC program folder of its version (cc1plus, collect2), else on PATH."""
    here = os.path.join(os.path.dirname(driver), prog)
    if os.path.isfile(here):
        return here
    if prog not in ("as", "ld"):
        for _, d, _ in gccs:
            p = os.path.join(d, prog)
            if os.path.isfile(p):
                return p
    exe = shutil.which(prog)
    return os.path.realpath(exe) if exe else None


def elf_needed(path: str) -> list:
    """The DT_NEEDED names of a 64-bit little-endian ELF file ([] for anything else)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:6] != b"\x7fELF\x02\x01":
                return []
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            ph = f.read(phentsize * phnum)
            loads, dyn = [], None
            for i in range(phnum):
                p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", ph, i * phentsize)
                if p_type == 1:
                    loads.append((p_vaddr, p_offset, p_filesz))
                elif p_type == 2:
                    dyn = (p_offset, p_filesz)
            if dyn is None:
                return []
            f.seek(dyn[0])
            data = f.read(dyn[1])
            needed, strtab = [], None
            for i in range(0, len(data) - 15, 16):
                tag, val = struct.unpack_from("<qQ", data, i)
                if tag == 0:
                    break
                if tag == 1:
                    needed.append(val)
                elif tag == 5:
                    strtab = val
            if strtab is None:
                return []
            for vaddr, off, size in loads:              # the string table's file offset
                if vaddr <= strtab < vaddr + size:
                    base = strtab - vaddr + off
                    break
            else:
                return []
            names = []
            for n in needed:
                f.seek(base + n)
                names.append(f.read(256).split(b"\0", 1)[0].decode("utf-8", "replace"))
            return names
    except (OSError, struct.error):
        return []


def _headers(include_dirs: list) -> list:
    """The headers the prelude includes, followed through their `#include` / `#include_next` lines (found in
    `include_dirs`; an `#include_next` takes every other file of that name there: a superset)."""
    roots = [os.path.join(_PRELUDE, "prelude.h")] + sorted(glob.glob(os.path.join(_PRELUDE, "prelude", "*.h")))
    seen, out, todo = set(), [], []

    def scan(path: str, data: Optional[bytes] = None) -> None:
        try:
            if data is None:
                with open(path, "rb") as f:
                    data = f.read()
        except OSError:
            return
        for nxt, name in _INCLUDE.findall(data):
            todo.append((name.decode("utf-8", "replace"), path, bool(nxt)))

    for r in roots:
        scan(r)
    todo = [(name, None, nxt) for name, _, nxt in todo if not name.startswith(("prelude/", "cuda"))]
    while todo and len(out) < _MAX_HEADERS:
        name, src, nxt = todo.pop()
        dirs = include_dirs if nxt or src is None else [os.path.dirname(src)] + include_dirs
        for d in dirs:
            p = os.path.normpath(os.path.join(d, name))
            if p == src or not os.path.isfile(p):
                continue
            if p not in seen:
                seen.add(p)
                out.append(p)
                scan(p)
            if not nxt:
                break
    return out


def toolchain_files(cmd: tuple, gcc_major: Optional[int]) -> list:
    """The files a cold C++ build of a slangjit unit reads (see the module's docstring) for the compiler command
    `cmd`: its drivers only where `gcc_major` is None (not GCC)."""
    drivers = [os.path.realpath(t) for t in cmd if os.path.isabs(t) and os.path.isfile(t)]
    if gcc_major is None or not drivers:
        return drivers
    files = list(drivers)
    gccs = _gcc_dirs(drivers[-1], gcc_major)
    for _, d, _ in gccs:
        files += [os.path.join(d, n) for n in _GCC_FILES]
    for prog in ("cc1plus", "collect2", "as", "ld"):
        exe = _program(drivers[-1], gccs, prog)
        if exe and exe not in files:
            files.append(exe)
    triples = sorted({t for t, _, _ in gccs})
    lib_dirs = [p for t in triples for p in (f"/lib/{t}", f"/usr/lib/{t}")] + ["/lib64", "/usr/lib64", "/usr/lib", "/lib"]
    i = 0
    while i < len(files):                   # the executables' libraries, and theirs
        for n in elf_needed(files[i]):
            for d in lib_dirs:
                p = os.path.join(d, n)
                if os.path.isfile(p):
                    p = os.path.realpath(p)
                    if p not in files:
                        files.append(p)
                    break
        i += 1
    for t in triples:
        files += [os.path.join(f"/usr/lib/{t}", n) for n in _LINK_FILES]
    include_dirs = []
    for t, d, pre in gccs:
        ver = os.path.basename(d)
        include_dirs += [f"{pre}/include/c++/{ver}", f"{pre}/include/{t}/c++/{ver}", f"{pre}/include/c++/{ver}/backward",
                         os.path.join(d, "include"), "/usr/local/include", f"{pre}/include/{t}", f"{pre}/include"]
    files += _headers([d for d in dict.fromkeys(include_dirs) if os.path.isdir(d)])
    out = []
    for f in dict.fromkeys(files):
        if os.path.isfile(f):
            out.append(f)
    return out


def cached_files(cmd: tuple, gcc_major: Optional[int], list_path: Optional[str]) -> list:
    """toolchain_files(cmd, gcc_major), kept as JSON at `list_path` (cpu_compiler keys it by the executables'
    stat, beside the compiler's version)."""
    if list_path is not None:
        try:
            with open(list_path, "rb") as f:
                data = json.loads(f.read())
            if isinstance(data, list) and all(isinstance(x, str) for x in data):
                return data
        except (OSError, ValueError):
            pass
    files = toolchain_files(cmd, gcc_major)
    if list_path is not None and files:
        try:
            write_atomic(list_path, (json.dumps(files).encode(),))
        except OSError:
            pass
    return files


_libc = None
_CHUNK = 2 << 20


def resident_fraction(path: str) -> float:
    """The fraction of `path`'s pages in the page cache (mincore over a private mapping; nothing is read).
    1.0 where it cannot be told (no mincore): then nothing is read ahead."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return 1.0
            mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            buf = ctypes.c_char.from_buffer(mm)
            try:
                rc = _libc.mincore(ctypes.addressof(buf), size, vec)
            finally:
                del buf
        finally:
            mm.close()
        if rc != 0:
            return 1.0
        return 1.0 - bytes(vec).count(0) / pages
    except (OSError, AttributeError, ValueError, TypeError):
        return 1.0


def readahead(files: list) -> int:
    """posix_fadvise(POSIX_FADV_WILLNEED) on each file: the kernel starts reading it; returns how many were asked."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return 0
    n = 0
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            for off in range(0, max(size, 1), _CHUNK):   # the kernel reads at most its readahead limit per call
                advise(fd, off, _CHUNK, os.POSIX_FADV_WILLNEED)
            n += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return n
