"""Issue 19 group 11, continued: errors inside generic function bodies (and bodies with
interface-typed parameters) are reported when the module is loaded, as SlangPy does, each located
in the body, all of them at once.  slangjit checks bodies per instantiation, so a generic body is
checked with sample arguments that meet its constraints (check/samples.py); only errors every
sample shows are reported, so a body that is valid for the types it is used with never fails to
load."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler.source import CompileError

BROKEN = """
interface IShape { float area(); }
struct Sq : IShape { float s; float area() { return s * s; } }
struct Circ : IShape { float r; float area() { return 3.0 * r * r; } }
T twice<T : __BuiltinFloatingPointType>(T x) { return x + undefined_thing; }
float sumN<let N : int>(float v[N]) { float3 q = v[0]; return q.w; }
float useShape<S : IShape>(S s) { return s.perimeter(); }
float implicitParam(IShape s) { return s.area() + nope; }
struct Holder { float k; float scaled<T : __BuiltinFloatingPointType>(T x) { return k * wrong; } }
float ok(float x) { return x * 2.0; }
"""


def load(device, name, src):
    return spy.Module.load_from_source(device, name, src)


def test_generic_bodies_are_checked_at_load(device):
    with pytest.raises(CompileError) as ei:
        load(device, "generic_broken", BROKEN)
    got = [(d.code, d.loc.line) for d in ei.value.diagnostics]
    assert got == [("E2052", 5), ("E2041", 6), ("E2040", 7), ("E2052", 8), ("E2052", 9)], got
    msgs = [d.message for d in ei.value.diagnostics]
    assert "undefined_thing" in msgs[0] and "generic 'twice'" in msgs[0]
    assert "perimeter" in msgs[2] and "S = " in msgs[2]
    assert "generated kernel" not in str(ei.value)


GOOD = """
interface IShape { float area(); }
struct Sq : IShape { float s; float area() { return s * s; } }
T twice<T : __BuiltinFloatingPointType>(T x) { return x + x; }
T bits<T : __BuiltinArithmeticType>(T a) { return a & T(1); }
float total<let N : int>(float v[N]) { float s = 0.0; for (int i = 0; i < N; i++) s += v[i]; return s; }
float areaOf<S : IShape>(S s) { return s.area(); }
T pick<T>(bool c, T a, T b) { return c ? a : b; }
T sq<T : __BuiltinFloatingPointType>(T x) where T : IDifferentiable { return x * x; }
[Differentiable]
float3 scale3<let N : int>(float3 v) { return v * float(N); }
"""


def test_valid_generic_module_loads_and_runs(device):
    m = load(device, "generic_good", GOOD)
    assert m.twice(1.5) == 3.0
    # `&` is valid for the integers this is used with, though not for every arithmetic type: a
    # choice-dependent error is not reported at load
    assert m.bits(np.int32(7)) == 1


def test_errors_that_depend_on_the_sample_are_not_reported(device):
    src = GOOD + "float useBits(int x) { return float(bits(x)); }\n"
    m = load(device, "generic_bits", src)
    assert m.useBits(np.int32(6)) == 0.0


GENERIC_STRUCT = """
struct Feature<let N : int>
{
    float w[N];
    float eval(float x) { float s = 0.0; for (int i = 0; i < N; i++) s += w[i] * x; return s + missing; }
}
struct Good<T : __BuiltinFloatingPointType>
{
    T v;
    T twice() { return v + v; }
}
float ok(float x) { return x; }
"""


def test_generic_struct_methods_are_checked_at_load(device):
    with pytest.raises(CompileError) as ei:
        load(device, "generic_struct_broken", GENERIC_STRUCT)
    d = ei.value.diagnostics
    assert [(x.code, x.loc.line) for x in d] == [("E2052", 5)] and "generic 'Feature'" in d[0].message
    m = load(device, "generic_struct_good", GENERIC_STRUCT.replace(" + missing", ""))
    assert m.ok(2.0) == 2.0
