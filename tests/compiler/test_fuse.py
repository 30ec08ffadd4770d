"""Inlining, value reuse and dead-code removal (passes/inline_calls.py, passes/value_numbering.py,
passes/dead_code.py): what CudaOptions.fuse_coarse does to coarsened CUDA kernels.

Without a GPU: the seed MLP's learnGradient, fused, evaluates each layer once (the replays of
reverse mode, evalBwd's recomputation and the loss monitor's second loss() all reuse the first
evaluation) and keeps no reverse-mode iteration stack; without the switch it evaluates them several
times.  The passes' semantics are checked on the CPU (PipelineOptions.fuse_entries applies them to
every entry point): memory writes stop reuse of loads and readonly calls, out/inout parameters,
loops with exits, dead loops, and the MLP's gradients bit for bit.  (The whole CPU suite and the
conformance suites also passed with every entry fused, RESULTS.md session 6.)  With a GPU: the fused MLP's gradients
equal the unfused kernel's bit for bit."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import PipelineOptions

from cuda_kernels import mlp_native_add as _mlp_native_add, nvrtc_ptx as _nvrtc_ptx, slots as _slots   # tests/helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _entry_body(src: str, name: str) -> str:
    m = re.search(r"static __device__ __forceinline__ void " + name + r"_\d+\([^;{]*\)\n\{\n(.*?)\n\}\n", src, re.S)
    assert m, name
    return m.group(1)


@pytest.fixture
def fresh_caches(monkeypatch, tmp_path):
    from slangjit.compiler import frontend_cache
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path))
    frontend_cache._memory.clear()
    yield
    frontend_cache._memory.clear()


@pytest.mark.parametrize("fuse", [True, False])
def test_mlp_learn_gradient_evaluates_each_layer_once(fuse, monkeypatch, fresh_caches):
    prog = compile_program([SourceSpec(text=_mlp_native_add(), name="mlp.slang")], ["learnGradient"], target="cuda",
                           options=PipelineOptions().with_cuda(fuse_coarse=fuse))
    assert _slots(prog, "learnGradient") == 149               # the same slots either way
    body = _entry_body(prog.source, "learnGradient")
    layer1 = len(re.findall(r"FeedForwardLayer_4_16__eval_\d+\(", body))
    layer2 = len(re.findall(r"FeedForwardLayer_16_4__eval_\d+\(", body))
    if fuse:
        assert (layer1, layer2) == (1, 1)
        assert "stk" not in body and "sj::dot" in body and body.count("sj::dot") == 1
    else:
        assert layer1 == 0 and "bwd_loss" in body              # not inlined: the calls stay calls
    assert b".entry sj_entry_learnGradient" in _nvrtc_ptx(prog.source)


# ----------------------------------------------------------------------------------------- CPU semantics

@pytest.fixture
def fused_cpu(monkeypatch, fresh_caches):
    """Every CPU entry point inlined, value-reused and dead-code-pruned (PipelineOptions.fuse_entries)."""
    import slangjit as spy
    return spy.create_device(type=spy.DeviceType.cpu, compile_options=PipelineOptions(fuse_entries=True))


def _run_cpu(dev, tmp_path, text, n, **bufs):
    import slangjit as spy
    p = tmp_path / "k.slang"
    p.write_text(text)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    made = {name: dev.create_buffer(size=a.nbytes, usage=UA, data=a) for name, a in bufs.items()}
    k.dispatch([n, 1, 1], **{name: b.device_address for name, b in made.items()})
    return {name: b.to_numpy().view(bufs[name].dtype) for name, b in made.items()}


WRITES_KERNEL = r"""
float sumFirst(float* p, int n) { float s = 0.0; for (int i = 0; i < n; i++) s += p[i]; return s; }
float twice(float* p) { return p[1] * 2.0; }
[numthreads(1, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* buf, uniform float* outp)
{
    float a = sumFirst(buf, 2);
    float a2 = sumFirst(buf, 2);     // reused
    buf[0] = 10.0;
    float b = sumFirst(buf, 2);      // after a write: computed again
    float c = twice(buf);
    buf[1] = 5.0;
    float d = twice(buf);
    float e = buf[1] * 3.0;
    InterlockedAdd(buf[1], 1.0);     // an add is a write here (nothing is deferred on the CPU)
    float f = buf[1] * 3.0;
    outp[0] = a; outp[1] = a2; outp[2] = b; outp[3] = c; outp[4] = d; outp[5] = e; outp[6] = f;
}
"""


def test_memory_writes_stop_reuse(fused_cpu, tmp_path):
    got = _run_cpu(fused_cpu, tmp_path, WRITES_KERNEL, 1, buf=np.array([1, 2], np.float32),
                   outp=np.zeros(7, np.float32))
    np.testing.assert_array_equal(got["outp"], [3, 3, 12, 4, 10, 15, 18])


OUT_PARAMS_KERNEL = r"""
void split(float x, out float hi, inout float acc) { hi = x * 2.0; acc += hi; }
struct Pair { float a; float b; };
void swapIn(inout Pair p) { float t = p.a; p.a = p.b; p.b = t; }
float firstAbove(float* p, int n, float limit)
{
    float r = -1.0;
    for (int i = 0; i < n; i++) { if (p[i] > limit) { r = p[i]; break; } }
    return r;
}
[numthreads(4, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* buf, uniform float* outp)
{
    float acc = 1.0;
    float hi;
    split(float(t.x), hi, acc);
    split(hi, hi, acc);                  // the same local as in and out argument
    Pair p = { hi, acc };
    swapIn(p);
    float unused = 0.0;
    for (int k = 0; k < 8; k++) unused += buf[k % 4] * float(k);    // dead: dropped
    outp[t.x * 4 + 0] = p.a;
    outp[t.x * 4 + 1] = p.b;
    outp[t.x * 4 + 2] = firstAbove(buf, 4, float(t.x));
    outp[t.x * 4 + 3] = firstAbove(buf, 4, float(t.x));
}
"""


def test_out_params_exits_and_dead_loops(fused_cpu, tmp_path):
    got = _run_cpu(fused_cpu, tmp_path, OUT_PARAMS_KERNEL, 4, buf=np.array([0.5, 3, 1, 2.5], np.float32),
                   outp=np.zeros(16, np.float32))
    want = []
    for x in range(4):
        hi, acc = 2.0 * x, 1.0 + 2.0 * x
        hi2 = 2.0 * hi
        acc += hi2
        above = next((v for v in [0.5, 3, 1, 2.5] if v > x), -1.0)
        want += [acc, hi2, above, above]
    np.testing.assert_array_equal(got["outp"], np.array(want, np.float32))


def test_fused_cpu_source_drops_the_dead_loop(monkeypatch, fresh_caches):
    prog = compile_program([SourceSpec(text=OUT_PARAMS_KERNEL, name="k.slang")], ["computeMain"], target="cpp",
                           options=PipelineOptions(fuse_entries=True))
    assert "unused_" not in prog.source
    assert re.search(r"p_\d+\.a = ", prog.source) or "swapIn" not in prog.source   # swapIn inlined


def test_wave_and_atomic_intrinsics_are_never_reused():
    from slangjit.compiler import types as T
    from slangjit.compiler.ir import nodes as ir
    from slangjit.compiler.passes.effects import effect_intrinsic
    x = ir.Const(T.FLOAT, 1.0)
    for name in ("sj::WaveActiveSum", "sj::WaveReadLaneFirst", "sj::InterlockedAdd", "sj::GroupMemoryBarrier"):
        assert effect_intrinsic(ir.Intrinsic(T.FLOAT, name, [x]))
    assert not effect_intrinsic(ir.Intrinsic(T.FLOAT, "sj::sin", [x]))


def _mlp_grads_fused_and_not(monkeypatch, tmp_path, options, device_type: str, B: int, seed: int):
    """The MLP's gradient buffer (half bits) after one learnGradient over B samples, with the fusion
    option off and on (`options(fuse)`: the device's PipelineOptions; fresh caches for each)."""
    import sys
    import slangjit as spy
    from slangjit.compiler import frontend_cache
    sys.path.insert(0, os.path.join(ROOT, "examples", "mlp_training"))
    try:
        import train as T
    finally:
        sys.path.pop(0)
    path = tmp_path / "mlp_native.slang"
    path.write_text(_mlp_native_add())
    monkeypatch.setattr(T, "SHADER", str(path))
    xy = np.random.default_rng(seed).uniform(-1, 1, (B, 2)).astype(np.float32)
    results = []
    try:
        for fuse in (False, True):
            monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / f"cache{fuse}"))
            frontend_cache._memory.clear()
            dev = spy.create_device(type=getattr(spy.DeviceType, device_type), compile_options=options(fuse))
            if device_type == "cuda":
                dev._ctx.modules.clear()        # loaded modules are cached per context by source hash
            tr = T.MLPTrainer(dev, T.init_parameters(seed), B, max_steps=1)
            assert device_type != "cuda" or tr.learn.entry.grid_stride
            tr.set_inputs(xy)
            tr.learn_gradient(0, B)
            results.append(tr.read_grads().view(np.uint16).copy())
    finally:
        frontend_cache._memory.clear()
    return results


def test_mlp_gradients_bitwise_equal_fused_on_cpu(monkeypatch, tmp_path):
    """The MLP's learnGradient on the CPU, fused and not: the same gradients bit for bit (the same
    operations in the same order, only not repeated)."""
    off, on = _mlp_grads_fused_and_not(monkeypatch, tmp_path, lambda f: PipelineOptions(fuse_entries=f), "cpu", 256, 5)
    np.testing.assert_array_equal(off, on)
    assert np.any(off != 0)


# ----------------------------------------------------------------------------------------- GPU

def test_fused_mlp_gradients_equal_unfused_on_gpu(monkeypatch, tmp_path):
    from slangjit.runtime import cuda as sj_cuda
    if not sj_cuda.is_available():
        pytest.skip("no usable CUDA GPU")
    off, on = _mlp_grads_fused_and_not(monkeypatch, tmp_path, lambda f: PipelineOptions().with_cuda(fuse_coarse=f),
                                       "cuda", 1 << 15, 7)
    np.testing.assert_array_equal(off, on)
    assert np.any(off != 0)
