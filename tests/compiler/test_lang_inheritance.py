"""Struct inheritance as Slang has it: a struct deriving from a struct (through several levels,
from a generic struct) has the base's fields first and its methods, properties and statics; a
base method calls the base's methods even where the derived struct declares one of the same name
(no virtual dispatch); the derived struct converts to its base (argument passing, initialization,
`(Base)d`, `Base(d)`: its base part); interface requirements may be met by inherited methods;
initializer lists fill the base's fields first; differentiable structs inherit differentiable
fields and methods.  Expected values: the reference compiler's CPU output for INHERIT and
OVERRIDE (`harness.py run --backend oracle`); derivatives analytic (the reference compiler rejects
the upcast inside a differentiable function, "derivative is lost during assignment")."""
from __future__ import annotations

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

INHERIT = """RWStructuredBuffer<float> outputBuffer;
struct Base
{
    float a;
    float getA() { return a; }
    float twice() { return 2.0 * getA(); }
    [mutating] void bump(float d) { a += d; }
}
struct Derived : Base
{
    float b;
    float sum() { return a + b; }
}
struct Deeper : Derived
{
    int c;
    float all() { return a + b + float(c) + twice(); }
}
float useBase(Base x) { return x.a * 10.0; }
[numthreads(1, 1, 1)]
void computeMain()
{
    Derived d;
    d.a = 1.5;
    d.b = 2.0;
    outputBuffer[0] = d.sum();
    outputBuffer[1] = d.getA();
    outputBuffer[2] = d.twice();
    d.bump(1.0);
    outputBuffer[3] = d.a;
    Deeper e;
    e.a = 1.0; e.b = 2.0; e.c = 3;
    outputBuffer[4] = e.all();
    outputBuffer[5] = useBase(d);
    Base bb = e;
    outputBuffer[6] = bb.a;
}
"""

OVERRIDE = """RWStructuredBuffer<float> outputBuffer;
interface IVal { float val(); }
struct Base
{
    float a;
    __init(float x) { a = x * 2.0; }
    float getA() { return a; }
    float twice() { return 2.0 * getA(); }
}
struct Derived : Base, IVal
{
    float b;
    __init(float x, float y) { a = x; b = y; }
    float getA() { return a + 100.0; }
    float val() { return twice() + b; }
}
float viaIface<T : IVal>(T t) { return t.val(); }
float useBase(Base x) { return x.getA(); }
[numthreads(1, 1, 1)]
void computeMain()
{
    Derived d = Derived(1.0, 2.0);
    outputBuffer[0] = d.getA();
    outputBuffer[1] = d.twice();
    outputBuffer[2] = viaIface(d);
    outputBuffer[3] = useBase(d);
    Base b0 = Base(3.0);
    outputBuffer[4] = b0.a;
    Derived d2 = { 5.0, 6.0 };
    outputBuffer[5] = d2.a;
    outputBuffer[6] = d2.b;
    outputBuffer[7] = ((Base)d).getA();
    outputBuffer[8] = Base(d2).getA();
}
"""

GENERIC_BASE = """RWStructuredBuffer<float> outputBuffer;
interface IArea { float area(); }
struct Box<T : __BuiltinFloatingPointType>
{
    T w; T h;
    float area() { return float(w) * float(h); }
    static float unit() { return 1.0; }
}
struct Tile : Box<float>, IArea
{
    float depth;
    float volume() { return area() * depth; }
}
float areaOf<A : IArea>(A a) { return a.area(); }
void grow(inout Box<float> b) { b.w = b.w * 2.0; }
[numthreads(1, 1, 1)]
void computeMain()
{
    Tile t;
    t.w = 2.0; t.h = 3.0; t.depth = 4.0;
    outputBuffer[0] = t.volume();
    outputBuffer[1] = areaOf(t);
    outputBuffer[2] = Tile.unit();
    Box<float> b = t;
    grow(b);
    outputBuffer[3] = b.w;
    outputBuffer[4] = t.w;
}
"""

DIFFERENTIABLE = """RWStructuredBuffer<float> outputBuffer;
struct Particle : IDifferentiable
{
    float3 pos;
    float mass;
    [Differentiable] float kinetic(float3 v) { return 0.5 * mass * dot(v, v); }
    [Differentiable] float height() { return pos.y * mass; }
}
struct Charged : Particle, IDifferentiable
{
    float charge;
    [Differentiable] float energy(float3 v) { return kinetic(v) + 9.8 * height() + charge * pos.x; }
}
[Differentiable]
float baseEnergy(Particle p) { return p.height() * 2.0; }
[Differentiable]
float total(Charged c, float3 v) { return c.energy(v) + baseEnergy(c); }
[numthreads(1, 1, 1)]
void computeMain()
{
    Charged c;
    c.pos = float3(1.0, 2.0, 3.0);
    c.mass = 1.5;
    c.charge = 0.25;
    float3 v = float3(0.5, 1.0, -1.0);
    outputBuffer[0] = total(c, v);
    var pc = diffPair(c);
    var pv = diffPair(v);
    bwd_diff(total)(pc, pv, 1.0);
    outputBuffer[1] = pc.d.pos.x;
    outputBuffer[2] = pc.d.pos.y;
    outputBuffer[3] = pc.d.mass;
    outputBuffer[4] = pc.d.charge;
    outputBuffer[5] = pv.d.x;
    Charged.Differential dc;
    dc.pos = float3(0.0); dc.mass = 1.0; dc.charge = 0.0;
    outputBuffer[6] = fwd_diff(total)(diffPair(c, dc), diffPair(v, float3(0.0))).d;
}
"""


@DEV
def test_fields_methods_and_upcasts(device, tmp_path):
    got = run_program(device, tmp_path, INHERIT, 7, "inherit")
    np.testing.assert_allclose(got, [3.5, 1.5, 3.0, 2.5, 8.0, 25.0, 1.0])        # the reference compiler's


@DEV
def test_base_methods_call_the_base_methods(device, tmp_path):
    got = run_program(device, tmp_path, OVERRIDE, 9, "override")
    # Derived.getA hides Base.getA for d.getA(), but Base.twice still calls Base.getA (the reference
    # compiler's values, 0-7); Base(d2) is d2's base part
    np.testing.assert_allclose(got, [101.0, 2.0, 4.0, 1.0, 6.0, 5.0, 6.0, 1.0, 5.0])


@DEV
def test_generic_base_statics_and_inout_base(device, tmp_path):
    got = run_program(device, tmp_path, GENERIC_BASE, 5, "generic_base")
    np.testing.assert_allclose(got, [24.0, 6.0, 1.0, 4.0, 2.0])


@DEV
def test_differentiable_derived_struct(device, tmp_path):
    got = run_program(device, tmp_path, DIFFERENTIABLE, 7, "diff_inherit")
    m, q, pos, v = 1.5, 0.25, np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0, -1.0])
    value = 0.5 * m * v @ v + 9.8 * pos[1] * m + q * pos[0] + 2.0 * pos[1] * m
    dmass = 0.5 * v @ v + 9.8 * pos[1] + 2.0 * pos[1]
    np.testing.assert_allclose(got, [value, q, 9.8 * m + 2.0 * m, dmass, pos[0], m * v[0], dmass], rtol=1e-5)


THIS_IN_BASE = """RWStructuredBuffer<float> outputBuffer;
struct Base
{
    float a;
    float getA() { return a; }
    float viaThis() { return this.getA() * 3.0; }
    property float pa { get { return this.a + 0.5; } }
}
struct Derived : Base
{
    float getA() { return a + 100.0; }
    float own() { return this.getA(); }
}
[numthreads(1, 1, 1)]
void computeMain()
{
    Derived d;
    d.a = 1.0;
    outputBuffer[0] = d.viaThis();
    outputBuffer[1] = d.own();
    outputBuffer[2] = d.pa;
}
"""


@DEV
def test_this_in_a_base_method_is_the_base(device, tmp_path):
    # `this.getA()` inside Base.viaThis calls Base.getA (3, the reference compiler's value); Derived's
    # own `this.getA()` calls its own (101)
    got = run_program(device, tmp_path, THIS_IN_BASE, 3, "this_in_base")
    np.testing.assert_allclose(got, [3.0, 101.0, 1.5])


@pytest.mark.parametrize("name", ["INHERIT", "OVERRIDE", "GENERIC_BASE", "DIFFERENTIABLE", "THIS_IN_BASE"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name], name.lower())
