"""Interface-typed values whose concrete type is chosen at run time (Slang's existentials).

Everywhere else interfaces are static dispatch (an interface-typed parameter is an implicit
generic, an interface-typed local takes its initializer's type).  A value made by
`createDynamicObject<I>(typeId, data)`, or a concrete value stored where an `I` value is
required (returned from a function declared to return `I`, assigned to an existential), has the
interface type itself.  At run time it is the type's conformance id plus the concrete value's
bytes (prelude `sj::dyn<N>`, laid out as Slang lays out an existential in memory: an 8-byte RTTI
handle (zero here, ignored when read), the conformance id in an 8-byte witness-table id, then N
words of payload: `[anyValueSize(N)]`, else 16 bytes, or the largest conforming type's size where
that is larger and the value never goes to memory); `data` is copied in bytewise, as Slang does,
so a conforming type sees it reinterpreted.  Interface values in buffers (`StructuredBuffer<IFoo>`,
struct fields) and behind pointers (`uniform IFoo* p`) use the same layout, so a host writes
`[0, 0, id, 0, payload words...]` per value (dyn_in_memory).

The ids are the program's type conformances (`entry_point(..., type_conformances=[(I, T, id)])`,
Slang's `-conformance T:I=id`).  An interface with none gets every non-generic struct of the
user's modules that conforms to it, numbered in declaration order.

A method called on such a value calls a generated dispatcher: an if-chain over the conformance
table that unpacks the value and calls that type's implementation (an unknown id runs the first
entry).  The dispatcher is an ordinary IR function carrying the requirement's [Differentiable]
attributes, so forward and reverse mode differentiate through it like any branch.
"""
from __future__ import annotations

from ..parse import ast
from ..ir import nodes as ir
from ..source import CompileError, Loc
from .. import types as T
from .scope import Env, FuncSym, InterfaceSym, NamespaceSym, StructSym, TypeSym
from .members import TypeLiteral
from .results import BuiltinIfaceRes, OverloadRes, PropertyRes, types_equal

# The requirement's attributes that make its dispatcher differentiable (custom-derivative
# attributes name functions of the interface, which has no bodies: they are not carried over).
# Slang's any-value payload of an interface without [anyValueSize(N)]: 16 bytes.
DEFAULT_ANY_VALUE_WORDS = 4

_DIFF_ATTRS = {"Differentiable", "ForwardDifferentiable", "BackwardDifferentiable", "NoDiffThis"}


class DynMethodRes:
    """`obj.name` where obj is a dynamic interface value, before the call."""
    def __init__(self, obj: ir.Expr, iface: T.InterfaceType, name: str):
        self.obj, self.iface, self.name = obj, iface, name
        self.type_args: list = []           # explicit generic arguments (`v.f<float>(x)`)


def _dyn_make(iface: T.InterfaceType, tag: ir.Expr, value: ir.Expr, loc) -> ir.Expr:
    node = ir.Intrinsic(iface, "sj::dyn_make<$T0>", [tag, value], (), loc=loc)
    node.type_args = [iface]
    return node


def _dyn_get(t: T.Type, obj: ir.Expr, loc) -> ir.Expr:
    node = ir.Intrinsic(t, "sj::dyn_get<$T0>", [obj], (), loc=loc)
    node.type_args = [t]
    return node


def _tag(obj: ir.Expr, loc) -> ir.Expr:
    return ir.Field(T.UINT, obj, "tag", loc=loc)


class DynamicMixin:
    # ------------------------------------------------------------------ conformance table

    def dyn_table(self, iface: T.InterfaceType, loc: Loc) -> list:
        """[(id, concrete struct type)] for dynamic values of `iface`; the first is the default."""
        info = iface.info
        if info.__dict__.get("dyn_table") is not None:
            return info.dyn_table
        want = iface.name.replace(" ", "")
        given = [(tname, ident) for iname, tname, ident in getattr(self, "type_conformances", ())
                 if str(iname).replace(" ", "") == want]
        entries: list = []
        if given:
            used = {int(i) for _, i in given if int(i) >= 0}
            nxt = 0
            for tname, ident in given:
                ty = self.conformance_type(str(tname), loc)
                if not self.conforms(ty, iface):
                    raise self.err("E5010", f"type conformance '{tname}:{iface.name}': '{tname}' does not "
                                            f"conform to '{iface.name}'", loc)
                ident = int(ident)
                if ident < 0:
                    while nxt in used:
                        nxt += 1
                    ident = nxt
                    used.add(ident)
                if any(i == ident for i, _ in entries):
                    raise self.err("E5010", f"type conformance id {ident} of '{iface.name}' is given twice", loc)
                entries.append((ident, ty))
        else:
            nested: list = []
            for sym in self.user_struct_syms():
                if sym.decl.generic_params:
                    continue
                ty = self.instantiate_struct(sym, [], sym.decl.loc)
                if self.conforms(ty, iface):
                    entries.append((len(entries), ty))
                nested.extend(self.nested_struct_types(ty))
            # Structs nested in those (a conforming type's associated type, `Impl.Getter`), after them.
            for ty in nested:
                if self.conforms(ty, iface) and all(t is not ty for _, t in entries):
                    entries.append((len(entries), ty))
        if not entries:
            raise self.err("E5011", f"no type conforms to '{iface.name}', so no dynamic '{iface.name}' value "
                                    f"can exist (declare a conforming struct, or give type conformances)", loc)
        limit = self.any_value_size(iface)
        if limit is not None:
            for _, ty in entries:
                size = T.size_align(ty)[0]
                if size > limit:
                    where = ty.info.sym.decl.loc if isinstance(ty, T.StructType) else loc
                    raise self.err("E5014", f"'{ty}' ({size} bytes) does not fit in the {limit} bytes that "
                                            f"[anyValueSize({limit})] allows a '{iface.name}' value", where)
        info.dyn_table = entries
        self.dyn_ifaces.append(iface)
        # The payload in 32-bit words: Slang's any-value size ([anyValueSize(N)], else 16 bytes), or
        # the largest conforming type where that is larger and the interface sets no size (such values
        # cannot be stored in memory in Slang's layout: dyn_in_memory reports it).
        largest = max(1, max((T.size_align(t)[0] + 3) // 4 for _, t in entries))
        info.dyn_largest = largest
        info.dyn_words = max(1, (limit + 3) // 4) if limit is not None else max(DEFAULT_ANY_VALUE_WORDS, largest)
        return entries

    def dyn_in_memory(self, t: T.Type, what: str, loc: Loc, seen=None) -> None:
        """Interface values inside t (t itself, array elements, struct fields) are stored in memory
        (a buffer's elements, what a pointer points at): Slang's existential layout, a 16-byte header
        (RTTI handle, conformance id) then the any-value payload.  Sets up their conformance tables;
        E5013 where a conforming type does not fit Slang's default 16-byte payload."""
        seen = set() if seen is None else seen
        if id(t) in seen:
            return
        seen.add(id(t))
        if isinstance(t, T.ArrayType):
            self.dyn_in_memory(t.elem, what, loc, seen)
        elif isinstance(t, T.StructType):
            for _, ft in t.info.field_list():
                self.dyn_in_memory(ft, what, loc, seen)
        elif isinstance(t, T.InterfaceType) and not T.contains_vars(t):
            self.dyn_table(t, loc)
            info = t.info
            if self.any_value_size(t) is None and info.dyn_largest > DEFAULT_ANY_VALUE_WORDS:
                big = max((ty for _, ty in info.dyn_table), key=lambda ty: T.size_align(ty)[0])
                raise self.err("E5013", f"{what} stores '{t.name}' values in memory, where Slang gives them "
                                        f"{4 * DEFAULT_ANY_VALUE_WORDS} bytes of payload unless the interface says "
                                        f"otherwise; '{big}' needs {T.size_align(big)[0]}: declare "
                                        f"[anyValueSize({4 * info.dyn_largest})] on '{t.name}'", loc)

    def dyn_diff_type(self, iface: T.InterfaceType, diff, is_ptr):
        """The Differential of a dynamic value of an interface that extends IDifferentiable (None for
        any other): a struct with one field per conforming type that has a Differential, holding that
        type's Differential (`case<id>`).  A value's derivative lives in the field of its own type,
        so zero, addition and scaling are field-wise and unpacking / packing a value are a field
        read and a construction (autodiff's `dyn_tangent`).  `diff(t)` / `is_ptr(t)`: the
        derivative resolver's views of a type."""
        info = iface.info
        info.dyn_diff_fields = []
        if not self.iface_extends(iface, BuiltinIfaceRes("IDifferentiable")):
            return None
        try:
            table = self.dyn_table(iface, info.sym.decl.loc)
        except CompileError:
            return None                 # no dynamic value can exist (reported where one is made)
        fields = []
        for ident, ty in table:
            dt = None if is_ptr(ty) else diff(ty)
            if dt is not None:
                fields.append((f"case{ident}", dt))
                info.dyn_diff_fields.append((ty, f"case{ident}"))
        if not fields:
            return None
        decl = info.sym.decl
        sdecl = ast.StructDecl(f"{decl.name}_DynDifferential", [ast.VarDecl(n, TypeLiteral(ft)) for n, ft in fields],
                               loc=decl.loc)
        dt = self.instantiate_struct(StructSym(sdecl, info.env), [], decl.loc)
        dt.name = f"{iface.name}.Differential"
        dt.info.differential_of = iface
        dt.info.ptr_kind = False
        dt.info.diff_type = dt
        dt.info.diff_fields = {n: n for n, _ in fields}
        return dt

    def any_value_size(self, iface: T.InterfaceType):
        """The byte limit of `[anyValueSize(N)]` on the interface's declaration, or None."""
        decl = getattr(getattr(iface.info, "sym", None), "decl", None)
        for a in getattr(decl, "attrs", ()):
            if a.name == "anyValueSize" and len(a.args) == 1 and isinstance(a.args[0], ast.IntLit):
                return a.args[0].value
        return None

    def user_struct_syms(self) -> list:
        """Struct declarations of the user's modules (and namespaces), in declaration order."""
        out: list = []

        def walk(env):
            for syms in env.names.values():
                for s in syms:
                    if isinstance(s, StructSym) and s.owner is None and s not in out:
                        out.append(s)
                    elif isinstance(s, NamespaceSym):
                        walk(s.env)
        for env in self.modules_loaded.values():
            walk(env)
        return out

    def nested_struct_types(self, ty: T.Type) -> list:
        """Non-generic structs declared inside struct `ty` (and inside those), instantiated."""
        out: list = []
        env = getattr(getattr(ty, "info", None), "env", None)
        if not isinstance(ty, T.StructType) or env is None:
            return out
        for syms in env.names.values():
            for s in syms:
                if isinstance(s, StructSym) and not s.decl.generic_params and s.owner is not None:
                    nt = self.instantiate_struct(s, [], s.decl.loc)
                    if all(t is not nt for t in out):
                        out.append(nt)
                        out.extend(self.nested_struct_types(nt))
        return out

    def conformance_type(self, name: str, loc: Loc) -> T.Type:
        """A type named in a type conformance (`Foo`, `ns.Foo`, `Gen<float>`), looked up in the
        user's modules."""
        texpr = self.conformance_type_exprs.get(name)       # parsed by the front end (frontend.py)
        if texpr is None:
            raise self.err("E5010", f"type conformance names '{name}', which is not a type name", loc)
        last = None
        for env in self.modules_loaded.values():
            try:
                return self.resolve_type(texpr, self.ctx_for_env(env))
            except CompileError as ex:
                last = ex
        detail = f" ({last.diagnostics[0].message})" if last is not None else ""
        raise self.err("E5010", f"type conformance names unknown type '{name}'{detail}", loc)

    # ------------------------------------------------------------------ making values

    def is_create_dynamic(self, e: ast.Call, ctx) -> bool:
        c = e.callee
        return isinstance(c, ast.GenericApp) and isinstance(c.base, ast.Name) and \
            c.base.name == "createDynamicObject" and not ctx.env.lookup("createDynamicObject")

    def create_dynamic(self, e: ast.Call, ctx) -> ir.Expr:
        """createDynamicObject<I>(typeId, data) (or <I, D>): the object of conformance id typeId
        whose bytes are data's."""
        targs = self.generic_args(e.callee.args, ctx)
        if not targs or not isinstance(targs[0], T.InterfaceType) or len(targs) > 2:
            raise self.err("E3063", "createDynamicObject<I>(typeId, data) needs an interface type I", e.callee.loc)
        iface = targs[0]
        if len(e.args) != 2 or isinstance(e.args[1], ast.InitList):
            raise self.err("E3030", "createDynamicObject takes (typeId, data)", e.loc)
        tag = self.coerce(self.expr(e.args[0], ctx), T.UINT, e.args[0].loc)
        data = self.expr(e.args[1], ctx)
        if len(targs) == 2:
            if not isinstance(targs[1], T.Type):
                raise self.err("E2013", "createDynamicObject's second generic argument must be a type", e.callee.loc)
            data = self.coerce(data, targs[1], e.args[1].loc)
        if isinstance(data.type, (T.InterfaceType, T.BufferType, T.StringType)) or data.type == T.VOID:
            raise self.err("E3064", f"createDynamicObject cannot take its data from a '{data.type}'", e.args[1].loc)
        self.dyn_table(iface, e.loc)
        return _dyn_make(iface, tag, data, e.loc)

    def dyn_pack(self, e: ir.Expr, iface: T.InterfaceType, loc: Loc) -> ir.Expr:
        """A concrete value where a dynamic `iface` value is required: tag it with its id."""
        table = self.dyn_table(iface, loc)
        for ident, ty in table:
            if ty is e.type:
                return _dyn_make(iface, ir.Const(T.UINT, ident, loc=loc), e, loc)
        for ident, ty in table:
            if types_equal(ty, e.type):
                return _dyn_make(iface, ir.Const(T.UINT, ident, loc=loc), e, loc)
        raise self.err("E5012", f"'{e.type}' has no conformance id for dynamic '{iface.name}' values (the "
                                f"program's type conformances of '{iface.name}' do not list it)", loc)

    def dyn_is(self, x: ir.Expr, t: T.Type, loc: Loc) -> ir.Expr:
        """`x is T` on a dynamic value: a run-time test of its conformance id."""
        ids = [i for i, ty in self.dyn_table(x.type, loc) if ty is t]
        if not ids:
            return ir.Const(T.BOOL, False, loc=loc)
        return ir.Binary(T.BOOL, "==", _tag(x, loc), ir.Const(T.UINT, ids[0], loc=loc), loc=loc)

    def dyn_as(self, x: ir.Expr, t: T.Type, loc: Loc) -> ir.Expr:
        ot = T.OptionalType(t)
        test = self.dyn_is(x, t, loc)
        if isinstance(test, ir.Const):
            return ir.Construct(ot, [], loc=loc)
        return ir.Select(ot, test, ir.Construct(ot, [_dyn_get(t, x, loc)], loc=loc), ir.Construct(ot, [], loc=loc),
                         loc=loc)

    # ------------------------------------------------------------------ method calls

    def dyn_requirements(self, iface: T.InterfaceType, name: str, kind=ast.FuncDecl) -> list:
        """[(owning interface, declaration)] of the requirements `name` (methods, or with kind
        ast.PropertyDecl the property) of iface or the nearest base interface declaring one."""
        found = [m for m in iface.info.sym.decl.members if isinstance(m, kind) and m.name == name]
        if found:
            return [(iface, m) for m in found]
        for b in iface.info.bases:
            if isinstance(b, T.InterfaceType):
                r = self.dyn_requirements(b, name, kind)
                if r:
                    return r
        return []

    def dyn_member(self, obj: ir.Expr, t: T.InterfaceType, name: str, loc: Loc):
        if self.dyn_requirements(t, name):
            return DynMethodRes(obj, t, name)
        props = self.dyn_requirements(t, name, ast.PropertyDecl)
        if props:
            return self.dyn_property(obj, t, props[0][0], props[0][1], loc)
        raise self.err("E2040", f"'{t.name}' has no method or property named '{name}' (a dynamic interface "
                                f"value only offers the interface's requirements)", loc)

    def call_dyn_method(self, res: DynMethodRes, args: list, loc: Loc, ctx) -> ir.Expr:
        reqs = self.dyn_requirements(res.iface, res.name)
        best = None
        for owner, req in reqs:
            sym = FuncSym(req, self.dyn_env(res.iface, owner))
            m = self.match_candidate(sym, OverloadRes([sym], type_args=res.type_args or None, name=req.name), args, loc)
            if m is not None and (best is None or m.cost < best[0].cost):
                best = (m, owner, req)
        if best is None:
            for owner, req in reqs:
                if len(req.params) == len(args):
                    self.dyn_signature(res.iface, owner, req, None, loc)     # E3062 if it names `This`
            desc = ", ".join(str(getattr(a, "type", "{...}")) for a in args)
            raise self.err("E3010", f"no requirement '{res.name}' of '{res.iface.name}' matches arguments ({desc})", loc)
        m, owner, req = best
        fn = self.dyn_dispatcher(res.iface, owner, req, m, loc)
        call_args = [res.obj]
        if fn.params[0].direction == "inout":
            self.require_lvalue(res.obj, loc, "mutating method's `this`")
        for i, (a, p) in enumerate(zip(args, fn.params[1:])):
            k = self.dyn_param_kind(req.params[i].type, owner) if i < len(req.params) else None
            at = getattr(a, "type", None)
            if k is not None and isinstance(p.type, T.InterfaceType) and not isinstance(at, T.InterfaceType):
                # slangc: a type mismatch (the value's concrete type must be the receiver's, known only at run time)
                raise self.err("E3001", f"argument '{p.name}' of '{res.name}' has type `{k}` of a dynamic "
                                        f"'{res.iface.name}' value, so it must be a dynamic '{p.type}' value too; "
                                        f"got '{at}' (store it in a '{p.type}' variable first)",
                               getattr(a, "loc", None) or loc)
            if p.direction in ("out", "inout"):
                self.require_lvalue(a, a.loc, f"argument '{p.name}' (an {p.direction} parameter)")
                call_args.append(self.out_arg(a, p.type, loc))
            else:
                call_args.append(self.coerce_arg(a, p.type, ctx))
        return ir.Call(fn.ret, fn, call_args, loc=loc)

    def dyn_signature(self, iface, owner, req: ast.FuncDecl, m, loc):
        """The dispatcher's parameter types and result: the requirement's, with its generic
        parameters (and interface-typed parameters) bound by the call's match m."""
        what = f"'{req.name}' of '{owner.name}' cannot be called on a dynamic '{iface.name}' value"
        env = self.dyn_env(iface, owner)
        if req.generic_params and m is not None:
            env = self.bind_generics(req.generic_params, [a for a in m.type_args if not isinstance(a, tuple)],
                                     env, loc, None)
        try:
            ictx = self.ctx_for_env(env)
            ptypes = list(m.param_types) if m is not None else [self.resolve_type(p.type, ictx) for p in req.params]
            for i, p in enumerate(req.params):
                if self.dyn_param_kind(p.type, owner) is not None:
                    ptypes[i] = self.resolve_type(p.type, ictx)     # a dynamic value, whatever was passed
            ret = self.resolve_type(req.return_type, ictx) if req.return_type is not None else T.VOID
        except CompileError:
            raise self.err("E3062", f"{what}: its signature uses an associated type that has no single "
                                    f"interface constraint (a dynamic value of it cannot be formed)", loc) from None
        return ptypes, ret

    def dyn_env(self, iface: T.InterfaceType, owner: T.InterfaceType) -> Env:
        """The environment a requirement's signature is read in for a dynamic call: `This` is the
        dynamic value's interface and an associated type with one interface constraint is a dynamic
        value of that interface (each conforming type's result is packed, its argument unpacked)."""
        cache = iface.info.__dict__.setdefault("dyn_envs", {})
        if id(owner) in cache:
            return cache[id(owner)]
        env = Env(owner.info.env, "generic")
        env.this_type = iface
        env.add("This", TypeSym("This", iface))
        ctx = self.ctx_for_env(owner.info.env)
        for it in [owner] + [b for b in self.iface_ancestors(owner)]:
            for m in it.info.sym.decl.members:
                if isinstance(m, ast.AssocTypeDecl) and not env.lookup_local(m.name):
                    try:
                        cons = [self.resolve_base(c, ctx) for c in m.constraints]
                    except CompileError:
                        continue
                    user = [c for c in cons if isinstance(c, T.InterfaceType)]
                    if len(user) == 1:
                        env.add(m.name, TypeSym(m.name, user[0]))
                    else:
                        syn = self.dyn_assoc_iface(iface, it, m, user)
                        if syn is not None:
                            env.add(m.name, TypeSym(m.name, syn))
        cache[id(owner)] = env
        return env

    def dyn_assoc_iface(self, iface: T.InterfaceType, owner: T.InterfaceType, m: ast.AssocTypeDecl, cons: list):
        """The dynamic value of associated type m of a dynamic `iface` value, where m has no interface
        constraint or more than one: an interface `iface.m` of its own, extending m's constraints (their
        requirements can be called on it), whose conformance table lists each conforming type's m
        (deduplicated, in table order).  Such a value can be passed back to `iface`'s requirements
        that take an m (each case unpacks its own type's m).  None where a conforming type lacks m."""
        cache = iface.info.__dict__.setdefault("dyn_assoc", {})
        if m.name in cache:
            return cache[m.name]
        cache[m.name] = None
        loc = m.loc
        try:
            entries: list = []
            for _, ty in self.dyn_table(iface, loc):
                ct = self.dyn_concrete(ty, m.name, loc)
                if not any(types_equal(ct, e) for _, e in entries):
                    entries.append((len(entries), ct))
        except CompileError:
            return None
        decl = ast.InterfaceDecl(f"{iface.name}.{m.name}", [], bases=[TypeLiteral(c) for c in cons], loc=loc)
        syn = self.instantiate_interface(InterfaceSym(decl, owner.info.env), [], loc)
        info = syn.info
        info.dyn_table = entries
        self.dyn_ifaces.append(syn)
        largest = max(1, max((T.size_align(t)[0] + 3) // 4 for _, t in entries))
        info.dyn_largest = largest
        info.dyn_words = max(DEFAULT_ANY_VALUE_WORDS, largest)
        cache[m.name] = syn
        return syn

    def iface_ancestors(self, it: T.InterfaceType) -> list:
        out: list = []
        for b in it.info.bases:
            if isinstance(b, T.InterfaceType) and b not in out:
                out.append(b)
                out.extend(x for x in self.iface_ancestors(b) if x not in out)
        return out

    def dyn_param_kind(self, texpr, owner: T.InterfaceType):
        """'This' or the associated type's name when a requirement's parameter / result type is
        written as one (a dynamic value in the dispatcher, the concrete type in each case)."""
        if isinstance(texpr, ast.ThisTypeExpr):
            return "This"
        if isinstance(texpr, ast.Name):
            for it in [owner] + self.iface_ancestors(owner):
                for m in it.info.sym.decl.members:
                    if isinstance(m, ast.AssocTypeDecl) and m.name == texpr.name:
                        return m.name
        return None

    def dyn_concrete(self, ty: T.Type, kind: str, loc: Loc) -> T.Type:
        """What `This` / associated type `kind` is for conforming type ty."""
        if kind == "This":
            return ty
        return self.resolve_type(ast.Member(TypeLiteral(ty), kind, loc=loc), self.ctx_for_env(ty.info.env))

    def dyn_dispatcher(self, iface: T.InterfaceType, owner: T.InterfaceType, req: ast.FuncDecl, m,
                       loc: Loc) -> ir.Function:
        ptypes, ret = self.dyn_signature(iface, owner, req, m, loc)
        # The requirement's generic arguments, passed on to each implementation (a value parameter
        # like `gen<let K : int>(float x)` cannot be inferred from the arguments).
        gargs = [a for a in m.type_args if not isinstance(a, tuple)] if req.generic_params and m is not None else []
        key = (id(req), self.generic_key(ptypes), self.generic_key(gargs))
        cache = iface.info.__dict__.setdefault("dyn_dispatch", {})
        if key in cache:
            return cache[key]
        mutating = any(a.name == "mutating" for a in req.attrs) or "mutating" in req.mods
        params = [(p.name, pt, p.direction if p.direction != "ref" else "inout") for p, pt in zip(req.params, ptypes)]

        kinds = [self.dyn_param_kind(p.type, owner) for p in req.params]

        def case(fn, ty, objref, argrefs):
            syms = [s for s in self.member_syms(ty, req.name) if isinstance(s, FuncSym)]
            # `This` / associated-type parameters: unpacked as the case's concrete type; an out / inout
            # one goes through a local of that type, packed back (with that type's id) after the call.
            pre: list = []
            post: list = []
            unpacked = []
            for a, k, (n, pt, d) in zip(argrefs, kinds, params):
                if k is None:
                    unpacked.append(a)
                    continue
                ct = self.dyn_concrete(ty, k, loc)
                if d == "in":
                    unpacked.append(_dyn_get(ct, a, loc))
                    continue
                tmp = ir.Var(f"{n}_{k}", ct, loc=loc)
                pre.append(ir.VarDecl(tmp, _dyn_get(ct, a, loc)))
                unpacked.append(ir.LocalRef(ct, tmp, loc=loc))
                if not isinstance(pt, T.InterfaceType):
                    raise self.err("E3062", f"'{req.name}' of '{owner.name}' cannot be called on a dynamic "
                                            f"'{iface.name}' value: its {d} parameter '{n}' has type `{k}`", loc)
                post.append(ir.ExprStmt(ir.Assign(pt, "=", a, self.dyn_pack(ir.LocalRef(ct, tmp, loc=loc), pt, loc),
                                                  loc=loc)))
            argrefs = unpacked
            try:
                call = self.resolve_overload(OverloadRes(syms, this=objref, type_args=gargs or None, name=req.name),
                                             argrefs, loc, self.ctx_for_env(owner.info.env))
            except CompileError:
                raise self.err("E3062", f"'{ty}' does not implement '{req.name}' as '{iface.name}' "
                                        f"requires, so it cannot be called on a dynamic value", loc) from None
            return (pre, call, post) if pre or post else call
        fn = self.dyn_build(iface, req.name, req.name, params, ret, mutating, req.attrs, owner.info.env, req, case, loc)
        cache[key] = fn
        return fn

    def dyn_property(self, obj: ir.Expr, iface: T.InterfaceType, owner: T.InterfaceType, prop: ast.PropertyDecl,
                     loc: Loc):
        """`v.p` for a property requirement p: get and set call dispatchers of the accessors."""
        ptype = self.resolve_type(prop.type, self.ctx_for_env(owner.info.env))
        cache = iface.info.__dict__.setdefault("dyn_dispatch", {})
        acc_fns = {}
        for acc in prop.accessors:
            key = (id(acc),)
            if key not in cache:
                cache[key] = self.dyn_accessor(iface, owner, prop, acc, ptype, loc)
            acc_fns[acc.kind] = cache[key]
        return PropertyRes(obj, acc_fns.get("get"), acc_fns.get("set"), ptype, prop.name)

    def dyn_accessor(self, iface, owner, prop: ast.PropertyDecl, acc: ast.Accessor, ptype: T.Type, loc: Loc):
        ctx = self.ctx_for_env(owner.info.env)
        if acc.kind == "get":
            def case(fn, ty, objref, argrefs):
                return self.value_of(self.member(objref, ty, prop.name, loc, ctx), loc, ctx)
            return self.dyn_build(iface, f"get_{prop.name}", prop.name, [], ptype, "mutating" in acc.mods,
                                  acc.attrs, owner.info.env, None, case, loc)

        def case(fn, ty, objref, argrefs):
            res = self.member(objref, ty, prop.name, loc, ctx)
            if isinstance(res, PropertyRes):
                if res.setter is None:
                    raise self.err("E3062", f"'{ty}.{prop.name}' has no setter, which '{iface.name}' requires", loc)
                return self.make_call(res.setter, [objref, argrefs[0]], loc)
            lhs = self.value_of(res, loc, ctx)
            return ir.Assign(lhs.type, "=", lhs, self.coerce(argrefs[0], lhs.type, loc), loc=loc)
        pname = acc.param.name if acc.param is not None else "newValue"
        return self.dyn_build(iface, f"set_{prop.name}", prop.name, [(pname, ptype, "in")], T.VOID,
                              "nonmutating" not in acc.mods, acc.attrs, owner.info.env, None, case, loc)

    def dyn_build(self, iface: T.InterfaceType, fname: str, slang_name: str, params: list, ret: T.Type,
                  mutating: bool, attrs: list, env, decl, case, loc: Loc) -> ir.Function:
        """A dispatcher: `this` (the dynamic value) then params [(name, type, direction)]; for each
        conforming type, `case(fn, type, unpacked this, [param refs])` gives the call (or value)."""
        this = ir.Var("this", iface, "inout" if mutating else "in", loc=loc)
        fparams = [this] + [ir.Var(n, pt, d, loc=loc) for n, pt, d in params]
        fn = ir.Function(self.unique(f"{iface.name}_{fname}_dyn"), fparams, ret, loc=getattr(decl, "loc", loc))
        fn.slang_name = slang_name
        dattrs = {a.name: a for a in attrs if a.name in _DIFF_ATTRS}
        fn.attrs.update({"decl": decl, "attrs": dattrs, "env": env, "type_args": [], "is_init": False})
        differentiable = any(a in dattrs for a in ("Differentiable", "ForwardDifferentiable", "BackwardDifferentiable"))
        cases = [(ident, self.dyn_case(fn, ty, slang_name, differentiable, case, loc))
                 for ident, ty in self.dyn_table(iface, loc)]
        # if (tag == id1) {...} else if (tag == id2) {...} else {first entry's}
        tree = cases[0][1]
        for ident, body in reversed(cases[1:]):
            cond = ir.Binary(T.BOOL, "==", _tag(ir.LocalRef(iface, this), loc), ir.Const(T.UINT, ident, loc=loc))
            tree = ir.Block([ir.If(cond, body, tree)])
        fn.body = tree
        self.functions.append(fn)
        return fn

    def dyn_case(self, fn: ir.Function, ty: T.Type, name: str, differentiable: bool, case, loc: Loc) -> ir.Block:
        """The dispatcher's branch for one conforming type: unpack, call its implementation."""
        this = fn.params[0]
        thisref = ir.LocalRef(this.type, this, loc=loc)
        stmts: list = []
        obj = ir.Var("obj", ty, loc=loc)
        stmts.append(ir.VarDecl(obj, _dyn_get(ty, thisref, loc)))
        args = [ir.LocalRef(p.type, p, loc=loc) for p in fn.params[1:]]
        call = case(fn, ty, ir.LocalRef(ty, obj, loc=loc), args)
        pre, post = [], []
        if isinstance(call, tuple):
            pre, call, post = call
        stmts.extend(pre)
        if differentiable and isinstance(call, ir.Call) and not self.derivs.is_differentiable(call.func):
            raise self.err("E6017", f"'{ty}.{name}' implements differentiable requirement '{name}' but is "
                                    f"not differentiable: mark it [Differentiable]", call.func.loc or loc)
        if isinstance(fn.ret, T.InterfaceType) and not isinstance(call.type, T.InterfaceType) and \
                (isinstance(call.type, T.StructType) and self.conforms(call.type, fn.ret) or
                 any(types_equal(call.type, t) for _, t in fn.ret.info.__dict__.get("dyn_table") or ())):
            call = self.dyn_pack(call, fn.ret, loc)         # `This` / an associated type: re-packed
        if fn.ret != T.VOID and not types_equal(call.type, fn.ret):
            raise self.err("E3062", f"'{ty}.{name}' returns '{call.type}' but interface requirement "
                                    f"'{name}' returns '{fn.ret}'", getattr(getattr(call, "func", None), "loc", None) or loc)
        if fn.ret == T.VOID:
            stmts.append(ir.ExprStmt(call))
        else:
            r = ir.Var("r", fn.ret, loc=loc)
            stmts.append(ir.VarDecl(r, call))
        stmts.extend(post)
        if this.direction == "inout":
            # [mutating]: the implementation changed the unpacked copy; store it back.
            stmts.append(ir.ExprStmt(ir.Assign(this.type, "=", thisref,
                                               _dyn_make(this.type, _tag(thisref, loc), ir.LocalRef(ty, obj), loc))))
        stmts.append(ir.Return(None if fn.ret == T.VOID else ir.LocalRef(fn.ret, r)))
        return ir.Block(stmts)
