"""Flattening: every statement does at most one effect (an assignment, or one call whose
arguments are pure), every other expression is pure.  Compound assignments and ++/-- become
plain assignments.  Both autodiff modes work on this form: forward mode because a derivative
rule may reuse its operands, reverse mode because it replays statements one at a time.
"""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir.walk import is_pure
from .. import types as T





class Flattener:
    def __init__(self):
        self.n = 0

    def temp(self, t: T.Type, name="t") -> ir.Var:
        self.n += 1
        v = ir.Var(f"{name}{self.n}", t)
        v.is_temp = True
        return v

    # ------------------------------------------------------------------ statements

    def block(self, b: ir.Stmt) -> ir.Block:
        out: list = []
        self.stmt(b, out)
        if len(out) == 1 and isinstance(out[0], ir.Block):
            return out[0]
        return ir.Block(out)

    def stmt(self, s: ir.Stmt, out: list):
        if isinstance(s, ir.Block):
            inner: list = []
            for x in s.stmts:
                self.stmt(x, inner)
            out.append(ir.Block(inner, loc=s.loc))
        elif isinstance(s, ir.VarDecl):
            if s.init is None:
                out.append(s)
            else:
                init = self.top(s.init, out)
                out.append(ir.VarDecl(s.var, init, loc=s.loc))
        elif isinstance(s, ir.ExprStmt):
            self.effect(s.expr, out)
        elif isinstance(s, ir.If):
            c = self.pure(s.cond, out)
            out.append(ir.If(c, self.block(s.then), self.block(s.else_) if s.else_ is not None else None, loc=s.loc))
        elif isinstance(s, ir.Loop):
            init: list = []
            for x in s.init:
                self.stmt(x, init)
            body: list = []
            cond = s.cond
            if cond is not None and not is_pure(cond):
                pre: list = []
                c = self.pure(cond, pre)
                body.extend(pre)
                body.append(ir.If(ir.Unary(T.BOOL, "!", c), ir.Break(), None))
                cond = None
                if s.kind == "do":
                    raise NotImplementedError("do-while with a side-effecting condition")
            self.stmt(s.body, body)
            step = s.step
            if step is not None and not is_pure(step):
                # step runs after the body: keep it as statements in a dedicated slot
                st: list = []
                self.effect(step, st)
                loop = ir.Loop(s.kind, init, cond, None, ir.Block(body), s.label, dict(s.attrs), loc=s.loc)
                loop.step_stmts = st
                out.append(loop)
                return
            loop = ir.Loop(s.kind, init, cond, step, ir.Block(body), s.label, dict(s.attrs), loc=s.loc)
            loop.step_stmts = []
            out.append(loop)
        elif isinstance(s, ir.Switch):
            v = self.pure(s.value, out)
            cases = []
            for c in s.cases:
                body: list = []
                for x in c.body:
                    self.stmt(x, body)
                cases.append(ir.SwitchCase(c.values, c.is_default, body))
            out.append(ir.Switch(v, cases, s.label, loc=s.loc))
        elif isinstance(s, ir.Return):
            out.append(ir.Return(self.pure(s.value, out) if s.value is not None else None, loc=s.loc))
        else:
            out.append(s)

    # ------------------------------------------------------------------ expressions

    def effect(self, e: ir.Expr, out: list):
        """Evaluate e for its effects only."""
        if isinstance(e, ir.Assign):
            self.assign(e, out)
        elif isinstance(e, ir.IncDec):
            lhs = self.path(e.operand, out)
            one = ir.Const(T.scalar_of(lhs.type) or T.INT, 1)
            op = "+" if e.op == "++" else "-"
            out.append(ir.ExprStmt(ir.Assign(lhs.type, "=", lhs, ir.Binary(lhs.type, op, lhs, one))))
        elif isinstance(e, ir.Comma):
            self.effect(e.first, out)
            self.effect(e.second, out)
        elif isinstance(e, ir.StmtExpr):
            for s in e.stmts:
                self.stmt(s, out)
            if e.result is not None:
                self.effect(e.result, out)
        elif isinstance(e, (ir.Call, ir.Intrinsic, ir.MethodCall)):
            out.append(ir.ExprStmt(self.call(e, out), loc=e.loc))
        elif is_pure(e):
            pass
        else:
            self.pure(e, out)

    def assign(self, e: ir.Assign, out: list) -> ir.Expr:
        lhs = self.path(e.lhs, out)
        if e.op == "=":
            rhs = self.top(e.rhs, out)
        else:
            r = self.pure(e.rhs, out)
            rhs = ir.Binary(lhs.type, e.op[:-1], lhs, r)
        out.append(ir.ExprStmt(ir.Assign(lhs.type, "=", lhs, rhs), loc=e.loc))
        return lhs

    def path(self, e: ir.Expr, out: list) -> ir.Expr:
        """An l-value with pure sub-expressions (indices pulled out if needed)."""
        if isinstance(e, (ir.LocalRef, ir.GlobalRef)):
            return e
        if isinstance(e, ir.Field):
            return ir.Field(e.type, self.path(e.obj, out), e.name, e.via_pointer)
        if isinstance(e, ir.Swizzle):
            return ir.Swizzle(e.type, self.path(e.obj, out), e.indices)
        if isinstance(e, ir.Index):
            return ir.Index(e.type, self.path(e.obj, out) if not isinstance(e.obj.type, T.PointerType) else self.pure(e.obj, out),
                            self.pure(e.index, out))
        if isinstance(e, ir.Deref):
            return ir.Deref(e.type, self.pure(e.ptr, out))
        return self.pure(e, out)

    def top(self, e: ir.Expr, out: list) -> ir.Expr:
        """A statement-level value: pure, or one call with pure arguments."""
        if isinstance(e, (ir.Call, ir.MethodCall)) or (isinstance(e, ir.Intrinsic) and e.out_params):
            return self.call(e, out)
        return self.pure(e, out)

    def call(self, e, out: list):
        if isinstance(e, ir.MethodCall):
            obj = self.path(e.obj, out)
            args = [self.path(a, out) if isinstance(a, (ir.LocalRef, ir.Field, ir.Index, ir.Swizzle)) else self.pure(a, out)
                    for a in e.args]
            return ir.MethodCall(e.type, obj, e.name, args, e.via_pointer, loc=e.loc)
        params = e.func.params if isinstance(e, ir.Call) else None
        args = []
        for i, a in enumerate(e.args):
            by_ref = (params is not None and params[i].direction in ("out", "inout")) or \
                     (isinstance(e, ir.Intrinsic) and i in e.out_params)
            if isinstance(a, ir.OutConvert):
                args.append(ir.OutConvert(a.type, self.path(a.lvalue, out)))
            elif by_ref:
                args.append(self.path(a, out))
            else:
                args.append(self.pure(a, out))
        if isinstance(e, ir.Call):
            return ir.Call(e.type, e.func, args, loc=e.loc)
        node = ir.Intrinsic(e.type, e.name, args, e.out_params, loc=e.loc)
        node.type_args = getattr(e, "type_args", [])
        node.func = getattr(e, "func", None)
        return node

    def pure(self, e: ir.Expr, out: list) -> ir.Expr:
        if e is None or is_pure(e):
            return e
        if isinstance(e, ir.Assign):
            return self.assign(e, out)
        if isinstance(e, ir.IncDec):
            lhs = self.path(e.operand, out)
            old = None
            if not e.prefix:
                old = self.temp(lhs.type)
                out.append(ir.VarDecl(old, lhs))
            self.effect(ir.IncDec(e.type, e.op, True, lhs), out)
            return ir.LocalRef(lhs.type, old) if old is not None else lhs
        if isinstance(e, ir.Comma):
            self.effect(e.first, out)
            return self.pure(e.second, out)
        if isinstance(e, ir.StmtExpr):
            for s in e.stmts:
                self.stmt(s, out)
            return self.pure(e.result, out)
        if isinstance(e, (ir.Call, ir.MethodCall)) or (isinstance(e, ir.Intrinsic) and e.out_params):
            c = self.call(e, out)
            if e.type == T.VOID:
                out.append(ir.ExprStmt(c))
                return ir.Const(T.INT, 0)
            t = self.temp(e.type)
            out.append(ir.VarDecl(t, c))
            return ir.LocalRef(e.type, t)
        if isinstance(e, ir.Select):
            c = self.pure(e.cond, out)
            a_out: list = []
            b_out: list = []
            a = self.pure(e.then, a_out)
            b = self.pure(e.else_, b_out)
            if not a_out and not b_out:
                return ir.Select(e.type, c, a, b)
            t = self.temp(e.type)
            out.append(ir.VarDecl(t, ir.Construct(e.type, [])))
            a_out.append(ir.ExprStmt(ir.Assign(e.type, "=", ir.LocalRef(e.type, t), a)))
            b_out.append(ir.ExprStmt(ir.Assign(e.type, "=", ir.LocalRef(e.type, t), b)))
            out.append(ir.If(c, ir.Block(a_out), ir.Block(b_out)))
            return ir.LocalRef(e.type, t)
        if isinstance(e, ir.Binary) and e.op in ("&&", "||"):
            a = self.pure(e.lhs, out)
            b_out: list = []
            b = self.pure(e.rhs, b_out)
            if not b_out:
                return ir.Binary(e.type, e.op, a, b)
            t = self.temp(e.type)
            out.append(ir.VarDecl(t, a))
            b_out.append(ir.ExprStmt(ir.Assign(e.type, "=", ir.LocalRef(e.type, t), b)))
            cond = ir.LocalRef(e.type, t) if e.op == "&&" else ir.Unary(T.BOOL, "!", ir.LocalRef(e.type, t))
            out.append(ir.If(cond, ir.Block(b_out), None))
            return ir.LocalRef(e.type, t)
        # Rebuild with pure children (left to right).
        if isinstance(e, ir.Unary):
            return ir.Unary(e.type, e.op, self.pure(e.operand, out))
        if isinstance(e, ir.Binary):
            return ir.Binary(e.type, e.op, self.pure(e.lhs, out), self.pure(e.rhs, out))
        if isinstance(e, ir.Convert):
            return ir.Convert(e.type, self.pure(e.operand, out))
        if isinstance(e, ir.Detach):
            return ir.Detach(e.type, self.pure(e.operand, out))
        if isinstance(e, ir.Construct):
            return ir.Construct(e.type, [self.pure(a, out) for a in e.args], e.splat)
        if isinstance(e, ir.Field):
            return ir.Field(e.type, self.pure(e.obj, out), e.name, e.via_pointer)
        if isinstance(e, ir.Swizzle):
            return ir.Swizzle(e.type, self.pure(e.obj, out), e.indices)
        if isinstance(e, ir.Index):
            return ir.Index(e.type, self.pure(e.obj, out), self.pure(e.index, out))
        if isinstance(e, ir.Deref):
            return ir.Deref(e.type, self.pure(e.ptr, out))
        if isinstance(e, ir.AddressOf):
            return ir.AddressOf(e.type, self.path(e.operand, out))
        if isinstance(e, ir.Intrinsic):
            node = ir.Intrinsic(e.type, e.name, [self.pure(a, out) for a in e.args], e.out_params)
            node.type_args = getattr(e, "type_args", [])
            node.func = getattr(e, "func", None)
            return node
        raise NotImplementedError(f"flatten {type(e).__name__}")
