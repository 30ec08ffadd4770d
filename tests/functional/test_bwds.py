"""Functional API §1.13: `.bwds` and its access rules, checked against analytic and finite-difference gradients."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
import "slangpy";
[Differentiable]
float polynomial(float a, float b, float c, float x) { return a * x * x + b * x + c; }

float not_diff(float x) { return x * 2.0; }

[Differentiable]
float f3(float x, float y, float z) { return x * y + sin(z) * x * x + y * z * z; }

[Differentiable]
float with_nodiff(float x, no_diff float k) { return k * x * x; }

[Differentiable]
void out_param(float x, out float y) { y = 3.0 * x * x; }

[Differentiable]
void inout_param(inout float x) { x = x * x; }

[Differentiable]
float vec_len2(float3 v) { return dot(v, v); }

[Differentiable]
void poly_tensor(int idx, float a, IDiffTensor<float, 1> x, IWDiffTensor<float, 1> result)
{
    float xv = x[idx];
    result[idx] = a * xv * xv;
}
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "bw", SRC)


def _t(device, a, grads=True):
    t = spy.Tensor.from_numpy(device, np.asarray(a, np.float32))
    return t.with_grads(zero=True) if grads else t


def test_polynomial_seed000(m, device):
    x = _t(device, [1, 2, 3, 4])
    result = m.polynomial(a=2, b=8, c=-1, x=x, _result="tensor")
    np.testing.assert_allclose(result.to_numpy(), [9, 23, 41, 63])
    result = result.with_grads()
    result.grad.storage.copy_from_numpy(np.ones(4, np.float32))
    m.polynomial.bwds(a=2, b=8, c=-1, x=x, _result=result)
    np.testing.assert_allclose(x.grad.to_numpy(), [12, 16, 20, 24])


def test_gradients_accumulate(m, device):
    x = _t(device, [1, 2, 3, 4])
    r = m.polynomial(2.0, 8.0, -1.0, x).with_grads()
    r.grad.copy_from_numpy(np.ones(4, np.float32))
    m.polynomial.bwds(2.0, 8.0, -1.0, x, _result=r)
    m.polynomial.bwds(2.0, 8.0, -1.0, x, r)          # result as the last positional argument
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * (4 * np.array([1, 2, 3, 4]) + 8))


def test_result_grad_scales(m, device):
    x = _t(device, [1, 2])
    r = m.polynomial(1.0, 0.0, 0.0, x).with_grads()
    r.grad.copy_from_numpy(np.array([0.5, 3.0], np.float32))
    m.polynomial.bwds(1.0, 0.0, 0.0, x, _result=r)
    np.testing.assert_allclose(x.grad.to_numpy(), [0.5 * 2 * 1, 3.0 * 2 * 2])


def test_inputs_without_grads_are_primal_only(m, device):
    x = _t(device, [1, 2, 3])
    a = _t(device, [2, 2, 2], grads=False)
    r = m.polynomial(a, 1.0, 0.0, x).with_grads()
    r.grad.copy_from_numpy(np.ones(3, np.float32))
    m.polynomial.bwds(a, 1.0, 0.0, x, _result=r)
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * np.array([1, 2, 3]) + 1)


def test_three_args_broadcast_vs_finite_differences(m, device):
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (4, 5))
    Y = rng.uniform(-1, 1, (5,))
    Z = rng.uniform(-1, 1, (4, 1))

    def f(X, Y, Z):
        return X * Y + np.sin(Z) * X * X + Y * Z * Z

    x, y, z = _t(device, X), _t(device, Y), _t(device, Z)
    r = m.f3(x, y, z)
    assert r.shape == (4, 5)
    np.testing.assert_allclose(r.to_numpy(), f(X, Y, Z), rtol=1e-5, atol=1e-6)
    G = rng.uniform(-1, 1, (4, 5))
    r = r.with_grads()
    r.grad.copy_from_numpy(G.astype(np.float32))
    m.f3.bwds(x, y, z, _result=r)
    eps = 1e-6
    for arr, t in ((X, x), (Y, y), (Z, z)):
        fd = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            p, q = arr.copy(), arr.copy()
            p[idx] += eps
            q[idx] -= eps
            args_p = [p if a is arr else a for a in (X, Y, Z)]
            args_q = [q if a is arr else a for a in (X, Y, Z)]
            fd[idx] = np.sum(G * (f(*args_p) - f(*args_q))) / (2 * eps)
        np.testing.assert_allclose(t.grad.to_numpy(), fd, rtol=1e-4, atol=1e-5)


def test_no_diff_parameter(m, device):
    x = _t(device, [1, 2])
    k = _t(device, [3, 4])
    r = m.with_nodiff(x, k).with_grads()
    r.grad.copy_from_numpy(np.ones(2, np.float32))
    m.with_nodiff.bwds(x, k, _result=r)
    np.testing.assert_allclose(x.grad.to_numpy(), [2 * 3 * 1, 2 * 4 * 2])
    assert not k.grad.to_numpy().any()


def test_out_param_reads_grad(m, device):
    x = _t(device, [1, 2, 3])
    y = spy.Tensor.zeros(device, (3,), float)
    m.out_param(x, y)
    np.testing.assert_allclose(y.to_numpy(), [3, 12, 27])
    y = y.with_grads()
    y.grad.copy_from_numpy(np.array([1, 1, 2], np.float32))
    m.out_param.bwds(x, y)
    np.testing.assert_allclose(x.grad.to_numpy(), [6, 12, 36])


def test_inout_needs_separate_buffers(m, device):
    x = _t(device, [1, 2])
    with pytest.raises(ValueError, match=r"inout parameter gradients need separate buffers for inputs and outputs "
                                         r"\(see Tensor.with_grads\)"):
        m.inout_param.bwds(x)


def test_inout_separate_buffers(m, device):
    x = spy.Tensor.from_numpy(device, np.array([1, 2, 3], np.float32))
    x = x.with_grads(grad_in=spy.Tensor.ones(device, (3,), float), grad_out=spy.Tensor.zeros(device, (3,), float))
    m.inout_param.bwds(x)
    np.testing.assert_allclose(x.grad_out.to_numpy(), [2, 4, 6])


def test_not_differentiable(m, device):
    with pytest.raises(spy.ResolveException, match="Could not call function 'not_diff': Function is not differentiable"):
        m.not_diff.bwds(_t(device, [1]))


def test_missing_result_grads(m, device):
    x = _t(device, [1, 2])
    r = m.polynomial(1.0, 1.0, 1.0, x)
    with pytest.raises(ValueError, match="argument '_result' is an output but has no gradients"):
        m.polynomial.bwds(1.0, 1.0, 1.0, x, _result=r)
    with pytest.raises(ValueError, match="the result's gradients are needed"):
        m.polynomial.bwds(1.0, 1.0, 1.0, x)


def test_diff_pair(m):
    p = spy.diffPair(3.0)
    m.polynomial.bwds(1.0, 2.0, 0.0, p, _result=spy.diffPair(0.0, 1.0))
    assert p.grad == pytest.approx(2 * 3.0 + 2.0)


def test_vector_grads(m, device):
    v = _t(device, np.arange(6).reshape(2, 3))
    r = m.vec_len2(v.detach().with_grads()) if False else None
    v = spy.Tensor.from_numpy(device, np.arange(6, dtype=np.float32).reshape(2, 3)).with_grads(zero=True)
    r = m.vec_len2(v)
    assert r.shape == (2,)
    r = r.with_grads()
    r.grad.copy_from_numpy(np.ones(2, np.float32))
    m.vec_len2.bwds(v, _result=r)
    np.testing.assert_allclose(v.grad.to_numpy(), 2 * np.arange(6).reshape(2, 3))


def test_idifftensor_binds_primal_forward_and_diff_backward(m, device):
    x = _t(device, [1, 2, 3])
    out = spy.Tensor.zeros(device, (3,), float)
    m.poly_tensor(spy.grid((3,)), 2.0, x, out)           # forward: no grads needed on out
    np.testing.assert_allclose(out.to_numpy(), [2, 8, 18])
    out = out.with_grads()
    out.grad.copy_from_numpy(np.ones(3, np.float32))
    m.poly_tensor.bwds(spy.grid((3,)), 2.0, x, out)
    np.testing.assert_allclose(x.grad.to_numpy(), [4, 8, 12])


def test_bwds_accumulation_broadcast_and_distinct(m, device):
    """Gradients of broadcast arguments sum over the call (atomic path); distinct per-thread elements
    accumulate with a plain add; both add to what is already there."""
    xs = (np.arange(12, dtype=np.float32) % 5).reshape(3, 4)
    x = _t(device, xs)
    a = _t(device, np.array([[2.0], [3.0], [1.0]], np.float32))        # (3, 1): broadcast along dim 1
    b = _t(device, np.array([8.0], np.float32))                         # (1,): broadcast over everything
    y = m.polynomial(a, b, -1.0, x)
    y = y.with_grads()
    y.grad.copy_from_numpy(np.ones((3, 4), np.float32))
    for rep in (1, 2):
        m.polynomial.bwds(a, b, -1.0, x, y)
        av = np.array([[2.0], [3.0], [1.0]])
        np.testing.assert_allclose(x.grad.to_numpy(), rep * (2 * av * xs + 8))
        np.testing.assert_allclose(a.grad.to_numpy(), rep * (xs.astype(np.float64) ** 2).sum(1, keepdims=True))
        np.testing.assert_allclose(b.grad.to_numpy(), [rep * xs.sum()])
    # the same gradient storage bound twice: f3(x, x, z) adds both partials into x.grad
    xx = _t(device, [1.0, 2.0])
    z = _t(device, [0.5, 0.25], grads=False)
    r = m.f3(xx, xx, z).with_grads()
    r.grad.copy_from_numpy(np.ones(2, np.float32))
    m.f3.bwds(xx, xx, z, r)
    xv, zv = np.array([1.0, 2.0]), np.array([0.5, 0.25])
    np.testing.assert_allclose(xx.grad.to_numpy(), xv + 2 * np.sin(zv) * xv + xv + zv * zv, rtol=1e-6)
