"""The `.bwds` kernels the torch path needs beyond the plain functional tests -- a dict of tensors for a struct
parameter (gradients per field) and array parameters (a typed zero for the initial derivative) -- generated
for a GPU (staged device: 256 threads, several elements per thread) and compiled to PTX with NVRTC, so the
CUDA run on a GPU machine does not meet a compile error first."""
import numpy as np
import pytest
import torch

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program

from torch_src import SRC

ARRAY_SRC = r"""
import "slangpy";
[Differentiable]
float wsum(float2 p, float w[4]) { float v = 0.0; for (int i = 0; i < 4; i++) v += w[i] * p.x * p.y; return v; }
"""


def _nvrtc():
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    return cuda_compiler


def _staged():
    d = spy.create_device(spy.DeviceType.cpu)
    d.functional_staged = True
    return d


def _bwds_cd(m, fn, args):
    """Run the call with torch tensors that require grad and return the .bwds CallData it used."""
    out = getattr(m, fn)(*args)
    out.sum().backward()
    from slangjit.torch import calls
    plans = [p for p in calls._PLANS.values() if p.node.function is getattr(m, fn) and p.cd_bwds]
    assert plans, "no .bwds call was made"
    return next(iter(plans[-1].cd_bwds.values()))


@pytest.mark.parametrize("case", ["struct_dict", "array"])
def test_bwds_kernels_compile_with_nvrtc(case):
    cc = _nvrtc()
    dev = _staged()
    if case == "struct_dict":
        m = spy.Module.load_from_source(dev, "tcg_struct", SRC)
        x = torch.rand(8, dtype=torch.float64, requires_grad=True)
        y = torch.rand(8, dtype=torch.float64, requires_grad=True)
        cd = _bwds_cd(m, "pt_len2", ({"x": x, "y": y}, 2.0))
        np.testing.assert_allclose(x.grad.numpy(), (2 * 2.0 * x + y).detach().numpy())    # the staged CPU run
        src = SRC
    else:
        m = spy.Module.load_from_source(dev, "tcg_array", ARRAY_SRC)
        p = torch.rand(8, 2)
        w = torch.rand(1, 4, requires_grad=True)
        cd = _bwds_cd(m, "wsum", (p, w))
        np.testing.assert_allclose(w.grad.numpy()[0], np.full(4, float((p[:, 0] * p[:, 1]).sum())), rtol=1e-5)
        src = ARRAY_SRC
    for code in (cd.code, cd._codegen(cd._gen_args, nt=256, unroll=4)):
        assert "bwd_diff" in code
        prog = compile_program([SourceSpec(path="tcg.slang", text=src + "\n" + code, name="tcg")],
                               ["_sj_main"], target="cuda", include_paths=[spy.SHADER_PATH])
        ptx, _log = cc.compile_source(prog.source, "compute_90")
        assert b".entry" in ptx
