"""The checked program: what the checker hands to the later stages (autodiff, passes, emit).

One `Program` per compile.  The checker fills it; `autodiff.run(program)` builds the bodies of the
derivative functions it lists; the pass pipeline rewrites function bodies; the emitter prints it.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
from dataclasses import dataclass, field
from typing import Optional



@dataclass
class Program:
    functions: list = field(default_factory=list)    # every ir.Function to emit (instantiated, concrete)
    globals: list = field(default_factory=list)      # ir.GlobalVar: uniforms, statics, groupshared
    entries: list = field(default_factory=list)      # (ir.Function, numthreads (x, y, z))
    uses_group_barrier: bool = False
    warnings: list = field(default_factory=list)     # Diagnostic
    derivatives: Optional[object] = None             # ir/derivatives.py Derivatives (sealed)


class Numbering:
    """The counters that number one compile's names: C names of functions, globals and derivatives
    (`unique_name`), local variables (`Var.uid`) and the checker's inference placeholders
    (`next_placeholder_id`).  A compile runs inside `numbering()`, so the same source and options give
    the same names, hence byte-identical C++/CUDA, however many programs the process compiled before
    (issue 15 item 7).  Names stay unique within the program, which is all a translation unit needs."""
    __slots__ = ("names", "vars", "placeholders")

    def __init__(self):
        self.names = itertools.count(1)
        self.vars = itertools.count(1)
        self.placeholders = itertools.count(1)


_process_numbering = Numbering()          # outside a compile (declaration reflection, tests building IR)
_numbering: contextvars.ContextVar[Numbering] = contextvars.ContextVar("slangjit_numbering",
                                                                     default=_process_numbering)


@contextlib.contextmanager
def numbering():
    """Number the names created inside the block from 1 (compiler/driver.py runs each compile in one)."""
    token = _numbering.set(Numbering())
    try:
        yield
    finally:
        _numbering.reset(token)


def next_var_uid() -> int:
    return next(_numbering.get().vars)


def next_placeholder_id() -> int:
    return next(_numbering.get().placeholders)


def unique_name(base: str) -> str:
    """A C identifier made from `base`, unique within the compile (functions, globals, derivatives)."""
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in base)
    return f"{base}_{next(_numbering.get().names)}"
