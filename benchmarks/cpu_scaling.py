"""Thread scaling of the CPU device: the seed MLP step and the poly forward + .bwds at 1, 2, 4, ... N threads,
each thread count in a new process (`SLANGJIT_NUM_THREADS`), wall and process CPU time side by side.

    python benchmarks/cpu_scaling.py [--threads 1,2,4,8,16] [--steps 30] [--repeat 9] [--pool native|python]
                                     [--tree PATH] [--rounds 1] [--no-poly]

Per thread count (median over `--steps` / `--repeat` runs, after warm-up):
  step     `learnGradient` + `adjustParameters` at batch 2^16 through examples/mlp_training/train.py MLPTrainer
           (the kernel of benchmarks/cpu_mlp.py: native half atomic add, loss scale 2^-6)
  learn    `learnGradient` alone at batch 2^16
  d256     `learnGradient` of 256 samples: one group, run on the calling thread (the fixed per-dispatch cost)
  empty    4096 groups of a one-thread kernel storing one word: the pool's own cost of a parallel dispatch
  poly     poly forward (`_result=y`) + `.bwds`, 2^24 float32 (benchmarks/cpu_throughput.py's)
Each cell is `wall ms / process CPU ms`: the median wall time of one run, and the process CPU time (all
threads, user + system, idle workers' spinning included) of the whole loop divided by the runs.  `--pool python` runs with
`SLANGJIT_POOL=python` (the Python worker pool instead of the native one).  `--tree PATH` imports slangjit from
another checkout (e.g. a `git archive` of the branch point: give it its own `SLANGJIT_CACHE_DIR`); `--rounds R`
repeats the thread sweep R times (A/B runs alternate trees within a round when several `--tree` are given).
Nothing is asserted about time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _med(fn, runs: int, warm: int = 3):
    """(median wall ms of one run, mean process CPU ms per run over all of them).  The CPU time is read around
    the whole loop: a thread that spins without a context switch has its CPU time brought up to date by the
    kernel only at scheduler ticks, so per-run differences undercount it."""
    for _ in range(warm):
        fn()
    ts = []
    c0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3, (time.process_time() - c0) / runs * 1e3


def child(args) -> dict:
    tree = Path(args.tree).resolve() if args.tree else ROOT
    sys.path[:0] = [str(tree), str(ROOT / "examples" / "mlp_training"), str(HERE)]
    import numpy as np
    import slangjit as spy
    import train as T
    import cpu_mlp
    try:
        from slangjit.runtime import cpu_pool
        native = cpu_pool.native_ready(wait=True)      # time the pool that later dispatches get
    except ImportError:
        cpu_pool, native = None, False
    out = {"threads": os.environ.get("SLANGJIT_NUM_THREADS"), "tree": str(tree)}
    B = 1 << 16
    tmpd = tempfile.mkdtemp(prefix="sj-scaling-")
    shader = os.path.join(tmpd, "mlp_native_add.slang")
    Path(shader).write_text(cpu_mlp.patched_source(True))
    dev = spy.create_device(type=spy.DeviceType.cpu)
    T.SHADER = Path(shader)
    params = T.init_parameters(2)
    xy = np.random.default_rng(2).uniform(-1, 1, (B, 2)).astype(np.float32)
    slots = args.steps + 8
    tr = T.MLPTrainer(dev, params, B, max_steps=slots)
    tr.set_inputs(xy)
    slot = [0]

    def step():
        tr.learn_gradient(0, B, slot[0] % slots)
        tr.adjust_parameters(1e-6)
        slot[0] += 1
    out["step"] = _med(step, args.steps)
    out["learn"] = _med(lambda: tr.learn_gradient(0, B, 0), args.steps)
    out["d256"] = _med(lambda: tr.learn_gradient(0, 256, 0), args.steps * 10)
    out["finite"] = bool(np.isfinite(tr.read_params()).all())
    # the pool's own cost: 4096 groups of one thread that stores one word
    ep = os.path.join(tmpd, "empty.slang")
    Path(ep).write_text("[numthreads(1, 1, 1)]\nvoid computeMain(uint3 tid : SV_DispatchThreadID, uniform uint* outp)\n"
                        "{ outp[tid.x] = tid.x; }\n")
    ek = dev.create_compute_kernel(dev.load_program(ep, ["computeMain"]))
    eb = dev.create_buffer(element_count=4096, struct_size=4,
                           usage=spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access)
    out["empty"] = _med(lambda: ek.dispatch(thread_count=[4096, 1, 1], outp=eb.device_address), args.steps * 10)
    if not args.no_poly:
        n = 1 << 24
        m = spy.Module.load_from_source(dev, "cpu_poly_fb", "[Differentiable]\n"
                                        "float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }\n")
        xs = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
        x = spy.Tensor.from_numpy(dev, xs).with_grads(zero=True)
        y = m.poly(2.0, 8.0, -1.0, x).with_grads()
        y.grad.copy_from_numpy(np.ones(n, np.float32))
        f, fb = m.poly, m.poly.bwds

        def both():
            f(2.0, 8.0, -1.0, x, _result=y)
            fb(2.0, 8.0, -1.0, x, y)
        out["poly"] = _med(both, args.repeat, warm=2)
        ok = np.array_equal(y.to_numpy(), 2 * xs * xs + 8 * xs - 1)
        out["poly_ok"] = bool(ok)
    p = cpu_pool._get_pool() if cpu_pool is not None else None
    out["pool"] = ("native" if getattr(p, "native", False) else "python") if p is not None else "python (no cpu_pool)"
    try:
        out["load"] = os.getloadavg()[0]
    except OSError:
        out["load"] = float("nan")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--pool", choices=("native", "python"), default="native")
    ap.add_argument("--tree", action="append", default=[], help="slangjit checkout(s) to run (default: this one)")
    ap.add_argument("--cache", action="append", default=[], help="SLANGJIT_CACHE_DIR per --tree (default: inherited)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-poly", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.tree = args.tree[0] if args.tree else None
        print("RESULT " + json.dumps(child(args)))
        return
    ncpu = os.cpu_count() or 1
    if args.threads:
        counts = [int(t) for t in args.threads.split(",")]
    else:
        counts, t = [], 1
        while t < ncpu:
            counts.append(t)
            t *= 2
        counts.append(ncpu)
    trees = args.tree or [None]
    print(f"CPU: {ncpu} logical cores; pool {args.pool}; {args.steps} steps, poly x{args.repeat}; cells: wall ms / CPU ms")
    hdr = f"{'tree':<12}{'threads':>8}{'step':>17}{'learn':>17}{'d256 us':>17}{'empty us':>17}{'poly':>17}  load"
    print(hdr)
    print("-" * len(hdr))
    for _ in range(args.rounds):
        for nt in counts:
            for ti, tree in enumerate(trees):
                env = dict(os.environ, SLANGJIT_NUM_THREADS=str(nt))
                if args.pool == "python":
                    env["SLANGJIT_POOL"] = "python"
                if ti < len(args.cache):
                    env["SLANGJIT_CACHE_DIR"] = args.cache[ti]
                cmd = [sys.executable, __file__, "--child", "--steps", str(args.steps), "--repeat", str(args.repeat)]
                if tree:
                    cmd += ["--tree", tree]
                if args.no_poly:
                    cmd.append("--no-poly")
                p = subprocess.run(cmd, env=env, capture_output=True, text=True)
                line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
                if line is None:
                    print(f"{nt}: child failed\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
                    continue
                r = json.loads(line[7:])
                name = (Path(tree).name if tree else "this")[:11]

                def cell(k, scale=1.0):
                    if k not in r:
                        return f"{'-':>17}"
                    w, c = r[k]
                    return f"{w * scale:>8.2f} /{c * scale:>7.2f}"
                print(f"{name:<12}{nt:>8}{cell('step')}{cell('learn')}{cell('d256', 1e3)}{cell('empty', 1e3)}{cell('poly')}  "
                      f"{r['load']:.1f} {r['pool']}{'' if r.get('poly_ok', True) and r['finite'] else ' WRONG'}",
                      flush=True)


if __name__ == "__main__":
    main()
