"""Float literals past the type's range, and inf / NaN from constant folding, on both targets: the CPU
computes inf / NaN, and the generated CUDA spells them by their bits (NVRTC has no __builtin_huge_val;
found by the fuzz test)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program

SRC = """
RWStructuredBuffer<float> f;
RWStructuredBuffer<double> d;
[numthreads(1, 1, 1)]
void computeMain(uint3 t : SV_DispatchThreadID)
{
    f[0] = 3.5e38;          // past FLT_MAX: inf
    f[1] = -1e300;
    f[2] = 0.0 / 0.0;
    d[0] = 1e400;           // past DBL_MAX
}
"""


def test_cpu_values(tmp_path):
    p = tmp_path / "special.slang"
    p.write_text(SRC)
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    usage = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    f, d = dev.create_buffer(size=12, usage=usage), dev.create_buffer(size=8, usage=usage)
    k.dispatch(thread_count=[1, 1, 1], vars={"f": f, "d": d})
    fv = f.to_numpy().view(np.float32)
    assert fv[0] == np.inf and fv[1] == -np.inf and np.isnan(fv[2])
    assert d.to_numpy().view(np.float64)[0] == np.inf


def test_cuda_spelling_compiles_with_nvrtc():
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    src = compile_program([SourceSpec(text=SRC, name="special")], ["computeMain"], target="cuda").source
    assert "__builtin_huge_val" not in src and "__int_as_float((int)0x7F800000u)" in src
    assert "__longlong_as_double((long long)0x7FF0000000000000ull)" in src
    ptx, _ = cuda_compiler.compile_source(src, "compute_90")
    assert ptx
