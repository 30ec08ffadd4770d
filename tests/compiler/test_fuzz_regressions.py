"""Values of programs the fuzz found mis-compiled (tests/compiler/test_fuzz.py rows 22, 23), against the
reference compiler's outputs (`harness.py run FILE --backend oracle`)."""
import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.usefixtures("private_cache")

RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access


def _run(device, name, src, n, dtype=np.float32):
    m = device.load_module_from_source(name, src)
    k = device.create_compute_kernel(device.link_program([m], [m.entry_point("computeMain")]))
    buf = device.create_buffer(element_count=n, struct_size=4, usage=RW)
    k.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": buf})
    return buf.to_numpy().view(dtype)


def test_reinterpret_between_sizes_as_slang(device):
    """reinterpret<int>(float4) is the bits of .x; reinterpret<float4>(1.0f) is (1, 0, 0, 0) (the oracle:
    1065353216, 1, 0, 0); the C++ used to fail a static_assert."""
    src = """
RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    outputBuffer[0] = float(reinterpret<int>(float4(1.0, 2.0, 3.0, 4.0)));
    float4 v = reinterpret<float4>(1.0f);
    outputBuffer[1] = v.x; outputBuffer[2] = v.y; outputBuffer[3] = v.w;
}
"""
    assert list(_run(device, "reinterp_sizes", src, 4)) == [1065353216.0, 1.0, 0.0, 0.0]


def test_function_falling_off_its_end_returns_zero_and_interface_return(device):
    """A non-void function without a final return (here returning an interface type, never used) no longer
    makes the C++ undefined: the oracle's 25, 7, 9 (the slangjit build gave 0, 0, 0 once it compiled)."""
    src = """
RWStructuredBuffer<int> outputBuffer;
interface IAcc { [mutating] void push(int v); int get(); }
struct SumAcc : IAcc { int s; [mutating] void push(int v) { s += v; } int get() { return s; } }
IAcc feed<A : IAcc>(inout A acc, int n)
{
    for (int i = 1; i <= n; i++)
        acc.push((i * 7) % 10);
}
float half_or_nothing(float x) { if (x > 0.0) return x * 0.5; }
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    SumAcc s = { 0 };
    feed(s, 5);
    outputBuffer[0] = s.get();
    outputBuffer[1] = int(half_or_nothing(4.0));
    outputBuffer[2] = int(half_or_nothing(-4.0));
}
"""
    assert list(_run(device, "falls_off_end", src, 3, np.int32)) == [25, 2, 0]
