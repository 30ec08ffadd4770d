"""`create_device`: the factory that picks the CPU device (cpu.py) or the CUDA device (cuda.py), and the
runtime's public names (the API itself is base.py's)."""
from __future__ import annotations

import os

from ..compiler.passes.options import DEFAULT_OPTIONS, PipelineOptions
from . import cuda as _cuda
from .base import (Buffer, BufferDesc, BufferUsage, Device, DeviceInfo, DeviceType, EntryPoint, KernelBase,
                   MemoryType, ReflectionCursor, ResourceState, ShaderProgram, SlangModule,
                   SlangModuleNotFoundError, SlangWarning)
from .cpu import ComputeKernel, CpuDevice, _get_pool, num_threads
from .kernel_errors import KernelError

__all__ = ["Buffer", "BufferDesc", "BufferUsage", "ComputeKernel", "CpuDevice", "Device", "DeviceInfo", "DeviceType",
           "EntryPoint", "KernelBase", "KernelError", "MemoryType", "ReflectionCursor", "ResourceState", "ShaderProgram",
           "SlangModule", "SlangModuleNotFoundError", "SlangWarning", "create_device", "num_threads", "_get_pool"]


def create_device(type: DeviceType = DeviceType.automatic, enable_debug_layers: bool = False, include_paths=(),
                  compiler_args=(), adapter_luid=None, enable_cuda_interop: bool = False, enable_print: bool = False,
                  enable_hot_reload: bool = True, enable_compilation_reports: bool = False,
                  existing_device_handles=None, bindless_options=None, label: str = "",
                  compiler_options=None, compile_options: PipelineOptions = DEFAULT_OPTIONS) -> Device:
    """Create a device.  `automatic` is CUDA when a usable NVIDIA GPU and cuda-bindings are present
    (`$SLANGJIT_DEVICE=cpu` forces the CPU), else the CPU backend.  `compile_options`: the pass
    pipeline's options (slangjit.compiler.passes.options.PipelineOptions) for the device's programs."""
    t = DeviceType(int(type))
    if t == DeviceType.automatic:
        t = DeviceType.cuda if os.environ.get("SLANGJIT_DEVICE", "").lower() != "cpu" and _cuda.is_available() \
            else DeviceType.cpu
    if t == DeviceType.cuda:
        include_paths = list(include_paths or ())
        if isinstance(compiler_options, dict):
            include_paths += list(compiler_options.get("include_paths", ()))
        return _cuda.CudaDevice(include_paths, list(compiler_args or ()), enable_debug_layers,
                                compile_options=compile_options)
    if t != DeviceType.cpu:
        raise NotImplementedError(f"slangjit supports only DeviceType.cpu (and later cuda), not {t.name}")
    include_paths = list(include_paths or ())
    compiler_args = list(compiler_args or ())
    if isinstance(compiler_options, dict):
        include_paths += list(compiler_options.get("include_paths", ()))
    return CpuDevice(t, include_paths, compiler_args, enable_debug_layers, compile_options)
