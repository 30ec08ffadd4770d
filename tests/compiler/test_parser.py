"""Parser: AST shapes, disambiguation rules, conformance corpus, errors and robustness."""
import dataclasses
import glob
import os
import random
import time

import pytest

from slangjit.compiler.parse import ast
from slangjit.compiler.parse.parser import parse_module
from slangjit.compiler.source import CompileError

CONF = "/work/shared/conformance/tests"
CORE = os.path.join(os.path.dirname(__file__), "..", "..", "slangjit", "compiler", "core", "core.slang")
DEFINES = {"__SLANG__": "1", "__HLSL__": "1", "SLANG": "1", "__slangjit__": "1"}


# ----------------------------------------------------------------------------- helpers

def sx(n):
    """Compact S-expression of an AST (locations left out)."""
    if isinstance(n, list):
        return "[" + " ".join(sx(x) for x in n) + "]"
    if isinstance(n, set):
        return "{" + ",".join(sorted(n)) + "}"
    if isinstance(n, ast.Name):
        return n.name
    if isinstance(n, ast.IntLit):
        return str(n.value) + n.suffix
    if isinstance(n, ast.FloatLit):
        return n.text
    if isinstance(n, ast.BoolLit):
        return "true" if n.value else "false"
    if isinstance(n, ast.Binary):
        return f"({n.op} {sx(n.lhs)} {sx(n.rhs)})"
    if isinstance(n, ast.Assign):
        return f"({n.op} {sx(n.lhs)} {sx(n.rhs)})"
    if isinstance(n, ast.Unary):
        return f"({n.op}u {sx(n.operand)})"
    if isinstance(n, ast.Postfix):
        return f"(post{n.op} {sx(n.operand)})"
    if isinstance(n, ast.Call):
        return f"(call {sx(n.callee)} {' '.join(sx(a) for a in n.args)})".replace(" )", ")")
    if isinstance(n, ast.GenericApp):
        return f"(gen {sx(n.base)} {' '.join(sx(a) for a in n.args)})".replace(" )", ")")
    if isinstance(n, ast.Member):
        return f"({n.op} {sx(n.base)} {n.name})"
    if isinstance(n, ast.Index):
        return f"(idx {sx(n.base)} {' '.join(sx(a) for a in n.indices)})"
    if isinstance(n, ast.Cast):
        return f"(cast {sx(n.type)} {sx(n.operand)})"
    if isinstance(n, ast.Conditional):
        return f"(? {sx(n.cond)} {sx(n.then)} {sx(n.else_)})"
    if isinstance(n, ast.ArrayTypeExpr):
        return f"(arr {sx(n.element)} {sx(n.size) if n.size is not None else '_'})"
    if isinstance(n, ast.PointerTypeExpr):
        return f"(ptr {sx(n.element)})"
    if isinstance(n, ast.InitList):
        return "{" + " ".join(sx(x) for x in n.items) + "}"
    if isinstance(n, ast.Node):
        parts = [type(n).__name__]
        for f in dataclasses.fields(n):
            if f.name == "loc":
                continue
            v = getattr(n, f.name)
            if v is None or v == [] or v == set() or v == "" or v is False:
                continue
            if f.name == "direction" and v == "in":
                continue
            parts.append(f"{f.name}={sx(v)}")
        return "(" + " ".join(parts) + ")"
    return repr(n)


def parse(src, path="test.slang", **kw):
    return parse_module(src, path, **kw)


def expr(src, decls=""):
    """The AST of an expression (as the initializer of `let _e = ...;` in a function)."""
    m = parse(decls + "\nvoid __t() { let _e = " + src + "; }")
    f = m.decls[-1]
    return f.body.stmts[0].decls[0].init


def stmts(src, decls=""):
    m = parse(decls + "\nvoid __t() {\n" + src + "\n}")
    return m.decls[-1].body.stmts


def err(src, **kw):
    with pytest.raises(CompileError) as ei:
        parse(src, **kw)
    return ei.value


# ----------------------------------------------------------------------------- conformance corpus

def corpus():
    files = sorted(glob.glob(os.path.join(CONF, "**", "*.slang"), recursive=True))
    return files


@pytest.mark.skipif(not os.path.isdir(CONF), reason="conformance tests not available")
@pytest.mark.parametrize("path", corpus(), ids=lambda p: os.path.relpath(p, CONF))
def test_conformance_file_parses(path):
    with open(path, encoding="utf-8") as f:
        m = parse_module(f.read(), path, [], dict(DEFINES))
    assert isinstance(m, ast.Module) and m.decls


def test_core_library_parses():
    with open(CORE, encoding="utf-8") as f:
        m = parse_module(f.read(), CORE, [], {})
    assert len(m.decls) > 50


@pytest.mark.skipif(not os.path.isdir(CONF), reason="conformance tests not available")
def test_corpus_count():
    assert len(corpus()) >= 200


def test_parse_300_line_module():
    body = "\n".join(f"    acc += float(i) * w[{k}] + (v.x > 0.5 ? sin(v.y) : cos(v.z)) * {k}.5f;" for k in range(40))
    fn = ("[Differentiable]\nfloat f{n}<T : IFoo>(float3 v, float w[4], no_diff int i)\n{{\n    float acc = 0;\n"
          + "    for (int j = 0; j < 4; j++) {{ if (j == i) continue; acc *= 1.01; }}\n" + body +
          "\n    return acc;\n}}\n")
    src = "".join(fn.format(n=n) for n in range(7))
    assert src.count("\n") >= 300
    m = parse(src)
    assert len(m.decls) == 7


# ----------------------------------------------------------------------------- expressions

@pytest.mark.parametrize("src,want", [
    ("a + b * c", "(+ a (* b c))"),
    ("a * b + c", "(+ (* a b) c)"),
    ("a - b - c", "(- (- a b) c)"),
    ("a = b = c", "(= a (= b c))"),
    ("a ? b : c ? d : e", "(? a b (? c d e))"),
    ("a || b && c | d ^ e & f == g < h << i + j * k",
     "(|| a (&& b (| c (^ d (& e (== f (< g (<< h (+ i (* j k))))))))))"),
    ("a << 2 >> 1", "(>> (<< a 2) 1)"),
    ("a >> b > c", "(> (>> a b) c)"),
    ("a > > b", None),
    ("-a * !b", "(* (-u a) (!u b))"),
    ("~a++ + --b", "(+ (~u (post++ a)) (--u b))"),
    ("*p + &q[1]", "(+ (*u p) (&u (idx q 1)))"),
    ("a.b.c(1)[2]", "(idx (call (. (. a b) c) 1) 2)"),
    ("a::b->c", "(-> (:: a b) c)"),
    ("m[i, j]", "(idx m i j)"),
    ("(a, b)", "(, a b)"),
    ("x += y <<= 2", "(+= x (<<= y 2))"),
    ("x >>= 2", "(>>= x 2)"),
    ("a != b == c", "(== (!= a b) c)"),
    ("a % b / c", "(/ (% a b) c)"),
    ("1.5f + .5 + 3.f + 2.0h + 1e-3", "(+ (+ (+ (+ 1.5f .5) 3.f) 2.0h) 1e-3)"),
    ("0x10u + 'a'", "(+ 16u 97)"),
    ("true && !false", "(&& true (!u false))"),
])
def test_precedence(src, want):
    if want is None:
        with pytest.raises(CompileError):
            expr(src)
        return
    assert sx(expr(src)) == want


@pytest.mark.parametrize("src,want", [
    ("(float)x", "(cast float x)"),
    ("(float3)v * 2", "(* (cast float3 v) 2)"),
    ("(int)-x", "(cast int (-u x))"),
    ("(uint)(a + b)", "(cast uint (+ a b))"),
    ("(float2x3)m", "(cast float2x3 m)"),
    ("(int64_t)~x", "(cast int64_t (~u x))"),
    ("(MyStruct)x", "(cast MyStruct x)"),
    ("(MyStruct)(x)", "(cast MyStruct x)"),
    ("(MyStruct)-x", "(cast MyStruct (-u x))"),
    ("(float2*)p", "(cast (ptr float2) p)"),
    ("(vector<float, 3>)v", "(cast (gen vector float 3) v)"),
    ("(a)-b", "(- a b)"),
    ("(a)+b", "(+ a b)"),
    ("(a)*b", "(* a b)"),
    ("(a)(b)", "(call a b)"),
    ("(a)", "a"),
    ("(a).x", "(. a x)"),
    ("(float)x + 1", "(+ (cast float x) 1)"),
    ("(float)x.y", "(cast float (. x y))"),
    ("(int)f(x)[2]", "(cast int (idx (call f x) 2))"),
    ("(Unknown)x", "(cast Unknown x)"),
    ("(T)x", "(cast T x)"),
    ("(N)-1", "(- N 1)"),
    ("(1.25).code()", "(call (. 1.25 code))"),
])
def test_casts_vs_parenthesised(src, want):
    decls = "struct MyStruct { int a; }\nvoid g<T, let N : int>() {}\n"
    assert sx(expr(src, decls)) == want


@pytest.mark.parametrize("src,want", [
    ("a < b", "(< a b)"),
    ("a < b > (c)", "(call (gen a b) c)"),
    ("a < b > c", "(> (< a b) c)"),
    ("a < b && c > (d)", "(&& (< a b) (> c d))"),
    ("foo<int, 4>(x)", "(call (gen foo int 4) x)"),
    ("foo<int>", "(gen foo int)"),
    ("Foo<int>(x)", "(call (gen Foo int) x)"),
    ("vector<float, 3>(1, 2, 3)", "(call (gen vector float 3) 1 2 3)"),
    ("MLVec<2>.fromArray(inp)", "(call (. (gen MLVec 2) fromArray) inp)"),
    ("A<B<C>>(x)", "(call (gen A (gen B C)) x)"),
    ("A<B<2>>::f()", "(call (:: (gen A (gen B 2)) f))"),
    ("f<N + 1>(x)", "(call (gen f (+ N 1)) x)"),
    ("pick<true>(1, 2)", "(call (gen pick true) 1 2)"),
    ("a < b >> c", "(< a (>> b c))"),
    ("x.y < z", "(< (. x y) z)"),
    ("i < n && j > k", "(&& (< i n) (> j k))"),
    ("a < b ? c : d", "(? (< a b) c d)"),
    ("Tagged<Meters>.kTag", "(. (gen Tagged Meters) kTag)"),
    ("reinterpret<T>(x)", "(call (gen reinterpret T) x)"),
    ("f(a < b, c > d)", "(call f (< a b) (> c d))"),
])
def test_generic_vs_less_than(src, want):
    assert sx(expr(src)) == want


def test_less_than_in_assignment_statement():
    (s,) = stmts("x = a < b;")
    assert sx(s.expr) == "(= x (< a b))"
    (s,) = stmts("x = a < b > (c);")
    assert sx(s.expr) == "(= x (call (gen a b) c))"


def test_is_as_sizeof_countof():
    assert sx(expr("x is int && y as float")) == "(&& (IsExpr operand=x type=int) (AsExpr operand=y type=float))"
    assert sx(expr("(a as float).value")) == "(. (AsExpr operand=a type=float) value)"
    assert sx(expr("sizeof(int16_t) * 10 + sizeof(x)")) == \
        "(+ (* (SizeOfExpr operand=int16_t kind='sizeof') 10) (SizeOfExpr operand=x kind='sizeof'))"
    assert sx(expr("countof(T)")) == "(SizeOfExpr operand=T kind='countof')"
    assert sx(expr("alignof(float4)")) == "(SizeOfExpr operand=float4 kind='alignof')"


def test_literals_this_none_initlists():
    assert sx(expr("{1, {2, 3}, }")) == "{1 {2 3}}"
    assert sx(expr("{}")) == "{}"
    assert sx(expr("this.x + This.k")) == "(+ (. (ThisExpr) x) (. (ThisTypeExpr) k))"
    assert sx(expr("none")) == "none"
    e = expr('"ab" "cd"')
    assert isinstance(e, ast.StringLit) and e.value == "abcd"
    e = expr("3000000000ull")
    assert isinstance(e, ast.IntLit) and e.value == 3000000000 and e.suffix == "ull"
    e = expr("2.5lf")
    assert isinstance(e, ast.FloatLit) and e.suffix == "l" and e.text == "2.5lf"
    assert sx(expr("f({1, 2}, 3)")) == "(call f {1 2} 3)"


def test_no_diff_expand_each_lambda():
    assert sx(expr("no_diff f(x) * x")) == "(* (call no_diff (call f x)) x)"
    assert sx(expr("no_diff a[0]")) == "(call no_diff (idx a 0))"
    e = expr("expand g(t, (each xs).s())")
    assert sx(e) == "(ExpandExpr operand=(call g t (call (. (EachExpr operand=xs) s))))"
    lam = expr("(int x) => x + 1")
    assert isinstance(lam, ast.LambdaExpr) and lam.params[0].name == "x"
    assert sx(lam.body) == "(Return value=(+ x 1))"
    lam = expr("(x, y) => { return x; }")
    assert isinstance(lam.body, ast.Block) and [p.name for p in lam.params] == ["x", "y"]


def test_bwd_diff_call_chain():
    (s,) = stmts("bwd_diff(loss)(network, input.x, 1.0);")
    assert sx(s.expr) == "(call (call bwd_diff loss) network (. input x) 1.0)"


# ----------------------------------------------------------------------------- statements

def test_local_declarations():
    ss = stmts("""
        int a = 1, b[3] = {1, 2, 3};
        let x = 2;
        var y : int = 3;
        var z = 4;
        const int k = 2;
        static const float T[2] = {1, 2};
        float3.Differential v = w;
        MLVec<N> r;
        float* p = q + 1;
        Foo<int>.Inner q2;
        a * b;
    """)
    assert [type(s).__name__ for s in ss] == ["DeclStmt"] * 11
    a, b = ss[0].decls
    assert (a.name, sx(a.type), sx(a.init)) == ("a", "int", "1")
    assert (b.name, sx(b.type), sx(b.init)) == ("b", "(arr int 3)", "{1 2 3}")
    x = ss[1].decls[0]
    assert x.keyword == "let" and x.type is None and sx(x.init) == "2"
    y = ss[2].decls[0]
    assert y.keyword == "var" and sx(y.type) == "int"
    assert ss[3].decls[0].keyword == "var" and ss[3].decls[0].type is None
    assert ss[4].decls[0].mods == {"const"}
    assert ss[5].decls[0].mods == {"static", "const"} and sx(ss[5].decls[0].type) == "(arr float 2)"
    assert sx(ss[6].decls[0].type) == "(. float3 Differential)"
    assert sx(ss[7].decls[0].type) == "(gen MLVec N)"
    assert sx(ss[8].decls[0].type) == "(ptr float)"
    assert sx(ss[9].decls[0].type) == "(. (gen Foo int) Inner)"
    assert sx(ss[10].decls[0].type) == "(ptr a)"


def test_expression_statements_not_declarations():
    ss = stmts("a[i] = 3; p.x = 1; f(x); a < b; *p = *p * k; m[r, c] = 1; i++; foo<int>(x); x;")
    assert all(isinstance(s, ast.ExprStmt) for s in ss)
    assert sx(ss[3].expr) == "(< a b)"


def test_array_declarator_ordering():
    (s,) = stmts("int a[3][4];")
    assert sx(s.decls[0].type) == "(arr (arr int 4) 3)"
    t = s.decls[0].type
    assert isinstance(t, ast.ArrayTypeExpr) and t.size.value == 3 and t.element.size.value == 4
    (s,) = stmts("float x[] = {1, 2};")
    assert sx(s.decls[0].type) == "(arr float _)"
    m = parse("typedef float Row4[4];\nvoid f(int a[2][5]) {}\nstatic const int T[3] = {1,2,3};")
    assert sx(m.decls[0]) == "(TypeAliasDecl name='Row4' type=(arr float 4))"
    assert sx(m.decls[1].params[0].type) == "(arr (arr int 5) 2)"
    assert sx(m.decls[2].type) == "(arr int 3)" and m.decls[2].mods == {"static", "const"}


def test_if_for_while_do():
    ss = stmts("""
        if (a) b = 1; else if (c) b = 2; else { b = 3; }
        for (int i = 0, j = 1; i < n; i++) s += i;
        for (;;) break;
        for (i = 0; i < 3; ++i) {}
        while (x > 0) x--;
        do { x++; } while (x < 10);
        if (let v = opt) r = v; else r = 0;
    """)
    i = ss[0]
    assert isinstance(i, ast.If) and isinstance(i.else_, ast.If) and isinstance(i.else_.else_, ast.Block)
    f = ss[1]
    assert isinstance(f.init, ast.DeclStmt) and [d.name for d in f.init.decls] == ["i", "j"]
    assert sx(f.cond) == "(< i n)" and sx(f.step) == "(post++ i)"
    f2 = ss[2]
    assert f2.init is None and f2.cond is None and f2.step is None and isinstance(f2.body, ast.Break)
    assert isinstance(ss[3].init, ast.ExprStmt)
    assert isinstance(ss[4], ast.While) and isinstance(ss[5], ast.DoWhile) and sx(ss[5].cond) == "(< x 10)"
    il = ss[6]
    assert isinstance(il, ast.IfLet) and il.name == "v" and sx(il.value) == "opt" and il.else_ is not None


def test_switch_fallthrough_and_shared_labels():
    (sw,) = stmts("""
        switch (x) {
        case 0: r = 100; break;
        case 1:
        case 2: r = 200; break;
        case 3: r += 30;
        case 4: r += 4; break;
        case Mode::A: { r = 1; } break;
        default:
        case 9: r = -1;
        }
    """)
    cs = sw.cases
    assert [sx(c.values) for c in cs] == ["[0]", "[1 2]", "[3]", "[4]", "[(:: Mode A)]", "[9]"]
    assert [c.is_default for c in cs] == [False] * 5 + [True]
    assert [len(c.body) for c in cs] == [2, 2, 1, 2, 2, 1]
    assert isinstance(cs[2].body[0], ast.ExprStmt)      # falls through: no break


def test_break_continue_labels_return_discard():
    ss = stmts("""
        outer: for (int i = 0; i < 3; i++) { for (;;) { if (i) break outer; continue outer; } }
        return;
        return a + 1;
        discard;
        ;
        break;
    """)
    lab = ss[0]
    assert isinstance(lab, ast.Labeled) and lab.label == "outer" and isinstance(lab.stmt, ast.For)
    inner = lab.stmt.body.stmts[0].body.stmts
    assert inner[0].then.label == "outer" and inner[1].label == "outer"
    assert ss[1].value is None and sx(ss[2].value) == "(+ a 1)"
    assert isinstance(ss[3], ast.Discard) and isinstance(ss[4], ast.Empty) and ss[5].label is None


def test_statement_attributes():
    ss = stmts("""
        [unroll] for (;;) {}
        [unroll(4)]
        for (;;) {}
        [loop] while (a) {}
        [MaxIters(8)] do {} while (a);
        [ForceUnroll] for (;;) {}
        [branch] if (a) {}
        [flatten] [unroll] if (a) {}
    """)
    got = [[(a.name, [sx(x) for x in a.args]) for a in s.attrs] for s in ss]
    assert got == [[("unroll", [])], [("unroll", ["4"])], [("loop", [])], [("MaxIters", ["8"])],
                   [("ForceUnroll", [])], [("branch", [])], [("flatten", []), ("unroll", [])]]


def test_local_struct_and_typealias():
    ss = stmts("struct P { int a; } P p; typealias F = float; typedef int I; F f = 1;")
    assert isinstance(ss[0].decls[0], ast.StructDecl)
    assert isinstance(ss[1].decls[0], ast.VarDecl) and sx(ss[1].decls[0].type) == "P"
    assert isinstance(ss[2].decls[0], ast.TypeAliasDecl) and isinstance(ss[3].decls[0], ast.TypeAliasDecl)


# ----------------------------------------------------------------------------- declarations

def test_function_declarations():
    m = parse("""
        [Differentiable]
        [numthreads(4, 1, 1)]
        static float3 f<T : IFoo, let N : int, int M, U = float>(in float a, out T b, inout int c,
                ref float d, constref float e, uniform no_diff float g, const int h = 3,
                uint3 tid : SV_DispatchThreadID) where T : IBar where U : IBaz, IQux;
        func g(x : int) -> float { return 1; }
        func h(float x) -> vector<float, 3> { }
        T.Differential twice<T : IDifferentiable>(T.Differential a) { return T.dadd(a, a); }
        __generic<T : IFoo> T id(T x) { return x; }
        Foo<int, 4> make(void) {}
        float4 ps() : SV_Target { return 0; }
    """)
    f = m.decls[0]
    assert [a.name for a in f.attrs] == ["Differentiable", "numthreads"] and f.mods == {"static"}
    assert f.body is None and sx(f.return_type) == "float3"
    assert [(g.name, g.kind, sx(g.type) if g.type else None, sx(g.default) if g.default else None)
            for g in f.generic_params] == [("T", "type", "IFoo", None), ("N", "value", "int", None),
                                           ("M", "value", "int", None), ("U", "type", None, "float")]
    assert [(p.name, p.direction) for p in f.params] == [
        ("a", "in"), ("b", "out"), ("c", "inout"), ("d", "ref"), ("e", "constref"), ("g", "in"), ("h", "in"),
        ("tid", "in")]
    assert f.params[5].mods == {"uniform", "no_diff"} and f.params[6].mods == {"const"}
    assert sx(f.params[6].default) == "3" and f.params[7].semantic == "SV_DispatchThreadID"
    assert [(sx(w.subject), sx(w.constraint)) for w in f.where] == [("T", "IBar"), ("U", "IBaz"), ("U", "IQux")]
    g = m.decls[1]
    assert g.name == "g" and sx(g.return_type) == "float" and g.params[0].name == "x"
    h = m.decls[2]
    assert sx(h.return_type) == "(gen vector float 3)" and sx(h.params[0].type) == "float"
    t = m.decls[3]
    assert sx(t.return_type) == "(. T Differential)" and t.generic_params[0].name == "T"
    i = m.decls[4]
    assert i.generic_params[0].name == "T" and sx(i.generic_params[0].type) == "IFoo"
    assert m.decls[5].params == [] and sx(m.decls[5].return_type) == "(gen Foo int 4)"
    assert m.decls[6].semantic == "SV_Target"


def test_attributes_on_declarations():
    m = parse("""
        [shader("compute")] [numthreads(8, 8, 1)] void a() {}
        [BackwardDerivative(f_bwd)] [ForwardDerivativeOf(g<float>)] [__cpp("sj::x")] float b(float x);
        [ForceInline, MaxIters(4)] void c() {}
        [vk::binding(0, 1)] RWStructuredBuffer<float> buf;
    """)
    a, b, c, d = m.decls
    assert sx(a.attrs) == "[(Attribute name='shader' args=[(StringLit value='compute')]) " \
                          "(Attribute name='numthreads' args=[8 8 1])]"
    assert [(x.name, [sx(y) for y in x.args]) for x in b.attrs] == [
        ("BackwardDerivative", ["f_bwd"]), ("ForwardDerivativeOf", ["(gen g float)"]), ("__cpp", ["(StringLit value='sj::x')"])]
    assert [x.name for x in c.attrs] == ["ForceInline", "MaxIters"]
    assert d.attrs[0].name == "vk::binding" and isinstance(d, ast.VarDecl)


def test_struct_members_properties_subscripts():
    m = parse("""
        struct S : IFoo, IBar {
            int x = 3;
            float a, b;
            static const int K = 4;
            __init(int v) { x = v; }
            [mutating] void bump() { x++; }
            property p : int { get { return x; } set(v) { x = v; } }
            property int q { get; set; }
            property uint r { get { return 1; } set { x = newValue; } }
            property float w { get; [mutating] set(float nv) { } }
            __subscript(int i) -> float { get { return 0; } set { } }
            __subscript(int i, int j) -> int { get; }
            struct Inner { int z; }
            typealias Differential = S;
            enum E { A, B = 3 }
            S operator+(S o) { return o; }
            float operator()(float t) { return t; }
            void operator+=(S o) {}
        };
    """)
    (s,) = m.decls
    assert s.name == "S" and sx(s.bases) == "[IFoo IBar]" and not s.is_class
    names = [type(d).__name__ + ":" + getattr(d, "name", "") for d in s.members]
    assert names == ["VarDecl:x", "VarDecl:a", "VarDecl:b", "VarDecl:K", "FuncDecl:__init", "FuncDecl:bump",
                     "PropertyDecl:p", "PropertyDecl:q", "PropertyDecl:r", "PropertyDecl:w", "SubscriptDecl:",
                     "SubscriptDecl:", "StructDecl:Inner", "TypeAliasDecl:Differential", "EnumDecl:E",
                     "FuncDecl:operator+", "FuncDecl:operator()", "FuncDecl:operator+="]
    x = s.members[0]
    assert sx(x.init) == "3"
    assert s.members[3].mods == {"static", "const"}
    init = s.members[4]
    assert init.return_type is None and init.params[0].name == "v"
    assert s.members[5].attrs[0].name == "mutating"
    p = s.members[6]
    assert sx(p.type) == "int" and [a.kind for a in p.accessors] == ["get", "set"]
    assert p.accessors[1].param.name == "v" and sx(p.accessors[1].param.type) == "int"
    q = s.members[7]
    assert sx(q.type) == "int" and all(a.body is None for a in q.accessors)
    r = s.members[8]
    assert r.accessors[1].param is None and r.accessors[1].body is not None
    w = s.members[9]
    assert w.accessors[1].attrs[0].name == "mutating" and w.accessors[1].param.name == "nv"
    sub = s.members[10]
    assert [pp.name for pp in sub.params] == ["i"] and sx(sub.return_type) == "float"
    assert [a.kind for a in sub.accessors] == ["get", "set"]
    assert len(s.members[11].params) == 2
    e = s.members[14]
    assert [(c.name, sx(c.value) if c.value else None) for c in e.cases] == [("A", None), ("B", "3")]


def test_generic_struct_class_interface_extension():
    m = parse("""
        struct MLVec<let N : int> : IDifferentiable { float data[N]; }
        class C { int a; }
        interface IStep<T> : IBase {
            associatedtype Cursor : IStep, IOther;
            static const int N;
            int next(int x);
            int twice(int x) { return next(next(x)); }
            property int size { get; }
            static This create(int v);
            __init(int v);
            [mutating] void push(int v);
            int apply<U : IInteger>(U x);
        }
        extension float3 { float sum() { return x + y + z; } }
        extension<T : ISized> T : IBar where T : IBaz { int twice() { return size() * 2; } }
        extension S : IFoo {}
        struct G<T> where T : IFoo { T t; }
    """)
    v, c, i, e1, e2, e3, g = m.decls
    assert v.generic_params[0].kind == "value" and sx(v.members[0].type) == "(arr float N)"
    assert c.is_class and isinstance(c, ast.StructDecl)
    assert isinstance(i, ast.InterfaceDecl) and i.generic_params[0].name == "T" and sx(i.bases) == "[IBase]"
    at = i.members[0]
    assert isinstance(at, ast.AssocTypeDecl) and sx(at.constraints) == "[IStep IOther]"
    assert i.members[1].init is None and i.members[1].mods == {"static", "const"}
    assert i.members[2].body is None and i.members[3].body is not None
    assert isinstance(i.members[4], ast.PropertyDecl)
    assert isinstance(i.members[5].return_type, ast.ThisTypeExpr)
    assert i.members[6].name == "__init" and i.members[6].body is None
    assert i.members[8].generic_params[0].name == "U"
    assert isinstance(e1, ast.ExtensionDecl) and sx(e1.target) == "float3"
    assert e2.generic_params[0].name == "T" and sx(e2.target) == "T" and sx(e2.bases) == "[IBar]"
    assert sx(e2.where[0].constraint) == "IBaz"
    assert sx(e3.target) == "S" and sx(e3.bases) == "[IFoo]"
    assert sx(g.where[0].subject) == "T"


def test_typealias_enum_namespace_using_cbuffer_imports():
    m = parse("""
        import a.b;
        import "x.slang";
        __include helpers;
        module mymod;
        implementing mymod;
        typealias A = vector<float, 3>;
        typealias V<T> = vector<T, 2>;
        typedef int Count;
        enum Color { Red, Green = 10, Blue, }
        enum class Mode : uint { A = 1 << 0, B }
        namespace n1 { int f() { return 1; } namespace n2 { int g(); } }
        namespace a.b { int h(); }
        namespace c::d { }
        using namespace a.b;
        using n1;
        cbuffer Params : register(b0) { float scale; int count; }
        uniform float u;
        groupshared float s[64];
        float* p;
        public static const int kHelper = 3;
        RWStructuredBuffer<float> outputBuffer;
    """)
    d = m.decls
    assert [(x.module, x.is_path, x.kind) for x in d[:5]] == [
        ("a.b", False, "import"), ("x.slang", True, "import"), ("helpers", False, "include"),
        ("mymod", False, "module"), ("mymod", False, "implementing")]
    assert sx(d[5]) == "(TypeAliasDecl name='A' type=(gen vector float 3))"
    assert d[6].generic_params[0].name == "T" and sx(d[6].type) == "(gen vector T 2)"
    assert sx(d[7]) == "(TypeAliasDecl name='Count' type=int)"
    assert [c.name for c in d[8].cases] == ["Red", "Green", "Blue"] and not d[8].is_class
    assert d[9].is_class and sx(d[9].underlying) == "uint" and sx(d[9].cases[0].value) == "(<< 1 0)"
    ns = d[10]
    assert ns.name == "n1" and isinstance(ns.members[1], ast.NamespaceDecl) and ns.members[1].name == "n2"
    assert d[11].name == "a.b" and d[12].name == "c.d"
    assert sx(d[13].target) == "(. a b)" and sx(d[14].target) == "n1"
    cb = d[15]
    assert isinstance(cb, ast.CBufferDecl) and [x.name for x in cb.members] == ["scale", "count"]
    assert d[16].mods == {"uniform"} and d[17].mods == {"groupshared"} and sx(d[17].type) == "(arr float 64)"
    assert sx(d[18].type) == "(ptr float)"
    assert d[19].mods == {"public", "static", "const"}
    assert sx(d[20].type) == "(gen RWStructuredBuffer float)"


def test_variadic_generics():
    m = parse("int countArgs<each T>(expand each T args) { return countof(T); }\n"
              "int digits<each T : IScore>(expand each T items) { expand accumulate(t, (each items).score()); return 0; }")
    f, g = m.decls
    assert f.generic_params[0].kind == "pack" and sx(f.params[0].type) == \
        "(ExpandExpr operand=(EachExpr operand=T))"
    assert sx(g.generic_params[0].type) == "IScore"
    assert isinstance(g.body.stmts[0].expr, ast.ExpandExpr)


def test_locations_point_at_source():
    m = parse("struct S { int a; }\n\nfloat f(int x)\n{\n    return x +  1;\n}\n")
    f = m.decls[1]
    assert (f.loc.line, f.loc.col) == (3, 7)
    ret = f.body.stmts[0]
    assert (ret.loc.line, ret.loc.col) == (5, 5)
    assert (ret.value.loc.line, ret.value.loc.col) == (5, 14)       # the operator
    assert (ret.value.rhs.loc.line, ret.value.rhs.loc.col) == (5, 17)
    assert ret.loc.file.path == "test.slang"


def test_macros_and_includes_through_parse_module(tmp_path):
    (tmp_path / "h.slang").write_text("#define SCALE 3\nint helper(int x) { return x * SCALE; }\n")
    src = '#include "h.slang"\n#if defined(FOO) && FOO > 1\nint a = SCALE;\n#endif\nint b = BAR;'
    m = parse_module(src, str(tmp_path / "main.slang"), [], {"FOO": "2", "BAR": "7"})
    assert [d.name for d in m.decls] == ["helper", "a", "b"]
    assert m.decls[0].loc.file.path.endswith("h.slang")
    assert sx(m.decls[1].init) == "3" and m.decls[1].init.loc.line == 3
    assert sx(m.decls[2].init) == "7"


# ----------------------------------------------------------------------------- errors

@pytest.mark.parametrize("src,code,line", [
    ("int a = 1;\nint b = ;\n", "E0010", 2),
    ("void f() {\n  x = 1\n}\n", "E0010", 3),                  # missing ';' reported at '}'
    ("void f() {\n  if (x { }\n}\n", "E0010", 2),
    ("void f() {\n  int x = 1;\n", "E0011", 1),                 # unterminated block: at the '{'
    ("struct S {\n  int a;\n", "E0011", 1),
    ("int a;\n/* unterminated\ncomment", "E0011", 2),
    ("int a = 1 @ 2;\n", "E0001", 1),
    ("int a;\nint b = $;\n", "E0001", 2),
    ('int a;\n\nstring s = "abc;\n', "E0001", 3),
    ("#error nope\n", "E0020", 1),
    ('int x;\n#include "missing.slang"\n', "E0020", 2),
    ("#if 1\nint x;\n", "E0020", 1),
    ("int x;\n#else\n", "E0020", 2),
    ("float f(int a, , int b) {}\n", "E0010", 1),
    ("void f() {\n switch (x) { r = 1; }\n}\n", "E0010", 2),
    ("void f() {\n  case 1: break;\n}\n", "E0010", 2),
    ("struct { int a; }\n", "E0010", 1),
    ("void f() { int x = (1 + 2; }\n", "E0010", 1),
    ("void f() {\n a[1 = 2;\n}", "E0010", 2),
    ("if (x) {}\n", "E0010", 1),
    ("enum E { A B }\n", "E0010", 1),
    ("int f()\n{\n  return 1 +;\n}\n", "E0010", 3),
    ("void f() { for (int i = 0; i < 3) {} }\n", "E0010", 1),
    ("property\n", "E0010", 2),
    ("void f() {\n  x = {1, 2;\n}\n", "E0010", 2),
    ("void f() { let = 3; }", "E0010", 1),
    ("struct S { int a }\n", "E0010", 1),
    ("\n\nimport ;", "E0010", 3),
])
def test_bad_input(src, code, line):
    e = err(src)
    assert e.code == code, str(e)
    assert e.loc.line == line, str(e)


def test_error_message_format():
    e = err("int a = 1;\nint b = ;\n", path="bad.slang")
    d = e.diagnostics[0]
    assert d.message == "expected an expression, found ';'"
    assert (d.loc.line, d.loc.col) == (2, 9)
    assert "bad.slang:2:9" in str(e) and "int b = ;" in str(e)
    e = err("void f() { x = 1 }")
    assert e.diagnostics[0].message == "expected ';', found '}'"
    e = err("void f() { x = 1;")
    assert e.code == "E0011"


# ----------------------------------------------------------------------------- robustness

@pytest.mark.parametrize("src", [
    "int x = " + "(" * 2000 + "1" + ")" * 2000 + ";",
    "int x = " + "-" * 3000 + "1;",
    "void f() " + "{" * 2000 + "}" * 2000,
    "A" + "<A" * 2000 + ">" * 2000 + " x;",
    "namespace a {" * 1000 + "}" * 1000,
    "int x = " + "{" * 2000 + "}" * 2000 + ";",
    "int x = " + "f(" * 2000 + ")" * 2000 + ";",
    "int x = a" + "[a" * 2000 + "]" * 2000 + ";",
    "void f() { " + "if (a) " * 2000 + "x = 1; }",
])
def test_deep_nesting_gives_compile_error(src):
    e = err(src)
    assert e.code == "E0010"


def test_long_flat_inputs_are_fine():
    parse("int x = " + " + ".join(["1"] * 5000) + ";")
    parse("void f() { x = " + "a ? b : " * 1000 + "c; }")
    parse("void f() {" + "x = 1;" * 5000 + "}")
    parse("void f() { x = " + " < ".join(f"a{i}" for i in range(300)) + "; }")   # no exponential backtracking


def _fuzz_sources():
    files = corpus()
    rng = random.Random(1234)
    out = []
    for f in files[:: max(1, len(files) // 40)]:
        src = open(f, encoding="utf-8").read()
        for _ in range(6):
            out.append((f, src[: rng.randrange(len(src))]))
        a = rng.randrange(len(src))
        out.append((f, src[:a] + src[a + rng.randrange(1, 30):]))
        a = rng.randrange(len(src))
        out.append((f, src[:a] + rng.choice('{}()[]<>;,.#"\'/*@=+-:?!') + src[a:]))
    return out


@pytest.mark.skipif(not os.path.isdir(CONF), reason="conformance tests not available")
def test_truncation_fuzz_only_compile_errors():
    n_err = 0
    for f, src in _fuzz_sources():
        try:
            parse_module(src, f, [], dict(DEFINES))
        except CompileError as e:
            n_err += 1
            assert e.code in ("E0001", "E0010", "E0011", "E0020")
            assert "could not parse" not in str(e), str(e)
    assert n_err > 50


def test_random_token_soup_only_compile_errors():
    rng = random.Random(99)
    words = ["int", "float", "struct", "S", "{", "}", "(", ")", "[", "]", "<", ">", ";", ",", "=", "x", "1",
             "2.0", "if", "for", "return", "?", ":", "::", ".", "->", "*", "&", "-", "+", "let", "var",
             "property", "get", "set", "__subscript", "extension", "interface", "typealias", "enum", "case",
             "switch", "default", "[numthreads(1,1,1)]", "\"s\"", "#define A", "\n", "operator", "is", "as",
             "expand", "each", "no_diff", "=>", ">>", "<<=", "This", "this", "__init", "namespace", "where"]
    for _ in range(300):
        src = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 40)))
        try:
            parse(src)
        except CompileError as e:
            assert "could not parse" not in str(e), (src, str(e))


def test_deep_generic_nesting_message():
    e = err("A" + "<A" * 2000 + ">" * 2000 + " x;")
    assert e.code == "E0010" and "nesting too deep" in str(e)
