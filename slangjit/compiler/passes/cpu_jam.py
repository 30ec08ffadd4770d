"""Unroll-and-jam of independent counted loop nests in lane-blocked CPU entry points (CpuOptions.jam).

A matrix-vector product inlined for the lanes (the seed MLP's `matMulAdd`) is an outer counted loop over
output rows whose body starts an accumulator, runs an inner counted loop of dependent steps (`r += w * x`,
each rounded to half) and stores the accumulator into the output row:

    for (i = 0; i < 16; i++) { r = b[i]; for (j = 0; j < 4; j++) r += W[i*4+j] * x[j]; out[i] = r; }

In the lane kernel every step is a vector operation on the lanes that waits for the one before it (add,
convert to half and back: a latency chain), while the output rows are independent.  This pass runs U
output rows in one outer iteration with their inner steps interleaved (the accumulator copied per row),

    for (i' = 0; i' < 16 / U; i'++) { r0 = b[i'*U]; ...; for (j ...) { r0 += ...; r1 += ...; ... } out[i'*U] = r0; ... }

so that the C++ compiler has U independent chains to overlap.  Every operation and its rounding stays the
same (bit-exact: only the order of independent work changes).

Taken only where that is provably an interchange of independent work: the outer body is straight-line code
with exactly one inner counted loop (ifs allowed, no other loops, returns, breaks), writes nothing but
locals, has no calls or intrinsics with effects, and every local it writes is either private to an
iteration (declared in the body, or first accessed by a whole assignment that does not read it) or only
accessed as `local(.field)*[i]` (disjoint rows of one array).  The last copy keeps the original variables,
so a value read after the loop is the last iteration's as before.
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T
from .inline_calls import _clone, _fresh
from .red_slots import counted_loop

# Intrinsics (by name without template arguments) that have no effect: the ones the jammed loops may hold.
_PURE = {"sj::min", "sj::max", "sj::abs", "sj::clamp", "sj::select", "sj::bit_cast", "sj::convert", "sj::sqrt",
         "sj::exp", "sj::log", "sj::sin", "sj::cos", "sj::tanh", "sj::floor", "sj::ceil", "sj::fma", "sj::ptr_at",
         "sj::deref", "sj::asfloat16", "sj::asuint16", "sj::asfloat", "sj::asuint"}


def _flat(s) -> list:
    if isinstance(s, ir.Block):
        out = []
        for x in s.stmts:
            out.extend(_flat(x))
        return out
    return [s]


def _mentions(v: ir.Var, node) -> bool:
    return any(isinstance(n, ir.LocalRef) and n.var.uid == v.uid for n in scan.walk(node))


def _effect_free(node) -> bool:
    """No call, no write to memory, no intrinsic outside _PURE, no control transfer but ifs."""
    for n in scan.walk(node):
        if isinstance(n, (ir.Call, ir.MethodCall, ir.StmtExpr, ir.OutConvert, ir.Comma, ir.AddressOf,
                          ir.Return, ir.Break, ir.Continue, ir.Discard, ir.Switch)):
            return False
        if isinstance(n, ir.Intrinsic) and (n.out_params or n.name.split("<", 1)[0] not in _PURE):
            return False
        for t in scan.write_targets(n):
            if scan.local_written(t) is None:
                return False
    return True


def _row_access(node, v: ir.Var, c: ir.Var) -> bool:
    """Is every occurrence of v under node the root of `v(.field)*[c]` (c alone as the index)?"""
    ok_refs = set()
    for n in scan.walk(node):
        if isinstance(n, ir.Index) and isinstance(n.index, ir.LocalRef) and n.index.var.uid == c.uid:
            o = n.obj
            while isinstance(o, ir.Field) and not o.via_pointer:
                o = o.obj
            if isinstance(o, ir.LocalRef) and o.var.uid == v.uid and \
                    isinstance(scan.value_type(n.obj), T.ArrayType):
                ok_refs.add(id(o))
    return all(id(n) in ok_refs for n in scan.walk(node) if isinstance(n, ir.LocalRef) and n.var.uid == v.uid)


def _first_is_whole_write(v: ir.Var, stmts: list) -> bool:
    for x in stmts:
        if isinstance(x, ir.VarDecl) and x.var.uid == v.uid:
            return x.init is None or not _mentions(v, x.init)
        if not _mentions(v, x) and not any(isinstance(n, ir.VarDecl) and n.var.uid == v.uid for n in scan.walk(x)):
            continue
        e = x.expr if isinstance(x, ir.ExprStmt) else None
        return isinstance(e, ir.Assign) and e.op == "=" and isinstance(e.lhs, ir.LocalRef) and \
            e.lhs.var.uid == v.uid and not _mentions(v, e.rhs)
    return False


def _plan(loop: ir.Loop, factor: int) -> Optional[tuple]:
    """(counter, start, trips, U, pre, inner loop, post, private vars, declared uids) or None."""
    outer = counted_loop(loop)
    if outer is None or outer.step != 1:
        return None
    U = next((u for u in range(factor, 1, -1) if outer.trips % u == 0 and outer.trips // u >= 1), 0)
    if U < 2 or outer.trips < 2:
        return None
    stmts = _flat(loop.body)
    loops = [k for k, x in enumerate(stmts) if isinstance(x, ir.Loop)]
    if len(loops) != 1:
        return None
    inner = stmts[loops[0]]
    ic = counted_loop(inner)
    if ic is None or any(isinstance(n, ir.Loop) for n in scan.walk(inner.body)):
        return None
    if any(isinstance(n, ir.Loop) for x in stmts if x is not inner for n in scan.walk(x)):
        return None
    if not all(_effect_free(x) for x in stmts):
        return None
    c = outer.var
    written: dict = {}
    declared: set = set()
    for x in stmts:
        for n in scan.walk(x):
            if isinstance(n, ir.VarDecl):
                written[n.var.uid] = n.var
                declared.add(n.var.uid)
            for t in scan.write_targets(n):
                w = scan.local_written(t)
                if w is not None:
                    written[w.uid] = w
    written.pop(ic.var.uid, None)
    if c.uid in written:
        return None
    private = []
    for v in written.values():
        if _first_is_whole_write(v, stmts):
            private.append(v)
        elif not all(_row_access(x, v, c) for x in stmts):
            return None
    return c, outer.start, outer.trips, U, stmts[:loops[0]], inner, stmts[loops[0] + 1:], private, declared


def _jam(loop: ir.Loop, plan: tuple) -> ir.Loop:
    c, c0, trips, U, pre, inner, post, private, declared = plan
    it = c.type
    copies = []                     # per copy: the subst map for _clone
    decls = []
    for k in range(U):
        idx: ir.Expr = ir.Binary(it, "*", ir.LocalRef(it, c), ir.Const(it, U))
        off = c0 + k
        if off:
            idx = ir.Binary(it, "+", idx, ir.Const(it, off))
        subst: dict = {c.uid: idx}
        for node in [*pre, inner.body, *post]:
            for uid in scan.local_uids(node):
                if uid != c.uid:
                    subst.setdefault(uid, None)
        names = {n.var.uid: n.var for x in [*pre, inner.body, *post] for n in scan.walk(x)
                 if isinstance(n, ir.LocalRef)}
        for uid in list(subst):
            if uid != c.uid:
                subst[uid] = names.get(uid) or next(v for v in private if v.uid == uid)
        if k < U - 1:
            for v in private:
                w = _fresh(v)
                subst[v.uid] = w
                if v.uid not in declared:
                    decls.append(ir.VarDecl(w, None))
        copies.append(subst)
    body = list(decls)
    for subst in copies:
        body += [_clone(x, subst) for x in pre]
    jammed_body = []
    for subst in copies:
        jammed_body += _flat(_clone(inner.body, subst))
    body.append(ir.Loop(inner.kind, inner.init, inner.cond, inner.step, ir.Block(jammed_body), inner.label,
                        dict(inner.attrs)))
    for subst in copies:
        body += [_clone(x, subst) for x in post]
    init = [ir.VarDecl(c, ir.Const(it, 0))]
    cond = ir.Binary(T.BOOL, "<", ir.LocalRef(it, c), ir.Const(it, trips // U))
    step = ir.IncDec(it, "++", False, ir.LocalRef(it, c))
    return ir.Loop("for", init, cond, step, ir.Block(body), loop.label, dict(loop.attrs))


def jam_loops(fn: ir.Function, factor: int) -> int:
    """Unroll-and-jam (by up to `factor`) every outer counted loop of fn's body that qualifies; how many."""
    if factor < 2 or fn.body is None:
        return 0
    done = 0

    def visit(s):
        nonlocal done
        if isinstance(s, ir.Block):
            s.stmts = [visit(x) for x in s.stmts]
            return s
        if isinstance(s, ir.If):
            s.then = visit(s.then)
            if s.else_ is not None:
                s.else_ = visit(s.else_)
            return s
        if isinstance(s, ir.Loop):
            plan = _plan(s, factor)
            if plan is not None:
                done += 1
                return _jam(s, plan)
            s.body = visit(s.body)
        return s
    fn.body = visit(fn.body)
    return done
