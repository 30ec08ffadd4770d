"""The CUDA C++ of kernels that the SlangPy ports exercise in new ways, compiled with NVRTC on any machine:
nested-array parameters (Slang's T[m][n] spelling), a result converted into a container of another scalar
type, arrays of DiffTensor / RWDiffTensor values, call groups with CallShapeInfo, and generic vectors
inferred from a grid.  (The same calls run on a GPU under the "cuda" device fixture of the test_port_* files.)"""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, Shape, Tensor
from slangjit.compiler import SourceSpec, compile_program

SRC = r"""
import "slangpy";
int nested(int w[2][3]) { return w[1][2] * 100 + w[0][1]; }
int to_float_result(int x) { return x * 3; }
float sum_difftensors(DiffTensor<float, 1> ts[2]) { return ts[0].load(int[1](0)) + ts[1].load(int[1](0)); }
void twice_rw(RWDiffTensor<float, 1> ts[2]) { for (int i = 0; i < 2; i++) ts[i].store(int[1](0), ts[i].load(int[1](0)) * 2.0); }
uint groups(uint2 cell) { CallShapeInfo g = CallShapeInfo::get_call_group_id(); return g.shape[0] * 100 + g.shape[1]; }
vector<int, N> gen_vec<let N : int>(vector<int, N> v) { return v; }
"""


def _cuda_source(mod, cd):
    prog = compile_program([SourceSpec(path="port_nvrtc.slang", text=mod._source_text + "\n" + cd.code,
                                       name="port_nvrtc")], ["_sj_main"], target="cuda",
                           include_paths=[spy.SHADER_PATH])
    return prog.source


def test_new_kernel_forms_compile_with_nvrtc():
    from cuda_kernels import nvrtc_ptx
    dev = spy.create_device(type=spy.DeviceType.cpu)
    dev.functional_staged = True
    mod = spy.Module.load_from_source(dev, "port_nvrtc", SRC)
    dts = []
    for _ in range(2):
        t = Tensor.zeros(dev, dtype=float, shape=(1,))
        dts.append(t.with_grads(grad_in=Tensor.zeros_like(t), grad_out=Tensor.zeros_like(t)))
    cds = [mod.nested.debug_build_call_data(np.arange(6, dtype=np.int32).reshape(2, 3)),
           mod.to_float_result.debug_build_call_data(np.arange(4, dtype=np.int32),
                                                     _result=NDBuffer(dev, dtype=float, shape=(4,))),
           mod.sum_difftensors.debug_build_call_data(dts),
           mod.twice_rw.debug_build_call_data(dts),
           mod.groups.call_group_shape(Shape((2, 3))).debug_build_call_data(spy.grid((5, 7)), _result="numpy"),
           mod.gen_vec.debug_build_call_data(spy.grid((4, 5, 6)),
                                             _result=Tensor.empty(dev, shape=(4, 5, 6), dtype=spy.int3))]
    for cd in cds:
        assert b".entry" in nvrtc_ptx(_cuda_source(mod, cd))
