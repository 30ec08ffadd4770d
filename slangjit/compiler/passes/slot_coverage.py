"""Does every logical thread that runs a coarsened kernel's entry to its end write every slot?

Tensor-core slots (CudaOptions.mma_slots, prelude SJ_RACC_MMA) keep each half add's value in the
warp's stage in shared memory, [slot][lane], and sum the stage after every turn.  A slot a lane did
not write in a turn still holds what it wrote the turn before, so the step clears the whole stage
after summing it: a fifth of the seed MLP's learnGradient on the H100 (session 7).  The clear is not
needed when every slot is written in every turn: when each site and slotted call of the entry's slot
space (passes/red_slots.py) lies on every path from the entry's start to its end - not under an `if`, a
`switch`, a conditional operator or a loop that is not counted, and with no `break`, `continue` or
`return` that could skip it - so that a lane that finishes the entry has overwritten its whole
column.  The entry may return early before its first slot is written (the usual `if (tid >= count)
return;`): a lane that does so writes zeros into its column instead (prelude racc_abandon).

`covering_early_returns(entry, slots)` is the ids of those early returns, or None when some slot
may be skipped.
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from . import reach
from .red_slots import RedSlots


class _Skips(Exception):
    """Some slot may not be written on a path to the function's end."""


def covering_early_returns(entry: ir.Function, slots: RedSlots) -> Optional[set]:
    if entry.body is None or not slots.bears_slots(entry):
        return None
    try:
        return _Walk(slots, {}, entry=True).function(entry)
    except _Skips:
        return None


class _Walk:
    def __init__(self, slots: RedSlots, memo: dict, entry: bool):
        self.slots = slots
        self.memo = memo                  # id(callee) -> covers?; ("stages", id(fn)) -> has half sites?
        self.entry = entry
        self.seen = False                 # a slot item has been passed on the way here
        self.early: set = set()

    def function(self, fn: ir.Function) -> set:
        stmts = fn.body.stmts if isinstance(fn.body, ir.Block) else [fn.body]
        for k, s in enumerate(stmts):
            if k == len(stmts) - 1 and isinstance(s, ir.Return):
                self.expr(s.value)        # the function's own last return: nothing is skipped
            else:
                self.stmt(s)
        return self.early

    # ------------------------------------------------------------------ does it hold staged slots?
    # Only half sites keep their values in the stage; float sites add into registers (f[slot]), which a
    # skipped add leaves as they should be.
    def _staged(self, n) -> bool:
        if id(n) not in self.slots.offset:
            return False
        if isinstance(n, ir.Intrinsic):
            return n.args[0].type.bits == 16
        return isinstance(n, ir.Call) and self._stages(n.func)

    def _stages(self, fn: ir.Function) -> bool:
        k = ("stages", id(fn))
        if k not in self.memo:
            self.memo[k] = any(isinstance(x, ir.Intrinsic) and id(x) in self.slots.offset and x.args[0].type.bits == 16
                               for f in reach.reachable(fn) if f.body is not None for x in scan.walk(f.body))
        return self.memo[k]

    def _slotted(self, node) -> bool:
        return any(self._staged(n) for n in scan.walk(node))

    def _exits(self, node, loop_exits: bool) -> list:
        kinds = (ir.Return, ir.Discard, ir.Break, ir.Continue) if loop_exits else (ir.Return, ir.Discard)
        return [n for n in scan.walk(node) if isinstance(n, kinds)]

    def _skipping(self, node) -> None:
        """`node` runs on some paths only: it must hold no slot, and may return only before the first."""
        if self._slotted(node):
            raise _Skips
        exits = self._exits(node, False)
        if exits:
            if not self.entry or self.seen or any(isinstance(x, ir.Discard) for x in exits):
                raise _Skips
            self.early.update(id(x) for x in exits)

    # ------------------------------------------------------------------ statements and expressions
    def stmt(self, s) -> None:
        if s is None:
            return
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, ir.VarDecl):
            self.expr(s.init)
        elif isinstance(s, ir.ExprStmt):
            self.expr(s.expr)
        elif isinstance(s, ir.If):
            self.expr(s.cond)
            self._skipping(s.then)
            if s.else_ is not None:
                self._skipping(s.else_)
        elif isinstance(s, ir.Switch):
            self.expr(s.value)
            for c in s.cases:
                for x in c.body:
                    self._skipping(x)
        elif isinstance(s, ir.Loop):
            for x in s.init:
                self.stmt(x)
            if id(s) in self.slots.loops:     # counted: the body runs every iteration, in full
                if self._exits(s.body, True) or self._slotted(s.cond) or self._slotted(s.step):
                    raise _Skips
                self.stmt(s.body)
            else:
                self._skipping(s)
        elif isinstance(s, ir.Return):
            self.expr(s.value)
            self._skipping(s)
        else:                                 # break / continue outside a loop, discard, unknown
            raise _Skips

    def expr(self, e) -> None:
        if e is None:
            return
        if isinstance(e, ir.StmtExpr):
            for s in e.stmts:
                self.stmt(s)
            self.expr(e.result)
            return
        if isinstance(e, ir.Select) or (isinstance(e, ir.Binary) and e.op in ("&&", "||")):
            first, *rest = list(scan.expr_children(e))
            self.expr(first)
            for c in rest:                     # evaluated on some paths only
                if self._slotted(c):
                    raise _Skips
            return
        for c in scan.expr_children(e):
            self.expr(c)
        if self._staged(e):
            if isinstance(e, ir.Call) and not self._covers(e.func):
                raise _Skips
            self.seen = True

    def _covers(self, fn: ir.Function) -> bool:
        k = id(fn)
        if k not in self.memo:
            self.memo[k] = False              # recursion: does not cover
            try:
                _Walk(self.slots, self.memo, entry=False).function(fn)
                self.memo[k] = True
            except _Skips:
                pass
        return self.memo[k]
