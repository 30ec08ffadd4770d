"""The CUDA device on a real GPU (skipped without one): results against numpy and the CPU device."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import slangjit

# Every test runs on the CUDA device (tests/conftest.py `device`; skipped without a usable GPU).
pytestmark = pytest.mark.parametrize("device", ["cuda"], indirect=True)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


UA = slangjit.BufferUsage.unordered_access | slangjit.BufferUsage.shader_resource


def buf(d, **kw):
    return d.create_buffer(usage=UA, **kw)


def kernel(device, tmp_path, text, entry="computeMain", name="k"):
    p = tmp_path / f"{name}.slang"
    p.write_text(text)
    prog = device.load_program(str(p), [entry])
    return device.create_compute_kernel(prog)


def test_device_basics(device):
    assert device.type == slangjit.DeviceType.cuda
    assert device.info.api_name == "cuda" and device.info.compute_capability[0] >= 7
    auto = slangjit.create_device()
    assert auto.type == slangjit.DeviceType.cuda
    b = buf(device, size=16, data=np.arange(4, dtype=np.uint32))
    assert b.device_address != 0
    assert b.to_numpy().view(np.uint32).tolist() == [0, 1, 2, 3]
    b.copy_from_numpy(np.array([7, 8], np.uint32))
    assert b.to_numpy().view(np.uint32).tolist() == [7, 8, 2, 3]
    z = buf(device, element_count=5, struct_size=4)
    assert z.to_numpy().tolist() == [0] * 20


POLY = r"""
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
uniform float a;
[numthreads(256, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float b, uniform uint n)
{
    if (tid.x >= n) return;
    float v = x[tid.x];
    y[tid.x] = a * v * v + b * v + 1.0;
}
"""


def test_polynomial_2_20(device, tmp_path):
    n = 1 << 20
    k = kernel(device, tmp_path, POLY)
    xs = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    bx = buf(device, element_count=n, struct_size=4, data=xs)
    by = buf(device, element_count=n, struct_size=4)
    k.dispatch(thread_count=[n, 1, 1], vars={"x": bx, "y": by, "a": 2.0}, b=3.0, n=n)
    got = by.to_numpy().view(np.float32)
    want = np.float32(2.0) * xs * xs + np.float32(3.0) * xs + np.float32(1.0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # Globals change between launches (the __constant__ block is re-sent), params too.
    k.dispatch(thread_count=[n, 1, 1], vars={"x": bx, "y": by, "a": 0.0}, b=1.0, n=n)
    np.testing.assert_allclose(by.to_numpy().view(np.float32), xs + 1.0, rtol=1e-6, atol=1e-6)


ATOMICS = r"""
RWStructuredBuffer<int> counts;
RWStructuredBuffer<float> fsum;
RWStructuredBuffer<Atomic<half>> hsum;
RWStructuredBuffer<Atomic<double>> dsum;
RWStructuredBuffer<uint> mx;
RWStructuredBuffer<int64_t> lsum;
[numthreads(128, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    InterlockedAdd(counts[tid.x % 4], 1);
    InterlockedAdd(fsum[0], 1.0);
    hsum[0].add(half(1.0));
    dsum[0].add(0.5);
    InterlockedMax(mx[0], tid.x);
    InterlockedMin(mx[1], tid.x + 5);
    InterlockedAdd(lsum[0], int64_t(1) << 33);
}
"""


def test_atomics(device, tmp_path):
    n = 128 * 64
    k = kernel(device, tmp_path, ATOMICS, name="atom")
    counts = buf(device, element_count=4, struct_size=4)
    fsum = buf(device, element_count=1, struct_size=4)
    hsum = buf(device, element_count=2, struct_size=2)
    dsum = buf(device, element_count=1, struct_size=8)
    mx = buf(device, element_count=2, struct_size=4, data=np.array([0, 0xFFFFFFFF], np.uint32))
    lsum = buf(device, element_count=1, struct_size=8)
    k.dispatch(thread_count=[n, 1, 1], vars=dict(counts=counts, fsum=fsum, hsum=hsum, dsum=dsum, mx=mx, lsum=lsum))
    assert counts.to_numpy().view(np.int32).tolist() == [n // 4] * 4
    assert fsum.to_numpy().view(np.float32)[0] == n
    assert hsum.to_numpy().view(np.float16)[0] == np.float16(2048.0)   # half saturates its precision at 2048
    assert dsum.to_numpy().view(np.float64)[0] == n * 0.5
    assert mx.to_numpy().view(np.uint32).tolist() == [n - 1, 5]
    assert lsum.to_numpy().view(np.int64)[0] == n * (1 << 33)


WAVES = r"""
RWStructuredBuffer<float> f;
RWStructuredBuffer<uint> u;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    float x = f[tid.x];
    float s = WaveActiveSum(x);
    uint lane = WaveGetLaneIndex();
    u[tid.x * 4 + 0] = lane;
    u[tid.x * 4 + 1] = WaveIsFirstLane() ? 1u : 0u;
    u[tid.x * 4 + 2] = asuint(WaveActiveMax(x));
    u[tid.x * 4 + 3] = 0;
    if (tid.x % 2 == 0)
        u[tid.x * 4 + 3] = asuint(WaveActiveSum(x));      // partial mask: even lanes only
    f[tid.x] = s;
}
"""


def test_wave_ops(device, tmp_path):
    n = 256
    k = kernel(device, tmp_path, WAVES, name="waves")
    xs = np.arange(n, dtype=np.float32)
    f = buf(device, element_count=n, struct_size=4, data=xs)
    u = buf(device, element_count=n * 4, struct_size=4)
    k.dispatch(thread_count=[n, 1, 1], vars={"f": f, "u": u})
    got = f.to_numpy().view(np.float32)
    warps = xs.reshape(-1, 32)
    np.testing.assert_array_equal(got, np.repeat(warps.sum(1), 32))
    uu = u.to_numpy().view(np.uint32).reshape(n, 4)
    assert uu[:, 0].tolist() == [i % 32 for i in range(n)]
    assert uu[:, 1].tolist() == [1 if i % 32 == 0 else 0 for i in range(n)]
    np.testing.assert_array_equal(uu[:, 2].view(np.float32), np.repeat(warps.max(1), 32))
    even = np.repeat(warps[:, ::2].sum(1), 32)
    np.testing.assert_array_equal(uu[::2, 3].view(np.float32), even[::2])


SHARED = r"""
RWStructuredBuffer<float> data;
RWStructuredBuffer<float> sums;
groupshared float tile[64];
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uint gi : SV_GroupIndex, uint3 gid : SV_GroupID)
{
    tile[gi] = data[tid.x];
    GroupMemoryBarrierWithGroupSync();
    for (uint s = 32; s > 0; s >>= 1) {
        if (gi < s) tile[gi] += tile[gi + s];
        GroupMemoryBarrierWithGroupSync();
    }
    if (gi == 0) sums[gid.x] = tile[0];
}
"""


def test_groupshared_reduction(device, tmp_path):
    n = 64 * 100
    k = kernel(device, tmp_path, SHARED, name="shared")
    xs = np.random.default_rng(1).integers(0, 100, n).astype(np.float32)
    d = buf(device, element_count=n, struct_size=4, data=xs)
    s = buf(device, element_count=100, struct_size=4)
    k.dispatch(thread_count=[n, 1, 1], vars={"data": d, "sums": s})
    np.testing.assert_array_equal(s.to_numpy().view(np.float32), xs.reshape(100, 64).sum(1))


POINTERS = r"""
uniform float* src;
uniform float* dst;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    dst[tid.x] = src[tid.x] * 2.0;
}
"""


def test_pointers_and_2d(device, tmp_path):
    k = kernel(device, tmp_path, POINTERS, name="ptr")
    xs = np.arange(64, dtype=np.float32)
    a = buf(device, element_count=64, struct_size=4, data=xs)
    b = buf(device, element_count=64, struct_size=4)
    k.dispatch(thread_count=[64, 1, 1], vars={"src": a.device_address, "dst": b.device_address})
    np.testing.assert_array_equal(b.to_numpy().view(np.float32), xs * 2)


def test_same_results_as_cpu(device, tmp_path):
    text = r"""
    RWStructuredBuffer<float4> o;
    struct P { float3 a; int b; };
    uniform P p;
    [numthreads(8, 4, 1)]
    void computeMain(uint3 t : SV_DispatchThreadID, uint gi : SV_GroupIndex)
    {
        float3 v = float3(t) * p.a + float(p.b);
        o[t.y * 16 + t.x] = float4(sin(v.x), exp(-v.y * 0.1), sqrt(v.z + 1.0), float(gi));
    }
    """
    cpu = slangjit.create_device(type=slangjit.DeviceType.cpu)
    outs = []
    for d in (cpu, device):
        k = kernel(d, tmp_path, text, name="same")
        o = buf(d, element_count=16 * 8, struct_size=16)
        k.dispatch(thread_count=[16, 8, 1], vars={"o": o, "p": {"a": [0.5, 0.25, 2.0], "b": 3}})
        outs.append(o.to_numpy().view(np.float32))
    np.testing.assert_allclose(outs[1], outs[0], rtol=2e-6, atol=1e-6)


def _conformance():
    for c in (os.environ.get("SLANGJIT_CONFORMANCE"), os.path.join(ROOT, "..", "shared", "conformance"),
              os.path.join(ROOT, "shared", "conformance"), os.path.join(ROOT, ".gpu", "conformance")):
        if c and os.path.isfile(os.path.join(c, "harness.py")):
            return os.path.abspath(c)
    return None


@pytest.mark.parametrize("prog", ["core/atomic-add.slang", "core/control-if-else.slang", "core/array-of-structs.slang",
                                  "core/bit-intrinsics.slang"])
def test_conformance_subset_on_cuda(device, prog):   # device: skips without a GPU (the harness runs on it)
    conf = _conformance()
    if conf is None:
        pytest.skip("conformance suite not found")
    path = os.path.join(conf, "tests", prog)
    if not os.path.isfile(path):
        pytest.skip(f"{prog} not in this conformance checkout")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, os.path.join(conf, "harness.py"), "suite", os.path.dirname(path),
                        "--backend", "project", "--device", "cuda", "--filter", os.path.basename(path).replace(".", r"\."),
                        "--jobs", "1"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    out = r.stdout + r.stderr
    assert "summary: pass=1, fail=0, error=0" in out, out[-3000:]
