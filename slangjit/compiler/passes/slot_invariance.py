"""Are a coarsened kernel's slot addresses the same in every logical thread?  (emit/cuda.py)

A coarsened kernel keeps each thread-uniform gradient add in a register slot (passes/red_slots.py) and
adds the slot's sum into the slot's address at the end.  By default every add checks, at run time,
that its address is the one its slot holds: "uniform" only says an address is computed the same
way in every thread, and a load from memory that a thread has written may differ between threads.

This pass proves the check unnecessary.  Slot addresses are uniform values (constants, uniform
parameters, and loads from uniform addresses); each slot is one site in one calling context and
counted-loop iteration, reached at most once per logical thread.  So two logical threads compute
the same address for a slot unless some load on the way reads memory that changes during the
dispatch.  The kernel must therefore:

* make no plain (non-atomic) store to memory at all (atomic writes of another thread that race
  with a plain read are a data race, undefined in CUDA C++, so they are not considered);
* read no memory after any write of its own logical thread: no load (pointer, buffer, builtin
  object read) may follow, in program order, an atomic or a call that makes one.  The slot adds
  themselves are not writes here: they are deferred to the end of the kernel.

The walk is conservative: both branches of an `if` are assumed taken, a loop body that writes
is assumed to have written before its first iteration, and recursion fails the proof.
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .red_slots import RedSlots
from .. import types as T

_ATOMIC_INTRINSIC_PREFIXES = ("sj::Interlocked", "sj::atomic")
_READ_METHODS = ("GetDimensions", "getCount", "load", "Load", "template LoadT")


class NotInvariant(Exception):
    """The proof failed; the message says where."""


def slot_addresses_invariant(entry: ir.Function, slots: RedSlots) -> Optional[str]:
    """None when every slot address of the coarsened `entry` is provably the same in all logical
    threads of a dispatch; else the reason it is not (for tests and the emitted comment)."""
    try:
        _Walk(slots).function(entry, slotted=True, dirty=False)
    except NotInvariant as e:
        return str(e)
    return None


def is_memory(lv) -> bool:
    """Does the lvalue name memory outside the thread's own variables (through a pointer, a
    buffer, or a per-thread `static` / `groupshared` global)?"""
    while True:
        if isinstance(lv, ir.Deref):
            return True
        if isinstance(lv, ir.Index):
            if isinstance(lv.obj.type, (T.PointerType, T.BufferType)):
                return True
            lv = lv.obj
        elif isinstance(lv, ir.Field):
            if lv.via_pointer:
                return True
            lv = lv.obj
        elif isinstance(lv, (ir.Swizzle, ir.Convert)):
            lv = getattr(lv, "obj", None) if isinstance(lv, ir.Swizzle) else lv.operand
        elif isinstance(lv, ir.LocalRef):
            return False
        elif isinstance(lv, ir.GlobalRef):
            return lv.var.kind in ("static", "groupshared")
        else:
            return True


def _reads_memory(e) -> bool:
    """Is `e` itself an access to memory (its own step, not its operands')?"""
    if isinstance(e, ir.Deref):
        return True
    if isinstance(e, ir.Index):
        return isinstance(e.obj.type, (T.PointerType, T.BufferType))
    if isinstance(e, ir.Field):
        return e.via_pointer
    return False


class _Walk:
    def __init__(self, slots: RedSlots):
        self.slots = slots
        self.memo: dict[tuple, bool] = {}         # (id(fn), slotted, dirty in) -> dirty out
        self.busy: set[int] = set()

    def function(self, fn: ir.Function, slotted: bool, dirty: bool) -> bool:
        key = (id(fn), slotted, dirty)
        if key in self.memo:
            return self.memo[key]
        if fn.body is None:
            return dirty
        if id(fn) in self.busy:
            raise NotInvariant(f"recursion through {fn.slang_name}")
        self.busy.add(id(fn))
        self.slotted, saved = slotted, getattr(self, "slotted", True)
        out = self.stmt(fn.body, dirty)
        self.slotted = saved
        self.busy.discard(id(fn))
        self.memo[key] = out
        return out

    # ------------------------------------------------------------------ statements
    def stmt(self, s, d: bool) -> bool:
        if s is None:
            return d
        if isinstance(s, ir.Block):
            for x in s.stmts:
                d = self.stmt(x, d)
            return d
        if isinstance(s, ir.VarDecl):
            return self.expr(s.init, d)
        if isinstance(s, (ir.ExprStmt, ir.Return)):
            return self.expr(s.expr if isinstance(s, ir.ExprStmt) else s.value, d)
        if isinstance(s, ir.If):
            d = self.expr(s.cond, d)
            return self.stmt(s.then, d) | self.stmt(s.else_, d)
        if isinstance(s, ir.Switch):
            d = self.expr(s.value, d)
            out = d
            for c in s.cases:
                cd = d
                for x in c.body:
                    cd = self.stmt(x, cd)
                out |= cd
            return out
        if isinstance(s, ir.Loop):
            for x in s.init:
                d = self.stmt(x, d)
            once = self._iteration(s, d)
            return self._iteration(s, once) if once and not d else once   # the back edge
        return d

    def _iteration(self, s: ir.Loop, d: bool) -> bool:
        d = self.expr(s.cond, d)
        d = self.stmt(s.body, d)
        return self.expr(s.step, d)

    # ------------------------------------------------------------------ expressions
    def address(self, lv, d: bool) -> bool:
        """The operands of an atomic's target: its own location is written, not read."""
        if isinstance(lv, ir.Deref):
            return self.expr(lv.ptr, d)
        if isinstance(lv, ir.Index):
            obj = self.expr(lv.obj, d) if isinstance(lv.obj.type, (T.PointerType, T.BufferType)) \
                else self.address(lv.obj, d)
            return self.expr(lv.index, obj)
        if isinstance(lv, ir.Field):
            return self.expr(lv.obj, d) if lv.via_pointer else self.address(lv.obj, d)
        if isinstance(lv, ir.Swizzle):
            return self.address(lv.obj, d)
        return self.expr(lv, d)

    def expr(self, e, d: bool) -> bool:
        if e is None or not isinstance(e, ir.Expr):
            return d
        if isinstance(e, ir.StmtExpr):
            for s in e.stmts:
                d = self.stmt(s, d)
            return self.expr(e.result, d)
        target = _atomic_target(e)
        for c in scan.expr_children(e):
            d = self.address(c, d) if c is target else self.expr(c, d)
        if isinstance(e, ir.AddressOf) and not is_memory(e.operand):
            raise NotInvariant(f"{_where(e)}: address of a thread's own variable")
        if _reads_memory(e) and d:
            raise NotInvariant(f"{_where(e)}: memory read after a write of the same thread")
        if isinstance(e, (ir.Assign, ir.IncDec)):
            lv = e.lhs if isinstance(e, ir.Assign) else e.operand
            if is_memory(lv):
                raise NotInvariant(f"{_where(e)}: store to memory")
        elif isinstance(e, ir.Call):
            for p, a in zip(e.func.params, e.args):
                if p.direction in ("out", "inout") and is_memory(a):
                    raise NotInvariant(f"{_where(e)}: store to memory through an out argument")
            slotted = self.slotted and id(e) in self.slots.offset
            d = self.function(e.func, slotted, d)
        elif isinstance(e, ir.Intrinsic):
            for i in e.out_params:
                if i < len(e.args) and e.args[i] is not target and is_memory(e.args[i]):
                    raise NotInvariant(f"{_where(e)}: store to memory through an out argument")
            if e.name.startswith(_ATOMIC_INTRINSIC_PREFIXES):
                deferred = self.slotted and id(e) in self.slots.offset
                d = d or not deferred
        elif isinstance(e, ir.MethodCall):
            reads = e.name.startswith(_READ_METHODS)
            if d and (target is None or reads):
                raise NotInvariant(f"{_where(e)}: builtin object read after a write of the same thread")
            atomic = isinstance(_pointee(e.obj.type), T.AtomicType)
            if not reads and not atomic:
                raise NotInvariant(f"{_where(e)}: {e.name} writes memory")
            d = d or not reads
        return d


def _atomic_target(e):
    """The operand an atomic operation writes (its location is an address, not a read), or None."""
    if isinstance(e, ir.Intrinsic) and e.name.startswith(_ATOMIC_INTRINSIC_PREFIXES) and e.args:
        return e.args[0]
    if isinstance(e, ir.MethodCall) and isinstance(_pointee(e.obj.type), T.AtomicType):
        return e.obj
    return None


def _pointee(t):
    return t.elem if isinstance(t, T.PointerType) else t


def _where(e) -> str:
    loc = getattr(e, "loc", None)
    return str(loc) if loc is not None and str(loc) else type(e).__name__
