"""Calls with torch tensors under torch.compile: one `torch.library.custom_op` per call signature.

PyTorch's documented way to put an opaque kernel in a compiled graph.  For a call signature (the function,
its modifiers, where the torch tensors sit among the arguments, their dtypes, ranks and devices) two ops are
registered, `slangjit::c<N>` and `slangjit::c<N>_bwd`:

* `c<N>(ins: list[Tensor], outs: list[Tensor]) -> list[Tensor]`: `ins` the tensors the kernel reads, `outs`
  those it writes (out parameters, `_result=`); returns the auto-created result (if any) and then new
  tensors holding what the kernel wrote for each of `outs`, which the caller copies into them (a
  functional op, so it can carry an autograd formula; PyTorch refuses one on a mutating op).
  `register_fake` gives the result's shape from the arguments' shapes (the call shape, computed by the
  functional layer from shape-only views).
* `c<N>_mut(ins, outs) -> Tensor | None` (calls with outs that need no gradients): writes `outs` in place,
  declared in `mutates_args`.
* `register_autograd` saves `ins` and runs `c<N>_bwd(ins, grads) -> list[Tensor]` (the `.bwds` kernel),
  itself a custom op with a fake implementation, so AOTAutograd traces the backward too.

`compiled_call` (calls.torch_call under torch.compile) and `op_and_args` (for torch.library.opcheck) use
the same registry.
"""
from __future__ import annotations

import itertools

import torch

from ..functional.function import Function, FunctionNode
from . import convert as C
from .calls import Plan, _Slot, _asig, _fill, _tsig, check_autograd, common_device, plan_for, split
from .fastpath import FastCall

_SPECS: dict = {}
_COUNTER = itertools.count()


class OpSpec:
    def __init__(self, node, targs, tkw, tensors, labels, device):
        views = [C.shape_view(t, device, lab) for t, lab in zip(tensors, labels)]
        plan = Plan(node, targs, tkw, tensors, labels, device, views=views)
        if plan.struct_result or plan.mode is not None:
            raise ValueError("under torch.compile a call's result must be a torch tensor of a scalar, vector or "
                             "matrix type (struct results and _result='numpy' / 'tensor' are eager-only)")
        for i in range(plan.n):
            if plan.inout[i] or plan.tensor_param[i]:
                check_autograd(plan, tensors)
        self.node, self.targs, self.tkw, self.labels, self.device = node, targs, tkw, labels, device
        self.n = plan.n
        self.writes = list(plan.writes)
        self.alloc = plan.alloc
        self.scalar_call = plan.scalar_call
        self.cd = plan.cd
        self.in_idx = [i for i in range(self.n) if not self.writes[i]]
        self.out_idx = [i for i in range(self.n) if self.writes[i]]
        self.grad_idx = [i for i in self.in_idx if tensors[i].dtype.is_floating_point]
        self.result_pos = None
        rs = tkw.get("_result")
        if rs is not None and hasattr(rs, "i"):
            self.result_pos = self.out_idx.index(rs.i)
        self.name = f"c{next(_COUNTER)}"
        self._register()

    # -- helpers

    def merge(self, ins, outs):
        t = [None] * self.n
        for i, v in zip(self.in_idx, ins):
            t[i] = v
        for i, v in zip(self.out_idx, outs):
            t[i] = v
        return t

    def result_shape(self, tensors) -> tuple:
        views = [C.shape_view(t, self.device, lab) for t, lab in zip(tensors, self.labels)]
        args, kwargs = _fill(self.targs, views), _fill(self.tkw, views)
        cs = tuple(self.cd.call_shape(args, kwargs))
        if self.scalar_call and cs == (1,):
            cs = ()
        return cs + self.alloc[1]

    def _eager_plan(self, tensors):
        """The eager plan of this spec's call with `tensors`, bound to the spec's own argument values."""
        args, kwargs = _fill(self.targs, tensors), _fill(self.tkw, tensors)
        return _Bound(*plan_for(self.node, args, kwargs), args, kwargs)

    # -- registration

    def _register(self):
        spec = self
        n_out = len(self.out_idx)

        def fake_result(tensors):
            return [tensors[0].new_empty(spec.result_shape(tensors), dtype=spec.alloc[0])] \
                if spec.alloc is not None else []

        # the functional op: out parameters come back as new tensors (the caller copies them into its outs),
        # so it can carry an autograd formula
        @torch.library.custom_op(f"slangjit::{self.name}", mutates_args=())
        def fwd(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> list[torch.Tensor]:
            fresh = [torch.empty_like(o) for o in outs]
            tensors = spec.merge(ins, fresh)
            with torch.no_grad():
                ret, result = spec._eager_plan(tensors).run(tensors)
            return ([result] if spec.alloc is not None else []) + fresh

        @fwd.register_fake
        def _(ins, outs):
            tensors = spec.merge(ins, outs)
            return fake_result(tensors) + [torch.empty_like(o) for o in outs]

        @torch.library.custom_op(f"slangjit::{self.name}_bwd", mutates_args=())
        def bwd(ins: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
            outs = grads[1:] if spec.alloc is not None else grads
            tensors = spec.merge(ins, list(outs))
            plan = spec._eager_plan(tensors)
            saved = [None if spec.writes[i] else t for i, t in enumerate(tensors)]
            shapes = [tuple(t.shape) for t in tensors] + [tuple(grads[0].shape) if spec.alloc is not None else ()]
            gl = list(grads) if spec.alloc is not None else [None] + list(grads)
            needs = [i in spec.grad_idx for i in range(spec.n)]
            g = plan.backward(saved, shapes, gl, needs)
            return [g[i] for i in spec.grad_idx]

        @bwd.register_fake
        def _(ins, grads):
            tensors = spec.merge(ins, [None] * n_out)
            return [torch.empty_like(tensors[i]) for i in spec.grad_idx]

        def setup_context(ctx, inputs, output):
            ins, outs = inputs
            ctx.save_for_backward(*ins)
            ctx.shapes = [(tuple(o.shape), o.dtype, o.device) for o in output]

        def backward(ctx, grads):
            ins = list(ctx.saved_tensors)
            gl = [g if g is not None else torch.zeros(shp, dtype=dt, device=dev)
                  for g, (shp, dt, dev) in zip(grads, ctx.shapes)]
            gs = bwd(ins, gl)
            full = [None] * len(ins)
            for k, i in enumerate(spec.grad_idx):
                full[spec.in_idx.index(i)] = gs[k]
            return full, [None] * n_out

        fwd.register_autograd(backward, setup_context=setup_context)
        self.op = fwd
        self.bwd_op = bwd
        self.mut_op = None
        if n_out:
            # the in-place op for calls that need no gradients: the out tensors are declared mutated
            if spec.alloc is not None:
                @torch.library.custom_op(f"slangjit::{self.name}_mut", mutates_args=("outs",))
                def mut(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> torch.Tensor:
                    tensors = spec.merge(ins, outs)
                    with torch.no_grad():
                        return spec._eager_plan(tensors).run(tensors)[1]

                @mut.register_fake
                def _(ins, outs):
                    return fake_result(spec.merge(ins, outs))[0]
            else:
                @torch.library.custom_op(f"slangjit::{self.name}_mut", mutates_args=("outs",))
                def mut(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
                    tensors = spec.merge(ins, outs)
                    with torch.no_grad():
                        spec._eager_plan(tensors).run(tensors)

                @mut.register_fake
                def _(ins, outs):
                    return None

            self.mut_op = mut

    def pick(self, ins, outs):
        """The op a call uses: the in-place one unless gradients are needed (or there are no outs)."""
        if self.mut_op is not None and not (torch.is_grad_enabled() and any(t.requires_grad for t in ins)):
            return self.mut_op, False
        return self.op, True


class _Bound:
    """A plan with one call's `template` (its non-tensor argument values) and arguments: the plan's direct path
    (fastpath.py) where it has one, else the general path."""
    __slots__ = ("plan", "tpl", "args", "kwargs")

    def __init__(self, plan, tensors, tpl, args, kwargs):
        self.plan, self.tpl, self.args, self.kwargs = plan, tpl, args, kwargs

    def run(self, tensors):
        """(the call's return value, the auto-created result or None)."""
        plan = self.plan
        fc = plan.fast
        if fc:
            result, _ = fc.forward(tensors, fc.values(self.args, self.kwargs))
            if result is None and plan.result_slot is not None:
                result = tensors[plan.result_slot]
            return result, result
        r = plan.run(tensors, None, self.tpl)
        if plan.fast is None:
            plan.fast = FastCall.build(plan) or False
        return r

    def backward(self, tensors, shapes, grads_out, needs):
        """`grads_out`: [the result's gradient or None] + the written tensors' (as Plan.backward)."""
        plan = self.plan
        fc = plan.fast
        if fc:
            vals = fc.values(self.args, self.kwargs)
            full = [t if t is not None else torch.empty(0) for t in tensors]
            for k, i in enumerate(plan.write_idx):
                full[i] = grads_out[1 + k]
            shp = tuple([t.shape for t in full])
            e = fc.entries.get(shp) or fc._entry(full, vals, shp)
            gin = grads_out if plan.alloc is not None else grads_out[1:]
            return fc.backward(tensors, e, gin, needs, vals)
        return plan.backward(tensors, shapes, grads_out, needs, None, self.tpl)


def _vsig(v):
    """A non-tensor argument's part of a spec key: its value (a spec bakes its arguments' values into its
    ops), by identity where it has no hashable value (the spec keeps the object, so the id stays its own)."""
    if type(v) is dict:
        return tuple((k, _vsig(x)) for k, x in v.items())
    if type(v) is _Slot:
        return ("slot", v.i)
    try:
        hash(v)
        return (type(v), v)
    except TypeError:
        return ("id", id(v))


def spec_for(node, args, kwargs):
    targs, tkw, tensors, labels = split(args, kwargs)
    device = node.function.module.device
    tdev = common_device(tensors, labels)
    C.check_device(device, tdev, labels[0])
    key = (id(node.function), node._key, 0 if node.this is None else id(node.this), tuple(map(_tsig, tensors)),
           tuple(map(_asig, targs)), tuple((k, _asig(v)) for k, v in tkw.items()),
           tuple(map(_vsig, targs)), tuple((k, _vsig(v)) for k, v in tkw.items()))
    s = _SPECS.get(key)
    if s is None:
        s = _SPECS[key] = OpSpec(node, targs, tkw, tensors, labels, device)
    return s, tensors


for _cls in (FunctionNode, Function):
    torch.utils._pytree.register_constant(_cls)


@torch._dynamo.nonstrict_trace
def _compiled_values(node, args, kwargs) -> list:
    """[the auto-created result (if any)] + the new values of the written tensors (the functional op)."""
    spec, tensors = spec_for(node, args, kwargs)
    return spec.op([tensors[i] for i in spec.in_idx], [tensors[i] for i in spec.out_idx])


def compiled_call(node, args, kwargs):
    """A call being compiled by torch.compile: the functional custom op (traced as one node; dynamo does not
    look inside `_compiled_values`), then the written tensors updated with `copy_` (which the compiler
    sees, so the mutation is in the graph)."""
    r = _compiled_values(node, args, kwargs)
    spec, tensors = spec_for(node, args, kwargs)
    k = 1 if spec.alloc is not None else 0
    outs = [tensors[i] for i in spec.out_idx]
    for o, v in zip(outs, r[k:]):
        o.copy_(v)
    if k:
        return r[0]
    if spec.result_pos is not None:
        return outs[spec.result_pos]
    return None


def op_and_args(function, args, kwargs):
    spec, tensors = spec_for(function, args, kwargs)
    ins = [tensors[i] for i in spec.in_idx]
    outs = [tensors[i] for i in spec.out_idx]
    return spec.pick(ins, outs)[0], (ins, outs)
