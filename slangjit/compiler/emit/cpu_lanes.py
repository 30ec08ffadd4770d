"""Lane-blocked CPU kernels: SIMD across logical threads (CpuOptions.lanes).

A CPU worker normally runs a group's threads one after another, each through the whole entry body, so the
C++ compiler never vectorises across threads.  For an entry point whose body is straight-line code with
`if`s and early returns (no loops, switches or calls: the elementwise kernels of the functional API, most
`[numthreads]` map kernels), the launcher instead runs blocks of up to LANES logical threads in lock-step:
every local and parameter becomes an array with one element per lane, every statement becomes a loop over
the lanes, and control flow becomes masks:

* an assignment whose right-hand side is pure (arithmetic, conversions, locals, constants, the math
  library: `PURE_INTRINSICS`) computes every lane and keeps the result where the lane is active, in a loop
  marked `#pragma omp simd` (the compiler vectorises it; with glibc's libmvec the math functions become
  its vector variants, `vector_math_header`);
* anything else (memory loads through pointers, stores, atomics, calls, recorded failures) runs lane by
  lane in lane order, only for active lanes: exactly the scalar statement;
* `if (c)`: a mask per branch (lanes active here and c / not c); a branch no lane takes is skipped;
* `return`: the active lanes leave (the `sj_alive` mask).

Lanes of one block run statement by statement instead of thread by thread: the interleaving of a
concurrent dispatch (no barrier can be involved: programs with group barriers are never lane-blocked).
An entry with anything else keeps the scalar launcher, and so does one without math-library calls (COSTLY):
a few arithmetic operations per memory access are memory-bound and faster as scalar code.
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T

LANES = 64
MAX_LANE_BYTES = 96 * 1024          # lane arrays of one block on the worker's stack

# Core intrinsics with no side effects and no failure on any input (emitted as sj::name(...)).
PURE_INTRINSICS = {f"sj::{n}" for n in (
    "sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 log log2 log10 sqrt rsqrt pow "
    "abs min max clamp saturate floor ceil round trunc frac fmod lerp step smoothstep sign rcp dot cross length "
    "distance normalize fma mad isnan isinf isfinite asfloat asuint asint asfloat16 asuint16 f32tof16 f16tof32 "
    "select degrees radians exp10 copysign bit_cast").split()}

# glibc's vector math library (libmvec, glibc >= 2.22 on x86-64): these C functions get `simd` declarations
# so that vectorised loops call their vector variants (documented maximum errors: 4 ulp or less).
_MVEC_FUNCS = ("sin", "cos", "exp", "log", "pow")


LANES_PRELUDE = r"""namespace sj {
SJ_FN bool lanes_any(const int32_t* m, int n) {
    int32_t a = 0;
#pragma omp simd reduction(|:a)
    for (int i = 0; i < n; ++i) a |= m[i];
    return a != 0;
}
}  // namespace sj"""


def vector_math_header() -> str:
    """Before the prelude: `simd` declarations of libmvec's functions where the C library is glibc >= 2.22 on
    x86-64 (runtime/cpu_compiler.py link_libs links libmvec there)."""
    lines = ["// glibc libmvec: vector variants of the math functions in lane-blocked loops (emit/cpu_lanes.py)",
             '#include <math.h>',
             "#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 22))",
             'extern "C" {']
    for f in _MVEC_FUNCS:
        n = 2 if f == "pow" else 1
        lines.append(f"__attribute__((simd(\"notinbranch\"))) float {f}f({', '.join(['float'] * n)}) noexcept;")
        lines.append(f"__attribute__((simd(\"notinbranch\"))) double {f}({', '.join(['double'] * n)}) noexcept;")
    lines += ["}", "#endif"]
    return "\n".join(lines)


# What makes lanes pay: per-element work that vectorises (the math library).  A kernel of a few arithmetic
# operations per memory access is memory-bound already and runs faster as scalar code (the lane loops'
# loads and stores are not vectorised: bounds-checked buffers, pointers checked for null).
COSTLY = {f"sj::{n}" for n in "sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 log log2 log10 pow".split()}


def _worth_it(fn: ir.Function) -> bool:
    return any(isinstance(n, ir.Intrinsic) and n.name in COSTLY for n in scan.walk(fn.body))


class _Unsupported(Exception):
    pass


def _pure(e) -> bool:
    """No memory access, no call, no side effect, no failure on any lane's values."""
    if isinstance(e, (ir.Const, ir.LocalRef)):
        return True
    if isinstance(e, ir.GlobalRef):
        return e.var.kind in ("uniform", "const") and not isinstance(e.type, (T.BufferType, T.PointerType))
    if isinstance(e, (ir.Unary, ir.Binary, ir.Convert, ir.Select, ir.Construct, ir.Swizzle, ir.Detach)):
        return all(_pure(c) for c in scan.expr_children(e))
    if isinstance(e, ir.Field):
        return not e.via_pointer and _pure(e.obj)
    if isinstance(e, ir.Index):
        t = scan.value_type(e.obj)
        n = t.n if isinstance(t, (T.ArrayType, T.VectorType)) else (t.rows if isinstance(t, T.MatrixType) else None)
        return (n is not None and isinstance(e.index, ir.Const) and isinstance(e.index.value, int)
                and 0 <= e.index.value < n and _pure(e.obj))
    if isinstance(e, ir.Intrinsic):
        return e.name in PURE_INTRINSICS and not e.out_params and all(_pure(a) for a in e.args)
    return False


def _check_supported(s) -> None:
    if isinstance(s, ir.Block):
        for x in s.stmts:
            _check_supported(x)
    elif isinstance(s, ir.If):
        _check_supported(s.then)
        if s.else_ is not None:
            _check_supported(s.else_)
    elif isinstance(s, ir.Return):
        if s.value is not None:
            raise _Unsupported("return with a value")
    elif not isinstance(s, (ir.VarDecl, ir.ExprStmt)):
        raise _Unsupported(type(s).__name__)
    for n in scan.walk(s) if not isinstance(s, (ir.Block, ir.If)) else ():
        if isinstance(n, (ir.StmtExpr, ir.Call)):
            raise _Unsupported(type(n).__name__)
    if isinstance(s, ir.If):
        for n in scan.walk(s.cond):
            if isinstance(n, (ir.StmtExpr, ir.Call)):
                raise _Unsupported(type(n).__name__)


def _writes_global(s) -> bool:
    """Whether a statement assigns (part of) a module-level variable: a static is one variable per worker
    thread, shared by the lanes, so per-lane writes and later reads would see the last lane's value."""
    for n in scan.walk(s):
        if isinstance(n, ir.Assign):
            e = n.lhs                    # walk to the variable whose value (not memory it points to) is written
            while True:
                if isinstance(e, ir.Field) and not e.via_pointer or isinstance(e, ir.Swizzle):
                    e = e.obj
                elif isinstance(e, ir.Index) and isinstance(scan.value_type(e.obj),
                                                             (T.ArrayType, T.VectorType, T.MatrixType)):
                    e = e.obj
                else:
                    break
            if isinstance(e, ir.GlobalRef) and not isinstance(e.type, (T.BufferType, T.PointerType)):
                return True
    return False


def _declared(fn: ir.Function) -> list:
    return [n.var for n in scan.walk(fn.body) if isinstance(n, ir.VarDecl)]


class LaneKernel:
    """The lane-blocked body of one entry point (None from `build` when it does not qualify)."""

    def __init__(self, em, fn: ir.Function, numthreads, sname: str, call_args: list[str]):
        self.em, self.fn, self.sname = em, fn, sname
        nx, ny, nz = numthreads
        self.group = nx * ny * nz
        self.numthreads = numthreads
        self.width = min(LANES, self.group)
        self.call_args = call_args
        self.lines: list[str] = []
        self.masks = 0
        self.temps: list = []           # lane arrays of stored values

    @classmethod
    def build(cls, em, fn, numthreads, sname, call_args) -> Optional["LaneKernel"]:
        if fn.body is None or fn.ret != T.VOID or not _worth_it(fn):
            return None
        try:
            _check_supported(fn.body)
        except _Unsupported:
            return None
        if _writes_global(fn.body):
            return None
        k = cls(em, fn, numthreads, sname, call_args)
        try:
            return k if k._emit() else None
        except _Unsupported:
            return None

    # ------------------------------------------------------------------ text
    def _out(self, d: int, text: str) -> None:
        self.lines.append("    " * d + text)

    def _mask(self, masks: list[str]) -> str:
        return " & ".join(["sj_alive[sj_l]"] + [f"{m}[sj_l]" for m in masks])

    def _loop(self, d: int, body: str, simd: bool) -> None:
        if simd:
            self._out(d, "#pragma omp simd")
        self._out(d, f"for (int sj_l = 0; sj_l < {self.width}; ++sj_l) {{ {body} }}")

    def _emit(self) -> bool:
        em, fn = self.em, self.fn
        lane_vars = list(fn.params) + _declared(fn)
        size = 0
        for v in lane_vars:
            if isinstance(v.type, (T.ArrayType, T.StructType, T.MatrixType)):
                size += self.width * 64          # a guess is enough: the limit keeps big locals out
            else:
                size += self.width * 8 * (getattr(v.type, "n", 1) or 1)
        if size > MAX_LANE_BYTES:
            return False
        W = self.width
        nx, ny, _ = self.numthreads
        d = 1
        head = [f"static void sj_lanes_{fn.slang_name}(const {self.sname}* sj_P, uint32_t sj_gx, uint32_t sj_gy, "
                f"uint32_t sj_gz, uint32_t sj_t0)", "{", "    (void)sj_P; (void)sj_gx; (void)sj_gy; (void)sj_gz;",
                "    sj_Globals* const sj_g = ::sj_g;   // the thread-local once: no TLS lookup per lane",
                "    (void)sj_g;",
                f"    int32_t sj_alive[{W}];"]
        names = {v.uid: em.var_name(v) for v in lane_vars}
        for v in lane_vars:
            head.append(f"    {em.ctype(v.type)} {names[v.uid]}[{W}] = {{}};")
        # parameters: system values per lane, the rest from the parameter block
        em.lane_vars = {v.uid for v in lane_vars}
        em.cur_fn = fn
        try:
            init = [f"uint32_t sj_t = sj_t0 + uint32_t(sj_l);",
                    f"uint32_t sj_tx = sj_t % {nx}u, sj_ty = (sj_t / {nx}u) % {ny}u, sj_tz = sj_t / {nx * ny}u;",
                    "(void)sj_tx; (void)sj_ty; (void)sj_tz;",
                    f"sj_alive[sj_l] = sj_t < {self.group}u;"]
            for p, a in zip(fn.params, self.call_args):
                init.append(f"{em.var_name(p)} = {a};")
            self._loop(d, " ".join(init), True)
            self._stmt(fn.body, [], d)
        finally:
            em.lane_vars = None
        temps = [f"    {em.ctype(v.type)} {em.var_name(v)}[{W}];" for v in self.temps]
        self.lines = head + temps + [f"    int32_t sj_m{i}[{W}];" for i in range(self.masks)] + self.lines + ["}"]
        return True

    def _stmt(self, s, masks: list[str], d: int) -> None:
        em = self.em
        loc = getattr(s, "loc", None)
        if loc is not None and loc.line:
            em.cur_loc = loc
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self._stmt(x, masks, d)
        elif isinstance(s, ir.VarDecl):
            lhs = ir.LocalRef(s.var.type, s.var)
            rhs = s.init if s.init is not None else ir.NoneExpr(s.var.type)
            a = ir.Assign(s.var.type, "=", lhs, rhs)
            if isinstance(rhs, ir.NoneExpr) or _pure(rhs):
                self._assign(a, masks, d)
            else:
                self._loop(d, f"if ({self._mask(masks)}) {{ {em.expr(a)}; }}", False)
        elif isinstance(s, ir.ExprStmt):
            e = s.expr
            if isinstance(e, ir.Assign) and scan.lvalue_root(e.lhs) is not None and _pure(e.rhs) and \
                    (e.op == "=" or _pure(e.lhs)):
                self._assign(e, masks, d)
            elif isinstance(e, ir.Assign) and _pure(e.rhs) and not isinstance(e.rhs, (ir.Const, ir.LocalRef)):
                # a store of a pure value: the value for every lane first (vectorised), then the stores
                tmp = ir.Var("sj_r", e.rhs.type)
                em.lane_vars.add(tmp.uid)
                self.temps.append(tmp)
                ref = ir.LocalRef(e.rhs.type, tmp)
                self._loop(d, f"{em.var_name(tmp)} = {em.expr(e.rhs)};", True)
                self._loop(d, f"if ({self._mask(masks)}) {{ {em.expr(ir.Assign(e.type, e.op, e.lhs, ref))}; }}", False)
            else:
                self._loop(d, f"if ({self._mask(masks)}) {{ {em.expr(e)}; }}", False)
        elif isinstance(s, ir.If):
            t, f = f"sj_m{self.masks}", f"sj_m{self.masks + 1}"
            self.masks += 2
            cond = em.expr(s.cond)
            m = self._mask(masks)
            if _pure(s.cond):
                self._loop(d, f"int32_t sj_c = {m} ? int32_t(bool({cond})) : 0; {t}[sj_l] = sj_c; "
                              f"{f}[sj_l] = ({m}) & (sj_c ^ 1);", True)
            else:
                self._loop(d, f"int32_t sj_c = 0; if ({m}) sj_c = int32_t(bool({cond})); {t}[sj_l] = sj_c; "
                              f"{f}[sj_l] = ({m}) & (sj_c ^ 1);", False)
            for branch, mk in ((s.then, t), (s.else_, f)):
                if branch is None:
                    continue
                self._out(d, f"if (sj::lanes_any({mk}, {self.width}))")
                self._out(d, "{")
                self._stmt(branch, masks + [mk], d + 1)
                self._out(d, "}")
        elif isinstance(s, ir.Return):
            if not masks:
                self._loop(d, "sj_alive[sj_l] = 0;", True)
            else:
                inner = " & ".join(f"{m}[sj_l]" for m in masks)
                self._loop(d, f"sj_alive[sj_l] &= ({inner}) ^ 1;", True)
        else:
            raise _Unsupported(type(s).__name__)

    def _assign(self, e: ir.Assign, masks: list[str], d: int) -> None:
        """lhs op= rhs for the active lanes; rhs is pure, so every lane computes it (vectorised)."""
        em = self.em
        tmp = ir.Var("sj_v", e.rhs.type)
        ref = ir.LocalRef(e.rhs.type, tmp)
        ct = em.ctype(e.rhs.type)
        rhs = em.expr(e.rhs) if not isinstance(e.rhs, ir.NoneExpr) else \
            (f"(({ct})nullptr)" if isinstance(e.rhs.type, T.PointerType) else f"{ct}{{}}")
        v = em.var_name(tmp)
        if e.op == "=" and isinstance(e.lhs, ir.LocalRef):      # a select: vectorises without masked stores
            x = em.expr(e.lhs)
            body = f"{x} = ({self._mask(masks)}) ? static_cast<{ct}>({rhs}) : {x};"
        else:
            text = em.expr(ir.Assign(e.type, e.op, e.lhs, ref))
            body = f"{ct} {v} = {rhs}; if ({self._mask(masks)}) {{ {text}; }}"
        self._loop(d, body, True)
