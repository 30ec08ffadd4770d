"""The CUDA block cache for float adds whose result is unused (prelude red_add_fp, emit/cuda.py).

Without a GPU: which kernels the emitter gives the cache (not those with barriers or fences), and that
the generated CUDA compiles with NVRTC.  With a GPU: exact sums for uniform-address adds (the cached
path), overflowing the table (more distinct addresses than rows per block), mixed uniform and
per-thread addresses, half and float, and the same kernel with a barrier (uncached)."""
from __future__ import annotations

import numpy as np
import pytest

from slangjit.compiler import SourceSpec, compile_program

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")

from slangjit.runtime import cuda_compiler  # noqa: E402

# Thread i adds, for j < nparams, (i % 5) + (j % 8) into params[j] (one address per j for the whole
# warp: the cached path) and 1 into counts[i % 7] (lanes of a warp differ: warp aggregation).
# `hparams` does the same in half with small integers.  BARRIER is replaced by a group barrier to
# get the uncached variant.
KERNEL = r"""
RWStructuredBuffer<float> params;
RWStructuredBuffer<half> hparams;
RWStructuredBuffer<float> counts;
[numthreads(128, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint n, uniform uint nparams)
{
    uint i = tid.x;
    BARRIER
    if (i >= n) return;
    for (uint j = 0; j < nparams; j++)
        InterlockedAdd(params[j], float(i % 5) + float(j % 8));
    InterlockedAdd(hparams[(i / 64) % 2], half(1.0));
    InterlockedAdd(counts[i % 7], 1.0);
}
"""


def _source(barrier: bool) -> str:
    return KERNEL.replace("BARRIER", "GroupMemoryBarrierWithGroupSync();" if barrier else "")


@pytest.mark.parametrize("barrier", [False, True])
def test_emitter_chooses_block_cache(barrier):
    prog = compile_program([SourceSpec(text=_source(barrier), name="red.slang")], ["computeMain"], target="cuda")
    src = prog.source
    assert ("#define SJ_RED_CACHE 1" in src) is (not barrier)
    assert ("::sj_cuda::red_cache_begin();" in src) is (not barrier)
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    ptx, _ = cuda_compiler.compile_source(src, "compute_90")
    assert b".entry" in ptx
    assert (b".shared" in ptx) is (not barrier)      # the table lives in shared memory


UNIFORMITY_CASES = {
    # thread-uniform addresses: the cache is worth its setup
    "uniform pointer + loop counter": (True, """
struct Layer { float* w; float* g; };
void acc(float* p, float v) { InterlockedAdd(*p, v); }
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID, uniform Layer* L, uniform uint n)
{ for (uint j = 0; j < 4; j++) acc(L->g + j, L->w[j] * float(t.x)); }"""),
    "uniform buffer element": (True, """RWStructuredBuffer<float> g;
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID) { if (t.x > 3) InterlockedAdd(g[2], 1.0); }"""),
    # per-thread addresses: scatter / per-element gradients do not get it
    "thread-id index": (False, """RWStructuredBuffer<float> g;
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID) { InterlockedAdd(g[t.x], 1.0); }"""),
    "index loaded at the thread id": (False, """RWStructuredBuffer<float> g; StructuredBuffer<uint> keys;
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID) { uint k = keys[t.x]; InterlockedAdd(g[k], 1.0); }"""),
    "assigned under a thread-dependent branch": (False, """RWStructuredBuffer<float> g;
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID)
{ uint k = 0; if (t.x % 2 == 0) k = 1; InterlockedAdd(g[k], 1.0); }"""),
    "pointer offset through a call": (False, """
void acc(float* p, uint i, float v) { InterlockedAdd(p[i], v); }
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g) { acc(g, t.x / 2, 1.0); }"""),
    "atomic counter result": (False, """RWStructuredBuffer<float> g; RWStructuredBuffer<uint> c;
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID)
{ uint slot; InterlockedAdd(c[0], 1u, slot); InterlockedAdd(g[slot], 1.0); }"""),
}


@pytest.mark.parametrize("case", list(UNIFORMITY_CASES))
def test_cache_only_for_thread_uniform_addresses(case):
    """Uniform adds are combined: in per-thread registers when the kernel can be coarsened (a counted
    loop gives the add static slots, test_cuda_coarse.py), else by the block cache."""
    want, text = UNIFORMITY_CASES[case]
    prog = compile_program([SourceSpec(text=text, name="u.slang")], ["computeMain"], target="cuda")
    coarse = prog.reflection.entry_points["computeMain"].grid_stride
    assert (coarse or "#define SJ_RED_CACHE 1" in prog.source) is want
    assert not (coarse and "#define SJ_RED_CACHE 1" in prog.source)    # all its uniform adds have slots


def test_mlp_example_gets_the_cache_and_poly_bwds_does_not(device):
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "examples", "mlp_training", "mlp.slang")
    text = open(path).read().replace("InterlockedCompareExchange(*word, expected, desired, seen);",
                                     "InterlockedCompareExchange(*word, expected, desired, seen);\n"
                                     "        InterlockedAdd(*dest, value);")
    prog = compile_program([SourceSpec(text=text, name="mlp.slang")], ["learnGradient"], target="cuda")
    assert "#define SJ_RED_CACHE 1" in prog.source
    # the functional API's .bwds kernel: gradients land at per-element (thread-dependent) addresses
    import slangjit as spy
    m = spy.Module.load_from_source(device, "rpoly", "[Differentiable] float poly(float a, float x) { return a * x * x; }")
    x = spy.Tensor.from_numpy(device, np.arange(8, dtype=np.float32)).with_grads()
    y = m.poly(a=2.0, x=x, _result="tensor").with_grads()
    code = m.poly.bwds.debug_build_call_data(a=2.0, x=x, _result=y).code
    assert "bwd_diff" in code and "_sj_atomic_add" in code
    prog = compile_program([SourceSpec(text=m._source_text + "\n" + code, name="rpoly.slang")], ["_sj_main"],
                           target="cuda")
    assert "#define SJ_RED_CACHE 1" not in prog.source


def test_no_cache_without_float_adds():
    text = """RWStructuredBuffer<uint> c;
[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID) { InterlockedAdd(c[0], 1u); }"""
    prog = compile_program([SourceSpec(text=text, name="int.slang")], ["computeMain"], target="cuda")
    assert "SJ_RED_CACHE 1" not in prog.source


# The tests below run on the CUDA device (tests/conftest.py `device`; skipped without a usable GPU).
CUDA = pytest.mark.parametrize("device", ["cuda"], indirect=True)


@CUDA
@pytest.mark.parametrize("barrier", [False, True])
@pytest.mark.parametrize("n,nparams", [(1 << 16, 40), (100_003, 300), (45, 3), (4096, 1)])
def test_block_cache_sums_exact(device, tmp_path, barrier, n, nparams):
    import slangjit as spy
    p = tmp_path / f"red_{int(barrier)}.slang"
    p.write_text(_source(barrier))
    k = device.create_compute_kernel(device.load_program(str(p), ["computeMain"]))
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    params = device.create_buffer(size=4 * nparams, usage=UA)
    hparams = device.create_buffer(size=4, usage=UA)
    counts = device.create_buffer(size=4 * 7, usage=UA)
    k.dispatch([n, 1, 1], vars={"params": params, "hparams": hparams, "counts": counts}, n=n, nparams=nparams)
    i = np.arange(n)
    # Every partial sum is an integer below 2^24: exact in float whatever the order of the adds.
    want = (i % 5).sum() + n * (np.arange(nparams) % 8).astype(np.float64)
    np.testing.assert_array_equal(params.to_numpy().view(np.float32).astype(np.float64), want)
    np.testing.assert_array_equal(counts.to_numpy().view(np.float32), np.bincount(i % 7, minlength=7))
    # half: ~n/2 ones per address, exact while the count is <= 2048; past that the cached kernel
    # adds whole-block sums (multiples of 64 and one remainder) and lands within a half rounding.
    got_h = hparams.to_numpy().view(np.float16).astype(np.float64)
    want_h = np.bincount((i // 64) % 2, minlength=2).astype(np.float64)
    if want_h.max() <= 2048:
        np.testing.assert_array_equal(got_h, want_h)
    elif not barrier:            # uncached: warp sums added in half may stall once the spacing passes 32
        np.testing.assert_allclose(got_h, want_h, rtol=2e-3)
