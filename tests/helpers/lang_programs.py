"""Running small Slang compute programs (one `RWStructuredBuffer<float> outputBuffer`) on a device,
and compiling their generated CUDA with NVRTC: shared by tests/compiler/test_lang_*.py."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program


def run_program(device, tmp_path, src: str, n: int, name: str = "prog", out: str = "outputBuffer",
                type_conformances=None) -> np.ndarray:
    """Dispatch computeMain once (1 thread) and return the first n floats of the output buffer;
    `type_conformances` [(interface, type, id)] are given at link time."""
    p = tmp_path / f"{name}.slang"
    p.write_text(src)
    if type_conformances:
        module = device.load_module(str(p))
        entry = module.entry_point("computeMain", type_conformances=type_conformances)
        program = device.link_program(modules=[module], entry_points=[entry])
    else:
        program = device.load_program(str(p), ["computeMain"])
    k = device.create_compute_kernel(program)
    usage = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    buf = device.create_buffer(size=4 * n, usage=usage, data=np.zeros(n, np.float32))
    k.dispatch(thread_count=[1, 1, 1], vars={out: buf})
    return buf.to_numpy().view(np.float32)[:n].copy()


def nvrtc_compiles(src: str, name: str = "prog") -> bytes:
    """The program's generated CUDA compiled by NVRTC (compute_90); skips where NVRTC is missing."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    cu = compile_program([SourceSpec(text=src, name=name)], ["computeMain"], target="cuda").source
    ptx, _ = cuda_compiler.compile_source(cu, "compute_90")
    assert ptx
    return ptx
