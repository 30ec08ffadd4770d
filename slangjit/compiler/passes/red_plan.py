"""Planning of a CUDA translation unit's float/half gradient adds (prelude: red_add_fp, racc_add):
which kernels are coarsened (one GPU thread runs the entry for many groups in turn) and keep per-thread
slots, where the slots live (registers, shared memory, tensor-core stages), which kernels use the block
cache, and the rewrites that serve them (fusion of coarsened kernels).  The emitter (emit/cuda.py)
prints what the plan says; the options are CudaOptions (options.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .fusion import inline_copy, reuse_and_prune
from .options import CudaOptions
from .reach import BodyNodes, intrinsic_calls, reachable, system_value_params
from .red_slots import RedSlots, is_red_add
from .slot_coverage import covering_early_returns
from .slot_invariance import slot_addresses_invariant
from .uniformity import Uniformity


# Intrinsics that order memory between threads: a kernel that uses one may read, after it, what
# other threads added, so its adds must reach memory in program order (no block cache).
_ORDERING = {f"sj::{n}" for n in ("AllMemoryBarrier", "AllMemoryBarrierWithGroupSync", "DeviceMemoryBarrier",
                                  "DeviceMemoryBarrierWithGroupSync", "GroupMemoryBarrier",
                                  "GroupMemoryBarrierWithGroupSync")}



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
                  functions: list[ir.Function], opts: CudaOptions) -> RedAddPlan:
    """Which kernels accumulate thread-uniform adds per thread (coarsened: one GPU thread runs the
    entry for many groups in turn, see emit/cuda.py coarse_kernel) and which use the block cache.

    Uniform sites are the unused-result float/half InterlockedAdds whose address is thread-uniform
    in every entry that reaches them (gradients of parameters all threads share; passes/uniformity.py).
    A kernel is coarsened when its sites have static slots (passes/red_slots.py, at most CudaOptions.max_slots), its
    group size is a whole number of warps, and it reaches no barrier, memory fence or groupshared
    variable.  The block cache (per translation unit: the adds share one prelude function) is on when
    some kernel that adds is not coarsened, or has sites without slots, and adds into a uniform
    address - unless an entry that adds reaches a barrier or fence.  Kernels whose adds all go to
    per-thread addresses (scatter, `.bwds` into per-element gradients) pay for neither."""
    found, sites = uniform_add_sites(entries)
    info = [(fn, numthreads, reds, ordered, shared) for fn, numthreads, _, reds, ordered, shared in found]
    plan = RedAddPlan()
    if not sites:
        return plan
    plan.slots = RedSlots(functions, sites)
    any_ordered = any(o for _, _, _, o, _ in info)
    wants_cache = False
    for fn, (nx, ny, nz), reds, ordered, shared in info:
        n = plan.slots.size.get(id(fn), 0)
        if 0 < n <= opts.max_slots and not ordered and not shared and (nx * ny * nz) % 32 == 0:
            plan.coarse[id(fn)] = n
            plan.invariant[id(fn)] = (slot_addresses_invariant(fn, plan.slots) if opts.prove_slot_addresses
                                      else "proof turned off")
            rest = [i for i in reds if id(i) in sites and id(i) not in plan.slots.offset]
        else:
            rest = [i for i in reds if id(i) in sites]
        wants_cache = wants_cache or bool(rest)
    if wants_cache and not any_ordered:
        plan.cached = {id(fn) for fn, *_ in info}      # with the cache on, every kernel that adds sets it up
    if opts.mma_slots and plan.coarse and any(i.args[0].type.bits == 16 for _, _, reds, _, _ in info
                                         for i in reds if id(i) in sites):
        # The prelude's mode is per translation unit: every coarsened kernel's stages must fit.
        tiles = {id(fn): (-(-plan.coarse[id(fn)] // 16), nx * ny * nz // 32)
                 for fn, (nx, ny, nz), *_ in info if id(fn) in plan.coarse}
        per_tile = opts.mma_stages * opts.mma_stage_bytes
        if all(per_tile * t * w <= opts.mma_slot_bytes for t, w in tiles.values()):
            plan.mma_tiles = {k: t for k, (t, _) in tiles.items()}
            plan.shared_bytes = {k: per_tile * t * w for k, (t, w) in tiles.items()}
            return plan
    if opts.shared_slots and plan.coarse:
        plan.half_slots = all(i.args[0].type.bits == 16 for _, _, reds, _, _ in info for i in reds if id(i) in sites)
        size = 2 if plan.half_slots else 4
        need = {}
        for fn, (nx, ny, nz), *_ in info:
            if id(fn) in plan.coarse:
                ns, threads = plan.coarse[id(fn)], nx * ny * nz
                need[id(fn)] = (ns * size * threads, ns * 8 * threads // 32)
        if all(a + b <= opts.shared_slot_bytes for a, b in need.values()):
            plan.shared_bytes = {k: a for k, (a, _) in need.items()}
        else:
            plan.half_slots = False
    return plan


def grid_flush(numthreads, ns: int, invariant: Optional[str], opts: CudaOptions) -> bool:
    """Does a coarsened kernel combine its slot sums across the grid (a scratch buffer from the runtime)?"""
    warps = numthreads[0] * numthreads[1] * numthreads[2] // 32
    return invariant is None and opts.grid_flush and warps * ns * 12 <= opts.block_flush_bytes


def _proven(plan: RedAddPlan, fn: ir.Function) -> bool:
    return id(fn) in plan.coarse and plan.invariant.get(id(fn), "no") is None


def fuse_coarse_entries(entries: list[tuple[ir.Function, tuple[int, int, int]]], functions: list[ir.Function],
                        plan: RedAddPlan, opts: CudaOptions) -> RedAddPlan:
    """Inline the calls of coarsened kernels whose slot addresses are proven and reuse what they compute
    twice (CudaOptions.fuse_coarse).  Their slot adds are deferred to the kernel's end, so they write nothing a
    later read sees and do not stop reuse.  The bodies are kept as they were when the kernel would no
    longer be coarsened the same way."""
    targets = [fn for fn, _ in entries if _proven(plan, fn)]
    if not targets:
        return plan
    saved = {id(fn): fn.body for fn in targets}

    def same(p: RedAddPlan) -> bool:
        return all(_proven(p, fn) and p.coarse[id(fn)] == plan.coarse[id(fn)] for fn in targets)

    for fn in targets:
        inline_copy(fn)
    inlined = plan_red_adds(entries, functions, opts)
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


def covered_kernels(entries, functions: list[ir.Function], plan: RedAddPlan, opts: CudaOptions) -> dict:
    """id(entry) -> ids of its early returns, for the tensor-core-slot kernels (proven addresses: claim,
    then add; every add stores) whose finished logical threads write every slot (passes/slot_coverage.py).
    An entry that other functions call is left out: its early return would zero its caller's slots."""
    if not opts.skip_covered_clears or not plan.mma_tiles:
        return {}
    called = {id(n.func) for f in functions if f.body is not None for n in scan.walk(f.body) if isinstance(n, ir.Call)}
    out = {}
    for fn, _ in entries:
        if id(fn) in plan.mma_tiles and _proven(plan, fn) and id(fn) not in called:
            early = covering_early_returns(fn, plan.slots)
            if early is not None:
                out[id(fn)] = early
    return out


def uniform_add_sites(entries, memo: BodyNodes = None):
    """The gradient-add sites of the entry points and which of them add to an address that is the same for
    every thread: ([(entry, numthreads, reachable functions, its add sites, orders memory?, uses groupshared?)],
    {id(site) whose address is uniform in every entry that reaches it}).  Shared by the CUDA plan (below) and the
    CPU's privatised adds (cpu_adds.py).  `memo`: the bodies' nodes, walked once (reach.py BodyNodes)."""
    info = []
    uniform_ok: dict[int, bool] = {}
    if memo is None:
        memo = BodyNodes()
    for fn, numthreads in entries:
        reach = reachable(fn, memo)
        calls = list(intrinsic_calls(reach, memo))
        reds = [i for i in calls if is_red_add(i)]
        if not reds:
            continue
        u = Uniformity(fn, system_value_params(fn), reach)
        for i in reds:
            uniform_ok[id(i)] = uniform_ok.get(id(i), True) and u.address_is_uniform(i.args[0])
        ordered = any(i.name in _ORDERING for i in calls)
        shared = any(isinstance(n, ir.GlobalRef) and n.var.kind == "groupshared"
                     for f in reach for n in memo.of(f))
        info.append((fn, numthreads, reach, reds, ordered, shared))
    return info, {k for k, ok in uniform_ok.items() if ok}
