"""Prepares a flattened body for reverse mode: every local is hoisted to the function's top
(declarations become assignments, so values can be saved and restored), `return`, `break` and
`continue` become flags that guard the statements after them, `for` loops become `while` loops,
`switch` becomes an if-chain, and every loop gets its trip-count bound (attrs["bound"])."""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir.fold import fold_value
from ..ir.walk import expr_children
from .. import types as T
from ..source import error
from ..ir.difftypes import zero
from .flatten import Flattener
from .tripcount import trip_count


def _not(e):
    return ir.Unary(T.BOOL, "!", e)


def _or(a, b):
    return b if a is None else ir.Binary(T.BOOL, "||", a, b)


def _and(a, b):
    return b if a is None else ir.Binary(T.BOOL, "&&", a, b)


def _leaves(s) -> bool:
    """Does statement s always leave its switch case (break, continue, return, discard, or an if whose
    branches all do)?  A case that does not falls through into the next one."""
    if isinstance(s, (ir.Break, ir.Continue, ir.Return, ir.Discard)):
        return True
    if isinstance(s, ir.Block):
        return bool(s.stmts) and _leaves(s.stmts[-1])
    if isinstance(s, ir.If):
        return s.else_ is not None and _leaves(s.then) and _leaves(s.else_)
    return False


def _set(v, val=True):
    return ir.ExprStmt(ir.Assign(T.BOOL, "=", ir.LocalRef(T.BOOL, v), ir.Const(T.BOOL, val)))


class Ctx:
    def __init__(self, brk=None, cont=None, label=None, parent=None, is_switch=False):
        self.brk, self.cont, self.label, self.parent, self.is_switch = brk, cont, label, parent, is_switch


class Normalizer:
    def __init__(self, rt, fn: ir.Function):
        self.rt = rt
        self.fn = fn
        self.decls: list = []
        self.done: Optional[ir.Var] = None
        self.ret_var: Optional[ir.Var] = None
        self.seed_outs: list = []
        self.n = 0
        self.before: dict = {}     # id(loop) -> the statements before it in its block (trip counts)
        self.outer_envs: Optional[list] = None   # the enclosing loops' counter values, per iteration

    def flag(self, name):
        self.n += 1
        v = ir.Var(f"{name}{self.n}", T.BOOL)
        self.decls.append(v)
        return v

    def run(self, body: ir.Block):
        if self.fn.ret != T.VOID:
            self.ret_var = ir.Var("retval", self.fn.ret)
            self.decls.append(self.ret_var)
        stmts, _ = self.lst(body.stmts, None)
        return ir.Block(stmts), self.decls

    # Each helper returns (statements, flags that may be set inside and must stop what follows).
    def lst(self, stmts: list, ctx, before: list = ()) -> tuple[list, list]:
        out: list = []
        i = 0
        flags_any: list = []
        while i < len(stmts):
            if isinstance(stmts[i], ir.Loop):
                self.before[id(stmts[i])] = list(before) + list(stmts[:i])
            s, flags = self.stmt(stmts[i], ctx)
            out.extend(s)
            i += 1
            if flags and i < len(stmts):
                rest, rflags = self.lst(stmts[i:], ctx, list(before) + list(stmts[:i]))
                guard = None
                for f in flags:
                    guard = _or(guard, ir.LocalRef(T.BOOL, f))
                if rest:
                    out.append(ir.If(_not(guard), ir.Block(rest), None))
                return out, _uniq(flags + rflags)
            flags_any += flags
        return out, _uniq(flags_any)

    def stmt(self, s, ctx) -> tuple[list, list]:
        if isinstance(s, ir.Block):
            return self.lst(s.stmts, ctx)
        if isinstance(s, ir.VarDecl):
            self.decls.append(s.var)
            init = s.init if s.init is not None else zero(s.var.type)
            return [ir.ExprStmt(ir.Assign(s.var.type, "=", ir.LocalRef(s.var.type, s.var), init))], []
        if isinstance(s, ir.ExprStmt):
            if isinstance(s.expr, ir.Assign) or isinstance(s.expr, (ir.Call, ir.Intrinsic, ir.MethodCall)):
                return [s], []
            return [], []
        if isinstance(s, ir.Return):
            if self.done is None:
                self.done = self.flag("done")
            out = []
            if s.value is not None and self.ret_var is not None:
                out.append(ir.ExprStmt(ir.Assign(self.ret_var.type, "=", ir.LocalRef(self.ret_var.type, self.ret_var), s.value)))
            out.append(_set(self.done))
            return out, [self.done]
        if isinstance(s, ir.If):
            a, fa = self.stmt(s.then, ctx)
            b, fb = self.stmt(s.else_, ctx) if s.else_ is not None else ([], [])
            return [ir.If(s.cond, ir.Block(a), ir.Block(b) if b else None)], _uniq(fa + fb)
        if isinstance(s, ir.Break):
            c = self.target(ctx, s.label)
            return [_set(c.brk)], [c.brk]
        if isinstance(s, ir.Continue):
            c = ctx
            while c is not None and (c.is_switch or (s.label is not None and c.label != s.label)):
                c = c.parent
            if c is None:
                raise error("E6009", "internal: continue outside a loop", self.fn.loc)
            if c.cont is None:
                c.cont = self.flag("cont")
            return [_set(c.cont)], [c.cont]
        if isinstance(s, ir.Loop):
            return self.loop(s, ctx)
        if isinstance(s, ir.Switch):
            return self.switch(s, ctx)
        if isinstance(s, ir.Discard):
            return self.stmt(ir.Return(None), ctx)
        raise error("E6007", f"internal: cannot prepare {type(s).__name__} for reverse mode", self.fn.loc)

    def target(self, ctx, label):
        c = ctx
        while c is not None and label is not None and c.label != label:
            c = c.parent
        if c is None:
            raise error("E6009", "internal: break outside a loop", self.fn.loc)
        return c

    def loop(self, s: ir.Loop, ctx) -> tuple[list, list]:
        out: list = []
        init_stmts, _ = self.lst(list(s.init), ctx)
        out.extend(init_stmts)
        bound, envs = self.bound(s)
        brk = self.flag("brk")
        lc = Ctx(brk=brk, label=s.label, parent=ctx)
        saved_envs = self.outer_envs
        self.outer_envs = envs
        try:
            body, flags = self.lst(list(s.body.stmts) if isinstance(s.body, ir.Block) else [s.body], lc)
        finally:
            self.outer_envs = saved_envs
        step: list = []
        for x in getattr(s, "step_stmts", []):
            st, _ = self.stmt(x, lc)
            step.extend(st)
        if s.step is not None:
            tmp: list = []
            Flattener().effect(s.step, tmp)
            for x in tmp:
                st, _ = self.stmt(x, lc)
                step.extend(st)
        inner = []
        if lc.cont is not None:
            inner.append(_set(lc.cont, False))
        inner.extend(body)
        if step:
            # Guard the step only if the body can leave the loop early.
            stop = ir.LocalRef(T.BOOL, brk) if any(f is brk for f in flags) else None
            if self.done is not None and any(f is self.done for f in flags):
                stop = _or(stop, ir.LocalRef(T.BOOL, self.done))
            if stop is not None:
                inner.append(ir.If(_not(stop), ir.Block(step), None))
            else:
                inner.extend(step)
        out.append(_set(brk, False))
        cond = _not(ir.LocalRef(T.BOOL, brk))
        if self.done is not None:
            cond = _and(cond, _not(ir.LocalRef(T.BOOL, self.done)))
        if s.cond is not None:
            cond = _and(cond, s.cond)
        loop = ir.Loop("do" if s.kind == "do" else "while", [], cond, None, ir.Block(inner), None, dict(s.attrs),
                       loc=s.loc)
        loop.attrs["bound"] = bound
        loop.original = s
        out.append(loop)
        outer = [f for f in flags if f is not brk and f is not lc.cont]
        return out, _uniq(outer)

    def switch(self, s: ir.Switch, ctx) -> tuple[list, list]:
        sb = self.flag("swbrk")
        sc = Ctx(brk=sb, parent=ctx, is_switch=True)
        chain = None
        default = None
        flags_all: list = []
        for case in reversed(s.cases):
            body = list(case.body)
            # fall-through into the next case is not supported in reverse mode
            if body and not _leaves(body[-1]) and case is not s.cases[-1]:
                raise error("E6008", "switch fall-through cannot be differentiated in reverse mode", s.loc)
            stmts, flags = self.lst(body, sc)
            flags_all += [f for f in flags if f is not sb]
            blk = ir.Block([_set(sb, False)] + stmts)
            if case.is_default and not case.values:
                default = blk
                if chain is None:
                    chain = blk
                continue
            cond = None
            for v in case.values:
                cond = _or(cond, ir.Binary(T.BOOL, "==", s.value, ir.Const(s.value.type if isinstance(s.value.type, T.ScalarType) else T.INT, v)))
            chain = ir.If(cond, blk, chain if chain is not None else default)
        return ([chain] if chain is not None else []), _uniq(flags_all)

    # ------------------------------------------------------------------ trip counts

    def bound(self, s: ir.Loop):
        """(trip-count bound or None, the counters' values per iteration for the loops inside, or None)."""
        b, envs = trip_count(s, self.before.get(id(s), []), self.outer_envs)
        if "max_iters" in s.attrs:
            return int(s.attrs["max_iters"]), envs
        if b is None:
            b = self.const_bound(s)
        # None: unknown, an error only if the reverse sweep must store values per iteration
        return b, envs

    def unbounded_error(self, s: ir.Loop, value: str = ""):
        line = s.loc.line if s.loc and s.loc.line else self.fn.loc.line
        names: list = []
        _cond_names(getattr(s, "cond", None), names)
        depends = f"; its trip count depends on {', '.join(repr(n) for n in names)}" if names else ""
        what = (f" (it must store '{value}' on every iteration{depends})" if value else
                (f" ({depends[2:]})" if depends else ""))
        raise error("E6001", f"loop in '{self.fn.slang_name}' (line {line}) has no known trip-count bound, so its "
                             f"reverse-mode derivative cannot store its values{what}: add [MaxIters(N)] or bound "
                             f"its counter by compile-time constants (`for (int i = A; i < B; i++)`)", s.loc if s.loc.line else self.fn.loc)

    def const_bound(self, s: ir.Loop) -> Optional[int]:
        init = {}
        for x in s.init:
            if isinstance(x, ir.VarDecl) and x.init is not None:
                v = fold_value(x.init)
                if isinstance(v, int) and not isinstance(v, bool):
                    init[x.var.uid] = v
            elif isinstance(x, ir.ExprStmt) and isinstance(x.expr, ir.Assign) and isinstance(x.expr.lhs, ir.LocalRef):
                v = fold_value(x.expr.rhs)
                if isinstance(v, int) and not isinstance(v, bool):
                    init[x.expr.lhs.var.uid] = v
        c = s.cond
        if not isinstance(c, ir.Binary) or not isinstance(c.lhs, ir.LocalRef) or c.lhs.var.uid not in init:
            return None
        end = fold_value(c.rhs)
        if not isinstance(end, (int, float)) or isinstance(end, bool):
            return None
        start = init[c.lhs.var.uid]
        step = 1
        sts = getattr(s, "step_stmts", [])
        for x in sts:
            if isinstance(x, ir.ExprStmt) and isinstance(x.expr, ir.Assign) and isinstance(x.expr.lhs, ir.LocalRef) \
                    and x.expr.lhs.var is c.lhs.var and isinstance(x.expr.rhs, ir.Binary):
                k = fold_value(x.expr.rhs.rhs)
                if isinstance(k, int):
                    step = k if x.expr.rhs.op == "+" else -k
        if step == 0:
            return None
        span = {"<": end - start, "<=": end - start + 1, ">": start - end, ">=": start - end + 1,
                "!=": abs(end - start)}.get(c.op)
        if span is None:
            return None
        n = -(-int(span) // abs(step))
        return max(0, n)


def _uniq(xs):
    out = []
    for x in xs:
        if all(x is not y for y in out):
            out.append(x)
    return out


def _cond_names(e, acc: list):
    """User variables a loop condition reads (flags and temporaries left out)."""
    if e is None:
        return
    if isinstance(e, ir.LocalRef):
        v = e.var
        if not getattr(v, "is_temp", False) and v.name not in acc and not v.name.startswith(("brk", "cont", "done", "swbrk")):
            acc.append(v.name)
        return
    for c in expr_children(e):
        _cond_names(c, acc)
