"""Row-level helpers of the lane-blocked loop kernels (emit/cpu_lane_loops.py): which stores of lane rows
can be left out (rows the next use overwrites, dead stores, whole copies that can read their source's rows),
if conditions that may be computed for inactive lanes, branches that are if-converted, half operations
rounded in their destination row, row indices of unroll-and-jammed loops, a lane block's reduction loop,
and the combined atomics (LaneReductions, a mixin of LoopLaneKernel)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from .. import types as T
from ..passes.add_aliasing import separate_sites
from ..passes.reach import BodyNodes
from .cpu_lane_values import LaneRaw, _ELEMENTWISE, _atomic_obj, _loads, _root, _side_effects, _written_locals


def _mentions(v: ir.Var, node) -> bool:
    return any(isinstance(n, ir.LocalRef) and n.var.uid == v.uid for n in scan.walk(node))


class LocalRefs:
    """The uids of the locals each statement names (its LocalRefs), computed once per statement and kernel:
    the emitter asks about the statements after every declaration of a block (the IR is not changed while a
    kernel is emitted; the node is kept with its set, so a reused id() cannot hit)."""

    def __init__(self):
        self._memo: dict = {}

    def of(self, node) -> frozenset:
        hit = self._memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        uids = frozenset(n.var.uid for n in scan.walk(node) if isinstance(n, ir.LocalRef))
        self._memo[id(node)] = (node, uids)
        return uids


def _assigned_before_read(v: ir.Var, rest: list, refs: Optional[LocalRefs] = None) -> bool:
    """Is local v (declared without initialiser) unused in `rest`, or first used by a whole assignment
    `v = e` at this block's level whose value does not read v?  Then its declaration needs no zero-fill.
    `refs`: the kernel's memo of the statements' locals."""
    refs = refs if refs is not None else LocalRefs()
    for x in rest:
        if v.uid not in refs.of(x):
            continue
        e = x.expr if isinstance(x, ir.ExprStmt) else None
        return isinstance(e, ir.Assign) and e.op == "=" and isinstance(e.lhs, ir.LocalRef) and \
            e.lhs.var.uid == v.uid and not _mentions(v, e.rhs)
    return True


def _trap_free(e) -> bool:
    """Can e be evaluated for lanes that are not active without a fault?  (No integer division, no call
    other than elementwise math.)"""
    for n in scan.walk(e):
        if isinstance(n, ir.Binary) and n.op in ("/", "%") and not (
                isinstance(n.type, (T.ScalarType, T.VectorType)) and
                (n.type if isinstance(n.type, T.ScalarType) else n.type.elem).kind == "float"):
            return False
        if isinstance(n, (ir.Call, ir.MethodCall, ir.StmtExpr)):
            return False
        if isinstance(n, ir.Intrinsic) and n.name not in _ELEMENTWISE:
            return False
    return True


def _flat(block: ir.Block) -> list:
    """The statements of a block with plain nested blocks opened (inlining leaves them), in order."""
    out = []
    for x in block.stmts:
        out.extend(_flat(x) if isinstance(x, ir.Block) else [x])
    return out


def _stmt_writes(x) -> set:
    out = set()
    for n in scan.walk(x):
        if isinstance(n, ir.VarDecl):
            out.add(n.var.uid)
        elif isinstance(n, ir.ExprStmt):
            out |= _written_locals(n.expr)
        elif isinstance(n, ir.Loop):
            for part in (n.step, n.cond):
                if part is not None:
                    out |= _written_locals(part)
    return out


def _copy_aliases(fn: ir.Function, varying: set, refs: Optional[LocalRefs] = None) -> tuple[dict, set]:
    """Whole copies `d = s` of varying locals in the entry's top-level code that the emitter can drop: d is
    written by nothing else (its declaration aside, which nothing reads), and s by nothing after the copy, so
    every later read of d reads s's rows.  (uid of d -> s's Var, ids of the statements to skip.)"""
    refs = refs if refs is not None else LocalRefs()
    stmts = _flat(fn.body)
    writes = [_stmt_writes(x) for x in stmts]
    reads = [refs.of(x) for x in stmts]
    alias: dict = {}
    skip: set = set()
    # dead stores first: `v = e` (pure e) whose value nothing after reads (reverse mode's adjoint resets)
    for i, x in enumerate(stmts):
        e = x.expr if isinstance(x, ir.ExprStmt) else None
        if isinstance(e, ir.Assign) and e.op == "=" and isinstance(e.lhs, ir.LocalRef) and \
                e.lhs.var.uid in varying and not (_side_effects(e.rhs) or _loads(e.rhs)) and \
                _assigned_before_read(e.lhs.var, stmts[i + 1:], refs):
            skip.add(id(x))
            writes[i], reads[i] = set(), frozenset()
    # the statements that write / read each local (positions, ascending)
    write_pos: dict = {}
    read_pos: dict = {}
    for j, ws in enumerate(writes):
        for u in ws:
            write_pos.setdefault(u, []).append(j)
    for j, rs in enumerate(reads):
        for u in rs:
            read_pos.setdefault(u, []).append(j)
    for i, x in enumerate(stmts):
        if id(x) in skip:
            continue
        if isinstance(x, ir.VarDecl) and isinstance(x.init, ir.LocalRef):
            d, src = x.var, x.init.var
        elif isinstance(x, ir.ExprStmt) and isinstance(x.expr, ir.Assign) and x.expr.op == "=" and \
                isinstance(x.expr.lhs, ir.LocalRef) and isinstance(x.expr.rhs, ir.LocalRef):
            d, src = x.expr.lhs.var, x.expr.rhs.var
        else:
            continue
        if d.uid == src.uid or d.uid not in varying or src.uid not in varying or d.type != src.type:
            continue
        # d's declarations before the copy that compute nothing (read by nothing: they are left out too); any
        # other statement that writes d, reads d before the copy or writes src after it keeps the copy
        decls = [j for j in write_pos.get(d.uid, ()) if j < i and isinstance(stmts[j], ir.VarDecl) and
                 stmts[j].var.uid == d.uid and (stmts[j].init is None or
                                                not (_side_effects(stmts[j].init) or _loads(stmts[j].init)))]
        blocking = set(write_pos.get(d.uid, ()))
        blocking.update(j for j in read_pos.get(d.uid, ()) if j < i)
        blocking.update(j for j in write_pos.get(src.uid, ()) if j > i)
        blocking.discard(i)
        blocking.difference_update(decls)
        decl = stmts[decls[-1]] if decls else None
        if blocking or (decl is None and not isinstance(x, ir.VarDecl)):
            continue
        alias[d.uid] = alias.get(src.uid, src)
        skip.add(id(x))
        if decl is not None:
            skip.add(id(decl))
    return alias, skip


def round_in_place(vals: list, lhs: list, pre: list, W: int) -> bool:
    """`x = <half operations>` for every lane: each component's last half row is computed into x's own
    row and rounded there (no row copy, one store-to-load trip less on the dependency chain).  One
    component's loop reads x's old value lane by lane before writing it, as the copy would have; with
    several components the value must not read x at all (the caller checks).  W: the lane width."""
    if not vals:
        return False
    out = list(pre)
    for val, lv in zip(vals, lhs):
        if not (val.endswith("[sj_l]") and lv.endswith("[sj_l]")):
            return False
        name = val[: -len("[sj_l]")]
        decl = f"alignas(64) float {name}[{W}];"
        if decl not in out:
            return False
        k = out.index(decl)
        if out[k + 1: k + 4] != ["#pragma omp simd", out[k + 2], f"sj::rh_row<{W}>({name});"] or \
                not out[k + 2].startswith(f"for (int sj_l = 0; sj_l < {W}; ++sj_l) {{ {name}[sj_l] = ") or \
                sum(name + "[" in p or name + ")" in p for p in out) != 3 or vals.count(val) != 1:
            return False
        row = lv[: -len("[sj_l]")]
        out[k: k + 4] = ["#pragma omp simd", out[k + 2].replace(f"{{ {name}[sj_l] = ", f"{{ {row}[sj_l] = ", 1),
                         f"sj::rh_row<{W}>({row});"]
    pre[:] = out
    return True


def selects_only(s, varying: set) -> bool:
    """Only assignments of pure values to varying locals (and ifs of them), small: if-converted."""
    if sum(1 for _ in scan.walk(s)) > 120:
        return False
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, ir.Block):
            stack.extend(x.stmts)
        elif isinstance(x, ir.If):
            if _side_effects(x.cond) or _loads(x.cond):
                return False
            stack.append(x.then)
            if x.else_ is not None:
                stack.append(x.else_)
        elif isinstance(x, ir.ExprStmt) and isinstance(x.expr, ir.Assign):
            r = _root(x.expr.lhs)
            if r is None or r.uid not in varying or _side_effects(x.expr.rhs) or \
                    _side_effects(x.expr.lhs) or _loads(x.expr.rhs):
                return False
        elif isinstance(x, ir.VarDecl):
            if x.var.uid not in varying or (x.init is not None and (_side_effects(x.init) or _loads(x.init))):
                return False
        else:
            return False
    return True


def counter_affine(e, counter_range: Callable, varying: set, var_name: Callable) -> Optional[tuple]:
    """(C++ text, lowest, highest value) of a uniform counter of an enclosing counted loop (counter_range: its
    (lo, hi) or None), or of such an index times / plus a non-negative int constant (the unroll-and-jammed
    loops' `i * U + k`, passes/cpu_jam.py); else None."""
    while isinstance(e, ir.Convert):
        e = e.operand
    if isinstance(e, ir.LocalRef):
        r = counter_range(e.var)
        if r is None or e.var.uid in varying:
            return None
        return var_name(e.var), r[0], r[1]
    if isinstance(e, ir.Binary) and e.op in ("+", "*") and isinstance(e.rhs, ir.Const) and \
            isinstance(e.rhs.value, int) and not isinstance(e.rhs.value, bool) and e.rhs.value >= 0:
        a = counter_affine(e.lhs, counter_range, varying, var_name)
        if a is None:
            return None
        k = e.rhs.value
        if e.op == "+":
            return f"({a[0]} + {k})", a[1] + k, a[2] + k
        return f"({a[0]} * {k})", a[1] * k, a[2] * k
    return None


def reduce_lines(ct: str, kind: str, op: str, m: str, val: str, comb: str, apply: str, W: int,
                 every_lane: bool) -> list[str]:
    """The lines that combine lane values `val` (C type ct, scalar kind; op add / max / min, `comb` of sj_r and
    sj_v) of the active lanes (mask text m) into sj_r and run `apply` when any lane was active.  every_lane:
    val may be computed for every lane (no trap, no load): one vectorised reduction with the operation's
    identity for masked-off lanes; else a loop over the active lanes."""
    if not every_lane:
        return [f"{ct} sj_r{{}}; bool sj_any = false;",
                f"for (int sj_l = 0; sj_l < {W}; ++sj_l) if ({m}) {{ {ct} sj_v = ({ct})({val}); "
                f"sj_r = sj_any ? ({ct})({comb}) : sj_v; sj_any = true; }}",
                f"if (sj_any) {apply}"]
    signed = kind == "int"
    ident = {"add": "-0.0f" if kind == "float" else "0",
             "max": "INT32_MIN" if signed else "0u", "min": "INT32_MAX" if signed else "UINT32_MAX"}[op]
    clause = {"add": "+", "max": "max", "min": "min"}[op]
    # a float sum in the vector's order; OpenMP starts its partial sums at +0.0, so a sum of -0.0s alone
    # (sj_z counts them) is set to -0.0 after
    negz = kind == "float"
    out = [f"{ct} sj_r = {ident}; int32_t sj_n = 0;" + (" int32_t sj_z = 0;" if negz else ""),
           f"#pragma omp simd reduction({clause}:sj_r) reduction(+:sj_n)" + (" reduction(+:sj_z)" if negz else ""),
           f"for (int sj_l = 0; sj_l < {W}; ++sj_l) {{ {ct} sj_v = ({ct})({val}); "
           f"const bool sj_on = ({m}) != 0; sj_r = sj_on ? ({ct})({comb}) : sj_r; sj_n += sj_on; " +
           ("sj_z += sj_on & (__builtin_bit_cast(uint32_t, sj_v) == 0x80000000u); " if negz else "") + "}"]
    if negz:
        out.append("if (sj_z == sj_n) sj_r = -0.0f;")
    return out + [f"if (sj_n) {apply}"]


class LaneReductions:
    """The combined atomics of a lane-blocked kernel (a mixin of LoopLaneKernel): an unused-result atomic add /
    max / min at a uniform address is combined over the block's active lanes and applied once, or deferred to
    the end of the worker's range where nothing else touches its memory."""

    def _reduction(self, e) -> Optional[tuple]:
        """(object text maker, method, value expr, C type) of an unused-result atomic add/max/min at a uniform
        address, whose value is a float (add) or a 32-bit integer."""
        if isinstance(e, ir.MethodCall) and e.name in ("add", "max", "min") and len(e.args) == 1 and \
                self._uniform(e.obj) and not _side_effects(e.args[0]) and _atomic_obj(e.obj):
            vt = e.args[0].type
            if isinstance(vt, T.ScalarType) and ((vt.kind == "float" and vt.bits == 32 and e.name == "add") or
                                                 (vt.kind in ("int", "uint") and vt.bits == 32)):
                return ("method", e.name, e.args[0], vt)
        if isinstance(e, ir.Intrinsic) and e.name in ("sj::InterlockedAdd", "sj::InterlockedMax", "sj::InterlockedMin") \
                and len(e.args) == 2 and self._uniform(e.args[0]) and not _side_effects(e.args[1]):
            vt = e.args[0].type
            op = e.name[len("sj::Interlocked"):].lower()
            if isinstance(vt, T.ScalarType) and vt == e.args[1].type and \
                    ((vt.kind == "float" and vt.bits == 32 and op == "add") or
                     (vt.kind in ("int", "uint") and vt.bits == 32)):
                return ("intrinsic", op, e.args[1], vt)
        return None

    def _deferrable(self) -> set:
        """ids of the combinable atomics whose memory nothing else of the entry touches: their block values
        are combined per worker and applied when the worker's range ends (as the privatised adds)."""
        sites = []
        for n in self.nodes:
            if isinstance(n, ir.ExprStmt) and self._reduction(n.expr) is not None:
                e = n.expr
                if isinstance(e, ir.MethodCall):
                    sites.append((e, SimpleNamespace(args=[e if e.via_pointer else e.obj])))
                elif not (self.em.slots is not None and id(e) in self.em.slots.offset):
                    sites.append((e, SimpleNamespace(args=[e.args[0]])))
        if not sites:
            return set()
        memo = BodyNodes()
        memo.put(self.fn, self.nodes)       # the body's nodes, walked once by the kernel
        ok = separate_sites(self.fn, [self.fn], [a for _, a in sites], memo)
        return {id(e) for e, a in sites if id(a) in ok}

    def _reduce(self, e, red, masks, d) -> None:
        em = self.em
        kind, op, value, vt = red
        pre: list[str] = []
        val = self.lx(value, [], pre)
        ct = em.ctype(vt)
        comb = {"add": "sj_r + sj_v", "max": "(sj_v > sj_r ? sj_v : sj_r)", "min": "(sj_v < sj_r ? sj_v : sj_r)"}[op]
        m = self._full_mask(masks)
        if kind == "method":
            apply = em.expr(ir.MethodCall(e.type, e.obj, e.name, [LaneRaw(vt, text="sj_r")],
                                          via_pointer=e.via_pointer, loc=e.loc)) + ";"
        else:
            apply = em.expr(ir.Intrinsic(e.type, e.name, [e.args[0], LaneRaw(vt, text="sj_r")], loc=e.loc)) + ";"

        if id(e) in self.deferred:
            # combined per worker (sj_red, flushed by the launcher): the memory is separate (passes/add_aliasing.py)
            k = len(self.red_apply)
            if kind == "method":
                ot = e.obj.type.elem if e.via_pointer else e.obj.type
                obj = ir.Deref(ot, e.obj, loc=e.loc) if e.via_pointer else e.obj
                key = f"(void*)&({em.expr(obj)})"
                call = f"reinterpret_cast<{em.ctype(ot)}*>(q.key)->{e.name}(v)"
            else:
                key = f"(void*)&({em.expr(e.args[0])})"
                call = f"{e.name}(*reinterpret_cast<{em.ctype(e.args[0].type)}*>(q.key), v)"
            fname = f"sj_redapply_{self.fn.slang_name}_{k}"
            self.red_apply.append(f"static void {fname}(sj::LaneRed& q) {{ {ct} v; __builtin_memcpy(&v, &q.bits, sizeof v); "
                                  f"(void){call}; }}")
            apply = (f"{{ void* sj_k = {key}; sj::LaneRed& q = sj_red[{k}]; {ct} sj_v; "
                     f"if (q.key != sj_k) {{ if (q.key) {fname}(q); q.key = sj_k; sj_v = sj_r; }} "
                     f"else {{ __builtin_memcpy(&sj_v, &q.bits, sizeof sj_v); sj_v = ({ct})({comb}); }} "
                     f"__builtin_memcpy(&q.bits, &sj_v, sizeof sj_v); }}")

        def emit(dd):
            self._out(dd, "{")
            for p in pre:
                self._out(dd + 1, p)
            for line in reduce_lines(ct, vt.kind, op, m, val, comb, apply, self.W,
                                     _trap_free(value) and not _loads(value)):
                self._out(dd + 1, line)
            self._out(dd, "}")
        self._guarded(d, emit)
