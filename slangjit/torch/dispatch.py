"""The entry of a module call with torch tensors (the functional layer's hook, see slangjit/__init__.py):
eager calls run as plain calls or autograd nodes (calls.py), calls being compiled by torch.compile go
through their custom op (ops.py)."""
from __future__ import annotations

import torch

from .calls import SlangFunction, check_autograd, plan_for
from .ops import compiled_call


def torch_call(node, args: tuple, kwargs: dict):
    """The functional layer's hook for calls with torch tensors (see the module docstring)."""
    if node.bwds_mode:
        raise ValueError(f"'{node.function.name}'.bwds with torch tensors: gradients of calls with torch tensors "
                         "come from torch.autograd (call the function with tensors that require grad, then "
                         ".backward())")
    r = kwargs.get("_result")
    if isinstance(r, (str, type)):
        kwargs = dict(kwargs)
        del kwargs["_result"]
        node = node.return_type(r)
    if torch.compiler.is_compiling():
        return compiled_call(node, args, kwargs)
    plan, tensors, tpl = plan_for(node, args, kwargs)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        check_autograd(plan, tensors)
        outs = SlangFunction.apply(plan, tpl, *tensors)
        if plan.alloc is not None:
            return outs[0]
        if plan.result_slot is not None:
            return outs[sum(plan.writes[:plan.result_slot])]
        return None
    return plan.run(tensors, None, tpl)[0]          # nothing requires grad: torch records nothing
