"""Lane-blocked CPU kernels with loops (CpuOptions.lane_loops): SIMD across logical threads, ISPC style.

emit/cpu_lanes.py lane-blocks straight-line kernels by giving every local one C++ value per lane.  This
emitter takes the kernels with loops and (inlined: passes/cpu_lanes.py) calls, such as the seed MLP's
learnGradient, and runs a block of `width` logical threads in lock-step:

* **Uniform and varying values.**  A local is *varying* when it may differ between the lanes of a block:
  the thread-id parameters, what is computed from a varying value, what is assigned under a varying `if`,
  what a statement run lane by lane writes.  Every other local is *uniform*: a plain C++ local computed once
  per block (the parameters, the network's pointers, loads through uniform pointers such as weights, the
  counters of counted loops).  Counted loops (constant bounds, passes/red_slots.py) are ordinary C++ loops
  over uniform counters: every lane runs the same trips.
* **Structure of arrays.**  A varying local is split into its scalar leaves (struct fields, array, vector
  and matrix elements), each an array of `width` values: `float x__data[16][W]`.  Array indices must be
  uniform (constants or counters of counted loops that stay in range).  `half` leaves are `float`s holding
  half values; every half operation is computed in float and rounded to half (`sj::rh`, bit arithmetic the
  compiler vectorises; the float result of +, -, *, / of two halves rounds to the correctly rounded half,
  as `_Float16` does), so results equal the scalar kernel's.
* **Statements.**  An assignment of a pure value to a varying local is one `#pragma omp simd` loop over the
  lanes (the uniform parts of its value, memory loads included, computed once before the loop); under a
  varying `if` it keeps the old value where the lane's mask is off.  A uniform assignment runs once.
  Thread-uniform privatised gradient adds (passes/cpu_adds.py) accumulate into a float per slot and lane
  (`sj_lacc`), summed into the slot's address when the slot changes address and at the end of the worker's
  range.  An unused-result atomic add / max / min at a uniform address is combined over the block's active
  lanes and applied once.  Anything else (loads at varying addresses, stores, other atomics) runs lane by
  lane for the active lanes: the lane's values are gathered into C++ values of the statement's types, the
  scalar statement runs, and what it wrote is scattered back.
* **Control flow.**  A varying `if` computes a mask per branch and skips a branch no lane takes; a uniform
  `if` is a C++ `if`.  A `return` clears the active lanes' bits of `sj_alive`; memory effects are masked by
  it, and code after it runs only while some lane lives (`sj_live`), so a uniform load happens only when a
  scalar thread would have made it.

Lanes of one block run statement by statement instead of thread by thread: an interleaving a concurrent
dispatch may have (no barrier can be involved: programs with group barriers are never lane-blocked).  What
the emitter cannot express (a varying array index, a varying load inside an `if` condition, a loop that is
not counted, ...) raises _Unsupported, and the entry point keeps the scalar launcher.
"""
from __future__ import annotations

import copy
from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T
from ..passes.cpu_lanes import lane_shape
from ..passes.red_slots import counted_loop, is_red_add
from .cpu_lane_rows import (LaneReductions, LocalRefs, _assigned_before_read, _copy_aliases, _mentions, _trap_free,
                            counter_affine, round_in_place, selects_only)
from .cpu_lane_split import parts_for, split_kernel
from .cpu_lane_values import (LACC_PRELUDE, LANE_LOOPS_PRELUDE, MAX_LANE_BYTES, Classify, LaneRaw, _ELEMENTWISE,
                              _Lanewise, _Unsupported, _WAVE_CONST, _WAVE_IDENTITY, _counter_copies, _iname,
                              _is_half, _loads, _prod, _root, _side_effects, _sub_type, _written_locals, components,
                              leaves, _fields)

__all__ = ["LACC_PRELUDE", "LANE_LOOPS_PRELUDE", "LoopLaneKernel", "construct_part"]


class LoopLaneKernel(LaneReductions):
    """The lane-blocked body of one entry point (None from `build` when it does not qualify)."""

    def __init__(self, em, fn, numthreads, sname, call_args, varying_params, slots_n, width):
        self.em, self.fn, self.sname = em, fn, sname
        nx, ny, nz = numthreads
        self.numthreads = numthreads
        self.group = nx * ny * nz
        self.W = max(1, min(width, self.group))
        self.call_args = call_args
        self.varying_params = varying_params
        self.slots_n = slots_n
        self.lines: list[str] = []
        self.masks = 0
        self.tmp = 0
        self.guard = False                  # after a return: statements run only while a lane lives
        self.slot_base: list[str] = ["0"]
        self.ranges: dict[int, tuple[int, int]] = {}
        self.red_apply: list[str] = []      # per deferred combined atomic: its apply function
        self.deferred: set = set()
        self.copies: dict = {}
        self.alias: dict = {}               # varying locals that read another's rows (_copy_aliases)
        self.skip: set = set()
        self.refs = LocalRefs()             # the statements' locals, once per statement
        self.nodes: list = []               # every node of the body (scan.walk order), set by _emit
        self.copy_rows = True
        self.unroll = 0                    # CpuOptions.lane_unroll: innermost counted loops of so many trips unrolled
        self.half_rows = False              # CpuOptions.half_rows: round through F16C rows, not sj::rhf
        self.hcount = 0                     # half-rounding rows of the statement being emitted (sj_h*)
        self.hmax = 0
        self.simd_init = False              # the lanes' start values computed in a vectorised loop
        self.part_lines = 0                 # CpuOptions.lane_part_lines: a longer body is cut into parts
        self.parts = 1                      # (emit/cpu_lane_split.py); how many it was cut into
        self.cuts: list[int] = []           # indices into the body's lines where a top-level statement starts

    @classmethod
    def build(cls, em, fn, numthreads, sname, call_args, varying_params, slots_n, width,
              half_rows: bool = False, unroll: int = 0, part_lines: int = 0) -> Optional["LoopLaneKernel"]:
        if lane_shape(fn) is not None:
            return None
        if not slots_n and not any(isinstance(n, ir.Loop) for n in scan.walk(fn.body)):
            return None             # straight-line code: emit/cpu_lanes.py's business (or scalar)
        k = cls(em, fn, numthreads, sname, call_args, varying_params, slots_n, width)
        k.half_rows = half_rows
        k.unroll = unroll
        k.part_lines = part_lines
        saved = (em.lane_alias, em.slot_base, dict(em.counter_ranges), em.site_ids.copy(), list(em.sites))
        try:
            return k if k._emit() else None
        except _Unsupported:
            em.site_ids.clear()
            em.site_ids.update(saved[3])
            em.sites[:] = saved[4]
            return None
        finally:
            em.lane_alias, em.slot_base = saved[0], saved[1]
            em.counter_ranges.clear()
            em.counter_ranges.update(saved[2])

    # ------------------------------------------------------------------ text
    def _out(self, d: int, text: str) -> None:
        self.lines.append("    " * d + text)

    def _new(self, base: str) -> str:
        self.tmp += 1
        return f"sj_{base}{self.tmp}"

    def _full_mask(self, masks) -> str:
        return " & ".join(self._el(m) for m in ["sj_alive"] + list(masks))

    def _if_mask(self, masks) -> Optional[str]:
        return " & ".join(self._el(m) for m in masks) if masks else None

    def _simd(self, d: int, body: list[str]) -> None:
        self._out(d, "#pragma omp simd")
        self._out(d, f"for (int sj_l = 0; sj_l < {self.W}; ++sj_l) {{ {' '.join(body)} }}")

    def _lanewise(self, d: int, masks, body: list[str]) -> None:
        self._out(d, f"for (int sj_l = 0; sj_l < {self.W}; ++sj_l) if ({self._full_mask(masks)}) {{ {' '.join(body)} }}")

    # ------------------------------------------------------------------ kernel
    def _emit(self) -> bool:
        em, fn = self.em, self.fn
        self.nodes = list(scan.walk(fn.body))     # the body's nodes, walked once for the analyses below
        self.cls = Classify(fn, {fn.params[i].uid for i in self.varying_params})
        self.deferred = self._deferrable()
        self.copies = _counter_copies(fn, self.nodes)
        self.alias, self.skip = _copy_aliases(fn, self.cls.varying, self.refs) if self.copy_rows else ({}, set())
        decls = [n.var for n in self.nodes if isinstance(n, ir.VarDecl)]
        for n in self.nodes:
            if isinstance(n, ir.AddressOf) and _root(n.operand) is not None and \
                    _root(n.operand).uid in self.cls.varying:
                raise _Unsupported("the address of a varying local")
        local_vars = list(fn.params) + decls
        seen = set()
        self.lane_decl: dict[int, list] = {}
        head = []
        nleaves = 0
        W = self.W
        for v in local_vars:
            if v.uid in seen:
                continue
            seen.add(v.uid)
            name = em.var_name(v)
            if v.uid in self.cls.varying:
                lv = leaves(v.type)
                nleaves += sum(_prod(dims) for _, dims, _ in lv)
                self.lane_decl[v.uid] = lv
                for suf, dims, st in lv:
                    head.append((name + suf, "    " + self._leaf_decl(name + suf, dims, st)))
            else:
                head.append((name, f"    {em.ctype(v.type)} {name}{{}};"))
        if nleaves * W * 8 > MAX_LANE_BYTES:
            raise _Unsupported("too many lane values")
        em.lane_alias = {}
        em.slot_base = []
        em.cur_fn = fn
        nx, ny, _ = self.numthreads
        d = 1
        init = [f"uint32_t sj_t = sj_t0 + uint32_t(sj_l);",
                f"uint32_t sj_tx = sj_t % {nx}u, sj_ty = (sj_t / {nx}u) % {ny}u, sj_tz = sj_t / {nx * ny}u;",
                "(void)sj_tx; (void)sj_ty; (void)sj_tz;",
                f"{self._el('sj_alive')} = {self._alive_value()};"]
        uni = []
        for i, (p, a) in enumerate(zip(fn.params, self.call_args)):
            if p.uid in self.cls.varying:
                if i not in self.varying_params:
                    raise _Unsupported("a uniform parameter assigned a varying value")
                tmpn = f"sj_sv{i}"
                init.append(f"{em.ctype(p.type)} {tmpn} = {a};")
                init += self._scatter_lines(p, tmpn)
            else:
                uni.append(f"    {em.var_name(p)} = {a};")
        if self.simd_init:
            self._out(d, "#pragma omp simd")
        self._out(d, f"for (int sj_l = 0; sj_l < {W}; ++sj_l) {{ {' '.join(init)} }}")
        self.lines[0:0] = uni
        self.cuts = []
        self._stmt(fn.body, [], d)
        sig = (f"const {self.sname}* sj_P, uint32_t sj_gx, uint32_t sj_gy, uint32_t sj_gz, uint32_t sj_t0, "
               f"float* sj_acc, float* sj_lacc, uintptr_t* sj_tab, sj::LaneRed* sj_red")
        void_args = "(void)sj_P; (void)sj_gx; (void)sj_gy; (void)sj_gz; (void)sj_acc; (void)sj_lacc; (void)sj_tab; (void)sj_red;"
        decls = [("sj_alive", f"    {self._mask_decl('sj_alive')}"), ("sj_live", "    bool sj_live = true; (void)sj_live;")] + \
            head + [(f"sj_m{i}", f"    {self._mask_decl(f'sj_m{i}')}") for i in range(self.masks)]
        whole = [f"SJ_LANES_FN static void sj_lanes_{fn.slang_name}({sig})",
                 "{", f"    {void_args}",
                 "    sj_Globals* const sj_g = ::sj_g;   // the thread-local once: no TLS lookup per lane",
                 "    (void)sj_g;"] + [line for _, line in decls] + self.lines + ["}"]
        split, self.parts = split_kernel(fn.slang_name, sig, "sj_P, sj_gx, sj_gy, sj_gz, sj_t0, sj_acc, sj_lacc, sj_tab, sj_red",
                                         void_args, decls, self.lines, self.cuts,
                                         parts_for(len(self.lines), self.part_lines))
        if self.parts > 1:          # emit/cpu_lane_split.py: the parts for a parallel build, the whole otherwise
            whole = ["#ifndef SJ_PART"] + whole + ["#else"] + split + ["#endif"]
        self.lines = self._kernel_prefix() + self.red_apply + whole
        return True

    # representation hooks (emit/cpu_lane_vregs.py keeps lane values in vector registers instead)
    def _leaf_decl(self, name: str, dims: list, st) -> str:
        dd = "".join(f"[{x}]" for x in dims)
        return f"alignas(64) {self._lctype(st)} {name}{dd}[{self.W}];"

    def _mask_decl(self, name: str) -> str:
        return f"alignas(64) int32_t {name}[{self.W}];"

    def _alive_value(self) -> str:
        return f"sj_t < {self.group}u"

    def _kernel_prefix(self) -> list[str]:
        return []

    def _el(self, base: str) -> str:
        """Lane sj_l's element of a lane row (or mask) named by C++ text `base`."""
        return f"{base}[sj_l]"

    def _lctype(self, st) -> str:
        return "float" if _is_half(st) else self.em.ctype(st)

    # ------------------------------------------------------------------ leaves
    def _leaf_ref(self, v: ir.Var, sel: list) -> str:
        """The lane array element of varying local v at the (complete) selector path sel, for lane sj_l."""
        t = v.type
        suf, idx = "", []
        for s in sel:
            if isinstance(s, tuple):
                suf += f"__{s[1]}"
            else:
                idx.append(s)
            t = _sub_type(t, s)
        if not isinstance(t, (T.ScalarType, T.PointerType, T.EnumType)):
            raise _Unsupported("a partial leaf path")
        v = self.alias.get(v.uid, v)
        return self._el(f"{self.em.var_name(v)}{suf}{''.join(f'[{i}]' for i in idx)}")

    def _cpath(self, sel: list) -> str:
        """The C++ access of the component at sel within a value of the C++ type."""
        return "".join(f".{s[1]}" if isinstance(s, tuple) else f"[{s}]" for s in sel)

    def _scatter_lines(self, v: ir.Var, value: str) -> list[str]:
        out = []
        for comp in components(v.type):
            st = self._comp_type(v.type, comp)
            src = f"{value}{self._cpath(comp)}"
            out.append(f"{self._leaf_ref(v, comp)} = {'(float)' if _is_half(st) else ''}({src});")
        return out

    def _gather_lines(self, v: ir.Var, tmpn: str) -> list[str]:
        em = self.em
        out = [f"{em.ctype(v.type)} {tmpn}{{}};"]
        for comp in components(v.type):
            st = self._comp_type(v.type, comp)
            src = self._leaf_ref(v, comp)
            out.append(f"{tmpn}{self._cpath(comp)} = {'(sj::half)' if _is_half(st) else ''}({src});")
        return out

    def _comp_type(self, t, comp):
        for s in comp:
            t = _sub_type(t, s)
        return t

    # ------------------------------------------------------------------ expressions
    def _uniform(self, e) -> bool:
        return not self.cls.expr_varying(e) and not self.cls.side_effects(e)

    def _index_sel(self, idx, n) -> str:
        """A uniform in-range index as C++ text; anything else is unsupported."""
        if isinstance(idx, ir.Const) and isinstance(idx.value, int) and 0 <= idx.value < n:
            return str(idx.value)
        got = counter_affine(idx, lambda v: self.ranges.get(self.copies.get(v.uid, v.uid)), self.cls.varying,
                             self.em.var_name)
        if got is not None and 0 <= got[1] and got[2] < n:
            return got[0]
        raise _Unsupported("an array index that is not a constant or an in-range counter")

    def _narrow(self, e, sel: list):
        """(operand, selector path) of the value a selector step reads (a detach, a field of a value, an element of
        an array / vector / matrix at a uniform index, a swizzle), None for any other node; lx and the register
        emitter's vx both walk values through it."""
        if isinstance(e, ir.Detach):
            return e.operand, sel
        if isinstance(e, ir.Field) and not e.via_pointer:
            return e.obj, [("f", e.name)] + sel
        if isinstance(e, ir.Index):
            ot = scan.value_type(e.obj)
            if isinstance(ot, (T.ArrayType, T.VectorType)):
                return e.obj, [self._index_sel(e.index, ot.n)] + sel
            if isinstance(ot, T.MatrixType):
                return e.obj, [self._index_sel(e.index, ot.rows)] + sel
            raise _Lanewise("a varying memory access")
        if isinstance(e, ir.Swizzle):
            if isinstance(e.obj.type, T.ScalarType):
                return e.obj, []
            if len(e.indices) == 1:
                return e.obj, [str(e.indices[0])] + sel
            if not sel or isinstance(sel[0], tuple) or not sel[0].isdigit():
                raise _Unsupported("a swizzle at a dynamic index")
            return e.obj, [str(e.indices[int(sel[0])])] + sel[1:]
        return None

    def _uniform_text(self, e, sel: list):
        """C++ text of a thread-uniform e's component at selector path `sel`, and that component's type."""
        text = f"({self.em.expr(e)}){self._cpath(sel)}" if sel else self.em.expr(e)
        return text, self._comp_type(e.type, sel)

    def lx(self, e, sel: list, pre: list) -> str:
        """C++ text of the lane-domain scalar at selector path `sel` of e's value, for lane sj_l.  Uniform
        parts that load memory are computed once, into `pre` (lines before the lane loop)."""
        em = self.em
        if self._uniform(e):
            text, t = self._uniform_text(e, sel)
            if isinstance(e, ir.Construct) and not e.args:
                return "0.0f" if _is_half(t) else f"{self._lctype(t)}{{}}"
            if _loads(e):
                name = self._new("u")
                pre.append(f"const {self._lctype(t)} {name} = {'(float)' if _is_half(t) else ''}({text});")
                return name
            return f"(float)({text})" if _is_half(t) else text
        if isinstance(e, ir.LocalRef):
            return self._leaf_ref(e.var, sel)
        step = self._narrow(e, sel)
        if step is not None:
            return self.lx(step[0], step[1], pre)
        if isinstance(e, ir.Construct):
            return self._construct(e, sel, pre)
        if isinstance(e, ir.Select):
            c = self.lx(e.cond, sel if not isinstance(e.cond.type, T.ScalarType) else [], pre)
            a, b = self.lx(e.then, sel, pre), self.lx(e.else_, sel, pre)
            return f"(({c}) ? ({a}) : ({b}))"
        if isinstance(e, ir.Unary):
            st = self._comp_type(e.type, sel)
            x = self.lx(e.operand, sel if not isinstance(e.operand.type, T.ScalarType) else [], pre)
            if _is_half(st):
                if e.op == "-":
                    return f"(-({x}))"
                if e.op == "+":
                    return x
                raise _Unsupported(f"half unary {e.op}")
            ot = self._comp_type(e.operand.type, sel if not isinstance(e.operand.type, T.ScalarType) else [])
            return em.expr(ir.Unary(st, e.op, LaneRaw(ot, text=x)))
        if isinstance(e, ir.Binary):
            return self._binary(e, sel, pre)
        if isinstance(e, ir.Convert):
            return self._convert(e, sel, pre)
        if isinstance(e, ir.Intrinsic):
            return self._intrinsic(e, sel, pre)
        raise _Unsupported(type(e).__name__)

    def _rh(self, value: str, pre: list) -> str:
        if self.half_rows:
            return self._rh_row(value, pre)
        return f"sj::rhf({value})"

    def _rh_row(self, value: str, pre: list) -> str:
        """A half-rounded lane value: computed for every lane into a row, rounded by sj::rh_row (F16C)."""
        name = f"sj_h{self.hcount}"
        self.hcount += 1
        self.hmax = max(self.hmax, self.hcount)
        # declared in the statement's block: the compiler sees the row die there and keeps it in registers
        pre.append(f"alignas(64) float {name}[{self.W}];")
        pre.append("#pragma omp simd")
        pre.append(f"for (int sj_l = 0; sj_l < {self.W}; ++sj_l) {{ {name}[sj_l] = {value}; }}")
        pre.append(f"sj::rh_row<{self.W}>({name});")
        return f"{name}[sj_l]"

    def _opnd(self, x, sel, pre):
        return self.lx(x, sel if not isinstance(x.type, T.ScalarType) else [], pre), \
            self._comp_type(x.type, sel if not isinstance(x.type, T.ScalarType) else [])

    def _binary(self, e, sel, pre) -> str:
        a, at = self._opnd(e.lhs, sel, pre)
        b, bt = self._opnd(e.rhs, sel, pre)
        st = self._comp_type(e.type, sel)
        if _is_half(at) or _is_half(bt):
            if e.op in ("+", "-", "*", "/") and _is_half(st):
                return self._rh(f"({a}) {e.op} ({b})", pre)
            if e.op in ("<", ">", "<=", ">=", "==", "!="):
                return f"(({a}) {e.op} ({b}))"
            raise _Unsupported(f"half operator {e.op}")
        if isinstance(at, T.PointerType) or isinstance(bt, T.PointerType):
            raise _Unsupported("varying pointer arithmetic")
        return self.em.expr(ir.Binary(st, e.op, LaneRaw(at, text=a), LaneRaw(bt, text=b)))

    def _convert(self, e, sel, pre) -> str:
        src_sel = sel if not isinstance(e.operand.type, T.ScalarType) else []
        if isinstance(e.operand.type, (T.StructType, T.ArrayType)) or isinstance(e.type, (T.StructType, T.ArrayType)):
            raise _Unsupported("an aggregate conversion")
        x = self.lx(e.operand, src_sel, pre)
        ft = self._comp_type(e.operand.type, src_sel)
        tt = self._comp_type(e.type, sel)
        if ft == tt:
            return x
        if _is_half(tt):
            if isinstance(ft, T.ScalarType) and ft.kind == "float" and ft.bits == 32:
                return self._rh(x, pre)
            if isinstance(ft, T.ScalarType) and ft.kind in ("int", "uint") and ft.bits <= 32:
                return self._rh(f"(float)({x})", pre)
            if isinstance(ft, T.ScalarType) and ft.kind == "bool":
                return f"(({x}) ? 1.0f : 0.0f)"
            raise _Unsupported(f"{ft} to half")
        if _is_half(ft):
            return self.em.convert_str(x, T.FLOAT, tt)
        return self.em.convert_str(x, ft, tt)

    def _construct(self, e, sel, pre) -> str:
        t = e.type
        if isinstance(t, (T.ScalarType, T.EnumType)):
            return self._convert(ir.Convert(t, e.args[0]), sel, pre) if e.args else \
                ("0.0f" if _is_half(t) else f"{self.em.ctype(t)}{{}}")
        part = construct_part(e, sel)
        if part is None:
            st = self._comp_type(t, sel)
            return "0.0f" if _is_half(st) else f"{self.em.ctype(st)}{{}}"
        return self.lx(part[0], part[1], pre)

    def _intrinsic(self, e, sel, pre) -> str:
        em = self.em
        if e.name in _WAVE_CONST:
            return _WAVE_CONST[e.name]
        if e.name in _WAVE_IDENTITY and e.args:
            return self.lx(e.args[0], sel, pre)
        if e.name == "sj::vcat":
            return self._construct(ir.Construct(e.type, e.args), sel, pre)
        if e.name == "sj::dot" and len(e.args) == 2 and isinstance(e.args[0].type, T.VectorType):
            vt = e.args[0].type
            acc = "0.0f" if _is_half(vt.elem) or vt.elem == T.FLOAT else None
            if acc is None:
                raise _Unsupported(f"dot of {vt}")
            for i in range(vt.n):
                a = self.lx(e.args[0], [str(i)], pre)
                b = self.lx(e.args[1], [str(i)], pre)
                acc = f"({acc} + (({a}) * ({b})))"
            return self._rh(acc, pre) if _is_half(vt.elem) else acc
        if _iname(e) == "sj::bit_cast" and len(e.args) == 1 and not e.out_params and \
                isinstance(e.type, T.ScalarType) and isinstance(e.args[0].type, T.ScalarType):
            x, xt = self._opnd(e.args[0], [], pre)
            if _is_half(xt):
                x = f"(sj::half)({x})"
            call = copy.copy(e)
            call.args = [LaneRaw(xt, text=x)]
            text = em.expr(call)
            return f"(float)({text})" if _is_half(e.type) else text
        if e.name in _ELEMENTWISE and not e.out_params:
            st = self._comp_type(e.type, sel)
            parts, types = [], []
            for a in e.args:
                x, xt = self._opnd(a, sel, pre)
                if _is_half(xt):
                    x = f"(sj::half)({x})"
                parts.append(x)
                types.append(xt)
            call = f"{e.name}({', '.join(parts)})"
            return f"(float)({call})" if _is_half(st) else call
        raise _Unsupported(f"intrinsic {e.name}")

    # ------------------------------------------------------------------ statements
    def _guarded(self, d: int, body) -> None:
        if self.guard:
            self._out(d, "if (sj_live)")
            self._out(d, "{")
            body(d + 1)
            self._out(d, "}")
        else:
            body(d)

    def _stmt(self, s, masks: list[str], d: int) -> None:
        em = self.em
        loc = getattr(s, "loc", None)
        if loc is not None and loc.line:
            em.cur_loc = loc
        self.hcount = 0
        if id(s) in self.skip:
            return                  # a row copy whose destination reads its source's rows (_copy_aliases)
        if isinstance(s, ir.Block):
            for i, x in enumerate(s.stmts):
                if isinstance(x, ir.VarDecl) and x.var.uid in self.cls.varying and \
                        (x.init is None or not (self.cls.side_effects(x.init) or _loads(x.init))) and \
                        _assigned_before_read(x.var, s.stmts[i + 1:], self.refs):
                    continue        # no fill of lane rows that the next use overwrites whole
                if s is self.fn.body:
                    self.cuts.append(len(self.lines))    # where the kernel may be cut into parts
                self._stmt(x, masks, d)
        elif isinstance(s, ir.VarDecl):
            rhs = s.init if s.init is not None else ir.Construct(s.var.type, [])
            a = ir.Assign(s.var.type, "=", ir.LocalRef(s.var.type, s.var), rhs, loc=s.loc)
            if _side_effects(rhs):
                self._per_lane(ir.ExprStmt(a), masks, d)
            else:
                self._assign_stmt(a, masks, d)
        elif isinstance(s, ir.ExprStmt):
            e = s.expr
            if isinstance(e, ir.IncDec) and _root(e.operand) is not None:
                one = ir.Const(e.operand.type, 1)
                e = ir.Assign(e.operand.type, "+=" if e.op == "++" else "-=", e.operand, one, loc=e.loc)
            if isinstance(e, ir.Assign) and _root(e.lhs) is not None and not _side_effects(e.rhs) and \
                    not _side_effects(e.lhs):
                self._assign_stmt(e, masks, d)
            else:
                self._effect_stmt(e, masks, d)
        elif isinstance(s, ir.If):
            self._if(s, masks, d)
        elif isinstance(s, ir.Loop):
            self._loop(s, masks, d)
        elif isinstance(s, ir.Return):
            if s.value is not None:
                raise _Unsupported("return with a value")
            self._return(masks, d)
        else:
            raise _Unsupported(type(s).__name__)

    def _return(self, masks, d) -> None:
        if not masks:
            self._out(d, f"for (int sj_l = 0; sj_l < {self.W}; ++sj_l) sj_alive[sj_l] = 0;")
            self._out(d, "sj_live = false;")
        else:
            inner = " & ".join(f"{m}[sj_l]" for m in masks)
            self._simd(d, [f"sj_alive[sj_l] &= ({inner}) ^ 1;"])
            self._out(d, f"sj_live = sj::lanes_any(sj_alive, {self.W});")
        self.guard = True

    def _assign_stmt(self, e: ir.Assign, masks, d) -> None:
        em = self.em
        root = _root(e.lhs)
        if root.uid not in self.cls.varying:
            # uniform: once per block (the classification keeps varying values and varying ifs out)
            self._guarded(d, lambda dd: self._out(dd, f"{em.expr(e)};"))
            return
        rhs = e.rhs
        if e.op != "=":
            rhs = ir.Binary(e.lhs.type, e.op[:-1], e.lhs, e.rhs)
        pre: list[str] = []
        comps = components(e.lhs.type)
        vals, lhs = [], []
        try:
            for comp in comps:
                vals.append(self.lx(rhs, comp, pre))
                lhs.append(self._lvalue(e.lhs, comp))
        except _Lanewise:
            self._per_lane(ir.ExprStmt(e), masks, d)
            return
        im = self._if_mask(masks)
        if im is None and (len(vals) == 1 or not _mentions(root, rhs)) and self._round_in_place(vals, lhs, pre):
            self._guarded(d, lambda dd: self._block(dd, pre))
            return
        body = []
        for i, v in enumerate(vals):
            body.append(f"auto sj_c{i} = {v};")
        for i, l in enumerate(lhs):
            body.append(f"{l} = ({im}) ? sj_c{i} : {l};" if im else f"{l} = sj_c{i};")

        def emit(dd):
            if pre:
                self._out(dd, "{")
                for p in pre:
                    self._out(dd + 1, p)
                self._simd(dd + 1, body)
                self._out(dd, "}")
            else:
                self._simd(dd, body)
        self._guarded(d, emit) if pre else emit(d)

    def _round_in_place(self, vals: list, lhs: list, pre: list) -> bool:
        return self.half_rows and round_in_place(vals, lhs, pre, self.W)

    def _block(self, d: int, lines: list) -> None:
        self._out(d, "{")
        for p in lines:
            self._out(d + 1, p)
        self._out(d, "}")

    def _lvalue(self, lv, sel) -> str:
        """The lane array element that a varying lvalue's component sel is."""
        if isinstance(lv, ir.LocalRef):
            return self._leaf_ref(lv.var, sel)
        if isinstance(lv, ir.Field) and not lv.via_pointer:
            return self._lvalue(lv.obj, [("f", lv.name)] + sel)
        if isinstance(lv, ir.Index):
            ot = scan.value_type(lv.obj)
            if isinstance(ot, (T.ArrayType, T.VectorType)):
                return self._lvalue(lv.obj, [self._index_sel(lv.index, ot.n)] + sel)
            if isinstance(ot, T.MatrixType):
                return self._lvalue(lv.obj, [self._index_sel(lv.index, ot.rows)] + sel)
        if isinstance(lv, ir.Swizzle) and len(lv.indices) == 1 and not isinstance(lv.obj.type, T.ScalarType):
            return self._lvalue(lv.obj, [str(lv.indices[0])] + sel)
        raise _Unsupported(f"an lvalue {type(lv).__name__}")

    def _if(self, s, masks, d) -> None:
        em = self.em
        if self._uniform(s.cond):
            def emit(dd):
                self._out(dd, f"if ({em.expr(s.cond)})")
                self._out(dd, "{")
                self._stmt(s.then, masks, dd + 1)
                self._out(dd, "}")
                if s.else_ is not None:
                    self._out(dd, "else")
                    self._out(dd, "{")
                    self._stmt(s.else_, masks, dd + 1)
                    self._out(dd, "}")
            self._guarded(d, emit)
            return
        if _side_effects(s.cond):
            raise _Unsupported("an if condition with effects")
        t, f = f"sj_m{self.masks}", f"sj_m{self.masks + 1}"
        self.masks += 2
        pre: list[str] = []
        c = self.lx(s.cond, [], pre)
        m = self._full_mask(masks)
        self._out(d, "{")
        for p in pre:
            self._out(d + 1, p)
        # a condition that cannot trap is computed for every lane (a vectorised loop), else only where active
        sel = f"({m}) & int32_t(bool({c}))" if _trap_free(s.cond) else f"({m}) ? int32_t(bool({c})) : 0"
        self._simd(d + 1, [f"int32_t sj_c = {sel}; {t}[sj_l] = sj_c; "
                           f"{f}[sj_l] = ({m}) & (sj_c ^ 1);"])
        self._out(d, "}")
        for branch, mk in ((s.then, t), (s.else_, f)):
            if branch is None:
                continue
            if self._selects_only(branch):
                # a few lane assignments: masked selects for every lane, no branch to mispredict
                self._stmt(branch, masks + [mk], d)
                continue
            self._out(d, f"if (sj::lanes_any({mk}, {self.W}))")
            self._out(d, "{")
            self._stmt(branch, masks + [mk], d + 1)
            self._out(d, "}")

    def _selects_only(self, s) -> bool:
        return selects_only(s, self.cls.varying)

    def _loop(self, s, masks, d) -> None:
        em = self.em
        counted = counted_loop(s)
        if counted is None or counted.var.uid in self.cls.varying:
            raise _Unsupported("a loop that is not counted")
        lay = em.slots.loops.get(id(s)) if em.slots is not None else None
        v = em.var_name(counted.var)
        init = s.init[0].init
        cond = em.expr(s.cond)
        step = em.expr(s.step)
        if 1 < counted.trips <= self.unroll and not any(isinstance(n, ir.Loop) for n in scan.walk(s.body)):
            self._out(d, f"#pragma GCC unroll {counted.trips}")   # rows the steps carry stay in registers
        self._out(d, f"for ({v} = {em.expr(init)}; {cond}; {step})")
        self._out(d, "{")
        if counted.trips > 0:
            last = counted.start + (counted.trips - 1) * counted.step
            self.ranges[counted.var.uid] = (min(counted.start, last), max(counted.start, last))
            em.counter_ranges[counted.var.uid] = self.ranges[counted.var.uid]
        if lay is not None:
            it = lay.iteration(v)
            self.slot_base.append(f"({self.slot_base[-1]} + {lay.offset} + {it} * {lay.body_size})")
        guard = self.guard
        self._stmt(s.body, masks, d + 1)
        if self.guard and not guard:
            raise _Unsupported("a return inside a loop")
        if lay is not None:
            self.slot_base.pop()
        self.ranges.pop(counted.var.uid, None)
        em.counter_ranges.pop(counted.var.uid, None)
        self._out(d, "}")

    def _effect_stmt(self, e, masks, d) -> None:
        """A statement with memory effects: a privatised add, a combined atomic, or lane by lane."""
        em = self.em
        if isinstance(e, ir.Intrinsic) and em.slots is not None and id(e) in em.slots.offset and is_red_add(e):
            return self._slot_add(e, masks, d)
        red = self._reduction(e)
        if red is not None:
            return self._reduce(e, red, masks, d)
        self._per_lane(ir.ExprStmt(e), masks, d)

    def _slot_add(self, e, masks, d) -> None:
        em = self.em
        dest, value = e.args
        slot = f"({self.slot_base[-1]} + {em.slots.offset[id(e)]})"
        half = _is_half(dest.type)
        ct = em.ctype(dest.type)
        if self._uniform(dest):
            pre: list[str] = []
            val = self.lx(value, [], pre)
            m = self._full_mask(masks)

            def emit(dd):
                self._out(dd, "{")
                for p in pre:
                    self._out(dd + 1, p)
                self._out(dd + 1, f"const int sj_s = {slot};")
                self._out(dd + 1, f"const uintptr_t sj_k = reinterpret_cast<uintptr_t>(&({em.expr(dest)})){' | 1u' if half else ''};")
                self._out(dd + 1, f"if (__builtin_expect(sj_tab[sj_s] != sj_k, 0)) sj::lacc_claim(sj_acc, sj_lacc, sj_tab, sj_s, sj_k, {self.W});")
                self._out(dd + 1, f"float* sj_a = sj_lacc + sj_s * {self.W};")
                self._simd(dd + 1, [f"sj_a[sj_l] += ({m}) ? (float)({val}) : 0.0f;"])
                self._out(dd, "}")
            self._guarded(d, emit)
            return
        # a varying address: lane by lane, through the same slot
        self._per_lane(ir.ExprStmt(e), masks, d, slot_call=(dest, value, slot, ct))

    def _per_lane(self, s: ir.ExprStmt, masks, d, slot_call=None) -> None:
        """Run the scalar statement for every active lane, gathering and scattering its varying locals."""
        em = self.em
        refs, order = {}, []
        for n in scan.walk(s.expr):
            if isinstance(n, ir.LocalRef) and n.var.uid in self.cls.varying and n.var.uid not in refs:
                refs[n.var.uid] = n.var
                order.append(n.var)
        written = _written_locals(s.expr) & set(refs)
        body = []
        alias = {}
        for v in order:
            tn = f"sj_a{v.uid}"
            body += self._gather_lines(v, tn)
            alias[v.uid] = tn
        em.lane_alias = alias
        try:
            if slot_call is not None:
                dest, value, slot, ct = slot_call
                body.append(f"sj::lacc_add<{ct}>(sj_acc, sj_lacc, sj_tab, {slot}, &({em.expr(dest)}), "
                            f"{em.expr(value)}, {self.W});")
            else:
                body.append(f"{em.expr(s.expr)};")
        finally:
            em.lane_alias = {}
        for v in order:
            if v.uid in written:
                body += self._scatter_lines(v, alias[v.uid])
        self._guarded(d, lambda dd: self._lanewise(dd, masks, body))


def construct_part(e: ir.Construct, sel: list):
    """(argument, selector path) that the component at `sel` of an aggregate construction reads; None where that
    component is zero (no arguments, a pair's missing derivative).  The row emitter's lx and the register
    emitter's vx both read constructions through it."""
    t = e.type
    if not e.args:
        return None
    if e.splat:
        return e.args[0], (sel[1:] if not isinstance(e.args[0].type, T.ScalarType) else [])
    if not sel:
        raise _Unsupported("a scalar view of an aggregate")
    first, rest = sel[0], sel[1:]
    if isinstance(t, T.StructType):
        names = [n for n, _ in _fields(t)]
        if not isinstance(first, tuple) or first[1] not in names or len(e.args) != len(names):
            raise _Unsupported("a struct construction")
        return e.args[names.index(first[1])], rest
    if isinstance(t, T.PairType) and isinstance(first, tuple) and first[1] in ("p", "d"):
        if first[1] == "p":
            return e.args[0], rest
        return (e.args[1], rest) if len(e.args) > 1 else None
    if isinstance(first, tuple) or not first.isdigit():
        raise _Unsupported("a construction read at a dynamic index")
    k = int(first)
    if isinstance(t, T.ArrayType):
        if len(e.args) != t.n:
            raise _Unsupported("an array construction")
        return e.args[k], rest
    if isinstance(t, T.VectorType):
        at = 0
        for a in e.args:
            n = a.type.n if isinstance(a.type, T.VectorType) else 1
            if k < at + n:
                return a, ([str(k - at)] if isinstance(a.type, T.VectorType) else [])
            at += n
    raise _Unsupported(f"a construction of {t}")
