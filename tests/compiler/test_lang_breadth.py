"""Language breadth (issue 19, groups 1, 2, 4, 5, 10, 11, 12): forms written in the style of Slang's own
tests and of real programs. Each program runs on the `device` fixture (CPU here; CUDA on a GPU machine) and
its generated CUDA is compiled with NVRTC; expected values were checked with the reference compiler
(`harness.py run --backend oracle`) where it accepts the form, and by hand / float64 finite differences."""
import numpy as np
import pytest

from slangjit.compiler.source import CompileError
from slang_programs import fd, nvrtc, run


# ---------------------------------------------------------------------------- programs and expected values

PROGRAMS = {
    # group 1: contextual keywords as identifiers; attribute lists
    "keywords_as_names": ("""
        float sum4(float out[4]) { return out[0] + out[1] + out[2] + out[3]; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            float out[4] = {1.0, 2.0, 3.0, 4.0};
            float var = 0.5;
            int in = 2;
            float inout = out[in] + var;
            var = var * 4.0;
            float func = 1.0, property = 2.0;
            outputBuffer[0] = sum4(out);
            outputBuffer[1] = inout;
            outputBuffer[2] = var + func + property;
        }""", [10.0, 3.5, 5.0]),
    "attribute_lists": ("""
        [ForceInline, Differentiable]
        float sq(float x) { return x * x; }
        [Differentiable, PreferRecompute]
        float cube(float x) { return sq(x) * x; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            var r = fwd_diff(cube)(diffPair(2.0, 1.0));
            outputBuffer[0] = r.p;
            outputBuffer[1] = r.d;
        }""", [8.0, 12.0]),
    # group 2: generic constraints
    "where_equality": ("""
        [Differentiable]
        T mulAdd<T : __BuiltinFloatingPointType>(T a, T b) where T.Differential == T { return a * b + a; }
        int pick<let N : int, I>(I x) where I == int { return x + N; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            var r = fwd_diff(mulAdd<float>)(diffPair(3.0, 1.0), diffPair(2.0, 0.0));
            outputBuffer[0] = r.d;
            outputBuffer[1] = pick<5>(2);
        }""", [3.0, 7.0]),
    "conjunction_and_generic_operator": ("""
        [Differentiable]
        T poly<T : IDifferentiable & IArithmetic>(T x) { return x * x + x; }
        float twice<T>(T x) where T : IFloat & IDifferentiable { return float(x) * 2.0; }
        interface IFoo { float val(); }
        struct A : IFoo { float v; float val() { return v; } };
        A operator+<T : IFoo>(T a, T b) { A r; r.v = a.val() + b.val(); return r; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            A a; a.v = 1.5; A b; b.v = 2.0;
            outputBuffer[0] = (a + b).v;
            outputBuffer[1] = poly<float>(3.0);
            outputBuffer[2] = twice(4.0);
        }""", [3.5, 12.0, 8.0]),
    "associated_type_parameter": ("""
        interface IShape { associatedtype Param; float area(Param p); }
        struct Circle : IShape { typealias Param = float; float area(float r) { return 3.0 * r * r; } };
        float useShape<S : IShape>(S s, S.Param p) where S.Param == float { return s.area(p) + p; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            Circle c;
            outputBuffer[0] = useShape(c, 2.0);
        }""", [14.0]),
    "generic_struct_constructor_inferred": ("""
        struct Impl<T : IArithmetic> { T v; __init(T v0) { v = v0; } T get() { return v; } };
        struct Pair<T> { T a; T b; };
        struct Box<T> { T data[4];
            __subscript(int i) -> T { get { return data[i]; } set { data[i] = newValue; } }
            property T first { get { return data[0]; } } };
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            let a = Impl<float>(2.5);
            Impl<int> c = Impl(3);
            let p = Pair(1.0, 2.0);
            Box<float> bx; bx[0] = 4.0; bx[1] = bx[0] + 1.0;
            outputBuffer[0] = a.get();
            outputBuffer[1] = c.get();
            outputBuffer[2] = p.b;
            outputBuffer[3] = bx[1] + bx.first;
        }""", [2.5, 3.0, 2.0, 9.0]),
    # group 4: initializer lists and constructors
    "brace_elision": ("""
        struct B { float x; float y; };
        struct A { B b; float z; };
        struct C { float2 a; float b; };
        struct Feature<let N : int> { float v[N]; };
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            A a = {1.0, 2.0, 3.0};
            Feature<3> f = {7.0, 8.0, 9.0};
            C c = {1.0, 2.0};
            C d = {3.0, 4.0, 5.0};
            B bs[2] = {1.0, 2.0, 3.0, 4.0};
            outputBuffer[0] = a.b.y + a.z;
            outputBuffer[1] = f.v[2];
            outputBuffer[2] = c.a.y;
            outputBuffer[3] = d.a.y + d.b;
            outputBuffer[4] = bs[1].x;
        }""", [5.0, 9.0, 1.0, 9.0, 3.0]),
    "init_lists_as_arguments": ("""
        struct B : IDifferentiable { float x; float y; };
        [Differentiable] float h(B b) { return b.x * b.y; }
        [Differentiable] float2 g(float2 v) { return v * v; }
        float sumB(B b) { return b.x + b.y; }
        B mk() { return {5.0, 6.0}; }
        float sumA(float a[3]) { return a[0] + a[1] + a[2]; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            outputBuffer[0] = sumB({1.5, 2.5});
            outputBuffer[1] = mk().y;
            outputBuffer[2] = sumA({1.0, 2.0, 4.0});
            outputBuffer[3] = fwd_diff(h)(diffPair(B(2.0, 4.0), {1.0, 1.0})).d;
            var q = diffPair<float2>({1.0, 2.0}, {1.0, 0.0});
            outputBuffer[4] = fwd_diff(g)(q).d.x;
            var pb = diffPair<B>({2.0, 3.0}, {1.0, 0.0});
            outputBuffer[5] = fwd_diff(h)(pb).d;
            var pc = DifferentialPair<B>({2.0, 3.0}, {0.0, 1.0});
            outputBuffer[6] = fwd_diff(h)(pc).d;
        }""", [4.0, 6.0, 7.0, 6.0, 2.0, 3.0, 2.0]),
    "array_type_dimension_order": ("""
        [Differentiable] float f(float[2][1] a) { return a[0][0] * a[0][1] * 2.0; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            float[2][3] t;
            for (int i = 0; i < 3; i++) for (int j = 0; j < 2; j++) t[i][j] = i * 10 + j;
            float a[2][3];
            outputBuffer[0] = t.getCount();
            outputBuffer[1] = t[2][1];
            outputBuffer[2] = a.getCount();
            float p[1][2] = {{3.0, 5.0}};
            float d[1][2] = {{0.0, 0.0}};
            var dp = DifferentialPair<float[2][1]>(p, d);
            bwd_diff(f)(dp, 1.0);
            outputBuffer[3] = dp.d[0][0];
            outputBuffer[4] = dp.d[0][1];
        }""", [3.0, 21.0, 2.0, 10.0, 6.0]),
    # group 5: properties and subscripts
    "properties_and_subscripts": ("""
        struct P : IDifferentiable {
            float _x;
            property float x { [Differentiable] get { return _x; } [Differentiable] set { _x = newValue; } }
            property float twice { [Differentiable] get { return _x * 2.0; } }
        };
        interface IHasVal { property float val { get; set; } }
        struct V : IHasVal { float v; property float val { get { return v; } set { v = newValue; } } };
        float readVal<T : IHasVal>(T t) { return t.val; }
        [Differentiable] float f(P p) { return p.twice * p.x; }
        struct Arr : IDifferentiable {
            float4 v;
            __subscript(int i) -> float { [Differentiable] get { return v[i]; } [Differentiable] set { v[i] = newValue; } }
        };
        [Differentiable] float g(Arr a) { return a[0] * a[1] + a[2]; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            P p; p._x = 0.0; p.x = 3.0;
            V v; v.val = 4.0;
            P.Differential dd; dd._x = 1.0;
            outputBuffer[0] = p.x;
            outputBuffer[1] = readVal(v);
            outputBuffer[2] = fwd_diff(f)(diffPair(p, dd)).d;
            var bp = diffPair(p);
            bwd_diff(f)(bp, 1.0);
            outputBuffer[3] = bp.d._x;
            Arr a; a.v = float4(1.0, 2.0, 3.0, 4.0);
            var pa = diffPair(a);
            bwd_diff(g)(pa, 1.0);
            outputBuffer[4] = pa.d.v.x;
            outputBuffer[5] = pa.d.v.y;
            outputBuffer[6] = pa.d.v.z;
        }""", [3.0, 4.0, 12.0, 12.0, 2.0, 1.0, 1.0]),
    # group 10: reverse mode without [MaxIters]; d/dx of x^n at x = 2 is n 2^(n-1)
    "loop_trip_counts": ("""
        static const int K = 5;
        [Differentiable] float f1(float x) { float r = x; for (int i = 0; i + 1 < K; i++) r = r * x; return r; }
        [Differentiable] float f2(float x) { float r = 1.0; for (int i = 0; i < K - 1; i++) r = r * x; return r; }
        [Differentiable] float f3(float x) { float r = 1.0; for (int i = 1; i <= 3; i++) r = r * x; return r; }
        [Differentiable] float f4(float x) { float r = 1.0; for (int i = 3; i > 0; i--) r = r * x; return r; }
        [Differentiable] float f5(float x) { float r = 1.0; int i = 0; while (i < 3) { r = r * x; i++; } return r; }
        [Differentiable] float f6(float x) { float r = 1.0; [ForceUnroll] for (int i = 0; i < 3; i++) r = r * x; return r; }
        [Differentiable] float f7(float x) { float r = 1.0; for (uint i = 1; i < 100; i *= 3) r = r * x; return r; }
        [Differentiable] float f8(float x) { float r = 1.0; int k = 6; do { r = r * x; k -= 2; } while (k > 0); return r; }
        [Differentiable] float f9(float x) { float r = 1.0; for (int i = 0; i < 8 && r < 10.0; i++) r = r * x; return r; }
        [Differentiable] float f10(float x) { float r = 1.0; for (int i = K - 1; i >= 0; --i) { if (i == 1) continue; r = r * x; } return r; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            var p = diffPair(2.0, 0.0);
            p = diffPair(2.0, 0.0); bwd_diff(f1)(p, 1.0); outputBuffer[0] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f2)(p, 1.0); outputBuffer[1] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f3)(p, 1.0); outputBuffer[2] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f4)(p, 1.0); outputBuffer[3] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f5)(p, 1.0); outputBuffer[4] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f6)(p, 1.0); outputBuffer[5] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f7)(p, 1.0); outputBuffer[6] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f8)(p, 1.0); outputBuffer[7] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f9)(p, 1.0); outputBuffer[8] = p.d;
            p = diffPair(2.0, 0.0); bwd_diff(f10)(p, 1.0); outputBuffer[9] = p.d;
        }""", [80.0, 32.0, 12.0, 12.0, 12.0, 12.0, 80.0, 12.0, 32.0, 32.0]),
}


# Checked against the reference compiler (harness.py run --backend oracle) with the same values.
PROGRAMS.update({
    "more_contextual_names": ("""
struct Ray { float3 origin; float3 out; float in; };
float f(float linear, float point, float sample) { return linear + point * sample; }
[numthreads(1,1,1)]
void computeMain()
{
    float linear = 1.0; float point = 2.0; float sample = 3.0; float centroid = 4.0;
    float shared = 5.0; float precise = 6.0; int export = 1; float triangle = 0.5;
    Ray r; r.out = float3(1, 2, 3); r.in = 2.0;
    outputBuffer[0] = linear + point + sample + centroid;
    outputBuffer[1] = shared + precise + export + triangle;
    outputBuffer[2] = r.out.y * r.in;
    outputBuffer[3] = f(1.0, 2.0, 3.0);
}""", [10.0, 12.5, 4.0, 7.0]),
    "multi_index_subscripts_interface_properties": ("""
struct Grid {
    float data[6];
    __subscript(int i, int j) -> float { get { return data[i * 3 + j]; } set { data[i * 3 + j] = newValue; } }
    __subscript(int2 ij) -> float { get { return this[ij.x, ij.y]; } }
    property int count { get { return 6; } }
    property w : float { get { return data[5]; } set { data[5] = newValue; } }
};
interface IContainer { __subscript(int i) -> float { get; set; } property float total { get; } }
struct Arr3 : IContainer {
    float v[3];
    __subscript(int i) -> float { get { return v[i]; } set { v[i] = newValue; } }
    property float total { get { return v[0] + v[1] + v[2]; } }
};
float sumc<C : IContainer>(inout C c) { c[1] = 10.0; return c.total + c[0]; }
[numthreads(1,1,1)]
void computeMain()
{
    Grid g;
    for (int i = 0; i < 6; i++) g.data[i] = float(i);
    g[1, 2] = 42.0;
    g.w = g.w + 1.0;
    outputBuffer[0] = g[int2(1, 2)];
    outputBuffer[1] = g.count;
    outputBuffer[2] = g.w;
    Arr3 a = { {1.0, 2.0, 3.0} };
    outputBuffer[3] = sumc(a);
    outputBuffer[4] = a[1];
}""", [43.0, 6.0, 43.0, 15.0, 10.0]),
    "constructors_and_default_init": ("""
struct A { float x = 1.5; float y = 2.5; };
struct S : IDifferentiable { float a; float b; };
[Differentiable] float h(S s) { return s.a * s.b * s.b; }
S zeroS() { return {}; }
[numthreads(1,1,1)]
void computeMain()
{
    A a = {};
    A b = A(3.0, 4.0);
    S z = zeroS();
    S.Differential d = {1.0, 0.0};
    var p = diffPair(S(2.0, 3.0), d);
    var q = DifferentialPair<S>(S(2.0, 3.0), S.Differential(0.0, 1.0));
    float3 v = {1, 2, 3};
    outputBuffer[0] = a.x + a.y;
    outputBuffer[1] = b.y;
    outputBuffer[2] = z.a + z.b;
    outputBuffer[3] = fwd_diff(h)(p).d;
    outputBuffer[4] = fwd_diff(h)(q).d;
    outputBuffer[5] = fwd_diff(h)(diffPair(S(1.0, 2.0), {1.0, 1.0})).d;
    outputBuffer[6] = v.z;
}""", [4.0, 4.0, 0.0, 9.0, 12.0, 8.0, 3.0]),
    "attributes_on_declaration_kinds": ("""
static const int N = 1;
[UnscopedEnum] enum Mode { ModeA = 1, ModeB = 2 };
[Flags] enum class Bits { X = 1, Y = 2 };
struct P : IDifferentiable {
    [DerivativeMember(Differential.v)] float v;
    [Differentiable] __init(float x) { v = x; }
    [noinline] float get() { return v; }
};
interface IF { [Differentiable] [NoDiffThis] float eval(float x); }
struct Impl : IF { float k; [Differentiable] [NoDiffThis] float eval(float x) { return k * x * x; } };
[Differentiable] [PreferCheckpoint] float g(float x) { return x * 3.0; }
[TreatAsDifferentiable] float tad(float x) { return x; }
[Differentiable] float f(P p, no_diff float c) { return p.v * p.v * c + g(p.v) + tad(1.0); }
[shader("compute")]
[numthreads(N, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    var pp = diffPair(P(2.0));
    bwd_diff(f)(pp, 3.0, 1.0);
    Impl im; im.k = 2.0;
    outputBuffer[0] = pp.d.v;
    outputBuffer[1] = im.eval(3.0);
    outputBuffer[2] = float(int(ModeB));
    outputBuffer[3] = P(4.0).get();
    [MaxIters(4)] while (outputBuffer[2] > 0.0) { outputBuffer[2] -= 1.0; }
}""", [15.0, 18.0, 0.0, 4.0]),
    "conjunction_constraint_fwd_diff": ("""
[ForwardDifferentiable]
T calc<T : IDifferentiable & IFloat>(T k, T x) { return k * x * x + x; }
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    let r = fwd_diff(calc<float>)(DifferentialPair<float>(2.0, 0.0), DifferentialPair<float>(3.0, 1.0));
    outputBuffer[0] = r.d;
    let r2 = __fwd_diff(calc<float>)(DifferentialPair<float>(2.0, 1.0), DifferentialPair<float>(3.0, 0.0));
    outputBuffer[1] = r2.d;
}""", [13.0, 9.0]),
    "associated_type_generic_static_method": ("""
interface IParams : IDifferentiable { [Differentiable] float get(); }
struct MyParams : IParams { float value; [Differentiable] float get() { return value; } }
interface IDecoder { associatedtype Params : IParams; [BackwardDifferentiable] static Params decode<let N : uint>(no_diff float x); }
struct Dec : IDecoder {
    typealias Params = MyParams;
    [BackwardDifferentiable] static Params decode<let N : uint>(no_diff float x) { Params p; p.value = x + float(N); return p; }
}
[BackwardDifferentiable]
float apply<T : IDecoder>(float y) { return y * T::decode<3>(2.0f).get(); }
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    outputBuffer[0] = apply<Dec>(2.0f);
    var dy = diffPair(2.0f);
    bwd_diff(apply<Dec>)(dy, 1.0f);
    outputBuffer[1] = dy.d;
}""", [10.0, 5.0]),
    "constexpr_parameter_static_assert": ("""
[BackwardDerivative(scale_bwd)]
float scale(float x, constexpr int mode) { static_assert(mode == 2, "mode"); return x * float(mode); }
void scale_bwd(inout DifferentialPair<float> x, constexpr int mode, float dOut) { updateDiff(x, dOut * float(mode)); }
[Differentiable]
float run<let Mode : int>(float x) { return scale(x, Mode); }
[numthreads(1,1,1)]
void computeMain()
{
    var x = diffPair(5.0);
    __bwd_diff(run<2>)(x, 1.0);
    outputBuffer[0] = x.d;
}""", [2.0]),
    "loop_bound_generic_and_static_member": ("""
[Differentiable]
float f<let N : int>(float x) { float r = 0.0; for (int i = 0; i < N; i++) r += x * x; return r; }
struct Cfg { static const int steps = 4; };
[Differentiable]
float g(float x) { float r = x; for (int i = 0; i < Cfg.steps; i++) r = sin(r); return r; }
[numthreads(1,1,1)]
void computeMain()
{
    var p = diffPair(2.0, 0.0); bwd_diff(f<3>)(p, 1.0); outputBuffer[0] = p.d;
    var q = diffPair(0.5, 0.0); bwd_diff(g)(q, 1.0); outputBuffer[1] = q.d;
}""", [12.0, 0.629335]),
})


# Values by hand: integrate = (2u)^2, d/du = 8u = 12 at u = 1.5.
PROGRAMS["associated_type_constraint_generic_method_extension"] = ("""
interface ISampler { associatedtype Sample : IDifferentiable; [Differentiable] Sample draw(float u); [Differentiable] float weight(Sample s); }
struct Uniform1D : ISampler {
    typealias Sample = float;
    [Differentiable] float draw(float u) { return u * 2.0; }
    [Differentiable] float weight(float s) { return s * s; }
};
[Differentiable]
float integrate<S : ISampler>(S s, float u) where S.Sample : IDifferentiable { return s.weight(s.draw(u)); }
struct Acc<T : IArithmetic> {
    T sum;
    [mutating] void add(T v) { sum = sum + v; }
    U convert<U : IFloat>() { return U(sum); }
    __subscript(int i) -> T { get { return sum; } }
};
extension<T : IFloat> Acc<T> { T doubled() { return sum + sum; } }
[numthreads(1,1,1)]
void computeMain()
{
    Uniform1D sm;
    var u = diffPair(1.5, 1.0);
    outputBuffer[0] = fwd_diff(integrate<Uniform1D>)(sm, u).d;
    Acc<float> a; a.sum = 1.0; a.add(2.5);
    outputBuffer[1] = a.convert<float>();
    outputBuffer[2] = a[7];
    outputBuffer[3] = a.doubled();
}""", [12.0, 3.5, 3.5, 7.0])


# Break-controlled loops (`i-- > 0`, `for (;;) { if (k >= 3) break; ... }`, an early return): d/dx x^3 = 12 at 2.
PROGRAMS["loop_exits_by_break_and_linked_constant"] = ("""
extern static const int N;
export static const int N = 3;
[Differentiable] float f(float x) { float r = 1.0; for (int i = 0; i < N; i++) r *= x; return r; }
[Differentiable] float g(float x) { float r = 1.0; for (int i = N; i-- > 0;) r *= x; return r; }
[Differentiable] float h(float x) { float r = 1.0; int k = 0; for (;;) { if (k >= 3) break; r *= x; k++; } return r; }
[Differentiable] float m(float x) { float r = 1.0; for (int i = 0; i < 3; i++) { r *= x; if (r > 100.0) return r; } return r; }
[numthreads(1,1,1)]
void computeMain()
{
    var p = diffPair(2.0); bwd_diff(f)(p, 1.0); outputBuffer[0] = p.d;
    var q = diffPair(2.0); bwd_diff(g)(q, 1.0); outputBuffer[1] = q.d;
    var r = diffPair(2.0); bwd_diff(h)(r, 1.0); outputBuffer[2] = r.d;
    var s = diffPair(2.0); bwd_diff(m)(s, 1.0); outputBuffer[3] = s.d;
}""", [12.0, 12.0, 12.0, 12.0])


# d(s x^2) = 2 s x dx: 2*2*1*0.5, 2*2*3*1; reverse 2*2*3
PROGRAMS["generic_struct_typedef_members_differential_init"] = ("""
__generic<let K : int>
struct Vec : IDifferentiable { float v[K]; }
struct Scale<let K : int> {
    typedef Vec<K> In;
    typealias Out = Vec<K>;
    float s;
    [Differentiable] Out apply(In x) { Out o; for (int i = 0; i < K; i++) o.v[i] = x.v[i] * x.v[i] * s; return o; }
}
[Differentiable]
Vec<2> run(Vec<2> a, Scale<2> sc) { return sc.apply(a); }
[numthreads(1,1,1)]
void computeMain()
{
    Vec<2> a = { 1.0, 3.0 };
    Vec<2>.Differential da = { 0.5, 1.0 };
    Scale<2> sc; sc.s = 2.0;
    var r = fwd_diff(run)(diffPair(a, da), sc).d;
    outputBuffer[0] = r.v[0];
    outputBuffer[1] = r.v[1];
    var pa = diffPair(a);
    Vec<2>.Differential g = { 1.0, 1.0 };
    bwd_diff(run)(pa, sc, g);
    outputBuffer[2] = pa.d.v[1];
}""", [2.0, 12.0, 12.0])

# d(k t^2)/dt = 2 k t, k = 3
PROGRAMS["bwd_diff_of_method_on_generic_receiver"] = ("""
interface ICurve : IDifferentiable { [Differentiable] float at(float t); }
struct Parabola : ICurve { float k; [Differentiable] float at(float t) { return k * t * t; } }
[Differentiable]
float slope<C : ICurve>(C c, float t) { var p = diffPair(t, 0.0); __bwd_diff(c.at)(p, 1.0); return p.d; }
[numthreads(1,1,1)]
void computeMain()
{
    Parabola c; c.k = 3.0;
    outputBuffer[0] = slope<Parabola>(c, 2.0);
    outputBuffer[1] = slope(c, 1.0);
}""", [12.0, 6.0])


# oracle-checked
PROGRAMS["init_lists_nested_differential_arrays_inheritance_vector_args"] = ("""
struct Inner : IDifferentiable { float k; }
struct Outer : IDifferentiable { float a; Inner inner; }
struct Pair2 { uint a; uint b; };
struct Base<let ND : int> { int a = 5; }
struct Derived<let ND : int> : Base<ND> { float x; float y; }
float enc3(float3 v) { return v.x * 100.0 + v.y * 10.0 + v.z; }
float enc2(float2 v) { return v.x * 10.0 + v.y; }
[numthreads(1,1,1)]
void computeMain()
{
    Outer.Differential d = { 1.0, {} };
    Pair2 ps[3] = { 1, 2, 3, 4, 5, 6 };
    Derived<2> dv = { 7, 1.5, 2.5 };
    float2 a = float2(1.0, 2.0);
    outputBuffer[0] = d.a + d.inner.k;
    outputBuffer[1] = ps[1].a + ps[2].b;
    outputBuffer[2] = dv.a + dv.y;
    outputBuffer[3] = enc3({a, 3.0});
    outputBuffer[4] = enc2({float2(4.0, 5.0)});
}""", [1.0, 9.0, 9.5, 123.0, 45.0])

# by hand: d(w z) = (z, w)
PROGRAMS["struct_inheritance_fields_and_defaults"] = ("""
struct Base { float w = 5.0; float scaleW(float k) { return w * k; } };
struct Der : Base { float z; };
struct DBase : IDifferentiable { float w; };
struct DDer : DBase { float z; };
[Differentiable] float f(DDer d) { return d.w * d.z; }
[numthreads(1,1,1)]
void computeMain()
{
    Der d; d.z = 1.0;
    outputBuffer[0] = d.w;
    DDer e = { 2.0, 3.0 };
    var p = diffPair(e);
    bwd_diff(f)(p, 1.0);
    outputBuffer[1] = p.d.w;
    outputBuffer[2] = p.d.z;
}""", [5.0, 3.0, 2.0])


# `ref` accessors, named setter parameters, ++ / op= through accessors (by hand).
PROGRAMS["ref_accessors_and_read_modify_write"] = ("""
struct Counter {
    float store;
    property float value { get { return store; } [mutating] ref { return store; } }
    property float half_ { get { return store * 0.5; } set(float v) { store = v * 2.0; } }
    property twice : float { get { return store * 2.0; } set(nv: float) { store = nv * 0.5; } }
};
struct Slots {
    float vals[4];
    __subscript(int i) -> float { [mutating] ref { return vals[i]; } }
};
struct GS {
    float vals[2];
    __subscript(int i) -> float { get { return vals[i]; } set { vals[i] = newValue; } }
    property float first { get { return vals[0]; } set { vals[0] = newValue; } }
};
[numthreads(1,1,1)]
void computeMain()
{
    Counter c; c.store = 0.0;
    c.value = 3.0;
    c.value += 2.0;
    c.value++;
    outputBuffer[0] = c.value;
    c.half_ = 4.0;
    outputBuffer[1] = c.store;
    c.twice = 10.0;
    outputBuffer[2] = c.store;
    Slots s; for (int i = 0; i < 4; i++) s.vals[i] = 0.0;
    s[1] = 7.0; s[1] += 1.5;
    outputBuffer[3] = s.vals[1];
    GS g; g.vals[0] = 1.0; g.vals[1] = 2.0;
    g[1] *= 3.0; g.first += 10.0; g[0]++;
    outputBuffer[4] = g[1];
    outputBuffer[5] = g.first;
}""", [6.0, 8.0, 5.0, 8.5, 6.0, 12.0])


# by hand
PROGRAMS["generic_init_inference_multiple_where_struct_where"] = ("""
struct Prod { float r; __init<T : IFloat>(T a, T b) { r = float(a) * float(b); } };
struct Sum2 { float s; __init<T : IFloat, U : IInteger>(T a, U b) { s = float(a) + float(b.toInt()); } };
interface IHolder { associatedtype Elem; Elem get(); }
interface IFactor { float factor(); }
struct FHolder : IHolder { typealias Elem = float; float v; float get() { return v; } };
struct Three : IFactor { float factor() { return 3.0; } };
float combine<T, U>(T h, U f)
    where T : IHolder
    where U : IFactor
    where T.Elem == float
{
    return h.get() * f.factor();
}
interface IMark { float mark(); }
struct Elt : IMark { float mark() { return 4.0; } };
struct Box : IHolder { typealias Elem = Elt; Elt get() { Elt e; return e; } };
struct Needs<T : IHolder> where T.Elem : IMark { float scale; float eval(T t) { return t.get().mark() * scale; } };
[numthreads(1,1,1)]
void computeMain()
{
    Prod p = Prod(2.0, 3.5);
    Sum2 s = Sum2(1.5, 2);
    FHolder h; h.v = 2.5; Three t;
    Needs<Box> nb; nb.scale = 0.5; Box b;
    outputBuffer[0] = p.r;
    outputBuffer[1] = s.s;
    outputBuffer[2] = combine(h, t);
    outputBuffer[3] = nb.eval(b);
}""", [7.0, 3.5, 7.5, 2.0])

# by hand
PROGRAMS["attributes_generic_prefix_namespaces"] = ("""
[open] interface IShape { float area(); }
[__AutoDiffBuiltin] struct Sq : IShape { float s; float area() { return s * s; } };
[Differentiable] extension Sq { float perim() { return 4.0 * s; } }
[ForceInline] typealias F = float;
enum class Kind { [Deprecated] A = 1, B = 2 };
namespace geo { [Differentiable] float lerp1(float a, float b, float t) { return a + (b - a) * t; } }
__generic<typename T : IFloat>
T twice(T x) { return x + x; }
__generic<T : IShape>
float areaOf(T t) { return t.area(); }
[Differentiable] [ForceInline] [PreferRecompute] [AutoPyBindCUDA] float wrap1(float x) { return geo::lerp1(0.0, x, 0.5); }
[numthreads(1,1,1)]
void computeMain()
{
    Sq q; q.s = 3.0;
    F f = 2.0;
    outputBuffer[0] = areaOf(q) + q.perim();
    outputBuffer[1] = twice(f);
    outputBuffer[2] = float(int(Kind.B));
    outputBuffer[3] = fwd_diff(wrap1)(diffPair(2.0, 1.0)).d;
}""", [21.0, 4.0, 2.0, 0.5])


# oracle-checked: struct static consts in array sizes, [ForceUnroll] with an expression bound, a member custom derivative
PROGRAMS["struct_constants_force_unroll_member_derivative"] = ("""
static const uint DIMS = 4;
static const uint EXTRA = 2;
struct Codes {
    static const uint kCount = DIMS;
    [BackwardDifferentiable]
    void fetch(float u, out float code[kCount]) { return load(uint(2), code); }
    void load(uint t, out float code[kCount]) { for (uint i = 0; i < kCount; ++i) code[i] = float(i * t); }
    [BackwardDerivativeOf(load)]
    void load_bwd(uint t, float d_code[kCount]) { outputBuffer[1] = d_code[0] + d_code[3]; }
};
static Codes gCodes;
[BackwardDifferentiable]
void total(float arr[DIMS + EXTRA], out float res[2])
{
    float s = 0.0;
    [ForceUnroll]
    for (int i = 0; i < Codes.kCount + EXTRA; i++) s += arr[i] * float(i + 1);
    res[0] = s; res[1] = 2.0 * s;
}
[BackwardDifferentiable]
float decode()
{
    float code[Codes.kCount];
    gCodes.fetch(1.0, code);
    float input[DIMS + EXTRA];
    input[0] = 1.0; input[1] = 2.0;
    [ForceUnroll]
    for (int i = 0; i < Codes.kCount; i++) input[EXTRA + i] = code[i];
    float r[2];
    total(input, r);
    return r[0] + r[1];
}
[numthreads(1,1,1)]
void computeMain()
{
    outputBuffer[0] = decode();
    __bwd_diff(decode)(1.0);
}""", [207.0, 27.0])


# by hand: inherited methods, properties and an override, from a plain and a generic base
PROGRAMS["struct_inheritance_methods"] = ("""
struct Base { float w = 5.0; float scaleW(float k) { return w * k; } [mutating] void bump() { w += 1.0; } property float half_ { get { return w * 0.5; } } };
struct Der : Base { float z; float scaleW(float k) { return w * k + z; } };
struct GBase<let N : int> { float v[N]; float total() { float s = 0.0; for (int i = 0; i < N; i++) s += v[i]; return s; } };
struct GDer : GBase<3> { float extra; };
[numthreads(1,1,1)]
void computeMain()
{
    Der d; d.z = 1.0;
    d.bump();
    outputBuffer[0] = d.w;
    outputBuffer[1] = d.scaleW(2.0);
    outputBuffer[2] = d.half_;
    GDer g = { {1.0, 2.0, 3.0}, 4.0 };
    outputBuffer[3] = g.total() + g.extra;
}""", [6.0, 13.0, 3.0, 10.0])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_values(device, name):
    body, expected = PROGRAMS[name]
    got = run(device, body, len(expected))
    np.testing.assert_allclose(got, np.array(expected, dtype=np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_nvrtc(name):
    nvrtc(PROGRAMS[name][0])




def test_loop_gradients_match_finite_differences(device):
    # A loop whose bound is an expression of a constant and whose body is nonlinear: gradient of
    # sum_{i=0}^{K-2} sin(x * (i + 1)) * x at x = 0.7, against float64 central differences.
    got = run(device, """
        static const int K = 6;
        [Differentiable] float f(float x) { float s = 0.0; for (int i = 0; i + 1 < K; ++i) s += sin(x * (i + 1)) * x; return s; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        { var p = diffPair(0.7, 0.0); bwd_diff(f)(p, 1.0); outputBuffer[0] = p.d; }""", 1)
    ref = fd(lambda x: sum(np.sin(x * (i + 1)) * x for i in range(5)), 0.7)
    np.testing.assert_allclose(got[0], ref, rtol=1e-5)


def test_nested_loops_bounded_by_outer_counters(device):
    # Triangular loops: the inner start or end is the outer counter. d/dx of x * (1 + 1+2 + 1+2+3) = 10, and
    # of x^(1 + 3 + 2 + 1) = 7 x^6 at x = 1.1.
    got = run(device, """
        [Differentiable] float tri(float x) { float s = 0.0;
            for (int i = 0; i < 4; i++) for (int j = 0; j < i; j++) s += x * float(j + 1); return s; }
        [Differentiable] float tri2(float x) { float s = x;
            for (int i = 0; i < 3; i++) { int j = i; while (j < 3) { s = s * x; j++; } } return s; }
        [numthreads(1,1,1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            var p = diffPair(1.5, 0.0); bwd_diff(tri)(p, 1.0); outputBuffer[0] = p.d;
            var q = diffPair(1.1, 0.0); bwd_diff(tri2)(q, 1.0); outputBuffer[1] = q.d;
        }""", 2)
    np.testing.assert_allclose(got, [10.0, 7 * 1.1 ** 6], rtol=1e-5)


def test_unbounded_loop_with_effects_still_asks_for_maxiters(device):
    # (a pure loop with a run-time bound is replayed instead: test_lang_runtime_loops.py)
    with pytest.raises(CompileError) as ei:
        run(device, """
            [Differentiable] float f(float x, int n) { float r = 1.0;
                for (int i = 0; i < n; i++) { r = r * x; outputBuffer[1] = detach(r); } return r; }
            [numthreads(1,1,1)]
            void computeMain(uint3 tid : SV_DispatchThreadID)
            { var p = diffPair(2.0, 0.0); bwd_diff(f)(p, 3, 1.0); outputBuffer[0] = p.d; }""", 1)
    assert ei.value.code == "E6001" and "MaxIters" in str(ei.value)


def test_counter_written_in_body_is_not_trusted(device):
    # The counter also changes inside a branch, so its run is not simulated; the loop falls back to its
    # written bound (4) and running past it is reported after the dispatch, never a silently wrong gradient.
    from slangjit.runtime.kernel_errors import KernelError
    with pytest.raises(KernelError) as ei:
        run(device, """
            [Differentiable] float f(float x) { float r = 1.0; for (int i = 0; i < 4; i++) { if (r > 3.0) i--; r = r * x; } return r; }
            [numthreads(1,1,1)]
            void computeMain(uint3 tid : SV_DispatchThreadID)
            { var p = diffPair(2.0, 0.0); bwd_diff(f)(p, 1.0); outputBuffer[0] = p.d; }""", 1)
    assert "trip-count bound" in str(ei.value)
