"""Module calls with torch tensors: host overhead on the CPU device, and (on a GPU) the seed-000 polynomial's
forward + backward through torch.autograd over 2^26 float32 against the copy-bandwidth limit and
torch.compile.  Ratios are printed side by side in one run.

    python benchmarks/torch_calls.py [--repeats 2000] [--device auto|cuda|cpu] [--gpu-n-log2 26] [--iters 20]
                                     [--no-gpu] [--no-compile] [--traffic-n-log2 16]

Host overhead (CPU device, 4-element tensors, cached call signature; median of --repeats calls):
  spy       module.polynomial(2.0, 8.0, -1.0, spy_tensor)               the plain functional call
  torch     module.polynomial(2.0, 8.0, -1.0, torch_tensor)              -> torch tensor (no grad)
  fwd+bwd   y = module.polynomial(a, 8.0, -1.0, x); y.sum().backward()   x, a require grad
  torch-ref the same fwd+bwd written in torch (a * x * x + 8 * x - 1): torch's own per-op overhead
Goals (issue 17): torch forward <= 20 us, forward+backward <= 50 us; SlangPy's plain call 36 us and
slang-torch's ~30 us as measured by its users.

GPU (CUDA torch and a GPU present): y = poly(x); y.backward(gy) with x.requires_grad, float32 over 2^n,
timed with CUDA events on torch's current stream (median of --iters after warm-up).  Limit: 24 bytes per
element (forward: read x, write y; backward: read x, read gy, write x.grad once: x.grad is freshly made by
the call), divided by the measured device-to-device copy bandwidth (torch copy_ of a 2^n float32 tensor,
read + write bytes).  torch.compile: the same step with poly written in torch under torch.compile.
"slangjit, general path": the same step with the call plan's direct path switched off (slangjit/torch/calls.py
instead of fastpath.py), for comparison.

Traffic (printed for the CPU device at 2^--traffic-n-log2 elements, and for the GPU step): per direction, the
launches one poly forward + backward makes -- slangjit kernels (slangjit.torch.launch_log) plus every torch
fill_ / copy_ (torch.profiler: zeros for gradients, dtype conversions, AccumulateGrad copying a gradient it
could not take) -- and the bytes per element they move (a stride-0 dimension read once).  The goal's floor
is 1 launch each way, forward 8 B/element (read x, write y), backward 12 B/element (read x and gy, write
x.grad with a plain store).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

import slangjit as spy  # noqa: E402
from slangjit.torch import calls as tcalls, launch_log  # noqa: E402

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


def host_overhead(repeats: int) -> dict:
    device = spy.create_torch_device("cpu")
    m = spy.Module.load_from_source(device, "bench_torch_calls", SRC)
    f = m.polynomial
    xs = spy.Tensor.from_numpy(device, np.arange(4, dtype=np.float32))
    xt = torch.arange(4, dtype=torch.float32)
    xg = xt.clone().requires_grad_(True)
    a = torch.tensor([2.0], requires_grad=True)

    def fwdbwd():
        f(a, 8.0, -1.0, xg).sum().backward()

    def ref():
        (a * xg * xg + 8.0 * xg - 1.0).sum().backward()
    for g in (lambda: f(2.0, 8.0, -1.0, xs), lambda: f(2.0, 8.0, -1.0, xt), fwdbwd, ref):
        for _ in range(20):
            g()
    r = {"spy": med(lambda: f(2.0, 8.0, -1.0, xs), repeats),
         "torch": med(lambda: f(2.0, 8.0, -1.0, xt), repeats),
         "fwd+bwd": med(fwdbwd, repeats),
         "torch-ref": med(ref, repeats)}
    return {k: v * 1e6 for k, v in r.items()}


def _general(f, *args):
    """Switch the direct path of this call signature's plan off (the general path serves it from now on)."""
    key, _ = tcalls._fast_key(f, args, {})
    tcalls._PLANS[key].fast = False


def traffic(f, x, gy) -> dict:
    """direction -> (launches, slangjit kernels, torch fills + copies, bytes per element) of one
    y = f(2, 8, -1, x); y.backward(gy) with x.grad None (a warm call signature)."""
    n = x.numel()
    isz = x.element_size()
    acts = [torch.profiler.ProfilerActivity.CPU]
    out = {}
    x.grad = None
    y = None
    for direction in ("forward", "backward"):
        with launch_log() as log, torch.profiler.profile(activities=acts, record_shapes=True) as prof:
            if direction == "forward":
                y = f(2.0, 8.0, -1.0, x)
            else:
                y.backward(gy)
        kernels = [e for e in log.events if e[0] == direction and e[1] == "kernel"]
        kb = sum(e[3] + e[4] for e in kernels)
        tops = 0
        for ev in prof.events():
            if ev.name not in ("aten::fill_", "aten::copy_"):
                continue
            shp = ev.input_shapes[0] if ev.input_shapes else []
            numel = int(np.prod(shp)) if shp else 1
            tops += 1
            kb += numel * isz * (2 if ev.name == "aten::copy_" else 1)
        out[direction] = (len(kernels) + tops, len(kernels), tops, kb / n)
    x.grad = None
    return out


def print_traffic(label: str, t: dict) -> None:
    for d in ("forward", "backward"):
        la, k, o, b = t[d]
        print(f"  {label:<28} {d:<8}  launches {la}  (slangjit kernels {k}, torch fills/copies {o})  "
              f"{b:5.1f} B/element")


def cpu_traffic(n_log2: int) -> dict:
    device = spy.create_torch_device("cpu")
    m = spy.Module.load_from_source(device, "bench_torch_calls", SRC)
    f = m.polynomial
    n = 1 << n_log2
    x = torch.rand(n, requires_grad=True)
    gy = torch.ones(n)
    fg = spy.Module.load_from_source(device, "bench_torch_calls_general", SRC).polynomial   # the general path
    for g in (f, fg):
        for _ in range(3):
            x.grad = None
            g(2.0, 8.0, -1.0, x).backward(gy)
    _general(fg, 2.0, 8.0, -1.0, x)
    return {"direct": traffic(f, x, gy), "general": traffic(fg, x, gy)}


def gpu(n_log2: int, iters: int, tdev="cuda", compile_step: bool = True) -> dict:
    """The 2^n poly step on `tdev` (cuda; 'cpu' runs the same section on the CPU device, timed by the host
    clock: a check of this code without a GPU, not a figure of the issue)."""
    n = 1 << n_log2
    tdev = torch.device(tdev)
    cuda = tdev.type == "cuda"
    device = spy.create_torch_device(tdev)
    m = spy.Module.load_from_source(device, "bench_torch_calls", SRC)
    f = m.polynomial
    x = torch.rand(n, device=tdev, requires_grad=True)
    gy = torch.ones(n, device=tdev)

    def timed(step):
        for _ in range(3):
            step()
        if cuda:
            torch.cuda.synchronize()
        ts = []
        for _ in range(iters):
            if not cuda:
                t0 = time.perf_counter()
                step()
                ts.append(time.perf_counter() - t0)
                continue
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            step()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) * 1e-3)
        return statistics.median(ts)

    def slang_step():
        x.grad = None
        f(2.0, 8.0, -1.0, x).backward(gy)

    fg = spy.Module.load_from_source(device, "bench_torch_calls_general", SRC).polynomial   # the general path

    def general_step():
        x.grad = None
        fg(2.0, 8.0, -1.0, x).backward(gy)
    for _ in range(2):
        general_step()
    _general(fg, 2.0, 8.0, -1.0, x)

    def torch_poly(x):
        return 2.0 * x * x + 8.0 * x - 1.0
    cpoly = torch.compile(torch_poly)

    def compiled_step():
        x.grad = None
        cpoly(x).backward(gy)

    src, dst = torch.empty(n, device=tdev), torch.empty(n, device=tdev)
    copy = timed(lambda: dst.copy_(src))
    bw = 8 * n / copy
    limit = 24 * n / bw
    r = {"n": n, "copy_GBps": bw / 1e9, "limit_ms": limit * 1e3, "slang_ms": timed(slang_step) * 1e3,
         "general_ms": timed(general_step) * 1e3,
         "compiled_ms": timed(compiled_step) * 1e3 if compile_step else float("nan"),
         "device": "GPU " + torch.cuda.get_device_name() if cuda else "CPU device (host clock)"}
    r["traffic"] = {"direct": traffic(f, x, gy), "general": traffic(fg, x, gy)}
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2000)
    ap.add_argument("--gpu-n-log2", type=int, default=26)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--traffic-n-log2", type=int, default=16)
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="where the 2^--gpu-n-log2 step runs: auto (a GPU when torch has one, else skipped), "
                    "cuda, or cpu (a check of the section without a GPU)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile step")
    a = ap.parse_args()
    h = host_overhead(a.repeats)
    print("host overhead per cached call, CPU device, 4 elements (median, us):")
    print(f"  {'spy.Tensor':>12} {'torch':>8} {'fwd+bwd':>8} {'torch-ref':>9}   torch/spy  fwd+bwd/torch-ref"
          "  goals: torch<=20, fwd+bwd<=50 (SlangPy 36, slang-torch ~30)")
    print(f"  {h['spy']:12.1f} {h['torch']:8.1f} {h['fwd+bwd']:8.1f} {h['torch-ref']:9.1f}   "
          f"{h['torch'] / h['spy']:9.2f}  {h['fwd+bwd'] / h['torch-ref']:17.2f}")
    t = cpu_traffic(a.traffic_n_log2)
    print(f"traffic of one poly fwd+bwd, CPU device, 2^{a.traffic_n_log2} float32 (floor: 1 launch each way, "
          "8 and 12 B/element):")
    print_traffic("slangjit, direct path", t["direct"])
    print_traffic("slangjit, general path", t["general"])
    step_dev = None if a.no_gpu else "cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available()) \
        else "cpu" if a.device == "cpu" else None
    if step_dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: this torch has no CUDA device")
    if step_dev is not None:
        g = gpu(a.gpu_n_log2, a.iters, step_dev, not a.no_compile)
        print(f"{g['device']}: poly fwd+bwd through torch.autograd over 2^{a.gpu_n_log2} float32 (ms): "
              f"slangjit {g['slang_ms']:.3f}  limit {g['limit_ms']:.3f} (copy {g['copy_GBps']:.0f} GB/s)  "
              f"torch.compile {g['compiled_ms']:.3f}  slangjit general path {g['general_ms']:.3f}  |  "
              f"slangjit/limit {g['slang_ms'] / g['limit_ms']:.2f} (goal <= 1.15)  "
              f"slangjit/compiled {g['slang_ms'] / g['compiled_ms']:.2f} (goal < 1)  "
              f"general/limit {g['general_ms'] / g['limit_ms']:.2f}")
        print(f"traffic of that step on {g['device']}:")
        print_traffic("slangjit, direct path", g["traffic"]["direct"])
        print_traffic("slangjit, general path", g["traffic"]["general"])
    else:
        print("GPU part skipped (no CUDA torch / GPU)")


if __name__ == "__main__":
    main()
