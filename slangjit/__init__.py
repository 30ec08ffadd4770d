"""slangjit: a Slang compiler and runtime in Python, with a SlangPy-compatible API."""
from __future__ import annotations

import sys as _sys

from .version import __version__

from .runtime.device import (Buffer, BufferUsage, ComputeKernel, Device, DeviceType, KernelError, MemoryType,
                             ResourceState, ShaderProgram, SlangModule, create_device)
from .runtime.cpu_compiler import InternalCompilerError
from .runtime.commands import CommandBuffer, CommandEncoder, CommandQueueType
from .runtime.base import TypeConformance
from .runtime.textures import (ALL_MIPS, ComparisonFunc, Format, Sampler, SamplerDesc, Texture,
                               TextureAddressingMode, TextureDesc, TextureFilteringMode, TextureReductionOp,
                               TextureType, TextureUsage, TextureView)

from .compiler.source import CompileError

__all__ = ["__version__", "create_device", "DeviceType", "BufferUsage", "MemoryType", "ResourceState", "Device",
           "Buffer", "ComputeKernel", "ShaderProgram", "SlangModule", "CompileError", "InternalCompilerError",
           "KernelError", "CommandBuffer", "CommandEncoder", "CommandQueueType", "TypeConformance",
           "ALL_MIPS", "Format", "Texture", "TextureDesc", "TextureType", "TextureUsage", "TextureView",
           "Sampler", "SamplerDesc", "TextureFilteringMode", "TextureAddressingMode", "TextureReductionOp",
           "ComparisonFunc"]

# ---- functional API (SlangPy's Module / Function / Tensor; slangjit/functional, slangjit/tensor.py) ----
from .tensor import BufferCursor, NDBuffer, Tensor, Shape                                                   # noqa: E402
from .functional.errors import BoundVariableException, KernelGenException, ResolveException  # noqa: E402
from .functional.function import Function, FunctionNode                             # noqa: E402
from .functional.generators import (CallIdArg, GridArg, RandFloatArg, ThreadIdArg, WangHashArg, call_id,  # noqa: E402
                                    calc_wang_hash_numpy, grid, rand_float, thread_id, wang_hash)
from .functional.instances import (InstanceBuffer, InstanceDifferentiableBuffer, InstanceDifferentiableTensor,  # noqa: E402
                                   InstanceList,
                                   InstanceTensor)                     # noqa: E402
from .functional.packed import PackedArg, pack  # noqa: E402
from .functional.callhelpers import set_dump_generated_shaders  # noqa: E402
from .functional.layout import FunctionReflection, ModuleLayout, TypeReflection, VariableReflection  # noqa: E402
from .functional.module import SHADER_PATH, Module, Struct                          # noqa: E402
from .functional.values import (DiffPair, PrimType, ValueRef, diffPair, diff_pair, floatDiffPair, floatRef, intRef,  # noqa: E402
                                float32, float64, float16, int8, int16, int32, int64, uint8, uint16,
                                uint32, uint64, VECTOR_EXPORTS as _VECTOR_EXPORTS)
from .functional import values as _values                                            # noqa: E402
from .functional import vecmath as math                                              # noqa: E402
globals().update({_n: getattr(_values, _n) for _n in _VECTOR_EXPORTS})
__all__ += ["math", "BufferCursor", "Tensor", "NDBuffer", "Shape", "Module", "Function", "FunctionNode", "Struct", "InstanceList", "InstanceTensor",
            "InstanceDifferentiableBuffer", "InstanceDifferentiableTensor", "InstanceBuffer",
            "ResolveException", "BoundVariableException", "KernelGenException", "SHADER_PATH", "call_id", "PackedArg", "pack", "TypeReflection", "FunctionReflection",
            "VariableReflection", "ModuleLayout",
            "thread_id", "grid", "wang_hash", "calc_wang_hash_numpy", "set_dump_generated_shaders", "rand_float", "ValueRef", "DiffPair", "PrimType", "diffPair", "diff_pair", "floatDiffPair",
            "floatRef", "intRef", "float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
            "uint16", "uint32", "uint64"] + list(_VECTOR_EXPORTS)

# ---- PyTorch (slangjit/torch, stage 11): loaded on first use, so `import slangjit` needs no torch ----
from .functional import hooks as _hooks                                              # noqa: E402


def _claims_torch(tp) -> bool:
    """A torch tensor type (checked without importing torch: if torch is not imported, no tensor exists)."""
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(tp, type) and issubclass(tp, torch.Tensor)


def _torch_call_lazy(node, args, kwargs):
    import slangjit.torch as _sjtorch   # reason: torch is optional and slow to import; loaded at the first torch call
    _hooks.replace_call_hook(_torch_call_lazy, _sjtorch.torch_call)
    return _sjtorch.torch_call(node, args, kwargs)


_hooks.register_call_hook(_claims_torch, _torch_call_lazy)
_TORCH_NAMES = ("create_torch_device",)


def __getattr__(name):
    if name in _TORCH_NAMES:
        import slangjit.torch as _sjtorch   # reason: torch is optional; `spy.create_torch_device` loads it on use
        return getattr(_sjtorch, name)
    if name == "torch":
        import slangjit.torch as _sjtorch   # reason: torch is optional; `spy.torch` loads it on first access
        return _sjtorch
    raise AttributeError(f"module 'slangjit' has no attribute {name!r}")
