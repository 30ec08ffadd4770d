"""slangjit: a Slang compiler and runtime in Python, with a SlangPy-compatible API."""
from __future__ import annotations

from .version import __version__

from .runtime.device import (Buffer, BufferUsage, ComputeKernel, Device, DeviceType, KernelError, MemoryType,
                             ResourceState, ShaderProgram, SlangModule, create_device)
from .runtime.cpu_compiler import InternalCompilerError
from .runtime.commands import CommandBuffer, CommandEncoder, CommandQueueType
from .runtime.base import TypeConformance

from .compiler.source import CompileError

__all__ = ["__version__", "create_device", "DeviceType", "BufferUsage", "MemoryType", "ResourceState", "Device",
           "Buffer", "ComputeKernel", "ShaderProgram", "SlangModule", "CompileError", "InternalCompilerError",
           "KernelError", "CommandBuffer", "CommandEncoder", "CommandQueueType", "TypeConformance"]

# ---- functional API (SlangPy's Module / Function / Tensor; slangjit/functional, slangjit/tensor.py) ----
from .tensor import NDBuffer, Tensor, Shape                                                   # noqa: E402
from .functional.errors import BoundVariableException, KernelGenException, ResolveException  # noqa: E402
from .functional.function import Function, FunctionNode                             # noqa: E402
from .functional.generators import (CallIdArg, GridArg, RandFloatArg, ThreadIdArg, WangHashArg, call_id,  # noqa: E402
                                    grid, rand_float, thread_id, wang_hash)
from .functional.instances import (InstanceBuffer, InstanceDifferentiableBuffer, InstanceDifferentiableTensor,  # noqa: E402
                                   InstanceList,
                                   InstanceTensor)                     # noqa: E402
from .functional.packed import PackedArg, pack  # noqa: E402
from .functional.layout import FunctionReflection, ModuleLayout, TypeReflection, VariableReflection  # noqa: E402
from .functional.module import SHADER_PATH, Module, Struct                          # noqa: E402
from .functional.values import (DiffPair, PrimType, ValueRef, diffPair, floatDiffPair, floatRef, intRef,  # noqa: E402
                                float32, float64, float16, int8, int16, int32, int64, uint8, uint16,
                                uint32, uint64, VECTOR_EXPORTS as _VECTOR_EXPORTS)
from .functional import values as _values                                            # noqa: E402
globals().update({_n: getattr(_values, _n) for _n in _VECTOR_EXPORTS})
__all__ += ["Tensor", "NDBuffer", "Shape", "Module", "Function", "FunctionNode", "Struct", "InstanceList", "InstanceTensor",
            "InstanceDifferentiableBuffer", "InstanceDifferentiableTensor", "InstanceBuffer",
            "ResolveException", "BoundVariableException", "KernelGenException", "SHADER_PATH", "call_id", "PackedArg", "pack", "TypeReflection", "FunctionReflection",
            "VariableReflection", "ModuleLayout",
            "thread_id", "grid", "wang_hash", "rand_float", "ValueRef", "DiffPair", "PrimType", "diffPair", "floatDiffPair",
            "floatRef", "intRef", "float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
            "uint16", "uint32", "uint64"] + list(_VECTOR_EXPORTS)
