"""Function bodies of the compiler's own Slang library parsed when first read (`parse_module(...,
lazy_bodies=True)`, parse/parse_lazy.py, ast.LazyBodyFuncDecl): the tree read is the eager parse's, the
generated C++ and CUDA are byte-identical for the conformance programs and the MLP, a syntax error in a
deferred body is the same located CompileError when the body is read, and users' modules stay eager."""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from slangjit.compiler import SourceSpec, compile_program, frontend
from slangjit.compiler.parse import ast
from slangjit.compiler.parse.parser import parse_module
from slangjit.compiler.source import CompileError, Loc

ROOT = Path(__file__).resolve().parents[2]
COMPILER = ROOT / "slangjit" / "compiler"
LIBRARY = sorted((COMPILER / "core").glob("*.slang")) + sorted((COMPILER / "slang").glob("*.slang"))
CONFORMANCE = Path("/work/shared/conformance/tests")


def _norm(x):
    """A tree as plain values (a lazy decl as the FuncDecl it stands for; locations as file, line, column)."""
    if isinstance(x, Loc):
        return (x.file.path if x.file is not None else None, x.line, x.col)
    if isinstance(x, ast.Node):
        name = "FuncDecl" if isinstance(x, ast.LazyBodyFuncDecl) else type(x).__name__
        return (name, tuple((k, _norm(getattr(x, k))) for k in x.__dataclass_fields__))
    if isinstance(x, (list, tuple)):
        return tuple(_norm(y) for y in x)
    if isinstance(x, (set, frozenset)):
        return tuple(sorted(map(repr, x)))
    if isinstance(x, dict):
        return tuple((k, _norm(v)) for k, v in x.items())
    return repr(x)


def _lazy_decls(x, out):
    if isinstance(x, ast.LazyBodyFuncDecl):
        out.append(x)
    if isinstance(x, ast.Node):
        for k in x.__dataclass_fields__:
            if k != "body":
                _lazy_decls(getattr(x, k), out)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _lazy_decls(y, out)
    return out


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.name)
def test_library_tree_is_the_eager_one(path):
    text = path.read_text(encoding="utf-8")
    inc = [str(COMPILER / "slang")]
    lazy = parse_module(text, str(path), inc, frontend._defines_from_args(()), lazy_bodies=True)
    deferred = _lazy_decls(lazy, [])
    assert deferred and not any(d.is_loaded() for d in deferred)     # nothing parsed before it is read
    eager = parse_module(text, str(path), inc, frontend._defines_from_args(()))
    assert not _lazy_decls(eager, [])
    assert _norm(lazy) == _norm(eager)
    assert all(d.is_loaded() for d in deferred)                         # _norm read every body


TRICKY = r"""
#define OPEN {
#define CLOSE }
#define TWICE(x) ((x) + (x))
#define BODY_RET(v) { return v; }
#if 1
#define K 3
#else
#define K 4
#endif
struct S { float a;
    float get() { if (a > 0) { return a; } return -a; }
    __init(float v) { a = v; }
    [mutating] void set(float v) OPEN a = v; CLOSE
};
interface I { float f(); };
T pick<T : IArithmetic>(T x, T y) where T : IComparable { T z = x; if (x < y) { z = y; } return z; }
float strs() { /* } { */ int n = K; // }
#if 0
    { { {
#else
    n = TWICE(n);
#endif
    return float(n); }
float viaMacro(float q) BODY_RET(q * 2)
float arr() { float v[3] = { 1.0, 2.0, 3.0 }; float s = 0; for (int i = 0; i < 3; i++) { s += v[i]; } return s; }
[Differentiable] float sq(float x) { return x * x; }
[Attr("}{")] void pr(int n) { printf("}{ %d {", n); }
func later(x: float) -> float { float3 w = { x, x, x }; return w.y; }
typealias Later = float;
float useAlias() { Later q = 1.0; return (Later)q; }
float callsLocal() { struct L { float m() { return 2.0; } }; L l; return l.m(); }
"""


def test_tricky_source_tree_is_the_eager_one():
    lazy = parse_module(TRICKY, "tricky.slang", lazy_bodies=True)
    deferred = _lazy_decls(lazy, [])
    assert len(deferred) >= 10
    assert _norm(lazy) == _norm(parse_module(TRICKY, "tricky.slang"))


def test_error_in_deferred_body_is_reported_when_read():
    bad = "float ok(float x) { return x; }\nfloat broken(float x) {\n    return x +* ;\n}\nfloat after() { return 1.0; }\n"
    with pytest.raises(CompileError) as eager:
        parse_module(bad, "bad.slang")
    mod = parse_module(bad, "bad.slang", lazy_bodies=True)    # the signature is fine: no error yet
    names = [d.name for d in mod.decls]
    assert names == ["ok", "broken", "after"]
    assert mod.decls[0].body is not None and mod.decls[2].body is not None
    for _ in range(2):                                          # read again: the same error again
        with pytest.raises(CompileError) as late:
            mod.decls[1].body
        assert str(late.value) == str(eager.value)
        d_e, d_l = eager.value.diagnostics[0], late.value.diagnostics[0]
        assert (d_l.code, d_l.loc.line, d_l.loc.col) == (d_e.code, d_e.loc.line, d_e.loc.col) == (d_e.code, 3, d_e.loc.col)


@pytest.mark.parametrize("bad, code", [("float f(float x) { return x;\nfloat g() { return 1.0; }\n", "E0010"),
                                       ("float g() { return 1.0; }\nfloat f(float x) { if (x > 0) { return x;\n", "E0011")])
def test_unbalanced_body_is_reported_at_once(bad, code):
    with pytest.raises(CompileError) as eager:
        parse_module(bad, "u.slang")
    with pytest.raises(CompileError) as lazy:
        parse_module(bad, "u.slang", lazy_bodies=True)
    assert str(lazy.value) == str(eager.value) and eager.value.code == code


def test_body_read_from_threads_is_one_object():
    for _ in range(5):
        mod = parse_module(TRICKY, "tricky.slang", lazy_bodies=True)
        d = [x for x in mod.decls if getattr(x, "name", None) == "arr"][0]
        got = []
        ts = [threading.Thread(target=lambda: got.append(d.body)) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(got) == 4 and all(b is got[0] for b in got) and isinstance(got[0], ast.Block)


def test_user_modules_are_parsed_eagerly(monkeypatch, tmp_path):
    """A user's module is parsed whole (its errors are reported at once, every checked body is there);
    only the compiler's own library files are deferred."""
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    monkeypatch.setattr(frontend, "_core_modules", None)
    monkeypatch.setattr(frontend, "_parsed", {})
    p = tmp_path / "user.slang"
    p.write_text(TRICKY)
    user = frontend._parse(TRICKY, str(p), [], {})
    assert not _lazy_decls(user, [])
    assert any(_lazy_decls(m, []) for m in frontend.core_modules())


def _sources() -> list:
    out = sorted(CONFORMANCE.glob("core/*.slang")) + sorted(CONFORMANCE.glob("autodiff/**/*.slang"))
    return [(str(p), ["computeMain"]) for p in out] + [
        (str(ROOT / "examples" / "mlp_training" / "mlp.slang"), ["learnGradient", "adjustParameters"])]


def _digests(monkeypatch, lazy: bool) -> dict:
    monkeypatch.setattr(frontend, "_core_modules", None)
    monkeypatch.setattr(frontend, "_parsed", {})
    real = parse_module
    monkeypatch.setattr(frontend, "parse_module", lambda *a, **k: real(*a, **dict(k, lazy_bodies=lazy and k.get("lazy_bodies", False))))
    out = {}
    for path, entries in _sources():
        for target in ("cpp", "cuda"):
            try:
                src = compile_program([SourceSpec(path=path)], entries, target=target).source
                out[path, target] = hashlib.sha256(src.encode()).hexdigest()
            except CompileError as e:
                out[path, target] = "error: " + str(e)
    return out


@pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="the shared conformance programs are not here")
def test_generated_code_is_byte_identical(monkeypatch):
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")     # parse afresh (no disk trees, no program entries)
    lazy = _digests(monkeypatch, True)
    assert any(_lazy_decls(m, []) for m in frontend.core_modules())     # the library really was deferred
    eager = _digests(monkeypatch, False)
    assert not any(_lazy_decls(m, []) for m in frontend.core_modules())
    compiled = [k for k, v in eager.items() if not v.startswith("error")]
    assert len(compiled) >= 2 * 200
    assert lazy == eager
