"""Gaps found by running SlangPy's own functional tests unchanged against slangjit (scripts/slangpy_literal.py):
each test here checks the behaviour that run needed, in our own words, against numpy / analytic values."""
import math

import numpy as np
import pytest

import slangjit as spy


# ---- spy.math: vector helpers on Python-side vectors (SlangPy programs compute expected values with them)

def test_math_length_normalize_dot_cross_match_numpy():
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = rng.normal(size=3), rng.normal(size=3)
        va, vb = spy.float3(*a), spy.float3(*b)
        assert spy.math.length(va) == pytest.approx(np.linalg.norm(a), rel=1e-6)
        assert spy.math.dot(va, vb) == pytest.approx(float(np.float32(a).astype(np.float64) @ np.float32(b)), rel=1e-6)
        n = spy.math.normalize(va)
        assert isinstance(n, spy.float3)
        np.testing.assert_allclose(n.to_numpy(), np.float32(a) / np.linalg.norm(np.float32(a)), rtol=1e-6)
        np.testing.assert_allclose(spy.math.cross(va, vb).to_numpy(), np.cross(np.float32(a), np.float32(b)),
                                   rtol=1e-5, atol=1e-6)
        assert spy.math.distance(va, vb) == pytest.approx(np.linalg.norm(np.float32(a) - np.float32(b)), rel=1e-6)


def test_math_elementwise_and_errors():
    v = spy.float2(-3.0, 4.0)
    assert spy.math.abs(v) == spy.float2(3.0, 4.0)
    assert spy.math.max(v, 0.0) == spy.float2(0.0, 4.0)
    assert spy.math.min(v, spy.float2(0.0, 0.0)) == spy.float2(-3.0, 0.0)
    assert spy.math.clamp(v, -1.0, 1.0) == spy.float2(-1.0, 1.0)
    np.testing.assert_allclose(spy.math.lerp(spy.float2(0, 0), spy.float2(2, 4), 0.25).to_numpy(), [0.5, 1.0])
    assert spy.math.length(spy.float2(3, 4)) == 5.0
    assert spy.math.sqrt(4.0) == 2.0 and math.isclose(spy.math.sqrt(spy.float2(4, 9)).y, 3.0)
    with pytest.raises(ValueError, match="length 0"):
        spy.math.normalize(spy.float2(0, 0))
    with pytest.raises(ValueError, match="3-component"):
        spy.math.cross(spy.float2(1, 0), spy.float2(0, 1))
    with pytest.raises(TypeError, match="vector"):
        spy.math.length([1.0, 2.0])


# ---- a vector compared with a scalar compares every component (as the arithmetic operators broadcast)

def test_vector_equals_scalar_componentwise():
    assert spy.float2(10, 10) == 10
    assert not (spy.float2(10, 9) == 10)
    assert spy.float2(10, 9) != 10
    assert spy.int3(2, 2, 2) == 2
    assert spy.float3(1, 2, 3) == spy.float3(1, 2, 3)
    assert spy.float3(1, 2, 3) != spy.float3(1, 2, 4)
    assert spy.float3(1, 2, 3) == [1, 2, 3]
