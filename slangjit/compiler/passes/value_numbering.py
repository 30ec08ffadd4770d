"""Reuse of values a function body already computed (after passes/inline_calls.py: the whole thread's
work in one body).

Each local gets a *value number*: a structural key of the expression it holds, in terms of the value
numbers of the locals it reads (so copies share numbers).  Memory reads (loads, readonly calls) are
keyed by a memory *epoch* that every possible memory write advances; the gradient adds a coarsened
kernel defers (Effects.deferred) write nothing a later read of the dispatch sees, so they advance
nothing.  When `v = e` finds a local that still holds e's value in an enclosing scope, it becomes
`v = that local`: NVRTC then has nothing to recompute.  Only whole right-hand sides are replaced, so
the code keeps its shape.

Control flow is structured: a branch or loop body is its own scope (what it computes is not reused
after it), and every local a branch or loop assigns gets a fresh number after it (and before a loop,
whose body sees its own earlier iterations).  Locals whose address is taken are never keyed.
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from ..ir.walk import lvalue_root, value_type
from .effects import Effects, effect_intrinsic
from .. import types as T

_VALUE_TYPES = (T.ArrayType, T.VectorType, T.MatrixType)


def _tk(t):
    try:
        hash(t)
        return t
    except TypeError:
        return ("id", id(t))


class ValueNumbering:
    def __init__(self, effects: Effects):
        self.fx = effects
        self.vn: dict[int, tuple] = {}          # local uid -> value number
        self.scopes: list[dict] = [{}]          # value number -> local holding it, per scope
        self.epoch = 0
        self._fresh = 0
        self.addressed: set[int] = set()
        self.reused = 0

    def run(self, fn: ir.Function) -> int:
        for n in scan.walk(fn.body):
            if isinstance(n, ir.AddressOf):
                root = lvalue_root(n.operand)
                if root is not None:
                    self.addressed.add(root.uid)
        self._stmts(fn.body.stmts)
        return self.reused

    # -------------------------------------------------------------- value numbers
    def _new(self) -> tuple:
        self._fresh += 1
        return ("u", self._fresh)

    def _local(self, v: ir.Var) -> tuple:
        if v.uid in self.addressed:
            return self._new()
        k = self.vn.get(v.uid)
        if k is None:
            k = self.vn[v.uid] = self._new()
        return k

    def key(self, e) -> Optional[tuple]:
        """e's value number, or None when e has effects or is not understood."""
        if isinstance(e, ir.LocalRef):
            return self._local(e.var)
        if isinstance(e, ir.Const):
            return ("c", _tk(e.type), repr(e.value))
        if isinstance(e, ir.GlobalRef):
            return ("g", e.var.name, self.epoch)
        if isinstance(e, ir.SystemValue):
            return ("sv", e.name, _tk(e.type))
        if isinstance(e, ir.Detach):
            return self.key(e.operand)
        if isinstance(e, (ir.Binary, ir.Unary, ir.Convert, ir.Select, ir.Construct, ir.Swizzle)):
            kids = []
            for c in scan.expr_children(e):
                k = self.key(c)
                if k is None:
                    return None
                kids.append(k)
            tag = (type(e).__name__, getattr(e, "op", None), getattr(e, "splat", None),
                   getattr(e, "indices", None), _tk(e.type))
            return tag + tuple(kids)
        if isinstance(e, ir.Field):
            ko = self.key(e.obj)
            if ko is None:
                return None
            if e.via_pointer:
                return ("load.f", e.name, _tk(e.type), ko, self.epoch)
            part = _construct_part(ko, e.obj.type, e.name)
            return part if part is not None else ("f", e.name, _tk(e.type), ko)
        if isinstance(e, ir.Index):
            ko, ki = self.key(e.obj), self.key(e.index)
            if ko is None or ki is None:
                return None
            if isinstance(value_type(e.obj), _VALUE_TYPES):
                return ("ix", _tk(e.type), ko, ki)
            return ("load.i", _tk(e.type), ko, ki, self.epoch)
        if isinstance(e, ir.Deref):
            kp = self.key(e.ptr)
            return None if kp is None else ("load.d", _tk(e.type), kp, self.epoch)
        if isinstance(e, ir.Call):
            if not self.fx.readonly(e.func):
                return None
            ks = tuple(self.key(a) for a in e.args)
            return None if None in ks else ("call", id(e.func), ks, self.epoch)
        if isinstance(e, ir.Intrinsic):
            if effect_intrinsic(e):
                return None
            ks = tuple(self.key(a) for a in e.args)
            targs = tuple(_tk(t) for t in getattr(e, "type_args", ()))
            return None if None in ks else ("intr", e.name, targs, _tk(e.type), ks, self.epoch)
        return None

    # -------------------------------------------------------------- statements
    def _stmts(self, stmts: list) -> None:
        for s in stmts:
            self._stmt(s)

    def _scoped(self, s) -> None:
        self.scopes.append({})
        self._stmt(s)
        self.scopes.pop()

    def _forget(self, uids) -> None:
        for u in uids:
            self.vn[u] = self._new()

    def _effects(self, e) -> bool:
        """Apply e's effects (locals it writes forgotten, memory writes advance the epoch); True if
        it has any."""
        written: set = set()
        mem = self.fx.expr_effects(e, written)
        self._forget(written)
        if mem:
            self.epoch += 1
        return mem or bool(written)

    def _stmt(self, s) -> None:
        if isinstance(s, ir.Block):
            self.scopes.append({})
            self._stmts(s.stmts)
            self.scopes.pop()
        elif isinstance(s, ir.VarDecl):
            if s.init is None:
                self.vn[s.var.uid] = ("Construct", None, False, None, _tk(s.var.type))   # zero / default
            else:
                self._define(s.var, s.init, lambda new: setattr(s, "init", new))
        elif isinstance(s, ir.ExprStmt):
            e = s.expr
            if isinstance(e, ir.Assign) and e.op == "=" and isinstance(e.lhs, ir.LocalRef):
                self._define(e.lhs.var, e.rhs, lambda new: setattr(e, "rhs", new))
            else:
                self._effects(e)
        elif isinstance(s, (ir.If, ir.Switch, ir.Loop)):
            written: set = set()
            mem = self.fx.expr_effects(s, written)
            self._forget(written)
            if mem:
                self.epoch += 1
            if isinstance(s, ir.If):
                self._scoped(s.then)
                if s.else_ is not None:
                    self._scoped(s.else_)
            elif isinstance(s, ir.Switch):
                for c in s.cases:
                    self.scopes.append({})
                    self._stmts(c.body)
                    self.scopes.pop()
            else:
                self.scopes.append({})
                self._stmts(s.init)
                self._forget(written)               # the counter and the body's locals vary
                self._scoped(s.body)
                self.scopes.pop()
            self._forget(written)
            if mem:
                self.epoch += 1
        elif isinstance(s, ir.Return) and s.value is not None:
            self._effects(s.value)

    def _define(self, v: ir.Var, rhs: ir.Expr, replace) -> None:
        """v = rhs: reuse a local holding rhs's value, else remember v as holding it."""
        if self._effects(rhs):
            self.vn[v.uid] = self._new()
            return
        k = self.key(rhs)
        if k is None or v.uid in self.addressed:
            self.vn[v.uid] = self._new()
            return
        if not (isinstance(rhs, (ir.LocalRef, ir.Const, ir.GlobalRef, ir.SystemValue))
                or isinstance(rhs, ir.Construct) and not rhs.args):      # copies and zeros: cheap
            holder = self._holder(k)
            if holder is not None and holder is not v and holder.type == v.type:
                replace(ir.LocalRef(v.type, holder, loc=rhs.loc))
                self.reused += 1
            else:
                self.scopes[-1][k] = v
        self.vn[v.uid] = k

    def _holder(self, k: tuple) -> Optional[ir.Var]:
        for scope in reversed(self.scopes):
            v = scope.get(k)
            if v is not None and self.vn.get(v.uid) == k:
                return v
        return None


def _construct_part(k: tuple, t, name: str) -> Optional[tuple]:
    """The value number of field `name` of a value numbered as a member-wise Construct."""
    if k[0] != "Construct" or k[2]:                 # not a construct, or a splat
        return None
    args = k[5:]
    if isinstance(t, T.PairType):
        names = ["p", "d"]
    elif isinstance(t, T.StructType) and hasattr(t.info, "fields"):
        names = [f[0] for f in t.info.fields]
    else:
        return None
    if len(args) != len(names) or name not in names:
        return None
    return args[names.index(name)]


def reuse_values(fn: ir.Function, effects: Effects) -> int:
    """Replace recomputations in fn's body by copies (in place); returns how many."""
    return ValueNumbering(effects).run(fn)
