"""Where the CUDA compile time of one entry point goes, without a GPU (NVRTC only), and the Python side of a
warm load in a new process (driver calls stubbed by tests/helpers/cuda_stub_driver.py).

    python benchmarks/cuda_compile_profile.py [FILE.slang] [-e ENTRY] [--arch sm_90] [--repeat 3] [--warm]

Default: the seed-002 MLP as benchmarks/gpu_mlp.py runs it (native half InterlockedAdd), entry learnGradient.

* NVRTC phases (`--fdevice-time-trace`): C++ front end, NVVM optimizer, NVVM codegen, ptxas, for the PTX
  (compute_XX) and the cubin (sm_XX); best of --repeat process-CPU times.
* PTX attribution (`-lineinfo`): PTX instructions per generated function or prelude section
  (the `// ====== section` banners of emit/prelude/*.h), and per prelude function inside the backend
  section: what the generated code and the inlined helpers expand to.
* --warm: load_program + create_compute_kernel for the entry in a fresh process, twice (the first fills
  the caches), with the stub driver: the Python-side cost of a warm start (a real GPU adds
  cuModuleLoadData).  Nothing is asserted.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def _source(path: str, entry: str) -> str:
    from slangjit.compiler import SourceSpec, compile_program
    return compile_program([SourceSpec(path=path)], [entry], target="cuda").source


def _phases(src: str, arch: str, repeat: int) -> tuple:
    from slangjit.runtime import cuda_compiler as cc
    best = None
    with tempfile.TemporaryDirectory() as d:
        for i in range(repeat):
            trace = os.path.join(d, f"trace{i}")          # NVRTC appends ".json"; one file per run
            c, w = time.process_time(), time.perf_counter()
            img, _ = cc.compile_source(src, arch, extra_options=(f"--fdevice-time-trace={trace}",))
            cpu, wall = time.process_time() - c, time.perf_counter() - w
            if best is None or cpu < best[0]:
                with open(trace + ".json") as f:
                    ev = json.load(f)
                ev = ev["traceEvents"] if isinstance(ev, dict) else ev
                tot: dict = collections.Counter()
                for e in ev:
                    if e.get("ph") == "X":
                        tot[e["name"]] += e.get("dur", 0) / 1000.0
                best = (cpu, wall, tot, len(img))
    return best


def _owners(src_lines: list[str]):
    """Per source line: (section or generated function, prelude function name)."""
    section, fn = "prelude", "?"
    out = [("?", "?")]
    for line in src_lines:
        m = re.match(r"// =+ (.*)", line)
        if m:
            section, fn = "prelude: " + m.group(1).strip(), "?"
        m = re.match(r"(?:static __device__ [^(]*?|extern \"C\" __global__ void (?:__launch_bounds__\(\d+\) )?)(\w+)\(",
                     line)
        if m and not line.rstrip().endswith(";"):
            section = "generated: " + m.group(1)
        m = re.search(r"(?:SJ_FN|__device__ inline|__device__ __forceinline__)\b.*?(operator\W+|\w+)\s*\(", line)
        if m:
            fn = m.group(1)
        out.append((section, fn))
    return out


def _attribution(src: str, arch: str):
    from slangjit.runtime import cuda_compiler as cc
    ptx, _ = cc.compile_source(src, arch.replace("sm_", "compute_"), extra_options=("-lineinfo",))
    lines = ptx.rstrip(b"\0").decode(errors="replace").splitlines()
    files = {m.group(1): m.group(2) for m in (re.match(r'\s*\.file\s+(\d+)\s+"([^"]+)"', x) for x in lines) if m}
    owners = _owners(src.splitlines())
    by_section: dict = collections.Counter()
    by_fn: dict = collections.Counter()
    cur = ("?", "?")
    for x in lines:
        s = x.strip()
        m = re.match(r"\.loc\s+(\d+)\s+(\d+)", s)
        if m:
            line = int(m.group(2))
            if files.get(m.group(1), "").endswith(".cu") and line < len(owners):
                cur = owners[line]
            else:
                cur = ("header: " + os.path.basename(files.get(m.group(1), "?")), "?")
            continue
        if not s or s.startswith(("//", ".")) or s in ("{", "}") or s.endswith(":"):
            continue
        by_section[cur[0]] += 1
        if cur[0].startswith("prelude"):
            by_fn[f"{cur[0][9:]} / {cur[1]}"] += 1
    return by_section, by_fn


WARM_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])
import slangjit
import cuda_stub_driver
cuda_stub_driver.install()
dev = slangjit.create_device(type=slangjit.DeviceType.cuda)
t = time.perf_counter()
k = dev.create_compute_kernel(dev.load_program(sys.argv[1], [sys.argv[2]]))
ms = (time.perf_counter() - t) * 1e3
print(json.dumps({"ms": ms, "cache_hit": k.timings["cache_hit"], "nvrtc_imported": "cuda.bindings.nvrtc" in sys.modules}))
"""


def _warm(path: str, entry: str) -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SLANGJIT_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for what in ("cold", "warm", "warm"):
            r = subprocess.run([sys.executable, "-c", WARM_CHILD, path, entry, str(ROOT / "tests" / "helpers")], env=env,
                               capture_output=True, text=True, timeout=600)
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            print(f"  {what:5s} {r.stdout.strip().splitlines()[-1]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?")
    ap.add_argument("-e", "--entry", default="learnGradient")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm", action="store_true")
    a = ap.parse_args()
    path = a.file
    if path is None:
        sys.path.insert(0, str(HERE))
        import gpu_mlp
        fd, path = tempfile.mkstemp(suffix=".slang")
        with os.fdopen(fd, "w") as f:
            f.write(gpu_mlp.patched_source())
    src = _source(path, a.entry)
    print(f"{a.entry}: {len(src.splitlines())} lines of CUDA C++")
    from slangjit.runtime import cuda_compiler as cc
    cc.compile_source('extern "C" __global__ void k() {}', "compute_90")       # NVRTC start-up, not counted
    for arch in (a.arch.replace("sm_", "compute_"), a.arch):
        cpu, wall, tot, size = _phases(src, arch, a.repeat)
        # The phases are wall-clock times from NVRTC's trace: on a busy machine they exceed the CPU time.
        print(f"{arch:11s} {cpu * 1e3:5.0f} ms CPU ({wall * 1e3:.0f} wall), {size // 1024} KB; phases: "
              f"front end {tot['CUDA C++ Front-End']:.0f}, "
              f"NVVM optimizer {tot['NVVM Optimizer']:.0f}, NVVM codegen {tot['NVVM CodeGen']:.0f}, "
              f"ptxas {tot['Total PTXAS Time']:.0f} ms")
    by_section, by_fn = _attribution(src, a.arch)
    total = sum(by_section.values())
    print(f"PTX instructions ({total}) by origin:")
    for k, v in by_section.most_common(14):
        print(f"  {v:6d} {100 * v / total:5.1f}%  {k}")
    print("  prelude functions:")
    for k, v in by_fn.most_common(8):
        print(f"  {v:6d} {100 * v / total:5.1f}%  {k}")
    if a.warm:
        print(f"warm start, Python side ({a.entry}, stub driver):")
        _warm(path, a.entry)


if __name__ == "__main__":
    main()
