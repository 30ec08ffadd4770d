"""Calls: implicit conversions and their costs, generic argument inference, overload
resolution, and instantiation of functions."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..parse import ast
from ..ir import nodes as ir
from ..ir.program import next_placeholder_id
from ..ir.fold import fold_convert
from ..source import CompileError, Loc
from .. import types as T
from .scope import Env, FuncSym, PackSym, TypeSym, ValueSym
from .results import const_expr


# Costs of implicit conversions (lower is better); the numbers only order the choices.
COST_PROMOTE = 10          # int -> int64, float -> double, half -> float
COST_SIGN = 20             # int <-> uint of the same or larger size
COST_INT_TO_FLOAT = 40
COST_NARROW = 80           # double -> float, int64 -> int
COST_FLOAT_TO_INT = 100
COST_BOOL = 90
COST_SPLAT = 1
COST_TRUNCATE = 200
COST_INIT_LIST = 50
COST_GENERIC = 1           # prefer a non-generic overload on ties
COST_INTERFACE = 5
COST_UPCAST = 15           # a derived struct where one of its base structs is expected (per level)


@dataclass
class InitListArg:
    """An argument written as `{...}`: typed only once the parameter type is known."""
    node: ast.InitList
    type: Any = None
    loc: Loc = None


@dataclass
class Match:
    cost: int
    sym: Any
    type_args: list
    param_types: list
    directions: list
    has_this: bool


class CallsMixin:
    # ------------------------------------------------------------------ conversions

    def scalar_cost(self, s: T.ScalarType, d: T.ScalarType) -> Optional[int]:
        if s == d:
            return 0
        if not isinstance(s, T.ScalarType) or not isinstance(d, T.ScalarType):
            return None
        if s.kind == "void" or d.kind == "void":
            return None
        if s.kind == "bool" or d.kind == "bool":
            return COST_BOOL
        if s.kind == d.kind:
            return COST_PROMOTE if d.bits > s.bits else COST_NARROW
        if d.kind == "float":
            return COST_INT_TO_FLOAT + (0 if d.bits >= 32 else 5)
        if s.kind == "float":
            return COST_FLOAT_TO_INT
        # int <-> uint
        return COST_SIGN + (0 if d.bits >= s.bits else COST_NARROW)

    def conv_cost(self, src: T.Type, dst: T.Type) -> Optional[int]:
        if src is dst or src == dst:
            return 0
        if isinstance(src, T.EnumType):
            if isinstance(dst, T.ScalarType) and dst.kind in ("int", "uint"):
                return COST_SIGN
            return None
        if isinstance(dst, T.EnumType):
            return None
        if isinstance(dst, T.InterfaceType):
            return COST_INTERFACE if self.conforms(src, dst) else None
        if isinstance(dst, T.OptionalType) and not isinstance(src, T.OptionalType):
            c = self.conv_cost(src, dst.elem)       # a value converts to Optional<T> implicitly
            return None if c is None else c + 1
        if isinstance(src, T.ScalarType):
            if isinstance(dst, T.ScalarType):
                return self.scalar_cost(src, dst)
            if isinstance(dst, (T.VectorType, T.MatrixType)) and isinstance(dst.elem, T.ScalarType):
                c = self.scalar_cost(src, dst.elem)
                return None if c is None else c + COST_SPLAT
            return None
        if isinstance(src, T.VectorType):
            if isinstance(dst, T.VectorType) and isinstance(src.n, int) and isinstance(dst.n, int):
                c = self.scalar_cost(src.elem, dst.elem)
                if c is None:
                    return None
                if src.n == dst.n:
                    return c
                if src.n > dst.n:
                    return c + COST_TRUNCATE
                return None
            if isinstance(dst, T.ScalarType):
                c = self.scalar_cost(src.elem, dst)
                if c is None:
                    return None
                return c + (2 if src.n == 1 else COST_TRUNCATE)
            return None
        if isinstance(src, T.MatrixType) and isinstance(dst, T.MatrixType):
            if (src.rows, src.cols) == (dst.rows, dst.cols):
                return self.scalar_cost(src.elem, dst.elem)
            return None
        if isinstance(src, T.ArrayType) and isinstance(dst, T.ArrayType):
            if types_eq(src.elem, dst.elem) and (dst.n is None or dst.n == src.n):
                return 0
            return None
        if isinstance(src, T.PointerType) and isinstance(dst, T.PointerType):
            return 0 if types_eq(src.elem, dst.elem) else 1 if src.elem == T.VOID else None   # nullptr
        if isinstance(src, T.BufferType) and isinstance(dst, T.BufferType):
            if src.elem == dst.elem and (src.kind == dst.kind or
                                         (src.kind.replace("RW", "") == dst.kind and not dst.writable)):
                return 1
            return None
        if isinstance(src, T.TupleType) and isinstance(dst, T.TupleType) and len(src.elems) == len(dst.elems):
            total = 0
            for a, b in zip(src.elems, dst.elems):
                c = self.conv_cost(a, b)
                if c is None:
                    return None
                total += c
            return total
        if isinstance(src, T.StructType) and isinstance(dst, T.StructType):
            depth = base_depth(src, dst)
            return None if depth is None else COST_UPCAST * depth
        return None

    def coerce(self, e: ir.Expr, dst: T.Type, loc: Loc, explicit: bool = False) -> ir.Expr:
        src = e.type
        if src is dst or src == dst:
            return e
        if isinstance(dst, T.InterfaceType):
            if isinstance(src, T.StructType) and self.conforms(src, dst):
                return self.dyn_pack(e, dst, loc)      # stored as a run-time (dynamic) value
            if self.conforms(src, dst):
                return e
        if isinstance(dst, T.OptionalType):
            if isinstance(e, ir.NoneExpr):
                return ir.Construct(dst, [], loc=loc)
            return ir.Construct(dst, [self.coerce(e, dst.elem, loc, explicit)], loc=loc)
        if isinstance(src, T.EnumType) or isinstance(dst, T.EnumType):
            if explicit or isinstance(dst, T.ScalarType):
                s_under = src.underlying if isinstance(src, T.EnumType) else src
                d_under = dst.underlying if isinstance(dst, T.EnumType) else dst
                if isinstance(s_under, T.ScalarType) and isinstance(d_under, T.ScalarType):
                    return ir.Convert(dst, e, loc=loc)
            raise self.err("E3001", f"cannot convert '{src}' to '{dst}'", loc)
        cost = self.conv_cost(src, dst)
        if cost is None and isinstance(src, T.InterfaceType) and isinstance(dst, T.StructType):
            # Typically `I a = Concrete(...); a = createDynamicObject<I>(...);`: the declaration
            # gave `a` its initializer's concrete type (static dispatch).
            raise self.err("E3001", f"cannot convert dynamic '{src}' to '{dst}': a variable declared '{src}' with a "
                                    f"'{dst}' initializer has type '{dst}'; test with `is`/`as`, or initialize it "
                                    f"from a dynamic value", loc)
        if cost is None and not explicit:
            raise self.err("E3001", f"cannot convert '{src}' to '{dst}'", loc)
        if isinstance(src, T.ScalarType) and isinstance(dst, T.ScalarType):
            if src.kind == "void" or dst.kind == "void":
                raise self.err("E3001", f"cannot convert '{src}' to '{dst}'", loc)
            return fold_convert(e, dst, loc)
        if isinstance(src, T.ScalarType) and isinstance(dst, (T.VectorType, T.MatrixType)):
            return ir.Construct(dst, [self.coerce(e, dst.elem, loc, explicit)], splat=True, loc=loc)
        if isinstance(src, T.VectorType) and isinstance(dst, T.VectorType):
            if src.n > dst.n:
                if not explicit:
                    self.warn("W3002", f"implicit truncation of '{src}' to '{dst}'", loc)
                e = ir.Swizzle(T.VectorType(src.elem, dst.n), e, tuple(range(dst.n)), loc=loc)
                return self.coerce(e, dst, loc, explicit)
            if src.n == dst.n:
                return ir.Convert(dst, e, loc=loc)
        if isinstance(src, T.VectorType) and isinstance(dst, T.ScalarType):
            e = ir.Swizzle(src.elem, e, (0,), loc=loc)
            return self.coerce(e, dst, loc, explicit)
        if isinstance(src, T.MatrixType) and isinstance(dst, T.MatrixType) and \
                (src.rows, src.cols) == (dst.rows, dst.cols):
            return ir.Convert(dst, e, loc=loc)
        if isinstance(src, T.ArrayType) and isinstance(dst, T.ArrayType) and cost is not None:
            return e
        if isinstance(src, T.PointerType) and isinstance(dst, T.PointerType):
            return ir.Convert(dst, e, loc=loc)
        if explicit and isinstance(dst, T.PointerType) and isinstance(src, T.ScalarType) and src.kind in ("int", "uint"):
            return ir.Convert(dst, e, loc=loc)
        if explicit and isinstance(src, T.PointerType) and isinstance(dst, T.ScalarType):
            return ir.Convert(dst, e, loc=loc)
        if isinstance(src, T.BufferType) and cost is not None:
            return ir.Convert(dst, e, loc=loc)
        if isinstance(src, T.StructType) and isinstance(dst, T.StructType) and base_depth(src, dst):
            # a derived struct as its base: the leading fields it inherited (evaluated once)
            tmp = None
            if not isinstance(e, ir.LocalRef):
                tmp = ir.Var("__base_of", src, loc=loc)
                obj = ir.LocalRef(src, tmp, loc=loc)
            else:
                obj = e
            value = ir.Construct(dst, [ir.Field(ft, obj, n, loc=loc) for n, ft in dst.info.field_list()], loc=loc)
            return value if tmp is None else ir.StmtExpr(dst, [ir.VarDecl(tmp, e)], value, loc=loc)
        if isinstance(src, T.TupleType) and isinstance(dst, T.TupleType) and cost is not None:
            return ir.Construct(dst, [self.coerce(ir.Field(a, e, f"_{i}", loc=loc), b, loc)
                                      for i, (a, b) in enumerate(zip(src.elems, dst.elems))], loc=loc)
        raise self.err("E3001", f"cannot convert '{src}' to '{dst}'", loc)

    def coerce_arg(self, a, dst: T.Type, ctx) -> ir.Expr:
        if isinstance(a, InitListArg):
            return self.init_list(a.node, dst, ctx)
        return self.coerce(a, dst, a.loc)

    def arg_cost(self, a, dst: T.Type) -> Optional[int]:
        if isinstance(a, InitListArg):
            if isinstance(dst, (T.StructType, T.ArrayType, T.VectorType, T.MatrixType, T.TupleType)):
                return COST_INIT_LIST
            return COST_INIT_LIST if not a.node.items else None
        if isinstance(a, ir.NoneExpr):
            return 1 if isinstance(dst, T.OptionalType) else None
        return self.conv_cost(a.type, dst)

    # ------------------------------------------------------------------ inference

    def unify(self, pat: Any, act: Any, b: dict) -> bool:
        if isinstance(pat, T.TypeVar):
            if isinstance(act, (T.TypeVar,)):
                return True
            prev = b.get(pat)
            if prev is None:
                b[pat] = act
                return True
            if prev == act or prev is act:
                return True
            j = join_types(prev, act)
            if j is None:
                return False
            b[pat] = j
            return True
        if isinstance(pat, T.ValueVar):
            if isinstance(act, T.ValueVar):
                return True
            prev = b.get(pat)
            if prev is None:
                b[pat] = act
                return True
            return prev == act
        if isinstance(pat, T.VectorType):
            if isinstance(act, T.VectorType):
                return self.unify(pat.elem, act.elem, b) and self.unify(pat.n, act.n, b)
            if isinstance(act, T.ScalarType):          # scalar argument to a vector parameter
                return self.unify(pat.elem, act, b)
            return False
        if isinstance(pat, T.MatrixType):
            if isinstance(act, T.MatrixType):
                return self.unify(pat.elem, act.elem, b) and self.unify(pat.rows, act.rows, b) \
                    and self.unify(pat.cols, act.cols, b)
            if isinstance(act, T.ScalarType):
                return self.unify(pat.elem, act, b)
            return False
        if isinstance(pat, T.ArrayType):
            if isinstance(act, T.ArrayType):
                return self.unify(pat.elem, act.elem, b) and (pat.n is None or act.n is None or self.unify(pat.n, act.n, b))
            return False
        if isinstance(pat, T.OptionalType) and not isinstance(act, T.OptionalType):
            return self.unify(pat.elem, act, b)         # a value converts to Optional<T> implicitly
        if isinstance(pat, (T.PointerType, T.AtomicType, T.OptionalType)):
            return type(act) is type(pat) and self.unify(pat.elem, act.elem, b)
        if isinstance(pat, T.BufferType):
            return isinstance(act, T.BufferType) and (pat.elem is None or act.elem is None or self.unify(pat.elem, act.elem, b))
        if isinstance(pat, T.StructType):
            if isinstance(act, T.StructType) and pat.info is not None and act.info is not None and \
                    pat.info.sym is act.info.sym:
                return all(self.unify(p, a, b) for p, a in zip(pat.args, act.args))
            return pat is act or not T.contains_vars(pat)
        if isinstance(pat, T.PairType):
            return isinstance(act, T.PairType) and type(act) is type(pat) and self.unify(pat.primal, act.primal, b)
        if isinstance(pat, T.TupleType):
            return isinstance(act, T.TupleType) and len(pat.elems) == len(act.elems) and \
                all(self.unify(p, a, b) for p, a in zip(pat.elems, act.elems))
        return True

    # ------------------------------------------------------------------ overload resolution

    def fresh_generic_env(self, sym: FuncSym, explicit: list, loc: Loc):
        """An environment binding each generic parameter to an explicit argument or a fresh
        inference variable; returns (env, [(param, var-or-value)])."""
        d: ast.FuncDecl = sym.decl
        genv = Env(sym.env, "generic")
        slots = []
        if len(explicit) > len(d.generic_params):
            return None, None
        for i, p in enumerate(d.generic_params):
            if i < len(explicit):
                a = explicit[i]
            elif p.kind == "value":
                a = T.ValueVar(p.name, next_placeholder_id())
            else:
                a = T.TypeVar(p.name, next_placeholder_id())
            if p.kind == "value":
                genv.add(p.name, ValueSym(p.name, const_expr(a, loc)))
            else:
                genv.add(p.name, TypeSym(p.name, a))
            slots.append((p, a))
        return genv, slots

    def infer_struct_args(self, sym, args: list, loc: Loc):
        """`Impl(v0)` for a generic `struct Impl<T>`: the generic arguments that make one of its `__init`s
        (or its fields, memberwise) take these arguments; None when no way binds them all."""
        d = sym.decl
        genv = Env(sym.env, "generic")
        slots = []
        for p in d.generic_params:
            a = (T.ValueVar if p.kind == "value" else T.TypeVar)(p.name, next_placeholder_id())
            genv.add(p.name, ValueSym(p.name, const_expr(a, loc)) if p.kind == "value" else TypeSym(p.name, a))
            slots.append((p, a))
        gctx = self.ctx_for_env(genv)
        shapes = [[p.type for p in m.params] for m in d.members
                  if isinstance(m, ast.FuncDecl) and m.name == "__init" and len(m.params) >= len(args)]
        fields = [m.type for m in d.members if isinstance(m, ast.VarDecl) and m.type is not None
                  and "static" not in m.mods]
        shapes.append(fields)
        for shape in shapes:
            if len(shape) < len(args):
                continue
            binding: dict = {}
            try:
                pts = [self.resolve_type(x, gctx) for x in shape[:len(args)]]
            except CompileError:
                continue
            if not all(isinstance(a, InitListArg) or self.unify(pt, a.type, binding) for pt, a in zip(pts, args)):
                continue
            if all(v in binding or p.default is not None for p, v in slots):
                type_args = []
                for p, v in slots:
                    if v not in binding:
                        break
                    type_args.append(binding[v])
                try:
                    return self.instantiate_struct(sym, type_args, loc)
                except CompileError:
                    continue
        return None

    def func_env(self, sym: FuncSym, genv: Env) -> Env:
        """Methods see their struct's members; the struct env is sym.env already."""
        return genv

    def param_types(self, sym: FuncSym, env: Env, lenient: bool = False) -> list[T.Type]:
        """The parameter types in env. lenient (inference, before the generics are bound): a type that
        depends on an unbound generic's member (`S.Param`) becomes a fresh variable that matches any
        argument; the real type is checked once the generics are bound."""
        ctx = self.ctx_for_env(env)
        out = []
        for p in sym.decl.params:
            if not lenient:
                out.append(self.resolve_type(p.type, ctx))
                continue
            try:
                out.append(self.resolve_type(p.type, ctx))
            except CompileError:
                out.append(T.TypeVar("__dependent", next_placeholder_id()))
        return out

    def pack_param(self, d: ast.FuncDecl):
        """(index, generic param) of a trailing `expand each T name` parameter, or None."""
        if d.params and isinstance(d.params[-1].type, ast.ExpandExpr):
            inner = d.params[-1].type.operand
            if isinstance(inner, ast.EachExpr) and isinstance(inner.operand, ast.Name):
                for gp in d.generic_params:
                    if gp.kind == "pack" and gp.name == inner.operand.name:
                        return len(d.params) - 1, gp
        return None

    def match_pack(self, sym, ores, args: list, loc: Loc, pack) -> Optional[Match]:
        d: ast.FuncDecl = sym.decl
        idx, gp = pack
        if len(args) < idx or len(d.generic_params) != 1 or ores.type_args:
            return None
        fixed, rest = args[:idx], args[idx:]
        if any(isinstance(a, (InitListArg, ir.NoneExpr)) for a in rest):
            return None
        try:
            ctx = self.ctx_for_env(Env(sym.env, "generic"))
            ptypes = [self.resolve_type(p.type, ctx) for p in d.params[:idx]]
            constraint = self.resolve_base(gp.type, ctx) if gp.type is not None else None
        except CompileError:
            return None
        cost = COST_GENERIC
        dirs = [p.direction for p in d.params[:idx]]
        for pt, a, dr in zip(ptypes, fixed, dirs):
            c = self.arg_cost(a, pt) if dr == "in" else (0 if not isinstance(a, InitListArg) and types_eq(a.type, pt) else None)
            if c is None:
                return None
            cost += c
        types = tuple(a.type for a in rest)
        if constraint is not None and not all(self.conforms(t, constraint) for t in types):
            return None
        return Match(cost, sym, [("pack", types)], ptypes + list(types), dirs + ["in"] * len(types),
                     ores.this is not None and not sym.is_static)

    def match_candidate(self, sym, ores, args: list, loc: Loc) -> Optional[Match]:
        d: ast.FuncDecl = sym.decl
        pack = self.pack_param(d)
        if pack is not None:
            return self.match_pack(sym, ores, args, loc, pack)
        params = d.params
        if len(args) > len(params):
            return None
        n_required = sum(1 for p in params if p.default is None)
        if len(args) < n_required:
            return None
        explicit = ores.type_args or []
        try:
            if d.generic_params or any(True for _ in ()):
                genv, slots = self.fresh_generic_env(sym, explicit, loc)
                if genv is None:
                    return None
            else:
                if explicit:
                    return None
                genv, slots = Env(sym.env, "generic"), []
            ptypes = self.param_types(sym, genv, lenient=bool(slots))
        except CompileError:
            return None
        # Interface-typed parameters are implicit generics: infer the concrete type.
        implicit = []
        for i, pt in enumerate(ptypes):
            if isinstance(pt, T.InterfaceType) and i < len(args):
                v = T.TypeVar(f"__impl{i}", next_placeholder_id())
                implicit.append((i, pt, v))
                ptypes[i] = v
        binding: dict = {}
        for pt, a in zip(ptypes, args):
            if isinstance(a, (InitListArg, ir.NoneExpr)):
                continue
            if not self.unify(pt, a.type, binding):
                return None
        type_args = []
        cost = 0
        if slots:
            cost += COST_GENERIC
            for p, a in slots:
                if isinstance(a, (T.TypeVar, T.ValueVar)):
                    if a in binding:
                        a = binding[a]
                    elif p.default is not None:
                        try:
                            a = self.generic_args([p.default], self.ctx_for_env(genv))[0]
                        except CompileError:
                            return None
                    else:
                        return None
                type_args.append(a)
            # Constraints; an integer argument to a floating-point generic becomes float (as
            # Slang does for `sin(1)`).
            try:
                cenv = self.bind_generics(d.generic_params, type_args, sym.env, loc, None)
                cctx = self.ctx_for_env(cenv)
                for i, p in enumerate(d.generic_params):
                    if p.kind == "type" and p.type is not None:
                        for pc in [p.type] + p.also:
                            c = self.resolve_base(pc, cctx)
                            if not self.conforms(type_args[i], c):
                                fixed = self.repair_for_constraint(type_args[i], c)
                                if fixed is None:
                                    return None
                                type_args[i] = fixed
                if d.where:
                    cenv2 = self.bind_generics(d.generic_params, type_args, sym.env, loc, None)
                    c2 = self.ctx_for_env(cenv2)
                    if not all(self.where_holds(w, c2) for w in d.where):
                        return None
                cenv = self.bind_generics(d.generic_params, type_args, sym.env, loc, None)
                ptypes2 = self.param_types(sym, cenv)
            except CompileError:
                return None
        else:
            ptypes2 = list(ptypes)
        for i, pt, v in implicit:
            conc = binding.get(v)
            if conc is None or not self.conforms(conc, pt):
                return None
            ptypes2[i] = conc
            type_args.append(("impl", i, conc))
            cost += COST_INTERFACE
        dirs = [p.direction for p in params]
        for pt, a, dr in zip(ptypes2, args, dirs):
            if dr in ("out", "inout", "ref"):
                if isinstance(a, InitListArg) or not types_eq(a.type, pt):
                    c = None if isinstance(a, InitListArg) else self.conv_cost(a.type, pt)
                    if c is None or not _same_shape(a.type, pt) or self.conv_cost(pt, a.type) is None:
                        return None         # the value is copied in and back: both ways, no reshaping
                    cost += c + 1
                continue
            c = self.arg_cost(a, pt)
            if c is None:
                return None
            cost += c
        return Match(cost, sym, type_args, ptypes2, dirs, ores.this is not None and not sym.is_static)

    def repair_for_constraint(self, t: T.Type, c) -> Optional[T.Type]:
        s = T.scalar_of(t)
        if s is not None and s.kind in ("int", "uint", "bool"):
            cand = T.with_scalar(t, T.FLOAT)
            if self.conforms(cand, c):
                return cand
        return None

    def pick_function(self, ores, args: list, loc: Loc):
        """The function instance a call with these arguments would use (no call built)."""
        matches = [m for m in (self.match_candidate(c, ores, args, loc) for c in ores.cands
                               if isinstance(c, FuncSym)) if m is not None]
        if not matches:
            arg_desc = ", ".join("{...}" if isinstance(a, InitListArg) else str(a.type) for a in args)
            raise self.err("E3010", f"no overload of '{ores.name}' matches arguments ({arg_desc})", loc)
        matches.sort(key=lambda m: m.cost)
        return self.instantiate_function(matches[0].sym, matches[0].type_args, loc), matches[0]

    def resolve_overload(self, ores, args: list, loc: Loc, ctx) -> ir.Expr:
        matches = []
        for cand in ores.cands:
            if isinstance(cand, FuncSym):
                if ores.this is None and not cand.is_static and cand.owner is not None and \
                        ores.static_owner is None and not getattr(ctx, "allow_unbound_method", False):
                    pass
                m = self.match_candidate(cand, ores, args, loc)
                if m is not None:
                    matches.append(m)
        if not matches:
            arg_desc = ", ".join("{...}" if isinstance(a, InitListArg) else str(a.type) for a in args)
            raise self.err("E3010", f"no overload of '{ores.name}' matches arguments ({arg_desc})", loc)
        matches.sort(key=lambda m: m.cost)
        best = matches[0]
        # Prefer the innermost / most specific: on an exact cost tie keep declaration order.
        fn = self.instantiate_function(best.sym, best.type_args, loc)
        call_args = []
        if not best.sym.is_static and best.sym.owner is not None:
            if ores.this is None:
                this = ctx.implicit_this(loc) if ctx is not None else None
                if this is None:
                    raise self.err("E3011", f"'{ores.name}' needs an object (it is not static)", loc)
            else:
                this = ores.this
            if fn.params and fn.params[0].direction == "inout":
                self.require_lvalue(this, loc, "mutating method's `this`")
            call_args.append(self.coerce_this(this, fn.params[0].type, loc))
        offset = len(call_args)
        for i, a in enumerate(args):
            pv = fn.params[offset + i]
            if pv.direction in ("out", "inout", "ref"):
                self.require_lvalue(a, a.loc, f"argument '{pv.name}' (an {pv.direction} parameter)")
                call_args.append(self.out_arg(a, pv.type, loc))
            else:
                call_args.append(self.coerce_arg(a, pv.type, ctx))
        # Default arguments are evaluated in the callee's scope.
        d = best.sym.decl
        for j in range(len(args), len(d.params) if "pack" not in fn.attrs else 0):
            pv = fn.params[offset + j]
            denv = fn.attrs.get("env") or best.sym.env
            dctx = self.ctx_for_env(denv)
            call_args.append(self.coerce(self.expr(d.params[j].default, dctx), pv.type, loc))
        if fn.attrs.get("is_init"):
            call_args = call_args
        return self.make_call(fn, call_args, loc)

    def coerce_this(self, this: ir.Expr, t: T.Type, loc):
        if types_eq(this.type, t):
            return this
        if isinstance(this.type, T.PointerType) and types_eq(this.type.elem, t):
            return ir.Deref(t, this, loc=loc)
        return self.coerce(this, t, loc)

    def out_arg(self, a: ir.Expr, t: T.Type, loc) -> ir.Expr:
        if types_eq(a.type, t) and not (isinstance(a, ir.Swizzle) and len(a.indices) > 1):
            return a
        # Different types: copy in, call, convert back (an explicit temporary).
        return ir.OutConvert(t, a, loc=loc)

    def make_call(self, fn: ir.Function, args: list, loc) -> ir.Expr:
        if fn.intrinsic is not None and fn.slang_name.endswith("WithGroupSync"):
            self.uses_group_barrier = True      # the CPU launcher then runs groups as fibers
        if fn.intrinsic is not None:
            outs = tuple(i for i, p in enumerate(fn.params) if p.direction in ("out", "inout", "ref"))
            node = ir.Intrinsic(fn.ret, fn.intrinsic, args, outs, loc=loc)
            node.func = fn
            node.type_args = fn.attrs.get("type_args", [])    # for `$T0` in a C++ spelling
            return node
        return ir.Call(fn.ret, fn, args, loc=loc)

    # ------------------------------------------------------------------ instantiation

    def instantiate_function(self, sym: FuncSym, type_args: list, loc: Loc) -> ir.Function:
        d: ast.FuncDecl = sym.decl
        packs = [a for a in type_args if isinstance(a, tuple) and a and a[0] == "pack"]
        gargs = [a for a in type_args if not (isinstance(a, tuple) and a and a[0] in ("impl", "pack"))]
        impl = [a for a in type_args if isinstance(a, tuple) and a and a[0] == "impl"]
        key = self.generic_key(gargs) + tuple((i, id(t) if isinstance(t, T.NominalType) else t) for _, i, t in impl)
        if packs:
            key += (("pack",) + tuple(id(t) if isinstance(t, T.NominalType) else t for t in packs[0][1]),)
        if key in sym.cache:
            return sym.cache[key]
        pack_info = self.pack_param(d) if packs else None
        if pack_info is not None:
            genv = Env(sym.env, "generic")
            genv.add(pack_info[1].name, PackSym(pack_info[1].name, list(packs[0][1]), True))
        elif d.generic_params:
            genv = self.bind_generics(d.generic_params, gargs, sym.env, loc, None)
        else:
            genv = Env(sym.env, "generic")
        fenv = Env(genv, "function")
        ctx = self.ctx_for_env(fenv)
        params = []
        owner = sym.owner
        mutating = any(a.name == "mutating" for a in d.attrs) or "mutating" in d.mods
        is_init = d.name == "__init"
        if owner is not None and not sym.is_static and not is_init:
            this_dir = "inout" if mutating else "in"
            params.append(ir.Var("this", owner, this_dir, loc=d.loc))
        impl_map = {i: t for _, i, t in impl}
        pack_vars = None
        for i, p in enumerate(d.params):
            if pack_info is not None and i == pack_info[0]:
                pack_vars = [ir.Var(f"{p.name}_{k}", t, "in", loc=p.loc) for k, t in enumerate(packs[0][1])]
                params.extend(pack_vars)
                continue
            pt = impl_map.get(i) or self.resolve_type(p.type, ctx)
            if isinstance(pt, T.ArrayType) and pt.n is None and p.direction == "in":
                pass
            params.append(ir.Var(p.name, pt, p.direction if p.direction != "ref" else "inout", loc=p.loc))
        if is_init:
            ret = owner
        elif d.return_type is None:
            ret = T.VOID
        else:
            ret = self.resolve_type(d.return_type, ctx)
        for t in [ret] + [p.type for p in params]:
            if isinstance(t, T.InterfaceType) and not T.contains_vars(t) and owner is None:
                self.dyn_table(t, d.loc)      # an interface-typed value is a dynamic one: its layout is needed
            elif isinstance(t, (T.BufferType, T.PointerType)) and t.elem is not None and not T.contains_vars(t):
                self.dyn_in_memory(t.elem, f"'{d.name}'", d.loc)      # interface values in memory (dynamic.py)
        label = d.name if owner is None else f"{owner}_{d.name}"
        fn = ir.Function(self.unique(label.replace("operator", "op")), params, ret, loc=d.loc)
        fn.slang_name = d.name
        fn.attrs["env"] = genv
        fn.attrs["decl"] = d
        fn.attrs["is_init"] = is_init
        fn.attrs["attrs"] = {a.name: a for a in d.attrs}
        fn.attrs["type_args"] = gargs
        core = getattr(sym, "is_core", False) or sym.env.module is not None and sym.env.module == "core"
        nodiff = self.generic_nodiff_params(d, genv, unconstrained=not core)
        # An interface-typed parameter is an implicit generic: like `T x` with `T : I`, it takes no
        # derivative when its interface is not differentiable (Slang decides from the declared type).
        iface_nodiff = {i for i in impl_map if not self.iface_param_differentiable(d.params[i].type, ctx)}
        if iface_nodiff:
            nodiff = frozenset(nodiff | iface_nodiff)
        if nodiff:
            fn.attrs["generic_nodiff"] = nodiff
        if pack_vars is not None:
            fn.attrs["pack"] = (d.params[pack_info[0]].name, pack_vars)
        sym.cache[key] = fn
        if d.body is None:
            cpp = next((a for a in d.attrs if a.name == "__cpp"), None)
            if cpp is not None and cpp.args and isinstance(cpp.args[0], ast.StringLit):
                fn.intrinsic = cpp.args[0].value
            elif getattr(sym, "is_core", False) or sym.env.module is not None and sym.env.module == "core":
                fn.intrinsic = "sj::" + d.name
            else:
                raise self.err("E3020", f"function '{d.name}' is declared but has no body", loc)
            return fn
        self.functions.append(fn)
        self.pending_bodies.append((fn, sym, fenv))
        return fn


def base_depth(src: T.Type, dst: T.Type) -> Optional[int]:
    """How many levels of struct inheritance lead from struct src up to struct dst (None: dst is
    not one of src's base structs)."""
    for b in getattr(getattr(src, "info", None), "struct_bases", ()):
        if b is dst:
            return 1
        d = base_depth(b, dst)
        if d is not None:
            return d + 1
    return None


def types_eq(a, b) -> bool:
    return a is b or a == b


def join_types(a: T.Type, b: T.Type) -> Optional[T.Type]:
    """The common type two inferred arguments unify to (int and float -> float, ...)."""
    sa, sb = T.scalar_of(a), T.scalar_of(b)
    if sa is None or sb is None or isinstance(a, T.EnumType) or isinstance(b, T.EnumType):
        return None
    s = T.join_scalars(sa, sb)
    if isinstance(a, T.ScalarType) and isinstance(b, T.ScalarType):
        return s
    if isinstance(a, T.VectorType) and isinstance(b, T.VectorType):
        return T.VectorType(s, min(a.n, b.n)) if isinstance(a.n, int) and isinstance(b.n, int) else None
    if isinstance(a, T.VectorType) and isinstance(b, T.ScalarType):
        return T.VectorType(s, a.n)
    if isinstance(b, T.VectorType) and isinstance(a, T.ScalarType):
        return T.VectorType(s, b.n)
    if isinstance(a, T.MatrixType) and isinstance(b, T.MatrixType) and (a.rows, a.cols) == (b.rows, b.cols):
        return T.MatrixType(s, a.rows, a.cols)
    return None


def _same_shape(a: T.Type, b: T.Type) -> bool:
    """An out/inout argument of another type converts element-wise only (int <-> uint <-> float of
    the same shape); splatting a scalar into a vector and back would drop components."""
    if isinstance(a, T.VectorType) or isinstance(b, T.VectorType):
        return isinstance(a, T.VectorType) and isinstance(b, T.VectorType) and a.n == b.n
    if isinstance(a, T.MatrixType) or isinstance(b, T.MatrixType):
        return isinstance(a, T.MatrixType) and isinstance(b, T.MatrixType) and (a.rows, a.cols) == (b.rows, b.cols)
    return True

