"""Behavioural port of SlangPy's test_tensor_with_grads.py and test_scalar_return.py: `.bwds` of
matrix-vector products over broadcast tensors with gradients (interface-typed tensor parameters; matrices),
gradients against the analytic ones; an inout parameter whose tensor shares one gradient buffer refused;
scalar results of calls reading tensors, and vectorised results.  (SlangPy's interface-parameter case is
shadowed in its file by a second function of the same name; the differentiable interfaces are
IDiffTensor, as in SlangPy's `matrix_vector_interfaces_diff`.)"""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
[Differentiable]
float[5] mv_interfaces(IDiffTensor<float, 2> w, IDiffTensor<float, 1> b, float[8] x)
{
    float[5] r;
    for (int i = 0; i < 5; ++i) { float acc = b.load(i); for (int j = 0; j < 8; ++j) acc += w.load(i, j) * x[j]; r[i] = acc; }
    return r;
}
[Differentiable]
float3 mv_matrix(float3x4 w, float4 b, float[4] x)
{
    float3 r;
    for (int i = 0; i < 3; ++i) { float acc = b[i]; for (int j = 0; j < 4; ++j) acc += w[i][j] * x[j]; r[i] = acc; }
    return r;
}
[Differentiable]
void inc(float amount, inout float val) { val += amount; }
[Differentiable]
float read_element(ITensor<float, 1> data, float idx) { return data[int(idx)]; }
[Differentiable]
float add_scalars(float a, float b) { return a + b; }
[Differentiable]
float elementwise_double(float x) { return x * 2.0; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_twg", SRC)


def _operands(device, rows, cols, nb, n=4):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    b = rng.standard_normal(nb).astype(np.float32)
    x = rng.standard_normal(cols).astype(np.float32)
    tw = Tensor.from_numpy(device, w).broadcast_to((n, rows, cols)).with_grads()
    tb = Tensor.from_numpy(device, b).broadcast_to((n, nb)).with_grads()
    tx = Tensor.from_numpy(device, x).broadcast_to((n, cols))
    return tw, tb, tx, np.tile(w.astype(np.float64) @ x + b[:rows], (n, 1))


@pytest.mark.parametrize("name,rows,cols,nb", [("mv_interfaces", 5, 8, 5), ("mv_matrix", 3, 4, 4)])
def test_differentiable_parameters(device, m, name, rows, cols, nb):
    f = getattr(m, name).return_type(Tensor)
    w, b, x, expect = _operands(device, rows, cols, nb)
    assert w.grad_out is not None and b.grad_out is not None
    y = f(w, b, x)
    np.testing.assert_allclose(y.to_numpy(), expect, atol=1e-4)
    y.grad_in = Tensor.zeros_like(y)
    g = np.random.default_rng(1).random((4, rows)).astype(np.float32)
    y.grad_in.storage.copy_from_numpy(g)
    f.bwds(w, b, x, y)
    np.testing.assert_allclose(w.grad_out.to_numpy(), g[..., None] * x.to_numpy()[:, None, :], atol=1e-5)
    gb = np.zeros((4, nb), np.float32)
    gb[:, :rows] = g
    np.testing.assert_allclose(b.grad_out.to_numpy(), gb, atol=1e-6)


def test_fail_shared_inout_grad_buffers(device, m):
    amount = Tensor.from_numpy(device, np.array([1.0], np.float32))
    val = Tensor.zeros(device, (1,), "float").with_grads()
    m.inc(amount, val)
    np.testing.assert_array_equal(val.to_numpy(), [1.0])
    with pytest.raises(Exception, match="inout param"):
        m.inc.bwds(amount, val)


def test_scalar_return_with_tensor_input(device, m):
    data = Tensor.from_numpy(device, np.array([10.0, 20.0, 30.0], np.float32))
    r = m.read_element(data=data, idx=1.0)
    assert isinstance(r, float) and r == 20.0
    for i, v in enumerate([10.0, 20.0, 30.0]):
        assert m.read_element(data=data, idx=float(i)) == v


def test_scalar_return_plain_scalars(m):
    assert m.add_scalars(3.0, 4.0) == 7.0


def test_vectorized_return_with_tensor_input(device, m):
    r = m.elementwise_double(Tensor.from_numpy(device, np.array([1.0, 2.0, 3.0], np.float32)))
    assert not isinstance(r, (int, float))
    np.testing.assert_array_equal(np.asarray(r.to_numpy()).flatten(), [2.0, 4.0, 6.0])
