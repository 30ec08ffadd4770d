"""The checked program: what the checker hands to the later stages (autodiff, passes, emit).

One `Program` per compile.  The checker fills it; `autodiff.run(program)` builds the bodies of the
derivative functions it lists; the pass pipeline rewrites function bodies; the emitter prints it.
"""
from __future__ import annotations

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


_name_ids = itertools.count(1)


def unique_name(base: str) -> str:
    """A C identifier made from `base`, unique within the process (functions, globals, derivatives)."""
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in base)
    return f"{base}_{next(_name_ids)}"
