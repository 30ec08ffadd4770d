"""Where a derivative would be lost silently in differentiable code: calls of non-differentiable
functions (E6019, Slang's E41022 "derivative cannot be propagated through non-differentiable call"),
atomics writing a derivative-carrying value (E6021, the newest Slang's "derivative is lost in atomic
operation"), and assignments of a derivative-carrying value to a buffer element or a global (E6022,
Slang's E41031 "derivative is lost during assignment to non-differentiable location").

The rule is the reference compiler's (slangc of slangtorch 1.3.22), checked against it over many
small programs (tests/compiler/test_autodiff_activity.py).  In a function marked `[Differentiable]`
(backward level) or `[ForwardDifferentiable]` (forward level), a value is *expected* to carry a
derivative when it flows - through locals, operators, constructors, field reads, the arguments of
any call - into:

* the function's return value (when its type is differentiable), or
* a differentiable-typed argument of a call of a differentiable function (at the function's
  level: a `[ForwardDifferentiable]`-only callee does not serve a `[Differentiable]` caller),
  whether that call's own result is used or not.

Writing a whole local (`float y = ...`, `y = ...`, `y += ...`) passes the expectation on to the
written value only if the local is read afterwards as expected (a backward liveness analysis, as
Slang's SSA form gives); writes of a part (`a[i] = ...`, `p.v = ...`), out / inout parameters and
memory are not followed (nor does slangc follow them).  A call of a function that has no
derivative at that level, whose result type is differentiable and is expected, is an error unless:
it is wrapped in `no_diff`; or every argument of a differentiable-typed parameter is a constant
(`g(3.0)`); or no parameter is differentiable.  `detach(g(x))` does not excuse the call.  Core
functions Slang does not differentiate and whose derivative is zero or unknown (`floor`, `ceil`,
`round`, `trunc`, `step`, most wave operations) count as non-differentiable
calls here (their zero derivative rules stay, for programs that wrap them in `no_diff`).

Generic functions and methods of generic structs are analysed per instantiation, where Slang's
generic view and the instantiation agree on every type parameter's differentiability: Slang decides
from the constraints (`T : IFloat` / `T : IDifferentiable` / a user interface extending
IDifferentiable: differentiable; unconstrained or `T : IArithmetic`: not), so an instantiation whose
type arguments are differentiable exactly where the constraints say so sees what Slang sees; one that
differs (`f<T>(T x)` with `float`) is not analysed.  `[Differentiable]` functions and methods of
non-generic structs that the program never calls are instantiated for the analysis only
(`check_uninstantiated`), as slangc checks every function it compiles.
"""
from __future__ import annotations

from typing import Optional

from .. import types as T
from ..ir import nodes as ir
from ..ir.derivatives import DIFF_ATTRS, attrs
from ..ir.difftypes import diff_type
from ..ir.walk import expr_children, walk
from ..source import CompileError, error
from .results import BuiltinIfaceRes
from .scope import FuncSym, StructSym

# Core functions the reference compiler does not differentiate, whose derivative here would be zero:
# a silent zero gradient, so E6019 as in Slang.  (`ldexp`, `frexp`, `modf` have no derivative here
# at all: E6004 / E6005 where differentiated, as before.)  (`fmax`, `fmin`, `smoothstep` and
# `WaveActiveSum` are not differentiable in the reference compiler either, but have true, non-zero
# derivative rules here, as in the newer Slang: they stay accepted; docs/lang-coverage.md.)
SLANG_NON_DIFFERENTIABLE = frozenset({
    "floor", "ceil", "round", "trunc", "step",
    "WaveActiveProduct", "WaveActiveMin", "WaveActiveMax", "WavePrefixSum",
    "WavePrefixProduct", "WaveReadLaneFirst", "WaveReadLaneAt", "WaveBroadcastLaneAt",
})

_BWD_ATTRS = {"Differentiable", "BackwardDifferentiable", "TreatAsDifferentiable"}


def check_differentiability(functions: list, derivs, struct_facts, checker=None) -> None:
    """Raise E6019 at the first call that would lose a derivative silently (see the docstring).
    Without the checker, generic instantiations are not analysed."""
    errors: list = []
    for fn in list(functions):
        level = _level(fn)
        if level is None or fn.body is None or fn.attrs.get("generated_derivative") is not None:
            continue
        if _in_core(fn):
            continue
        if (fn.attrs.get("type_args") or _generic_owner(fn) or fn.attrs.get("pack")) and \
                (checker is None or not _generics_agree(fn, checker, derivs, struct_facts)):
            continue
        a = _Analysis(fn, level, derivs, struct_facts)
        a.run()
        a.check_atomics()
        a.check_stores()
        errors.extend(a.errors)
    if errors:
        # every one, in source order (slangc reports them all)
        seen, diags = set(), []
        for d in sorted(errors, key=lambda d: (getattr(d.loc.file, "path", ""), d.loc.line, d.loc.col)):
            key = (id(d.loc.file), d.loc.line, d.loc.col, d.code)
            if key not in seen:
                seen.add(key)
                diags.append(d)
        raise CompileError(diags)


_DIFF_BUILTINS = {"IDifferentiable", "IDifferentiablePtrType", "IFloat", "__BuiltinFloatingPointType"}


def _generics_agree(fn: ir.Function, checker, derivs, struct_facts) -> bool:
    """Is every generic type parameter of fn (and of its struct) differentiable in this instantiation
    exactly where its declared constraints make it differentiable in Slang's generic view?"""
    if fn.attrs.get("pack"):
        return False
    groups = []
    d = fn.attrs.get("decl")
    if d is not None and getattr(d, "generic_params", None):
        groups.append((d, fn.attrs.get("env")))
    if _generic_owner(fn):
        inst = getattr(fn.params[0].type, "info", None)
        sd = getattr(getattr(inst, "sym", None), "decl", None)
        if sd is None or getattr(inst, "env", None) is None:
            return False
        groups.append((sd, inst.env))
    probe = _Analysis.__new__(_Analysis)
    probe.struct_facts = struct_facts
    for decl, env in groups:
        if env is None:
            return False
        ctx = checker.ctx_for_env(env)
        for g in decl.generic_params:
            if g.kind == "value":
                continue
            if g.kind != "type":
                return False
            bound = next((x for x in env.lookup(g.name) if hasattr(x, "type") and isinstance(x.type, T.Type)), None)
            if bound is None:
                return False
            declared = False
            for c in checker.generic_constraints(decl, g):
                try:
                    r = checker.resolve_base(c, ctx)
                except CompileError:
                    return False
                if isinstance(r, BuiltinIfaceRes) and r.name in _DIFF_BUILTINS or \
                        isinstance(r, T.InterfaceType) and checker.iface_extends(r, BuiltinIfaceRes("IDifferentiable")):
                    declared = True
            if probe.is_diff(bound.type) != declared:
                return False
    return True


def check_uninstantiated(checker, module_envs: list, finish) -> None:
    """Analyse the user's non-generic `[Differentiable]` / `[ForwardDifferentiable]` functions and methods
    of non-generic structs that nothing instantiated (slangc checks every function it compiles).  They are
    instantiated for the analysis only: afterwards the checker is restored (functions, structs and the
    symbols' instance caches), so unused code is neither emitted nor able to fail the program otherwise.
    finish(checker) checks the new bodies (check/program.py's _finish); each function (or struct) is done
    on its own, and one whose body fails to check is left alone, as before."""
    todo = []
    for _mod, env in module_envs:
        for syms in list(env.names.values()):
            for sym in syms:
                if isinstance(sym, FuncSym) and _wants_check(sym):
                    todo.append(sym)
                elif isinstance(sym, StructSym) and not sym.decl.generic_params and \
                        any(_diff_decl(m) for m in sym.decl.members):
                    todo.append(sym)
    diags: list = []
    for sym in todo:            # one at a time: a body that fails to check skips only its own analysis
        try:
            _check_one_uninstantiated(checker, sym, finish)
        except CompileError as e:
            diags.extend(d for d in e.diagnostics if d.code in ("E6019", "E6021", "E6022"))
    if diags:
        raise CompileError(sorted(diags, key=lambda d: (getattr(d.loc.file, "path", ""), d.loc.line, d.loc.col)))


_RESTORED_LISTS = ("functions", "structs", "dyn_ifaces", "globals", "warnings")


def _check_one_uninstantiated(checker, sym, finish) -> None:
    lengths = {name: len(getattr(checker, name)) for name in _RESTORED_LISTS if hasattr(checker, name)}
    barrier = getattr(checker, "uses_group_barrier", False)
    added: list = []
    orig_f, orig_s = checker.instantiate_function, checker.instantiate_struct

    def rec_f(sym, type_args, loc, *a, **k):
        before = set(sym.cache)
        try:
            return orig_f(sym, type_args, loc, *a, **k)
        finally:
            added.extend((sym.cache, key) for key in set(sym.cache) - before)

    def rec_s(sym, args, loc, *a, **k):
        before = set(sym.cache)
        try:
            return orig_s(sym, args, loc, *a, **k)
        finally:
            added.extend((sym.cache, key) for key in set(sym.cache) - before)

    checker.instantiate_function, checker.instantiate_struct = rec_f, rec_s
    extras = []
    try:
        if isinstance(sym, FuncSym):
            extras.append(checker.instantiate_function(sym, [], sym.decl.loc))
        else:
            st = checker.instantiate_struct(sym, [], sym.decl.loc)
            menv = getattr(getattr(st, "info", None), "env", None)
            for msyms in list(getattr(menv, "names", {}).values()):
                for m in msyms:
                    if isinstance(m, FuncSym) and m.owner is st and _wants_check(m):
                        extras.append(checker.instantiate_function(m, [], m.decl.loc))
        finish(checker)
    except CompileError:
        extras = []             # (unused code that does not check: left alone, as before)
    finally:
        checker.instantiate_function, checker.instantiate_struct = orig_f, orig_s
    try:
        if extras:
            check_differentiability(extras, checker.derivs, checker.derivs.struct_facts, checker)
    finally:
        for cache, key in added:
            cache.pop(key, None)
        for name, n in lengths.items():
            del getattr(checker, name)[n:]
        checker.uses_group_barrier = barrier
        checker.pending_bodies.clear()
        checker.body_errors.clear()


def _diff_decl(d) -> bool:
    names = {a.name for a in getattr(d, "attrs", ())}
    return bool(names & {"Differentiable", "BackwardDifferentiable", "ForwardDifferentiable"}) and \
        getattr(d, "body", None) is not None


def _wants_check(sym) -> bool:
    """A non-generic function with a body, marked differentiable, that nothing has instantiated."""
    d = sym.decl
    return _diff_decl(d) and not d.generic_params and not sym.cache and "TreatAsDifferentiable" not in \
        {a.name for a in d.attrs}


def _level(fn: ir.Function) -> Optional[str]:
    a = set(attrs(fn))
    if "TreatAsDifferentiable" in a:
        return None
    if a & {"Differentiable", "BackwardDifferentiable"}:
        return "bwd"
    if "ForwardDifferentiable" in a:
        return "fwd"
    return None


def _in_core(fn: ir.Function) -> bool:
    f = getattr(fn.loc, "file", None)
    path = getattr(f, "path", "") or ""
    return library_path(path)


def library_path(path: str) -> bool:
    """slangjit's own Slang modules (core library, slangpy.slang): not the user's code."""
    path = (path or "").replace("\\", "/")
    return "/compiler/core/" in path or "/compiler/slang/" in path or path.startswith("<core")


def _generic_owner(fn: ir.Function) -> bool:
    """A method of a generic struct (`this` of an instantiated `S<T>`)."""
    return bool(fn.params) and fn.params[0].name == "this" and bool(getattr(fn.params[0].type, "args", ()))


class _Analysis:
    def __init__(self, fn: ir.Function, level: str, derivs, struct_facts):
        self.fn = fn
        self.level = level
        self.derivs = derivs
        self.struct_facts = struct_facts
        self.consts = _single_constant_locals(fn.body)
        self.errors: list = []

    # ------------------------------------------------------------------ types and callees

    def is_diff(self, t) -> bool:
        if t is None or t == T.VOID:
            return False
        try:
            return diff_type(t, self.struct_facts) is not None
        except Exception:  # noqa: BLE001  (a type whose facts fail is reported where it is used)
            return False

    def callee_differentiable(self, fn: ir.Function) -> bool:
        """Does fn have a derivative at this function's level?  Callees without a declaration of
        their own (dispatchers, generated functions) are given the benefit of the doubt."""
        if fn.attrs.get("decl") is None or fn.attrs.get("generated_derivative") is not None:
            return True
        try:
            return self._callee_differentiable(fn)
        except CompileError:
            return True          # a recorded error (a bad custom derivative) is raised where it is used

    def _callee_differentiable(self, fn: ir.Function) -> bool:
        d = self.derivs
        if not d.is_differentiable(fn):
            return False
        if self.level == "fwd":
            return True
        a = set(attrs(fn)) & DIFF_ATTRS
        if a & _BWD_ATTRS or d.find_custom(fn, "bwd") is not None or d.substitute(fn) is not None:
            return True
        # A user [ForwardDerivative] alone: bwd_diff transposes it (issue 19 group 9), so it serves.
        if d.find_custom(fn, "fwd") is not None:
            return True
        return "ForwardDifferentiable" not in a

    def diff_params(self, fn: ir.Function) -> list:
        """Per parameter: is it of a differentiable type (its declared `no_diff` aside)?"""
        decl = fn.attrs.get("decl")
        dparams = list(getattr(decl, "params", None) or [])
        offset = len(fn.params) - len(dparams)
        out = []
        for i, p in enumerate(fn.params):
            ap = dparams[i - offset] if dparams and i >= offset else None
            out.append(self.is_diff(p.type) and not (ap is not None and "no_diff" in ap.mods))
        return out

    def is_const(self, e: ir.Expr) -> bool:
        if isinstance(e, ir.Const):
            return True
        if isinstance(e, ir.LocalRef):
            return e.var.uid in self.consts
        if isinstance(e, (ir.Convert, ir.Unary)):
            return self.is_const(e.operand)
        if isinstance(e, ir.Construct):
            return all(self.is_const(a) for a in e.args)
        if isinstance(e, ir.Binary):
            return self.is_const(e.lhs) and self.is_const(e.rhs)
        return False

    # ------------------------------------------------------------------ expressions

    def roots(self, e: ir.Expr, live: set):
        """Every differentiable call in e expects its differentiable arguments (used or not)."""
        for n in _visit(e):
            if isinstance(n, ir.Call) and self.callee_differentiable(n.func):
                for a, p, dp in zip(n.args, n.func.params, self.diff_params(n.func)):
                    if dp and p.direction == "in":
                        self.expect(a, live)
            elif isinstance(n, ir.Intrinsic) and getattr(n, "func", None) is not None and \
                    n.func.slang_name not in SLANG_NON_DIFFERENTIABLE:
                for i, a in enumerate(n.args):
                    if i not in n.out_params:
                        self.expect(a, live)

    def expect(self, e: ir.Expr, live: set):
        """e's value must carry a derivative."""
        if not self.is_diff(e.type) and not isinstance(e, ir.LocalRef):
            return
        comps = _components(e)
        if comps is not None:               # v.y, v[1], float2(a, b).y: only those components
            self.expect_components(e.obj, comps, live)
            return
        if isinstance(e, ir.LocalRef):
            if self.is_diff(e.var.type):
                live.add(e.var.uid)
            return
        if isinstance(e, ir.Detach):
            if not getattr(e, "no_diff", False):
                self.expect(e.operand, live)
            return
        if isinstance(e, (ir.Assign, ir.IncDec, ir.StmtExpr, ir.MethodCall, ir.OutConvert)):
            return
        if isinstance(e, ir.Call):
            fn = e.func
            if not self.callee_differentiable(fn):
                dps = self.diff_params(fn)
                if any(dp and not self.is_const(a) for a, dp in zip(e.args, dps)):
                    self.report(e, fn.slang_name)
                for a, p, dp in zip(e.args, fn.params, dps):
                    if dp and p.direction == "in":
                        self.expect(a, live)
            return
        if isinstance(e, ir.Intrinsic):
            fn = getattr(e, "func", None)
            if fn is not None and fn.slang_name in SLANG_NON_DIFFERENTIABLE:
                args = [a for i, a in enumerate(e.args) if i not in e.out_params]
                if any(self.is_diff(a.type) and not self.is_const(a) for a in args):
                    self.report(e, fn.slang_name)
            for i, a in enumerate(e.args):
                if i not in e.out_params:
                    self.expect(a, live)
            return
        for c in expr_children(e):
            self.expect(c, live)

    def expect_components(self, e: ir.Expr, comps: set, live: set):
        """Components comps of vector e must carry a derivative (slangc folds a swizzle of a vector
        constructor, and SSA splits a vector local built by one: `float2 v = float2(g(x), x);
        return v.y;` expects only x).  Structs and arrays are not split (slangc does not)."""
        n = getattr(e.type, "n", None) if isinstance(e.type, T.VectorType) else None
        if isinstance(e, ir.LocalRef) and isinstance(n, int):
            if self.is_diff(e.var.type):
                live.update((e.var.uid, i) for i in comps)
            return
        if isinstance(e, ir.Construct) and isinstance(n, int):
            if e.splat and len(e.args) == 1:
                self.expect(e.args[0], live)
                return
            if len(e.args) == n and all(not isinstance(a.type, (T.VectorType, T.MatrixType)) for a in e.args):
                for i in sorted(comps):
                    self.expect(e.args[i], live)
                return
        inner = _components(e)
        if inner is not None and isinstance(e, ir.Swizzle):
            idx = list(e.indices)
            self.expect_components(e.obj, {idx[i] for i in comps if i < len(idx)}, live)
            return
        self.expect(e, live)

    def write(self, uid, rhs: ir.Expr, live: set, whole_write: bool):
        """A write of a whole local: pass what is expected of it on to rhs."""
        comps = {k[1] for k in live if isinstance(k, tuple) and k[0] == uid}
        whole = uid in live
        if not whole and not comps:
            return
        if whole_write:
            live.discard(uid)
            live.difference_update({(uid, i) for i in comps})
        if whole or not isinstance(rhs.type, T.VectorType):
            self.expect(rhs, live)
        else:
            self.expect_components(rhs, comps, live)

    def report(self, e: ir.Expr, name: str):
        what = "backward-differentiable" if self.level == "bwd" else "forward-differentiable"
        self.errors.extend(error("E6019", f"derivative cannot be propagated through call to non-{what} function '{name}' "
                             f"in '{self.fn.slang_name}' (Slang E41022); use no_diff to say the derivative is "
                             f"not wanted, or make '{name}' differentiable", _paren(e.loc) if e.loc.file else self.fn.loc).diagnostics)

    # ------------------------------------------------------------------ atomics (E6021)

    def carries(self, e: ir.Expr, carrying: set) -> bool:
        """May e's value carry a non-zero derivative?  (Slang's carryNonTrivialDiff.)"""
        if isinstance(e, ir.LocalRef):
            return e.var.uid in carrying
        if isinstance(e, (ir.Const, ir.GlobalRef, ir.Detach, ir.MethodCall, ir.SystemValue, ir.StmtExpr)):
            return False
        if isinstance(e, ir.Call):
            return self.callee_differentiable(e.func) and self.is_diff(e.type)
        if isinstance(e, ir.Intrinsic):
            fn = getattr(e, "func", None)
            if fn is not None and (fn.slang_name in SLANG_NON_DIFFERENTIABLE or _atomic_values(e) is not None):
                return False
        if not self.is_diff(e.type):
            return False
        return any(self.carries(c, carrying) for c in expr_children(e))

    def carrying_locals(self) -> set:
        """Locals that may hold a derivative-carrying value somewhere (flow-insensitive)."""
        carrying = {p.uid for p, dp in zip(self.fn.params, self.diff_params(self.fn)) if dp}
        body = self.fn.body
        while True:
            n = len(carrying)
            for node in walk(body):
                if isinstance(node, ir.VarDecl) and node.init is not None:
                    if node.var.uid not in carrying and self.carries(node.init, carrying):
                        carrying.add(node.var.uid)
                elif isinstance(node, ir.Assign):
                    root = _root(node.lhs)
                    if root is not None and root.uid not in carrying and self.carries(node.rhs, carrying):
                        carrying.add(root.uid)
                elif isinstance(node, ir.Call) and self.callee_differentiable(node.func):
                    for a, p in zip(node.args, node.func.params):
                        root = _root(a) if p.direction != "in" else None
                        if root is not None and self.is_diff(p.type):
                            carrying.add(root.uid)
            if len(carrying) == n:
                return carrying

    def check_stores(self):
        """A derivative-carrying value assigned to memory that holds no derivative (a buffer element, a
        global) loses its derivative: slangc's E41031 "derivative is lost during assignment to
        non-differentiable location, use 'detach()' to clarify intention".  E6022 at the `=`."""
        carrying = None
        for node in walk(self.fn.body):           # (no_diff does not excuse an assignment: slangc)
            if not isinstance(node, ir.Assign) or not _memory_lvalue(node.lhs):
                continue
            if carrying is None:
                carrying = self.carrying_locals()
            if self.carries(node.rhs, carrying):
                self.errors.extend(error(
                    "E6022", f"derivative is lost during assignment to a non-differentiable location in "
                             f"'{self.fn.slang_name}' (Slang E41031); use detach() to say the derivative is not "
                             f"wanted", _operator(node.loc, node.op)).diagnostics)

    def check_atomics(self):
        """An atomic that writes a derivative-carrying value to memory loses the derivative: Slang
        reports it ("derivative is lost in atomic operation") unless the call is wrapped in `no_diff`
        or the value in `detach()`.  E6021 at the call."""
        carrying = None
        for node in _visit_stmts(self.fn.body):
            vals = _atomic_values(node)
            if not vals:
                continue
            if carrying is None:
                carrying = self.carrying_locals()
            if any(self.carries(v, carrying) for v in vals):
                name = getattr(getattr(node, "func", None), "slang_name", None) or getattr(node, "name", "atomic")
                self.errors.extend(error("E6021", f"derivative is lost in atomic operation '{name}' in '{self.fn.slang_name}': it "
                                     f"writes a derivative-carrying value to non-differentiable memory; use no_diff or "
                                     f"detach() to say the derivative is not wanted",
                            _paren(node.loc) if node.loc.file else self.fn.loc).diagnostics)

    # ------------------------------------------------------------------ statements (backward)

    def run(self):
        live: set = set()
        self.block(self.fn.body, live, None)

    def block(self, s, live: set, loop) -> set:
        """Process s backwards: live is what is expected after s; returns what is expected before."""
        if isinstance(s, ir.Block):
            for x in reversed(s.stmts):
                live = self.block(x, live, loop)
            return live
        if isinstance(s, ir.Return):
            live = set()
            if s.value is not None:
                if self.is_diff(self.fn.ret):
                    self.expect(s.value, live)
                self.roots(s.value, live)
            return live
        if isinstance(s, ir.Break):
            return set(loop[0]) if loop is not None else set()
        if isinstance(s, ir.Continue):
            return set(loop[1]) if loop is not None else set()
        if isinstance(s, ir.VarDecl):
            live = set(live)
            if s.init is not None:
                self.write(s.var.uid, s.init, live, True)
                self.roots(s.init, live)
            return live
        if isinstance(s, ir.ExprStmt):
            return self.effect(s.expr, set(live))
        if isinstance(s, ir.If):
            a = self.block(s.then, set(live), loop)
            b = self.block(s.else_, set(live), loop) if s.else_ is not None else set(live)
            out = a | b
            self.roots(s.cond, out)
            return out
        if isinstance(s, ir.Switch):
            out = set()
            nxt = set(live)
            for c in reversed(s.cases):     # fall-through: a case ends where the next begins
                cur = self.block(ir.Block(list(c.body)), nxt, (live, loop[1] if loop else set()))
                out |= cur
                nxt = cur
            out |= live
            self.roots(s.value, out)
            return out
        if isinstance(s, ir.Loop):
            return self.loop(s, live, loop)
        return live

    def effect(self, e: ir.Expr, live: set) -> set:
        if isinstance(e, ir.Assign):
            lhs = e.lhs
            if isinstance(lhs, ir.LocalRef):
                self.write(lhs.var.uid, e.rhs, live, e.op == "=")
            self.roots(e.rhs, live)
            return live
        if isinstance(e, ir.Call):
            for a, p in zip(e.args, e.func.params):
                if p.direction == "out" and isinstance(a, ir.LocalRef):
                    live.discard(a.var.uid)
                    live.difference_update({k for k in live if isinstance(k, tuple) and k[0] == a.var.uid})
        self.roots(e, live)
        return live

    def loop(self, s: ir.Loop, after: set, outer) -> set:
        """Iterate the loop's liveness to a fixed point (head = condition, then body, then step)."""
        head = set(after)
        for _ in range(64):
            cond_live = set(head)
            step_live = set(cond_live)
            if s.step is not None:
                step_live = self.effect(s.step, set(cond_live)) if not isinstance(s.step, ir.StmtExpr) \
                    else self.stmt_expr(s.step, set(cond_live), outer)
            body_live = self.block(s.body, set(step_live), (after, step_live))
            if s.kind == "do":
                new_head = set(after) | body_live       # (condition at the end: approximated)
            else:
                new_head = set(after) | body_live
            if s.cond is not None:
                self.roots(s.cond, new_head)
            if new_head == head:
                break
            head = new_head
        live = set(head)
        for x in reversed(s.init):
            live = self.block(x, live, outer)
        return live

    def stmt_expr(self, e: ir.StmtExpr, live: set, loop) -> set:
        for x in reversed(e.stmts):
            live = self.block(x, live, loop)
        return live


def _components(e: ir.Expr) -> Optional[set]:
    """The components of a vector that e reads: `v.yz` -> {1, 2}, `v[1]` -> {1}; None otherwise."""
    if isinstance(e, ir.Swizzle) and isinstance(e.obj.type, T.VectorType):
        return set(e.indices)
    if isinstance(e, ir.Index) and isinstance(e.obj.type, T.VectorType) and isinstance(e.index, ir.Const) \
            and isinstance(e.index.value, int) and not isinstance(e.index.value, bool):
        return {e.index.value}
    return None


def _paren(loc):
    """Slang points at a call's `(`: the first one after the callee's name on its line."""
    line = loc.file.line_text(loc.line)
    i = line.find("(", loc.col - 1)
    return type(loc)(loc.file, loc.line, i + 1) if i >= 0 else loc


_ATOMIC_METHODS = {"add", "sub", "max", "min", "exchange", "store", "compareExchange"}


def _atomic_values(e) -> Optional[list]:
    """The values an atomic operation writes (None: e is not an atomic)."""
    if isinstance(e, (ir.Intrinsic, ir.Call)):
        fn = getattr(e, "func", None)
        name = getattr(fn, "slang_name", "") or ""
        if not name.startswith("Interlocked"):
            return None
        outs = set(e.out_params) if isinstance(e, ir.Intrinsic) else \
            {i for i, p in enumerate(fn.params) if p.direction == "out"}
        return [a for i, a in enumerate(e.args) if i > 0 and i not in outs and i < len(fn.params)
                and fn.params[i].direction == "in"]
    if isinstance(e, ir.MethodCall):
        if isinstance(e.obj.type, T.AtomicType) and e.name.rstrip("_") in _ATOMIC_METHODS:
            return list(e.args)
        if e.name.startswith("Interlocked"):
            # (offset, values..., [out original]) as check/members.py builds them
            has_out = len(e.args) > 2 and e.name != "InterlockedCompareStore"
            return list(e.args[1:-1] if has_out else e.args[1:])
    return None


def _memory_lvalue(e) -> bool:
    """Does lvalue e designate a buffer element or a global (not a local, a parameter, or a pointer's
    target, whose derivative storage differentiable pointers provide)?"""
    while True:
        if isinstance(e, ir.GlobalRef):
            return True
        if isinstance(e, ir.Index) and isinstance(e.obj.type, T.BufferType):
            return True
        if isinstance(e, (ir.Field, ir.Swizzle, ir.Index)) and not getattr(e, "via_pointer", False):
            e = e.obj
            continue
        return False


def _operator(loc, op: str):
    """slangc points at the assignment operator: the first `op` at or after loc on its line."""
    if loc.file is None:
        return loc
    line = loc.file.line_text(loc.line)
    i = line.find(op, loc.col - 1)
    return type(loc)(loc.file, loc.line, i + 1) if i >= 0 else loc


def _root(e):
    while isinstance(e, (ir.Field, ir.Index, ir.Swizzle)):
        e = e.obj
    return e.var if isinstance(e, ir.LocalRef) else None


def _visit_stmts(s):
    """Every expression node under statement s, not entering `no_diff`."""
    for n in walk(s):
        if isinstance(n, ir.Stmt):
            for name in ("expr", "init", "cond", "value", "step"):
                v = getattr(n, name, None)
                if isinstance(v, ir.Expr):
                    yield from _visit(v)


def _visit(e: ir.Expr):
    """e and its subexpressions, not entering `no_diff` (nor statement expressions)."""
    if isinstance(e, ir.Detach) and getattr(e, "no_diff", False) or isinstance(e, ir.StmtExpr):
        return
    yield e
    for c in expr_children(e):
        yield from _visit(c)


def _single_constant_locals(body) -> set:
    """Locals written once, with a constant (`float k = 3.0;` then only read): Slang folds them."""
    writes: dict = {}
    const_init: set = set()
    for n in walk(body):
        if isinstance(n, ir.VarDecl):
            if n.init is not None:
                writes[n.var.uid] = writes.get(n.var.uid, 0) + 1
                if isinstance(n.init, ir.Const):
                    const_init.add(n.var.uid)
        elif isinstance(n, (ir.Assign, ir.IncDec)):
            t = n.lhs if isinstance(n, ir.Assign) else n.operand
            while isinstance(t, (ir.Field, ir.Index, ir.Swizzle)):
                t = t.obj
            if isinstance(t, ir.LocalRef):
                writes[t.var.uid] = writes.get(t.var.uid, 0) + 2
        elif isinstance(n, (ir.Call, ir.Intrinsic)):
            outs = [i for i, p in enumerate(n.func.params) if p.direction != "in"] if isinstance(n, ir.Call) \
                else list(n.out_params)
            for i in outs:
                a = n.args[i] if i < len(n.args) else None
                while isinstance(a, (ir.Field, ir.Index, ir.Swizzle)):
                    a = a.obj
                if isinstance(a, ir.LocalRef):
                    writes[a.var.uid] = writes.get(a.var.uid, 0) + 2
        elif isinstance(n, ir.AddressOf):
            t = n.operand
            if isinstance(t, ir.LocalRef):
                writes[t.var.uid] = writes.get(t.var.uid, 0) + 2
    return {uid for uid in const_init if writes.get(uid) == 1}
