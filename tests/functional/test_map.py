"""Functional API §1.9: explicit vectorisation with `.map(...)`."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
float add(float a, float b) { return a + b; }
float copy(float a) { return a; }
float dot3(float3 a, float3 b) { return dot(a, b); }
T copy_generic<T>(T src) { return src; }
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "mp", SRC)


def test_outer_product(m):
    a = np.arange(4, dtype=np.float32)
    b = np.arange(3, dtype=np.float32) * 10
    r = m.add.map((1,), (0,))(a, b, _result="numpy")
    assert r.shape == (3, 4)
    np.testing.assert_array_equal(r, b[:, None] + a[None, :])


def test_transpose(m):
    a = np.arange(200, dtype=np.float32).reshape(10, 20)
    r = m.copy.map((1, 0))(a, _result="numpy")
    assert r.shape == (20, 10)
    np.testing.assert_array_equal(r, a.T)


def test_keyword_padding(m):
    a = np.ones((8, 8), np.float32)
    b = np.arange(8, dtype=np.float32)
    r = m.add.map(b=(1,))(a=a, b=b, _result="numpy")
    np.testing.assert_array_equal(r, a + b[None, :])
    r = m.add.map(b=(0,))(a=a, b=b, _result="numpy")
    np.testing.assert_array_equal(r, a + b[:, None])


def test_dot3_cross(m):
    a = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    r = m.dot3.map(a=(0,), b=(1,))(a=a, b=b, _result="numpy")
    assert r.shape == (10, 5)
    np.testing.assert_allclose(r, a @ b.T, rtol=1e-5, atol=1e-6)


def test_keyword_map_needs_keyword_argument(m):
    with pytest.raises(ValueError, match="Too many keyword arguments supplied for explicit vectorization"):
        m.add.map(a=(0,))(np.ones(3, np.float32), np.ones(3, np.float32))


def test_type_map_resolves_generic(m):
    a = np.arange(4, dtype=np.float32)
    r = m.copy_generic.map(src="float")(src=a, _result="numpy")
    np.testing.assert_array_equal(r, a)


def test_generic_tensor_is_ambiguous(m):
    with pytest.raises(spy.ResolveException, match="Ambiguous"):
        m.copy_generic(np.arange(4, dtype=np.float32))


def test_map_chains_with_return_type(m):
    a = np.arange(3, dtype=np.float32)
    r = m.add.map((0,), (0,)).return_type("numpy")(a, a)
    np.testing.assert_array_equal(r, 2 * a)
