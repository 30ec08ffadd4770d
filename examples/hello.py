"""Compile a small Slang kernel, run it on the CPU over 2^20 elements and check the result."""
import numpy as np

import slangjit as spy

SOURCE = r"""
RWStructuredBuffer<float> result;
StructuredBuffer<float> a;
StructuredBuffer<float> b;

float poly(float x, float y) { return 2.0 * x * x + 8.0 * x * y - 1.0; }

[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    uint i = tid.x;
    if (i >= count)
        return;
    result[i] = poly(a[i], b[i]);
}
"""


def main():
    n = 1 << 20
    device = spy.create_device(type=spy.DeviceType.cpu)
    module = device.load_module_from_source("hello", SOURCE)
    program = device.link_program([module], [module.entry_point("computeMain")])
    kernel = device.create_compute_kernel(program)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    buf_a = device.create_buffer(element_count=n, struct_size=4, usage=usage, data=a)
    buf_b = device.create_buffer(element_count=n, struct_size=4, usage=usage, data=b)
    buf_r = device.create_buffer(element_count=n, struct_size=4, usage=usage)
    kernel.dispatch(thread_count=[n, 1, 1], vars={"a": buf_a, "b": buf_b, "result": buf_r}, count=n)
    got = buf_r.to_numpy().view(np.float32)
    want = 2.0 * a * a + 8.0 * a * b - 1.0
    err = float(np.max(np.abs(got - want)))
    print(f"hello: {n} elements computed on the CPU, max |error| vs numpy = {err:.3g}")
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5), "mismatch against numpy"
    print("hello: OK")


if __name__ == "__main__":
    main()
