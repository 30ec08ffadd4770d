"""slangjit runtime: devices, buffers, kernels (CPU backend)."""
from .device import (Buffer, BufferUsage, ComputeKernel, Device, DeviceType, MemoryType, ResourceState,
                     ShaderProgram, SlangModule, create_device)

__all__ = ["Buffer", "BufferUsage", "ComputeKernel", "Device", "DeviceType", "MemoryType", "ResourceState",
           "ShaderProgram", "SlangModule", "create_device"]
