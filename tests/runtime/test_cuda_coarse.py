"""Coarsened CUDA kernels: thread-uniform gradient adds summed per thread in registers.

A kernel whose float/half adds into thread-uniform addresses all have static slots (ir/red_slots.py:
the sites, laid out through calls and counted loops) runs groups in turn in each GPU block, keeps
one float per slot and thread, and adds each warp's sums into memory once (emit/cuda.py
coarse_kernel, prelude racc_add / racc_out_all).

Without a GPU: which kernels are coarsened and with how many slots (counted-loop forms, loops that
are not counted, barriers, groupshared, group sizes that are not whole warps, too many slots), and
that the generated CUDA compiles with NVRTC.  With a GPU: exact sums against numpy for every loop
form, thread / group ids of a 2-D dispatch whose groups run in turn, wave ops under a coarsened
loop with early returns, half adds, and dispatches much larger than one resident wave."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import DEFAULT_OPTIONS, PipelineOptions

import mlp_reference   # tests/helpers (on sys.path through tests/conftest.py)
from cuda_kernels import gpu_mlp as _gpu_mlp, mlp_native_add as _mlp_native_add, nvrtc_ptx as _nvrtc_ptx, \
    slots as _slots

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cuda(text: str, entry: str = "computeMain", options: PipelineOptions = DEFAULT_OPTIONS):
    return compile_program([SourceSpec(text=text, name="coarse.slang")], [entry], target="cuda", options=options)


# Each loop form adds (i + 1) * v into g[i] for each iteration i (g uniform), for v = 1 + tid % 3.
LOOP_FORMS = {
    "i < 4": ("for (int i = 0; i < 4; i++) { InterlockedAdd(g[i], float(i + 1) * v); }", 4, [1, 2, 3, 4]),
    "i <= 2, ++i": ("for (int i = 0; i <= 2; ++i) { InterlockedAdd(g[i], float(i + 1) * v); }", 3, [1, 2, 3]),
    "uint, i != 3": ("for (uint i = 0; i != 3; i++) { InterlockedAdd(g[i], float(i + 1) * v); }", 3, [1, 2, 3]),
    "down, i > 0": ("for (int i = 4; i > 0; i--) { InterlockedAdd(g[i - 1], float(i) * v); }", 4, [1, 2, 3, 4]),
    "down, -= 1, >=": ("for (int i = 3; i >= 1; i -= 1) { InterlockedAdd(g[i], float(i + 1) * v); }", 3, [0, 2, 3, 4]),
    "nested 2 x 3": ("for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++) "
                     "{ InterlockedAdd(g[i * 3 + j], float(i * 3 + j + 1) * v); }", 6, [1, 2, 3, 4, 5, 6]),
    "through calls": ("for (int i = 0; i < 2; i++) { acc2(g + 2 * i, v, 2 * i); }", 4, [1, 2, 3, 4]),
    "continue inside": ("for (int i = 0; i < 4; i++) { if (i == 2) continue; InterlockedAdd(g[i], float(i + 1) * v); }",
                        4, [1, 2, 0, 4]),
}
LOOP_KERNEL = r"""
void acc1(float* p, float v) { InterlockedAdd(*p, v); }
void acc2(float* p, float v, int k) { for (int j = 0; j < 2; j++) acc1(p + j, float(k + j + 1) * v); }
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* g, uniform uint n)
{
    if (tid.x >= n) return;
    float v = float(1 + tid.x % 3);
    BODY
}
"""


@pytest.mark.parametrize("form", list(LOOP_FORMS))
def test_counted_loop_forms_get_slots(form):
    body, slots, _ = LOOP_FORMS[form]
    prog = _cuda(LOOP_KERNEL.replace("BODY", body))
    assert _slots(prog) == slots
    assert "#define SJ_RED_CACHE 1" not in prog.source
    assert b".entry" in _nvrtc_ptx(prog.source)


NOT_COARSENED = {
    # the trip count is not a constant: the adds keep the ordinary path (block cache)
    "uniform bound": (True, """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g, uniform uint m)
{ for (uint i = 0; i < m; i++) InterlockedAdd(g[i], 1.0); }"""),
    "counter written in the body": (True, """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ for (int i = 0; i < 8; i++) { InterlockedAdd(g[i], 1.0); i += 1; } }"""),
    "while loop": (True, """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ int i = 0; while (i < 4) { InterlockedAdd(g[i], 1.0); i++; } }"""),
    "more slots than registers": (True, """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ for (int i = 0; i < 300; i++) InterlockedAdd(g[i], 1.0); }"""),
    "group size not whole warps": (True, """[numthreads(48, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ for (int i = 0; i < 4; i++) InterlockedAdd(g[i], 1.0); }"""),
    # deferring adds past a barrier / fence or next to groupshared data is not allowed: no cache either
    "barrier": (False, """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ for (int i = 0; i < 4; i++) InterlockedAdd(g[i], 1.0); GroupMemoryBarrierWithGroupSync(); }"""),
    "fence": (False, """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ for (int i = 0; i < 4; i++) InterlockedAdd(g[i], 1.0); DeviceMemoryBarrier(); }"""),
    "groupshared": (True, """groupshared float s[64];
[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ s[t.x % 64] = 1.0; for (int i = 0; i < 4; i++) InterlockedAdd(g[i], s[t.x % 64]); }"""),
    # per-thread addresses: no slots (a deferred add there could be read back by its own thread)
    "thread-dependent address": (False, """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{ for (int i = 0; i < 4; i++) InterlockedAdd(g[t.x * 4 + i], 1.0); }"""),
}


@pytest.mark.parametrize("case", list(NOT_COARSENED))
def test_kernels_that_are_not_coarsened(case):
    cached, text = NOT_COARSENED[case]
    prog = _cuda(text)
    assert _slots(prog) is None
    assert ("#define SJ_RED_CACHE 1" in prog.source) is cached


# Slot addresses proven the same in every logical thread (ir/slot_invariance.py): None = proven,
# else a piece of the reason the kernel keeps the per-add check.
TABLE_HEAD = """[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float** table, uniform uint* cnt, uniform Atomic<float>* s,
                 uniform uint n)
{ if (t.x >= n) return; BODY }"""
INVARIANCE = {
    "no memory reads": (None, "for (int i = 0; i < 2; i++) InterlockedAdd(table[0][i], 1.0);"),
    "loads before any write": (None, "InterlockedAdd(*table[0], 1.0); InterlockedAdd(table[1][t.x % 1], 2.0); "
                                     "InterlockedAdd(cnt[0], 1u); s.add(1.0);"),
    "store": ("store to memory", "if (t.x == 3) cnt[0] = 1u; InterlockedAdd(*table[0], 1.0);"),
    "load after an atomic": ("memory read after a write", "InterlockedAdd(cnt[0], 1u); InterlockedAdd(*table[0], 1.0);"),
    "load after an Atomic<T> method": ("memory read after a write", "s.max(1.0); InterlockedAdd(*table[0], 1.0);"),
    # an unused-result float Atomic<T>.add is an add site (ir/atomic_adds.py): deferred, not a write
    "load after a deferred Atomic<T>.add": (None, "s.add(1.0); InterlockedAdd(*table[0], 1.0);"),
    "atomic in an earlier iteration": ("memory read after a write",
                                       "for (int i = 0; i < 2; i++) { InterlockedAdd(*table[i], 1.0); "
                                       "InterlockedAdd(cnt[0], 1u); }"),
    "atomic in a called function": ("memory read after a write", "bump(cnt); InterlockedAdd(*table[0], 1.0);"),
}


@pytest.mark.parametrize("case", list(INVARIANCE))
def test_slot_address_invariance_proof(case):
    why, body = INVARIANCE[case]
    prog = _cuda("void bump(uint* c) { InterlockedAdd(c[0], 1u); }\n" + TABLE_HEAD.replace("BODY", body))
    assert _slots(prog) is not None
    if why is None:
        assert "bool sj_claimed = false;" in prog.source
    else:
        assert "bool sj_claimed" not in prog.source
        assert f"slot addresses checked at every add: " in prog.source and why in prog.source
    assert b".entry" in _nvrtc_ptx(prog.source)


@pytest.fixture
def shared_slots():
    """Options: CudaOptions.shared_slots on (off by default) and mma_slots off."""
    return PipelineOptions().with_cuda(shared_slots=True, mma_slots=False)


@pytest.fixture
def mma_slots():
    """Options: CudaOptions.mma_slots on (the default; tests that need it say so)."""
    return PipelineOptions().with_cuda(mma_slots=True)


@pytest.mark.parametrize("n,threads,shared", [(4, 64, 4 * 4 * 64), (160, 256, 0), (90, 256, 90 * 4 * 256)])
def test_slots_in_shared_memory_when_they_fit(shared_slots, n, threads, shared):
    """With shared_slots, float slots go to shared memory when slots and address tables fit 99 KB per
    group, else registers."""
    prog = _cuda(f"""[numthreads({threads}, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{{ for (int i = 0; i < {n}; i++) InterlockedAdd(g[i], 1.0); }}""", options=shared_slots)
    assert _slots(prog) == n
    assert prog.reflection.entry_points["computeMain"].dynamic_shared == shared
    assert ("#define SJ_RACC_SHARED 1" in prog.source) == bool(shared)
    assert "SJ_RACC_SHARED_HALF 1" not in prog.source
    assert b".entry" in _nvrtc_ptx(prog.source)


def test_half_slots_in_shared_memory(shared_slots):
    prog = _cuda(HALF_SLOTS_KERNEL, options=shared_slots)
    assert "#define SJ_RACC_SHARED_HALF 1" in prog.source     # every site is half: half slots
    assert prog.reflection.entry_points["computeMain"].dynamic_shared == 21 * 2 * 64
    assert b".entry sj_entry_computeMain" in _nvrtc_ptx(prog.source)


def test_mlp_learn_gradient_is_coarsened_with_one_slot_per_parameter():
    text = _mlp_native_add()
    prog = compile_program([SourceSpec(text=text, name="mlp.slang")], ["learnGradient"], target="cuda")
    # each weight and bias of the 4-16-4 net, and the loss sum (lossSum.add: ir/atomic_adds.py)
    assert _slots(prog, "learnGradient") == 4 * 16 + 16 + 16 * 4 + 4 + 1
    assert "#define SJ_RED_CACHE 1" not in prog.source
    assert "bool sj_claimed = false;" in prog.source          # addresses proven invariant: no per-add check
    assert "SJ_RACC_SHARED 1" not in prog.source
    assert "#define SJ_RACC_MMA 1" in prog.source       # every site is half: tensor-core slots (sm_90+)
    ep = prog.reflection.entry_points["learnGradient"]
    assert ep.grid_slots == 149                          # proven addresses: sums meet across the grid
    assert b".entry sj_entry_learnGradient" in _nvrtc_ptx(prog.source)
    prog = compile_program([SourceSpec(text=text, name="mlp.slang")], ["adjustParameters"], target="cuda")
    assert _slots(prog, "adjustParameters") is None


def test_mlp_tensor_core_slots(mma_slots):
    """With mma_slots every site is half: mma_stages stages of 10 tiles x 16 slots x 64 bytes per warp."""
    prog = compile_program([SourceSpec(text=_mlp_native_add(), name="mlp.slang")], ["learnGradient"], target="cuda",
                           options=mma_slots)
    assert "#define SJ_RACC_MMA 1" in prog.source and "#define SJ_RACC_MMA_NT 10" in prog.source
    assert "#define SJ_RACC_MMA_NS 149" in prog.source
    ep = prog.reflection.entry_points["learnGradient"]
    assert (ep.dynamic_shared, ep.dynamic_shared_arch) == (8 * 10 * mma_slots.cuda.mma_stages * 16 * 64, 90)
    ptx = _nvrtc_ptx(prog.source)
    assert b".entry sj_entry_learnGradient" in ptx and b"mma.sync.aligned.m16n8k16" in ptx and b"ldmatrix" in ptx


HALF_SLOTS_KERNEL = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform half* g, uniform uint n, uniform uint every, uniform half v)
{
    if (t.x >= n)
        return;                          // partial warps: the missing lanes add nothing
    [ForceUnroll]
    for (int i = 0; i < 20; i++)
    {
        if (t.x % every == 0)
            InterlockedAdd(g[i], v);
    }
    if (t.x % (3 * every) == 0)
        InterlockedAdd(g[20], v + v);    // divergent: lanes that skip it add nothing
}
"""


MIXED_SLOTS_KERNEL = HALF_SLOTS_KERNEL.replace(
    "uniform half* g, uniform uint n", "uniform half* g, uniform float* f, uniform uint n").replace(
    "    if (t.x % (3 * every) == 0)", "    InterlockedAdd(f[0], 1.0);\n    if (t.x % (3 * every) == 0)")


def test_tensor_core_slots_take_the_half_sites(mma_slots):
    """Half sites get tensor-core slots; a float site in the same kernel keeps a float register."""
    prog = _cuda(HALF_SLOTS_KERNEL, options=mma_slots)
    assert _slots(prog) == 21 and "#define SJ_RACC_MMA_NT 2" in prog.source
    assert prog.reflection.entry_points["computeMain"].dynamic_shared == 2 * 2 * mma_slots.cuda.mma_stages * 16 * 64
    prog = _cuda(MIXED_SLOTS_KERNEL, options=mma_slots)
    assert _slots(prog) == 22 and "#define SJ_RACC_MMA_NS 22" in prog.source
    assert b"mma.sync.aligned.m16n8k16" in _nvrtc_ptx(prog.source)
    floats = "[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID, uniform float* f) { InterlockedAdd(f[0], 1.0); }"
    prog = _cuda(floats, options=mma_slots)
    assert _slots(prog) == 1 and "#define SJ_RACC_MMA 1" not in prog.source     # no half site: float registers
    assert prog.reflection.entry_points["computeMain"].dynamic_shared == 0


# Every lane that gets past the early return writes every half slot (the float site under an `if` is a
# register slot): the stage is not cleared after each step (ir/slot_coverage.py).
COVERED_KERNEL = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform half* g, uniform float* f, uniform uint n, uniform half v)
{
    if (t.x >= n)
        return;                          // before the first slot: the lane zeros its column
    half w = half(float(t.x % 3)) * v;   // 0, v, 2v
    [ForceUnroll]
    for (int i = 0; i < 20; i++)
        InterlockedAdd(g[i], i % 2 == 0 ? w : v);
    InterlockedAdd(g[20], v + v);
    if (t.x % 5 == 0)
        InterlockedAdd(f[0], 1.0);
}
"""

NOT_COVERED = {
    "half site under if": HALF_SLOTS_KERNEL,
    "return after a site": COVERED_KERNEL.replace("    InterlockedAdd(g[20], v + v);",
                                                  "    if (t.x == 7) return;\n    InterlockedAdd(g[20], v + v);"),
    "call under if": "void addTwice(half* g, half v) { InterlockedAdd(g[20], v); InterlockedAdd(g[21], v); }\n" +
                     COVERED_KERNEL.replace("    InterlockedAdd(g[20], v + v);", "    if (t.x % 2 == 0) addTwice(g, v);"),
    "callee returns early": "void addTwice(half* g, half v) { InterlockedAdd(g[20], v); if (v > half(1.0)) return; "
                            "InterlockedAdd(g[21], v); }\n" +
                            COVERED_KERNEL.replace("    InterlockedAdd(g[20], v + v);", "    addTwice(g, v);"),
    "site under ?:": COVERED_KERNEL.replace("    InterlockedAdd(g[20], v + v);",
                                            "    float q = t.x == 3 ? 1.0 : (InterlockedAdd(g[20], v), 2.0);"),
}


def test_covered_kernel_skips_the_stage_clear(mma_slots):
    """Every finished logical thread writes every half slot: no clear after the step, and the early
    return zeros the lane's column; kernels where a slot may be skipped keep the clear."""
    prog = _cuda(COVERED_KERNEL, options=mma_slots)
    assert _slots(prog) == 22
    assert "::sj_cuda::racc_step(sj_acc, 22, false);" in prog.source
    assert prog.source.count("::sj_cuda::racc_abandon(sj_acc, 22);") == 1
    assert b"mma.sync.aligned.m16n8k16" in _nvrtc_ptx(prog.source)
    called = _cuda("void addTwice(half* g, half v) { InterlockedAdd(g[20], v); InterlockedAdd(g[21], v); }\n" +
                   COVERED_KERNEL.replace("    InterlockedAdd(g[20], v + v);", "    addTwice(g, v);"))
    assert "::sj_cuda::racc_step(sj_acc, 23, false);" in called.source      # a covering callee, called always
    mlp = compile_program([SourceSpec(text=_mlp_native_add(), name="mlp.slang")], ["learnGradient"], target="cuda")
    assert "::sj_cuda::racc_step(sj_acc, 149, false);" in mlp.source


@pytest.mark.parametrize("case", list(NOT_COVERED))
def test_kernels_that_may_skip_a_slot_clear_the_stage(mma_slots, case):
    prog = _cuda(NOT_COVERED[case], options=mma_slots)
    assert _slots(prog) and "#define SJ_RACC_MMA 1" in prog.source
    assert re.search(r"::sj_cuda::racc_step\(sj_acc, \d+\);", prog.source)
    assert "racc_abandon(sj_acc" not in prog.source
    assert b".entry" in _nvrtc_ptx(prog.source)


# ----------------------------------------------------------------------------------------- GPU

# The tests below run on the CUDA device (tests/conftest.py `device`; skipped without a usable GPU).
CUDA = pytest.mark.parametrize("device", ["cuda"], indirect=True)


def _run(device, tmp_path, text):
    p = tmp_path / "k.slang"
    p.write_text(text)
    k = device.create_compute_kernel(device.load_program(str(p), ["computeMain"]))
    assert k.entry.grid_stride
    return k


@CUDA
@pytest.mark.parametrize("n", [1, 45, 64 * 1000 + 7, 1 << 20])
@pytest.mark.parametrize("form", list(LOOP_FORMS))
def test_coarse_loop_sums_exact(device, tmp_path, form, n):
    import slangjit as spy
    body, _, weights = LOOP_FORMS[form]
    k = _run(device, tmp_path, LOOP_KERNEL.replace("BODY", body))
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    g = device.create_buffer(size=4 * 8, usage=UA, data=np.zeros(8, np.float32))
    k.dispatch([n + 13, 1, 1], g=g.device_address, n=n)     # threads past n return at once
    v = (1 + np.arange(n) % 3).sum()
    want = np.zeros(8)
    want[:len(weights)] = np.array(weights, np.float64) * v   # integers < 2^24: exact in any order
    np.testing.assert_array_equal(g.to_numpy().view(np.float32).astype(np.float64), want)


IDS_KERNEL = r"""
struct Grads { float* g; half* h; };
[numthreads(32, 4, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uint3 gid : SV_GroupID, uint3 gtid : SV_GroupThreadID,
                 uint gi : SV_GroupIndex, uniform Grads* G, uniform uint* ids, uniform float* waveSum,
                 uniform uint nx, uniform uint ny)
{
    if (tid.x >= nx || tid.y >= ny)
        return;
    uint lin = tid.y * nx + tid.x;
    ids[lin] = ((gid.x * 256 + gid.y) * 128 + gi) * 4 + (gtid.y == gi / 32 ? 1 : 0) * 2 + (gtid.x == gi % 32 ? 1 : 0);
    float v = float(1 + lin % 3);
    for (int j = 0; j < 3; j++)
        InterlockedAdd(G->g[j], v * float(j + 1));
    if (lin < 2000)
        InterlockedAdd(G->h[lin % 2], half(1.0));
    float s = WaveActiveSum(v);
    if (WaveIsFirstLane())
        InterlockedAdd(waveSum[0], s);
}
"""


@CUDA
@pytest.mark.parametrize("nx,ny", [(1000, 300), (31, 5), (4096, 256)])
def test_coarse_ids_waves_and_half(device, tmp_path, nx, ny):
    """Thread and group ids, wave sums under early returns, and half adds, with groups in turn."""
    import slangjit as spy
    k = _run(device, tmp_path, IDS_KERNEL)
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    n = nx * ny
    g = device.create_buffer(size=4 * 4, usage=UA, data=np.zeros(4, np.float32))
    h = device.create_buffer(size=4, usage=UA, data=np.zeros(2, np.float16))
    grads = device.create_buffer(size=16, usage=UA, data=np.array([g.device_address, h.device_address], np.uint64))
    ids = device.create_buffer(size=4 * n, usage=UA, data=np.zeros(n, np.uint32))
    ws = device.create_buffer(size=4, usage=UA, data=np.zeros(1, np.float32))
    k.dispatch([nx, ny, 1], G=grads.device_address, ids=ids.device_address, waveSum=ws.device_address, nx=nx, ny=ny)
    y, x = np.mgrid[0:ny, 0:nx]
    gi = (y % 4) * 32 + x % 32
    want_ids = (((x // 32) * 256 + y // 4) * 128 + gi) * 4 + 3
    np.testing.assert_array_equal(ids.to_numpy().view(np.uint32)[:n], want_ids.reshape(-1).astype(np.uint32))
    v = (1 + np.arange(n) % 3).astype(np.float64)
    np.testing.assert_array_equal(g.to_numpy().view(np.float32)[:3].astype(np.float64), v.sum() * np.array([1, 2, 3]))
    m = min(n, 2000)
    np.testing.assert_array_equal(h.to_numpy().view(np.float16).astype(np.float64),
                                  np.bincount(np.arange(m) % 2, minlength=2))
    assert ws.to_numpy().view(np.float32)[0] == v.sum()


@CUDA
@pytest.mark.parametrize("mma", [False, True])
@pytest.mark.parametrize("B", [1 << 12, 1 << 15])
def test_mlp_gradients_match_float64_reference(device, B, mma, monkeypatch, tmp_path):   # device: skips without a GPU
    """One coarsened learnGradient over B samples against float64 numpy gradients of the same network
    at the same half parameters (at 2^15, each thread sums several samples in its slots), with float
    register slots and with tensor-core slots."""
    import sys
    import slangjit as spy
    dev = spy.create_device(type=spy.DeviceType.cuda, compile_options=PipelineOptions().with_cuda(mma_slots=mma))
    sys.path.insert(0, os.path.join(ROOT, "examples", "mlp_training"))
    try:
        import train as T
    finally:
        sys.path.pop(0)
    import tempfile
    d = tempfile.mkdtemp()
    path = os.path.join(d, "mlp_native.slang")
    with open(path, "w") as f:
        f.write(_mlp_native_add())
    old = T.SHADER
    T.SHADER = path
    try:
        params = T.init_parameters(3)
        tr = T.MLPTrainer(dev, params, B, max_steps=1)
        assert tr.learn.entry.grid_stride
        rng = np.random.default_rng(3)
        xy = rng.uniform(-1, 1, (B, 2)).astype(np.float32)
        tr.set_inputs(xy)
        tr.learn_gradient(0, B)
        got = tr.read_grads().astype(np.float64) / _gpu_mlp().LOSS_SCALE
    finally:
        T.SHADER = old
    want = mlp_reference.loss_and_grad(T, params.astype(np.float64), xy.astype(np.float16).astype(np.float64))[1]
    rel = np.abs(got - want).max() / np.abs(want).max()
    # The gradient buffer is half: every warp's sum is added into it and rounded to half (2^-11 of the
    # running total); at 2^15 samples about a thousand such adds land in each parameter.
    assert rel < (2e-2 if B <= 1 << 12 else 4e-2), rel


MOVING_KERNEL = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float** table, uniform float* b, uniform uint n)
{
    if (t.x >= n)
        return;
    if (t.x == n / 3)
        table[0] = b;                    // the "uniform" address the adds load changes mid-dispatch
    InterlockedAdd(*table[0], 1.0);
}
"""


def test_moving_uniform_address_is_coarsened():
    prog = _cuda(MOVING_KERNEL)
    assert _slots(prog) == 1
    assert prog.reflection.entry_points["computeMain"].grid_slots == 0     # not proven: per-block atomics
    assert "racc_flush_block(" in prog.source and "sj_scratch" not in prog.source


def test_only_unused_float_atomic_adds_become_sites():
    """ir/atomic_adds.py: `Atomic<float>.add` whose result is dropped is an add site (slotted where its
    address is uniform); `Atomic<half>.add` stays an atomic; and a program that also uses an add's
    result (or loads a float atomic) keeps every float atomic, since a deferred add would not be
    visible to the same thread's later read."""
    head = ("[numthreads(64, 1, 1)]\nvoid computeMain(uint3 t : SV_DispatchThreadID, uniform Atomic<float>* s, "
            "uniform Atomic<half>* h, uniform float* res)\n{ BODY }")
    prog = _cuda(head.replace("BODY", "s[0].add(1.0); h[0].add(half(1.0));"))
    assert _slots(prog) == 1
    assert re.search(r"racc_add\(sj_acc, sj_tab, SJ_SLOT\(sj_slot, 0\), sj_mode, &\(s_\d+\[0\]\.value\)", prog.source)
    assert re.search(r"\(h_\d+\[0\]\)\.add\(", prog.source)
    for other in ("res[t.x] = s[1].add(2.0);", "res[t.x] = s[1].load();"):
        prog = _cuda(head.replace("BODY", "s[0].add(1.0); " + other))
        assert _slots(prog) is None and re.search(r"\(s_\d+\[0\]\)\.add\(", prog.source), other


def test_proven_slots_flush_across_the_grid():
    """Proven kernels pass their block sums through the runtime's scratch buffer: one atomic per slot."""
    prog = _cuda(RARE_KERNEL)
    assert prog.reflection.entry_points["computeMain"].grid_slots == _slots(prog) == 2
    assert "racc_flush_grid(" in prog.source and "unsigned char* const sj_scratch" in prog.source
    assert b".entry sj_entry_computeMain" in _nvrtc_ptx(prog.source)


@CUDA
@pytest.mark.parametrize("n", [1 << 16, 1 << 20])
def test_coarse_slot_check_catches_a_moving_address(device, tmp_path, n):
    """The analysis calls the address uniform, but it changes while the kernel runs: adds whose
    address is not their slot's take the ordinary path, so every add lands exactly once."""
    import slangjit as spy
    k = _run(device, tmp_path, MOVING_KERNEL)
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    ab = device.create_buffer(size=8, usage=UA, data=np.zeros(2, np.float32))
    a_addr, b_addr = ab.device_address, ab.device_address + 4
    table = device.create_buffer(size=8, usage=UA, data=np.array([a_addr], np.uint64))
    k.dispatch([n, 1, 1], table=table.device_address, b=b_addr, n=n)
    got = ab.to_numpy().view(np.float32).astype(np.float64)
    assert got.sum() == n and got[1] > 0, got        # counts < 2^24: exact


RARE_KERNEL = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float** table, uniform uint n, uniform uint every)
{
    if (t.x >= n)
        return;
    float* g = table[0];                 // slot addresses loaded from memory (proven invariant)
    InterlockedAdd(g[0], 1.0);
    if (t.x % every == 0)
        InterlockedAdd(table[1][0], 2.0);  // reached by few warps: the others stay in claim mode
}
"""


@CUDA
@pytest.mark.parametrize("n,every", [(1 << 20, 100003), (64 * 1000 + 7, 1), (1 << 16, 4099)])
def test_proven_slots_claim_then_add_exact(device, tmp_path, n, every):
    """Kernels whose slot addresses are proven invariant claim each slot once per warp, then only add;
    a slot that few warps reach is still claimed where it is reached, so every add lands."""
    import slangjit as spy
    prog = _cuda(RARE_KERNEL)
    assert "bool sj_claimed = false;" in prog.source
    k = _run(device, tmp_path, RARE_KERNEL)
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    a = device.create_buffer(size=8, usage=UA, data=np.zeros(2, np.float32))
    b = device.create_buffer(size=8, usage=UA, data=np.zeros(2, np.float32))
    table = device.create_buffer(size=16, usage=UA, data=np.array([a.device_address, b.device_address + 4], np.uint64))
    k.dispatch([n + 50, 1, 1], table=table.device_address, n=n, every=every)
    np.testing.assert_array_equal(a.to_numpy().view(np.float32), [n, 0])          # counts < 2^24: exact
    np.testing.assert_array_equal(b.to_numpy().view(np.float32), [0, 2 * len(range(0, n, every))])


@CUDA
@pytest.mark.parametrize("n,every,v", [(1000 + 7, 1, 2.0 ** -10), (1 << 20, 1024, 1.0)])
def test_tensor_core_slots_sum_every_lane(device, mma_slots, tmp_path, n, every, v):
    """Tensor-core slots: partial warps, divergent adds and many turns per warp all land."""
    import slangjit as spy
    k = _run(device, tmp_path, HALF_SLOTS_KERNEL)
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    g = device.create_buffer(size=64, usage=UA, data=np.zeros(32, np.float16))
    k.dispatch([n + 40, 1, 1], g=g.device_address, n=n, every=every, v=v)
    got = g.to_numpy().view(np.float16)[:32].astype(np.float64)
    want = np.zeros(32)
    want[:20] = v * len(range(0, n, every))
    want[20] = 2 * v * len(range(0, n, 3 * every))
    # Every partial total is on the half grid (multiples of v below 2048 v): exact.  (The MLP gradient
    # tests cover every lane adding at 2^15 samples.)
    np.testing.assert_array_equal(got, want)


@CUDA
@pytest.mark.parametrize("n", [1000 + 7, 64 * 1000 + 33, 1 << 20])
def test_covered_kernel_sums_exact(device, mma_slots, tmp_path, n):
    """A kernel whose stage is never cleared (COVERED_KERNEL): partial warps whose lanes return early
    (their columns zeroed), many turns per warp, exact against numpy; twice in a row."""
    import slangjit as spy
    k = _run(device, tmp_path, COVERED_KERNEL)
    assert "racc_abandon(sj_acc" in k.compiled.source
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    v = 2.0 ** -12
    t = np.arange(n)
    want = np.zeros(32)
    want[0:20:2] = float((t % 3).sum()) * v
    want[1:20:2] = n * v
    want[20] = 2 * n * v
    for _ in range(2):
        g = device.create_buffer(size=64, usage=UA, data=np.zeros(32, np.float16))
        f = device.create_buffer(size=4, usage=UA, data=np.zeros(1, np.float32))
        k.dispatch([n + 50, 1, 1], g=g.device_address, f=f.device_address, n=n, v=v)
        got = g.to_numpy().view(np.float16)[:32].astype(np.float64)
        # Tensor-core sums are float; the buffer is half: one rounding of each total to half.
        np.testing.assert_allclose(got, want.astype(np.float16).astype(np.float64), rtol=0, atol=0)
        assert f.to_numpy().view(np.float32)[0] == len(range(0, n, 5))


@CUDA
def test_grid_flush_repeated_launches_exact(device, tmp_path):
    """The grid flush's scratch (launch counter, slot addresses) is left clean by every launch: launches
    of several sizes in a row, some with fewer groups than resident blocks, all add exactly."""
    import slangjit as spy
    k = _run(device, tmp_path, RARE_KERNEL)
    assert k.entry.grid_slots == 2
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    a = device.create_buffer(size=8, usage=UA, data=np.zeros(2, np.float32))
    b = device.create_buffer(size=8, usage=UA, data=np.zeros(2, np.float32))
    table = device.create_buffer(size=16, usage=UA, data=np.array([a.device_address, b.device_address + 4], np.uint64))
    sizes = [(1 << 20, 7), (100, 1), (1 << 18, 1000), (64 * 3, 5), (1 << 20, 1 << 30)]
    for n, every in sizes:
        k.dispatch([n, 1, 1], table=table.device_address, n=n, every=every)
    np.testing.assert_array_equal(a.to_numpy().view(np.float32), [sum(n for n, _ in sizes), 0])   # < 2^24: exact
    np.testing.assert_array_equal(b.to_numpy().view(np.float32), [0, sum(2 * len(range(0, n, e)) for n, e in sizes)])


@CUDA
def test_tensor_core_slots_with_a_float_site_exact(device, mma_slots, tmp_path):
    """A kernel mixing half sites (tensor-core slots) and a float site (a float register) adds both exactly."""
    import slangjit as spy
    p = tmp_path / "k.slang"
    p.write_text(MIXED_SLOTS_KERNEL)
    k = device.create_compute_kernel(device.load_program(str(p), ["computeMain"]))
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    g = device.create_buffer(size=64, usage=UA, data=np.zeros(32, np.float16))
    f = device.create_buffer(size=4, usage=UA, data=np.zeros(1, np.float32))
    n, every = 1 << 20, 1024
    k.dispatch([n + 40, 1, 1], g=g.device_address, f=f.device_address, n=n, every=every, v=1.0)
    want = np.zeros(32)
    want[:20] = len(range(0, n, every))
    want[20] = 2 * len(range(0, n, 3 * every))
    np.testing.assert_array_equal(g.to_numpy().view(np.float16)[:32].astype(np.float64), want)
    assert f.to_numpy().view(np.float32)[0] == n                  # < 2^24: exact
