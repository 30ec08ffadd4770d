"""Calls with torch tensors under torch.compile: one `torch.library.custom_op` per call signature.

PyTorch's documented way to put an opaque kernel in a compiled graph.  For a call signature (the function,
its modifiers, where the torch tensors sit among the arguments, their dtypes, ranks and devices) two ops are
registered, `slangjit::c<N>` and `slangjit::c<N>_bwd`:

* `c<N>(ins: list[Tensor], outs: list[Tensor]) -> list[Tensor]`: `ins` the tensors the kernel reads, `outs`
  those it writes (out / inout parameters, `_result=`; declared in `mutates_args`); returns the
  auto-created result ([] when there is none).  `register_fake` gives the result's shape from the
  arguments' shapes (the call shape, computed by the functional layer from shape-only views).
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
from .calls import Plan, _asig, _fill, _tsig, check_autograd, common_device, plan_for, split

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
        p, _ = plan_for(self.node, _fill(self.targs, tensors), _fill(self.tkw, tensors))
        return p

    # -- registration

    def _register(self):
        spec = self
        mut = ("outs",) if self.out_idx else ()

        @torch.library.custom_op(f"slangjit::{self.name}", mutates_args=mut)
        def fwd(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> list[torch.Tensor]:
            tensors = spec.merge(ins, outs)
            with torch.no_grad():
                ret, result = spec._eager_plan(tensors).run(tensors)
            return [result] if spec.alloc is not None else []

        @fwd.register_fake
        def _(ins, outs):
            if spec.alloc is None:
                return []
            tensors = spec.merge(ins, outs)
            return [tensors[0].new_empty(spec.result_shape(tensors), dtype=spec.alloc[0])]

        @torch.library.custom_op(f"slangjit::{self.name}_bwd", mutates_args=())
        def bwd(ins: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
            outs = grads[1:] if spec.alloc is not None else grads
            tensors = spec.merge(ins, [g for g in outs])
            plan = spec._eager_plan(tensors)
            saved = [None if spec.writes[i] else t for i, t in enumerate(tensors)]
            shapes = [tuple(t.shape) for t in tensors] + [tuple(grads[0].shape) if spec.alloc is not None else ()]
            gl = list(grads) if spec.alloc is not None else [None] + list(grads)
            needs = [i in spec.grad_idx for i in range(spec.n)]
            g = plan.backward(saved, shapes, gl, needs)
            return [g[i] for i in spec.grad_idx]

        @bwd.register_fake
        def _(ins, grads):
            tensors = spec.merge(ins, [None] * len(spec.out_idx))
            return [torch.empty_like(tensors[i]) for i in spec.grad_idx]

        def setup_context(ctx, inputs, output):
            ins, outs = inputs
            ctx.save_for_backward(*ins)
            ctx.out_shapes = [(tuple(o.shape), o.dtype) for o in outs]
            ctx.res_shape = (tuple(output[0].shape), output[0].dtype) if spec.alloc is not None else None

        def backward(ctx, grads):
            ins = list(ctx.saved_tensors)
            gl = []
            if spec.alloc is not None:
                g = grads[0]
                gl.append(g if g is not None else torch.zeros(ctx.res_shape[0], dtype=ctx.res_shape[1],
                                                              device=ins[0].device if ins else "cpu"))
            # outs are mutated inputs: their incoming gradients are not passed to a custom op's backward;
            # the kernel's dependence on them is through the result only
            for shp, dt in ctx.out_shapes:
                gl.append(torch.zeros(shp, dtype=dt, device=ins[0].device if ins else "cpu"))
            gs = bwd(ins, gl)
            full = [None] * len(ins)
            for k, i in enumerate(spec.grad_idx):
                full[spec.in_idx.index(i)] = gs[k]
            return full, [None] * len(ctx.out_shapes)

        fwd.register_autograd(backward, setup_context=setup_context)
        self.op = fwd
        self.bwd_op = bwd


def spec_for(node, args, kwargs):
    targs, tkw, tensors, labels = split(args, kwargs)
    device = node.function.module.device
    tdev = common_device(tensors, labels)
    C.check_device(device, tdev, labels[0])
    key = (id(node.function), node._key, id(node.this), tuple(map(_tsig, tensors)),
           tuple(map(_asig, targs)), tuple((k, _asig(v)) for k, v in tkw.items()))
    s = _SPECS.get(key)
    if s is None:
        s = _SPECS[key] = OpSpec(node, targs, tkw, tensors, labels, device)
    return s, tensors


for _cls in (FunctionNode, Function):
    torch.utils._pytree.register_constant(_cls)


@torch._dynamo.nonstrict_trace
def compiled_call(node, args, kwargs):
    spec, tensors = spec_for(node, args, kwargs)
    ins = [tensors[i] for i in spec.in_idx]
    outs = [tensors[i] for i in spec.out_idx]
    r = spec.op(ins, outs)
    if spec.alloc is not None:
        return r[0]
    if spec.result_pos is not None:
        return outs[spec.result_pos]
    return None


def op_and_args(function, args, kwargs):
    spec, tensors = spec_for(function, args, kwargs)
    return spec.op, ([tensors[i] for i in spec.in_idx], [tensors[i] for i in spec.out_idx])
