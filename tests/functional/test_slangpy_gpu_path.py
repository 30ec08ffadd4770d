"""The GPU path of the SlangPy-compatibility features (issue 16) without a GPU: the calls run on a CPU device whose
functional calls take the staged path a CUDA device takes (host data uploaded to device buffers and read back,
see calldata.Staging), and the kernels they generate, in their GPU form (256 threads, several elements per
thread), are compiled to PTX with NVRTC.  The same calls run on a real GPU in test_slangpy_values.py /
test_slangpy_broadcast.py with the "cuda" device."""
import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program

from cuda_kernels import nvrtc_ptx

SRC = r"""
import "slangpy";
float add(float a, float b) { return a + b; }
struct P : IDifferentiable { float x; float y; };
[Differentiable] float poly(P p) { return p.x * p.x + 3.0 * p.y; }
[Differentiable] float sq(float x) { return x * x; }
struct Val { int x; }
int inc(Val val) { return val.x + 1; }
int read_int(StructuredBuffer<int> b, int i) { return b[i]; }
float intfoo(int a) { return float(a) * 2.0; }
void copy_generic<T>(T src, out T dest) { dest = src; }
struct Material { float3 color; }
struct Particle {
    float2 position; float2 velocity; Material material;
    [mutating] void reset(float2 p, float2 v) { position = p; velocity = v; material.color = float3(1); }
}
"""


@pytest.fixture(scope="module")
def staged():
    d = spy.create_device(spy.DeviceType.cpu)
    d.functional_staged = True
    return spy.Module.load_from_source(d, "slangpy_gpu_path", SRC)


def test_values_on_the_staged_path(staged):
    m = staged
    d = m.device
    np.testing.assert_array_equal(m.add(spy.float3(1, 2, 3), spy.float3(4, 5, 6), _result="numpy"), [5, 7, 9])
    xs = spy.Tensor.from_numpy(d, np.array([1, 2, 3], np.float32)).with_grads(zero=True)
    ys = spy.Tensor.from_numpy(d, np.array([4, 5, 6], np.float32)).with_grads(zero=True)
    res = spy.Tensor.zeros(d, shape=(3,), dtype=float).with_grads()
    res.grad.copy_from_numpy(np.array([1, 2, 3], np.float32))
    m.poly.bwds({"x": xs, "y": ys}, res)
    np.testing.assert_allclose(xs.grad.to_numpy(), [2, 8, 18])
    np.testing.assert_allclose(ys.grad.to_numpy(), [3, 6, 9])
    x = spy.diffPair(3.0)
    m.sq.bwds(x, 1.0)
    assert x.grad == pytest.approx(6.0)
    np.testing.assert_array_equal(m.inc([{"x": 1}, {"x": 2}, {"x": 3}], _result="numpy"), [2, 3, 4])
    assert m.read_int(spy.Tensor.from_numpy(d, np.arange(8, dtype=np.int32) * 2), 3) == 6
    np.testing.assert_array_equal(m.intfoo.map((0,))(spy.Tensor.from_numpy(d, np.array([1.5, -2.5], np.float32)))
                                  .to_numpy(), [2, -4])
    src, dest = np.arange(4.0) + 0.5, np.zeros(4)
    m.copy_generic.map(src="float", dest="float")(src=src, dest=dest)
    np.testing.assert_array_equal(dest, src)

    class This:
        def __init__(self, data):
            self.data = data

        def get_this(self):
            return self.data

        def update_this(self, value):
            pass

    t = This({"position": spy.Tensor.zeros(d, dtype=spy.float2, shape=(1,)), "velocity": spy.float2(1, 0),
              "material": {"color": spy.float3(0, 0, 0)}})
    m.Particle.reset.bind(t)(spy.float2(1, 2), spy.float2(3, 4))
    np.testing.assert_array_equal(t.data["position"].to_numpy().reshape(-1), [1, 2])


def _gpu_codes(cd):
    return [cd.code, cd._codegen(cd._gen_args, nt=256, unroll=4)]


@pytest.mark.parametrize("case", ["vector_over_scalar", "soa_bwds", "plain_result_bwds", "struct_list",
                                  "tensor_buffer", "converted_elements", "converted_out", "soa_this"])
def test_generated_kernels_compile_with_nvrtc(staged, case):
    m = staged
    d = m.device
    xs = spy.Tensor.from_numpy(d, np.array([1, 2, 3], np.float32)).with_grads(zero=True)
    ys = spy.Tensor.from_numpy(d, np.array([4, 5, 6], np.float32)).with_grads(zero=True)
    res = spy.Tensor.zeros(d, shape=(3,), dtype=float).with_grads()

    class This:
        def get_this(self):
            return {"position": spy.Tensor.zeros(d, dtype=spy.float2, shape=(1,)), "velocity": spy.float2(1, 0),
                    "material": {"color": spy.float3(0, 0, 0)}}

    fn, args, kwargs = {
        "vector_over_scalar": (m.add, (spy.float3(1, 2, 3), spy.float3(4, 5, 6)), {}),
        "soa_bwds": (m.poly.bwds, ({"x": xs, "y": ys}, res), {}),
        "plain_result_bwds": (m.sq.bwds, (spy.diffPair(3.0), 1.0), {}),
        "struct_list": (m.inc, ([{"x": 1}, {"x": 2}],), {}),
        "tensor_buffer": (m.read_int, (spy.Tensor.from_numpy(d, np.arange(8, dtype=np.int32)), 3), {}),
        "converted_elements": (m.intfoo.map((0,)), (spy.Tensor.from_numpy(d, np.ones(2, np.float32)),), {}),
        "converted_out": (m.copy_generic.map(src="float", dest="float"), (),
                          {"src": np.arange(4.0), "dest": np.zeros(4)}),
        "soa_this": (m.Particle.reset.bind(This()), (spy.float2(1, 2), spy.float2(3, 4)), {}),
    }[case]
    cd = fn.debug_build_call_data(*args, **kwargs)
    for code in _gpu_codes(cd):
        prog = compile_program([SourceSpec(path="slangpy_gpu_path.slang", text=m._source_text + "\n" + code,
                                           name="slangpy_gpu_path")], ["_sj_main"], target="cuda",
                               include_paths=[spy.SHADER_PATH])
        assert b".entry" in nvrtc_ptx(prog.source)
