"""slang-torch bindings: load times, per-call host overhead and the aggregation strategies.

    python benchmarks/torch_bindings.py [--device cpu|cuda] [--n 1048576]

Cold loadModule runs in a fresh process with an empty cache folder; warm in a fresh process with the cache
filled (import time and torch's own device start-up reported apart).  Figures are medians; ratios side by side (no thresholds asserted)."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ONE_KERNEL = os.path.join(HERE, "..", "tests", "torch_bindings", "slang", "square.slang")
STRAT = os.path.join(HERE, "torch_bindings_slang", "strategy_bench.slang")

CHILD = r"""
import sys, time
t0 = time.perf_counter()
import torch, slangjit.torch as st
x = torch.ones(256, device=sys.argv[2]); y = torch.zeros_like(x)   # torch's own CUDA start-up: not ours
if sys.argv[2] == "cuda": torch.cuda.synchronize()
t1 = time.perf_counter()
m = st.loadModule(sys.argv[1])
t2 = time.perf_counter()
rt = m._runtime(x.device)                            # slangjit's device (CUDA: driver bindings + context)
t3 = time.perf_counter()
rt.entry(m.square._kinfo, "primal")                  # the kernel: C++ library / cubin from the cache, loaded
t4 = time.perf_counter()
m.square(input=x, output=y).launchRaw(blockSize=(256, 1, 1), gridSize=(1, 1, 1))
if sys.argv[2] == "cuda": torch.cuda.synchronize()
t5 = time.perf_counter()
print(f"{t1 - t0:.4f} {t2 - t1:.4f} {t5 - t2:.4f} {t3 - t2:.4f} {t4 - t3:.4f} {t5 - t4:.4f}")
"""


def child(cache, dev):
    env = dict(os.environ, SLANGJIT_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD, ONE_KERNEL, dev], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return [float(v) for v in out]


def timeit(fn, reps, sync):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    dev = a.device
    with tempfile.TemporaryDirectory() as cache:
        imp, cold, cold_launch = child(cache, dev)[:3]
        warm = [child(cache, dev) for _ in range(3)]
    print(f"[{dev}] import slangjit.torch + torch: {imp * 1e3:.0f} ms")
    print(f"[{dev}] cold loadModule: {cold * 1e3:.0f} ms, + first launch (C++/NVRTC build): {cold_launch * 1e3:.0f} ms")
    print(f"[{dev}] warm loadModule (new process): {statistics.median(w[1] for w in warm) * 1e3:.1f} ms, "
          f"+ first launch: {statistics.median(w[2] for w in warm) * 1e3:.1f} ms")
    med = lambda i: statistics.median(w[i] for w in warm) * 1e3  # noqa: E731
    print(f"[{dev}] warm first launch = device {med(3):.1f} ms + kernel from cache {med(4):.1f} ms + "
          f"launch {med(5):.1f} ms (torch's own device start-up excluded)")

    import torch
    import slangjit.torch as st
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    m = st.loadModule(ONE_KERNEL)
    x = torch.ones(1, device=dev)
    y = torch.zeros_like(x)
    call = lambda: m.square(input=x, output=y).launchRaw(blockSize=(1, 1, 1), gridSize=(1, 1, 1))  # noqa: E731
    for _ in range(200):
        call()
    sync()
    # Host overhead: the time to issue n launches, the device drained before each loop and not timed after
    # (n stays below the launch queue's depth, so no launch waits for the device); the median loop of 15.
    n, loops, ref = 500, [], []
    y2 = torch.empty_like(y)
    for _ in range(15):
        sync()
        t = time.perf_counter()
        for _ in range(n):
            call()
        loops.append((time.perf_counter() - t) / n * 1e6)
        sync()
        t = time.perf_counter()
        for _ in range(n):
            torch.mul(x, x, out=y2)    # torch's own launch of the same work, for scale
        ref.append((time.perf_counter() - t) / n * 1e6)
    sync()
    print(f"[{dev}] per-call host overhead (1-thread launch, 2 tensors): median {statistics.median(loops):.1f} us "
          f"over 15 loops of {n} calls (min {min(loops):.1f}, max {max(loops):.1f}); torch.mul(x, x, out=y) in the "
          f"same loops: {statistics.median(ref):.1f} us = {statistics.median(loops) / statistics.median(ref):.2f}x")
    s = st.loadModule(STRAT)
    N = a.n
    xs = torch.rand(N, device=dev)
    b = torch.rand(1, device=dev)
    gy = torch.ones(N, device=dev)
    bs, gs = (256, 1, 1), ((N + 255) // 256, 1, 1)

    def bwd_bias(k):
        gx, gb, yy = torch.zeros_like(xs), torch.zeros_like(b), torch.zeros_like(xs)
        return lambda: k.bwd(x=(xs, gx), b=(b, gb), y=(yy, gy.clone())).launchRaw(blockSize=bs, gridSize=gs)

    def bwd_img(k):
        gx, yy = torch.zeros_like(xs), torch.zeros_like(xs)
        return lambda: k.bwd(x=(xs, gx), y=(yy, gy.clone())).launchRaw(blockSize=bs, gridSize=gs)

    for k in (s.bias_load, s.bias_fixed, s.img_load, s.img_uniform, s.img_uniform_once):
        (bwd_bias(k) if "bias" in k._kinfo.name else bwd_img(k))()
    t_load = timeit(bwd_bias(s.bias_load), a.reps, sync)
    t_fixed = timeit(bwd_bias(s.bias_fixed), a.reps, sync)
    print(f"[{dev}] bias read by all {N} threads, .bwd: load {t_load * 1e3:.2f} ms | loadFixed {t_fixed * 1e3:.2f} ms"
          f" | load/loadFixed {t_load / t_fixed:.2f}x")
    ti = [timeit(bwd_img(k), a.reps, sync) for k in (s.img_load, s.img_uniform, s.img_uniform_once)]
    print(f"[{dev}] per-pixel image of {N}, .bwd: load {ti[0] * 1e3:.2f} ms | loadUniform {ti[1] * 1e3:.2f} ms | "
          f"loadUniformOnce {ti[2] * 1e3:.2f} ms | load/loadUniform {ti[0] / ti[1]:.2f}x, "
          f"load/loadUniformOnce {ti[0] / ti[2]:.2f}x")


if __name__ == "__main__":
    main()
