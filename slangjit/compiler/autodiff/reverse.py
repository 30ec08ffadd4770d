"""Reverse mode.  bwd(fn) = a forward sweep that replays fn storing every value an assignment
overwrites (per-thread stacks sized from loop trip-count bounds), then a reverse sweep that
visits the statements backwards: restore the overwritten value, then push the statement's
adjoint through the transpose of its JVP (rules.py + transpose.py).  Control flow: a branch
records its condition, a loop its trip count; a loop without a known bound is a compile error.
`return` / `break` / `continue` are first turned into flags (normalize.py)."""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir.fold import fold_value
from ..ir.walk import expr_children, lvalue_root
from .. import types as T
from ..source import error
from ..ir.difftypes import diff_type, is_ptr_kind, zero
from .flatten import Flattener
from .normalize import Normalizer
from .rules import Jvp, plain_this
from .transpose import Transposer
from .ptrs import ptr_vars_with_diff
from .ptrs import ptr_diff_expr
from .ptrs import ptr_diff_expr, unknown_ptr_diff
from .recompute import RecomputeLoops

MAX_STACK = 1 << 16


class Stack:
    def __init__(self, t: T.Type, idx: int):
        self.elem = t
        self.var = ir.Var(f"stk{idx}", t)          # type patched once the capacity is known
        self.var.trusted_index = True               # sp stays in [0, capacity): emit/cpp.py skips the check
        self.sp = ir.Var(f"sp{idx}", T.INT)
        self.capacity = 0


class ReverseTransform(RecomputeLoops):
    def __init__(self, ad, fn: ir.Function, g: ir.Function, loc):
        self.ad, self.fn, self.g, self.loc = ad, fn, g, loc
        self.adj: dict[int, ir.Var] = {}
        self.stacks: dict = {}
        self.mult = 1
        self.assign_count: dict[int, int] = {}
        self.in_loop_assigned: set = set()
        self.jvp = Jvp(ad, self.adj_ref)
        self.tp = Transposer(lambda v: getattr(v, "is_adjoint", False))
        pd, _ = ad.signature(fn)
        self.no_adjoint = {p.uid for p, d in zip(fn.params, pd) if d is None}
        self.n = 0
        self.pdiff: dict[int, ir.Var] = {}      # pointer variable -> its differential pointer (ptrs.py)
        self.recomputed: dict = {}              # id(loop) -> its entry-state copies (recompute.py)
        self.extra_decls: list = []             # locals the sweeps add at function level

    # ------------------------------------------------------------------ variables

    def adj_var(self, v: ir.Var) -> Optional[ir.Var]:
        a = self.adj.get(v.uid)
        if a is None:
            if v.uid in self.no_adjoint or is_ptr_kind(v.type):
                return None          # pointers are not transposed: their gradient goes through them
            dt = diff_type(v.type)
            if dt is None:
                return None
            a = ir.Var("adj_" + v.name, dt)
            a.is_adjoint = True
            self.adj[v.uid] = a
        return a

    def adj_ref(self, v: ir.Var) -> Optional[ir.Expr]:
        a = self.adj_var(v)
        return ir.LocalRef(a.type, a) if a is not None else None

    def companion(self, v: ir.Var) -> Optional[ir.Expr]:
        c = self.pdiff.get(v.uid)
        return ir.LocalRef(c.type, c) if c is not None else None

    def ptr_target(self, t: ir.Expr) -> Optional[ir.Var]:
        """The differential-pointer variable that follows assignments to t, if any."""
        return self.pdiff.get(t.var.uid) if isinstance(t, ir.LocalRef) else None

    def adj_path(self, e: ir.Expr) -> Optional[ir.Expr]:
        v = lvalue_root(e)
        if v is None or self.adj_var(v) is None:
            return None
        return self.jvp(e)

    def temp(self, t, name="r") -> ir.Var:
        self.n += 1
        return ir.Var(f"{name}{self.n}", t)

    def stack(self, t: T.Type) -> Stack:
        key = t
        s = self.stacks.get(key)
        if s is None:
            s = Stack(t, len(self.stacks))
            self.stacks[key] = s
        return s

    def push(self, value: ir.Expr, out: list):
        if self.mult is None:
            v = lvalue_root(value)
            self.norm.unbounded_error(self.unbounded_loop, v.name if v is not None else "a branch condition")
        s = self.stack(value.type)
        s.capacity += self.mult
        sp = ir.LocalRef(T.INT, s.sp)
        out.append(ir.ExprStmt(ir.Assign(value.type, "=", ir.Index(value.type, ir.LocalRef(s.var.type, s.var), sp), value)))
        out.append(ir.ExprStmt(ir.Assign(T.INT, "=", sp, ir.Binary(T.INT, "+", sp, ir.Const(T.INT, 1)))))

    def pop(self, t: T.Type, out: list) -> ir.Expr:
        s = self.stack(t)
        sp = ir.LocalRef(T.INT, s.sp)
        out.append(ir.ExprStmt(ir.Assign(T.INT, "=", sp, ir.Binary(T.INT, "-", sp, ir.Const(T.INT, 1)))))
        return ir.Index(t, ir.LocalRef(s.var.type, s.var), sp)

    # ------------------------------------------------------------------ driver

    def run(self) -> ir.Block:
        fn, g = self.fn, self.g
        if fn.body is None:
            raise error("E6002", f"cannot differentiate '{fn.slang_name}': it has no body", self.loc)
        pd, rd = self.ad.signature(fn)
        body = Flattener().block(fn.body)
        self.ad.use_substitutes(body)
        norm = Normalizer(self, fn)
        body, decls = norm.run(body)
        self.count_assignments(body, False)
        ptrs = {p.uid for p in fn.params if is_ptr_kind(p.type)}
        ok_params = {p.uid for p, d in zip(fn.params, pd) if d is not None and p.uid in ptrs}
        ptr_ok = ptr_vars_with_diff(ok_params, ptrs - ok_params, body)
        for v in list(fn.params) + list(decls):
            if v.uid in ptr_ok:
                self.pdiff[v.uid] = ir.Var("dptr_" + v.name, diff_type(v.type))
        self.value_needed: set = set()
        self.read_sites: dict = {}
        self.stmt_pos: dict = {}
        self._pos = 0
        self._loops: list = []
        self._recomp: dict = {}
        self.collect_value_needed(body)
        self.remat: dict = {}
        self.norm_body = body
        self.find_rematerializable(body, False)
        self.norm = norm
        prologue: list = []
        # hoisted locals (primal), parameters' primal copies
        for v in decls:
            prologue.append(ir.VarDecl(v, zero(v.type)))
            if v.uid in self.pdiff:
                prologue.append(ir.VarDecl(self.pdiff[v.uid], zero(self.pdiff[v.uid].type)))
        for p in fn.params:
            self.assign_count[p.uid] = self.assign_count.get(p.uid, 0) + 1
        fwd: list = []
        self.sweep_fwd(body, fwd)
        rev: list = []
        self.sweep_rev(body, rev)
        # parameters in, adjoints seeded, results out
        head: list = []
        tail: list = []
        gparams = g.params
        for p, gp, d in zip(fn.params, gparams, pd):
            ref = ir.LocalRef(gp.type, gp)
            if d is None:
                if p.direction == "out":
                    head.append(ir.VarDecl(p, zero(p.type)))
                    tail.append(ir.ExprStmt(ir.Assign(p.type, "=", ref, ir.LocalRef(p.type, p))))
                else:
                    head.append(ir.VarDecl(p, ref))
                continue
            if p.uid in self.pdiff:
                head.append(ir.VarDecl(p, ir.Field(p.type, ref, "p")))
                head.append(ir.VarDecl(self.pdiff[p.uid], ir.Field(self.pdiff[p.uid].type, ref, "d")))
                continue
            a = self.adj_var(p)
            if p.direction == "out":
                head.append(ir.VarDecl(p, zero(p.type)))
                head.append(ir.VarDecl(a, zero(a.type)))
                seed_out = ir.ExprStmt(ir.Assign(a.type, "=", ir.LocalRef(a.type, a), ref))
                norm.seed_outs.append(seed_out)
            else:
                head.append(ir.VarDecl(p, ir.Field(p.type, ref, "p")))
                head.append(ir.VarDecl(a, zero(a.type)))
                if p.direction == "inout":
                    norm.seed_outs.append(ir.ExprStmt(ir.Assign(a.type, "=", ir.LocalRef(a.type, a),
                                                                ir.Field(a.type, ref, "d"))))
                tail.append(ir.ExprStmt(ir.Assign(a.type, "=", ir.Field(a.type, ref, "d"), ir.LocalRef(a.type, a))))
        if rd is not None and norm.ret_var is not None:
            ra = self.adj_var(norm.ret_var)
            norm.seed_outs.append(ir.ExprStmt(ir.Assign(ra.type, "=", ir.LocalRef(ra.type, ra),
                                                        ir.LocalRef(gparams[-1].type, gparams[-1]))))
        adj_decls = [ir.VarDecl(a, zero(a.type)) for uid, a in self.adj.items()
                     if uid not in {p.uid for p in fn.params}]
        stack_decls = []
        for s in self.stacks.values():
            if s.capacity > MAX_STACK:
                raise error("E6006", f"reverse mode of '{fn.slang_name}' would need {s.capacity} stored values of "
                                     f"type {s.elem} per thread; lower the loop bounds ([MaxIters])", fn.loc)
            s.var.type = T.ArrayType(s.elem, max(1, s.capacity))
            stack_decls.append(ir.VarDecl(s.var, None))
            stack_decls.append(ir.VarDecl(s.sp, ir.Const(T.INT, 0)))
        stmts = head + prologue + self.extra_decls + adj_decls + stack_decls + fwd + norm.seed_outs + rev + tail
        return ir.Block(stmts)

    # ------------------------------------------------------------------ analysis

    def count_assignments(self, s, in_loop: bool):
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.count_assignments(x, in_loop)
        elif isinstance(s, ir.ExprStmt):
            for t in self.targets_of(s):
                v = lvalue_root(t)
                self.assign_count[v.uid] = self.assign_count.get(v.uid, 0) + 1
                if in_loop:
                    self.in_loop_assigned.add(v.uid)
        elif isinstance(s, ir.If):
            self.count_assignments(s.then, in_loop)
            if s.else_ is not None:
                self.count_assignments(s.else_, in_loop)
        elif isinstance(s, ir.Loop):
            self.count_assignments(s.body, True)

    def needs_push(self, target: ir.Expr, stmt=None) -> bool:
        v = lvalue_root(target)
        if v is None:
            return False
        if v.uid not in self.value_needed:
            return False          # nothing in the reverse sweep reads this variable's value
        where = self.stmt_pos.get(id(stmt)) if stmt is not None else None
        if where is not None:
            pos, loops = where
            # Only reads that see an OLDER value need this assignment undone: reads earlier in
            # program order, or reads in a loop that also contains the assignment.
            if not any(rpos <= pos or (rloops & loops) for rpos, rloops in self.read_sites.get(v.uid, ())):
                return False
        if v.uid in self.remat:
            return False          # recomputed where the reverse sweep needs it
        return self.assign_count.get(v.uid, 0) > 1 or v.uid in self.in_loop_assigned

    # Which variables' primal values does the reverse sweep read?  Additive uses
    # (`acc = acc + e`, `r = v`) need only adjoints; products, intrinsics, conditions,
    # indices and call arguments need values.
    def collect_value_needed(self, s):
        self._pos += 1
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.collect_value_needed(x)
        elif isinstance(s, ir.ExprStmt):
            self.stmt_pos[id(s)] = (self._pos, frozenset(self._loops))
            e = s.expr
            if isinstance(e, ir.Assign):
                self.reads(e.lhs, False, lhs=True)
                self.reads(e.rhs, True)
            else:
                self.reads(e, True)
        elif isinstance(s, ir.If):
            self.reads(s.cond, False)
            self.collect_value_needed(s.then)
            if s.else_ is not None:
                self.collect_value_needed(s.else_)
        elif isinstance(s, ir.Loop):
            self._loops.append(id(s))
            if s.cond is not None:
                self.reads(s.cond, False)
            self.collect_value_needed(s.body)
            self._loops.pop()

    def reads(self, e, linear: bool, lhs: bool = False):
        if e is None:
            return
        if isinstance(e, ir.LocalRef):
            if not linear and not lhs:
                self.value_needed.add(e.var.uid)
                self.read_sites.setdefault(e.var.uid, []).append((self._pos, frozenset(self._loops)))
            return
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            self.reads(e.lhs, linear)
            self.reads(e.rhs, linear)
        elif isinstance(e, (ir.Unary, ir.Convert)) and (not isinstance(e, ir.Unary) or e.op == "-"):
            self.reads(e.operand, linear)
        elif isinstance(e, (ir.Field, ir.Swizzle)):
            self.reads(e.obj, linear, lhs)
        elif isinstance(e, ir.Index):
            self.reads(e.obj, linear, lhs)
            self.reads(e.index, False)
        elif isinstance(e, ir.Construct):
            for a in e.args:
                self.reads(a, linear)
        elif isinstance(e, ir.Call):
            for a, p in zip(e.args, e.func.params):
                self.reads(a, False)
        else:
            for c in expr_children(e):
                self.reads(c, False)

    # ------------------------------------------------------------------ rematerialization

    def find_rematerializable(self, s, in_loop: bool):
        """Loop temporaries `t = rhs` (assigned once, rhs without side effects) whose inputs are
        not changed before the statements that read t: recomputed in the reverse sweep rather
        than stored, so such loops need no storage (and no trip-count bound)."""
        if isinstance(s, ir.Block):
            for a, x in enumerate(s.stmts):
                if in_loop and isinstance(x, ir.ExprStmt) and isinstance(x.expr, ir.Assign) \
                        and isinstance(x.expr.lhs, ir.LocalRef):
                    v = x.expr.lhs.var
                    if getattr(v, "is_temp", False) and self.assign_count.get(v.uid, 0) == 1 \
                            and v.uid not in self.pdiff \
                            and self.side_effect_free(x.expr.rhs):
                        inputs: set = set()
                        _locals_in(x.expr.rhs, inputs)
                        # inputs that are themselves recomputed would be stale at the use
                        ok = v.uid not in inputs and not (inputs & set(self.remat))
                        writes: set = set()
                        for later in s.stmts[a + 1:]:
                            r: set = set()
                            _locals_in_stmt(later, r)
                            _writes_in(later, writes)
                            if v.uid in r and (writes & inputs):
                                ok = False
                                break
                        if ok and not self.read_outside(v, s):
                            self.remat[v.uid] = (s, a, v, x.expr.rhs)
                self.find_rematerializable(x, in_loop)
        elif isinstance(s, ir.If):
            self.find_rematerializable(s.then, in_loop)
            if s.else_ is not None:
                self.find_rematerializable(s.else_, in_loop)
        elif isinstance(s, ir.Loop):
            self.find_rematerializable(s.body, True)

    def read_outside(self, v, block) -> bool:
        """Is v read anywhere except inside `block`?"""
        found = [False]

        def walk(s):
            if s is block:
                return
            if isinstance(s, ir.Block):
                for x in s.stmts:
                    walk(x)
            elif isinstance(s, ir.If):
                r: set = set()
                _locals_in(s.cond, r)
                if v.uid in r:
                    found[0] = True
                walk(s.then)
                if s.else_ is not None:
                    walk(s.else_)
            elif isinstance(s, ir.Loop):
                r = set()
                _locals_in(s.cond, r)
                if v.uid in r:
                    found[0] = True
                walk(s.body)
            else:
                r = set()
                _locals_in_stmt(s, r)
                if v.uid in r:
                    found[0] = True
        walk(self.norm_body)
        return found[0]

    def side_effect_free(self, e) -> bool:
        if isinstance(e, ir.Call):
            return self.fn_pure(e.func) and all(self.side_effect_free(a) for a in e.args) and \
                all(p.direction == "in" for p in e.func.params)
        if isinstance(e, ir.MethodCall):
            return e.name in ("Load", "Load2", "Load3", "Load4", "getCount") or e.name.startswith("template LoadT")
        if isinstance(e, ir.Intrinsic):
            return not e.out_params and not e.name.replace("sj::", "").startswith(("Interlocked", "Wave")) \
                and all(self.side_effect_free(a) for a in e.args)
        if isinstance(e, (ir.Assign, ir.IncDec, ir.StmtExpr)):
            return False
        return all(self.side_effect_free(c) for c in expr_children(e))

    def fn_pure(self, fn) -> bool:
        cache = self.ad.rule_cache
        key = ("pure", id(fn))
        if key in cache:
            return cache[key]
        cache[key] = False                   # recursion: assume impure
        if fn.body is None:
            res = fn.intrinsic is not None and not fn.slang_name.startswith(("Interlocked", "Wave"))
        else:
            res = self._stmt_pure(fn.body)
        cache[key] = res
        return res

    def _stmt_pure(self, s) -> bool:
        if isinstance(s, ir.Block):
            return all(self._stmt_pure(x) for x in s.stmts)
        if isinstance(s, (ir.ExprStmt,)):
            e = s.expr
            if isinstance(e, ir.Assign):
                if lvalue_root(e.lhs) is None:
                    return False
                return self.side_effect_free(e.rhs)
            if isinstance(e, ir.IncDec):
                return lvalue_root(e.operand) is not None
            if isinstance(e, ir.Comma):
                return self._stmt_pure(ir.ExprStmt(e.first)) and self._stmt_pure(ir.ExprStmt(e.second))
            return self.side_effect_free(e)
        if isinstance(s, ir.VarDecl):
            return s.init is None or self.side_effect_free(s.init)
        if isinstance(s, ir.If):
            return self.side_effect_free(s.cond) and self._stmt_pure(s.then) and \
                (s.else_ is None or self._stmt_pure(s.else_))
        if isinstance(s, ir.Loop):
            return all(self._stmt_pure(x) for x in s.init) and self._stmt_pure(s.body) and \
                (s.cond is None or self.side_effect_free(s.cond)) and \
                (s.step is None or self._stmt_pure(ir.ExprStmt(s.step)))
        if isinstance(s, ir.Switch):
            return all(self._stmt_pure(x) for c in s.cases for x in c.body)
        if isinstance(s, (ir.Return,)):
            return s.value is None or self.side_effect_free(s.value)
        return isinstance(s, (ir.Break, ir.Continue))

    def recomputable(self, s: ir.If) -> bool:
        key = id(s)
        if key not in self._recomp:
            reads: set = set()
            _locals_in(s.cond, reads)
            writes: set = set()
            _writes_in(s.then, writes)
            if s.else_ is not None:
                _writes_in(s.else_, writes)
            self._recomp[key] = not (reads & writes)
        return self._recomp[key]

    def inverse(self, s: ir.ExprStmt) -> Optional[ir.Expr]:
        """`i = i + c` on an integer with a constant c is undone by `i - c`: no storage."""
        e = s.expr
        if not (isinstance(e, ir.Assign) and isinstance(e.lhs, ir.LocalRef) and isinstance(e.rhs, ir.Binary)
                and e.rhs.op in ("+", "-") and isinstance(e.rhs.lhs, ir.LocalRef) and e.rhs.lhs.var is e.lhs.var):
            return None
        t = e.lhs.type
        if not (isinstance(t, T.ScalarType) and t.kind in ("int", "uint")):
            return None
        c = fold_value(e.rhs.rhs)
        if not isinstance(c, int) or isinstance(c, bool):
            return None
        return ir.Binary(t, "-" if e.rhs.op == "+" else "+", e.lhs, e.rhs.rhs)

    # ------------------------------------------------------------------ forward sweep

    def targets_of(self, s: ir.ExprStmt) -> list:
        e = s.expr
        out = []
        if isinstance(e, ir.Assign):
            out.append(e.lhs)
            e = e.rhs
        if isinstance(e, ir.Call):
            out += [a for a, p in zip(e.args, e.func.params) if p.direction in ("out", "inout")]
        elif isinstance(e, ir.Intrinsic):
            out += [e.args[i] for i in e.out_params]
        elif isinstance(e, ir.MethodCall):
            out += [a for a in e.args if isinstance(a, ir.OutConvert)]
        return [t for t in out if lvalue_root(t) is not None]

    def sweep_fwd(self, s, out: list):
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.sweep_fwd(x, out)
        elif isinstance(s, ir.ExprStmt):
            if self.inverse(s) is None:
                for t in self.targets_of(s):
                    if self.needs_push(t, s):
                        self.push(t, out)
                        c = self.ptr_target(t)
                        if c is not None:
                            self.push(ir.LocalRef(c.type, c), out)
            e = s.expr
            if isinstance(e, ir.Assign) and self.ptr_target(e.lhs) is not None:
                # Before the assignment: the companion of the right-hand side is read as it was.
                c = self.ptr_target(e.lhs)
                out.append(ir.ExprStmt(ir.Assign(c.type, "=", ir.LocalRef(c.type, c),
                                                 ptr_diff_expr(e.rhs, self.companion))))
            out.append(s)
        elif isinstance(s, ir.If) and self.recomputable(s):
            # The branches do not change what the condition reads: the reverse sweep
            # re-evaluates it (those values are restored by then), nothing is stored.
            a: list = []
            b: list = []
            self.sweep_fwd(s.then, a)
            if s.else_ is not None:
                self.sweep_fwd(s.else_, b)
            out.append(ir.If(s.cond, ir.Block(a), ir.Block(b) if b else None))
        elif isinstance(s, ir.If):
            # The condition is saved AFTER the branch so the reverse sweep pops it first.
            cv = self.temp(T.BOOL, "cf")
            out.append(ir.VarDecl(cv, s.cond))
            a: list = []
            b: list = []
            self.sweep_fwd(s.then, a)
            if s.else_ is not None:
                self.sweep_fwd(s.else_, b)
            cref = ir.LocalRef(T.BOOL, cv)
            out.append(ir.If(cref, ir.Block(a), ir.Block(b) if b else None))
            self.push(cref, out)
        elif isinstance(s, ir.Loop):
            if s.attrs["bound"] is None:
                self.sweep_loop_fwd_or_recompute(s, out)          # recompute.py
            else:
                self.sweep_loop_fwd(s, out)
        else:
            raise error("E6007", f"internal: unexpected statement {type(s).__name__} in reverse mode", self.loc)

    def sweep_loop_fwd(self, s: ir.Loop, out: list):
        """A loop's forward sweep storing what each iteration overwrites (its bound sizes the storage)."""
        if True:
            bound = s.attrs["bound"]
            cnt = self.temp(T.INT, "cnt")
            out.append(ir.VarDecl(cnt, ir.Const(T.INT, 0)))
            cref = ir.LocalRef(T.INT, cnt)
            saved = self.mult
            saved_loop = getattr(self, "unbounded_loop", None)
            if bound is None:
                self.mult = None          # storing values in this loop is an error (E6001)
                self.unbounded_loop = getattr(s, "original", s)
            elif self.mult is not None:
                self.mult *= bound
            body: list = []
            try:
                self.sweep_fwd(s.body, body)
            finally:
                self.mult = saved
                self.unbounded_loop = saved_loop
            body.append(ir.ExprStmt(ir.Assign(T.INT, "=", cref, ir.Binary(T.INT, "+", cref, ir.Const(T.INT, 1)))))
            if bound is not None:
                limit = ir.Binary(T.BOOL, "<", cref, ir.Const(T.INT, bound))
                if s.cond is not None:
                    # Past its bound while its condition still holds, the loop stops and records the
                    # overrun (prelude sj::fail; the runtime raises after the dispatch): the stored
                    # values end there, so the gradient would silently be wrong.
                    orig = getattr(s, "original", s)
                    loc = orig.loc if orig.loc is not None and orig.loc.line else self.fn.loc
                    what = (f"loop in '{self.fn.slang_name}' ran past its [MaxIters({bound})] bound in a "
                            f"reverse-mode derivative" if "max_iters" in orig.attrs else
                            f"loop in '{self.fn.slang_name}' ran past its trip-count bound ({bound}) in a "
                            f"reverse-mode derivative")
                    fail = ir.Intrinsic(T.BOOL, "sj::fail", [ir.Const(T.UINT, 3), ir.Const(T.StringType(), what)],
                                        loc=loc)
                    limit = ir.Binary(T.BOOL, "||", limit, fail)
                cond = ir.Binary(T.BOOL, "&&", s.cond, limit) if s.cond is not None else limit
            else:
                cond = s.cond if s.cond is not None else ir.Const(T.BOOL, True)
            out.append(ir.Loop("do" if s.kind == "do" else "while", [], cond, None, ir.Block(body)))
            self.push(cref, out)

    # ------------------------------------------------------------------ reverse sweep

    def sweep_rev(self, s, out: list):
        if isinstance(s, ir.Block):
            for b in range(len(s.stmts) - 1, -1, -1):
                x = s.stmts[b]
                # Recompute cheap loop temporaries this statement reads instead of storing them.
                reads: set = set()
                _locals_in_stmt(x, reads)
                for uid in reads:
                    r = self.remat.get(uid)
                    if r is not None and r[0] is s:
                        var, rhs = r[2], r[3]
                        out.append(ir.ExprStmt(ir.Assign(var.type, "=", ir.LocalRef(var.type, var), rhs)))
                self.sweep_rev(x, out)
        elif isinstance(s, ir.ExprStmt):
            self.rev_stmt(s, out)
        elif isinstance(s, ir.If):
            c = s.cond if self.recomputable(s) else self.pop(T.BOOL, out)
            cv = self.temp(T.BOOL, "c")
            out.append(ir.VarDecl(cv, c))
            a: list = []
            b: list = []
            self.sweep_rev(s.then, a)
            if s.else_ is not None:
                self.sweep_rev(s.else_, b)
            out.append(ir.If(ir.LocalRef(T.BOOL, cv), ir.Block(a), ir.Block(b) if b else None))
        elif isinstance(s, ir.Loop) and id(s) in self.recomputed:
            self.recompute_loop_rev(s, out)                      # recompute.py
        elif isinstance(s, ir.Loop):
            n = self.temp(T.INT, "n")
            out.append(ir.VarDecl(n, self.pop(T.INT, out)))
            k = self.temp(T.INT, "k")
            body: list = []
            self.sweep_rev(s.body, body)
            kref = ir.LocalRef(T.INT, k)
            out.append(ir.Loop("for", [ir.VarDecl(k, ir.Const(T.INT, 0))],
                               ir.Binary(T.BOOL, "<", kref, ir.LocalRef(T.INT, n)),
                               ir.Assign(T.INT, "=", kref, ir.Binary(T.INT, "+", kref, ir.Const(T.INT, 1))),
                               ir.Block(body)))

    def restore(self, targets: list, out: list, stmt=None):
        inv = self.inverse(stmt) if stmt is not None else None
        if inv is not None:
            lhs = stmt.expr.lhs
            out.append(ir.ExprStmt(ir.Assign(lhs.type, "=", lhs, inv)))
            return
        for t in reversed(targets):
            if self.needs_push(t, stmt):
                c = self.ptr_target(t)
                if c is not None:
                    cref = ir.LocalRef(c.type, c)
                    out.append(ir.ExprStmt(ir.Assign(c.type, "=", cref, self.pop(c.type, out))))
                out.append(ir.ExprStmt(ir.Assign(t.type, "=", t, self.pop(t.type, out))))

    def rev_stmt(self, s: ir.ExprStmt, out: list):
        e = s.expr
        targets = self.targets_of(s)
        dest = None
        rhs = e
        if isinstance(e, ir.Assign):
            dest, rhs = e.lhs, e.rhs
        if isinstance(rhs, ir.Call) and self.ad.is_differentiable(rhs.func):
            self.rev_call(rhs, dest, targets, out, s)
            return
        if isinstance(rhs, (ir.Call, ir.MethodCall)) or (isinstance(rhs, ir.Intrinsic) and rhs.out_params):
            # not differentiable: the written values carry no derivative
            for t in targets:
                ap = self.adj_path(t)
                if ap is not None:
                    out.append(ir.ExprStmt(ir.Assign(ap.type, "=", ap, zero(ap.type))))
            self.restore(targets, out, s)
            return
        if dest is None:
            return
        ap = self.adj_path(dest)
        seed = None
        if ap is not None:
            sv = self.temp(ap.type, "g")
            out.append(ir.VarDecl(sv, ap))
            out.append(ir.ExprStmt(ir.Assign(ap.type, "=", ap, zero(ap.type))))
            seed = ir.LocalRef(ap.type, sv)
        self.restore(targets, out, s)
        if seed is not None:
            t = self.jvp(rhs)
            if t is not None:
                self.tp.tr(t, seed, out)

    def rev_call(self, call: ir.Call, dest, targets, out: list, stmt=None):
        f = call.func
        h = self.ad.bwd(f, call.loc)
        pd, rd = self.ad.signature(f)
        seed = None
        if dest is not None and rd is not None:
            ap = self.adj_path(dest)
            if ap is not None:
                sv = self.temp(ap.type, "g")
                out.append(ir.VarDecl(sv, ap))
                out.append(ir.ExprStmt(ir.Assign(ap.type, "=", ap, zero(ap.type))))
                seed = ir.LocalRef(ap.type, sv)
        self.restore(targets, out, stmt)
        args = []
        after: list = []
        for a, p, d, hp in zip(call.args, f.params, pd, h.params):
            if d is not None and plain_this(p, hp):
                args.append(a)
                continue
            if d is None:
                if p.direction == "out":
                    tmp = self.temp(p.type, "o")
                    out.append(ir.VarDecl(tmp, zero(p.type)))
                    args.append(ir.LocalRef(p.type, tmp))
                else:
                    args.append(a)
                continue
            if self.ad.is_ptr(p.type):
                c = ptr_diff_expr(a, self.companion)
                if c is None:
                    raise unknown_ptr_diff(self.fn, f, p, call.loc)
                args.append(ir.Construct(hp.type, [a, c]))
                continue
            if p.direction == "out":
                ap = self.adj_path(a)
                args.append(ap if ap is not None else zero(d))
                if ap is not None:
                    after.append(ir.ExprStmt(ir.Assign(ap.type, "=", ap, zero(ap.type))))
                continue
            pv = self.temp(hp.type, "pr")
            if p.direction == "inout":
                ap = self.adj_path(a)
                out.append(ir.VarDecl(pv, ir.Construct(hp.type, [a, ap if ap is not None else zero(d)])))
                if ap is not None:
                    after.append(ir.ExprStmt(ir.Assign(ap.type, "=", ap, ir.Field(d, ir.LocalRef(hp.type, pv), "d"))))
            else:
                out.append(ir.VarDecl(pv, ir.Construct(hp.type, [a, zero(d)])))
                t = self.jvp(a)
                if t is not None:
                    after.append(("tr", t, ir.Field(d, ir.LocalRef(hp.type, pv), "d")))
            args.append(ir.LocalRef(hp.type, pv))
        if rd is not None:
            args.append(seed if seed is not None else zero(rd))
        out.append(ir.ExprStmt(ir.Call(T.VOID, h, args)))
        for x in after:
            if isinstance(x, tuple):
                self.tp.tr(x[1], x[2], out)
            else:
                out.append(x)


def _locals_in(e, acc: set):
    if isinstance(e, ir.LocalRef):
        acc.add(e.var.uid)
    elif e is not None:
        for c in expr_children(e):
            _locals_in(c, acc)


def _writes_in(s, acc: set):
    if isinstance(s, ir.Block):
        for x in s.stmts:
            _writes_in(x, acc)
    elif isinstance(s, ir.ExprStmt):
        e = s.expr
        if isinstance(e, ir.Assign):
            v = lvalue_root(e.lhs)
            if v is not None:
                acc.add(v.uid)
            e = e.rhs
        if isinstance(e, ir.Call):
            for a, p in zip(e.args, e.func.params):
                if p.direction in ("out", "inout"):
                    v = lvalue_root(a)
                    if v is not None:
                        acc.add(v.uid)
        if isinstance(e, ir.Intrinsic):
            for i in e.out_params:
                v = lvalue_root(e.args[i])
                if v is not None:
                    acc.add(v.uid)
    elif isinstance(s, ir.If):
        _writes_in(s.then, acc)
        if s.else_ is not None:
            _writes_in(s.else_, acc)
    elif isinstance(s, ir.Loop):
        _writes_in(s.body, acc)


def _locals_in_stmt(s, acc: set):
    """Variables a statement (with everything nested in it) reads."""
    if isinstance(s, ir.Block):
        for x in s.stmts:
            _locals_in_stmt(x, acc)
    elif isinstance(s, ir.ExprStmt):
        e = s.expr
        if isinstance(e, ir.Assign):
            lhs = e.lhs
            while isinstance(lhs, (ir.Field, ir.Swizzle, ir.Index)):
                if isinstance(lhs, ir.Index):
                    _locals_in(lhs.index, acc)
                lhs = lhs.obj
            _locals_in(e.rhs, acc)
        else:
            _locals_in(e, acc)
    elif isinstance(s, ir.If):
        _locals_in(s.cond, acc)
        _locals_in_stmt(s.then, acc)
        if s.else_ is not None:
            _locals_in_stmt(s.else_, acc)
    elif isinstance(s, ir.Loop):
        _locals_in(s.cond, acc)
        _locals_in_stmt(s.body, acc)
