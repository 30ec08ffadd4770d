"""The checker: name lookup, types, instantiation of generics, and lowering to the IR.

`Checker` is assembled from mixins, one concern per file:
  checker.py   declarations, type expressions, struct / function instantiation, conformance
  members.py   member lookup on every kind of type (fields, methods, swizzles, buffers ...)
  calls.py     overload resolution, implicit conversions and generic argument inference
  exprs.py     names, members, calls, constructors, initializer lists, indexing
  operators.py operators, assignment, l-values, constant folding
  diffs.py     the autodiff surface (DifferentialPair, fwd_diff/bwd_diff, no_diff)
  dynamic.py   interface values whose type is chosen at run time (createDynamicObject)
  stmts.py     statements and function bodies
"""
from __future__ import annotations

import dataclasses
import os

from typing import Optional

from ..parse import ast
from ..ir import nodes as ir
from ..ir.derivatives import Derivatives
from ..ir.program import next_placeholder_id, unique_name
from ..source import CompileError, Diagnostic, Loc, error
from .. import types as T
from .results import (BUFFER_KINDS, BuiltinIfaceRes, CBufferMemberSym, GenericRes, InterfaceInstance,
                      NamespaceRes, StructInstance, TypeRes, ValueRes, const_expr, describe, types_equal)
from .scope import (AliasSym, AssocTypeSym, CoreEnv, EnumSym, Env, FieldSym, FuncSym, GlobalSym,
                    InterfaceSym, NamespaceSym, PropertySym, StructSym, SubscriptSym, TypeSym, ValueSym)
from .calls import CallsMixin
from .nodiff import NoDiffMixin
from .conflicts import admit, check_params
from .exprs import ExprsMixin
from .members import MembersMixin
from .stmts import FuncCtx, StmtsMixin
from .derivatives import DerivativeResolver
from .diffs import DiffsMixin
from .dynamic import DynamicMixin
from .operators import OperatorsMixin


class Checker(DynamicMixin, DiffsMixin, MembersMixin, CallsMixin, NoDiffMixin, ExprsMixin, OperatorsMixin, StmtsMixin):
    def __init__(self):
        self.core_env = CoreEnv()
        self.extensions: list[tuple[ast.ExtensionDecl, Env]] = []
        self.functions: list[ir.Function] = []     # instantiated, in creation order
        self.structs: list[StructInstance] = []
        self.dyn_ifaces: list = []        # interfaces with dynamic values (check/dynamic.py dyn_table)
        self.globals: list[ir.GlobalVar] = []
        self.pending_bodies: list = []
        self.body_errors: list = []       # CompileErrors raised while checking a function body
        self.warnings: list[Diagnostic] = []
        self.names_used: set[str] = set()
        self.modules_loaded: dict[str, Env] = {}
        self.module_loader = None                 # callable(name, is_path, loc, from_path) -> ast.Module
        self._ext_cache: dict = {}
        self._depth = 0
        self.target = "cpp"
        self.uses_group_barrier = False
        self.deriv_of: list = []          # (FuncSym g, "ForwardDerivativeOf"/..., target expr)
        self.type_conformances: list = []  # (interface name, type name, id or -1), see dynamic.py
        self.conformance_type_exprs: dict = {}  # type name -> its parsed type expression (front end)
        resolver = DerivativeResolver(self)
        self.derivs = Derivatives(self.functions, resolver)   # ir/derivatives.py; facts from check/derivatives.py
        resolver.derivs = self.derivs

    # ------------------------------------------------------------------ diagnostics

    def err(self, code: str, msg: str, loc: Loc) -> CompileError:
        return error(code, msg, loc)

    def warn(self, code: str, msg: str, loc: Loc):
        self.warnings.append(Diagnostic(code, msg, loc, "warning"))

    def unique(self, base: str) -> str:
        return unique_name(base)

    # ------------------------------------------------------------------ declarations

    def declare_module(self, mod: ast.Module, env: Env):
        declaring = self.__dict__.setdefault("_declaring", set())   # ids of module envs being declared
        declaring.add(id(env))
        try:
            for d in mod.decls:
                self.declare(d, env)
            for d in mod.decls:
                if isinstance(d, ast.FuncDecl):
                    self.implicit_interface_generics(d, env)
        finally:
            declaring.discard(id(env))

    def implicit_interface_generics(self, d: ast.FuncDecl, env: Env):
        """A parameter typed by a generic interface without its arguments (`IDiffTensor x`, as SlangPy's
        documentation writes) makes the function generic over them: `IDiffTensor<__x_T, __x_D> x`, the
        arguments inferred from the call. The function's symbol gets the rewritten declaration."""
        ctx = self.ctx_for_env(Env(env, "generic"))
        params, extra = [], []
        for p in d.params:
            res = None
            if isinstance(p.type, ast.Name) and all(g.name != p.type.name for g in d.generic_params):
                try:
                    res = self.resolve(p.type, ctx)
                except CompileError:
                    res = None
            gps = res.sym.decl.generic_params if isinstance(res, GenericRes) and \
                isinstance(res.sym, InterfaceSym) else []
            if not gps or any(g.default is not None or g.kind == "pack" for g in gps):
                params.append(p)
                continue
            names = []
            for g in gps:
                nm = f"__{p.name}_{g.name}"
                extra.append(ast.GenericParam(nm, g.kind, g.type if g.kind == "value" else None, None, loc=p.loc))
                names.append(ast.Name(nm, loc=p.type.loc))
            params.append(dataclasses.replace(p, type=ast.GenericApp(p.type, names, loc=p.type.loc)))
        if not extra:
            return
        nd = dataclasses.replace(d, params=params, generic_params=list(d.generic_params) + extra)
        for sym in env.lookup_local(d.name):
            if isinstance(sym, FuncSym) and sym.decl is d:
                sym.decl = nd

    def declare(self, d: ast.Decl, env: Env, owner: Optional[T.Type] = None):
        if isinstance(d, ast.FuncDecl):
            check_params(d)
        if env.kind in ("module", "namespace") and env is not self.core_env and getattr(d, "name", None) and \
                isinstance(d, (ast.FuncDecl, ast.StructDecl, ast.InterfaceDecl, ast.TypeAliasDecl, ast.EnumDecl,
                               ast.VarDecl, ast.CBufferDecl)):
            prev = admit(d, d.name, env.names.get(d.name, []))
            if prev is not None:          # a forward declaration and the definition: one function, the body's
                if d.body is None:
                    return
                env.names[d.name].remove(prev)
        if isinstance(d, ast.FuncDecl):
            fs = FuncSym(d, env, owner)
            env.add(d.name, fs)
            for a in d.attrs:
                if a.name in ("ForwardDerivativeOf", "BackwardDerivativeOf", "PrimalSubstituteOf") and a.args:
                    self.deriv_of.append((fs, a.name, a.args[0]))
        elif isinstance(d, ast.StructDecl):
            env.add(d.name, StructSym(d, env, owner))
        elif isinstance(d, ast.InterfaceDecl):
            env.add(d.name, InterfaceSym(d, env, owner))
        elif isinstance(d, ast.TypeAliasDecl):
            env.add(d.name, AliasSym(d, env, owner))
        elif isinstance(d, ast.EnumDecl):
            sym = EnumSym(d, env, owner)
            env.add(d.name, sym)
            if not d.is_class:      # plain enums put their cases in the enclosing scope too
                for c in d.cases:
                    env.add(c.name, sym)
        elif isinstance(d, ast.VarDecl):
            env.add(d.name, GlobalSym(d, env, owner))
        elif isinstance(d, ast.NamespaceDecl):
            parts = d.name.replace("::", ".").split(".")
            target = env
            for p in parts:
                existing = [s for s in target.lookup_local(p) if isinstance(s, NamespaceSym)]
                if existing:
                    target = existing[0].env
                else:
                    ns_env = Env(target, "namespace")
                    target.add(p, NamespaceSym(p, ns_env))
                    target = ns_env
            for m in d.members:
                self.declare(m, target)
        elif isinstance(d, ast.UsingDecl):
            res = self.resolve(d.target, self.ctx_for_env(env))
            if not isinstance(res, NamespaceRes):
                raise self.err("E2001", "`using` needs a namespace", d.loc)
            env.usings.append(res.env)
        elif isinstance(d, ast.ExtensionDecl):
            self.extensions.append((d, env))
            self._ext_cache.clear()
        elif isinstance(d, ast.CBufferDecl):
            sym = GlobalSym(d, env, owner)
            env.add(d.name, sym)
            for m in d.members:
                if isinstance(m, ast.VarDecl):
                    env.add(m.name, CBufferMemberSym(m, env, sym))
        elif isinstance(d, ast.ImportDecl):
            if d.kind == "module" or d.kind == "implementing":
                return
            if self.module_loader is None:
                raise self.err("E2002", f"cannot import '{d.module}'", d.loc)
            key, mod = self.module_loader(d.module, d.is_path, d.loc)
            if key in self.modules_loaded:
                menv = self.modules_loaded[key]
                if menv is env:
                    raise self.err("E2006", f"module imports itself ('import {d.module}')", d.loc)
                if id(menv) in self.__dict__.get("_declaring", ()):
                    raise self.err("E2006", f"recursive module import: '{d.module}' imports this module, "
                                            f"directly or through other modules", d.loc)
            else:
                menv = Env(self.core_env, "module")
                self.modules_loaded[key] = menv
                self.declare_module(mod, menv)
            if menv not in env.usings:
                env.usings.append(menv)
        elif isinstance(d, (ast.PropertyDecl,)):
            env.add(d.name, PropertySym(d, env, owner))
        elif isinstance(d, ast.SubscriptDecl):
            env.add("__subscript", SubscriptSym(d, env, owner))
        elif isinstance(d, ast.AssocTypeDecl):
            env.add(d.name, AssocTypeSym(d, env, owner))
        else:
            raise self.err("E2003", f"unsupported declaration {type(d).__name__}", d.loc)

    # ------------------------------------------------------------------ type expressions

    def resolve_type(self, e: ast.Expr, ctx) -> T.Type:
        res = self.resolve(e, ctx)
        if isinstance(res, TypeRes):
            return res.type
        if isinstance(res, GenericRes) and isinstance(res.sym, StructSym):
            # A generic used without arguments: all parameters must have defaults.
            return self.instantiate_struct(res.sym, [], e.loc, ctx)
        raise self.err("E2010", f"'{describe(e)}' is not a type", e.loc)

    def builtin_type(self, name: str) -> Optional[T.Type]:
        s = T.SCALAR_NAMES.get(name)
        if s is not None:
            return s
        # floatN / floatNxM / int64_t3 ...
        for prefix in sorted(T.VECTOR_PREFIXES, key=len, reverse=True):
            if name.startswith(prefix) and len(name) > len(prefix):
                rest = name[len(prefix):]
                if len(rest) == 1 and rest in "1234":
                    return T.VectorType(T.VECTOR_PREFIXES[prefix], int(rest))
                if len(rest) == 3 and rest[0] in "1234" and rest[1] == "x" and rest[2] in "1234":
                    return T.MatrixType(T.VECTOR_PREFIXES[prefix], int(rest[0]), int(rest[2]))
        if name == "String" or name == "string":
            return T.StringType()
        return None

    def builtin_generic_type(self, name: str, args: list, loc: Loc) -> Optional[T.Type]:
        def need(n):
            if len(args) != n:
                raise self.err("E2011", f"'{name}' takes {n} generic argument(s), got {len(args)}", loc)
        if name == "vector":
            need(2)
            return T.VectorType(self.as_type_arg(args[0], loc), self.as_dim(args[1], loc, "vector element count"))
        if name == "CoopVec":
            # A cooperative vector is a vector of any length here (plain arrays on the CPU,
            # registers on CUDA): the vector operators, math and derivative rules apply.
            need(2)
            n = self.as_count(args[1], loc)
            if isinstance(n, int) and n < 1:
                raise self.err("E2022", f"invalid CoopVec element count {n}: must be at least 1", loc)
            return T.VectorType(self.as_type_arg(args[0], loc), n)
        if name == "matrix":
            if len(args) == 4:
                args = args[:3]
            need(3)
            return T.MatrixType(self.as_type_arg(args[0], loc), self.as_dim(args[1], loc, "matrix row count"),
                                self.as_dim(args[2], loc, "matrix column count"))
        if name in BUFFER_KINDS:
            if "ByteAddress" in name:
                return T.BufferType(name, None)
            need(1)
            kind = name
            if name == "Buffer":
                kind = "StructuredBuffer"
            elif name == "RWBuffer":
                kind = "RWStructuredBuffer"
            return T.BufferType(kind, self.as_type_arg(args[0], loc))
        if name == "Atomic":
            need(1)
            et = self.as_type_arg(args[0], loc)
            if not isinstance(et, (T.ScalarType, T.TypeVar)):
                raise self.err("E2012", f"Atomic<{et}> needs a scalar type", loc)
            return T.AtomicType(et)
        if name == "Ptr":
            return T.PointerType(self.as_type_arg(args[0], loc))
        if name in ("ConstantBuffer", "ParameterBlock"):
            need(1)
            return self.as_type_arg(args[0], loc)
        if name == "Tuple":
            return T.TupleType(tuple(self.as_type_arg(a, loc) for a in args))
        if name == "Optional":
            need(1)
            return T.OptionalType(self.as_type_arg(args[0], loc))
        if name == "DifferentialPair":
            need(1)
            return self.pair_type(self.as_type_arg(args[0], loc), loc)
        if name == "DifferentialPtrPair":
            need(1)
            return self.ptr_pair_type(self.as_type_arg(args[0], loc), loc)
        if name == "Array":
            need(2)
            return T.ArrayType(self.as_type_arg(args[0], loc), self.array_size(self.as_count(args[1], loc), loc))
        return None

    def as_type_arg(self, a, loc) -> T.Type:
        if isinstance(a, T.Type):
            return a
        raise self.err("E2013", f"expected a type argument, got a value", loc)

    def as_count(self, a, loc):
        if isinstance(a, T.ValueVar):
            return a
        if isinstance(a, bool):
            return int(a)
        if isinstance(a, int):
            return a
        raise self.err("E2014", "expected a constant integer argument", loc)

    def as_dim(self, a, loc, what: str):
        """A vector length or matrix row/column count: a constant 1..4 (or a generic value)."""
        n = self.as_count(a, loc)
        if isinstance(n, int) and n > 4 and what == "vector element count" and _in_core(loc):
            return n          # the core library's vector<T,N> functions also serve CoopVec<T,N>
        if isinstance(n, int) and not 1 <= n <= 4:
            raise self.err("E2022", f"invalid {what} {n}: must be 1 to 4", loc)
        return n

    def array_size(self, n, loc):
        if isinstance(n, int) and n < 0:
            raise self.err("E2022", f"invalid array size {n}: must not be negative", loc)
        if isinstance(n, int) and n > 0x7FFFFFFF:
            raise self.err("E2022", f"invalid array size {n}: must be at most 2147483647 (an int)", loc)
        return n

    def generic_args(self, args: list[ast.Expr], ctx) -> list:
        """Generic arguments are types or constant values."""
        out = []
        for a in args:
            res = self.resolve(a, ctx)
            if isinstance(res, TypeRes):
                out.append(res.type)
            elif isinstance(res, GenericRes) and isinstance(res.sym, StructSym):
                out.append(self.instantiate_struct(res.sym, [], a.loc, ctx))
            elif isinstance(res, ValueRes):
                v = self.fold(res.expr)
                if v is None:
                    if isinstance(res.expr, ir.ValueVarExpr):
                        out.append(res.expr.var)
                        continue
                    raise self.err("E2015", "generic value argument must be a compile-time constant", a.loc)
                out.append(v)
            else:
                raise self.err("E2016", f"invalid generic argument '{describe(a)}'", a.loc)
        return out

    # ------------------------------------------------------------------ generic binding

    def bind_generics(self, params: list[ast.GenericParam], args: list, env: Env, loc: Loc, ctx) -> Env:
        """A child environment binding generic parameters to concrete arguments (or defaults)."""
        genv = Env(env, "generic")
        if len(args) > len(params) and not any(p.kind == "pack" for p in params):
            raise self.err("E2017", f"too many generic arguments: expected {len(params)}, got {len(args)}", loc)
        for i, p in enumerate(params):
            if i < len(args):
                a = args[i]
            elif p.default is not None:
                dctx = self.ctx_for_env(genv)
                a = self.generic_args([p.default], dctx)[0]
            else:
                raise self.err("E2018", f"cannot infer generic argument '{p.name}'", loc)
            if p.kind == "value":
                genv.add(p.name, ValueSym(p.name, const_expr(a, loc)))
            else:
                genv.add(p.name, TypeSym(p.name, a))
        return genv

    def generic_key(self, args) -> tuple:
        return tuple((type(a).__name__, a if not isinstance(a, T.NominalType) else id(a)) for a in args)

    # ------------------------------------------------------------------ structs

    def instantiate_struct(self, sym: StructSym, args: list, loc: Loc, ctx=None) -> T.StructType:
        d: ast.StructDecl = sym.decl
        n_req = sum(1 for p in d.generic_params if p.default is None)
        if len(args) < n_req and not d.generic_params == []:
            raise self.err("E2019", f"'{d.name}' needs {n_req} generic argument(s)", loc)
        # Fill defaults so Foo and Foo<default> are one type.
        genv = self.bind_generics(d.generic_params, args, sym.env, loc, ctx)
        full_args = []
        for p in d.generic_params:
            s = genv.names[p.name][0]
            full_args.append(s.type if isinstance(s, TypeSym) else
                             (s.expr.var if isinstance(s.expr, ir.ValueVarExpr) else s.expr.value))
        key = self.generic_key(full_args) + ((None, id(sym.owner)) if sym.owner is not None else ())
        if key in sym.cache:
            return sym.cache[key]
        name = d.name if not full_args else f"{d.name}<{','.join(map(str, full_args))}>"
        st = T.StructType(name, None, tuple(full_args))
        inst = StructInstance(sym, tuple(full_args), None, st)
        st.info = inst
        sym.cache[key] = st
        try:
            return self._build_struct(d, inst, st, genv, full_args)
        except CompileError:
            # A failed build (e.g. an unresolvable base, probed by a caller that recovers) must not leave a
            # half-built struct behind for later lookups to use.
            sym.cache.pop(key, None)
            raise

    def _build_struct(self, d: ast.StructDecl, inst: StructInstance, st: T.StructType, genv, full_args):
        if any(T.contains_vars(a) if not isinstance(a, (int, float, bool)) else False for a in full_args):
            # A pattern used only for inference: no members needed.
            inst.env = genv
            return st
        menv = Env(genv, "struct")
        menv.this_type = st
        menv.add("This", TypeSym("This", st))
        inst.env = menv
        inst.c_name = self.unique(d.name)
        for m in d.members:
            if isinstance(m, ast.VarDecl) and "static" not in m.mods:
                continue
            self.declare(m, menv, owner=st)
        # Fields are resolved after members are declared so they can name nested types.
        fctx = self.ctx_for_env(menv)
        # `struct Derived : Base`: Base's fields come first (and its conformances are Derived's).
        inherited, struct_bases = [], set()
        for b in d.bases:
            try:
                res = self.resolve(b, fctx)
            except CompileError:
                continue
            bt = res.type if isinstance(res, TypeRes) else None
            if isinstance(bt, T.StructType) and bt.info is not None and bt.info.ready:
                inherited.append(bt)
                struct_bases.add(id(b))
                for f in bt.info.fields:
                    inst.fields.append(f)
                # Its members, checked again as Derived's (they name the same leading fields), in a
                # layer of their own that Derived's members hide: a base method calls the base's
                # methods even where Derived declares one of the same name, as in Slang.
                menv.usings.append(self.inherited_layer(bt, st))
        for m in d.members:
            if isinstance(m, ast.VarDecl) and "static" not in m.mods:
                ft = self.resolve_type(m.type, fctx)
                if any(f[0] == m.name for f in inst.fields):
                    raise self.err("E2005", f"'{d.name}' already has a field named '{m.name}'", m.loc)
                inst.fields.append((m.name, ft, m.init, menv))
                menv.add(m.name, FieldSym(m.name, ft))
        inst.bases = [self.resolve_base(b, fctx) for b in d.bases if id(b) not in struct_bases]
        for bt in inherited:
            inst.bases += [x for x in bt.info.bases if all(x is not y for y in inst.bases)]
        inst.struct_bases = inherited
        inst.has_init = any(isinstance(m, ast.FuncDecl) and m.name == "__init" for m in d.members)
        self.structs.append(inst)
        inst.ready = True
        return st

    def inherited_layer(self, bt: T.StructType, st: T.StructType) -> Env:
        """The members struct `bt` declares (fields, methods, properties, subscripts; not its
        constructors), re-declared for the derived struct `st`, with bt's own bases behind them."""
        layer = Env(bt.info.env.parent, "struct")
        layer.this_type = st
        layer.inherited_for = st                 # `this.m` in these members means bt's m (members.py)
        bdecl = bt.info.sym.decl
        own_fields = {m.name for m in bdecl.members if isinstance(m, ast.VarDecl) and "static" not in m.mods}
        for f in bt.info.fields:
            if f[0] in own_fields:
                layer.add(f[0], FieldSym(f[0], f[1]))
        for m in bdecl.members:
            if isinstance(m, (ast.FuncDecl, ast.PropertyDecl, ast.SubscriptDecl)):
                if getattr(m, "name", "") != "__init":
                    self.declare(m, layer, owner=st)
            elif not (isinstance(m, ast.VarDecl) and "static" not in m.mods) and getattr(m, "name", None):
                for sym in bt.info.env.names.get(m.name, ()):     # nested types, statics: bt's own
                    layer.add(m.name, sym)
        for bb in getattr(bt.info, "struct_bases", ()):
            layer.usings.append(self.inherited_layer(bb, st))
        return layer

    def resolve_base(self, b: ast.Expr, ctx):
        res = self.resolve(b, ctx)
        if isinstance(res, TypeRes):
            return res.type
        if isinstance(res, GenericRes) and isinstance(res.sym, InterfaceSym):
            return self.instantiate_interface(res.sym, [], b.loc, ctx)
        if isinstance(res, BuiltinIfaceRes):
            return res
        raise self.err("E2020", f"'{describe(b)}' is not an interface", b.loc)

    def instantiate_interface(self, sym: InterfaceSym, args: list, loc: Loc, ctx=None) -> T.InterfaceType:
        key = self.generic_key(args)
        if key in sym.cache:
            return sym.cache[key]
        d: ast.InterfaceDecl = sym.decl
        genv = self.bind_generics(d.generic_params, args, sym.env, loc, ctx) if d.generic_params else Env(sym.env, "generic")
        name = d.name if not args else f"{d.name}<{','.join(map(str, args))}>"
        it = T.InterfaceType(name, None, tuple(args))
        inst = InterfaceInstance(sym, tuple(args), genv)
        it.info = inst
        sym.cache[key] = it
        ictx = self.ctx_for_env(genv)
        inst.bases = [self.resolve_base(b, ictx) for b in d.bases]
        return it

    # ------------------------------------------------------------------ conformance

    def where_holds(self, w: ast.WhereClause, ctx) -> bool:
        """`where A : IFoo` (A conforms) or `where A == B` (the same type), with the generics bound in ctx."""
        subj = self.resolve_type(w.subject, ctx)
        if w.equal:
            return types_equal(subj, self.resolve_type(w.constraint, ctx))
        return self.conforms(subj, self.resolve_base(w.constraint, ctx))

    def conforms(self, t: T.Type, iface) -> bool:
        """Does type t satisfy the constraint `iface` (an InterfaceType or BuiltinIfaceRes)?"""
        if isinstance(iface, BuiltinIfaceRes):
            r = T.builtin_conforms(t, iface.name)
            if r:
                return True
            if isinstance(t, T.StructType):
                return any(isinstance(b, BuiltinIfaceRes) and b.name == iface.name or
                           (isinstance(b, T.InterfaceType) and self.iface_extends(b, iface))
                           for b in self.all_bases(t)) or iface.name in ("IDefaultInitializable",)
            return bool(r)
        if not isinstance(iface, T.InterfaceType):
            return False
        if t is iface:
            return True
        for b in self.all_bases(t):
            if b is iface or (isinstance(b, T.InterfaceType) and self.iface_extends(b, iface)):
                return True
            if isinstance(b, T.InterfaceType) and b.info.sym is iface.info.sym and not iface.args:
                return True
        return False

    def iface_extends(self, a: T.InterfaceType, b) -> bool:
        if a is b:
            return True
        if isinstance(b, BuiltinIfaceRes):
            return any(isinstance(x, BuiltinIfaceRes) and x.name == b.name or
                       (isinstance(x, T.InterfaceType) and self.iface_extends(x, b)) for x in a.info.bases)
        return any(isinstance(x, T.InterfaceType) and self.iface_extends(x, b) for x in a.info.bases)

    def all_bases(self, t: T.Type) -> list:
        out = []
        if isinstance(t, T.StructType) and t.info is not None and t.info.env is not None:
            out.extend(t.info.bases)
        for d, env, tenv in self.extensions_for(t):
            ctx = self.ctx_for_env(tenv)
            for b in d.bases:
                out.append(self.resolve_base(b, ctx))
        return out

    def check_conformance(self, inst: "StructInstance"):
        """Every requirement of every interface a struct declares must be provided (by the
        struct, an extension, or a default in the interface)."""
        t = inst.type
        if getattr(inst, "differential_of", None) is not None:
            return
        seen = set()
        todo = [b for b in inst.bases if isinstance(b, T.InterfaceType)]
        while todo:
            it = todo.pop()
            if id(it) in seen:
                continue
            seen.add(id(it))
            todo.extend(b for b in it.info.bases if isinstance(b, T.InterfaceType))
            for m in it.info.sym.decl.members:
                name = getattr(m, "name", None)
                if isinstance(m, ast.FuncDecl) and m.body is not None:
                    continue
                if isinstance(m, ast.VarDecl) and m.init is not None:
                    continue
                if name is None or name == "__init":
                    continue
                if not self.member_syms(t, name) and not (isinstance(m, ast.AssocTypeDecl) and name == "Differential"):
                    raise self.err("E2060", f"'{t}' does not implement '{name}' required by interface "
                                            f"'{it}'", inst.sym.decl.loc)

    # ------------------------------------------------------------------ extensions

    def extensions_for(self, t: T.Type) -> list:
        """(extension decl, env, env-with-generics-bound) for every extension that applies to t."""
        key = t if not isinstance(t, T.NominalType) else id(t)
        if key in self._ext_cache:
            return self._ext_cache[key]
        self._ext_cache[key] = []      # guards recursion through conformance checks
        out = []
        for d, env in self.extensions:
            tenv = self.match_extension(d, env, t)
            if tenv is not None:
                out.append((d, env, tenv))
        self._ext_cache[key] = out
        return out

    def match_extension(self, d: ast.ExtensionDecl, env: Env, t: T.Type) -> Optional[Env]:
        ctx = self.ctx_for_env(env)
        if not d.generic_params:
            try:
                target = self.resolve_type(d.target, ctx)
            except CompileError:
                return None
            if not types_equal(target, t):
                return None
            menv = Env(env, "struct")
            menv.this_type = t
            menv.add("This", TypeSym("This", t))
            if isinstance(t, T.StructType) and t.info.env is not None:
                menv.usings.append(t.info.env)     # extension bodies see the fields by name
            return menv
        # extension<T : IFoo> T / extension<T> Foo<T>: infer the parameters by matching.
        vars_ = {}
        genv = Env(env, "generic")
        for p in d.generic_params:
            if p.kind == "value":
                v = T.ValueVar(p.name, next_placeholder_id())
                genv.add(p.name, ValueSym(p.name, ir.ValueVarExpr(T.INT, v)))
            else:
                v = T.TypeVar(p.name, next_placeholder_id())
                genv.add(p.name, TypeSym(p.name, v))
            vars_[v] = p
        try:
            pattern = self.resolve_type(d.target, self.ctx_for_env(genv))
        except CompileError:
            return None
        binding: dict = {}
        if not self.unify(pattern, t, binding):
            return None
        args = []
        for v, p in vars_.items():
            if v not in binding:
                return None
            args.append(binding[v])
        benv = self.bind_generics(d.generic_params, args, env, d.loc, None)
        cctx = self.ctx_for_env(benv)
        for p, a in zip(d.generic_params, args):
            if p.kind == "type" and p.type is not None:
                for pc in [p.type] + p.also:
                    if not self.conforms(a, self.resolve_base(pc, cctx)):
                        return None
        if not all(self.where_holds(w, cctx) for w in d.where):
            return None
        menv = Env(benv, "struct")
        menv.this_type = t
        menv.add("This", TypeSym("This", t))
        if isinstance(t, T.StructType) and t.info.env is not None:
            menv.usings.append(t.info.env)
        return menv

    # ------------------------------------------------------------------ globals

    def global_var(self, sym: GlobalSym, loc: Loc) -> ir.GlobalVar:
        if "var" in sym.cache:
            return sym.cache["var"]
        d = sym.decl
        if isinstance(d, ast.VarDecl) and "extern" in d.mods and d.init is None:
            # `extern static const N;` is linked to an `export static const N = ...` of any module.
            for env in [self.core_env] + list(self.modules_loaded.values()):
                for other in env.lookup_local(d.name):
                    if isinstance(other, GlobalSym) and other is not sym and \
                            isinstance(other.decl, ast.VarDecl) and other.decl.init is not None:
                        g = self.global_var(other, loc)
                        sym.cache["var"] = g
                        return g
        ctx = self.ctx_for_env(sym.env)
        if isinstance(d, ast.CBufferDecl):
            st = self.cbuffer_struct(sym)
            g = ir.GlobalVar(self.unique(d.name), st, "uniform", loc=d.loc)
            g.slang_name = d.name
            sym.cache["var"] = g
            self.globals.append(g)
            return g
        mods = d.mods
        if d.type is None:
            init = self.expr(d.init, ctx)
            ty = init.type
        else:
            ty = self.resolve_type(d.type, ctx)
            init = None
        if "groupshared" in mods:
            kind = "groupshared"
        elif "static" in mods or "const" in mods and "uniform" not in mods:
            kind = "const" if "const" in mods else "static"
        else:
            kind = "uniform"
        base_ty = ty.elem if isinstance(ty, T.ArrayType) else ty
        if kind == "uniform" and isinstance(base_ty, T.InterfaceType):
            # Its concrete type would come from the host (Slang specializes or binds an
            # existential object); the parameter block has no way to say which.
            raise self.err("E5013", f"uniform '{d.name}' of interface type '{base_ty.name}' is not supported: "
                                    f"make the shader generic over the type, or pass a conformance id and "
                                    f"build it with createDynamicObject", d.loc)
        inner = base_ty.elem if isinstance(base_ty, (T.PointerType, T.BufferType)) else None
        if kind == "uniform" and inner is not None:
            # Interface values in memory: Slang's serialized existentials (check/dynamic.py).
            self.dyn_in_memory(inner, f"'{d.name}'", d.loc)
        if d.init is not None and init is None and kind != "uniform":
            if isinstance(ty, T.ArrayType) and ty.n is None and isinstance(d.init, ast.InitList):
                ty = T.ArrayType(ty.elem, len(d.init.items))
            init = self.coerce_init(d.init, ty, ctx)
        g = ir.GlobalVar(self.unique(d.name), ty, kind, init, loc=d.loc)
        g.slang_name = d.name
        sym.cache["var"] = g
        self.globals.append(g)
        return g

    def cbuffer_struct(self, sym: GlobalSym) -> T.StructType:
        if "struct" in sym.cache:
            return sym.cache["struct"]
        d = sym.decl
        fake = ast.StructDecl(d.name, [m for m in d.members], loc=d.loc)
        ssym = StructSym(fake, sym.env)
        st = self.instantiate_struct(ssym, [], d.loc)
        sym.cache["struct"] = st
        return st

    # ------------------------------------------------------------------ contexts

    def ctx_for_env(self, env: Env):
        return FuncCtx(self, env, None)


_CORE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "core")


def _in_core(loc) -> bool:
    f = getattr(loc, "file", None)
    path = getattr(f, "path", None)
    return isinstance(path, str) and os.path.dirname(os.path.abspath(path)) == _CORE_DIR
