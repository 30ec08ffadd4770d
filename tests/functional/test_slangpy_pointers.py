"""C-style casts to generic pointer types (SlangPy's test_pointers.py `test_atomic_float_in_struct_access`):
`(Atomic<float>*) &buffer[i].value` and other `(T<U>*) expr` / `(T*) &x` casts parse as casts."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler.parse import ast
from slangjit.compiler.parse.parser import parse_module

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = r"""
import "slangpy";
struct Test { int intvalue; float value; int intvalue2; }
void atomic_in_struct(int call_id, Test* buffer) {
    Atomic<float>* cur = (Atomic<float>*) &buffer[call_id % 10].value;
    cur.add(1.0f);
}
float second_of_pair(int i, float* data) {
    vector<float, 2>* v = (vector<float, 2>*) &data[2 * i];
    return (*v).y - (*v).x;
}
int deref_cast(int i, uint* data) { return (int) *(data + i); }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "sj_ptr_casts", SRC)


def test_atomic_float_in_struct_access(device, m):
    n = 10
    buf = spy.NDBuffer.empty(device, (n,), dtype=m.Test)
    cur = buf.cursor()
    for i in range(n):
        cur[i].write({"intvalue": i, "value": 0.0, "intvalue2": i + 1})
    cur.apply()
    m.atomic_in_struct(spy.grid(shape=(n * 100,)), buf.storage)
    out = buf.to_numpy()
    np.testing.assert_array_equal(out["value"], np.full(n, 100.0, np.float32))
    np.testing.assert_array_equal(out["intvalue"], np.arange(n))             # neighbours untouched
    np.testing.assert_array_equal(out["intvalue2"], np.arange(n) + 1)


def test_cast_to_vector_pointer(device, m):
    data = np.array([1, 5, 2, 9, -3, 4], np.float32)
    buf = device.create_buffer(size=data.nbytes, usage=spy.BufferUsage.shader_resource |
                               spy.BufferUsage.unordered_access, data=data)
    got = m.second_of_pair(np.arange(3, dtype=np.int32), buf.device_address, _result="numpy")
    np.testing.assert_array_equal(got, data[1::2] - data[0::2])


def test_cast_of_dereference(device, m):
    data = np.array([7, 11, 13], np.uint32)
    buf = device.create_buffer(size=data.nbytes, usage=spy.BufferUsage.shader_resource |
                               spy.BufferUsage.unordered_access, data=data)
    np.testing.assert_array_equal(m.deref_cast(np.arange(3, dtype=np.int32), buf.device_address,
                                               _result="numpy"), data.astype(np.int32))


@pytest.mark.parametrize("text, is_cast", [
    ("(Atomic<float>*) &x", True), ("(G<int>) *p", True), ("(float*) &x", True), ("(a) * b", False),
    ("(a) & b", False), ("(a < b) * c", False), ("(a * b) & c", False)])
def test_cast_disambiguation(device, text, is_cast):
    mod = parse_module(f"void f() {{ let v = {text}; }}", "<t>")
    init = mod.decls[0].body.stmts[0].decls[0].init
    assert isinstance(init, ast.Cast) is is_cast
