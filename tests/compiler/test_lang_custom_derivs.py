"""Issue 19 group 9, custom-derivative semantics: a function with only a user [ForwardDerivative]
gives the same gradient under bwd_diff (its forward derivative is transposed) as under fwd_diff;
a [Differentiable] one keeps its body's backward derivative, as the reference compiler does;
`let r = bwd_diff(f)(...)` of a void call; bwd_diff without a function's non-differentiable out
parameters; mixed differentiable / no_diff / integer inout parameters; [TreatAsDifferentiable]
called from differentiable code.  Every value is checked on the CPU (and on CUDA where a GPU is
present) and the generated CUDA is compiled with NVRTC.  Expected values are analytic (float64),
and were compared with the reference compiler (`harness.py run --backend oracle`) where it accepts
the program."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

HEAD = "RWStructuredBuffer<float> outputBuffer;\n"

# cube with a deliberately "wrong" forward derivative: 100 * dx.  bwd_diff must agree with it.
FWD_ONLY = HEAD + """
DifferentialPair<float> cube_fwd(DifferentialPair<float> x)
{
    return diffPair(x.p * x.p * x.p, 100.0 * x.d);
}
[ForwardDerivative(cube_fwd)]
float cube(float x) { return x * x * x; }

[Differentiable]
float g(float x) { return cube(x) * 2.0 + x; }

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    outputBuffer[0] = fwd_diff(cube)(diffPair(2.0, 1.0)).d;
    var bp = diffPair(2.0);
    bwd_diff(cube)(bp, 1.0);
    outputBuffer[1] = bp.d;
    var bp2 = diffPair(2.0);
    bwd_diff(g)(bp2, 1.0);
    outputBuffer[2] = bp2.d;
    outputBuffer[3] = fwd_diff(g)(diffPair(2.0, 1.0)).d;
}
"""

# [Differentiable] + [ForwardDerivative]: the reference compiler (slangc 2026.14) differentiates the
# body under bwd_diff (12 = 3x^2) and uses the user's derivative under fwd_diff (100).
DIFF_AND_FWD = FWD_ONLY.replace("[ForwardDerivative(cube_fwd)]", "[Differentiable]\n[ForwardDerivative(cube_fwd)]")

# Several parameters: a vector, a no_diff scalar, inout and out parameters, a void function.
MULTI = HEAD + """
DifferentialPair<float> f_fwd(DifferentialPair<float> x, DifferentialPair<float3> y, float s)
{
    return diffPair(x.p * y.p.x * s + sin(x.p), (y.p.x * s + cos(x.p)) * x.d + x.p * s * y.d.x);
}
[ForwardDerivative(f_fwd)]
float f(float x, float3 y, no_diff float s) { return x * y.x * s + sin(x); }

void g_fwd(inout DifferentialPair<float> a, out DifferentialPair<float> b, DifferentialPair<float> x)
{
    float ap = a.p;
    a = diffPair(ap * x.p, a.d * x.p + ap * x.d);
    b = diffPair(x.p * x.p, 2.0 * x.p * x.d);
}
[ForwardDerivative(g_fwd)]
void g(inout float a, out float b, float x) { a = a * x; b = x * x; }

[Differentiable]
float use(float x, float y)
{
    float a = y;
    float b;
    g(a, b, x);
    return a + 3.0 * b + f(x, float3(y, 1, 2), 2.0);
}

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    var px = diffPair(0.5);
    var py = diffPair(float3(1.5, 2.0, 3.0));
    bwd_diff(f)(px, py, 2.0, 1.0);
    outputBuffer[0] = px.d;
    outputBuffer[1] = py.d.x;
    outputBuffer[2] = py.d.y;
    var pa = diffPair(2.0, 1.0);
    var pxx = diffPair(3.0);
    bwd_diff(g)(pa, 10.0, pxx);
    outputBuffer[3] = pa.d;
    outputBuffer[4] = pxx.d;
    var u = diffPair(0.5);
    var v = diffPair(1.5);
    bwd_diff(use)(u, v, 1.0);
    outputBuffer[5] = u.d;
    outputBuffer[6] = v.d;
    outputBuffer[7] = fwd_diff(use)(diffPair(0.5, 1.0), diffPair(1.5, 0.0)).d;
    outputBuffer[8] = fwd_diff(use)(diffPair(0.5, 0.0), diffPair(1.5, 1.0)).d;
}
"""

# Forms the reference compiler accepts (values equal to its output).
FORMS = HEAD + """
[Differentiable]
void f(float x, out float y) { y = x * x * 3.0; }

[Differentiable]
float h(float x, no_diff out float cnt) { cnt = detach(x) * 2.0; return x * x; }

[Differentiable]
void m(inout float a, no_diff inout float b, inout int k) { a = a * b + a * a; b = b + 1.0; k = k + 1; }

[TreatAsDifferentiable]
float tad(float x) { return x * 5.0; }

[Differentiable]
float usesTad(float x) { return tad(x) + x * x; }

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    var px = diffPair(2.0);
    let r = bwd_diff(f)(px, 1.0);
    outputBuffer[0] = px.d;
    var ph = diffPair(3.0);
    bwd_diff(h)(ph, 1.0);            // h's no_diff out parameter is not part of bwd_diff(h)
    outputBuffer[1] = ph.d;
    float c = 0.0;
    let v = h(4.0, c);
    outputBuffer[2] = c + v;
    var pa = diffPair(2.0, 1.0);
    float b = 3.0;
    int k = 1;
    bwd_diff(m)(pa, b, k);
    outputBuffer[3] = pa.d;
    outputBuffer[4] = b;
    outputBuffer[5] = float(k);
    var pt = diffPair(3.0);
    bwd_diff(usesTad)(pt, 1.0);
    outputBuffer[6] = pt.d;
    outputBuffer[7] = fwd_diff(usesTad)(diffPair(3.0, 1.0)).p;
}
"""

# bwd_diff of a user forward derivative (free function and method named through an object).
NESTED = HEAD + """
[ForwardDerivative(cubeFwd)]
float cube(float x) { return x * x * x; }

[Differentiable]
DifferentialPair<float> cubeFwd(DifferentialPair<float> x)
{
    return diffPair(x.p * x.p * x.p, 3.0 * x.p * x.p * x.d);
}
struct Cubic
{
    [ForwardDerivative(evalFwd)]
    [NoDiffThis]
    float eval(float x) { return x * x * x; }

    [Differentiable]
    [NoDiffThis]
    DifferentialPair<float> evalFwd(DifferentialPair<float> x)
    {
        return diffPair(x.p * x.p * x.p, 3.0 * x.p * x.p * x.d);
    }
}
[numthreads(1, 1, 1)]
void computeMain()
{
    var x = diffPair(diffPair(3.0, 1.0));
    __bwd_diff(__fwd_diff(cube))(x, diffPair(0.0, 1.0));
    outputBuffer[0] = x.d.p;
    outputBuffer[1] = x.d.d;
    Cubic c;
    var y = diffPair(diffPair(2.0, 2.0));
    __bwd_diff(__fwd_diff(c.eval))(y, diffPair(0.0, 0.5));
    outputBuffer[2] = y.d.p;
    outputBuffer[3] = y.d.d;
}
"""

# A vector `?:` (component-wise, both sides evaluated) differentiates like select(), both in a
# transposed forward derivative and in a body (it was a bare intrinsic with a zero derivative).
VECTOR_SELECT = HEAD + """DifferentialPair<float3> vm_fwd(DifferentialPair<float3> x, DifferentialPair<float3> y)
{
    return diffPair(max(x.p, y.p), x.p > y.p ? x.d : (x.p < y.p ? y.d : (x.d + y.d) * 0.5));
}
[ForwardDerivative(vm_fwd)]
float3 vm(float3 x, float3 y) { return max(x, y); }
[numthreads(1, 1, 1)]
void computeMain()
{
    var u = diffPair(float3(1.0, -2.0, 0.5), float3(0.0));
    var w = diffPair(float3(0.5, -1.0, 2.5), float3(0.0));
    bwd_diff(vm)(u, w, float3(1.0, 2.0, 3.0));
    outputBuffer[0] = u.d.x; // 1
    outputBuffer[1] = w.d.y; // 2
    outputBuffer[2] = w.d.z; // 3
    outputBuffer[3] = u.d.y; // 0
}
"""
VECTOR_TERNARY = HEAD + """[Differentiable]
float3 F(float3 x, float3 y, float3 dx, float3 dy)
{
    return x > y ? dx : (x < y ? dy : (dx + dy) * 0.5);
}
[Differentiable]
float G(float x, float y, float dx, float dy)
{
    return x > y ? dx : dy;
}
[numthreads(1, 1, 1)]
void computeMain()
{
    var u = diffPair(float3(1.0, -2.0, 0.5), float3(0.0));
    var w = diffPair(float3(0.5, -1.0, 2.5), float3(0.0));
    var du = diffPair(float3(0.0), float3(0.0));
    var dw = diffPair(float3(0.0), float3(0.0));
    bwd_diff(F)(u, w, du, dw, float3(1.0, 2.0, 3.0));
    outputBuffer[0] = du.d.x; // 1
    outputBuffer[1] = dw.d.y; // 2
    outputBuffer[2] = dw.d.z; // 3
    var a = diffPair(1.0); var b = diffPair(0.0); var c = diffPair(0.0); var d = diffPair(0.0);
    bwd_diff(G)(a, b, c, d, 5.0);
    outputBuffer[3] = c.d; // 5
}
"""


@DEV
def test_vector_ternary_derivatives(device, tmp_path):
    np.testing.assert_allclose(run_program(device, tmp_path, VECTOR_SELECT, 4, "vsel"), [1, 2, 3, 0])
    np.testing.assert_allclose(run_program(device, tmp_path, VECTOR_TERNARY, 4, "vter"), [1, 2, 3, 5])


@DEV
def test_forward_only_derivative_is_transposed(device, tmp_path):
    got = run_program(device, tmp_path, FWD_ONLY, 4)
    np.testing.assert_allclose(got, [100.0, 100.0, 201.0, 201.0])


@DEV
def test_differentiable_with_forward_derivative_keeps_body_backward(device, tmp_path):
    got = run_program(device, tmp_path, DIFF_AND_FWD, 4)
    np.testing.assert_allclose(got, [100.0, 12.0, 25.0, 201.0])

# Forward-only derivatives of a function of a differentiable struct, a [NoDiffThis] method and a
# generic function, transposed inside one differentiable function.
STRUCT_METHOD_GENERIC = HEAD + """struct P : IDifferentiable { float a; float b; }
DifferentialPair<float> e_fwd(DifferentialPair<P> p, DifferentialPair<float> x)
{
    return diffPair(p.p.a * x.p + p.p.b, p.d.a * x.p * 10.0 + p.p.a * x.d + p.d.b);
}
[ForwardDerivative(e_fwd)]
float e(P p, float x) { return p.a * x + p.b; }

struct M
{
    float k;
    DifferentialPair<float> g_fwd(DifferentialPair<float> x) { return diffPair(k * x.p, 7.0 * k * x.d); }
    [ForwardDerivative(g_fwd)]
    [NoDiffThis]
    float g(float x) { return k * x; }
}
DifferentialPair<T> h_fwd<T : __BuiltinFloatingPointType>(DifferentialPair<T> x) { return diffPair(x.p, x.d * T(3.0)); }
[ForwardDerivative(h_fwd)]
T h<T : __BuiltinFloatingPointType>(T x) { return x; }

[Differentiable]
float use(P p, float x) { M m = { 2.0 }; return e(p, x) + m.g(x) + h(x); }

[numthreads(1, 1, 1)]
void computeMain()
{
    P p = { 3.0, 4.0 };
    var pp = diffPair(p);
    var px = diffPair(2.0);
    bwd_diff(use)(pp, px, 1.0);
    outputBuffer[0] = pp.d.a;   // x*10 = 20
    outputBuffer[1] = pp.d.b;   // 1
    outputBuffer[2] = px.d;     // a + 7k + 3 = 3 + 14 + 3 = 20
    P.Differential dp = { 1.0, 0.0 };
    outputBuffer[3] = fwd_diff(use)(diffPair(p, dp), diffPair(2.0, 0.0)).d;  // 20
}
"""


@DEV
def test_forward_only_struct_method_generic(device, tmp_path):
    got = run_program(device, tmp_path, STRUCT_METHOD_GENERIC, 4, "smg")
    np.testing.assert_allclose(got, [20, 1, 20, 20])


@DEV
def test_forward_only_several_parameters(device, tmp_path):
    got = run_program(device, tmp_path, MULTI, 9)
    x, y = 0.5, 1.5
    # use(x, y) = y*x + 3x^2 + 2*x*y + sin(x)
    dudx = y + 6 * x + 2 * y + math.cos(x)
    dudy = x + 2 * x
    want = [1.5 * 2 + math.cos(0.5), 0.5 * 2, 0.0, 3.0, 2.0 + 10 * 2 * 3.0, dudx, dudy, dudx, dudy]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # and the analytic values against float64 central differences of use(x, y)
    use = lambda a, b: b * a + 3 * a * a + 2 * a * b + math.sin(a)  # noqa: E731
    h = 1e-6
    assert abs((use(x + h, y) - use(x - h, y)) / (2 * h) - dudx) < 1e-6
    assert abs((use(x, y + h) - use(x, y - h)) / (2 * h) - dudy) < 1e-6


@DEV
def test_void_let_nondiff_out_mixed_inout_treat_as_differentiable(device, tmp_path):
    got = run_program(device, tmp_path, FORMS, 8)
    np.testing.assert_allclose(got, [12.0, 6.0, 24.0, 7.0, 3.0, 1.0, 6.0, 24.0])


@DEV
def test_bwd_diff_of_user_forward_derivative(device, tmp_path):
    got = run_program(device, tmp_path, NESTED, 4)
    np.testing.assert_allclose(got, [18.0, 27.0, 12.0, 6.0])


@pytest.mark.parametrize("name", ["FWD_ONLY", "DIFF_AND_FWD", "MULTI", "FORMS", "NESTED",
                                  "VECTOR_SELECT", "VECTOR_TERNARY",
                                  "STRUCT_METHOD_GENERIC"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name], name.lower())
