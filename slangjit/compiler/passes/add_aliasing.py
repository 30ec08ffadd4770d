"""Does anything but the gradient-add sites themselves touch the memory they add into?  (passes/cpu_adds.py)

Privatised adds reach memory at the end of the worker's range, so a thread that reads (or writes) an
address it added into earlier in the same dispatch would miss its own add.  This analysis labels every
pointer / buffer value of an entry point's functions with where it came from:

* an entry parameter (`("entry", i)`), a global (`("global", name)`),
* a pointer/buffer field of a struct type (`("field", struct, name)`: every instance of the field alike),
* pointer arithmetic, pointer-to-pointer casts and selects keep their operands' labels; locals and
  parameters collect the labels of everything assigned or passed to them (to a fixed point);
* anything else (a pointer loaded from an array or returned by a call, an integer cast to a pointer,
  an address taken) is unknown.

A site's memory is separate when no other memory access of the reachable code shares a label with it
and neither side is unknown.  A program that stores pointers into struct fields or memory, builds a
struct holding pointers, or passes a pointer back through an `out` parameter gets no answer (False).
Distinct labels are assumed to be distinct memory: a host that binds the same memory to two different
parameters or fields (a gradient buffer that is also read as parameters in the same dispatch) is outside
what the analysis sees, as `restrict` is in C.
"""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T
from .reach import BodyNodes

UNKNOWN = ("unknown",)


def _is_ref(t) -> bool:
    return isinstance(t, (T.PointerType, T.BufferType))


def _struct_has_refs(t, depth: int = 0) -> bool:
    """Can a value of struct type t hold a pointer or buffer (in a field, a nested struct, an array)?"""
    field_list = getattr(getattr(t, "info", None), "field_list", None)
    if field_list is None or depth > 16:
        return True                                     # unknown layout: assume it may
    for _, ft in field_list():
        while isinstance(ft, T.ArrayType):
            ft = ft.elem
        if _is_ref(ft) or (isinstance(ft, T.StructType) and _struct_has_refs(ft, depth + 1)):
            return True
    return False


class _GiveUp(Exception):
    pass


class Provenance:
    def __init__(self, entry: ir.Function, functions: list[ir.Function], memo: BodyNodes = None):
        self.var: dict[int, set] = {}
        for i, p in enumerate(entry.params):
            if _is_ref(p.type):
                self.var[p.uid] = {("entry", i)}
        if memo is None:
            memo = BodyNodes()
        bodies = [memo.of(fn) for fn in functions if fn.body is not None]
        changed = True
        while changed:
            before = sum(len(v) for v in self.var.values())
            for nodes in bodies:
                for n in nodes:
                    self._flow(n)
            changed = sum(len(v) for v in self.var.values()) != before

    def _add(self, var: ir.Var, labels: set) -> None:
        self.var.setdefault(var.uid, set()).update(labels)

    def _flow(self, n) -> None:
        if isinstance(n, ir.VarDecl) and n.init is not None and _is_ref(n.var.type):
            self._add(n.var, self.ptr(n.init))
        elif isinstance(n, ir.Assign) and _is_ref(n.lhs.type):
            if isinstance(n.lhs, ir.LocalRef):
                self._add(n.lhs.var, self.ptr(n.rhs))
            else:
                raise _GiveUp("a pointer stored into a field or memory")
        elif isinstance(n, ir.Construct) and isinstance(n.type, T.StructType) and _struct_has_refs(n.type):
            raise _GiveUp("a struct holding pointers built from values")
        elif isinstance(n, ir.Call):
            for p, a in zip(n.func.params, n.args):
                if _is_ref(p.type):
                    if p.direction != "in":
                        raise _GiveUp("a pointer passed by reference")
                    self._add(p, self.ptr(a))

    def ptr(self, e) -> set:
        """Labels of a pointer / buffer value."""
        if isinstance(e, ir.LocalRef):
            return set(self.var.get(e.var.uid, ()))
        if isinstance(e, ir.GlobalRef):
            return {("global", e.var.name)}
        if isinstance(e, ir.Field) and _is_ref(e.type):
            st = e.obj.type.elem if e.via_pointer and isinstance(e.obj.type, T.PointerType) else e.obj.type
            return {("field", str(st), e.name)}
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            if _is_ref(e.lhs.type):
                return self.ptr(e.lhs)
            if _is_ref(e.rhs.type):
                return self.ptr(e.rhs)
        if isinstance(e, ir.Convert) and _is_ref(e.operand.type):
            return self.ptr(e.operand)
        if isinstance(e, ir.Select):
            return self.ptr(e.then) | self.ptr(e.else_)
        if isinstance(e, ir.Comma):
            return self.ptr(e.second)
        return {UNKNOWN}

    def access(self, n):
        """Labels of the memory a node reads or writes (None: not a memory access)."""
        if isinstance(n, ir.Deref):
            return self.ptr(n.ptr)
        if isinstance(n, ir.Index) and _is_ref(scan.value_type(n.obj)):
            return self.ptr(n.obj)
        if isinstance(n, ir.Field) and n.via_pointer:
            return self.ptr(n.obj)
        if isinstance(n, ir.MethodCall) and (n.via_pointer or _is_ref(scan.value_type(n.obj))):
            return self.ptr(n.obj)
        if isinstance(n, ir.AddressOf):
            return {UNKNOWN}
        return None


def separate_sites(entry: ir.Function, functions: list[ir.Function], sites: list[ir.Intrinsic],
                   memo: BodyNodes = None) -> set:
    """ids of the add `sites` whose memory nothing else in `functions` (what `entry` reaches) touches.
    `memo`: the bodies' nodes, walked once (reach.py BodyNodes)."""
    if memo is None:
        memo = BodyNodes()
    try:
        prov = Provenance(entry, functions, memo)
    except _GiveUp:
        return set()
    dests = {id(s.args[0]) for s in sites}
    touched: set = set()
    for fn in functions:
        if fn.body is None:
            continue
        for n in memo.of(fn):
            if id(n) not in dests:
                touched |= prov.access(n) or set()
    if UNKNOWN in touched:
        return set()
    out = set()
    for s in sites:
        lab = prov.access(s.args[0])
        if lab is not None and UNKNOWN not in lab and not (lab & touched):
            out.add(id(s))
    return out
