"""The fusion pipeline over one entry point, in two steps because the CUDA emitter plans the
inlined kernel's gradient slots between them (passes/red_plan.py fuse_coarse_entries): a copy of the body
with its calls inlined (passes/inline_calls.py), then value reuse (passes/value_numbering.py) and dead-code
removal (passes/dead_code.py)."""
from __future__ import annotations

from ..ir import nodes as ir
from .dead_code import remove_dead_code
from .effects import Effects
from .inline_calls import clone_body, inline_entry
from .value_numbering import reuse_values


def inline_copy(fn: ir.Function) -> None:
    """fn's body becomes a copy with the calls inlined (the old body object is left untouched)."""
    fn.body = clone_body(fn)
    inline_entry(fn, Effects())


def reuse_and_prune(fn: ir.Function, deferred: frozenset = frozenset()) -> None:
    """Reuse values fn computes twice (`deferred`: ids of adds that write nothing a later read of the
    dispatch sees), then drop what nothing uses (every add is live there)."""
    reuse_values(fn, Effects(deferred))
    remove_dead_code(fn, Effects())
