"""Removal of code whose results nothing uses (after passes/inline_calls.py and passes/value_numbering.py).

Reverse mode computes every adjoint, also those of inputs nobody asked for (the seed MLP's
`no_diff` inputs still get `d(encoding)` through `MLVec.fromArray`'s replayed loop and its iteration
stack); after inlining they are plainly dead.  NVRTC removes dead arithmetic but not a loop that
pushes and pops a local stack (local memory traffic in every thread), so this pass does it first.

Liveness is flow-insensitive and computed to a fixed point: a statement is live when it may write
memory or do anything else that must happen (Effects, without deferral: a gradient add is an
effect), or writes a live local; every local a live statement (or the condition of a branch or loop
that holds one) reads is live.  Dead statements, dead declarations and branches / loops left without
live statements are dropped.
"""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir import walk as scan
from .effects import Effects


class DeadCode:
    def __init__(self, effects: Effects):
        self.fx = effects
        self.live: set[int] = set()
        self.removed = 0
        self.jumps = [True]                         # do break/continue here count as live?
        self._effects: dict[int, tuple] = {}
        self._read_sets: dict[int, frozenset] = {}

    def _init_live(self, loop: ir.Loop) -> bool:
        for x in loop.init:
            e = x.init if isinstance(x, ir.VarDecl) else x.expr if isinstance(x, ir.ExprStmt) else x
            if e is not None and self._simple_live(e):
                return True
        return False

    def _simple_live(self, e) -> bool:
        k = id(e)
        if k not in self._effects:               # the marking repeats to a fixed point: scan once
            written: set = set()
            self._effects[k] = (self.fx.expr_effects(e, written), frozenset(written))
        mem, written = self._effects[k]
        return mem or not written.isdisjoint(self.live)

    def _reads(self, e) -> None:
        k = id(e)
        r = self._read_sets.get(k)
        if r is None:
            r = self._read_sets[k] = frozenset(n.var.uid for n in scan.walk(e) if isinstance(n, ir.LocalRef))
        self.live |= r

    # -------------------------------------------------------------- marking
    def _mark(self, s) -> bool:
        """Marks what live parts of s read; True when s holds something live."""
        if isinstance(s, ir.Block):         # last statement first: a read marks its writers live in the same pass
            return any([self._mark(x) for x in reversed(s.stmts)])
        if isinstance(s, ir.VarDecl):
            if s.init is None:
                return s.var.uid in self.live
            if s.var.uid in self.live or self._simple_live(s.init):
                self._reads(s.init)
                return True
            return False
        if isinstance(s, ir.ExprStmt):
            if self._simple_live(s.expr):
                self._reads(s.expr)
                return True
            return False
        if isinstance(s, ir.If):
            inner = [self._mark(s.then)] + ([self._mark(s.else_)] if s.else_ is not None else [])
            if any(inner) or self._simple_live(s.cond):
                self._reads(s.cond)
                return True
            return False
        if isinstance(s, ir.Switch):
            self.jumps.append(True)
            inner = [self._mark(x) for c in reversed(s.cases) for x in reversed(c.body)]
            self.jumps.pop()
            if any(inner) or self._simple_live(s.value):
                self._reads(s.value)
                return True
            return False
        if isinstance(s, ir.Loop):
            self.jumps.append(False)                # its break/continue alone do not make it live
            inner = self._mark(s.body)
            self.jumps.pop()
            heads = [x for x in (s.cond, s.step) if x is not None]
            if inner or any(self._simple_live(x) for x in heads) or self._init_live(s):
                self.jumps.append(True)             # a live loop keeps its exits (and their conditions)
                self._mark(s.body)
                self.jumps.pop()
                for x in heads:
                    self._reads(x)
                for x in s.init:
                    self._reads(x)
                    if isinstance(x, ir.VarDecl):
                        self.live.add(x.var.uid)
                return True
            return False
        if isinstance(s, (ir.Break, ir.Continue)):
            return self.jumps[-1]
        if isinstance(s, (ir.Return, ir.Discard)):
            if isinstance(s, ir.Return) and s.value is not None:
                self._reads(s.value)
            return True
        self._reads(s)                        # anything else: kept as it is
        return True

    # -------------------------------------------------------------- sweeping
    def _sweep_list(self, stmts: list) -> list:
        out = []
        for s in stmts:
            t = self._sweep(s)
            if t is None:
                self.removed += 1
            else:
                out.append(t)
        return out

    def _sweep(self, s):
        if isinstance(s, ir.Block):
            s.stmts = self._sweep_list(s.stmts)
            return s
        if isinstance(s, ir.VarDecl):
            keep = s.var.uid in self.live or (s.init is not None and self._simple_live(s.init))
            return s if keep else None
        if isinstance(s, ir.ExprStmt):
            return s if self._simple_live(s.expr) else None
        if isinstance(s, ir.If):
            s.then = self._sweep(s.then) or ir.Block([])   # (a dead loop's exits go with it)
            if s.else_ is not None:
                s.else_ = self._sweep(s.else_)
            empty = _empty(s.then) and (s.else_ is None or _empty(s.else_))
            return None if empty and not self._simple_live(s.cond) else s
        if isinstance(s, ir.Switch):
            for c in s.cases:
                c.body = self._sweep_list(c.body)
            return s
        if isinstance(s, ir.Loop):
            s.body = self._sweep(s.body) or ir.Block([])
            heads = [x for x in (s.cond, s.step) if x is not None]
            if _empty(s.body) and not any(self._simple_live(x) for x in heads) and not self._init_live(s):
                return None
            return s
        return s

    def run(self, fn: ir.Function) -> int:
        while True:
            before = len(self.live)
            self._mark(fn.body)
            if len(self.live) == before:
                break
        fn.body = self._sweep(fn.body)
        return self.removed


def _empty(s) -> bool:
    return s is None or isinstance(s, ir.Block) and all(_empty(x) for x in s.stmts)


def remove_dead_code(fn: ir.Function, effects: Effects) -> int:
    """Drop fn's statements whose results nothing uses (in place); returns how many."""
    return DeadCode(effects).run(fn)
