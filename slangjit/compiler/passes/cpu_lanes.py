"""Preparing CPU entry points for lane-blocked emission with loops (emit/cpu_lane_loops.py).

The lane-blocked emitter runs blocks of logical threads in lock-step; it needs the whole thread's work in
one body.  Fusion (passes/fusion.py) keeps readonly functions that loop as calls (the units of value reuse:
a layer's matrix-vector product); once reuse has run, `inline_for_lanes` inlines those too, in the entry
points the lane emitter can take (`lane_shape`), and keeps the inlined body only where the privatised-add
plan of the entry keeps its slot count (passes/cpu_adds.py, as fuse_privatised does).

`lane_shape(fn)` is the emitter's own legality test, shared so that both agree: structured code whose
loops are counted loops (passes/red_slots.py counted_loop: constant bounds, a counter the body never
writes, so every lane runs the same trips), `if`s, early returns outside loops, no `break` / `continue` /
`switch` / `discard`, no calls left.
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T
from .cpu_adds import CpuAddPlan, plan_cpu_adds
from .dead_code import remove_dead_code
from .effects import Effects
from .inline_calls import Inliner, clone_body
from .red_slots import counted_loop

_CHILD_FIELDS = scan._CHILD_FIELDS     # node class -> its fields but type, loc, var and func
MAX_LANE_NODES = 40000          # IR nodes of an inlined entry: beyond this, the scalar body stays


class _InlineAll(Inliner):
    """Inliner without the reuse exception: readonly functions with loops are inlined too (same depth and size
    budgets)."""

    def keeps_for_reuse(self, fn: ir.Function) -> bool:
        return False


def lane_shape(fn: ir.Function) -> Optional[str]:
    """None when the emitter can lane-block fn's body; else why not."""
    if fn.body is None or fn.ret != T.VOID:
        return "not a void function with a body"
    return _shape(fn.body, in_loop=False)


def _shape(s, in_loop: bool) -> Optional[str]:
    if isinstance(s, ir.Block):
        for x in s.stmts:
            why = _shape(x, in_loop)
            if why:
                return why
        return None
    if isinstance(s, ir.If):
        why = _exprs_ok(s.cond) or _shape(s.then, in_loop)
        if why is None and s.else_ is not None:
            why = _shape(s.else_, in_loop)
        return why
    if isinstance(s, ir.Loop):
        if counted_loop(s) is None:
            return "a loop that is not counted"
        return _shape(s.body, True)
    if isinstance(s, ir.Return):
        if s.value is not None:
            return "return with a value"
        return "return inside a loop" if in_loop else None
    if isinstance(s, ir.VarDecl):
        return _exprs_ok(s.init) if s.init is not None else None
    if isinstance(s, ir.ExprStmt):
        return _exprs_ok(s.expr)
    return type(s).__name__


def _exprs_ok(e) -> Optional[str]:
    for n in scan.walk(e):
        if isinstance(n, (ir.StmtExpr, ir.Comma)):
            return type(n).__name__
        if isinstance(n, ir.Call):
            return f"a call of {n.func.slang_name}"
    return None


def _in_order(node, out: list) -> list:
    """Every node in execution order as far as text can say (a loop's condition and step after its body),
    appended to `out` (a list, not a generator: propagate_copies walks the inlined body once per round)."""
    out.append(node)
    if isinstance(node, ir.Loop):
        for x in node.init:
            _in_order(x, out)
        _in_order(node.body, out)
        for x in (node.cond, node.step):
            if x is not None:
                _in_order(x, out)
    elif isinstance(node, ir.Block):
        for x in node.stmts:
            _in_order(x, out)
    elif isinstance(node, ir.SwitchCase):
        for x in node.body:
            _in_order(x, out)
    elif isinstance(node, (ir.Expr, ir.Stmt)):
        for name in _CHILD_FIELDS[type(node)]:      # the fields but type, loc, var and func, in order
            val = getattr(node, name)
            if isinstance(val, (ir.Expr, ir.Stmt)):
                _in_order(val, out)
            elif isinstance(val, list):
                for x in val:
                    if isinstance(x, (ir.Expr, ir.Stmt, ir.SwitchCase)):
                        _in_order(x, out)
    return out


def _write_positions(nodes: list) -> tuple[dict, set]:
    """uid -> positions (indices in `nodes`, a body's _in_order) of every write of a local; uids whose address
    escapes."""
    writes: dict = {}
    escaped: set = set()
    for pos, n in enumerate(nodes):
        targets = scan.write_targets(n)
        if isinstance(n, ir.VarDecl):
            writes.setdefault(n.var.uid, []).append(pos)
        elif isinstance(n, (ir.MethodCall, ir.AddressOf, ir.OutConvert)):
            for m in scan.walk(n):
                if isinstance(m, ir.LocalRef):
                    escaped.add(m.var.uid)
        for t in targets:
            v = scan.local_written(t)
            if v is not None:
                writes.setdefault(v.uid, []).append(pos)
                continue
            for m in scan.walk(t):
                if isinstance(m, ir.LocalRef):
                    escaped.add(m.var.uid)
    return writes, escaped


def propagate_copies(fn: ir.Function) -> int:
    """`T v = w;` where v is written by nothing else and w by nothing after it: uses of v read w.  Inlining
    leaves chains of such copies (arguments, results); as lane arrays each is a copy per component."""
    done = 0
    while True:
        nodes = _in_order(fn.body, [])
        writes, escaped = _write_positions(nodes)
        subst: dict = {}
        drop: set = set()
        for pos, n in enumerate(nodes):
            if not (isinstance(n, ir.VarDecl) and isinstance(n.init, ir.LocalRef)):
                continue
            v, w = n.var, n.init.var
            # a copy of a copy substituted above reads the first one's source: what the next round would see
            # (that copy's checks held for the source at an earlier position, so they hold here), one round
            # for a whole chain instead of one per link
            while w.uid in subst:
                w = subst[w.uid]
            if v.uid in escaped or w.uid in escaped or v.type != w.type or v.uid in subst:
                continue
            if writes.get(v.uid) != [pos] or any(p > pos for p in writes.get(w.uid, [])):
                continue
            subst[v.uid] = w
            drop.add(id(n))
        if not subst:
            return done
        done += len(subst)
        fn.body = _rewrite(fn.body, subst, drop)


def _rewrite(node, subst: dict, drop: set):
    if isinstance(node, ir.Block):
        node.stmts = [_rewrite(x, subst, drop) for x in node.stmts if id(x) not in drop]
        return node
    if isinstance(node, ir.LocalRef):
        w = subst.get(node.var.uid)
        return ir.LocalRef(node.type, w, loc=node.loc) if w is not None else node
    if isinstance(node, (ir.Expr, ir.Stmt)):
        for name in _CHILD_FIELDS[type(node)]:
            val = getattr(node, name)
            if isinstance(val, (ir.Expr, ir.Stmt)):
                setattr(node, name, _rewrite(val, subst, drop))
            elif isinstance(val, list):
                setattr(node, name, [_rewrite(x, subst, drop) if isinstance(x, (ir.Expr, ir.Stmt, ir.SwitchCase)) else x
                                     for x in val if id(x) not in drop])
    elif isinstance(node, ir.SwitchCase):
        node.body = [_rewrite(x, subst, drop) for x in node.body if id(x) not in drop]
    return node


def inline_for_lanes(entries: list, functions: list, plan: Optional[CpuAddPlan], max_slots: int,
                     group_barrier: bool) -> tuple[Optional[CpuAddPlan], list]:
    """Inline every call of the entry points that become lane-shaped by it.  Returns the add plan (planned
    again when a body changed) and the entry points that were rewritten."""
    if group_barrier:
        return plan, []
    changed, saved = [], {}
    for fn, _ in entries:
        if fn.body is None or fn.ret != T.VOID:
            continue
        if not any(isinstance(n, ir.Call) for n in scan.walk(fn.body)):
            continue
        old = fn.body
        fn.body = clone_body(fn)
        inl = _InlineAll(Effects())
        inl.budget = MAX_LANE_NODES
        inl.inline_body(fn)
        if lane_shape(fn) is not None:
            fn.body = old
            continue
        propagate_copies(fn)
        remove_dead_code(fn, Effects())
        saved[id(fn)] = old
        changed.append(fn)
    if not changed:
        return plan, []
    if plan is None:                # adds are not privatised: nothing to plan again
        return plan, changed
    old_entries = dict(plan.entries)
    new = plan_cpu_adds(entries, functions, max_slots, group_barrier)
    if any(new.entries.get(k) != n for k, n in old_entries.items()) or \
            any(k not in old_entries for k in new.entries):
        for fn in changed:          # the plan moved: keep the bodies it was made for
            fn.body = saved[id(fn)]
        return plan, []
    return (new if new.entries else plan), changed
