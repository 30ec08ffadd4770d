"""Issue 15 (front end): programs the C++ compiler would reject, or that would silently run wrong or
hang, are rejected by the front end with a located diagnostic (a code, file:line:col) — never E9000,
never a C++ compiler error later, never a hang."""
import os

import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError

HEAD = "RWStructuredBuffer<float> outputBuffer;\n"
import slangjit as spy  # noqa: E402
RW_USAGE = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access


def kernel(body, decls="", nt="1,1,1", param="uint3 tid : SV_DispatchThreadID"):
    return HEAD + decls + f"[numthreads({nt})]\nvoid computeMain({param})\n{{\n" + body + "\n}\n"


def compile_src(src):
    return compile_program([SourceSpec(text=src, name="bad")], ["computeMain"])


SELF_FWD = "[Differentiable] float f(float x) { return x * fwd_diff(f)(diffPair(x, 1.0)).d; }\n"
SELF_BWD = "[Differentiable] float f(float x) { var p = diffPair(x); bwd_diff(f)(p, 1.0); return p.d * x; }\n"
SELF_VIA_G = ("[Differentiable] float f(float x) { return g(x) * x; }\n"
              "[Differentiable] float g(float x) { return fwd_diff(f)(diffPair(x, 1.0)).d; }\n")

# (id, source, code, line, column or None)
CASES = [
    ("pointer-plus-float", kernel("    float* q = p + 1.5;", "uniform float* p;\n"), "E3076", 6, 18),
    ("duplicate-field", kernel("    S s; s.a = 1; outputBuffer[0] = s.a;", "struct S { float a; float a; };\n"),
     "E2005", 2, 27),
    ("vector-5", kernel("    vector<float,5> v = 1; outputBuffer[0] = v[0];"), "E2022", 5, None),
    ("vector-0", kernel("    vector<float,0> v; outputBuffer[0] = 1;"), "E2022", 5, None),
    ("matrix-negative", kernel("    matrix<float,2,-1> m; outputBuffer[0] = 1;"), "E2022", 5, None),
    ("array-negative", kernel("    float a[-1]; outputBuffer[0] = 1;"), "E2022", 5, 13),
    ("numthreads-bool", kernel("    outputBuffer[0] = 1;", nt="1,1,true"), "E5004", 2, None),
    ("numthreads-zero", kernel("    outputBuffer[0] = 1;", nt="0,1,1"), "E5004", 2, None),
    ("numthreads-2^32", kernel("    outputBuffer[0] = 1;", nt="4294967296,1,1"), "E5005", 2, None),
    ("numthreads-x-2048", kernel("    outputBuffer[0] = 1;", nt="2048,1,1"), "E5005", 2, None),
    ("numthreads-z-128", kernel("    outputBuffer[0] = 1;", nt="1,1,128"), "E5005", 2, None),
    ("numthreads-product", kernel("    outputBuffer[0] = 1;", nt="64,32,1"), "E5005", 2, None),
    ("int-to-inout-uint3", kernel("    int i = 1; g(i); outputBuffer[0] = 1;",
                                  "void g(inout uint3 v) { v.x = 1; }\n"), "E3010", 6, 16),
    ("float4-dispatch-id", kernel("    outputBuffer[0] = tid.x;", param="float4 tid : SV_DispatchThreadID"),
     "E5006", 3, 25),
    ("float3x3-dispatch-id", kernel("    outputBuffer[0] = tid[0][0];", param="float3x3 tid : SV_DispatchThreadID"),
     "E5006", 3, 27),
    ("bwd-derivative-dout-type",
     kernel("    var p = diffPair(1.0); bwd_diff(f)(p, 1.0); outputBuffer[0] = p.d;",
            "[BackwardDerivative(fb)]\nfloat f(float x) { return x*x; }\n"
            "void fb(inout DifferentialPair<float> x, float3 dOut) { x = diffPair(x.p, 2*x.p*dOut.x); }\n"),
     "E6013", None, None),
    ("redeclaration", kernel("    float a = 1; float a = 2; outputBuffer[0] = a;"), "E2004", 5, 24),
    ("hex-40-digits", kernel("    outputBuffer[0] = 0x1234567890123456789012345678901234567890;"), "E0012", 5, 23),
    ("hex-17-digits", kernel("    outputBuffer[0] = float(0x12345678901234567);"), "E0012", 5, 29),
    ("decimal-2^64", kernel("    outputBuffer[0] = float(18446744073709551616);"), "E0012", 5, 29),
    ("float-index", kernel("    outputBuffer[1.7] = 1;"), "E3062", 5, 18),
    ("float-index-array", kernel("    float a[2] = {1, 2}; float i = 1.2; outputBuffer[0] = a[i];"), "E3062", 5, None),
    ("self-fwd-diff", kernel("    outputBuffer[0] = f(1);", SELF_FWD), "E6018", 2, None),
    ("self-bwd-diff", kernel("    outputBuffer[0] = f(1);", SELF_BWD), "E6018", 2, None),
    ("self-diff-through-g", kernel("    outputBuffer[0] = f(1);", SELF_VIA_G), "E6018", 3, None),
    # Conflicting module-level declarations and duplicate parameters (the reference compiler: E30200/E30201/
    # E30202 "conflicting declaration", "already has a body", "return type mismatch").
    ("duplicate-global", kernel("    outputBuffer[0] = A;", "static const float A = 1.0;\nstatic const float A = 2.0;\n"),
     "E2004", 3, 20),
    ("duplicate-function-body", kernel("    outputBuffer[0] = f(1.0);",
                                       "float f(float x) { return x; }\nfloat f(float x) { return 2 * x; }\n"), "E2004", 3, 7),
    ("duplicate-parameter", kernel("    outputBuffer[0] = f(1.0, 2.0);", "float f(float x, float x) { return x; }\n"),
     "E2004", 2, 24),
    ("duplicate-struct", kernel("    S s; s.a = 1; outputBuffer[0] = s.a;", "struct S { float a; };\nstruct S { float b; };\n"),
     "E2004", 3, 8),
    ("duplicate-buffer", kernel("    outputBuffer[0] = 1;", "RWStructuredBuffer<float> outputBuffer;\n"), "E2004", 2, 27),
    ("variable-and-function", kernel("    outputBuffer[0] = f(1.0);",
                                     "static const float f = 1.0;\nfloat f(float x) { return x; }\n"), "E2004", 3, 7),
    ("return-type-only", kernel("    outputBuffer[0] = f(1.0);",
                                "float f(float x) { return x; }\nint f(float x) { return 2; }\n"), "E2004", 3, 5),
    ("duplicate-method-parameter", kernel("    S s; outputBuffer[0] = s.m(1, 2);",
                                          "struct S { float m(float a, int a) { return a; } };\n"), "E2004", 2, 33),
    # A custom derivative that does not match, on a function that is only called, or never used (issue 15 3c)
    ("custom-fwd-mismatch-called", kernel("    outputBuffer[0] = f(1.0);",
                                          "float fd(DifferentialPair<float> x, float y) { return 0; }\n"
                                          "[ForwardDerivative(fd)]\nfloat f(float x) { return x * x; }\n"), "E6013", 3, None),
    ("custom-bwd-mismatch-unused", kernel("    outputBuffer[0] = 1;",
                                          "void fb(inout DifferentialPair<float> x, float3 dOut) { }\n"
                                          "[BackwardDerivative(fb)]\nfloat f(float x) { return x * x; }\n"), "E6013", 3, None),
    ("custom-fwd-unknown-unused", kernel("    outputBuffer[0] = 1;",
                                         "[ForwardDerivative(nothere)]\nfloat f(float x) { return x * x; }\n"), None, 2, None),
    # a local array size past int (0xffffffff elements was emitted as a narrowing int)
    ("array-size-2^32", kernel("    float w[0xffffffff] = { 1.0, 2.0 }; outputBuffer[0] = w[1];"), "E2022", 5, 13),
]


@pytest.mark.parametrize("cid,src,code,line,col", CASES, ids=[c[0] for c in CASES])
def test_rejected_with_located_diagnostic(cid, src, code, line, col, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    err = ei.value
    assert code is None or err.code == code, str(err)
    assert err.code and not err.code.startswith("E9"), str(err)
    if line is not None:
        assert err.loc.line == line, str(err)
    if col is not None:
        assert err.loc.col == col, str(err)
    assert f"bad.slang:{err.loc.line}:{err.loc.col}:" in str(err)


@pytest.mark.parametrize("nt", ["1024,1,1", "1,1024,1", "16,1,64", "32,32,1", "7"])
def test_numthreads_within_limits_accepted(nt, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    prog = compile_src(kernel("    outputBuffer[0] = 1;", nt=nt))
    assert prog.reflection is not None


def test_largest_literals_and_shadowing_still_accepted(monkeypatch):
    """The checks reject only what is wrong: 2^64-1 fits uint64, an inner scope may shadow."""
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    src = kernel("    uint64_t v = 0xFFFFFFFFFFFFFFFFull; float a = 1; { float a = 2; outputBuffer[1] = a; }\n"
                 "    outputBuffer[0] = a + float(v & 1); outputBuffer[int(2.0)] = 3;",
                 param="uint tid : SV_DispatchThreadID")
    compile_src(src)


def test_non_utf8_source_is_a_located_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    p = tmp_path / "latin1.slang"
    p.write_bytes(kernel("    outputBuffer[0] = 1; // caf\xe9").encode("latin-1"))
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(path=str(p))], ["computeMain"])
    err = ei.value
    assert err.code == "E0002", str(err)
    assert err.loc.line == 5 and err.loc.col == 32, str(err)
    assert "UTF-8" in str(err)


def test_module_importing_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    p = tmp_path / "selfimp.slang"
    p.write_text("import selfimp;\n" + kernel("    outputBuffer[0] = 1;"))
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(path=str(p))], ["computeMain"])
    err = ei.value
    assert err.code == "E2006", str(err)
    assert err.loc.line == 1 and "imports itself" in str(err)


def test_import_cycle_through_another_module(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    (tmp_path / "cyca.slang").write_text("import cycb;\nfloat fa() { return 1; }\n")
    (tmp_path / "cycb.slang").write_text("import cyca;\nfloat fb() { return 2; }\n")
    p = tmp_path / "cycmain.slang"
    p.write_text("import cyca;\n" + kernel("    outputBuffer[0] = fa();"))
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(path=str(p))], ["computeMain"])
    assert ei.value.code == "E2006", str(ei.value)


def test_overloads_and_forward_declarations_still_accepted(device):
    """Only conflicts are rejected: overloads by parameter type or direction, a forward declaration then the
    definition, a function matching its (correct) custom derivative that is never differentiated."""
    import numpy as np
    src = kernel("    outputBuffer[0] = f(1.0) + f(2) + h(3.0);",
                 "float f(float x) { return x; }\nfloat f(int x) { return 10 * x; }\n"
                 "float h(float x);\nfloat h(float x) { return 100 * x; }\n"
                 "DifferentialPair<float> gd(DifferentialPair<float> x) { return diffPair(x.p, 2 * x.p * x.d); }\n"
                 "[ForwardDerivative(gd)]\nfloat g(float x) { return x * x; }\n")
    m = device.load_module_from_source("overloads_ok", src)
    k = device.create_compute_kernel(device.link_program([m], [m.entry_point("computeMain")]))
    buf = device.create_buffer(element_count=1, struct_size=4, usage=RW_USAGE)
    k.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": buf})
    assert buf.to_numpy().view(np.float32)[0] == 1.0 + 20.0 + 300.0
