"""Behavioural port of SlangPy's test_diff_loop_runtime_start.py: `.bwds` through loops over an IDiffTensor
(a box filter whose window is clamped at the edges) with a constant negative start and with a zero-based
start; plus the runtime-start form that crashes Slang before its fix (slangjit differentiates it).
Gradients against a numpy count of each element's readers."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = r"""
import "slangpy";
[Differentiable]
float const_neg_start(no_diff int2 pix, IDiffTensor<float, 2> src, no_diff int radius, no_diff int width)
{
    float acc = 0.0;
    [MaxIters(17)]
    for (int dx = -2; dx <= 2; ++dx) acc += src[uint2(clamp(pix.x + dx, 0, width - 1), pix.y)];
    return acc;
}
[Differentiable]
float zero_start(no_diff int2 pix, IDiffTensor<float, 2> src, no_diff int radius, no_diff int width)
{
    float acc = 0.0;
    [MaxIters(17)]
    for (int i = 0; i < 2 * radius + 1; ++i) { int dx = i - radius; acc += src[uint2(clamp(pix.x + dx, 0, width - 1), pix.y)]; }
    return acc;
}
[Differentiable]
float runtime_start(no_diff int2 pix, IDiffTensor<float, 2> src, no_diff int radius, no_diff int width)
{
    float acc = 0.0;
    [MaxIters(17)]
    for (int dx = -radius; dx <= radius; ++dx) acc += src[uint2(clamp(pix.x + dx, 0, width - 1), pix.y)];
    return acc;
}
"""
H, W, R = 6, 8, 2


def _expected(src):
    val = np.zeros((H, W))
    grad = np.zeros((H, W))
    for y in range(H):
        for x in range(W):
            for dx in range(-R, R + 1):
                c = min(max(x + dx, 0), W - 1)
                val[y, x] += src[y, c]
                grad[y, c] += 1.0
    return val, grad


@pytest.mark.parametrize("name", ["const_neg_start", "zero_start", "runtime_start"])
def test_diff_loop_start(device, name):
    f = spy.Module.load_from_source(device, "port_diff_loop", SRC).find_function(name)
    data = np.random.default_rng(0).random((H, W)).astype(np.float32)
    src = spy.Tensor.from_numpy(device, data).with_grads()
    out = f(spy.grid((H, W)), src, R, W)
    val, grad = _expected(data)
    np.testing.assert_allclose(out.to_numpy(), val, rtol=1e-5)
    out = out.with_grads()
    out.grad.copy_from_numpy(np.ones((H, W), np.float32))
    f.bwds(spy.grid((H, W)), src, R, W, _result=out)
    np.testing.assert_allclose(src.grad.to_numpy(), grad, rtol=1e-5, atol=1e-5)
