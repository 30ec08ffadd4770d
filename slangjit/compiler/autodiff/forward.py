"""Forward mode: the JVP transform of a function body (one rule per operation, rules.py)."""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir.walk import lvalue_root
from .. import types as T
from ..ir.difftypes import diff_type, is_ptr_kind, zero
from .flatten import Flattener
from .rules import Jvp, plain_this, tz
from .ptrs import ptr_vars_with_diff
from .ptrs import unknown_ptr_diff



class ForwardTransform:
    def __init__(self, ad, fn: ir.Function, out_fn: ir.Function, param_diffs: list, ret_diff):
        self.ad = ad
        self.fn = fn
        self.out_fn = out_fn
        self.param_diffs = param_diffs
        self.ret_diff = ret_diff
        self.tangents: dict[int, ir.Var] = {}
        self.jvp = Jvp(ad, self.tangent_ref)
        self.jvp.forward = True           # forward mode: a zero tangent contributes 0 (inline.py)
        self.epilogue: list = []
        self.flat = Flattener()
        self.ptr_ok: set = set()

    def tangent_ref(self, v: ir.Var) -> Optional[ir.Expr]:
        tv = self.tangents.get(v.uid)
        return ir.LocalRef(tv.type, tv) if tv is not None else None

    def new_tangent(self, v: ir.Var) -> Optional[ir.Var]:
        dt = diff_type(v.type)
        if dt is None:
            return None
        if is_ptr_kind(v.type) and v.uid not in self.ptr_ok:
            return None          # a pointer with no known gradient storage (ptrs.py)
        tv = ir.Var("d_" + v.name, dt)
        self.tangents[v.uid] = tv
        return tv

    def side_effect_only(self, e: ir.Intrinsic) -> bool:
        """An intrinsic with out parameters that carries no derivative: an atomic (a side effect kept in
        the primal, as Slang does), or one whose out arguments have no tangents (integers, buffer memory)."""
        name = getattr(getattr(e, "func", None), "slang_name", None) or e.name
        return name.replace("sj::", "").startswith("Interlocked") or all(self.tangent_path(e.args[i]) is None for i in e.out_params)

    def tangent_path(self, e: ir.Expr) -> Optional[ir.Expr]:
        """The tangent l-value matching a primal l-value path."""
        v = lvalue_root(e)
        if v is None or v.uid not in self.tangents:
            return None
        return self.jvp(e)

    # ------------------------------------------------------------------ function

    def run(self) -> ir.Block:
        out = []
        pairs = self.out_fn.params
        body = self.flat.block(self.fn.body)
        ptrs = {p.uid for p in self.fn.params if is_ptr_kind(p.type)}
        ok = {p.uid for p, dt in zip(self.fn.params, self.param_diffs) if dt is not None and p.uid in ptrs}
        self.ptr_ok = ptr_vars_with_diff(ok, ptrs - ok, body)
        for p, np_, dt in zip(self.fn.params, pairs, self.param_diffs):
            if dt is None:
                out.append(ir.VarDecl(p, ir.LocalRef(np_.type, np_)))
                continue
            tv = self.new_tangent(p)
            pr = ir.LocalRef(np_.type, np_)
            if p.direction == "out":
                out.append(ir.VarDecl(p, zero(p.type)))
                out.append(ir.VarDecl(tv, zero(tv.type)))
            else:
                out.append(ir.VarDecl(p, ir.Field(p.type, pr, "p")))
                out.append(ir.VarDecl(tv, ir.Field(tv.type, pr, "d")))
            if p.direction in ("out", "inout"):
                self.epilogue.append(ir.ExprStmt(ir.Assign(np_.type, "=", pr,
                                                           ir.Construct(np_.type, [ir.LocalRef(p.type, p), ir.LocalRef(tv.type, tv)]))))
        # non-diff out params: write back too
        for p, np_, dt in zip(self.fn.params, pairs, self.param_diffs):
            if dt is None and p.direction in ("out", "inout"):
                self.epilogue.append(ir.ExprStmt(ir.Assign(p.type, "=", ir.LocalRef(np_.type, np_), ir.LocalRef(p.type, p))))
        self.ad.use_substitutes(body)
        self.block_into(body, out)
        if self.fn.ret == T.VOID:
            out.extend(self.epilogue)
        return ir.Block(out)

    # ------------------------------------------------------------------ statements

    def block(self, s: ir.Stmt) -> ir.Block:
        out: list = []
        self.block_into(s, out)
        return ir.Block(out)

    def block_into(self, s: ir.Stmt, out: list):
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.stmt(x, out)
        else:
            self.stmt(s, out)

    def stmt(self, s: ir.Stmt, out: list):
        if isinstance(s, ir.Block):
            out.append(self.block(s))
        elif isinstance(s, ir.VarDecl):
            tv = self.new_tangent(s.var) if s.init is not None or True else None
            if s.init is not None and isinstance(s.init, (ir.Call, ir.Intrinsic, ir.MethodCall)) and self.is_call_stmt(s.init):
                out.append(ir.VarDecl(s.var, zero(s.var.type)))
                if tv is not None:
                    out.append(ir.VarDecl(tv, zero(tv.type)))
                self.call(s.init, ir.LocalRef(s.var.type, s.var), out)
                return
            out.append(s)
            if tv is not None:
                t = self.jvp(s.init) if s.init is not None else None
                out.append(ir.VarDecl(tv, tz(tv.type, t)))
        elif isinstance(s, ir.ExprStmt):
            e = s.expr
            if isinstance(e, ir.Assign):
                if isinstance(e.rhs, (ir.Call, ir.Intrinsic, ir.MethodCall)) and self.is_call_stmt(e.rhs):
                    self.call(e.rhs, e.lhs, out)
                    return
                tp = self.tangent_path(e.lhs)
                t = self.jvp(e.rhs) if tp is not None else None
                if tp is not None and t is not None:
                    # the tangent reads the operands' old values: compute it first
                    tmp = ir.Var("dt", tp.type)
                    out.append(ir.VarDecl(tmp, t))
                    t = ir.LocalRef(tp.type, tmp)
                out.append(s)
                if tp is not None:
                    out.append(ir.ExprStmt(ir.Assign(tp.type, "=", tp, tz(tp.type, t))))
            elif isinstance(e, (ir.Call, ir.Intrinsic, ir.MethodCall)):
                self.call(e, None, out)
            else:
                out.append(s)
        elif isinstance(s, ir.If):
            out.append(ir.If(s.cond, self.block(s.then), self.block(s.else_) if s.else_ is not None else None))
        elif isinstance(s, ir.Loop):
            init: list = []
            for x in s.init:
                self.stmt(x, init)
            body = self.block(s.body)
            step_stmts: list = []
            for x in getattr(s, "step_stmts", []):
                self.stmt(x, step_stmts)
            step = s.step
            if step is not None:
                # a flattened pure step has no effect; an assigning step goes through stmt()
                st: list = []
                self.flat.effect(step, st)
                for x in st:
                    self.stmt(x, step_stmts)
                step = None
            # The step (with its tangent updates) runs after every iteration, `continue` included.
            step = ir.StmtExpr(T.VOID, step_stmts, None) if step_stmts else None
            loop = ir.Loop(s.kind, init, s.cond, step, body, s.label, dict(s.attrs), loc=s.loc)
            out.append(loop)
        elif isinstance(s, ir.Switch):
            out.append(ir.Switch(s.value, [ir.SwitchCase(c.values, c.is_default, self.block(ir.Block(c.body)).stmts)
                                           for c in s.cases], s.label))
        elif isinstance(s, ir.Return):
            out.extend(self.epilogue)
            if s.value is None:
                out.append(ir.Return(None))
            elif self.ret_diff is None:
                out.append(ir.Return(s.value))
            else:
                t = self.jvp(s.value)
                out.append(ir.Return(ir.Construct(self.out_fn.ret, [s.value, tz(self.ret_diff, t)])))
        else:
            out.append(s)

    def is_call_stmt(self, e) -> bool:
        return isinstance(e, (ir.Call, ir.MethodCall)) or (isinstance(e, ir.Intrinsic) and e.out_params)

    # ------------------------------------------------------------------ calls

    def call(self, e, dest: Optional[ir.Expr], out: list):
        """dest = e (dest may be None) where e is a call with pure arguments."""
        if isinstance(e, ir.Call) and self.ad.is_differentiable(e.func):
            g = self.ad.fwd(e.func, e.loc)
            pdiffs, rdiff = self.ad.signature(e.func)
            args = []
            post = []
            for a, p, dt, gp in zip(e.args, e.func.params, pdiffs, g.params):
                if dt is None or plain_this(p, gp):
                    args.append(a)
                    continue
                if self.ad.is_ptr(p.type):
                    t = self.jvp(a)
                    if t is None:
                        raise unknown_ptr_diff(self.fn, e.func, p, e.loc)
                    args.append(ir.Construct(gp.type, [a, t]))
                elif p.direction == "in":
                    args.append(ir.Construct(gp.type, [a, tz(dt, self.jvp(a))]))
                else:
                    tmp = ir.Var("pair", gp.type)
                    init = ir.Construct(gp.type, [a, tz(dt, self.tangent_path(a))]) if p.direction == "inout" \
                        else zero(gp.type)
                    out.append(ir.VarDecl(tmp, init))
                    args.append(ir.LocalRef(gp.type, tmp))
                    post.append(ir.ExprStmt(ir.Assign(a.type, "=", a, ir.Field(a.type, ir.LocalRef(gp.type, tmp), "p"))))
                    tp = self.tangent_path(a)
                    if tp is not None:
                        post.append(ir.ExprStmt(ir.Assign(tp.type, "=", tp, ir.Field(dt, ir.LocalRef(gp.type, tmp), "d"))))
            call = ir.Call(g.ret, g, args)
            if dest is not None and rdiff is not None:
                r = ir.Var("res", g.ret)
                out.append(ir.VarDecl(r, call))
                out.extend(post)
                out.append(ir.ExprStmt(ir.Assign(dest.type, "=", dest, ir.Field(dest.type, ir.LocalRef(g.ret, r), "p"))))
                tp = self.tangent_path(dest)
                if tp is not None:
                    out.append(ir.ExprStmt(ir.Assign(tp.type, "=", tp, ir.Field(rdiff, ir.LocalRef(g.ret, r), "d"))))
                return
            if dest is not None:
                out.append(ir.ExprStmt(ir.Assign(dest.type, "=", dest, call)))
            else:
                out.append(ir.ExprStmt(call))
            out.extend(post)
            return
        if isinstance(e, ir.Intrinsic) and e.out_params and not self.side_effect_only(e):
            self.ad.intrinsic_with_outs_fwd(self, e, dest, out)
            return
        # Not differentiable: a constant as far as derivatives go.
        if dest is not None:
            out.append(ir.ExprStmt(ir.Assign(dest.type, "=", dest, e)))
            tp = self.tangent_path(dest)
            if tp is not None:
                out.append(ir.ExprStmt(ir.Assign(tp.type, "=", tp, zero(tp.type))))
        else:
            out.append(ir.ExprStmt(e))
        if isinstance(e, ir.Call):
            for a, p in zip(e.args, e.func.params):
                if p.direction in ("out", "inout"):
                    tp = self.tangent_path(a)
                    if tp is not None:
                        out.append(ir.ExprStmt(ir.Assign(tp.type, "=", tp, zero(tp.type))))


