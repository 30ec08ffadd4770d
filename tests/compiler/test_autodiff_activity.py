"""Derivatives that would be lost silently (issue 19, lang-d): check/activity.py and check/diffs.py.

* E6019 (Slang E41022): a call of a non-differentiable function inside differentiable code whose
  result is expected to carry a derivative.  Every case below was run through the reference compiler
  (`python ../shared/conformance/harness.py run FILE --backend oracle`, slangc of slangtorch 1.3.22);
  `REJECT` gives the line and column slangc reports (the call's `(`), `None` that slangc accepts it.
* E6020 (Slang E30027 "'bwd_diff' is not a member of 'f'"): bwd_diff of a [ForwardDifferentiable]-only
  function.
* E6021: an atomic writing a derivative-carrying value (the newest Slang's "derivative is lost in
  atomic operation", tests/autodiff/atomic-loss-of-derivative.slang; the reference compiler here
  cannot compile atomics for the CPU, so the rule is the newest Slang's).
* Unconstrained generic parameters (`f<T>(T x)`) take no derivative (values from the reference compiler).
"""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError

HEAD = "RWStructuredBuffer<float> outputBuffer;\n"          # line 1; the cases start on line 2
MAIN_BWD = """
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    var p = diffPair(2.0, 0.0);
    bwd_diff(f)(p, 1.0);
    outputBuffer[0] = p.d;
}
"""
MAIN_FWD = """
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    outputBuffer[0] = fwd_diff(f)(diffPair(2.0, 1.0)).d;
}
"""
G = "float g(float x) { return x * x; }\n"
H = "[Differentiable] float h(float x) { return x * x; }\n"

# name: (declarations, None = accepted, or (line, col) of slangc's E41022)
CASES = {
    "basic": (G + "[Differentiable] float f(float x) { return g(x) + x; }", (3, 45)),
    "unused_local": (G + "[Differentiable] float f(float x) { float y = g(x); return x; }", None),
    "unused_stmt": (G + "[Differentiable] float f(float x) { g(x); return x; }", None),
    "condition": (G + "[Differentiable] float f(float x) { if (g(x) > 1.0) return x; return 2*x; }", None),
    "condition_local": (G + "[Differentiable] float f(float x) { float c = g(x); if (c > 1.0) return x; return 2*x; }", None),
    "int_result": ("int g(float x) { return int(x); }\n[Differentiable] float f(float x) { return x * g(x); }", None),
    "int_param": ("float g(int x) { return x * 2.0; }\n[Differentiable] float f(float x) { return x * g(int(x)); }", None),
    "no_diff": (G + "[Differentiable] float f(float x) { return x * no_diff(g(x)); }", None),
    "no_diff_keyword": (G + "[Differentiable] float f(float x) { return no_diff g(x) * x; }", None),
    "constant_arg": (G + "[Differentiable] float f(float x) { return x * g(3.0); }", None),
    "constant_local": (G + "[Differentiable] float f(float x) { float k = 3.0; return x * g(k); }", None),
    "constant_negative": (G + "[Differentiable] float f(float x) { return x * g(-2.0); }", None),
    "constant_int": (G + "[Differentiable] float f(float x) { return x * g(3); }", None),
    "detach_arg": (G + "[Differentiable] float f(float x) { return x * g(detach(x)); }", (3, 49)),
    "detach_result": (G + "[Differentiable] float f(float x) { return detach(g(x)) + x; }", (3, 52)),
    "buffer_arg": (G + "[Differentiable] float f(float x) { return x * g(outputBuffer[1]); }", (3, 49)),
    "uniform_arg": (G + "uniform float U;\n[Differentiable] float f(float x) { return g(U) * x; }", (4, 45)),
    "method": ("struct S { float k; float m(float x) { return k * x; } }\n"
               "[Differentiable] float f(float x) { S s = {2.0}; return s.m(x); }", (3, 60)),
    "method_constant": ("struct S { float k; float m(float x) { return k * x; } }\n"
                        "[Differentiable] float f(float x) { S s = {x}; return s.m(1.0); }", None),
    "method_diff_this": ("struct S : IDifferentiable { float k; float m(float x) { return k * x; } }\n"
                         "[Differentiable] float f(float x) { S s = {x}; return s.m(2.0); }", (3, 58)),
    "method_differentiable": ("struct S : IDifferentiable { float k; [Differentiable] float m(float x) { return k * x; } }\n"
                              "[Differentiable] float f(float x) { S s = {x}; return s.m(2.0); }", None),
    "ctor_nondiff_struct": ("struct S { float k; __init(float a) { k = a; } }\n"
                            "[Differentiable] float f(float x) { S s = S(x); return s.k; }", None),
    "ctor_diff_struct": ("struct S : IDifferentiable { float k; __init(float a) { k = a; } }\n"
                         "[Differentiable] float f(float x) { S s = S(x); return s.k; }", (3, 44)),
    "floor": ("[Differentiable] float f(float x) { return floor(x) * x; }", (2, 49)),
    "floor_no_diff": ("[Differentiable] float f(float x) { return no_diff floor(x) * x + no_diff ceil(x); }", None),
    "step": ("[Differentiable] float f(float x) { return step(0.5, x) * x; }", (2, 48)),
    "trunc": ("[Differentiable] float f(float x) { return trunc(x) * x; }", (2, 49)),
    "max_ok": ("[Differentiable] float f(float x) { return max(x, 0.5) + x; }", None),
    "asuint_ok": ("[Differentiable] float f(float x) { return asfloat(asuint(x)) * x; }", None),
    "forward_only_callee": ("[ForwardDifferentiable] float g(float x) { return x * x; }\n"
                            "[Differentiable] float f(float x) { return g(x) + x; }", (3, 45)),
    "forward_in_forward": ("[ForwardDifferentiable] float g(float x) { return x * x; }\n"
                           "[ForwardDifferentiable] float f(float x) { return g(x) + x; }", None),
    "nondiff_in_forward": (G + "[ForwardDifferentiable] float f(float x) { return g(x) + x; }", (3, 52)),
    "loop": (G + "[Differentiable] float f(float x) { float s = 0; for (int i = 0; i < 3; i++) s += g(x); return s; }", (3, 84)),
    "loop_carried": (G + "[Differentiable] float f(float x) { float s = x; float t = 0; "
                         "for (int i = 0; i < 3; i++) { s = t; t = g(x); } return s; }", (3, 105)),
    "loop_dead": (G + "[Differentiable] float f(float x) { float s = x; float t = 0; "
                      "for (int i = 0; i < 3; i++) { t = g(x); } return s; }", None),
    "break_dead": (G + "[Differentiable] float f(float x) { float s = x; for (int i = 0; i < 3; i++) "
                       "{ s = g(x); if (i == 1) { s = x; break; } } return s; }", (3, 85)),
    "nested": (G + "[Differentiable] float f(float x) { return g(g(x)); }", (3, 45)),
    "vector": ("float3 g(float3 x) { return x * x; }\n[Differentiable] float f(float x) { return g(float3(x)).x; }", (3, 45)),
    "phi": (G + "[Differentiable] float f(float x) { float y; if (x > 1) y = g(x); else y = x; return y; }", (3, 62)),
    "overwritten": (G + "[Differentiable] float f(float x) { float y = g(x); y = x; return y; }", None),
    "compound": (G + "[Differentiable] float f(float x) { float s = x; s += g(x); return s; }", (3, 56)),
    "ternary": (G + "[Differentiable] float f(float x) { return x > 1 ? g(x) : x; }", (3, 53)),
    "array_element_store": (G + "[Differentiable] float f(float x) { float a[2]; a[0] = g(x); a[1] = x; return a[0]; }", None),
    "array_init": (G + "[Differentiable] float f(float x) { float a[2] = {g(x), x}; return a[0]; }", (3, 52)),
    "struct_init": ("struct P : IDifferentiable { float v; float w; }\n" + G +
                    "[Differentiable] float f(float x) { P p = {g(x), x}; return p.w; }", (4, 45)),
    "struct_field_store": ("struct P : IDifferentiable { float v; }\n" + G +
                           "[Differentiable] float f(float x) { P p; p.v = g(x); return x + p.v; }", None),
    "store_to_buffer": (G + "[Differentiable] float f(float x) { outputBuffer[1] = g(x); return x; }", None),
    "out_argument": ("void g(float x, out float y) { y = x * x; }\n"
                     "[Differentiable] float f(float x) { float y; g(x, y); return y; }", None),
    "differentiable_call_in_condition": (G + H + "[Differentiable] float f(float x) { if (h(g(x)) > 0) return x; return 2*x; }", (4, 44)),
    "intrinsic_in_condition": (G + "[Differentiable] float f(float x) { if (sin(g(x)) > 0) return x; return 2*x; }", (3, 46)),
    "differentiable_call_unused": (G + H + "[Differentiable] float f(float x) { float y = h(g(x)); return x; }", (4, 50)),
    "generic_callee": ("T g<T>(T x) { return x; }\n[Differentiable] float f(float x) { return g(x) * x; }", (3, 45)),
    "interface_generic_callee": ("interface IF { float m(float x); }\nstruct A : IF { float m(float x) { return x * 2; } }\n"
                                 "float h<T : IF>(T t, float x) { return t.m(x); }\n"
                                 "[Differentiable] float f(float x) { A a; return h(a, x) + x; }", (5, 50)),
    "treat_as_differentiable": ("[TreatAsDifferentiable] float g(float x) { return x * x; }\n"
                                "[Differentiable] float f(float x) { return g(x) + x; }", None),
    # lang-g: components of a vector local built by a constructor (slangc folds the swizzle)
    "vector_ctor_other_component": (G + "[Differentiable] float f(float x) { float2 v = float2(g(x), x); return v.y; }", None),
    "vector_ctor_same_component": (G + "[Differentiable] float f(float x) { float2 v = float2(g(x), x); return v.x; }", (3, 56)),
    "vector_init_list_component": (G + "[Differentiable] float f(float x) { float2 v = {g(x), x}; return v.y; }", None),
    "vector_ctor_index": (G + "[Differentiable] float f(float x) { float2 v = float2(g(x), x); return v[1]; }", None),
    "vector_ctor_swizzle": (G + "[Differentiable] float f(float x) { float3 v = float3(g(x), x, x); return dot(v.yz, v.yz); }", None),
    "vector_ctor_two_reads": (G + "[Differentiable] float f(float x) { float3 v = float3(g(x), x, x); return v.y + v.x; }", (3, 56)),
    "vector_ctor_whole": (G + "[Differentiable] float f(float x) { float2 v = float2(g(x), x); return dot(v, v); }", (3, 56)),
    "vector_ctor_direct": (G + "[Differentiable] float f(float x) { return float2(g(x), x).y; }", None),
    "vector_ctor_assigned": (G + "[Differentiable] float f(float x) { float2 v; v = float2(g(x), x); return v.y; }", None),
    "vector_ctor_copied": (G + "[Differentiable] float f(float x) { float2 v = float2(g(x), x); float2 w = v; return w.y; }", None),
    "vector_ctor_vector_arg": ("float2 g(float x) { return float2(x, x*x); }\n"
                               "[Differentiable] float f(float x) { float3 v = float3(g(x), x); return v.z; }", (3, 56)),
    # lang-g: generic functions and methods of generic structs, decided from the generic types as in Slang
    "generic_ifloat_callee": ("T gt<T : IFloat>(T x) { return x * x; }\n"
                              "[Differentiable] T k<T : IFloat>(T x) { return gt(x) + x; }\n"
                              "[Differentiable] float f(float x) { return k<float>(x); }", (3, 50)),
    "generic_constant_args": (G + "[Differentiable] T k<T : IFloat>(T x) { return T(g(2.0)) + x * T(g(float(1.0))); }\n"
                              "[Differentiable] float f(float x) { return k<float>(x); }", None),
    "generic_unused_local": (G + "[Differentiable] T k<T : IDifferentiable>(T x, float y) { float z = g(y); return x; }\n"
                             "[Differentiable] float f(float x) { return k<float>(x, x); }", None),
    "generic_float_param": (G + "[Differentiable] float k<T : IDifferentiable>(T x, float y) { return g(y); }\n"
                            "[Differentiable] float f(float x) { return k<float>(x, x); }", (3, 71)),
    "generic_unconstrained": ("T gu<T>(T x) { return x; }\n[Differentiable] T k<T>(T x) { return gu(x); }\n"
                              "[Differentiable] float f(float x) { return k<float>(x) * x; }", None),
    "generic_arithmetic": ("T ga<T : IArithmetic>(T x) { return x * x; }\n"
                           "[Differentiable] T k<T : IArithmetic>(T x) { return ga(x); }\n"
                           "[Differentiable] float f(float x) { return k<float>(x) * x; }", None),
    "generic_struct_method": (G + "struct S<T : IFloat> { T c; [Differentiable] float m(float x) { return g(x) * 2.0; } }\n"
                              "[Differentiable] float f(float x) { S<float> s = {1.0}; return s.m(x); }", (3, 73)),
    "generic_struct_method_T": ("T gt<T : IFloat>(T x) { return x * x; }\n"
                                "struct S<T : IFloat> { T c; [Differentiable] T m(T x) { return gt(x) * c; } }\n"
                                "[Differentiable] float f(float x) { S<float> s = {1.0}; return s.m(x); }", (3, 66)),
    "generic_struct_unconstrained": ("T gu<T>(T x) { return x; }\n"
                                     "struct S<T> { T c; [Differentiable] T m(T x) { return gu(x); } }\n"
                                     "[Differentiable] float f(float x) { S<float> s = {1.0}; return s.m(x) * x; }", None),
    # lang-g: [Differentiable] functions the program never calls (slangc checks every one)
    "uncalled": (G + "[Differentiable] float u(float x) { return g(x) + x; }\n"
                 "[Differentiable] float f(float x) { return x * x; }", (3, 45)),
    "uncalled_method": (G + "struct Q { float c; [Differentiable] float m(float x) { return g(x) + c; } }\n"
                        "[Differentiable] float f(float x) { return x * x; }", (3, 65)),
    "uncalled_forward": (G + "[ForwardDifferentiable] float u(float x) { return g(x) + x; }\n"
                         "[Differentiable] float f(float x) { return x * x; }", (3, 52)),
    "uncalled_fine": ("[Differentiable] float u(float x) { return sin(x) + x; }\n"
                      "[Differentiable] float f(float x) { return x * x; }", None),
    "custom_backward": ("void gb(inout DifferentialPair<float> x, float d) { x = diffPair(x.p, 2*x.p*d); }\n"
                        "[BackwardDerivative(gb)] float g(float x) { return x * x; }\n"
                        "[Differentiable] float f(float x) { return g(x) + x; }", None),
}


# Accepted here although slangc 1.3.22 reports E41022: true non-zero derivative rules (the newer Slang's
# behaviour), so no gradient is lost silently (docs/lang-coverage.md).
DIVERGENT_ACCEPTED = {
    "smoothstep": "[Differentiable] float f(float x) { return smoothstep(0.0, 3.0, x) + x; }",
    "fmax": "[Differentiable] float f(float x) { return fmax(x, 0.5) + x; }",
    "wave_sum": "[Differentiable] float f(float x) { return WaveActiveSum(x * x) + x; }",
}


@pytest.mark.parametrize("name", sorted(DIVERGENT_ACCEPTED))
def test_intrinsics_with_true_derivatives_stay_accepted(name):
    _compile(HEAD + DIVERGENT_ACCEPTED[name] + "\n" + MAIN_BWD)


def _compile(src: str):
    return compile_program([SourceSpec(text=src, name="activity.slang")], ["computeMain"], target="cpp")


@pytest.mark.parametrize("main", ["bwd", "fwd"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_reference_compiler(name, main):
    decls, where = CASES[name]
    if "[ForwardDifferentiable] float f" in decls:
        main = "fwd"                  # (bwd_diff of it is E6020, tested below)
    src = HEAD + decls + "\n" + (MAIN_BWD if main == "bwd" else MAIN_FWD)
    if where is None:
        _compile(src)
        return
    with pytest.raises(CompileError) as ei:
        _compile(src)
    d = ei.value.diagnostics[0]
    assert d.code == "E6019", str(ei.value)
    assert (d.loc.line, d.loc.col) == where, str(ei.value)
    assert "no_diff" in d.message and "non-" in d.message


def test_message_names_the_callee_and_level():
    with pytest.raises(CompileError) as ei:
        _compile(HEAD + CASES["forward_only_callee"][0] + MAIN_BWD)
    m = ei.value.diagnostics[0].message
    assert "'g'" in m and "non-backward-differentiable" in m and "'f'" in m


def test_error_reported_without_any_derivative_taken():
    # slangc checks every [Differentiable] function it compiles, differentiated or not
    src = HEAD + G + "[Differentiable] float f(float x) { return g(x) + x; }\n" + \
        "[numthreads(1, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID) { outputBuffer[0] = f(2.0); }\n"
    with pytest.raises(CompileError) as ei:
        _compile(src)
    assert ei.value.code == "E6019" and ei.value.loc.line == 3


# ---------------------------------------------------------------------------------------------- E6020

@pytest.mark.parametrize("form", ["bwd_diff(f)(p, 1.0);", "let r = 1.0; bwd_diff(f)(p, r);"])
def test_bwd_diff_of_forward_only(form):
    src = HEAD + "[ForwardDifferentiable] float f(float x) { return x * x; }\n" + \
        "[numthreads(1, 1, 1)]\nvoid computeMain(uint3 tid : SV_DispatchThreadID)\n{\n" + \
        "    var p = diffPair(2.0, 0.0);\n    var pp = diffPair(p, p); var dp = diffPair(1.0, 1.0);\n    " + form + "\n}\n"
    with pytest.raises(CompileError) as ei:
        _compile(src)
    d = ei.value.diagnostics[0]
    assert d.code == "E6020" and d.loc.line == 8, str(ei.value)
    assert "ForwardDifferentiable" in d.message and "'f'" in d.message


def test_fwd_diff_of_forward_only_still_works():
    src = HEAD + "[ForwardDifferentiable] float f(float x) { return x * x; }\n" + MAIN_FWD
    _compile(src)


def test_bwd_diff_of_user_forward_derivative_is_accepted():
    # issue 19 group 9: bwd_diff transposes a user forward derivative (the newest Slang's behaviour)
    src = HEAD + "DifferentialPair<float> gj(DifferentialPair<float> x) { return diffPair(x.p*x.p, 2*x.p*x.d); }\n" + \
        "[ForwardDifferentiable][ForwardDerivative(gj)] float f(float x) { return x * x; }\n" + MAIN_BWD
    _compile(src)


# ---------------------------------------------------------------------------------------------- E6021

B = ("RWStructuredBuffer<float> floats;\nRWStructuredBuffer<Atomic<float>> af;\nRWStructuredBuffer<int> ints;\n"
     "RWByteAddressBuffer bytes;\n")          # lines 2-5; the function is on line 6

ATOMICS = {
    "interlocked_add": ("InterlockedAdd(floats[0], x);", "InterlockedAdd("),
    "interlocked_add_expr": ("InterlockedAdd(floats[0], x * 2.0);", "InterlockedAdd("),
    "atomic_add": ("af[0].add(x);", "add("),
    "atomic_exchange": ("af[1].exchange(x * 2.0);", "exchange("),
    "byte_address": ("bytes.InterlockedAddF32(0, x);", "InterlockedAddF32("),
    "compare_exchange": ("float prev; InterlockedCompareExchangeFloatBitwise(floats[0], 0.0, x, prev);",
                         "InterlockedCompareExchangeFloatBitwise("),
    "overwritten_original": ("float o; InterlockedAdd(floats[0], detach(x), o); if (x > 0.0) o = x; "
                             "InterlockedAdd(floats[1], o);", "InterlockedAdd(floats[1]"),
    "through_local": ("float y = sin(x); InterlockedMax(floats[0], y);", "InterlockedMax("),
}
ATOMICS_OK = {
    "no_diff": "no_diff InterlockedAdd(floats[1], x); no_diff af[2].add(x);",
    "detach": "InterlockedAdd(floats[1], detach(x)); af[3].add(detach(x));",
    "integers": "InterlockedAdd(ints[0], 1); InterlockedAdd(ints[0], int(x));",
    "constant": "InterlockedAdd(floats[0], 1.0);",
    "original_value": "float o; no_diff InterlockedAdd(floats[0], x, o); InterlockedAdd(floats[1], o); af[0].add(o);",
    "buffer_value": "InterlockedAdd(floats[0], floats[1] * 2.0);",
}


@pytest.mark.parametrize("main", ["bwd", "fwd"])
@pytest.mark.parametrize("name", sorted(ATOMICS))
def test_atomic_losing_a_derivative(name, main):
    stmt, at = ATOMICS[name]
    line = "[Differentiable] float f(float x) { " + stmt + " return x * x; }"
    src = HEAD + B + line + "\n" + (MAIN_BWD if main == "bwd" else MAIN_FWD)
    with pytest.raises(CompileError) as ei:
        _compile(src)
    d = ei.value.diagnostics[0]
    assert d.code == "E6021", str(ei.value)
    assert (d.loc.line, d.loc.col) == (6, line.index(at) + at.index("(") + 1), str(ei.value)
    assert "atomic" in d.message and "no_diff" in d.message and "detach" in d.message


@pytest.mark.parametrize("main", ["bwd", "fwd"])
@pytest.mark.parametrize("name", sorted(ATOMICS_OK))
def test_acknowledged_atomics_compile(name, main):
    src = HEAD + B + "[Differentiable] float f(float x) { " + ATOMICS_OK[name] + " return x * x; }\n" + \
        (MAIN_BWD if main == "bwd" else MAIN_FWD)
    _compile(src)


# ---------------------------------------------------------------------------------------------- E6022, E6023

# slangc (reference compiler): E41031 at the `=`, or accepted (None)
STORES = {
    "value": ("[Differentiable] float f(float x) { outputBuffer[1] = x; return x; }", (2, 53)),
    "through_local": ("[Differentiable] float f(float x) { float y = sin(x) * 2; outputBuffer[1] = y; return x; }", (2, 75)),
    "static_global": ("static float S;\n[Differentiable] float f(float x) { S = x; return x; }", (3, 39)),
    "vector": ("RWStructuredBuffer<float2> vb;\n[Differentiable] float f(float x) { vb[0] = float2(x, 1); return x; }", (3, 43)),
    "in_callee": ("[Differentiable] void f2(float x) { outputBuffer[1] = x * 2; }\n"
                  "[Differentiable] float f(float x) { f2(x); return x; }", (2, 53)),
    "differentiable_call_result": ("[Differentiable] float h(float x) { return x * 3; }\n"
                                   "[Differentiable] float f(float x) { outputBuffer[1] = h(2.0); return x; }", (3, 53)),
    "no_diff_assignment": ("[Differentiable] float f(float x) { no_diff(outputBuffer[1] = x); return x; }", (2, 61)),
    "detach_ok": ("[Differentiable] float f(float x) { outputBuffer[1] = detach(x); return x; }", None),
    "constant_ok": ("[Differentiable] float f(float x) { outputBuffer[1] = 1.0; return x; }", None),
    "nondiff_call_ok": (G + "[Differentiable] float f(float x) { outputBuffer[1] = no_diff g(x); return x; }", None),
    "int_ok": ("RWStructuredBuffer<int> ib;\n[Differentiable] float f(float x) { ib[0] = int(x); return x; }", None),
    "local_ok": ("[Differentiable] float f(float x) { float a[2]; a[0] = x; return a[0]; }", None),
}


@pytest.mark.parametrize("name", sorted(STORES))
def test_store_losing_a_derivative(name):
    decls, where = STORES[name]
    src = HEAD + decls + "\n" + MAIN_FWD
    if where is None:
        _compile(src)
        return
    with pytest.raises(CompileError) as ei:
        _compile(src)
    d = ei.value.diagnostics[0]
    assert d.code == "E6022" and (d.loc.line, d.loc.col) == where, str(ei.value)
    assert "detach()" in d.message


@pytest.mark.parametrize("expr,col", [("x * no_diff(y)", 61), ("x * no_diff(x * x)", 61)])
def test_no_diff_of_a_value(expr, col):
    # slangc E38031 "'no_diff' can only be used to decorate a call or a subscript operation"
    line = "[Differentiable] float f(float x) { float y = x; return " + expr + "; }"
    with pytest.raises(CompileError) as ei:
        _compile(HEAD + line + "\n" + MAIN_FWD)
    d = ei.value.diagnostics[0]
    assert d.code == "E6023" and (d.loc.line, d.loc.col) == (2, line.index("no_diff") + 1), str(ei.value)


def test_no_diff_of_a_call_or_subscript_is_fine():
    _compile(HEAD + G + "[Differentiable] float f(float x) { return x * no_diff(g(x)) + x * no_diff outputBuffer[2]; }\n" + MAIN_FWD)


# ---------------------------------------------------------------------------------------------- values

def _run(device, src: str, n: int = 4) -> np.ndarray:
    module = device.load_module_from_source("activity_values", src)
    kernel = device.create_compute_kernel(device.link_program([module], [module.entry_point("computeMain")]))
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    out = device.create_buffer(element_count=n, struct_size=4, usage=usage,
                               data=np.zeros(n, dtype=np.float32))
    acc = device.create_buffer(element_count=n, struct_size=4, usage=usage, data=np.zeros(n, dtype=np.float32))
    kernel.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": out, "acc": acc})
    return out.to_numpy().view(np.float32)[:n], acc.to_numpy().view(np.float32)[:n]


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
def test_accepted_forms_give_the_reference_values(device):
    # f(x) = x * no_diff(g(x)) + (g(x) > 1 ? x : 0) + x * g(3.0), g(x) = x^2:  df/dx = g(x) + 1 + 9 at x = 2
    src = HEAD + "RWStructuredBuffer<float> acc;\n" + G + \
        "[Differentiable] float f(float x) { float c = g(x); no_diff InterlockedAdd(acc[0], x); " \
        "InterlockedAdd(acc[1], detach(x) * 3.0); " \
        "return x * no_diff(g(x)) + (c > 1.0 ? x : 0.0) + x * g(3.0); }\n" + \
        MAIN_BWD.replace("    outputBuffer[0] = p.d;\n", "    outputBuffer[0] = p.d;\n    outputBuffer[1] = fwd_diff(f)(diffPair(2.0, 1.0)).d;\n")
    out, acc = _run(device, src)
    assert out[0] == pytest.approx(4.0 + 1.0 + 9.0)
    assert out[1] == pytest.approx(4.0 + 1.0 + 9.0)
    # the atomics ran once in each of bwd_diff (its primal replay) and fwd_diff: their writes are kept
    assert acc[0] == pytest.approx(2.0 * 2) or acc[0] == pytest.approx(2.0 * 3)
    assert acc[1] == pytest.approx(acc[0] * 3.0)


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
def test_unconstrained_generic_parameter_takes_no_derivative(device):
    # reference compiler: g<T>(T x) has no derivative w.r.t. x, so d/dx (g(x) * x) = g(x) = 2 (was 4)
    src = HEAD + "[Differentiable] T g<T>(T x) { return x; }\n" \
        "[Differentiable] float f(float x) { return g(x) * x; }\n" + \
        MAIN_BWD.replace("    outputBuffer[0] = p.d;\n", "    outputBuffer[0] = p.d;\n    outputBuffer[1] = fwd_diff(f)(diffPair(2.0, 1.0)).d;\n")
    out, _ = _run(device, src.replace("RWStructuredBuffer<float> outputBuffer;\n", "RWStructuredBuffer<float> outputBuffer;\nRWStructuredBuffer<float> acc;\n"))
    assert out[0] == pytest.approx(2.0) and out[1] == pytest.approx(2.0)


def test_unconstrained_generic_with_differentiable_float_parameter():
    # the float parameter keeps its derivative: d/dx (g(x, x) * x) with g = y*y: 3 x^2 = 12 (reference compiler)
    src = HEAD + "[Differentiable] float g<T>(T x, float y) { return y*y; }\n" \
        "[Differentiable] float f(float x) { return g(x, x) * x; }\n" + MAIN_BWD
    device = spy.create_device(type=spy.DeviceType.cpu) if hasattr(spy, "create_device") else None
    if device is None:
        pytest.skip("no create_device")
    out, _ = _run(device, src.replace("RWStructuredBuffer<float> outputBuffer;\n", "RWStructuredBuffer<float> outputBuffer;\nRWStructuredBuffer<float> acc;\n"))
    assert out[0] == pytest.approx(12.0)


def test_uncalled_functions_are_checked_but_not_emitted():
    # the analysis instantiates an uncalled [Differentiable] function and its callees, then restores the
    # checker: neither reaches the generated code, and a body that fails to check is left alone (as before)
    src = HEAD + "float helper_g(float x) { return x * x; }\n" \
        "[Differentiable] float uncalled_u(float x) { return no_diff(helper_g(x)) + x; }\n" \
        "struct UncalledQ { float c; [Differentiable] float m(float x) { return x * c; } }\n" \
        "[Differentiable] float uncalled_broken(float x) { return undefined_thing(x); }\n" \
        "[Differentiable] float f(float x) { return x * x; }\n" + MAIN_BWD
    prog = _compile(src)
    assert "uncalled_u" not in prog.source and "helper_g" not in prog.source and "UncalledQ" not in prog.source


def test_uncalled_function_reported_next_to_one_that_does_not_check():
    src = HEAD + G + "[Differentiable] float uncalled_broken(float x) { return undefined_thing(x); }\n" \
        "[Differentiable] float u(float x) { return g(x) + x; }\n" \
        "[Differentiable] float f(float x) { return x * x; }\n" + MAIN_BWD
    with pytest.raises(CompileError) as ei:
        _compile(src)
    d = ei.value.diagnostics[0]
    assert d.code == "E6019" and (d.loc.line, d.loc.col) == (4, 45), str(ei.value)
