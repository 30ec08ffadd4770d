"""Lane-blocked CPU kernels with loops and inlined calls (emit/cpu_lane_loops.py, passes/cpu_lanes.py):
half arithmetic rounded as the scalar kernel rounds it, divergent control flow under masks, loops with
uniform and non-uniform trip counts, and colliding accumulation (privatised adds per lane, combined atomics)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import PipelineOptions

from cpu_dispatch import RW, cpp_source, dispatch, mlp_grads   # tests/helpers (on sys.path through tests/conftest.py)

pytestmark = pytest.mark.usefixtures("private_cache")

SCALAR = PipelineOptions().with_cpu(lane_loops=False)
RHF = PipelineOptions().with_cpu(half_rows=False)      # half rounding by sj::rhf in the lane loops' registers


def _cpp(text: str, options: PipelineOptions = PipelineOptions()) -> str:
    return cpp_source(text, options, "lanes.slang")


_dispatch = dispatch


# ------------------------------------------------------------------------------------------ half arithmetic

HALF_LOOP = r"""
RWStructuredBuffer<half> a;
RWStructuredBuffer<half> w;
RWStructuredBuffer<half> o;
[numthreads(NX, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    uint i = tid.x;
    if (i >= count)
        return;
    half x = a[i];
    half acc = 0.0h;
    for (int k = 0; k < 8; k++)
    {
        half t = x * w[k] + acc;
        if (t < 0.0h)
            t = t * 0.01h;
        else if (t > 100.0h)
            t = t / 3.0h;
        acc = t - half(k) * 0.125h;
    }
    o[i] = acc;
}
"""


def _half_loop_ref(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    h = np.float16
    x, acc = a.astype(h), np.zeros_like(a, dtype=h)
    with np.errstate(all="ignore"):
        for k in range(8):
            t = (x * w[k]).astype(h) + acc
            t = np.where(t < 0, (t * h(0.01)).astype(h), np.where(t > 100, (t / h(3.0)).astype(h), t)).astype(h)
            acc = (t - (h(k) * h(0.125)).astype(h)).astype(h)
    return acc


@pytest.mark.parametrize("nx", [16, 7, 64])
def test_half_arithmetic_in_loops_rounds_as_the_scalar_kernel(nx, tmp_path):
    """Every half operation of a lane-blocked loop (float rows rounded by F16C / bit arithmetic) equals numpy's
    float16, bit for bit, over normal, subnormal and overflowing values; and equals the scalar kernel."""
    text = HALF_LOOP.replace("NX", str(nx))
    assert "sj_lanes_computeMain" in _cpp(text)
    assert "sj_lanes_" not in _cpp(text, SCALAR)
    rng = np.random.default_rng(nx)
    count = 1000
    a = np.concatenate([rng.uniform(-3, 3, 600), rng.uniform(-1e-5, 1e-5, 200),     # subnormal halves
                        rng.uniform(-3e4, 3e4, 200)]).astype(np.float16)              # overflow to inf
    w = rng.uniform(0.2, 3.0, 8).astype(np.float16) * np.array([1, -1, 1, 1, -1, 1, -1, 1], np.float16)
    want = _half_loop_ref(a, w)
    got = {}
    assert "sj::rhf(" in _cpp(text, RHF) and "sj::rhf(" not in _cpp(text)
    for name, opts in (("lanes", PipelineOptions()), ("rhf", RHF), ("scalar", SCALAR)):
        out = _dispatch(text, (-(-count // nx) * nx, 1, 1), {"a": a, "w": w, "o": np.full(count + 3, 7, np.float16)},
                        opts, tmp_path, name=name, count=count)["o"]
        assert (out[count:] == 7).all(), name                    # idle lanes store nothing
        got[name] = out[:count]
    np.testing.assert_array_equal(got["lanes"].view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(got["rhf"].view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(got["scalar"].view(np.uint16), want.view(np.uint16))
    # the inputs reach infinity, and subnormal products (below 2^-14) in the first step
    assert np.isinf(want).any() and (np.abs((a[600:800] * w[0]).astype(np.float16)) < 6.1e-5).any()


@pytest.mark.parametrize("isa", ["host", "portable", "v3", "rhf"])
def test_half_rounding_of_every_half_pattern(isa, monkeypatch, tmp_path):
    """sj::rh_row (float -> half -> float: AVX-512 / F16C conversions, or sj::rh's bit arithmetic on `portable`)
    on floats at, next to and halfway between every half value, NaN, inf, overflow, zero signs."""
    if isa not in ("host", "rhf"):
        monkeypatch.setenv("SLANGJIT_CPU_ISA", isa)
    opts = RHF if isa == "rhf" else PipelineOptions()       # rhf: sj::rhf's float arithmetic, host ISA
    text = r"""
RWStructuredBuffer<float> x;
RWStructuredBuffer<half> o;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    if (tid.x >= count) return;
    float v = x[tid.x];
    half h = half(0.0);
    for (int k = 0; k < 1; k++)
        h = half(v);
    o[tid.x] = h;
}
"""
    assert "sj_lanes_computeMain" in _cpp(text, opts) and ("sj::rhf(" in _cpp(text, opts)) == (isa == "rhf")
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    base = halves[np.isfinite(halves)].astype(np.float32)
    bits = base.view(np.uint32)
    # the value itself, and floats just above / below it and halfway to the next half (ties)
    with np.errstate(over="ignore"):
        nxt = np.nextafter(base.astype(np.float16), np.float16(np.inf)).astype(np.float32)
    mid = ((base.astype(np.float64) + nxt.astype(np.float64)) / 2).astype(np.float32)
    xs = np.concatenate([base, (bits + 1).view(np.float32), (bits - 1).view(np.float32), mid,
                         np.array([np.nan, np.inf, -np.inf, 65519.0, 65520.0, 70000.0, -0.0, 1e-9, -3e-8], np.float32)])
    n = xs.size
    out = _dispatch(text, (-(-n // 32) * 32, 1, 1), {"x": xs, "o": np.zeros(n, np.float16)}, opts,
                    tmp_path, count=n)["o"]
    with np.errstate(over="ignore"):
        want = xs.astype(np.float16)
    ok = (out.view(np.uint16) == want.view(np.uint16)) | (np.isnan(out) & np.isnan(want))
    assert ok.all(), (xs[~ok][:5], out[~ok][:5], want[~ok][:5])


# ------------------------------------------------------------------------------------------ control flow

DIVERGENT = r"""
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
RWStructuredBuffer<int> tag;
struct Acc { float s[4]; int n; };
Acc step(Acc a, float v, int k)
{
    Acc r = a;
    r.s[k] = a.s[k] + v * float(k + 1);
    r.n = a.n + 1;
    return r;
}
[numthreads(NX, NY, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uint gi : SV_GroupIndex, uniform uint width, uniform uint count)
{
    uint i = tid.y * width + tid.x;
    if (tid.x >= width || i >= count)
        return;
    float v = x[i];
    Acc a;
    for (int k = 0; k < 4; k++) { a.s[k] = 0.0; }
    a.n = 0;
    for (int k = 0; k < 4; k++)
    {
        a = step(a, v, k);
        if (v > 1.0)
        {
            a.s[k] = a.s[k] - 0.5;
            if (k == 2)
                tag[i] = 10 + k;          // a store under a varying mask
        }
    }
    if (v < -2.0)
    {
        tag[i] = -2;
        y[i] = a.s[3];
        return;                           // some lanes leave here
    }
    float s = a.s[0] + a.s[1] + a.s[2] + a.s[3];
    y[i] = s + float(a.n) + float(gi) * 0.5;
}
"""


def _divergent_ref(xs, width, nx, ny):
    n = xs.size
    y, tag = np.zeros(n, np.float32), np.full(n, -1, np.int32)
    for i, v in enumerate(xs):
        tx, ty = i % width, i // width
        gi = (ty % ny) * nx + tx % nx
        s = np.zeros(4, np.float32)
        for k in range(4):
            s[k] = np.float32(s[k] + np.float32(v * np.float32(k + 1)))
            if v > 1.0:
                s[k] = np.float32(s[k] - np.float32(0.5))
                if k == 2:
                    tag[i] = 12
        if v < -2.0:
            tag[i], y[i] = -2, s[3]
            continue
        y[i] = np.float32(np.float32(np.float32(np.float32(s[0] + s[1]) + s[2]) + s[3]) + np.float32(4.0)) + np.float32(gi * 0.5)
    return y, tag


@pytest.mark.parametrize("nx,ny", [(16, 1), (7, 1), (64, 1), (8, 4)])
def test_divergent_control_flow_under_lanes(nx, ny, tmp_path):
    """Varying ifs with stores (masked, lanes_any) and with pure assignments (selects), an early return of
    some lanes, struct/array locals indexed by loop counters, inlined calls, group shapes W does not divide."""
    text = DIVERGENT.replace("NX", str(nx)).replace("NY", str(ny))
    assert "sj_lanes_computeMain" in _cpp(text)
    width = 37 * nx // 10 + 3
    rows = 2 * ny + 1
    count = width * rows - 5
    xs = np.random.default_rng(nx + ny).uniform(-4, 4, count).astype(np.float32)
    gx, gy = -(-width // nx), -(-rows // ny)
    want_y, want_tag = _divergent_ref(xs, width, nx, ny)
    for name, opts in (("lanes", PipelineOptions()), ("scalar", SCALAR)):
        out = _dispatch(text, (gx * nx, gy * ny, 1), {"x": xs, "y": np.full(count + 4, 7, np.float32),
                                                      "tag": np.full(count + 4, -1, np.int32)},
                        opts, tmp_path, name=name, width=width, count=count)
        np.testing.assert_array_equal(out["tag"][:count], want_tag, err_msg=name)
        assert (out["y"][count:] == 7).all() and (out["tag"][count:] == -1).all(), name
        np.testing.assert_allclose(out["y"][:count], want_y, rtol=1e-6, atol=1e-6, err_msg=name)


TRIPS = r"""
RWStructuredBuffer<float> y;
[numthreads(16, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    float s = 0.0;
    for (int k = 0; k < 5; k++)                       // uniform trips
        s += float(k) * 0.5;
    for (int k = 0; k < int(tid.x % 5u); k++)         // trips differ between lanes
        s += 1.0;
    y[tid.x] = s;
}
"""


def test_loops_with_uniform_and_non_uniform_trip_counts(tmp_path):
    """A loop whose trip count varies between lanes is not lane-blocked (the kernel stays scalar); a counted
    loop is; both give the right values."""
    assert "sj_lanes_" not in _cpp(TRIPS)
    uniform_only = TRIPS.replace("for (int k = 0; k < int(tid.x % 5u); k++)", "if (tid.x % 5u > 1u)")
    assert "sj_lanes_computeMain" in _cpp(uniform_only)
    t = np.arange(64)
    for text, want in ((TRIPS, 5.0 + t % 5), (uniform_only, 5.0 + (t % 5 > 1))):
        got = _dispatch(text, (64, 1, 1), {"y": np.zeros(64, np.float32)}, PipelineOptions(), tmp_path)["y"]
        np.testing.assert_array_equal(got, want.astype(np.float32))


# ------------------------------------------------------------------------------------------ accumulation

ACCUM = r"""
[numthreads(NX, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* g, uniform half* gh, uniform int* gi,
                 uniform Atomic<uint>* mx, uniform Atomic<float>* sm, uniform uint n)
{
    if (tid.x >= n) return;
    float v = float(1 + tid.x % 3);
    for (int k = 0; k < 4; k++)
    {
        InterlockedAdd(g[k], v * float(k + 1));          // uniform addresses: privatised, per lane
        InterlockedAdd(gh[k], half(k + 1));              // half sites, summed in float
    }
    InterlockedAdd(g[4 + tid.x % 3], 1.0);               // varying, colliding addresses
    if (tid.x % 5 == 0)
        InterlockedAdd(g[7], 2.0);                       // under a varying mask
    InterlockedAdd(gi[0], int(tid.x));                   // an int add at a uniform address: combined
    mx.max(tid.x * 7u % 1000u);                          // combined max
    sm.add(v);                                           // combined float add
}
"""


@pytest.mark.parametrize("nx,workers", [(16, "1"), (64, "2"), (7, "3")])
def test_accumulation_collisions_under_lanes(nx, workers, monkeypatch, tmp_path):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", workers)
    text = ACCUM.replace("NX", str(nx))
    src = _cpp(text)
    assert "sj_lanes_computeMain" in src and "sj::lacc_flush" in src
    n = 1000
    dev = spy.create_device(type=spy.DeviceType.cpu)
    p = tmp_path / "acc.slang"
    p.write_text(text)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    arrays = {"g": np.zeros(8, np.float32), "gh": np.zeros(4, np.float16), "gi": np.zeros(1, np.int32),
              "mx": np.zeros(1, np.uint32), "sm": np.zeros(1, np.float32)}
    bufs = {name: dev.create_buffer(element_count=a.size, struct_size=a.itemsize, usage=RW, data=a)
            for name, a in arrays.items()}
    args = {name: b.device_address for name, b in bufs.items()}
    for rep in range(2):              # a second dispatch adds onto the first (claims start afresh)
        k.dispatch(thread_count=[-(-n // nx) * nx, 1, 1], n=n, **args)
    got = {name: b.to_numpy().view(arrays[name].dtype)[: arrays[name].size] for name, b in bufs.items()}
    t = np.arange(n)
    v = (1 + t % 3).astype(np.float64)
    want_g = [2 * (kk + 1) * v.sum() for kk in range(4)] + [2 * (t % 3 == j).sum() for j in range(3)] + \
        [2 * 2.0 * (t % 5 == 0).sum()]
    np.testing.assert_array_equal(got["g"], np.array(want_g, np.float32))
    # every worker's float sum is added into the half once per dispatch: a half rounding per worker and dispatch
    np.testing.assert_allclose(got["gh"].astype(np.float64), [2 * (kk + 1) * n for kk in range(4)], rtol=8e-3)
    assert got["gi"][0] == 2 * t.sum()
    assert got["mx"][0] == (t * 7 % 1000).max()
    assert got["sm"][0] == 2 * v.sum()


def test_mlp_learn_gradient_is_lane_blocked_and_matches_the_scalar_kernel(tmp_path):
    """The seed MLP's learnGradient takes the lane path; its gradients agree with the scalar kernel's (the
    float64 comparison is test_cpu_perf_paths.py test_mlp_native_add_gradients_match_float64)."""
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "examples" / "mlp_training"))
    sys.path.insert(0, str(root / "benchmarks"))
    import cpu_mlp
    import train as T
    shader = tmp_path / "mlp.slang"
    shader.write_text(cpu_mlp.patched_source(True))
    src = compile_program([SourceSpec(path=str(shader))], ["learnGradient"], target="cpp").source
    assert "sj_lanes_learnGradient" in src
    params = T.init_parameters(7)
    xy = np.random.default_rng(7).uniform(-1, 1, (3000, 2)).astype(np.float32)
    out = {}
    for name, opts in (("lanes", PipelineOptions()), ("scalar", SCALAR)):
        out[name] = mlp_grads(T, shader, opts, params, xy).astype(np.float64)
    # the same half arithmetic per sample; only the order of the float sums differs
    np.testing.assert_allclose(out["lanes"], out["scalar"], rtol=2e-3, atol=1e-3 * np.abs(out["scalar"]).max())


# ------------------------------------------------------------------------------------------ session 11

LOSSES = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* xs, uniform half* gh, uniform int* dv,
                 uniform Atomic<uint>* mx, uniform Atomic<float>* sm, uniform int* o, uniform uint n)
{
    if (tid.x >= n) return;
    float x = xs[tid.x];
    float l = 0.0;
    for (int k = 0; k < 3; k++)
        l += x * float(k + 1);
    for (int k = 0; k < 2; k++)
        InterlockedAdd(gh[k], half(k + 1));              // privatised half sites
    int d = dv[tid.x];
    if (100 / d > 3)                                      // integer division: masked per active lane only
        o[tid.x] = 1;
    mx.max(bit_cast<uint>(l));                           // a combined max of float bits
    sm.add(l);
}
"""


@pytest.mark.parametrize("workers", ["1", "2", "3"])
def test_combined_bit_cast_max_and_per_worker_flush_over_chunks(workers, monkeypatch, tmp_path):
    """lossBuffer.max(bit_cast<uint>(loss)) is combined over the lanes (no compare-exchange per lane); a chunked
    dispatch (many groups per worker) keeps the privatised sums per worker and flushes them once: exact sums."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", workers)
    src = _cpp(LOSSES)
    assert "sj_lanes_computeMain" in src and "sj_redapply_computeMain_1" in src and "sj_accflush_computeMain" in src
    n = 64 * 150 - 13                    # 150 groups: chunks of a few groups per worker; a partial last block
    rng = np.random.default_rng(3)
    xs = rng.integers(0, 64, n).astype(np.float32)        # small integers: float sums exact in any order
    dv = rng.integers(1, 60, n).astype(np.int32)
    got = _dispatch(LOSSES, (-(-n // 64) * 64, 1, 1),
                    {"xs": xs, "gh": np.zeros(2, np.float16), "dv": dv, "mx": np.zeros(1, np.uint32),
                     "sm": np.zeros(1, np.float32), "o": np.zeros(n, np.int32)}, PipelineOptions(), tmp_path, n=n)
    loss = xs.astype(np.float64) * 6
    assert got["mx"][0] == np.float32(loss.max()).view(np.uint32)
    assert got["sm"][0] == loss.sum()
    np.testing.assert_array_equal(got["o"], (100 // dv > 3).astype(np.int32))
    # a half rounding per worker: n and 2n are exact halves only up to 2048; compare with the rounding bound
    np.testing.assert_allclose(got["gh"].astype(np.float64), [n, 2 * n], rtol=int(workers) * 2.0 ** -11)


COPIES = r"""
struct V { float a[4]; };
V scaled(V v, float c)
{
    V r = v;
    for (int k = 0; k < 4; k++)
        r.a[k] = v.a[k] * c;
    return r;
}
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* x, uniform float* y, uniform uint n)
{
    if (tid.x >= n) return;
    V s;
    for (int k = 0; k < 4; k++)
        s.a[k] = x[tid.x] + float(k);
    V d = s;                       // s is not written after: d reads s's rows
    V e = d;                       // a chain of copies
    V g = s;                       // g is written after: a copy of its own
    g.a[2] = -1.0;
    V t = scaled(e, 3.0);          // the inlined call's copies
    V u = t;
    t.a[1] = 7.0;                  // t written after the copy: u keeps t's old values
    float r = 0.0;
    for (int k = 0; k < 4; k++)
        r += d.a[k] + 10.0 * e.a[k] + 100.0 * g.a[k] + 1000.0 * t.a[k] + 10000.0 * u.a[k];
    V w = g;
    float q = w.a[3];
    w = t;                         // read below: kept
    q += w.a[1];
    w = u;                         // read by nothing after: a dead store, not emitted
    g = t;                         // the same
    y[tid.x] = r + 100000.0 * q;
}
"""


def test_row_copies_read_their_source_only_when_it_stays_unchanged(tmp_path):
    """Whole copies of varying locals become aliases of the source's rows (no row copy) only where neither is
    written afterwards; the results equal numpy's and the scalar kernel's."""
    src = _cpp(COPIES)
    assert "sj_lanes_computeMain" in src
    n = 100
    x = np.random.default_rng(5).integers(-50, 50, n).astype(np.float32)
    k = np.arange(4, dtype=np.float64)
    s = x[:, None].astype(np.float64) + k
    g = s.copy()
    g[:, 2] = -1
    t = 3 * s
    u = t.copy()
    t[:, 1] = 7
    want = ((s + 10 * s + 100 * g + 1000 * t + 10000 * u).sum(1) + 100000 * (g[:, 3] + t[:, 1])).astype(np.float32)
    for opts in (PipelineOptions(), SCALAR):
        got = _dispatch(COPIES, (128, 1, 1), {"x": x, "y": np.zeros(n, np.float32)}, opts, tmp_path, n=n)["y"]
        np.testing.assert_array_equal(got, want)
