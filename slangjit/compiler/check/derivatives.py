"""What the checker decides about derivatives, recorded for autodiff (ir/derivatives.py,
ir/difftypes.py): each struct's Differential, each function's primal substitute, custom forward /
backward derivatives and intrinsic derivative rule.

`DerivativeResolver` is the checker side of `ir.derivatives.Derivatives`: it computes a fact the
first time it is asked for.  `prepare()` asks for every fact autodiff could need - those of every
function reachable from a queued derivative, through calls, substitutes, custom derivatives and
rule functions, and every struct's - so the table can be sealed before autodiff runs.
"""
from __future__ import annotations

from typing import Optional

from ..parse import ast
from .. import types as T
from ..ir import nodes as ir
from ..ir.derivatives import FACT_KINDS, has_own_facts
from ..ir.difftypes import diff_type, is_ptr_kind
from ..ir.walk import walk
from ..source import CompileError, error
from .results import BuiltinIfaceRes, OverloadRes, TypeRes
from .members import TypeLiteral
from .scope import StructSym


class DerivativeResolver:
    def __init__(self, chk):
        self.chk = chk
        self.derivs = None            # the Derivatives this resolver serves (set by the checker)
        self.prepared: set = set()    # id(fn) whose facts (and callees) prepare() has recorded
        self.structs_done = 0         # checker.structs[:structs_done] have their facts
        self.ifaces_done = 0          # likewise checker.dyn_ifaces (interfaces with dynamic values)

    # ------------------------------------------------------------------ structs

    def struct_facts(self, t: T.StructType):
        """Compute (once) and record t's autodiff facts on its info; see ir/difftypes.py."""
        info = t.info
        if isinstance(t, T.InterfaceType):
            if "diff_type" not in info.__dict__:
                info.ptr_kind = False
                info.diff_type = None
                info.diff_fields = {}
                try:
                    info.diff_type = self.chk.dyn_diff_type(t, self._diff, self._is_ptr)
                except CompileError as ex:
                    info.diff_error = ex
            return info
        if "ptr_kind" not in info.__dict__:
            info.ptr_kind = False            # (re-entry while the bases are resolved)
            info.ptr_kind = self.chk.conforms(t, BuiltinIfaceRes("IDifferentiablePtrType"))
        if "diff_type" not in info.__dict__:
            info.diff_type = None            # (re-entry through the fields)
            info.diff_fields = {}
            try:
                info.diff_type = self._struct_diff_type(t)
            except CompileError as ex:
                info.diff_error = ex
            try:
                info.diff_fields = self._diff_fields(t)
            except CompileError as ex:
                info.diff_error = info.__dict__.get("diff_error") or ex
        return info

    def _diff(self, t):
        return diff_type(t, self.struct_facts)

    def _is_ptr(self, t):
        return is_ptr_kind(t, self.struct_facts)

    def _struct_diff_type(self, t: T.StructType) -> Optional[T.Type]:
        chk, info = self.chk, t.info
        if getattr(info, "differential_of", None) is not None:
            return t                                # a synthesized Differential is its own Differential
        own = [s for s in chk.member_syms(t, "Differential")]
        if info.ptr_kind:
            return self._ptr_diff_type(t, own)
        if own:
            res = chk.sym_to_res(own, None, info.sym.decl.loc, chk.ctx_for_env(info.env), "Differential")
            if isinstance(res, TypeRes) and res.type is not t:
                if isinstance(res.type, T.StructType):
                    self.struct_facts(res.type)
                    if res.type.info.__dict__.get("diff_error") is None:
                        res.type.info.diff_type = res.type
                return res.type
            if isinstance(res, TypeRes):
                return t
        if not chk.conforms(t, BuiltinIfaceRes("IDifferentiable")):
            return None
        fields = []
        decl_members = {m.name: m for m in info.sym.decl.members if isinstance(m, ast.VarDecl)}
        self_diff = True
        for name, ft, _, _ in info.fields:
            m = decl_members.get(name)
            if (m is not None and "no_diff" in m.mods) or self._is_ptr(ft):
                self_diff = False
                continue
            dt = self._diff(ft)
            if dt is not None:
                fields.append((name, dt))
            if dt is None or dt != ft:
                self_diff = False
        if self_diff and fields:
            return t                                # every field is its own Differential: so is the struct
        # (no differentiable field: Slang gives such a type an empty Differential)
        sdecl = ast.StructDecl(f"{info.sym.decl.name}_Differential",
                               [ast.VarDecl(n, TypeLiteral(ft)) for n, ft in fields], loc=info.sym.decl.loc)
        dt = chk.instantiate_struct(StructSym(sdecl, info.env), [], info.sym.decl.loc)
        dt.name = f"{t.name}.Differential"
        dt.info.differential_of = t
        dt.info.ptr_kind = False
        dt.info.diff_type = dt
        dt.info.diff_fields = {n: n for n, _ in fields}
        return dt

    def _ptr_diff_type(self, t: T.StructType, own: list) -> T.Type:
        """A pointer kind's Differential: named by the type (Slang has no synthesized one, since
        gradient storage cannot be made up by the compiler) and itself a pointer kind."""
        chk = self.chk
        loc = t.info.sym.decl.loc
        res = chk.sym_to_res(own, None, loc, chk.ctx_for_env(t.info.env), "Differential") if own else None
        if not isinstance(res, TypeRes):
            raise error("E6016", f"'{t}' conforms to IDifferentiablePtrType but declares no Differential type "
                                 f"(e.g. `typealias Differential = {t};`)", loc)
        d = res.type
        if d is not t and not self._is_ptr(d):
            raise error("E6016", f"the Differential of pointer type '{t}' must itself conform to "
                                 f"IDifferentiablePtrType, not be '{d}'", loc)
        return d

    def _diff_fields(self, t: T.StructType) -> dict:
        """Field name -> the field of t's Differential holding its derivative (or None)."""
        info = t.info
        dt = info.diff_type
        if not isinstance(dt, T.StructType) or info.ptr_kind:
            return {}
        out = {}
        members = {m.name: m for m in info.sym.decl.members if isinstance(m, ast.VarDecl)}
        for name, ft in info.field_list():
            m = members.get(name)
            if m is not None and "no_diff" in m.mods:
                out[name] = None
                continue
            named = [a.args[0].name for a in (m.attrs if m is not None else [])
                     if a.name == "DerivativeMember" and a.args and isinstance(a.args[0], ast.Member)]
            dname = named[0] if named else (name if dt.info.field_type(name) is not None else None)
            if dname is not None and dt is not t:
                want, got = self._diff(ft), dt.info.field_type(dname)
                if got is None or (want is not None and got != want):
                    where = m.loc if m is not None else info.sym.decl.loc
                    raise error("E6016", f"the derivative of field '{name}' ({ft}) is '{dt}.{dname}', which "
                                         f"{'does not exist' if got is None else f'has type {got}'}; it must be "
                                         f"'{want}'", where)
            out[name] = dname
        return out

    # ------------------------------------------------------------------ functions

    def compute(self, kind: str, fn: ir.Function):
        if kind == "subst":
            return self.substitute(fn)
        if kind in ("fwd", "bwd"):
            return self.find_custom(fn, kind)
        return self.intrinsic_rule(fn) if fn.intrinsic is not None else None

    def substitute(self, fn: ir.Function) -> Optional[ir.Function]:
        """[PrimalSubstitute(g)] on fn / [PrimalSubstituteOf(fn)] on g: derivatives of fn
        (and fwd_diff's primal) come from g."""
        chk = self.chk
        found = None
        attr = fn.attrs.get("attrs", {}).get("PrimalSubstitute")
        if attr is not None and attr.args:
            found = self.pick(attr.args[0], fn.attrs.get("env"), fn, "primal")
        decl = fn.attrs.get("decl")
        if found is None and decl is not None:
            for gsym, kind, target in chk.deriv_of:
                if kind != "PrimalSubstituteOf":
                    continue
                try:
                    res = chk.resolve(target, chk.ctx_for_env(gsym.env))
                except CompileError:
                    continue
                if any(c.decl is decl for c in getattr(res, "cands", [])):
                    found = self.pick_from(OverloadRes([gsym], name=gsym.name), fn, "primal")
                    if found is not None:
                        break
        return found

    def find_custom(self, fn: ir.Function, mode: str) -> Optional[ir.Function]:
        chk = self.chk
        names = {"fwd": ("ForwardDerivative", "ForwardDerivativeOf"),
                 "bwd": ("BackwardDerivative", "BackwardDerivativeOf")}[mode]
        found = None
        attr = fn.attrs.get("attrs", {}).get(names[0])
        decl = fn.attrs.get("decl")
        if attr is not None and attr.args:
            res = chk.resolve(attr.args[0], chk.ctx_for_env(fn.attrs.get("env")))
            if not isinstance(res, OverloadRes):
                raise error("E6013", f"[{names[0]}] of '{fn.slang_name}' must name a function", attr.loc)
            found = self.pick_from(res, fn, mode)
            if found is None:
                raise error("E6013", f"[{names[0]}({res.name})] does not match '{fn.slang_name}': expected "
                                     f"parameters ({self.expected_sig(fn, mode)})", attr.loc)
            self.check_custom(found, fn, mode, attr.loc, names[0])
        if found is None and decl is not None:
            owner = fn.params[0].type if fn.params and fn.params[0].name == "this" else None
            mismatched = None
            for gsym, kind, target in chk.deriv_of:
                if kind != names[1]:
                    continue
                if owner is not None and gsym.owner is not None and gsym.owner is not owner:
                    continue          # the same generic member, declared for another instantiation
                res = self.resolve_target(target, gsym, owner)
                if res is None:
                    continue
                if any(c.decl is decl for c in getattr(res, "cands", [])):
                    found = self.pick_from(OverloadRes([gsym], name=gsym.name), fn, mode)
                    if found is not None:
                        self.check_custom(found, fn, mode, gsym.decl.loc, names[1])
                        break
                    mismatched = mismatched or gsym
            if found is None and mismatched is not None:
                raise error("E6013", f"'{mismatched.name}' is declared [{names[1]}({fn.slang_name})] but does not "
                                     f"match it: expected parameters ({self.expected_sig(fn, mode)})",
                            mismatched.decl.loc)
        return found

    def resolve_target(self, target: ast.Expr, gsym, owner=None):
        """The functions a `[...DerivativeOf(target)]` names, or None.  In a generic derivative the
        target may apply the derivative's own generic parameters (`f<T>`, `S<T>.m`): those are
        unbound where it is declared, so the target is looked up without its generic arguments
        (which one is meant is decided by matching signatures); a method of a generic struct
        (`S<T>::m`) is looked up on the instantiation being matched (`owner`, the method's `this`)."""
        chk = self.chk
        if owner is None and gsym.env is chk.core_env:
            # the core library's rules (`[ForwardDerivativeOf(sin)]`, ...) are asked about for every function
            # differentiated: their targets resolve in the core environment, alike every time (names of the
            # on-demand core modules are declared by the lookup itself, before the answer is kept)
            memo = self.__dict__.setdefault("_core_targets", {})
            key = (id(gsym), id(target))
            if key not in memo:
                memo[key] = self._resolve_target(target, gsym, None)
            return memo[key]
        return self._resolve_target(target, gsym, owner)

    def _resolve_target(self, target: ast.Expr, gsym, owner):
        chk = self.chk
        try:
            return chk.resolve(target, chk.ctx_for_env(gsym.env))
        except CompileError:
            pass
        if owner is not None and isinstance(target, ast.Member) and isinstance(target.base, ast.GenericApp) \
                and getattr(gsym.decl, "generic_params", None):
            try:
                base = chk.resolve(target.base.base, chk.ctx_for_env(gsym.env))
                sym = getattr(getattr(owner, "info", None), "sym", None)
                if sym is not None and getattr(getattr(base, "sym", None), "decl", None) is sym.decl:
                    # the target names the owner's generic struct: its member, on this instantiation
                    return chk.resolve(ast.Member(TypeLiteral(owner), target.name, target.op, loc=target.loc),
                                       chk.ctx_for_env(gsym.env))
            except CompileError:
                return None
        if getattr(gsym.decl, "generic_params", None):
            stripped = _strip_generic_args(target)
            if stripped is not target:
                try:
                    return chk.resolve(stripped, chk.ctx_for_env(gsym.env))
                except CompileError:
                    return None
        return None

    def check_derivative_targets(self):
        """Every `[...DerivativeOf(f)]` / `__func_extension ...(f)` of the user's modules names a
        function (a misspelt target would otherwise attach nothing, silently)."""
        chk = self.chk
        for gsym, kind, target in chk.deriv_of:
            if gsym.env.module == "core" or kind not in ("ForwardDerivativeOf", "BackwardDerivativeOf",
                                                          "PrimalSubstituteOf"):
                continue
            res = self.resolve_target(target, gsym)
            if res is None and isinstance(target, ast.Member) and isinstance(target.base, ast.GenericApp) \
                    and getattr(gsym.decl, "generic_params", None):
                # `S<T>::m` in a generic derivative: found per instantiation (find_custom); here the
                # generic struct must exist
                chk.resolve(target.base.base, chk.ctx_for_env(gsym.env))
                continue
            if res is None:
                chk.resolve(target, chk.ctx_for_env(gsym.env))       # raises the located lookup error
                raise error("E6013", f"[{kind}] of '{gsym.name}' must name a function", gsym.decl.loc)
            if not isinstance(res, OverloadRes):
                raise error("E6013", f"[{kind}] of '{gsym.name}' must name a function", gsym.decl.loc)

    def intrinsic_rule(self, fn: ir.Function):
        """(rule function, its P expression, its D expression) for a core intrinsic, or None."""
        chk = self.chk
        cands = [g for g, kind, target in chk.deriv_of
                 if kind == "ForwardDerivativeOf" and isinstance(target, ast.Name) and target.name == fn.slang_name
                 and g.env.module == "core"]
        if not cands:
            return None
        args = self.dummy_args(fn, "fwd")
        try:
            g, _ = chk.pick_function(OverloadRes(cands, name="d_" + fn.slang_name), args, fn.loc)
        except CompileError:
            return None
        chk.check_pending_bodies()
        body = g.body.stmts if g.body is not None else []
        ret = [s for s in body if isinstance(s, ir.Return)]
        if len(body) != 1 or not ret or not isinstance(ret[0].value, ir.Construct) or \
                not isinstance(ret[0].value.type, T.PairType):
            raise error("E6003", f"internal: derivative rule for '{fn.slang_name}' must be `return diffPair(p, d);`", fn.loc)
        c = ret[0].value
        return (g, c.args[0], c.args[1] if len(c.args) > 1 else None)

    # ------------------------------------------------------------------ matching custom derivatives

    def dummy_args(self, fn: ir.Function, mode: str) -> list:
        pd, rd = self.derivs.signature(fn)
        args = []
        for p, d in zip(fn.params, pd):
            if p.name == "this" and fn.params[0] is p:
                continue
            if d is None or mode == "primal":
                t = p.type
            elif mode == "bwd" and p.direction == "out":
                t = d
            else:
                t = self.derivs.pair(p.type, d)
            args.append(ir.LocalRef(t, ir.Var(p.name, t)))
        if mode == "bwd" and rd is not None:
            args.append(ir.LocalRef(rd, ir.Var("dOut", rd)))
        return args

    def expected_sig(self, fn: ir.Function, mode: str) -> str:
        pd, rd = self.derivs.signature(fn)
        parts = []
        for p, d in zip(fn.params, pd):
            if p.name == "this" and p is fn.params[0]:
                continue
            if d is None:
                parts.append(f"{p.type} {p.name}")
            elif self.derivs.is_ptr(p.type):
                parts.append(f"DifferentialPtrPair<{p.type}> {p.name}")
            elif mode == "bwd":
                parts.append(f"{d} {p.name}" if p.direction == "out" else f"inout DifferentialPair<{p.type}> {p.name}")
            else:
                parts.append(f"{'' if p.direction == 'in' else p.direction + ' '}DifferentialPair<{p.type}> {p.name}")
        if mode == "bwd" and rd is not None:
            parts.append(f"{rd} dOut")
        return ", ".join(parts)

    def check_custom(self, g: ir.Function, fn: ir.Function, mode: str, loc, attr_name: str):
        """The directions and result a custom derivative must have (beyond matching types)."""
        pd, rd = self.derivs.signature(fn)
        gparams = [p for p in g.params if p.name != "this" or p is not g.params[0]]
        fparams = [(p, d) for p, d in zip(fn.params, pd) if not (p.name == "this" and p is fn.params[0])]
        if g.params and g.params[0].name == "this":
            gparams = g.params[1:]
        elif fn.params and fn.params[0].name == "this" and len(g.params) > len(fparams) + (mode == "bwd" and rd is not None):
            fparams = list(zip(fn.params, pd))        # a static derivative taking `this` first
        bad = None
        for (p, d), gp in zip(fparams, gparams):
            if d is not None and mode == "bwd" and p.direction != "out" and gp.direction != "inout" \
                    and not self.derivs.is_ptr(p.type):
                bad = f"parameter '{gp.name}' must be `inout DifferentialPair<{p.type}>` (bwd_diff writes its .d)"
                break
        if bad is None and mode == "bwd" and rd is not None:
            extra = gparams[len(fparams):]
            if extra and extra[0].type != rd:
                bad = f"its '{extra[0].name}' parameter must be '{rd}' (the Differential of '{fn.ret}'), " \
                      f"not '{extra[0].type}'"
        if bad is None:
            for (p, d), gp in zip(fparams, gparams):
                if d is None or self.derivs.is_ptr(p.type):
                    continue
                want = d if mode == "bwd" and p.direction == "out" else self.derivs.pair(p.type, d)
                if gp.type != want:
                    bad = f"parameter '{gp.name}' must be '{want}', not '{gp.type}'"
                    break
        if bad is None and mode == "bwd" and g.ret != T.VOID:
            bad = f"a backward derivative returns void, not '{g.ret}'"
        if bad is None and mode == "fwd":
            want = T.PairType(fn.ret, rd) if rd is not None else fn.ret
            if g.ret != want:
                bad = f"it must return '{want}', not '{g.ret}'"
        if bad is not None:
            raise error("E6013", f"custom derivative [{attr_name}] of '{fn.slang_name}': {bad}", loc)

    def pick(self, target: ast.Expr, env, fn, mode) -> Optional[ir.Function]:
        res = self.chk.resolve(target, self.chk.ctx_for_env(env))
        return self.pick_from(res, fn, mode)

    def pick_from(self, res, fn, mode) -> Optional[ir.Function]:
        if not isinstance(res, OverloadRes):
            return None
        args = self.dummy_args(fn, mode)
        this = None
        if fn.params and fn.params[0].name == "this":
            this = ir.LocalRef(fn.params[0].type, ir.Var("this", fn.params[0].type))
        attempts = [res.type_args]
        fargs = [a for a in fn.attrs.get("type_args", []) if not isinstance(a, tuple)]
        if not res.type_args and fargs:
            attempts.append(fargs)      # a generic derivative takes the primal's generic arguments
        forms = [(this, args)]
        sig = self.derivs.signature(fn)
        if this is not None and mode in ("fwd", "bwd") and self.derivs.is_ptr(this.type) and sig[0][0]:
            # A pointer method's derivative may be a static function taking the pair as `this`.
            pt = self.derivs.pair(this.type, sig[0][0])
            forms.append((None, [ir.LocalRef(pt, ir.Var("this", pt))] + args))
        elif this is not None and mode in ("fwd", "bwd") and any(getattr(c, "owner", None) is None
                                                                 for c in res.cands):
            # A free function (`__func_extension fwd_diff(S.m)(DifferentialPair<S> self, ...)`)
            # takes `this` first: its pair when `this` is differentiable.
            pt = self.derivs.pair(this.type, sig[0][0]) if sig[0][0] is not None else this.type
            forms.append((None, [ir.LocalRef(pt, ir.Var("this", pt))] + args))
        for this_, args_ in forms:
            for targs in attempts:
                ores = OverloadRes(res.cands, this=this_, type_args=targs, name=res.name)
                try:
                    g, _ = self.chk.pick_function(ores, args_, fn.loc)
                except CompileError:
                    continue
                if this_ is None and g.params and g.params[0].name == "this":
                    continue
                return g
        return None

    # ------------------------------------------------------------------ before autodiff

    def prepare(self) -> bool:
        """Record the facts of every struct and of every function autodiff could reach from the
        queued derivatives.  True if anything new was recorded (the checker then checks the bodies
        and structs that this instantiated, and asks again)."""
        d, did = self.derivs, False
        structs = self.chk.structs
        while self.structs_done < len(structs) or self.ifaces_done < len(self.chk.dyn_ifaces):
            if self.ifaces_done < len(self.chk.dyn_ifaces):
                # a dynamic interface value's Differential (check/dynamic.py dyn_diff_type)
                t = self.chk.dyn_ifaces[self.ifaces_done]
                self.ifaces_done += 1
                self.struct_facts(t)
                did = True
                continue
            t = structs[self.structs_done].type
            self.structs_done += 1
            if not T.contains_vars(t):
                self.struct_facts(t)
                did = True
        todo = [fn for _, fn, _, _ in d.pending]
        while todo:
            fn = todo.pop()
            if id(fn) in self.prepared:
                continue
            if fn.body is None and fn.intrinsic is None and fn.attrs.get("decl") is not None:
                self.chk.check_pending_bodies()
            self.prepared.add(id(fn))
            did = True
            if has_own_facts(fn):
                for kind in FACT_KINDS:
                    try:
                        v = d.fact(kind, fn)
                    except CompileError:
                        continue                  # recorded; raised where autodiff uses it
                    if isinstance(v, ir.Function):
                        todo.append(v)
                    elif isinstance(v, tuple):
                        todo.append(v[0])         # a rule function: second derivatives inline its body
            gen = fn.attrs.get("generated_derivative")
            if gen is not None:
                todo.append(gen[1])
            if fn.body is not None:
                for n in walk(fn.body):
                    callee = getattr(n, "func", None)
                    if isinstance(callee, ir.Function):
                        todo.append(callee)
        return did

    # ------------------------------------------------------------------ self-differentiation

    def check_no_self_differentiation(self, functions):
        """A function whose body (directly or through calls) calls a derivative of a function that
        reaches it back would need derivatives of derivatives without end (E6018)."""
        def primal_chain(fn):
            out = []
            gen = fn.attrs.get("generated_derivative")
            while gen is not None:
                fn = gen[1]
                out.append(fn)
                gen = fn.attrs.get("generated_derivative")
            return out

        calls: dict = {}                   # id(fn) -> [(call node, callee)]
        sites = []                          # (caller, call node, derivative shell)
        for fn in functions:
            if fn.body is None or fn.attrs.get("generated_derivative") is not None:
                continue
            lst = calls[id(fn)] = []
            for n in walk(fn.body):
                callee = getattr(n, "func", None)
                if isinstance(callee, ir.Function):
                    lst.append(callee)
                    if callee.attrs.get("generated_derivative") is not None:
                        sites.append((fn, n, callee))
        if not sites:
            return

        def reaches(start, target) -> bool:
            seen, todo = set(), [start]
            while todo:
                f = todo.pop()
                if f is target:
                    return True
                if id(f) in seen:
                    continue
                seen.add(id(f))
                chain = primal_chain(f)
                todo.extend(chain[:1] if chain else calls.get(id(f), ()))
            return False

        for caller, node, shell in sites:
            for p in primal_chain(shell):
                if reaches(p, caller):
                    mode = {"fwd": "forward", "bwd": "backward"}[shell.attrs["generated_derivative"][0]]
                    how = "itself" if p is caller else f"'{p.slang_name}', which calls it back"
                    raise error("E6018", f"'{caller.slang_name}' takes the {mode} derivative of {how}: "
                                f"that would need derivatives of derivatives without end",
                                getattr(node, "loc", None) or caller.loc)


def _strip_generic_args(e: ast.Expr) -> ast.Expr:
    """`f<T>` -> `f`; `S<T>.m` -> `S.m` is not meaningful for a generic struct, so only the
    outermost function application is dropped."""
    if isinstance(e, ast.GenericApp):
        return e.base
    return e
