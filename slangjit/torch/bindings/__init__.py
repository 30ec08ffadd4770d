"""slang-torch bindings (seed 004): `loadModule`, bound kernels with `launchRaw`, `.fwd` / `.bwd`,
TensorView / DiffTensorView and its gradient-aggregation variants, on CPU and CUDA torch tensors.

    m = slangjit.torch.loadModule("square.slang")
    m.square(input=x, output=y).launchRaw(blockSize=(256, 1, 1), gridSize=((n + 255) // 256, 1, 1))

torch is imported on the first launch, not by this package."""
from __future__ import annotations

from .autograd import autograd_function
from .marshal import DiffTensorView
from .module import SlangTorchModule, clearSessionShaderCache, loadModule

__all__ = ["DiffTensorView", "SlangTorchModule", "autograd_function", "clearSessionShaderCache", "loadModule"]
