"""Thread-uniformity: which values are the same in every thread of a dispatch.

A value is *varying* when it may differ between the threads that compute it: system values
(thread ids), wave lane queries, results of atomics and builtin-object methods, anything computed
from a varying value, variables assigned under a varying condition (or in a loop whose exit
varies), and the results / out-arguments of calls that take varying arguments.  Everything else is
*uniform*: constants, `uniform` parameters and globals, loop counters of uniform loops, and loads
from uniform addresses.  The analysis is interprocedural (a parameter is varying if any call site
passes a varying argument) and runs to a fixed point over the functions an entry point reaches.

It is an optimisation hint, not a proof: the CUDA gradient-add path checks at run time that a
warp's addresses really are equal before it relies on it (memory written differently by different
threads can make a "uniform" load differ).  Its one user asks "does this kernel add into
thread-uniform addresses?" (emit/cuda.py: the block cache for gradient atomics).
"""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir import walk as scan
from . import reach
from .. import types as T

_VARYING_INTRINSIC_PREFIXES = ("sj::Wave", "sj::Interlocked", "sj::atomic", "sj::Quad")


class Uniformity:
    def __init__(self, entry: ir.Function, system_value_params: set[int], functions: list = None):
        """`system_value_params`: indices of the entry's parameters bound to system values; `functions`: what
        the entry reaches (reach.reachable), when the caller has it."""
        self.functions = functions if functions is not None else reach.reachable(entry)
        self.varying: set[int] = {entry.params[i].uid for i in system_value_params}
        self.varying_result: set[int] = set()          # id(Function) whose return value may vary
        changed = True
        while changed:                                 # monotone: marks are only ever added
            before = (len(self.varying), len(self.varying_result))
            for fn in self.functions:
                if fn.body is not None:
                    self._fn = fn
                    self._stmt(fn.body, False)
            changed = (len(self.varying), len(self.varying_result)) != before

    # ------------------------------------------------------------------ queries
    def is_uniform(self, e: ir.Expr) -> bool:
        return not self._vary(e)

    def address_is_uniform(self, lv: ir.Expr) -> bool:
        """The memory an lvalue names is the same in every thread (and is not thread-private)."""
        if isinstance(lv, ir.Deref):
            return not self._vary(lv.ptr)
        if isinstance(lv, ir.Index):
            through = isinstance(lv.obj.type, T.PointerType) or not _is_lvalue(lv.obj)   # p[i]: memory p points at
            return not self._vary(lv.index) and (not self._vary(lv.obj) if through
                                                  else self.address_is_uniform(lv.obj))
        if isinstance(lv, (ir.Field, ir.Swizzle)):
            if getattr(lv, "via_pointer", False):
                return not self._vary(lv.obj)
            return self.address_is_uniform(lv.obj)
        if isinstance(lv, ir.GlobalRef):
            return lv.var.kind == "uniform"
        return False                                   # locals, parameters: thread-private

    # ------------------------------------------------------------------ expressions
    def _vary(self, e) -> bool:
        if e is None or isinstance(e, ir.Const):
            return False
        if isinstance(e, ir.LocalRef):
            return e.var.uid in self.varying
        if isinstance(e, ir.GlobalRef):
            return e.var.kind not in ("uniform", "const")
        if isinstance(e, ir.SystemValue):
            return True
        if isinstance(e, ir.Call):
            return id(e.func) in self.varying_result or any(self._vary(a) for a in e.args)
        if isinstance(e, ir.Intrinsic):
            return e.name.startswith(_VARYING_INTRINSIC_PREFIXES) or any(self._vary(a) for a in e.args)
        if isinstance(e, ir.MethodCall):
            return True
        if isinstance(e, ir.StmtExpr):
            return True
        return any(self._vary(c) for c in scan.expr_children(e))

    # ------------------------------------------------------------------ effects
    def _mark(self, lv) -> None:
        """The variable an lvalue is rooted in becomes varying (memory is not tracked)."""
        while isinstance(lv, (ir.Field, ir.Swizzle, ir.Index)) and not getattr(lv, "via_pointer", False):
            if isinstance(lv, ir.Index) and isinstance(lv.obj.type, T.PointerType):
                return                                 # p[i] = ...: memory, not the pointer
            lv = lv.obj
        if isinstance(lv, ir.LocalRef):
            self.varying.add(lv.var.uid)

    def _effects(self, e, ctx: bool) -> None:
        """Assignments inside `e`; `ctx` is True under a varying condition."""
        if e is None or not hasattr(e, "__dataclass_fields__"):
            return
        for c in scan.expr_children(e):
            self._effects(c, ctx)
        if isinstance(e, ir.StmtExpr):
            for s in e.stmts:
                self._stmt(s, ctx)
        if isinstance(e, ir.Assign):
            if ctx or self._vary(e.rhs) or _varying_index(self, e.lhs):
                self._mark(e.lhs)
        elif isinstance(e, ir.IncDec):
            if ctx:
                self._mark(e.operand)
        elif isinstance(e, ir.Call):
            any_vary = ctx or any(self._vary(a) for a in e.args)
            for p, a in zip(e.func.params, e.args):
                if self._vary(a):
                    self.varying.add(p.uid)
                if p.direction in ("out", "inout") and (any_vary or p.uid in self.varying):
                    self._mark(a)
        elif isinstance(e, ir.Intrinsic):
            for i in e.out_params:
                if i < len(e.args):
                    self._mark(e.args[i])
        elif isinstance(e, ir.MethodCall):
            for a in e.args:
                self._mark(a)

    # ------------------------------------------------------------------ statements
    def _stmt(self, s, ctx: bool) -> None:
        if s is None:
            return
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self._stmt(x, ctx)
        elif isinstance(s, ir.VarDecl):
            self._effects(s.init, ctx)
            if s.init is not None and (ctx or self._vary(s.init)):
                self.varying.add(s.var.uid)
        elif isinstance(s, ir.ExprStmt):
            self._effects(s.expr, ctx)
        elif isinstance(s, ir.If):
            self._effects(s.cond, ctx)
            inner = ctx or self._vary(s.cond)
            self._stmt(s.then, inner)
            self._stmt(s.else_, inner)
        elif isinstance(s, ir.Loop):
            for x in s.init:
                self._stmt(x, ctx)
            self._effects(s.cond, ctx)
            inner = ctx or self._vary(s.cond) or _has_varying_exit(self, s.body)
            self._stmt(s.body, inner)
            self._effects(s.step, inner)
            if inner and not ctx:                       # a second pass now that the loop varies
                self._stmt(s.body, True)
        elif isinstance(s, ir.Switch):
            self._effects(s.value, ctx)
            inner = ctx or self._vary(s.value)
            for c in s.cases:
                for x in c.body:
                    self._stmt(x, inner)
        elif isinstance(s, ir.Return):
            self._effects(s.value, ctx)
            if s.value is not None and (ctx or self._vary(s.value)):
                self.varying_result.add(id(self._fn))




def _is_lvalue(e) -> bool:
    return isinstance(e, (ir.LocalRef, ir.GlobalRef, ir.Deref, ir.Field, ir.Index, ir.Swizzle))


def _varying_index(u: Uniformity, lv) -> bool:
    while isinstance(lv, (ir.Field, ir.Swizzle, ir.Index)):
        if isinstance(lv, ir.Index) and u._vary(lv.index):
            return True
        lv = lv.obj
    return False


def _has_varying_exit(u: Uniformity, body) -> bool:
    """A break/continue/return under a varying condition inside a loop body."""
    def walk(s, vary):
        if s is None:
            return False
        if isinstance(s, (ir.Break, ir.Continue, ir.Return)):
            return vary
        if isinstance(s, ir.Block):
            return any(walk(x, vary) for x in s.stmts)
        if isinstance(s, ir.If):
            v = vary or u._vary(s.cond)
            return walk(s.then, v) or walk(s.else_, v)
        if isinstance(s, ir.Switch):
            v = vary or u._vary(s.value)
            return any(walk(x, v) for c in s.cases for x in c.body)
        if isinstance(s, ir.Loop):
            return walk(s.body, vary or u._vary(s.cond))
        return False
    return walk(body, False)
