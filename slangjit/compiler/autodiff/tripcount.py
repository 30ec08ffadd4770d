"""Trip counts of loops for reverse mode, found by running the loop's counters at compile time.

A loop's counters are the locals its condition reads. When every counter starts from a compile-time
constant (the loop's own init, or the last assignment before the loop in the same block), is changed
only by unconditional assignments whose values depend on counters and constants (the step, or
top-level statements of the body when no `continue` can skip them), and the condition depends only
on counters and constants (a conjunction `i < N && data > 0` is bounded by its counter part), the
counters are simply run: `for (int i = 0; i + 1 < K; i++)`, `i <= N`, `i = K - 1; i >= 0; i--`,
`while (i < n) { ...; i += 2; }`, `for (uint i = 1; i < 100; i *= 3)` all get their exact trip
count. `break` / `return` only shorten a loop, so the count stays an upper bound. A loop the
counters do not finish within _LIMIT iterations, or one that reads anything else, has no bound
(None); the reverse sweep then reports E6001 if it has to store values per iteration.
"""
from __future__ import annotations

from typing import Optional

from .. import types as T
from ..ir import nodes as ir
from ..ir.fold import fold_binary, fold_value, round_float, wrap
from ..ir.walk import expr_children, lvalue_root, walk

_LIMIT = 1 << 16


def trip_count(s: ir.Loop, before: list, outer: Optional[list] = None):
    """(the most times flattened loop s runs its body, or None; the counters' values at the start of
    each iteration, or None when there are too many to list). `before` are the statements preceding s
    in its block (they may set its counters); `outer` lists the values the enclosing loops' counters
    take (a triangular `for (j = i; j < 3; j++)` inside `for (i ...)` is run for every i, its bound
    the largest)."""
    best, envs = None, []
    budget = [_LIMIT * 4]             # simulated iterations over all the enclosing values
    for oenv in (outer or [{}]):
        r = _run(s, before, oenv, budget)
        if r is None:
            return None, None
        n, its = r
        best = n if best is None else max(best, n)
        if envs is not None and its is not None and len(envs) + len(its) <= _ENV_CAP:
            envs.extend(its)
        else:
            envs = None
    return best, envs


_ENV_CAP = 4096


def _run(s: ir.Loop, before: list, outer: dict, budget: list, final: bool = False):
    """(trip count, the counters' values per iteration); with final, the counters' values when the
    loop ends instead (None where unknown)."""
    body = _unconditional(s.body)
    if final and any(isinstance(n, ir.Continue) for n in walk(s.body)):
        return None
    if not final and any(isinstance(x, ir.Return) or (isinstance(x, ir.Break) and x.label in (None, s.label)) for x in body) \
            and not any(isinstance(n, ir.Continue) for n in walk(s.body)):
        return 1, None        # the body always leaves on its first pass (`for (;;) { ...; break; }`)
    step = list(getattr(s, "step_stmts", []))
    if s.step is not None:
        if not isinstance(s.step, ir.Assign):
            return None
        step.append(ir.ExprStmt(s.step))
    exits = [x for x in body if _break_if(x, s) is not None]
    if s.cond is None and not exits:
        return None
    has_continue = any(isinstance(n, ir.Continue) for n in walk(s.body))
    # Values of enclosing counters that this loop does not write are constants here.
    fixed = {uid: val for uid, val in outer.items() if not _writes(body + step, {uid: None})}
    # The counters: what the condition and the top-level `if (c) break;` read, and what their updates
    # read, where every write is an unconditional update (the step, or a top-level statement of the
    # body when no `continue` can skip it).
    wanted: dict = {}
    if s.cond is not None:
        _reads(s.cond, wanted)
    for x in exits:
        _reads(_break_if(x, s), wanted)
    counters: dict = {}
    while True:
        grew = False
        for uid, v in list(wanted.items()):
            if uid in counters or uid in fixed:
                continue
            one = {uid: v}
            tops = [x for x in body if _is_update(x, one)]
            if (tops and has_continue) or \
                    _writes([x for x in body if not any(x is t for t in tops)], one) or \
                    _writes([x for x in step if not _is_update(x, one)], one):
                continue
            counters[uid] = v
            for x in tops + [x for x in step if _is_update(x, one)]:
                _reads(_update(x)[1], wanted)
            grew = True
        if not grew:
            break
    if not counters:
        return None
    env = dict(fixed)
    for uid, v in counters.items():
        val = _start(v, s.init, fixed, budget) if _start_in(v, s.init) else _start(v, before, fixed, budget)
        if val is not None:
            env[uid] = val        # else unknown until the loop assigns it (a temporary)
    seq = [x for x in body if _is_update(x, counters) or any(x is e for e in exits)] + \
        [x for x in step if _is_update(x, counters)]
    its: Optional[list] = []
    n = 0
    first = True
    while True:
        if not (first and s.kind == "do") and s.cond is not None:
            c = _may(s.cond, env)
            if c is None:
                return None
            if not c:
                return env if final else (n, its)
        first = False
        n += 1
        budget[0] -= 1
        if n > _LIMIT or budget[0] < 0:
            return None
        if its is not None:
            its.append({k: v for k, v in env.items() if v is not None})
            if len(its) > _ENV_CAP:
                its = None
        for x in seq:
            c = _break_if(x, s)
            if c is not None:
                m = _may(c, env)
                if m is True:
                    return env if final else (n, its)
                if final and m is None:
                    return None
                continue
            v, rhs = _update(x)
            env[v.uid] = _wrap_or_none(_eval(rhs, env), v.type)


def _wrap_or_none(v, t):
    return None if v is None else _narrow(wrap(v, t), t)


def _narrow(v, t):
    """A float result rounded as the generated code stores it (float32 / half), so a float counter
    (`t += 0.1`) runs as many times here as there."""
    s = T.scalar_of(t)
    if isinstance(v, float) and s is not None and s.kind == "float":
        return round_float(v, s.bits)
    return v


def _break_if(x, loop) -> Optional[ir.Expr]:
    """c when x is `if (c) break;` leaving this loop, else None."""
    if not isinstance(x, ir.If) or x.else_ is not None:
        return None
    t = x.then
    while isinstance(t, ir.Block) and len(t.stmts) == 1:
        t = t.stmts[0]
    if isinstance(t, ir.Break) and (t.label is None or t.label == loop.label):
        return x.cond
    return None


def _unconditional(b) -> list:
    """The statements of b that run in order on every pass (nested blocks opened)."""
    if isinstance(b, ir.Block):
        return [y for x in b.stmts for y in _unconditional(x)]
    return [b]


def _reads(e, acc: dict):
    for n in walk(e):
        if isinstance(n, ir.LocalRef):
            acc[n.var.uid] = n.var


def _assigned(x, v) -> Optional[ir.Expr]:
    """The value x (a declaration or `v = e`) gives v, else None."""
    if isinstance(x, ir.VarDecl) and x.var is v:
        return x.init
    if isinstance(x, ir.ExprStmt) and isinstance(x.expr, ir.Assign) and x.expr.op == "=" and \
            isinstance(x.expr.lhs, ir.LocalRef) and x.expr.lhs.var is v:
        return x.expr.rhs
    return None


def _start_in(v, stmts) -> bool:
    return any(_assigned(x, v) is not None or (isinstance(x, ir.VarDecl) and x.var is v) for x in stmts)


def _start(v, stmts, known: dict, budget: Optional[list] = None) -> Optional[object]:
    """v's value after stmts: its last plain assignment, of constants and the known values, with nothing
    after it writing v - or, where the last statement writing v is a loop counting v, v's value when
    that loop ends, found by running it (`while (i < 4) {...; i++;} do {...; i--;} while (i > 2);`)."""
    for k in range(len(stmts) - 1, -1, -1):
        x = stmts[k]
        val = _assigned(x, v)
        if val is not None:
            r = _eval(val, known)
            return r if isinstance(r, (int, float)) else None
        if isinstance(x, ir.VarDecl) and x.var is v:
            return None
        if _writes([x], {v.uid: v}):
            if isinstance(x, ir.Loop) and not _may_leave_early(x):
                r = _run(x, list(stmts[:k]), known, budget if budget is not None else [_LIMIT * 4], final=True)
                if r is not None and isinstance(r.get(v.uid), (int, float)):
                    return r[v.uid]
            return None
    return None


def _may_leave_early(s: ir.Loop) -> bool:
    """Can s stop other than by its condition or a top-level `if (c) break;` (whose condition the run
    evaluates)?  A `return`, or a `break` of s nested deeper, ends it at a point the run cannot see."""
    exits = {id(x) for x in _unconditional(s.body) if _break_if(x, s) is not None}

    def visit(n, depth: int) -> bool:
        if isinstance(n, ir.Return):
            return True
        if isinstance(n, ir.Break) and (n.label == s.label if n.label is not None else depth == 0):
            return True
        if isinstance(n, ir.If) and id(n) in exits:
            return False
        if isinstance(n, ir.Loop):
            depth += 1
        if isinstance(n, ir.Switch):
            depth += 1                      # (a break in a switch leaves the switch)
        for c in _stmt_children(n):
            if visit(c, depth):
                return True
        return False
    return visit(s.body, 0)


def _stmt_children(n):
    if isinstance(n, ir.Block):
        return list(n.stmts)
    if isinstance(n, ir.If):
        return [n.then] + ([n.else_] if n.else_ is not None else [])
    if isinstance(n, ir.Loop):
        return list(n.init) + [n.body]
    if isinstance(n, ir.Switch):
        return [x for c in n.cases for x in c.body]
    return []


def _update(x):
    """(variable, value) when x is `v = e;` or `T v = e;`, else None."""
    if isinstance(x, ir.ExprStmt) and isinstance(x.expr, ir.Assign) and x.expr.op == "=" and \
            isinstance(x.expr.lhs, ir.LocalRef):
        return x.expr.lhs.var, x.expr.rhs
    if isinstance(x, ir.VarDecl) and x.init is not None:
        return x.var, x.init
    return None


def _is_update(x, counters: dict) -> bool:
    u = _update(x)
    return u is not None and u[0].uid in counters


def _writes(stmts: list, counters: dict) -> bool:
    for n in walk(stmts):
        if isinstance(n, ir.Assign) or isinstance(n, ir.IncDec):
            tgt = n.lhs if isinstance(n, ir.Assign) else n.operand
            r = lvalue_root(tgt)
            if r is not None and r.uid in counters:
                return True
        elif isinstance(n, ir.VarDecl) and n.var.uid in counters:
            return True
        elif isinstance(n, (ir.Call, ir.MethodCall, ir.Intrinsic)):
            for a in expr_children(n):
                r = lvalue_root(a)
                if r is not None and r.uid in counters and not _is_in_arg(n, a):
                    return True
    return False


def _is_in_arg(call, a) -> bool:
    if isinstance(call, ir.Call):
        for p, x in zip(call.func.params, call.args):
            if x is a:
                return p.direction == "in"
    if isinstance(call, ir.Intrinsic):
        return not call.out_params
    return False


def _may(e, env: dict):
    """Can condition e hold? An unknown conjunct of `A && B` does not stop A from deciding (an upper
    bound); None when the counters cannot tell."""
    if isinstance(e, ir.Binary) and e.op == "&&":
        a, b = _may(e.lhs, env), _may(e.rhs, env)
        if a is False or b is False:
            return False
        return None if a is None and b is None else True
    v = _eval(e, env)
    return None if v is None else bool(v)


def _eval(e, env: dict):
    """e's value with the counters in env; None when it depends on anything else."""
    if isinstance(e, ir.LocalRef):
        return env.get(e.var.uid)
    if isinstance(e, ir.Binary):
        a = _eval(e.lhs, env)
        if e.op in ("&&", "||"):
            b = _eval(e.rhs, env)
            if e.op == "&&" and ((a is not None and not a) or (b is not None and not b)):
                return False
            if e.op == "||" and ((a is not None and a) or (b is not None and b)):
                return True
            if a is None or b is None:
                return None
            return bool(a) and bool(b) if e.op == "&&" else bool(a) or bool(b)
        b = _eval(e.rhs, env)
        if a is None or b is None:
            return None
        return _narrow(fold_binary(e.op, a, b, e.lhs.type, e.type), e.type)
    if isinstance(e, ir.Unary):
        a = _eval(e.operand, env)
        if a is None:
            return None
        if e.op == "-":
            return wrap(-a, e.type)
        if e.op == "!":
            return not a
        if e.op == "~":
            return wrap(~int(a), e.type) if isinstance(a, int) else None
        return a
    if isinstance(e, ir.Convert) and isinstance(e.type, T.ScalarType):
        a = _eval(e.operand, env)
        if a is None:
            return None
        if e.type.kind == "float":
            return float(a)
        if e.type.kind == "bool":
            return bool(a)
        return wrap(int(a), e.type)
    if isinstance(e, ir.Select):
        c = _eval(e.cond, env)
        if c is None:
            return None
        return _eval(e.then if c else e.else_, env)
    if any(True for _ in _locals(e)):
        return None
    return fold_value(e)


def _local_uids(e) -> set:
    return {n.var.uid for n in walk(e) if isinstance(n, ir.LocalRef)}


def _locals(e):
    for n in walk(e):
        if isinstance(n, ir.LocalRef):
            yield n
