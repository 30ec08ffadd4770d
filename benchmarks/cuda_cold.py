"""First-use CUDA compile latency of the seed MLP module, broken down, in new processes with empty caches.

    python benchmarks/cuda_cold.py [--runs 3] [--no-gpu] [--keep-cache] [--evict] [--no-prefetch] [--root TREE]
    python benchmarks/cuda_cold.py --flow [--runs 3] [--no-gpu] [--root TREE]

Run it first thing on a fresh machine (nothing of NVRTC in the page cache yet): the first child is the
"first process on a fresh machine" of issue 20, the later ones are ordinary cold compiles (empty slangjit
caches, warm OS page cache).  Each child, with its own empty $SLANGJIT_CACHE_DIR, reports (wall seconds):

  start     interpreter start to the child's first line (the parent's clock; includes Python's own start)
  import    `import slangjit`
  frontend  parse + check + autodiff + passes + CUDA emit of learnGradient and adjustParameters
            (compile_program(..., target="cuda"), the MLP as benchmarks/gpu_mlp.py runs it)
  nvrtc_lib import of cuda.bindings.nvrtc and loading libnvrtc (nvrtcVersion)
  builtins  NVRTC's first compile of an empty kernel: libnvrtc-builtins and its built-in headers
  fp16      a kernel that only includes cuda_fp16.h (the header the generated code needs), compiled
  compile   NVRTC on the two generated translation units (--arch, default sm_90), one after the other
  tiny      a one-line kernel through the whole path (front end + NVRTC), new source
  repeat    the two MLP translation units compiled again in the same process (NVRTC warm, no cache)
  device    (with a GPU) create_device(cuda) + create_compute_kernel of both entries, caches now filled:
            context creation + module load (PTX->cubin is NVRTC's: the runtime builds cubins)
and the generated source size, and the process's major page faults (pages read from disk) per stage.
The runtime starts reading NVRTC's libraries into the page cache when a CUDA device is created
(runtime/cuda_compiler.py prefetch_toolchain); the child does the same right after `import slangjit`
unless --no-prefetch.  --evict drops NVRTC's libraries from the OS page cache before each child
(posix_fadvise DONTNEED: only pages no running process maps), a stand-in for a fresh machine's cold
disk cache where the script cannot run first thing.  --root imports slangjit from another tree (the
"before" of a change: `git worktree add /tmp/before <commit>`).

--flow times what a user waits for instead: in new processes with empty caches, create_device, then
load_program + create_compute_kernel of each entry point in turn, then the kernels' first use (a kernel
loads its module on first use and waits for its image, which NVRTC builds in the background from the
moment its program is loaded: the second program's front end overlaps the first one's build).  With
--no-gpu the CUDA driver is tests/helpers/cuda_stub_driver.py (NVRTC runs, nothing is loaded).  The sum of frontend..compile is what slangjit's first compile costs; the
split says which part is NVRTC loading itself (nvrtc_lib + builtins), header parsing (fp16) and our code
(frontend, compile).  Nothing is asserted; the last line is a one-line summary.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
t_first = time.time()
import resource
def majflt():
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt
r = {"start": t_first - float(sys.argv[1]), "faults": {}}
f0 = majflt()
def mark(stage, t):
    global f0
    r[stage] = time.perf_counter() - t
    f = majflt()
    r["faults"][stage] = f - f0
    f0 = f
t = time.perf_counter()
sys.path.insert(0, sys.argv[2])
import slangjit as spy
mark("import", t)
from slangjit.runtime import cuda_compiler as cc
if sys.argv[5] == "1" and hasattr(cc, "prefetch_toolchain"):
    cc.prefetch_toolchain()            # what create_device(cuda) does first
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[6])))
import gpu_mlp
from slangjit.compiler import SourceSpec, compile_program
src = gpu_mlp.patched_source()
t = time.perf_counter()
progs = [compile_program([SourceSpec(text=src, name="mlp.slang")], [e], target="cuda")
         for e in ("learnGradient", "adjustParameters")]
mark("frontend", t)
r["source_bytes"] = sum(len(p.source) for p in progs)
t = time.perf_counter()
cc.nvrtc_module()
cc.nvrtc_version()
mark("nvrtc_lib", t)
arch = sys.argv[3]
t = time.perf_counter()
cc.compile_source('extern "C" __global__ void sj_empty() {}', arch)
mark("builtins", t)
t = time.perf_counter()
cc.compile_source('#include <cuda_fp16.h>\nextern "C" __global__ void sj_h(__half* p) { p[0] = __hadd(p[0], p[1]); }', arch)
mark("fp16", t)
t = time.perf_counter()
for p in progs:
    cc.compile_source(p.source, arch)
mark("compile", t)
TINY = "RWStructuredBuffer<float> o; [numthreads(64,1,1)] void computeMain(uint3 t : SV_DispatchThreadID) { o[t.x] = o[t.x] * 2.0 + 1.0; }"
t = time.perf_counter()
tp = compile_program([SourceSpec(text=TINY, name="tiny.slang")], ["computeMain"], target="cuda")
cc.compile_source(tp.source, arch)
mark("tiny", t)
r["tiny_bytes"] = len(tp.source)
t = time.perf_counter()
for p in progs:
    cc.compile_source(p.source, arch)
mark("repeat", t)
r["arch"] = arch
if sys.argv[4] == "1":
    try:
        t = time.perf_counter()
        dev = spy.create_device(type=spy.DeviceType.cuda)
        path = os.path.join(os.environ["SLANGJIT_CACHE_DIR"], "mlp.slang")
        open(path, "w").write(src)
        for e in ("learnGradient", "adjustParameters"):
            dev.create_compute_kernel(dev.load_program(path, [e]))
        mark("device", t)
    except Exception as ex:
        r["device_error"] = f"{type(ex).__name__}: {ex}"[:200]
print(json.dumps(r))
"""


FLOW_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import slangjit as spy
r = {"import": time.perf_counter() - t0}
if sys.argv[3] == "stub":
    sys.path.insert(0, os.path.join(sys.argv[4], "tests", "helpers"))
    import cuda_stub_driver
    cuda_stub_driver.install()
t = time.perf_counter()
dev = spy.create_device(type=spy.DeviceType.cuda)
r["device"] = time.perf_counter() - t
ks = []
t_all = time.perf_counter()
for e in ("learnGradient", "adjustParameters"):
    t = time.perf_counter()
    p = dev.load_program(sys.argv[2], [e])
    r["load_" + e] = time.perf_counter() - t
    t = time.perf_counter()
    ks.append(dev.create_compute_kernel(p))
    r["kernel_" + e] = time.perf_counter() - t
t = time.perf_counter()
r["nvrtc"] = sum(k.timings["nvrtc"] for k in ks)      # reading the timings loads a lazily loaded kernel
r["first_use"] = time.perf_counter() - t
r["ready"] = time.perf_counter() - t_all
print(json.dumps(r))
"""


def flow(args) -> None:
    """The user's sequence in new processes with empty caches: create_device, then load_program +
    create_compute_kernel for each entry, then the kernels' first use (which waits for images that are
    still building): `ready` is load..first use, the figure a user waits for."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_mlp
    shader = os.path.join(tempfile.mkdtemp(prefix="sj-flow-"), "mlp.slang")
    with open(shader, "w") as f:
        f.write(gpu_mlp.patched_source())
    keys = ["import", "device", "load_learnGradient", "kernel_learnGradient", "load_adjustParameters",
            "kernel_adjustParameters", "first_use", "ready", "nvrtc"]
    print(f"flow ({'stub driver: no module load' if args.no_gpu else 'GPU'}); tree {args.root}")
    print("| run | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for i in range(args.runs):
        if args.evict:
            _evict()
        cache = tempfile.mkdtemp(prefix="sj-cuda-flow-")
        env = dict(os.environ, SLANGJIT_CACHE_DIR=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for what in ("cold", "warm"):        # warm: a new process on the caches the cold one filled
            p = subprocess.run([sys.executable, "-c", FLOW_CHILD, str(Path(args.root).resolve()), shader,
                                "stub" if args.no_gpu else "gpu", str(ROOT)], env=env, capture_output=True, text=True,
                               timeout=900)
            if p.returncode:
                print(p.stderr[-3000:])
                raise SystemExit(f"flow child {i} failed")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            digits = 0 if what == "cold" else 1
            print(f"| {i + 1} {what} | " + " | ".join(f"{r[k] * 1e3:.{digits}f}" for k in keys) + " | ms")
        shutil.rmtree(cache, ignore_errors=True)


def _evict() -> None:
    """Drop NVRTC's libraries from the page cache (pages that no process maps)."""
    sys.path.insert(0, str(ROOT))
    from slangjit.runtime.cuda_compiler import nvrtc_library_files
    for path in nvrtc_library_files():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--arch", default="sm_90", help="NVRTC target (sm_90: the H100's cubin, what the runtime builds)")
    ap.add_argument("--no-gpu", action="store_true", help="skip device creation and module load")
    ap.add_argument("--keep-cache", action="store_true", help="keep the children's cache folders")
    ap.add_argument("--evict", action="store_true", help="drop NVRTC's libraries from the page cache before each child")
    ap.add_argument("--no-prefetch", action="store_true", help="the child does not start the NVRTC prefetch")
    ap.add_argument("--root", default=str(ROOT), help="the tree to import slangjit from (default: this one)")
    ap.add_argument("--flow", action="store_true", help="time the user's load sequence instead (see flow())")
    args = ap.parse_args()
    if args.flow:
        flow(args)
        return
    rows = []
    for i in range(args.runs):
        if args.evict:
            _evict()
        cache = tempfile.mkdtemp(prefix="sj-cuda-cold-")
        env = dict(os.environ, SLANGJIT_CACHE_DIR=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        t0 = time.time()
        p = subprocess.run([sys.executable, "-c", CHILD, repr(t0), str(Path(args.root).resolve()), args.arch,
                            "0" if args.no_gpu else "1", "0" if args.no_prefetch else "1", str(Path(__file__).resolve())],
                           env=env, capture_output=True, text=True, timeout=900)
        wall = time.time() - t0
        if not args.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)
        if p.returncode:
            print(p.stderr[-3000:])
            raise SystemExit(f"child {i} failed")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["process"] = wall
        rows.append(r)
    keys = ["start", "import", "frontend", "nvrtc_lib", "builtins", "fp16", "compile", "tiny", "repeat", "device",
            "process"]
    print(f"arch {rows[0]['arch']}; generated CUDA source {rows[0]['source_bytes'] / 1024:.0f} KiB (2 entry points), "
          f"tiny kernel {rows[0]['tiny_bytes'] / 1024:.0f} KiB; tree {args.root}; prefetch "
          f"{'off' if args.no_prefetch else 'on'}{'; NVRTC evicted before each child' if args.evict else ''}")
    print("| run | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for i, r in enumerate(rows):
        label = "1 (first process)" if i == 0 else str(i + 1)
        print(f"| {label} | " + " | ".join(f"{r[k] * 1e3:.0f}" if k in r else "-" for k in keys) + " | ms")
        print(f"| major faults | " + " | ".join(str(r["faults"].get(k, "-")) for k in keys) + " |")
        if "device_error" in r:
            print(f"  device: {r['device_error']}")
    f = rows[0]
    ours = f["frontend"] + f["compile"]
    print(f"first process: NVRTC load {1e3 * (f['nvrtc_lib'] + f['builtins']):.0f} ms, cuda_fp16.h "
          f"{1e3 * f['fp16']:.0f} ms, front end {1e3 * f['frontend']:.0f} ms, NVRTC on our source "
          f"{1e3 * f['compile']:.0f} ms (in-process repeat {1e3 * f['repeat']:.0f} ms), tiny kernel "
          f"{1e3 * f['tiny']:.0f} ms (front end + compile {1e3 * ours:.0f} ms)")


if __name__ == "__main__":
    main()
