"""Language breadth (issue 19), continued: whole-module diagnostics at load (group 11), seed 001 verbatim
with `IDiffTensor x` (group 12), static_assert, and realistic rendering / physics / ML programs checked
against float64 references (CPU run on the `device` fixture, NVRTC compile of the CUDA)."""
import os

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError
from slang_programs import fd, nvrtc, run


# ---------------------------------------------------------------------------- group 11: errors at load

def test_module_load_reports_every_error(device):
    src = """
float ok(float x) { return x * 2.0; }
float bad1(float x) { return x + undefined_name; }
float bad2(float x) { float3 v = x; return v.w; }
"""
    with pytest.raises(CompileError) as ei:
        spy.Module.load_from_source(device, "badmod", src)
    codes = [(d.code, d.loc.line) for d in ei.value.diagnostics]
    assert codes == [("E2052", 3), ("E2041", 4)]
    assert "generated kernel" not in str(ei.value)
    m = spy.Module.load_from_source(device, "goodmod", "float ok(float x) { return x * 2.0; }")
    assert m.ok(3.0) == 6.0


# ---------------------------------------------------------------------------- group 12: seed 001 verbatim

SEED_SLANG = """import "slangpy";
[Differentiable]
void polynomial(int idx, float a, float b, float c, IDiffTensor x, IWDiffTensor result)
{
    float xval = x[idx];
    result[idx] = a * xval * xval + b * xval + c;
}
[Differentiable]
void process_inplace(int idx, IRWDiffTensor data)
{
    float value = data[idx];   // Read
    data[idx] = value * 2.0;   // Write
}
[Differentiable]
void linear_layer(
    int idx,
    IDiffTensor weights,  // Shape: [out_features, in_features]
    IDiffTensor bias,     // Shape: [out_features]
    IDiffTensor input,    // Shape: [in_features]
    IWDiffTensor output)  // Shape: [out_features]
{
    uint in_features = weights.shape[1];
    float sum = bias[idx];
    for (uint i = 0; i < in_features; i++)
    {
        sum += weights[idx, i] * input[i];
    }
    output[idx] = sum;
}
"""


@pytest.fixture
def seed_module(device, tmp_path):
    p = tmp_path / "example.slang"
    p.write_text(SEED_SLANG)
    return spy.Module.load_from_file(device, str(p))


def test_seed001_polynomial(device, seed_module):
    module = seed_module
    x = spy.Tensor.from_numpy(device, np.array([1, 2, 3, 4], dtype=np.float32))
    x = x.with_grads(zero=True)
    result = spy.Tensor.empty(device, x.shape, spy.float32)
    module.polynomial(idx=spy.grid(x.shape), a=2, b=8, c=-1, x=x, result=result)
    np.testing.assert_array_equal(result.to_numpy(), [9, 23, 41, 63])
    result = result.with_grads()
    result.grad.copy_from_numpy(np.ones(4, dtype=np.float32))
    module.polynomial.bwds(idx=spy.grid(x.shape), a=2, b=8, c=-1, x=x, result=result)
    np.testing.assert_array_equal(x.grad.to_numpy(), [12, 16, 20, 24])


def test_seed001_inplace(device, seed_module):
    module = seed_module
    x = spy.Tensor.from_numpy(device, np.array([1, 2, 3, 4], dtype=np.float32))
    x = x.with_grads(grad_in=spy.Tensor.ones(device, shape=(4,), dtype=float),
                     grad_out=spy.Tensor.zeros(device, shape=(4,), dtype=float))
    module.process_inplace(idx=spy.grid(x.shape), data=x)
    np.testing.assert_array_equal(x.to_numpy(), [2, 4, 6, 8])
    module.process_inplace.bwds(idx=spy.grid(x.shape), data=x)
    np.testing.assert_array_equal(x.grad_out.to_numpy(), [2, 2, 2, 2])


def test_seed001_linear_layer(device, seed_module):
    module = seed_module
    rng = np.random.default_rng(3)
    out_features, in_features = 3, 5
    weight_init = rng.standard_normal((out_features, in_features)).astype(np.float32)
    bias_init = rng.standard_normal(out_features).astype(np.float32)
    batch_data = rng.standard_normal(in_features).astype(np.float32)
    weights = spy.Tensor.from_numpy(device, weight_init).with_grads(zero=True)
    bias = spy.Tensor.from_numpy(device, bias_init).with_grads(zero=True)
    x = spy.Tensor.from_numpy(device, batch_data).with_grads(zero=True)
    y = spy.Tensor.empty(device, shape=(out_features,), dtype=float).with_grads()
    module.linear_layer(spy.grid(shape=(out_features,)), weights, bias, x, y)
    w64, b64, x64 = weight_init.astype(np.float64), bias_init.astype(np.float64), batch_data.astype(np.float64)
    np.testing.assert_allclose(y.to_numpy(), w64 @ x64 + b64, rtol=1e-5, atol=1e-6)
    g = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    y.grad.copy_from_numpy(g)
    module.linear_layer.bwds(spy.grid(shape=(out_features,)), weights, bias, x, y)
    np.testing.assert_allclose(weights.grad.to_numpy(), np.outer(g, x64), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias.grad.to_numpy(), g, rtol=1e-6)
    np.testing.assert_allclose(x.grad.to_numpy(), w64.T @ g, rtol=1e-5, atol=1e-6)


def test_compile_cli_on_a_non_kernel_says_what_to_do(tmp_path):
    p = tmp_path / "example.slang"
    p.write_text(SEED_SLANG)
    shader = os.path.join(os.path.dirname(spy.__file__), "compiler", "slang")
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(path=str(p))], ["polynomial"], include_paths=[shader])
    msg = str(ei.value)
    assert ei.value.code == "E5002" and "functional API" in msg and "'x'" in msg and "cannot be indexed" not in msg


def test_static_assert_false_is_a_located_error(device):
    with pytest.raises(CompileError) as ei:
        run(device, """
            static const int K = 3;
            [numthreads(1,1,1)]
            void computeMain(uint3 tid : SV_DispatchThreadID) { static_assert(K == 4, "K must be 4"); outputBuffer[0] = K; }""", 1)
    assert ei.value.code == "E3096" and "K must be 4" in str(ei.value) and ei.value.loc.line == 5

# ---------------------------------------------------------------------------- realistic programs, float64 references

RENDER = """
static const int LIGHTS = 3;
struct Light { float3 dir; float intensity; };
struct Surface : IDifferentiable {
    float3 albedo;
    float roughness;
    property float alpha { [Differentiable] get { return roughness * roughness; } }
};
[Differentiable]
float ggxD(float ndh, float a) { float a2 = a * a; float d = ndh * ndh * (a2 - 1.0) + 1.0; return a2 / (3.14159265 * d * d); }
[Differentiable]
float3 shade(Surface s, no_diff float3 n, no_diff float3 v, no_diff Light lights[LIGHTS])
{
    float3 c = float3(0.0);
    for (int i = 0; i <= LIGHTS - 1; ++i)
    {
        float3 l = lights[i].dir;
        float3 h = normalize(l + v);
        float ndl = max(dot(n, l), 0.0);
        c += s.albedo * ndl * lights[i].intensity + ggxD(max(dot(n, h), 0.0), s.alpha) * ndl;
    }
    return c;
}
[numthreads(1,1,1)]
void computeMain()
{
    Light lights[LIGHTS] = { { float3(0, 1, 0), 1.0 }, { normalize(float3(1, 1, 0)), 0.5 }, { normalize(float3(0, 1, 1)), 2.0 } };
    Surface s = { float3(0.8, 0.5, 0.2), 0.5 };
    float3 n = float3(0, 1, 0);
    float3 v = normalize(float3(0.2, 1.0, 0.1));
    float3 c = shade(s, n, v, lights);
    outputBuffer[0] = c.x;
    var ds = diffPair(s);
    bwd_diff(shade)(ds, n, v, lights, float3(1.0, 0.0, 0.0));
    outputBuffer[1] = ds.d.albedo.x;
    outputBuffer[2] = ds.d.roughness;
}"""

PHYSICS = """
struct State : IDifferentiable { float x; float v; };
[Differentiable]
State step(State s, float k, float dt) { State o = { s.x + s.v * dt, s.v - k * s.x * dt }; return o; }
[Differentiable]
float simulate(float k, float x0)
{
    State s = { x0, 0.0 };
    int n = 0;
    while (n < 10) { s = step(s, k, 0.1); n += 1; }
    return s.x;
}
[Differentiable]
float newton(float a)
{
    float x = 1.0;
    [ForceUnroll]
    for (int it = 0; it < 6; it++) x = 0.5 * (x + a / x);
    return x;
}
[numthreads(1,1,1)]
void computeMain()
{
    outputBuffer[0] = simulate(2.0, 1.0);
    var k = diffPair(2.0);
    var x0 = diffPair(1.0);
    bwd_diff(simulate)(k, x0, 1.0);
    outputBuffer[1] = k.d;
    outputBuffer[2] = x0.d;
    var a = diffPair(4.0);
    bwd_diff(newton)(a, 1.0);
    outputBuffer[3] = newton(4.0);
    outputBuffer[4] = a.d;
}"""

MLP = """
struct Layer<let I : int, let O : int> {
    float w[O][I];
    float b[O];
    [Differentiable]
    float[O] eval(float x[I]) {
        float y[O];
        for (int o = 0; o < O; o++) {
            float acc = b[o];
            for (int i = 0; i < I; i++) acc += w[o][i] * x[i];
            y[o] = max(acc, 0.0);
        }
        return y;
    }
}
[Differentiable]
float loss<let I : int, let O : int>(Layer<I, O> l, float x[I]) {
    float y[O] = l.eval(x);
    float s = 0.0;
    for (int o = 0; o < O; o++) s += y[o] * y[o];
    return s;
}
[numthreads(1,1,1)]
void computeMain()
{
    Layer<2, 2> l = { { {1.0, -0.5}, {0.25, 0.75} }, { 0.1, -0.2 } };
    float x[2] = { 2.0, 1.0 };
    outputBuffer[0] = loss(l, x);
    var px = diffPair(x);
    bwd_diff(loss<2, 2>)(l, px, 1.0);
    outputBuffer[1] = px.d[0];
    outputBuffer[2] = px.d[1];
}"""


def _n(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def test_render_ggx_lights_loop(device):
    got = run(device, RENDER, 3)
    lights = [(np.array([0, 1, 0.]), 1.0), (_n([1, 1, 0]), 0.5), (_n([0, 1, 1]), 2.0)]
    n, v = np.array([0, 1, 0.]), _n([0.2, 1, 0.1])

    def shade(alb, rough):
        a, c = rough * rough, np.zeros(3)
        for li, inten in lights:
            h = _n(li + v)
            ndl, ndh = max(n @ li, 0), max(n @ h, 0)
            d = ndh * ndh * (a * a - 1) + 1
            c += alb * ndl * inten + a * a / (3.14159265 * d * d) * ndl
        return c[0]
    alb, e = np.array([0.8, 0.5, 0.2]), 1e-6
    ref = [shade(alb, 0.5), (shade(alb + [e, 0, 0], 0.5) - shade(alb - [e, 0, 0], 0.5)) / (2 * e),
           (shade(alb, 0.5 + e) - shade(alb, 0.5 - e)) / (2 * e)]
    np.testing.assert_allclose(got, ref, rtol=2e-5)


def test_physics_while_counter_and_force_unroll(device):
    got = run(device, PHYSICS, 5)

    def sim(k, x0):
        x, v = x0, 0.0
        for _ in range(10):
            x, v = x + v * 0.1, v - k * x * 0.1
        return x

    def newton(a):
        x = 1.0
        for _ in range(6):
            x = 0.5 * (x + a / x)
        return x
    ref = [sim(2, 1), fd(lambda k: sim(k, 1.0), 2.0), fd(lambda x: sim(2.0, x), 1.0), newton(4.0), fd(newton, 4.0)]
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-6)


def test_mlp_generic_layer_nested_loops(device):
    got = run(device, MLP, 3)
    w, b = np.array([[1.0, -0.5], [0.25, 0.75]]), np.array([0.1, -0.2])

    def loss(x):
        y = np.maximum(w @ x + b, 0.0)
        return float(y @ y)
    x = np.array([2.0, 1.0])
    ref = [loss(x), fd(lambda t: loss(np.array([t, 1.0])), 2.0), fd(lambda t: loss(np.array([2.0, t])), 1.0)]
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["RENDER", "PHYSICS", "MLP"])
def test_realistic_nvrtc(name):
    nvrtc(globals()[name])


def test_module_load_checks_struct_methods(device):
    src = """
struct S { float v; float get() { return v + missing; } [mutating] void set(float x) { v = x; } };
struct G<T> { T v; T twice() { return v + v; } };
float ok(float x) { S s; s.v = x; return x; }
"""
    with pytest.raises(CompileError) as ei:
        spy.Module.load_from_source(device, "badmethods", src)
    assert [(d.code, d.loc.line) for d in ei.value.diagnostics] == [("E2052", 2)]


def test_float_counter_trip_count_matches_float32(device):
    # t = 0, 0.1, ... in float32 passes 1.0 after ten steps (float64 would take eleven); the product of
    # x over the iterations is x^10, so d/dx at 1.1 is 10 * 1.1^9.
    got = run(device, """
        [Differentiable] float f(float x) { float r = 1.0; for (float t = 0.0; t < 1.0; t += 0.1) r *= x; return r; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        { var p = diffPair(1.1, 0.0); bwd_diff(f)(p, 1.0); outputBuffer[0] = p.d; outputBuffer[1] = f(1.1); }""", 2)
    t, n = np.float32(0), 0
    while t < np.float32(1.0):
        t = np.float32(t + np.float32(0.1))
        n += 1
    np.testing.assert_allclose(got, [n * 1.1 ** (n - 1), 1.1 ** n], rtol=1e-5)
