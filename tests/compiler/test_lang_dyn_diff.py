"""Issue 19 group 3, differentiable interface values: dynamic values (existentials) of an interface
that extends IDifferentiable carry a derivative, so gradients reach the parameters a material was
built from (`IGetter g; if (id == 0) g = Lin(p, p * p); else g = Quad(p);`), through arrays of
materials, [mutating] differentiable methods and values returned from differentiable functions;
property requirements (get / set) and generic methods are called through dynamic values.  Both
modes, on the CPU and CUDA (and the generated CUDA compiled by NVRTC).  Expected values: float64
finite differences of the same formulas written in numpy (the reference compiler crashes or times
out on several of these programs, and its forward mode through a dynamic `this` gives 0)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


DIFF_THIS = """RWStructuredBuffer<float> outputBuffer;
[anyValueSize(16)]
interface IGetter : IDifferentiable
{
    [Differentiable]
    float get(float x);
}
struct Lin : IGetter
{
    float a; float b;
    [Differentiable]
    float get(float x) { return a * x + b; }
}
struct Quad : IGetter
{
    float a;
    [Differentiable]
    float get(float x) { return a * x * x; }
}
[Differentiable]
float use(float p, float x, int id)
{
    IGetter g;
    if (id == 0) g = Lin(p, p * p);
    else g = Quad(p);
    return g.get(x);
}
[numthreads(1, 1, 1)]
void computeMain()
{
    for (int id = 0; id < 2; id++)
    {
        var pp = diffPair(2.0);
        var px = diffPair(3.0);
        bwd_diff(use)(pp, px, id, 1.0);
        outputBuffer[id * 4 + 0] = use(2.0, 3.0, id);
        outputBuffer[id * 4 + 1] = pp.d;
        outputBuffer[id * 4 + 2] = px.d;
        outputBuffer[id * 4 + 3] = fwd_diff(use)(diffPair(2.0, 1.0), diffPair(3.0, 0.0), id).d;
    }
}
"""


def use_ref(p, x, kind):
    return p * x + p * p if kind == 0 else p * x * x


@DEV
def test_gradient_reaches_the_dynamic_value(device, tmp_path):
    got = run_program(device, tmp_path, DIFF_THIS, 8, "dyn_this")
    want = []
    for kind in (0, 1):
        dp = fd(lambda p: use_ref(p, 3.0, kind), 2.0)
        want += [use_ref(2.0, 3.0, kind), dp, fd(lambda x: use_ref(2.0, x, kind), 3.0), dp]
    np.testing.assert_allclose(got, want, rtol=1e-5)


MATERIALS = """RWStructuredBuffer<float> outputBuffer;
[anyValueSize(16)]
interface IMaterial : IDifferentiable
{
    [Differentiable]
    float3 eval(float3 wi);
    [mutating]
    [Differentiable]
    void scaleBy(float s);
}
struct Diffuse : IMaterial
{
    float3 albedo;
    [Differentiable]
    float3 eval(float3 wi) { return albedo * max(wi.z, 0.0); }
    [mutating]
    [Differentiable]
    void scaleBy(float s) { albedo = albedo * s; }
}
struct Conductor : IMaterial
{
    float eta; float k;
    [Differentiable]
    float3 eval(float3 wi) { return float3(eta * wi.x, k * wi.y * wi.y, eta * k); }
    [mutating]
    [Differentiable]
    void scaleBy(float s) { eta = eta * s; }
}
[Differentiable]
IMaterial makeMat(int kind, float3 p)
{
    if (kind == 0) return Diffuse(p);
    Conductor c; c.eta = p.x; c.k = p.y + p.z; return c;
}
[Differentiable]
float render(float3 params[3], int kinds[3], float3 wi, float s)
{
    IMaterial mats[3];
    for (int i = 0; i < 3; i++) mats[i] = makeMat(kinds[i], params[i]);
    mats[1].scaleBy(s);
    float total = 0.0;
    for (int i = 0; i < 3; i++)
    {
        IMaterial m = mats[i];
        float3 f = m.eval(wi);
        total += f.x + 2.0 * f.y + 3.0 * f.z;
    }
    return total;
}
[numthreads(1, 1, 1)]
void computeMain()
{
    float3 params[3] = { float3(0.5, 0.25, 1.0), float3(1.5, 0.5, 0.25), float3(0.3, 0.2, 0.1) };
    int kinds[3] = { KINDS };
    float3 wi = float3(0.6, 0.48, 0.64);
    outputBuffer[0] = render(params, kinds, wi, 2.0);
    var pp = diffPair(params);
    var pw = diffPair(wi);
    var ps = diffPair(2.0);
    bwd_diff(render)(pp, kinds, pw, ps, 1.0);
    for (int i = 0; i < 3; i++) { outputBuffer[1 + 3 * i] = pp.d[i].x; outputBuffer[2 + 3 * i] = pp.d[i].y;
                                  outputBuffer[3 + 3 * i] = pp.d[i].z; }
    outputBuffer[10] = pw.d.x; outputBuffer[11] = pw.d.y; outputBuffer[12] = pw.d.z; outputBuffer[13] = ps.d;
    float3 dp[3] = { float3(1.0, 0.0, 0.0), float3(0.0, 1.0, 0.0), float3(0.0, 0.0, 0.5) };
    outputBuffer[14] = fwd_diff(render)(diffPair(params, dp), kinds, diffPair(wi, float3(0.0, 1.0, 0.0)),
                                        diffPair(2.0, 1.0)).d;
}
"""


def render_ref(params, wi, s, kinds):
    total = 0.0
    for i in range(3):
        p = params[i]
        if kinds[i] == 0:
            alb = p * s if i == 1 else p
            f = alb * max(wi[2], 0.0)
        else:
            eta, k = p[0] * (s if i == 1 else 1.0), p[1] + p[2]
            f = np.array([eta * wi[0], k * wi[1] ** 2, eta * k])
        total += f[0] + 2 * f[1] + 3 * f[2]
    return total


@DEV
@pytest.mark.parametrize("kinds", [(0, 1, 0), (1, 0, 1)])
def test_material_array_built_from_parameters(device, tmp_path, kinds):
    src = MATERIALS.replace("KINDS", ", ".join(map(str, kinds)))
    got = run_program(device, tmp_path, src, 15, "dyn_materials_%d%d%d" % kinds)
    P = np.array([[0.5, 0.25, 1.0], [1.5, 0.5, 0.25], [0.3, 0.2, 0.1]])
    W = np.array([0.6, 0.48, 0.64])
    want = [render_ref(P, W, 2.0, kinds)]
    for i in range(3):
        for j in range(3):
            def f(h, i=i, j=j):
                Q = P.copy()
                Q[i, j] += h
                return render_ref(Q, W, 2.0, kinds)
            want.append(fd(f, 0.0))
    for j in range(3):
        def g(h, j=j):
            V = W.copy()
            V[j] += h
            return render_ref(P, V, 2.0, kinds)
        want.append(fd(g, 0.0))
    ds = fd(lambda s: render_ref(P, W, s, kinds), 2.0)
    want.append(ds)
    want.append(want[1] + want[5] + 0.5 * want[9] + want[11] + ds)       # the forward direction
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


PROPS_GENERIC = """RWStructuredBuffer<float> outputBuffer;
interface IFoo { float f(); }
[anyValueSize(8)]
interface IScaled
{
    [Differentiable]
    float calc<T : IFoo>(T t, float x);
    property float gain { get; set; }
}
struct A : IFoo { float f() { return 5.0; } }
struct C : IFoo { float f() { return 7.0; } }
struct B : IScaled
{
    float g;
    [Differentiable]
    float calc<T : IFoo>(T t, float x) { return t.f() * x * x * g; }
    property float gain { get { return g; } set { g = newValue; } }
}
struct D : IScaled
{
    float g;
    [Differentiable]
    float calc<T : IFoo>(T t, float x) { return t.f() + sin(x) * g; }
    property float gain { get { return g; } set { g = newValue * 2.0; } }
}
[Differentiable]
float test(uint id, float x)
{
    IScaled obj = no_diff(createDynamicObject<IScaled>(id, 1.0));
    obj.gain = 3.0;
    A objA;
    C objC;
    return obj.calc(objA, x) + obj.calc(objC, x * x) + obj.gain;
}
[numthreads(1, 1, 1)]
void computeMain()
{
    for (uint id = 0; id < 2; id++)
    {
        var p = diffPair(2.0);
        bwd_diff(test)(id, p, 1.0);
        outputBuffer[id * 3 + 0] = test(id, 2.0);
        outputBuffer[id * 3 + 1] = p.d;
        outputBuffer[id * 3 + 2] = fwd_diff(test)(id, diffPair(3.0, 1.0)).d;
    }
}
"""


def props_ref(kind, x):
    if kind == 0:                                   # B: the setter stores 3
        return 5 * x * x * 3 + 7 * x ** 4 * 3 + 3
    return 5 + math.sin(x) * 6 + 7 + math.sin(x * x) * 6 + 6     # D: the setter stores 2 * 3


@DEV
def test_property_and_generic_method_through_dynamic_value(device, tmp_path):
    got = run_program(device, tmp_path, PROPS_GENERIC, 6, "dyn_props")
    want = []
    for kind in (0, 1):
        want += [props_ref(kind, 2.0), fd(lambda x: props_ref(kind, x), 2.0), fd(lambda x: props_ref(kind, x), 3.0)]
    np.testing.assert_allclose(got, want, rtol=1e-5)


OUT_PARAMS = """RWStructuredBuffer<float> outputBuffer;
struct Sample : IDifferentiable { float3 w; float pdf; }
interface IBSDF
{
    [Differentiable]
    void evalOut(float3 wi, out float3 f, inout float acc);
    [Differentiable]
    Sample sample(float3 n, float u);
    property float roughness { get; }
}
struct Diffuse : IBSDF
{
    float3 albedo;
    [Differentiable]
    void evalOut(float3 wi, out float3 f, inout float acc) { f = albedo * wi.z; acc += f.x * f.y; }
    [Differentiable]
    Sample sample(float3 n, float u) { Sample s; s.w = n * u; s.pdf = u * u; return s; }
    property float roughness { get { return 1.0; } }
}
struct Glossy : IBSDF
{
    float r;
    [Differentiable]
    void evalOut(float3 wi, out float3 f, inout float acc) { f = wi * r; acc = acc * wi.x; }
    [Differentiable]
    Sample sample(float3 n, float u) { Sample s; s.w = n + u; s.pdf = exp(u); return s; }
    property float roughness { get { return r; } }
}
IBSDF pick(int id)
{
    if (id == 0) { Diffuse d; d.albedo = float3(0.5, 0.25, 1.0); return d; }
    Glossy g; g.r = 0.3; return g;
}
[Differentiable]
float shade(int id, float3 wi, float u)
{
    IBSDF b = no_diff(pick(id));
    float3 f;
    float acc = u;
    b.evalOut(wi, f, acc);
    Sample s = b.sample(wi, u);
    return f.x + acc + s.pdf + dot(s.w, wi) * b.roughness;
}
[numthreads(1, 1, 1)]
void computeMain()
{
    float3 wi = float3(0.2, 0.3, 0.9);
    for (int id = 0; id < 2; id++)
    {
        outputBuffer[id * 4 + 0] = shade(id, wi, 0.4);
        var pw = diffPair(wi);
        var pu = diffPair(0.4);
        bwd_diff(shade)(id, pw, pu, 1.0);
        outputBuffer[id * 4 + 1] = pw.d.z;
        outputBuffer[id * 4 + 2] = pu.d;
        outputBuffer[id * 4 + 3] = fwd_diff(shade)(id, diffPair(wi, float3(1.0, 0.0, 0.0)), diffPair(0.4, 0.0)).d;
    }
}
"""


def shade_ref(kind, wi, u):
    wi = np.asarray(wi, dtype=np.float64)
    if kind == 0:
        f = np.array([0.5, 0.25, 1.0]) * wi[2]
        acc = u + f[0] * f[1]
        w, pdf, rough = wi * u, u * u, 1.0
    else:
        f = wi * 0.3
        acc = u * wi[0]
        w, pdf, rough = wi + u, math.exp(u), 0.3
    return f[0] + acc + pdf + float(w @ wi) * rough


@DEV
def test_out_inout_struct_results_and_getter(device, tmp_path):
    got = run_program(device, tmp_path, OUT_PARAMS, 8, "dyn_out")
    wi = np.array([0.2, 0.3, 0.9])
    want = []
    for kind in (0, 1):
        ez, ex = np.array([0, 0, 1.0]), np.array([1.0, 0, 0])
        want += [shade_ref(kind, wi, 0.4), fd(lambda h: shade_ref(kind, wi + h * ez, 0.4), 0.0),
                 fd(lambda u: shade_ref(kind, wi, u), 0.4), fd(lambda h: shade_ref(kind, wi + h * ex, 0.4), 0.0)]
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("name", ["DIFF_THIS", "MATERIALS", "PROPS_GENERIC", "OUT_PARAMS"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name].replace("KINDS", "0, 1, 0"), name.lower())


PARAM_AND_LOOP = """RWStructuredBuffer<float> outputBuffer;

[anyValueSize(16)]
interface IMaterial : IDifferentiable
{
    [Differentiable]
    float eval(float x);
}
struct A : IMaterial { float k; [Differentiable] float eval(float x) { return k * x * x; } }
struct B : IMaterial { float k; float c; [Differentiable] float eval(float x) { return k * sin(x) + c; } }

[Differentiable]
float shadeWith(IMaterial m, float x) { return m.eval(x) * 2.0; }

[Differentiable]
IMaterial build(int id, float p)
{
    if (id == 0) return A(p);
    return B(p, p * p);
}

[Differentiable]
float scene(float p, float x, int n)
{
    IMaterial mats[2];
    mats[0] = build(0, p);
    mats[1] = build(1, p * 0.5);
    float s = 0.0;
    for (int i = 0; i < n; i++)
        s += shadeWith(mats[i % 2], x + float(i));
    return s;
}

[numthreads(1, 1, 1)]
void computeMain()
{
    var pp = diffPair(1.5);
    var px = diffPair(0.3);
    bwd_diff(scene)(pp, px, 3, 1.0);
    outputBuffer[0] = scene(1.5, 0.3, 3);
    outputBuffer[1] = pp.d;
    outputBuffer[2] = px.d;
    outputBuffer[3] = fwd_diff(scene)(diffPair(1.5, 1.0), diffPair(0.3, 0.0), 3).d;
}
"""


def scene_ref(p, x, n=3):
    s = 0.0
    for i in range(n):
        xx = x + i
        if i % 2 == 0:
            v = p * xx * xx
        else:
            q = p * 0.5
            v = q * math.sin(xx) + q * q
        s += 2.0 * v
    return s


@DEV
def test_interface_parameter_array_element_and_runtime_loop(device, tmp_path):
    # a dynamic value passed to an interface-typed parameter, taken from an array by a run-time index
    # in a loop whose trip count is a parameter (replayed in reverse mode)
    got = run_program(device, tmp_path, PARAM_AND_LOOP, 4, "dyn_param_loop")
    dp = fd(lambda p: scene_ref(p, 0.3), 1.5)
    np.testing.assert_allclose(got, [scene_ref(1.5, 0.3), dp, fd(lambda x: scene_ref(1.5, x), 0.3), dp], rtol=1e-5)


def test_cuda_compiles_param_and_loop():
    nvrtc_compiles(PARAM_AND_LOOP, "dyn_param_loop")
