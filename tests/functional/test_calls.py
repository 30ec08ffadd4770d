"""Functional API §1.2-1.3: modules, attribute lookup, positional/keyword calls, overloads, generics, arity errors."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
float add(float a, float b) { return a + b; }
int add_int(int a, int b) { return a + b; }
float over(float a) { return a * 2.0; }
float over(float a, float b) { return a * b; }
T gen_add<T : IArithmetic>(T a, T b) { return a + b; }
int return_n<let N : int>() { return N; }
vector<float, N> copy_vector<let N : int>(vector<float, N> v) { return v * 2.0; }
float with_default(float a, float b = 10.0) { return a + b; }
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "calls", SRC)


def test_positional_and_keyword(m):
    assert m.add(1.0, 2.0) == 3.0
    assert m.add(a=1.5, b=2.0) == 3.5
    assert m.add(1.0, b=4.0) == 5.0
    assert m.add.call(2.0, 3.0) == 5.0


def test_int_call_returns_int(m):
    r = m.add_int(2, 3)
    assert r == 5 and isinstance(r, int)


def test_function_lookup(m):
    assert isinstance(m.add, spy.Function)
    assert m["add"] is m.add
    assert m.find_function("nope") is None
    assert m.require_function("add") is m.add
    with pytest.raises(ValueError, match="Could not find function"):
        m.require_function("nope")
    with pytest.raises(AttributeError, match="has no function or type named 'nope'"):
        m.nope


def test_builtin_types_are_structs(m):
    assert isinstance(m.float, spy.Struct)
    assert m.float3.name == "float3"
    assert m["float2[4]"].type.shape == (4, 2)


def test_overloads(m):
    assert m.over(3.0) == 6.0
    assert m.over(3.0, 4.0) == 12.0


def test_generic_inferred(m):
    assert m.gen_add(1.0, 2.5) == 3.5
    assert m.gen_add(2, 3) == 5
    v = m.gen_add(spy.float3(1, 2, 3), spy.float3(1, 1, 1))
    assert v == spy.float3(2, 3, 4)


def test_generic_explicit(m):
    f = m.require_function("return_n<7>")
    assert f.name == "return_n<7>"
    assert f() == 7
    assert m["copy_vector<3>"](spy.float3(1, 2, 3)) == spy.float3(2, 4, 6)


def test_default_parameter(m):
    assert m.with_default(1.0) == 11.0
    assert m.with_default(1.0, 2.0) == 3.0


def test_too_many_arguments(m):
    with pytest.raises(spy.ResolveException, match="Too many arguments: expected 2, got 3"):
        m.add(1.0, 2.0, 3.0)


def test_unknown_keyword(m):
    with pytest.raises(ValueError, match="No parameter named 'c'"):
        m.add(a=1.0, c=2.0)


def test_missing_parameter(m):
    with pytest.raises(spy.ResolveException, match="Parameter 'b' not specified"):
        m.add(a=1.0)


def test_specified_twice(m):
    with pytest.raises(spy.ResolveException, match="Parameter 'a' specified multiple times"):
        m.add(1.0, 2.0, a=3.0)


def test_resolve_message_names_function(m):
    with pytest.raises(spy.ResolveException, match="Could not call function 'add'"):
        m.add(1.0)


def test_unresolvable_overloads(m):
    with pytest.raises(spy.ResolveException, match="Unable to resolve function"):
        m.over(spy.float3(1, 2, 3), spy.float2(1, 2), 4.0)


def test_cached_call_reuses_kernel(m):
    x = spy.Tensor.from_numpy(m.device, np.arange(4, dtype=np.float32))
    m.add(x, 1.0)
    n = sum(len(c) for c in m.add._node_caches.values())
    for i in range(5):
        y = spy.Tensor.from_numpy(m.device, np.arange(i + 1, dtype=np.float32))
        np.testing.assert_allclose(m.add(y, float(i)).to_numpy(), np.arange(i + 1) + i)
    assert sum(len(c) for c in m.add._node_caches.values()) == n


def test_load_from_file(device, tmp_path):
    p = tmp_path / "mod.slang"
    p.write_text("float twice(float x) { return 2.0 * x; }\n")
    d = spy.create_device(type=device.type, include_paths=[str(tmp_path)])
    mod = spy.Module.load_from_file(d, "mod.slang")
    assert mod.twice(4.0) == 8.0
    mod2 = spy.Module(d.load_module("mod.slang"))
    assert mod2.twice(1.5) == 3.0
    assert repr(mod2) == "Module(name='mod', linked_modules=0)"
