"""The CUDA flavour of the C-family emitter: IR -> CUDA C++ for NVRTC (or `nvcc -ptx`).

Only what differs from the C++ target lives here; expressions and statements are CppEmitter's.

Translation unit: `#define SJ_CUDA_TU 1`, the prelude (whose `#if SJ_CUDA` blocks supply `__half`,
native atomics, warp-level wave ops and barriers; under `__CUDACC_RTC__` it defines the few std
pieces it needs, since NVRTC has no standard headers), the struct definitions, the globals
block, statics, `__device__` functions, and one kernel per entry point.

Kernel ABI (the CUDA counterpart of the CPU ABI in reflection.py):

    extern "C" __global__ void __launch_bounds__(NX*NY*NZ)
    sj_entry_<name>(const sj_Params_<name> sj_P);

* Launch with block size = [numthreads] (NX, NY, NZ) and grid = the group counts
  (ceil(thread_count / numthreads) per axis). Every thread of every group runs, as on the CPU
  (no bounds check against the requested thread count, as in Slang).
* A coarsened kernel (`EntryPointInfo.grid_stride`, see coarse_kernel) takes a second parameter,
  `sj_cuda::grid3 sj_G` = the group counts, and is launched with fewer blocks along x (about one
  resident wave); its blocks run the groups blockIdx.x, blockIdx.x + gridDim.x, ... in turn.
* A coarsened kernel with `EntryPointInfo.grid_slots` = N > 0 takes a third parameter, a scratch
  buffer of 16 + 8 N + 4 N x (blocks launched) bytes that the runtime zeroes once and keeps per
  stream (the kernel leaves it zeroed; prelude racc_flush_grid).
* `sj_P` is the entry point's `uniform` parameter block, passed by value as the kernel's only
  parameter: `EntryPointInfo.params_size` bytes laid out as `EntryPointInfo.params` says
  (the driver copies sizeof(sj_Params_<name>) <= params_size bytes from the packed block).
* The globals block (`ProgramReflection.globals`, `globals_size` bytes, same layout as on the
  CPU) lives in `__constant__` memory at the module symbol `sj_globals` (see GLOBALS_SYMBOL);
  the runtime copies the packed block there (cuMemcpyHtoDAsync on the launch stream) before
  the launch. Launches of one module are therefore ordered on one stream by the runtime.
* Buffers are `{T* data; uint64 count}` and pointers are 8 bytes: device addresses.
* SV_DispatchThreadID = blockIdx * blockDim + threadIdx, SV_GroupID = blockIdx,
  SV_GroupThreadID = threadIdx, SV_GroupIndex = threadIdx flattened (x fastest).
* `groupshared` globals are `__shared__` storage; `static` (per-thread mutable) globals live in
  a device array with one slot per resident hardware thread (SM id, warp id, lane), and are
  re-initialised at the start of every thread; `static const` globals are `__device__ const`
  scalars, or inline functions returning the value for aggregates.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import nodes as ir
from ..ir.walk import walk
from .. import types as T
from ..passes.options import CudaOptions
from ..passes.red_plan import RedAddPlan, grid_flush
from ..passes.red_slots import RedSlots
from ..reflection import CUDA_GLOBALS_SYMBOL, EntryPointInfo
from .cpp import CppEmitter
from .cuda_prelude import trimmed_prelude

# A program with recursion defines this device array: its size is the per-thread stack (bytes) its
# depth-counted recursion guard was sized for (CudaTarget.depth_limit); the runtime reads the size when it
# loads the module and raises CU_LIMIT_STACK_SIZE to it (the driver default is 1 KiB).
CUDA_STACK_SYMBOL = "sj_stack_bytes"
CUDA_STACK_BYTES = 16384          # per-thread stack asked for a program with recursion (unless it needs more)
CUDA_STACK_RESERVE = 2048         # of it, kept for the kernel's own frame and non-recursive helpers
CUDA_FRAME_OVERHEAD = 256         # per recursive frame: saved registers, return address, spills
CUDA_MIN_DEPTH = 4                # levels always allowed (the stack grows to fit them)
CUDA_MAX_DEPTH = 1024
from .program import Target, struct_lines

GLOBALS_SYMBOL = CUDA_GLOBALS_SYMBOL
# Per-thread storage for mutable `static` globals: one slot per (SM < 256, warp < 64, lane).
STATIC_SLOTS = 256 * 64 * 32


class CudaEmitter(CppEmitter):
    def __init__(self, slots: Optional[RedSlots] = None):
        super().__init__("cuda")
        self.global_kinds: dict[str, str] = {}     # C name -> how references are spelled
        self.slots = slots                         # gradient-add slots (passes/red_slots.py), if any
        self.slot_base: list[str] = []             # C expression: base of the current slot space
        self.abandon: dict[int, int] = {}          # id(Return) -> slots to zero first (RedAddPlan.covered)

    # ---------------------------------------------------------- per-thread gradient accumulation
    # A function with slots takes (sj_acc, sj_tab, sj_slot, sj_mode) after its own parameters and is
    # inlined; a slotted site becomes sj_cuda::racc_add(...) with its slot expression, a counted loop
    # with slots is unrolled.  sj_slot = -1 (a caller outside a coarsened kernel) means the ordinary
    # add; sj_mode is the kernel's (prelude racc_add: checked, claim, add), a constant once inlined.
    def bears_slots(self, fn: ir.Function) -> bool:
        return self.slots is not None and self.slots.bears_slots(fn)

    def prototype(self, fn: ir.Function) -> str:
        ps = [self.param_decl(p) for p in fn.params]
        inline = ""
        if self.bears_slots(fn):
            ps += ["::sj_cuda::racc_t* sj_acc", "unsigned long long* sj_tab", "int sj_slot", "int sj_mode"]
            inline = "__forceinline__ "
        ps += self.depth_param(fn)
        return f"static __device__ {inline}{self.ctype(fn.ret)} {fn.name}({', '.join(ps)})"

    def function(self, fn: ir.Function, guard_recursion: bool = False):
        self.slot_base = ["sj_slot"] if self.bears_slots(fn) else []
        super().function(fn, guard_recursion)

    def _slot(self, node) -> Optional[str]:
        o = self.slots.offset.get(id(node)) if self.slots is not None else None
        if o is None or not self.slot_base:
            return None
        return f"SJ_SLOT({self.slot_base[-1]}, {o})"

    def x_Call(self, e):
        if not self.bears_slots(e.func):
            return super().x_Call(e)
        slot = self._slot(e)
        extra = ["sj_acc", "sj_tab", slot, "sj_mode"] if slot else ["nullptr", "nullptr", "-1", "0"]
        extra += self.depth_arg(e.func)
        void = e.type == T.VOID
        return self.with_out_temps(e.args, lambda parts: ("sj_void:" if void else "") +
                                   f"{e.func.name}({', '.join(list(parts) + extra)})")

    def x_Intrinsic(self, e):
        slot = self._slot(e)
        if slot is None:
            return super().x_Intrinsic(e)
        dest, value = e.args
        return f"::sj_cuda::racc_add(sj_acc, sj_tab, {slot}, sj_mode, &({self.expr(dest)}), {self.expr(value)})"

    def s_Loop(self, s, d):
        lay = self.slots.loops.get(id(s)) if self.slots is not None else None
        if lay is None or not self.slot_base:
            return super().s_Loop(s, d)
        it = lay.iteration(self.var_name(lay.var))
        self.slot_base.append(f"SJ_SLOT({self.slot_base[-1]}, {lay.offset} + {it} * {lay.body_size})")
        try:
            super().s_Loop(s, d)
        finally:
            self.slot_base.pop()

    def unroll_loop(self, s) -> bool:
        return super().unroll_loop(s) or (self.slots is not None and id(s) in self.slots.loops
                                          and bool(self.slot_base))

    def s_Return(self, s, d):
        ns = self.abandon.get(id(s))
        if ns is not None:          # a covered kernel's logical thread ends before its first slot
            self.out(d, f"::sj_cuda::racc_abandon(sj_acc, {ns});")
        super().s_Return(s, d)

    def x_GlobalRef(self, e):
        v = e.var
        if v.kind == "uniform":
            return f"sj_g->{v.name}"
        how = self.global_kinds.get(v.name)
        if how == "shared":
            return f"(*reinterpret_cast<{self.ctype(v.type)}*>({v.name}_raw))"
        if how == "static":
            return f"(*reinterpret_cast<{self.ctype(v.type)}*>(&{v.name}_raw[sj_static_slot() * {words(v.type)}]))"
        if how == "constfn":
            return f"{v.name}()"
        return v.name

    def const(self, t, v):
        if isinstance(t, T.ScalarType) and t.kind == "float" and t.bits == 16:
            # The bits, rounded once from the double: a compile-time value (a conversion from a
            # double literal is an inline-asm cvt that NVRTC neither folds nor hoists).
            bits = int(np.array(float(v), np.float64).astype(np.float16).view(np.uint16))
            return f"__ushort_as_half((unsigned short)0x{bits:04X}u)"
        if isinstance(t, T.ScalarType) and t.kind == "float":
            fv = float(v)
            if fv != fv or fv in (float("inf"), float("-inf")):
                # By their bits: NVRTC has no __builtin_huge_val (a literal past FLT_MAX is inf).
                if t.bits == 64:
                    bits = 0x7FF8000000000000 if fv != fv else (0x7FF0000000000000 if fv > 0 else 0xFFF0000000000000)
                    return f"__longlong_as_double((long long)0x{bits:016X}ull)"
                bits = 0x7FC00000 if fv != fv else (0x7F800000 if fv > 0 else 0xFF800000)
                return f"__int_as_float((int)0x{bits:08X}u)"
        return super().const(t, v)


def words(t: T.Type) -> int:
    size, _ = T.size_align(t)
    return max(1, (size + 7) // 8)


def _is_literal(e) -> bool:
    return isinstance(e, ir.Const) and isinstance(e.type, (T.ScalarType, T.EnumType))


def coarse_kernel(symbol: str, sname: str, numthreads, ns: int, static_inits: list[str], begin: list[str],
                  call, end: list[str], invariant: Optional[str], shared: bool, mma_tiles: int = 0,
                  covered: bool = False, opts: CudaOptions = CudaOptions()) -> list[str]:
    """A coarsened kernel: each block runs the groups blockIdx.x, blockIdx.x + gridDim.x, ... of the
    dispatch (`sj_G` = its group counts; the runtime launches about one resident wave of blocks),
    one whole group per turn, so barriers-free group semantics, wave ops and thread ids are those of
    the plain kernel.  Thread-uniform gradient adds go into `ns` per-thread float registers (prelude
    racc_add) that each warp adds into memory once, at the end: through the block's sum (one atomic
    per block and slot, prelude racc_flush_block) when the tables fit CudaOptions.block_flush_bytes.

    `call(mode)` is the entry's call with the racc_add mode.  When the slot addresses are proven
    invariant (`invariant` is None, passes/slot_invariance.py) the warp runs its groups in claim mode
    (each add records its slot's address) until every slot has one, then in add mode (register adds
    only: no shared-memory traffic, so NVRTC can also merge the repeated loads of the parameters);
    otherwise every add checks its address (mode 0).

    `shared`: the slots live in dynamic shared memory, per warp [slot][lane] (prelude SJ_RACC_SHARED:
    slot k of a lane at sj_acc[k * 32], conflict-free), not in registers.  `mma_tiles`: tensor-core
    slots (prelude SJ_RACC_MMA): the warp's stage of `mma_tiles` x 16 slots in dynamic shared memory,
    summed after every turn (racc_step) and cleared, unless `covered` (every finished logical thread
    writes every slot: RedAddPlan.covered)."""
    nx, ny, nz = numthreads
    warps = nx * ny * nz // 32
    warp_index = f"((sj_tx + {nx}u * (sj_ty + {ny}u * sj_tz)) >> 5)"
    step, finish = [], []
    if mma_tiles:
        acc = ["    extern __shared__ __align__(16) unsigned char sj_dyn_smem[];",
               f"    ::sj_cuda::racc_t sj_acc[SJ_RACC_LEN({ns})];   // slots: {ns}",
               f"    ::sj_cuda::racc_begin(sj_acc, {ns}, sj_dyn_smem + {warp_index} * {opts.mma_stages * opts.mma_stage_bytes * mma_tiles}u);"]
        step = [f"        ::sj_cuda::racc_step(sj_acc, {ns}{', false' if covered else ''});"]
        finish = [f"    ::sj_cuda::racc_finish(sj_acc, {ns});"]
    elif shared:
        acc = ["    extern __shared__ __align__(16) unsigned char sj_dyn_smem[];",
               f"    ::sj_cuda::racc_t sj_acc[1] = {{::sj_cuda::racc_column(sj_dyn_smem, "
               f"((sj_tx + {nx}u * (sj_ty + {ny}u * sj_tz)) >> 5) * {ns * 32}u + ::sj_cuda::lane_id())}};   // slots: {ns}",
               f"    for (int sj_k = 0; sj_k < {ns}; ++sj_k) ::sj_cuda::racc_init(sj_acc, sj_k);"]
    else:
        acc = [f"    ::sj_cuda::racc_t sj_acc[SJ_RACC_LEN({ns})];   // slots: {ns}",
               f"    ::sj_cuda::racc_begin(sj_acc, {ns}, nullptr);"]
    grid = grid_flush(numthreads, ns, invariant, opts)
    if warps * ns * 12 <= opts.block_flush_bytes:
        part = [f"    __shared__ float sj_racc_part[{warps * ns}];"]
        flush = [f"    ::sj_cuda::racc_out_all(sj_acc, sj_tab, sj_racc_part + {warp_index} * {ns}u, {ns});",
                 "    __syncthreads();   // every thread gets here: the group loop is the same for the whole block",
                 f"    ::sj_cuda::racc_flush_{'grid' if grid else 'block'}(sj_racc_tab, sj_racc_part, {ns}u, {warps}u, "
                 f"sj_tx + {nx}u * (sj_ty + {ny}u * sj_tz){', sj_scratch' if grid else ''});"]
    else:
        part = []
        flush = [f"    ::sj_cuda::racc_out_all(sj_acc, sj_tab, nullptr, {ns});"]
    if invariant is None:
        run = [f"        if (sj_claimed) {call(2)}",
               f"        else {{ {call(1)} __syncwarp(); sj_claimed = ::sj_cuda::racc_claimed(sj_tab, {ns}u); }}"]
        state = ["    bool sj_claimed = false;   // slot addresses proven invariant: claim, then add"]
    else:
        run = [f"        {call(0)}"]
        state = [f"    // slot addresses checked at every add: {invariant}".replace("*/", "* /")]
    bounds = f"{nx * ny * nz}, {opts.mma_min_blocks}" if mma_tiles and opts.mma_min_blocks > 1 else f"{nx * ny * nz}"
    return [
        f'extern "C" __global__ void __launch_bounds__({bounds}) {symbol}(const {sname} sj_P, '
        f"const ::sj_cuda::grid3 sj_G{', unsigned char* const sj_scratch' if grid else ''})",
        "{",
        "    (void)sj_P;",
        "    const uint32_t sj_tx = threadIdx.x, sj_ty = threadIdx.y, sj_tz = threadIdx.z;",
        "    (void)sj_tx; (void)sj_ty; (void)sj_tz;",
        f"    __shared__ unsigned long long sj_racc_tab[{warps * ns}];",
        *part,
        f"    unsigned long long* const sj_tab = sj_racc_tab + ((sj_tx + {nx}u * (sj_ty + {ny}u * sj_tz)) >> 5) * {ns}u;",
        f"    for (unsigned sj_k = ::sj_cuda::lane_id(); sj_k < {ns}u; sj_k += 32u) sj_tab[sj_k] = 0ull;",
        "    __syncwarp();",
        *acc,
        *begin,
        *state,
        "    const uint32_t sj_groups = sj_G.x * sj_G.y * sj_G.z;",
        "    for (uint32_t sj_lin = blockIdx.x; sj_lin < sj_groups; sj_lin += gridDim.x)",
        "    {",
        "        const uint32_t sj_gx = sj_lin % sj_G.x, sj_rest = sj_lin / sj_G.x;",
        "        const uint32_t sj_gy = sj_rest % sj_G.y, sj_gz = sj_rest / sj_G.y;",
        "        (void)sj_gx; (void)sj_gy; (void)sj_gz;",
        *["    " + x for x in static_inits],
        *run,
        *step,
        "        __syncwarp();",
        "    }",
        *finish,
        *flush,
        *end,
        "}",
    ]


def _frame_bound(fn: ir.Function) -> int:
    """Bytes of one frame of `fn`, conservatively: see CudaTarget.depth_limit."""
    def size(t) -> int:
        try:
            return max(8, T.size_align(t)[0])
        except Exception:  # noqa: BLE001 -- opaque types (buffers, textures): a handful of words
            return 64
    own = sum(size(p.type) for p in fn.params)
    own += sum(size(n.var.type) for n in walk(fn.body) if isinstance(n, ir.VarDecl)) if fn.body is not None else 0
    return 2 * own + CUDA_FRAME_OVERHEAD


class CudaTarget(Target):
    """CUDA C++ for NVRTC: `__global__` kernels (the ABI above), the globals block in `__constant__`
    memory, and the gradient-add plan of the pass pipeline (passes/red_plan.py) printed."""
    access = "sj_P."
    # Recursion guard: a depth counter (prelude sj::depth_exceeded).  The earlier stack-address guard assumed
    # the local-memory stack grows down to address 0 and faulted on an H100 (CUDA_ERROR_ILLEGAL_ADDRESS).
    guards_recursion = True
    counts_depth = True

    def __init__(self, plan: RedAddPlan, opts: CudaOptions):
        super().__init__(CudaEmitter(plan.slots))
        self.plan, self.opts = plan, opts
        self.static_inits: list[str] = []
        self.stack_bytes = CUDA_STACK_BYTES       # set by depth_limit for a program with recursion
        for k, early in plan.covered.items():
            self.em.abandon.update((r, plan.coarse[k]) for r in early)

    def header(self) -> list[str]:
        plan = self.plan
        return [
            "// Generated by slangjit for CUDA (NVRTC / nvcc). Kernel ABI: slangjit/compiler/emit/cuda.py.",
            *(["#define SJ_RED_CACHE 1   // block cache for float adds (prelude: red_add_fp)"] if plan.cached else []),
            *([f"#define SJ_RACC_MMA 1   // tensor-core gradient slots (prelude: racc_step)",
               f"#define SJ_RACC_MMA_NT {max(plan.mma_tiles.values())}",
               f"#define SJ_RACC_MMA_STAGES {self.opts.mma_stages}",
               f"#define SJ_RACC_MMA_NS {max(plan.coarse[k] for k in plan.mma_tiles)}"] if plan.mma_tiles else []),
            *(["#define SJ_RACC_SHARED 1   // gradient slots in shared memory (prelude: racc_put)"]
              if plan.shared_bytes and not plan.mma_tiles else []),
            *(["#define SJ_RACC_SHARED_HALF 1   // ... as half values"] if plan.shared_bytes and plan.half_slots else []),
        ]

    def prelude(self, generated: str) -> str:
        return trimmed_prelude(generated)      # only the sections the code uses (emit/cuda_prelude.py)

    def trailer(self) -> list[str]:
        # A program with recursion asks the runtime for a larger per-thread stack (runtime/cuda.py reads
        # this symbol when it loads the module; its value is the stack size wanted, in bytes).
        # Its value is its size (cuModuleGetGlobal gives it without a copy).
        return [f"__device__ unsigned char {CUDA_STACK_SYMBOL}[{self.stack_bytes}];"] if self.recursive else []

    def depth_limit(self, recursive: set) -> int:
        """The depth limit of the guard and the per-thread stack (self.stack_bytes) it needs: a frame of a
        recursive function is bounded by twice its parameters' and locals' bytes (temporaries, copies) plus
        CUDA_FRAME_OVERHEAD; `limit + 1` such frames and CUDA_STACK_RESERVE fit the stack."""
        frame = max(_frame_bound(fn) for fn in recursive)
        limit = min(CUDA_MAX_DEPTH, max(CUDA_MIN_DEPTH, (CUDA_STACK_BYTES - CUDA_STACK_RESERVE) // frame - 1))
        self.stack_bytes = max(CUDA_STACK_BYTES, CUDA_STACK_RESERVE + (limit + 1) * frame)
        return limit

    def check_offset(self, struct: str, member: str, offset: int, what: str) -> str:
        return f"SJ_CHECK_OFFSET({struct}, {member}, {offset}, \"layout of {what}\")"

    def check_size(self, struct: str, size: int, what: str) -> list[str]:
        return [f"static_assert(sizeof({struct}) <= {size}, \"{what}\");"]

    def globals_block(self, uniforms, fields, size) -> list[str]:
        """C layout checked by SJ_CHECK_OFFSET, stored in __constant__ memory."""
        lines = [
            "// Layout checks (NVRTC 13.0 has no __builtin_offsetof: sizes are still checked there).",
            "#if !defined(__CUDACC_RTC__) || __has_builtin(__builtin_offsetof)",
            "#define SJ_CHECK_OFFSET(T, m, off, msg) static_assert(__builtin_offsetof(T, m) == off, msg);",
            "#else",
            "#define SJ_CHECK_OFFSET(T, m, off, msg)",
            "#endif",
            *struct_lines(self.em, "sj_Globals", [(g.name, g.type) for g in uniforms])]
        lines += [self.check_offset("sj_Globals", g.name, fl.offset, g.slang_name) for g, fl in zip(uniforms, fields)]
        lines += self.check_size("sj_Globals", size, "globals block size")
        # Raw storage: struct types with default member initializers cannot be __constant__ objects.
        lines.append(f"__constant__ unsigned long long {GLOBALS_SYMBOL}[{max(1, size // 8)}];")
        lines.append(f"#define sj_g (reinterpret_cast<sj_Globals*>({GLOBALS_SYMBOL}))")
        return lines

    def statics(self, others) -> list[str]:
        em = self.em
        s_lines = []
        has_static = False
        for g in others:
            ct = em.ctype(g.type)
            if g.kind == "const":
                if g.init is not None and _is_literal(g.init):
                    s_lines.append(f"static __device__ const {ct} {g.name} = {em.expr(g.init)};")
                    em.global_kinds[g.name] = "value"
                else:
                    init = em.expr(g.init) if g.init is not None else f"{ct}{{}}"
                    s_lines.append(f"static __device__ __forceinline__ {ct} {g.name}() {{ return {init}; }}")
                    em.global_kinds[g.name] = "constfn"
            elif g.kind == "groupshared":
                s_lines.append(f"static __shared__ unsigned long long {g.name}_raw[{words(g.type)}];")
                em.global_kinds[g.name] = "shared"
            else:
                has_static = True
                s_lines.append(f"static __device__ unsigned long long {g.name}_raw[{STATIC_SLOTS * words(g.type)}ull];")
                em.global_kinds[g.name] = "static"
        if has_static:
            s_lines.insert(0, "\n".join([
                "static __device__ __forceinline__ unsigned sj_static_slot() {",
                "    unsigned sm, warp, lane;",
                "    asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm));",
                "    asm volatile(\"mov.u32 %0, %%warpid;\" : \"=r\"(warp));",
                "    asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));",
                "    return ((sm & 255u) * 64u + (warp & 63u)) * 32u + lane;",
                "}"]))
        for g in others:
            if em.global_kinds.get(g.name) == "static":
                ref = em.x_GlobalRef(ir.GlobalRef(g.type, g))
                init = em.expr(g.init) if g.init is not None else f"{em.ctype(g.type)}{{}}"
                self.static_inits.append(f"    {ref} = {init};")
        return s_lines

    def launcher(self, fn, numthreads, symbol, sname, call_args) -> list[str]:
        plan, em, static_inits = self.plan, self.em, self.static_inits
        nx, ny, nz = numthreads
        ns = plan.coarse.get(id(fn))
        slotted = em.bears_slots(fn)

        def call(mode: int) -> str:
            extra = (["sj_acc", "sj_tab", "0", str(mode)] if ns else ["nullptr", "nullptr", "-1", "0"]) if slotted else []
            extra += ["0"] if id(fn) in em.depth_fns else []      # a recursive entry point starts at depth 0
            return f"{fn.name}({', '.join(call_args + extra)});"
        begin = ["    ::sj_cuda::red_cache_begin();"] if id(fn) in plan.cached else []
        end = ["    ::sj_cuda::red_cache_end();"] if id(fn) in plan.cached else []
        if ns:
            return coarse_kernel(symbol, sname, numthreads, ns, static_inits, begin, call, end,
                                 plan.invariant.get(id(fn), "not proven"),
                                 id(fn) in plan.shared_bytes and id(fn) not in plan.mma_tiles,
                                 plan.mma_tiles.get(id(fn), 0), id(fn) in plan.covered, self.opts)
        return [
            f'extern "C" __global__ void __launch_bounds__({nx * ny * nz}) {symbol}(const {sname} sj_P)',
            "{",
            "    (void)sj_P;",
            "    const uint32_t sj_tx = threadIdx.x, sj_ty = threadIdx.y, sj_tz = threadIdx.z;",
            "    const uint32_t sj_gx = blockIdx.x, sj_gy = blockIdx.y, sj_gz = blockIdx.z;",
            "    (void)sj_tx; (void)sj_ty; (void)sj_tz; (void)sj_gx; (void)sj_gy; (void)sj_gz;",
            *static_inits, *begin, f"    {call(0)}", *end,
            "}",
        ]

    def entry_info(self, fn, numthreads, symbol, fields, size) -> EntryPointInfo:
        plan = self.plan
        ns = plan.coarse.get(id(fn))
        grid = ns and grid_flush(numthreads, ns, plan.invariant.get(id(fn), "not proven"), self.opts)
        return EntryPointInfo(fn.slang_name, symbol, numthreads, fields, size, grid_stride=bool(ns),
                              grid_slots=ns if grid else 0,
                              dynamic_shared=plan.shared_bytes.get(id(fn), 0),
                              dynamic_shared_arch=90 if id(fn) in plan.mma_tiles else 0)
