"""Stage 7: the emitters, IR -> C++ / CUDA C++ text + reflection.  `program.py` assembles a translation
unit for either target; `cpp.py` prints IR; `cuda.py` holds what the CUDA target does differently."""
from __future__ import annotations

from ..passes.pipeline import Optimized
from .cpp import EmitError
from .cuda import CudaTarget
from .program import CppTarget, assemble

__all__ = ["EmitError", "emit_program"]


def emit_program(optimized: Optimized):
    """The translation unit of a pipeline result (passes/pipeline.py): (source text, ProgramReflection)."""
    program = optimized.program
    checked = optimized.options.checked
    if optimized.target == "cuda":
        target = CudaTarget(optimized.plan, optimized.options.cuda)
        target.em.checked = checked
    else:
        target = CppTarget(program.uses_group_barrier, checked, optimized.cpu_plan, optimized.options.cpu)
    target.em.trusted_entry_pointers = optimized.options.trusted_entry_pointers
    return assemble(program, target)
