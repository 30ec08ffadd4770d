"""slangjit: a Slang compiler and runtime in Python, with a SlangPy-compatible API."""
from __future__ import annotations

__version__ = "0.1.0"

from .runtime.device import (Buffer, BufferUsage, ComputeKernel, Device, DeviceType, MemoryType, ResourceState,
                             ShaderProgram, SlangModule, create_device)
from .runtime.cpu_compiler import InternalCompilerError

from .compiler.source import CompileError

__all__ = ["__version__", "create_device", "DeviceType", "BufferUsage", "MemoryType", "ResourceState", "Device",
           "Buffer", "ComputeKernel", "ShaderProgram", "SlangModule", "CompileError", "InternalCompilerError"]
