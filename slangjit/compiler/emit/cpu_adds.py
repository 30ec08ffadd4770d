"""The C++ emitter of privatised gradient adds (passes/cpu_adds.py): a function with slots takes
(sj_acc, sj_tab, sj_slot) after its own parameters; a slotted site becomes `sj::pacc_add(...)` with its slot
expression; the launcher of a privatised entry keeps the accumulators on the worker's stack and adds them
into memory after its range of groups (`sj::pacc_flush`).  sj_slot = -1 (a caller without slots) means
the ordinary atomic add."""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from .. import types as T
from ..passes.red_slots import RedSlots
from .cpp import CppEmitter

# After the prelude, in programs with privatised adds.  key = address | 1 for half (2-byte aligned).
PACC_PRELUDE = r"""namespace sj {
// Per-worker accumulation of thread-uniform float/half adds (passes/cpu_adds.py, emit/cpu_adds.py).
#define SJ_PSLOT(base, k) ((base) < 0 ? -1 : (base) + (k))
__attribute__((noinline)) inline void pacc_put(uintptr_t key, float s) {
    if (key & 1u) (void)detail::atomic_add(reinterpret_cast<half*>(key & ~uintptr_t(1)), half(s));
    else (void)detail::atomic_add(reinterpret_cast<float*>(key), s);
}
// A slot's first add (or an add to another address than the slot's): the old sum goes to memory.
__attribute__((noinline)) inline void pacc_claim(float* acc, uintptr_t* tab, int slot, uintptr_t key) {
    if (tab[slot]) pacc_put(tab[slot], acc[slot]);
    tab[slot] = key;
    acc[slot] = 0.0f;
}
template <class T> SJ_FN void pacc_add(float* acc, uintptr_t* tab, int slot, T* p, T v) {
    if (slot < 0) { (void)detail::atomic_add(p, v); return; }
    const uintptr_t key = reinterpret_cast<uintptr_t>(p) | (sizeof(T) == 2 ? 1u : 0u);
    if (__builtin_expect(tab[slot] != key, 0)) pacc_claim(acc, tab, slot, key);
    acc[slot] += float(v);
}
inline void pacc_flush(const float* acc, const uintptr_t* tab, int n) {
    for (int i = 0; i < n; ++i)
        if (tab[i]) pacc_put(tab[i], acc[i]);
}
// A chunked dispatch's combination (emit/program.py sj_finish_chunks): a worker's partial sums added into
// another's, slot by slot (a slot the two hold for different addresses goes to memory: not the case for
// thread-uniform addresses).  lane_seal: a worker folds its per-lane partials into acc (lanes left zero).
inline void acc_merge(float* dacc, uintptr_t* dtab, const float* sacc, const uintptr_t* stab, int n) {
    for (int i = 0; i < n; ++i) {
        if (!stab[i]) continue;
        if (dtab[i] == stab[i]) dacc[i] += sacc[i];
        else if (!dtab[i]) { dtab[i] = stab[i]; dacc[i] = sacc[i]; }
        else pacc_put(stab[i], sacc[i]);
    }
}
inline void lane_seal(float* acc, float* lacc, const uintptr_t* tab, int n, int W) {
    for (int s = 0; s < n; ++s)
        if (tab[s]) {
            float t = acc[s];
            for (int l = 0; l < W; ++l) { t += lacc[s * W + l]; lacc[s * W + l] = 0.0f; }
            acc[s] = t;
        }
}
}  // namespace sj"""


class CpuEmitter(CppEmitter):
    """CppEmitter + the slots of privatised gradient adds."""

    def __init__(self, checked: bool = False, slots: Optional[RedSlots] = None):
        super().__init__("cpp", checked)
        self.slots = slots
        self.slot_base: list[str] = []
        self.lane_vars: Optional[set] = None      # lane-blocked emission (emit/cpu_lanes.py): uids of lane arrays
        self.lane_alias: dict = {}                # emit/cpu_lane_loops.py: uid -> a lane's gathered C++ value

    def var_name(self, v: ir.Var) -> str:
        alias = self.lane_alias.get(v.uid) if self.lane_alias else None
        if alias is not None:
            return alias
        name = super().var_name(v)
        if self.lane_vars is not None and v.uid in self.lane_vars:
            return f"{name}[sj_l]"
        return name

    def x_LaneRaw(self, e):
        return e.text

    def bears_slots(self, fn: ir.Function) -> bool:
        return self.slots is not None and self.slots.bears_slots(fn)

    def prototype(self, fn: ir.Function) -> str:
        if not self.bears_slots(fn):
            return super().prototype(fn)
        ps = [self.param_decl(p) for p in fn.params] + ["float* sj_acc", "uintptr_t* sj_tab", "int sj_slot"]
        return f"static {self.ctype(fn.ret)} {fn.name}({', '.join(ps)})"

    def function(self, fn: ir.Function, guard_recursion: bool = False):
        self.slot_base = ["sj_slot"] if self.bears_slots(fn) else []
        super().function(fn, guard_recursion)

    def _slot(self, node) -> Optional[str]:
        o = self.slots.offset.get(id(node)) if self.slots is not None else None
        if o is None or not self.slot_base:
            return None
        return f"SJ_PSLOT({self.slot_base[-1]}, {o})"

    def x_Call(self, e):
        if not self.bears_slots(e.func):
            return super().x_Call(e)
        slot = self._slot(e)
        extra = ["sj_acc", "sj_tab", slot] if slot else ["nullptr", "nullptr", "-1"]
        void = e.type == T.VOID
        return self.with_out_temps(e.args, lambda parts: ("sj_void:" if void else "") +
                                   f"{e.func.name}({', '.join(list(parts) + extra)})")

    def x_Intrinsic(self, e):
        slot = self._slot(e)
        if slot is None:
            return super().x_Intrinsic(e)
        dest, value = e.args
        ct = self.ctype(dest.type)
        return f"sj::pacc_add<{ct}>(sj_acc, sj_tab, {slot}, &({self.expr(dest)}), {self.expr(value)})"

    def s_Loop(self, s, d):
        lay = self.slots.loops.get(id(s)) if self.slots is not None else None
        if lay is None or not self.slot_base:
            return super().s_Loop(s, d)
        it = lay.iteration(self.var_name(lay.var))
        self.slot_base.append(f"SJ_PSLOT({self.slot_base[-1]}, {lay.offset} + {it} * {lay.body_size})")
        try:
            super().s_Loop(s, d)
        finally:
            self.slot_base.pop()
