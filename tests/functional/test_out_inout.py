"""Functional API §1.8: out / inout parameters."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
void twice(float a, out float b) { b = 2.0 * a; }
void incr(inout float a) { a = a + 1.0; }
void incr3(inout float3 v) { v = v + float3(1, 2, 3); }
void split(float3 v, out float x, out float y, out float z) { x = v.x; y = v.y; z = v.z; }
struct S { float a; float b; };
void fill(float v, out S s) { s.a = v; s.b = -v; }
float ret_and_out(float a, out int n) { n = int(a) * 10; return a + 0.5; }
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "oi", SRC)


def test_out_valueref(m):
    r = spy.floatRef()
    m.twice(3.0, r)
    assert r.value == 6.0


def test_inout_valueref(m):
    r = spy.ValueRef(4.0)
    m.incr(r)
    assert r.value == 5.0
    v = spy.ValueRef(spy.float3(1, 1, 1))
    m.incr3(v)
    assert v.value == spy.float3(2, 3, 4)


def test_out_numpy(m):
    a = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    m.twice(a, out)
    np.testing.assert_array_equal(out, 2 * a)


def test_inout_tensor(m):
    t = spy.Tensor.from_numpy(m.device, np.arange(6, dtype=np.float32).reshape(2, 3))
    m.incr(t)
    np.testing.assert_array_equal(t.to_numpy(), np.arange(6).reshape(2, 3) + 1)


def test_multiple_outs(m):
    v = np.arange(12, dtype=np.float32).reshape(4, 3)
    x, y, z = (np.zeros(4, np.float32) for _ in range(3))
    m.split(v, x, y, z)
    np.testing.assert_array_equal(np.stack([x, y, z], 1), v)


def test_out_struct_dict_of_containers(m):
    a = np.zeros(3, np.float32)
    b = np.zeros(3, np.float32)
    m.fill(np.array([1, 2, 3], np.float32), {"a": a, "b": b})
    np.testing.assert_array_equal(a, [1, 2, 3])
    np.testing.assert_array_equal(b, [-1, -2, -3])


def test_out_struct_valueref(m):
    r = spy.ValueRef()
    m.fill(2.0, r)
    assert r.value == {"a": 2.0, "b": -2.0}


def test_return_and_out(m):
    n = spy.intRef()
    assert m.ret_and_out(3.0, n) == 3.5
    assert n.value == 30


def test_out_requires_writable(m):
    with pytest.raises(spy.BoundVariableException, match="Cannot read back value for non-writable type"):
        m.twice(1.0, 2.0)


def test_out_readonly_tensor(m):
    t = spy.Tensor.empty(m.device, (3,), float, usage=spy.BufferUsage.shader_resource)
    with pytest.raises(ValueError, match="Cannot read back value for non-writable type"):
        m.twice(np.ones(3, np.float32), t)
