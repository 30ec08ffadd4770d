"""PyTorch integration (stage 11; needs torch, imported only when used).

SlangPy's way (this package, docs/torch.md "SlangPy-style calls with torch tensors"): pass torch tensors to
module calls; results are torch tensors, the call is an autograd node when a tensor requires grad
(calls.py), a `torch.library.custom_op` under torch.compile (ops.py), and runs on torch's current CUDA stream
(streams.py).  `slangjit` routes calls here through slangjit.functional.hooks on the first torch argument.

slang-torch's way (`loadModule`, TensorView, DiffTensorView) lives in slangjit/torch/bindings/.
"""
from __future__ import annotations

import torch

from ..functional.calldata import register_signature
from ..runtime.cuda import CudaDevice
from ..runtime.device import DeviceType, create_device
from ..tensor import Tensor
from . import convert
from .calls import SlangFunction
from .dispatch import torch_call
from .launchlog import LaunchLog, launch_log
from .ops import op_and_args
from .convert import check_device, from_spy, spy_from_torch

# a torch tensor's part of a call signature (the torch path keys its own plans by dtype, rank and device)
for _tp in (torch.Tensor, torch.nn.Parameter):
    register_signature(_tp, lambda v: ("torch",))

from .bindings import DiffTensorView, autograd_function, clearSessionShaderCache, loadModule   # seed 004

__all__ = ["loadModule", "DiffTensorView", "autograd_function", "clearSessionShaderCache", "create_torch_device", "to_torch", "from_torch", "torch_call", "SlangFunction", "custom_op_for",
           "is_torch_tensor_type", "launch_log", "LaunchLog"]


def is_torch_tensor_type(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, torch.Tensor)


def create_torch_device(device=None, **kwargs):
    """SlangPy's `create_torch_device`: a slangjit device for torch tensors on `device` (a torch.device,
    'cpu', 'cuda', 'cuda:N'; default: torch's current CUDA device when CUDA is available, else the CPU).  A
    CUDA device shares torch's primary context on that GPU.  Extra keyword arguments go to create_device."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else \
            torch.device("cpu")
    td = torch.device(device)
    if td.type == "cpu":
        return create_device(type=DeviceType.cpu, **kwargs)
    if td.type != "cuda":
        raise ValueError(f"create_torch_device: device {td} is neither the CPU nor a CUDA GPU")
    idx = td.index if td.index is not None else torch.cuda.current_device()
    torch.cuda.init()                      # torch's primary context exists before ours retains it
    kw = dict(kwargs)
    return CudaDevice(list(kw.pop("include_paths", ())), list(kw.pop("compiler_args", ())),
                      bool(kw.pop("enable_debug_layers", False)), ordinal=idx, **kw)


def to_torch(t: Tensor):
    return from_spy(t)


def from_torch(device, t) -> Tensor:
    return spy_from_torch(device, t)


def custom_op_for(function, *args, **kwargs):
    """(the torch.library custom op a compiled call with these arguments uses, its argument tuple): for
    torch.library.opcheck and for calling the op directly."""
    return op_and_args(function, args, kwargs)
