"""Stage 3 of the compiler, whole: syntax trees -> the checked program (ir/program.py).

`check_program` declares the core library and the user's modules, instantiates the entry points and
every uniform, checks every body that instantiation reached, records what autodiff will need
(check/derivatives.py) and seals it.  The fix-point (bodies instantiate structs and functions,
derivative facts instantiate custom derivatives and Differential structs, ...) is inside this stage.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

from ..parse import ast
from ..ir.program import Program
from .. import types as T
from ..source import Loc, error
from .activity import check_differentiability, check_uninstantiated
from .checker import Checker
from .scope import Env, FuncSym, GlobalSym
from .stmts import FuncCtx


def make_checker(core: list, *, target: str, type_conformances: Sequence = (),
                 module_loader: Callable = None, on_demand: tuple = None) -> Checker:
    """A checker with the core library (parsed ast.Modules) declared.  module_loader(name, is_path,
    loc) -> (key, ast.Module or None) finds an `import`ed module (the driver's search path).
    type_conformances: (interface name, type name, id, parsed type expression or None).
    on_demand: (trigger names, load) -- core modules declared when a trigger name is first looked up
    (scope.py CoreEnv); load() -> their parsed ast.Modules, in the order an eager declaration would take."""
    checker = Checker()
    checker.core_env.module = "core"
    checker.target = target
    checker.type_conformances = [tuple(tc)[:3] for tc in type_conformances or ()]
    # (interface, type name, id, the type name's parsed expression or None) -> name: expression
    checker.conformance_type_exprs = {str(tc[1]): tc[3] for tc in type_conformances or () if len(tc) > 3}
    for m in core:
        checker.declare_module(m, checker.core_env)
    checker.module_loader = module_loader
    if on_demand is not None:
        triggers, load = on_demand
        checker.core_env.triggers = frozenset(triggers)
        checker.core_env.on_demand = lambda: _declare_first(checker, load())
    return checker


def _declare_first(checker: Checker, modules: list) -> None:
    """Declare core `modules` now, their symbols ahead of those already declared (names, extensions, derivative
    attributes): lookups see what they would have seen had the modules been declared before the others."""
    env = checker.core_env
    before = {k: len(v) for k, v in env.names.items()}
    n_ext, n_der = len(checker.extensions), len(checker.deriv_of)
    for m in modules:
        checker.declare_module(m, env)
    for k, syms in env.names.items():
        old = before.get(k, 0)
        if old and len(syms) > old:
            syms[:] = syms[old:] + syms[:old]
    checker.extensions[:] = checker.extensions[n_ext:] + checker.extensions[:n_ext]
    checker.deriv_of[:] = checker.deriv_of[n_der:] + checker.deriv_of[:n_der]
    checker._ext_cache.clear()


def check_program(checker: Checker, modules: list, entry_points: Sequence[str]) -> Program:
    """modules: the user's parsed ast.Modules -> the checked program."""
    module_envs = []
    for mod in modules:
        env = Env(checker.core_env, "module")
        env.module = mod.path
        checker.modules_loaded[os.path.realpath(mod.path)] = env
        checker.declare_module(mod, env)
        module_envs.append((mod, env))

    entries = [_entry(checker, name, module_envs, modules) for name in entry_points]

    # Every uniform of the user modules is bindable, used or not.
    for mod, env in module_envs:
        _instantiate_uniforms(checker, mod.decls, env)

    _finish(checker)
    n = len(checker.functions)
    check_differentiability(checker.functions, checker.derivs, checker.derivs.struct_facts, checker)
    if len(checker.functions) != n:
        _finish(checker)            # facts the analysis asked for may have instantiated more
    # slangc checks every [Differentiable] function it compiles, called or not (restores the checker)
    check_uninstantiated(checker, module_envs, _finish)
    checker.derivs.source.check_derivative_targets()
    _check_custom_derivatives(checker, [env for _, env in module_envs])
    checker.derivs.source.check_no_self_differentiation(checker.functions)
    checker.derivs.seal()
    return Program(functions=checker.functions, globals=checker.globals, entries=entries,
                   uses_group_barrier=checker.uses_group_barrier, warnings=checker.warnings,
                   derivatives=checker.derivs)


def _entry(checker: Checker, name: str, module_envs: list, modules: list):
    syms = []
    for mod, env in module_envs:
        syms = [s for s in env.lookup_local(name) if isinstance(s, FuncSym)]
        if syms:
            break
    if not syms:
        raise error("E5001", f"entry point '{name}' not found", Loc(None, 0, 0) if not modules else
                    modules[0].loc)
    sym = syms[0]
    if sym.decl.generic_params:
        if any(a.name == "numthreads" for a in sym.decl.attrs):
            raise error("E5002", f"entry point '{name}' must not be generic", sym.decl.loc)
        implicit = [p.name for p in sym.decl.params if isinstance(p.type, ast.GenericApp) and
                    any(isinstance(x, ast.Name) and x.name.startswith(f"__{p.name}_") for x in p.type.args)]
        why = (f"its parameter(s) {', '.join(repr(n) for n in implicit)} take an interface without generic "
               f"arguments, so their types come from each call" if implicit else "it is generic")
        raise error("E5002", f"'{name}' is not a compute kernel (no [numthreads], and {why}): call it from "
                             f"Python through the functional API (`module = spy.Module.load_from_file(device, "
                             f"path); module.{name}(...)`, which generates the kernel for the arguments "
                             f"given), or compile a [numthreads(...)] kernel that calls it with concrete "
                             f"types", sym.decl.loc)
    fn = checker.instantiate_function(sym, [], sym.decl.loc)
    numthreads = (1, 1, 1)
    for a in sym.decl.attrs:
        if a.name == "numthreads":
            ctx = checker.ctx_for_env(sym.env)
            vals = [checker.fold(checker.expr(x, ctx)) for x in a.args]
            if not 1 <= len(vals) <= 3 or any(not isinstance(v, int) or isinstance(v, bool) or v <= 0
                                               for v in vals):
                raise error("E5004", "[numthreads] needs one to three positive constant integers", a.loc)
            vals = list(vals) + [1] * (3 - len(vals))
            numthreads = tuple(vals)
            x, y, z = numthreads
            if x > MAX_GROUP[0] or y > MAX_GROUP[1] or z > MAX_GROUP[2] or x * y * z > MAX_GROUP_THREADS:
                raise error("E5005", f"[numthreads({x}, {y}, {z})] exceeds the thread group limits "
                            f"(x, y <= {MAX_GROUP[0]}, z <= {MAX_GROUP[2]}, "
                            f"x*y*z <= {MAX_GROUP_THREADS})", a.loc)
    _check_system_values(sym.decl, fn)
    return fn, numthreads


# Thread-group limits of the GPUs slangjit targets (D3D12 / CUDA compute): per dimension and in all.
MAX_GROUP = (1024, 1024, 64)
MAX_GROUP_THREADS = 1024
_VECTOR_SYSTEM_VALUES = {"sv_dispatchthreadid", "sv_groupid", "sv_groupthreadid"}


def _check_system_values(decl, fn):
    """SV_DispatchThreadID / SV_GroupID / SV_GroupThreadID are integer scalars or vectors of at
    most 3 components; SV_GroupIndex is an integer scalar."""
    for ap, p in zip(decl.params, fn.params):
        sem = (ap.semantic or "").lower()
        if sem not in _VECTOR_SYSTEM_VALUES and sem != "sv_groupindex":
            continue
        t = p.type
        elem = t.elem if isinstance(t, T.VectorType) else t
        ok = isinstance(elem, T.ScalarType) and elem.kind in ("int", "uint")
        if isinstance(t, T.VectorType):
            ok = ok and sem in _VECTOR_SYSTEM_VALUES and isinstance(t.n, int) and t.n <= 3
        if not ok:
            want = "an integer scalar" if sem == "sv_groupindex" else "an integer scalar or vector of up to 3 components (uint3)"
            raise error("E5006", f"system value '{ap.semantic}' must be {want}, got '{t}'", ap.loc)



def _instantiate_uniforms(checker: Checker, decls, env):
    for d in decls:
        if isinstance(d, ast.VarDecl):
            if not ({"static", "groupshared"} & d.mods) and not ("const" in d.mods and "uniform" not in d.mods):
                syms = [s for s in env.lookup_local(d.name) if isinstance(s, GlobalSym)]
                if syms:
                    checker.global_var(syms[0], d.loc)
        elif isinstance(d, ast.CBufferDecl):
            syms = [s for s in env.lookup_local(d.name) if isinstance(s, GlobalSym)]
            if syms:
                checker.global_var(syms[0], d.loc)


def _finish(checker: Checker):
    """Check function bodies, struct conformance and field defaults, and record the derivative
    facts, until nothing new is instantiated."""
    resolver = checker.derivs.source
    done_structs = set()
    while True:
        checker.check_pending_bodies()
        new = [s for s in checker.structs if id(s) not in done_structs]
        for inst in new:
            done_structs.add(id(inst))
            checker.check_conformance(inst)
            defaults = []
            for name, ft, init, env in inst.fields:
                if init is None:
                    defaults.append(None)
                else:
                    defaults.append(checker.coerce_init(init, ft, FuncCtx(checker, env, None)))
            inst.field_defaults = defaults
        if new:
            continue
        if checker.pending_bodies or resolver.prepare():
            continue
        break
    if checker.body_errors:
        raise checker.body_errors[0]


_CUSTOM = (("ForwardDerivative", "fwd"), ("BackwardDerivative", "bwd"))


def _check_custom_derivatives(checker: Checker, envs: list):
    """A `[ForwardDerivative(g)]` / `[BackwardDerivative(g)]` whose g does not match is an error where it is
    declared, as in Slang -- also when the function is never differentiated (or never called: the
    non-generic free functions of the user's modules are instantiated for this)."""
    def customs(d):
        return [mode for name, mode in _CUSTOM if any(a.name == name and a.args for a in d.attrs)]

    for env in envs:
        for syms in list(env.names.values()):
            for sym in syms:
                d = getattr(sym, "decl", None)
                if isinstance(sym, FuncSym) and sym.owner is None and isinstance(d, ast.FuncDecl) and \
                        not d.generic_params and d.body is not None and customs(d):
                    checker.instantiate_function(sym, [], d.loc)
    _finish(checker)
    resolver = checker.derivs.source
    for fn in list(checker.functions):
        d = fn.attrs.get("decl")
        if isinstance(d, ast.FuncDecl) and fn.attrs.get("generated_derivative") is None:
            for mode in customs(d):
                resolver.find_custom(fn, mode)
    _finish(checker)
