"""Register-resident lane kernels (emit/cpu_lane_vregs.py, CpuOptions.lane_vregs): every varying value a machine
vector, one vector expression per statement.  Results are bit for bit those of the row emitter
(lane_vregs=False) and of the scalar kernel: half arithmetic against numpy's float16, on the host ISA, AVX2 (v3)
and the portable build; masks, early returns, partial blocks, bool values, lane-by-lane statements (gathers,
stores), element-by-element values (integer division, shifts, math calls, float -> uint), privatised adds."""
from __future__ import annotations

import numpy as np
import pytest

from slangjit.compiler.passes.options import PipelineOptions
from slangjit.runtime import cpu_compiler

from cpu_dispatch import cpp_source, dispatch, dispatch_adds   # tests/helpers (on sys.path through tests/conftest.py)

pytestmark = pytest.mark.usefixtures("private_cache")

VREGS = PipelineOptions()                                       # the default: register-resident lanes
ROWS = PipelineOptions().with_cpu(lane_vregs=False)             # the row emitter (emit/cpu_lane_loops.py)
SCALAR = PipelineOptions().with_cpu(lane_loops=False)           # one logical thread at a time
VREGS_RHF = PipelineOptions().with_cpu(half_rows=False)         # half rounding by float arithmetic (sj::rhf)


def _is_vreg(src: str) -> bool:
    return "sj_lanes_computeMain" in src and "SJ_EACH32(" in src


def test_default_and_fallback_representations():
    src = cpp_source(HALF_MV, VREGS)
    assert _is_vreg(src) and "sj::rhv(" in src and "sj::rh_row" not in src
    rows = cpp_source(HALF_MV, ROWS)
    assert "sj_lanes_computeMain" in rows and "SJ_EACH" not in rows and "sj::rh_row<32>" in rows
    assert "sj::rhf(" in cpp_source(HALF_MV, VREGS_RHF)
    # a width that is not a multiple of the machine vector: the row emitter
    odd = HALF_MV.replace("numthreads(32", "numthreads(24")
    src = cpp_source(odd, VREGS)
    assert "sj_lanes_computeMain" in src and "SJ_EACH" not in src


# ------------------------------------------------------------------------------------------ half arithmetic

HALF_MV = r"""
RWStructuredBuffer<half> x;
RWStructuredBuffer<half> w;
RWStructuredBuffer<half> b;
RWStructuredBuffer<half> o;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    uint i = tid.x;
    if (i >= count)
        return;
    half v[4];
    for (int j = 0; j < 4; j++)
        v[j] = x[i * 4 + j];
    for (int r = 0; r < 8; r++)
    {
        half acc = b[r];
        for (int j = 0; j < 4; j++)
            acc = acc + w[r * 4 + j] * v[j];
        if (acc < 0.0h)
            acc = acc * 0.125h;          // a divergent if: a masked select
        o[i * 8 + r] = acc;
    }
}
"""


def _half_mv_ref(x, w, b):
    h = np.float16
    n = x.size // 4
    v = x.reshape(n, 4)
    out = np.zeros((n, 8), h)
    with np.errstate(all="ignore"):
        for r in range(8):
            acc = np.full(n, b[r], h)
            for j in range(4):
                acc = (acc + (w[r * 4 + j] * v[:, j]).astype(h)).astype(h)
            acc = np.where(acc < 0, (acc * h(0.125)).astype(h), acc).astype(h)
            out[:, r] = acc
    return out.reshape(-1)


def half_mv_inputs(seed: int):
    """HALF_MV's x (1000 threads' 4 halves: normal, subnormal and large values), w and b (some subnormal)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-4, 4, 3000), rng.uniform(-2e-5, 2e-5, 500),
                        rng.uniform(-4e3, 4e3, 500)]).astype(np.float16)
    w = (rng.uniform(0.1, 9.0, 32) * rng.choice([-1, 1], 32)).astype(np.float16)
    b = np.concatenate([rng.uniform(-3e-6, 3e-6, 4), rng.uniform(-1, 1, 4)]).astype(np.float16)
    return x, w, b


@pytest.mark.parametrize("isa", ["host", "v3", "portable"])
def test_half_matvec_bit_for_bit(isa, monkeypatch, tmp_path):
    """Half products and sums, each rounded, in vector registers: numpy's float16 bit for bit (normal,
    subnormal, overflowing values), equal to the row emitter and the scalar kernel; count = 1000 leaves a
    partial block (8 of 32 lanes alive)."""
    if isa != "host":
        monkeypatch.setenv("SLANGJIT_CPU_ISA", isa)
    n = 1000
    x, w, b = half_mv_inputs(20)
    want = _half_mv_ref(x, w, b)
    assert np.isinf(want).any() and ((np.abs(want) < 6.1e-5) & (want != 0)).any()
    threads = (-(-n // 32) * 32, 1, 1)
    got = {}
    for name, opts in (("vregs", VREGS), ("rhf", VREGS_RHF), ("rows", ROWS), ("scalar", SCALAR)):
        if name in ("vregs", "rhf"):
            assert _is_vreg(cpp_source(HALF_MV, opts))
        got[name] = dispatch(HALF_MV, threads, {"x": x, "w": w, "b": b, "o": np.zeros(n * 8, np.float16)},
                             opts, tmp_path, name=f"mv_{name}", count=n)["o"]
        np.testing.assert_array_equal(got[name].view(np.uint16), want.view(np.uint16), err_msg=name)


def test_half_rounding_of_every_half_pattern_in_registers(tmp_path):
    """sj::rhv / the vector sj::rhf on floats at, next to and halfway between every half, and the specials."""
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
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    base = halves[np.isfinite(halves)].astype(np.float32)
    bits = base.view(np.uint32)
    with np.errstate(over="ignore"):
        nxt = np.nextafter(base.astype(np.float16), np.float16(np.inf)).astype(np.float32)
    mid = ((base.astype(np.float64) + nxt.astype(np.float64)) / 2).astype(np.float32)
    xs = np.concatenate([base, (bits + 1).view(np.float32), (bits - 1).view(np.float32), mid,
                         np.array([np.inf, -np.inf, 65519.0, 65520.0, 70000.0, -0.0, 1e-9, -3e-8], np.float32)])
    n = xs.size
    with np.errstate(over="ignore"):
        want = xs.astype(np.float16)
    for name, opts in (("vregs", VREGS), ("rhf", VREGS_RHF)):
        assert _is_vreg(cpp_source(text, opts))
        out = dispatch(text, (-(-n // 32) * 32, 1, 1), {"x": xs, "o": np.zeros(n, np.float16)}, opts, tmp_path,
                       name=f"pat_{name}", count=n)["o"]
        np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16), err_msg=name)


# ------------------------------------------------------------------------------------------ control flow, fallbacks

MIXED = r"""
RWStructuredBuffer<float> x;
RWStructuredBuffer<int> idx;
RWStructuredBuffer<float> o;
RWStructuredBuffer<uint> u;
RWStructuredBuffer<int> q;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count, uniform int div)
{
    uint i = tid.x;
    if (i >= count)
        return;
    float s = 0.0;
    int n = 0;
    bool flag = false;
    for (int k = 0; k < 3; k++)
    {
        float g = x[idx[(i + uint(k)) % count]];     // a gather: lane by lane
        int m = int(i) / (k + div);                  // integer division: element by element
        uint sh = (i << uint(k)) >> 1u;              // shifts: element by element
        float t = sin(g) * float(m % 7) + float(sh & 7u);
        if (t > 0.5 && (m & 1) == 0)
        {
            s += t;
            n++;
            flag = !flag;
        }
        else if (t < -0.5 || sh > 20u)
            s -= 0.25 * t;
        s = flag ? s * 2.0 : s;
    }
    if (n > 1 && s > 8.0)
        return;                                      // an early return under a mask, after the loop
    o[i] = s;
    u[i] = uint(abs(s)) ^ uint(n);                   // float -> uint: element by element
    q[i] = n;
}
"""


def _mixed_ref(x, idx, count, div):
    o = np.zeros(count, np.float32)
    u = np.zeros(count, np.uint32)
    q = np.zeros(count, np.int32)
    ret = np.zeros(count, bool)
    f = np.float32
    for i in range(count):
        s, n, flag = f(0), 0, False
        done = False
        for k in range(3):
            g = x[idx[(i + k) % count]]
            m = int(i / (k + div))
            sh = ((i << k) & 0xffffffff) >> 1
            t = f(f(np.sin(np.float64(g))) * f(m % 7)) + f(sh & 7)
            if t > 0.5 and (m & 1) == 0:
                s, n, flag = f(s + t), n + 1, not flag
            elif t < -0.5 or sh > 20:
                s = f(s - f(f(0.25) * t))
            s = f(s * 2) if flag else s
        ret[i] = n > 1 and s > 8
        if not ret[i]:
            o[i], u[i], q[i] = s, np.uint32(int(abs(s))) ^ np.uint32(n), n
    return o, u, q, ret


def test_masks_returns_and_fallbacks_equal_the_row_emitter_and_the_scalar_kernel(tmp_path):
    count, div = 1000, 3
    rng = np.random.default_rng(4)
    x = rng.uniform(-3, 3, count).astype(np.float32)
    idx = rng.permutation(count).astype(np.int32)
    novm = {"vregs": VREGS.with_cpu(vector_math=False), "rows": ROWS.with_cpu(vector_math=False), "scalar": SCALAR}
    src = cpp_source(MIXED, novm["vregs"])
    # the vector kernel, with lane-by-lane statements and element-by-element values inside it
    assert _is_vreg(src) and "sj_e" in src and "sj::el(" in src
    bufs = {"x": x, "idx": idx, "o": np.zeros(count, np.float32), "u": np.zeros(count, np.uint32),
            "q": np.zeros(count, np.int32)}
    threads = (-(-count // 32) * 32, 1, 1)
    got = {name: dispatch(MIXED, threads, bufs, opts, tmp_path, name=f"mixed_{name}", count=count, div=div)
           for name, opts in novm.items()}
    for name in ("vregs", "rows"):
        for k in ("o", "u", "q"):
            np.testing.assert_array_equal(got[name][k].view(np.uint32), got["scalar"][k].view(np.uint32),
                                          err_msg=f"{name} {k}")
    o, u, q, ret = _mixed_ref(x, idx, count, div)
    np.testing.assert_allclose(got["vregs"]["o"], o, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["vregs"]["q"], q)
    assert 20 < ret.sum() < count - 20 and (q[~ret] == 0).any() and (q[~ret] == 2).any()   # both sides taken
    # with libmvec in both lane emitters (the default), the vector kernel still equals the row emitter
    vm = {name: dispatch(MIXED, threads, bufs, opts, tmp_path, name=f"mixed_vm_{name}", count=count, div=div)
          for name, opts in (("vregs", VREGS), ("rows", ROWS))}
    for k in ("o", "u", "q"):
        np.testing.assert_array_equal(vm["vregs"][k].view(np.uint32), vm["rows"][k].view(np.uint32), err_msg=k)


# ------------------------------------------------------------------------------------------ privatised adds

ADDS = r"""
RWStructuredBuffer<half> x;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* g, uniform half* gh, uniform uint n)
{
    if (tid.x >= n) return;
    half v = x[tid.x];
    for (int k = 0; k < 4; k++)
    {
        half p = v * half(k + 1);
        InterlockedAdd(gh[k], p);                 // uniform half address: privatised, per lane, in float
        InterlockedAdd(g[k], float(p) * 0.1f);    // float sums whose order matters
        if (float(v) > 0.25)
            InterlockedAdd(g[4 + k], float(v));   // under a varying mask
    }
}
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_privatised_adds_equal_the_row_emitter(workers, monkeypatch, tmp_path):
    """Per-lane accumulators in the same order as the row emitter's: the same float bits with one worker; the
    sums against float64 within float rounding with two."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", workers)
    assert _is_vreg(cpp_source(ADDS, VREGS)) and "sj::lacc_claim" in cpp_source(ADDS, VREGS)
    n = 4000 + 13                                 # a partial last block
    x = np.random.default_rng(9).uniform(-1, 1, n).astype(np.float16)
    got = {}
    for name, opts in (("vregs", VREGS), ("rows", ROWS)):
        got[name] = dispatch_adds(ADDS, opts, tmp_path, f"adds_{name}", x, n)
    h = np.float16
    p = [(x * h(k + 1)).astype(h).astype(np.float64) for k in range(4)]
    want_g = [(pk * np.float64(np.float32(0.1))).sum() for pk in p] + \
        [x.astype(np.float64)[x.astype(np.float64) > 0.25].sum()] * 4
    np.testing.assert_allclose(got["vregs"]["g"], want_g, rtol=1e-5)
    np.testing.assert_allclose(got["vregs"]["gh"].astype(np.float64), [pk.sum() for pk in p], rtol=4e-3, atol=0.06)
    if workers == "1":
        np.testing.assert_array_equal(got["vregs"]["g"].view(np.uint32), got["rows"]["g"].view(np.uint32))
        np.testing.assert_array_equal(got["vregs"]["gh"].view(np.uint16), got["rows"]["gh"].view(np.uint16))


def test_portable_build_compiles_the_vector_kernel_without_isa_extensions(monkeypatch, tmp_path):
    """`-march=x86-64` (SSE2 only): 4-lane machine vectors, the rounding in integer vector arithmetic."""
    monkeypatch.setenv("SLANGJIT_CPU_ISA", "portable")
    assert not any("avx" in f or "f16c" in f for f in cpu_compiler.isa_flags("portable"))
    n = 77
    x = np.linspace(-3, 3, n * 4).astype(np.float16)
    w = np.linspace(-2, 2, 32).astype(np.float16)
    b = np.linspace(-1, 1, 8).astype(np.float16)
    out = dispatch(HALF_MV, (96, 1, 1), {"x": x, "w": w, "b": b, "o": np.zeros(n * 8, np.float16)}, VREGS, tmp_path,
                   name="portable", count=n)["o"]
    np.testing.assert_array_equal(out.view(np.uint16), _half_mv_ref(x, w, b).view(np.uint16))


# ------------------------------------------------------------------------------------------ known zeros

ZEROS = r"""
RWStructuredBuffer<half> x;
RWStructuredBuffer<half> o;
RWStructuredBuffer<float> f;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    uint i = tid.x;
    if (i >= count)
        return;
    half h = x[i];
    half a[3];
    a[0] = 0.0h; a[1] = 0.0h; a[2] = 0.0h;
    half s = 0.0h;
    s = s + h;                       // +0 + h: exact (h, or +0 for -0)
    a[1] = a[1] - h;                 // +0 - h: exact
    half t = 0.0h;
    if (h > 1.0h)
        t = 1.0h;                    // some lanes: t is no longer a known zero
    t = t + h;
    half u = 0.0h;
    for (int k = 0; k < 2; k++)
        u = u + h;                   // written by the loop: rounded every time
    int j = int(i % 3u);
    for (int k = 0; k < 3; k++)
        a[k] = k == j ? h : a[k];    // an element at a run-time index: a[0..2] no longer known zeros
    half v = a[2] + h;
    half w = a[0] + a[1];
    o[i * 6 + 0] = s; o[i * 6 + 1] = a[1]; o[i * 6 + 2] = t; o[i * 6 + 3] = u; o[i * 6 + 4] = v; o[i * 6 + 5] = w;
    f[i * 4 + 0] = float(t) * 0.5;   // an unrounded sum would show here (no store rounds it)
    f[i * 4 + 1] = float(u) * 0.5;
    f[i * 4 + 2] = float(v) * 0.5;
    f[i * 4 + 3] = float(s) * 0.5;
}
"""


def test_known_zero_adds_skip_rounding_and_stay_exact(tmp_path):
    """A half add or subtract with a value known to be +0 in every lane is left unrounded (exact); values
    written under a mask, in a loop or at a run-time index are not known zeros: bit for bit numpy's float16
    (-0, overflow of 2 x 40000 to inf, inexact sums) and the scalar kernel."""
    src = cpp_source(ZEROS, VREGS)
    assert _is_vreg(src)
    import re
    assert re.search(r"= \(\(s_\d+\[sj_k\]\) \+ \(", src), "s = +0 + h is emitted without rounding"
    assert re.search(r"sj::rhv\(\(t_\d+\[sj_k\]\) \+ \(", src) and re.search(r"sj::rhv\(\(u_\d+\[sj_k\]\) \+ \(", src)
    h = np.float16
    xs = np.array([0.0, -0.0, 1.5, -2.25, 40000.0, -40000.0, 3.0e-5, 1.0009766, 2049.0, 65504.0] * 7,
                  np.float16)[:64]
    n = xs.size
    with np.errstate(all="ignore"):
        s = (h(0) + xs).astype(h)
        a1 = (h(0) - xs).astype(h)
        t = ((xs > 1).astype(h) + xs).astype(h)
        u = (((h(0) + xs).astype(h)) + xs).astype(h)
        a = np.zeros((n, 3), h)
        a[:, 1] = a1
        a[np.arange(n), np.arange(n) % 3] = xs
        v = (a[:, 2] + xs).astype(h)
        w = (a[:, 0] + a[:, 1]).astype(h)
    want_o = np.stack([s, a[:, 1], t, u, v, w], 1).reshape(-1)
    want_f = (np.stack([t, u, v, s], 1).astype(np.float32) * np.float32(0.5)).reshape(-1)
    assert np.isinf(want_o).any()
    for name, opts in (("vregs", VREGS), ("scalar", SCALAR)):
        out = dispatch(ZEROS, (64, 1, 1), {"x": xs, "o": np.zeros(n * 6, np.float16), "f": np.zeros(n * 4, np.float32)},
                       opts, tmp_path, name=f"zero_{name}", count=n)
        np.testing.assert_array_equal(out["o"].view(np.uint16), want_o.view(np.uint16), err_msg=name)
        np.testing.assert_array_equal(out["f"].view(np.uint32), want_f.view(np.uint32), err_msg=name)


UNIFORM_HALVES = r"""
RWStructuredBuffer<half> w;
RWStructuredBuffer<float> z;
RWStructuredBuffer<float> o;
RWStructuredBuffer<half> p;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    if (tid.x >= count) return;
    float zero = z[tid.x];                       // -0.0 in every lane
    half q = p[tid.x];
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++)
        {
            // a uniform half load converted to float (sj::hbc), selected by a varying condition: no arithmetic
            // touches its bits (an add would make a signalling NaN quiet whatever the conversion did)
            float v = zero < 1.0 ? float(w[a * 256 + b]) : 2.0;
            o[tid.x * 65536u + uint(a * 256 + b)] = v;
        }
    half acc = 0.0h;
    for (int j = 0; j < 8; j++)
        acc = acc + w[30000 + j] * q;            // a uniform half load in half arithmetic: sj::hbc
    p[tid.x] = acc;
}
"""


@pytest.mark.parametrize("isa", ["host", "v3", "portable"])
def test_uniform_half_loads_convert_every_pattern_exactly(isa, monkeypatch, tmp_path):
    """A thread-uniform half read from memory reaches the lanes as float through sj::hbc (a normal half converted
    in integer registers and broadcast from memory, the others by the conversion instruction): every one of the
    65536 half patterns bit for bit (float)h, as the scalar kernel converts it (subnormals, infinities, -0; a NaN
    keeps sign and payload and is quiet), and half arithmetic on such values stays numpy's float16."""
    if isa != "host":
        monkeypatch.setenv("SLANGJIT_CPU_ISA", isa)
    src = cpp_source(UNIFORM_HALVES, VREGS)
    assert _is_vreg(src) and src.count("sj::hbc(") == 2
    bits = np.arange(1 << 16, dtype=np.uint32)
    w = bits.astype(np.uint16).view(np.float16)
    with np.errstate(invalid="ignore"):
        want = w.astype(np.float32).view(np.uint32).copy()
    nan = ((bits >> 10) & 0x1F) == 0x1F
    nan &= (bits & 0x3FF) != 0
    want[nan] = ((bits[nan] & 0x8000) << 16) | 0x7FC00000 | ((bits[nan] & 0x3FF) << 13)
    n = 32
    pin = np.linspace(-3, 3, n).astype(np.float16)
    acc = np.zeros(n, np.float16)
    with np.errstate(all="ignore"):
        for j in range(8):
            acc = (acc + (w[30000 + j] * pin).astype(np.float16)).astype(np.float16)
    for name, opts in (("vregs", VREGS), ("scalar", SCALAR)):
        out = dispatch(UNIFORM_HALVES, (n, 1, 1), {"w": w, "z": np.full(n, -0.0, np.float32),
                                                    "o": np.zeros(n * 65536, np.float32), "p": pin.copy()},
                       opts, tmp_path, name=f"uh_{name}", count=n)
        got = out["o"].view(np.uint32).reshape(n, 65536)
        for lane in (0, 17, 31):
            np.testing.assert_array_equal(got[lane], want, err_msg=f"{name} lane {lane}")
        np.testing.assert_array_equal(out["p"].view(np.uint16), acc.view(np.uint16), err_msg=name)
