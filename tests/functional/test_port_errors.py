"""Behavioural port of SlangPy's test_errors.py: argument-resolution errors, unsupported Python types,
unresolvable implicit casts, strict / dispatch-time broadcast errors and missing functions / methods, each
with SlangPy's wording."""
from __future__ import annotations

import pytest

import slangjit as spy
from slangjit import NDBuffer, float4

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
float one(float a) { return a; }
float two(float a, float b) { return a + b; }
float first3(float3 a) { return a.x; }
float over(float a) { return a; }
float over(float a, float b) { return a + b; }
float gen<T>(T a) { return 0; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_errors", SRC)


def test_no_matching_arg_count(m):
    with pytest.raises(Exception, match=r"Too many arguments: expected 1, got 2"):
        m.one.call(1.0, 2.0)


def test_no_matching_arg_name(m):
    with pytest.raises(Exception, match=r"No parameter named"):
        m.one.call(b=10.0)


def test_not_enough_args(m):
    with pytest.raises(Exception, match=r"Parameter 'a' not specified"):
        m.one.call()


def test_not_enough_args_2(m):
    with pytest.raises(Exception, match=r"Parameter 'b' not specified"):
        m.two.call(10.0)


def test_specify_twice(m):
    with pytest.raises(Exception, match=r"Parameter 'a' specified multiple times"):
        m.two.call(10.0, a=20.0)


def test_pass_none(m):
    with pytest.raises(ValueError, match=r"Explicit vectorization raised exception: NotImplementedError"):
        m.over.map(()).call(None)


def test_pass_string(m):
    with pytest.raises(spy.BoundVariableException, match=r"Unsupported type"):
        m.one.call("hello")


def test_bad_implicit_buffer_cast(device, m):
    with pytest.raises(Exception, match=r"Argument 'a' could not be resolved"):
        m.first3(NDBuffer(device, dtype=float4, shape=(10,)))


def test_invalid_broadcast(device):
    f = spy.Module.load_from_source(device, "port_errors_strict", SRC, options={"strict_broadcasting": True}).two
    with pytest.raises(ValueError, match=r"Strict broadcasting is enabled"):
        f(NDBuffer(device, dtype=float, shape=(10,)), NDBuffer(device, dtype=float, shape=(10, 10)))


def test_invalid_broadcast_during_dispatch(device, m):
    with pytest.raises(ValueError, match=r"Shape mismatch"):
        m.two(NDBuffer(device, dtype=float, shape=(10, 5)), NDBuffer(device, dtype=float, shape=(10, 10)))


def test_missing_function(device):
    mod = spy.Module.load_from_source(device, "port_errors_missing", "void hello() {}")
    with pytest.raises(AttributeError, match=r"has no function or type named"):
        mod.foo


def test_missing_child_function(device):
    mod = spy.Module.load_from_source(device, "port_errors_child", "struct Foo {}\nvoid hello() {}")
    with pytest.raises(AttributeError, match=r"has no method or sub-type named"):
        mod.Foo.foo
