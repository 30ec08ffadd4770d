"""Expressions: name resolution, members, calls, constructors, initializer lists and indexing
(operators and assignment are in operators.py)."""
from __future__ import annotations


from ..parse import ast
from ..ir import nodes as ir
from ..source import CompileError, Loc
from .. import types as T
from ..ir.fold import round_float
from .calls import InitListArg, base_depth, types_eq
from .members import BuiltinMethodRes, TypeLiteral
from .scope import AliasSym, FuncSym, InterfaceSym, PackSym, StructSym, SubscriptSym
from .diffs import DiffStaticRes
from .dynamic import DynMethodRes
from .printf import check_printf
from .results import BUFFER_KINDS, BuiltinIfaceRes, describe, GenericRes, NamespaceRes, OverloadRes, PropertyRes, TypeRes, ValueRes

BUILTIN_IFACES = {"__BuiltinType", "__BuiltinArithmeticType", "__BuiltinSignedArithmeticType",
                  "__BuiltinIntegerType", "__BuiltinFloatingPointType", "__BuiltinLogicalType",
                  "__BuiltinRealType", "IArithmetic", "IInteger", "IFloat", "IComparable", "ILogical",
                  "IDifferentiable", "IDifferentiablePtrType", "IDefaultInitializable", "IRangedValue",
                  "IAtomicAddable"}
BUILTIN_GENERICS = {"vector", "CoopVec", "matrix", "Atomic", "Ptr", "ConstantBuffer", "ParameterBlock", "Tuple",
                    "Optional", "Array", "DifferentialPair", "DifferentialPtrPair"}


class BuiltinGenericRes:
    def __init__(self, name):
        self.name = name


class SubscriptRes:
    def __init__(self, obj, sym, indices, getter, setter, vtype):
        self.obj, self.sym, self.indices, self.getter, self.setter, self.type = obj, sym, indices, getter, setter, vtype


class ExprsMixin:
    # ------------------------------------------------------------------ resolution

    def resolve(self, e: ast.Expr, ctx):
        self._depth += 1
        if self._depth > 400:
            self._depth = 0
            raise self.err("E3099", "expression nested too deeply", e.loc)
        try:
            if isinstance(e, ast.Name):
                return self.resolve_name(e.name, e.loc, ctx)
            if isinstance(e, TypeLiteral):
                return TypeRes(e.type)
            if isinstance(e, ast.ThisTypeExpr):
                if ctx.env.this_type is None:
                    raise self.err("E2050", "'This' used outside a type", e.loc)
                return TypeRes(ctx.env.this_type)
            if isinstance(e, ast.Member):
                return self.resolve_member(e, ctx)
            if isinstance(e, ast.GenericApp):
                return self.resolve_generic_app(e, ctx)
            if isinstance(e, ast.ArrayTypeExpr):
                elem = self.resolve_type(e.element, ctx)
                if e.size is None:
                    return TypeRes(T.ArrayType(elem, None))
                n = self.generic_args([e.size], ctx)[0]
                if not isinstance(n, (int, T.ValueVar)) or isinstance(n, bool):
                    raise self.err("E2051", "array size must be a constant integer", e.size.loc)
                return TypeRes(T.ArrayType(elem, self.array_size(n, e.size.loc)))
            if isinstance(e, ast.PointerTypeExpr):
                return TypeRes(T.PointerType(self.resolve_type(e.element, ctx)))
            if isinstance(e, ast.EachExpr):
                return self.each(e, ctx)
            if isinstance(e, ast.Index):
                r = self.index(e, ctx)          # `int[3]` (a type: `int[3](1, 2, 3)` constructs it) or a value
                return r if isinstance(r, TypeRes) else ValueRes(self.value_of(r, e.loc, ctx))
            return ValueRes(self.expr_value(e, ctx))
        finally:
            self._depth -= 1

    # ------------------------------------------------------------------ variadic packs

    def pack_of(self, e: ast.Expr, ctx):
        if isinstance(e, ast.Name):
            syms = ctx.env.lookup(e.name)
            if syms and isinstance(syms[0], PackSym):
                return syms[0]
        return None

    def pack_len(self, e: ast.Expr, ctx) -> int:
        """The length of the pack an `expand` body iterates over (from its first `each`)."""
        found = []

        def walk(x):
            if isinstance(x, ast.EachExpr):
                found.append(x)
                return
            for v in vars(x).values():
                if isinstance(v, ast.Node):
                    walk(v)
                elif isinstance(v, list):
                    for it in v:
                        if isinstance(it, ast.Node):
                            walk(it)
        walk(e)
        pk = self.pack_of(found[0].operand, ctx) if found else None
        if pk is None:
            raise self.err("E3090", "`expand` needs an expression using `each` of a pack", e.loc)
        return len(pk.items)

    def each(self, e: ast.EachExpr, ctx):
        pk = self.pack_of(e.operand, ctx)
        if pk is None:
            raise self.err("E3091", "`each` needs a variadic pack", e.loc)
        if ctx.pack_index is None:
            raise self.err("E3092", "`each` is only allowed inside `expand`", e.loc)
        item = pk.items[ctx.pack_index]
        return TypeRes(item) if pk.is_type else ValueRes(item)

    def resolve_name(self, name: str, loc: Loc, ctx):
        syms = ctx.env.lookup(name)
        if syms:
            return self.sym_to_res(syms, None, loc, ctx, name)
        t = self.builtin_type(name)
        if t is not None:
            return TypeRes(t)
        if name in BUILTIN_IFACES:
            return BuiltinIfaceRes(name)
        if name in BUILTIN_GENERICS or name in BUFFER_KINDS:
            if "ByteAddress" in name:
                return TypeRes(T.BufferType(name, None))
            return BuiltinGenericRes(name)
        if name == "none":
            return self._value(ir.NoneExpr(T.VOID, loc=loc))
        if name == "nullptr":
            # the null pointer: a void* that converts to any pointer type
            return self._value(ir.Convert(T.PointerType(T.VOID), ir.Const(T.INT, 0, loc=loc), loc=loc))
        raise self.err("E2052", f"undefined identifier '{name}'", loc)

    def _value(self, e):
        return ValueRes(e)

    def resolve_member(self, e: ast.Member, ctx):
        if e.name in ("get", "set") and isinstance(e.base, ast.Member) and e.base.name == "__subscript":
            owner = self.resolve(e.base.base, ctx)
            if isinstance(owner, GenericRes):
                owner = TypeRes(self.resolve_type(e.base.base, ctx))
            if isinstance(owner, TypeRes):
                return self.subscript_accessor_res(owner.type, e.name, e.loc)
        base = self.resolve(e.base, ctx)
        if isinstance(base, NamespaceRes):
            syms = base.env.lookup_local(e.name)
            if not syms:
                raise self.err("E2053", f"namespace has no member '{e.name}'", e.loc)
            return self.sym_to_res(syms, None, e.loc, ctx, e.name)
        if isinstance(base, GenericRes):
            base = TypeRes(self.resolve_type(e.base, ctx))
        if isinstance(base, TypeRes):
            return self.member(None, base.type, e.name, e.loc, ctx)
        obj = self.value_of(base, e.base.loc, ctx)
        return self.member(obj, obj.type, e.name, e.loc, ctx, arrow=e.op == "->")

    def resolve_generic_app(self, e: ast.GenericApp, ctx):
        base = self.resolve(e.base, ctx)
        args = self.generic_args(e.args, ctx)
        if isinstance(base, GenericRes):
            s = base.sym
            if isinstance(s, StructSym):
                return TypeRes(self.instantiate_struct(s, args, e.loc, ctx))
            if isinstance(s, InterfaceSym):
                return TypeRes(self.instantiate_interface(s, args, e.loc, ctx))
            if isinstance(s, AliasSym):
                return TypeRes(self.alias_type(s, args, e.loc))
        if isinstance(base, BuiltinGenericRes):
            t = self.builtin_generic_type(base.name, args, e.loc)
            return TypeRes(t)
        if isinstance(base, OverloadRes):
            return OverloadRes(base.cands, base.this, args, base.name, base.static_owner)
        if isinstance(base, (BuiltinMethodRes, DynMethodRes)):
            base.type_args = args
            return base
        raise self.err("E2054", f"'{describe(e.base)}' does not take generic arguments", e.loc)

    def value_of(self, res, loc: Loc, ctx) -> ir.Expr:
        if isinstance(res, ValueRes):
            return res.expr
        if isinstance(res, PropertyRes):
            if res.getter is None:
                raise self.err("E3040", f"property '{res.name}' has no getter", loc)
            return self.make_call(res.getter, ([self.coerce_this(res.obj, res.getter.params[0].type, loc)]
                                               if res.obj is not None and res.getter.params else []), loc)
        if isinstance(res, SubscriptRes):
            if res.getter is None:
                raise self.err("E3040", "subscript has no getter", loc)
            return self.make_call(res.getter, [res.obj] + res.indices, loc)
        if isinstance(res, OverloadRes):
            raise self.err("E3041", f"function '{res.name}' used as a value (missing call?)", loc)
        if isinstance(res, TypeRes):
            raise self.err("E3042", f"type '{res.type}' used as a value", loc)
        if isinstance(res, BuiltinMethodRes):
            raise self.err("E3041", f"method '{res.name}' used as a value (missing call?)", loc)
        raise self.err("E3043", "expected a value", loc)

    def expr(self, e: ast.Expr, ctx) -> ir.Expr:
        return self.value_of(self.resolve(e, ctx), e.loc, ctx)

    # ------------------------------------------------------------------ value expressions

    def expr_value(self, e: ast.Expr, ctx) -> ir.Expr:
        loc = e.loc
        if isinstance(e, ast.IntLit):
            return self.int_literal(e)
        if isinstance(e, ast.FloatLit):
            s = e.suffix.lower()
            t = T.HALF if s == "h" else T.DOUBLE if s in ("l", "lf") else T.FLOAT
            return ir.Const(t, round_float(float(e.value), t.bits), loc=loc)
        if isinstance(e, ast.BoolLit):
            return ir.Const(T.BOOL, bool(e.value), loc=loc)
        if isinstance(e, ast.StringLit):
            return ir.Const(T.StringType(), e.value, loc=loc)
        if isinstance(e, ast.ThisExpr):
            this = ctx.implicit_this(loc)
            if this is None:
                raise self.err("E2055", "'this' used outside a method", loc)
            return this
        if isinstance(e, ast.Call):
            return self.call(e, ctx)
        if isinstance(e, ast.Index):
            return self.value_of(self.index(e, ctx), loc, ctx)
        if isinstance(e, ast.Unary):
            return self.unary(e, ctx)
        if isinstance(e, ast.Postfix):
            x = self.expr(e.operand, ctx)
            return self.incdec(e.operand, x, e.op, False, loc, ctx)
        if isinstance(e, ast.Binary):
            return self.binary(e, ctx)
        if isinstance(e, ast.Assign):
            return self.assign(e, ctx)
        if isinstance(e, ast.Conditional):
            return self.conditional(e, ctx)
        if isinstance(e, ast.Cast):
            t = self.resolve_type(e.type, ctx)
            if isinstance(e.operand, ast.InitList):
                return self.init_list(e.operand, t, ctx)
            x = self.expr(e.operand, ctx)
            return self.explicit_convert(x, t, loc, ctx)
        if isinstance(e, ast.InitList):
            raise self.err("E3050", "an initializer list needs a known target type here", loc)
        if isinstance(e, ast.IsExpr):
            res = self.resolve(e.operand, ctx)
            x = None if isinstance(res, TypeRes) else self.value_of(res, loc, ctx)
            xt = res.type if x is None else x.type
            t = self.resolve_type(e.type, ctx)
            if x is not None and isinstance(xt, T.InterfaceType) and not isinstance(t, T.InterfaceType):
                return self.dyn_is(x, t, loc)
            return ir.Const(T.BOOL, types_eq(xt, t), loc=loc)
        if isinstance(e, ast.AsExpr):
            x = self.expr(e.operand, ctx)
            t = self.resolve_type(e.type, ctx)
            if isinstance(x.type, T.InterfaceType) and not isinstance(t, T.InterfaceType):
                return self.dyn_as(x, t, loc)
            ot = T.OptionalType(t)
            if types_eq(x.type, t):
                return ir.Construct(ot, [x], loc=loc)
            return ir.Construct(ot, [], loc=loc)
        if isinstance(e, ast.SizeOfExpr) and e.kind == "countof":
            pk = self.pack_of(e.operand, ctx)
            if pk is not None:
                return ir.Const(T.INT, len(pk.items), loc=loc)
        if isinstance(e, ast.SizeOfExpr):
            res = self.resolve(e.operand, ctx)
            t = res.type if isinstance(res, TypeRes) else self.value_of(res, loc, ctx).type
            if e.kind == "countof":
                if isinstance(t, T.ArrayType):
                    return ir.Const(T.INT, t.n or 0, loc=loc)
                if isinstance(t, T.TupleType):
                    return ir.Const(T.INT, len(t.elems), loc=loc)
                if isinstance(t, T.VectorType):
                    return ir.Const(T.INT, t.n, loc=loc)
                return ir.Const(T.INT, 1, loc=loc)
            size, align = T.size_align(t)
            return ir.Const(T.INT if e.kind != "sizeof" else T.INT, size if e.kind == "sizeof" else align, loc=loc)
        raise self.err("E3051", f"unsupported expression ({type(e).__name__})", loc)

    def int_literal(self, e: ast.IntLit) -> ir.Const:
        s = e.suffix.lower()
        v = e.value
        if v >= 1 << 64:
            raise self.err("E0012", "integer literal is too large to be represented in any integer type", e.loc)
        if "u" in s:
            t = T.UINT64 if "l" in s else T.UINT
        elif "l" in s:
            t = T.INT64
        else:
            t = T.INT
            if v > 0x7FFFFFFF:
                t = T.INT64          # too large for int: Slang widens the literal
        bits = t.bits
        v &= (1 << bits) - 1
        if t.kind == "int" and v >= 1 << (bits - 1):
            v -= 1 << bits
        return ir.Const(t, v, loc=e.loc)

    # ------------------------------------------------------------------ calls

    def static_assert(self, e: ast.Call, ctx) -> ir.Expr:
        """`static_assert(cond, "message")`: an error when cond is a compile-time false; a condition known
        only later (a `constexpr` parameter) is not checked."""
        if len(e.args) not in (1, 2):
            raise self.err("E3030", "static_assert takes (condition) or (condition, message)", e.loc)
        v = self.fold(self.expr(e.args[0], ctx))
        if v is not None and not v:
            msg = e.args[1].value if len(e.args) == 2 and isinstance(e.args[1], ast.StringLit) else "static_assert failed"
            raise self.err("E3096", f"static assertion failed: {msg}", e.loc)
        return ir.Const(T.BOOL, True, loc=e.loc)

    def call_args(self, args: list[ast.Expr], ctx) -> list:
        out = []
        for a in args:
            if isinstance(a, ast.InitList):
                out.append(InitListArg(a, None, a.loc))
            else:
                x = self.expr(a, ctx)
                if getattr(x, "loc", None) is None or x.loc.line == 0:
                    x.loc = a.loc
                out.append(x)
        return out

    def call(self, e: ast.Call, ctx) -> ir.Expr:
        special = self.special_call(e, ctx)
        if special is not None:
            return special
        if self.is_create_dynamic(e, ctx):
            return self.create_dynamic(e, ctx)
        if isinstance(e.callee, ast.Name) and e.callee.name == "printf" and not ctx.env.lookup("printf"):
            return check_printf(self, e, ctx)
        if isinstance(e.callee, ast.Name) and e.callee.name == "static_assert" and not ctx.env.lookup("static_assert"):
            return self.static_assert(e, ctx)
        if isinstance(e.callee, ast.Name) and e.callee.name == "makeTuple" and not ctx.env.lookup("makeTuple"):
            vals = [self.expr(a, ctx) for a in e.args]
            return ir.Construct(T.TupleType(tuple(v.type for v in vals)), vals, loc=e.loc)
        if isinstance(e.callee, ast.Name) and e.callee.name == "concat" and not ctx.env.lookup("concat"):
            parts = []
            for a in e.args:
                x = self.expr(a, ctx)
                if not isinstance(x.type, T.TupleType):
                    raise self.err("E3001", f"concat needs tuples, got '{x.type}'", a.loc)
                parts += [ir.Field(et, x, f"_{i}", loc=a.loc) for i, et in enumerate(x.type.elems)]
            return ir.Construct(T.TupleType(tuple(p.type for p in parts)), parts, loc=e.loc)
        callee = self.resolve(e.callee, ctx)
        args = self.call_args(e.args, ctx)
        # Arguments keep their own source locations for diagnostics.
        for a, src in zip(args, e.args):
            if not isinstance(a, InitListArg):
                a.loc = src.loc
        if isinstance(callee, GenericRes) and isinstance(callee.sym, StructSym):
            try:
                callee = TypeRes(self.resolve_type(e.callee, ctx))
            except CompileError as ex:
                # `Impl(v0)`: the generic arguments come from the constructor's arguments.
                inferred = self.infer_struct_args(callee.sym, args, e.loc) if ex.code == "E2019" else None
                if inferred is None:
                    raise
                callee = TypeRes(inferred)
        if isinstance(callee, TypeRes):
            return self.construct(callee.type, args, e.loc, ctx)
        if isinstance(callee, OverloadRes):
            return self.resolve_overload(callee, args, e.loc, ctx)
        if isinstance(callee, BuiltinMethodRes):
            return self.call_builtin_method(callee, args, e.loc, ctx)
        if isinstance(callee, DynMethodRes):
            return self.call_dyn_method(callee, args, e.loc, ctx)
        if isinstance(callee, DiffStaticRes):
            return self.call_diff_static(callee, args, e.loc, ctx)
        if isinstance(callee, ValueRes) and isinstance(callee.expr.type, T.StructType):
            syms = self.member_syms(callee.expr.type, "operator()")
            if syms:
                return self.resolve_overload(OverloadRes([s for s in syms if isinstance(s, FuncSym)],
                                                         this=callee.expr, name="operator()"), args, e.loc, ctx)
        raise self.err("E3052", "expression is not callable", e.callee.loc)

    def construct(self, t: T.Type, args: list, loc: Loc, ctx) -> ir.Expr:
        if isinstance(t, T.ScalarType):
            if len(args) == 0:
                return ir.Construct(t, [], loc=loc)
            if len(args) != 1:
                raise self.err("E3053", f"'{t}' constructor takes one argument, got {len(args)}", loc)
            a = args[0]
            if isinstance(a, InitListArg):
                return self.init_list(a.node, t, ctx)
            if isinstance(a.type, T.StructType):
                # A conversion constructor provided by an extension of the scalar type.
                return self.init_call(t, args, loc, ctx)
            return self.explicit_convert(a, t, loc, ctx)
        if isinstance(t, (T.VectorType, T.MatrixType)):
            return self.vector_construct(t, args, loc, ctx)
        if isinstance(t, T.StructType):
            if len(args) == 1 and not isinstance(args[0], InitListArg) and base_depth(args[0].type, t):
                return self.coerce(args[0], t, loc)      # `(Base)derived`, `Base(derived)`: its base part
            return self.init_call(t, args, loc, ctx)
        if isinstance(t, T.ArrayType):
            # `int[3](1, 2)`: as the initializer list {1, 2} (the remaining elements are zero)
            if t.n is not None and len(args) > t.n:
                raise self.err("E3055", f"too many initializers for '{t}': it has {t.n} element(s)", loc)
            vals = [self.coerce_arg(a, t.elem, ctx) for a in args]
            return ir.Construct(t if t.n is not None else T.ArrayType(t.elem, len(vals)), vals, loc=loc)
        if isinstance(t, T.OptionalType):
            if not args:
                return ir.Construct(t, [], loc=loc)
            return ir.Construct(t, [self.coerce_arg(args[0], t.elem, ctx)], loc=loc)
        if isinstance(t, T.TupleType):
            return ir.Construct(t, [self.coerce_arg(a, et, ctx) for a, et in zip(args, t.elems)], loc=loc)
        if isinstance(t, T.PtrPairType) and len(args) != 2:
            # A pointer's differential is storage the caller provides: there is no default.
            raise self.err("E3030", f"{t} takes (primal, differential)", loc)
        if isinstance(t, T.PairType):
            if len(args) not in (1, 2):
                raise self.err("E3030", "DifferentialPair takes (primal) or (primal, differential)", loc)
            p = self.coerce_arg(args[0], t.primal, ctx)
            d = self.coerce_arg(args[1], t.diff, ctx) if len(args) == 2 else ir.Construct(t.diff, [], loc=loc)
            return ir.Construct(t, [p, d], loc=loc)
        if isinstance(t, T.EnumType) and len(args) == 1:
            return self.explicit_convert(args[0], t, loc, ctx)
        if isinstance(t, T.PointerType) and len(args) == 1:
            return self.explicit_convert(args[0], t, loc, ctx)
        raise self.err("E3054", f"cannot construct a value of type '{t}'", loc)

    def init_call(self, t: T.Type, args: list, loc: Loc, ctx) -> ir.Expr:
        inits = [s for s in self.member_syms(t, "__init") if isinstance(s, FuncSym)]
        if inits:
            try:
                return self.resolve_overload(OverloadRes(inits, name=f"{t}.__init", static_owner=t), args, loc, ctx)
            except CompileError:
                if not (isinstance(t, T.StructType) and len(args) == 0):
                    raise
        if isinstance(t, T.StructType):
            return self.memberwise(t, args, loc, ctx)
        raise self.err("E3054", f"no constructor of '{t}' takes these arguments", loc)

    def memberwise(self, t: T.StructType, args: list, loc: Loc, ctx) -> ir.Expr:
        fields = t.info.fields
        if len(args) > len(fields) or any(self._elided(a, ft) for a, (_, ft, _, _) in zip(args, fields)):
            return self.brace_elided(t, args, loc, ctx)
        vals = [self.coerce_arg(a, ft, ctx) for a, (_, ft, _, _) in zip(args, fields)]
        return ir.Construct(t, vals, loc=loc)

    # Brace elision, as in C and HLSL: `A a = {1.0, 2.0, 3.0}` where A holds a B {x, y} and a z, or
    # `Feature<3> f = {7, 8, 9}` where Feature holds float v[3]: an aggregate field or element whose
    # initializer is not itself a braced list takes as many of the following values as it needs.
    def _elided(self, a, t: T.Type, strict: bool = False) -> bool:
        """Does a start the values of aggregate t rather than convert to it? (strict, once elision is
        under way: a scalar does not splat into a vector, it is the vector's first component.)"""
        if isinstance(a, InitListArg) or not _aggregate(t):
            return False
        if strict and isinstance(t, (T.VectorType, T.MatrixType)) and isinstance(a.type, T.ScalarType):
            return True
        return self.conv_cost(a.type, t) is None

    def brace_elided(self, t: T.Type, args: list, loc: Loc, ctx) -> ir.Expr:
        v, i = self._fill(t, args, 0, loc, ctx)
        if i < len(args):
            raise self.err("E3055", f"too many initializers for '{t}': it takes {i} value(s), got {len(args)}", loc)
        return v

    def _fill(self, t: T.Type, args: list, i: int, loc: Loc, ctx):
        if i < len(args) and not self._elided(args[i], t, strict=True):
            return self.coerce_arg(args[i], t, ctx), i + 1
        if isinstance(t, T.StructType):
            vals = []
            for _, ft, _, _ in t.info.fields:
                if i >= len(args):
                    break
                v, i = self._fill(ft, args, i, loc, ctx)
                vals.append(v)
            return ir.Construct(t, vals, loc=loc), i
        n = t.n if isinstance(t, (T.ArrayType, T.VectorType)) else t.rows
        elem = t.row_type if isinstance(t, T.MatrixType) else t.elem
        vals = []
        for _ in range(n or 0):
            if i >= len(args):
                break
            v, i = self._fill(elem, args, i, loc, ctx)
            vals.append(v)
        if isinstance(t, (T.VectorType, T.MatrixType)) and len(vals) < n:
            raise self.err("E3057", f"'{t}' needs {n} components, got {len(vals)}", loc)
        return ir.Construct(t, vals, loc=loc), i

    def vector_construct(self, t, args: list, loc: Loc, ctx) -> ir.Expr:
        elem = t.elem
        total = t.n if isinstance(t, T.VectorType) else t.rows * t.cols
        if not args:
            return ir.Construct(t, [], loc=loc)
        if len(args) == 1 and not isinstance(args[0], InitListArg):
            a = args[0]
            if isinstance(a.type, T.ScalarType) or isinstance(a.type, T.EnumType):
                return ir.Construct(t, [self.explicit_convert(a, elem, loc, ctx)], splat=True, loc=loc)
            if isinstance(a.type, type(t)):
                return self.explicit_convert(a, t, loc, ctx)
        parts = []
        count = 0
        for a in args:
            if isinstance(a, InitListArg):
                raise self.err("E3056", "unexpected initializer list in a vector constructor", a.loc)
            at = a.type
            if isinstance(at, T.ScalarType) or isinstance(at, T.EnumType):
                parts.append(self.explicit_convert(a, elem, a.loc, ctx))
                count += 1
            elif isinstance(at, T.VectorType):
                parts.append(self.explicit_convert(a, T.VectorType(elem, at.n), a.loc, ctx))
                count += at.n
            elif isinstance(at, T.MatrixType):
                parts.append(self.explicit_convert(a, T.MatrixType(elem, at.rows, at.cols), a.loc, ctx))
                count += at.rows * at.cols
            else:
                raise self.err("E3056", f"cannot use '{at}' to construct '{t}'", a.loc)
        if count != total:
            raise self.err("E3057", f"'{t}' needs {total} components, got {count}", loc)
        return ir.Construct(t, parts, loc=loc)

    def explicit_convert(self, x: ir.Expr, t: T.Type, loc: Loc, ctx) -> ir.Expr:
        if types_eq(x.type, t):
            return x
        if isinstance(t, (T.VectorType, T.MatrixType)) and isinstance(x.type, type(t)):
            if isinstance(t, T.VectorType) and x.type.n != t.n:
                if x.type.n > t.n:
                    x = ir.Swizzle(T.VectorType(x.type.elem, t.n), x, tuple(range(t.n)), loc=loc)
                else:
                    raise self.err("E3001", f"cannot convert '{x.type}' to '{t}'", loc)
            if isinstance(t, T.MatrixType) and (x.type.rows, x.type.cols) != (t.rows, t.cols):
                if x.type.rows >= t.rows and x.type.cols >= t.cols:
                    rows = [ir.Swizzle(T.VectorType(x.type.elem, t.cols),
                                       ir.Index(x.type.row_type, x, ir.Const(T.INT, r), loc=loc),
                                       tuple(range(t.cols)), loc=loc) for r in range(t.rows)]
                    x = ir.Construct(T.MatrixType(x.type.elem, t.rows, t.cols), rows, loc=loc)
                else:
                    raise self.err("E3001", f"cannot convert '{x.type}' to '{t}'", loc)
            return x if types_eq(x.type, t) else ir.Convert(t, x, loc=loc)
        if isinstance(t, T.StructType):
            if isinstance(x.type, T.StructType):
                if base_depth(x.type, t):
                    return self.coerce(x, t, loc)          # a derived struct's base part
                raise self.err("E3001", f"cannot convert '{x.type}' to '{t}'", loc)
            return self.init_call(t, [x], loc, ctx)
        return self.coerce(x, t, loc, explicit=True)

    # ------------------------------------------------------------------ initializer lists

    def init_list(self, node: ast.InitList, t: T.Type, ctx) -> ir.Expr:
        items = node.items
        loc = node.loc
        if isinstance(t, T.StructType):
            has_init = bool([s for s in self.member_syms(t, "__init") if isinstance(s, FuncSym)])
            args = self.call_args(items, ctx)
            if has_init:
                return self.init_call(t, args, loc, ctx)
            return self.memberwise(t, args, loc, ctx)
        if isinstance(t, T.ArrayType):
            if t.n is not None and _aggregate(t.elem) and not all(isinstance(i, ast.InitList) for i in items):
                args = self.call_args(items, ctx)
                if len(items) > t.n or any(self._elided(a, t.elem) for a in args):
                    return self.brace_elided(t, args, loc, ctx)
                return ir.Construct(t, [self.coerce_arg(a, t.elem, ctx) for a in args], loc=loc)
            if t.n is not None and len(items) > t.n:
                raise self.err("E3055", f"too many initializers for '{t}'", loc)
            vals = []
            for it in items:
                if isinstance(it, ast.InitList):
                    vals.append(self.init_list(it, t.elem, ctx))
                else:
                    vals.append(self.coerce(self.expr(it, ctx), t.elem, it.loc))
            return ir.Construct(t if t.n is not None else T.ArrayType(t.elem, len(items)), vals, loc=loc)
        if isinstance(t, (T.VectorType, T.MatrixType)):
            if not items:
                return ir.Construct(t, [], loc=loc)
            if isinstance(t, T.MatrixType) and all(isinstance(i, ast.InitList) for i in items):
                rows = [self.init_list(i, t.row_type, ctx) for i in items]
                return ir.Construct(t, rows, loc=loc)
            return self.vector_construct(t, self.call_args(items, ctx), loc, ctx)
        if isinstance(t, (T.ScalarType, T.EnumType, T.PointerType)):
            if not items:
                return ir.Construct(t, [], loc=loc)
            if len(items) == 1:
                return self.coerce(self.expr(items[0], ctx), t, loc)
        if isinstance(t, T.TupleType):
            return ir.Construct(t, [self.coerce_arg(a, et, ctx) for a, et in zip(self.call_args(items, ctx), t.elems)], loc=loc)
        if isinstance(t, T.OptionalType) and not items:
            return ir.Construct(t, [], loc=loc)
        raise self.err("E3058", f"cannot initialize '{t}' with an initializer list", loc)

    def coerce_init(self, init: ast.Expr, t: T.Type, ctx) -> ir.Expr:
        if isinstance(init, ast.InitList):
            return self.init_list(init, t, ctx)
        v = self.expr(init, ctx)
        if isinstance(t, T.StructType) and t.name.startswith("Conditional<") and v.type != t:
            # The core library's Conditional<T, hasValue> converts implicitly from T (as in Slang).
            return self.construct(t, [v], init.loc, ctx)
        return self.coerce(v, t, init.loc)

    # ------------------------------------------------------------------ indexing

    def index(self, e: ast.Index, ctx):
        base_res = self.resolve(e.base, ctx)
        if isinstance(base_res, TypeRes):
            # `float[4]` written as an index expression on a type.
            if len(e.indices) != 1:
                raise self.err("E3060", "bad array type", e.loc)
            n = self.generic_args(e.indices, ctx)[0]
            return TypeRes(T.ArrayType(base_res.type, self.array_size(n, e.indices[0].loc)))
        obj = self.value_of(base_res, e.base.loc, ctx)
        t = obj.type
        if isinstance(t, T.StructType) or (len(e.indices) != 1):
            syms = [s for s in self.member_syms(t, "__subscript") if isinstance(s, SubscriptSym)] \
                if isinstance(t, T.StructType) else []
            if not syms:
                raise self.err("E3061", f"'{t}' cannot be indexed", e.loc)
            # `t[{i, j}]`: an initializer list is typed by the subscript it selects (subscript_res)
            idx = [InitListArg(i, None, i.loc) if isinstance(i, ast.InitList) else self.expr(i, ctx)
                   for i in e.indices]
            return self.subscript_res(obj, syms, idx, e.loc, ctx)
        idx = self.expr(e.indices[0], ctx)
        if not (isinstance(idx.type, T.ScalarType) and idx.type.kind in ("int", "uint", "bool")) \
                and not isinstance(idx.type, T.EnumType):
            raise self.err("E3062", f"index must be an integer, got '{idx.type}'", e.indices[0].loc)
        if isinstance(t, T.ArrayType):
            return ValueRes(ir.Index(t.elem, obj, idx, loc=e.loc))
        if isinstance(t, T.VectorType):
            return ValueRes(ir.Index(t.elem, obj, idx, loc=e.loc))
        if isinstance(t, T.MatrixType):
            return ValueRes(ir.Index(t.row_type, obj, idx, loc=e.loc))
        if isinstance(t, T.BufferType) and t.elem is not None:
            return ValueRes(ir.Index(t.elem, obj, idx, loc=e.loc))
        if isinstance(t, T.PointerType):
            return ValueRes(ir.Index(t.elem, obj, idx, loc=e.loc))
        raise self.err("E3061", f"'{t}' cannot be indexed", e.loc)

    def subscript_res(self, obj, syms, idx, loc, ctx):
        # Overloaded subscripts: the one whose parameter types the indices convert to most cheaply.
        scored = []
        for s in syms:
            d = s.decl
            if len(d.params) != len(idx):
                continue
            try:
                pts = [self.resolve_type(p.type, self.ctx_for_env(s.env)) for p in d.params]
            except CompileError:
                continue
            costs = [self._init_index_cost(a, pt, ctx) if isinstance(a, InitListArg) else self.conv_cost(a.type, pt)
                     for a, pt in zip(idx, pts)]
            if any(c is None for c in costs):
                continue
            scored.append((sum(costs), len(scored), s))
        scored.sort(key=lambda x: (x[0], x[1]))
        for _, _, s in scored:
            d = s.decl
            sctx = self.ctx_for_env(s.env)
            vtype = self.resolve_type(d.return_type, sctx)
            getter = setter = None
            for acc in d.accessors:
                if acc.kind == "get":
                    getter = self.accessor_function(s, acc, vtype, d.params, loc)
                elif acc.kind == "set":
                    setter = self.accessor_function(s, acc, vtype, d.params, loc)
            if getter is not None:
                pts = getter.params[1:]
            else:
                pts = setter.params[1:-1]
            args = [self.init_list(a.node, p.type, ctx) if isinstance(a, InitListArg) else self.coerce(a, p.type, loc)
                    for a, p in zip(idx, pts)]
            return SubscriptRes(obj, s, args, getter, setter, vtype)
        raise self.err("E3061", "no subscript takes these indices", loc)

    def _init_index_cost(self, a: InitListArg, pt: T.Type, ctx):
        """Cost of an index written `{i, j}` for a subscript parameter of type pt: an array or vector of as many
        elements, each converted as an argument would be; an array costs one less than a vector of the same
        elements, so `t[{x, y}]` over SlangPy's `int idx[D]` / `vector<int, D>` overloads takes the array
        (row-major: x indexes the outermost dimension, as `t[x, y]` does).  None: not applicable."""
        items = a.node.items
        if not isinstance(pt, (T.ArrayType, T.VectorType)) or pt.n != len(items) or \
                any(isinstance(i, ast.InitList) for i in items):
            return None
        total = 1 if isinstance(pt, T.VectorType) else 0
        for i in items:
            c = self.conv_cost(self.expr(i, ctx).type, pt.elem)
            if c is None:
                return None
            total += c
        return total


def _aggregate(t: T.Type) -> bool:
    return isinstance(t, (T.ArrayType, T.VectorType, T.MatrixType)) and getattr(t, "n", 1) is not None or \
        (isinstance(t, T.StructType) and not getattr(t.info, "has_init", False))
