"""Issue 19 group 6, derivatives attached from outside a function: `__func_extension fwd_diff(f)(...)`
and `bwd_diff(f)(...)` for free functions, overloads, value-generic functions and member methods
(the method's `this` pair comes first), used directly and from differentiable code in both modes;
and `__func_extension __apply(f)(...)`, a forward pass returning a backward-pass context.
Slang accepts the form with `-experimental-feature`; slangjit without a flag.  The expected values
are the reference compiler's output for the same programs (`harness.py run --backend oracle` with
`-xslang -experimental-feature`), and are checked by hand in the comments."""
from __future__ import annotations

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

# foo: fwd 10*dx; bar: bwd gives (7, 9) * dOut; useBar = x * bar(x, x): 4 + 2 * (7 + 9) = 36;
# useFoo = foo(x) * x forward: 10 * 2 + 8 = 28.
FREE = """RWStructuredBuffer<float> outputBuffer;

float foo(float x) { return x * x * x; }

__func_extension fwd_diff(foo)(DifferentialPair<float> x) -> DifferentialPair<float>
{
    return diffPair(foo(x.p), 10.0 * x.d);
}

float bar(float x, float y) { return x * y; }
__func_extension bwd_diff(bar)(inout DifferentialPair<float> x, inout DifferentialPair<float> y, float dOut)
{
    x = diffPair(x.p, 7.0 * dOut);
    y = diffPair(y.p, 9.0 * dOut);
}

[Differentiable]
float useBar(float x) { return x * bar(x, x); }
[ForwardDifferentiable]
float useFoo(float x) { return foo(x) * x; }


[numthreads(1, 1, 1)]
void computeMain()
{
    outputBuffer[0] = fwd_diff(foo)(diffPair(2.0, 1.0)).d;
    var a = diffPair(1.0);
    var b = diffPair(2.0);
    bwd_diff(bar)(a, b, 1.0);
    outputBuffer[1] = a.d;
    outputBuffer[2] = b.d;
    var c = diffPair(2.0);
    bwd_diff(useBar)(c, 1.0);
    outputBuffer[3] = c.d;
    outputBuffer[4] = fwd_diff(useFoo)(diffPair(2.0, 1.0)).d;
}
"""

# overloads by parameter type; a value-generic function (bwd 4*N); a member method's bwd.
OVERLOADS = """RWStructuredBuffer<float> outputBuffer;

float sq(float x) { return x * x; }
float2 sq(float2 x) { return x * x; }

__func_extension fwd_diff(sq)(DifferentialPair<float> x) -> DifferentialPair<float>
{
    return diffPair(x.p * x.p, 3.0 * x.d);
}
__func_extension fwd_diff(sq)(DifferentialPair<float2> x) -> DifferentialPair<float2>
{
    return diffPair(x.p * x.p, 5.0 * x.d);
}

float scaleN<let N : int>(float x) { return x * float(N); }
__func_extension<let N : int> bwd_diff(scaleN<N>)(inout DifferentialPair<float> x, float dOut)
{
    x = diffPair(x.p, 4.0 * float(N) * dOut);
}

struct S : IDifferentiable
{
    float k;
    [Differentiable]
    float mul(float x) { return k * x; }
}
__func_extension bwd_diff(S.mul)(inout DifferentialPair<S> self, inout DifferentialPair<float> x, float dOut)
{
    S.Differential ds;
    ds.k = 11.0 * dOut;
    self = diffPair(self.p, ds);
    x = diffPair(x.p, 13.0 * dOut);
}

[numthreads(1, 1, 1)]
void computeMain()
{
    outputBuffer[0] = fwd_diff(sq)(diffPair(2.0, 1.0)).d;
    outputBuffer[1] = fwd_diff(sq)(diffPair(float2(2.0, 1.0), float2(1.0, 2.0))).d.y;
    var a = diffPair(1.0);
    bwd_diff(scaleN<3>)(a, 1.0);
    outputBuffer[2] = a.d;
    S s = { 3.0 };
    var ps = diffPair(s);
    var px = diffPair(2.0);
    bwd_diff(S.mul)(ps, px, 1.0);
    outputBuffer[3] = ps.d.k;
    outputBuffer[4] = px.d;
}
"""

# a member method's fwd and bwd and a generic function's fwd and bwd, from differentiable code:
# bwd: dk = 2 * 11 = 22, dx = 2 * 13 + 4 * 2 = 34; fwd: 2 * (17 + 19) + 5 * 2 = 82, primal 16.
IN_CODE = """RWStructuredBuffer<float> outputBuffer;

float scaleN<let N : int>(float x) { return x * float(N); }
__func_extension<let N : int> bwd_diff(scaleN<N>)(inout DifferentialPair<float> x, float dOut)
{
    x = diffPair(x.p, 4.0 * float(N) * dOut);
}
__func_extension<let N : int> fwd_diff(scaleN<N>)(DifferentialPair<float> x) -> DifferentialPair<float>
{
    return diffPair(x.p * float(N), 5.0 * float(N) * x.d);
}

struct S : IDifferentiable
{
    float k;
    float mul(float x) { return k * x; }
}
__func_extension bwd_diff(S.mul)(inout DifferentialPair<S> self, inout DifferentialPair<float> x, float dOut)
{
    S.Differential ds;
    ds.k = 11.0 * dOut;
    self = diffPair(self.p, ds);
    x = diffPair(x.p, 13.0 * dOut);
}
__func_extension fwd_diff(S.mul)(DifferentialPair<S> self, DifferentialPair<float> x) -> DifferentialPair<float>
{
    return diffPair(self.p.k * x.p, 17.0 * x.d + 19.0 * self.d.k);
}

[Differentiable]
float user(S s, float x) { return s.mul(x) * 2.0 + scaleN<2>(x); }

[numthreads(1, 1, 1)]
void computeMain()
{
    S s = { 3.0 };
    var ps = diffPair(s);
    var px = diffPair(2.0);
    bwd_diff(user)(ps, px, 1.0);
    outputBuffer[0] = ps.d.k;
    outputBuffer[1] = px.d;
    S.Differential ds = { 1.0 };
    outputBuffer[2] = fwd_diff(user)(diffPair(s, ds), diffPair(2.0, 1.0)).d;
    outputBuffer[3] = fwd_diff(user)(diffPair(s, ds), diffPair(2.0, 1.0)).p;
}
"""

# __apply: the forward pass returns (primal, context); the context's operator() is the backward
# pass (here deliberately 10x the true derivative, so its use is visible): cube at 2: 30 * 4 = 120,
# and 240 through `use` = 2 * cube.
APPLY = """RWStructuredBuffer<float> outputBuffer;
float cube(float x) { return x * x * x; }
struct CubeContext
{
    float sqr;
    void operator()(out float dx, float dOut)
    {
        dx = dOut * 30.0 * sqr;
    }
};
__func_extension __apply(cube)(float x) -> Tuple<float, CubeContext>
{
    let sqr = x * x;
    return makeTuple(sqr * x, CubeContext(sqr));
}
[Differentiable]
float use(float x) { return cube(x) * 2.0; }
[numthreads(1, 1, 1)]
void computeMain()
{
    var p = diffPair(2.0);
    bwd_diff(cube)(p, 1.0);
    outputBuffer[0] = p.d;
    var q = diffPair(2.0);
    bwd_diff(use)(q, 1.0);
    outputBuffer[1] = q.d;
}
"""

# two differentiable parameters: d/dx = 3 * 10 * 2 + 1 = 61, d/dy = 2 * 5 * 10 * 2 = 200.
APPLY2 = """RWStructuredBuffer<float> outputBuffer;
float wsum(float x, float y) { return x * 3.0 + y * y; }
struct WCtx
{
    float y;
    int n;
    void operator()(out float dx, out float dy, float dOut)
    {
        dx = dOut * float(n) * 10.0;
        dy = dOut * 2.0 * y * 10.0;
    }
};
__func_extension __apply(wsum)(float x, float y) -> Tuple<float, WCtx>
{
    WCtx c = { y, 3 };
    return makeTuple(x * 3.0 + y * y, c);
}
[Differentiable]
float use(float x, float y) { return wsum(x, y) * 2.0 + x; }
[numthreads(1, 1, 1)]
void computeMain()
{
    var px = diffPair(2.0);
    var py = diffPair(5.0);
    bwd_diff(use)(px, py, 1.0);
    outputBuffer[0] = px.d;
    outputBuffer[1] = py.d;
    outputBuffer[2] = use(2.0, 5.0);
}
"""


@DEV
def test_apply_forms(device, tmp_path):
    np.testing.assert_allclose(run_program(device, tmp_path, APPLY, 2, "apply"), [120, 240])
    np.testing.assert_allclose(run_program(device, tmp_path, APPLY2, 3, "apply2"), [61, 200, 64])


@DEV
def test_free_function_extensions(device, tmp_path):
    np.testing.assert_allclose(run_program(device, tmp_path, FREE, 5), [10, 7, 9, 36, 28])


@DEV
def test_overloads_generic_and_method_extensions(device, tmp_path):
    np.testing.assert_allclose(run_program(device, tmp_path, OVERLOADS, 5), [3, 10, 12, 11, 13])


@DEV
def test_extensions_used_by_differentiable_code(device, tmp_path):
    np.testing.assert_allclose(run_program(device, tmp_path, IN_CODE, 4), [22, 34, 82, 16])


@pytest.mark.parametrize("name", ["FREE", "OVERLOADS", "IN_CODE", "APPLY", "APPLY2"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name], name.lower())


def test_apply_needs_a_tuple_result():
    src = "float f(float x) { return x; }\n__func_extension __apply(f)(float x) -> float { return x; }\n"
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(text=src, name="apply")], [], target="cpp")
    assert ei.value.diagnostics[0].code == "E0012" and "Tuple<Result, Context>" in str(ei.value)


def test_mismatched_extension_is_a_located_error():
    src = ("float f(float x) { return x; }\n"
           "__func_extension fwd_diff(f)(DifferentialPair<float> x, float y) -> DifferentialPair<float>"
           " { return x; }\n"
           "RWStructuredBuffer<float> outputBuffer;\n"
           "[numthreads(1,1,1)] void computeMain() { outputBuffer[0] = fwd_diff(f)(diffPair(1.0, 1.0)).d; }\n")
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(text=src, name="bad")], ["computeMain"], target="cpp")
    assert ei.value.diagnostics[0].code == "E6013" and ei.value.diagnostics[0].loc.line == 2


@pytest.mark.parametrize("decl", [
    "__func_extension fwd_diff(fooo)(DifferentialPair<float> x) -> DifferentialPair<float> { return x; }",
    "[ForwardDerivativeOf(fooo)] DifferentialPair<float> dfoo(DifferentialPair<float> x) { return x; }",
])
def test_misspelt_target_is_a_located_error(decl):
    src = ("float foo(float x) { return x * x; }\n" + decl + "\n"
           "RWStructuredBuffer<float> outputBuffer;\n"
           "[numthreads(1,1,1)] void computeMain() { outputBuffer[0] = 1.0; }\n")
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(text=src, name="typo")], ["computeMain"], target="cpp")
    d = ei.value.diagnostics[0]
    assert d.code == "E2052" and "fooo" in d.message and d.loc.line == 2
