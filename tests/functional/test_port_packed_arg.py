"""Behavioural port of SlangPy's test_packed_arg.py and test_type_conformances.py: `spy.PackedArg` of an int,
a struct dict, a list of struct dicts (vectorised) and structs holding tensors; `Function.type_conformances`
choosing the implementation behind `createDynamicObject<IVal>(0, 0)`, and the call failing without one."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import PackedArg, Tensor, TypeConformance

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
int copy(int v) { return v; }
struct Val { int value; }
int copy_val(Val v) { return v.value; }
struct X { int x; }
int inc(X v) { return v.x + 1; }
struct TVal { Tensor<float,1> x; }
float tinc(TVal v) { return v.x[0] + 1; }
"""
CONF = """
import "slangpy";
interface IVal { int get(); }
struct Get10 : IVal { int get() { return 10; } }
struct Get20 : IVal { int get() { return 20; } }
int getval() { IVal v = createDynamicObject<IVal>(0, 0); return v.get(); }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_packed", SRC)


def test_simple_int_call(m):
    assert m.copy(PackedArg(m, 42)) == 42


def test_simple_struct_call(m):
    assert m.copy_val(PackedArg(m, {"_type": "Val", "value": 42})) == 42


def test_vectorize_struct_array(m):
    r = m.inc(PackedArg(m, [{"x": i, "_type": "X"} for i in (1, 2, 3, 4)]), _result="numpy")
    assert r.shape == (4,) and r.dtype == np.int32
    np.testing.assert_array_equal(r, [2, 3, 4, 5])


def test_vectorize_struct_with_tensor_array(device, m):
    vals = []
    for i in range(4):
        t = Tensor.zeros(device, dtype=m.float, shape=(1,))
        t.copy_from_numpy(np.array([i + 1], np.float32))
        vals.append({"x": t, "_type": "TVal"})
    r = m.tinc(PackedArg(m, vals), _result="numpy")
    assert r.shape == (4,) and r.dtype == np.float32
    np.testing.assert_array_equal(r, [2, 3, 4, 5])


def test_conformance(device):
    f = spy.Module.load_from_source(device, "port_conf", CONF).getval
    assert f.type_conformances([TypeConformance("IVal", "Get10")])() == 10
    assert f.type_conformances([TypeConformance("IVal", "Get20")])() == 20


def test_conformance_default(device):
    # SlangPy fails to link this kernel without type conformances (a RuntimeError); slangjit takes the
    # module's conforming structs in declaration order, id 0 first (docs/slangpy-compat.md)
    f = spy.Module.load_from_source(device, "port_conf", CONF).getval
    assert f() == 10
