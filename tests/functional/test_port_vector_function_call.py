"""Behavioural port of SlangPy's test_vector_function_call.py: float2 parameters given vectors, tensors of
float2 and float tensors of shape (N, 2) (whose last dimension the vector consumes, read and written)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor, float2

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
void noop2(float2 a, float2 b) {}
void add2(float2 a, float2 b, out float2 res) { res = a + b; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_vfc", SRC)


def _f2(device, data):
    t = Tensor.empty(device=device, element_count=len(data), dtype=float2)
    t.storage.copy_from_numpy(data)
    return t


def _flt(device, data):
    t = Tensor.empty(device=device, shape=data.shape, dtype=float)
    t.storage.copy_from_numpy(data)
    return t


def test_call_function_scalar(m):
    m.noop2(float2(1, 2), float2(2, 3))


def test_call_function_broadcast(device, m):
    rng = np.random.default_rng(0)
    a = rng.random(2).astype(np.float32)
    b = rng.random((100, 2)).astype(np.float32)
    res = Tensor.empty(device=device, element_count=100, dtype=float2)
    m.add2(float2(a[0], a[1]), _f2(device, b), res)
    np.testing.assert_allclose(res.storage.to_numpy().view(np.float32).reshape(-1, 2), a + b, rtol=1e-6)


@pytest.mark.parametrize("res_kind", ["float2", "float"])
def test_float_buffer_against_vector(device, m, res_kind):
    rng = np.random.default_rng(1)
    a = rng.random((100, 2)).astype(np.float32)
    b = rng.random((100, 2)).astype(np.float32)
    res = (Tensor.empty(device=device, element_count=100, dtype=float2) if res_kind == "float2"
           else Tensor.empty(device=device, shape=(100, 2), dtype=float))
    m.add2(_flt(device, a), _f2(device, b), res)
    np.testing.assert_allclose(res.storage.to_numpy().view(np.float32).reshape(-1, 2), a + b, rtol=1e-6)
