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

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..ir import nodes as ir
from ..ir import scan
from ..ir.red_slots import RedSlots
from .. import types as T
from ..reflection import CUDA_GLOBALS_SYMBOL, EntryPointInfo, ProgramReflection
from ..source import error
from .cpp import CppEmitter, block_layout, prelude_text

GLOBALS_SYMBOL = CUDA_GLOBALS_SYMBOL
# Per-thread storage for mutable `static` globals: one slot per (SM < 256, warp < 64, lane).
STATIC_SLOTS = 256 * 64 * 32


class CudaEmitter(CppEmitter):
    def __init__(self, slots: Optional[RedSlots] = None):
        super().__init__("cuda")
        self.global_kinds: dict[str, str] = {}     # C name -> how references are spelled
        self.slots = slots                         # gradient-add slots (ir/red_slots.py), if any
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
        return f"static __device__ {inline}{self.ctype(fn.ret)} {fn.name}({', '.join(ps)})"

    def function(self, fn: ir.Function):
        self.slot_base = ["sj_slot"] if self.bears_slots(fn) else []
        super().function(fn)

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
                bits = {16: "half", 32: "float", 64: "double"}[t.bits]
                lit = "__builtin_nan(\"\")" if fv != fv else ("__builtin_huge_val()" if fv > 0 else "(-__builtin_huge_val())")
                if bits == "half":
                    return f"((sj::half)(float){lit})"
                return f"(({bits}){lit})"
        return super().const(t, v)


def words(t: T.Type) -> int:
    size, _ = T.size_align(t)
    return max(1, (size + 7) // 8)


def _is_literal(e) -> bool:
    return isinstance(e, ir.Const) and isinstance(e.type, (T.ScalarType, T.EnumType))


# Intrinsics that order memory between threads: a kernel that uses one may read, after it, what
# other threads added, so its adds must reach memory in program order (no block cache).
_ORDERING = {f"sj::{n}" for n in ("AllMemoryBarrier", "AllMemoryBarrierWithGroupSync", "DeviceMemoryBarrier",
                                  "DeviceMemoryBarrierWithGroupSync", "GroupMemoryBarrier",
                                  "GroupMemoryBarrierWithGroupSync")}


# Most slots (float registers per thread) a coarsened kernel may use.
MAX_SLOTS = 192
# Drop the per-add address check where ir/slot_invariance.py proves slot addresses invariant
# (benchmarks/gpu_mlp_breakdown.py turns it off to measure the check).
PROVE_SLOT_ADDRESSES = True
# Keep a coarsened kernel's slots in shared memory (one column per thread) instead of registers,
# when every coarsened kernel of the translation unit fits SHARED_SLOT_BYTES per group (slots and
# the warps' address tables; 99 KB: what sm_86/89 allow a block).  Half sites get half slots when
# all sites are half.  Off by default: on the H100 the seed MLP ran no faster than with float
# register slots (benchmarks/gpu_mlp_breakdown.py, RESULTS.md session 4), and float sums are exact-er.
SHARED_SLOTS = False
SHARED_SLOT_BYTES = 99 * 1024
# Sum a coarsened kernel's half slots with tensor cores (prelude SJ_RACC_MMA, sm_90+; other GPUs get
# float register slots from the same source; float sites keep a float register each): each half add
# stores its value in the warp's stage in shared memory and one mma per 16 slots sums the warp's 32
# logical threads, so a lane keeps 2 floats per 16 slots instead of one per slot (no spills: the seed
# MLP's learnGradient 0.149 against 0.182 ms with register slots on the H100, RESULTS.md session 5).
# The stages (MMA_STAGES x 64 bytes per slot and warp) must fit MMA_SLOT_BYTES of
# dynamic shared memory per group.
MMA_SLOTS = True
MMA_SLOT_BYTES = 200 * 1024        # sm_90 allows 227 KB per block; the prelude uses these slots on sm_90+
MMA_STAGES = 1                     # 2: a turn's stores land in one stage while the step sums the other
MMA_STAGE_BYTES = 16 * 64          # per tile of 16 slots, warp and stage: 16 rows of 64 bytes
# Tensor-core-slot kernels ask for this many resident blocks per SM (__launch_bounds__'s second
# argument; 1: no request).
MMA_MIN_BLOCKS = 1
# A coarsened kernel combines its warps' slot sums in shared memory before the atomics (one per block
# and slot, prelude racc_flush_block) when the warps' address tables and sums fit this many bytes of
# static shared memory (48 KB is the static limit); otherwise every warp adds its own sums.
BLOCK_FLUSH_BYTES = 48 * 1024
# Where slot addresses are proven invariant, the blocks' sums meet in a scratch buffer the runtime
# provides (EntryPointInfo.grid_slots) and the last block adds each slot once (prelude racc_flush_grid).
GRID_FLUSH = True
# Tensor-core slots of a kernel whose finished logical threads write every slot (ir/slot_coverage.py)
# skip the clear of the stage after each step: a lane whose logical thread returns before its first
# slot zeros its column instead (prelude racc_abandon).
SKIP_COVERED_CLEARS = True
# Unused-result float Atomic<T>.add calls become InterlockedAdd sites (ir/atomic_adds.py), so coarsened
# kernels defer them like gradient adds.
LOWER_ATOMIC_ADDS = True
# Inline each coarsened kernel's calls (proven slot addresses only) and reuse the values it computes
# twice (ir/inline_calls.py, ir/value_numbering.py): reverse mode's replays and user derivatives'
# recomputation, which NVRTC cannot merge (half arithmetic is inline asm).
FUSE_COARSE = True
# The switches above, as the front-end cache keys them (frontend_cache.make_key): a program built with
# any of them changed (benchmarks, tests) is not the default build's.
SETTINGS = ("MAX_SLOTS", "PROVE_SLOT_ADDRESSES", "SHARED_SLOTS", "SHARED_SLOT_BYTES", "MMA_SLOTS", "MMA_SLOT_BYTES",
            "MMA_STAGES", "MMA_STAGE_BYTES", "MMA_MIN_BLOCKS", "SKIP_COVERED_CLEARS", "BLOCK_FLUSH_BYTES", "GRID_FLUSH",
            "LOWER_ATOMIC_ADDS", "FUSE_COARSE")
DEFAULT_SETTINGS = {k: globals()[k] for k in SETTINGS}


def changed_settings() -> list:
    """(name, value) of the switches that differ from this module's defaults."""
    g = globals()
    return [(k, g[k]) for k in SETTINGS if g[k] != DEFAULT_SETTINGS[k]]


@dataclass
class RedAddPlan:
    """How a translation unit's float/half gradient adds are combined (prelude: red_add_fp, racc_add)."""
    slots: Optional[RedSlots] = None
    coarse: dict = field(default_factory=dict)   # id(entry) -> slot count: coarsened kernels
    invariant: dict = field(default_factory=dict)  # id(entry) -> None (addresses proven invariant) or why not
    shared_bytes: dict = field(default_factory=dict)  # id(entry) -> dynamic shared bytes (slots in shared memory)
    half_slots: bool = False                      # shared slots hold half values (every site is half)
    mma_tiles: dict = field(default_factory=dict)  # id(entry) -> tiles of 16 slots (tensor-core slots)
    covered: dict = field(default_factory=dict)    # id(entry) -> ids of its early returns: stage not cleared
    cached: set = field(default_factory=set)     # id(entry): kernels that set up the block cache


def plan_red_adds(entries: list[tuple[ir.Function, tuple[int, int, int]]],
                  functions: list[ir.Function]) -> RedAddPlan:
    """Which kernels accumulate thread-uniform adds per thread (coarsened: one GPU thread runs the
    entry for many groups in turn, see emit_program_cuda) and which use the block cache.

    Uniform sites are the unused-result float/half InterlockedAdds whose address is thread-uniform
    in every entry that reaches them (gradients of parameters all threads share; ir/uniformity.py).
    A kernel is coarsened when its sites have static slots (ir/red_slots.py, at most MAX_SLOTS), its
    group size is a whole number of warps, and it reaches no barrier, memory fence or groupshared
    variable.  The block cache (per translation unit: the adds share one prelude function) is on when
    some kernel that adds is not coarsened, or has sites without slots, and adds into a uniform
    address - unless an entry that adds reaches a barrier or fence.  Kernels whose adds all go to
    per-thread addresses (scatter, `.bwds` into per-element gradients) pay for neither."""
    from .program import system_value_params
    from ..ir.uniformity import Uniformity
    from ..ir.red_slots import is_red_add
    from ..ir.slot_invariance import slot_addresses_invariant
    info = []
    uniform_ok: dict[int, bool] = {}
    for fn, numthreads in entries:
        reach = scan.reachable(fn)
        calls = list(scan.intrinsic_calls(reach))
        reds = [i for i in calls if is_red_add(i)]
        if not reds:
            continue
        u = Uniformity(fn, system_value_params(fn))
        for i in reds:
            uniform_ok[id(i)] = uniform_ok.get(id(i), True) and u.address_is_uniform(i.args[0])
        ordered = any(i.name in _ORDERING for i in calls)
        shared = any(isinstance(n, ir.GlobalRef) and n.var.kind == "groupshared"
                     for f in reach if f.body is not None for n in scan.walk(f.body))
        info.append((fn, numthreads, reds, ordered, shared))
    sites = {k for k, ok in uniform_ok.items() if ok}
    plan = RedAddPlan()
    if not sites:
        return plan
    plan.slots = RedSlots(functions, sites)
    any_ordered = any(o for _, _, _, o, _ in info)
    wants_cache = False
    for fn, (nx, ny, nz), reds, ordered, shared in info:
        n = plan.slots.size.get(id(fn), 0)
        if 0 < n <= MAX_SLOTS and not ordered and not shared and (nx * ny * nz) % 32 == 0:
            plan.coarse[id(fn)] = n
            plan.invariant[id(fn)] = (slot_addresses_invariant(fn, plan.slots) if PROVE_SLOT_ADDRESSES
                                      else "proof turned off")
            rest = [i for i in reds if id(i) in sites and id(i) not in plan.slots.offset]
        else:
            rest = [i for i in reds if id(i) in sites]
        wants_cache = wants_cache or bool(rest)
    if wants_cache and not any_ordered:
        plan.cached = {id(fn) for fn, *_ in info}      # with the cache on, every kernel that adds sets it up
    if MMA_SLOTS and plan.coarse and any(i.args[0].type.bits == 16 for _, _, reds, _, _ in info
                                         for i in reds if id(i) in sites):
        # The prelude's mode is per translation unit: every coarsened kernel's stages must fit.
        tiles = {id(fn): (-(-plan.coarse[id(fn)] // 16), nx * ny * nz // 32)
                 for fn, (nx, ny, nz), *_ in info if id(fn) in plan.coarse}
        per_tile = MMA_STAGES * MMA_STAGE_BYTES
        if all(per_tile * t * w <= MMA_SLOT_BYTES for t, w in tiles.values()):
            plan.mma_tiles = {k: t for k, (t, _) in tiles.items()}
            plan.shared_bytes = {k: per_tile * t * w for k, (t, w) in tiles.items()}
            return plan
    if SHARED_SLOTS and plan.coarse:
        plan.half_slots = all(i.args[0].type.bits == 16 for _, _, reds, _, _ in info for i in reds if id(i) in sites)
        size = 2 if plan.half_slots else 4
        need = {}
        for fn, (nx, ny, nz), *_ in info:
            if id(fn) in plan.coarse:
                ns, threads = plan.coarse[id(fn)], nx * ny * nz
                need[id(fn)] = (ns * size * threads, ns * 8 * threads // 32)
        if all(a + b <= SHARED_SLOT_BYTES for a, b in need.values()):
            plan.shared_bytes = {k: a for k, (a, _) in need.items()}
        else:
            plan.half_slots = False
    return plan


def grid_flush(numthreads, ns: int, invariant: Optional[str]) -> bool:
    """Does a coarsened kernel combine its slot sums across the grid (a scratch buffer from the runtime)?"""
    warps = numthreads[0] * numthreads[1] * numthreads[2] // 32
    return invariant is None and GRID_FLUSH and warps * ns * 12 <= BLOCK_FLUSH_BYTES


def coarse_kernel(symbol: str, sname: str, numthreads, ns: int, static_inits: list[str], begin: list[str],
                  call, end: list[str], invariant: Optional[str], shared: bool, mma_tiles: int = 0,
                  covered: bool = False) -> list[str]:
    """A coarsened kernel: each block runs the groups blockIdx.x, blockIdx.x + gridDim.x, ... of the
    dispatch (`sj_G` = its group counts; the runtime launches about one resident wave of blocks),
    one whole group per turn, so barriers-free group semantics, wave ops and thread ids are those of
    the plain kernel.  Thread-uniform gradient adds go into `ns` per-thread float registers (prelude
    racc_add) that each warp adds into memory once, at the end: through the block's sum (one atomic
    per block and slot, prelude racc_flush_block) when the tables fit BLOCK_FLUSH_BYTES.

    `call(mode)` is the entry's call with the racc_add mode.  When the slot addresses are proven
    invariant (`invariant` is None, ir/slot_invariance.py) the warp runs its groups in claim mode
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
               f"    ::sj_cuda::racc_begin(sj_acc, {ns}, sj_dyn_smem + {warp_index} * {MMA_STAGES * MMA_STAGE_BYTES * mma_tiles}u);"]
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
    grid = grid_flush(numthreads, ns, invariant)
    if warps * ns * 12 <= BLOCK_FLUSH_BYTES:
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
    bounds = f"{nx * ny * nz}, {MMA_MIN_BLOCKS}" if mma_tiles and MMA_MIN_BLOCKS > 1 else f"{nx * ny * nz}"
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


def _proven(plan: RedAddPlan, fn: ir.Function) -> bool:
    return id(fn) in plan.coarse and plan.invariant.get(id(fn), "no") is None


def fuse_coarse_entries(entries: list[tuple[ir.Function, tuple[int, int, int]]], functions: list[ir.Function],
                        plan: RedAddPlan) -> RedAddPlan:
    """Inline the calls of coarsened kernels whose slot addresses are proven and reuse what they compute
    twice (FUSE_COARSE).  Their slot adds are deferred to the kernel's end, so they write nothing a
    later read sees and do not stop reuse.  The bodies are kept as they were when the kernel would no
    longer be coarsened the same way."""
    from ..ir.fusion import inline_copy, reuse_and_prune
    targets = [fn for fn, _ in entries if _proven(plan, fn)]
    if not targets:
        return plan
    saved = {id(fn): fn.body for fn in targets}

    def same(p: RedAddPlan) -> bool:
        return all(_proven(p, fn) and p.coarse[id(fn)] == plan.coarse[id(fn)] for fn in targets)

    for fn in targets:
        inline_copy(fn)
    inlined = plan_red_adds(entries, functions)
    if same(inlined):
        for fn in targets:
            deferred = frozenset(id(n) for n in scan.walk(fn.body)
                                 if isinstance(n, ir.Intrinsic) and id(n) in inlined.slots.offset)
            reuse_and_prune(fn, deferred)
        # Reuse and dead-code removal leave the sites, their loops and their addresses as they are,
        # and only take memory reads away: the plan of the inlined kernels stands.
        return inlined
    for fn in targets:
        fn.body = saved[id(fn)]
    return plan


def covered_kernels(entries, functions: list[ir.Function], plan: RedAddPlan) -> dict:
    """id(entry) -> ids of its early returns, for the tensor-core-slot kernels (proven addresses: claim,
    then add; every add stores) whose finished logical threads write every slot (ir/slot_coverage.py).
    An entry that other functions call is left out: its early return would zero its caller's slots."""
    from ..ir.slot_coverage import covering_early_returns
    if not SKIP_COVERED_CLEARS or not plan.mma_tiles:
        return {}
    called = {id(n.func) for f in functions if f.body is not None for n in scan.walk(f.body) if isinstance(n, ir.Call)}
    out = {}
    for fn, _ in entries:
        if id(fn) in plan.mma_tiles and _proven(plan, fn) and id(fn) not in called:
            early = covering_early_returns(fn, plan.slots)
            if early is not None:
                out[id(fn)] = early
    return out


def emit_program_cuda(functions: list[ir.Function], globals_: list[ir.GlobalVar],
                      entries: list[tuple[ir.Function, tuple[int, int, int]]]):
    from .program import entry_params
    from ..ir.atomic_adds import lower_atomic_adds
    if LOWER_ATOMIC_ADDS:
        lower_atomic_adds(functions)
    plan = plan_red_adds(entries, functions)
    if FUSE_COARSE:
        plan = fuse_coarse_entries(entries, functions, plan)
    plan.covered = covered_kernels(entries, functions, plan)
    em = CudaEmitter(plan.slots)
    for k, early in plan.covered.items():
        em.abandon.update((r, plan.coarse[k]) for r in early)
    uniforms = [g for g in globals_ if g.kind == "uniform"]
    others = [g for g in globals_ if g.kind != "uniform"]

    # Globals block: C layout checked by static_assert, stored in __constant__ memory.
    g_fields, g_size = block_layout([(g.slang_name, g.type) for g in uniforms])
    g_lines = [
        "// Layout checks (NVRTC 13.0 has no __builtin_offsetof: sizes are still checked there).",
        "#if !defined(__CUDACC_RTC__) || __has_builtin(__builtin_offsetof)",
        "#define SJ_CHECK_OFFSET(T, m, off, msg) static_assert(__builtin_offsetof(T, m) == off, msg);",
        "#else",
        "#define SJ_CHECK_OFFSET(T, m, off, msg)",
        "#endif",
        "struct sj_Globals {"]
    for g in uniforms:
        g_lines.append(f"    {em.ctype(g.type)} {g.name};")
    if not uniforms:
        g_lines.append("    char sj_unused;")
    g_lines.append("};")
    for g, fl in zip(uniforms, g_fields):
        g_lines.append(f"SJ_CHECK_OFFSET(sj_Globals, {g.name}, {fl.offset}, \"layout of {g.slang_name}\")")
    g_lines.append(f"static_assert(sizeof(sj_Globals) <= {g_size}, \"globals block size\");")
    # Raw storage: struct types with default member initializers cannot be __constant__ objects.
    g_lines.append(f"__constant__ unsigned long long {GLOBALS_SYMBOL}[{max(1, g_size // 8)}];")
    g_lines.append(f"#define sj_g (reinterpret_cast<sj_Globals*>({GLOBALS_SYMBOL}))")

    s_lines = []
    static_inits = []
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
            static_inits.append(f"    {ref} = {init};")

    protos = [em.prototype(fn) + ";" for fn in functions]
    for fn in functions:
        em.function(fn)
    body_lines = em.lines

    refl = ProgramReflection(globals=g_fields, globals_size=g_size)
    cached = plan.cached
    kernels = []
    for fn, numthreads in entries:
        sname, call_args, p_fields, p_size, lines = entry_params(em, fn, numthreads, "sj_P.")
        for fl in p_fields:
            lines.append(f"SJ_CHECK_OFFSET({sname}, {fl.name}, {fl.offset}, \"layout of {fl.name}\")")
        lines.append(f"static_assert(sizeof({sname}) <= {p_size}, \"parameter block size\");")
        nx, ny, nz = numthreads
        symbol = f"sj_entry_{fn.slang_name}"
        ns = plan.coarse.get(id(fn))
        slotted = em.bears_slots(fn)

        def call(mode: int, args=call_args, name=fn.name, ns=ns, slotted=slotted) -> str:
            extra = (["sj_acc", "sj_tab", "0", str(mode)] if ns else ["nullptr", "nullptr", "-1", "0"]) if slotted else []
            return f"{name}({', '.join(args + extra)});"
        begin = ["    ::sj_cuda::red_cache_begin();"] if id(fn) in cached else []
        end = ["    ::sj_cuda::red_cache_end();"] if id(fn) in cached else []
        if ns:
            lines += coarse_kernel(symbol, sname, numthreads, ns, static_inits, begin, call, end,
                                   plan.invariant.get(id(fn), "not proven"),
                                   id(fn) in plan.shared_bytes and id(fn) not in plan.mma_tiles,
                                   plan.mma_tiles.get(id(fn), 0), id(fn) in plan.covered)
        else:
            lines += [
                f'extern "C" __global__ void __launch_bounds__({nx * ny * nz}) {symbol}(const {sname} sj_P)',
                "{",
                "    (void)sj_P;",
                "    const uint32_t sj_tx = threadIdx.x, sj_ty = threadIdx.y, sj_tz = threadIdx.z;",
                "    const uint32_t sj_gx = blockIdx.x, sj_gy = blockIdx.y, sj_gz = blockIdx.z;",
                "    (void)sj_tx; (void)sj_ty; (void)sj_tz; (void)sj_gx; (void)sj_gy; (void)sj_gz;",
                *static_inits, *begin, f"    {call(0)}", *end,
                "}",
            ]
        kernels.append("\n".join(lines))
        refl.entry_points[fn.slang_name] = EntryPointInfo(fn.slang_name, symbol, numthreads, p_fields, p_size,
                                                          grid_stride=bool(ns),
                                                          grid_slots=ns if ns and grid_flush(
                                                              numthreads, ns, plan.invariant.get(id(fn), "not proven"))
                                                          else 0,
                                                          dynamic_shared=plan.shared_bytes.get(id(fn), 0),
                                                          dynamic_shared_arch=90 if id(fn) in plan.mma_tiles else 0)

    parts = [
        "// Generated by slangjit for CUDA (NVRTC / nvcc). Kernel ABI: slangjit/compiler/emit/cuda.py.",
        *(["#define SJ_RED_CACHE 1   // block cache for float adds (prelude: red_add_fp)"] if cached else []),
        *([f"#define SJ_RACC_MMA 1   // tensor-core gradient slots (prelude: racc_step)",
           f"#define SJ_RACC_MMA_NT {max(plan.mma_tiles.values())}",
           f"#define SJ_RACC_MMA_STAGES {MMA_STAGES}",
           f"#define SJ_RACC_MMA_NS {max(plan.coarse[k] for k in plan.mma_tiles)}"] if plan.mma_tiles else []),
        *(["#define SJ_RACC_SHARED 1   // gradient slots in shared memory (prelude: racc_put)"]
          if plan.shared_bytes and not plan.mma_tiles else []),
        *(["#define SJ_RACC_SHARED_HALF 1   // ... as half values"] if plan.shared_bytes and plan.half_slots else []),
        prelude_text(),
        "\n".join(em.struct_out),
        "\n".join(g_lines),
        "\n".join(s_lines),
        "\n".join(protos),
        "\n".join(body_lines),
        "\n\n".join(kernels),
    ]
    return "\n\n".join(parts) + "\n", refl
