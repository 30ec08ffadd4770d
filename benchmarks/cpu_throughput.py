"""CPU throughput: elementwise Slang kernels over 2^24 float32 vs numpy, side by side.

    python benchmarks/cpu_throughput.py [--log2n 24] [--repeat 7]

Kernels:
  poly   y = a*x*x + b*x + c
  heavy  y = sin(x) * exp(-x*x) + sqrt(abs(x)) * cos(3x)
  poly fwd + .bwds: the functional API (`module.poly(a, b, c, x, _result=y)` then
         `module.poly.bwds(a, b, c, x, y)`, x.grad += y.grad * (2ax + b)), against the memory-bandwidth floor:
         24 bytes per element (forward: read x, write y; backward: read x, read y.grad, read + write x.grad)
         over the all-core copy bandwidth measured in the same run (numpy copies of 1/T of a 2^26-float
         buffer on each of T Python threads; numpy releases the GIL while copying).

The poly fwd + .bwds lines also give, for all workers and for one, the wall and process CPU time (all threads)
of each call, and of a forward call that allocates its result (`module.poly(a, b, c, x)`, what a user's call does).

For each: numpy (the same expression on float32 arrays), slangjit on all worker threads
(`$SLANGJIT_NUM_THREADS` or os.cpu_count()) and slangjit with SLANGJIT_NUM_THREADS=1; the speedup
of all threads over one thread.  Times are the median of `--repeat` runs of the dispatch alone
(buffers stay resident, like device memory); numpy times include its temporaries.  Results are
checked against numpy (max relative error printed).  Nothing is asserted about time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import slangjit as spy  # noqa: E402
from slangjit.runtime.cpu_pool import native_ready  # noqa: E402
from slangjit.runtime import device as device_mod  # noqa: E402

SOURCE = r"""
StructuredBuffer<float> x;
RWStructuredBuffer<float> y;

[numthreads(256, 1, 1)]
void poly(uint3 tid : SV_DispatchThreadID, uniform uint count, uniform float a, uniform float b, uniform float c)
{
    uint i = tid.x;
    if (i >= count)
        return;
    float v = x[i];
    y[i] = a * v * v + b * v + c;
}

[numthreads(256, 1, 1)]
void heavy(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    uint i = tid.x;
    if (i >= count)
        return;
    float v = x[i];
    y[i] = sin(v) * exp(-v * v) + sqrt(abs(v)) * cos(3.0 * v);
}
"""

POLY_SRC = """
[Differentiable]
float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }
"""

A, B, C = np.float32(0.5), np.float32(-1.25), np.float32(3.0)


def np_poly(x):
    return A * x * x + B * x + C


def np_heavy(x):
    return np.sin(x) * np.exp(-x * x) + np.sqrt(np.abs(x)) * np.cos(np.float32(3.0) * x)


def timeit(fn, repeat: int) -> float:
    return timeit_cpu(fn, repeat)[0]


def timeit_cpu(fn, repeat: int) -> tuple:
    """(median wall seconds, process CPU seconds per run: all threads, user + system, the total over the `repeat`
    runs / repeat -- a spinning pool worker's clock advances at scheduler ticks only, so per-run differences
    would miss its time)."""
    fn()                                   # warm-up (first dispatch / page faults)
    ts = []
    c0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), (time.process_time() - c0) / repeat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n = 1 << args.log2n

    device = spy.create_device(type=spy.DeviceType.cpu)
    native_ready(wait=True, timeout=120)   # time the steady state: the native pool's library, built once per cache
    module = device.load_module_from_source("cpu_throughput", SOURCE)
    kernels = {name: device.create_compute_kernel(device.link_program([module], [module.entry_point(name)]))
               for name in ("poly", "heavy")}
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 2.0).astype(np.float32)
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    bx = device.create_buffer(element_count=n, struct_size=4, usage=usage, data=x)
    by = device.create_buffer(element_count=n, struct_size=4, usage=usage)

    multi_env = os.environ.get("SLANGJIT_NUM_THREADS")
    nthreads = device_mod.num_threads()
    print(f"n = 2^{args.log2n} = {n} float32; {nthreads} worker threads (os.cpu_count() = {os.cpu_count()}); "
          f"median of {args.repeat}")
    print()
    hdr = (f"{'kernel':<7}{'numpy ms':>10}{'slangjit ms':>13}{'1 thread ms':>13}{'vs numpy':>10}"
           f"{'MT speedup':>12}{'Melem/s':>10}{'max rel err':>13}")
    print(hdr)
    print("-" * len(hdr))
    for name, ref, kw in (("poly", np_poly, dict(a=float(A), b=float(B), c=float(C))), ("heavy", np_heavy, {})):
        k = kernels[name]

        def run():
            k.dispatch(thread_count=[n, 1, 1], vars={"x": bx, "y": by}, count=n, **kw)

        t_np = timeit(lambda: ref(x), args.repeat)
        if multi_env is None:
            os.environ.pop("SLANGJIT_NUM_THREADS", None)
        else:
            os.environ["SLANGJIT_NUM_THREADS"] = multi_env
        t_mt = timeit(run, args.repeat)
        got = by.to_numpy().view(np.float32)
        want = ref(x.astype(np.float64))
        err = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
        os.environ["SLANGJIT_NUM_THREADS"] = "1"
        t_1 = timeit(run, args.repeat)
        got1 = by.to_numpy().view(np.float32)
        if multi_env is None:
            os.environ.pop("SLANGJIT_NUM_THREADS", None)
        else:
            os.environ["SLANGJIT_NUM_THREADS"] = multi_env
        same = "" if np.array_equal(got, got1) else "  (1-thread result differs!)"
        print(f"{name:<7}{t_np * 1e3:>10.2f}{t_mt * 1e3:>13.2f}{t_1 * 1e3:>13.2f}{t_np / t_mt:>9.2f}x"
              f"{t_1 / t_mt:>11.2f}x{n / t_mt / 1e6:>10.0f}{err:>13.2e}{same}")
    print()
    print("vs numpy = numpy time / slangjit (all threads) time;  MT speedup = 1-thread time / all-threads time")
    print()
    poly_fwd_bwd(device, n, nthreads, args.repeat)


def copy_bandwidth(nthreads: int, repeat: int) -> float:
    """Bytes per second (read + write) of an all-core memory copy of 2^26 float32."""
    from concurrent.futures import ThreadPoolExecutor
    m = 1 << 26
    src = np.ones(m, np.float32)
    dst = np.empty_like(src)
    bounds = [m * i // nthreads for i in range(nthreads + 1)]
    with ThreadPoolExecutor(nthreads) as ex:
        def run():
            list(ex.map(lambda i: np.copyto(dst[bounds[i]:bounds[i + 1]], src[bounds[i]:bounds[i + 1]]),
                        range(nthreads)))
        t = min(timeit(run, repeat) for _ in range(2))
    return 2 * 4 * m / t


def poly_fwd_bwd(device, n: int, nthreads: int, repeat: int) -> None:
    bw = copy_bandwidth(nthreads, repeat)
    floor = 24 * n / bw
    m = spy.Module.load_from_source(device, "cpu_poly_fb", POLY_SRC)
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, n).astype(np.float32)
    x = spy.Tensor.from_numpy(device, xs).with_grads(zero=True)
    y = m.poly(2.0, 8.0, -1.0, x).with_grads()
    y.grad.copy_from_numpy(np.ones(n, np.float32))
    f, fb = m.poly, m.poly.bwds

    def fwd():
        f(2.0, 8.0, -1.0, x, _result=y)

    def bwd():
        fb(2.0, 8.0, -1.0, x, y)

    def both():
        fwd()
        bwd()

    def alloc():                           # what a user's call does: allocate the result
        f(2.0, 8.0, -1.0, x)

    env = os.environ.get("SLANGJIT_NUM_THREADS")
    rows = {}
    for label, threads in (("all", env), ("1", "1")):
        if threads is None:
            os.environ.pop("SLANGJIT_NUM_THREADS", None)
        else:
            os.environ["SLANGJIT_NUM_THREADS"] = threads
        rows[label] = [timeit_cpu(g, repeat) for g in (fwd, bwd, both, alloc)]
    if env is None:
        os.environ.pop("SLANGJIT_NUM_THREADS", None)
    else:
        os.environ["SLANGJIT_NUM_THREADS"] = env
    (t_f, _), (t_b, _), (t_fb, _), _ = rows["all"]
    x.grad.clear()
    bwd()
    err_f = float(np.max(np.abs(y.to_numpy() - (2 * xs * xs + 8 * xs - 1))))
    err_b = float(np.max(np.abs(x.grad.to_numpy() - (4 * xs + 8))))
    t_np = timeit(lambda: (2 * xs * xs + 8 * xs - 1, xs.copy() + (4 * xs + 8)), repeat)
    print(f"poly fwd + .bwds, 2^{n.bit_length() - 1} float32, {nthreads} threads: all-core copy {bw / 1e9:.1f} GB/s "
          f"(read + write) -> floor {floor * 1e3:.2f} ms (24 B/element)")
    print(f"  forward {t_f * 1e3:.2f} ms, .bwds {t_b * 1e3:.2f} ms, both {t_fb * 1e3:.2f} ms = "
          f"{t_fb / floor:.2f}x the floor; numpy fwd + bwd {t_np * 1e3:.2f} ms; max err fwd {err_f:.2g}, grad {err_b:.2g}")
    print(f"  {'workers':<9}{'fwd':>16}{'.bwds':>16}{'both':>16}{'fwd allocating':>18}   (wall / process CPU ms)")
    for label, r in rows.items():
        cells = "".join(f"{w * 1e3:>9.2f} /{c * 1e3:>6.2f}" for w, c in r[:3])
        print(f"  {label + (' ' + str(nthreads) if label == 'all' else ''):<9}{cells}{r[3][0] * 1e3:>11.2f} /{r[3][1] * 1e3:>6.2f}")
    try:
        print(f"  load average during the run: {os.getloadavg()[0]:.1f} (on {os.cpu_count()} CPUs)")
    except OSError:
        pass


if __name__ == "__main__":
    main()
