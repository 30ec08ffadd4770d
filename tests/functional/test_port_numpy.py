"""Behavioural port of SlangPy's test_numpy.py: numpy arrays as arguments and results (`_result=array`,
"numpy", return_type(np.ndarray)), float3 element dimensions (and the shape error), kernels cached per
dimensionality, and matrices (padded rows) returned, passed and returned as numpy."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = r"""
import "slangpy";
float addf(float a, float b) { return a + b; }
float3 addf3(float3 a, float3 b) { return a + b; }
matrix<float, R, C> ones_mat<int R, int C>() { return matrix<float, R, C>(1); }
struct Flat { float[16] data; }
Flat flatten<int R, int C>(matrix<float, R, C> m)
{
    Flat f;
    for (int i = 0; i < 16; i++) f.data[i] = -1.0;
    for (int i = 0; i < R; i++) for (int j = 0; j < C; j++) f.data[i * C + j] = m[i][j];
    return f;
}
matrix<float, R, C> plus2<int R, int C>(matrix<float, R, C> m) { return m + 2.0f; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_numpy", SRC)


def _ab(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random(shape).astype(np.float32), rng.random(shape).astype(np.float32)


def test_pass_numpy_floats(m):
    a, b = _ab(2, 2)
    r = m.addf(a, b)
    np.testing.assert_array_equal(r.to_numpy().view(np.float32).reshape(*r.shape), a + b)


def test_return_numpy_floats(m):
    a, b = _ab(2, 2)
    r = np.zeros_like(a)
    m.addf(a, b, _result=r)
    np.testing.assert_array_equal(r, a + b)


def test_return_numpy_floats_auto(m):
    a, b = _ab(2, 2)
    np.testing.assert_array_equal(m.addf(a, b, _result="numpy"), a + b)


def test_returntype_numpy_floats(m):
    a, b = _ab(2, 2)
    np.testing.assert_array_equal(m.addf.return_type(np.ndarray)(a, b), a + b)


def test_pass_numpy_float3s(m):
    a, b = _ab(2, 2, 3)
    r = m.addf3.return_type(np.ndarray)(a, b)
    assert r.shape == (2, 2, 3)
    np.testing.assert_array_equal(r, a + b)


def test_fail_numpy_float3s(m):
    a, b = _ab(2, 2, 2)
    with pytest.raises(RuntimeError, match="does not match the expected shape"):
        m.addf3.return_type(np.ndarray)(a, b)


def test_cache(m):
    a, b = _ab(3, 2, 2)
    np.testing.assert_array_equal(m.addf.return_type(np.ndarray)(a, b), a + b)
    a, b = _ab(2, 2, seed=1)
    np.testing.assert_array_equal(m.addf.return_type(np.ndarray)(a, b), a + b)


@pytest.mark.parametrize("R", [2, 3])
@pytest.mark.parametrize("C", [2, 3])
def test_return_numpy_matrix(m, R, C):
    f = m.find_function(f"ones_mat<{R}, {C}>")
    assert f is not None
    r = f().to_numpy()
    assert r.shape == (R, C)
    np.testing.assert_array_equal(r, np.ones((R, C)))


@pytest.mark.parametrize("R", [2, 3])
@pytest.mark.parametrize("C", [2, 3])
def test_setup_numpy_matrix(m, R, C):
    f = m.find_function(f"flatten<{R}, {C}>")
    assert f is not None
    src = np.arange(1, R * C + 1, dtype=np.float32).reshape(R, C)
    r = f(getattr(spy, f"float{R}x{C}")(src))
    np.testing.assert_array_equal(np.asarray(r["data"][: R * C]), src.reshape(-1))
    np.testing.assert_array_equal(np.asarray(r["data"][R * C:]), -1.0)


@pytest.mark.parametrize("R", [2, 3])
@pytest.mark.parametrize("C", [2, 3])
def test_numpy_matrix_as_result(m, R, C):
    f = m.find_function(f"plus2<{R}, {C}>")
    assert f is not None
    n = R * C
    r = f(getattr(spy, f"float{R}x{C}")(np.arange(1, n + 1).reshape(R, C)), _result="numpy")
    assert r.shape == (R, C)
    np.testing.assert_array_equal(r, (np.arange(1, n + 1) + 2.0).reshape(R, C))
