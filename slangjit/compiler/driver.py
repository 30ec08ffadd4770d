"""The compiler's stages, run in order: Slang source -> CompiledProgram (C++ or CUDA + reflection).

    parse (parse/) -> check (check/: the checked ir.Program) -> autodiff (autodiff/: derivative
    bodies) -> optimize (IR passes) -> emit (emit/: C++ / CUDA text + reflection)

Each stage takes one data structure and returns the next; nothing here reaches back.  The core
library is parsed once per process.  `compile_program` (compiler/__init__.py) calls this through
the front-end cache, so a warm start never imports it.
"""
from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from typing import Sequence

from . import autodiff
from .check.program import check_program
from .frontend import _defines_from_args, _parse, core_modules, new_checker
from .emit import EmitError, emit_program
from .ir.program import numbering
from .ir.quiet import silence_nested_prints
from .passes.options import DEFAULT_OPTIONS, PipelineOptions
from .passes.pipeline import run_pipeline
from .source import CompileError, Loc, NO_LOC, SourceFile, error, read_source
from .reflection import CompiledProgram
import sys as _sys

def compile_uncached(sources: Sequence, entry_points: Sequence[str], *, target: str = "cpp",
                              include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
                              type_conformances: Sequence = (), options: PipelineOptions = DEFAULT_OPTIONS) -> CompiledProgram:
    """The front end proper.  A user never sees a Python traceback from it: an internal failure
    becomes a CompileError saying "internal compiler error" (a slangjit bug) at the program."""
    old_limit = _sys.getrecursionlimit()
    _sys.setrecursionlimit(max(old_limit, 20000))
    try:
        with numbering(), _no_cycle_collection():   # names numbered per compile: same input, same text
            return _compile(sources, entry_points, target=target, include_paths=include_paths,
                            compiler_args=compiler_args, type_conformances=type_conformances, options=options)
    except (CompileError, OSError):
        raise
    except RecursionError:
        raise error("E9002", "program nested too deeply to compile", _first_loc(sources)) from None
    except Exception as ex:  # noqa: BLE001 - the safety net for compiler bugs
        raise error("E9000", f"internal compiler error ({type(ex).__name__}: {ex}); this is a slangjit bug",
                    _first_loc(sources)) from ex
    finally:
        _sys.setrecursionlimit(old_limit)


_gc_lock = threading.Lock()
_gc_holders = 0                 # compiles running (any thread)
_gc_was_enabled = True          # the collector's state when the first of them began


@contextlib.contextmanager
def _no_cycle_collection():
    """Python's cyclic garbage collector paused while a compile runs (reference counting still frees what
    the compile drops).  A compile allocates hundreds of thousands of objects that live until it ends
    (tokens, syntax trees, IR): each collection of the young generations walked all of them again, about
    15 ms of the seed MLP's front end (10%), with no garbage to find; the peak memory is the same.  Paused
    while any thread compiles; the collector is restored to how it was when the last one finishes."""
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


def _first_loc(sources) -> Loc:
    for spec in sources:
        text = spec.text
        if text is None and spec.path and os.path.isfile(spec.path):
            with open(spec.path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        return Loc(SourceFile(spec.path or (spec.name + ".slang"), text or ""), 1, 1)
    return NO_LOC


def _compile(sources: Sequence, entry_points: Sequence[str], *, target: str = "cpp",
             include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
             type_conformances: Sequence = (), options: PipelineOptions = DEFAULT_OPTIONS) -> CompiledProgram:
    """parse -> check -> autodiff -> optimize -> emit, one data structure between each."""
    timings = {}
    t0 = time.perf_counter()
    defines = _defines_from_args(compiler_args)
    core_modules()
    t1 = time.perf_counter()
    timings["core"] = t1 - t0

    checker, search = new_checker(target, include_paths, defines, type_conformances)
    parsed = []
    for spec in sources:
        if spec.text is not None:
            text, path = spec.text, spec.path or (spec.name + ".slang")
        else:
            text, path = read_source(spec.path), spec.path
        parsed.append(_parse(text, path, search, defines))
    checker.loaded_paths.update(os.path.realpath(m.path) for m in parsed)
    t2 = time.perf_counter()
    timings["parse"] = t2 - t1

    program = check_program(checker, parsed, entry_points)
    t3 = time.perf_counter()
    timings["check"] = t3 - t2
    program = autodiff.run(program)
    silence_nested_prints(program)      # printf under reverse mode prints once per primal run
    t4 = time.perf_counter()
    timings["autodiff"] = t4 - t3
    optimized = run_pipeline(program, target, options)
    t5 = time.perf_counter()
    timings["passes"] = t5 - t4
    entries = program.entries
    try:
        src, refl = emit_program(optimized)
    except EmitError as e:
        raise error("E9001", f"internal compiler error: {e}", entries[0][0].loc if entries else NO_LOC)
    timings["emit"] = time.perf_counter() - t5
    refl.uses_call_shape = "_sj_csi_" in src
    prog = CompiledProgram(src, target, refl, timings)
    prog.warnings = program.warnings
    if target == "cuda":
        prog.source_sha256()            # stored with the front-end cache entry: the cubin cache key's input
    return prog

