"""Deferred function bodies (`parse_module(..., lazy_bodies=True)`): a body is skipped by matching braces
over the preprocessed tokens and parsed when first read (ast.LazyBodyFuncDecl), with the nesting depth and
the names (known types, conjunction aliases) the parser had at its place, so the tree read is the one an
eager parse builds; and `_diagnosed`, which turns any parse failure into its located CompileError (shared
by the module parse and a deferred body's).  Split from parser.py."""
from __future__ import annotations

import sys

from . import ast
from .parse_base import _Fail, _Fatal
from ..source import CompileError, Diagnostic, Loc, SourceFile, error


class LazyBodyParserMixin:
    """Where a function's body is parsed now or deferred (used by parser.py for functions, methods and
    initializers; accessors and `__func_extension` bodies, read while parsing, are always parsed now)."""

    def func_decl(self, name, params, ret, gparams, where, sem, loc) -> ast.FuncDecl:
        """The FuncDecl whose body comes next; with `lazy_bodies` (and not speculating) a `{ ... }` body is
        skipped by matching braces and parsed when first read (_DeferredBody), otherwise parsed now."""
        if self.lazy_bodies and not self.spec and self.at("{"):
            close = self.brace_match().get(self.pos)
            if close is not None:
                d = ast.LazyBodyFuncDecl(name, params, ret, None, gparams, where, sem, loc=loc)
                del d.__dict__["_sj_body"]
                d.__dict__["_sj_loader"] = _DeferredBody(self, self.pos, close, self.depth, self.names_snapshot())
                self.pos = close + 1
                return d
        body = self.parse_func_body()
        return ast.FuncDecl(name, params, ret, body, gparams, where, sem, loc=loc)

    def brace_match(self) -> dict:
        """{index of a '{' token: index of its matching '}'} over the whole token list (made once); a '{' left
        open has no entry (its body is parsed now, and reports the unterminated block)."""
        m = self._brace_match
        if m is None:
            m = self._brace_match = {}
            stack = []
            for i, t in enumerate(self.toks):
                if t.kind == "op":
                    x = t.text
                    if x == "{":
                        stack.append(i)
                    elif x == "}" and stack:
                        m[stack.pop()] = i
        return m

    def names_snapshot(self):
        """(known types, conjunction aliases) as they are now, shared until either grows: a deferred body is
        parsed later with what an eager parse would have seen at its place."""
        key = (len(self.known_types), len(self.conj_aliases), self.alias_writes)
        if self._snap_key != key:
            self._snap_key = key
            self._snap = (frozenset(self.known_types), dict(self.conj_aliases))
        return self._snap


class _DeferredBody:
    """A function body skipped by brace matching: tokens start..end of its parser (the `{` and its `}`),
    parsed on the first read with the nesting depth and the names the parser had at that place."""
    __slots__ = ("parser", "start", "end", "depth", "names")

    def __init__(self, parser, start: int, end: int, depth: int, names):
        self.parser = parser
        self.start = start
        self.end = end
        self.depth = depth
        self.names = names

    def __call__(self):
        src = self.parser
        p = object.__new__(type(src))           # a cursor of its own over the same tokens (no second prescan)
        p.__dict__.update(src.__dict__)
        p.pos = self.start
        p.depth = self.depth
        p.spec = 0
        p.generic_depth = 0
        p.depth_hit = None
        p.lazy_bodies = False
        p.known_types = set(self.names[0])
        p.conj_aliases = dict(self.names[1])
        state = {"p": p}

        def run():
            body = p.parse_block()
            if p.pos != self.end + 1:
                raise error("E0010", "a function body did not end at its closing '}'", p.toks[self.end].loc)
            return body
        return _diagnosed(run, state, src.path, "")


def _diagnosed(run, state: dict, path: str, text: str):
    """run() with every parse failure turned into its located CompileError (state["p"]: the parser, once made)."""
    old_limit = sys.getrecursionlimit()
    if old_limit < 12000:
        sys.setrecursionlimit(12000)
    try:
        return run()
    except _Fail as f:
        p = state["p"]
        if p is not None and p.depth_hit is not None:
            raise error("E0010", "nesting too deep", p.depth_hit) from None
        raise CompileError(Diagnostic(f.code, f.message, f.loc)) from None
    except _Fatal as f:
        raise CompileError(Diagnostic(f.code, f.message, f.loc)) from None
    except CompileError:
        raise
    except RecursionError:
        p = state["p"]
        loc = p.tok.loc if p is not None else Loc(SourceFile(path, text), 1, 1)
        raise error("E0010", "program nested too deeply", loc) from None
    except Exception as ex:   # never leak an internal exception for bad input
        p = state["p"]
        loc = p.tok.loc if p is not None else Loc(SourceFile(path, text), 1, 1)
        raise error("E0010", f"could not parse this ({type(ex).__name__}: {ex})", loc) from None
    finally:
        if old_limit < 12000:
            sys.setrecursionlimit(old_limit)
