"""The autodiff surface of the language in the checker: DifferentialPair<T>, diffPair,
.p/.d, T.Differential, dzero/dadd/dmul, no_diff/detach, and fwd_diff(f)/bwd_diff(f) calls.
The transforms themselves live in compiler/autodiff."""
from __future__ import annotations

from typing import Optional

from ..parse import ast
from ..ir import nodes as ir
from ..ir.difftypes import add, scale
from ..ir.program import unique_name
from ..source import CompileError, Loc
from .. import types as T
from .activity import library_path
from .calls import InitListArg
from .members import BuiltinMethodRes
from .results import OverloadRes, TypeRes, ValueRes

DIFF_OPS = {"fwd_diff": "fwd", "__fwd_diff": "fwd", "bwd_diff": "bwd", "__bwd_diff": "bwd"}


class DiffStaticRes:
    """`T.dzero` / `T.dadd` / `T.dmul` before the call."""
    def __init__(self, type_, name):
        self.type, self.name = type_, name


class DiffsMixin:
    def diff_type(self, t: T.Type) -> Optional[T.Type]:
        return self.derivs.diff_type(t)

    def pair_type(self, t: T.Type, loc: Loc) -> T.PairType:
        if T.contains_vars(t):
            return T.PairType(t, t)          # an inference pattern
        if self.derivs.is_ptr(t):
            raise self.err("E6010", f"'{t}' is a differentiable pointer type (IDifferentiablePtrType): "
                                    f"its pair is DifferentialPtrPair<{t}>", loc)
        d = self.diff_type(t)
        if d is None:
            raise self.err("E6010", f"'{t}' is not differentiable (DifferentialPair needs an IDifferentiable type)", loc)
        return T.PairType(t, d)

    def ptr_pair_type(self, t: T.Type, loc: Loc) -> T.PtrPairType:
        if T.contains_vars(t):
            return T.PtrPairType(t, t)       # an inference pattern
        if not self.derivs.is_ptr(t):
            raise self.err("E6010", f"DifferentialPtrPair needs a type conforming to IDifferentiablePtrType, "
                                    f"not '{t}'", loc)
        return T.PtrPairType(t, self.diff_type(t))

    # ------------------------------------------------------------------ special calls

    def special_call(self, e: ast.Call, ctx) -> Optional[ir.Expr]:
        c = e.callee
        if isinstance(c, ast.Call) and isinstance(c.callee, ast.Name) and c.callee.name in DIFF_OPS \
                and len(c.args) == 1 and not ctx.env.lookup(c.callee.name):
            return self.diff_call(DIFF_OPS[c.callee.name], c.args[0], e.args, e.loc, ctx)
        if isinstance(c, ast.GenericApp) and isinstance(c.base, ast.Name) and c.base.name == "diffPair" \
                and len(c.args) == 1 and not ctx.env.lookup("diffPair"):
            # `diffPair<T>(p, d)`: the pair type is given, so the arguments may be initializer lists.
            if len(e.args) not in (1, 2):
                raise self.err("E3030", "diffPair takes (primal) or (primal, differential)", e.loc)
            pt = self.pair_type(self.resolve_type(c.args[0], ctx), c.loc)
            p = self.coerce_init(e.args[0], pt.primal, ctx)
            d = self.coerce_init(e.args[1], pt.diff, ctx) if len(e.args) == 2 else ir.Construct(pt.diff, [])
            return ir.Construct(pt, [p, d], loc=e.loc)
        if not isinstance(c, ast.Name) or ctx.env.lookup(c.name):
            return None
        name = c.name
        if name == "diffPair":
            if len(e.args) not in (1, 2):
                raise self.err("E3030", "diffPair takes (primal) or (primal, differential)", e.loc)
            if isinstance(e.args[0], ast.InitList):
                raise self.err("E3050", "diffPair cannot infer its type from an initializer list: write "
                                        "diffPair<T>({...}, ...) or DifferentialPair<T>({...}, ...)", e.args[0].loc)
            p = self.expr(e.args[0], ctx)
            pt = self.pair_type(p.type, e.loc)
            d = self.coerce_init(e.args[1], pt.diff, ctx) if len(e.args) == 2 else ir.Construct(pt.diff, [])
            return ir.Construct(pt, [p, d], loc=e.loc)
        if name == "updateDiff" and len(e.args) == 2:
            p = self.expr(e.args[0], ctx)
            if not isinstance(p.type, T.PairType):
                raise self.err("E3001", f"updateDiff needs a DifferentialPair, got '{p.type}'", e.args[0].loc)
            self.require_lvalue(p, e.args[0].loc, "argument of updateDiff")
            d = self.coerce(self.expr(e.args[1], ctx), p.type.diff, e.args[1].loc)
            return ir.Assign(p.type.diff, "=", ir.Field(p.type.diff, p, "d", loc=e.loc), d, loc=e.loc)
        if name in ("no_diff", "detach"):
            if len(e.args) != 1:
                raise self.err("E3030", f"{name} takes one argument", e.loc)
            if name == "no_diff" and not isinstance(e.args[0], (ast.Call, ast.Index, ast.Assign)) and \
                    not library_path(getattr(e.loc.file, "path", "")):
                raise self.err("E6023", "'no_diff' can only be used to decorate a call or a subscript operation "
                                        "(Slang E38031); use detach() for a value", e.loc)
            x = self.expr(e.args[0], ctx)
            node = ir.Detach(x.type, x, loc=e.loc)
            node.no_diff = name == "no_diff"      # excuses a non-differentiable call (check/activity.py)
            return node
        return None

    def require_backward(self, fn: ir.Function, loc: Loc):
        """bwd_diff of a function marked only [ForwardDifferentiable] (no backward derivative of its
        own, no user forward derivative to transpose, no substitute): Slang has no backward derivative
        for it (E30027 "'bwd_diff' is not a member of 'f'"); E6020 here."""
        a = set(fn.attrs.get("attrs", {}))
        if "ForwardDifferentiable" not in a or a & {"Differentiable", "BackwardDifferentiable", "TreatAsDifferentiable",
                                                    "BackwardDerivative", "PrimalSubstitute", "ForwardDerivative"}:
            return
        d = self.derivs
        if d.find_custom(fn, "bwd") is not None or d.find_custom(fn, "fwd") is not None or d.substitute(fn) is not None:
            return
        raise self.err("E6020", f"'{fn.slang_name}' is only [ForwardDifferentiable]: it has no backward derivative "
                                f"for bwd_diff (Slang E30027); mark it [Differentiable] or give it a "
                                f"[BackwardDerivative]", loc)

    def nested_diff_fn(self, fexpr: ast.Expr, args: list, loc: Loc, ctx) -> Optional[ir.Function]:
        """fwd_diff(fwd_diff(f)) and friends: the inner derivative function for these args."""
        r = self.nested_diff_fn_this(fexpr, args, loc, ctx)
        return None if r is None else r[0]

    def nested_diff_fn_this(self, fexpr: ast.Expr, args: list, loc: Loc, ctx):
        """(inner derivative function, the object a method was named through or None)."""
        if not (isinstance(fexpr, ast.Call) and isinstance(fexpr.callee, ast.Name) and fexpr.callee.name in DIFF_OPS
                and len(fexpr.args) == 1):
            return None
        inner_mode = DIFF_OPS[fexpr.callee.name]
        inner = fexpr.args[0]
        views = [ir.LocalRef(a.type.primal, ir.Var("x", a.type.primal)) if isinstance(a.type, T.PairType) else a
                 for a in args]
        r = self.nested_diff_fn_this(inner, views, loc, ctx)
        fn, this = r if r is not None else (None, None)
        if fn is None:
            res = self.resolve(inner, ctx)
            this = res.this if isinstance(res, OverloadRes) else None
            if not isinstance(res, OverloadRes):
                raise self.err("E6011", "fwd_diff/bwd_diff needs a function", inner.loc)
            attempts = [views] if inner_mode == "fwd" else [views[:-1], views]
            fn = None
            for att in attempts:
                try:
                    fn, _ = self.pick_function(res, att, loc)
                    break
                except CompileError:
                    continue
            if fn is None:
                raise self.err("E3010", f"no overload of '{res.name}' matches these arguments", loc)
            if not self.derivs.is_differentiable(fn) and fn.intrinsic is None:
                raise self.err("E6012", f"'{fn.slang_name}' is not differentiable: mark it [Differentiable] "
                                        f"or give it a custom derivative", inner.loc)
            if inner_mode == "bwd":
                self.require_backward(fn, fexpr.loc)
        return (self.derivs.fwd(fn, loc) if inner_mode == "fwd" else self.derivs.bwd(fn, loc)), this

    def diff_call(self, mode: str, fexpr: ast.Expr, args_ast: list, loc: Loc, ctx) -> ir.Expr:
        pre_args = None
        if isinstance(fexpr, ast.Call) and isinstance(fexpr.callee, ast.Name) and fexpr.callee.name in DIFF_OPS:
            if len(fexpr.args) != 1:
                raise self.err("E3030", f"{fexpr.callee.name} takes one function, got {len(fexpr.args)} argument(s)",
                               fexpr.loc)
            args = self.call_args(args_ast, ctx)
            views = [ir.LocalRef(a.type.primal, ir.Var("x", a.type.primal)) if isinstance(a.type, T.PairType) else a
                     for a in args]
            inner_fn, this = self.nested_diff_fn_this(fexpr, views if mode == "fwd" else views[:-1], loc, ctx)
            g = self.derivs.fwd(inner_fn, loc) if mode == "fwd" else self.derivs.bwd(inner_fn, loc)
            if this is not None and g.params and g.params[0].name == "this" and len(args) + 1 == len(g.params):
                args = [this] + list(args)
            if len(args) != len(g.params):
                raise self.err("E3010", f"{mode}_diff takes {len(g.params)} argument(s), got {len(args)}", loc)
            return ir.Call(g.ret, g, [a if p.direction in ("out", "inout") else self.coerce_arg(a, p.type, ctx)
                                      for a, p in zip(args, g.params)], loc=loc)
        fres = self.resolve(fexpr, ctx)
        if not isinstance(fres, OverloadRes):
            raise self.err("E6011", f"{mode}_diff needs a function", fexpr.loc)
        args = self.call_args(args_ast, ctx)
        for a, src in zip(args, args_ast):
            if not isinstance(a, InitListArg):
                a.loc = src.loc
        try:
            return self.diff_call_with(mode, fexpr, fres, args, loc, ctx, False)
        except CompileError as ex:
            if ex.code != "E3010" or not self.receiver_may_be_explicit(fres, args):
                raise
            # `bwd_diff(obj.method)(obj, ...)`: the current Slang passes the receiver as argument 0 (the
            # older form, tried first, binds `obj` implicitly).
            return self.diff_call_with(mode, fexpr, fres, args, loc, ctx, True)

    def diff_call_with(self, mode, fexpr, fres, args, loc, ctx, receiver_explicit: bool) -> ir.Expr:
        # A method named through its type takes `this` as the first argument.
        this = fres.this
        explicit_this = None
        if this is None and fres.cands and all(getattr(c, "owner", None) is not None and not c.is_static
                                               for c in fres.cands) and args:
            explicit_this = args[0]
            args = args[1:]
            pt = explicit_this.type.primal if isinstance(explicit_this.type, T.PairType) else explicit_this.type
            this = ir.LocalRef(pt, ir.Var("this", pt))
        elif this is not None and args and not isinstance(args[0], InitListArg) and \
                isinstance(fexpr, ast.Member) and fexpr.op == "->":
            # `bwd_diff(p->method)(*p, ...)`: through a pointer the method is named statically and
            # its `this` is passed explicitly, as Slang does.
            a0 = args[0].type.primal if isinstance(args[0].type, T.PairType) else args[0].type
            if a0 == this.type:
                explicit_this, args = args[0], args[1:]
                this = ir.LocalRef(a0, ir.Var("this", a0))
        elif receiver_explicit:
            a0 = args[0].type.primal if isinstance(args[0].type, T.PairType) else args[0].type
            explicit_this, args = args[0], args[1:]
            this = ir.LocalRef(a0, ir.Var("this", a0))
        def primal_view(a):
            if isinstance(a, InitListArg):
                return a
            if isinstance(a.type, T.PairType):
                return ir.LocalRef(a.type.primal, ir.Var("x", a.type.primal), loc=a.loc)
            return a
        ad = self.derivs
        attempts = [(args, None)]
        if mode == "bwd" and args:
            attempts = [(args[:-1], None), (args, None)]
            attempts += [(a, dropped) for a, dropped in self.bwd_nondiff_out_attempts(fres, args)]
        last_err = None
        for cand_args, dropped in attempts:
            ores = OverloadRes(fres.cands if dropped is None else [dropped[0]], this=this,
                               type_args=fres.type_args, name=fres.name)
            try:
                fn, _ = self.pick_function(ores, [primal_view(a) for a in cand_args], loc)
            except CompileError as ex:
                if ex.code != "E3010":
                    raise              # a real error (e.g. no body), not an arity mismatch
                last_err = last_err or ex
                continue
            pd, rd = ad.signature(fn)
            nargs = len(cand_args) - (len(dropped[1]) if dropped is not None else 0)
            if mode == "bwd" and (rd is None) != (nargs == len(args)):
                continue
            if not ad.is_differentiable(fn) and fn.intrinsic is None:
                raise self.err("E6012", f"'{fn.slang_name}' is not differentiable: mark it [Differentiable] "
                                        f"or give it a custom derivative", fexpr.loc)
            if mode == "bwd":
                self.require_backward(fn, loc)
            g = ad.fwd(fn, loc) if mode == "fwd" else ad.bwd(fn, loc)
            if dropped is not None:
                g = self.bwd_without_outs(fn, g, dropped[1])
                if g is None:
                    continue
            all_args = ([explicit_this] if explicit_this is not None else
                        ([fres.this] if fres.this is not None and fn.params and fn.params[0].name == "this" else [])) + list(args)
            if len(all_args) != len(g.params):
                raise self.err("E3010", f"{mode}_diff({fres.name}) takes {len(g.params)} argument(s), got {len(all_args)}", loc)
            out = []
            pre = []
            if explicit_this is None and fres.this is not None and all_args and g.params and \
                    isinstance(g.params[0].type, T.PairType) and not isinstance(all_args[0].type, T.PairType):
                # `bwd_diff(obj.method)(...)`: the receiver is a primal value here; its derivative is
                # not asked for, so it travels in a pair of its own whose differential is dropped.
                pt = g.params[0].type
                pair = ir.Construct(pt, [self.coerce(all_args[0], pt.primal, loc), ir.Construct(pt.diff, [])], loc=loc)
                if g.params[0].direction in ("out", "inout"):
                    tv = ir.Var("this_pair", pt)
                    pre.append(ir.VarDecl(tv, pair))
                    pair = ir.LocalRef(pt, tv, loc=loc)
                out.append(pair)
                all_args, params = all_args[1:], g.params[1:]
            else:
                params = g.params
            for a, p in zip(all_args, params):
                if p.direction in ("out", "inout"):
                    self.require_lvalue(a, a.loc, f"argument '{p.name}' of {mode}_diff({fres.name}) (an {p.direction} parameter)")
                    if not (a.type == p.type or a.type is p.type):
                        raise self.err("E3001", f"argument '{p.name}' of {mode}_diff({fres.name}) must be '{p.type}', got '{a.type}'", a.loc)
                    out.append(a)
                else:
                    out.append(self.coerce_arg(a, p.type, ctx))
            call = ir.Call(g.ret, g, out, loc=loc)
            return ir.StmtExpr(g.ret, pre, call, loc=loc) if pre else call
        if last_err is not None:
            raise last_err
        raise self.err("E3010", f"no overload of '{fres.name}' matches these {mode}_diff arguments", loc)

    @staticmethod
    def receiver_may_be_explicit(fres, args) -> bool:
        if fres.this is None or not args or isinstance(args[0], InitListArg):
            return False
        a0 = args[0].type.primal if isinstance(args[0].type, T.PairType) else args[0].type
        return a0 == fres.this.type

    def bwd_nondiff_out_attempts(self, fres, args):
        """bwd_diff(f) may omit f's non-differentiable `out` parameters (Slang's backward
        derivative has none): per candidate, the arguments with placeholders in their places."""
        for sym in fres.cands:
            decl = getattr(sym, "decl", None)
            if not isinstance(decl, ast.FuncDecl) or decl.generic_params:
                continue
            idx = [i for i, p in enumerate(decl.params) if p.direction == "out"]
            if not idx:
                continue
            try:
                types = self.param_types(sym, sym.env)
            except CompileError:
                continue
            idx = [i for i in idx if "no_diff" in decl.params[i].mods
                   or (not T.contains_vars(types[i]) and self.diff_type(types[i]) is None)]
            if not idx:
                continue
            for base in (args[:-1], args):
                full, k = [], 0
                for i in range(len(base) + len(idx)):
                    if i in idx:
                        full.append(ir.LocalRef(types[i], ir.Var(decl.params[i].name, types[i])))
                    elif k < len(base):
                        full.append(base[k])
                        k += 1
                if k == len(base) and len(full) == len(decl.params):
                    yield full, (sym, idx)

    def bwd_without_outs(self, fn: ir.Function, g: ir.Function, idx: list) -> Optional[ir.Function]:
        """A wrapper of the backward derivative g that passes temporaries for fn's dropped
        non-differentiable out parameters (declaration positions idx)."""
        key = (id(g), tuple(idx))
        cache = self.__dict__.setdefault("_bwd_wrappers", {})
        if key in cache:
            return cache[key]
        off = 1 if fn.params and fn.params[0].name == "this" and len(fn.params) > len(fn.attrs["decl"].params) else 0
        drop = {i + off for i in idx}
        if any(g.params[i].direction != "out" for i in drop):
            return None
        params, args, stmts = [], [], []
        for i, gp in enumerate(g.params):
            if i in drop:
                t = ir.Var(gp.name, gp.type)
                stmts.append(ir.VarDecl(t, ir.Construct(gp.type, [])))
                args.append(ir.LocalRef(gp.type, t))
            else:
                v = ir.Var(gp.name, gp.type, gp.direction)
                params.append(v)
                args.append(ir.LocalRef(gp.type, v))
        stmts.append(ir.ExprStmt(ir.Call(T.VOID, g, args)))
        w = ir.Function(unique_name(g.name + "_w"), params, T.VOID, loc=g.loc)
        w.slang_name = g.slang_name
        w.attrs["decl"] = None
        w.body = ir.Block(stmts)
        self.derivs.functions.append(w)
        cache[key] = w
        return w

    # ------------------------------------------------------------------ members

    def diff_member(self, obj: Optional[ir.Expr], t: T.Type, name: str, loc: Loc):
        """Autodiff members of values and types, or None."""
        if obj is not None and isinstance(t, T.PairType):
            if name in ("p", "primal", "v"):
                return ValueRes(ir.Field(t.primal, obj, "p", loc=loc))
            if name in ("d", "differential"):
                return ValueRes(ir.Field(t.diff, obj, "d", loc=loc))
            if name in ("getPrimal", "getDifferential"):
                return BuiltinMethodRes(obj, name, t)
        if obj is None and name == "Differential":
            d = self.diff_type(t)
            if d is None:
                raise self.err("E6010", f"'{t}' is not differentiable", loc)
            return TypeRes(d)
        if name in ("dzero", "dadd", "dmul") and self.diff_type(t) is not None:
            if isinstance(t, T.StructType) and self.member_syms(t, name):
                return None
            return DiffStaticRes(t, name)
        return None

    def call_diff_static(self, res: DiffStaticRes, args: list, loc: Loc, ctx) -> ir.Expr:
        d = self.diff_type(res.type)
        if res.name == "dzero":
            return ir.Construct(d, [], loc=loc)
        if res.name == "dadd":
            if len(args) != 2:
                raise self.err("E3030", "dadd takes two arguments", loc)
            a, b = (self.coerce_arg(x, d, ctx) for x in args)
            return add(a, b)
        if len(args) != 2:
            raise self.err("E3030", "dmul takes two arguments", loc)
        s = self.coerce_arg(args[0], T.scalar_of(d) or T.FLOAT, ctx)
        return scale(s, self.coerce_arg(args[1], d, ctx))
