"""Derivative rules of expressions: the JVP of one pure expression, and the transpose of a
linear (tangent) expression.  Intrinsic rules are not written here: they are Slang functions
in compiler/core/derivatives.slang (`[ForwardDerivativeOf(sin)]`), inlined as expressions, so
the same rule serves forward mode (as is) and reverse mode (transposed)."""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import nodes as ir
from .. import types as T
from ..ir.difftypes import diff_type, is_float_like, zero
from ..ir.difftypes import diff_field_name


class NoRule(Exception):
    pass


def cst(t: T.Type, v) -> ir.Expr:
    s = T.scalar_of(t)
    c = ir.Const(s, float(v) if s.kind == "float" else v)
    if isinstance(t, (T.VectorType, T.MatrixType)):
        return ir.Construct(t, [c], splat=True)
    return c


def plain_this(p: ir.Var, dp: ir.Var) -> bool:
    """A member's user derivative takes `this` as a plain value (the derivative it gives is for the
    other parameters only): the call passes the primal receiver, which gets no derivative from it."""
    return p.name == "this" and not isinstance(dp.type, T.PairType) and dp.type == p.type


def tz(t, x):
    """The tangent x, or an explicit zero of type t."""
    return x if x is not None else zero(t)


def shape_to(x: ir.Expr, t: T.Type) -> ir.Expr:
    """Broadcast a scalar tangent to the vector/matrix type t (for mixed scalar/vector ops)."""
    if x.type == t:
        return x
    if isinstance(x.type, T.ScalarType) and isinstance(t, (T.VectorType, T.MatrixType)):
        if x.type != t.elem:
            x = ir.Convert(t.elem, x)
        return ir.Construct(t, [x], splat=True)
    if isinstance(x.type, T.ScalarType) and isinstance(t, T.ScalarType):
        return ir.Convert(t, x)
    return x


class Jvp:
    """Computes tangent expressions; `tangent_of(var)` gives a variable's tangent (or None)."""

    def __init__(self, ad, tangent_of: Callable[[ir.Var], Optional[ir.Expr]]):
        self.ad = ad
        self.tangent_of = tangent_of

    def __call__(self, e: ir.Expr) -> Optional[ir.Expr]:
        m = getattr(self, "j_" + type(e).__name__, None)
        if m is None:
            return None
        return m(e)

    def j_LocalRef(self, e):
        return self.tangent_of(e.var)

    def j_Detach(self, e):
        return None

    def j_Field(self, e):
        ot = e.obj.type
        if isinstance(ot, T.PointerType) or e.via_pointer:
            return None
        t = self(e.obj)
        if t is None:
            return None
        if isinstance(ot, T.PairType):
            ft = t.type.primal if e.name == "p" else t.type.diff
            return ir.Field(ft, t, e.name)
        if isinstance(ot, T.TupleType):
            return ir.Field(t.type.elems[int(e.name[1:])], t, e.name)
        if isinstance(ot, T.OptionalType):
            # the tangent of `o.value` is the tangent optional's value (zero when it holds none)
            return ir.Field(t.type.elem, t, "value") if e.name == "value" else None
        if isinstance(t.type, T.StructType) and isinstance(ot, T.StructType):
            fname = diff_field_name(ot, e.name)
            if fname is None:
                return None
            return ir.Field(t.type.info.field_type(fname), t, fname)
        return None

    def j_Swizzle(self, e):
        t = self(e.obj)
        if t is None:
            return None
        return ir.Swizzle(e.type, t, e.indices)

    def j_Index(self, e):
        ot = e.obj.type
        if isinstance(ot, (T.BufferType, T.PointerType)):
            return None
        t = self(e.obj)
        if t is None:
            return None
        et = diff_type(e.type)
        return ir.Index(et, t, e.index) if et is not None else None

    def j_Unary(self, e):
        if e.op == "-" and is_float_like(e.type):
            t = self(e.operand)
            return ir.Unary(e.type, "-", t) if t is not None else None
        if e.op == "+":
            return self(e.operand)
        return None

    def j_Convert(self, e):
        if not is_float_like(e.type) or not is_float_like(e.operand.type):
            return None
        t = self(e.operand)
        if t is None:
            return None
        return ir.Convert(e.type, t)

    def j_Construct(self, e):
        t = e.type
        dt = diff_type(t)
        if dt is None:
            return None
        if not e.args:
            return None
        if isinstance(t, T.StructType):
            parts = []
            any_t = False
            for (fname, ft), a in zip(t.info.field_list(), e.args):
                dname = diff_field_name(t, fname)
                if dname is None:
                    continue
                ta = self(a)
                any_t = any_t or ta is not None
                parts.append((dname, ta, dt.info.field_type(dname)))
            if not any_t:
                return None
            # Fields not given in the Construct stay zero.
            by = {n: (ta, ft) for n, ta, ft in parts}
            vals = []
            for fname, ft in dt.info.field_list():
                ta, _ = by.get(fname, (None, ft))
                vals.append(tz(ft, ta))
            return ir.Construct(dt, vals)
        ts = [self(a) for a in e.args]
        if all(x is None for x in ts):
            return None
        if isinstance(t, T.PairType):
            return ir.Construct(dt, [tz(dt.primal, ts[0]), tz(dt.diff, ts[1] if len(ts) > 1 else None)])
        if isinstance(t, T.OptionalType):
            return ir.Construct(dt, [tz(dt.elem, ts[0])])
        vals = []
        for a, ta in zip(e.args, ts):
            at = diff_type(a.type) or a.type
            if ta is None and not is_float_like(a.type) and isinstance(t, (T.VectorType, T.MatrixType)):
                # an integer component of a float vector: zero of the element type
                at = T.with_scalar(a.type, T.scalar_of(t))
            vals.append(tz(at, ta))
        return ir.Construct(dt, vals, e.splat)

    def j_Select(self, e):
        a, b = self(e.then), self(e.else_)
        if a is None and b is None:
            return None
        dt = diff_type(e.type)
        return ir.Select(dt, e.cond, tz(dt, a), tz(dt, b))

    def j_Binary(self, e):
        op = e.op
        if not is_float_like(e.type):
            return None
        a, b = e.lhs, e.rhs
        ta, tb = self(a), self(b)
        if ta is None and tb is None:
            return None
        rt = e.type
        if op in ("+", "-"):
            if ta is None:
                r = shape_to(tb, rt)
                return ir.Unary(rt, "-", r) if op == "-" else r
            if tb is None:
                return shape_to(ta, rt)
            return ir.Binary(rt, op, ta, tb)
        if op == "*":
            terms = []
            if ta is not None:
                terms.append(ir.Binary(rt, "*", ta, b))
            if tb is not None:
                terms.append(ir.Binary(rt, "*", a, tb))
            return terms[0] if len(terms) == 1 else ir.Binary(rt, "+", terms[0], terms[1])
        if op == "/":
            # d(a/b) = da/b - a*db/(b*b)
            terms = []
            if ta is not None:
                terms.append(ir.Binary(rt, "/", ta, b))
            if tb is not None:
                q = ir.Binary(rt, "/", ir.Binary(rt, "*", a, tb), ir.Binary(b.type, "*", b, b))
                if not terms:
                    return ir.Unary(rt, "-", q)
                return ir.Binary(rt, "-", terms[0], q)
            return terms[0]
        if op == "%":
            # fmod: Slang's derivative w.r.t. the divisor is 0.
            return shape_to(ta, rt) if ta is not None else None
        return None

    def j_Intrinsic(self, e):
        return self.ad.intrinsic_tangent(e, self)

    def j_Call(self, e):
        raise NoRule("call inside an expression (flatten first)")
