"""Language features the functional API relies on: overloaded __subscript chosen by index type,
set-only subscripts, extern/export static const linking."""
import numpy as np

import slangjit as spy


def run(src: str, n_out: int) -> np.ndarray:
    device = spy.create_device(type=spy.DeviceType.cpu)
    module = device.load_module_from_source("extras", src)
    kernel = device.create_compute_kernel(device.link_program([module], [module.entry_point("computeMain")]))
    out = device.create_buffer(element_count=n_out, struct_size=4,
                               usage=spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access)
    kernel.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": out})
    return out.to_numpy().view(np.float32)


def test_subscript_overloads_by_type_and_set_only():
    got = run("""
RWStructuredBuffer<float> outputBuffer;
struct G {
    float v[4];
    __subscript(int i) -> float { get { return v[i]; } set { v[i] = newValue; } }
    __subscript(int2 ij) -> float { get { return v[ij.x * 2 + ij.y]; } }
    __subscript(int idx[2]) -> float { get { return v[idx[0] * 2 + idx[1]] * 10.0; } }
}
struct W { float last; __subscript(int i) -> float { set { last = newValue + i; } } }
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    G g = { {1, 2, 3, 4} };
    int a[2] = {1, 0};
    outputBuffer[0] = g[int2(1, 1)];
    outputBuffer[1] = g[a];
    g[2] = 7.0;
    outputBuffer[2] = g[2];
    W w; w[3] = 1.5;
    outputBuffer[3] = w.last;
}
""", 4)
    np.testing.assert_array_equal(got, [4.0, 30.0, 7.0, 4.5])


def test_extern_static_const_links_to_export():
    got = run("""
RWStructuredBuffer<float> outputBuffer;
extern static const int N;
export static const int N = 7;
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    float a[N];
    outputBuffer[0] = N;
    outputBuffer[1] = a.getCount();
}
""", 2)
    np.testing.assert_array_equal(got, [7.0, 7.0])


def test_writes_through_chained_swizzles():
    got = run("""
RWStructuredBuffer<float> outputBuffer;
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    float3 v = float3(1, 2, 3);
    v.zx.x = 5.0;
    v.yz.y += 10.0;
    outputBuffer[0] = v.x;
    outputBuffer[1] = v.y;
    outputBuffer[2] = v.z;
}
""", 3)
    np.testing.assert_array_equal(got, [1.0, 2.0, 15.0])


def test_generic_value_arguments_partly_explicit():
    # `mm<2>(x)` gives O and infers I from V<3> (used to crash inside struct instantiation).
    got = run("""
RWStructuredBuffer<float> outputBuffer;
struct V<let N : int> { float d[N]; }
V<O> mm<let O : int, let I : int>(V<I> x) { V<O> r; for (int i = 0; i < O; i++) r.d[i] = x.d[I - 1] * (i + 1); return r; }
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    V<3> x; x.d[2] = 2.0;
    V<2> y = mm<2>(x);
    outputBuffer[0] = y.d[0];
    outputBuffer[1] = y.d[1];
}
""", 2)
    np.testing.assert_array_equal(got, [2.0, 4.0])
