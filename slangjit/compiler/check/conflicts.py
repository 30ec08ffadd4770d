"""Conflicting declarations at module / namespace scope, and duplicate parameter names (issue 15 item 3).

As the reference compiler: two declarations of one name in one module or namespace conflict unless both are
functions with different parameter lists (overloads).  Two functions with the same parameters conflict when
both have a body ("already has a body") or when their return types differ; a declaration without a body and
one with it (a forward declaration) are one function.  The comparison is structural, on the declarations'
syntax (locations ignored): parameter directions and types, generic parameters and `where` clauses.
"""
from __future__ import annotations

import dataclasses

from ..parse import ast
from ..source import error
from .scope import DeclSym, FuncSym


def _shape(x):
    if isinstance(x, (list, tuple)):
        return tuple(_shape(i) for i in x)
    if isinstance(x, (set, frozenset)):
        return tuple(sorted(map(str, x)))
    if dataclasses.is_dataclass(x):
        return (type(x).__name__,) + tuple(_shape(getattr(x, f.name)) for f in dataclasses.fields(x)
                                           if f.name != "loc")
    return x


def _signature(d: ast.FuncDecl):
    return (_shape(d.generic_params), _shape(d.where),
            tuple((p.direction, _shape(p.type)) for p in d.params))


def _where(d) -> str:
    loc = getattr(d, "loc", None)
    return f" (first declared at line {loc.line})" if loc is not None and getattr(loc, "line", 0) else ""


def check_params(d: ast.FuncDecl):
    """Two parameters of one function with the same name: a located error."""
    seen = set()
    for p in d.params:
        if not p.name:
            continue
        if p.name in seen:
            raise error("E2004", f"duplicate parameter '{p.name}' of '{d.name}'", p.loc or d.loc)
        seen.add(p.name)


def is_extern_struct(d) -> bool:
    """`extern struct X : I;`: a link-time type, bound by name to a definition of X in a linked module."""
    return isinstance(d, ast.StructDecl) and "extern" in d.mods and not d.members


def admit(d: ast.Decl, name: str, existing: list):
    """Check a new module/namespace-level declaration `d` of `name` against `existing` symbols of that scope.
    Returns None to add it, or the FuncSym it is a forward declaration / definition of: then the caller keeps
    the one with the body.  Raises a located E2004 on a conflict."""
    own = [s for s in existing if isinstance(s, DeclSym)]
    if not own:
        return None
    if isinstance(d, ast.VarDecl) and all(isinstance(s.decl, ast.VarDecl) for s in own) and \
            ("extern" in d.mods or all("extern" in s.decl.mods for s in own)):
        return None               # `extern static const int N;` then its `export` definition (linked by name)
    if isinstance(d, (ast.StructDecl, ast.TypeAliasDecl)) and \
            all(isinstance(s.decl, (ast.StructDecl, ast.TypeAliasDecl)) for s in own) and \
            sum(1 for x in [d] + [s.decl for s in own] if not is_extern_struct(x)) <= 1:
        return None               # `extern struct X : I;` and the `export struct X : I = Y;` that binds it
    if not isinstance(d, ast.FuncDecl):
        raise error("E2004", f"conflicting declaration of '{name}'{_where(own[0].decl)}", d.loc)
    for s in own:
        if not isinstance(s, FuncSym):
            raise error("E2004", f"conflicting declaration of '{name}'{_where(s.decl)}", d.loc)
    sig = _signature(d)
    for s in own:
        if _signature(s.decl) != sig:
            continue
        if _shape(s.decl.return_type) != _shape(d.return_type):
            raise error("E2004", f"'{name}' is declared again with the same parameters and another return "
                                 f"type{_where(s.decl)}", d.loc)
        if s.decl.body is not None and d.body is not None:
            raise error("E2004", f"function '{name}' already has a body{_where(s.decl)}", d.loc)
        return s
    return None
