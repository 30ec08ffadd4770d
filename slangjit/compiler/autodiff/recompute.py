"""Reverse mode of a loop whose trip count is known only at run time (a uniform, a parameter, a
value computed before it) and whose iterations overwrite values the reverse sweep needs.

Stored per iteration, such a loop would need storage of unknown size.  Instead the forward sweep
records only the loop's entry state (the variables its body writes) and its trip count n, running
the body as plain primal code.  The reverse sweep then visits iterations k = n-1 ... 0: it resets
the state to the entry state, replays k iterations of plain primal code, runs iteration k once
more with the usual per-statement storage (one iteration's worth), and reverses that iteration.
Finally the state is reset to the entry state, as the reverse sweep expects after undoing a
statement.  Cost: O(n^2) primal iterations, O(1) storage per loop - exact, never truncated.

Replaying iterations repeats the body's effects, so the body must be free of effects outside its
locals (no buffer writes, atomics or impure calls); otherwise the loop stays E6001 and asks for
[MaxIters(N)].  (An inner loop of such a body may itself be of either kind.)"""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir.walk import lvalue_root
from .. import types as T
from ..source import CompileError, error
from ..ir.difftypes import zero


class RecomputeLoops:
    """Mixed into ReverseTransform (reverse.py)."""

    def sweep_loop_fwd_or_recompute(self, s: ir.Loop, out: list):
        """An unbounded loop: stored per iteration if it needs no storage, else recomputed."""
        tmp: list = []
        try:
            self.sweep_loop_fwd(s, tmp)
        except CompileError as ex:
            d = ex.diagnostics[0]
            if d.code != "E6001":
                raise
            if not self.recompute_loop_fwd(s, out):
                if "cannot be replayed" in d.message:
                    raise
                raise error("E6001", d.message + "; nor can it be replayed instead, since its body writes memory "
                                                 "or calls a function with effects", d.loc) from None
            return
        out.extend(tmp)

    def recompute_loop_fwd(self, s: ir.Loop, out: list) -> bool:
        """The forward sweep of a recomputed loop (see the module docstring); False where the
        body's effects forbid replaying it."""
        if not self._stmt_pure(s.body) or (s.cond is not None and not self.side_effect_free(s.cond)):
            return False
        written: list = []
        _written_vars(s.body, written)
        if any(v.uid in self.pdiff for v in written):
            return False                    # pointer companions are maintained by the sweep itself
        snaps = []
        for v in written:
            snap = ir.Var(f"snap_{v.name}", v.type)
            self.extra_decls.append(ir.VarDecl(snap, zero(v.type)))
            snaps.append((v, snap))
            out.append(_set(snap, ir.LocalRef(v.type, v)))
        # the entry state and the trip count, per execution of the loop (it may sit in another loop)
        for v, snap in snaps:
            self.push(ir.LocalRef(snap.type, snap), out)
        cnt = self.temp(T.INT, "cnt")
        out.append(ir.VarDecl(cnt, ir.Const(T.INT, 0)))
        cref = ir.LocalRef(T.INT, cnt)
        body = [copy_stmt(s.body), _set(cnt, ir.Binary(T.INT, "+", cref, ir.Const(T.INT, 1)))]
        cond = s.cond if s.cond is not None else ir.Const(T.BOOL, True)
        out.append(ir.Loop("do" if s.kind == "do" else "while", [], cond, None, ir.Block(body)))
        self.push(cref, out)
        self.recomputed[id(s)] = snaps
        return True

    def recompute_loop_rev(self, s: ir.Loop, out: list):
        snaps = self.recomputed[id(s)]
        n = self.temp(T.INT, "n")
        out.append(ir.VarDecl(n, self.pop(T.INT, out)))
        for v, snap in reversed(snaps):
            out.append(_set(snap, self.pop(snap.type, out)))
        k = self.temp(T.INT, "k")
        j = self.temp(T.INT, "j")
        kref, jref = ir.LocalRef(T.INT, k), ir.LocalRef(T.INT, j)
        it: list = [_set(v, ir.LocalRef(snap.type, snap)) for v, snap in snaps]
        # replay iterations 0 .. k-1
        it.append(ir.Loop("for", [ir.VarDecl(j, ir.Const(T.INT, 0))], ir.Binary(T.BOOL, "<", jref, kref),
                          ir.Assign(T.INT, "=", jref, ir.Binary(T.INT, "+", jref, ir.Const(T.INT, 1))),
                          copy_stmt(s.body)))
        # iteration k with its values stored, then reversed
        self.sweep_fwd(s.body, it)
        self.sweep_rev(s.body, it)
        out.append(ir.Loop("for", [ir.VarDecl(k, ir.Binary(T.INT, "-", ir.LocalRef(T.INT, n), ir.Const(T.INT, 1)))],
                           ir.Binary(T.BOOL, ">=", kref, ir.Const(T.INT, 0)),
                           ir.Assign(T.INT, "=", kref, ir.Binary(T.INT, "-", kref, ir.Const(T.INT, 1))),
                           ir.Block(it)))
        for v, snap in snaps:
            out.append(_set(v, ir.LocalRef(snap.type, snap)))


def _set(v: ir.Var, e: ir.Expr) -> ir.Stmt:
    return ir.ExprStmt(ir.Assign(v.type, "=", ir.LocalRef(v.type, v), e))


def _written_vars(s, acc: list):
    """The local variables a statement writes, in first-write order."""
    def add(t):
        v = lvalue_root(t)
        if v is not None and all(v is not w for w in acc):
            acc.append(v)
    if isinstance(s, ir.Block):
        for x in s.stmts:
            _written_vars(x, acc)
    elif isinstance(s, ir.VarDecl):
        if all(s.var is not w for w in acc):
            acc.append(s.var)
    elif isinstance(s, ir.ExprStmt):
        e = s.expr
        if isinstance(e, ir.Assign):
            add(e.lhs)
            e = e.rhs
        if isinstance(e, ir.Call):
            for a, p in zip(e.args, e.func.params):
                if p.direction in ("out", "inout"):
                    add(a)
        elif isinstance(e, ir.Intrinsic):
            for i in e.out_params:
                add(e.args[i])
        elif isinstance(e, ir.MethodCall):
            for a in e.args:
                if isinstance(a, ir.OutConvert):
                    add(a.lvalue)
    elif isinstance(s, ir.If):
        _written_vars(s.then, acc)
        if s.else_ is not None:
            _written_vars(s.else_, acc)
    elif isinstance(s, ir.Loop):
        for x in s.init:
            _written_vars(x, acc)
        if s.step is not None:
            _written_vars(ir.ExprStmt(s.step), acc)
        _written_vars(s.body, acc)


def copy_stmt(s):
    """A copy of a statement tree (expressions shared), so replayed code is a tree of its own."""
    if isinstance(s, ir.Block):
        return ir.Block([copy_stmt(x) for x in s.stmts], loc=s.loc)
    if isinstance(s, ir.If):
        return ir.If(s.cond, copy_stmt(s.then), copy_stmt(s.else_) if s.else_ is not None else None, loc=s.loc)
    if isinstance(s, ir.Loop):
        lp = ir.Loop(s.kind, [copy_stmt(x) for x in s.init], s.cond, s.step, copy_stmt(s.body), s.label,
                     dict(s.attrs), loc=s.loc)
        for k, v in vars(s).items():
            if k not in ("kind", "init", "cond", "step", "body", "label", "attrs", "loc"):
                setattr(lp, k, v)
        return lp
    if isinstance(s, ir.ExprStmt):
        return ir.ExprStmt(s.expr, loc=s.loc)
    if isinstance(s, ir.VarDecl):
        return ir.VarDecl(s.var, s.init, loc=s.loc)
    if isinstance(s, ir.Switch):
        return ir.Switch(s.value, [ir.SwitchCase(c.values, c.is_default, [copy_stmt(x) for x in c.body])
                                   for c in s.cases], s.label, loc=s.loc)
    return s
