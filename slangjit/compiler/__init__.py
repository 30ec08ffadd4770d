"""The compiler's public entry point: Slang source -> CompiledProgram (C++ or CUDA + reflection).

    parse (parser.py) -> check + lower to IR (check/) -> emit (emit/)

Parsing of the core library is done once per process.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Optional, Sequence

from .parse import ast
from . import frontend_cache   # every program load goes through it: imported with the compiler, not by the first load
from .source import CompileError, Diagnostic, Loc, NO_LOC, error
from .reflection import CompiledProgram

_CORE_DIR = os.path.join(os.path.dirname(__file__), "core")
_core_modules: Optional[list] = None


@dataclass
class SourceSpec:
    """One module to compile: from a file (`path`) or from text (`text`, with `name`)."""
    path: Optional[str] = None
    text: Optional[str] = None
    name: str = ""


def _parse(text: str, path: str, include_paths, defines):
    from .parse.parser import parse_module
    deps = frontend_cache.active_deps()        # front-end cache: record the files this compile reads
    if deps is not None and os.path.isfile(path):
        deps.append(path)
    return parse_module(text, path, list(include_paths), defines, deps=deps)


def core_modules() -> list:
    global _core_modules
    if _core_modules is None:
        mods = []
        for fname in sorted(os.listdir(_CORE_DIR)):
            if fname.endswith(".slang"):
                p = os.path.join(_CORE_DIR, fname)
                with open(p, encoding="utf-8") as f:
                    mods.append(_parse(f.read(), p, [], {}))
        _core_modules = mods
    return _core_modules


DEFAULT_DEFINES = {"__SLANG__": "1", "__HLSL__": "1", "SLANG": "1", "__slangjit__": "1"}


def _defines_from_args(compiler_args) -> dict:
    out = dict(DEFAULT_DEFINES)
    args = list(compiler_args or [])
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-D"):
            body = a[2:] or (args[i + 1] if i + 1 < len(args) else "")
            if not a[2:]:
                i += 1
            k, _, v = body.partition("=")
            out[k] = v or "1"
        i += 1
    return out


def compile_program(sources: Sequence[SourceSpec], entry_points: Sequence[str], *, target: str = "cpp",
                    include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
                    type_conformances: Sequence = ()) -> CompiledProgram:
    # ---- front-end cache hook (frontend_cache.py): memory + disk, validated against imports/#includes ----
    return frontend_cache.cached_compile(_compile_program_uncached, list(sources), list(entry_points), target=target,
                          include_paths=include_paths, compiler_args=compiler_args,
                          type_conformances=type_conformances)
    # ---- end of front-end cache hook ----


def _compile_program_uncached(sources: Sequence[SourceSpec], entry_points: Sequence[str], *, target: str = "cpp",
                              include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
                              type_conformances: Sequence = ()) -> CompiledProgram:
    """The front end proper.  A user never sees a Python traceback from it: an internal failure
    becomes a CompileError saying "internal compiler error" (a slangjit bug) at the program."""
    import sys as _sys
    old_limit = _sys.getrecursionlimit()
    _sys.setrecursionlimit(max(old_limit, 20000))
    try:
        return _compile(sources, entry_points, target=target, include_paths=include_paths,
                        compiler_args=compiler_args, type_conformances=type_conformances)
    except (CompileError, OSError):
        raise
    except RecursionError:
        raise error("E9002", "program nested too deeply to compile", _first_loc(sources)) from None
    except Exception as ex:  # noqa: BLE001 - the safety net for compiler bugs
        raise error("E9000", f"internal compiler error ({type(ex).__name__}: {ex}); this is a slangjit bug",
                    _first_loc(sources)) from ex
    finally:
        _sys.setrecursionlimit(old_limit)


def _first_loc(sources) -> Loc:
    for spec in sources:
        from .source import SourceFile
        text = spec.text
        if text is None and spec.path and os.path.isfile(spec.path):
            with open(spec.path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        return Loc(SourceFile(spec.path or (spec.name + ".slang"), text or ""), 1, 1)
    return NO_LOC


def new_checker(target: str, include_paths: Sequence[str], defines: dict, type_conformances: Sequence = ()):
    """A Checker with the core library declared and the module loader set (imports resolve next to the
    importing file, then the include paths, then our slang/ folder, so `import slangpy;` finds slangpy.slang).
    Returns (checker, search path).  Used by compile_program and by reflect_decls (declaration reflection)."""
    from .check.checker import Checker
    core = core_modules()
    checker = Checker()
    checker.core_env.module = "core"
    checker.target = target
    checker.type_conformances = [tuple(tc) for tc in type_conformances or ()]
    for m in core:
        checker.declare_module(m, checker.core_env)

    # `import slangpy;` always resolves to our slangpy.slang (as SlangPy's SHADER_PATH does).
    search = [str(p) for p in include_paths] + [os.path.join(os.path.dirname(__file__), "slang")]

    def load(name: str, is_path: bool, loc: Loc):
        fname = name if is_path else name.replace(".", os.sep).replace("_", "-") + ".slang"
        cands = []
        base_dir = os.path.dirname(loc.file.path) if loc.file is not None and loc.file.path else "."
        names = [fname]
        if not is_path:
            names.append(name.replace(".", os.sep) + ".slang")
        elif not fname.endswith(".slang"):
            names.append(fname + ".slang")
        for d in [base_dir] + search + ["."]:
            for n in names:
                cands.append(os.path.join(d, n))
        for c in cands:
            if os.path.isfile(c):
                key = os.path.realpath(c)
                if key in checker.modules_loaded:
                    return key, None
                with open(c, encoding="utf-8") as f:
                    return key, _parse(f.read(), c, search, defines)
        builtin = _builtin_module(name)
        if builtin is not None:
            return builtin
        raise error("E2002", f"cannot find module '{name}' (looked in: {', '.join(sorted(set(os.path.dirname(c) or '.' for c in cands)))})", loc)

    checker.module_loader = load
    return checker, search


def _compile(sources: Sequence[SourceSpec], entry_points: Sequence[str], *, target: str = "cpp",
             include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
             type_conformances: Sequence = ()) -> CompiledProgram:
    from .check.scope import Env, FuncSym
    from .emit.program import emit_program
    from .emit.cpp import EmitError
    from . import types as T

    timings = {}
    t0 = time.perf_counter()
    defines = _defines_from_args(compiler_args)
    core = core_modules()
    t1 = time.perf_counter()
    timings["core"] = t1 - t0

    checker, search = new_checker(target, include_paths, defines, type_conformances)
    module_envs = []
    parsed = []
    for spec in sources:
        if spec.text is not None:
            text, path = spec.text, spec.path or (spec.name + ".slang")
        else:
            with open(spec.path, encoding="utf-8") as f:
                text, path = f.read(), spec.path
        mod = _parse(text, path, search, defines)
        parsed.append(mod)
    t2 = time.perf_counter()
    timings["parse"] = t2 - t1
    for mod in parsed:
        env = Env(checker.core_env, "module")
        env.module = mod.path
        checker.modules_loaded[os.path.realpath(mod.path)] = env
        checker.declare_module(mod, env)
        module_envs.append((mod, env))

    entries = []
    for name in entry_points:
        syms = []
        for mod, env in module_envs:
            syms = [s for s in env.lookup_local(name) if isinstance(s, FuncSym)]
            if syms:
                break
        if not syms:
            raise error("E5001", f"entry point '{name}' not found", Loc(None, 0, 0) if not parsed else
                        Loc(_file_of(parsed[0]), 1, 1))
        sym = syms[0]
        if sym.decl.generic_params:
            raise error("E5002", f"entry point '{name}' must not be generic", sym.decl.loc)
        fn = checker.instantiate_function(sym, [], sym.decl.loc)
        numthreads = (1, 1, 1)
        for a in sym.decl.attrs:
            if a.name == "numthreads":
                ctx = checker.ctx_for_env(sym.env)
                vals = [checker.fold(checker.expr(x, ctx)) for x in a.args]
                if len(vals) < 1 or any(not isinstance(v, int) or v <= 0 for v in vals):
                    raise error("E5004", "[numthreads] needs positive constant integers", a.loc)
                vals = list(vals) + [1] * (3 - len(vals))
                numthreads = tuple(vals[:3])
        entries.append((fn, numthreads))

    # Every uniform of the user modules is bindable, used or not.
    for mod, env in module_envs:
        _instantiate_uniforms(checker, mod.decls, env)

    _finish(checker)
    from .ir.passes import optimize
    for fn in checker.functions:
        optimize(fn, checker.fold)
    t3 = time.perf_counter()
    timings["check"] = t3 - t2
    try:
        src, refl = emit_program(checker.functions, checker.globals, entries, target,
                                  group_barrier=checker.uses_group_barrier)
    except EmitError as e:
        raise error("E9001", f"internal compiler error: {e}", entries[0][0].loc if entries else NO_LOC)
    timings["emit"] = time.perf_counter() - t3
    prog = CompiledProgram(src, target, refl, timings)
    prog.warnings = checker.warnings
    if target == "cuda":
        prog.source_sha256()            # stored with the front-end cache entry: the cubin cache key's input
    return prog


def _file_of(mod):
    from .source import SourceFile
    return SourceFile(mod.path, open(mod.path).read()) if os.path.isfile(mod.path) else None


def _builtin_module(name: str):
    return None


def _instantiate_uniforms(checker, decls, env):
    from .check.scope import GlobalSym, NamespaceSym
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


def _finish(checker):
    """Check function bodies and struct field defaults until nothing new is instantiated."""
    from .check.stmts import FuncCtx
    done_structs = set()
    while True:
        checker.check_pending_bodies()
        if checker._autodiff is not None and checker._autodiff.run_pending():
            continue
        new = [s for s in checker.structs if id(s) not in done_structs]
        if not new:
            break
        for inst in new:
            done_structs.add(id(inst))
            checker.check_conformance(inst)
            defaults = []
            for name, ft, init, env in inst.fields:
                if init is None:
                    defaults.append(None)
                else:
                    ctx = FuncCtx(checker, env, None)
                    defaults.append(checker.coerce_init(init, ft, ctx))
            inst.field_defaults = defaults
