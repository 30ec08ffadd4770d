"""The CPU backend's performance paths (issue 20): the host instruction set chosen at run time and part
of the cache key, and per-worker (privatised) accumulation of thread-uniform gradient adds."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.runtime import cpu_compiler as cc

from cpu_dispatch import mlp_grads   # tests/helpers (on sys.path through tests/conftest.py)

pytestmark = pytest.mark.usefixtures("private_cache")

RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access


# ------------------------------------------------------------------------------------------ instruction set


def test_isa_levels_have_nested_flags():
    assert cc.isa_flags("portable") == ()
    prev = ()
    for level in cc.ISA_LEVELS[1:]:
        flags = cc.isa_flags(level)
        assert flags[:len(prev)] == prev and len(flags) > len(prev)
        prev = flags
    assert "-mf16c" in cc.isa_flags("v3") and "-mavx512f" not in cc.isa_flags("v3")
    assert "-mavx512f" in cc.isa_flags("v4")


def test_isa_is_part_of_the_cache_key(monkeypatch):
    src = 'extern "C" int sj_isa_probe(void) { return 1; }\n'
    keys = {}
    for level in ("portable", "v3"):
        monkeypatch.setenv("SLANGJIT_CPU_ISA", level)
        assert cc.host_isa() == level
        keys[level] = cc.library_key(src)
    assert keys["portable"] != keys["v3"]
    monkeypatch.setenv("SLANGJIT_CPU_ISA", "v3")
    assert cc.library_key(src) == keys["v3"]


def test_isa_env_rejects_unknown_level(monkeypatch):
    monkeypatch.setenv("SLANGJIT_CPU_ISA", "avx9000")
    with pytest.raises(ValueError, match="SLANGJIT_CPU_ISA"):
        cc.compile_flags()


def test_fp_contraction_stays_off():
    assert "-ffp-contract=off" in cc.compile_flags()
    assert not any("fast-math" in f or f.startswith("-Ofast") or f == "-march=native" for f in cc.compile_flags())


HALF_KERNEL = """
RWStructuredBuffer<half> a;
RWStructuredBuffer<half> b;
RWStructuredBuffer<half> o;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    o[i] = a[i] * b[i] + a[i] / (b[i] + 3.0h);
}
"""


@pytest.mark.parametrize("level", ["portable", "host"])
def test_half_arithmetic_same_on_every_isa(level, monkeypatch, tmp_path):
    if level == "host":
        monkeypatch.delenv("SLANGJIT_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("SLANGJIT_CPU_ISA", level)
    rng = np.random.default_rng(3)
    a = rng.uniform(-4, 4, 256).astype(np.float16)
    b = rng.uniform(-4, 4, 256).astype(np.float16)
    dev = spy.create_device(type=spy.DeviceType.cpu)
    p = tmp_path / "h.slang"
    p.write_text(HALF_KERNEL)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    bufs = [dev.create_buffer(element_count=256, struct_size=2, usage=RW, data=x) for x in (a, b, np.zeros_like(a))]
    k.dispatch(thread_count=[256, 1, 1], vars={"a": bufs[0], "b": bufs[1], "o": bufs[2]})
    got = bufs[2].to_numpy().view(np.float16)[:256]
    # each operation rounded to half, as numpy's float16 does
    want = (a * b) + (a / (b + np.float16(3.0)))
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------------------ privatised adds

from slangjit.compiler import SourceSpec, compile_program  # noqa: E402
from slangjit.compiler.passes.options import PipelineOptions  # noqa: E402

OFF = PipelineOptions().with_cpu(privatize_adds=False)


def _cpp(text: str, options: PipelineOptions = PipelineOptions()):
    return compile_program([SourceSpec(text=text, name="adds.slang")], ["computeMain"], target="cpp",
                           options=options).source


def _slots(source: str) -> int:
    import re
    m = re.search(r"privatised gradient adds: (\d+) slots", source)
    return int(m.group(1)) if m else 0


def _run(text, threads, bufs, options=PipelineOptions(), tmp_path=None, **uniforms):
    """Dispatch computeMain over `threads` threads with pointer parameters bound to fresh buffers; returns arrays."""
    dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=options)
    p = tmp_path / "k.slang"
    p.write_text(text)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    made = {name: dev.create_buffer(element_count=a.size, struct_size=a.itemsize, usage=RW, data=a)
            for name, a in bufs.items()}
    k.dispatch(thread_count=[threads, 1, 1], **{name: b.device_address for name, b in made.items()}, **uniforms)
    return {name: b.to_numpy().view(bufs[name].dtype)[: bufs[name].size].copy() for name, b in made.items()}


# every thread adds (i + 1) * v into g[i] through calls and counted loops; v = 1 + tid % 3; a divergent
# branch adds into g[5] for every third thread only; an early return leaves the threads >= n out
LOOPS = r"""
void acc1(float* p, float v) { InterlockedAdd(*p, v); }
void acc2(float* p, float v, int k) { for (int j = 0; j < 2; j++) acc1(p + j, float(k + j + 1) * v); }
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* g, uniform uint n)
{
    if (tid.x >= n) return;
    float v = float(1 + tid.x % 3);
    for (int i = 0; i < 2; i++) acc2(g + 2 * i, v, 2 * i);
    InterlockedAdd(g[4], 5.0 * v);
    if (tid.x % 3 == 0)
        InterlockedAdd(g[5], 1.0);
    for (int k = 0; k < int(tid.x % 4); k++)   // not a counted loop: an ordinary atomic add
        InterlockedAdd(g[6], 1.0);
}
"""


@pytest.mark.parametrize("workers", ["1", "2", "5"])
def test_privatised_adds_exact_sums(workers, monkeypatch, tmp_path):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", workers)
    assert _slots(_cpp(LOOPS)) == 6 and _slots(_cpp(LOOPS, OFF)) == 0
    n = 1000
    got = _run(LOOPS, 1024, {"g": np.zeros(7, np.float32)}, tmp_path=tmp_path, n=n)["g"]
    t = np.arange(n)
    v = (1 + t % 3).astype(np.float64)
    want = [1 * v.sum(), 2 * v.sum(), 3 * v.sum(), 4 * v.sum(), 5 * v.sum(), (t % 3 == 0).sum(), (t % 4).sum()]
    np.testing.assert_array_equal(got, np.array(want, np.float32))


# two sites add into the same address (a colliding pair) and one site's "uniform" address changes during
# the dispatch (read from memory that the threads write): the slot hands its sum over and takes the new one
COLLIDE = r"""
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* g, uniform uint* ctl)
{
    InterlockedAdd(g[0], 1.0);
    InterlockedAdd(g[0], 2.0);
    uint k = ctl[0];
    InterlockedAdd(g[1 + k], 1.0);
    ctl[0] = tid.x & 1;
}
"""


@pytest.mark.parametrize("workers", ["1", "3"])
def test_privatised_adds_colliding_and_moving_addresses(workers, monkeypatch, tmp_path):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", workers)
    assert _slots(_cpp(COLLIDE)) == 3
    n = 32 * 37
    got = _run(COLLIDE, n, {"g": np.zeros(3, np.float32), "ctl": np.zeros(1, np.uint32)}, tmp_path=tmp_path)["g"]
    assert got[0] == 3.0 * n
    assert got[1] + got[2] == n and got[1] > 0 and got[2] > 0


def test_read_after_add_is_not_privatised(tmp_path):
    """A thread that reads (or writes) memory it adds into must see its own add: those sites stay atomic."""
    text = r"""
[numthreads(1, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* buf, uniform float* other, uniform float* outp)
{
    InterlockedAdd(other[0], 1.0);     // nothing else touches `other`: privatised
    InterlockedAdd(buf[1], 1.0);
    outp[0] = buf[1] * 3.0;
}
"""
    src = _cpp(text)
    assert _slots(src) == 1
    got = _run(text, 1, {"buf": np.array([1, 2], np.float32), "other": np.zeros(1, np.float32),
                         "outp": np.zeros(1, np.float32)}, tmp_path=tmp_path)
    assert got["outp"][0] == 9.0 and got["other"][0] == 1.0 and got["buf"][1] == 3.0


def test_pointer_through_a_copy_still_aliases(tmp_path):
    """A pointer copied into a local or passed through calls keeps its parameter's label."""
    text = r"""
float peek(float* p) { return p[0]; }
[numthreads(4, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g, uniform float* outp)
{
    float* q = g + 0;
    InterlockedAdd(q[0], 1.0);
    outp[t.x] = peek(g);
}
"""
    assert _slots(_cpp(text)) == 0


def test_half_sites_sum_in_float(monkeypatch, tmp_path):
    """4096 threads add 1.0h into one half: per worker a float sum, one half add each (4096 exactly);
    half-by-half atomic adds stall at 2048 (2048 + 1 rounds to 2048 in half)."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "2")
    text = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform half* h)
{
    InterlockedAdd(h[0], 1.0h);
    InterlockedAdd(h[1], 0.5h);
}
"""
    assert _slots(_cpp(text)) == 2
    got = _run(text, 4096, {"h": np.zeros(2, np.float16)}, tmp_path=tmp_path)["h"]
    np.testing.assert_array_equal(got, np.array([4096, 2048], np.float16))
    off = _run(text, 4096, {"h": np.zeros(2, np.float16)}, options=OFF, tmp_path=tmp_path)["h"]
    assert off[0] == 2048


def test_barrier_kernels_are_not_privatised():
    text = r"""
groupshared float s[64];
[numthreads(64, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)
{
    s[t.x] = 1.0;
    GroupMemoryBarrierWithGroupSync();
    InterlockedAdd(g[0], s[63 - t.x]);
}
"""
    assert _slots(_cpp(text)) == 0


def test_mlp_native_add_gradients_match_float64(tmp_path):
    """The seed MLP with native half adds (benchmarks/cpu_mlp.py), privatised and fused: the gradients of
    a 2^12 batch against the float64 reference, and against the unprivatised kernel."""
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "examples" / "mlp_training"))
    sys.path.insert(0, str(root / "benchmarks"))
    import cpu_mlp
    import train as T
    import mlp_reference
    shader = tmp_path / "mlp.slang"
    shader.write_text(cpu_mlp.patched_source(True))
    assert _slots(compile_program([SourceSpec(path=str(shader))], ["learnGradient"], target="cpp").source) == 148
    params = T.init_parameters(5)
    xy = np.random.default_rng(5).uniform(-1, 1, (1 << 12, 2)).astype(np.float32)
    grads = {}
    for name, opts in (("on", PipelineOptions()), ("off", OFF)):
        grads[name] = mlp_grads(T, shader, opts, params, xy).astype(np.float64) / cpu_mlp.LOSS_SCALE
    _, want = mlp_reference.loss_and_grad(T, params.astype(np.float64), xy.astype(np.float16).astype(np.float64))
    rel = {k: np.linalg.norm(g - want) / np.linalg.norm(want) for k, g in grads.items()}
    # float sums per worker: closer to float64 than half-by-half sums of 4096 samples
    assert rel["on"] < 5e-3, rel
    assert rel["on"] < rel["off"], rel


# ------------------------------------------------------------------------------------------ chunked dispatch


CHUNKED = r"""
[numthreads(4, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint* outp, uniform float* g, uniform uint n)
{
    if (tid.x >= n) return;
    outp[tid.x] = tid.x * 3u + 1u;
    InterlockedAdd(g[0], 1.0);
}
"""


@pytest.mark.parametrize("workers", ["2", "7"])
def test_chunked_dispatch_covers_every_group_once(workers, monkeypatch, tmp_path):
    """Workers claim chunks of groups from a shared counter (runtime/cpu.py, sj_run_chunks): every group
    runs exactly once, and each chunk's privatised sums reach memory."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", workers)
    assert "sj_run_chunks" in _cpp(CHUNKED)
    n = 4 * 10007 - 3
    got = _run(CHUNKED, 4 * 10007, {"outp": np.zeros(n + 3, np.uint32), "g": np.zeros(1, np.float32)},
               tmp_path=tmp_path, n=n)
    np.testing.assert_array_equal(got["outp"][:n], np.arange(n, dtype=np.uint32) * 3 + 1)
    assert not got["outp"][n:].any()
    assert got["g"][0] == n


def test_chunked_dispatch_reports_kernel_errors(monkeypatch, tmp_path):
    """A failure recorded in one chunk of a chunked dispatch is raised after it (the error record is shared)."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "2")
    text = r"""
[numthreads(8, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* outp, uniform float* bad)
{
    outp[tid.x] = 1.0;
    if (tid.x == 7777)
        outp[0] = *bad;          // null pointer: recorded, raised after the dispatch
}
"""
    dev = spy.create_device(type=spy.DeviceType.cpu)
    p = tmp_path / "e.slang"
    p.write_text(text)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    out = dev.create_buffer(element_count=8 * 2000, struct_size=4, usage=RW)
    with pytest.raises(Exception, match="null"):
        k.dispatch(thread_count=[8 * 2000, 1, 1], outp=out.device_address, bad=0)


# ------------------------------------------------------------------------------------------ lane-blocked kernels

NO_LANES = PipelineOptions().with_cpu(lanes=False)

DIVERGENT = r"""
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
RWStructuredBuffer<int> tag;
[numthreads(NX, NY, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uint3 gt : SV_GroupThreadID, uint gi : SV_GroupIndex,
                 uniform uint width, uniform uint count)
{
    uint i = tid.y * width + tid.x;
    if (tid.x >= width || i >= count)
        return;
    float v = x[i];
    float r = 0.0;
    if (v < -1.0) {
        r = exp(v) * 2.0;
        if (v < -3.0) {
            tag[i] = 3;
            y[i] = -r;
            return;
        }
        tag[i] = 1;
    } else if (v > 2.0) {
        r = log(v) + pow(v, 0.5);
        tag[i] = 2;
    } else {
        r = sin(v) * cos(3.0 * v);
        r += float(gi) * 0.001 + float(gt.y);
        tag[i] = int(gi);
    }
    r *= 1.5;
    y[i] = r;
}
"""


def _ref_divergent(xs, width, nx, ny):
    n = xs.size
    y, tag = np.zeros(n), np.zeros(n, np.int64)
    for i, v in enumerate(xs.astype(np.float64)):
        tx, ty = i % width, i // width
        gi = (ty % ny) * nx + tx % nx
        if v < -1.0:
            r = np.exp(v) * 2.0
            if v < -3.0:
                y[i], tag[i] = -r, 3
                continue
            tag[i] = 1
        elif v > 2.0:
            r, tag[i] = np.log(v) + v ** 0.5, 2
        else:
            r = np.sin(v) * np.cos(3.0 * v) + gi * 0.001 + ty % ny
            tag[i] = gi
        y[i] = r * 1.5
    return y, tag


@pytest.mark.parametrize("nx,ny", [(64, 1), (24, 1), (8, 8), (100, 3)])
def test_lane_blocked_divergent_control_flow(nx, ny, tmp_path):
    text = DIVERGENT.replace("NX", str(nx)).replace("NY", str(ny))
    assert "sj_lanes_computeMain" in _cpp(text)
    assert "sj_lanes_" not in _cpp(text, NO_LANES)
    width = 37 * nx // 10 + 3                          # not a multiple of the group width: idle threads
    rows = 2 * ny + 1
    count = width * rows - 5
    rng = np.random.default_rng(nx * 7 + ny)
    xs = rng.uniform(-5, 6, count).astype(np.float32)
    gx, gy = -(-width // nx), -(-rows // ny)
    results = {}
    for name, opts in (("lanes", PipelineOptions()), ("scalar", NO_LANES)):
        dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=opts)
        p = tmp_path / f"{name}.slang"
        p.write_text(text)
        k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
        bx = dev.create_buffer(element_count=count, struct_size=4, usage=RW, data=xs)
        by = dev.create_buffer(element_count=count + 8, struct_size=4, usage=RW, data=np.full(count + 8, 7, np.float32))
        bt = dev.create_buffer(element_count=count + 8, struct_size=4, usage=RW, data=np.full(count + 8, -1, np.int32))
        k.dispatch(thread_count=[gx * nx, gy * ny, 1], vars={"x": bx, "y": by, "tag": bt}, width=width, count=count)
        results[name] = (by.to_numpy().view(np.float32).copy(), bt.to_numpy().view(np.int32).copy())
    want_y, want_tag = _ref_divergent(xs, width, nx, ny)
    for name, (y, tag) in results.items():
        np.testing.assert_array_equal(tag[:count], want_tag, err_msg=name)
        assert (tag[count:] == -1).all() and (y[count:] == 7).all(), name     # idle threads wrote nothing
        # float32 arithmetic on values up to ~300 (gi * 0.001 + gt.y + ...): a few float32 ulps of max(|y|, 1)
        err = np.abs(y[:count] - want_y) / np.maximum(np.abs(want_y), 1.0)
        assert err.max() < 2e-6, (name, float(err.max()))
    # the two paths agree to the last bits (libmvec against the scalar math library: a few ulp)
    assert np.allclose(results["lanes"][0], results["scalar"][0], rtol=2e-6, atol=1e-6)


MATH = r"""
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count, uniform int which)
{
    uint i = tid.x;
    if (i >= count) return;
    float v = x[i];
    float r = v;
    if (which == 0) r = sin(v);
    if (which == 1) r = cos(v);
    if (which == 2) r = exp(v);
    if (which == 3) r = log(v);
    if (which == 4) r = pow(v, 1.7);
    y[i] = r;
}
"""


@pytest.mark.parametrize("which,lo,hi,ref", [(0, -100, 100, np.sin), (1, -100, 100, np.cos), (2, -80, 80, np.exp),
                                             (3, 1e-30, 1e30, np.log), (4, 1e-3, 1e3, lambda v: v ** float(np.float32(1.7)))])
def test_lane_math_within_4_ulp(which, lo, hi, ref, tmp_path):
    """The vectorised math (libmvec where present) against float64: at most 4 ulp of the float result."""
    n = 1 << 16
    rng = np.random.default_rng(which)
    xs = (np.exp(rng.uniform(np.log(lo), np.log(hi), n)) if which == 3 else rng.uniform(lo, hi, n)).astype(np.float32)
    assert "sj_lanes_computeMain" in _cpp(MATH)
    got = _run_buffers(MATH, n, xs, tmp_path, count=n, which=which)
    want = ref(xs.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - want) / ulp
    assert err.max() <= 4.0, float(err.max())


def _run_buffers(text, n, xs, tmp_path, options=PipelineOptions(), **uniforms):
    dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=options)
    p = tmp_path / "m.slang"
    p.write_text(text)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    bx = dev.create_buffer(element_count=n, struct_size=4, usage=RW, data=xs)
    by = dev.create_buffer(element_count=n, struct_size=4, usage=RW)
    k.dispatch(thread_count=[n, 1, 1], vars={"x": bx, "y": by}, **uniforms)
    return by.to_numpy().view(np.float32)[:n].copy()


def test_lane_pointer_loads_of_idle_lanes_are_not_made(tmp_path):
    """Idle lanes (i >= n) never dereference: the pointer load runs for active lanes only."""
    text = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* src, uniform float* dst, uniform uint n)
{
    uint i = tid.x * 4096u;          // far past the end for idle lanes
    if (tid.x >= n) return;
    dst[tid.x] = exp(src[i]);
}
"""
    assert "sj_lanes_computeMain" in _cpp(text)
    n = 3
    src = np.arange(4096 * n, dtype=np.float32) * 1e-4
    got = _run(text, 64, {"src": src, "dst": np.zeros(n, np.float32)}, tmp_path=tmp_path, n=n)["dst"]
    np.testing.assert_allclose(got, np.exp(src[::4096].astype(np.float64)), rtol=1e-6)


def test_kernels_with_loops_or_calls_and_cheap_kernels():
    loop = "RWStructuredBuffer<float> y;\n[numthreads(64,1,1)] void computeMain(uint3 t : SV_DispatchThreadID)\n" \
           "{ float s = 0; for (int k = 0; k < 3; k++) s += sin(float(k)); y[t.x] = s; }\n"
    call = "RWStructuredBuffer<float> y;\nfloat f(float v) { return sin(v); }\n" \
           "[numthreads(64,1,1)] void computeMain(uint3 t : SV_DispatchThreadID) { y[t.x] = f(float(t.x)); }\n"
    cheap = "RWStructuredBuffer<float> y;\n[numthreads(64,1,1)] void computeMain(uint3 t : SV_DispatchThreadID)\n" \
            "{ y[t.x] = float(t.x) * 2.0; }\n"
    assert "sj_lanes_" not in _cpp(cheap)
    # a counted loop is lane-blocked by emit/cpu_lane_loops.py (CpuOptions.lane_loops), else it stays scalar
    assert "sj_lanes_" in _cpp(loop)
    assert "sj_lanes_" not in _cpp(loop, PipelineOptions().with_cpu(lane_loops=False))
    # a call stays scalar unless fusion (CpuOptions.fuse_all) or the lanes' inlining (lane_loops) inlines it
    assert "sj_lanes_" not in _cpp(call, PipelineOptions().with_cpu(fuse_all=False, lane_loops=False))
    assert "sj_lanes_" in _cpp(call, PipelineOptions().with_cpu(fuse_all=False))
    assert "sj_lanes_" in _cpp(call)


UNINIT = r"""
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
struct S { float a; float3 b; };
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    float r;
    S s;
    int k;
    float v = x[tid.x];
    if (v > 0.0) { r = sin(v); s.a = r; s.b = float3(v, 1.0, 2.0); k = 3; }
    else { r = cos(v); s.a = 2.0 * r; s.b.y = exp(v); k = -1; }
    y[tid.x] = r + s.a + s.b.y + float(k);
}
"""


def test_lane_declarations_without_initialiser_and_struct_fields(tmp_path):
    assert "sj_lanes_computeMain" in _cpp(UNINIT)
    xs = np.random.default_rng(1).uniform(-3, 3, 256).astype(np.float32)
    got = _run_buffers(UNINIT, 256, xs, tmp_path)
    x = xs.astype(np.float64)
    want = np.where(x > 0, np.sin(x) * 2 + 1 + 3, np.cos(x) * 3 + np.exp(x) - 1)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_lane_pointer_locals(tmp_path):
    """Pointer-valued locals (the functional API's offsets into tensors) in a lane-blocked kernel."""
    text = r"""
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* src, uniform float* dst, uniform int off, uniform uint n)
{
    if (tid.x >= n) return;
    float* p;
    float* q = dst + off;
    if (tid.x % 2 == 0) p = src + 1; else p = src;
    q[tid.x] = exp(p[tid.x]);
}
"""
    assert "sj_lanes_computeMain" in _cpp(text)
    n = 70
    src = np.linspace(-1, 1, n + 1).astype(np.float32)
    got = _run(text, 96, {"src": src, "dst": np.zeros(n + 2, np.float32)}, tmp_path=tmp_path, off=2, n=n)["dst"]
    i = np.arange(n)
    want = np.exp(src.astype(np.float64)[np.where(i % 2 == 0, i + 1, i)])
    np.testing.assert_allclose(got[2:], want, rtol=1e-6)
    assert got[0] == 0 and got[1] == 0
