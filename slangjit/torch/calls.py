"""Module calls with torch tensors (SlangPy's torch integration, on the CPU and CUDA).

`torch_call(node, args, kwargs)` is the handler slangjit.functional.hooks routes a call to when an argument
(top level, or a value of a dict argument for a struct parameter) is a torch tensor:

* every torch tensor is viewed as a spy.Tensor in place (convert.to_spy; all must be on one device, the
  module's), the call is resolved through the functional layer as usual, and the results come back as torch
  tensors on that device: an auto-created result is allocated by torch (its caching allocator, its stream),
  `_result=` a torch tensor and `out` / `inout` torch tensors are written in place;
* when grad mode is on and a tensor requires grad, the call is a `torch.autograd.Function` node: the
  forward runs the kernel on detached views; the backward runs the function's `.bwds` kernel with torch's
  incoming gradients as the outputs' grad_in and fresh zero tensors as the inputs' grad_out (broadcast
  inputs accumulate, so a gradient has its input's shape) and returns those to torch;
* under `torch.compile` the call goes through a `torch.library.custom_op` (ops.py), the same two kernels.

A call with torch tensors is described by a `Plan` (where the tensors sit in the arguments, which ones the
kernel writes, the CallData), cached per argument signature.  This module is the general path; once a plan
has run, dispatch.py gives it a direct launcher where fastpath.py can prove one (`Plan.fast`), and later calls
of that signature skip the views and CallData.run.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from ..functional.calldata import signature
from ..functional.leaves import TensorParamLeaf
from ..functional.values import DiffPair
from ..tensor import Tensor
from . import convert as C
from .launchlog import _LOG, log_event, nbytes_touched
from .streams import on_torch_stream


class _Slot:
    """Marks where the i-th torch tensor of a call sits in its arguments."""
    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i


def _sub(v, label, tensors, labels):
    if isinstance(v, torch.Tensor):
        tensors.append(v)
        labels.append(label)
        return _Slot(len(tensors) - 1)
    if type(v) is dict:
        return {k: _sub(x, f"{label[:-1]}.{k}'" if label.endswith("'") else f"{label}.{k}", tensors, labels)
                for k, x in v.items()}
    if type(v) is DiffPair:          # a diff_pair of tensors (a DiffTensorView argument)
        return v.with_parts(_sub(v.primal, f"{label} (primal)", tensors, labels),
                            _sub(v.grad, f"{label} (grad)", tensors, labels))
    return v


def _fill(v, vals):
    if type(v) is _Slot:
        return vals[v.i]
    if type(v) is dict:
        return {k: _fill(x, vals) for k, x in v.items()}
    if type(v) is tuple:
        return tuple(_fill(x, vals) for x in v)
    if type(v) is DiffPair:
        return v.with_parts(_fill(v.primal, vals), _fill(v.grad, vals))
    return v


def _slots_in(v, out: list):
    if type(v) is _Slot:
        out.append(v.i)
    elif type(v) is dict:
        for x in v.values():
            _slots_in(x, out)
    elif type(v) is DiffPair:
        _slots_in(v.primal, out)
        _slots_in(v.grad, out)
    return out


def split(args: tuple, kwargs: dict):
    """(argument template, keyword template, torch tensors, their labels)."""
    tensors: list = []
    labels: list = []
    targs = tuple(_sub(a, f"argument {i}", tensors, labels) for i, a in enumerate(args))
    tkw = {k: _sub(v, "_result" if k == "_result" else f"argument '{k}'", tensors, labels)
           for k, v in kwargs.items()}
    return targs, tkw, tensors, labels


def common_device(tensors: list, labels: list):
    dev = tensors[0].device
    for t, lab in zip(tensors[1:], labels[1:]):
        if t.device != dev:
            raise ValueError(f"torch tensors on different devices in one call: {labels[0]} is on {dev}, "
                             f"{lab} is on {t.device}")
    return dev


class Plan:
    """One call signature with torch tensors: the resolved CallData and the role of each tensor."""

    def __init__(self, node, targs, tkw, tensors, labels, device, views=None):
        self.node = node
        self.targs, self.tkw = targs, tkw
        self.labels = labels
        self.device = device
        self.n = len(tensors)
        self.scalar_call = all(t.dim() == 0 for t in tensors)
        if views is None:
            views = [C.to_spy(t, device, lab) for t, lab in zip(tensors, labels)]
        args, kwargs = _fill(targs, views), _fill(tkw, views)
        self.mode = node.return_type_mode
        cd = node.resolve(*args, **kwargs)
        self.cd = cd
        # which tensors the kernel writes (out / inout parameters, writable tensor parameters, _result)
        self.writes = [False] * self.n
        self.inout = [False] * self.n
        self.tensor_param = [False] * self.n
        nthis = 1 if node.this is not None else 0
        for b in cd.bound:
            src = cd.sources[b.index]
            if src is None:
                continue
            if src[0] == "pos":
                if src[1] < nthis:
                    continue
                tv = targs[src[1] - nthis]
            else:
                tv = tkw[src[1]]
            idx = _slots_in(tv, [])
            w = b.direction in ("out", "inout") or (isinstance(b.leaf, TensorParamLeaf) and
                                                    getattr(b.leaf, "writes", False))
            for i in idx:
                self.writes[i] = self.writes[i] or w
                self.inout[i] = self.inout[i] or b.direction == "inout"
                self.tensor_param[i] = self.tensor_param[i] or isinstance(b.leaf, TensorParamLeaf)
        rslot = tkw.get("_result")
        self.result_slot = rslot.i if type(rslot) is _Slot else None
        if self.result_slot is not None:
            self.writes[self.result_slot] = True
        for i in range(self.n):
            if self.writes[i]:
                C.check_writable(tensors[i], labels[i])
        # an auto-created result, allocated by torch
        self.alloc = None                 # (torch dtype, element dims)
        self.struct_result = False
        if cd.result is not None and cd.auto_result == "tensor" and self.mode is None:
            td = C.torch_dtype_of(cd.ret_t)
            if td is None:
                self.struct_result = True
            else:
                self.alloc = td
        self.ret_t = cd.ret_t
        self.write_idx = [i for i in range(self.n) if self.writes[i]]
        self.dtypes = [t.dtype for t in tensors]
        self.tdev = tensors[0].device
        self.differentiable_out = cd.result is not None and cd.ret_t.differentiable

        # flat templates: the positions of top-level tensors (dict arguments go through _fill)
        self.flat = not any(type(v) in (dict, DiffPair) for v in list(targs) + list(tkw.values()))
        self.pos_slots = [(k, v.i) for k, v in enumerate(targs) if type(v) is _Slot]
        self.kw_slots = [(k, v.i) for k, v in tkw.items() if type(v) is _Slot]
        self.this = (node.this,) if node.this is not None else ()
        self.cd_res = None               # the CallData of the call with the torch result bound as _result
        self.bwds_node = None
        self.cd_bwds: dict = {}           # which views carry grads -> the .bwds CallData
        # per-signature facts the hot path reuses (all fixed by the plan key: dtypes, ranks, device, roles)
        self.host = bool(getattr(device, "_host_memory", True))
        self.stypes = [C.spy_dtype_of(t.dtype, lab) for t, lab in zip(tensors, labels)]
        self.isz = [t.element_size() for t in tensors]
        self.res_stype = C.spy_dtype_of(self.alloc[0], "_result") if self.alloc is not None else None
        self.res_isz = self.alloc[0].itemsize if self.alloc is not None else 0
        self.read_idx = [i for i in range(self.n) if not self.writes[i]]
        # the views' shapes -> the call shape: a function of those shapes alone when every other argument is
        # a Python number (numpy arrays, spy tensors, instances carry shapes the plan key does not hold)
        only_numbers = node.this is None and not any(k.startswith("_") and k != "_result" for k in tkw) and \
            all(type(v) is _Slot or type(v) in (int, float, bool) for v in list(targs) + list(tkw.values()))
        self.cs_cache: Optional[dict] = {} if only_numbers else None
        self.autograd_error = _autograd_error(self)
        self.int_slots = [i for i in range(self.n) if not self.dtypes[i].is_floating_point]
        self.fast = None                  # the direct path (fastpath.FastCall), False where it cannot serve

    # -- running

    def template(self, args, kwargs):
        """This call's arguments without its torch tensors (the values of its other arguments: numbers,
        arrays, ... are not part of the plan's key, so every call brings its own).  Holds no torch tensor (an
        autograd node keeps it for the backward)."""
        if self.flat:
            a = list(args)
            for k, _ in self.pos_slots:
                a[k] = None
            kw = dict(kwargs)
            for k, _ in self.kw_slots:
                kw[k] = None
            return a, kw
        targs, tkw, _, _ = split(args, kwargs)
        return targs, tkw

    def args_of(self, views, tpl=None):
        """(positional arguments including `this`, keyword arguments) of the call `tpl` (a `template`;
        default: the call the plan was made from) with the views in the tensors' places."""
        targs, tkw = tpl if tpl is not None else (self.targs, self.tkw)
        if self.flat:
            args = list(targs)
            for k, i in self.pos_slots:
                args[k] = views[i]
            kwargs = dict(tkw)
            for k, i in self.kw_slots:
                kwargs[k] = views[i]
            return self.this + tuple(args), kwargs
        return self.this + _fill(tuple(targs), views), _fill(tkw, views)

    def views(self, tensors):
        dev = self.device
        if self.host:
            hv = C.host_view
            return [hv(t, dev, st, True, isz) for t, st, isz in zip(tensors, self.stypes, self.isz)]
        return [C.to_spy(t, dev, lab, st) for t, lab, st in zip(tensors, self.labels, self.stypes)]

    def _view(self, t, label, st, isz=0):
        return C.host_view(t, self.device, st, True, isz) if self.host else C.to_spy(t, self.device, label, st)

    def result_shape(self, views) -> tuple:
        args, kwargs = self.args_of(views)
        return tuple(self.cd.call_shape(args, kwargs))

    def run(self, tensors, views=None, tpl=None):
        """The forward call `tpl` (a `template`; default: the plan's own call): (the call's return value,
        converted; the torch result tensor or None).  `views` (optional, filled here): the spy views of the
        tensors, for the backward to reuse."""
        vs = self.views(tensors)
        if views is not None:
            views.extend(vs)
        args, kwargs = self.args_of(vs, tpl)
        result = None
        with on_torch_stream(self.device, tensors):
            if self.alloc is not None:
                dt, es = self.alloc
                if self.cs_cache is not None:
                    shp = tuple([v._shape for v in vs])
                    cs = self.cs_cache.get(shp)
                    if cs is None:
                        cs = tuple(self.cd.call_shape(args, kwargs))
                        if len(self.cs_cache) < 256:
                            self.cs_cache[shp] = cs
                else:
                    cs = tuple(self.cd.call_shape(args, kwargs))
                rs = cs + es if es else cs
                result = torch.empty(rs, dtype=dt, device=self.tdev)
                if self.host:
                    kwargs["_result"] = C.contig_host_view(result, self.device, self.res_stype, rs, self.res_isz)
                else:
                    kwargs["_result"] = self._view(result, "_result", self.res_stype)
                cd = self.cd_res
                if cd is None:
                    cd = self.cd_res = self.node.resolve(*args[len(self.this):], **kwargs)
                cd.run(args, kwargs)
                if _LOG:
                    self._log_forward(tensors, result)
                if self.scalar_call and cs == (1,):
                    result = result.reshape(es)
                return result, result
            ret = self.node(*args[len(self.this):], **kwargs)
        if _LOG:
            self._log_forward(tensors, None)
        if self.result_slot is not None:
            return tensors[self.result_slot], tensors[self.result_slot]
        if isinstance(ret, Tensor) and self.struct_result:
            return _struct_to_torch(ret, tensors[0].device), None
        return ret, None

    def backward(self, tensors, shapes, grads_out, needs, fwd_views=None, tpl=None):
        """Gradients of the tensors (None where not needed) from the output gradients: `grads_out[0]` is the
        auto-created result's (or None), then one per written tensor in order.  `tensors` holds the inputs the
        kernel reads (None for written ones: their gradient stands in as the primal, which bwds never reads);
        `shapes` the written tensors' and the result's shapes (indexed like `tensors`, the result last; other
        entries unused).  `fwd_views` (optional): the forward's views of the read tensors (None for written
        ones), reused instead of viewing `tensors` again; their gradient fields are set here.  `tpl`: the call's
        `template` (default: the plan's own call)."""
        views = []
        grads: list = [None] * self.n
        wi = 0
        writes, stypes = self.writes, self.stypes
        for i, t in enumerate(tensors):
            st = stypes[i]
            if writes[i]:
                g = grads_out[1 + wi]
                wi += 1
                if g is None:
                    g = torch.zeros(shapes[i], dtype=self.dtypes[i], device=self.tdev)
                elif g.dtype != self.dtypes[i]:
                    g = g.to(self.dtypes[i])
                v = self._view(g, self.labels[i], st, self.isz[i])
                v.grad_in = v
            else:
                v = fwd_views[i] if fwd_views is not None else self._view(t, self.labels[i], st)
                v.grad_in = None
                if needs[i]:
                    g = torch.zeros(t.shape, dtype=t.dtype, device=self.tdev)
                    grads[i] = g
                    v.grad_out = C.contig_host_view(g, self.device, st, v._shape, self.isz[i]) if self.host \
                        else self._view(g, self.labels[i], st)
                else:
                    v.grad_out = None
            views.append(v)
        args, kwargs = self.args_of(views, tpl)
        if self.alloc is not None:
            g = grads_out[0]
            if g is None:
                g = torch.zeros(shapes[-1], dtype=self.alloc[0], device=self.tdev)
            elif g.dtype != self.alloc[0]:
                g = g.to(self.alloc[0])
            if self.scalar_call:
                g = g.reshape((1,) + self.alloc[1])
            rv = self._view(g, "the result's gradient", self.res_stype, self.res_isz)
            rv.grad_in = rv
            kwargs["_result"] = rv
        # which views carry gradients (the loop above: written ones grad_in, read ones grad_out where needed)
        bk = (tuple(needs), None if self.alloc is None else len(kwargs["_result"]._shape))
        cd = self.cd_bwds.get(bk)
        if self.host:
            if cd is None:
                cd = self._resolve_bwds(bk, args, kwargs)
            cd.run(args, kwargs)
        else:
            with on_torch_stream(self.device, [t for t in tensors if t is not None]):
                if cd is None:
                    cd = self._resolve_bwds(bk, args, kwargs)
                cd.run(args, kwargs)
        if fwd_views is not None:
            # the node keeps the forward's views: none may keep a gradient alive (torch's AccumulateGrad copies
            # a gradient something else still references instead of taking it as .grad)
            for v in fwd_views:
                if v is not None:
                    v.grad_out = None
        if _LOG:
            self._log_backward(tensors, grads_out, grads)
        return grads

    def _log_forward(self, tensors, result):
        log_event("forward", "kernel", "general", sum(nbytes_touched(tensors[i]) for i in self.read_idx),
                  sum(nbytes_touched(tensors[i]) for i in self.write_idx) +
                  (nbytes_touched(result) if result is not None else 0))

    def _log_backward(self, tensors, grads_out, grads):
        gs = [g for g in grads if g is not None]
        for g in gs:
            log_event("backward", "fill", "general", 0, nbytes_touched(g))
        r = sum(nbytes_touched(tensors[i]) for i in self.read_idx) + sum(nbytes_touched(g) for g in gs)
        r += sum(nbytes_touched(g) for g in grads_out if g is not None)
        log_event("backward", "kernel", "general", r, sum(nbytes_touched(g) for g in gs))

    def _resolve_bwds(self, bk, args, kwargs):
        if self.bwds_node is None:
            self.bwds_node = self.node.bwds
        cd = self.cd_bwds[bk] = self.bwds_node.resolve(*args[len(self.this):], **kwargs)
        return cd


def _struct_to_torch(v: Tensor, tdev):
    """A struct-typed result: a dict of torch tensors, one per field (as Tensor.to_numpy's structured array)."""
    a = v.to_numpy()
    if a.dtype.names is None:
        return torch.from_numpy(a).to(tdev)
    return {n: torch.from_numpy(a[n].copy()).to(tdev) for n in a.dtype.names}


_PLANS: dict = {}


def _tsig(t):
    return (t.dtype, t.dim(), t.get_device(), t.is_cpu, t.is_cuda)


def _asig(v):
    if type(v) is _Slot:
        return v.i
    if type(v) is dict:
        return tuple((k, _asig(x)) for k, x in v.items())
    return signature(v)


def _fast_key(node, args, kwargs):
    """The plan key of a call whose torch tensors are all top-level arguments (else None)."""
    ks = [id(node), tuple(kwargs)]             # the keyword names, then every argument's signature in order
    tensors = []
    for a in (args + tuple(kwargs.values())) if kwargs else args:
        if isinstance(a, torch.Tensor):
            tensors.append(a)
            ks.append((a.dtype, a.dim(), a.device))
        elif type(a) is dict:
            return None, None
        else:
            ks.append(signature(a))
    return tuple(ks), tensors


def plan_for(node, args, kwargs):
    """(the plan of this call's signature, its torch tensors, the call's `template`)."""
    key, tensors = _fast_key(node, args, kwargs)
    p = _PLANS.get(key) if key is not None else None
    if p is None:
        targs, tkw, tensors, labels = split(args, kwargs)
        device = node.function.module.device
        tdev = common_device(tensors, labels)
        C.check_device(device, tdev, labels[0])
        if key is None:
            key = (id(node), tuple(map(_tsig, tensors)), tuple(map(_asig, targs)),
                   tuple((k, _asig(v)) for k, v in tkw.items()))
            p = _PLANS.get(key)
        if p is None or p.node is not node:
            p = Plan(node, targs, tkw, tensors, labels, device)
            if len(_PLANS) > 4096:
                _PLANS.clear()
            _PLANS[key] = p
            return p, tensors, (targs, tkw)
        if not p.flat:
            for i in p.write_idx:
                C.check_writable(tensors[i], p.labels[i])
            return p, tensors, (targs, tkw)
    for i in p.write_idx:
        C.check_writable(tensors[i], p.labels[i])
    return p, tensors, p.template(args, kwargs)


class SlangFunction(torch.autograd.Function):
    """One call as an autograd node: inputs are the call's torch tensors, outputs its auto-created result
    (if any) and then the tensors it writes (out parameters, `_result=`), marked dirty."""

    @staticmethod
    def forward(ctx, plan: Plan, tpl, *tensors):
        views: list = []
        ret, result = plan.run(tensors, views, tpl)
        ctx.plan = plan
        ctx.tpl = tpl
        writes = plan.writes
        if plan.write_idx:
            written = [tensors[i] for i in plan.write_idx]
            ctx.mark_dirty(*written)
            ctx.save_for_backward(*[None if writes[i] else t for i, t in enumerate(tensors)])
            # the views of read tensors only: a written tensor's grad_fn is this node (no reference cycle)
            ctx.views = [None if writes[i] else v for i, v in enumerate(views)]
            shapes = [tuple(t.shape) if writes[i] else None for i, t in enumerate(tensors)]
        else:
            written = []
            ctx.save_for_backward(*tensors)
            ctx.views = views
            shapes = [None] * plan.n
        if plan.alloc is not None:
            shapes.append(tuple(result.shape))
            ctx.shapes = shapes
            return (result, *written)
        ctx.shapes = shapes
        return tuple(written)

    @staticmethod
    def backward(ctx, *grads):
        if torch.is_grad_enabled():
            raise RuntimeError("slangjit: double backward (create_graph=True) through a Slang function call is not "
                               "supported; its backward runs the .bwds kernel, which is not itself differentiated")
        plan: Plan = ctx.plan
        saved = ctx.saved_tensors          # torch's check that no saved input was modified in place since
        gl = grads if plan.alloc is not None else (None, *grads)
        g = plan.backward(saved, ctx.shapes, gl, ctx.needs_input_grad[2:], ctx.views, ctx.tpl)
        return (None, None, *g)


def _autograd_error(plan: Plan) -> Optional[str]:
    """Why this call signature cannot be an autograd node (None: it can)."""
    for i in range(plan.n):
        if plan.inout[i]:
            return (f"{plan.labels[i]} is an inout parameter in a call that needs gradients: not supported (its old "
                    "value would be overwritten before the backward reads it); pass the input and an out tensor "
                    "separately")
        if plan.tensor_param[i]:
            return (f"{plan.labels[i]} is bound to a tensor-typed parameter (ITensor / IDiffTensor / TensorView ...) in a call "
                    "that needs gradients: not supported through torch.autograd; use element parameters (float, "
                    "float3, structs) so the call is vectorised")
    if plan.struct_result:
        return ("a struct-typed result of a call that needs gradients: not supported; return the fields through "
                "out parameters")
    if plan.mode is not None:
        return ("_result='numpy' / 'tensor' in a call that needs gradients: the result must stay a torch tensor "
                "for autograd")
    return None


def check_autograd(plan: Plan, tensors) -> None:
    """Refuses a call that needs gradients but cannot be an autograd node (the plan's verdict, cached per
    signature), or one where an integer tensor requires grad."""
    if plan.autograd_error is not None:
        raise ValueError(plan.autograd_error)
    for i in plan.int_slots:
        if tensors[i].requires_grad:
            raise ValueError(f"{plan.labels[i]}: an integer tensor cannot require grad")
