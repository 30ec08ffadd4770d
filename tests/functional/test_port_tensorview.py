"""Behavioural port of SlangPy's test_tensorview.py and test_difftensorview.py: slang-torch's `TensorView<T>` and
`DiffTensorView<T>` as parameters of functional calls (a tensor bound whole: no call dimensions; the function
indexes it), from torch tensors, spy.Tensors and numpy arrays; bool and vector elements (a float tensor's last
dimension making up a float2 / float4 element); `_thread_count` launches of a `[CUDAKernel]` function reading
cudaBlockIdx() & co., directly and recorded into a command encoder; `.bwds` through DiffTensorView with
`diff_pair(x, x_grad)` (gradients checked against the analytic derivative and float64 finite differences).
SlangPy runs these on CUDA only; here they run on the CPU device and, on a GPU machine, on CUDA."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

VIEWS = r"""
void tv_copy(TensorView<float> src, TensorView<float> dst)
{
    for (uint i = 0; i < src.size(0); i++)
        dst.store(i, src.load(i));
}
void tv_add(TensorView<float> a, TensorView<float> b, TensorView<float> dst)
{
    for (uint i = 0; i < a.size(0); i++)
        dst.store(i, a.load(i) + b.load(i));
}
void tv_mark(int at, TensorView<int> flags) { flags.store(at, 1); }
void tv_copy2(TensorView<float2> src, TensorView<float2> dst)
{
    for (uint i = 0; i < src.size(0); i++)
        dst.store(i, src.load(i) * float2(1.0, 10.0));
}
void tv_copy4(TensorView<float4> src, TensorView<float4> dst)
{
    for (uint i = 0; i < src.size(0); i++)
        dst.store(i, src.load(i).wzyx);
}
void tv_copy_bool(TensorView<bool> src, TensorView<bool> dst)
{
    for (uint i = 0; i < src.size(0); i++)
        dst.store(i, src.load(i));
}
void tv_not_bool(TensorView<bool> src, TensorView<bool> dst)
{
    for (uint i = 0; i < src.size(0); i++)
        dst.store(i, !src.load(i));
}
[CUDAKernel]
void tv_ids(uint count, TensorView<int> dst)
{
    uint t = cudaBlockIdx().x * cudaBlockDim().x + cudaThreadIdx().x;
    if (t >= count)
        return;
    dst.store(t, int(t) * 3 + 1);
}
void tv_transpose(TensorView<float> src, TensorView<float> dst)
{
    for (uint i = 0; i < src.size(0); i++)
        for (uint j = 0; j < src.size(1); j++)
            dst.store(j, i, src.load(i, j));
}
float tv_row_sum(int row, TensorView<float> m)
{
    float s = 0.0;
    for (uint j = 0; j < m.size(1); j++)
        s += m[row, j];
    return s;
}
void tv_shape(TensorView<float> t, TensorView<int> info)
{
    info.store(0, int(t.dims()));
    info.store(1, int(t.size(0)));
    info.store(2, int(t.size(1)));
    info.store(3, int(t.stride(0)));
}
"""

DIFF = r"""
void dtv_copy(DiffTensorView<float> src, DiffTensorView<float> dst)
{
    for (uint i = 0; i < src.size(0); i++)
        dst.store(i, src.load(i));
}
void dtv_add(DiffTensorView<float> a, DiffTensorView<float> b, DiffTensorView<float> dst)
{
    for (uint i = 0; i < a.size(0); i++)
        dst.store(i, a.load(i) + b.load(i));
}
[Differentiable]
void dtv_square(DiffTensorView<float> x, DiffTensorView<float> y)
{
    [MaxIters(1024)]
    for (uint i = 0; i < x.size(0); i++)
    {
        float v = x.load(i);
        y.store(i, v * v);
    }
}
[Differentiable]
void dtv_mix(DiffTensorView<float> x, DiffTensorView<float> w, DiffTensorView<float> y)
{
    // y[i] = sin(x[i]) * w[0] + x[i] * x[(i + 1) % n]
    [MaxIters(64)]
    for (uint i = 0; i < x.size(0); i++)
    {
        uint j = (i + 1) % x.size(0);
        y.store(i, sin(x.load(i)) * w.load(0) + x.load(i) * x.load(j));
    }
}
"""


def _tdev(device) -> str:
    if getattr(device, "_host_memory", True):
        return "cpu"
    if not torch.cuda.is_available():
        pytest.skip("the CUDA device needs a CUDA build of torch")
    return "cuda"


@pytest.fixture
def views(device):
    return spy.Module.load_from_source(device, "port_tensorview", VIEWS)


@pytest.fixture
def diffs(device):
    return spy.Module.load_from_source(device, "port_difftensorview", DIFF)


def _sync(device):
    if not getattr(device, "_host_memory", True):
        torch.cuda.synchronize()


# ------------------------------------------------------------------ test_tensorview.py: torch tensors

def test_copy_torch(device, views):
    d = _tdev(device)
    src = torch.tensor([1.5, -2.0, 3.25, 4.0, 5.5], device=d)
    dst = torch.zeros(5, device=d)
    views.tv_copy(src, dst)
    _sync(device)
    assert torch.equal(dst, src)


def test_add_torch(device, views):
    d = _tdev(device)
    a = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=d)
    b = torch.tensor([10.0, 20.0, 30.0, 40.0, 50.0], device=d)
    dst = torch.zeros(5, device=d)
    views.tv_add(a, b, dst)
    _sync(device)
    assert torch.equal(dst, a + b)


def test_copy_bool_torch(device, views):
    d = _tdev(device)
    src = torch.tensor([True, False, True, True, False], device=d)
    dst = torch.zeros(5, dtype=torch.bool, device=d)
    views.tv_copy_bool(src, dst)
    _sync(device)
    assert torch.equal(dst, src)


def test_negate_bool_torch(device, views):
    d = _tdev(device)
    src = torch.tensor([True, False, True, False, False], device=d)
    dst = torch.zeros(5, dtype=torch.bool, device=d)
    views.tv_not_bool(src, dst)
    _sync(device)
    assert torch.equal(dst, ~src)


def test_float2_from_float_torch(device, views):
    # a float32 tensor of shape (3, 2) is a TensorView<float2> of 3 elements
    d = _tdev(device)
    src = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device=d)
    dst = torch.zeros(3, 2, device=d)
    views.tv_copy2(src, dst, _thread_count=1)
    _sync(device)
    assert torch.equal(dst, src * torch.tensor([1.0, 10.0], device=d))


def test_float4_from_float_torch(device, views):
    d = _tdev(device)
    src = torch.arange(8, dtype=torch.float32, device=d).reshape(2, 4) + 0.5
    dst = torch.zeros(2, 4, device=d)
    views.tv_copy4(src, dst, _thread_count=1)
    _sync(device)
    assert torch.equal(dst, src.flip(1))


def test_thread_count_cuda_kernel_ids(device, views):
    # 70 threads: more than one block of the generated kernel, so cudaBlockIdx / cudaBlockDim take part
    d = _tdev(device)
    out = torch.zeros(70, dtype=torch.int32, device=d)
    views.tv_ids(count=70, dst=out, _thread_count=70)
    _sync(device)
    assert torch.equal(out, torch.arange(70, dtype=torch.int32, device=d) * 3 + 1)


def test_thread_count_append_to(device, views):
    d = _tdev(device)
    out = torch.zeros(64, dtype=torch.int32, device=d)
    enc = device.create_command_encoder()
    views.tv_ids.append_to(enc, count=64, dst=out, _thread_count=64)
    _sync(device)
    assert torch.all(out == 0)                       # recorded, not run
    device.submit_command_buffer(enc.finish())
    _sync(device)
    assert torch.equal(out, torch.arange(64, dtype=torch.int32, device=d) * 3 + 1)


def test_thread_count_refused_for_vectorised_call(device, views):
    d = _tdev(device)
    at = torch.tensor([0, 1, 2], dtype=torch.int32, device=d)
    flags = torch.zeros(4, dtype=torch.int32, device=d)
    with pytest.raises(ValueError, match="_thread_count"):
        views.tv_mark(at, flags, _thread_count=3)


def test_vectorised_over_another_argument_torch(device, views):
    # the int argument is vectorised (3 threads), the view is shared by all of them
    d = _tdev(device)
    at = torch.tensor([0, 2, 3], dtype=torch.int32, device=d)
    flags = torch.zeros(5, dtype=torch.int32, device=d)
    views.tv_mark(at, flags)
    _sync(device)
    assert flags.cpu().tolist() == [1, 0, 1, 1, 0]


# ------------------------------------------------------------------ test_tensorview.py: spy.Tensor

def test_copy_spy_tensor(device, views):
    data = np.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype=np.float32)
    src = Tensor.from_numpy(device, data)
    dst = Tensor.zeros(device, dtype="float", shape=(5,))
    views.tv_copy(src, dst)
    np.testing.assert_array_equal(dst.to_numpy(), data)


def test_add_spy_tensor(device, views):
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype=np.float32)
    b = np.array([10.0, 20.0, 30.0, 40.0, 50.0], dtype=np.float32)
    dst = Tensor.zeros(device, dtype="float", shape=(5,))
    views.tv_add(Tensor.from_numpy(device, a), Tensor.from_numpy(device, b), dst)
    np.testing.assert_array_equal(dst.to_numpy(), a + b)


def test_grid_dispatch_marks_each_thread(device, views):
    flags = Tensor.zeros(device, dtype="int", shape=(5,))
    views.tv_mark(spy.grid((5,)), flags)
    np.testing.assert_array_equal(flags.to_numpy(), np.ones(5, dtype=np.int32))


def test_copy_spy_tensor_positional_shape(device, views):
    data = np.array([0.25, -1.0, 7.0, 2.0, 3.0], dtype=np.float32)
    dst = Tensor.zeros(device, (5,), "float")
    views.tv_copy(Tensor.from_numpy(device, data), dst)
    np.testing.assert_allclose(dst.to_numpy(), data, atol=1e-6)


def test_float2_from_scalar_spy_tensor(device, views):
    data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)
    dst = Tensor.empty(device, (3,), "float2")
    views.tv_copy2(Tensor.from_numpy(device, data), dst, _thread_count=1)
    np.testing.assert_array_equal(dst.to_numpy(), data * np.array([1.0, 10.0], dtype=np.float32))


# ------------------------------------------------------------------ beyond SlangPy's files

def test_numpy_arrays_and_strided_views(device, views):
    big = np.arange(10, dtype=np.float32) * 1.5
    dst = np.zeros(5, dtype=np.float32)
    views.tv_copy(big[::2], dst)                      # a strided numpy view is read through its strides
    np.testing.assert_array_equal(dst, big[::2])
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = np.zeros((4, 3), dtype=np.float32)
    views.tv_transpose(m, t)
    np.testing.assert_array_equal(t, m.T)


def test_two_dimensional_view_with_vectorised_index(device, views):
    m = np.random.default_rng(3).random((4, 6)).astype(np.float32)
    r = views.tv_row_sum(np.arange(4, dtype=np.int32), Tensor.from_numpy(device, m), _result="numpy")
    np.testing.assert_allclose(r, m.astype(np.float64).sum(axis=1), rtol=1e-5)


def test_view_reports_shape_and_byte_strides(device, views):
    t = Tensor.from_numpy(device, np.zeros((3, 7), dtype=np.float32))
    info = np.zeros(4, dtype=np.int32)
    views.tv_shape(t, info)
    assert info.tolist() == [2, 3, 7, 28]             # stride(d) in bytes, as slang-torch reports it


def test_transposed_torch_view(device, views):
    d = _tdev(device)
    m = torch.arange(12, dtype=torch.float32, device=d).reshape(3, 4)
    out = torch.zeros(3, 4, device=d)
    views.tv_transpose(m.t(), out)                    # a non-contiguous torch view, read in place
    _sync(device)
    assert torch.equal(out, m)


def test_bad_arguments_are_named_errors(device, views):
    with pytest.raises(TypeError, match="argument 'src': Cannot bind tensor with dtype int to TensorView<float>"):
        views.tv_copy(np.arange(5, dtype=np.int32), np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError, match="argument 'src'.*last dimensions must be \\(2,\\)"):
        views.tv_copy2(np.zeros((3, 3), np.float32), np.zeros((3, 2), np.float32), _thread_count=1)
    with pytest.raises(Exception, match="does not match slang type TensorView<float>"):
        views.tv_copy(1.0, np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError, match="at most 8 dimensions"):
        views.tv_copy(np.zeros((1,) * 9, np.float32), np.zeros(5, dtype=np.float32))


def test_torch_autograd_is_refused(device, views, diffs):
    d = _tdev(device)
    x = torch.arange(5.0, device=d, requires_grad=True)
    with pytest.raises(ValueError, match="tensor-typed parameter"):
        diffs.dtv_copy(x, torch.zeros(5, device=d))


# ------------------------------------------------------------------ test_difftensorview.py

def test_diff_copy_torch(device, diffs):
    d = _tdev(device)
    src = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=d)
    dst = torch.zeros(5, device=d)
    diffs.dtv_copy(src, dst)
    _sync(device)
    assert torch.equal(dst, src)


def test_diff_add_torch(device, diffs):
    d = _tdev(device)
    a = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=d)
    b = torch.tensor([10.0, 20.0, 30.0, 40.0, 50.0], device=d)
    dst = torch.zeros(5, device=d)
    diffs.dtv_add(a, b, dst)
    _sync(device)
    assert torch.equal(dst, a + b)


def test_diff_square_bwds_torch(device, diffs):
    d = _tdev(device)
    x = torch.tensor([1.0, -2.0, 3.0, 4.5, 5.0], device=d)
    x_grad = torch.zeros(5, device=d)
    y = torch.zeros(5, device=d)
    y_grad = torch.ones(5, device=d)
    diffs.dtv_square.bwds(spy.diff_pair(x, x_grad), spy.diff_pair(y, y_grad))
    _sync(device)
    assert torch.allclose(x_grad, 2.0 * x, atol=1e-5)


def test_diff_pair_is_input_flag_upstream_gradient(device, diffs):
    d = _tdev(device)
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=d)
    x_grad = torch.zeros(5, device=d)
    y = torch.zeros(5, device=d)
    upstream = torch.full((5,), 3.0, device=d)
    expected = upstream * 2.0 * x                      # (the store's backward pass consumes the upstream gradient)
    diffs.dtv_square.bwds(spy.diff_pair(x, x_grad, is_input=True), spy.diff_pair(y, upstream, is_input=False))
    _sync(device)
    assert torch.allclose(x_grad, expected, atol=1e-5)


def test_diff_square_forward_then_bwds_spy_tensors(device, diffs):
    xs = np.array([0.5, -1.5, 2.0, 3.0], dtype=np.float32)
    x = Tensor.from_numpy(device, xs).with_grads(zero=True)
    y = Tensor.zeros(device, dtype="float", shape=(4,)).with_grads()
    diffs.dtv_square(x, y)                             # forward: the diff views are not touched
    np.testing.assert_allclose(y.to_numpy(), xs ** 2, rtol=1e-6)
    y.grad.copy_from_numpy(np.array([1.0, 2.0, -1.0, 0.5], dtype=np.float32))
    diffs.dtv_square.bwds(x, y)                        # a spy.Tensor's own gradient is its diff view
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs * np.array([1.0, 2.0, -1.0, 0.5]), rtol=1e-6)


def _mix64(x, w):
    return np.sin(x) * w[0] + x * np.roll(x, -1)


def test_diff_mix_bwds_numpy_against_finite_differences(device, diffs):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1.0, 1.0, 6).astype(np.float32)
    w = np.array([0.75], dtype=np.float32)
    gy = rng.uniform(-1.0, 1.0, 6).astype(np.float32)
    y = np.zeros(6, dtype=np.float32)
    diffs.dtv_mix(x, w, y)
    np.testing.assert_allclose(y, _mix64(x.astype(np.float64), w.astype(np.float64)), rtol=1e-5, atol=1e-6)
    gx = np.zeros(6, dtype=np.float32)
    gw = np.zeros(1, dtype=np.float32)
    diffs.dtv_mix.bwds(spy.diff_pair(x, gx), spy.diff_pair(w, gw), spy.diff_pair(y, gy.copy()))
    # float64 central differences of L = sum(gy * y(x, w))
    x64, w64, g64, h = x.astype(np.float64), w.astype(np.float64), gy.astype(np.float64), 1e-6
    fx = np.array([(np.dot(g64, _mix64(x64 + h * e, w64)) - np.dot(g64, _mix64(x64 - h * e, w64))) / (2 * h)
                   for e in np.eye(6)])
    fw = (np.dot(g64, _mix64(x64, w64 + h)) - np.dot(g64, _mix64(x64, w64 - h))) / (2 * h)
    np.testing.assert_allclose(gx, fx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, [fw], rtol=1e-4, atol=1e-5)


def test_diff_pair_errors(device, views, diffs):
    x = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match="diff_pair is bound to a DiffTensorView parameter"):
        views.tv_copy(spy.diff_pair(x, np.zeros(3, np.float32)), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="gradient's shape \\(4,\\) is not the primal's \\(3,\\)"):
        diffs.dtv_square.bwds(spy.diff_pair(x, np.zeros(4, np.float32)),
                              spy.diff_pair(np.zeros(3, np.float32), np.ones(3, np.float32)))


def test_tensorview_kernels_compile_with_nvrtc(device):
    if device.type != spy.DeviceType.cpu:
        pytest.skip("compiled once, on the CPU parametrisation")
    from cuda_kernels import nvrtc_ptx
    from slangjit.compiler import SourceSpec, compile_program
    dev = spy.create_device(type=spy.DeviceType.cpu)
    dev.functional_staged = True
    srcs = {"views": VIEWS, "diffs": DIFF}
    mods = {k: spy.Module.load_from_source(dev, f"port_tv_nvrtc_{k}", v) for k, v in srcs.items()}
    f32 = np.zeros(4, np.float32)
    cds = [("views", mods["views"].tv_add.debug_build_call_data(f32, f32, f32)),
           ("views", mods["views"].tv_ids.debug_build_call_data(count=4, dst=np.zeros(4, np.int32),
                                                                _thread_count=4)),
           ("views", mods["views"].tv_copy2.debug_build_call_data(np.zeros((2, 2), np.float32),
                                                                  np.zeros((2, 2), np.float32), _thread_count=1)),
           ("diffs", mods["diffs"].dtv_square.bwds.debug_build_call_data(spy.diff_pair(f32, f32.copy()),
                                                                         spy.diff_pair(f32.copy(), f32.copy())))]
    for k, cd in cds:
        mod = mods[k]
        prog = compile_program([SourceSpec(path=f"port_tv_nvrtc_{k}.slang", text=mod._source_text + "\n" + cd.code,
                                           name=f"port_tv_nvrtc_{k}")], ["_sj_main"], target="cuda",
                               include_paths=[spy.SHADER_PATH])
        assert b".entry" in nvrtc_ptx(prog.source)


# ------------------------------------------------------------------ test_shapes.py's `t[{x, y}]` (initializer-list index)

BRACES = r"""
import "slangpy";
float read_slice(int2 index, NDBuffer<float,2> texture) { return texture[{index.x,index.y}]; }
float read_u(uint2 index, Tensor<float, 2> t) { return t[{index.x, index.y}]; }
void write_at(int3 index, RWTensor<float, 3> t, float v) { t[{index.x, index.y, index.z}] = v; }
"""


def test_initializer_list_index(device):
    m = spy.Module.load_from_source(device, "port_braces", BRACES)
    rng = np.random.default_rng(11)
    tex = rng.random((6, 9)).astype(np.float32)
    idx = np.stack([rng.integers(0, 6, 20), rng.integers(0, 9, 20)], axis=1).astype(np.int32)
    r = m.read_slice(spy.NDBuffer.from_numpy(device, idx), spy.NDBuffer.from_numpy(device, tex), _result="numpy")
    np.testing.assert_array_equal(r, tex[idx[:, 0], idx[:, 1]])          # x indexes the outermost dimension
    r = m.read_u(idx.astype(np.uint32), Tensor.from_numpy(device, tex), _result="numpy")
    np.testing.assert_array_equal(r, tex[idx[:, 0], idx[:, 1]])
    t = Tensor.zeros(device, dtype="float", shape=(2, 3, 4))
    m.write_at(spy.int3(1, 2, 3), t, 5.0)
    expect = np.zeros((2, 3, 4), np.float32)
    expect[1, 2, 3] = 5.0
    np.testing.assert_array_equal(t.to_numpy(), expect)


def test_initializer_list_index_of_wrong_length_is_located_error(device):
    src = 'import "slangpy";\nfloat bad(int2 i, NDBuffer<float,2> t) { return t[{i.x, i.y, 0}]; }\n'
    with pytest.raises(spy.CompileError) as ei:
        spy.Module.load_from_source(device, "port_braces_bad", src)
    msg = str(ei.value)
    assert ":2:" in msg and "subscript" in msg


GENERIC = r"""
void g_copy<T>(TensorView<T> src, TensorView<T> dst) { for (uint i = 0; i < src.size(0); i++) dst.store(i, src.load(i)); }
[Differentiable]
void d_cube(DiffTensorView x, DiffTensorView y)
{
    [MaxIters(64)]
    for (uint i = 0; i < x.size(0); i++) { float v = x.load(i); y.store(i, v * v * v); }
}
"""


def test_generic_element_inferred_from_the_tensor(device):
    m = spy.Module.load_from_source(device, "port_tv_generic", GENERIC)
    for dt in (np.int32, np.float64, np.uint8):
        src = (np.arange(6) * 3 + 1).astype(dt)
        dst = np.zeros(6, dtype=dt)
        m.g_copy(src, dst)
        np.testing.assert_array_equal(dst, src)


def test_default_element_and_spy_tensor_diff_pairs(device):
    m = spy.Module.load_from_source(device, "port_tv_generic", GENERIC)
    xs = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    x, gx = Tensor.from_numpy(device, xs), Tensor.zeros(device, dtype="float", shape=(3,))
    y, gy = Tensor.zeros(device, dtype="float", shape=(3,)), Tensor.from_numpy(device, np.array([1.0, 0.5, 2.0],
                                                                                                   np.float32))
    m.d_cube.bwds(spy.diff_pair(x, gx), spy.diff_pair(y, gy))
    np.testing.assert_allclose(gx.to_numpy(), 3 * xs.astype(np.float64) ** 2 * [1.0, 0.5, 2.0], rtol=1e-6)
    gx.clear()
    m.d_cube.bwds(spy.diff_pair(x), spy.diff_pair(y, Tensor.from_numpy(device, np.ones(3, np.float32))))
    np.testing.assert_array_equal(gx.to_numpy(), np.zeros(3))     # no diff tensor given: the gradient goes nowhere


def test_a_module_struct_named_tensorview_is_the_modules_own(device):
    m = spy.Module.load_from_source(device, "port_own_tensorview",
                                    "struct TensorView { float x; }\nfloat twice(TensorView t) { return t.x * 2.0; }\n")
    assert m.twice({"x": 3.5}) == 7.0
    r = m.twice({"x": np.array([1.0, 2.5], dtype=np.float32)}, _result="numpy")
    np.testing.assert_array_equal(r, [2.0, 5.0])
