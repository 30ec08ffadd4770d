"""The pass pipeline: the checked (and differentiated) program -> the program the emitter prints.

Each pass is named and runs on the whole program; which passes run depends on the target and the
options (options.py), never on module state:

    cpp:   simplify, [fuse_entries], [plan_cpu_adds], [fuse_privatised], [inline_for_lanes], [jam_lane_loops]
    cuda:  simplify, [lower_atomic_adds], plan_red_adds, [fuse_coarse], cover_slots

* simplify (simplify.py): constant folding, branch folding, unreachable statements, unused locals.
* fuse_entries (fusion.py; PipelineOptions.fuse_entries or CpuOptions.fuse_all, the default): inline, value
  reuse and dead code on every CPU entry point.
* plan_cpu_adds (cpu_adds.py; CpuOptions.privatize_adds): which thread-uniform float/half adds of which
  entry points accumulate per CPU worker.
* fuse_privatised (cpu_adds.py; CpuOptions.fuse): inline + value reuse in the privatised entry points.
* inline_for_lanes (cpu_lanes.py; CpuOptions.lane_loops): every call inlined in the entry points the lane emitter
  with loops can take (emit/cpu_lane_loops.py).
* jam_lane_loops (cpu_jam.py; CpuOptions.jam): independent output rows of counted loop nests (matrix-vector
  products) interleaved in those entry points, so their dependent half steps overlap.
* lower_atomic_adds (atomic_adds.py; CudaOptions.lower_atomic_adds): unused-result float
  `Atomic<T>.add` calls become InterlockedAdd sites.
* plan_red_adds (red_plan.py): how gradient adds are combined (coarsened kernels, slots, block cache).
* fuse_coarse (red_plan.py; CudaOptions.fuse_coarse): inline + value reuse in coarsened kernels with
  proven slot addresses, kept only if the plan stands.
* cover_slots (red_plan.py; CudaOptions.skip_covered_clears): tensor-core-slot kernels whose logical
  threads write every slot skip the stage clears.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..ir.fold import fold_value
from ..ir.program import Program
from .atomic_adds import lower_atomic_adds
from .cpu_adds import CpuAddPlan, fuse_privatised, plan_cpu_adds
from .cpu_jam import jam_loops
from .cpu_lanes import inline_for_lanes, lane_shape
from .fusion import inline_copy, reuse_and_prune
from .options import DEFAULT_OPTIONS, PipelineOptions
from .red_plan import RedAddPlan, covered_kernels, fuse_coarse_entries, plan_red_adds
from .simplify import optimize


@dataclass
class Optimized:
    """What the pipeline hands the emitter."""
    program: Program
    target: str
    options: PipelineOptions
    plan: Optional[RedAddPlan] = None          # CUDA: how gradient adds are combined
    cpu_plan: Optional[CpuAddPlan] = None      # C++: which gradient adds accumulate per worker
    ran: list = field(default_factory=list)    # names of the passes that ran, in order


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Optimized], None]
    enabled: Callable[[PipelineOptions], bool] = lambda options: True


def _simplify(fold) -> Callable[[Optimized], None]:
    def run(state: Optimized) -> None:
        for fn in state.program.functions:
            optimize(fn, fold)
    return run


def _fuse_entries(state: Optimized) -> None:
    for fn, _ in state.program.entries:
        inline_copy(fn)
        reuse_and_prune(fn)


def _lower_atomic_adds(state: Optimized) -> None:
    lower_atomic_adds(state.program.functions)


def _plan_cpu_adds(state: Optimized) -> None:
    state.cpu_plan = plan_cpu_adds(state.program.entries, state.program.functions, state.options.cpu.max_slots,
                                   state.program.uses_group_barrier)


def _fuse_privatised(state: Optimized) -> None:
    state.cpu_plan = fuse_privatised(state.program.entries, state.program.functions, state.cpu_plan,
                                     state.options.cpu.max_slots, state.program.uses_group_barrier)


def _inline_for_lanes(state: Optimized) -> None:
    state.cpu_plan, _ = inline_for_lanes(state.program.entries, state.program.functions, state.cpu_plan,
                                         state.options.cpu.max_slots, state.program.uses_group_barrier)


def _jam_lane_loops(state: Optimized) -> None:
    for fn, _ in state.program.entries:
        if lane_shape(fn) is None:
            jam_loops(fn, state.options.cpu.jam)


def _plan_red_adds(state: Optimized) -> None:
    state.plan = plan_red_adds(state.program.entries, state.program.functions, state.options.cuda)


def _fuse_coarse(state: Optimized) -> None:
    state.plan = fuse_coarse_entries(state.program.entries, state.program.functions, state.plan,
                                     state.options.cuda)


def _cover_slots(state: Optimized) -> None:
    state.plan.covered = covered_kernels(state.program.entries, state.program.functions, state.plan,
                                         state.options.cuda)


def pipeline(target: str, fold) -> list[Pass]:
    """The passes for `target`, in order (each runs where its `enabled(options)` holds).
    `fold`: the constant evaluator simplify uses (expr -> value or None)."""
    passes = [Pass("simplify", _simplify(fold))]
    if target == "cuda":
        passes += [Pass("lower_atomic_adds", _lower_atomic_adds, lambda o: o.cuda.lower_atomic_adds),
                   Pass("plan_red_adds", _plan_red_adds),
                   Pass("fuse_coarse", _fuse_coarse, lambda o: o.cuda.fuse_coarse),
                   Pass("cover_slots", _cover_slots)]
    else:
        passes += [Pass("fuse_entries", _fuse_entries, lambda o: o.fuse_entries or o.cpu.fuse_all),
                   Pass("plan_cpu_adds", _plan_cpu_adds, lambda o: o.cpu.privatize_adds),
                   Pass("fuse_privatised", _fuse_privatised, lambda o: o.cpu.privatize_adds and o.cpu.fuse),
                   Pass("inline_for_lanes", _inline_for_lanes, lambda o: o.cpu.lanes and o.cpu.lane_loops),
                   Pass("jam_lane_loops", _jam_lane_loops, lambda o: o.cpu.lanes and o.cpu.lane_loops and o.cpu.jam > 1)]
    return passes


def run_pipeline(program: Program, target: str, options: PipelineOptions = DEFAULT_OPTIONS,
                 fold=fold_value) -> Optimized:
    """Run `target`'s passes over `program` (its function bodies are rewritten in place)."""
    state = Optimized(program, target, options)
    for p in pipeline(target, fold):
        if p.enabled(options):
            p.run(state)
            state.ran.append(p.name)
    return state
