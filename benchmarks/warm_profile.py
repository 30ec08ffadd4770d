"""Where a warm start's time goes on a GPU machine: the seed MLP's two kernels (benchmarks/gpu_mlp.py's
source) loaded in a new process whose caches are warm, under cProfile, with per-call wall times.

    python benchmarks/warm_profile.py [--top 30]

The first child fills the caches; the second is timed (load_program + create_compute_kernel per entry, and
the kernel's own timings) and profiled (functions by internal time).  Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import cProfile, io, json, pstats, sys, time
t0 = time.perf_counter()
import slangjit as spy
dev = spy.create_device(type=spy.DeviceType.cuda)
t1 = time.perf_counter()
pr = cProfile.Profile()
rows = []
pr.enable()
for e in ("learnGradient", "adjustParameters"):
    a = time.perf_counter()
    p = dev.load_program(sys.argv[1], [e])
    b = time.perf_counter()
    k = dev.create_compute_kernel(p)
    c = time.perf_counter()
    rows.append((e, (b - a) * 1e3, (c - b) * 1e3, {x: round(v * 1e3, 3) for x, v in k.timings.items()}))
pr.disable()
print(json.dumps({"import+device ms": (t1 - t0) * 1e3, "rows": rows}))
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(int(sys.argv[2]))
print(s.getvalue())
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_mlp
    d = tempfile.mkdtemp(prefix="sj-warm-")
    shader = os.path.join(d, "mlp_native_add.slang")
    Path(shader).write_text(gpu_mlp.patched_source())
    env = dict(os.environ, SLANGJIT_CACHE_DIR=os.path.join(d, "cache"), PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for what in ("fill", "warm"):
        r = subprocess.run([sys.executable, "-c", CHILD, shader, str(args.top)], env=env, capture_output=True,
                           text=True, timeout=300)
        if r.returncode:
            raise SystemExit(r.stderr[-3000:])
        if what == "warm":
            print(r.stdout)


if __name__ == "__main__":
    main()
