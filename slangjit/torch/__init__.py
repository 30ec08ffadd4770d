"""slangjit.torch: PyTorch integration (stage 11).  This shim exposes the slang-torch bindings
(slangjit.torch.bindings); it imports neither torch nor the bindings until a name is used."""
from __future__ import annotations

_BINDINGS = ("loadModule", "DiffTensorView", "autograd_function", "clearSessionShaderCache")


def __getattr__(name):
    if name in _BINDINGS:
        from . import bindings  # reason: lazy, so `import slangjit.torch` stays cheap
        return getattr(bindings, name)
    raise AttributeError(f"module 'slangjit.torch' has no attribute {name!r}")
