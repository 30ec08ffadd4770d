"""Behavioural port of SlangPy's test_return_types.py: structs (nested too) returned as dicts, and inout
struct / scalar / vector / matrix values through ValueRef.  (SlangPy's test_returnvalue registers a custom
marshall in its internal type registry: not applicable, see docs/slangpy-compat.md.)"""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
struct Pair { int x; int y; };
struct Two { Pair a; Pair b; }
Pair make_pair(int a, int b) { return { a, b }; }
Two make_two(int a, int b) { return { { a, b }, { b, a } }; }
void nudge(inout Pair v) { v.x += 1; v.y -= 1; }
void bump(inout int x) { x += 1; }
void twice3(inout float3 v) { v *= 2.0; }
void poke(inout float3x3 m) { m[0][0] += 10.0; }
int add_ints(int a, int b) { return a + b; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_return_types", SRC)


def test_returnvalue_plain(m):
    r = m.add_ints(4, 5)
    assert r == 9 and isinstance(r, int)


def test_return_struct_as_dict(m):
    r = m.make_pair(4, 5)
    assert isinstance(r, dict) and r["x"] == 4 and r["y"] == 5


def test_return_nested_struct_as_dict(m):
    r = m.make_two(4, 5)
    assert isinstance(r, dict)
    assert (r["a"]["x"], r["a"]["y"], r["b"]["x"], r["b"]["y"]) == (4, 5, 5, 4)


def test_inout_struct_as_dict(m):
    v = spy.ValueRef({"x": 5, "y": 10})
    m.nudge(v)
    assert isinstance(v.value, dict) and v.value["x"] == 6 and v.value["y"] == 9


def test_inout_scalar_valueref(m):
    v = spy.ValueRef(5)
    m.bump(v)
    assert v.value == 6


def test_inout_vector_valueref(m):
    v = spy.ValueRef(spy.float3(1.0, 2.0, 3.0))
    m.twice3(v)
    assert (v.value.x, v.value.y, v.value.z) == (2.0, 4.0, 6.0)


def test_inout_matrix_valueref(m):
    orig = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    v = spy.ValueRef(spy.float3x3(orig))
    m.poke(v)
    r = v.value.to_numpy()
    expect = orig.copy()
    expect[0, 0] += 10.0
    np.testing.assert_array_equal(r, expect)
