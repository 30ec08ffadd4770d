"""Stage 5 of the compiler: automatic differentiation, IR -> IR.

    run(program)   builds the body of every derivative function the checked program queued
                   (program.derivatives.pending), and of the derivatives those bodies need.

    forward mode   the JVP transform of a function's body (forward.py)
    reverse mode   replay the function forward storing overwritten values, then walk the statements
                   backwards applying the transpose of each statement's JVP (reverse.py)

Derivatives of core functions are Slang functions marked `[ForwardDerivativeOf(f)]` in
core/derivatives.slang, inlined as expressions; reverse mode transposes them, so one rule serves both
modes.  User custom derivatives replace the generated ones.  Everything that needs name or overload
resolution (custom derivatives, substitutes, rules, each struct's Differential) was decided by the
checker and is read from the sealed `ir.derivatives.Derivatives` table; this stage never calls back.
"""
from __future__ import annotations

from typing import Optional

from .. import types as T
from ..ir import nodes as ir
from ..ir.derivatives import Derivatives
from ..ir.difftypes import diff_type, zero
from ..ir.program import Program
from ..source import error
from .forward import ForwardTransform
from .inline import ZERO_TANGENT_GUARDED, guarded_tangent, substitute
from .reverse import ReverseTransform
from .rules import tz
from .transpose import Transposer


def run(program: Program) -> Program:
    """Build every queued derivative body (the queue grows as bodies call derivatives of callees)."""
    if program.derivatives is not None:
        AutoDiff(program.derivatives).run_pending()
    return program



def dyn_tangent(node: ir.Intrinsic, jvp) -> Optional[ir.Expr]:
    """Unpacking and packing a dynamic interface value (check/dynamic.py): its Differential holds
    one field per conforming type, so the tangent of `dyn_get<T>(x)` is the field of T in x's
    tangent, and that of packing a T value the Differential with only T's field set."""
    if node.name == "sj::dyn_get<$T0>":
        iface = node.args[0].type
        dt = diff_type(iface) if isinstance(iface, T.InterfaceType) else None
        if dt is None:
            return None
        fname = dyn_diff_field(iface, node.type)
        tx = jvp(node.args[0]) if fname is not None else None
        if tx is None:
            return None
        return ir.Field(dt.info.field_type(fname), tx, fname)
    if node.name == "sj::dyn_make<$T0>":
        iface = node.type
        dt = diff_type(iface) if isinstance(iface, T.InterfaceType) else None
        if dt is None:
            return None
        fname = dyn_diff_field(iface, node.args[1].type)
        tv = jvp(node.args[1]) if fname is not None else None
        if tv is None:
            return None
        return ir.Construct(dt, [tv if n == fname else zero(ft) for n, ft in dt.info.field_list()])
    return None


def dyn_diff_field(iface: T.InterfaceType, t: T.Type) -> Optional[str]:
    """The field of a dynamic `iface` value's Differential that holds a `t` value's derivative."""
    for ty, fname in iface.info.__dict__.get("dyn_diff_fields", ()):
        if ty is t:
            return fname
    return None

class AutoDiff:
    """The transforms' view of the program's derivatives: the recorded facts (`Derivatives`) plus
    the bodies this stage builds."""

    def __init__(self, derivs: Derivatives):
        self.d = derivs
        self.rule_cache: dict = {}            # transform-local memo (e.g. which functions are pure)

    # ------------------------------------------------------------------ facts (ir/derivatives.py)

    def signature(self, fn: ir.Function):
        return self.d.signature(fn)

    def is_differentiable(self, fn: ir.Function) -> bool:
        return self.d.is_differentiable(fn)

    def fwd(self, fn: ir.Function, loc) -> ir.Function:
        return self.d.fwd(fn, loc)

    def bwd(self, fn: ir.Function, loc) -> ir.Function:
        return self.d.bwd(fn, loc)

    def is_ptr(self, t: T.Type) -> bool:
        return self.d.is_ptr(t)

    def pair(self, t: T.Type, d: T.Type) -> T.PairType:
        return self.d.pair(t, d)

    def intrinsic_rule(self, fn: ir.Function):
        return self.d.intrinsic_rule(fn)

    def use_substitutes(self, s):
        """Inside derivative code, a call to a function with a primal substitute calls the
        substitute (its value as well as its derivative), as Slang does."""
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.use_substitutes(x)
        elif isinstance(s, (ir.ExprStmt, ir.VarDecl)):
            e = s.expr if isinstance(s, ir.ExprStmt) else s.init
            if isinstance(e, ir.Assign):
                e = e.rhs
            if isinstance(e, ir.Call):
                sub = self.d._sub(e.func)
                if sub is not None and len(sub.params) == len(e.func.params):
                    e.func = sub
        elif isinstance(s, ir.If):
            self.use_substitutes(s.then)
            if s.else_ is not None:
                self.use_substitutes(s.else_)
        elif isinstance(s, ir.Loop):
            self.use_substitutes(s.body)
        elif isinstance(s, ir.Switch):
            for c in s.cases:
                for x in c.body:
                    self.use_substitutes(x)

    # ------------------------------------------------------------------ bodies

    def run_pending(self) -> bool:
        """Build the bodies of generated functions; True if anything was done."""
        did = False
        while self.d.pending:
            kind, fn, g, loc = self.d.pending.pop(0)
            did = True
            if kind == "fwd":
                pd, rd = self.signature(fn)
                if fn.body is None:
                    raise error("E6002", f"cannot differentiate '{fn.slang_name}': it has no body", loc)
                g.body = ForwardTransform(self, fn, g, pd, rd).run()
            elif kind == "fwd-intrinsic":
                g.body = self.intrinsic_fwd_body(fn, g, loc)
            elif kind == "bwd-intrinsic":
                g.body = self.intrinsic_bwd_body(fn, g, loc)
            elif kind in ("fwd-zero", "bwd-zero"):
                g.body = self.zero_body(kind, fn, g)
            else:
                g.body = ReverseTransform(self, fn, g, loc).run()
        return did

    def intrinsic_tangent(self, node: ir.Intrinsic, jvp) -> Optional[ir.Expr]:
        fn = getattr(node, "func", None)
        if fn is None:
            return dyn_tangent(node, jvp)
        pd, rd = self.signature(fn)
        if rd is None:
            return None
        tangents = [jvp(a) if d is not None else None for a, d in zip(node.args, pd)]
        if all(t is None for t in tangents):
            return None
        rule = self.intrinsic_rule(fn)
        if rule is None:
            raise error("E6004", f"no derivative is known for '{fn.slang_name}'", node.loc)
        g, _, dexpr = rule
        if dexpr is None:
            return None
        if getattr(jvp, "forward", False) and fn.slang_name in ZERO_TANGENT_GUARDED:
            return guarded_tangent(dexpr, g.params, node.args, tangents, pd)
        return substitute(dexpr, g.params, node.args, tangents, pd)

    def intrinsic_fwd_body(self, fn: ir.Function, g: ir.Function, loc) -> ir.Block:
        """fwd_diff(sin) called directly: a small wrapper around the inlined rule."""
        pd, rd = self.signature(fn)
        args, tans = [], []
        for p, gp, d in zip(fn.params, g.params, pd):
            r = ir.LocalRef(gp.type, gp)
            if d is None:
                args.append(r)
                tans.append(None)
            else:
                args.append(ir.Field(p.type, r, "p"))
                tans.append(ir.Field(d, r, "d"))
        node = ir.Intrinsic(fn.ret, fn.intrinsic, args, ())
        node.func = fn
        node.type_args = fn.attrs.get("type_args", [])
        rule = self.intrinsic_rule(fn)
        if rule is None:
            raise error("E6004", f"no derivative is known for '{fn.slang_name}'", loc)
        if fn.slang_name in ZERO_TANGENT_GUARDED:
            t = guarded_tangent(rule[2], rule[0].params, args, tans, pd)
        else:
            t = substitute(rule[2], rule[0].params, args, tans, pd)
        return ir.Block([ir.Return(ir.Construct(g.ret, [node, tz(rd, t)]))])

    def zero_body(self, kind: str, fn: ir.Function, g: ir.Function) -> ir.Block:
        """[TreatAsDifferentiable]: the primal runs as is and every derivative is zero."""
        pd, rd = self.signature(fn)
        stmts: list = []
        if kind == "fwd-zero":
            args = []
            for p, gp, d in zip(fn.params, g.params, pd):
                r = ir.LocalRef(gp.type, gp)
                if d is None:
                    args.append(r)
                elif p.direction == "in":
                    args.append(ir.Field(p.type, r, "p"))
                else:
                    args.append(ir.Field(p.type, r, "p"))
                    stmts.append(ir.ExprStmt(ir.Assign(d, "=", ir.Field(d, r, "d"), zero(d))))
            call = ir.Call(fn.ret, fn, args)
            if rd is None:
                stmts.insert(0, ir.ExprStmt(call))
                return ir.Block(stmts)
            return ir.Block(stmts + [ir.Return(ir.Construct(g.ret, [call, zero(rd)]))])
        for p, gp, d in zip(fn.params, g.params, pd):
            if d is not None and p.direction != "out" and not self.is_ptr(p.type):
                r = ir.LocalRef(gp.type, gp)
                stmts.append(ir.ExprStmt(ir.Assign(d, "=", ir.Field(d, r, "d"), zero(d))))
        return ir.Block(stmts)

    def intrinsic_bwd_body(self, fn: ir.Function, g: ir.Function, loc) -> ir.Block:
        """bwd_diff(sin) called directly: the transposed rule."""
        pd, rd = self.signature(fn)
        rule = self.intrinsic_rule(fn)
        if rule is None:
            raise error("E6004", f"no derivative is known for '{fn.slang_name}'", loc)
        stmts, args, tans, adjs = [], [], [], []
        for gp, d in zip(g.params, pd):
            r = ir.LocalRef(gp.type, gp)
            if d is None:
                args.append(r)
                tans.append(None)
                adjs.append(None)
                continue
            a = ir.Var("adj_" + gp.name, d)
            a.is_adjoint = True
            stmts.append(ir.VarDecl(a, zero(d)))
            args.append(ir.Field(gp.type.primal, r, "p"))
            tans.append(ir.LocalRef(d, a))
            adjs.append((a, r))
        t = substitute(rule[2], rule[0].params, args, tans, pd)
        if t is not None and rd is not None:
            dout = g.params[-1]
            Transposer(lambda v: getattr(v, "is_adjoint", False)).tr(t, ir.LocalRef(dout.type, dout), stmts)
        for x in adjs:
            if x is not None:
                a, r = x
                stmts.append(ir.ExprStmt(ir.Assign(a.type, "=", ir.Field(a.type, r, "d"), ir.LocalRef(a.type, a))))
        return ir.Block(stmts)

    def intrinsic_with_outs_fwd(self, fwd, e, dest, out):
        """Core functions with out parameters (sincos, modf, frexp): handled as calls of
        their derivative rule functions."""
        raise error("E6005", f"'{e.func.slang_name if getattr(e, 'func', None) else e.name}' cannot be differentiated yet", e.loc)
