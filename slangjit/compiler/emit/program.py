"""The translation-unit assembler, shared by the C++ and CUDA targets, and the C++ target.

    assemble(program, target) -> (source, ProgramReflection)

lays out one translation unit: the target's header lines, the prelude, the struct definitions (in
dependency order, as the emitter meets them), the globals block, the statics, the prototypes, the
function bodies and one launcher per entry point.  A target (`CppTarget` here, `emit/cuda.py
CudaTarget`) supplies its emitter and what differs: header lines, how the globals block is stored, how
statics are declared, the layout checks and the launcher.  `emit/__init__.py emit_program` picks the
target for a pipeline result (passes/pipeline.py Optimized).
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir.program import Program
from ..ir.walk import walk
from .. import types as T
from ..reflection import EntryPointInfo, FieldLayout, ProgramReflection
from ..source import error
from ..layout import block_layout
from .cpp import CppEmitter, prelude_text
from .cpu_adds import PACC_PRELUDE, CpuEmitter
from .cpu_lane_loops import LACC_PRELUDE, LANE_LOOPS_PRELUDE, LoopLaneKernel
from .cpu_lane_split import PARTS_MARK
from .cpu_lane_vregs import VregLaneKernel
from .cpu_lanes import LANES_PRELUDE, LaneKernel, vector_math_header

# Ends the part of a C++ translation unit that depends only on the prelude and the target's options (never on
# the program): runtime/cpu_compiler.py precompiles the text before it once per compiler and flags (a GCC
# precompiled header) and compiles only the rest for each program.  Spelled the same there.
PCH_END = "// slangjit: end of the precompiled prefix"
# The first line of a translation unit whose every launcher is a lane-loop kernel (emit/cpu_lane_loops.py), when
# CpuOptions.lane_compile_flags: runtime/cpu_compiler.py then leaves out GCC passes that cost those kernels
# compile time and no speed (LANE_KERNEL_FLAGS).  Spelled the same there.
LANE_KERNELS_ONLY = "// slangjit: lane-loop kernels only"

SYSTEM_VALUES = {"sv_dispatchthreadid": "dtid", "sv_groupid": "gid", "sv_groupthreadid": "gtid",
                 "sv_groupindex": "gindex"}


class Target:
    """What a target supplies to the assembler (the C++ target's choices are the defaults)."""
    access = "sj_P->"          # how a launcher reads a field of the entry's parameter block
    guards_recursion = False   # functions on a call cycle get a recursion guard (prelude 13_checks.h)
    counts_depth = False       # ... a depth counter (sj::depth_exceeded), else the stack mark (sj::stack_exhausted)

    def depth_limit(self, recursive: set) -> int:
        """The deepest call level of a function on a call cycle (counts_depth targets)."""
        raise NotImplementedError

    def __init__(self, em: CppEmitter):
        self.em = em
        self.recursive = False

    def trailer(self) -> list[str]:
        """Parts after the launchers."""
        return []

    def header(self) -> list[str]:
        """Parts before the prelude."""
        return []

    def after_prelude(self) -> list[str]:
        """Parts between the prelude and the struct definitions."""
        return []

    def prelude(self, generated: str) -> str:
        """The prelude for a translation unit whose other parts are `generated` (the whole prelude here;
        the CUDA target keeps only the sections the code uses: emit/cuda_prelude.py)."""
        return prelude_text()

    def part0_code(self, lines: list[str]) -> list[str]:
        """Code that only the first compiler process of a parallel build compiles (the C++ target's lane
        kernels in parts: emit/cpu_lane_split.py)."""
        return lines

    def check_offset(self, struct: str, member: str, offset: int, what: str) -> str:
        return f"static_assert(offsetof({struct}, {member}) == {offset}, \"layout of {what}\");"

    def check_size(self, struct: str, size: int, what: str) -> list[str]:
        return []

    def globals_block(self, uniforms: list[ir.GlobalVar], fields: list[FieldLayout], size: int) -> list[str]:
        lines = struct_lines(self.em, "sj_Globals", [(g.name, g.type) for g in uniforms])
        lines += [self.check_offset("sj_Globals", g.name, fl.offset, g.slang_name) for g, fl in zip(uniforms, fields)]
        lines.append("static thread_local sj_Globals* sj_g;")
        return lines

    def statics(self, others: list[ir.GlobalVar]) -> list[str]:
        """Static globals (constants, groupshared, per-thread statics)."""
        em, out = self.em, []
        for g in others:
            ct = em.ctype(g.type)
            init = f" = {em.expr(g.init)}" if g.init is not None else " = {}"
            if g.kind == "const":
                out.append(f"static const {ct} {g.name}{init};")
            else:
                out.append(f"static thread_local {ct} {g.name}{init};")
        return out

    def launcher(self, fn: ir.Function, numthreads, symbol: str, sname: str, call_args: list[str]) -> list[str]:
        raise NotImplementedError

    def entry_info(self, fn: ir.Function, numthreads, symbol: str, fields: list[FieldLayout],
                   size: int) -> EntryPointInfo:
        return EntryPointInfo(fn.slang_name, symbol, numthreads, fields, size)


def assemble(program: Program, target: Target) -> tuple[str, ProgramReflection]:
    em = target.em
    em.entry_ids = {id(fn) for fn, _ in program.entries}
    uniforms = [g for g in program.globals if g.kind == "uniform"]
    others = [g for g in program.globals if g.kind != "uniform"]
    g_fields, g_size = block_layout([(g.slang_name, g.type) for g in uniforms])
    g_lines = target.globals_block(uniforms, g_fields, g_size)
    s_lines = target.statics(others)
    recursive = recursive_functions(program.functions) if target.guards_recursion else set()
    target.recursive = bool(recursive)
    if recursive and target.counts_depth:     # hidden depth parameters: before any prototype is printed
        em.depth_fns = {id(fn) for fn in recursive}
        em.depth_limit = target.depth_limit(recursive)
    protos = [em.prototype(fn) + ";" for fn in program.functions]
    for fn in program.functions:
        em.function(fn, guard_recursion=fn in recursive)
    body_lines = em.lines

    refl = ProgramReflection(globals=g_fields, globals_size=g_size)
    launch_parts = []
    for fn, numthreads in program.entries:
        sname, call_args, p_fields, p_size, lines = entry_params(em, fn, numthreads, target.access)
        lines += [target.check_offset(sname, fl.name, fl.offset, fl.name) for fl in p_fields]
        lines += target.check_size(sname, p_size, "parameter block size")
        symbol = f"sj_entry_{fn.slang_name}"
        launch_parts.append((lines, target.launcher(fn, numthreads, symbol, sname, call_args)))
        refl.entry_points[fn.slang_name] = target.entry_info(fn, numthreads, symbol, p_fields, p_size)
    launchers = ["\n".join(lines + target.part0_code(code)) for lines, code in launch_parts]

    head, rest = target.header(), [
        *target.after_prelude(),
        "\n".join(em.struct_out),
        "\n".join(g_lines),
        "\n".join(s_lines),
        "\n".join(protos),
        "\n".join(target.part0_code(body_lines)),
        "\n\n".join(launchers),
        *target.part0_code(target.trailer()),
    ]
    parts = [*head, target.prelude("\n".join(head + rest)), *rest]
    refl.error_sites = list(em.sites)       # "file:line: what" per failure site (runtime/kernel_errors.py)
    return "\n\n".join(parts) + "\n", refl


# A worker's run of a dispatch's chunks (sj_run_chunks_ctx): a launcher whose accumulators outlive one chunk
# registers them in the worker's RangeCtx: `seal` (run by the worker when it has no chunk left) folds its
# per-lane partials, and after every worker is done one thread (sj_finish_chunks) `merge`s them in worker order
# and `flush`es the sum: one add per slot and dispatch into memory, no contention between workers.
RANGE_PRELUDE = r"""namespace sj {
struct RangeCtx { void (*flush)(void*); void* state; void (*seal)(void*); void (*merge)(void*, void*); };
inline RangeCtx*& range_ctx() { static thread_local RangeCtx* c = nullptr; return c; }
}  // namespace sj"""


def cpp_prefix(cpu_options, lane_loops: bool, privatised: bool) -> Optional[str]:
    """The fixed prefix (everything before PCH_END, which runtime/cpu_compiler.py precompiles) of a C++
    translation unit with the default pipeline's `cpu_options` whose kernels are all scalar (lane_loops False)
    or all lane-loop kernels, with privatised adds or without: what assemble() writes before the program's own
    code, so that the runtime can precompile it before any such unit exists (CpuOptions.early_pch).  None when
    those options never give such a unit."""
    t = CppTarget(False, False, None, cpu_options)
    if lane_loops and not t.lane_loops:
        return None
    t.launchers = 1
    t.lane_loop_launchers = 1 if lane_loops else 0
    t.used_lane_loops = lane_loops
    if privatised:
        t.privatised = {0: None}
    head, rest = t.header(), t.after_prelude()
    assert rest[-1] == PCH_END
    return "\n\n".join([*head, t.prelude(""), *rest[:-1]]) + "\n\n"


class CppTarget(Target):
    """C++ for the CPU: one `extern "C"` launcher per entry point that runs a range of thread groups
    (the ABI: reflection.py); threads of a group run as fibers when the program uses group barriers."""

    guards_recursion = True

    def __init__(self, group_barrier: bool = False, checked: bool = False, cpu_plan=None, cpu_options=None):
        slots = cpu_plan.slots if cpu_plan is not None else None
        super().__init__(CpuEmitter(checked, slots))
        self.group_barrier = group_barrier
        self.lanes = bool(getattr(cpu_options, "lanes", False)) and not group_barrier   # emit/cpu_lanes.py
        self.vector_math = bool(getattr(cpu_options, "vector_math", False))
        self.lane_loops = self.lanes and bool(getattr(cpu_options, "lane_loops", False))   # emit/cpu_lane_loops.py
        self.lane_width = int(getattr(cpu_options, "lane_width", 32))
        self.simd_threads = bool(getattr(cpu_options, "simd_threads", False)) and not group_barrier
        self.half_rows = bool(getattr(cpu_options, "half_rows", False))
        self.lane_unroll = int(getattr(cpu_options, "lane_unroll", 0))
        self.lane_part_lines = int(getattr(cpu_options, "lane_part_lines", 0))
        self.lane_part_min_cpus = int(getattr(cpu_options, "lane_part_min_cpus", 3))
        self.parts = 1                  # the most parts a lane kernel was cut into (emit/cpu_lane_split.py)
        self.lane_vregs = bool(getattr(cpu_options, "lane_vregs", False))   # emit/cpu_lane_vregs.py
        self.used_lanes = False
        self.used_lane_loops = False
        self.lane_compile_flags = bool(getattr(cpu_options, "lane_compile_flags", False))
        self.launchers = 0              # launchers emitted, and of them lane-loop kernels
        self.lane_loop_launchers = 0
        self.privatised: dict = dict(cpu_plan.entries) if slots is not None else {}   # id(entry) -> slots

    def launch_prologue(self) -> list[str]:
        """The launcher's first lines: this thread's failures go to the dispatch's error record
        (`sj_ep`, runtime/kernel_errors.py ErrorRecord), restored by launch_epilogue."""
        if not self.em.sites:       # nothing in this program can record a failure: no thread-local to set
            return []               # (setting it measurably slowed small kernels' launchers)
        return ["    sj::ErrorRecord* sj_prev_ep = sj::error_record();",
                "    if (sj_ep) sj::error_record() = (sj::ErrorRecord*)sj_ep;"]

    def launch_epilogue(self) -> list[str]:
        return ["    sj::error_record() = sj_prev_ep;"] if self.em.sites else []

    def trailer(self) -> list[str]:
        # Dynamic chunks (runtime/cpu_pool.py): every worker runs `launcher` on chunks of `chunk` groups that it
        # claims from a shared counter until [0, total) is done, so a worker that the OS deschedules holds
        # back no more than one chunk; its accumulators stay in its RangeCtx (`sj_out`, 64 bytes) until
        # sj_finish_chunks combines the workers' (in worker order) after the join.
        return ["\n".join([
            'typedef void (*sj_launcher_t)(void*, void*, const uint32_t*, uint32_t, uint32_t, void*);',
            'extern "C" SJ_EXPORT void sj_run_chunks_ctx(void* sj_launcher, void* sj_gp, void* sj_pp, const uint32_t* sj_gc, '
            'uint64_t* sj_next, uint32_t sj_total, uint32_t sj_chunk, void* sj_ep, void* sj_out)',
            "{",
            "    sj_launcher_t sj_fn = (sj_launcher_t)sj_launcher;",
            "    sj::RangeCtx* sj_rc = (sj::RangeCtx*)sj_out;   // accumulators kept across this worker's chunks",
            "    *sj_rc = sj::RangeCtx{nullptr, nullptr, nullptr, nullptr};",
            "    sj::range_ctx() = sj_rc;",
            "    for (;;)",
            "    {",
            "        uint64_t sj_b = __atomic_fetch_add(sj_next, (uint64_t)sj_chunk, __ATOMIC_RELAXED);",
            "        if (sj_b >= sj_total) break;",
            "        uint64_t sj_e = sj_b + sj_chunk < sj_total ? sj_b + sj_chunk : sj_total;",
            "        sj_fn(sj_gp, sj_pp, sj_gc, (uint32_t)sj_b, (uint32_t)sj_e, sj_ep);",
            "    }",
            "    sj::range_ctx() = nullptr;",
            "    if (sj_rc->seal) sj_rc->seal(sj_rc->state);   // this worker's lanes folded, in parallel with the others",
            "}",
            "// After the join: the workers' accumulators (n records `stride` bytes apart) summed in worker order into",
            "// the first's, then added into memory once per slot (atomically: other dispatches may add there too).",
            'extern "C" SJ_EXPORT void sj_finish_chunks(void* sj_ctxs, uint32_t sj_n, uint32_t sj_stride)',
            "{",
            "    sj::RangeCtx* sj_first = nullptr;",
            "    for (uint32_t sj_i = 0; sj_i < sj_n; ++sj_i)",
            "    {",
            "        sj::RangeCtx* sj_c = (sj::RangeCtx*)((char*)sj_ctxs + (size_t)sj_i * sj_stride);",
            "        if (!sj_c->flush) continue;",
            "        if (!sj_first) { sj_first = sj_c; continue; }",
            "        if (sj_c->merge && sj_c->merge == sj_first->merge) sj_c->merge(sj_first->state, sj_c->state);",
            "        else sj_c->flush(sj_c->state);",
            "        sj_c->flush = nullptr;",
            "    }",
            "    if (sj_first) { void (*sj_f)(void*) = sj_first->flush; sj_first->flush = nullptr; sj_f(sj_first->state); }",
            "}",
            'extern "C" SJ_EXPORT void sj_run_chunks(void* sj_launcher, void* sj_gp, void* sj_pp, const uint32_t* sj_gc, '
            'uint64_t* sj_next, uint32_t sj_total, uint32_t sj_chunk, void* sj_ep)',
            "{",
            "    sj::RangeCtx sj_rc;",
            "    sj_run_chunks_ctx(sj_launcher, sj_gp, sj_pp, sj_gc, sj_next, sj_total, sj_chunk, sj_ep, &sj_rc);",
            "    sj_finish_chunks(&sj_rc, 1, sizeof sj_rc);",
            "}"])]

    def part0(self, lines: list[str]) -> list[str]:
        if self.parts < 2 or not lines:
            return lines
        return ["#if !defined(SJ_PART) || SJ_PART == 0"] + lines + ["#endif"]

    def part0_code(self, lines: list[str]) -> list[str]:
        """All but the parts of the lane kernels, where a kernel is in parts (emit/cpu_lane_split.py); a kernel in
        parts guards its own lines."""
        return lines if "#ifndef SJ_PART" in lines else self.part0(lines)

    def statics(self, others: list[ir.GlobalVar]) -> list[str]:
        if any(g.kind != "const" for g in others):
            self.lane_part_lines = 0    # a part in another process would have its own copy of a mutable static
        return super().statics(others)

    def header(self) -> list[str]:
        only = self.lane_compile_flags and self.launchers and self.lane_loop_launchers == self.launchers
        return [*([LANE_KERNELS_ONLY] if only else []),
                *([vector_math_header()] if self.used_lanes and self.vector_math else []),
                *([f"{PARTS_MARK}{self.parts} on {self.lane_part_min_cpus}+ cores"] if self.parts > 1 else [])]

    def after_prelude(self) -> list[str]:
        return ["#include <cstddef>", RANGE_PRELUDE, *([PACC_PRELUDE] if self.privatised else []),
                *([LANES_PRELUDE] if self.used_lanes or self.used_lane_loops else []),
                *([LANE_LOOPS_PRELUDE] if self.used_lane_loops else []),
                *([LACC_PRELUDE] if self.used_lane_loops and self.privatised else []),
                "#ifndef SJ_EXPORT\n#define SJ_EXPORT __attribute__((visibility(\"default\")))\n#endif",
                PCH_END]

    def _kept_lane_launcher(self, fn: ir.Function, symbol: str, sname: str, loops, ns: int) -> list[str]:
        """The launcher of a lane-blocked entry with per-worker accumulators (privatised adds, combined atomics).
        In a chunked dispatch (sj_run_chunks) they live in thread-local storage across the worker's chunks and
        reach memory once per worker (RANGE_PRELUDE); a direct call flushes them at its end."""
        W, nred, n = loops.W, len(loops.red_apply), fn.slang_name
        fields = ([f"float acc[{ns}];", f"uintptr_t tab[{ns}];", f"alignas(64) float lacc[{ns * W}];"] if ns else []) + \
            [f"sj::LaneRed red[{max(1, nred)}];"]
        return [
            *([f"// privatised gradient adds: {ns} slots, per lane in sj_lacc"] if ns else []),
            f"struct sj_Acc_{n} {{ {' '.join(fields)} }};",
            f"static void sj_accinit_{n}(sj_Acc_{n}* a) {{ {'for (int s = 0; s < ' + str(ns) + '; ++s) a->tab[s] = 0; ' if ns else ''}"
            f"for (auto& r : a->red) r = sj::LaneRed{{}}; }}",
            f"static void sj_accflush_{n}(void* p)",
            "{",
            f"    sj_Acc_{n}* a = (sj_Acc_{n}*)p;",
            *([f"    sj::lacc_flush(a->acc, a->lacc, a->tab, {ns}, {W});"] if ns else []),
            *[f"    if (a->red[{k}].key) sj_redapply_{n}_{k}(a->red[{k}]);" for k in range(nred)],
            "}",
            f"static void sj_accseal_{n}(void* p)",
            "{",
            *([f"    sj_Acc_{n}* a = (sj_Acc_{n}*)p;",
               f"    sj::lane_seal(a->acc, a->lacc, a->tab, {ns}, {W});"] if ns else ["    (void)p;"]),
            "}",
            f"static void sj_accmerge_{n}(void* d, void* s)   // s's sums into d's (s sealed); s's combined atomics applied",
            "{",
            f"    sj_Acc_{n}* a = (sj_Acc_{n}*)d; sj_Acc_{n}* b = (sj_Acc_{n}*)s;",
            *([f"    sj::acc_merge(a->acc, a->tab, b->acc, b->tab, {ns});"] if ns else ["    (void)a;"]),
            *[f"    if (b->red[{k}].key) sj_redapply_{n}_{k}(b->red[{k}]);" for k in range(nred)],
            "}",
            f'extern "C" SJ_EXPORT void {symbol}(void* sj_gp, void* sj_pp, const uint32_t* sj_gc, uint32_t sj_begin, uint32_t sj_end, void* sj_ep)',
            "{",
            "    sj_g = (sj_Globals*)sj_gp;",
            *self.launch_prologue(),
            f"    const {sname}* sj_P = (const {sname}*)sj_pp;",
            f"    static thread_local sj_Acc_{n} sj_kept;   // a chunked dispatch's: combined by sj_finish_chunks",
            f"    sj_Acc_{n} sj_own;",
            "    sj::RangeCtx* sj_rc = sj::range_ctx();",
            f"    sj_Acc_{n}* sj_A = sj_rc ? &sj_kept : &sj_own;",
            f"    if (!sj_rc) sj_accinit_{n}(sj_A);",
            f"    else if (sj_rc->flush != &sj_accflush_{n})",
            "    {",
            "        if (sj_rc->flush) sj_rc->flush(sj_rc->state);",
            f"        sj_accinit_{n}(sj_A);",
            f"        sj_rc->flush = &sj_accflush_{n};",
            "        sj_rc->state = sj_A;",
            f"        sj_rc->seal = &sj_accseal_{n};",
            f"        sj_rc->merge = &sj_accmerge_{n};",
            "    }",
            *(["    float* sj_acc = sj_A->acc; float* sj_lacc = sj_A->lacc; uintptr_t* sj_tab = sj_A->tab;"] if ns else
              ["    float* sj_acc = nullptr; float* sj_lacc = nullptr; uintptr_t* sj_tab = nullptr;"]),
            "    sj::LaneRed* sj_red = sj_A->red;",
            "    for (uint32_t sj_lin = sj_begin; sj_lin < sj_end; ++sj_lin)",
            "    {",
            "        uint32_t sj_gx = sj_lin % sj_gc[0], sj_rest = sj_lin / sj_gc[0];",
            "        uint32_t sj_gy = sj_rest % sj_gc[1], sj_gz = sj_rest / sj_gc[1];",
            f"        for (uint32_t sj_t0 = 0; sj_t0 < {loops.group}u; sj_t0 += {W}u)   // lane-blocked",
            f"            sj_lanes_{n}(sj_P, sj_gx, sj_gy, sj_gz, sj_t0, sj_acc, sj_lacc, sj_tab, sj_red);",
            "    }",
            f"    if (!sj_rc) sj_accflush_{n}(sj_A);",
            *self.launch_epilogue(),
            "}",
        ]

    def launcher(self, fn: ir.Function, numthreads, symbol: str, sname: str, call_args: list[str]) -> list[str]:
        nx, ny, nz = numthreads
        self.launchers += 1
        if self.group_barrier:
            # Threads of a group run as fibers so group barriers hold (prelude: sj::fiber).
            return [
                f"struct sj_Group_{fn.slang_name} {{ const {sname}* sj_P; uint32_t sj_gx, sj_gy, sj_gz; }};",
                f"static void sj_thread_{fn.slang_name}(void* sj_arg, uint32_t sj_t)",
                "{",
                f"    const sj_Group_{fn.slang_name}* sj_G = (const sj_Group_{fn.slang_name}*)sj_arg;",
                "    const auto* sj_P = sj_G->sj_P;",
                "    (void)sj_P;",
                "    uint32_t sj_gx = sj_G->sj_gx, sj_gy = sj_G->sj_gy, sj_gz = sj_G->sj_gz;",
                *(["    sj::stack_mark(sj::fiber::kStackSize / 2);"] if self.recursive else []),
                f"    uint32_t sj_tx = sj_t % {nx}u, sj_ty = (sj_t / {nx}u) % {ny}u, sj_tz = sj_t / {nx * ny}u;",
                f"    {fn.name}({', '.join(call_args)});",
                "}",
                f'extern "C" SJ_EXPORT void {symbol}(void* sj_gp, void* sj_pp, const uint32_t* sj_gc, uint32_t sj_begin, uint32_t sj_end, void* sj_ep)',
                "{",
                "    sj_g = (sj_Globals*)sj_gp;",
                *self.launch_prologue(),
                f"    sj_Group_{fn.slang_name} sj_G{{(const {sname}*)sj_pp, 0u, 0u, 0u}};",
                "    for (uint32_t sj_lin = sj_begin; sj_lin < sj_end; ++sj_lin)",
                "    {",
                "        sj_G.sj_gx = sj_lin % sj_gc[0];",
                "        uint32_t sj_rest = sj_lin / sj_gc[0];",
                "        sj_G.sj_gy = sj_rest % sj_gc[1]; sj_G.sj_gz = sj_rest / sj_gc[1];",
                f"        sj::fiber::run({nx * ny * nz}u, &sj_thread_{fn.slang_name}, &sj_G);",
                "    }",
                *self.launch_epilogue(),
                "}",
            ]
        # privatised gradient adds (passes/cpu_adds.py): the worker's accumulators live on its stack
        ns = self.privatised.get(id(fn), 0)
        slot_args, acc, flush, kept = [], [], [], []
        if ns:
            # kept across a chunked dispatch's chunks as the lane launcher's (_kept_lane_launcher)
            n = fn.slang_name
            slot_args = ["sj_acc", "sj_tab", "0"]
            kept = [f"// privatised gradient adds: {ns} slots",
                    f"struct sj_PAcc_{n} {{ float acc[{ns}]; uintptr_t tab[{ns}]; }};",
                    f"static void sj_paccflush_{n}(void* p) {{ sj_PAcc_{n}* a = (sj_PAcc_{n}*)p; "
                    f"sj::pacc_flush(a->acc, a->tab, {ns}); }}",
                    f"static void sj_paccmerge_{n}(void* d, void* s) {{ sj_PAcc_{n}* a = (sj_PAcc_{n}*)d; "
                    f"sj_PAcc_{n}* b = (sj_PAcc_{n}*)s; sj::acc_merge(a->acc, a->tab, b->acc, b->tab, {ns}); }}"]
            acc = [f"    static thread_local sj_PAcc_{n} sj_kept;   // a chunked dispatch's: combined by sj_finish_chunks",
                   f"    sj_PAcc_{n} sj_own;",
                   "    sj::RangeCtx* sj_rc = sj::range_ctx();",
                   f"    sj_PAcc_{n}* sj_A = sj_rc ? &sj_kept : &sj_own;",
                   f"    if (!sj_rc) for (int s = 0; s < {ns}; ++s) sj_own.tab[s] = 0;",
                   f"    else if (sj_rc->flush != &sj_paccflush_{n})",
                   "    {",
                   "        if (sj_rc->flush) sj_rc->flush(sj_rc->state);",
                   f"        for (int s = 0; s < {ns}; ++s) sj_kept.tab[s] = 0;",
                   f"        sj_rc->flush = &sj_paccflush_{n};",
                   "        sj_rc->state = sj_A;",
                   "        sj_rc->seal = nullptr;",
                   f"        sj_rc->merge = &sj_paccmerge_{n};",
                   "    }",
                   "    float* sj_acc = sj_A->acc; uintptr_t* sj_tab = sj_A->tab;"]
            flush = [f"    if (!sj_rc) sj_paccflush_{n}(sj_A);"]
        elif self.em.bears_slots(fn):
            slot_args = ["nullptr", "nullptr", "-1"]
        loops = None
        if self.lane_loops and (ns or not slot_args):
            varying = {i for i, a in enumerate(call_args) if not a.startswith("sj_P->")}
            for kernel in ([VregLaneKernel] if self.lane_vregs else []) + [LoopLaneKernel]:
                loops = kernel.build(self.em, fn, numthreads, sname, call_args, varying, ns, self.lane_width,
                                     self.half_rows, self.lane_unroll, self.lane_part_lines)
                if loops is not None:
                    break
        if loops is not None:
            self.used_lane_loops = True
            self.lane_loop_launchers += 1
            self.parts = max(self.parts, loops.parts)
            W, nred = loops.W, len(loops.red_apply)
            if ns or nred:
                return loops.lines + self.part0(self._kept_lane_launcher(fn, symbol, sname, loops, ns))
            return loops.lines + self.part0([
                f'extern "C" SJ_EXPORT void {symbol}(void* sj_gp, void* sj_pp, const uint32_t* sj_gc, uint32_t sj_begin, uint32_t sj_end, void* sj_ep)',
                "{",
                "    sj_g = (sj_Globals*)sj_gp;",
                *self.launch_prologue(),
                f"    const {sname}* sj_P = (const {sname}*)sj_pp;",
                *([f"    float sj_acc[{ns}];   // privatised gradient adds: {ns} slots, per lane in sj_lacc",
                   f"    uintptr_t sj_tab[{ns}] = {{}};",
                   f"    alignas(64) float sj_lacc[{ns * W}];"] if ns else
                  ["    float* sj_acc = nullptr; float* sj_lacc = nullptr; uintptr_t* sj_tab = nullptr;"]),
                f"    sj::LaneRed sj_red[{max(1, nred)}] = {{}};   // combined atomics, applied after the range",
                "    for (uint32_t sj_lin = sj_begin; sj_lin < sj_end; ++sj_lin)",
                "    {",
                "        uint32_t sj_gx = sj_lin % sj_gc[0], sj_rest = sj_lin / sj_gc[0];",
                "        uint32_t sj_gy = sj_rest % sj_gc[1], sj_gz = sj_rest / sj_gc[1];",
                f"        for (uint32_t sj_t0 = 0; sj_t0 < {loops.group}u; sj_t0 += {W}u)   // lane-blocked",
                f"            sj_lanes_{fn.slang_name}(sj_P, sj_gx, sj_gy, sj_gz, sj_t0, sj_acc, sj_lacc, sj_tab, sj_red);",
                "    }",
                *([f"    sj::lacc_flush(sj_acc, sj_lacc, sj_tab, {ns}, {W});"] if ns else []),
                *[f"    if (sj_red[{k}].key) sj_redapply_{fn.slang_name}_{k}(sj_red[{k}]);" for k in range(nred)],
                *self.launch_epilogue(),
                "}",
            ])
        lanes = LaneKernel.build(self.em, fn, numthreads, sname, call_args) if self.lanes and not slot_args else None
        if lanes is not None:
            self.used_lanes = True
            return lanes.lines + [
                f'extern "C" SJ_EXPORT void {symbol}(void* sj_gp, void* sj_pp, const uint32_t* sj_gc, uint32_t sj_begin, uint32_t sj_end, void* sj_ep)',
                "{",
                "    sj_g = (sj_Globals*)sj_gp;",
                *self.launch_prologue(),
                f"    const {sname}* sj_P = (const {sname}*)sj_pp;",
                "    for (uint32_t sj_lin = sj_begin; sj_lin < sj_end; ++sj_lin)",
                "    {",
                "        uint32_t sj_gx = sj_lin % sj_gc[0], sj_rest = sj_lin / sj_gc[0];",
                "        uint32_t sj_gy = sj_rest % sj_gc[1], sj_gz = sj_rest / sj_gc[1];",
                f"        for (uint32_t sj_t0 = 0; sj_t0 < {lanes.group}u; sj_t0 += {lanes.width}u)   // lane-blocked",
                f"            sj_lanes_{fn.slang_name}(sj_P, sj_gx, sj_gy, sj_gz, sj_t0);",
                "    }",
                *self.launch_epilogue(),
                "}",
            ]
        return [
            *kept,
            f'extern "C" SJ_EXPORT void {symbol}(void* sj_gp, void* sj_pp, const uint32_t* sj_gc, uint32_t sj_begin, uint32_t sj_end, void* sj_ep)',
            "{",
            "    sj_g = (sj_Globals*)sj_gp;",
            *self.launch_prologue(),
            *(["    sj::stack_mark(size_t(1) << 20);   // 1 MiB of the worker's stack for recursion"] if self.recursive else []),
            *([f"    const {sname} sj_Pl = *(const {sname}*)sj_pp;   // a local copy: loop-invariant fields",
               f"    const {sname}* sj_P = &sj_Pl;"] if self.simd_threads and not slot_args else
              [f"    const {sname}* sj_P = (const {sname}*)sj_pp;"]),
            "    (void)sj_P;",
            *acc,
            "    for (uint32_t sj_lin = sj_begin; sj_lin < sj_end; ++sj_lin)",
            "    {",
            "        uint32_t sj_gx = sj_lin % sj_gc[0], sj_rest = sj_lin / sj_gc[0];",
            "        uint32_t sj_gy = sj_rest % sj_gc[1], sj_gz = sj_rest / sj_gc[1];",
            f"        for (uint32_t sj_tz = 0; sj_tz < {nz}u; ++sj_tz)",
            f"        for (uint32_t sj_ty = 0; sj_ty < {ny}u; ++sj_ty)",
            *(["#pragma omp simd   // CpuOptions.simd_threads: the threads touch disjoint memory"]
              if self.simd_threads and not slot_args else []),
            f"        for (uint32_t sj_tx = 0; sj_tx < {nx}u; ++sj_tx)",
            "        {",
            f"            {fn.name}({', '.join(call_args + slot_args)});",
            "        }",
            "    }",
            *flush,
            *self.launch_epilogue(),
            "}",
        ]


def recursive_functions(functions: list[ir.Function]) -> set:
    """The functions on a call cycle (direct or mutual recursion)."""
    calls = {fn: {n.func for n in walk(fn.body) if isinstance(n, ir.Call)} if fn.body is not None else set()
             for fn in functions}
    out = set()
    for fn in functions:          # fn is recursive when it reaches itself
        seen, todo = set(), list(calls.get(fn, ()))
        while todo:
            g = todo.pop()
            if g is fn:
                out.add(fn)
                break
            if g in seen:
                continue
            seen.add(g)
            todo.extend(calls.get(g, ()))
    return out


def entry_params(em: CppEmitter, fn: ir.Function, numthreads, access: str):
    """An entry point's parameters: system values become launcher expressions, the rest form the
    `uniform` parameter block.  Returns (struct name, call arguments, block layout, block size,
    the struct's C++ lines).  `access` reads a field of the block (`sj_P->` / `sj_P.`)."""
    decl = fn.attrs.get("decl")
    params_items, call_args = [], []
    for i, p in enumerate(fn.params):
        ap = decl.params[i] if decl is not None and i < len(decl.params) else None
        sem = (ap.semantic or "").lower() if ap is not None else ""
        if sem in SYSTEM_VALUES:
            call_args.append(system_value_arg(em, SYSTEM_VALUES[sem], p.type, numthreads))
        elif sem.startswith("sv_"):
            raise error("E5003", f"system value '{ap.semantic}' is not supported on this target", ap.loc)
        else:
            params_items.append((p.name, p.type))
            call_args.append(f"{access}{p.name}")
    p_fields, p_size = block_layout(params_items)
    sname = f"sj_Params_{fn.slang_name}"
    return sname, call_args, p_fields, p_size, struct_lines(em, sname, params_items)


def struct_lines(em: CppEmitter, name: str, items: list[tuple[str, T.Type]]) -> list[str]:
    """A block struct (globals, entry parameters): the fields in order, `char sj_unused` when empty."""
    lines = [f"struct {name} {{"] + [f"    {em.ctype(t)} {n};" for n, t in items]
    if not items:
        lines.append("    char sj_unused;")
    lines.append("};")
    return lines


def system_value_arg(em: CppEmitter, which: str, t: T.Type, numthreads) -> str:
    nx, ny, nz = numthreads
    if which == "gindex":
        # SV_GroupIndex: flattened thread index within the group.
        v = f"(sj_tz * {nx * ny}u + sj_ty * {nx}u + sj_tx)"
        return em.convert_str(v, T.UINT, t)
    vecs = {
        "dtid": f"sj::vec<uint32_t, 3>{{{{sj_gx * {nx}u + sj_tx, sj_gy * {ny}u + sj_ty, sj_gz * {nz}u + sj_tz}}}}",
        "gid": "sj::vec<uint32_t, 3>{{sj_gx, sj_gy, sj_gz}}",
        "gtid": "sj::vec<uint32_t, 3>{{sj_tx, sj_ty, sj_tz}}",
    }
    v = vecs[which]
    if isinstance(t, T.ScalarType):
        return em.convert_str(f"{v}[0]", T.UINT, t)
    if isinstance(t, T.VectorType):
        if t.n < 3:
            v = f"sj::swizzle<{','.join(str(i) for i in range(t.n))}>({v})"
        return em.convert_str(v, T.VectorType(T.UINT, t.n), t)
    raise ValueError(f"bad system value type {t}")
