"""The compiler: Slang source -> CompiledProgram (C++ or CUDA source + reflection).

Its stages, one folder each, in order: parse/ -> check/ -> autodiff/ -> (IR passes) -> emit/;
driver.py runs them.  `compile_program` goes through the front-end cache (frontend_cache.py), so a
warm start runs - and imports - none of the stages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from . import frontend_cache
from .passes.options import DEFAULT_OPTIONS, PipelineOptions
from .reflection import CompiledProgram


@dataclass
class SourceSpec:
    """One module to compile: from a file (`path`) or from text (`text`, with `name`)."""
    path: Optional[str] = None
    text: Optional[str] = None
    name: str = ""


def compile_program(sources: Sequence[SourceSpec], entry_points: Sequence[str], *, target: str = "cpp",
                    include_paths: Sequence[str] = (), compiler_args: Sequence[str] = (),
                    type_conformances: Sequence = (), options: PipelineOptions = DEFAULT_OPTIONS) -> CompiledProgram:
    """`options`: the pass pipeline's and the emitters' options (passes/options.py)."""
    return frontend_cache.cached_compile(_compile_uncached, list(sources), list(entry_points), target=target,
                                         include_paths=include_paths, compiler_args=compiler_args,
                                         type_conformances=type_conformances, options=options)


def _compile_uncached(*args, **kwargs) -> CompiledProgram:
    from . import driver    # import cost: the stages (~100 ms) load only on a front-end cache miss
    return driver.compile_uncached(*args, **kwargs)
