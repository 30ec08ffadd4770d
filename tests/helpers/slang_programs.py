"""Running small Slang compute programs in tests (tests/compiler/test_lang_*.py): the program's
`outputBuffer` on a device, the NVRTC compile of its CUDA, float64 central differences."""
import textwrap

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program

HEAD = "RWStructuredBuffer<float> outputBuffer;\n"


def run(device, body: str, n: int) -> np.ndarray:
    src = HEAD + textwrap.dedent(body)
    module = device.load_module_from_source("breadth", src)
    kernel = device.create_compute_kernel(device.link_program([module], [module.entry_point("computeMain")]))
    out = device.create_buffer(element_count=n, struct_size=4,
                               usage=spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access)
    kernel.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": out})
    return out.to_numpy().view(np.float32)[:n]


def nvrtc(body: str):
    nv = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    del nv
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    prog = compile_program([SourceSpec(text=HEAD + textwrap.dedent(body), name="breadth")], ["computeMain"],
                           target="cuda")
    ptx, _ = cuda_compiler.compile_source(prog.source, "compute_90")
    assert b".entry" in ptx


def fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)
