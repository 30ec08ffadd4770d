"""Unroll-and-jam of independent counted loop nests in lane-blocked CPU kernels (passes/cpu_jam.py,
CpuOptions.jam) and the unrolled innermost loops (CpuOptions.lane_unroll): half matrix-vector products keep
their per-operation rounding bit for bit; loops whose iterations are not independent are left alone."""
from __future__ import annotations

import re

import numpy as np
import pytest

from slangjit.compiler.ir import nodes as ir
from slangjit.compiler.passes import cpu_jam
from slangjit.compiler.passes.options import PipelineOptions

from cpu_dispatch import cpp_source, dispatch   # tests/helpers (on sys.path through tests/conftest.py)

pytestmark = pytest.mark.usefixtures("private_cache")

SCALAR = PipelineOptions().with_cpu(lane_loops=False)
NOJAM = PipelineOptions().with_cpu(jam=1, lane_unroll=0)
UNROLL = PipelineOptions().with_cpu(lane_unroll=16)
JAMMED = r"\(\(i_\d+ \* (\d+)\) \+ (\d+)\)"       # a jammed copy's row index in the C++


def _cpp(text: str, options: PipelineOptions = PipelineOptions()) -> str:
    return cpp_source(text, options, "jam.slang")


_dispatch = dispatch


# A layer: out = leaky(W x + b) with W OUT x IN in a buffer, x per thread; all half, rounded per operation.
MATVEC = r"""
RWStructuredBuffer<half> xs;
RWStructuredBuffer<half> w;
RWStructuredBuffer<half> b;
RWStructuredBuffer<half> o;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    uint t = tid.x;
    if (t >= count)
        return;
    half x[NIN];
    for (int j = 0; j < NIN; j++)
        x[j] = xs[t * NIN + j];
    half res[NOUT];
    for (int i = 0; i < NOUT; i++)
    {
        half r = b[i];
        for (int j = 0; j < NIN; j++)
            r += w[i * NIN + j] * x[j];
        res[i] = r;
    }
    for (int i = 0; i < NOUT; i++)
    {
        half v = res[i];
        if (v < 0.0h)
            v = v * 0.01h;
        o[t * NOUT + i] = v;
    }
}
"""


def _matvec_ref(xs, w, b, nin, nout):
    h = np.float16
    x = xs.reshape(-1, nin)
    W = w.reshape(nout, nin)
    out = np.empty((x.shape[0], nout), h)
    with np.errstate(all="ignore"):
        for i in range(nout):
            r = np.full(x.shape[0], b[i], h)
            for j in range(nin):
                r = (r + (W[i, j] * x[:, j]).astype(h)).astype(h)
            out[:, i] = np.where(r < 0, (r * h(0.01)).astype(h), r)
    return out.ravel()


@pytest.mark.parametrize("nin,nout", [(4, 16), (16, 4), (3, 6), (5, 7)])
def test_jammed_matvec_rounds_as_numpy_and_the_scalar_kernel(nin, nout, tmp_path):
    """Output rows interleaved U at a time (U = 4, 2 or 3 dividing the row count; 7 rows: not jammed),
    every product and sum rounded to half: bit for bit numpy's float16, the unjammed lanes and the scalar
    kernel, over values that reach subnormals and infinity."""
    text = MATVEC.replace("NIN", str(nin)).replace("NOUT", str(nout))
    src = _cpp(text)
    assert "sj_lanes_computeMain" in src
    jammed = {(int(u), int(k)) for u, k in re.findall(JAMMED, src)}     # row i' * U + k, k = 1 .. U - 1
    if nout == 7:
        assert not jammed
    else:
        u = next(u for u in (4, 3, 2) if nout % u == 0)
        assert jammed == {(u, k) for k in range(1, u)}
        assert not re.search(JAMMED, _cpp(text, NOJAM))
    assert f"#pragma GCC unroll {nin}" in _cpp(text, UNROLL) and "#pragma GCC unroll" not in src
    rng = np.random.default_rng(nin * 100 + nout)
    count = 1000
    xs = np.concatenate([rng.uniform(-3, 3, (800, nin)), rng.uniform(-1e-4, 1e-4, (100, nin)),
                         rng.uniform(-300, 300, (100, nin))]).astype(np.float16).ravel()
    w = rng.uniform(-2, 2, nin * nout).astype(np.float16)
    w[0] = np.float16(250.0)                      # 250 * 300 overflows half: infinities in some rows
    b = rng.uniform(-1, 1, nout).astype(np.float16)
    want = _matvec_ref(xs, w, b, nin, nout)
    assert np.isinf(want).any()
    for name, opts in (("jam", PipelineOptions()), ("unroll", UNROLL), ("nojam", NOJAM), ("scalar", SCALAR)):
        out = _dispatch(text, (1024, 1, 1), {"xs": xs, "w": w, "b": b, "o": np.full(count * nout + 5, 7, np.float16)},
                        opts, tmp_path, name=name, count=count)["o"]
        assert (out[count * nout:] == 7).all(), name
        np.testing.assert_array_equal(out[: count * nout].view(np.uint16), want.view(np.uint16), err_msg=name)


CARRIED = r"""
RWStructuredBuffer<float> xs;
RWStructuredBuffer<float> o;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    uint t = tid.x;
    if (t >= count)
        return;
    float x = xs[t];
    float acc = 1.0;            // carried from one outer iteration to the next: not independent
    float res[8];
    float last[8];
    for (int i = 0; i < 8; i++)
    {
        for (int j = 0; j < 3; j++)
            acc = acc * 0.5 + x * float(i + j);
        res[i] = acc;
    }
    for (int i = 0; i < 8; i++)
    {
        float s = 0.0;
        for (int j = 0; j < 2; j++)
            s += res[i] * float(j + 1);
        last[0] = s;            // one element for every iteration: the last one wins
        res[i] = s + last[0];
    }
    float tot = 0.0;
    for (int i = 0; i < 8; i++)
        tot += res[i] * float(i + 1);
    o[t] = tot + last[0];
}
"""


def _carried_ref(x):
    x = x.astype(np.float32)
    f = np.float32
    acc = np.ones_like(x)
    res = []
    for i in range(8):
        for j in range(3):
            acc = (acc * f(0.5) + x * f(i + j)).astype(f)
        res.append(acc)
    last = None
    for i in range(8):
        s = np.zeros_like(x)
        for j in range(2):
            s = (s + res[i] * f(j + 1)).astype(f)
        last = s
        res[i] = (s + last).astype(f)
    tot = np.zeros_like(x)
    for i in range(8):
        tot = (tot + res[i] * f(i + 1)).astype(f)
    return (tot + last).astype(f)


def test_loops_with_carried_values_are_not_jammed(tmp_path):
    """A value carried across outer iterations, or one array element written by every iteration, keeps the
    loop as it is (the results equal numpy's float32 and the scalar kernel's)."""
    text = CARRIED
    src = _cpp(text)
    assert "sj_lanes_computeMain" in src
    assert not re.search(JAMMED, src)
    x = np.random.default_rng(3).uniform(-2, 2, 500).astype(np.float32)
    want = _carried_ref(x)
    for name, opts in (("lanes", PipelineOptions()), ("scalar", SCALAR)):
        out = _dispatch(text, (512, 1, 1), {"xs": x, "o": np.zeros(500, np.float32)}, opts, tmp_path,
                        name=name, count=500)["o"]
        np.testing.assert_allclose(out, want, rtol=1e-6, err_msg=name)


def test_jam_plan_refuses_dependent_iterations():
    """The pass's own legality test on IR: an accumulator read before it is written in an iteration, or an
    element written at an index other than the counter, refuses; the independent nest is taken."""
    from slangjit.compiler import types as T
    i, j, r, acc, out = (ir.Var("i", T.INT), ir.Var("j", T.INT), ir.Var("r", T.FLOAT), ir.Var("acc", T.FLOAT),
                         ir.Var("out", T.ArrayType(T.FLOAT, 8)))

    def ref(v):
        return ir.LocalRef(v.type, v)

    def c(x, t=T.INT):
        return ir.Const(t, x)

    def loop(v, n, body):
        return ir.Loop("for", [ir.VarDecl(v, c(0))], ir.Binary(T.BOOL, "<", ref(v), c(n)),
                       ir.IncDec(T.INT, "++", False, ref(v)), ir.Block(body))

    def nest(first, store_index):
        inner = loop(j, 4, [ir.ExprStmt(ir.Assign(T.FLOAT, "+=", ref(r), ir.Convert(T.FLOAT, ref(j))))])
        store = ir.ExprStmt(ir.Assign(T.FLOAT, "=", ir.Index(T.FLOAT, ref(out), store_index), ref(r)))
        return loop(i, 8, [first, inner, store])

    ok = nest(ir.VarDecl(r, c(0.0, T.FLOAT)), ref(i))
    assert cpu_jam._plan(ok, 4) is not None
    carried = nest(ir.ExprStmt(ir.Assign(T.FLOAT, "+=", ref(r), ref(acc))), ref(i))
    assert cpu_jam._plan(carried, 4) is None
    fixed = nest(ir.VarDecl(r, c(0.0, T.FLOAT)), c(0))
    assert cpu_jam._plan(fixed, 4) is None
    shifted = nest(ir.VarDecl(r, c(0.0, T.FLOAT)), ir.Binary(T.INT, "+", ref(i), c(1)))
    assert cpu_jam._plan(shifted, 4) is None


REDUCE = r"""
RWStructuredBuffer<float> xs;
RWStructuredBuffer<int> imax;
RWStructuredBuffer<int> imin;
RWStructuredBuffer<uint> umax;
RWStructuredBuffer<uint> umin;
RWStructuredBuffer<int> isum;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count, uniform float shift,
                 uniform Atomic<float>* fsum)
{
    if (tid.x >= count)
        return;
    float x = xs[tid.x];
    float f = 0.0;
    for (int k = 0; k < 2; k++)
        f += x;
    int v = int(f) - 1000;
    InterlockedMax(imax[0], v);
    InterlockedMin(imin[0], v);
    InterlockedMax(umax[0], uint(v + 2000));
    InterlockedMin(umin[0], uint(v + 2000));
    InterlockedAdd(isum[0], v);
    fsum.add(f * shift);
}
"""


@pytest.mark.parametrize("count,lo,hi,shift", [(1000, -900, 400, 1.0), (77, -990, -500, 1.0), (77, 0, 0, -0.0)])
def test_block_reductions_are_exact_with_masked_lanes(count, lo, hi, shift, tmp_path):
    """Combined atomics of a lane block reduced in one vectorised loop, the masked-off lanes (the last block's
    idle threads, the returned ones) contributing the operation's identity: signed and unsigned max / min
    (all-negative values included), integer sums, and a float sum of exact values (-0.0 stays -0.0)."""
    src = _cpp(REDUCE)
    assert "reduction(max:sj_r)" in src and "reduction(min:sj_r)" in src and "reduction(+:sj_r)" in src
    x = np.random.default_rng(count).integers(lo, hi + 1, count).astype(np.float32) / 2 + 500
    f = 2 * x
    v = f.astype(np.int64) - 1000
    init = {"imax": np.array([-2**31], np.int32), "imin": np.array([2**31 - 1], np.int32),
            "umax": np.array([0], np.uint32), "umin": np.array([2**32 - 1], np.uint32),
            "isum": np.array([0], np.int32), "fsum": np.array([-0.0], np.float32)}
    for name, opts in (("lanes", PipelineOptions()), ("scalar", SCALAR)):
        out = _dispatch(REDUCE, (1024, 1, 1), {"xs": x, **{k: a.copy() for k, a in init.items()}}, opts, tmp_path,
                        name=name, count=count, shift=shift)
        assert out["imax"][0] == v.max() and out["imin"][0] == v.min(), name
        assert out["umax"][0] == (v + 2000).max() and out["umin"][0] == (v + 2000).min(), name
        assert out["isum"][0] == v.sum(), name
        want = np.float32(-0.0)                  # the buffer's -0.0 plus every value in order (exact values)
        for t in f * np.float32(shift):
            want = np.float32(want + t)
        assert out["fsum"][0] == want and np.signbit(out["fsum"][0]) == np.signbit(want), name
