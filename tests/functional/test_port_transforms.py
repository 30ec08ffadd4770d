"""Behavioural port of SlangPy's test_transforms.py: `.map` transposing inputs (scalars, float3, float2x3, and
float containers whose last dimensions the vector / matrix consumes), output transforms (two 1-D inputs
spread over two call dimensions), and broadcasting from extent-1 dimensions of NDBuffers and Tensors."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, Tensor, float2x3, float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
void copy_values(float a, out float b) { b = a; }
float3 add_vectors(float3 a, float3 b) { return a + b; }
float2x3 add_matrix(float2x3 a, float2x3 b) { return a + b; }
void copy_vectors(float3 inn, out float3 outv) { outv = inn; }
void copy_matrix(float2x3 inn, out float2x3 outv) { outv = inn; }
"""
KINDS = [(float3, (3,), "vectors"), (float2x3, (2, 3), "matrix")]


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_transforms", SRC)


def _filled(device, shape, dtype, data):
    b = NDBuffer(device=device, shape=shape, dtype=dtype)
    b.copy_from_numpy(np.ascontiguousarray(data))
    return b


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).random(shape).astype(np.float32)


def test_copy_values_basic_input_transform(device, m):
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = NDBuffer(device=device, shape=(2, 2), dtype=float)
    m.copy_values.as_func().map((1, 0))(_filled(device, (2, 2), float, a), b)
    np.testing.assert_array_equal(b.to_numpy(), a.T)


@pytest.mark.parametrize("dtype,es,name", KINDS, ids=["vector", "matrix"])
def test_add_basic_input_transform(device, m, dtype, es, name):
    a, b = _rand(2, 3, *es), _rand(3, 2, *es, seed=1)
    f = (m.add_vectors if name == "vectors" else m.add_matrix).map((1, 0))
    res = f(_filled(device, (2, 3), dtype, a), _filled(device, (3, 2), dtype, b))
    assert res.shape == (3, 2)
    np.testing.assert_allclose(res.to_numpy(), np.swapaxes(a, 0, 1) + b, rtol=1e-6)


@pytest.mark.parametrize("dtype,es,name", KINDS, ids=["vector", "matrix"])
def test_add_vecindex_inputcontainer_input_transform(device, m, dtype, es, name):
    a, b = _rand(2, 3, *es), _rand(3, 2, *es, seed=1)
    f = (m.add_vectors if name == "vectors" else m.add_matrix).map((1, 0))
    res = f(_filled(device, (2, 3) + es, float, a), _filled(device, (3, 2), dtype, b))
    assert res.shape == (3, 2)
    np.testing.assert_allclose(res.to_numpy(), np.swapaxes(a, 0, 1) + b, rtol=1e-6)


@pytest.mark.parametrize("dtype,es,name", KINDS, ids=["vector", "matrix"])
def test_copy_data_vecindex_inputcontainer_input_transform(device, m, dtype, es, name):
    inn = _rand(2, 3, *es)
    out = NDBuffer(device=device, shape=(3, 2), dtype=dtype)
    (m.copy_vectors if name == "vectors" else m.copy_matrix).map((1, 0))(_filled(device, (2, 3) + es, float, inn), out)
    np.testing.assert_array_equal(out.to_numpy(), np.swapaxes(inn, 0, 1))


def test_copy_vectors_vecindex_outputcontainer_input_transform(device, m):
    inn = _rand(2, 3, 3)
    out = NDBuffer(device=device, shape=(3, 2), dtype=float3)
    m.copy_vectors.map(None, (1, 0))(_filled(device, (2, 3, 3), float, inn), out)
    np.testing.assert_array_equal(out.to_numpy(), np.swapaxes(inn, 0, 1))


@pytest.mark.parametrize("dtype,es,name", KINDS, ids=["vector", "matrix"])
def test_add_basic_output_transform(device, m, dtype, es, name):
    a, b = _rand(5, *es), _rand(10, *es, seed=1)
    f = (m.add_vectors if name == "vectors" else m.add_matrix).map((0,), (1,))
    res = f(_filled(device, (5,), dtype, a), _filled(device, (10,), dtype, b))
    assert res.shape == (5, 10)
    np.testing.assert_allclose(res.to_numpy(), a[:, None] + b[None, :], rtol=1e-6)


@pytest.mark.parametrize("dtype,es,name", KINDS, ids=["vector", "matrix"])
def test_add_broadcast_from_buffer(device, m, dtype, es, name):
    a, b = _rand(1, *es), _rand(10, *es, seed=1)
    f = m.add_vectors if name == "vectors" else m.add_matrix
    res = f(_filled(device, (1,), dtype, a), _filled(device, (10,), dtype, b))
    assert res.shape == (10,)
    np.testing.assert_allclose(res.to_numpy(), a + b, rtol=1e-6)


@pytest.mark.parametrize("first", ["ndbuffer", "tensor"])
@pytest.mark.parametrize("dtype,es,name", KINDS, ids=["vector", "matrix"])
def test_add_broadcast_from_buffer_2(device, m, dtype, es, name, first):
    a, b = _rand(1, 5, *es), _rand(10, 5, *es, seed=1)
    if first == "tensor":
        ta = Tensor.empty(device=device, shape=(1, 5), dtype=dtype)
        ta.copy_from_numpy(a)
    else:
        ta = _filled(device, (1, 5), dtype, a)
    f = m.add_vectors if name == "vectors" else m.add_matrix
    res = f(ta, _filled(device, (10, 5), dtype, b))
    assert res.shape == (10, 5)
    np.testing.assert_allclose(res.to_numpy(), a + b, rtol=1e-6)
