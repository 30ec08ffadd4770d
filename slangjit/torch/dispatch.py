"""The entry of a module call with torch tensors (the functional layer's hook, see slangjit/__init__.py):
eager calls run as plain calls or autograd nodes, on the direct path (fastpath.py) once their signature's plan
has one, else on the general path (calls.py); calls being compiled by torch.compile go through their custom op
(ops.py)."""
from __future__ import annotations

import torch

from ..functional.values import DiffPair
from . import convert as C
from .calls import _PLANS, SlangFunction, _fast_key, check_autograd, plan_for
from .fastpath import FastCall, autograd_call
from .ops import compiled_call

_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


def torch_call(node, args: tuple, kwargs: dict):
    """The functional layer's hook for calls with torch tensors (see the module docstring)."""
    if node.bwds_mode:
        if any(type(a) is DiffPair for a in (*args, *kwargs.values())):
            # diff_pairs of tensors (DiffTensorView arguments, as SlangPy): the .bwds kernel on the tensors as given
            plan, tensors, tpl = plan_for(node, args, kwargs)
            return plan.run(tensors, None, tpl)[0]
        raise ValueError(f"'{node.function.name}'.bwds with torch tensors: gradients of calls with torch tensors "
                         "come from torch.autograd (call the function with tensors that require grad, then "
                         ".backward())")
    if kwargs:
        r = kwargs.get("_result")
        if isinstance(r, (str, type)):
            kwargs = dict(kwargs)
            del kwargs["_result"]
            node = node.return_type(r)
    if _is_compiling():
        return compiled_call(node, args, kwargs)
    key, tensors = _fast_key(node, args, kwargs)
    plan = _PLANS.get(key) if key is not None else None
    fc = plan.fast if plan is not None else None
    if fc:
        # the direct path: the key above fixed dtypes, ranks, devices and argument kinds
        for i in plan.write_idx:
            C.check_writable(tensors[i], plan.labels[i])
        vals = fc.values(args, kwargs)
        if _grad_enabled():
            for t in tensors:
                if t.requires_grad:
                    check_autograd(plan, tensors)
                    return autograd_call(fc, vals, tensors)
        return fc.call(tensors, vals)
    plan, tensors, tpl = plan_for(node, args, kwargs)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        check_autograd(plan, tensors)
        outs = SlangFunction.apply(plan, tpl, *tensors)
        ret = outs[0] if plan.alloc is not None else \
            outs[sum(plan.writes[:plan.result_slot])] if plan.result_slot is not None else None
    else:
        ret = plan.run(tensors, None, tpl)[0]          # nothing requires grad: torch records nothing
    if plan.fast is None:
        plan.fast = FastCall.build(plan) or False
    return ret
