"""`Atomic<float>.add(v)` with the result unused -> `InterlockedAdd(atomic.value, v)`.

The two are the same operation (Atomic<T> is a struct holding one T named `value`, prelude
09_atomics.h).  Spelled as the intrinsic, such an add is a gradient-add site like any other: where its
address is thread-uniform a coarsened CUDA kernel sums it per thread and adds it once (passes/red_slots.py,
emit/cuda.py).  The seed 002 MLP's loss monitor adds every warp's loss into one float that way; done
as an atomic per warp and turn.  Used by the CUDA emitter only.  Not for Atomic<half>: there the
per-add rounding shows at small totals (2048 + 1 == 2048 in half; tests/runtime/test_cuda_device.py), and
programs see it; float atomics are combined per warp like InterlockedAdd already is.
"""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T


def _float_atomic(t) -> bool:
    t = t.elem if isinstance(t, T.PointerType) else t
    return isinstance(t, T.AtomicType) and t.elem.kind == "float" and t.elem.bits == 32


def _unused_add(s) -> bool:
    e = s.expr if isinstance(s, ir.ExprStmt) else None
    return isinstance(e, ir.MethodCall) and e.name == "add" and len(e.args) == 1 and _float_atomic(e.obj.type)


def lower_atomic_adds(functions: list[ir.Function]) -> int:
    """Rewrite the unused-result float atomic adds of `functions` in place; returns how many.

    Only where the program uses its float atomics as pure accumulators: a deferred add is not visible
    to a later load (or returned value) of the same thread, so a program that calls any other method
    of a float atomic, or uses an add's result, keeps all its atomics as they are."""
    bodies = [fn.body for fn in functions if fn.body is not None]
    adds = {id(s.expr) for b in bodies for s in scan.walk(b) if _unused_add(s)}
    if any(isinstance(e, ir.MethodCall) and _float_atomic(e.obj.type) and id(e) not in adds
           for b in bodies for e in scan.walk(b)):
        return 0
    n = 0
    for body in bodies:
        for s in scan.walk(body):
            if not _unused_add(s):
                continue
            e = s.expr
            elem = (e.obj.type.elem if isinstance(e.obj.type, T.PointerType) else e.obj.type).elem
            obj = ir.Deref(e.obj.type.elem, e.obj, loc=e.loc) if e.via_pointer else e.obj
            dest = ir.Field(elem, obj, "value", loc=e.loc)
            s.expr = ir.Intrinsic(T.VOID, "sj::InterlockedAdd", [dest, e.args[0]], loc=e.loc)
            n += 1
    return n
