"""Static slots for gradient adds: where a CUDA kernel can keep each thread's adds in registers.

A float/half `InterlockedAdd(dest, v)` whose result is unused and whose address is thread-uniform
(every thread adds into the same parameter: the seed 002 MLP's `dW += dZ x^T`) is a *site*.  Run
once per sample, every site costs a warp reduction; but when one GPU thread runs many logical
threads in turn (the coarsened kernels of emit/cuda.py), each thread can sum its own samples' values
in a register per site and reduce once at the end.  That needs a static register per dynamic site:
this analysis numbers them.

Every function gets a *slot space*: its sites, plus the slot spaces of the functions it calls, laid
out one after another; a counted loop (`for (int i = c0; i < c1; i++)` with constant bounds and a
counter the body does not write) repeats its body's space once per iteration.  A site's slot is
then `base + offset + iteration index * body size ...`, where `base` is a parameter of the function
(`sj_slot`, -1 = "no slots here": the caller is not a coarsened kernel), so once NVRTC inlines the
calls and unrolls the counted loops (emit/cuda.py asks it to), every slot is a constant and the
accumulators live in registers.  Sites under a loop that is not counted keep the ordinary add.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T

MAX_LOOP_TRIPS = 1024


@dataclass
class CountedLoop:
    var: ir.Var
    start: int
    step: int               # +1 or -1
    trips: int
    offset: int = 0         # where the loop's slots start in the enclosing space
    body_size: int = 0      # slots one iteration uses

    def iteration(self, counter: str) -> str:
        """C expression of the 0-based iteration index, given the counter's C name."""
        return f"((int)({counter}) - {self.start})" if self.step > 0 else f"({self.start} - (int)({counter}))"


def is_red_add(i: ir.Intrinsic) -> bool:
    """InterlockedAdd(dest, v) on a float/half scalar: the result is unused (prelude red_add_fp)."""
    t = i.args[0].type if i.args else None
    return (i.name == "sj::InterlockedAdd" and len(i.args) == 2 and isinstance(t, T.ScalarType)
            and t.kind == "float" and t.bits in (16, 32))


class RedSlots:
    """Slot layout of `functions` for the sites whose ids are in `sites` (uniform red adds)."""

    def __init__(self, functions: list[ir.Function], sites: set[int], memo=None):
        """`memo`: the bodies' nodes (passes/reach.py BodyNodes) when the caller has them: a function from which
        no site can be reached is then given 0 slots without being laid out (its layout records nothing)."""
        self.sites = sites
        self.size: dict[int, int] = {}          # id(Function) -> slots of one call (only > 0 kept)
        self.offset: dict[int, int] = {}        # id(site or Call) -> offset in its space (slotted items)
        self.loops: dict[int, CountedLoop] = {}  # id(Loop) -> layout, for counted loops with slots
        self._busy: set[int] = set()
        if memo is not None:
            for k in _without_sites(functions, sites, memo):
                self.size[k] = 0
        for fn in functions:
            self.function_size(fn)

    def function_size(self, fn: ir.Function) -> int:
        k = id(fn)
        if k in self.size:
            return self.size[k]
        if k in self._busy or fn.body is None:      # recursion: no slots
            return 0
        self._busy.add(k)
        n = self._stmt(fn.body, 0, True)
        self._busy.discard(k)
        self.size[k] = n
        return n

    def bears_slots(self, fn: ir.Function) -> bool:
        return self.size.get(id(fn), 0) > 0

    # -------------------------------------------------------------- layout (returns the next offset)
    def _item(self, node, at: int, slotted: bool) -> int:
        if isinstance(node, ir.Intrinsic) and id(node) in self.sites:
            n = 1
        elif isinstance(node, ir.Call):
            n = self.function_size(node.func)
        else:
            return at
        if n and slotted:
            self.offset[id(node)] = at
            return at + n
        return at

    def _expr(self, e, at: int, slotted: bool) -> int:
        if e is None:
            return at
        if isinstance(e, ir.StmtExpr):
            for s in e.stmts:
                at = self._stmt(s, at, slotted)
            return self._expr(e.result, at, slotted)
        for c in scan.expr_children(e):
            at = self._expr(c, at, slotted)
        return self._item(e, at, slotted)          # arguments are evaluated before the call

    def _stmt(self, s, at: int, slotted: bool) -> int:
        if s is None:
            return at
        if isinstance(s, ir.Block):
            for x in s.stmts:
                at = self._stmt(x, at, slotted)
        elif isinstance(s, ir.VarDecl):
            at = self._expr(s.init, at, slotted)
        elif isinstance(s, ir.ExprStmt):
            at = self._expr(s.expr, at, slotted)
        elif isinstance(s, ir.Return):
            at = self._expr(s.value, at, slotted)
        elif isinstance(s, ir.If):
            at = self._expr(s.cond, at, slotted)
            at = self._stmt(s.then, at, slotted)
            at = self._stmt(s.else_, at, slotted)
        elif isinstance(s, ir.Switch):
            at = self._expr(s.value, at, slotted)
            for c in s.cases:
                for x in c.body:
                    at = self._stmt(x, at, slotted)
        elif isinstance(s, ir.Loop):
            for x in s.init:
                at = self._stmt(x, at, slotted)
            counted = counted_loop(s) if slotted else None
            if counted is None:                     # not counted: nothing inside gets a slot
                self._expr(s.cond, 0, False)
                self._stmt(s.body, 0, False)
                self._expr(s.step, 0, False)
                return at
            size = self._stmt(s.body, 0, True)
            if size:
                counted.offset, counted.body_size = at, size
                self.loops[id(s)] = counted
                at += size * counted.trips
        return at


def _without_sites(functions: list[ir.Function], sites: set[int], memo) -> set:
    """ids of the functions (of `functions` and what they call) from which no site can be reached through calls."""
    callers: dict[int, list] = {}
    seen: dict[int, ir.Function] = {}
    todo = list(functions)
    reach_site: list = []
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen[id(fn)] = fn
        has_site = False
        for n in memo.of(fn):
            if isinstance(n, ir.Call):
                callers.setdefault(id(n.func), []).append(id(fn))
                todo.append(n.func)
            elif id(n) in sites:
                has_site = True
        if has_site:
            reach_site.append(id(fn))
    reaching = set(reach_site)
    while reach_site:                       # callers of a function that reaches a site reach it too
        for c in callers.get(reach_site.pop(), ()):
            if c not in reaching:
                reaching.add(c)
                reach_site.append(c)
    return set(seen) - reaching


def counted_loop(s: ir.Loop) -> Optional[CountedLoop]:
    """`for (int v = c0; v < c1; v++)` (also <=, >, >=, != and --, += 1, -= 1) whose body never
    writes v, with at most MAX_LOOP_TRIPS iterations; else None."""
    if s.kind != "for" or len(s.init) != 1 or not isinstance(s.init[0], ir.VarDecl):
        return None
    v, c0 = s.init[0].var, s.init[0].init
    if not (isinstance(v.type, T.ScalarType) and v.type.kind in ("int", "uint") and _int_const(c0) is not None):
        return None
    c0 = _int_const(c0)
    step = _step(s.step, v)
    cond = s.cond
    if step is None or not isinstance(cond, ir.Binary):
        return None
    op, lhs, rhs = cond.op, cond.lhs, cond.rhs
    if _is_var(rhs, v) and _int_const(lhs) is not None:
        op, lhs, rhs = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}.get(op, ""), rhs, lhs
    c1 = _int_const(rhs)
    if not _is_var(lhs, v) or c1 is None:
        return None
    if step > 0:
        trips = {"<": c1 - c0, "<=": c1 - c0 + 1, "!=": c1 - c0}.get(op)
    else:
        trips = {">": c0 - c1, ">=": c0 - c1 + 1, "!=": c0 - c1}.get(op)
    if trips is None or trips < 0 or trips > MAX_LOOP_TRIPS or _writes(s.body, v):
        return None
    return CountedLoop(v, c0, step, trips)


def _int_const(e) -> Optional[int]:
    if isinstance(e, ir.Const) and isinstance(e.type, T.ScalarType) and e.type.kind in ("int", "uint") \
            and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ir.Convert):
        return _int_const(e.operand)
    return None


def _is_var(e, v) -> bool:
    while isinstance(e, ir.Convert):
        e = e.operand
    return isinstance(e, ir.LocalRef) and e.var is v


def _step(e, v) -> Optional[int]:
    if isinstance(e, ir.IncDec) and _is_var(e.operand, v):
        return 1 if e.op == "++" else -1
    if isinstance(e, ir.Assign) and _is_var(e.lhs, v) and e.op in ("+=", "-=") and _int_const(e.rhs) == 1:
        return 1 if e.op == "+=" else -1
    return None


def _writes(body, v) -> bool:
    """Does `body` assign, increment, take the address of, or pass by reference the variable v?"""
    for n in scan.walk(body):
        if isinstance(n, ir.Assign) and _rooted(n.lhs, v):
            return True
        if isinstance(n, ir.IncDec) and _rooted(n.operand, v):
            return True
        if isinstance(n, ir.AddressOf) and _rooted(n.operand, v):
            return True
        if isinstance(n, ir.Call) and any(p.direction in ("out", "inout") and _rooted(a, v)
                                          for p, a in zip(n.func.params, n.args)):
            return True
        if isinstance(n, ir.Intrinsic) and any(i < len(n.args) and _rooted(n.args[i], v) for i in n.out_params):
            return True
        if isinstance(n, ir.MethodCall) and any(_rooted(a, v) for a in n.args):
            return True
        if isinstance(n, ir.VarDecl) and n.var is v:
            return True
    return False


def _rooted(lv, v) -> bool:
    while isinstance(lv, (ir.Field, ir.Swizzle, ir.Index, ir.Convert)):
        lv = getattr(lv, "obj", None) if not isinstance(lv, ir.Convert) else lv.operand
    return isinstance(lv, ir.LocalRef) and lv.var is v


