"""printf under reverse mode: printed once per primal run.

A reverse-mode derivative replays its primal body (autodiff/reverse.py), and a derivative that calls a
differentiable function first runs the callee's primal (its forward sweep) and later calls the
callee's generated backward derivative, which replays the callee again.  As in Slang, whose backward
function runs each primal instruction once, a `printf` of the callee must print once: the forward
sweep prints, the nested backward derivative does not.  So each call from a generated backward
derivative to a generated backward derivative that can reach a printf calls a *quiet* copy of it: the
same body with fresh locals, its printfs turned into `sj::printf_quiet` (a no-op), and every call
that can reach a printf calling the quiet copy of its callee.  A top-level `bwd_diff(f)` prints f's
printfs once (and those of everything f calls, once per primal call); `fwd_diff(f)` runs the primal
once and prints once.  A loop that reverse mode replays from its entry state (autodiff/recompute.py)
shares the replayed statements with the forward sweep: the second occurrence of the same printf
node in one function is quiet as well.

Run after autodiff built every derivative body (compiler/driver.py), before the passes, which may
inline calls.  A program without printf is left untouched."""
from __future__ import annotations

import dataclasses

from . import nodes as ir
from .walk import IS_DATACLASS_INSTANCE, fresh_var, rebuild

PRINTF = "sj::printf"
QUIET = "sj::printf_quiet"


def _is_printf(n) -> bool:
    return isinstance(n, ir.Intrinsic) and n.name == PRINTF


def _is_generated_bwd(fn: ir.Function) -> bool:
    g = fn.attrs.get("generated_derivative")
    return bool(g) and g[0] == "bwd"


class _KidFields(dict):
    """Dataclass -> its field names but type, loc, func and attrs (in order), on first sight of the class."""

    def __missing__(self, cls):
        f = self[cls] = tuple(x.name for x in dataclasses.fields(cls)
                              if x.name not in ("type", "loc", "func", "attrs"))
        return f


_KID_FIELDS = _KidFields()


def _nodes(x):
    """Every IR node under x (statements and expressions), parents first."""
    is_node = IS_DATACLASS_INSTANCE
    kid_fields = _KID_FIELDS
    stack = [x]
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(reversed(n))
            continue
        if not is_node[type(n)]:
            continue
        yield n
        kids = []
        for name in kid_fields[type(n)]:
            v = getattr(n, name)
            if isinstance(v, (list, tuple)) or is_node[type(v)]:
                kids.append(v)
        stack.extend(reversed(kids))


class _Quieter:
    def __init__(self, program):
        self.program = program
        self.reach: dict[int, bool] = {}
        self.quiet: dict[int, ir.Function] = {}

    def reaches(self, fn: ir.Function) -> bool:
        """Can a call of fn print?  (Recursion: a function on a cycle is decided by its other callees.)"""
        k = id(fn)
        if k in self.reach:
            return self.reach[k]
        self.reach[k] = False
        r = False
        if fn.body is not None:
            for n in _nodes(fn.body):
                if _is_printf(n) or (isinstance(n, ir.Call) and self.reaches(n.func)):
                    r = True
                    break
        self.reach[k] = r
        return r

    # ------------------------------------------------------------------ quiet copies

    def quiet_of(self, fn: ir.Function) -> ir.Function:
        q = self.quiet.get(id(fn))
        if q is not None:
            return q
        subst: dict[int, ir.Var] = {}
        params = [self.fresh(p, subst) for p in fn.params]
        q = ir.Function(fn.name + "_quiet", params, fn.ret, fn.loc)
        q.slang_name = fn.slang_name
        q.attrs = dict(fn.attrs)
        q.attrs.pop("entry", None)
        q.intrinsic = fn.intrinsic
        self.quiet[id(fn)] = q
        q.body = self.clone(fn.body, subst)
        self.program.functions.append(q)
        return q

    @staticmethod
    def fresh(v: ir.Var, subst: dict) -> ir.Var:
        nv = subst[v.uid] = fresh_var(v)
        return nv

    def clone(self, node, subst: dict):
        if isinstance(node, list):
            return [self.clone(x, subst) for x in node]
        if isinstance(node, tuple):
            return tuple(self.clone(x, subst) for x in node)
        if isinstance(node, ir.Var):
            return subst.get(node.uid) or self.fresh(node, subst)
        if not IS_DATACLASS_INSTANCE[type(node)]:
            return node
        return rebuild(node, lambda v: self.clone(v, subst),
                       func=lambda f: self.quiet_of(f) if isinstance(f, ir.Function) and self.reaches(f) else f,
                       override={"name": QUIET} if _is_printf(node) else None)

    # ------------------------------------------------------------------ backward derivatives

    def fix_bwd(self, fn: ir.Function) -> None:
        seen: set[int] = set()
        for n in _nodes(fn.body):
            if isinstance(n, ir.Call) and _is_generated_bwd(n.func) and self.reaches(n.func):
                n.func = self.quiet_of(n.func)
            elif isinstance(n, ir.ExprStmt) and _is_printf(n.expr):
                if id(n.expr) in seen:          # a replayed (recomputed) loop's copy of the statement
                    n.expr = ir.Intrinsic(n.expr.type, QUIET, list(n.expr.args), loc=n.expr.loc)
                else:
                    seen.add(id(n.expr))


def silence_nested_prints(program) -> None:
    """See the module docstring; changes `program` in place."""
    q = _Quieter(program)
    if not any(q.reaches(fn) for fn in program.functions):
        return
    for fn in list(program.functions):
        if _is_generated_bwd(fn) and fn.body is not None and q.reaches(fn):
            q.fix_bwd(fn)
