"""Where the seed 002 MLP's learnGradient time goes on the GPU: the same kernel (benchmarks/gpu_mlp.py's
native-atomic variant) built several ways, timed side by side.

    python benchmarks/gpu_mlp_breakdown.py [--batch-log2 20] [--iters 20]

Variants (the product is unchanged; edits are applied to the generated CUDA just before NVRTC, or to the
pipeline options, passes/options.py CudaOptions):
  as built       coarsened: groups in turn per block; slot addresses proven invariant
                 (passes/slot_invariance.py), so each warp claims its slots' addresses once, then only adds;
                 tensor-core slots (every site is half): each add stores its half value in the warp's
                 stage in shared memory, one mma per 16 slots sums a turn's 32 lanes; at the end the
                 block's warps sum each slot in shared memory, each block writes its sums to the runtime's
                 scratch buffer and the last block adds each slot's total (one atomic per slot)
  not fused      the kernel's calls not inlined, nothing reused (CudaOptions.fuse_coarse off): reverse mode's
                 replays, evalBwd's recomputation and the loss monitor's loss() evaluate the layers again
  block flush    float register slots, one atomic per block and slot (GRID_FLUSH off; the next row drops
                 those atomics)
  per-warp flush float register slots, one atomic per warp and slot (session 4's design)
  register slots float register slots (CudaOptions.mma_slots off), grid flush
  loss sum not deferred
                 the loss monitor's lossSum.add stays an atomic per warp and turn (LOWER_ATOMIC_ADDS off)
  tensor-core slots, stage stores dropped / mma steps dropped
                 (timing only) each half of the tensor-core slots' work without the other
  stage cleared after every step
                 SKIP_COVERED_CLEARS off: the step clears the stage it summed (before session 7; the MLP's
                 finished logical threads write every slot, passes/slot_coverage.py, so the default skips it)
  loss max dropped / parameter loads dropped
                 (timing only) the loss monitor's lossBuffer.max; the layers' parameter loads (replaced by
                 arithmetic on the pointer)
  outer products as factor stores
                 (timing only) M + N stores per outer-product site instead of M x N products (what a
                 factored tensor-core accumulation would leave, less its extra mma steps)
  grid flush dropped / bodies dropped
                 (timing only) the kernel's end without the grid flush; every logical thread returning at once
                 (the group loop, tensor-core steps and flushes are what is left)
  checked adds   the proof turned off: every add checks its address against the warp's slot table
  registers, half2
                 two slots per __half2 register (half-precision sums per thread)
  shared-memory slots
                 the slots in dynamic shared memory, one column per thread (CudaOptions.shared_slots)
  2 blocks/SM    __launch_bounds__(256, 2): at most 128 registers per thread
  block cache    not coarsened (CudaOptions.max_slots = 0): warp sums into a per-block shared-memory
                 table (prelude red_add_fp with SJ_RED_CACHE)
  one accumulator
                 every gradient add into one register: the arithmetic stays, the slots go (with the loss
                 monitor's second loss(), wave reductions and atomics dropped as well in the next row)
  hand-fused learnGradient (source edit)
                 the seed's learnGradient rewritten by hand to evaluate the network once
                 (benchmarks/data/mlp_fused_learn.slang): what the fusion passes aim at
  two tensor-core stages / one tensor-core stage, 2 blocks/SM
                 MMA_STAGES = 2 (the default until session 7): a step sums the stage of the turn before
                 (twice the dynamic shared memory); MMA_MIN_BLOCKS = 2 asks for two blocks per SM (at most
                 128 registers per thread)
  adds dropped   every gradient add removed behind a branch that is never taken (NVRTC then reloads the
                 parameters after each: 78 registers)
Every timed learnGradient is followed by adjustParameters at learning rate 0 (clears the gradients, keeps
the parameters), so the gradient buffer never overflows to inf (benchmarks/gpu_mlp.py says why that matters).
Gradients of a 2^12 batch are compared with the as-built variant's (except where dropped).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "mlp_training"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import slangjit as spy  # noqa: E402
from slangjit.runtime import cuda_compiler  # noqa: E402
from slangjit.runtime.cuda import _ck  # noqa: E402

_RED = "template <class T> __device__ inline void red_add_fp(T* p, T v) {"
_CHECK = "if (tab[slot] == key || racc_take(tab + slot, p, T(v))) racc_put(acc, slot, v);"
_HALF = "#define SJ_RACC_HALF 1\n"
_RACC = "static_assert(sizeof(T) == 2 || sizeof(T) == 4, \"racc_add: half or float\");"
_DROP = " if (float(v) == 1.2345e30f) atomicAdd(p, T(v)); return;"   # keeps v live: the arithmetic stays


# name -> (edit of the generated CUDA, CudaOptions fields in upper case (+ SOURCE: an edit of the shader))
def _two_blocks(s: str) -> str:
    """__launch_bounds__(N, 2): at most 128 registers per thread, so two 256-thread blocks fit an SM."""
    return re.sub(r"__launch_bounds__\((\d+)\) sj_entry_learnGradient", r"__launch_bounds__(\1, 2) sj_entry_learnGradient", s)


_PUT_F = "template <class T> __device__ __forceinline__ void racc_put(racc_t* acc, int slot, T v) { acc[slot] += float(v); }"


def _one_sum(s: str) -> str:
    """Every gradient add into one register: the arithmetic stays, the 148 slots go."""
    assert _PUT_F in s
    return s.replace(_PUT_F, _PUT_F.replace("acc[slot]", "acc[0]"))


_MMA_PUT = "racc_store(acc, acc->stage + acc->cur + 64u * unsigned(slot)"
_MMA_STEP = "asm volatile(\"{ bar.warp.sync -1; mov.b32 %0, %1; }\" : \"=r\"(tok) : \"r\"(acc->tok) : \"memory\");\n"


def _mma_one_sum(s: str) -> str:
    """Tensor-core slots' adds into one register (no stage stores; the steps still run)."""
    assert _MMA_PUT in s
    return s.replace(_MMA_PUT, "acc->d[0][0] += float(v); if (0) " + _MMA_PUT)


def _mma_no_step(s: str) -> str:
    """Tensor-core slots without the per-turn mma step (the stage stores still happen)."""
    assert _MMA_STEP in s
    return s.replace(_MMA_STEP, _MMA_STEP + "    if (n > 0) { acc->tok = tok; return; }\n", 1)






def _no_loss_max(s: str) -> str:
    """(Timing only.) The loss monitor's same-address lossBuffer.max dropped (the wave reductions stay)."""
    s2 = re.sub(r"\n\s*\(\(\*lossBuffer_\d+\)\)\.max\(.*?;\n", "\n", s, count=1)
    assert s2 != s
    return s2


def _no_param_loads(s: str) -> str:
    """(Timing only: wrong values.) Every parameter load of the layers replaced by arithmetic on the pointer
    (uniform, no memory access): what the loads cost."""
    s2, n = re.subn(r"\b((?:matrix|bias)_\d+)\[(.*?)\]([ )])",
                    r"__ushort_as_half((unsigned short)(0x2000u + (((unsigned)(size_t)\1 >> 4) & 0x3ffu) + unsigned(\2)))\3",
                    s)
    assert n >= 4, n
    return s2


def _no_grid_flush(s: str) -> str:
    """(Timing only: no gradients.) The kernel ends without the grid flush (block sums, last block's adds)."""
    s2 = re.sub(r"\n    ::sj_cuda::racc_flush_grid\(.*?;\n", "\n", s, count=1)
    assert s2 != s
    return s2


def _no_body(s: str) -> str:
    """(Timing only: no gradients.) Every logical thread returns at once: what is left is the group loop,
    the per-turn tensor-core steps and the flushes."""
    s2 = re.sub(r"(\n(static __device__ __forceinline__ )?void learnGradient_\d+\([^)]*\)\n\{\n)",
                r"\1    if (sj_mode != 12345) return;\n", s, count=1)
    assert s2 != s
    return s2


def _factor_stores(s: str) -> str:
    """(Timing only: wrong sums.) Each outer-product site (slot = i * N + j, value = a[i] * b[j]) stores
    a[i] once per i and b[j] once per j instead of M x N products: the stores and multiplies a factored
    tensor-core accumulation would leave (its extra mma steps are not added)."""
    pat = re.compile(r"(sj::half (value_\d+) = )\((\w+\.data\[(i_\d+)\]) \* (\w+\.data\[(j_\d+)\])\);"
                     r"(\n\s*)(::sj_cuda::racc_add\()")
    s2, n = pat.subn(lambda m: f"{m[1]}({m[6]} == 0 ? {m[3]} : {m[5]});{m[7]}if (sj_mode != 2 || {m[6]} == 0 || "
                               f"{m[4]} == 0) {m[8]}", s)
    assert n == 2, n
    return s2


def _levers(s: str) -> str:
    return _no_param_loads(_no_loss_max(s))


_BLOCK_ADD = "        if (key != 0ull) racc_add_key(key, s);"


def _no_flush_atomics(s: str) -> str:
    """(Timing only: no gradients.) The block flush without its atomics (sums computed, never added)."""
    assert _BLOCK_ADD in s
    return s.replace(_BLOCK_ADD, "        if (key != 0ull && s == 1.2345e30f) racc_add_key(key, s);")


def fused_source(src: str) -> str:
    """The seed's learnGradient replaced by a hand-fused one: the forward pass once (no replays, no loss()
    recomputation), the same backward arithmetic and gradient adds.  What a perfect common-subexpression
    pass could reach; for comparison only."""
    from gpu_mlp import LOSS_SCALE
    start = src.index('[shader("compute")]')
    end = src.index('[shader("compute")]', start + 1)
    fused = (Path(__file__).resolve().parent / "data" / "mlp_fused_learn.slang").read_text()
    return src[:start] + fused.replace("SCALEh", f"{LOSS_SCALE!r}h") + "\n" + src[end:]


def _no_monitor(s: str) -> str:
    """learnGradient without its loss monitor (the second loss(), two wave reductions, two atomics)."""
    s2 = re.sub(r"\n    float thisLoss_\d+ = .*?\n    \}\n", "\n", s, count=1, flags=re.S)
    assert s2 != s
    return s2


VARIANTS = {
    "as built": (lambda s: s, {}),
    "not fused": (lambda s: s, {"FUSE_COARSE": False}),
    "block flush": (lambda s: s, {"GRID_FLUSH": False, "MMA_SLOTS": False}),
    "block flush, atomics dropped (no gradients)": (_no_flush_atomics, {"GRID_FLUSH": False, "MMA_SLOTS": False}),
    "per-warp flush": (lambda s: s, {"BLOCK_FLUSH_BYTES": 0, "MMA_SLOTS": False}),
    "register slots": (lambda s: s, {"MMA_SLOTS": False}),
    "loss sum not deferred": (lambda s: s, {"LOWER_ATOMIC_ADDS": False}),
    "tensor-core slots, stage stores dropped": (_mma_one_sum, {}),
    "tensor-core slots, mma steps dropped": (_mma_no_step, {}),
    "stage cleared after every step": (lambda s: s, {"SKIP_COVERED_CLEARS": False}),
    "loss max dropped": (_no_loss_max, {}),
    "parameter loads dropped": (_no_param_loads, {}),
    "loss max and parameter loads dropped": (_levers, {}),
    "grid flush dropped": (_no_grid_flush, {}),
    "outer products as factor stores": (_factor_stores, {}),
    "bodies dropped": (_no_body, {}),
    "checked adds": (lambda s: s, {"PROVE_SLOT_ADDRESSES": False, "MMA_SLOTS": False}),
    "registers, half2": (lambda s: _HALF + s, {"MMA_SLOTS": False}),
    "shared-memory slots": (lambda s: s, {"SHARED_SLOTS": True, "MMA_SLOTS": False}),
    "2 blocks/SM": (_two_blocks, {"MMA_SLOTS": False}),
    "block cache": (lambda s: s, {"MAX_SLOTS": 0, "MMA_SLOTS": False}),
    "one accumulator": (_one_sum, {"MMA_SLOTS": False, "LOWER_ATOMIC_ADDS": False}),
    "one accumulator, no loss monitor": (lambda s: _no_monitor(_one_sum(s)), {"MMA_SLOTS": False,
                                                                               "LOWER_ATOMIC_ADDS": False}),
    "hand-fused learnGradient (source edit)": (lambda s: s, {"SOURCE": fused_source}),
    "two tensor-core stages": (lambda s: s, {"MMA_STAGES": 2}),
    "one tensor-core stage, 2 blocks/SM": (lambda s: s, {"MMA_MIN_BLOCKS": 2}),
    "adds dropped": (lambda s: s.replace(_RED, _RED + _DROP).replace(_RACC, _RACC + _DROP), {"MMA_SLOTS": False}),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-log2", type=int, default=20)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="", help="variant names separated by ; (default: all)")
    args = ap.parse_args()
    import gpu_mlp
    import train as T
    B = 1 << args.batch_log2
    shader = Path(tempfile.mkdtemp(prefix="sj-mlpb-")) / "mlp_native_add.slang"
    shader.write_text(gpu_mlp.patched_source())
    T.SHADER = shader
    params = T.init_parameters(2)
    xy = np.random.default_rng(2).uniform(-1, 1, (B, 2)).astype(np.float32)
    real_compile = cuda_compiler.compile_source
    rows, ref = [], None
    from slangjit.compiler import frontend_cache
    from slangjit.compiler.passes.options import PipelineOptions
    wanted = [w.strip() for w in args.only.split(";") if w.strip()]
    for name, (edit, settings) in VARIANTS.items():
        if wanted and name not in wanted and name != "as built":
            continue
        cuda_compiler.compile_source = lambda src, arch="compute_90", nm="slangjit.cu", extra_options=(), _e=edit: \
            real_compile(_e(src) if "// slots: " in src else src, arch, nm, extra_options)
        options = PipelineOptions().with_cuda(**{k.lower(): v for k, v in settings.items() if k != "SOURCE"})
        shader.write_text(settings.get("SOURCE", lambda x: x)(gpu_mlp.patched_source()))
        cuda_compiler._mem_cache.clear()
        frontend_cache._memory.clear()
        os.environ["SLANGJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="sj-mlpb-cache-")
        dev = spy.create_device(type=spy.DeviceType.cuda, compile_options=options)
        dev._ctx.modules.clear()            # loaded modules are cached per context by source hash
        tr = T.MLPTrainer(dev, params, B, max_steps=args.iters + 4)
        tr.set_inputs(xy)
        ctx, d = dev._ctx, dev._ctx.d
        tr.learn_gradient(0, 1 << 12, 0)   # small enough that half gradient sums stay finite
        dev.wait()
        g = tr.read_grads().astype(np.float64)
        tr.adjust_parameters(0.0)           # clears the gradients
        e0, e1 = _ck(d.cuEventCreate(0), "ev"), _ck(d.cuEventCreate(0), "ev")
        # Each learnGradient is followed by adjustParameters at learning rate 0, which clears the
        # gradients (and leaves the parameters): a gradient buffer that had overflowed to inf would make
        # the adds into it cheaper than a real step's (2x in session 4).
        for s in range(3):
            tr.learn_gradient(0, B, 1 + s)
            tr.adjust_parameters(0.0)
        _ck(d.cuEventRecord(e0, ctx.stream), "rec")
        for s in range(args.iters):
            tr.learn_gradient(0, B, 0)
            tr.adjust_parameters(0.0)
        _ck(d.cuEventRecord(e1, ctx.stream), "rec")
        _ck(d.cuEventSynchronize(e1), "sync")
        el = getattr(d, "cuEventElapsedTime", None) or getattr(d, "cuEventElapsedTime_v2")
        ms = float(_ck(el(e0, e1), "el")) / args.iters
        if ref is None:
            ref = g
        rel = float(np.linalg.norm(g - ref) / max(np.linalg.norm(ref), 1e-30))
        rows.append((name, ms, rel))
        att = {}
        for key in ("NUM_REGS", "LOCAL_SIZE_BYTES", "SHARED_SIZE_BYTES"):
            enum = getattr(d.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{key}")
            att[key.split("_")[0].lower() if key != "NUM_REGS" else "regs"] = _ck(d.cuFuncGetAttribute(enum, tr.learn._fn), key)
        print(f"{name:24s} learnGradient {ms:.3f} ms   grads vs as-built: rel diff {rel:.2e}   {att}", flush=True)
    cuda_compiler.compile_source = real_compile
    print()
    print(f"| variant (batch 2^{args.batch_log2}) | learnGradient ms |")
    print("|---|---:|")
    for name, ms, _ in rows:
        print(f"| {name} | {ms:.3f} |")
    print("breakdown: " + ", ".join(f"{n} {ms:.3f} ms" for n, ms, _ in rows))


if __name__ == "__main__":
    main()
