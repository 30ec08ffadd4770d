"""Behavioural port of SlangPy's test_differential_function_call.py: `.bwds` refused for a function that is
not differentiable (SlangPy's message), `.bwds` with plain scalars, gradients of scalar and float3 functions
over tensors with gradients, and a structure-of-arrays dict of tensors for a float3 parameter (its gradients
land in each field's tensor)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor, diffPair, float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

ND = "float poly(float a, float b) { return a * a + b + 1; }"
DIFF = "[Differentiable] float poly(float a, float b) { return a * a + b + 1; }"
V3 = "[Differentiable] float3 poly(float3 a, float3 b) { return a * a + b + 1; }"
OUT = "[Differentiable] void poly(float a, float b, out float r) { r = a * a + b + 1; }"


def _f(device, name, src):
    return spy.Module.load_from_source(device, name, src).poly


def _rand_tensor(device, n, dtype, rng):
    t = Tensor.empty(shape=(n,), device=device, dtype=dtype).with_grads()
    k = 3 if dtype is float3 else 1
    data = rng.random(n * k).astype(np.float32)
    t.storage.copy_from_numpy(data)
    return t, data.reshape(n, k) if k > 1 else data


def test_call_none_differentiable(device):
    f = _f(device, "port_dfc_nd", ND)
    r = f(5.0, 10.0)
    assert r == 36.0
    with pytest.raises(Exception, match="Could not call function 'poly': Function is not differentiable"):
        f.bwds(5.0, 10.0, r)


def test_call_with_none_diff_scalars(device):
    f = _f(device, "port_dfc_d", DIFF)
    r = f(5.0, 10.0)
    assert r == 36.0
    f.bwds(5.0, 10.0, r)            # plain values: nothing receives a gradient, the call must still run


def test_call_with_diff_scalars(device):
    f = _f(device, "port_dfc_d", DIFF)
    a = diffPair(p=5.0)
    f.bwds(a, 10.0, diffPair(d=1.0))
    assert a.grad == 10.0
    b = diffPair(p=10.0)
    f.bwds(5.0, b, diffPair(d=1.0))
    assert b.grad == 1.0
    a, b = diffPair(p=5.0), diffPair(p=10.0)
    f.bwds(a, b, diffPair(d=1.0))
    assert (a.grad, b.grad) == (10.0, 1.0)


def test_call_with_diff_pairs(device):
    f = _f(device, "port_dfc_d", DIFF)
    a, b = diffPair(5.0), diffPair(10.0)
    assert f(a, b) == 36.0
    f.bwds(a, b, diffPair(d=1.0))
    assert (a.grad, b.grad) == (10.0, 1.0)


def test_call_with_buffers(device):
    rng = np.random.default_rng(5)
    f = _f(device, "port_dfc_d", DIFF).return_type(Tensor)
    a, ad = _rand_tensor(device, 32, float, rng)
    b, bd = _rand_tensor(device, 32, float, rng)
    res = f(a, b)
    np.testing.assert_allclose(res.to_numpy(), ad * ad + bd + 1, rtol=1e-6)
    res = res.with_grads()
    res.grad.storage.copy_from_numpy(np.ones(32, np.float32))
    f.bwds(a, b, res)
    np.testing.assert_allclose(a.grad.to_numpy(), 2 * ad, rtol=1e-6)
    np.testing.assert_array_equal(b.grad.to_numpy(), np.ones(32))


def test_out_param_with_buffers(device):
    rng = np.random.default_rng(6)
    f = _f(device, "port_dfc_out", OUT)
    a, ad = _rand_tensor(device, 16, float, rng)
    b, bd = _rand_tensor(device, 16, float, rng)
    r = Tensor.zeros(device, shape=(16,), dtype=float).with_grads()
    f(a, b, r)
    np.testing.assert_allclose(r.to_numpy(), ad * ad + bd + 1, rtol=1e-6)
    r.grad.storage.copy_from_numpy(np.full(16, 2.0, np.float32))
    f.bwds(a, b, r)
    np.testing.assert_allclose(a.grad.to_numpy(), 4 * ad, rtol=1e-6)
    np.testing.assert_array_equal(b.grad.to_numpy(), np.full(16, 2.0))


def test_vec3_call_with_buffers(device):
    rng = np.random.default_rng(7)
    f = _f(device, "port_dfc_v3", V3).return_type(Tensor)
    a, ad = _rand_tensor(device, 32, float3, rng)
    b, bd = _rand_tensor(device, 32, float3, rng)
    res = f(a, b)
    np.testing.assert_allclose(res.to_numpy().reshape(-1, 3), ad * ad + bd + 1, rtol=1e-6)
    res = res.with_grads()
    res.grad.storage.copy_from_numpy(np.ones(96, np.float32))
    f.bwds(a, b, res)
    np.testing.assert_allclose(a.grad.storage.to_numpy().view(np.float32)[:96].reshape(-1, 3), 2 * ad, rtol=1e-6)
    np.testing.assert_array_equal(b.grad.storage.to_numpy().view(np.float32)[:96], np.ones(96))


def test_vec3_call_with_buffers_soa(device):
    rng = np.random.default_rng(8)
    f = _f(device, "port_dfc_v3", V3).return_type(Tensor)
    comps = [_rand_tensor(device, 32, float, rng) for _ in range(3)]
    a = {"x": comps[0][0], "y": comps[1][0], "z": comps[2][0]}
    ad = np.column_stack([c[1] for c in comps])
    b, bd = _rand_tensor(device, 32, float3, rng)
    res = f(a, b)
    np.testing.assert_allclose(res.to_numpy().reshape(-1, 3), ad * ad + bd + 1, rtol=1e-6)
    res = res.with_grads()
    res.grad.storage.copy_from_numpy(np.ones(96, np.float32))
    f.bwds(a, b, res)
    got = np.column_stack([c[0].grad.to_numpy() for c in comps])
    np.testing.assert_allclose(got, 2 * ad, rtol=1e-6)
    np.testing.assert_array_equal(b.grad.storage.to_numpy().view(np.float32)[:96], np.ones(96))
