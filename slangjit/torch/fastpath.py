"""The direct launcher of a call with torch tensors (the hot path of calls.py and dispatch.py).

A `FastCall` belongs to one call `Plan` (one signature: the function, where the torch tensors sit among the
arguments, their dtypes, ranks and devices).  It is built once the general path has resolved the plan's
forward CallData, and only where it can prove that every leaf of that CallData is either a plain value of the
call (a `ValueLeaf` fed from a non-tensor argument) or one torch tensor read as a strided container (a plain
`ContainerLeaf`: no element conversion, no numpy array); the call has no `this`, no dict arguments, no
call groups, no `_thread_count`, no CallShapeInfo.  Anything else keeps the general path.  The `.bwds`
CallData of each pattern of needed gradients is resolved by the general path on the first backward with that
pattern, then driven the same way.

Per call it packs the kernel's parameter block straight from the tensors (data_ptr, sizes and strides into a
cached block), the argument values and the call shape, and launches: no spy.Tensor views, no CallData.run.
What guards a result is kept: dtypes, ranks, devices and argument kinds are the plan's key (looked up before a
plan is used); shapes, element dims and broadcasting are checked by the general path once per set of shapes
(the call shape is then cached under those shapes); outputs that alias themselves are refused per call
(plan_for / dispatch); the kernel's error record is checked after a CPU launch; CUDA launches run on torch's
current stream.

Backward: the gradient of an input that no two threads share is made with `torch.empty` and written with a
plain store (`_goa` = 2, functional/leaves.py), a broadcast input's with `torch.zeros` and atomic adds; torch's
incoming gradients are read where they are (any strides, stride-0 `expand`ed ones included, never
materialised); nothing keeps a returned gradient alive, so torch's AccumulateGrad takes it as `.grad` without
a copy.  `launch_log()` records what a call launched (kernels, fills, copies) and the bytes each moves.
"""
from __future__ import annotations

import ctypes
import struct
from operator import itemgetter
from typing import Optional

import torch

from ..functional.leaves import ContainerLeaf, ValueLeaf
from . import convert as C
from .calls import _Slot
from .launchlog import _LOG, log_event, nbytes_touched
from .streams import on_torch_stream

_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")


# ----------------------------------------------------------------------------------------- leaf probing

class _Probe:
    __slots__ = ("j",)

    def __init__(self, j: int):
        self.j = j


def _leaf_sources(cd) -> Optional[list]:
    """[(leaf, template position)] for every leaf of `cd`: ('p', i) / ('k', name) the argument it reads, or
    None when a leaf does not read one argument as a whole (a dict field, an instance, ...)."""
    n = len(cd._srcs) + (1 if cd.result is not None else 0)
    probe = [_Probe(j) for j in range(n)]
    out = []
    for lf in cd.leaves:
        try:
            v = lf.get(probe)
        except Exception:          # noqa: BLE001 -- a getter that does more than index: not provable
            return None
        if type(v) is not _Probe:
            return None
        j = v.j
        if j < len(cd._srcs):
            pos, i = cd._srcs[j]
            out.append((lf, ("p", i) if pos else ("k", i)))
        elif cd.result_from_pos:
            return None
        else:
            out.append((lf, ("k", "_result")))
    return out


def _plain_container(lf) -> bool:
    """A strided container read in place (every leaf of a CUDA call carries the call's Staging, which only numpy
    containers use)."""
    return type(lf) is ContainerLeaf and not lf.is_numpy and not lf.convert and not lf.temp


def _call_data_ok(cd) -> bool:
    return cd.groups is None and not cd.tc_mode and not cd.instance_leaves and not cd.uses_csi


# ----------------------------------------------------------------------------------------- one CallData

class _Launch:
    """One CallData driven straight from torch tensors.  `fields`: (slot, kind, leaf) with kind 'd' (the value,
    from mem[slot]), 'gi' (its incoming gradient, from mem[slot]) or 'go' (its gradient out, from gout[slot]);
    `values`: (leaf, index into the call's value tuple)."""

    def __init__(self, cd, node, fields, values):
        self.cd, self.node = cd, node
        self.values = values
        self.fast: list = []          # (slot, address offset, call-stride offset): 1-D views over a 1-D call
        self.general: list = []       # (slot, leaf, prefix)
        self.gouts: list = []         # (slot, goa offset, leaf, prefix, fast offsets or None)
        for slot, kind, lf in fields:
            p = lf.u + {"d": "_", "gi": "_gi", "go": "_go"}[kind]
            o = lf.offsets
            simple = lf.cd == 1 and lf.k == 1 and not lf.ne
            if kind == "go":
                self.gouts.append((slot, o[lf.u + "_goa"], lf, p, (o[p + "d"], o[p + "cs"]) if simple else None))
            elif simple:
                self.fast.append((slot, o[p + "d"], o[p + "cs"]))
            else:
                self.general.append((slot, lf, p))
        self.go_leaves = {slot: lf for slot, _, lf, _, _ in self.gouts}
        self.pool: list = []
        self.host = not cd.gpu
        self.cs_fmt = cd._cs_fmt
        self.name = cd.name

    def launch(self, mem, gout, modes, vals, cs: tuple, n: int) -> None:
        """Pack and run: mem[slot] the tensors of 'd' / 'gi' fields, gout[slot] of 'go' fields, modes[slot]
        their `_goa` (1 atomic add into zeros, 2 plain store into fresh memory)."""
        cd = self.cd
        pool = self.pool
        blk = pool.pop() if pool else ctypes.create_string_buffer(cd.psize)
        try:
            _I32.pack_into(blk, cd.off_n, n)
            if cd.cd:
                struct.pack_into(self.cs_fmt, blk, cd.off_cs, *cs)
            for lf, vi in self.values:
                lf.pack(vals[vi], blk, cs, None)
            pk32, pk64 = _I32.pack_into, _U64.pack_into
            for slot, o_d, o_cs in self.fast:
                t = mem[slot]
                pk64(blk, o_d, t.data_ptr())
                shp = t.shape
                pk32(blk, o_cs, t.stride(0) if shp and shp[0] != 1 else 0)
            for slot, lf, p in self.general:
                t = mem[slot]
                shp = t.shape
                lf._pack_view(blk, p, t.data_ptr(), tuple(shp) or (1,), t.stride() or (1,), 0, cs)
            for slot, o_a, lf, p, simple in self.gouts:
                g = gout[slot]
                pk32(blk, o_a, modes[slot])
                if simple is not None:
                    pk64(blk, simple[0], g.data_ptr())
                    shp = g.shape
                    pk32(blk, simple[1], g.stride(0) if shp and shp[0] != 1 else 0)
                else:
                    lf._pack_view(blk, p, g.data_ptr(), tuple(g.shape) or (1,), g.stride() or (1,), 0, cs)
            cd.dispatch_block(self.node, blk, cs, n)
        finally:
            pool.append(blk)


def _fields_of(cd, plan, srcs, vindex, bwds: bool, needs=None) -> Optional[tuple]:
    """(fields, values) of a _Launch over `cd`, or None when a leaf is not provably a tensor slot or a value."""
    fields, values = [], []
    seen = set()
    n = plan.n
    for lf, pos in srcs:
        kind, i = pos
        if pos == ("k", "_result") and "_result" not in plan.tkw:
            if plan.alloc is None:
                return None
            slot = n                                  # the auto-created result (forward) / its gradient (bwds)
        else:
            v = plan.targs[i] if kind == "p" else plan.tkw[i]
            if type(v) is not _Slot:
                if not isinstance(lf, ValueLeaf) or pos not in vindex:
                    return None
                values.append((lf, vindex[pos]))
                continue
            slot = v.i
        if not _plain_container(lf) or slot in seen:
            return None
        seen.add(slot)
        written = slot == n or plan.writes[slot]
        if not bwds:
            if lf.grad_in or lf.grad_out:
                return None
            fields.append((slot, "d", lf))
            continue
        # .bwds: a written tensor (or the result) brings its gradient as value and grad_in; a read one its value
        # and, where needed, a gradient to write
        if written:
            if not lf.grad_in or lf.grad_out:
                return None
            fields += [(slot, "d", lf), (slot, "gi", lf)]
        else:
            if lf.grad_in or bool(lf.grad_out) != bool(needs[slot]):
                return None
            fields.append((slot, "d", lf))
            if lf.grad_out:
                fields.append((slot, "go", lf))
    want = set(range(n)) | ({n} if plan.alloc is not None else set())
    if seen != want:
        return None
    return fields, values


# ----------------------------------------------------------------------------------------- one plan

class FastCall:
    """The direct path of one Plan (see the module docstring)."""

    @staticmethod
    def build(plan) -> Optional["FastCall"]:
        """The FastCall of `plan`, or None when the general path must serve it."""
        if not plan.flat or plan.this or plan.mode is not None or plan.struct_result:
            return None
        cd = plan.cd_res if plan.alloc is not None else plan.cd
        if cd is None or cd.bwds or not _call_data_ok(cd) or cd.auto_result is not None:
            return None
        srcs = _leaf_sources(cd)
        if srcs is None:
            return None
        # every argument of the call is a tensor slot or a value some leaf reads
        vpos = [("p", k) for k, v in enumerate(plan.targs) if type(v) is not _Slot] + \
            [("k", k) for k, v in plan.tkw.items() if type(v) is not _Slot]
        vindex = {p: j for j, p in enumerate(vpos)}
        got = _fields_of(cd, plan, srcs, vindex, False)
        if got is None:
            return None
        fields, values = got
        if {vindex[p] for p in vpos} != {vi for _, vi in values} and vpos:
            return None
        return FastCall(plan, _Launch(cd, plan.node, fields, values), vpos)

    def __init__(self, plan, fwd: _Launch, vpos: list):
        self.plan = plan
        self.fwd = fwd
        self.vpos = vpos
        pidx = [i for k, i in vpos if k == "p"]
        kidx = [i for k, i in vpos if k == "k"]
        self._pget = itemgetter(*pidx) if len(pidx) > 1 else None
        self._pidx, self._kidx = pidx, kidx
        self.entries: dict = {}         # the tensors' shapes -> (call shape, thread count, result shape)
        self.bwd: dict = {}             # needs pattern -> _Launch, or False (the general path serves it)
        self.modes: dict = {}           # (needs pattern, shapes) -> _goa per slot
        self.host = fwd.host
        self.device = plan.device
        self.tdev = plan.tdev
        self.alloc = plan.alloc
        self.es = plan.alloc[1] if plan.alloc is not None else ()

    # -- the call's values (its non-tensor arguments)

    def values(self, args: tuple, kwargs: dict) -> tuple:
        if self._kidx:
            return tuple([args[i] for i in self._pidx] + [kwargs[k] for k in self._kidx])
        g = self._pget
        if g is not None:
            return g(args)
        return (args[self._pidx[0]],) if self._pidx else ()

    def template(self, vals: tuple):
        """The plan's `template` of a call with these values (for the general path)."""
        plan = self.plan
        a, kw = list(plan.targs), dict(plan.tkw)
        for (kind, i), v in zip(self.vpos, vals):
            if kind == "p":
                a[i] = v
            else:
                kw[i] = v
        for k, _ in plan.pos_slots:
            a[k] = None
        for k, _ in plan.kw_slots:
            kw[k] = None
        return a, kw

    def _entry(self, tensors, vals, shapes):
        """The call shape of tensors of these shapes, by the general path (which raises the shape and broadcast
        errors), cached."""
        plan = self.plan
        views = [C.to_spy(t, plan.device, lab, st) for t, lab, st in zip(tensors, plan.labels, plan.stypes)]
        args, kwargs = plan.args_of(views, self.template(vals))
        cs = tuple(plan.cd.call_shape(args, kwargs))
        n = 1
        for c in cs:
            n *= c
        e = (cs, n, cs + self.es)
        if len(self.entries) < 256:
            self.entries[shapes] = e
        return e

    # -- forward

    def call(self, tensors, vals):
        """A call that records no autograd node: its return value."""
        result, _ = self.forward(tensors, vals)
        plan = self.plan
        if plan.alloc is not None:
            return result
        if plan.result_slot is not None:
            return tensors[plan.result_slot]
        return None

    def forward(self, tensors, vals):
        """(the auto-created result or None, the shape entry)."""
        shapes = tuple([t.shape for t in tensors])
        e = self.entries.get(shapes)
        if e is None:
            e = self._entry(tensors, vals, shapes)
        cs, n, rs = e
        result = None
        if self.alloc is not None:
            result = torch.empty(rs, dtype=self.alloc[0], device=self.tdev)
            mem = list(tensors)
            mem.append(result)
        else:
            mem = tensors
        if self.host:
            self.fwd.launch(mem, None, None, vals, cs, n)
        else:
            with on_torch_stream(self.device, tensors):
                self.fwd.launch(mem, None, None, vals, cs, n)
        if _LOG:
            plan = self.plan
            log_event("forward", "kernel", "fast",
                      sum(nbytes_touched(mem[i]) for i in plan.read_idx),
                      sum(nbytes_touched(mem[i]) for i in plan.write_idx) + (
                          nbytes_touched(result) if result is not None else 0))
        if result is not None and self.plan.scalar_call and cs == (1,):
            result = result.reshape(self.es)
        return result, e

    # -- backward

    def backward(self, saved, e, grads_in, needs, vals) -> list:
        """The inputs' gradients (None where not needed).  `saved`: the call's tensors (None for written ones),
        `e`: the forward's shape entry, `grads_in`: torch's gradients of the outputs (the result's first, then
        the written tensors' in order)."""
        plan = self.plan
        cs, n, rs = e
        nsl = plan.n
        mem = list(saved)
        mem.append(None)
        k = 0
        conv = []
        if self.alloc is not None:
            g = grads_in[0]
            k = 1
            if g.dtype != self.alloc[0]:
                g = g.to(self.alloc[0])
                conv.append(g)
            if plan.scalar_call and cs == (1,):
                g = g.reshape((1,) + self.es)
            mem[nsl] = g
        dts = plan.dtypes
        for i in plan.write_idx:
            g = grads_in[k]
            k += 1
            if g.dtype != dts[i]:
                g = g.to(dts[i])
                conv.append(g)
            mem[i] = g
        key = tuple(needs)
        bl = self.bwd.get(key)
        if bl is None:
            return self._first_backward(saved, e, grads_in, needs, vals, key)
        if bl is False:
            return plan.backward(saved, self._shapes(mem, rs), self._grads_list(grads_in), needs, None,
                                 self.template(vals))
        mk = (key, cs)
        modes = self.modes.get(mk)
        if modes is None:
            modes = self._modes(bl, saved, needs, cs, mk)
        grads: list = [None] * nsl
        zeros = []
        tdev = self.tdev
        for i in plan.read_idx:
            if needs[i]:
                t = saved[i]
                if modes[i] == 2:
                    grads[i] = torch.empty(t.shape, dtype=dts[i], device=tdev)
                else:
                    grads[i] = g = torch.zeros(t.shape, dtype=dts[i], device=tdev)
                    zeros.append(g)
        if self.host:
            bl.launch(mem, grads, modes, vals, cs, n)
        else:
            with on_torch_stream(self.device, [t for t in mem if t is not None]):
                bl.launch(mem, grads, modes, vals, cs, n)
        if _LOG:
            self._log_backward(mem, grads, modes, zeros, conv, "fast")
        return grads

    def _log_backward(self, mem, grads, modes, zeros, conv, path):
        plan = self.plan
        for g in conv:
            log_event("backward", "copy", path, nbytes_touched(g), nbytes_touched(g))
        for g in zeros:
            log_event("backward", "fill", path, 0, nbytes_touched(g))
        r = sum(nbytes_touched(mem[i]) for i in plan.read_idx)            # the values the bwds kernel reads
        r += sum(nbytes_touched(mem[i]) for i in plan.write_idx)          # the written tensors' gradients
        if self.alloc is not None:
            r += nbytes_touched(mem[plan.n])                             # the result's gradient
        w = 0
        for i, g in enumerate(grads):
            if g is not None:
                w += nbytes_touched(g)
                if modes is None or modes[i] != 2:
                    r += nbytes_touched(g)
        log_event("backward", "kernel", path, r, w)

    @staticmethod
    def _shapes(mem, rs):
        return [tuple(t.shape) if t is not None else None for t in mem[:-1]] + [rs]

    def _grads_list(self, grads_in):
        return list(grads_in) if self.alloc is not None else [None] + list(grads_in)

    def _first_backward(self, saved, e, grads_in, needs, vals, key):
        """The general path's backward (it resolves the .bwds CallData of this needs pattern), then the
        pattern's direct launcher, built from that CallData."""
        plan = self.plan
        cs, n, rs = e
        shapes = [tuple(grads_in[(1 if self.alloc is not None else 0) + plan.write_idx.index(i)].shape)
                  if plan.writes[i] else None for i in range(plan.n)] + [rs]
        grads = plan.backward(saved, shapes, self._grads_list(grads_in), needs, None, self.template(vals))
        bk = (key, None if self.alloc is None else len(cs) + len(self.es))
        cd = plan.cd_bwds.get(bk)
        bl = None
        if cd is not None and _call_data_ok(cd):
            srcs = _leaf_sources(cd)
            if srcs is not None:
                vindex = {p: j for j, p in enumerate(self.vpos)}
                got = _fields_of(cd, plan, srcs, vindex, True, needs)
                if got is not None:
                    bl = _Launch(cd, plan.bwds_node, *got)
        if len(self.bwd) < 64:
            self.bwd[key] = bl if bl is not None else False
        return grads

    def _modes(self, bl, saved, needs, cs, mk):
        """`_goa` per slot: 2 where the threads of the call write every element of a fresh contiguous gradient of
        the input's shape exactly once (no two threads share an element, and there are as many threads as
        elements along the call dims), else 1 (zeros, atomic adds)."""
        modes = [0] * (self.plan.n + 1)
        n = 1
        for c in cs:
            n *= c
        for i, lf in bl.go_leaves.items():
            shp = tuple(saved[i].shape) or (1,)
            st, _ = C.contig_geometry(shp, 1)
            m = 1
            for d in shp[:lf.k]:
                m *= d
            modes[i] = 2 if m == n and lf._distinct_per_thread(shp, st, cs) else 1
        if len(self.modes) < 256:
            self.modes[mk] = modes
        return modes


# ----------------------------------------------------------------------------------------- the autograd node

class FastFunction(torch.autograd.Function):
    """SlangFunction (calls.py) for a call on the direct path: inputs are the call's torch tensors, outputs its
    auto-created result (if any) and then the tensors it writes (marked dirty).  The node keeps the plan's
    FastCall, the call's values and its shape entry; no view and no gradient."""

    @staticmethod
    def forward(ctx, fc: FastCall, vals, *tensors):
        result, e = fc.forward(tensors, vals)
        ctx.fc, ctx.vals, ctx.e = fc, vals, e
        plan = fc.plan
        if plan.write_idx:
            writes = plan.writes
            written = [tensors[i] for i in plan.write_idx]
            ctx.mark_dirty(*written)
            ctx.save_for_backward(*[None if writes[i] else t for i, t in enumerate(tensors)])
            if result is not None:
                return (result, *written)
            return tuple(written)
        ctx.save_for_backward(*tensors)
        return result if result is not None else ()

    @staticmethod
    def backward(ctx, *grads):
        if torch.is_grad_enabled():
            raise RuntimeError("slangjit: double backward (create_graph=True) through a Slang function call is not "
                               "supported; its backward runs the .bwds kernel, which is not itself differentiated")
        g = ctx.fc.backward(ctx.saved_tensors, ctx.e, grads, ctx.needs_input_grad[2:], ctx.vals)
        return (None, None, *g)


# torch.autograd.Function.apply without its Python wrapper (which only matters under functorch transforms: then
# the wrapper runs)
_C_APPLY = torch._C._FunctionBase.__dict__["apply"].__get__(None, FastFunction) \
    if "apply" in getattr(torch._C._FunctionBase, "__dict__", {}) else FastFunction.apply
_functorch_active = torch._C._are_functorch_transforms_active


def autograd_call(fc: FastCall, vals, tensors):
    """A call on the direct path that needs gradients: the node's outputs, as the call returns them."""
    if _functorch_active():
        outs = FastFunction.apply(fc, vals, *tensors)
    else:
        outs = _C_APPLY(fc, vals, *tensors)
    plan = fc.plan
    if not plan.write_idx:
        return outs if plan.alloc is not None else None    # the result itself: no written tensor
    if plan.alloc is not None:
        return outs[0]
    if plan.result_slot is not None:
        return outs[sum(plan.writes[:plan.result_slot])]
    return None
