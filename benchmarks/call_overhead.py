"""Host-side overhead of a cached functional call, and a 2^24-element polynomial `.bwds` against numpy.

    python benchmarks/call_overhead.py [--n-log2 24] [--repeats 1000]

1. `module.polynomial(a=2, b=8, c=-1, x=tensor_of_4)` on the CPU device, after a warm-up call (the kernel is
   compiled and cached by argument signature): median wall time of 1000 calls.  This is the Python-side
   overhead per call (signature lookup, call shape, uniform packing, result allocation, launch) plus a
   4-thread kernel run.
2. The same function over 2^24 floats: forward call and `.bwds` (gradient accumulated into x.grad),
   against numpy computing the same values (2x^2+8x-1 and g*(4x+8)), median of 5 each.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import slangjit as spy  # noqa: E402

SRC = """
[Differentiable]
float polynomial(float a, float b, float c, float x) { return a * x * x + b * x + c; }
"""


def med(f, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-log2", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=1000)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="the CPU backend unless told")
    args = ap.parse_args()
    device = spy.create_device(type=spy.DeviceType.cpu if args.device == "cpu" else spy.DeviceType.cuda)
    print(f"device: {args.device}")
    module = spy.Module.load_from_source(device, "bench_poly", SRC)

    x4 = spy.Tensor.from_numpy(device, np.arange(4, dtype=np.float32))
    t0 = time.perf_counter()
    module.polynomial(a=2, b=8, c=-1, x=x4)
    first = time.perf_counter() - t0
    f = module.polynomial
    call = med(lambda: f(a=2, b=8, c=-1, x=x4), args.repeats)
    # process CPU time per call (all threads), median of 15 batches: steadier than wall time on a loaded machine
    batch = max(1, args.repeats // 5)
    cpu = []
    for _ in range(15):
        c0 = time.process_time()
        for _ in range(batch):
            f(a=2, b=8, c=-1, x=x4)
        cpu.append((time.process_time() - c0) / batch)
    print(f"first call (resolve + codegen + compile or cache load): {first * 1e3:.1f} ms")
    print(f"cached call module.polynomial(a=2, b=8, c=-1, x=tensor_of_4): median {call * 1e6:.2f} us "
          f"over {args.repeats} calls; process CPU {statistics.median(cpu) * 1e6:.2f} us per call")

    n = 1 << args.n_log2
    xs = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    x = spy.Tensor.from_numpy(device, xs).with_grads(zero=True)
    res = module.polynomial(a=2, b=8, c=-1, x=x).with_grads()
    res.grad.copy_from_numpy(np.ones(n, np.float32))
    module.polynomial.bwds(a=2, b=8, c=-1, x=x, _result=res)       # warm up (compile)
    fwd = med(lambda: module.polynomial(a=2, b=8, c=-1, x=x, _result=res), 5)
    bwd = med(lambda: module.polynomial.bwds(a=2, b=8, c=-1, x=x, _result=res), 5)
    gnp = np.zeros(n, np.float32)
    ones = np.ones(n, np.float32)

    def np_fwd():
        return 2 * xs * xs + 8 * xs - 1

    def np_bwd():
        gnp[:] += ones * (4 * xs + 8)

    nfwd = med(np_fwd, 5)
    nbwd = med(np_bwd, 5)
    x.grad.clear()
    module.polynomial.bwds(a=2, b=8, c=-1, x=x, _result=res)
    err = float(np.max(np.abs(x.grad.to_numpy() - (4 * xs + 8))))
    thr = spy.runtime.device.num_threads()
    print(f"2^{args.n_log2} elements, {thr} worker threads:")
    print(f"  forward  slangjit {fwd * 1e3:8.2f} ms   numpy {nfwd * 1e3:8.2f} ms")
    print(f"  bwds     slangjit {bwd * 1e3:8.2f} ms   numpy {nbwd * 1e3:8.2f} ms   (max |grad error| {err:.2g})")


if __name__ == "__main__":
    main()
