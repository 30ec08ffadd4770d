"""Privatised gradient accumulation on the CPU: the counterpart of the CUDA coarsened kernels' slots.

A CPU worker runs a contiguous range of thread groups, one logical thread after another.  Where every
logical thread adds into the same float/half address (the seed MLP's parameter gradients: 148 adds per
sample into 148 shared halves), the atomic read-modify-write of every add keeps the cache line bouncing
between workers and, for half, is a compare-exchange loop.  Instead, each such add site gets a static
slot (passes/red_slots.py numbers them, as for CUDA): a float accumulator on the worker's stack plus the
address the slot belongs to.  An add whose address is the slot's address adds into the accumulator; a
different address first adds the slot's sum into memory and takes the slot over (so a "uniform" address
that was not is still correct); the launcher adds every slot's sum into memory once at the end of the
worker's range (prelude text: emit/cpu_adds.py).

Sites: unused-result float/half `InterlockedAdd`s whose address is thread-uniform (passes/uniformity.py)
in every entry point that reaches them, and whose memory nothing else those entry points reach reads or
writes (passes/add_aliasing.py: a thread that read an address it added into would miss its own add).  An entry point is privatised when its sites have slots (at most
CpuOptions.max_slots), it reaches no barrier or memory fence and no groupshared variable, and the program
runs its groups without fibers (no group barrier).  The deferred adds are visible to later dispatches.

`fuse_privatised` (CpuOptions.fuse): the privatised entry points' calls are inlined and the values they
compute twice reused (passes/fusion.py, as for CUDA's coarsened kernels: reverse mode replays the primal
and user derivatives recompute); the deferred adds write nothing a later read of the dispatch sees, so they
do not stop reuse.  Kept only where the re-planned entry keeps its slot count.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .add_aliasing import separate_sites
from .fusion import inline_copy, reuse_and_prune
from .reach import BodyNodes
from .red_plan import uniform_add_sites
from .red_slots import RedSlots



@dataclass
class CpuAddPlan:
    slots: Optional[RedSlots] = None
    entries: dict = field(default_factory=dict)    # id(entry) -> slot count: privatised entry points


def plan_cpu_adds(entries: list[tuple[ir.Function, tuple[int, int, int]]], functions: list[ir.Function],
                  max_slots: int, group_barrier: bool) -> CpuAddPlan:
    plan = CpuAddPlan()
    if group_barrier:
        return plan
    memo = BodyNodes()              # nothing changes a body while this plan is made: each is walked once
    found, sites = uniform_add_sites(entries, memo)
    info = [(fn, reach, reds, ordered or shared) for fn, _, reach, reds, ordered, shared in found]
    # a site whose memory something else of an entry that reaches it touches stays an atomic add
    for fn, reach, reds, _ in info:
        mine = [i for i in reds if id(i) in sites]
        if mine:
            sites -= {id(i) for i in mine} - separate_sites(fn, reach, mine, memo)
    info = [(fn, excluded) for fn, _, _, excluded in info]
    if not sites:
        return plan
    plan.slots = RedSlots(functions, sites, memo)
    for fn, excluded in info:
        n = plan.slots.size.get(id(fn), 0)
        if 0 < n <= max_slots and not excluded:
            plan.entries[id(fn)] = n
    if not plan.entries:
        plan.slots = None
    return plan


def fuse_privatised(entries: list[tuple[ir.Function, tuple[int, int, int]]], functions: list[ir.Function],
                    plan: CpuAddPlan, max_slots: int, group_barrier: bool) -> CpuAddPlan:
    """Inline and reuse values in the privatised entry points (see the module's text)."""
    targets = [fn for fn, _ in entries if id(fn) in plan.entries]
    if not targets:
        return plan
    saved = {id(fn): fn.body for fn in targets}
    for fn in targets:
        inline_copy(fn)
    inlined = plan_cpu_adds(entries, functions, max_slots, group_barrier)
    if all(inlined.entries.get(id(fn)) == plan.entries[id(fn)] for fn in targets):
        for fn in targets:
            deferred = frozenset(id(n) for n in scan.walk(fn.body)
                                 if isinstance(n, ir.Intrinsic) and id(n) in inlined.slots.offset)
            reuse_and_prune(fn, deferred)
        # reuse and dead-code removal keep the sites, their loops and their addresses: the plan stands
        return inlined
    for fn in targets:
        fn.body = saved[id(fn)]
    return plan
