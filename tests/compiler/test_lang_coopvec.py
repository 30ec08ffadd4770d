"""Issue 19 group 8, cooperative vectors: `CoopVec<T, N>` (any N) with arithmetic, constructors,
initializer lists, subscripts, element-wise math, min/max/clamp/fma, store/load/fill and
coopVecLoad, differentiated in both modes.  It is a vector of any length (plain arrays on the CPU,
registers on CUDA), so the vector operators and derivative rules serve it.  Expected values: the
reference compiler's CPU output for the same programs (`harness.py run --backend oracle`), with
the derivatives re-derived analytically in float64 below."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

ARITH = """RWStructuredBuffer<float> outputBuffer;
typealias V = CoopVec<float, 8>;
[Differentiable]
V f(V x, V y) { return (x * y + x - y) / (-y) + exp(x); }
[numthreads(1, 1, 1)]
void computeMain()
{
    V x = V(0.5);
    x[3] = 1.0;
    V y = V(2.0);
    var px = diffPair(x);
    var py = diffPair(y);
    bwd_diff(f)(px, py, V(1.0));
    outputBuffer[0] = px.d[3];
    outputBuffer[1] = py.d[3];
    outputBuffer[2] = f(x, y)[3];
    outputBuffer[3] = fwd_diff(f)(diffPair(x, V(1.0)), diffPair(y, V(0.0))).d[3];
}
"""

BUFFERS = """RWStructuredBuffer<float> outputBuffer;
typealias V4 = CoopVec<float, 4>;
typealias V8 = CoopVec<float, 8>;
[Differentiable]
V4 ctor(float a, float b, float c, float d)
{
    V4 r = { a, b, c, d };
    return r * V4(2.0) + V4(a, b, c, d);
}
[Differentiable]
V8 mm(V8 x, V8 y) { return min(x, y) + max(x, y) * tanh(x) + clamp(x, V8(1.5), V8(4.5)) + fma(x, y, V8(1.0)); }
[numthreads(1, 1, 1)]
void computeMain()
{
    for (int i = 0; i < 8; i++) outputBuffer[i] = float(i + 1) * 0.75;
    V8 x = coopVecLoad<8>(outputBuffer, 0);
    V8 y = V8.load(outputBuffer, 4) * 0.5 + V8(1.0);
    V8 z = mm(x, y);
    var px = diffPair(x);
    var py = diffPair(y);
    V8 seed;
    seed.fill(1.0);
    bwd_diff(mm)(px, py, seed);
    z.store(outputBuffer, 32);
    px.d.store(outputBuffer, 64);
    var pa = diffPair(1.0); var pb = diffPair(2.0); var pc = diffPair(3.0); var pd = diffPair(4.0);
    bwd_diff(ctor)(pa, pb, pc, pd, V4(1.0, 10.0, 100.0, 1000.0));
    outputBuffer[0] = pa.d; outputBuffer[1] = pb.d; outputBuffer[2] = pc.d; outputBuffer[3] = pd.d;
}
"""

MATH = """RWStructuredBuffer<float> outputBuffer;
typealias FloatCoopVec4 = CoopVec<float, 4>;
typealias DPFloatCoopVec4 = DifferentialPair<FloatCoopVec4>;
[Differentiable]
FloatCoopVec4 addl(FloatCoopVec4 x)
{
    let one = FloatCoopVec4(1.0);
    return exp2(x) + tanh(x) + log(one + x) + log2(one + x) + atan(x);
}
[Differentiable]
FloatCoopVec4 nodiffUpd(FloatCoopVec4 x, no_diff float value)
{
    FloatCoopVec4 result;
    for (int i = 0; i < 4; ++i)
        result[i] = value * x[i];
    return x + result;
}
[Differentiable]
float dotc(CoopVec<float, 16> a, CoopVec<float, 16> b)
{
    float s = 0.0;
    for (int i = 0; i < 16; i++) s += a[i] * b[i];
    return s;
}
[numthreads(1, 1, 1)]
void computeMain()
{
    let x = FloatCoopVec4(0.0, 0.5, 1.0, 2.0);
    let dOut = FloatCoopVec4(1.0, 2.0, 3.0, 4.0);
    var dx = DPFloatCoopVec4(x, FloatCoopVec4(0.0, 0.0, 0.0, 0.0));
    bwd_diff(addl)(dx, dOut);
    addl(x).store(outputBuffer, 0);
    dx.d.store(outputBuffer, 16);
    var dy = DPFloatCoopVec4(x, FloatCoopVec4(0.0));
    bwd_diff(nodiffUpd)(dy, 3.0f, dOut);
    dy.d.store(outputBuffer, 32);
    fwd_diff(addl)(diffPair(x, dOut)).d.store(outputBuffer, 48);
    CoopVec<float, 16> a, b;
    for (int i = 0; i < 16; i++) { a[i] = float(i); b[i] = 1.0 + float(i) * 0.5; }
    var pa = diffPair(a);
    var pb = diffPair(b);
    bwd_diff(dotc)(pa, pb, 2.0);
    outputBuffer[16] = pa.d[5];
    outputBuffer[17] = pb.d[7];
    outputBuffer[18] = dotc(a, b);
}
"""

ORACLE_BUFFERS = [3.0, 30.0, 300.0, 3000.0, 3.75, 4.5, 5.25, 6.0, 5.674011, 9.11094, 13.570065, 18.485165, 23.933353, 29.93639, 35.74971, 18.499928, 3.794025, 4.509002, 4.608663, 4.899653, 5.257181, 5.626974, 5.000524, 2.000135]
ORACLE_MATH = [1.0, 3.330406, 5.240139, 8.754751, 5.135842, 8.390339, 10.582849, 15.429885, 4.0, 8.0, 12.0, 16.0, 5.135842, 8.390339, 10.582849, 15.429885, 7.0, 14.0, 740.0]


@DEV
def test_arithmetic_both_modes(device, tmp_path):
    x, y = 1.0, 2.0
    # f = (x*y + x - y) / (-y) + exp(x); df/dx = (y + 1) / (-y) + e^x; df/dy = x / y^2
    want = [(y + 1) / -y + math.exp(x), x / y ** 2, (x * y + x - y) / -y + math.exp(x), (y + 1) / -y + math.exp(x)]
    np.testing.assert_allclose(run_program(device, tmp_path, ARITH, 4, "arith"), want, rtol=1e-5)


@DEV
def test_buffers_constructors_min_max_clamp_fma(device, tmp_path):
    got = run_program(device, tmp_path, BUFFERS, 24, "buffers")
    np.testing.assert_allclose(got, ORACLE_BUFFERS, rtol=1e-5)
    # value-pack and initializer-list constructors: d/da of 2*(a..d) + (a..d) = 3 * dOut
    np.testing.assert_allclose(got[:4], [3, 30, 300, 3000])
    x = np.arange(1, 9) * 0.75
    y = np.append(np.arange(2, 9) * 0.75, 0.0) * 0.5 + 1.0   # buffer[8] is still 0 when y is loaded
    mm = np.minimum(x, y) + np.maximum(x, y) * np.tanh(x) + np.clip(x, 1.5, 4.5) + x * y + 1
    np.testing.assert_allclose(got[8:16], mm, rtol=1e-5)


@DEV
def test_math_no_diff_updates_long_vectors(device, tmp_path):
    got = run_program(device, tmp_path, MATH, 19, "math")
    np.testing.assert_allclose(got, ORACLE_MATH, rtol=1e-5)
    x = np.array([0.0, 0.5, 1.0, 2.0])
    dout = np.array([1.0, 2.0, 3.0, 4.0])
    d = np.log(2) * 2 ** x + 1 - np.tanh(x) ** 2 + 1 / (1 + x) + 1 / ((1 + x) * np.log(2)) + 1 / (1 + x * x)
    np.testing.assert_allclose(got[4:8], d * dout, rtol=1e-5)        # reverse mode
    np.testing.assert_allclose(got[12:16], d * dout, rtol=1e-5)      # forward mode
    np.testing.assert_allclose(got[8:12], 4 * dout)                  # x + 3x, the 3 is no_diff
    np.testing.assert_allclose(got[16:19], [2 * (1 + 5 * 0.5), 2 * 7, sum(i * (1 + i * 0.5) for i in range(16))])


@pytest.mark.parametrize("name", ["ARITH", "BUFFERS", "MATH"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name], name.lower())


def test_plain_vector_stays_limited_to_four():
    from slangjit.compiler import SourceSpec, compile_program
    from slangjit.compiler.source import CompileError
    src = "RWStructuredBuffer<float> o;\n[numthreads(1,1,1)] void computeMain() { vector<float,5> v = 1; o[0] = v[0]; }\n"
    with pytest.raises(CompileError, match="E2022"):
        compile_program([SourceSpec(text=src, name="v5")], ["computeMain"], target="cpp")


FUNCTIONAL = """
CoopVec<float, 8> scale(CoopVec<float, 8> x, float s) { return x * s; }
[Differentiable]
float sumsq(CoopVec<float, 8> x) { float t = 0.0; for (int i = 0; i < 8; i++) t += x[i] * x[i]; return t; }
"""


@DEV
def test_functional_api_binds_coopvec(device, tmp_path):
    import slangjit as spy
    p = tmp_path / "fcv.slang"
    p.write_text(FUNCTIONAL)
    m = spy.Module.load_from_file(device, str(p))
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    np.testing.assert_allclose(m.scale(x, 2.0, _result="numpy"), 2 * x)
    t = spy.Tensor.from_numpy(device, x).with_grads(zero=True)
    r = m.sumsq(t, _result="tensor").with_grads()
    np.testing.assert_allclose(r.to_numpy(), (x.astype(np.float64) ** 2).sum(axis=1))
    r.grad.storage.copy_from_numpy(np.ones(2, np.float32))
    m.sumsq.bwds(t, _result=r)
    np.testing.assert_allclose(t.grad.to_numpy(), 2 * x)
