"""Automatic differentiation on the IR.

    fwd(fn)  forward mode: the JVP transform of fn's body (forward.py)
    bwd(fn)  reverse mode: replay fn forward storing overwritten values, then walk the
             statements backwards applying the transpose of each statement's JVP (reverse.py)

Derivatives of core functions are Slang functions marked `[ForwardDerivativeOf(f)]` in
core/derivatives.slang, inlined as expressions; reverse mode transposes them, so one rule
serves both modes.  User custom derivatives (`[ForwardDerivative(g)]`, `[BackwardDerivative(g)]`,
`...Of`) replace the generated ones.  Generated functions get their signature at once and their
body later (`run_pending`), so recursion through the checker is never needed.
"""
from __future__ import annotations

from typing import Optional

from ..parse import ast
from .. import types as T
from ..ir import nodes as ir
from ..source import CompileError, error
from .difftypes import diff_type, is_ptr_kind, pair_of, zero

DIFF_ATTRS = {"Differentiable", "ForwardDifferentiable", "BackwardDifferentiable", "TreatAsDifferentiable",
              "BackwardDerivative", "ForwardDerivative", "PrimalSubstitute"}


class AutoDiff:
    def __init__(self, chk):
        self.chk = chk
        self.fwd_cache: dict[int, ir.Function] = {}
        self.bwd_cache: dict[int, ir.Function] = {}
        self.pending: list = []
        self.rule_cache: dict = {}

    # ------------------------------------------------------------------ signatures

    def attrs(self, fn: ir.Function) -> dict:
        return fn.attrs.get("attrs", {})

    def signature(self, fn: ir.Function):
        """Per parameter: its Differential type, or None when it gets no derivative."""
        if "ad_sig" in fn.attrs:
            return fn.attrs["ad_sig"]
        decl = fn.attrs.get("decl")
        dparams = list(decl.params) if decl is not None else []
        offset = len(fn.params) - len(dparams)
        out = []
        for i, p in enumerate(fn.params):
            ap = dparams[i - offset] if i >= offset and dparams else None
            if p.name == "this" and i == 0 and offset == 1:
                if "NoDiffThis" in self.attrs(fn):
                    out.append(None)
                    continue
            elif ap is not None and "no_diff" in ap.mods:
                out.append(None)
                continue
            d = diff_type(self.chk, p.type)
            if d is not None and p.direction != "in" and is_ptr_kind(self.chk, p.type):
                raise error("E6014", f"'{fn.slang_name}': differentiable pointer parameter '{p.name}' must be an "
                                     f"`in` parameter (its differential is storage the caller provides)", fn.loc)
            out.append(d)
        rd = diff_type(self.chk, fn.ret) if fn.ret != T.VOID else None
        if rd is not None and is_ptr_kind(self.chk, fn.ret):
            raise error("E6014", f"'{fn.slang_name}' returns differentiable pointer type '{fn.ret}': its "
                                 f"differential could not be known; return it from a non-differentiable "
                                 f"function, or pass the pointer in", fn.loc)
        fn.attrs["ad_sig"] = (out, rd)
        return out, rd

    def pair(self, t: T.Type, d: T.Type) -> T.PairType:
        return pair_of(self.chk, t, d)

    def is_ptr(self, t: T.Type) -> bool:
        return is_ptr_kind(self.chk, t)

    def substitute(self, fn: ir.Function) -> Optional[ir.Function]:
        """[PrimalSubstitute(g)] on fn / [PrimalSubstituteOf(fn)] on g: derivatives of fn
        (and fwd_diff's primal) come from g."""
        key = ("subst", id(fn))
        if key in self.rule_cache:
            return self.rule_cache[key]
        self.rule_cache[key] = None
        found = None
        attr = self.attrs(fn).get("PrimalSubstitute")
        if attr is not None and attr.args:
            found = self.pick(attr.args[0], fn.attrs.get("env"), fn, "primal")
        decl = fn.attrs.get("decl")
        if found is None and decl is not None:
            for gsym, kind, target in self.chk.deriv_of:
                if kind != "PrimalSubstituteOf":
                    continue
                try:
                    res = self.chk.resolve(target, self.chk.ctx_for_env(gsym.env))
                except CompileError:
                    continue
                if any(c.decl is decl for c in getattr(res, "cands", [])):
                    from ..check.checker import OverloadRes
                    found = self.pick_from(OverloadRes([gsym], name=gsym.name), fn, "primal")
                    if found is not None:
                        break
        self.rule_cache[key] = found
        return found

    def is_differentiable(self, fn: ir.Function) -> bool:
        if fn.attrs.get("generated_derivative"):
            return True
        if self.substitute(fn) is not None:
            return True
        a = self.attrs(fn)
        if DIFF_ATTRS & set(a):
            return True
        return self.find_custom(fn, "fwd") is not None or self.find_custom(fn, "bwd") is not None

    # ------------------------------------------------------------------ custom derivatives

    def dummy_args(self, fn: ir.Function, mode: str) -> list:
        pd, rd = self.signature(fn)
        args = []
        for p, d in zip(fn.params, pd):
            if p.name == "this" and fn.params[0] is p:
                continue
            if d is None or mode == "primal":
                t = p.type
            elif mode == "bwd" and p.direction == "out":
                t = d
            else:
                t = self.pair(p.type, d)
            v = ir.Var(p.name, t)
            args.append(ir.LocalRef(t, v))
        if mode == "bwd" and rd is not None:
            args.append(ir.LocalRef(rd, ir.Var("dOut", rd)))
        return args

    def use_substitutes(self, s):
        """Inside derivative code, a call to a function with a primal substitute calls the
        substitute (its value as well as its derivative), as Slang does."""
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.use_substitutes(x)
        elif isinstance(s, (ir.ExprStmt, ir.VarDecl)):
            e = s.expr if isinstance(s, ir.ExprStmt) else s.init
            if isinstance(e, ir.Assign):
                e = e.rhs
            if isinstance(e, ir.Call):
                sub = self._sub(e.func)
                if sub is not None and len(sub.params) == len(e.func.params):
                    e.func = sub
        elif isinstance(s, ir.If):
            self.use_substitutes(s.then)
            if s.else_ is not None:
                self.use_substitutes(s.else_)
        elif isinstance(s, ir.Loop):
            self.use_substitutes(s.body)
        elif isinstance(s, ir.Switch):
            for c in s.cases:
                for x in c.body:
                    self.use_substitutes(x)

    def _sub(self, fn):
        g = self.substitute(fn)
        return g if g is not None and g is not fn else None

    def find_custom(self, fn: ir.Function, mode: str) -> Optional[ir.Function]:
        key = (mode, id(fn))
        if key in self.rule_cache:
            return self.rule_cache[key]
        self.rule_cache[key] = None
        names = {"fwd": ("ForwardDerivative", "ForwardDerivativeOf"),
                 "bwd": ("BackwardDerivative", "BackwardDerivativeOf")}[mode]
        found = None
        attr = self.attrs(fn).get(names[0])
        decl = fn.attrs.get("decl")
        if attr is not None and attr.args:
            env = fn.attrs.get("env")
            from ..check.checker import OverloadRes
            res = self.chk.resolve(attr.args[0], self.chk.ctx_for_env(env))
            if not isinstance(res, OverloadRes):
                raise error("E6013", f"[{names[0]}] of '{fn.slang_name}' must name a function", attr.loc)
            found = self.pick_from(res, fn, mode)
            if found is None:
                raise error("E6013", f"[{names[0]}({res.name})] does not match '{fn.slang_name}': expected "
                                     f"parameters ({self.expected_sig(fn, mode)})", attr.loc)
            self.check_custom(found, fn, mode, attr.loc, names[0])
        if found is None and decl is not None:
            from ..check.checker import OverloadRes
            owner = fn.params[0].type if fn.params and fn.params[0].name == "this" else None
            mismatched = None
            for gsym, kind, target in self.chk.deriv_of:
                if kind != names[1]:
                    continue
                if owner is not None and gsym.owner is not None and gsym.owner is not owner:
                    continue          # the same generic member, declared for another instantiation
                try:
                    res = self.chk.resolve(target, self.chk.ctx_for_env(gsym.env))
                except CompileError:
                    continue
                cands = getattr(res, "cands", [])
                if any(c.decl is decl for c in cands):
                    found = self.pick_from(OverloadRes([gsym], name=gsym.name), fn, mode)
                    if found is not None:
                        self.check_custom(found, fn, mode, gsym.decl.loc, names[1])
                        break
                    mismatched = mismatched or gsym
            if found is None and mismatched is not None:
                raise error("E6013", f"'{mismatched.name}' is declared [{names[1]}({fn.slang_name})] but does not "
                                     f"match it: expected parameters ({self.expected_sig(fn, mode)})",
                            mismatched.decl.loc)
        self.rule_cache[key] = found
        return found

    def expected_sig(self, fn: ir.Function, mode: str) -> str:
        pd, rd = self.signature(fn)
        parts = []
        for p, d in zip(fn.params, pd):
            if p.name == "this" and p is fn.params[0]:
                continue
            if d is None:
                parts.append(f"{p.type} {p.name}")
            elif self.is_ptr(p.type):
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
        pd, rd = self.signature(fn)
        gparams = [p for p in g.params if p.name != "this" or p is not g.params[0]]
        fparams = [(p, d) for p, d in zip(fn.params, pd) if not (p.name == "this" and p is fn.params[0])]
        if g.params and g.params[0].name == "this":
            gparams = g.params[1:]
        elif fn.params and fn.params[0].name == "this" and len(g.params) > len(fparams) + (mode == "bwd" and rd is not None):
            fparams = list(zip(fn.params, pd))        # a static derivative taking `this` first
        bad = None
        for (p, d), gp in zip(fparams, gparams):
            if d is not None and mode == "bwd" and p.direction != "out" and gp.direction != "inout" \
                    and not self.is_ptr(p.type):
                bad = f"parameter '{gp.name}' must be `inout DifferentialPair<{p.type}>` (bwd_diff writes its .d)"
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
        from ..check.checker import OverloadRes
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
        if this is not None and mode in ("fwd", "bwd") and self.is_ptr(this.type) and self.signature(fn)[0][0]:
            # A pointer method's derivative may be a static function taking the pair as `this`.
            pt = self.pair(this.type, self.signature(fn)[0][0])
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

    # ------------------------------------------------------------------ generated functions

    def fwd(self, fn: ir.Function, loc) -> ir.Function:
        if id(fn) in self.fwd_cache:
            return self.fwd_cache[id(fn)]
        sub = self._sub(fn)
        if sub is not None and self.find_custom(fn, "fwd") is None:
            g = self.fwd(sub, loc)
            self.fwd_cache[id(fn)] = g
            return g
        custom = self.find_custom(fn, "fwd")
        if custom is not None:
            self.fwd_cache[id(fn)] = custom
            return custom
        if fn.body is None and fn.intrinsic is None and not self.is_differentiable(fn):
            pass
        pd, rd = self.signature(fn)
        params = [ir.Var(p.name, self.pair(p.type, d) if d is not None else p.type, p.direction)
                  for p, d in zip(fn.params, pd)]
        ret = T.PairType(fn.ret, rd) if rd is not None else fn.ret
        g = ir.Function(self.chk.unique("fwd_" + fn.name), params, ret, loc=fn.loc)
        g.slang_name = "fwd_" + fn.slang_name
        g.attrs["generated_derivative"] = ("fwd", fn)
        g.attrs["decl"] = None
        g.attrs["ad_sig"] = ([diff_type(self.chk, p.type) for p in params],
                             diff_type(self.chk, ret) if ret != T.VOID else None)
        self.fwd_cache[id(fn)] = g
        if "TreatAsDifferentiable" in self.attrs(fn):
            self.pending.append(("fwd-zero", fn, g, loc))
        elif fn.intrinsic is not None:
            self.pending.append(("fwd-intrinsic", fn, g, loc))
        else:
            self.pending.append(("fwd", fn, g, loc))
        self.chk.functions.append(g)
        return g

    def bwd(self, fn: ir.Function, loc) -> ir.Function:
        if id(fn) in self.bwd_cache:
            return self.bwd_cache[id(fn)]
        sub = self._sub(fn)
        if sub is not None and self.find_custom(fn, "bwd") is None:
            g = self.bwd(sub, loc)
            self.bwd_cache[id(fn)] = g
            return g
        custom = self.find_custom(fn, "bwd")
        if custom is not None:
            self.bwd_cache[id(fn)] = custom
            return custom
        pd, rd = self.signature(fn)
        params = []
        for p, d in zip(fn.params, pd):
            if d is None:
                params.append(ir.Var(p.name, p.type, "out" if p.direction == "out" else "in"))
            elif p.direction == "out":
                params.append(ir.Var(p.name, d, "in"))
            elif self.is_ptr(p.type):
                # never written: the gradient goes through the pointer (Slang passes it by value)
                params.append(ir.Var(p.name, self.pair(p.type, d), "in"))
            else:
                params.append(ir.Var(p.name, T.PairType(p.type, d), "inout"))
        if rd is not None:
            params.append(ir.Var("dOut", rd, "in"))
        g = ir.Function(self.chk.unique("bwd_" + fn.name), params, T.VOID, loc=fn.loc)
        g.slang_name = "bwd_" + fn.slang_name
        g.attrs["generated_derivative"] = ("bwd", fn)
        g.attrs["decl"] = None
        self.bwd_cache[id(fn)] = g
        kind = "bwd-zero" if "TreatAsDifferentiable" in self.attrs(fn) else \
            "bwd-intrinsic" if fn.intrinsic is not None else "bwd"
        self.pending.append((kind, fn, g, loc))
        self.chk.functions.append(g)
        return g

    def run_pending(self) -> bool:
        """Build the bodies of generated functions; True if anything was done."""
        did = False
        while self.pending:
            kind, fn, g, loc = self.pending.pop(0)
            did = True
            if fn.body is None and fn.intrinsic is None:
                self.chk.check_pending_bodies()
            if kind == "fwd":
                from .forward import ForwardTransform
                pd, rd = self.signature(fn)
                if fn.body is None:
                    raise error("E6002", f"cannot differentiate '{fn.slang_name}': it has no body", loc)
                g.body = ForwardTransform(self, fn, g, pd, rd).run()
            elif kind == "fwd-intrinsic":
                g.body = self.intrinsic_fwd_body(fn, g, loc)
            elif kind == "bwd-intrinsic":
                g.body = self.intrinsic_bwd_body(fn, g, loc)
            elif kind in ("fwd-zero", "bwd-zero"):
                g.body = self.zero_body(kind, fn, g)
            else:
                from .reverse import ReverseTransform
                g.body = ReverseTransform(self, fn, g, loc).run()
        return did

    # ------------------------------------------------------------------ intrinsic rules

    def intrinsic_rule(self, fn: ir.Function):
        """(rule function, its P expression, its D expression) for a core intrinsic, or None."""
        key = ("rule", id(fn))
        if key in self.rule_cache:
            return self.rule_cache[key]
        self.rule_cache[key] = None
        from ..check.checker import OverloadRes
        cands = [g for g, kind, target in self.chk.deriv_of
                 if kind == "ForwardDerivativeOf" and isinstance(target, ast.Name) and target.name == fn.slang_name
                 and g.env.module == "core"]
        if not cands:
            return None
        args = self.dummy_args(fn, "fwd")
        try:
            g, _ = self.chk.pick_function(OverloadRes(cands, name="d_" + fn.slang_name), args, fn.loc)
        except CompileError:
            return None
        self.chk.check_pending_bodies()
        body = g.body.stmts if g.body is not None else []
        ret = [s for s in body if isinstance(s, ir.Return)]
        if len(body) != 1 or not ret or not isinstance(ret[0].value, ir.Construct) or \
                not isinstance(ret[0].value.type, T.PairType):
            raise error("E6003", f"internal: derivative rule for '{fn.slang_name}' must be `return diffPair(p, d);`", fn.loc)
        c = ret[0].value
        rule = (g, c.args[0], c.args[1] if len(c.args) > 1 else None)
        self.rule_cache[key] = rule
        return rule

    def intrinsic_tangent(self, node: ir.Intrinsic, jvp) -> Optional[ir.Expr]:
        fn = getattr(node, "func", None)
        if fn is None:
            return None
        pd, rd = self.signature(fn)
        if rd is None:
            return None
        tangents = [jvp(a) if d is not None else None for a, d in zip(node.args, pd)]
        if all(t is None for t in tangents):
            return None
        rule = self.intrinsic_rule(fn)
        if rule is None:
            raise error("E6004", f"no derivative is known for '{fn.slang_name}'", node.loc)
        g, _, dexpr = rule
        if dexpr is None:
            return None
        from .inline import substitute
        return substitute(dexpr, g.params, node.args, tangents, pd)

    def intrinsic_fwd_body(self, fn: ir.Function, g: ir.Function, loc) -> ir.Block:
        """fwd_diff(sin) called directly: a small wrapper around the inlined rule."""
        from .rules import Jvp, tz
        pd, rd = self.signature(fn)
        args, tans = [], []
        for p, gp, d in zip(fn.params, g.params, pd):
            r = ir.LocalRef(gp.type, gp)
            if d is None:
                args.append(r)
                tans.append(None)
            else:
                args.append(ir.Field(p.type, r, "p"))
                tans.append(ir.Field(d, r, "d"))
        node = ir.Intrinsic(fn.ret, fn.intrinsic, args, ())
        node.func = fn
        node.type_args = fn.attrs.get("type_args", [])
        rule = self.intrinsic_rule(fn)
        if rule is None:
            raise error("E6004", f"no derivative is known for '{fn.slang_name}'", loc)
        from .inline import substitute
        t = substitute(rule[2], rule[0].params, args, tans, pd)
        return ir.Block([ir.Return(ir.Construct(g.ret, [node, tz(rd, t)]))])

    def zero_body(self, kind: str, fn: ir.Function, g: ir.Function) -> ir.Block:
        """[TreatAsDifferentiable]: the primal runs as is and every derivative is zero."""
        pd, rd = self.signature(fn)
        stmts: list = []
        if kind == "fwd-zero":
            args = []
            for p, gp, d in zip(fn.params, g.params, pd):
                r = ir.LocalRef(gp.type, gp)
                if d is None:
                    args.append(r)
                elif p.direction == "in":
                    args.append(ir.Field(p.type, r, "p"))
                else:
                    args.append(ir.Field(p.type, r, "p"))
                    stmts.append(ir.ExprStmt(ir.Assign(d, "=", ir.Field(d, r, "d"), zero(d))))
            call = ir.Call(fn.ret, fn, args)
            if rd is None:
                stmts.insert(0, ir.ExprStmt(call))
                return ir.Block(stmts)
            return ir.Block(stmts + [ir.Return(ir.Construct(g.ret, [call, zero(rd)]))])
        for p, gp, d in zip(fn.params, g.params, pd):
            if d is not None and p.direction != "out" and not self.is_ptr(p.type):
                r = ir.LocalRef(gp.type, gp)
                stmts.append(ir.ExprStmt(ir.Assign(d, "=", ir.Field(d, r, "d"), zero(d))))
        return ir.Block(stmts)

    def intrinsic_bwd_body(self, fn: ir.Function, g: ir.Function, loc) -> ir.Block:
        """bwd_diff(sin) called directly: the transposed rule."""
        from .transpose import Transposer
        from .inline import substitute
        pd, rd = self.signature(fn)
        rule = self.intrinsic_rule(fn)
        if rule is None:
            raise error("E6004", f"no derivative is known for '{fn.slang_name}'", loc)
        stmts, args, tans, adjs = [], [], [], []
        for gp, d in zip(g.params, pd):
            r = ir.LocalRef(gp.type, gp)
            if d is None:
                args.append(r)
                tans.append(None)
                adjs.append(None)
                continue
            a = ir.Var("adj_" + gp.name, d)
            a.is_adjoint = True
            stmts.append(ir.VarDecl(a, zero(d)))
            args.append(ir.Field(gp.type.primal, r, "p"))
            tans.append(ir.LocalRef(d, a))
            adjs.append((a, r))
        t = substitute(rule[2], rule[0].params, args, tans, pd)
        if t is not None and rd is not None:
            dout = g.params[-1]
            Transposer(lambda v: getattr(v, "is_adjoint", False), self.chk).tr(t, ir.LocalRef(dout.type, dout), stmts)
        for x in adjs:
            if x is not None:
                a, r = x
                stmts.append(ir.ExprStmt(ir.Assign(a.type, "=", ir.Field(a.type, r, "d"), ir.LocalRef(a.type, a))))
        return ir.Block(stmts)

    def intrinsic_with_outs_fwd(self, fwd, e, dest, out):
        """Core functions with out parameters (sincos, modf, frexp): handled as calls of
        their derivative rule functions."""
        raise error("E6005", f"'{e.func.slang_name if getattr(e, 'func', None) else e.name}' cannot be differentiated yet", e.loc)
