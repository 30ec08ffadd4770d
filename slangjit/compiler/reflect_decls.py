"""Declaration reflection: what a module declares, answered by the checker (stage 8).

The functional layer (slangjit/functional) asks this module, never the syntax tree, for the facts it needs
about a Slang module: its functions and struct methods with their overloads (parameter names, directions,
types, `no_diff`, defaults, generic parameters, differentiability), struct types with their fields and
layouts, enum types, type lookup by name (`float3`, `vector<float,3>`, `Tensor<float,2>`, `MLVec<16>`), and
the Differential of a type as the compiler synthesizes it.  Types are the compiler's own (`compiler.types`);
layouts are `reflection.TypeLayout` as the emitter computes them.

    decls = ModuleDecls.load(text, path, include_paths)
    [f] = decls.functions("polynomial")
    f.params[0].name, f.params[0].type, f.params[0].direction
    decls.find_type("S")  -> StructType;  decls.differential(t);  decls.layout(t).size

Generic functions: `FunctionDecl.params` hold the parameter *patterns*, in which each generic parameter is
an inference variable (`types.TypeVar` / `types.ValueVar` named like the parameter); `FunctionDecl.signature`
gives the concrete parameter and return types once the caller has chosen the generic arguments.
Nothing is checked beyond declarations: function bodies are the compiler's business when the generated
kernel is compiled.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from .frontend import _defines_from_args, _parse, new_checker
from . import types as T
from .check.checker import Checker
from .check.results import BuiltinIfaceRes, GenericRes, TypeRes
from .ir import nodes as ir
from .check.scope import Env, FuncSym, InterfaceSym, StructSym
from .check.samples import describe_sample, errors_in_all, sample_struct_args, sample_type_args
from .layout import type_layout
from .parse import ast
from .parse.parser import parse_module
from .reflection import TypeLayout
from .source import CompileError, Diagnostic, NO_LOC

_DIFF_ATTRS = {"Differentiable", "BackwardDifferentiable", "ForwardDifferentiable"}


@dataclass
class ParamDecl:
    name: str
    direction: str            # "in" "out" "inout" ("ref" reads as "inout")
    type: Any                 # compiler type (a pattern with TypeVar / ValueVar for generic functions)
    no_diff: bool = False
    has_default: bool = False


@dataclass
class GenericParamDecl:
    name: str
    kind: str                 # "type" "value" "pack"


@dataclass
class FunctionDecl:
    """One overload of a function or struct method, as the checker resolves its declaration."""
    name: str
    params: list
    return_type: Any                     # compiler type (pattern for generic functions); VOID when none
    differentiable: bool
    generic_params: list
    is_static: bool
    is_ctor: bool
    mutating: bool
    owner: Any = None                    # the struct type of a method
    sym: Any = field(default=None, repr=False)
    decls: Any = field(default=None, repr=False)

    @property
    def has_this(self) -> bool:
        return self.owner is not None and not self.is_static

    @property
    def key(self) -> int:
        """Identifies the declaration (stable across calls to ModuleDecls.functions)."""
        return id(self.sym.decl)

    def signature(self, generic_args: Sequence) -> tuple:
        """(parameter types, return type) with the generic parameters bound to `generic_args`
        (compiler types / ints, in declaration order)."""
        return self.decls._signature(self.sym, list(generic_args), self.owner)


class ModuleDecls:
    """The declarations of one module (and of what it imports), with a checker to resolve them."""

    def __init__(self, checker: Checker, env: Env):
        self.checker = checker
        self.env = env
        self._funcs: dict = {}

    @classmethod
    def load(cls, text: str, path: str, include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
             target: str = "cpp") -> "ModuleDecls":
        """Declare the module `text` (read from `path`) as compile_program would (same defines, include
        paths and `import` resolution)."""
        defines = _defines_from_args(compiler_args)
        checker, search = new_checker(target, include_paths, defines)
        mod = _parse(text, path, search, defines)
        env = Env(checker.core_env, "module")
        env.module = mod.path
        checker.modules_loaded[os.path.realpath(mod.path)] = env
        checker.declare_module(mod, env)
        return cls(checker, env)

    @classmethod
    def check_all(cls, text: str, path: str, include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
                  target: str = "cpp") -> list:
        """The diagnostics of every body the module declares that can be checked without generic arguments
        (its non-generic functions, and what they call), each error once; SlangPy reports these when a
        module is loaded. Uses a checker of its own: the declarations answered later see none of it."""
        m = cls.load(text, path, include_paths, compiler_args, target)
        chk = m.checker
        diags, seen = [], set()

        def note(e: CompileError):
            for d in e.diagnostics:
                key = (d.code, d.loc.line, d.loc.col, d.message)
                # E2056: an unbound `extern struct` type, which a call's link or prelude binds later
                if key not in seen and not d.code.startswith("E9") and d.code != "E2056":
                    seen.add(key)
                    diags.append(d)
        structs: list = []
        for syms in m.env.names.values():
            for s in syms:
                if isinstance(s, StructSym) and s.env is m.env and not s.decl.generic_params:
                    try:
                        structs.append(chk.instantiate_struct(s, [], s.decl.loc))
                    except CompileError:
                        pass

        def run(sym, args, sink):
            try:
                chk.instantiate_function(sym, args, sym.decl.loc)
            except CompileError as e:
                sink(e)
                return
            while chk.pending_bodies:
                try:
                    chk.check_pending_bodies()
                except CompileError as e:
                    sink(e)

        def check(sym):
            if sym.decl.body is None:
                return
            generic = bool(sym.decl.generic_params)
            if not generic:
                try:
                    ptypes = chk.param_types(sym, Env(sym.env, "generic"))
                except CompileError as e:
                    note(e)
                    return
                generic = any(isinstance(t, T.InterfaceType) for t in ptypes)
            if not generic:
                run(sym, [], note)
                return
            # A generic body (or one with interface-typed parameters): checked with sample
            # arguments; the errors every sample shows are the body's (check/samples.py).
            runs, first = [], None
            for args in sample_type_args(chk, sym, structs):
                found: list = []
                run(sym, args, lambda e: found.extend(e.diagnostics))
                runs.append(found)
                first = first or args
            for d in errors_in_all(runs):
                what = f"generic '{sym.decl.name}'" if sym.decl.generic_params else f"'{sym.decl.name}'"
                note(CompileError([Diagnostic(d.code, f"{d.message} (checking {what} with "
                                                      f"{describe_sample(sym, first)})", d.loc)]))
        def check_generic_struct(ssym):
            # a generic struct's (non-generic) methods, with sample generic arguments
            runs, first = [], None
            for args in sample_struct_args(chk, ssym, structs):
                found: list = []
                try:
                    t = chk.instantiate_struct(ssym, args, ssym.decl.loc)
                    for mem in ssym.decl.members:
                        if isinstance(mem, ast.FuncDecl) and not mem.generic_params:
                            for f in chk.member_syms(t, mem.name):
                                if isinstance(f, FuncSym) and f.decl is mem:
                                    run(f, [], lambda e: found.extend(e.diagnostics))
                except CompileError as e:
                    found.extend(e.diagnostics)
                runs.append(found)
                first = first or args
            for d in errors_in_all(runs):
                binds = ", ".join(f"{p.name} = {a}" for p, a in zip(ssym.decl.generic_params, first))
                note(CompileError([Diagnostic(d.code, f"{d.message} (checking generic '{ssym.decl.name}' with "
                                                      f"{binds})", d.loc)]))

        for name, syms in list(m.env.names.items()):
            for sym in syms:
                if isinstance(sym, FuncSym) and sym.env is m.env:
                    check(sym)
                elif isinstance(sym, StructSym) and sym.env is m.env and sym.decl.generic_params:
                    check_generic_struct(sym)
                elif isinstance(sym, StructSym) and sym.env is m.env and not sym.decl.generic_params:
                    # the methods of a non-generic struct
                    try:
                        t = chk.instantiate_struct(sym, [], sym.decl.loc)
                        for mem in sym.decl.members:
                            if isinstance(mem, ast.FuncDecl):
                                for f in chk.member_syms(t, mem.name):
                                    if isinstance(f, FuncSym) and f.decl is mem:
                                        check(f)
                    except CompileError as e:
                        note(e)
        return diags

    def _ctx(self, env: Optional[Env] = None):
        return self.checker.ctx_for_env(env or self.env)

    # ---------------------------------------------------------------- functions

    def functions(self, name: str) -> list:
        """Every overload of the function `name` visible in the module ([] when there is none)."""
        fs = self._funcs.get(name)
        if fs is None:
            syms = [s for s in self.env.lookup(name) if isinstance(s, FuncSym)]
            fs = self._funcs[name] = [self._function(s, None) for s in syms]
        return fs

    def methods(self, t: T.Type, name: str) -> list:
        """The overloads of struct t's method `name` (`__init` for constructors)."""
        syms = [s for s in self.checker.member_syms(t, name) if isinstance(s, FuncSym)]
        return [self._function(s, t) for s in syms]

    def _function(self, sym: FuncSym, owner) -> FunctionDecl:
        d: ast.FuncDecl = sym.decl
        chk = self.checker
        genv, _ = chk.fresh_generic_env(sym, [], d.loc)
        ptypes = chk.param_types(sym, genv)
        ctx = chk.ctx_for_env(genv)
        is_ctor = d.name == "__init"
        ret = owner if is_ctor else (T.VOID if d.return_type is None else chk.resolve_type(d.return_type, ctx))
        params = [ParamDecl(p.name, p.direction if p.direction in ("in", "out", "inout") else
                            ("inout" if p.direction == "ref" else "in"), pt, "no_diff" in p.mods,
                            p.default is not None) for p, pt in zip(d.params, ptypes)]
        attrs = {a.name for a in d.attrs}
        return FunctionDecl(d.name, params, ret, bool(attrs & _DIFF_ATTRS),
                            [GenericParamDecl(g.name, g.kind) for g in d.generic_params],
                            sym.is_static, is_ctor, "mutating" in d.mods or "mutating" in attrs,
                            owner, sym, self)

    def _signature(self, sym: FuncSym, args: list, owner) -> tuple:
        d: ast.FuncDecl = sym.decl
        chk = self.checker
        genv = chk.bind_generics(d.generic_params, args, sym.env, d.loc, None) if d.generic_params \
            else Env(sym.env, "generic")
        ptypes = chk.param_types(sym, genv)
        if d.name == "__init":
            ret = owner
        else:
            ret = T.VOID if d.return_type is None else chk.resolve_type(d.return_type, chk.ctx_for_env(genv))
        return ptypes, ret

    def generic_args(self, text: str) -> list:
        """`<4, float>` (the explicit generic arguments of a name such as `f<4, float>`) -> [4, FLOAT]."""
        e = self._parse_type(f"__G{text}")
        if not isinstance(e, ast.GenericApp):
            raise ValueError(f"not a generic argument list: {text!r}")
        return self.checker.generic_args(e.args, self._ctx())

    # ---------------------------------------------------------------- types

    def _parse_type(self, text: str) -> ast.Expr:
        mod = parse_module(f"typealias __sj_reflect = {text};", "<type>", [], {})
        return mod.decls[0].type

    def find_type(self, name: str) -> Optional[T.Type]:
        """The type named by `name` (any type expression) in the module's scope, None when it names none."""
        try:
            e = self._parse_type(name)
            res = self.checker.resolve(e, self._ctx())
        except CompileError:
            return None
        if isinstance(res, TypeRes):
            return res.type
        if isinstance(res, GenericRes) and isinstance(res.sym, StructSym):
            try:
                return self.checker.instantiate_struct(res.sym, [], e.loc, self._ctx())
            except CompileError:
                return None
        return None

    def apply(self, name: str, args: Sequence) -> Optional[T.Type]:
        """A generic struct / interface / builtin applied to arguments (compiler types / ints):
        apply("Tensor", [FLOAT, 2]) is `Tensor<float,2>`."""
        chk = self.checker
        b = chk.builtin_generic_type(name, list(args), NO_LOC)
        if b is not None:
            return b
        for s in self.env.lookup(name):
            if isinstance(s, StructSym):
                return chk.instantiate_struct(s, list(args), NO_LOC, self._ctx())
            if isinstance(s, InterfaceSym):
                return chk.instantiate_interface(s, list(args), NO_LOC, self._ctx())
        return None

    def generic_name(self, t: T.Type) -> Optional[str]:
        """The declared name of a struct / interface type ("Tensor" for `Tensor<float,2>`)."""
        info = getattr(t, "info", None)
        sym = getattr(info, "sym", None)
        return getattr(getattr(sym, "decl", None), "name", None)

    def declared_in(self, t: T.Type) -> Optional[str]:
        """The path of the module that declares struct / interface t."""
        info = getattr(t, "info", None)
        loc = getattr(getattr(getattr(info, "sym", None), "decl", None), "loc", None)
        f = getattr(loc, "file", None)
        return getattr(f, "path", None)

    def fields(self, t: T.Type) -> list:
        """[(name, type)] of a struct's fields in order ([] for other types and inference patterns)."""
        if isinstance(t, T.StructType) and t.info is not None and t.info.env is not None:
            return list(t.info.field_list())
        return []

    def differential(self, t: T.Type) -> Optional[T.Type]:
        """t.Differential as the compiler synthesizes it (None: not differentiable)."""
        if T.contains_vars(t):
            return None
        return self.checker.diff_type(t)

    def conforms_to(self, t: T.Type, interface: str) -> bool:
        iface = self.find_type(interface)
        if iface is None:
            return bool(self.checker.conforms(t, BuiltinIfaceRes(interface)))
        return bool(self.checker.conforms(t, iface))

    def enum_cases(self, t: T.EnumType) -> dict:
        """{case name: value} of an enum type."""
        return dict(t.info)


def layout(t: T.Type) -> TypeLayout:
    """Size, alignment and field offsets of t (the layout the generated code uses)."""
    return type_layout(t)


def size_align(t: T.Type) -> tuple:
    return T.size_align(t)


def is_value_var(x) -> bool:
    return isinstance(x, (T.ValueVar, ir.ValueVarExpr))


def builtin_type(name: str) -> Optional[T.Type]:
    """float, float3, int2x2, ... (the types every module knows by a plain name)."""
    return Checker().builtin_type(name)


def builtin_differential(t: T.Type) -> Optional[T.Type]:
    """The Differential of a type that involves no user declaration (scalars, vectors, matrices, arrays)."""
    if isinstance(t, (T.StructType, T.InterfaceType, T.EnumType)):
        return None
    return Checker().diff_type(t)
