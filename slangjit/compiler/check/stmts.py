"""Statements and function bodies."""
from __future__ import annotations

from typing import Optional

from ..parse import ast
from ..ir import nodes as ir
from ..source import CompileError, Loc
from .. import types as T
from .scope import Env, FuncSym, GlobalSym, PackSym, ValueSym
from .results import OverloadRes


class FuncCtx:
    """What a statement or expression needs to know about where it is."""

    def __init__(self, checker, env: Env, fn: Optional[ir.Function]):
        self.checker = checker
        self.env = env
        self.fn = fn
        self.this_var: Optional[ir.Var] = None
        self.init_this: Optional[ir.Var] = None
        self.labels: list[Optional[str]] = []      # enclosing loops/switches, innermost last
        self.loop_depth = 0
        self.pack_index: Optional[int] = None      # inside `expand`: the element being generated

    def child(self, env: Optional[Env] = None) -> "FuncCtx":
        c = FuncCtx(self.checker, env if env is not None else Env(self.env, "block"), self.fn)
        c.this_var, c.init_this, c.labels, c.loop_depth = self.this_var, self.init_this, self.labels, self.loop_depth
        c.pack_index = self.pack_index
        return c

    def implicit_this(self, loc: Loc) -> Optional[ir.Expr]:
        if self.this_var is None:
            return None
        return ir.LocalRef(self.this_var.type, self.this_var, loc=loc)


LOOP_ATTRS = {"unroll", "ForceUnroll", "loop", "MaxIters", "fastopt", "allow_uav_condition"}


class StmtsMixin:
    def check_pending_bodies(self):
        while self.pending_bodies:
            fn, sym, fenv = self.pending_bodies.pop(0)
            try:
                self.check_body(fn, sym, fenv)
            except CompileError as e:
                # Kept: a caller that tolerates a failed lookup (derivative facts) must not swallow a body's
                # error and leave the function unchecked; the program raises it at the end (check/program.py).
                self.body_errors.append(e)
                raise

    def check_body(self, fn: ir.Function, sym: FuncSym, fenv: Env):
        d: ast.FuncDecl = sym.decl
        ctx = FuncCtx(self, fenv, fn)
        params = list(fn.params)
        if params and params[0].name == "this" and sym.owner is not None:
            ctx.this_var = params[0]
            params = params[1:]
        for p in params:
            fenv.add(p.name, ValueSym(p.name, ir.LocalRef(p.type, p, loc=p.loc)))
        if "pack" in fn.attrs:
            pname, pvars = fn.attrs["pack"]
            fenv.add(pname, PackSym(pname, [ir.LocalRef(v.type, v, loc=v.loc) for v in pvars], False))
        stmts: list[ir.Stmt] = []
        if fn.attrs.get("is_init"):
            this = ir.Var("this", fn.ret, loc=d.loc)
            ctx.this_var = this
            ctx.init_this = this
            stmts.append(ir.VarDecl(this, ir.Construct(fn.ret, [], loc=d.loc)))
        body = self.block(d.body, ctx, new_scope=False)
        stmts.extend(body.stmts)
        if fn.attrs.get("is_init"):
            stmts.append(ir.Return(ir.LocalRef(fn.ret, ctx.init_this)))
        fn.body = ir.Block(stmts, loc=d.loc)

    def default_value(self, t: T.Type, loc: Loc) -> ir.Expr:
        """`T x;` - a struct with a parameterless __init runs it; everything else is zeroed."""
        if isinstance(t, T.StructType):
            inits = [s for s in self.member_syms(t, "__init") if isinstance(s, FuncSym)
                     and all(p.default is not None for p in s.decl.params)]
            if inits:
                return self.resolve_overload(OverloadRes(inits, name="__init", static_owner=t), [], loc,
                                             self.ctx_for_env(self.core_env))
        return ir.Construct(t, [], loc=loc)

    # ------------------------------------------------------------------ statements

    def block(self, b: ast.Block, ctx: FuncCtx, new_scope: bool = True) -> ir.Block:
        c = ctx.child() if new_scope else ctx
        out = []
        for s in b.stmts:
            r = self.stmt(s, c)
            if r is not None:
                out.extend(r if isinstance(r, list) else [r])
        return ir.Block(out, loc=b.loc)

    def sub_stmt(self, s: ast.Stmt, ctx: FuncCtx) -> ir.Stmt:
        r = self.stmt(s, ctx.child())
        if r is None:
            return ir.Block([], loc=s.loc)
        if isinstance(r, list):
            return ir.Block(r, loc=s.loc)
        return r

    def stmt(self, s: ast.Stmt, ctx: FuncCtx):
        loc = s.loc
        if isinstance(s, ast.Block):
            return self.block(s, ctx)
        if isinstance(s, ast.ExprStmt):
            if isinstance(s.expr, ast.ExpandExpr):
                # `expand f(each x)`: the expression once per pack element, in order.
                out = []
                for i in range(self.pack_len(s.expr.operand, ctx)):
                    c = ctx.child(ctx.env)
                    c.pack_index = i
                    out.append(ir.ExprStmt(self.expr(s.expr.operand, c), loc=loc))
                return out
            return ir.ExprStmt(self.expr(s.expr, ctx), loc=loc)
        if isinstance(s, ast.DeclStmt):
            out = []
            for d in s.decls:
                if isinstance(d, ast.VarDecl) and not ({"static"} & d.mods and "const" not in d.mods and False):
                    if "static" in d.mods and "const" in d.mods:
                        # function-local static const: a global constant
                        gs = GlobalSym(d, ctx.env)
                        ctx.env.add(d.name, gs)
                        self.global_var(gs, d.loc)
                        continue
                    out.append(self.local_var(d, ctx))
                else:
                    self.declare(d, ctx.env)
            return out
        if isinstance(s, ast.If):
            cond = self.condition(s.cond, ctx)
            then = self.sub_stmt(s.then, ctx)
            else_ = self.sub_stmt(s.else_, ctx) if s.else_ is not None else None
            known = self.fold(cond)
            if isinstance(known, bool):
                # Dead-branch elimination: generic code like `if (T is float)` must not emit
                # the branch that is ill-formed for this instantiation.
                return then if known else (else_ if else_ is not None else None)
            return ir.If(cond, then, else_, loc=loc)
        if isinstance(s, ast.IfLet):
            val = self.expr(s.value, ctx)
            if not isinstance(val.type, T.OptionalType):
                raise self.err("E4001", f"'if (let ...)' needs an Optional value, got '{val.type}'", s.value.loc)
            tmp = ir.Var("__opt", val.type, loc=loc)
            inner = ctx.child()
            x = ir.Var(s.name, val.type.elem, loc=loc)
            x.mutable = False
            inner.env.add(s.name, ValueSym(s.name, ir.LocalRef(x.type, x)))
            then_body = self.sub_stmt(s.then, inner)
            then = ir.Block([ir.VarDecl(x, ir.Field(x.type, ir.LocalRef(tmp.type, tmp), "value")), then_body])
            else_ = self.sub_stmt(s.else_, ctx) if s.else_ is not None else None
            return ir.Block([ir.VarDecl(tmp, val),
                             ir.If(ir.Field(T.BOOL, ir.LocalRef(tmp.type, tmp), "hasValue"), then, else_, loc=loc)])
        if isinstance(s, (ast.For, ast.While, ast.DoWhile)):
            return self.loop(s, ctx, None)
        if isinstance(s, ast.Labeled):
            inner = s.stmt
            if isinstance(inner, (ast.For, ast.While, ast.DoWhile)):
                return self.loop(inner, ctx, s.label)
            if isinstance(inner, ast.Switch):
                return self.switch(inner, ctx, s.label)
            return self.stmt(inner, ctx)
        if isinstance(s, ast.Switch):
            return self.switch(s, ctx, None)
        if isinstance(s, ast.Break):
            if not ctx.labels:
                raise self.err("E4002", "'break' outside a loop or switch", loc)
            if s.label is not None and s.label not in ctx.labels:
                raise self.err("E4003", f"no enclosing loop labeled '{s.label}'", loc)
            return ir.Break(s.label, loc=loc)
        if isinstance(s, ast.Continue):
            if ctx.loop_depth == 0:
                raise self.err("E4004", "'continue' outside a loop", loc)
            if s.label is not None and s.label not in ctx.labels:
                raise self.err("E4003", f"no enclosing loop labeled '{s.label}'", loc)
            return ir.Continue(s.label, loc=loc)
        if isinstance(s, ast.Return):
            return self.return_stmt(s, ctx)
        if isinstance(s, ast.Discard):
            return ir.Discard(loc=loc)
        if isinstance(s, ast.Empty):
            return None
        raise self.err("E4005", f"unsupported statement {type(s).__name__}", loc)

    def condition(self, e: ast.Expr, ctx) -> ir.Expr:
        c = self.expr(e, ctx)
        if isinstance(c.type, T.VectorType):
            raise self.err("E4006", f"condition must be a scalar, got '{c.type}'", e.loc)
        if T.scalar_of(c.type) is None and not isinstance(c.type, T.PointerType):
            raise self.err("E4006", f"condition must be a bool, got '{c.type}'", e.loc)
        if isinstance(c.type, T.PointerType):
            return c
        return self.coerce(c, T.BOOL, e.loc)

    def local_var(self, d: ast.VarDecl, ctx: FuncCtx) -> ir.VarDecl:
        if d.type is None:
            if d.init is None:
                raise self.err("E4007", f"'{d.name}' needs a type or an initializer", d.loc)
            if isinstance(d.init, ast.InitList):
                raise self.err("E4007", f"cannot infer the type of '{d.name}' from an initializer list", d.loc)
            init = self.expr(d.init, ctx)
            t = init.type
            if t == T.VOID:
                # `let r = bwd_diff(f)(...);` (Slang accepts a void let/var): the call runs,
                # and `r` is a void value.
                ctx.env.add(d.name, ValueSym(d.name, ir.Const(T.VOID, 0, loc=d.loc)))
                return ir.ExprStmt(init, loc=d.loc)
        else:
            t = self.resolve_type(d.type, ctx)
            if isinstance(t, T.ArrayType) and t.n is None and isinstance(d.init, ast.InitList):
                t = T.ArrayType(t.elem, len(d.init.items))
            if isinstance(t, T.InterfaceType) and d.init is not None:
                init = self.expr(d.init, ctx)
                if not self.conforms(init.type, t):
                    raise self.err("E3001", f"'{init.type}' does not conform to '{t}'", d.init.loc)
                if not self.iface_type_differentiable(t) and self.diff_type(init.type) is not None:
                    # seen through an interface that is not IDifferentiable, the value carries no
                    # derivative (Slang: the method view does not propagate into `this`)
                    init = ir.Detach(init.type, init, loc=d.init.loc)
                t = init.type
            elif d.init is not None:
                init = self.coerce_init(d.init, t, ctx)
            else:
                init = self.default_value(t, d.loc)
        if any(isinstance(sym, ValueSym) for sym in ctx.env.names.get(d.name, ())):
            raise self.err("E2004", f"redeclaration of '{d.name}' in the same scope", d.loc)
        var = ir.Var(d.name, t, loc=d.loc)
        var.mutable = d.keyword != "let" and "const" not in d.mods
        ctx.env.add(d.name, ValueSym(d.name, ir.LocalRef(t, var, loc=d.loc)))
        return ir.VarDecl(var, init, loc=d.loc)

    def loop_attrs(self, s: ast.Stmt, ctx=None) -> dict:
        out = {}
        for a in s.attrs:
            if a.name in ("unroll", "ForceUnroll"):
                out["unroll"] = True
            elif a.name == "MaxIters":
                if a.args:
                    v = self.fold(self.expr(a.args[0], ctx if ctx is not None else self.ctx_for_env(self.core_env)))
                    if isinstance(v, int):
                        out["max_iters"] = v
            elif a.name == "loop":
                out["loop"] = True
        return out

    def loop(self, s, ctx: FuncCtx, label: Optional[str]) -> ir.Loop:
        c = ctx.child()
        c.labels = ctx.labels + [label]
        c.loop_depth = ctx.loop_depth + 1
        if isinstance(s, ast.For):
            init = []
            if s.init is not None:
                r = self.stmt(s.init, c)
                if r is not None:
                    init = r if isinstance(r, list) else [r]
            cond = self.condition(s.cond, c) if s.cond is not None else None
            step = self.expr(s.step, c) if s.step is not None else None
            body = self.sub_stmt(s.body, c)
            return ir.Loop("for", init, cond, step, body, label, self.loop_attrs(s, c), loc=s.loc)
        if isinstance(s, ast.While):
            cond = self.condition(s.cond, c)
            body = self.sub_stmt(s.body, c)
            return ir.Loop("while", [], cond, None, body, label, self.loop_attrs(s, c), loc=s.loc)
        body = self.sub_stmt(s.body, c)
        cond = self.condition(s.cond, c)
        return ir.Loop("do", [], cond, None, body, label, self.loop_attrs(s, c), loc=s.loc)

    def switch(self, s: ast.Switch, ctx: FuncCtx, label: Optional[str]) -> ir.Switch:
        v = self.expr(s.value, ctx)
        st = T.scalar_of(v.type)
        if st is None or st.kind not in ("int", "uint", "bool") or isinstance(v.type, T.VectorType):
            raise self.err("E4010", f"switch value must be an integer, got '{v.type}'", s.value.loc)
        c = ctx.child()
        c.labels = ctx.labels + [label]
        cases = []
        seen = set()
        for case in s.cases:
            vals = []
            for ve in case.values:
                x = self.expr(ve, c)
                fv = self.fold(x)
                if fv is None or isinstance(fv, float):
                    raise self.err("E4011", "case label must be a constant integer", ve.loc)
                fv = int(fv)
                if fv in seen:
                    raise self.err("E4012", f"duplicate case label {fv}", ve.loc)
                seen.add(fv)
                vals.append(fv)
            body = []
            cc = c.child(c.env)
            for st_ in case.body:
                r = self.stmt(st_, cc)
                if r is not None:
                    body.extend(r if isinstance(r, list) else [r])
            cases.append(ir.SwitchCase(vals, case.is_default, body))
        return ir.Switch(v, cases, label, loc=s.loc)

    def return_stmt(self, s: ast.Return, ctx: FuncCtx) -> ir.Return:
        fn = ctx.fn
        if fn is None:
            raise self.err("E4013", "'return' outside a function", s.loc)
        if ctx.init_this is not None:
            return ir.Return(ir.LocalRef(fn.ret, ctx.init_this), loc=s.loc)
        if s.value is None:
            if fn.ret != T.VOID:
                raise self.err("E4014", f"function must return a value of type '{fn.ret}'", s.loc)
            return ir.Return(None, loc=s.loc)
        if fn.ret == T.VOID:
            v = self.expr(s.value, ctx)
            if v.type != T.VOID:
                raise self.err("E4015", "void function cannot return a value", s.value.loc)
            return ir.Block([ir.ExprStmt(v), ir.Return(None)], loc=s.loc)
        return ir.Return(self.coerce_init(s.value, fn.ret, ctx), loc=s.loc)
