"""Bad input gives a CompileError with a code, file:line:col, the source line and a caret —
never a Python traceback from compiler internals."""
import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError

HEAD = "RWStructuredBuffer<float> outputBuffer;\n"


def compile_src(src: str, entry: str = "computeMain"):
    return compile_program([SourceSpec(text=src, name="bad")], [entry])


def kernel(body: str, decls: str = "") -> str:
    # line 1: buffer, then decls, then the kernel whose body starts on a known line
    return HEAD + decls + "[numthreads(1,1,1)]\nvoid computeMain(uint3 tid : SV_DispatchThreadID)\n{\n" + body + "\n}\n"


def body_line(decls: str = "") -> int:
    return 1 + decls.count("\n") + 4


CASES = [
    # (id, decls, body, code, line offset from first body line (None: check decl line))
    ("undefined-name", "", "    outputBuffer[0] = nope;", "E2052", 0),
    ("undefined-function", "", "    outputBuffer[0] = nofunc(1);", "E2052", 0),
    ("no-overload", "float f(float a, float b) { return a + b; }\n", "    outputBuffer[0] = f(1.0);", "E3010", 0),
    ("too-many-args", "float f(float a) { return a; }\n", "    outputBuffer[0] = f(1.0, 2.0, 3.0);", "E3010", 0),
    ("struct-to-float", "struct S { float a; };\n", "    S s; float x = s;", "E3001", 0),
    ("float-to-struct-assign", "struct S { float a; };\n", "    S s; s = 1.0;", "E3001", 0),
    ("no-member", "struct S { float a; };\n", "    S s; outputBuffer[0] = s.b;", "E2040", 0),
    ("bad-swizzle", "", "    float2 v = float2(1, 2); outputBuffer[0] = v.z;", "E2041", 0),
    ("vector-too-few", "", "    float3 v = float3(1, 2);", "E3057", 0),
    ("vector-too-many", "", "    float2 v = float2(1, 2, 3);", "E3057", 0),
    ("assign-to-rvalue", "", "    1 = 2;", "E3080", 0),
    ("assign-to-let", "", "    let x = 1; x = 2;", "E3080", 0),
    ("out-arg-rvalue", "void g(out float x) { x = 1; }\n", "    g(1.0);", "E3080", 0),
    ("readonly-buffer-write", "StructuredBuffer<float> ro;\n", "    ro[0] = 1.0;", "E3080", 0),
    ("break-outside-loop", "", "    break;", "E4002", 0),
    ("continue-outside-loop", "", "    continue;", "E4004", 0),
    ("bad-label", "", "    for (int i = 0; i < 2; i++) { break nowhere; }", "E4003", 0),
    ("return-value-from-void", "", "    return 1;", "E4015", 0),
    ("missing-return-value", "float f() { return; }\n", "    outputBuffer[0] = f();", "E4014", -4),
    ("vector-condition", "", "    float2 v = 1; if (v) {}", "E4006", 0),
    ("struct-condition", "struct S { float a; };\n", "    S s; if (s) {}", "E4006", 0),
    ("switch-float", "", "    float f = 1; switch (f) { default: break; }", "E4010", 0),
    ("switch-nonconst-case", "", "    int a = 1, b = 2; switch (a) { case b: break; }", "E4011", 0),
    ("switch-dup-case", "", "    int a = 1; switch (a) { case 1: break; case 1: break; }", "E4012", 0),
    ("not-a-type", "", "    outputBuffer x;", "E2010", 0),
    ("type-as-value", "", "    outputBuffer[0] = float;", "E3042", 0),
    ("function-as-value", "float f() { return 1; }\n", "    outputBuffer[0] = f;", "E3041", 0),
    ("not-callable", "", "    float a = 1; outputBuffer[0] = a(2);", "E3052", 0),
    ("index-non-array", "", "    float a = 1; outputBuffer[0] = a[0];", "E3061", 0),
    ("float-index", "", "    float a[2] = {1, 2}; float2 i = 0; outputBuffer[0] = a[i];", "E3062", 0),
    ("bitwise-float", "", "    float a = 1; outputBuffer[0] = a & 1;", "E3072", 0),
    ("shift-float", "", "    float a = 1; outputBuffer[0] = a << 1;", "E3072", 0),
    ("deref-non-pointer", "", "    float a = 1; outputBuffer[0] = *a;", "E3070", 0),
    ("too-many-initializers", "struct S { float a; };\n", "    S s = {1, 2};", "E3055", 0),
    ("array-too-many-init", "", "    int a[2] = {1, 2, 3};", "E3055", 0),
    ("matrix-vector-star", "", "    float2x2 m = 1; float2 v = 1; float2 r = m * v;", "E3073", 0),
    ("let-no-init", "", "    let x;", None, 0),
    ("generic-arg-count", "struct P<T> { T a; };\n", "    P<float, int> p;", "E2017", 0),
    ("no-body", "float f(float x);\n", "    outputBuffer[0] = f(1);", "E3020", 0),
    ("field-without-object", "struct S { float a; static float g() { return a; } };\n",
     "    outputBuffer[0] = S.g();", "E2030", -4),
]


@pytest.mark.parametrize("cid,decls,body,code,line_off", CASES, ids=[c[0] for c in CASES])
def test_bad_input(cid, decls, body, code, line_off):
    src = kernel(body, decls)
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    err = ei.value
    if code is not None:
        assert err.code == code, str(err)
    expect_line = body_line(decls) + line_off
    if line_off is not None and code is not None:
        assert err.loc.line == expect_line, str(err)
    text = str(err)
    assert f"bad.slang:{err.loc.line}:" in text
    assert "^" in text.splitlines()[-1]


def test_missing_entry_point():
    with pytest.raises(CompileError) as ei:
        compile_src(kernel("    outputBuffer[0] = 1;"), entry="nope")
    assert ei.value.code == "E5001"


def test_diagnostic_shows_source_line_and_caret():
    src = kernel("    outputBuffer[0] = nope + 1;")
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    lines = str(ei.value).splitlines()
    assert lines[0].startswith("bad.slang:5:23: error E2052")
    assert lines[1] == "    outputBuffer[0] = nope + 1;"
    assert lines[2] == " " * 22 + "^"


def test_missing_interface_requirement():
    src = ("interface IShape { float area(); float perimeter(); }\n"
           "struct Sq : IShape { float s; float area() { return s * s; } }\n"
           "float use<T : IShape>(T t) { return t.area(); }\n"
           + kernel("    Sq q = { 2.0 }; outputBuffer[0] = use(q);"))
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    assert ei.value.code == "E2060"
    assert ei.value.loc.line == 2
    assert "perimeter" in str(ei.value)


def test_vector_truncation_is_a_warning():
    import warnings as _w
    import slangjit as spy
    src = kernel("    float3 v = float3(1, 2, 3);\n    float2 w = v;\n    outputBuffer[0] = w.y;")
    prog = compile_src(src)
    codes = [w.code for w in prog.warnings]
    assert "W3002" in codes
    device = spy.create_device(type=spy.DeviceType.cpu)
    with _w.catch_warnings(record=True) as rec:
        _w.simplefilter("always")
        m = device.load_module_from_source("trunc", src)
        device.link_program([m], [m.entry_point("computeMain")])
    assert any("W3002" in str(r.message) and "truncation" in str(r.message) for r in rec)


def test_each_outside_expand_and_bare_pack():
    src = ("int g<each T>(expand each T args) { int n = each args; return n; }\n"
           + kernel("    outputBuffer[0] = g(1, 2);"))
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    assert ei.value.code == "E3092" and ei.value.loc.line == 1
    src = ("int h<each T>(expand each T args) { return args; }\n" + kernel("    outputBuffer[0] = h(1);"))
    with pytest.raises(CompileError) as ei:
        compile_src(src)
    assert ei.value.code == "E3093" and ei.value.loc.line == 1


def test_internal_errors_become_compile_errors(monkeypatch):
    # A compiler bug must surface as "internal compiler error", never as a raw Python traceback.
    import slangjit.compiler.check.stmts as stmts_mod
    def boom(*a, **k):
        raise KeyError("simulated bug")
    monkeypatch.setattr(stmts_mod.StmtsMixin, "check_body", boom)
    import os
    os.environ["SLANGJIT_NO_FRONTEND_CACHE"] = "1"
    try:
        with pytest.raises(CompileError) as ei:
            compile_src(kernel("    outputBuffer[0] = 1;"))
    finally:
        del os.environ["SLANGJIT_NO_FRONTEND_CACHE"]
    assert ei.value.code == "E9000" and "internal compiler error" in str(ei.value)
