"""Inlining a derivative rule's tangent expression at a use: parameters are replaced by the
actual primal arguments (`x.p`) and tangents (`x.d`); zero tangents are simplified away so that
e.g. `log(x) * pow(x, y) * dy` disappears when y is a constant (no NaN from log of a negative)."""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from .. import types as T


class _Zero(Exception):
    pass


def substitute(expr: ir.Expr, params: list, primals: list, tangents: list, diffs: list) -> Optional[ir.Expr]:
    pmap = {p.uid: (a, t) for p, a, t in zip(params, primals, tangents)}

    def go(e: ir.Expr) -> Optional[ir.Expr]:
        """None means an exact zero."""
        if isinstance(e, ir.Field) and isinstance(e.obj, ir.LocalRef) and e.obj.var.uid in pmap \
                and isinstance(e.obj.type, T.PairType):
            a, t = pmap[e.obj.var.uid]
            return a if e.name == "p" else t
        if isinstance(e, ir.LocalRef) and e.var.uid in pmap:
            return pmap[e.var.uid][0]
        if isinstance(e, ir.Const):
            return e
        if isinstance(e, ir.Binary):
            a, b = go(e.lhs), go(e.rhs)
            if e.op == "*":
                if a is None or b is None:
                    return None
            elif e.op == "/":
                if a is None:
                    return None
            elif e.op in ("+", "-"):
                if a is None and b is None:
                    return None
                if b is None:
                    return widen(a, e.type)
                if a is None:
                    b = widen(b, e.type)
                    return ir.Unary(e.type, "-", b) if e.op == "-" else b
            else:
                if a is None:
                    a = ir.Construct(e.lhs.type, [])
                if b is None:
                    b = ir.Construct(e.rhs.type, [])
            return ir.Binary(e.type, e.op, a, b)
        if isinstance(e, ir.Unary):
            a = go(e.operand)
            if a is None:
                return None
            return ir.Unary(e.type, e.op, a)
        if isinstance(e, ir.Convert):
            a = go(e.operand)
            return None if a is None else ir.Convert(e.type, a)
        if isinstance(e, ir.Select):
            c, a, b = go(e.cond), go(e.then), go(e.else_)
            if a is None and b is None:
                return None
            return ir.Select(e.type, c, a if a is not None else ir.Construct(e.type, []),
                             b if b is not None else ir.Construct(e.type, []))
        if isinstance(e, ir.Construct):
            args = [go(a) for a in e.args]
            if e.args and all(a is None for a in args):
                return None
            return ir.Construct(e.type, [a if a is not None else ir.Construct(o.type, []) for a, o in zip(args, e.args)], e.splat)
        if isinstance(e, ir.Intrinsic):
            args = [go(a) for a in e.args]
            lin = LINEAR_INTRINSICS.get(e.name.replace("sj::", ""))
            if lin is not None and any(args[i] is None for i in lin):
                return None
            node = ir.Intrinsic(e.type, e.name, [a if a is not None else ir.Construct(o.type, []) for a, o in zip(args, e.args)],
                                e.out_params)
            node.func = getattr(e, "func", None)
            node.type_args = getattr(e, "type_args", [])
            return node
        if isinstance(e, ir.Swizzle):
            a = go(e.obj)
            return None if a is None else ir.Swizzle(e.type, a, e.indices)
        if isinstance(e, ir.Index):
            a = go(e.obj)
            return None if a is None else ir.Index(e.type, a, go(e.index))
        if isinstance(e, ir.Field):
            a = go(e.obj)
            return None if a is None else ir.Field(e.type, a, e.name)
        if isinstance(e, ir.Call):
            args = [go(a) for a in e.args]
            return ir.Call(e.type, e.func, [a if a is not None else ir.Construct(o.type, []) for a, o in zip(args, e.args)])
        return e

    return go(expr)


def widen(x: ir.Expr, t: T.Type) -> ir.Expr:
    if x.type == t:
        return x
    if isinstance(x.type, T.ScalarType) and isinstance(t, (T.VectorType, T.MatrixType)):
        return ir.Construct(t, [x], splat=True)
    return x


# Core functions that are linear in the listed arguments: zero there means a zero result.
LINEAR_INTRINSICS = {"dot": (0, 1), "mul": (0, 1), "cross": (0, 1), "transpose": (0,), "WaveActiveSum": (0,)}


# Elementwise core functions whose partial derivative is infinite at a point of their domain
# (sqrt(0), log(0), asin(1), pow(0, y < 1) ...).  In forward mode an input whose tangent is exactly
# zero contributes 0 there, not 0 * inf = NaN, so fwd_diff agrees with bwd_diff's finite
# gradients of the other inputs (docs/autodiff.md, "Singular points").
ZERO_TANGENT_GUARDED = frozenset({"sqrt", "rsqrt", "rcp", "log", "log2", "log10", "asin", "acos",
                                  "atanh", "acosh", "pow", "tan"})


def guarded_tangent(expr: ir.Expr, params: list, primals: list, tangents: list, diffs: list) -> Optional[ir.Expr]:
    """The forward tangent as a sum over inputs, each input's term zeroed (component-wise) where
    its tangent is zero."""
    total = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        only = [t if j == i else None for j in range(len(tangents))]
        c = substitute(expr, params, primals, only, diffs)
        if c is None:
            continue
        c = _zero_where_zero(t, c)
        total = c if total is None else ir.Binary(c.type, "+", total, c)
    return total


def _zero_where_zero(t: ir.Expr, c: ir.Expr) -> ir.Expr:
    def pick(tj, cj, elem):
        z = ir.Const(elem, 0.0)
        return ir.Select(elem, ir.Binary(T.BOOL, "==", tj, ir.Const(tj.type, 0.0)), z, cj)
    if isinstance(t.type, T.ScalarType) and isinstance(c.type, T.ScalarType):
        return pick(t, c, c.type)
    if isinstance(t.type, T.VectorType) and isinstance(c.type, T.VectorType) and t.type.n == c.type.n:
        n, te, ce = c.type.n, t.type.elem, c.type.elem
        return ir.Construct(c.type, [pick(ir.Swizzle(te, t, (j,)), ir.Swizzle(ce, c, (j,)), ce) for j in range(n)])
    return c

