"""The values of lane-blocked kernels with loops (emit/cpu_lane_loops.py): the C++ prelude they need,
which locals are uniform or varying across a block's lanes (Classify), and the scalar leaves of a varying
local's structure-of-arrays storage."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T
from ..passes.red_slots import counted_loop
from .cpu_lanes import PURE_INTRINSICS

MAX_LANE_BYTES = 256 * 1024      # lane rows of all varying locals of one kernel (the worker's stack)

# Elementwise pure intrinsics (a vector argument: the function of each component).
_ELEMENTWISE = {f"sj::{n}" for n in (
    "sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 log log2 log10 sqrt rsqrt pow "
    "abs min max clamp saturate floor ceil round trunc frac fmod lerp step smoothstep sign rcp fma mad "
    "degrees radians exp10 copysign").split()}
# Wave operations: the CPU runs every thread as a wave of one lane (prelude 11_waves.h), so these are the
# identity of their first argument.
_WAVE_IDENTITY = {f"sj::{n}" for n in (
    "WaveActiveSum WaveActiveProduct WaveActiveMin WaveActiveMax WaveActiveBitAnd WaveActiveBitOr "
    "WaveActiveBitXor WaveReadLaneFirst WaveReadLaneAt WaveBroadcastLaneAt").split()}
_WAVE_CONST = {"sj::WaveIsFirstLane": "true", "sj::WaveGetLaneIndex": "0u", "sj::WaveGetLaneCount": "1u"}

LANE_LOOPS_PRELUDE = r"""#if defined(__x86_64__) && (defined(__F16C__) || defined(__AVX512F__))
#if defined(__clang__) || !defined(__GNUC__)
#include <immintrin.h>
#define SJ_CVT_INTRIN 1
#else
// GCC: the conversion builtins themselves; <immintrin.h> is ~0.18 s of parsing per translation unit
// (runtime/cpu_compiler.py, compile latency).  Rounding operand 8 = to nearest even, no exceptions.
typedef float sj_v16sf __attribute__((vector_size(64)));
typedef short sj_v16hi __attribute__((vector_size(32)));
typedef float sj_v8sf __attribute__((vector_size(32)));
typedef short sj_v8hi __attribute__((vector_size(16)));
#endif
#endif
// never inlined into its launcher (compiled for the default vector width): its loops would be vectorised
// with 256-bit halves that the 512-bit half rounding then reloads whole (a store-forwarding stall each)
#if defined(__AVX512F__)
#define SJ_LANES_FN __attribute__((noinline, target("prefer-vector-width=512")))
#else
#define SJ_LANES_FN __attribute__((noinline))
#endif
namespace sj {
// Round a float to the nearest half (ties to even) and back, in integer/float arithmetic the compiler
// vectorises (GCC does not vectorise _Float16 without AVX512-FP16).  Equal to float(half(x)).
SJ_FN float rh(float x) {
    const uint32_t b = __builtin_bit_cast(uint32_t, x);
    const uint32_t a = b & 0x7fffffffu;
    uint32_t n = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;     // normal halves: 10 mantissa bits
    n = n > 0x477fe000u ? 0x7f800000u : n;                            // beyond 65504: infinity
    const float sub = (__builtin_bit_cast(float, a) + 0.5f) - 0.5f;  // below 2^-14: multiples of 2^-24
    uint32_t r = a < 0x38800000u ? __builtin_bit_cast(uint32_t, sub) : n;
    r = a > 0x7f800000u ? ((a | 0x00400000u) & 0xffffe000u) : r;     // NaN stays a (quiet) NaN
    return __builtin_bit_cast(float, r | (b & 0x80000000u));
}
// The same rounding in float arithmetic: adding m = 2^(e+13) (e: x's exponent, at least -14) rounds |x| to
// the 11 significant bits of a half (to the quantum 2^-24 below 2^-14) in the float add's own round-to-
// nearest-even, and subtracting m is exact; beyond 65504 is infinity, a NaN keeps 10 payload bits, quiet.
// Bit for bit _Float16 / vcvtps2ph (checked over all 2^32 floats); about ten simple vector operations that
// stay in the lane loop's registers (the conversions need a row in memory).  Needs -ffp-contract=off.
SJ_FN float rhf(float x) {
    const uint32_t b = __builtin_bit_cast(uint32_t, x);
    const uint32_t a = b & 0x7fffffffu;
    uint32_t e = a & 0x7f800000u;
    e = e < 0x38800000u ? 0x38800000u : e;
    const float m = __builtin_bit_cast(float, e + (13u << 23));
    uint32_t r = __builtin_bit_cast(uint32_t, (__builtin_bit_cast(float, a) + m) - m);
    r = r > 0x477fe000u ? 0x7f800000u : r;
    r = a > 0x7f800000u ? ((a | 0x00400000u) & 0xffffe000u) : r;
    return __builtin_bit_cast(float, r | (b & 0x80000000u));
}
// A row of W lanes rounded to half in place: the F16C / AVX-512 conversions where the ISA has them.
template <int W> SJ_FN void rh_row(float* x) {
#if defined(__x86_64__) && defined(__AVX512F__)
    if constexpr (W % 16 == 0) {
        for (int i = 0; i < W; i += 16) {
#if defined(SJ_CVT_INTRIN)
            _mm512_store_ps(x + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_load_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#else
            sj_v16sf v; __builtin_memcpy(&v, x + i, sizeof v);
            const sj_v16hi h = __builtin_ia32_vcvtps2ph512_mask(v, 8, sj_v16hi{}, (unsigned short)0xffff);
            v = __builtin_ia32_vcvtph2ps512_mask(h, sj_v16sf{}, (unsigned short)0xffff, 4);
            __builtin_memcpy(x + i, &v, sizeof v);
#endif
        }
        return;
    }
#endif
#if defined(__x86_64__) && defined(__F16C__)
    if constexpr (W % 8 == 0) {
        for (int i = 0; i < W; i += 8) {
#if defined(SJ_CVT_INTRIN)
            _mm256_store_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_load_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#else
            sj_v8sf v; __builtin_memcpy(&v, x + i, sizeof v);
            const sj_v8hi h = __builtin_ia32_vcvtps2ph256(v, 8);
            v = __builtin_ia32_vcvtph2ps256(h);
            __builtin_memcpy(x + i, &v, sizeof v);
#endif
        }
        return;
    }
#endif
#pragma omp simd
    for (int i = 0; i < W; ++i) x[i] = rh(x[i]);
}
// A combined atomic of a lane-blocked kernel, deferred to the end of the worker's range: its address, its value.
struct LaneRed { void* key; uint64_t bits; };
}  // namespace sj"""


# After PACC_PRELUDE (emit/cpu_adds.py), in programs with lane-blocked kernels.
LACC_PRELUDE = r"""namespace sj {
// Privatised adds per lane (emit/cpu_lane_loops.py): lacc[slot * W + lane]; acc/tab as pacc_*.
__attribute__((noinline)) inline void lacc_claim(float* acc, float* lacc, uintptr_t* tab, int s, uintptr_t key, int W) {
    if (tab[s]) {
        float t = acc[s];
        for (int l = 0; l < W; ++l) t += lacc[s * W + l];
        pacc_put(tab[s], t);
    }
    tab[s] = key;
    acc[s] = 0.0f;
    for (int l = 0; l < W; ++l) lacc[s * W + l] = 0.0f;
}
template <class T> SJ_FN void lacc_add(float* acc, float* lacc, uintptr_t* tab, int s, T* p, T v, int W) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(p) | (sizeof(T) == 2 ? 1u : 0u);
    if (__builtin_expect(tab[s] != key, 0)) lacc_claim(acc, lacc, tab, s, key, W);
    acc[s] += float(v);
}
inline void lacc_flush(const float* acc, const float* lacc, const uintptr_t* tab, int n, int W) {
    // workers flushing at the same time start at different slots (spread over the gradient's cache lines)
    const int s0 = n ? int((reinterpret_cast<uintptr_t>(acc) >> 6) % uintptr_t(n)) : 0;
    for (int i = 0; i < n; ++i)
        if (const int s = (s0 + i) % n; tab[s]) {
            float t = acc[s];
            for (int l = 0; l < W; ++l) t += lacc[s * W + l];
            pacc_put(tab[s], t);
        }
}
}  // namespace sj"""


class _Unsupported(Exception):
    pass


class _Lanewise(_Unsupported):
    """A value the lanes cannot compute together (a load at a varying address): the statement runs lane by lane."""


@dataclass
class LaneRaw(ir.Expr):
    """C++ text standing for a lane-domain scalar value of `type` (printed by CpuEmitter.x_LaneRaw)."""
    text: str = ""


def _is_half(t) -> bool:
    return isinstance(t, T.ScalarType) and t.kind == "float" and t.bits == 16


def _fields(t: T.StructType) -> list:
    info = getattr(t, "info", None)
    if info is None or not hasattr(info, "field_list"):
        raise _Unsupported(f"struct {t}")
    return info.field_list()


def leaves(t) -> list[tuple[str, list[int], T.Type]]:
    """(name suffix, array dimensions, scalar type) of every scalar leaf of a value of type t."""
    if isinstance(t, (T.ScalarType, T.PointerType, T.EnumType)):
        return [("", [], t)]
    if isinstance(t, T.VectorType) and isinstance(t.n, int):
        return [(s, [t.n] + d, st) for s, d, st in leaves(t.elem)]
    if isinstance(t, T.ArrayType) and isinstance(t.n, int) and t.n > 0:
        return [(s, [t.n] + d, st) for s, d, st in leaves(t.elem)]
    if isinstance(t, T.MatrixType) and isinstance(t.rows, int) and isinstance(t.cols, int):
        return [("", [t.rows, t.cols], t.elem)]
    if isinstance(t, T.StructType):
        out = []
        for fname, ft in _fields(t):
            out += [(f"__{fname}{s}", d, st) for s, d, st in leaves(ft)]
        return out
    if isinstance(t, T.PairType):
        return [(f"__p{s}", d, st) for s, d, st in leaves(t.primal)] + \
            [(f"__d{s}", d, st) for s, d, st in leaves(t.diff)]
    raise _Unsupported(f"a varying local of type {t}")


def components(t) -> list[list]:
    """Every scalar component of a value of type t as a selector list (('f', name) or a constant index)."""
    if isinstance(t, (T.ScalarType, T.PointerType, T.EnumType)):
        return [[]]
    if isinstance(t, (T.VectorType, T.ArrayType)):
        return [[str(i)] + c for i in range(t.n) for c in components(t.elem)]
    if isinstance(t, T.MatrixType):
        return [[str(r), str(c)] for r in range(t.rows) for c in range(t.cols)]
    if isinstance(t, T.StructType):
        return [[("f", n)] + c for n, ft in _fields(t) for c in components(ft)]
    if isinstance(t, T.PairType):
        return [[("f", "p")] + c for c in components(t.primal)] + [[("f", "d")] + c for c in components(t.diff)]
    raise _Unsupported(f"components of {t}")


def _sub_type(t, sel):
    """The type reached from t by one selector."""
    if isinstance(sel, tuple):
        if isinstance(t, T.StructType):
            for n, ft in _fields(t):
                if n == sel[1]:
                    return ft
        if isinstance(t, T.PairType):
            return t.primal if sel[1] == "p" else t.diff
        raise _Unsupported(f"field {sel[1]} of {t}")
    if isinstance(t, (T.VectorType, T.ArrayType)):
        return t.elem
    if isinstance(t, T.MatrixType):
        return t.row_type
    raise _Unsupported(f"index into {t}")


def _iname(n) -> str:
    """An intrinsic's name without its template arguments (`sj::bit_cast<$T0>` -> `sj::bit_cast`)."""
    return n.name.split("<", 1)[0]


def _side_effects(e) -> bool:
    """Does evaluating e write anything or call anything with effects?  (Loads are no effects.)"""
    for n in scan.walk(e):
        if isinstance(n, (ir.Assign, ir.IncDec, ir.Call, ir.MethodCall, ir.StmtExpr, ir.OutConvert)):
            return True
        if isinstance(n, ir.Intrinsic) and not (_iname(n) in PURE_INTRINSICS or n.name in _WAVE_IDENTITY
                                                or n.name in _WAVE_CONST or n.name in ("sj::vcat",)) :
            return True
        if isinstance(n, ir.Intrinsic) and n.out_params:
            return True
    return False


def _atomic_obj(obj) -> bool:
    """Is obj (or what it points to) an Atomic<T>?  (Its add / max / min are atomic read-modify-writes.)"""
    t = obj.type.elem if isinstance(obj.type, T.PointerType) else obj.type
    return isinstance(t, T.AtomicType)


def _loads(e) -> bool:
    """Does e read memory (through a pointer, a buffer, a global)?  Such uniform values are computed once."""
    for n in scan.walk(e):
        if isinstance(n, (ir.Deref, ir.GlobalRef, ir.MethodCall, ir.Call)):
            return True
        if isinstance(n, ir.Field) and n.via_pointer:
            return True
        if isinstance(n, ir.Index) and not isinstance(scan.value_type(n.obj), (T.ArrayType, T.VectorType, T.MatrixType)):
            return True
    return False


_root = scan.local_written          # the local a write to an lvalue changes (ir/walk.py)


def _written_locals(e) -> set:
    """uids of the locals an expression statement may write (assignment targets, out arguments)."""
    out = set()
    for n in scan.walk(e):
        targets = scan.write_targets(n)
        if isinstance(n, ir.MethodCall):
            targets = [n.obj] + list(n.args)
        elif isinstance(n, ir.AddressOf):
            targets = [n.operand]
        for t in targets:
            v = _root(t)
            if v is not None:
                out.add(v.uid)
    return out


def _counter_copies(fn: ir.Function, nodes: Optional[list] = None) -> dict:
    """uid -> counter uid for locals written once, by their declaration, with a counted loop's counter (an
    inlined call's parameter): they take the counter's values only, so its range bounds them too.  `nodes`:
    scan.walk(fn.body) as a list, where the caller has it."""
    nodes = nodes if nodes is not None else list(scan.walk(fn.body))
    writes: dict = {}
    counters = set()
    for n in nodes:
        if isinstance(n, ir.VarDecl):
            writes[n.var.uid] = writes.get(n.var.uid, 0) + 1
        elif isinstance(n, (ir.ExprStmt,)):
            for uid in _written_locals(n.expr):
                writes[uid] = writes.get(uid, 0) + 2
        elif isinstance(n, ir.Loop):
            if n.step is not None:
                for uid in _written_locals(n.step):
                    writes[uid] = writes.get(uid, 0) + 2
            c = counted_loop(n)
            if c:
                counters.add(c.var.uid)
    out = {}
    for n in nodes:
        if isinstance(n, ir.VarDecl) and writes.get(n.var.uid) == 1 and n.init is not None:
            x = n.init
            while isinstance(x, ir.Convert) and isinstance(x.type, T.ScalarType) and x.type.kind in ("int", "uint") \
                    and x.type.bits >= 32:
                x = x.operand
            if isinstance(x, ir.LocalRef) and x.var.uid in counters:
                out[n.var.uid] = x.var.uid
    return out


class Classify:
    """Which locals of the (inlined) entry are varying across the lanes of a block.  The classification runs
    to a fixed point and the emitter asks again per expression: what an expression reads and whether it is
    varying by itself are computed once per node (the IR does not change meanwhile; the node is kept with its
    entry, so a reused id() cannot hit)."""

    def __init__(self, fn: ir.Function, varying_params: set[int]):
        self.varying: set[int] = set(varying_params)
        self._memo: dict = {}           # id(expr) -> (expr, varying by itself, uids of the locals it reads)
        self._effects: dict = {}        # id(expr) -> (expr, _side_effects(expr))
        while True:
            n = len(self.varying)
            self._stmt(fn.body, False)
            if len(self.varying) == n:
                break

    def _facts(self, e) -> tuple:
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit
        own, uids = False, set()
        for n in scan.walk(e):
            if isinstance(n, ir.LocalRef):
                uids.add(n.var.uid)
            elif isinstance(n, (ir.SystemValue, ir.Call, ir.MethodCall, ir.StmtExpr)):
                own = True
                break
            elif isinstance(n, ir.Intrinsic) and _iname(n) not in PURE_INTRINSICS and n.name not in _WAVE_CONST \
                    and n.name != "sj::vcat" and n.name not in _WAVE_IDENTITY:
                own = True
                break
            elif isinstance(n, ir.GlobalRef) and n.var.kind not in ("uniform", "const"):
                own = True
                break
        hit = (e, own, frozenset(uids))
        self._memo[id(e)] = hit
        return hit

    def expr_varying(self, e) -> bool:
        _, own, uids = self._facts(e)
        return own or not uids.isdisjoint(self.varying)

    def side_effects(self, e) -> bool:
        """_side_effects(e), once per node."""
        hit = self._effects.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = _side_effects(e)
        self._effects[id(e)] = (e, out)
        return out

    def _mark(self, uids) -> None:
        self.varying |= set(uids)

    def _stmt(self, s, vctx: bool) -> None:
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self._stmt(x, vctx)
        elif isinstance(s, ir.If):
            v = vctx or self.expr_varying(s.cond)
            self._stmt(s.then, v)
            if s.else_ is not None:
                self._stmt(s.else_, v)
        elif isinstance(s, ir.Loop):
            for i in s.init:
                self._stmt(i, vctx)
            self._stmt(s.body, vctx)
        elif isinstance(s, ir.VarDecl):
            if vctx or (s.init is not None and (self.expr_varying(s.init) or self.side_effects(s.init))):
                self._mark([s.var.uid])
            if s.init is not None:
                self._mark(_written_locals(s.init) if (vctx or self.side_effects(s.init)) else ())
        elif isinstance(s, ir.ExprStmt):
            e = s.expr
            if isinstance(e, ir.Assign) and _root(e.lhs) is not None and not self.side_effects(e.rhs) and \
                    not any(isinstance(n, (ir.Assign, ir.IncDec)) for n in scan.walk(e.lhs)):
                if vctx or self.expr_varying(e.rhs) or self.expr_varying(e.lhs):
                    self._mark([_root(e.lhs).uid])
            elif isinstance(e, ir.IncDec) and _root(e.operand) is not None:
                if vctx or self.expr_varying(e.operand):
                    self._mark([_root(e.operand).uid])
            else:
                self._mark(_written_locals(e))


def _prod(dims) -> int:
    p = 1
    for x in dims:
        p *= x
    return p
