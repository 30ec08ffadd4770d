"""Register-resident lane kernels (CpuOptions.lane_vregs): emit/cpu_lane_loops.py's kernels with every varying
scalar leaf held as one vector value of W lanes instead of a row in memory.

The analysis is LoopLaneKernel's (uniform / varying locals, counted loops, masks, alive / live, privatised
adds, combined atomics, lane-by-lane statements); what changes is the representation:

* A varying leaf of type float / half / int / uint / bool is a GCC vector (`sj_vf32 x`, `sj_vf32 x__data[16]`
  for an array of leaves indexed by uniform counters).  half values are floats holding half values, as in
  the row emitter.  A bool is an int vector, nonzero = true (compares give -1, lane-by-lane writes 1).
* A statement is one vector expression per component (`r = sj::rhv(r + sj::rhv(w * x))`, the uniform
  operand broadcast), so the C++ compiler keeps temporaries in registers; no statement is a loop.  Half
  rounding `sj::rhv` converts the vector to half and back with the AVX-512 / F16C builtins, in registers
  (the portable build rounds each element with sj::rh: the same bits).
* Masks are int vectors, a masked assignment is a vector select, `lanes_any` tests a vector.
* What has no vector form (integer division, shifts, math functions, conversions whose out-of-range
  results differ between the scalar and vector instructions, a select whose branches could trap) is
  computed element by element: the row emitter's per-lane text (vector elements are subscripted, `x[l]`)
  in a `#pragma omp simd` loop into a small array (math calls reach libmvec), copied into a vector.  Gathers,
  scatters, atomics and other statements with effects run lane by lane exactly as in the row emitter.

Element-level code (lane-by-lane statements, the combined atomics' reduction loops) reads and writes the
vectors' elements: its text is the row emitter's, since `x__data[i][sj_l]` subscripts a vector as it did
a row.  A kernel with a varying leaf of another type (pointers, 64-bit, 8/16-bit integers, enums) or a
width that is not a power of two stays with the row emitter.
"""
from __future__ import annotations

import re
from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T
from .cpu_lane_loops import LoopLaneKernel, construct_part
from .cpu_lane_rows import _trap_free
from .cpu_lane_values import (_Lanewise, _Unsupported, _WAVE_CONST, _WAVE_IDENTITY, _iname, _is_half,
                              _loads, _side_effects, components)

__all__ = ["VREG_PRELUDE", "VregLaneKernel"]

# Emitted once before the first register-resident kernel of a program (after LANE_LOOPS_PRELUDE).
VREG_PRELUDE = r"""#ifndef SJ_VREG_PRELUDE
#define SJ_VREG_PRELUDE 1
// One machine vector of lanes: a kernel's W lanes are W / SJ_VL of them (W a multiple of 16), so every
// comparison and select is a machine instruction (GCC lowers those of wider vectors lane by lane).
#if defined(SJ_VL)
#elif defined(__AVX512F__)
#define SJ_VL 16
#elif defined(__AVX__)
#define SJ_VL 8
#else
#define SJ_VL 4
#endif
// SJ_EACH<W>(statement): the statement for every machine vector sj_k of a W-lane block, as straight-line
// code (sj_k a constant in each copy, so the vectors are registers, not memory indexed at run time).
#define SJ_RK(k, ...) { constexpr int sj_k = k; __VA_ARGS__ }
#define SJ_R1(...) SJ_RK(0, __VA_ARGS__)
#define SJ_R2(...) SJ_R1(__VA_ARGS__) SJ_RK(1, __VA_ARGS__)
#define SJ_R4(...) SJ_R2(__VA_ARGS__) SJ_RK(2, __VA_ARGS__) SJ_RK(3, __VA_ARGS__)
#define SJ_R8(...) SJ_R4(__VA_ARGS__) SJ_RK(4, __VA_ARGS__) SJ_RK(5, __VA_ARGS__) SJ_RK(6, __VA_ARGS__) SJ_RK(7, __VA_ARGS__)
#define SJ_R16(...) SJ_R8(__VA_ARGS__) SJ_RK(8, __VA_ARGS__) SJ_RK(9, __VA_ARGS__) SJ_RK(10, __VA_ARGS__) \
    SJ_RK(11, __VA_ARGS__) SJ_RK(12, __VA_ARGS__) SJ_RK(13, __VA_ARGS__) SJ_RK(14, __VA_ARGS__) SJ_RK(15, __VA_ARGS__)
#if SJ_VL == 16
#define SJ_EACH16 SJ_R1
#define SJ_EACH32 SJ_R2
#define SJ_EACH64 SJ_R4
#elif SJ_VL == 8
#define SJ_EACH16 SJ_R2
#define SJ_EACH32 SJ_R4
#define SJ_EACH64 SJ_R8
#else
// 4-lane SSE2 vectors (the portable build): a loop over the block's vectors, not 8 or 16 copies of every
// statement (the C++ build of the seed MLP's learnGradient: 1.44-1.66 s copied, 0.50 s looped; it runs as fast)
#define SJ_LOOP(n, ...) for (int sj_k = 0; sj_k < n; ++sj_k) { __VA_ARGS__ }
#define SJ_EACH16(...) SJ_LOOP(4, __VA_ARGS__)
#define SJ_EACH32(...) SJ_LOOP(8, __VA_ARGS__)
#define SJ_EACH64(...) SJ_LOOP(16, __VA_ARGS__)
#endif
typedef float sj_vf __attribute__((vector_size(SJ_VL * 4)));
typedef int32_t sj_vi __attribute__((vector_size(SJ_VL * 4)));
typedef uint32_t sj_vu __attribute__((vector_size(SJ_VL * 4)));
namespace sj {
// The lanes of a row of machine vectors as scalars (lane l of the row: el(row)[l]; -fno-strict-aliasing).
SJ_FN float* el(sj_vf* v) { return reinterpret_cast<float*>(v); }
SJ_FN int32_t* el(sj_vi* v) { return reinterpret_cast<int32_t*>(v); }
SJ_FN uint32_t* el(sj_vu* v) { return reinterpret_cast<uint32_t*>(v); }
// A uniform scalar in every lane (a plain copy: no arithmetic, so -0.0 and NaN payloads stay).
#if SJ_VL == 16
#define SJ_SPLAT(s) {s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s}
#elif SJ_VL == 8
#define SJ_SPLAT(s) {s, s, s, s, s, s, s, s}
#else
#define SJ_SPLAT(s) {s, s, s, s}
#endif
template <class V, class S> SJ_FN V vbc(S s) { return V SJ_SPLAT(s); }
// Is any lane of a mask (k machine vectors) set?
SJ_FN bool vany(const sj_vi* m, int k) {
    sj_vi a = m[0];
    for (int i = 1; i < k; ++i) a |= m[i];
    uint64_t w[sizeof(sj_vi) / 8];
    __builtin_memcpy(w, &a, sizeof w);
    uint64_t t = 0;
    for (unsigned i = 0; i < sizeof(sj_vi) / 8; ++i) t |= w[i];
    return t != 0;
}
template <class V> SJ_FN V vsel(sj_vi m, V a, V b) { return m ? a : b; }
// sj::rhf on every lane, in vector arithmetic (CpuOptions.half_rows=False: no conversion instructions).
SJ_FN sj_vf rhf(sj_vf x) {
    const sj_vu b = (sj_vu)x;
    const sj_vu a = b & 0x7fffffffu;
    sj_vu e = a & 0x7f800000u;
    e = e < 0x38800000u ? (sj_vu{} + 0x38800000u) : e;
    const sj_vf m = (sj_vf)(e + (13u << 23));
    sj_vu r = (sj_vu)(((sj_vf)a + m) - m);
    r = r > 0x477fe000u ? (sj_vu{} + 0x7f800000u) : r;
    r = a > 0x7f800000u ? ((a | 0x00400000u) & 0xffffe000u) : r;
    return (sj_vf)(r | (b & 0x80000000u));
}
// A uniform half from memory as a float in every lane (the seed MLP's weights).  A normal half is converted
// in integer registers (its exponent rebiased) and broadcast from memory, so that neither step takes the
// vector unit that converts and shuffles, which every rounding (rhv) needs: about 8% of learnGradient on a
// Zen 5 core.  Zeros, subnormals, infinities and NaNs take the conversion instruction.  Bit for bit (float)h.
SJ_FN sj_vf hbc(const half& h) {
#if defined(__x86_64__) && defined(__AVX__) && (SJ_VL == 8 || SJ_VL == 16)
    uint16_t u;
    __builtin_memcpy(&u, &h, 2);
    const uint32_t a = u & 0x7fffu;
    if (__builtin_expect(a - 0x400u < 0x7800u, 1)) {
        const uint32_t b = ((uint32_t)(u & 0x8000u) << 16) | ((a << 13) + (112u << 23));
        sj_vf r;
        __asm__("vbroadcastss %1, %0" : "=v"(r) : "m"(b));
        return r;
    }
#endif
    return vbc<sj_vf>((float)h);
}
// Every lane rounded to the nearest half and back, in registers: the AVX-512 / F16C conversions where the
// ISA has them (as rh_row), else sj::rh's integer arithmetic.  Equal to float(half(x)) in every case.
SJ_FN sj_vf rhv(sj_vf x) {
#if defined(__x86_64__) && defined(__AVX512F__) && SJ_VL == 16
#if defined(SJ_CVT_INTRIN)
    __m512 v; __builtin_memcpy(&v, &x, 64);
    v = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __builtin_memcpy(&x, &v, 64);
    return x;
#else
    return __builtin_ia32_vcvtph2ps512_mask(__builtin_ia32_vcvtps2ph512_mask(x, 8, sj_v16hi{}, (unsigned short)0xffff),
                                            sj_v16sf{}, (unsigned short)0xffff, 4);
#endif
#elif defined(__x86_64__) && defined(__F16C__) && SJ_VL == 8
#if defined(SJ_CVT_INTRIN)
    __m256 v; __builtin_memcpy(&v, &x, 32);
    v = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __builtin_memcpy(&x, &v, 32);
    return x;
#else
    return __builtin_ia32_vcvtph2ps256(__builtin_ia32_vcvtps2ph256(x, 8));
#endif
#else
    const sj_vu b = (sj_vu)x;
    const sj_vu a = b & 0x7fffffffu;
    sj_vu n = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
    n = n > 0x477fe000u ? (sj_vu{} + 0x7f800000u) : n;
    const sj_vf sub = ((sj_vf)a + 0.5f) - 0.5f;
    sj_vu r = a < 0x38800000u ? (sj_vu)sub : n;
    r = a > 0x7f800000u ? ((a | 0x00400000u) & 0xffffe000u) : r;
    return (sj_vf)(r | (b & 0x80000000u));
#endif
}
}  // namespace sj
#endif"""


class _NoVec(Exception):
    """No vector form for this node: the caller computes it element by element."""


def _vcls(t):
    """The vector class of a scalar type: 'f' float (and half), 'i' int32, 'u' uint32, 'm' bool; else None."""
    if not isinstance(t, T.ScalarType):
        return None
    if t.kind == "float" and t.bits in (16, 32):
        return "f"
    if t.kind in ("int", "uint") and t.bits == 32:
        return "i" if t.kind == "int" else "u"
    if t.kind == "bool":
        return "m"
    return None


_ELT = {"f": "float", "i": "int32_t", "u": "uint32_t", "m": "int32_t"}
_ARITH = ("+", "-", "*")
_CMP = ("<", ">", "<=", ">=", "==", "!=")


class VregLaneKernel(LoopLaneKernel):
    """LoopLaneKernel with varying values in vector registers (None from `build` where it does not apply)."""

    def _emit(self) -> bool:
        if self.W not in (16, 32, 64):
            raise _Unsupported("a lane width other than 16, 32 or 64")
        self.simd_init = True       # lanes are plain array elements (sj::el): the start values vectorise
        # Machine vectors (their C++ text) that hold +0.0 in every lane at the current statement, by the local
        # they belong to: a half add or subtract with one of them is exact (no rounding; reverse mode's
        # adjoints start at zero and their first accumulation is such an add).
        self.zeros: dict[str, int] = {}
        self.noted = None                   # whether the statement being emitted went through _note_assigned
        return super()._emit()

    # ------------------------------------------------------------------ known zeros
    def _stmt(self, s, masks, d) -> None:
        if isinstance(s, ir.Block):
            return super()._stmt(s, masks, d)
        if isinstance(s, (ir.ExprStmt, ir.VarDecl)):
            # a statement reads the values before it; what it writes is forgotten after it unless
            # _note_assigned saw a zero go there
            noted, self.noted = self.noted, None
            super()._stmt(s, masks, d)
            if self.zeros and self.noted is None:
                self._forget_written(s)
            self.noted = noted
            return
        if self.zeros:
            self._forget_written(s)     # a loop's body runs again, a branch only for some: what they assign
        super()._stmt(s, masks, d)
        if self.zeros:
            self._forget_written(s)     # need not hold in them or after them

    def _forget_written(self, s) -> None:
        """Drop the known zeros of every local that statement s (its nested statements included) may write."""
        uids = set()
        for n in scan.walk(s):
            if isinstance(n, (ir.AddressOf, ir.MethodCall)):
                self.zeros.clear()
                return
            if isinstance(n, ir.VarDecl):
                uids.add(n.var.uid)
            for lv in scan.write_targets(n):
                v = scan.local_written(lv)
                if v is None:
                    continue
                uids.add(v.uid)
        if uids:
            self.zeros = {t: u for t, u in self.zeros.items() if u not in uids}

    def _note_assigned(self, root, lv: str, val: str, partial: bool) -> None:
        """After `lv = val` (a machine vector of local `root`; `partial`: only some lanes): the statement's
        only write, kept track of here (_stmt forgets nothing more after it)."""
        self.noted = True
        if not _fixed_chunk(lv):
            self.zeros = {t: u for t, u in self.zeros.items() if u != root.uid}   # an element at a run-time index
        elif not partial and _is_pos_zero(val, self._vt("f")):
            self.zeros[lv] = root.uid
        else:
            self.zeros.pop(lv, None)

    # ------------------------------------------------------------------ representation
    def _vt(self, c: str) -> str:
        return f"sj_v{'i' if c == 'm' else c}"

    def _kernel_prefix(self) -> list[str]:
        return [VREG_PRELUDE]

    @property
    def _K(self) -> str:
        return f"({self.W} / SJ_VL)"

    def _leaf_decl(self, name: str, dims: list, st) -> str:
        c = _vcls(st)
        if c is None:
            raise _Unsupported(f"a varying leaf of type {st}")
        dd = "".join(f"[{x}]" for x in dims)
        return f"{self._vt(c)} {name}{dd}[{self._K}];"

    def _mask_decl(self, name: str) -> str:
        return f"{self._vt('m')} {name}[{self._K}];"

    def _el(self, base: str) -> str:
        return f"sj::el({base})[sj_l]"

    def _vmask(self, masks, alive: bool = True) -> str:
        parts = (["sj_alive"] if alive else []) + list(masks)
        return "(" + " & ".join(f"{p}[sj_k]" for p in parts) + ")" if parts else ""

    def _kloop(self, d: int, pre: list, body: list) -> None:
        """The statement's uniform and lane-by-lane lines, then its vector lines for every machine vector
        sj_k of the block (unrolled: straight-line code)."""
        self._out(d, "{")
        for p in pre:
            self._out(d + 1, p)
        self._out(d + 1, f"SJ_EACH{self.W}({' '.join(body)})")
        self._out(d, "}")

    def _vany(self, m: str) -> str:
        return f"sj::vany({m}, {self._K})"

    # ------------------------------------------------------------------ vector expressions
    def vx(self, e, sel: list, pre: list) -> tuple[str, str]:
        """(C++ vector text, class) of the component at `sel` of e's value, every lane at once."""
        st = self._comp_type(e.type, sel)
        c = _vcls(st)
        mark = len(pre)
        if c is not None:
            try:
                return self._vx(e, sel, pre, st, c)
            except _NoVec:
                del pre[mark:]
        return self._lanes(e, sel, pre, c)

    def _lanes(self, e, sel, pre, c) -> tuple[str, str]:
        """e's component computed lane by lane (the row emitter's text) into a vector."""
        if c is None:
            raise _NoVec
        text = self.lx(e, sel, pre)
        name = self._new("e")
        val = f"-(int32_t)(bool)({text})" if c == "m" else f"({_ELT[c]})({text})"
        pre += [f"alignas(64) {_ELT[c]} {name}_r[{self.W}];",
                "#pragma omp simd",
                f"for (int sj_l = 0; sj_l < {self.W}; ++sj_l) {{ {name}_r[sj_l] = {val}; }}",
                f"{self._vt(c)} {name}[{self._K}]; __builtin_memcpy({name}, {name}_r, sizeof {name});"]
        return f"{name}[sj_k]", c

    def _vrh(self, value: str) -> str:
        """A half-rounded vector: F16C / AVX-512 conversions in registers, or sj::rhf's float arithmetic
        (CpuOptions.half_rows=False)."""
        return f"sj::rhv({value})" if self.half_rows else f"sj::rhf({value})"

    def _bc(self, c: str, scalar: str) -> str:
        return f"sj::vbc<{self._vt(c)}>(({_ELT[c]})({scalar}))"

    def _vleaf(self, v: ir.Var, sel: list) -> str:
        return _chunk(self._leaf_ref(v, sel))

    def _vopnd(self, x, sel, pre):
        return self.vx(x, sel if not isinstance(x.type, T.ScalarType) else [], pre)

    def _as_mask(self, text: str, c: str) -> str:
        if c == "m":
            return text
        return f"(({text}) != {self._bc(c, '0')})"

    def _uniform_half_load(self, e, sel) -> Optional[str]:
        """C++ text of the half in memory that a thread-uniform e reads (e itself, or e converted to float)."""
        if isinstance(e, ir.Convert) and isinstance(e.operand.type, T.ScalarType) and _is_half(e.operand.type) \
                and _vcls(e.type) == "f":
            e, sel = e.operand, []
        if not _loads(e) or (isinstance(e, ir.Construct) and not e.args):
            return None
        text, t = self._uniform_text(e, sel)
        return text if _is_half(t) else None

    def _vx(self, e, sel, pre, st, c) -> tuple[str, str]:
        if self._uniform(e):
            text = self._uniform_half_load(e, sel) if c == "f" else None
            if text is not None:              # a half from memory (the MLP's weights): sj::hbc, off the
                name = self._new("u")         # conversion unit that every rounding needs
                pre.append(f"const sj_vf {name} = sj::hbc({text});")
                return name, c
            s = self.lx(e, sel, pre)          # the scalar, loads computed once before the statement
            if c == "m":
                return f"sj::vbc<{self._vt('m')}>(-(int32_t)(bool)({s}))", c
            return self._bc(c, s), c
        if isinstance(e, ir.LocalRef):
            return self._vleaf(e.var, sel), c
        step = self._narrow(e, sel)
        if step is not None:
            return self.vx(step[0], step[1], pre)
        if isinstance(e, ir.Construct):
            return self._vconstruct(e, sel, pre, c)
        if isinstance(e, ir.Select):
            if not (_trap_free(e.then) and _trap_free(e.else_)):
                raise _NoVec
            m, mc = self.vx(e.cond, sel if not isinstance(e.cond.type, T.ScalarType) else [], pre)
            a, ac = self.vx(e.then, sel, pre)
            b, bc = self.vx(e.else_, sel, pre)
            if ac != c or bc != c:
                raise _NoVec
            return f"sj::vsel({self._as_mask(m, mc)}, {a}, {b})", c
        if isinstance(e, ir.Unary):
            x, xc = self._vopnd(e.operand, sel, pre)
            if _is_half(st):
                if e.op == "-":
                    return f"(-({x}))", c
                if e.op == "+":
                    return x, c
                raise _Unsupported(f"half unary {e.op}")
            if c == "m" and e.op == "!":
                return f"(({self._as_mask(x, xc)}) == 0)", c
            if xc == c and c in "fiu" and e.op in ("-", "+") or (xc == c and c in "iu" and e.op == "~"):
                return (f"({e.op}({x}))" if e.op != "+" else x), c
            raise _NoVec
        if isinstance(e, ir.Binary):
            return self._vbinary(e, sel, pre, st, c)
        if isinstance(e, ir.Convert):
            return self._vconvert(e, sel, pre, c)
        if isinstance(e, ir.Intrinsic):
            return self._vintrinsic(e, sel, pre, c)
        raise _NoVec

    def _vbinary(self, e, sel, pre, st, c) -> tuple[str, str]:
        at = self._comp_type(e.lhs.type, sel if not isinstance(e.lhs.type, T.ScalarType) else [])
        bt = self._comp_type(e.rhs.type, sel if not isinstance(e.rhs.type, T.ScalarType) else [])
        op = e.op
        if op in ("&&", "||") and not _trap_free(e.rhs):
            raise _NoVec                    # the right operand only where the left one lets it run
        a, ac = self._vopnd(e.lhs, sel, pre)
        b, bc = self._vopnd(e.rhs, sel, pre)
        if _is_half(at) or _is_half(bt):
            if op in ("+", "-") and _is_half(st) and ac == bc == "f" and (a in self.zeros or b in self.zeros):
                return f"(({a}) {op} ({b}))", c        # +0 plus or minus a half: that half (or +0), exact
            if op in ("+", "-", "*", "/") and _is_half(st) and ac == bc == "f":
                return self._vrh(f"({a}) {op} ({b})"), c
            if op in _CMP and ac == bc == "f":
                return f"(({a}) {op} ({b}))", c
            raise _Unsupported(f"half operator {op}")
        if ac == bc == "m" and c == "m":
            if op in ("&&", "&"):
                return f"(({a}) & ({b}))", c
            if op in ("||", "|"):
                return f"(({a}) | ({b}))", c
            if op in ("==", "!=", "^"):
                o = "==" if op == "==" else "!="
                return f"((({a}) != 0) {o} (({b}) != 0))", c
            raise _NoVec
        if ac != bc or ac == "m":
            raise _NoVec
        if op in _CMP and c == "m":
            return f"(({a}) {op} ({b}))", c
        if ac != c:
            raise _NoVec
        if ac == "f" and op in _ARITH + ("/",):
            return f"(({a}) {op} ({b}))", c
        if ac in "iu" and op in _ARITH + ("&", "|", "^"):
            return f"(({a}) {op} ({b}))", c
        raise _NoVec

    def _vconvert(self, e, sel, pre, c) -> tuple[str, str]:
        src_sel = sel if not isinstance(e.operand.type, T.ScalarType) else []
        if isinstance(e.operand.type, (T.StructType, T.ArrayType)) or isinstance(e.type, (T.StructType, T.ArrayType)):
            raise _Unsupported("an aggregate conversion")
        ft = self._comp_type(e.operand.type, src_sel)
        tt = self._comp_type(e.type, sel)
        if _vcls(ft) is None:
            raise _NoVec
        x, xc = self.vx(e.operand, src_sel, pre)
        if ft == tt:
            return x, c
        one, zero = self._bc("f", "1.0f"), self._bc("f", "0.0f")
        if _is_half(tt):
            if xc == "f" and not _is_half(ft):
                return self._vrh(x), c
            if xc == "i":
                return self._vrh(f"__builtin_convertvector({x}, {self._vt('f')})"), c
            if xc == "m":
                return f"sj::vsel({x}, {one}, {zero})", c
            raise _NoVec
        if c == "m":
            return self._as_mask(x, xc), c
        if xc == "m":
            if c == "f":
                return f"sj::vsel({x}, {one}, {zero})", c
            i = f"((({x}) != 0) & 1)"
            return (i if c == "i" else f"(({self._vt('u')})({i}))"), c
        if xc == c:
            return x, c                     # half <-> float: the same float value
        if {xc, c} == {"i", "u"}:
            return f"(({self._vt(c)})({x}))", c
        if xc == "f" and c == "i":
            return f"__builtin_convertvector({x}, {self._vt('i')})", c
        if xc == "i" and c == "f":
            return f"__builtin_convertvector({x}, {self._vt('f')})", c
        raise _NoVec                        # uint <-> float: the vector instructions differ out of range

    def _vconstruct(self, e, sel, pre, c) -> tuple[str, str]:
        t = e.type
        if isinstance(t, (T.ScalarType, T.EnumType)):
            if e.args:
                return self._vconvert(ir.Convert(t, e.args[0]), sel, pre, c)
            return f"{self._vt(c)}{{}}", c
        part = construct_part(e, sel)
        if part is None:
            return f"{self._vt(c)}{{}}", c
        return self.vx(part[0], part[1], pre)

    def _vintrinsic(self, e, sel, pre, c) -> tuple[str, str]:
        if e.name in _WAVE_CONST:
            v = _WAVE_CONST[e.name]
            return (f"sj::vbc<{self._vt('m')}>(-(int32_t)({v}))", c) if c == "m" else (self._bc(c, v), c)
        if e.name in _WAVE_IDENTITY and e.args:
            return self.vx(e.args[0], sel, pre)
        if e.name == "sj::vcat":
            return self._vconstruct(ir.Construct(e.type, e.args), sel, pre, c)
        if e.name == "sj::dot" and len(e.args) == 2 and isinstance(e.args[0].type, T.VectorType):
            vt = e.args[0].type
            if not (_is_half(vt.elem) or vt.elem == T.FLOAT):
                raise _NoVec
            acc = self._bc("f", "0.0f")
            for i in range(vt.n):
                a, _ = self.vx(e.args[0], [str(i)], pre)
                b, _ = self.vx(e.args[1], [str(i)], pre)
                acc = f"({acc} + (({a}) * ({b})))"
            return (self._vrh(acc) if _is_half(vt.elem) else acc), c
        if _iname(e) == "sj::bit_cast" and len(e.args) == 1 and not e.out_params and \
                isinstance(e.type, T.ScalarType) and isinstance(e.args[0].type, T.ScalarType) and \
                not _is_half(e.type) and not _is_half(e.args[0].type) and c in "fiu" and \
                _vcls(e.args[0].type) in ("f", "i", "u"):
            x, _ = self.vx(e.args[0], [], pre)
            return f"(({self._vt(c)})({x}))", c
        raise _NoVec

    # ------------------------------------------------------------------ statements
    def _assign_stmt(self, e: ir.Assign, masks, d) -> None:
        em = self.em
        root = _root_of(e.lhs)
        if root.uid not in self.cls.varying:
            self._guarded(d, lambda dd: self._out(dd, f"{em.expr(e)};"))
            return
        rhs = e.rhs
        if e.op != "=":
            rhs = ir.Binary(e.lhs.type, e.op[:-1], e.lhs, e.rhs)
        pre: list[str] = []
        vals, lhs = [], []
        try:
            for comp in components(e.lhs.type):
                lt = self._comp_type(e.lhs.type, comp)
                text, vc = self.vx(rhs, comp, pre)
                if vc != _vcls(lt):
                    raise _Unsupported("a vector value of another class")
                vals.append(text)
                lhs.append(self._vlvalue(e.lhs, comp))
        except _Lanewise:
            self._per_lane(ir.ExprStmt(e), masks, d)
            return
        except _NoVec:
            raise _Unsupported("a value with no vector form") from None
        im = self._vmask(masks, alive=False)
        for lv, v in zip(lhs, vals):
            self._note_assigned(root, lv, v, bool(im))
        body = [f"const auto sj_c{i} = {v};" for i, v in enumerate(vals)] if len(vals) > 1 else []
        for i, (lv, v) in enumerate(zip(lhs, vals)):
            val = f"sj_c{i}" if len(vals) > 1 else v
            body.append(f"{lv} = sj::vsel({im}, {val}, {lv});" if im else f"{lv} = {val};")
        self._guarded(d, lambda dd: self._kloop(dd, pre, body)) if pre else self._kloop(d, pre, body)

    def _vlvalue(self, lv, sel) -> str:
        return _chunk(self._lvalue(lv, sel))

    def _return(self, masks, d) -> None:
        if not masks:
            self._kloop(d, [], [f"sj_alive[sj_k] = {self._vt('m')}{{}};"])
            self._out(d, "sj_live = false;")
        else:
            self._kloop(d, [], [f"sj_alive[sj_k] = sj_alive[sj_k] & ({self._vmask(masks, alive=False)} == 0);"])
            self._out(d, f"sj_live = {self._vany('sj_alive')};")
        self.guard = True

    def _if(self, s, masks, d) -> None:
        if self._uniform(s.cond):
            return super()._if(s, masks, d)
        if _side_effects(s.cond):
            raise _Unsupported("an if condition with effects")
        t, f = f"sj_m{self.masks}", f"sj_m{self.masks + 1}"
        self.masks += 2
        pre: list[str] = []
        m = self._vmask(masks)
        if _trap_free(s.cond):
            try:
                c, cc = self.vx(s.cond, [], pre)
            except _NoVec:
                raise _Unsupported("an if condition with no vector form") from None
            self._kloop(d, pre, [f"const {self._vt('m')} sj_c = {m} & {self._as_mask(c, cc)};",
                                 f"{t}[sj_k] = sj_c;", f"{f}[sj_k] = {m} & (sj_c == 0);"])
        else:
            # a condition that may trap is computed only for the active lanes
            c = self.lx(s.cond, [], pre)
            em_ = self._full_mask(masks)
            self._block(d, pre + [
                f"for (int sj_l = 0; sj_l < {self.W}; ++sj_l) {{ const int32_t sj_on = ({em_}) != 0; "
                f"const int32_t sj_c = sj_on ? int32_t(bool({c})) : 0; {self._el(t)} = -sj_c; "
                f"{self._el(f)} = -(sj_on & (sj_c ^ 1)); }}"])
        for branch, mk in ((s.then, t), (s.else_, f)):
            if branch is None:
                continue
            if self._selects_only(branch):
                self._stmt(branch, masks + [mk], d)
                continue
            self._out(d, f"if ({self._vany(mk)})")
            self._out(d, "{")
            self._stmt(branch, masks + [mk], d + 1)
            self._out(d, "}")

    def _slot_add(self, e, masks, d) -> None:
        em = self.em
        dest, value = e.args
        if not self._uniform(dest):
            return super()._slot_add(e, masks, d)      # a varying address: lane by lane
        slot = f"({self.slot_base[-1]} + {em.slots.offset[id(e)]})"
        half = _is_half(dest.type)
        pre: list[str] = []
        try:
            val, vc = self.vx(value, [], pre)
        except _NoVec:
            raise _Unsupported("a privatised add of a value with no vector form") from None
        if vc != "f":
            raise _Unsupported("a privatised add of a non-float value")
        m = self._vmask(masks)
        vf = self._vt("f")

        def emit(dd):
            self._kloop(dd, pre + [
                f"const int sj_s = {slot};",
                f"const uintptr_t sj_key = reinterpret_cast<uintptr_t>(&({em.expr(dest)})){' | 1u' if half else ''};",
                f"if (__builtin_expect(sj_tab[sj_s] != sj_key, 0)) sj::lacc_claim(sj_acc, sj_lacc, sj_tab, sj_s, sj_key, {self.W});",
                f"float* const sj_a = sj_lacc + sj_s * {self.W};"], [
                f"{vf} sj_v; __builtin_memcpy(&sj_v, sj_a + sj_k * SJ_VL, sizeof sj_v);",
                f"sj_v += sj::vsel({m}, {val}, {vf}{{}});",
                f"__builtin_memcpy(sj_a + sj_k * SJ_VL, &sj_v, sizeof sj_v);"])
        self._guarded(d, emit)


def _fixed_chunk(text: str) -> bool:
    """A machine vector's text names a fixed element: `name[3][0][sj_k]` (constant indices only)."""
    return _FIXED_CHUNK.fullmatch(text) is not None


_FIXED_CHUNK = re.compile(r"[A-Za-z_]\w*(\[\d+\])*\[sj_k\]")


def _is_pos_zero(text: str, vf: str) -> bool:
    """The vector text is a splat of the constant +0.0 (as _bc / an empty construction writes it)."""
    if text == f"{vf}{{}}":
        return True
    head = f"sj::vbc<{vf}>("
    if not text.startswith(head) or "-" in text:
        return False
    core = text[len(head):]
    for junk in ("(float)", "(sj::half)", "(", ")"):
        core = core.replace(junk, "")
    return core in ("0.0f", "0x0.0p+0", "0.0", "0")


def _root_of(lv):
    return scan.local_written(lv)


def _chunk(ref: str) -> str:
    """The machine vector sj_k of a lane row, from the element reference of lane sj_l (_el)."""
    head, tail = "sj::el(", ")[sj_l]"
    assert ref.startswith(head) and ref.endswith(tail), ref
    return ref[len(head): -len(tail)] + "[sj_k]"
