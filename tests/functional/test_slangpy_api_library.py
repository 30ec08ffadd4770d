"""The Slang side of the functional API (slangpy.slang and the core library): IAtomicAddable, DiffTensor's
load variants (load_once, load_uniform: gradients against the analytic ones and against load),
Atomic<float>* parameters, and CallShapeInfo::get_call_id outside call groups."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";

struct Acc : IDifferentiable, IAtomicAddable { float a; float3 b; }

T twice<T : IAtomicAddable>(T v) { return v + v; }
float sum_acc(Acc s) { return s.a + s.b.x + s.b.y + s.b.z; }

[Differentiable]
void square_load_once(DiffTensor<float, 1> x, WDiffTensor<float, 1> r, int i) { float v = x.load_once(i); r.store(i, v * v); }
[Differentiable]
void square_load(DiffTensor<float, 1> x, WDiffTensor<float, 1> r, int i) { float v = x.load(i); r.store(i, v * v); }
[Differentiable]
void bcast_uniform(DiffTensor<float, 1> w, WDiffTensor<float, 1> r, int i) { r.store(i, w.load_uniform(0)); }
[Differentiable]
void bcast_load(DiffTensor<float, 1> w, WDiffTensor<float, 1> r, int i) { r.store(i, w.load(0)); }
[Differentiable]
float3 cube_once(IDiffTensor<float3, 1> x, int i) { float3 v = x.load_once(i); return v * v * v; }
[Differentiable]
float scaled_uniform(IDiffTensor<float, 2> w, int2 at, float s) { return w.load_uniform(at) * s; }

void acc_ptr(Atomic<float>* p, int i, float v) { p[i % 2].add(v); }

int call_index(int[2] cell) { CallShapeInfo c = CallShapeInfo::get_call_id(); return c.shape[0] * 100 + c.shape[1]; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "slib", SRC)


def _grads_tensor(device, n):
    r = spy.Tensor.zeros(device, shape=(n,), dtype=float).with_grads(zero=True)
    r.grad_in.copy_from_numpy(np.ones(n, np.float32))
    return r


def test_iatomicaddable(m):
    assert m.twice(1.25) == 2.5 and m.twice(float3(1, 2, 3)) == float3(2, 4, 6) and m.twice(7) == 14
    assert m.sum_acc({"a": 1.0, "b": float3(1, 2, 3)}) == 7.0
    assert m.Acc.differentiable


@pytest.mark.parametrize("which", ["square_load_once", "square_load"])
def test_load_once_gradients(m, device, which):
    fn = getattr(m, which)
    xn = np.array([1, 2, 3, 4, 5], np.float32)
    x = spy.Tensor.from_numpy(device, xn).with_grads(zero=True)
    r = _grads_tensor(device, 5)
    for i in range(5):
        fn(x, r, i)
    np.testing.assert_allclose(r.to_numpy(), xn * xn)
    for i in range(5):
        fn.bwds(x, r, i)
    np.testing.assert_allclose(x.grad_out.to_numpy(), 2 * xn, atol=1e-5)
    x2 = spy.Tensor.from_numpy(device, xn).with_grads(zero=True)
    fn.bwds(x2, r, np.arange(5, dtype=np.int32))                  # vectorised: one element per thread
    np.testing.assert_allclose(x2.grad_out.to_numpy(), 2 * xn, atol=1e-5)


@pytest.mark.parametrize("which", ["bcast_uniform", "bcast_load"])
def test_load_uniform_gradients(m, device, which):
    fn = getattr(m, which)
    n = 37
    w = spy.Tensor.from_numpy(device, np.array([3.0], np.float32)).with_grads(zero=True)
    r = _grads_tensor(device, n)
    fn(w, r, np.arange(n, dtype=np.int32))
    assert np.all(r.to_numpy() == 3.0)
    fn.bwds(w, r, np.arange(n, dtype=np.int32))                  # every thread loads element 0
    np.testing.assert_allclose(w.grad_out.to_numpy(), [float(n)])


def test_load_variants_through_interfaces(m, device):
    xn = np.array([[1, 2, 3], [0.5, -1, 2]], np.float32)
    x = spy.Tensor(spy.Tensor.from_numpy(device, xn).storage, float3, (2,)).with_grads(zero=True)
    out = m.cube_once(x, np.arange(2, dtype=np.int32), _result="tensor")
    np.testing.assert_allclose(out.to_numpy(), xn ** 3, rtol=1e-6)
    out = out.with_grads()
    out.grad.copy_from_numpy(np.ones((2, 3), np.float32))
    m.cube_once.bwds(x, np.arange(2, dtype=np.int32), _result=out)
    np.testing.assert_allclose(x.grad_out.to_numpy(), 3 * xn ** 2, rtol=1e-5)
    w = spy.Tensor.from_numpy(device, np.arange(6, dtype=np.float32).reshape(2, 3)).with_grads(zero=True)
    s = np.array([1.0, 2.0, 0.5, 4.0], np.float32)
    at = spy.int2(2, 1)                                           # .x innermost: element [1][2] = 5
    r = m.scaled_uniform(w, at, s, _result="tensor")
    np.testing.assert_allclose(r.to_numpy(), 5.0 * s)
    r = r.with_grads()
    r.grad.copy_from_numpy(np.ones(4, np.float32))
    m.scaled_uniform.bwds(w, at, s, _result=r)
    want = np.zeros((2, 3), np.float32)
    want[1, 2] = s.sum()
    np.testing.assert_allclose(w.grad_out.to_numpy(), want, rtol=1e-6)


def test_atomic_float_pointer(m, device):
    b = device.create_buffer(element_count=2, struct_size=4,
                             usage=spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource)
    m.acc_ptr(b, np.arange(10, dtype=np.int32), 1.5)
    assert b.to_numpy().view(np.float32).tolist() == [7.5, 7.5]


def test_call_shape_info_call_id(m):
    r = m.call_index(spy.grid((3, 4)), _result="numpy")
    y, x = np.meshgrid(range(3), range(4), indexing="ij")
    assert np.array_equal(r, y * 100 + x)


def test_load_variant_kernels_compile_with_nvrtc(device):
    """The `.bwds` kernels a GPU call generates for the load variants and IAtomicAddable, as PTX."""
    from cuda_kernels import nvrtc_ptx
    from slangjit.compiler import SourceSpec, compile_program
    dev = spy.create_device(spy.DeviceType.cpu)
    dev.functional_staged = True
    mod = spy.Module.load_from_source(dev, "slibnv", SRC)
    x = spy.Tensor.from_numpy(dev, np.ones(8, np.float32)).with_grads(zero=True)
    r = spy.Tensor.zeros(dev, shape=(8,), dtype=float).with_grads(zero=True)
    idx = np.arange(8, dtype=np.int32)
    for cd in (mod.square_load_once.bwds.debug_build_call_data(x, r, idx),
               mod.bcast_uniform.bwds.debug_build_call_data(x, r, idx),
               mod.sum_acc.debug_build_call_data({"_type": "Acc", "a": 1.0, "b": float3(1, 2, 3)})):
        prog = compile_program([SourceSpec(path="slibnv.slang", text=mod._source_text + "\n" + cd.code,
                                           name="slibnv")], ["_sj_main"], target="cuda",
                               include_paths=[spy.SHADER_PATH])
        assert b".entry" in nvrtc_ptx(prog.source)


def test_write_only_tensor_aliases(device):
    mod = spy.Module.load_from_source(device, "slibwo", """
import slangpy;
void copy_diff(int[2] idx, DiffTensor<float, 2> src, WODiffTensor<float, 2> dst) { dst[idx[0], idx[1]] = src[idx]; }
void copy_primal(int[2] idx, PrimalTensor<float, 2> src, WOPrimalTensor<float, 2> dst) { dst.store(idx, src.load(idx)); }
""")
    a = np.random.default_rng(5).random((3, 4), dtype=np.float32)
    for fn in (mod.copy_diff, mod.copy_primal):
        src = spy.Tensor.from_numpy(device, a).with_grads(zero=True)
        dst = spy.Tensor.zeros(device, shape=(3, 4), dtype=float).with_grads(zero=True)
        fn(spy.grid((3, 4)), src, dst)
        assert np.array_equal(dst.to_numpy(), a)


def test_uint_array_indices(device):
    mod = spy.Module.load_from_source(device, "slibuint", """
import "slangpy";
float rd(uint[2] i, Tensor<float, 2> t) { return t[i] + t.load(i); }
void wr(uint[2] i, RWTensor<float, 2> t, float v) { t[i] = v; t.store(i, t.load(i) + v); }
[Differentiable] float dl(uint[2] i, DiffTensor<float, 2> t) { return t.load(i) * t[i]; }
""")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert mod.rd([2, 1], spy.Tensor.from_numpy(device, a)) == 2 * a[2, 1]
    t = spy.Tensor.zeros(device, shape=(3, 4), dtype=float)
    mod.wr(spy.grid((3, 4)), t, 1.5)
    assert np.all(t.to_numpy() == 3.0)
    x = spy.Tensor.from_numpy(device, a).with_grads(zero=True)
    r = mod.dl(spy.grid((3, 4)), x, _result="tensor")
    np.testing.assert_allclose(r.to_numpy(), a * a)
    r = r.with_grads()
    r.grad.copy_from_numpy(np.ones((3, 4), np.float32))
    mod.dl.bwds(spy.grid((3, 4)), x, _result=r)
    np.testing.assert_allclose(x.grad_out.to_numpy(), 2 * a)             # d(x*x)/dx through uint indices


def test_atomic_tensor_accumulate_buffer(device):
    mod = spy.Module.load_from_source(device, "slibacc", 'import "slangpy";\n'
                                      "void f(int i, AtomicTensor<float, 1> t) { t.accumulate_buffer(i % 2, 0.5); }")
    t = spy.Tensor.zeros(device, shape=(2,), dtype=float)
    mod.f(np.arange(9, dtype=np.int32), t)
    assert t.to_numpy().tolist() == [2.5, 2.0]
