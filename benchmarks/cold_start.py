"""The first process on a fresh machine: what a cold page cache costs the seed MLP module's cold compile (CPU).

    python benchmarks/cold_start.py [--rounds N] [--files LIST] [--no-readahead-ab]

Run it first thing on a fresh machine: its first measurement is a new Python process with an empty cache folder
before anything else ran (the "first process" of issue 20; readahead on, the default, unless --first-no-readahead),
then N rounds of

* cached:  a cold compile (new process, empty cache folder) with the files it reads in the page cache;
* evicted: the same after dropping those files from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)` on each:
           no root needed; pages mapped by running processes, e.g. libc or this Python, stay);

each with `CpuOptions.readahead` on and off (the background `posix_fadvise(POSIX_FADV_WILLNEED)` of the C++
toolchain's files from the first front-end miss, runtime/cpu_prepare.py), order alternating.  Measured: import of
slangjit (and numpy), device creation, "ready" (load_program + create_compute_kernel of learnGradient and
adjustParameters until both libraries are loaded, as compile_time.py --mlp-cold), all wall ms; median and range.

The files a cold compile reads are listed with `strace -f -e trace=openat,execve` of one cold process where strace
is installed (`--files` writes the list), else from the child's /proc/self/maps, its imported modules and the
toolchain list of runtime/cpu_prepare.py (which then also decides what "evicted" covers).  Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import numpy
import slangjit as spy
t1 = time.perf_counter()
import dataclasses
from slangjit.compiler.passes.options import DEFAULT_OPTIONS
opts = dataclasses.replace(DEFAULT_OPTIONS, cpu=dataclasses.replace(DEFAULT_OPTIONS.cpu,
                                                                   readahead=sys.argv[2] == "1"))
dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=opts)
t2 = time.perf_counter()
kernels = [dev.create_compute_kernel(dev.load_program(sys.argv[1], [e])) for e in ("learnGradient", "adjustParameters")]
for k in kernels:
    k.library
t3 = time.perf_counter()
files = []
if len(sys.argv) > 3:                       # the fallback file list: what this process mapped and imported
    with open("/proc/self/maps") as f:
        files = sorted({l.split(None, 5)[5].strip() for l in f if len(l.split(None, 5)) == 6 and l.split(None, 5)[5].startswith("/")})
    for m in list(sys.modules.values()):
        for a in ("__file__", "__cached__"):
            p = getattr(m, a, None)
            if isinstance(p, str) and os.path.isabs(p):
                files.append(p)
    from slangjit.runtime import cpu_compiler as cc, cpu_prepare
    cmd = cc.find_compiler()
    kind, major = cc._compiler_major(cc.compiler_version(cmd))
    files += cpu_prepare.toolchain_files(cmd, major if kind == "gcc" else None)
print(json.dumps({"import": t1 - t0, "device": t2 - t1, "ready": t3 - t2, "files": files,
                  "from_disk": [k.library.from_disk for k in kernels]}))
"""


def mlp_source() -> Path:
    sys.path.insert(0, str(HERE))
    import cpu_mlp
    src = Path(tempfile.mkdtemp(prefix="sj-coldstart-src-")) / "mlp.slang"
    src.write_text(cpu_mlp.patched_source(True))
    return src


def run(src: Path, readahead: bool, list_files: bool = False, strace: str = "") -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SLANGJIT_NO_FRONTEND_CACHE")}
    env.update(SLANGJIT_CACHE_DIR=tempfile.mkdtemp(prefix="sj-coldstart-cache-"), PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-c", CHILD, str(src), "1" if readahead else "0"] + (["list"] if list_files else [])
    if strace:
        argv = ["strace", "-f", "-qq", "-e", "trace=openat,execve", "-o", strace] + argv
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(ROOT))
    if p.returncode != 0:
        raise SystemExit(f"child failed:\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert not any(r["from_disk"]), r["from_disk"]
    shutil.rmtree(env["SLANGJIT_CACHE_DIR"], ignore_errors=True)
    return r


_OPENED = re.compile(r'(?:openat\(AT_FDCWD, |execve\()"([^"]+)"')


def files_read(src: Path) -> list:
    """Every regular file one cold process opens or executes (strace), or the fallback list."""
    skip = ("/proc/", "/sys/", "/dev/", tempfile.gettempdir() + "/")
    if shutil.which("strace"):
        log = Path(tempfile.mkdtemp(prefix="sj-coldstart-strace-")) / "trace.txt"
        run(src, True, strace=str(log))
        found = set()
        for line in log.read_text(errors="replace").splitlines():
            m = _OPENED.search(line)
            if m and " = -1 " not in line:
                found.add(m.group(1))
    else:
        found = set(run(src, True, list_files=True)["files"])
    out = []
    for f in sorted(found):
        if f.startswith(skip):
            continue
        try:
            if stat.S_ISREG(os.stat(f).st_mode):
                out.append(os.path.realpath(f))
        except OSError:
            pass
    return sorted(set(out))


def evict(files: list) -> int:
    n = 0
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        finally:
            os.close(fd)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--files", default=None, help="write the list of files evicted here")
    ap.add_argument("--no-readahead-ab", action="store_true", help="only CpuOptions.readahead on (the default)")
    ap.add_argument("--first-readahead", action="store_true", help="(the default) the first process with CpuOptions.readahead on")
    ap.add_argument("--first-no-readahead", action="store_true", help="the first process with CpuOptions.readahead off")
    ap.add_argument("--cached-only", action="store_true", help="no eviction: readahead on / off with cached files")
    args = ap.parse_args()
    src = mlp_source()
    t = time.perf_counter()
    first_on = not args.first_no_readahead
    first = run(src, first_on)
    print(f"first process (readahead {'on, the default' if first_on else 'off'}): import {first['import'] * 1e3:.0f} ms, device {first['device'] * 1e3:.1f} ms, "
          f"ready {first['ready'] * 1e3:.0f} ms  (wall of the whole child {1e3 * (time.perf_counter() - t):.0f} ms)")
    files = files_read(src)
    if args.files:
        Path(args.files).write_text("\n".join(files) + "\n")
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} files read by a cold compile ({size / 2**20:.0f} MB){' (strace)' if shutil.which('strace') else ''}")
    variants = [(c, ra) for c in (("cached",) if args.cached_only else ("cached", "evicted"))
                for ra in ((True,) if args.no_readahead_ab else (True, False))]
    rows: dict = {v: [] for v in variants}
    for i in range(args.rounds):
        for v in (variants if i % 2 == 0 else variants[::-1]):
            cond, ra = v
            if cond == "evicted":
                run(src, ra)            # the files are in the page cache now (and the bytecode written)
                evict(files)
            rows[v].append(run(src, ra))
    print(f"{args.rounds} rounds, order alternating; load average {os.getloadavg()[0]:.2f}")
    print(f"  {'':<26}{'import ms':>22}{'device ms':>14}{'ready ms':>22}")
    for (cond, ra), rs in rows.items():
        cells = []
        for key in ("import", "device", "ready"):
            v = [r[key] * 1e3 for r in rs]
            cells.append(f"{statistics.median(v):.1f}" if key == "device" else
                         f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})")
        print(f"  {cond + ', readahead ' + ('on' if ra else 'off'):<26}{cells[0]:>22}{cells[1]:>14}{cells[2]:>22}")


if __name__ == "__main__":
    main()
