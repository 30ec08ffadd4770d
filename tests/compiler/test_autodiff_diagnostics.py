"""Autodiff diagnostics (issue 3, acceptance point 3): every user-facing error the AD work adds, with its code
and line.  Each source marks the line the diagnostic must point at with a `//@` comment.

Codes: E6001 loop without a known trip-count bound under bwd_diff whose body has effects (so it cannot be replayed), E6002/E3020 differentiating a function with
no body, E6004 no derivative rule for a core function, E6005 core function with out parameters not
differentiable, E6006 reverse-mode storage too large, E6008 switch fall-through under bwd_diff, E6010
DifferentialPair / Differential of a non-differentiable type, E6011 fwd_diff/bwd_diff of something that is not
a function, E6012 differentiating a function that is not differentiable (also nested), and bad
custom-derivative signatures (an autodiff code, E6013 today, at the attribute or the derivative function).  Where the compiler today accepts a wrong program silently (or reports a misleading error), the
test states the correct behaviour and is a strict xfail with the reason, so fixing the compiler flips it.
"""
from __future__ import annotations

import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError

HEAD = "RWStructuredBuffer<float> outputBuffer;\n"


def kernel(body: str) -> str:
    return "[numthreads(1, 1, 1)]\nvoid computeMain(uint3 tid : SV_DispatchThreadID)\n{\n" + body + "\n}\n"


def marked_line(src: str, marker: str = "//@") -> int:
    lines = [i + 1 for i, ln in enumerate(src.splitlines()) if marker in ln]
    assert len(lines) == 1, f"expected one {marker} marker"
    return lines[0]


def message(e: CompileError) -> str:
    """The diagnostic's own text (str(e) also echoes the source line)."""
    return e.diagnostics[0].message


def compile_src(src: str):
    return compile_program([SourceSpec(text=src, name="m")], ["computeMain"])


def expect_error(src: str, code: str, marker: str = "//@") -> CompileError:
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    e = ei.value
    want = marked_line(src, marker)
    assert (e.code, e.loc.line) == (code, want), f"got {e.code} at line {e.loc.line}, want {code} at {want}:\n{e}"
    return e


BWD1 = "    var p = diffPair(1.5, 0.0);\n    bwd_diff(f)(p, 1.0);\n    outputBuffer[0] = p.d;"
FWD1 = "    outputBuffer[0] = fwd_diff(f)(diffPair(1.5, 1.0)).d;"

# ============================================================================================== E6001

UNBOUNDED = {
    "while": """
[Differentiable]
float f(float x)
{
    float y = x;
    while (y < 10.0) //@
        y = y * 2.0;
    return y;
}
""",
    "for-with-parameter-bound": """
[Differentiable]
float f(float x, int n)
{
    float y = x;
    for (int i = 0; i < n; i++) //@
        y = y * x;
    return y;
}
""",
    "do-while": """
[Differentiable]
float f(float x)
{
    float y = x;
    int i = 0;
    do //@
    {
        y = sin(y) + x;
        i++;
    } while (y < 2.0);
    return y;
}
""",
    "inner-loop-of-bounded-outer": """
[Differentiable]
float f(float x)
{
    float y = x;
    for (int i = 0; i < 3; i++)
    {
        while (y < 4.0) //@
            y = y + x * x;
        y = y * 0.5;
    }
    return y;
}
""",
}


def _bwd_call(name: str) -> str:
    if "parameter" in name:
        return "    var p = diffPair(1.5, 0.0);\n    bwd_diff(f)(p, 3, 1.0);\n    outputBuffer[0] = p.d;"
    return BWD1


def _with_effect(src: str) -> str:
    """The loop's body also writes a buffer, so reverse mode cannot replay its iterations."""
    return src.replace("        y = y * 2.0;", "    { y = y * 2.0; outputBuffer[1] += 1.0; }") \
              .replace("        y = y * x;", "    { y = y * x; outputBuffer[1] += 1.0; }") \
              .replace("        i++;", "        i++;\n        outputBuffer[1] += 1.0;") \
              .replace("            y = y + x * x;", "        { y = y + x * x; outputBuffer[1] += 1.0; }")


@pytest.mark.parametrize("name", list(UNBOUNDED))
def test_e6001_loop_without_bound_under_bwd_diff(name):
    # Without a bound, reverse mode replays the loop's iterations (recompute.py) - unless the body has
    # effects outside its locals: then it is E6001, asking for [MaxIters].
    src = HEAD + _with_effect(UNBOUNDED[name]) + kernel(_bwd_call(name))
    assert "outputBuffer[1] += 1.0" in src
    e = expect_error(src, "E6001")
    msg = message(e)
    line = marked_line(src)
    assert "'f'" in msg and f"line {line}" in msg, msg       # names the function and the loop's line
    assert "[MaxIters" in msg and "replayed" in msg, msg        # and says how to fix it


def _unbounded_ref(name: str, x: float) -> float:
    import math
    y = x
    if name == "while":
        while y < 10.0:
            y *= 2.0
    elif name.startswith("for"):
        for _ in range(3):
            y *= x
    elif name == "do-while":
        while True:
            y = math.sin(y) + x
            if not y < 2.0:
                break
    else:
        for _ in range(3):
            while y < 4.0:
                y += x * x
            y *= 0.5
    return y


@pytest.mark.parametrize("name", list(UNBOUNDED))
def test_pure_loops_without_bound_are_replayed(name, tmp_path):
    # The same loops without the effect: reverse mode replays them, gradients match finite differences.
    import numpy as np
    import slangjit as spy
    dev = spy.create_device(type=spy.DeviceType.cpu)
    src = HEAD + UNBOUNDED[name].replace(" //@", "") + kernel(_bwd_call(name))
    path = tmp_path / "m.slang"
    path.write_text(src)
    k = dev.create_compute_kernel(dev.load_program(str(path), ["computeMain"]))
    buf = dev.create_buffer(size=8, usage=spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource,
                            data=np.zeros(2, np.float32))
    k.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": buf})
    h = 1e-6
    want = (_unbounded_ref(name, 1.5 + h) - _unbounded_ref(name, 1.5 - h)) / (2 * h)
    np.testing.assert_allclose(buf.to_numpy().view(np.float32)[0], want, rtol=1e-4)


def test_e6001_loop_in_a_callee_points_at_the_callee_loop():
    src = HEAD + """
[Differentiable]
float inner(float x, int n)
{
    float y = x;
    for (int i = 0; i < n; i++) //@
    { y = y * x; outputBuffer[1] += 1.0; }
    return y;
}

[Differentiable]
float f(float x)
{
    return inner(x, 3) + x;
}
""" + kernel(BWD1)
    e = expect_error(src, "E6001")
    assert "'inner'" in message(e) and f"line {marked_line(src)}" in message(e)


def test_e6001_names_the_values_the_trip_count_depends_on():
    src = HEAD + """
[Differentiable]
float f(float x, int limitCount)
{
    float y = x;
    for (int i = 0; i < limitCount; i++) //@
    { y = y * x; outputBuffer[1] += 1.0; }
    return y;
}
""" + kernel("    var p = diffPair(1.5, 0.0);\n    bwd_diff(f)(p, 3, 1.0);\n    outputBuffer[0] = p.d;")
    e = expect_error(src, "E6001")
    assert "limitCount" in message(e), str(e)


@pytest.mark.parametrize("name", list(UNBOUNDED))
def test_same_loops_with_maxiters_compile(name):
    src = UNBOUNDED[name].replace(" //@", "")
    lines = src.splitlines()
    loop_at = marked_line(UNBOUNDED[name]) - 1
    indent = lines[loop_at][:len(lines[loop_at]) - len(lines[loop_at].lstrip())]
    lines.insert(loop_at, indent + "[MaxIters(8)]")
    compile_src(HEAD + "\n".join(lines) + "\n" + kernel(_bwd_call(name)))


@pytest.mark.parametrize("name", list(UNBOUNDED))
def test_forward_mode_needs_no_loop_bound(name):
    call = "    outputBuffer[0] = fwd_diff(f)(diffPair(1.5, 1.0), 3).d;" if "parameter" in name else FWD1
    compile_src(HEAD + UNBOUNDED[name] + kernel(call))


# ============================================================================================== E6012


NOT_DIFF = "float f(float x)\n{\n    return x * x;\n}\n"


def test_e6012_bwd_diff_of_non_differentiable_function():
    src = HEAD + NOT_DIFF + kernel("    var p = diffPair(1.5, 0.0);\n    bwd_diff(f)(p, 1.0); //@\n    outputBuffer[0] = p.d;")
    e = expect_error(src, "E6012")
    assert "'f'" in message(e) and "[Differentiable]" in message(e)


def test_e6012_fwd_diff_of_non_differentiable_function():
    expect_error(HEAD + NOT_DIFF + kernel("    outputBuffer[0] = fwd_diff(f)(diffPair(1.5, 1.0)).d; //@"), "E6012")


def test_e6012_fwd_diff_of_non_differentiable_method():
    src = HEAD + "struct S\n{\n    float a;\n    float get(float x) { return a * x; }\n};\n" + kernel(
        "    S s;\n    s.a = 2.0;\n    outputBuffer[0] = fwd_diff(s.get)(diffPair(1.5, 1.0)).d; //@")
    expect_error(src, "E6012")


def test_e6012_nested_fwd_diff_of_non_differentiable_function():
    src = HEAD + "float f(float x)\n{\n    return x * x * x;\n}\n" + kernel(
        "    let r = fwd_diff(fwd_diff(f))(diffPair(diffPair(1.5, 1.0), diffPair(1.0, 0.0))); //@\n"
        "    outputBuffer[0] = r.d.d;")
    expect_error(src, "E6012")


# ============================================================================================== E6010


@pytest.mark.parametrize("body", [
    "    DifferentialPair<int> p = diffPair(1, 0); //@\n    outputBuffer[0] = 0;",
    "    var p = diffPair(3, 1); //@\n    outputBuffer[0] = 0;",
    "    S s;\n    s.a = 1.0;\n    var p = diffPair(s); //@\n    outputBuffer[0] = p.p.a;",
    "    int.Differential d; //@\n    outputBuffer[0] = 0;",
], ids=["DifferentialPair<int>", "diffPair(int)", "non-IDifferentiable-struct", "int.Differential"])
def test_e6010_non_differentiable_type(body):
    e = expect_error(HEAD + "struct S\n{\n    float a;\n};\n" + kernel(body), "E6010")
    assert "not differentiable" in message(e)


# ============================================================================================== E6011


@pytest.mark.parametrize("call", [
    "    outputBuffer[0] = fwd_diff(q)(diffPair(1.5, 1.0)).d; //@",
    "    var p = diffPair(1.5, 0.0);\n    bwd_diff(q)(p, 1.0); //@",
], ids=["fwd_diff", "bwd_diff"])
def test_e6011_differentiating_a_value(call):
    expect_error(HEAD + kernel("    float q = 1.0;\n" + call), "E6011")


# ============================================================================================== no body

NO_BODY = "[Differentiable]\nfloat f(float x);\n"


def test_no_body_fwd_diff():
    # E3020 ("declared but has no body") comes first today; E6002 is the AD-specific form.
    with pytest.raises(CompileError) as ei:
        compile_src(HEAD + NO_BODY + kernel("    outputBuffer[0] = fwd_diff(f)(diffPair(1.5, 1.0)).d; //@"))
    e = ei.value
    assert e.code in ("E6002", "E3020") and "no body" in message(e), str(e)
    assert e.loc.line == 7


def test_no_body_bwd_diff():
    with pytest.raises(CompileError) as ei:
        compile_src(HEAD + NO_BODY + kernel("    var p = diffPair(1.5, 0.0);\n    bwd_diff(f)(p, 1.0); //@"))
    e = ei.value
    assert e.code in ("E6002", "E3020") and "no body" in message(e), str(e)
    assert e.loc.line == 8


# ============================================================================================== E6004 / E6005


@pytest.mark.parametrize("expr", ["copysign(x, 2.0)", "ldexp(x, 2.0)"])
def test_e6004_core_function_without_derivative_rule(expr):
    src = HEAD + f"[Differentiable]\nfloat f(float x)\n{{\n    return 2.0 * {expr}; //@\n}}\n" + kernel(FWD1)
    e = expect_error(src, "E6004")
    assert f"'{expr.split('(')[0]}'" in message(e)


def test_e6005_core_function_with_out_parameter():
    src = HEAD + "[Differentiable]\nfloat f(float x)\n{\n    float ip;\n    float fr = modf(x, ip); //@\n" \
                 "    return fr + ip;\n}\n" + kernel(FWD1)
    expect_error(src, "E6005")


# ============================================================================================== E6006 / E6008


def test_e6006_reverse_mode_storage_too_large():
    src = HEAD + """
[Differentiable]
float f(float x) //@
{
    float y = x;
    [MaxIters(1000000)]
    while (y < 10.0)
        y = y * 1.001 + sin(y);
    return y;
}
""" + kernel(BWD1)
    e = expect_error(src, "E6006")
    assert "MaxIters" in message(e)


def test_e6008_switch_fall_through_under_bwd_diff():
    src = HEAD + """
[Differentiable]
float f(float x, int k)
{
    float y = x;
    switch (k) //@
    {
    case 0:
        y = y * x;
    case 1:
        y = y * 3.0;
        break;
    default:
        y = -y;
        break;
    }
    return y;
}
""" + kernel("    var p = diffPair(1.5, 0.0);\n    bwd_diff(f)(p, 0, 1.0);\n    outputBuffer[0] = p.d;")
    expect_error(src, "E6008")


# ============================================================================================== custom derivatives

BWD_G = "    var a = diffPair(1.5, 0.0);\n    bwd_diff(g)(a, 1.0);\n    outputBuffer[0] = a.d;"


def expect_signature_error(src: str):
    """A bad custom-derivative signature: a CompileError (an autodiff code) at the attribute or at the
    derivative function's declaration -- never silently the automatic derivative instead."""
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    e = ei.value
    lines = {marked_line(src, "//@attr"), marked_line(src, "//@deriv")}
    assert e.code.startswith("E6") and e.loc.line in lines, f"got {e.code} at line {e.loc.line}:\n{e}"


def test_custom_derivative_naming_an_undefined_function():
    src = HEAD + "[BackwardDerivative(nope)] //@\nfloat g(float x)\n{\n    return x * x;\n}\n" + kernel(BWD_G)
    e = expect_error(src, "E2052")
    assert "'nope'" in message(e)


def test_backward_derivative_with_wrong_parameter_count():
    src = HEAD + """
[BackwardDerivative(gb)] //@attr
float g(float x, float y)
{
    return x * y;
}

void gb(inout DifferentialPair<float> x, float dOut) //@deriv
{
    x = diffPair(x.p, 100.0);
}
""" + kernel("    var a = diffPair(1.5, 0.0);\n    var b = diffPair(2.0, 0.0);\n    bwd_diff(g)(a, b, 1.0);\n"
             "    outputBuffer[0] = a.d;")
    expect_signature_error(src)


def test_backward_derivative_with_in_instead_of_inout_pair():
    src = HEAD + """
[BackwardDerivative(gb)] //@attr
float g(float x)
{
    return x * x;
}

void gb(DifferentialPair<float> x, float dOut) //@deriv
{
}
""" + kernel(BWD_G)
    expect_signature_error(src)


def test_forward_derivative_with_wrong_parameter_type():
    src = HEAD + """
[ForwardDerivative(gf)] //@attr
float g(float x)
{
    return x * x;
}

DifferentialPair<float> gf(float x) //@deriv
{
    return diffPair(x * x, 100.0);
}
""" + kernel("    outputBuffer[0] = fwd_diff(g)(diffPair(1.5, 1.0)).d;")
    expect_signature_error(src)


def test_forward_derivative_with_wrong_return_type():
    src = HEAD + """
[ForwardDerivative(gf)] //@attr
float g(float x)
{
    return x * x;
}

float gf(DifferentialPair<float> x) //@deriv
{
    return 2.0 * x.p;
}
""" + kernel("    outputBuffer[0] = fwd_diff(g)(diffPair(1.5, 1.0)).d;")
    expect_signature_error(src)


def test_backward_derivative_naming_a_non_function():
    src = HEAD + "static const float c = 1.0; //@deriv\n[BackwardDerivative(c)] //@attr\nfloat g(float x)\n{\n" \
                 "    return x * x;\n}\n" + kernel(BWD_G)
    expect_signature_error(src)


def test_backward_derivative_of_with_wrong_signature_is_an_error():
    # [BackwardDerivativeOf(g)] on a function of the wrong shape: today E6012 ('g' is not differentiable)
    # at the bwd_diff call -- an error, though it does not name the signature problem.
    src = HEAD + """
float g(float x)
{
    return x * x;
}

[BackwardDerivativeOf(g)] //@attr
void gb(inout DifferentialPair<float> x, float y, float dOut) //@deriv
{
    x = diffPair(x.p, dOut);
}
""" + kernel("    var a = diffPair(1.5, 0.0);\n    bwd_diff(g)(a, 1.0); //@call\n    outputBuffer[0] = a.d;")
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    e = ei.value
    assert e.code.startswith("E6"), str(e)
    assert e.loc.line in {marked_line(src, "//@attr"), marked_line(src, "//@deriv"), marked_line(src, "//@call")}
