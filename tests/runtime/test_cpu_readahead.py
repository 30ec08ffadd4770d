"""CpuOptions.readahead (runtime/cpu_prepare.py): the toolchain files a cold build reads, asked of the kernel
(posix_fadvise WILLNEED) by the compiler-facts thread at the first front-end miss."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import frontend_cache
from slangjit.compiler.passes.options import DEFAULT_OPTIONS
from slangjit.runtime import cpu_compiler as cc
from slangjit.runtime import cpu_prepare as ra

GCC = cc._is_gcc(cc.find_compiler())
needs_gcc = pytest.mark.skipif(not GCC, reason="the toolchain list is made for GCC")




def _files():
    cmd = cc.find_compiler()
    kind, major = cc._compiler_major(cc.compiler_version(cmd))
    return cmd, ra.toolchain_files(cmd, major if kind == "gcc" else None)


def _real(p: str) -> str:
    return os.path.realpath(p.strip())


@needs_gcc
def test_toolchain_files_are_the_compilers_own():
    """The driver, the cc1plus / collect2 / as / ld the driver runs, and every header g++ reads for the prelude's
    unconditional standard includes; all listed files exist."""
    cmd, files = _files()
    real = {_real(f) for f in files}
    assert all(os.path.isfile(f) for f in files) and len(files) == len(set(files))
    assert _real(cmd[0]) in real
    for prog in ("cc1plus", "collect2", "as", "ld"):
        p = subprocess.run([*cmd, f"-print-prog-name={prog}"], capture_output=True, text=True).stdout.strip()
        path = p if os.path.isabs(p) else shutil.which(p)
        assert path and _real(path) in real, prog
    for name in ("crtbeginS.o", "crtendS.o", "libgcc_s.so", "crti.o", "libmvec.so"):
        p = subprocess.run([*cmd, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if os.path.isabs(p) and os.path.isfile(p):
            assert _real(p) in real, name
    # the headers of the prelude's standard includes, as g++ itself finds them (-M)
    src = "".join(f"#include <{h}>\n" for h in ("ucontext.h", "cstdlib", "cstdint", "cstring", "cstdio",
                                                 "type_traits", "utility"))
    dep = subprocess.run([*cmd, "-std=c++17", "-M", "-x", "c++", "-"], input=src, capture_output=True, text=True)
    assert dep.returncode == 0, dep.stderr
    headers = [h for h in dep.stdout.replace("\\\n", " ").split()[1:] if h != "-"]
    assert len(headers) > 20
    missing = [h for h in headers if _real(h) not in real]
    assert not missing, missing[:10]


@needs_gcc
@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf compares the ELF reader")
def test_elf_needed_matches_readelf():
    cmd, _ = _files()
    cc1 = subprocess.run([*cmd, "-print-prog-name=cc1plus"], capture_output=True, text=True).stdout.strip()
    cc1 = cc1 if os.path.isabs(cc1) else (shutil.which(cc1) or cc1)       # a bare name: run from PATH
    dynamic = 0
    for exe in (cc1, _real(cmd[0]), _real(shutil.which("ld") or cmd[0]), _real(sys.executable)):
        out = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
        want = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
        assert ra.elf_needed(exe) == want, exe          # [] for a statically linked tool
        dynamic += bool(want)
    assert dynamic, "no dynamically linked executable to compare"
    assert ra.elf_needed(__file__) == [] and ra.elf_needed("/nonexistent/x") == []


def test_readahead_counts_existing_files(tmp_path):
    a = tmp_path / "a"
    a.write_bytes(b"x" * 10000)
    assert ra.readahead([str(a), str(tmp_path / "missing"), str(a)]) == (2 if hasattr(os, "posix_fadvise") else 0)


@needs_gcc
def test_list_kept_in_the_cache_folder(fresh_cache, monkeypatch):
    """toolchain_readahead lists the files once per cache folder (JSON beside the compiler's version); a
    damaged list is made again."""
    calls = []
    real = ra.toolchain_files
    monkeypatch.setattr(ra, "toolchain_files", lambda *a: calls.append(a) or real(*a))
    advised = []
    monkeypatch.setattr(ra, "readahead", lambda files: advised.append(list(files)) or len(files))
    n = ra.toolchain_readahead(force=True)
    assert n > 20 and len(calls) == 1
    (lst,) = (fresh_cache / "cpu" / "compilers").glob("*.readahead.json")
    assert json.loads(lst.read_text()) == advised[0]
    assert ra.toolchain_readahead(force=True) == n and len(calls) == 1 and advised[1] == advised[0]
    lst.write_text("{not json")
    assert ra.toolchain_readahead(force=True) == n and len(calls) == 2
    assert json.loads(lst.read_text()) == advised[0]


@needs_gcc
def test_nothing_listed_or_read_ahead_while_cc1plus_is_cached(fresh_cache, monkeypatch):
    calls = []
    monkeypatch.setattr(ra, "toolchain_files", lambda *a: calls.append(a) or [])
    monkeypatch.setattr(ra, "resident_fraction", lambda path: calls.append(path) or 0.9)
    assert ra.toolchain_readahead() == 0
    assert len(calls) == 1 and calls[0].endswith("cc1plus") and os.path.isfile(calls[0])
    monkeypatch.setattr(ra, "resident_fraction", lambda path: 0.1)
    ra.toolchain_readahead()
    assert len(calls) == 2 and calls[1][0] == cc.find_compiler()


def test_resident_fraction_and_readahead_of_an_evicted_file(tmp_path):
    """mincore's answer follows the page cache: a file dropped with POSIX_FADV_DONTNEED is (nearly) absent, and
    readahead() brings all of it back (whole file, not just the kernel's per-call readahead limit)."""
    f = tmp_path / "data"
    f.write_bytes(os.urandom(9 << 20))
    fd = os.open(f, os.O_RDONLY)
    try:
        os.fsync(fd)
        assert ra.resident_fraction(str(f)) == 1.0
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if ra.resident_fraction(str(f)) > 0.1:
        pytest.skip("this file system keeps the pages (tmpfs?)")
    assert ra.readahead([str(f)]) == 1
    import time
    for _ in range(100):
        if ra.resident_fraction(str(f)) == 1.0:
            break
        time.sleep(0.05)
    assert ra.resident_fraction(str(f)) == 1.0
    assert ra.resident_fraction(str(tmp_path / "missing")) == 1.0      # unknown: nothing is read ahead


KERNEL = """
RWStructuredBuffer<float> y;
[numthreads(32, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID) { y[t.x] = float(t.x) * SCALE; }
"""


@pytest.mark.parametrize("on", [True, False])
def test_first_front_end_miss_starts_the_readahead_per_option(fresh_cache, tmp_path, monkeypatch, on):
    """The option reaches the facts thread through the first-miss hook; the program runs exactly either way."""
    monkeypatch.setattr(ra, "_facts_started", False)
    monkeypatch.setattr(frontend_cache, "first_miss_hooks", [ra._prepare_on_miss])
    started = []
    real_prepare = ra.prepare_async

    def spy_prepare(readahead=False):
        t = real_prepare(readahead)
        started.append((readahead, t))
        return t
    monkeypatch.setattr(ra, "prepare_async", spy_prepare)
    advised = []
    monkeypatch.setattr(ra, "readahead", lambda files: advised.append(len(files)) or len(files))
    monkeypatch.setattr(ra, "resident_fraction", lambda path: 0.0)      # as on a fresh machine
    opts = dataclasses.replace(DEFAULT_OPTIONS, cpu=dataclasses.replace(DEFAULT_OPTIONS.cpu, readahead=on))
    dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=opts)
    assert started == []                                # device creation starts nothing
    src = tmp_path / "k.slang"
    src.write_text(KERNEL.replace("SCALE", "5.0" if on else "7.0"))
    y = dev.create_buffer(element_count=64, struct_size=4, usage=spy.BufferUsage.unordered_access)
    dev.create_compute_kernel(dev.load_program(str(src), ["computeMain"])).dispatch(thread_count=[64, 1, 1],
                                                                                   vars={"y": y})
    np.testing.assert_array_equal(y.to_numpy().view(np.float32), np.arange(64, dtype=np.float32) * (5 if on else 7))
    assert len(started) == 1 and started[0][0] is on and isinstance(started[0][1], threading.Thread)
    started[0][1].join(60)
    assert (len(advised) == 1 and advised[0] > (20 if GCC else 0)) if on else advised == []


@needs_gcc
def test_programs_beside_a_wrapper_driver(tmp_path):
    """A driver that is a wrapper script passing -B its own folder (a GCC installed under /opt, the GPU host's)
    runs the cc1plus / as beside it: those are the ones listed, not the system's."""
    cmd = cc.find_compiler()
    real_cc1 = subprocess.run([*cmd, "-print-prog-name=cc1plus"], capture_output=True, text=True).stdout.strip()
    real_as = shutil.which("as")
    if not (os.path.isabs(real_cc1) and os.path.isfile(real_cc1) and real_as):
        pytest.skip("no cc1plus path or assembler to link beside a wrapper")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "cc1plus").symlink_to(real_cc1)
    (bin_ / "as").symlink_to(real_as)
    drv = bin_ / "g++"
    drv.write_text(f"#!/bin/sh\nexec {cmd[0]} -B{bin_}/ \"$@\"\n")
    drv.chmod(0o755)
    for prog in ("cc1plus", "as"):      # what the wrapper itself says it runs
        got = subprocess.run([str(drv), f"-print-prog-name={prog}"], capture_output=True, text=True).stdout.strip()
        if got != str(bin_ / prog):
            pytest.skip(f"the compiler is itself a wrapper whose -B folders come first ({prog}: {got})")
    kind, major = cc._compiler_major(cc.compiler_version(cmd))
    files = ra.toolchain_files((str(drv),), major)
    assert str(bin_ / "cc1plus") in files and str(bin_ / "as") in files
