"""The seed 002 MLP training step (examples/mlp_training) at batch 2^20 on the CUDA device, against the same
network in PyTorch eager and torch.compile (when torch with CUDA is installed), plus cold compile and warm
load of the MLP module for CUDA in new processes.

    python benchmarks/gpu_mlp.py [--batch-log2 20] [--steps 20] [--no-compile]

Network: examples/mlp_training/mlp.slang (4 -> 16 -> 4, leaky ReLU, half; input encoding (x, y, x^2, y^2);
loss = squared error against four polynomials, summed over the batch).  One step = learnGradient over the
batch (bwd_diff(loss); every thread adds its sample's gradient into one shared half gradient buffer) +
adjustParameters (SGD, gradient reset).  The example's InterlockedAddF16Emulated (a compare-exchange loop on
the 32-bit word) serialises 2^20 threads on 148 parameters, so the benchmark swaps its body for a native
`InterlockedAdd(*dest, value)`; everything else is the example's code.  On CUDA that kernel is coarsened
(docs/architecture.md): each thread sums its samples' gradients in one register per parameter, each warp adds
its sums into the buffer once.  PyTorch: the same parameters (init_parameters(seed)), inputs and loss, in half, with
autograd; SGD with torch._foreach_add_; torch.compile compiles the loss function (forward + AOT backward).
Gradients of one step at batch 2^12 are compared between the two (relative error, float64 reference).
The last line is a one-line summary.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "mlp_training"))
import slangjit as spy  # noqa: E402
from slangjit.runtime.cuda import _ck  # noqa: E402


def _elapsed(d):
    return getattr(d, "cuEventElapsedTime", None) or getattr(d, "cuEventElapsedTime_v2")

NATIVE_ADD = """void InterlockedAddF16Emulated(NFloat* dest, NFloat value, out NFloat originalValue)
{
    originalValue = NFloat(0);
    InterlockedAdd(*dest, value);   // gpu_mlp.py: native half atomic add (warp-aggregated on CUDA)
}
"""


# Loss scaling: the half gradient buffer holds sums over the whole batch, which overflow half
# (max 65504) at 2^20 samples with the seed's unit loss gradient (the largest parameter gradient is
# about 1.5e6).  Infinite gradients make the parameters NaN after one step, and a kernel running on NaN
# is not the kernel a user trains with (its timing differs: 2x in session 4).  So the seed's bwd_diff
# call gets dOut = 2^-6 instead of 1 (the usual half-precision remedy; a power of two, so the
# gradients are the same up to that factor) and PyTorch's loss is scaled the same way.
LOSS_SCALE = 2.0 ** -6
_SEED_CALL = "bwd_diff(loss)(network, input.x, input.y, 1.0h);"


def patched_source() -> str:
    src = (ROOT / "examples" / "mlp_training" / "mlp.slang").read_text()
    assert _SEED_CALL in src, "the example's bwd_diff call changed: update gpu_mlp.py"
    src = src.replace(_SEED_CALL, f"bwd_diff(loss)(network, input.x, input.y, {LOSS_SCALE!r}h);   // gpu_mlp.py: loss scale")
    m = re.search(r"void InterlockedAddF16Emulated\([^)]*\)\s*\{", src)
    if not m:
        return src
    i, depth = m.end(), 1
    while depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return src[: m.start()] + NATIVE_ADD + src[i:]


COMPILE_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import slangjit as spy
t1 = time.perf_counter()
dev = spy.create_device(type=spy.DeviceType.cuda)
t2 = time.perf_counter()
ks, tim = [], {}
for e in ("learnGradient", "adjustParameters"):
    k = dev.create_compute_kernel(dev.load_program(sys.argv[1], [e]))
    ks.append(k)
    for key, v in k.timings.items():
        tim[key] = tim.get(key, 0.0) + float(v)
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "device": t2 - t1, "ready": t3 - t2, "timings": tim}))
"""


def compile_times(shader: str):
    cache = tempfile.mkdtemp(prefix="sj-mlp-cache-")
    env = dict(os.environ, SLANGJIT_CACHE_DIR=cache)
    # A user's Python caches bytecode; an image that sets PYTHONDONTWRITEBYTECODE would add the
    # re-compilation of slangjit's own modules to every new process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", COMPILE_CHILD, shader], env=env, capture_output=True, text=True,
                           timeout=300)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def torch_mlp(torch, params16: np.ndarray, layers):
    P = torch.from_numpy(params16).cuda()
    ps = []
    for w, b, n_in, n_out in layers:
        ps.append(P[w:b].view(n_out, n_in).clone().requires_grad_())
        ps.append(P[b:b + n_out].clone().requires_grad_())
    F = torch.nn.functional

    def loss_fn(xy, W1, b1, W2, b2):
        x, y = xy[:, 0], xy[:, 1]
        enc = torch.stack([x, y, x * x, y * y], dim=1)
        h = F.leaky_relu(enc @ W1.t() + b1, 0.01)
        o = F.leaky_relu(h @ W2.t() + b2, 0.01)
        gt = torch.stack([(x + y) / (1 + y * y), 2 * x + y, 0.5 * x * x + 1.2 * y, x + 0.5 * y * y], dim=1)
        d = o - gt
        return (d * d).sum()
    return ps, loss_fn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-log2", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    import train as T
    B = 1 << args.batch_log2
    lr = 1e-6
    src = patched_source()
    tmpd = tempfile.mkdtemp(prefix="sj-mlp-")
    shader = os.path.join(tmpd, "mlp_native_add.slang")
    Path(shader).write_text(src)

    # cold compile / warm load in new processes
    try:
        cold, warm = compile_times(shader)
        ct = cold["timings"]
        print(f"cold (empty cache, new process): load_program + create_compute_kernel x2 = {cold['ready'] * 1e3:.0f} ms "
              f"(front end {sum(v for k, v in ct.items() if k not in ('nvrtc', 'cache_hit', 'load', 'cubin_lookup')) * 1e3:.0f} ms, "
              f"NVRTC {ct.get('nvrtc', 0) * 1e3:.0f} ms, module load {ct.get('load', 0) * 1e3:.1f} ms); "
              f"import slangjit {cold['import'] * 1e3:.0f} ms, device {cold['device'] * 1e3:.0f} ms")
        print(f"warm (disk caches, new process): load_program + create_compute_kernel x2 = {warm['ready'] * 1e3:.1f} ms "
              f"(timings {json.dumps({k: round(v * 1e3, 2) for k, v in warm['timings'].items() if k != 'cache_hit'})} ms)")
    except Exception as e:  # noqa: BLE001
        cold = warm = None
        print(f"compile-time measurement failed: {e}")

    dev = spy.create_device(type=spy.DeviceType.cuda)
    T.SHADER = Path(shader)
    params = T.init_parameters(2)
    layers, count = T.parameter_layout()
    rng = np.random.default_rng(2)
    xy = rng.uniform(-1, 1, (B, 2)).astype(np.float32)

    # gradient check at a batch small enough for half sums
    Bc = 1 << 12
    tr = T.MLPTrainer(dev, params, Bc, max_steps=1)
    tr.set_inputs(xy[:Bc])
    tr.learn_gradient(0, Bc, 0)
    g_sj = tr.read_grads().astype(np.float64) / LOSS_SCALE

    tr = T.MLPTrainer(dev, params, B, max_steps=args.steps + 4)
    tr.set_inputs(xy)
    ctx = dev._ctx
    d = ctx.d
    e0, e1 = _ck(d.cuEventCreate(0), "ev"), _ck(d.cuEventCreate(0), "ev")

    def sj_step(slot):
        tr.learn_gradient(0, B, slot)
        tr.adjust_parameters(lr)
    for s in range(3):
        sj_step(s)
    dev.wait()
    _ck(d.cuEventRecord(e0, ctx.stream), "rec")
    for s in range(args.steps):
        sj_step(3 + s)
    _ck(d.cuEventRecord(e1, ctx.stream), "rec")
    _ck(d.cuEventSynchronize(e1), "sync")
    sj_ms = float(_ck(_elapsed(d)(e0, e1), "el")) / args.steps
    p_after, g_after = tr.read_params(), tr.read_grads()
    losses = tr.read_losses(args.steps + 3)[0]
    finite = bool(np.isfinite(p_after).all() and np.isfinite(g_after).all() and np.isfinite(losses).all())
    print(f"slangjit after {args.steps + 3} steps: parameters, gradients and losses finite: {finite}; batch loss "
          f"{losses[0]:.4g} -> {losses[-1]:.4g}")
    if not finite:
        raise SystemExit("gpu_mlp: non-finite values in the timed steps: the timing would not be a real step's")
    # learnGradient alone
    _ck(d.cuEventRecord(e0, ctx.stream), "rec")
    for s in range(args.steps):
        tr.learn_gradient(0, B, 0)
    _ck(d.cuEventRecord(e1, ctx.stream), "rec")
    _ck(d.cuEventSynchronize(e1), "sync")
    sj_learn = float(_ck(_elapsed(d)(e0, e1), "el")) / args.steps
    print(f"slangjit: batch 2^{args.batch_log2}: {sj_ms:.3f} ms per training step (learnGradient {sj_learn:.3f} ms)")

    res = {}
    note = ""
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch without CUDA")
        xyt = torch.from_numpy(xy).cuda().half()
        # gradient check (float64 reference of the same network on the same half parameters)
        ps64, lf = torch_mlp(torch, params.astype(np.float16), layers)
        ps64 = [p.detach().double().requires_grad_() for p in ps64]
        lf(xyt[:Bc].double(), *ps64).backward()
        g_ref = np.concatenate([np.concatenate([ps64[2 * i].grad.cpu().numpy().ravel(),
                                                ps64[2 * i + 1].grad.cpu().numpy().ravel()])
                                for i in range(len(layers))])
        rel = float(np.linalg.norm(g_sj - g_ref) / np.linalg.norm(g_ref))
        print(f"gradients of one step at batch 2^12 vs a float64 PyTorch reference: relative error {rel:.2e}")

        def make_step(fn):
            ps, _ = torch_mlp(torch, params.astype(np.float16), layers)

            def step():
                loss = fn(xyt, *ps) * LOSS_SCALE
                loss.backward()
                with torch.no_grad():
                    grads = [p.grad for p in ps]
                    torch._foreach_add_(ps, grads, alpha=-lr)
                    for p in ps:
                        p.grad = None
            step.params = ps
            return step

        def ttime(step, warm=3):
            for _ in range(warm):
                step()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(args.steps):
                step()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / args.steps
        eager_step = make_step(lf)
        res["eager"] = ttime(eager_step)
        if not all(bool(torch.isfinite(p).all()) for p in eager_step.params):
            raise SystemExit("gpu_mlp: PyTorch's parameters went non-finite in the timed steps")
        if not args.no_compile:
            try:
                t0 = time.perf_counter()
                step = make_step(torch.compile(lf))
                step()
                torch.cuda.synchronize()
                note = f"torch.compile first step {time.perf_counter() - t0:.1f} s"
                res["compile"] = ttime(step)
            except Exception as e:  # noqa: BLE001
                note = f"torch.compile failed: {type(e).__name__}: {str(e)[:200]}"
        print(f"torch {torch.__version__}: " + ", ".join(f"{k} {v:.3f} ms/step" for k, v in res.items()) +
              (f"; {note}" if note else ""))
    except ImportError as e:
        print(f"PyTorch not available ({e}): no comparison")

    print()
    print(f"| batch 2^{args.batch_log2} training step | ms/step | slangjit speed-up |")
    print("|---|---:|---:|")
    print(f"| slangjit (CUDA) | {sj_ms:.3f} | 1.00x |")
    for k, v in res.items():
        print(f"| PyTorch {k} | {v:.3f} | {v / sj_ms:.1f}x |")
    summary = f"mlp step {sj_ms:.3f} ms"
    for k, v in res.items():
        summary += f"; torch {k} {v:.3f} ms ({v / sj_ms:.1f}x)"
    if cold:
        summary += f"; cold {cold['ready'] * 1e3:.0f} ms, warm {warm['ready'] * 1e3:.1f} ms"
    print(summary)


if __name__ == "__main__":
    main()
