"""IR clean-up passes run on every function before emission.

* constant folding: operators, conversions and selects whose operands are constants become
  constants (integer wrap-around and truncating division as in Slang), and branches on constant
  conditions keep only the live side;
* dead-code elimination: statements after a return/break/continue/discard in the same block
  are dropped, and locals that are never read (with side-effect-free initializers) disappear.
"""
from __future__ import annotations

from typing import Optional

from .. import types as T
from ..ir import nodes as ir
from ..ir.walk import is_pure, local_uids


def optimize(fn: ir.Function, fold) -> None:
    """fold: the constant evaluator (ir/fold.py fold_value: expr -> value or None)."""
    if fn.body is None:
        return
    fn.body = _stmt(fn.body, fold)
    fn.body = _drop_unused(fn.body, local_uids(fn.body))


# ---------------------------------------------------------------------- constant folding

def _const(e: ir.Expr, v) -> Optional[ir.Expr]:
    if not isinstance(e.type, T.ScalarType) or e.type.kind == "void":
        return None
    if isinstance(v, bool) and e.type.kind != "bool":
        v = int(v)
    if e.type.kind == "float" and not isinstance(v, float):
        v = float(v)
    return ir.Const(e.type, v, loc=e.loc)


def _expr(e: ir.Expr, fold) -> ir.Expr:
    if isinstance(e, (ir.Binary, ir.Unary, ir.Convert)) and isinstance(e.type, T.ScalarType):
        if e.type.kind in ("int", "uint", "bool"):     # floats keep their run-time rounding
            v = fold(e)
            if v is not None and not isinstance(v, float):
                c = _const(e, v)
                if c is not None:
                    return c
    if isinstance(e, ir.Select):
        c = fold(e.cond)
        if isinstance(c, bool):
            return _expr(e.then if c else e.else_, fold)
    for name in ("lhs", "rhs", "operand", "cond", "then", "else_", "obj", "index", "ptr", "first", "second"):
        child = getattr(e, name, None)
        if isinstance(child, ir.Expr):
            setattr(e, name, _expr(child, fold))
    if isinstance(e, (ir.Call, ir.Intrinsic, ir.MethodCall, ir.Construct)):
        e.args = [_expr(a, fold) for a in e.args]
    return e


def _terminates(s) -> bool:
    """Control never reaches the statement after s."""
    if isinstance(s, (ir.Return, ir.Break, ir.Continue, ir.Discard)):
        return True
    if isinstance(s, ir.Block):
        return bool(s.stmts) and _terminates(s.stmts[-1])
    if isinstance(s, ir.If):
        return s.else_ is not None and _terminates(s.then) and _terminates(s.else_)
    return False


def _stmt(s: ir.Stmt, fold) -> Optional[ir.Stmt]:
    if isinstance(s, ir.Block):
        out = []
        for x in s.stmts:
            y = _stmt(x, fold)
            if y is None:
                continue
            out.append(y)
            if _terminates(y):
                break                      # the rest of the block is unreachable
        s.stmts = out
        return s
    if isinstance(s, ir.VarDecl):
        if s.init is not None:
            s.init = _expr(s.init, fold)
        return s
    if isinstance(s, ir.ExprStmt):
        s.expr = _expr(s.expr, fold)
        return s
    if isinstance(s, ir.Return):
        if s.value is not None:
            s.value = _expr(s.value, fold)
        return s
    if isinstance(s, ir.If):
        s.cond = _expr(s.cond, fold)
        c = fold(s.cond)
        if isinstance(c, bool):
            live = s.then if c else s.else_
            return _stmt(live, fold) if live is not None else None
        s.then = _stmt(s.then, fold) or ir.Block([])
        if s.else_ is not None:
            s.else_ = _stmt(s.else_, fold)
        return s
    if isinstance(s, ir.Loop):
        s.init = [y for y in (_stmt(x, fold) for x in s.init) if y is not None]
        if s.cond is not None:
            s.cond = _expr(s.cond, fold)
            if s.kind != "do" and fold(s.cond) is False:
                return ir.Block(list(s.init)) if s.init else None      # never runs
        s.body = _stmt(s.body, fold) or ir.Block([])
        return s
    if isinstance(s, ir.Switch):
        s.value = _expr(s.value, fold)
        for c in s.cases:
            c.body = [y for y in (_stmt(x, fold) for x in c.body) if y is not None]
        return s
    return s


# ---------------------------------------------------------------------- unused locals

def _pure(e) -> bool:
    return e is None or is_pure(e)


def _drop_unused(s, used: set):
    """Drop declarations of locals that nothing else names (and whose initializer has no effect)."""
    if isinstance(s, ir.Block):
        out = []
        for x in s.stmts:
            if isinstance(x, ir.VarDecl) and x.var.uid not in used and _pure(x.init):
                continue
            out.append(_drop_unused(x, used))
        s.stmts = out
    elif isinstance(s, ir.If):
        s.then = _drop_unused(s.then, used)
        if s.else_ is not None:
            s.else_ = _drop_unused(s.else_, used)
    elif isinstance(s, ir.Loop):
        s.body = _drop_unused(s.body, used)
    elif isinstance(s, ir.Switch):
        for c in s.cases:
            c.body = [_drop_unused(x, used) for x in c.body]
    return s
