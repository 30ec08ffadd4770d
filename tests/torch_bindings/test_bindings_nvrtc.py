"""Every test module of the slang-torch bindings, compiled for CUDA and through NVRTC (no GPU needed)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")

import slangjit.torch as st                                     # noqa: E402
from slangjit.runtime import cuda_compiler                       # noqa: E402

SLANG = Path(__file__).resolve().parent / "slang"                # noqa: E402

MODULES = [("seed_sqr.slang", {}), ("square_diff.slang", {}), ("strategies.slang", {"T": "float"}),
           ("strategies.slang", {"T": "double"}), ("vec_half.slang", {}), ("square_half.slang", {}),
           ("smoke.slang", {}), ("multiply_struct.slang", {}), ("builtin_inputs.slang", {})]


@pytest.mark.parametrize("name,defines", MODULES, ids=[f"{n}-{d.get('T', '')}" for n, d in MODULES])
def test_cuda_program_compiles_with_nvrtc(name, defines):
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    m = st.loadModule(str(SLANG / name), defines=defines)
    prog = m._compile("cuda")
    ptx, _log = cuda_compiler.compile_source(prog.source, "compute_90")
    assert b".entry" in ptx
    for k in m._scan.kernels:
        assert f"__sjt_{k.name}" in prog.source
