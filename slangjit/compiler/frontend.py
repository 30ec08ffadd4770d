"""The front of the compiler, shared by compiling (driver.py) and by declaration reflection
(reflect_decls.py): parsing with a per-process memo, the core library, `-D` defines, and a checker
set up with the module loader.  It imports the parse and check stages only."""
from __future__ import annotations

import os
from typing import Optional, Sequence

from . import frontend_cache
from .check.program import make_checker
from .parse.parser import parse_module, parse_type_name
from .parse.preprocessor import DEFAULT_DEFINES
from .source import Loc, error, read_source

_CORE_DIR = os.path.join(os.path.dirname(__file__), "core")
_core_modules: Optional[list] = None




# Syntax trees of the modules parsed in this process, by (path, text, include paths, defines), with the
# files each #included (path, (mtime, size)): `import slangpy;` and a SlangPy module loaded again need
# no second parse.  Later stages never change a syntax tree (the core library's is shared the same way).
_parsed: dict = {}
_PARSED_MAX = 64


def _stat(path: str):
    try:
        st = os.stat(path)
        return st.st_mtime_ns, st.st_size
    except OSError:
        return None


def _parse(text: str, path: str, include_paths, defines):
    deps = frontend_cache.active_deps()        # front-end cache: record the files this compile reads
    if deps is not None and os.path.isfile(path):
        deps.append(path)
    key = (path, text, tuple(include_paths), tuple(sorted(defines.items())))
    hit = _parsed.get(key)
    if hit is not None and all(_stat(p) == st for p, st in hit[1]) and not any(os.path.isfile(p) for p in hit[2]):
        mod, included, missed = hit
    else:
        mod, files, missed = _parse_uncached(text, path, include_paths, defines)
        included = [(p, _stat(p)) for p in files]
        if len(_parsed) >= _PARSED_MAX:
            _parsed.pop(next(iter(_parsed)))
        _parsed[key] = (mod, included, missed)
    if deps is not None:
        deps.extend(p for p, _ in included)
    absent = frontend_cache.active_absent()    # an #include candidate probed and not found: a file there shadows
    if absent is not None:
        absent.extend(missed)
    return mod


def _parse_uncached(text: str, path: str, include_paths, defines):
    """(syntax tree, files #included, include candidates probed and absent); the compiler's own library files
    (core/, slang/) come from the front-end cache's on-disk syntax trees when they are there."""
    key = None
    if frontend_cache.tree_cacheable(path):
        key = frontend_cache.tree_key(text, path, include_paths, defines)
        hit = frontend_cache.load_tree(key)
        if hit is not None:
            return hit
    files: list = []
    missed: list = []
    # the compiler's own library: function bodies parsed when first read (most are never compiled)
    mod = parse_module(text, path, list(include_paths), defines, deps=files, absent=missed,
                       lazy_bodies=frontend_cache.compiler_library(path))
    if key is not None:                 # written off the critical path (frontend_cache.defer_tree)
        frontend_cache.defer_tree(key, mod, files, missed)
    return mod, files, missed


# Core modules declared on demand (check/scope.py CoreEnv): the cooperative vectors.  A program that looks up
# none of ON_DEMAND_TRIGGERS (every name they declare at top level, their plain enums' cases, the members of
# their extensions; tests/compiler/test_front_end_cold.py checks the list against the parsed modules) never parses
# them (about 15 ms of the seed MLP's 150 ms front end).
ON_DEMAND_CORE = ("coopvec.slang", "coopvec_matrix.slang")
ON_DEMAND_TRIGGERS = frozenset("""
    CoopVecComponentType FloatE4M3 FloatE5M2 Float16 Float32 Float64 SignedInt8 SignedInt16 SignedInt32
    SignedInt64 SignedInt8Packed UnsignedInt8 UnsignedInt16 UnsignedInt32 UnsignedInt64 UnsignedInt8Packed
    CoopVecMatrixLayout RowMajor ColumnMajor InferencingOptimal TrainingOptimal
    coopVecLoad coopVecLoadGroupshared coopVecMatMul coopVecMatMulAdd coopVecOuterProductAccumulate
    coopVecReduceSumAccumulate __fwd_coopVecMatMul __bwd_coopVecMatMul __fwd_coopVecMatMulAdd
    __bwd_coopVecMatMulAdd __cvAccElementSize __cvAtomicAdd __cvBias __cvComponentTypeOf __cvDecodeFp8
    __cvElementSize __cvElementSizeOf __cvMatMul __cvMatMulT __cvOffset __cvOuterProduct __cvRead __cvReadAny
    __cvReadS
    store load fill
""".split())
_on_demand_modules: Optional[list] = None


def _core_files(on_demand: bool) -> list:
    return [os.path.join(_CORE_DIR, f) for f in sorted(os.listdir(_CORE_DIR))
            if f.endswith(".slang") and (f in ON_DEMAND_CORE) == on_demand]


def _parse_files(paths: list) -> list:
    mods = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            mods.append(_parse(f.read(), p, [], {}))
    return mods


def core_modules() -> list:
    """The core library's modules that every program declares (parsed once per process)."""
    global _core_modules
    if _core_modules is None:
        _core_modules = _parse_files(_core_files(False))
    return _core_modules


def on_demand_core_modules() -> list:
    """The core modules declared on demand (ON_DEMAND_CORE), parsed once per process when first needed."""
    global _on_demand_modules
    if _on_demand_modules is None:
        _on_demand_modules = _parse_files(_core_files(True))
    return _on_demand_modules




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


def new_checker(target: str, include_paths: Sequence[str], defines: dict, type_conformances: Sequence = ()):
    """A checker with the core library declared and the module loader set: an `import` resolves next to
    the importing file, then on the include paths, then in our slang/ folder (so `import slangpy;` finds
    slangpy.slang, as SlangPy's SHADER_PATH does).  Returns (checker, search path).  Used by
    compile_uncached and by declaration reflection (reflect_decls.py), so both resolve alike."""
    search = [str(p) for p in include_paths] + [os.path.join(os.path.dirname(__file__), "slang")]
    loaded: set = set()

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
        absent = frontend_cache.active_absent()    # front-end cache: lookups that failed (a file there later shadows)
        for c in cands:
            if not os.path.isfile(c):
                if absent is not None:
                    absent.append(c)
                continue
            key = os.path.realpath(c)
            if key in loaded:
                return key, None
            loaded.add(key)
            return key, _parse(read_source(c), c, search, defines)
        raise error("E2002", f"cannot find module '{name}' (looked in: {', '.join(sorted(set(os.path.dirname(c) or '.' for c in cands)))})", loc)

    conformances = [(i, t, ident, parse_type_name(str(t))) for i, t, ident in (tuple(tc) for tc in type_conformances)]
    checker = make_checker(core_modules(), target=target, type_conformances=conformances, module_loader=load,
                           on_demand=(ON_DEMAND_TRIGGERS, on_demand_core_modules))
    checker.loaded_paths = loaded          # modules given as sources count as loaded
    return checker, search
