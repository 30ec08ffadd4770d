"""Member access on every kind of type: struct fields, methods, properties, statics, nested
types, extension members, interface default methods, swizzles, and the methods of builtin
objects (buffers, atomics, arrays, tuples, optionals)."""
from __future__ import annotations

import re
from typing import Optional

from ..parse import ast
from ..ir import nodes as ir
from ..source import Loc
from .. import types as T
from .scope import AliasSym, AssocTypeSym, EnumSym, Env, FieldSym, FuncSym, GlobalSym, InterfaceSym, NamespaceSym, PackSym, PropertySym, StructSym, SubscriptSym, TypeSym, ValueSym
from .conflicts import is_extern_struct
from .results import CBufferMemberSym, GenericRes, NamespaceRes, OverloadRes, PropertyRes, TypeRes, ValueRes

SWIZZLE_SETS = ("xyzw", "rgba")


class BuiltinMethodRes:
    def __init__(self, obj: Optional[ir.Expr], name: str, owner_type: T.Type):
        self.obj, self.name, self.owner_type = obj, name, owner_type


class MembersMixin:
    # ------------------------------------------------------------------ symbols to results

    def sym_to_res(self, syms: list, obj: Optional[ir.Expr], loc: Loc, ctx, name: str):
        s0 = syms[0]
        if isinstance(s0, ValueSym):
            return ValueRes(s0.expr)
        if isinstance(s0, TypeSym):
            return TypeRes(s0.type)
        if isinstance(s0, FieldSym):
            this = obj if obj is not None else ctx.implicit_this(loc)
            if this is None:
                raise self.err("E2030", f"field '{name}' used without an object", loc)
            return ValueRes(ir.Field(s0.type, this, name, loc=loc))
        if isinstance(s0, FuncSym):
            funcs = [s for s in syms if isinstance(s, FuncSym)]
            return OverloadRes(funcs, this=obj, name=name)
        if isinstance(s0, CBufferMemberSym):
            g = self.global_var(s0.cbuffer, loc)
            st = g.type
            return ValueRes(ir.Field(st.info.field_type(name), ir.GlobalRef(st, g, loc=loc), name, loc=loc))
        if isinstance(s0, GlobalSym):
            g = self.global_var(s0, loc)
            return ValueRes(ir.GlobalRef(g.type, g, loc=loc))
        if isinstance(s0, StructSym) and is_extern_struct(s0.decl):
            return self.sym_to_res([self.linked_type(s0, syms, loc)], obj, loc, ctx, name)
        if isinstance(s0, StructSym):
            if s0.decl.generic_params:
                return GenericRes(s0)
            return TypeRes(self.instantiate_struct(s0, [], loc, ctx))
        if isinstance(s0, InterfaceSym):
            if s0.decl.generic_params:
                return GenericRes(s0)
            return TypeRes(self.instantiate_interface(s0, [], loc, ctx))
        if isinstance(s0, AliasSym):
            if s0.decl.generic_params:
                return GenericRes(s0)
            return TypeRes(self.alias_type(s0, [], loc))
        if isinstance(s0, EnumSym):
            et = self.enum_type(s0)
            if s0.decl.name == name:
                return TypeRes(et)
            return ValueRes(ir.Const(et, et.info[name], loc=loc))
        if isinstance(s0, NamespaceSym):
            return NamespaceRes(s0.env)
        if isinstance(s0, PropertySym):
            this = obj if obj is not None else ctx.implicit_this(loc)
            return self.property_res(s0, this, loc)
        if isinstance(s0, PackSym):
            raise self.err("E3093", f"pack '{name}' must be used with `each` inside `expand` (or `countof`)", loc)
        if isinstance(s0, AssocTypeSym):
            raise self.err("E2031", f"associated type '{name}' has no concrete type here", loc)
        raise self.err("E2032", f"cannot use '{name}' here", loc)

    def linked_type(self, sym: StructSym, syms: list, loc: Loc):
        """The definition bound to the link-time type `extern struct X : I;`: a struct or `export struct X : I =
        Y;` alias named X in the same scope or in any loaded module."""
        if "link" in sym.cache:
            return sym.cache["link"]
        name = sym.decl.name
        cands = list(syms)
        for env in [sym.env] + list(self.modules_loaded.values()):
            cands += env.lookup_local(name)
        for s in cands:
            if isinstance(s, (StructSym, AliasSym)) and not is_extern_struct(s.decl):
                sym.cache["link"] = s
                return s
        raise self.err("E2056", f"link-time type '{name}' (`extern struct {name}`) has no definition: link a "
                                f"module (or give a prelude) with `export struct {name} : ... = SomeType;`", loc)

    def alias_type(self, sym: AliasSym, args: list, loc: Loc) -> T.Type:
        key = self.generic_key(args)
        if key in sym.cache:
            return sym.cache[key]
        d: ast.TypeAliasDecl = sym.decl
        env = self.bind_generics(d.generic_params, args, sym.env, loc, None) if d.generic_params else sym.env
        ctx = self.ctx_for_env(env)
        t = self.resolve_type(d.type, ctx)
        for b in d.bases:             # `export struct X : I = Y;`
            iface = self.resolve_base(b, ctx)
            if not self.conforms(t, iface):
                raise self.err("E3001", f"'{t}' does not conform to '{iface}' (bound to the link-time type "
                                        f"'{d.name}')", d.loc)
        sym.cache[key] = t
        return t

    def enum_type(self, sym: EnumSym) -> T.EnumType:
        if "type" in sym.cache:
            return sym.cache["type"]
        d: ast.EnumDecl = sym.decl
        ctx = self.ctx_for_env(sym.env)
        under = self.resolve_type(d.underlying, ctx) if d.underlying is not None else T.INT
        values: dict[str, int] = {}
        et = T.EnumType(d.name, values, under)
        sym.cache["type"] = et
        flags = any(a.name == "Flags" for a in d.attrs)
        nxt = 1 if flags else 0
        for c in d.cases:
            if c.value is not None:
                v = self.fold(self.expr(c.value, ctx))
                if not isinstance(v, (int, bool)):
                    raise self.err("E2033", f"enum value '{c.name}' must be a constant integer", c.loc)
                nxt = int(v)
            values[c.name] = nxt
            nxt = nxt * 2 if flags else nxt + 1
        return et

    # ------------------------------------------------------------------ member lookup

    def member_syms(self, t: T.Type, name: str) -> list:
        """Symbols named `name` declared in t's own body, its extensions, or (as defaults)
        the interfaces it conforms to."""
        self.core_env.require(name)     # a core module declared on demand may extend t with `name`
        if isinstance(t, T.StructType) and t.info is not None and t.info.env is not None:
            found = t.info.env.lookup_local(name)
            if found:
                return found
        for d, env, tenv in self.extensions_for(t):
            envkey = ("ext_env", id(d))
            cache = tenv.names.get("\0members")
            if cache is None:
                for m in d.members:
                    self.declare(m, tenv, owner=t)
                tenv.add("\0members", True)
            found = tenv.lookup_local(name)
            if found:
                return found
        # Interface default implementations and static requirements.
        for b in self.all_bases(t):
            found = self.iface_member_syms(t, b, name)
            if found:
                return found
        return []

    def iface_member_syms(self, t: T.Type, iface, name: str) -> list:
        if not isinstance(iface, T.InterfaceType):
            return []
        key = ("iface_env", id(iface))
        store = getattr(t, "_iface_envs", None) if not isinstance(t, T.StructType) else None
        cache = t.info.__dict__.setdefault("iface_envs", {}) if isinstance(t, T.StructType) else \
            self.__dict__.setdefault("_builtin_iface_envs", {}).setdefault(t, {})
        env = cache.get(key)
        if env is None:
            env = Env(iface.info.env, "struct")
            env.this_type = t
            env.add("This", TypeSym("This", t))
            if isinstance(t, T.StructType) and t.info.env is not None:
                env.usings.append(t.info.env)     # defaults call the other requirements by name
                env.prefer_usings = True
            for m in iface.info.sym.decl.members:
                if isinstance(m, ast.FuncDecl) and m.body is not None:
                    self.declare(m, env, owner=t)
                elif isinstance(m, ast.VarDecl) and m.init is not None:
                    self.declare(m, env, owner=t)
                elif isinstance(m, ast.PropertyDecl) and any(a.body for a in m.accessors):
                    self.declare(m, env, owner=t)
            cache[key] = env
        found = env.lookup_local(name)
        if found:
            return found
        for b in iface.info.bases:
            found = self.iface_member_syms(t, b, name)
            if found:
                return found
        return []

    def member(self, obj: Optional[ir.Expr], t: T.Type, name: str, loc: Loc, ctx, arrow: bool = False):
        """obj.name (obj given) or Type.name (obj None)."""
        dres = self.diff_member(obj, t, name, loc) if not isinstance(t, T.PointerType) else None
        if dres is not None:
            return dres
        if obj is not None and isinstance(t, T.PointerType):
            inner = ir.Deref(t.elem, obj, loc=loc)
            return self.member(inner, t.elem, name, loc, ctx)
        if obj is not None and isinstance(t, T.InterfaceType):
            return self.dyn_member(obj, t, name, loc)        # a value chosen at run time
        if obj is not None:
            # Swizzles on scalars and vectors.
            if isinstance(t, (T.VectorType, T.ScalarType)) and T.scalar_of(t) is not None:
                sw = self.swizzle(obj, t, name, loc)
                if sw is not None:
                    return ValueRes(sw)
            if isinstance(t, T.MatrixType):
                m = self.matrix_member(obj, t, name, loc)
                if m is not None:
                    return ValueRes(m)
            if isinstance(t, T.TupleType) and name.startswith("_") and name[1:].isdigit():
                i = int(name[1:])
                if i < len(t.elems):
                    return ValueRes(ir.Field(t.elems[i], obj, name, loc=loc))
            if isinstance(t, T.TupleType) and name.startswith("_") and all(p.isdigit() for p in name[1:].split("_")):
                # tuple swizzle: t._1_0 is a new tuple of those elements
                idx = [int(p) for p in name[1:].split("_")]
                if all(i < len(t.elems) for i in idx):
                    parts = [ir.Field(t.elems[i], obj, f"_{i}", loc=loc) for i in idx]
                    return ValueRes(ir.Construct(T.TupleType(tuple(t.elems[i] for i in idx)), parts, loc=loc))
            if isinstance(t, (T.BufferType, T.AtomicType, T.ArrayType, T.OptionalType, T.TupleType)) or \
                    (isinstance(t, T.VectorType) and name in ("getCount",)):
                if isinstance(t, T.OptionalType) and name == "value":
                    return ValueRes(ir.Field(t.elem, obj, "value", loc=loc))
                if isinstance(t, T.OptionalType) and name == "hasValue":
                    return ValueRes(ir.Field(T.BOOL, obj, "hasValue", loc=loc))
                syms = self.member_syms(t, name)
                if syms:
                    return self.sym_to_res(syms, obj, loc, ctx, name)
                return BuiltinMethodRes(obj, name, t)
        syms = self.inherited_this_member(obj, t, name, ctx) or self.member_syms(t, name)
        if syms:
            if obj is None:
                # Type.member: statics, nested types, enum cases; instance methods stay unbound.
                return self.sym_to_res(syms, None, loc, ctx, name) if not isinstance(syms[0], FieldSym) else \
                    self._field_without_object(name, loc)
            return self.sym_to_res(syms, obj, loc, ctx, name)
        if isinstance(t, T.EnumType) and obj is None and name in t.info:
            return ValueRes(ir.Const(t, t.info[name], loc=loc))
        if obj is None and isinstance(t, T.BufferType) and name == "Handle":
            # `RWStructuredBuffer<T>.Handle`: Slang's descriptor handle of the resource.  Without
            # bindless descriptors a handle is the resource itself (bound, stored, indexed alike).
            return TypeRes(t)
        if obj is None and isinstance(t, (T.ScalarType, T.VectorType, T.MatrixType)):
            r = self.builtin_static(t, name, loc)
            if r is not None:
                return r
        raise self.err("E2040", f"'{t}' has no member named '{name}'", loc)

    def inherited_this_member(self, obj, t, name: str, ctx) -> list:
        """`this.m` inside a base struct's member, checked for a derived struct: `this` is the base
        there, so the base's m, not a member of the same name the derived struct declares."""
        if not (isinstance(obj, ir.LocalRef) and obj.var.name == "this" and isinstance(t, T.StructType)):
            return []
        env = getattr(ctx, "env", None)
        while env is not None:
            if getattr(env, "inherited_for", None) is t:
                return env.lookup_local(name)
            env = env.parent
        return []

    def _field_without_object(self, name, loc):
        raise self.err("E2030", f"field '{name}' used without an object", loc)

    def builtin_static(self, t, name, loc):
        s = T.scalar_of(t)
        if name in ("maxValue", "minValue") and isinstance(t, T.ScalarType):
            if s.kind == "float":
                big = {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[s.bits]
                return ValueRes(ir.Const(t, big if name == "maxValue" else -big, loc=loc))
            if s.kind == "int":
                v = (1 << (s.bits - 1)) - 1 if name == "maxValue" else -(1 << (s.bits - 1))
            else:
                v = (1 << s.bits) - 1 if name == "maxValue" else 0
            return ValueRes(ir.Const(t, v, loc=loc))
        return None

    def swizzle(self, obj: ir.Expr, t: T.Type, name: str, loc: Loc) -> Optional[ir.Expr]:
        n = 1 if isinstance(t, T.ScalarType) else t.n
        elem = T.scalar_of(t)
        for s in SWIZZLE_SETS:
            if all(c in s for c in name) and 1 <= len(name) <= 4:
                idx = tuple(s.index(c) for c in name)
                if any(i >= n for i in idx):
                    raise self.err("E2041", f"swizzle '.{name}' out of range for '{t}'", loc)
                rt = elem if len(idx) == 1 else T.VectorType(elem, len(idx))
                if isinstance(t, T.ScalarType) and len(idx) == 1:
                    return obj
                if isinstance(obj, ir.Swizzle) and isinstance(obj.obj.type, T.VectorType):
                    # v.zx.x is v.z: one swizzle, so writes reach v (and autodiff sees a path)
                    return ir.Swizzle(rt, obj.obj, tuple(obj.indices[i] for i in idx), loc=loc)
                return ir.Swizzle(rt, obj, idx, loc=loc)
        return None

    def matrix_member(self, obj: ir.Expr, t: T.MatrixType, name: str, loc: Loc) -> Optional[ir.Expr]:
        # _m00 (zero-based) / _11 (one-based), possibly several: _m00_m11

        parts = re.findall(r"_m(\d)(\d)|_(\d)(\d)", name)
        if not parts or "".join("_m%s%s" % (a, b) if a else "_%s%s" % (c, d) for a, b, c, d in parts) != name:
            return None
        elems = []
        for a, b, c, d in parts:
            r, col = (int(a), int(b)) if a else (int(c) - 1, int(d) - 1)
            if not (0 <= r < t.rows and 0 <= col < t.cols):
                raise self.err("E2041", f"matrix element '{name}' out of range for '{t}'", loc)
            row = ir.Index(t.row_type, obj, ir.Const(T.INT, r, loc=loc), loc=loc)
            elems.append(ir.Index(t.elem, row, ir.Const(T.INT, col, loc=loc), loc=loc))
        if len(elems) == 1:
            return elems[0]
        return ir.Construct(T.VectorType(t.elem, len(elems)), elems, loc=loc)

    # ------------------------------------------------------------------ properties

    def property_res(self, sym: PropertySym, this: Optional[ir.Expr], loc: Loc):
        d: ast.PropertyDecl = sym.decl
        ctx = self.ctx_for_env(sym.env)
        ptype = self.resolve_type(d.type, ctx)
        getter = setter = None
        for acc in d.accessors:
            if acc.kind == "get":
                getter = self.accessor_function(sym, acc, ptype, [], loc)
            elif acc.kind == "set":
                setter = self.accessor_function(sym, acc, ptype, [], loc)
        return PropertyRes(this, getter, setter, ptype, d.name)

    def accessor_function(self, sym, acc: ast.Accessor, vtype: T.Type, index_params: list, loc) -> ir.Function:
        """Accessors become ordinary methods: get() -> T, [mutating] set(T newValue)."""
        key = ("acc", id(acc))
        if key in sym.cache:
            return sym.cache[key]
        fs = self.accessor_sym(sym, acc, vtype, index_params)
        fn = self.instantiate_function(fs, [], loc)
        if acc.kind == "get":
            fn.ret = vtype
        sym.cache[key] = fn
        return fn

    def accessor_sym(self, sym, acc: ast.Accessor, vtype: T.Type, index_params: list) -> FuncSym:
        """The method an accessor is (one per accessor, so a derivative attached to it by name --
        `__func_extension fwd_diff(S::__subscript::get)` -- matches the one calls use)."""
        key = ("accsym", id(acc))
        if key in sym.cache:
            return sym.cache[key]
        if acc.kind == "get":
            fdecl = ast.FuncDecl("get_" + (sym.decl.name if hasattr(sym.decl, "name") else "subscript"),
                                 list(index_params), TypeLiteral(vtype), acc.body, loc=acc.loc)
            fdecl.attrs = list(acc.attrs)
            if "mutating" in acc.mods:
                fdecl.attrs.append(ast.Attribute("mutating"))
        else:
            pname = acc.param.name if acc.param is not None else "newValue"
            ptype_expr = TypeLiteral(vtype)
            fdecl = ast.FuncDecl("set_" + (sym.decl.name if hasattr(sym.decl, "name") else "subscript"),
                                 list(index_params) + [ast.Param(pname, ptype_expr)], None, acc.body, loc=acc.loc)
            fdecl.attrs = list(acc.attrs)
            if "nonmutating" not in acc.mods:
                fdecl.attrs.append(ast.Attribute("mutating"))
        if "static" in sym.decl.mods:
            fdecl.mods = {"static"}
        fs = FuncSym(fdecl, sym.env, sym.owner)
        sym.cache[key] = fs
        return fs

    def subscript_accessor_res(self, t: T.Type, kind: str, loc: Loc) -> OverloadRes:
        """`S::__subscript::get` / `::set`: the accessors of S's subscripts, as methods named through
        their type (`this` is the first argument)."""
        cands = []
        for sym in self.member_syms(t, "__subscript"):
            if not isinstance(sym, SubscriptSym):
                continue
            vtype = self.resolve_type(sym.decl.return_type, self.ctx_for_env(sym.env))
            for acc in sym.decl.accessors:
                if acc.kind == kind:
                    cands.append(self.accessor_sym(sym, acc, vtype, sym.decl.params))
        if not cands:
            raise self.err("E2052", f"'{t}' has no subscript with a '{kind}' accessor", loc)
        return OverloadRes(cands, name=f"__subscript::{kind}")

    # ------------------------------------------------------------------ builtin methods

    def call_builtin_method(self, res: BuiltinMethodRes, args: list, loc: Loc, ctx) -> ir.Expr:
        obj, name, t = res.obj, res.name, res.owner_type
        U = T.UINT

        def arg(i, ty):
            return self.coerce_arg(args[i], ty, ctx)

        def nargs(*ok):
            if len(args) not in ok:
                raise self.err("E3030", f"'{name}' takes {' or '.join(map(str, ok))} argument(s), got {len(args)}", loc)

        if isinstance(t, T.ArrayType) and name == "getCount":
            return ir.Const(T.INT, t.n if isinstance(t.n, int) else 0, loc=loc)
        if isinstance(t, T.VectorType) and name == "getCount":
            return ir.Const(T.INT, t.n, loc=loc)
        if isinstance(t, T.BufferType):
            if name == "GetDimensions":
                for a in args:
                    self.require_lvalue(a, loc, "GetDimensions output")
                outs = [self.out_arg(a, U, loc) for a in args]
                return ir.MethodCall(T.VOID, obj, "GetDimensions", outs, loc=loc)
            if name == "getCount":
                return ir.MethodCall(U, obj, "getCount", [], loc=loc)
            if t.byte_address:
                if name in ("Load", "Load2", "Load3", "Load4"):
                    k = 1 if name == "Load" else int(name[-1])
                    ta = getattr(res, "type_args", None)
                    if ta:
                        return ir.MethodCall(ta[0], obj, "template LoadT<%s>" % "@T0", [arg(0, U)], loc=loc)
                    rt = U if k == 1 else T.VectorType(U, k)
                    return ir.MethodCall(rt, obj, name, [arg(0, U)], loc=loc)
                if name in ("Store", "Store2", "Store3", "Store4"):
                    k = 1 if name == "Store" else int(name[-1])
                    ta = getattr(res, "type_args", None)
                    if ta:
                        return ir.MethodCall(T.VOID, obj, "template StoreT<%s>" % "@T0", [arg(0, U), arg(1, ta[0])], loc=loc)
                    vt = U if k == 1 else T.VectorType(U, k)
                    if k == 1 and not isinstance(args[1], InitListArgT) and args[1].type != U and \
                            not isinstance(args[1].type, T.ScalarType):
                        return ir.MethodCall(T.VOID, obj, "template StoreT<%s>" % "@T0", [arg(0, U), args[1]], loc=loc)
                    return ir.MethodCall(T.VOID, obj, name, [arg(0, U), arg(1, vt)], loc=loc)
                if name.startswith("Interlocked"):
                    # the F16/F32/F64 forms (InterlockedAddF32, ...) take a floating-point operand
                    vt = {"F16": T.HALF, "F32": T.FLOAT, "F64": T.DOUBLE}.get(name[-3:], U)
                    conv = [arg(0, U)] + [self.coerce_arg(a, vt, ctx) if i < len(args) - 1 or name == "InterlockedCompareStore" or len(args) == 2
                                          else self.out_arg(a, vt, loc) for i, a in enumerate(args[1:], start=1)]
                    if name in ("InterlockedCompareExchange",) and len(args) == 4:
                        conv = [arg(0, U), arg(1, vt), arg(2, vt), self.out_arg(args[3], vt, loc)]
                    return ir.MethodCall(T.VOID, obj, name, conv, loc=loc)
            else:
                if name in ("Load",):
                    return ir.Index(t.elem, obj, arg(0, U), loc=loc)
                if name == "IncrementCounter" or name == "DecrementCounter":
                    return ir.MethodCall(U, obj, name, [], loc=loc)
        if isinstance(t, T.AtomicType):
            e = t.elem
            simple = {"add": 1, "sub": 1, "max": 1, "min": 1, "and": 1, "or": 1, "xor": 1, "exchange": 1}
            if name in simple:
                nargs(1)
                cname = name + "_" if name in ("and", "or", "xor") else name
                return ir.MethodCall(e, obj, cname, [arg(0, e)], loc=loc)
            if name in ("increment", "decrement", "load"):
                nargs(0)
                return ir.MethodCall(e, obj, name, [], loc=loc)
            if name == "store":
                nargs(1)
                return ir.MethodCall(T.VOID, obj, "store", [arg(0, e)], loc=loc)
            if name == "compareExchange":
                nargs(2)
                return ir.MethodCall(e, obj, "compareExchange", [arg(0, e), arg(1, e)], loc=loc)
        if isinstance(t, T.OptionalType) and name == "hasValue":
            return ir.Field(T.BOOL, obj, "hasValue", loc=loc)
        if isinstance(t, T.PairType) and name in ("getPrimal", "getDifferential"):
            nargs(0)
            return ir.Field(t.primal, obj, "p", loc=loc) if name == "getPrimal" else ir.Field(t.diff, obj, "d", loc=loc)
        raise self.err("E2040", f"'{t}' has no member named '{name}'", loc)


class TypeLiteral(ast.Expr):
    """An already-resolved type smuggled through an AST slot (synthesized declarations)."""
    def __init__(self, type_):
        super().__init__()
        self.type = type_


class InitListArgT:
    pass
