"""The seed 002 MLP training step (examples/mlp_training) at batch 2^16 on the CPU device, beside PyTorch
eager, torch.compile and JAX (jit) on the same number of threads when they are installed, plus the cold
compile / cache hit of the MLP module in new processes.

    python benchmarks/cpu_mlp.py [--batch-log2 16] [--steps 10] [--no-compile] [--example-only]

Like benchmarks/gpu_mlp.py, the kernel is the example's mlp.slang with its InterlockedAddF16Emulated body
swapped for a native `InterlockedAdd(*dest, value)` and the bwd_diff seed scaled by 2^-6 (gpu_mlp.py
patched_source: the half gradient sums of 2^16+ samples overflow half otherwise).  The example's own
source (compare-exchange loop) is timed too (`example CAS`).  Gradients of one step at batch 2^12 are
compared with a float64 numpy reference of the same network (relative error).  Threads:
$SLANGJIT_NUM_THREADS / os.cpu_count(); PyTorch gets torch.set_num_threads(same), JAX runs with its
default (all cores).  Nothing is asserted about time; the last line is a one-line summary.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "mlp_training"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import slangjit as spy  # noqa: E402
from slangjit.runtime.cpu import num_threads  # noqa: E402
from slangjit.runtime.cpu_pool import native_ready  # noqa: E402

LOSS_SCALE = 2.0 ** -6
_SEED_CALL = "bwd_diff(loss)(network, input.x, input.y, 1.0h);"
NATIVE_ADD = """void InterlockedAddF16Emulated(NFloat* dest, NFloat value, out NFloat originalValue)
{
    originalValue = NFloat(0);
    InterlockedAdd(*dest, value);   // cpu_mlp.py: native half atomic add
}
"""


def patched_source(native_add: bool = True) -> str:
    import re
    src = (ROOT / "examples" / "mlp_training" / "mlp.slang").read_text()
    assert _SEED_CALL in src, "the example's bwd_diff call changed: update cpu_mlp.py"
    src = src.replace(_SEED_CALL, f"bwd_diff(loss)(network, input.x, input.y, {LOSS_SCALE!r}h);   // loss scale")
    if not native_add:
        return src
    m = re.search(r"void InterlockedAddF16Emulated\([^)]*\)\s*\{", src)
    i, depth = m.end(), 1
    while depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return src[: m.start()] + NATIVE_ADD + src[i:]


COMPILE_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import slangjit as spy
t1 = time.perf_counter()
c1 = os.times()
dev = spy.create_device(type=spy.DeviceType.cpu)
t2 = time.perf_counter()
tim = {}
kernels = [dev.create_compute_kernel(dev.load_program(sys.argv[1], [e])) for e in ("learnGradient", "adjustParameters")]
t_created = time.perf_counter()
for k in kernels:       # the libraries (the C++ builds run in the background since load_program): dispatchable
    k.library
    for key, v in k.timings.items():
        tim[key] = tim.get(key, 0.0) + float(v)
t3 = time.perf_counter()
c3 = os.times()
cpu = (c3.user + c3.system + c3.children_user + c3.children_system) - (c1.user + c1.system + c1.children_user + c1.children_system)
print(json.dumps({"import": t1 - t0, "device": t2 - t1, "created": t_created - t2, "ready": t3 - t2, "cpu": cpu,
                  "timings": tim}))
"""


def compile_times(shader: str):
    """New processes on one fresh cache: cold (empty cache), cache hit, then two more modules that differ
    from the first in a constant (new front end and C++ builds, same prelude): the first of them makes the
    precompiled prelude (runtime/cpu_compiler.py, at a prefix's second build), the second uses it.
    "ready" = both kernels' libraries loaded (import and device creation excluded); "cpu" = the process's
    and its compiler processes' CPU time over the same span."""
    cache = tempfile.mkdtemp(prefix="sj-cpumlp-cache-")
    env = dict(os.environ, SLANGJIT_CACHE_DIR=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    src = Path(shader).read_text()
    lit = f"{LOSS_SCALE!r}h"
    assert lit in src
    variants = [shader, shader]
    for scale in (LOSS_SCALE / 2, LOSS_SCALE / 4):
        v = shader.replace(".slang", f"_{int(1 / scale)}.slang")
        Path(v).write_text(src.replace(lit, f"{scale!r}h"))
        variants.append(v)
    out = []
    for path in variants:
        r = subprocess.run([sys.executable, "-c", COMPILE_CHILD, path], env=env, capture_output=True, text=True,
                           timeout=600)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def reference_grads(params16, layers, xy) -> np.ndarray:
    """d(sum of squared errors)/d(parameters) in float64 (numpy, hand-written backward)."""
    p = params16.astype(np.float64)
    x, y = xy[:, 0].astype(np.float16).astype(np.float64), xy[:, 1].astype(np.float16).astype(np.float64)
    (w1, b1, i1, o1), (w2, b2, i2, o2) = layers
    W1, B1 = p[w1:b1].reshape(o1, i1), p[b1:b1 + o1]
    W2, B2 = p[w2:b2].reshape(o2, i2), p[b2:b2 + o2]
    enc = np.stack([x, y, x * x, y * y], 1)
    z1 = enc @ W1.T + B1
    h = np.where(z1 < 0, 0.01 * z1, z1)
    z2 = h @ W2.T + B2
    o = np.where(z2 < 0, 0.01 * z2, z2)
    gt = np.stack([(x + y) / (1 + y * y), 2 * x + y, 0.5 * x * x + 1.2 * y, x + 0.5 * y * y], 1)
    do = 2 * (o - gt)
    dz2 = do * np.where(z2 < 0, 0.01, 1.0)
    gW2, gB2 = dz2.T @ h, dz2.sum(0)
    dz1 = (dz2 @ W2) * np.where(z1 < 0, 0.01, 1.0)
    gW1, gB1 = dz1.T @ enc, dz1.sum(0)
    return np.concatenate([gW1.ravel(), gB1, gW2.ravel(), gB2])


CPU_MS: dict = {}      # name -> process CPU time per step (all threads, the timed loop's total / steps), ms


def med(fn, steps: int, warm: int = 2, name: str = "") -> float:
    for _ in range(warm):
        fn()
    ts = []
    c0 = time.process_time()
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    if name:
        # CPU over the whole loop, not a median of per-step differences: the kernel clock of a thread that runs
        # without a context switch (a spinning pool worker) advances at scheduler ticks only, so a 1 ms step's
        # difference misses the other threads' time
        CPU_MS[name] = (time.process_time() - c0) / steps * 1e3
    return statistics.median(ts) * 1e3


def slangjit_step(T, shader, params, xy, B, steps, lr, keep=None):
    dev = spy.create_device(type=spy.DeviceType.cpu)
    T.SHADER = Path(shader)
    tr = T.MLPTrainer(dev, params, B, max_steps=steps + 8)
    tr.set_inputs(xy)
    native_ready(wait=True, timeout=120)   # time the steady state: the native pool's library, built once per cache
    slot = [0]

    def step():
        tr.learn_gradient(0, B, slot[0] % (steps + 8))
        tr.adjust_parameters(lr)
        slot[0] += 1
    ms = med(step, steps, name=str(shader))
    learn = med(lambda: tr.learn_gradient(0, B, 0), steps)
    if keep is not None:
        keep["slangjit"] = step
    finite = bool(np.isfinite(tr.read_params()).all())
    return ms, learn, finite


def slangjit_grads(T, shader, params, xy):
    dev = spy.create_device(type=spy.DeviceType.cpu)
    T.SHADER = Path(shader)
    tr = T.MLPTrainer(dev, params, len(xy), max_steps=1)
    tr.set_inputs(xy)
    tr.learn_gradient(0, len(xy), 0)
    return tr.read_grads().astype(np.float64) / LOSS_SCALE


def torch_times(params16, layers, xy, steps, lr, nthreads, use_compile):
    import torch
    torch.set_num_threads(nthreads)
    F = torch.nn.functional
    xyt = torch.from_numpy(xy).half()

    def loss_fn(xy, W1, b1, W2, b2):
        x, y = xy[:, 0], xy[:, 1]
        enc = torch.stack([x, y, x * x, y * y], dim=1)
        h = F.leaky_relu(enc @ W1.t() + b1, 0.01)
        o = F.leaky_relu(h @ W2.t() + b2, 0.01)
        gt = torch.stack([(x + y) / (1 + y * y), 2 * x + y, 0.5 * x * x + 1.2 * y, x + 0.5 * y * y], dim=1)
        d = o - gt
        return (d * d).sum()

    def make(fn):
        P = torch.from_numpy(params16.copy())
        ps = []
        for w, b, n_in, n_out in layers:
            ps.append(P[w:b].view(n_out, n_in).clone().requires_grad_())
            ps.append(P[b:b + n_out].clone().requires_grad_())

        def step():
            loss = fn(xyt, *ps) * LOSS_SCALE
            loss.backward()
            with torch.no_grad():
                torch._foreach_add_(ps, [p.grad for p in ps], alpha=-lr)
                for p in ps:
                    p.grad = None
        return step
    res = {"PyTorch eager": med(make(loss_fn), steps, name="PyTorch eager")}
    note = ""
    if use_compile:
        try:
            t0 = time.perf_counter()
            st = make(torch.compile(loss_fn))
            st()
            note = f"torch.compile first step {time.perf_counter() - t0:.1f} s"
            res["torch.compile"] = med(st, steps, name="torch.compile")
        except Exception as e:  # noqa: BLE001
            note = f"torch.compile failed: {type(e).__name__}: {str(e)[:200]}"
    return res, f"torch {torch.__version__}" + (f" ({note})" if note else "")


def jax_time(params16, layers, xy, steps, lr, keep=None):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")        # the CPU backend: on a GPU machine JAX would use the GPU
    import jax
    import jax.numpy as jnp
    P = jnp.asarray(params16)
    ps = []
    for w, b, n_in, n_out in layers:
        ps += [P[w:b].reshape(n_out, n_in), P[b:b + n_out]]
    xyj = jnp.asarray(xy).astype(jnp.float16)

    def loss_fn(ps, xy):
        W1, b1, W2, b2 = ps
        x, y = xy[:, 0], xy[:, 1]
        enc = jnp.stack([x, y, x * x, y * y], axis=1)
        h = jax.nn.leaky_relu(enc @ W1.T + b1, 0.01)
        o = jax.nn.leaky_relu(h @ W2.T + b2, 0.01)
        gt = jnp.stack([(x + y) / (1 + y * y), 2 * x + y, 0.5 * x * x + 1.2 * y, x + 0.5 * y * y], axis=1)
        d = o - gt
        return (d * d).sum() * LOSS_SCALE

    @jax.jit
    def step(ps, xy):
        g = jax.grad(loss_fn)(ps, xy)
        return [p - lr * gi for p, gi in zip(ps, g)]
    state = [ps]

    def run():
        state[0] = step(state[0], xyj)
        jax.block_until_ready(state[0])
    if keep is not None:
        keep["JAX jit"] = run
    return med(run, steps, warm=3, name="JAX jit"), f"jax {jax.__version__}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-log2", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--no-cold", action="store_true", help="skip the compile-time measurement")
    ap.add_argument("--no-example", action="store_true", help="skip timing the example's CAS source")
    ap.add_argument("--rounds", type=int, default=3,
                    help="then time slangjit and JAX jit again, alternately, this many rounds (JAX's own step "
                         "varies from run to run on a small machine): each round's ratio and their median")
    args = ap.parse_args()
    import train as T
    B = 1 << args.batch_log2
    lr = 1e-6
    nthreads = num_threads()
    tmpd = tempfile.mkdtemp(prefix="sj-cpumlp-")
    shader = os.path.join(tmpd, "mlp_native_add.slang")
    Path(shader).write_text(patched_source(True))
    example = os.path.join(tmpd, "mlp_cas.slang")
    Path(example).write_text(patched_source(False))
    print(f"CPU: {os.cpu_count()} logical cores, slangjit threads {nthreads}")

    cold = warm = None
    if not args.no_cold:
        try:
            cold, warm, pch_made, pch_used = compile_times(shader)
            print(f"cold (empty cache, new process): load_program + create_compute_kernel x2 -> libraries loaded = "
                  f"{cold['ready'] * 1e3:.0f} ms wall, {cold['cpu'] * 1e3:.0f} ms CPU incl. the compiler "
                  f"(C++ compiler {cold['timings'].get('cxx', 0) * 1e3:.0f} ms, summed over the two parallel builds); "
                  f"import slangjit {cold['import'] * 1e3:.0f} ms (not included)")
            print(f"cache hit (new process): the same = {warm['ready'] * 1e3:.1f} ms wall")
            print(f"cold module, prelude precompiled in this cache: {pch_used['ready'] * 1e3:.0f} ms wall, "
                  f"{pch_used['cpu'] * 1e3:.0f} ms CPU (the module before, which made the header: "
                  f"{pch_made['ready'] * 1e3:.0f} ms wall, {pch_made['cpu'] * 1e3:.0f} ms CPU)")
        except Exception as e:  # noqa: BLE001
            print(f"compile-time measurement failed: {e}")

    params = T.init_parameters(2)
    layers, count = T.parameter_layout()
    rng = np.random.default_rng(2)
    xy = rng.uniform(-1, 1, (B, 2)).astype(np.float32)

    Bc = 1 << 12
    g_ref = reference_grads(params, layers, xy[:Bc])
    g_sj = slangjit_grads(T, shader, params, xy[:Bc])
    rel = float(np.linalg.norm(g_sj - g_ref) / np.linalg.norm(g_ref))
    print(f"gradients of one step at batch 2^12 vs a float64 reference: relative error {rel:.2e}")

    res = {}
    keep: dict = {}
    ms, learn, finite = slangjit_step(T, shader, params, xy, B, args.steps, lr, keep)
    res["slangjit"] = ms
    CPU_MS["slangjit"] = CPU_MS.pop(shader, float("nan"))
    print(f"slangjit: {ms:.2f} ms/step (learnGradient {learn:.2f} ms); parameters finite: {finite}")
    if not args.no_example:
        ms_cas, _, _ = slangjit_step(T, example, params, xy, B, max(2, args.steps // 3), lr)
        res["slangjit, example CAS add"] = ms_cas
        CPU_MS["slangjit, example CAS add"] = CPU_MS.pop(example, float("nan"))
    notes = []
    try:
        r, note = torch_times(params, layers, xy, args.steps, lr, nthreads, not args.no_compile)
        res.update(r)
        notes.append(note)
    except ImportError as e:
        notes.append(f"PyTorch not available ({e})")
    try:
        t, note = jax_time(params, layers, xy, args.steps, lr, keep)
        res["JAX jit"] = t
        notes.append(note)
    except ImportError as e:
        notes.append(f"JAX not available ({e})")
    print("; ".join(notes))
    print()
    sj = res["slangjit"]
    sjc = CPU_MS.get("slangjit", float("nan"))
    print(f"| batch 2^{args.batch_log2} training step, {nthreads} threads | ms/step | vs slangjit | process CPU ms/step | vs slangjit |")
    print("|---|---:|---:|---:|---:|")
    for k, v in res.items():
        c = CPU_MS.get(k, float("nan"))
        print(f"| {k} | {v:.2f} | {v / sj:.2f}x | {c:.2f} | {c / sjc:.2f}x |")
    others = {k: v for k, v in res.items() if not k.startswith("slangjit")}
    summary = f"mlp step {sj:.2f} ms, grad rel err {rel:.1e}"
    if others:
        k = min(others, key=others.get)
        summary += f"; fastest other {k} {others[k]:.2f} ms ({others[k] / sj:.2f}x)"
    oc = {k: CPU_MS[k] for k in others if k in CPU_MS}
    if oc:
        k = min(oc, key=oc.get)
        summary += f"; process CPU {sjc:.2f} ms/step, least of the others {k} {oc[k]:.2f} ms ({oc[k] / sjc:.2f}x)"
    if cold:
        summary += f"; cold {cold['ready'] * 1e3:.0f} ms, cache hit {warm['ready'] * 1e3:.1f} ms"
    if args.rounds > 0 and len(keep) == 2:
        ratios = []
        print()
        print(f"alternating rounds ({args.steps} steps each, median ms/step):")
        for r in range(args.rounds):
            a = med(keep["slangjit"], args.steps)
            b = med(keep["JAX jit"], args.steps)
            ratios.append(b / a)
            print(f"  round {r + 1}: slangjit {a:.2f} ms, JAX jit {b:.2f} ms: {b / a:.2f}x")
        summary += (f"; alternating rounds vs JAX jit: median {statistics.median(ratios):.2f}x "
                    f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")
    print(summary)


if __name__ == "__main__":
    main()
