"""Behavioural port of SlangPy's test_simple_function_call.py: scalar calls (bool into int), refused casts
and argument counts, returns, a specialised generic found by name, out / inout through intRef, tensors of
ints (broadcast, mismatch, remapped output), tensors for Tensor / StructuredBuffer parameters, struct
results in a tensor, and lists / dicts for array parameters and struct fields of every scalar type."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor, diffPair, float3, floatDiffPair, intRef

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def _fn(device, name, src):
    if 'import "slangpy";' not in src:
        src = 'import "slangpy";\n' + src
    f = spy.Module.load_from_source(device, "port_sfc_" + hashlib.sha256(src.encode()).hexdigest()[:12], src).find_function(name)
    assert f is not None
    return f


def _ints(n, seed):
    return np.random.default_rng(seed).integers(0, 100, size=n, dtype=np.int32)


def test_call_function(device):
    f = _fn(device, "add", "void add(int a, int b) {}")
    f(5, 10)
    f(5, False)


def test_fail_call_function(device):
    f = _fn(device, "add", "void add(int a, int b) {}")
    with pytest.raises(Exception):
        f(5, float3(1.0, 2.0, 3.0))
    with pytest.raises(Exception):
        f(5)


def test_returnvalue(device):
    assert _fn(device, "add", "int add(int a, int b) { return a + b; }")(5, 10) == 15


def test_call_specialized_function(device):
    f = _fn(device, "return_number<int>", "T return_number<T : IInteger>() { return T(42); }")
    assert f.name == "return_number<int>"
    assert f() == 42


def test_returnvalue_with_diffpair_input(device):
    f = _fn(device, "add", "float add(float a, float b) { return a + b; }")
    assert f(diffPair(5.0), 10.0) == 15.0


def test_scalar_outparam(device):
    f = _fn(device, "add", "void add(int a, int b, out int c) { c = a + b; }")
    r = intRef()
    f(5, 10, r)
    assert r.value == 15


def test_scalar_inoutparam(device):
    f = _fn(device, "add", "void add(inout int a) { a += 10; }")
    r = intRef(5)
    f(r)
    assert r.value == 15


def test_scalar_outparam_with_diffpair(device):
    f = _fn(device, "add", "void add(float a, float b, out float c) { c = a + b; }")
    r = floatDiffPair()
    f(5.0, 10.0, r)
    assert r.primal == 15.0


def _pair(device, n0, n1=None, nout=None, seed=0):
    f = _fn(device, "add", "void add(int a, int b, out int c) { c = a + b; }")
    n1 = n0 if n1 is None else n1
    nout = max(n0, n1) if nout is None else nout

    def make(n, s):
        if n == 0:
            return int(_ints(1, s)[0])
        t = Tensor.empty(shape=(n,), device=device, dtype=int)
        t.storage.copy_from_numpy(_ints(n, s))
        return t
    a, b = make(n0, seed), make(n1, seed + 1)
    out = Tensor.empty(shape=(nout,), device=device, dtype=int)
    f(a, b, out)
    da = np.full(nout, a) if isinstance(a, int) else a.storage.to_numpy().view(np.int32)[:nout]
    db = np.full(nout, b) if isinstance(b, int) else b.storage.to_numpy().view(np.int32)[:nout]
    np.testing.assert_array_equal(out.storage.to_numpy().view(np.int32)[:nout], da + db)


def test_call_function_with_buffer(device):
    _pair(device, 128)


def test_call_function_with_none_threadgroup_sized_buffer(device):
    _pair(device, 73)


def test_call_function_with_mismatched_size_buffers(device):
    with pytest.raises(ValueError):
        _pair(device, 32, 64)


def test_call_function_with_broadcast(device):
    _pair(device, 74, 0)
    _pair(device, 0, 74)


def test_remap_output(device):
    f = _fn(device, "add_remap", "void add_remap(int a, int b, out int c) { c = a + b; }")
    a, b = _ints(100, 1), _ints(50, 2)
    ta = Tensor.empty(shape=(100,), device=device, dtype=int)
    ta.storage.copy_from_numpy(a)
    tb = Tensor.empty(shape=(50,), device=device, dtype=int)
    tb.storage.copy_from_numpy(b)
    c = Tensor.empty(shape=(50, 100), device=device, dtype=int)
    f.map((1,), (0,))(ta, tb, c)
    np.testing.assert_array_equal(c.to_numpy(), b[:, None] + a[None, :])


def test_returnvalue_buffer(device):
    f = _fn(device, "add", "int add(int a, int b) { return a + b; }")
    a, b = _ints(50, 3), _ints(50, 4)
    ta = Tensor.empty(shape=(50,), device=device, dtype=int)
    ta.storage.copy_from_numpy(a)
    tb = Tensor.empty(shape=(50,), device=device, dtype=int)
    tb.storage.copy_from_numpy(b)
    r = f(ta, tb)
    np.testing.assert_array_equal(r.storage.to_numpy().view(np.int32)[:50], a + b)


def test_pass_buffer_to_buffer(device):
    f = _fn(device, "add", "int add(Tensor<int,1> a, Tensor<int,1> b) { return a[0] + b[0]; }")
    a, b = _ints(1, 5), _ints(1, 6)
    ta = Tensor.empty(shape=(1,), device=device, dtype=int)
    ta.storage.copy_from_numpy(a)
    tb = Tensor.empty(shape=(1,), device=device, dtype=int)
    tb.storage.copy_from_numpy(b)
    assert f(ta, tb) == a[0] + b[0]


def test_return_struct_in_buffer(device):
    m = spy.Module.load_from_source(device, "port_sfc_foo", "struct Foo { int x; }\nFoo create_foo(int x) { return { x }; }")
    x = Tensor.empty(shape=(1,), device=device, dtype=int)
    x.storage.copy_from_numpy(np.array([17], np.int32))
    r = m.create_foo(x)
    assert r.shape == (1,)
    assert r.to_numpy()[0]["x"] == 17


@pytest.mark.parametrize("st", ["float", "half", "double"])
def test_pass_float_array(device, st):
    m = spy.Module.load_from_source(device, f"port_sfc_fa_{st}", f"{st} first({st} x[3]) {{ return x[0]; }}")
    assert abs(m.first([3.0, 4.0, 5.0]) - 3.0) < 1e-5


INTS = ["uint8_t", "uint16_t", "uint", "uint64_t", "int8_t", "int16_t", "int", "int64_t"]


@pytest.mark.parametrize("st", INTS)
def test_pass_int_array(device, st):
    m = spy.Module.load_from_source(device, f"port_sfc_ia_{st}", f"{st} first({st} x[3]) {{ return x[0]; }}")
    assert m.first([3, 4, 5]) == 3


@pytest.mark.parametrize("st", ["float", "half", "double"])
def test_pass_float_field(device, st):
    m = spy.Module.load_from_source(device, f"port_sfc_ff_{st}", f"struct Foo {{ {st} x; }}\n{st} unwrap(Foo f) {{ return f.x; }}")
    assert abs(m.unwrap({"x": 3.0}) - 3.0) < 1e-5


@pytest.mark.parametrize("st", INTS)
def test_pass_int_field(device, st):
    m = spy.Module.load_from_source(device, f"port_sfc_if_{st}", f"struct Foo {{ {st} x; }}\n{st} unwrap(Foo f) {{ return f.x; }}")
    assert m.unwrap({"x": 3}) == 3


def test_pass_buffer_to_structured_buffer(device):
    f = _fn(device, "copy_first", "void copy_first(StructuredBuffer<int> a, RWStructuredBuffer<int> b) { b[0] = a[0]; }")
    a = Tensor.empty(shape=(1,), device=device, dtype=int)
    a.storage.copy_from_numpy(np.array([42], np.int32))
    b = Tensor.empty(shape=(1,), device=device, dtype=int)
    b.storage.copy_from_numpy(np.zeros(1, np.int32))
    f(a, b)
    assert b.storage.to_numpy().view(np.int32)[0] == 42
