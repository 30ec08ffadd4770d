"""The options of the pass pipeline and the emitters: one immutable value per compile.

`compile_program(..., options=PipelineOptions(...))` passes it to the pass pipeline (pipeline.py) and
the emitter; the front-end cache keys a program by the options that differ from the defaults
(`PipelineOptions.changed`).  Experiments (benchmarks/gpu_mlp_breakdown.py, tests) build their own
options instead of changing module state:

    PipelineOptions(fuse_entries=True)
    PipelineOptions().with_cuda(mma_slots=False, shared_slots=True)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CudaOptions:
    """How the CUDA target combines float/half gradient adds (prelude racc_add, red_add_fp) and
    which IR rewrites it runs first (passes/red_plan.py, emit/cuda.py)."""
    # Most slots (float registers per thread) a coarsened kernel may use.
    max_slots: int = 192
    # Drop the per-add address check where passes/slot_invariance.py proves slot addresses invariant
    # (benchmarks/gpu_mlp_breakdown.py turns it off to measure the check).
    prove_slot_addresses: bool = True
    # Keep a coarsened kernel's slots in shared memory (one column per thread) instead of registers,
    # when every coarsened kernel of the translation unit fits shared_slot_bytes per group (slots and
    # the warps' address tables; 99 KB: what sm_86/89 allow a block).  Half sites get half slots when
    # all sites are half.  Off by default: on the H100 the seed MLP ran no faster than with float
    # register slots (benchmarks/gpu_mlp_breakdown.py, RESULTS.md session 4), and float sums are exact-er.
    shared_slots: bool = False
    shared_slot_bytes: int = 99 * 1024
    # Sum a coarsened kernel's half slots with tensor cores (prelude SJ_RACC_MMA, sm_90+; other GPUs get
    # float register slots from the same source; float sites keep a float register each): each half add
    # stores its value in the warp's stage in shared memory and one mma per 16 slots sums the warp's 32
    # logical threads, so a lane keeps 2 floats per 16 slots instead of one per slot (no spills: the seed
    # MLP's learnGradient 0.149 against 0.182 ms with register slots on the H100, RESULTS.md session 5).
    # The stages (mma_stages x 64 bytes per slot and warp) must fit mma_slot_bytes of dynamic shared
    # memory per group.
    mma_slots: bool = True
    mma_slot_bytes: int = 200 * 1024   # sm_90 allows 227 KB per block; the prelude uses these slots on sm_90+
    mma_stages: int = 1                # 2: a turn's stores land in one stage while the step sums the other
    mma_stage_bytes: int = 16 * 64     # per tile of 16 slots, warp and stage: 16 rows of 64 bytes
    # Tensor-core-slot kernels ask for this many resident blocks per SM (__launch_bounds__'s second
    # argument; 1: no request).
    mma_min_blocks: int = 1
    # A coarsened kernel combines its warps' slot sums in shared memory before the atomics (one per block
    # and slot, prelude racc_flush_block) when the warps' address tables and sums fit this many bytes of
    # static shared memory (48 KB is the static limit); otherwise every warp adds its own sums.
    block_flush_bytes: int = 48 * 1024
    # Where slot addresses are proven invariant, the blocks' sums meet in a scratch buffer the runtime
    # provides (EntryPointInfo.grid_slots) and the last block adds each slot once (prelude racc_flush_grid).
    grid_flush: bool = True
    # Tensor-core slots of a kernel whose finished logical threads write every slot
    # (passes/slot_coverage.py) skip the clear of the stage after each step: a lane whose logical thread
    # returns before its first slot zeros its column instead (prelude racc_abandon).
    skip_covered_clears: bool = True
    # Unused-result float Atomic<T>.add calls become InterlockedAdd sites (passes/atomic_adds.py), so
    # coarsened kernels defer them like gradient adds.
    lower_atomic_adds: bool = True
    # Inline each coarsened kernel's calls (proven slot addresses only) and reuse the values it computes
    # twice (passes/inline_calls.py, passes/value_numbering.py): reverse mode's replays and user
    # derivatives' recomputation, which NVRTC cannot merge (half arithmetic is inline asm).
    fuse_coarse: bool = True


@dataclass(frozen=True)
class CpuOptions:
    """What the C++ (CPU) target does with gradient adds (passes/cpu_adds.py, emit/cpu_adds.py)."""
    # Thread-uniform float/half InterlockedAdds accumulate per worker (a float per site on the stack) and
    # reach memory once per worker and dispatch, instead of an atomic per add.
    privatize_adds: bool = True
    max_slots: int = 4096
    # Inline, reuse values and prune dead code in every entry point (the fuse_entries passes, on by default
    # for the CPU): reverse mode's replays and user derivatives' recomputation (the seed MLP example's
    # learnGradient at batch 64: 223 -> 153 us of CPU time).
    fuse_all: bool = True
    # Inline the privatised entry points' calls and reuse what they compute twice (passes/cpu_adds.py
    # fuse_privatised): reverse mode's replays and user derivatives' recomputation.
    fuse: bool = True
    # Lane-blocked kernels (emit/cpu_lanes.py): entry points of straight-line code with ifs and early returns
    # run blocks of 64 logical threads in lock-step loops the C++ compiler vectorises.
    lanes: bool = True
    # Lane-blocking of entry points with counted loops and calls (after inlining them all, passes/cpu_lanes.py;
    # emit/cpu_lane_loops.py): structure-of-arrays lanes in float, half rounded after every operation,
    # thread-uniform values computed once per block, privatised adds accumulated per lane.
    lane_loops: bool = True
    # Logical threads per lane block of those kernels (the seed MLP's learnGradient, one worker: 16 lanes 5.4 ms,
    # 32 lanes 5.0 ms, 64 lanes 5.9 ms of CPU time).
    lane_width: int = 32
    # Unroll-and-jam of independent counted loop nests in lane-blocked entry points (passes/cpu_jam.py): up to
    # this many output rows of a matrix-vector product run their dependent half steps interleaved (1 = off;
    # learnGradient 2.69 -> 2.22 ms of CPU, its C++ build 0.44 -> 0.50 s of CPU).
    jam: int = 4
    # In those kernels, innermost counted loops of at most this many trips are unrolled (`#pragma GCC unroll`):
    # the rows their steps carry stay in registers.  Off by default: learnGradient 2.24 -> 2.19 ms with 4 (16 lanes
    # and 16: -6 %), but its C++ build takes 0.63 s of CPU instead of 0.50 (issue 20's cold compile is <= 1 s).
    lane_unroll: int = 0
    # A lane-loop kernel whose body is longer than this many lines of C++ is also emitted in parts of about that
    # length (emit/cpu_lane_split.py), which a machine with cores to spare builds in parallel compiler processes
    # (runtime/cpu_compiler.py): the seed MLP's learnGradient is most of its module's cold compile.  0: never.
    lane_part_lines: int = 250
    # ... on machines with at least this many cores (the source's header says so; elsewhere it builds whole).
    lane_part_min_cpus: int = 3
    # Half rounding in those kernels: False = inline float arithmetic that stays in the lane loop's registers
    # (sj::rhf, bit for bit _Float16); True = a row in memory through the F16C / AVX-512 conversions (session 10).
    half_rows: bool = True
    # Lane-blocked loop kernels hold every varying value in GCC vector registers (emit/cpu_lane_vregs.py): one
    # vector expression per statement, half rounding in registers; the row emitter where it cannot.
    lane_vregs: bool = True
    # In lane-blocked loops, the math functions use glibc's vector math library (libmvec, documented error
    # <= 4 ulp) where the C library has it; their last bit may then differ from the scalar functions'.
    vector_math: bool = True
    # The scalar launcher runs a group's threads in a `#pragma omp simd` loop over a local copy of the
    # parameter block (emit/program.py), so the C++ compiler vectorises across threads even where it cannot
    # prove the pointers apart.  Only for kernels whose threads touch disjoint memory: the functional API's
    # unit-stride variant (functional/binding.py CallData), never set for user kernels.
    simd_threads: bool = False
    # A translation unit whose launchers are all lane-loop kernels is compiled without GCC's PRE, GCSE, code
    # hoisting, VRP, the second scheduling pass and "expensive optimisations" (runtime/cpu_compiler.py
    # LANE_KERNEL_FLAGS): the seed MLP's learnGradient builds in 0.31 s of CPU instead of 0.51 s at the same
    # speed (5.0 ms); scalar kernels keep every -O2 pass (the poly kernel lost a third without them).
    lane_compile_flags: bool = True
    # The precompiled prelude (runtime/cpu_pch.py) of the two common kinds of translation unit (scalar kernels;
    # lane-loop kernels with privatised adds) made at a process's first front-end miss, in the background while
    # the front end runs, instead of at a prefix's second build, so that a cold compile's C++ builds already use
    # it (the seed MLP's learnGradient: 0.32 s of g++ instead of 0.36 here).  Off: it costs ~0.15 s of CPU per
    # header and pays only where cores are idle during the front end (on 2 cores it delayed the cold compile);
    # `benchmarks/compile_time.py --mlp-cold N --early-pch` measures it on a machine with spare cores.
    early_pch: bool = False
    # At the process's first front-end miss for the CPU, the daemon thread that finds the C++ compiler's facts
    # then asks the kernel to read the toolchain's files (cc1plus, as, ld, their libraries, the headers the
    # prelude includes: runtime/cpu_prepare.py, posix_fadvise WILLNEED) while the front end runs, where cc1plus
    # is not in the page cache (the first process on a fresh machine; nothing is listed where it is).  On: on
    # three fresh 16-core GPU hosts (benchmarks/cold_start.py, alternating) a cold compile with those files evicted
    # took 880 / 1056 / 1002 ms with it against 982 / 1222 / 1115 without, the same with them cached (994 / 997),
    # and a first process with it 803 ms (others without it 1021, 1123); on the 2-core machine (virtio disk) 620
    # with it against 600 without.
    readahead: bool = True


@dataclass(frozen=True)
class PipelineOptions:
    """Options of one compile (pass pipeline + emitter)."""
    # Run the CUDA coarsened kernels' inlining, value reuse and dead-code removal (passes/fusion.py) on
    # every CPU entry point, with no adds deferred, so that the CPU tests exercise those passes.
    fuse_entries: bool = False
    # The checked mode (create_device(enable_debug_layers=True) or $SLANGJIT_CHECKED=1): the emitter
    # bounds-checks every buffer, local-array, vector and pointer access and records the first failure in
    # the kernel's error record, which the runtime raises after the dispatch (runtime/base.py KernelError).
    checked: bool = False
    # The entry points' own pointer parameters are bound by the runtime and never null while threads run
    # (the functional API's generated kernels): the default mode does not null-check accesses through
    # them (emit/cpp.py null_check).  Every other pointer access still is, on the CPU.
    trusted_entry_pointers: bool = False
    cuda: CudaOptions = field(default_factory=CudaOptions)
    cpu: CpuOptions = field(default_factory=CpuOptions)

    def with_cuda(self, **changes) -> "PipelineOptions":
        """A copy with some CUDA options changed (field names of CudaOptions)."""
        return dataclasses.replace(self, cuda=dataclasses.replace(self.cuda, **changes))

    def with_cpu(self, **changes) -> "PipelineOptions":
        """A copy with some CPU options changed (field names of CpuOptions)."""
        return dataclasses.replace(self, cpu=dataclasses.replace(self.cpu, **changes))

    def changed(self) -> tuple:
        """((dotted name, value), ...) of the options that differ from the defaults, in field order:
        what the front-end cache keys a program by (the defaults are covered by the compiler's hash)."""
        return tuple(_changed(self, PipelineOptions(), ""))


DEFAULT_OPTIONS = PipelineOptions()


def _changed(value, default, prefix: str):
    for f in dataclasses.fields(value):
        v, d = getattr(value, f.name), getattr(default, f.name)
        if dataclasses.is_dataclass(v):
            yield from _changed(v, d, prefix + f.name + ".")
        elif v != d:
            yield prefix + f.name, v
