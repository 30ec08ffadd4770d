"""Issue 19 group 3, interfaces as values: a material system (an array of materials behind an
interface in a struct field, made by a function returning the interface, each with a
differentiable `eval`) run and differentiated in both modes; `createDynamicObject<I>(id, data)`;
`[anyValueSize(N)]`; a generic interface `IReduce<8>` as a parameter type; a generic function whose
parameter is an associated type of its generic parameter (`S.Params`); inherited interfaces; and
conformance ids given at link time (`type_conformances`), which decide what an id means.
Expected values: the reference compiler's output for the same programs, re-derived by hand."""
from __future__ import annotations

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

MATERIALS = """RWStructuredBuffer<float> outputBuffer;

[anyValueSize(16)]
interface IMaterial
{
    [Differentiable]
    float3 eval(float3 albedo, float cosTheta);
    float weight();
}

struct Lambert : IMaterial
{
    float k;
    [Differentiable]
    float3 eval(float3 albedo, float cosTheta) { return albedo * (k * max(cosTheta, 0.0)); }
    float weight() { return 1.0; }
}
struct Phong : IMaterial
{
    float shininess;
    float spec;
    [Differentiable]
    float3 eval(float3 albedo, float cosTheta) { return albedo * 0.5 + spec * pow(max(cosTheta, 0.0), shininess); }
    float weight() { return 2.0; }
}
struct Emissive : IMaterial
{
    float3 e;
    [Differentiable]
    float3 eval(float3 albedo, float cosTheta) { return e + albedo * cosTheta * cosTheta; }
    float weight() { return 0.5; }
}

IMaterial makeMaterial(int id, float a, float b)
{
    if (id == 0) { Lambert l; l.k = a; return l; }
    if (id == 1) { Phong p; p.shininess = a; p.spec = b; return p; }
    Emissive m; m.e = float3(a, b, 0.0); return m;
}

struct Scene
{
    IMaterial mats[3];
    float cosines[3];
}

[Differentiable]
float shade(Scene s, float3 albedo)
{
    float total = 0.0;
    [ForceUnroll]
    for (int i = 0; i < 3; i++)
    {
        float3 c = s.mats[i].eval(albedo, s.cosines[i]);
        total += no_diff(s.mats[i].weight()) * (c.x + 2.0 * c.y + 3.0 * c.z);
    }
    return total;
}

[numthreads(1, 1, 1)]
void computeMain()
{
    Scene s;
    s.mats[0] = makeMaterial(0, 0.8, 0.0);
    s.mats[1] = makeMaterial(1, 2.0, 0.25);
    s.mats[2] = makeMaterial(2, 0.1, 0.2);
    s.cosines[0] = 0.5; s.cosines[1] = 0.6; s.cosines[2] = 0.7;
    float3 albedo = float3(0.2, 0.4, 0.6);
    outputBuffer[0] = shade(s, albedo);
    var pa = diffPair(albedo);
    bwd_diff(shade)(s, pa, 1.0);
    outputBuffer[1] = pa.d.x;
    outputBuffer[2] = pa.d.y;
    outputBuffer[3] = pa.d.z;
    outputBuffer[4] = fwd_diff(shade)(s, diffPair(albedo, float3(1.0, 0.0, 0.0))).d;
    IMaterial m = createDynamicObject<IMaterial>(1, float2(3.0, 0.5));
    outputBuffer[5] = m.eval(albedo, 0.5).x;
    outputBuffer[6] = m.weight();
}
"""

GENERIC_IFACE = """RWStructuredBuffer<float> outputBuffer;

interface IReduce<let N : int>
{
    [Differentiable]
    float reduce(float v[N]);
}
struct Sum8 : IReduce<8>
{
    float scale;
    [Differentiable]
    float reduce(float v[8]) { float s = 0.0; for (int i = 0; i < 8; i++) s += v[i] * scale; return s; }
}
struct Max8 : IReduce<8>
{
    float scale;
    [Differentiable]
    float reduce(float v[8]) { float s = v[0]; for (int i = 1; i < 8; i++) s = max(s, v[i]); return s * scale; }
}

interface IShape
{
    associatedtype Params;
    float area(Params p);
}
struct Circle : IShape
{
    typealias Params = float;
    float area(float r) { return 3.0 * r * r; }
}

[Differentiable]
float run(IReduce<8> r, float x)
{
    float v[8];
    for (int i = 0; i < 8; i++) v[i] = x * float(i + 1);
    return r.reduce(v);
}

float useShape<S : IShape>(S s, S.Params p) { return s.area(p); }

[numthreads(1, 1, 1)]
void computeMain()
{
    IReduce<8> a = createDynamicObject<IReduce<8>>(0, 2.0);
    IReduce<8> b = createDynamicObject<IReduce<8>>(1, 3.0);
    outputBuffer[0] = run(a, 1.0);
    outputBuffer[1] = run(b, 1.0);
    var px = diffPair(1.0);
    bwd_diff(run)(a, px, 1.0);
    outputBuffer[2] = px.d;
    var py = diffPair(1.0);
    bwd_diff(run)(b, py, 1.0);
    outputBuffer[3] = py.d;
    Circle c;
    outputBuffer[4] = useShape(c, 2.0);
}
"""

INHERITED = """RWStructuredBuffer<float> outputBuffer;
[anyValueSize(16)]
interface IBase : IDifferentiable
{
    [Differentiable]
    float baseCalc(float x);
}
[anyValueSize(16)]
interface IDerived : IBase
{
    [Differentiable]
    float derivedCalc(float x);
}
struct A : IDerived
{
    float a;
    __init(float a) { this.a = a; }
    [Differentiable]
    [NoDiffThis]
    float baseCalc(float x) { return a * x * x; }
    [Differentiable]
    [NoDiffThis]
    float derivedCalc(float x) { return a * x * x * x; }
}
struct B : IDerived
{
    float b;
    __init(float b) { this.b = b; }
    [Differentiable]
    [NoDiffThis]
    float baseCalc(float x) { return b * x; }
    [Differentiable]
    [NoDiffThis]
    float derivedCalc(float x) { return b * x * x; }
}
[Differentiable]
float useBase(IBase obj, float x)
{
    return obj.baseCalc(x);
}
[Differentiable]
float dispatchBase(uint id, float x, no_diff float param)
{
    IBase obj;
    if (id == 0)
        obj = no_diff(A(param));
    else
        obj = no_diff(B(param));
    return useBase(obj, x);
}
[numthreads(1, 1, 1)]
void computeMain()
{
    {
        var p = diffPair(3.0);
        bwd_diff(dispatchBase)(0, p, 2.0, 1.0);
        outputBuffer[0] = p.d;
    }
    // CHECK: 12.0
    {
        var p = diffPair(2.0);
        bwd_diff(dispatchBase)(1, p, 3.0, 1.0);
        outputBuffer[1] = p.d;
    }
    // CHECK: 3.0
}
"""

MAT_CONF = [("IMaterial", "Lambert", 0), ("IMaterial", "Phong", 1), ("IMaterial", "Emissive", 2)]


def shade_reference(albedo):
    """float64 reference of MATERIALS' shade(): value and gradient w.r.t. albedo."""
    a = np.asarray(albedo, dtype=np.float64)
    w3 = np.array([1.0, 2.0, 3.0])
    lam = a * (0.8 * 0.5)
    pho = a * 0.5 + 0.25 * 0.6 ** 2.0
    emi = np.array([0.1, 0.2, 0.0]) + a * 0.7 * 0.7
    value = 1.0 * lam @ w3 + 2.0 * pho @ w3 + 0.5 * emi @ w3
    grad = (1.0 * 0.4 + 2.0 * 0.5 + 0.5 * 0.49) * w3
    return value, grad


@DEV
def test_material_system(device, tmp_path):
    got = run_program(device, tmp_path, MATERIALS, 7, "materials", type_conformances=MAT_CONF)
    value, grad = shade_reference([0.2, 0.4, 0.6])
    np.testing.assert_allclose(got[0], value, rtol=1e-5)
    np.testing.assert_allclose(got[1:4], grad, rtol=1e-5)
    np.testing.assert_allclose(got[4], grad[0], rtol=1e-5)                 # forward mode, d/d albedo.x
    # createDynamicObject<IMaterial>(1, float2(3, 0.5)): a Phong with shininess 3, spec 0.5
    np.testing.assert_allclose(got[5:7], [0.2 * 0.5 + 0.5 * 0.5 ** 3, 2.0], rtol=1e-5)


@DEV
def test_link_time_ids_decide_the_type(device, tmp_path):
    # the same program with Lambert and Phong swapped: makeMaterial builds by type, so shade() is
    # unchanged, but createDynamicObject(1, ...) is now a Lambert with k = 3
    conf = [("IMaterial", "Lambert", 1), ("IMaterial", "Phong", 0), ("IMaterial", "Emissive", 2)]
    got = run_program(device, tmp_path, MATERIALS, 7, "materials_swapped", type_conformances=conf)
    value, _ = shade_reference([0.2, 0.4, 0.6])
    np.testing.assert_allclose(got[0], value, rtol=1e-5)
    np.testing.assert_allclose(got[5:7], [0.2 * 3.0 * 0.5, 1.0], rtol=1e-5)


@DEV
def test_generic_interface_and_associated_type(device, tmp_path):
    conf = [("IReduce<8>", "Sum8", 0), ("IReduce<8>", "Max8", 1)]
    got = run_program(device, tmp_path, GENERIC_IFACE, 5, "generic_iface", type_conformances=conf)
    # Sum8 (scale 2): 2 * x * 36, gradient 72; Max8 (scale 3): 3 * 8x, gradient 24; area(2) = 12
    np.testing.assert_allclose(got, [72, 24, 72, 24, 12])


@DEV
def test_inherited_interface_dispatch(device, tmp_path):
    conf = [("IBase", "A", 0), ("IBase", "B", 1)]
    np.testing.assert_allclose(run_program(device, tmp_path, INHERITED, 2, "inherited", type_conformances=conf), [12, 3])


@pytest.mark.parametrize("name", ["MATERIALS", "GENERIC_IFACE", "INHERITED"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name], name.lower())


ANY_VALUE_SIZE = """
RWStructuredBuffer<float> outputBuffer;
[anyValueSize(LIMIT)]
interface IShape { float area(); }
struct Small : IShape { float r; float area() { return r * r; } }
struct Big : IShape { float a; float b; float c; float area() { return a + b + c; } }
[numthreads(1, 1, 1)]
void computeMain()
{
    IShape s = createDynamicObject<IShape>(0, 3.0);
    outputBuffer[0] = s.area();
}
"""


def test_any_value_size_limits_conforming_types(tmp_path):
    import slangjit as spy
    from slangjit.compiler.source import CompileError
    dev = spy.create_device(type=spy.DeviceType.cpu)
    conf = [("IShape", "Small", 0), ("IShape", "Big", 1)]
    np.testing.assert_allclose(run_program(dev, tmp_path, ANY_VALUE_SIZE.replace("LIMIT", "12"), 1, "avs12",
                                           type_conformances=conf), [9.0])
    # the reference compiler: "type 'Big' does not fit in the size required by its conforming interface"
    with pytest.raises(CompileError) as ei:
        run_program(dev, tmp_path, ANY_VALUE_SIZE.replace("LIMIT", "8"), 1, "avs8", type_conformances=conf)
    d = ei.value.diagnostics[0]
    assert d.code == "E5014" and "'Big' (12 bytes)" in d.message and d.loc.line == 6
