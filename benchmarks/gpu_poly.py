"""Polynomial forward + backward (`.bwds`) over 2^26 float32 on the CUDA device, against PyTorch eager and
torch.compile (when torch with CUDA is installed), and against the device's copy bandwidth.

    python benchmarks/gpu_poly.py [--n-log2 26] [--iters 20] [--no-compile] [--dump DIR]

slangjit: `module.poly(a, b, c, x, _result=y)` (forward) and `module.poly.bwds(a, b, c, x, y)` (backward:
x.grad += y.grad * (2ax + b)), a, b, c plain floats, x / y / grads preallocated spy.Tensors.
PyTorch: y = a*x*x + b*x + c on a CUDA tensor (no_grad for the forward alone); forward + backward is
y = poly(x); y.backward(gy) with x.requires_grad (x.grad accumulates, as slangjit's does).
Times: CUDA events around `--iters` back-to-back calls (after warm-up), per call, on each library's stream.
Limit: bytes that must move / measured device-to-device copy bandwidth (cuMemcpyDtoD, read + write bytes):
forward 8 B/element (read x, write y), backward 16 B/element (read x, read gy, read + write x.grad).
The last line is a one-line summary.  --dump DIR writes the generated kernels (Slang and CUDA) there.
SLANGJIT_FUNCTIONAL_UNROLL=k sets the call elements per thread of the generated kernels (default 8 forward,
4 backward here).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import slangjit as spy  # noqa: E402
from slangjit.runtime.cuda import _ck  # noqa: E402


def _elapsed(d):
    return getattr(d, "cuEventElapsedTime", None) or getattr(d, "cuEventElapsedTime_v2")

SRC = """
[Differentiable]
float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }
"""


class Timer:
    """CUDA-event timing on the slangjit device's stream."""

    def __init__(self, dev):
        self.ctx = dev._ctx
        d = self.ctx.d
        self.d = d
        self.e0 = _ck(d.cuEventCreate(0), "cuEventCreate")
        self.e1 = _ck(d.cuEventCreate(0), "cuEventCreate")

    def time(self, fn, iters, warm=3):
        for _ in range(warm):
            fn()
        self.ctx.synchronize()
        d = self.d
        _ck(d.cuEventRecord(self.e0, self.ctx.stream), "rec")
        for _ in range(iters):
            fn()
        _ck(d.cuEventRecord(self.e1, self.ctx.stream), "rec")
        _ck(d.cuEventSynchronize(self.e1), "sync")
        return float(_ck(_elapsed(d)(self.e0, self.e1), "elapsed")) / iters


def torch_time(torch, fn, iters, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / iters


def dump_kernels(d, nodes):
    """The Slang kernel of every call signature used so far, and its CUDA translation."""
    from slangjit.compiler import SourceSpec, compile_program
    os.makedirs(d, exist_ok=True)
    for name, node in nodes.items():
        for i, cd in enumerate(node._cache.values()):
            codes = [("", cd.code)] + ([("_linear", cd.code_linear)] if hasattr(cd, "code_linear") else [])
            for tag, code in codes:
                base = os.path.join(d, f"{name}{i}{tag}")
                with open(base + ".slang", "w") as fh:
                    fh.write(code)
                prog = compile_program([SourceSpec(text=cd.module._source_text + "\n" + code, name="k")],
                                       ["_sj_main"], target="cuda")
                with open(base + ".cu", "w") as fh:
                    fh.write(prog.source)
                print(f"wrote {base}.slang / .cu (unroll {cd.unroll})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-log2", type=int, default=26)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--dump", default="", help="directory for the generated kernels' Slang and CUDA source")
    args = ap.parse_args()
    n = 1 << args.n_log2
    dev = spy.create_device(type=spy.DeviceType.cuda)
    print(f"device: {dev}  n = 2^{args.n_log2} float32")
    tm = Timer(dev)

    # copy bandwidth
    nbytes = n * 4
    b0 = dev.create_buffer(size=nbytes, usage=spy.BufferUsage.unordered_access)
    b1 = dev.create_buffer(size=nbytes, usage=spy.BufferUsage.unordered_access)
    d = tm.d
    copy_ms = tm.time(lambda: _ck(d.cuMemcpyDtoDAsync(b1.device_address, b0.device_address, nbytes,
                                                      tm.ctx.stream), "copy"), args.iters)
    bw = 2 * nbytes / (copy_ms * 1e-3)
    del b0, b1
    print(f"device copy: {copy_ms:.3f} ms for {nbytes / 1e6:.0f} MB -> {bw / 1e12:.2f} TB/s (read + write)")
    lim_f = 8 * n / bw * 1e3
    lim_b = 16 * n / bw * 1e3

    # slangjit
    m = spy.Module.load_from_source(dev, "gpu_poly", SRC)
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, n).astype(np.float32)
    x = spy.Tensor.from_numpy(dev, xs).with_grads(zero=True)
    t0 = time.perf_counter()
    y = m.poly(2.0, 8.0, -1.0, x)
    dev.wait()
    first_f = time.perf_counter() - t0
    y = y.with_grads()
    y.grad.copy_from_numpy(np.ones(n, np.float32))
    t0 = time.perf_counter()
    m.poly.bwds(2.0, 8.0, -1.0, x, y)
    dev.wait()
    first_b = time.perf_counter() - t0
    x.grad.clear()
    m.poly.bwds(2.0, 8.0, -1.0, x, y)
    err_f = float(np.max(np.abs(y.to_numpy() - (2 * xs * xs + 8 * xs - 1))))
    err_b = float(np.max(np.abs(x.grad.to_numpy() - (4 * xs + 8))))
    f = m.poly
    fb = m.poly.bwds
    sj_f = tm.time(lambda: f(2.0, 8.0, -1.0, x, _result=y), args.iters)
    sj_b = tm.time(lambda: fb(2.0, 8.0, -1.0, x, y), args.iters)

    def both():
        f(2.0, 8.0, -1.0, x, _result=y)
        fb(2.0, 8.0, -1.0, x, y)
    sj_fb = tm.time(both, args.iters)
    if args.dump:
        dump_kernels(args.dump, {"forward": f, "bwds": fb})
    # host side: one cached call (no wait), median
    ts = []
    for _ in range(200):
        t0 = time.perf_counter()
        f(2.0, 8.0, -1.0, x, _result=y)
        ts.append(time.perf_counter() - t0)
    dev.wait()
    host_us = statistics.median(ts) * 1e6
    print(f"slangjit: first call fwd {first_f * 1e3:.0f} ms, bwds {first_b * 1e3:.0f} ms (codegen + front end + "
          f"NVRTC or cache); max err fwd {err_f:.2g}, grad {err_b:.2g}; host time per cached call {host_us:.1f} us")

    rows = [("forward", sj_f, lim_f), ("backward (.bwds)", sj_b, lim_b), ("forward + backward", sj_fb, lim_f + lim_b)]
    torch_rows = {}
    torch_note = ""
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch without CUDA")
        xt = torch.from_numpy(xs).cuda()
        gy = torch.ones(n, device="cuda")

        def poly(v):
            return 2.0 * v * v + 8.0 * v - 1.0

        def t_fwd(p=poly):
            with torch.no_grad():
                return p(xt)
        xg = xt.clone().requires_grad_()

        def t_fb(p=poly):
            p(xg).backward(gy)

        torch_rows["eager"] = (torch_time(torch, t_fwd, args.iters), torch_time(torch, t_fb, args.iters))
        if not args.no_compile:
            try:
                cpoly = torch.compile(poly)
                t0 = time.perf_counter()
                t_fwd(cpoly)
                t_fb(cpoly)
                torch.cuda.synchronize()
                ct = time.perf_counter() - t0
                torch_rows["compile"] = (torch_time(torch, lambda: t_fwd(cpoly), args.iters),
                                         torch_time(torch, lambda: t_fb(cpoly), args.iters))
                torch_note = f"torch.compile first calls {ct:.1f} s"
            except Exception as e:  # noqa: BLE001
                torch_note = f"torch.compile failed: {type(e).__name__}: {str(e)[:200]}"
        print(f"torch {torch.__version__}; {torch_note}")
    except ImportError as e:
        print(f"PyTorch not available ({e}): no comparison")

    print()
    hdr = f"| {'2^' + str(args.n_log2) + ' float32':<22} | slangjit ms | limit ms | vs limit |"
    for k in torch_rows:
        hdr += f" torch {k} ms | slangjit speed-up vs {k} |"
    print(hdr)
    print("|" + "---|" * (4 + 2 * len(torch_rows)))
    for i, (name, ms, lim) in enumerate(rows):
        line = f"| {name:<22} | {ms:.3f} | {lim:.3f} | {ms / lim:.2f}x |"
        for k, (tf, tfb) in torch_rows.items():
            tv = {0: tf, 1: tfb - tf, 2: tfb}[i]
            line += f" {tv:.3f} | {tv / ms:.2f}x |"
        print(line)
    summary = f"poly fwd+bwd {sj_fb:.3f} ms = {sj_fb / (lim_f + lim_b):.2f}x limit ({lim_f + lim_b:.3f} ms @ " \
              f"{bw / 1e12:.2f} TB/s)"
    for k, (tf, tfb) in torch_rows.items():
        summary += f"; torch {k} {tfb:.3f} ms ({tfb / sj_fb:.1f}x)"
    print(summary)


if __name__ == "__main__":
    main()
