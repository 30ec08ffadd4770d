"""Slang programs through the real compiler and the SlangPy-compatible compute API, checked against numpy.

Every test goes source -> parser -> checker -> IR -> C++ -> g++ -> multi-threaded dispatch.
Known compiler bugs are kept as strict xfails (with the reason) so that fixing them flips the test.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit.runtime import device as device_mod

ROOT = Path(__file__).resolve().parents[2]
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access

pytestmark = pytest.mark.usefixtures("private_cache")


def kernel_from_source(device, source: str, entry: str = "computeMain", name: str = "m"):
    module = device.load_module_from_source(name, textwrap.dedent(source))
    program = device.link_program([module], [module.entry_point(entry)])
    return device.create_compute_kernel(program)


def buf(device, data=None, n=0, dtype=np.float32, struct_size=None):
    if data is not None:
        data = np.ascontiguousarray(data)
        return device.create_buffer(element_count=data.shape[0], struct_size=struct_size or data.itemsize *
                                    (int(np.prod(data.shape[1:])) if data.ndim > 1 else 1), usage=RW, data=data)
    return device.create_buffer(element_count=n, struct_size=struct_size or np.dtype(dtype).itemsize, usage=RW)


def read(b, dtype=np.float32):
    return b.to_numpy().view(dtype)


# ------------------------------------------------------------------------------------------ elementwise, big

ELEMENTWISE = """
RWStructuredBuffer<float> y;
RWStructuredBuffer<float> z;
StructuredBuffer<float> x;

[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count, uniform float a, uniform float b,
                 uniform float c)
{
    uint i = tid.x;
    if (i >= count)
        return;
    float v = x[i];
    y[i] = a * v * v + b * v + c;
    z[i] = sin(v) * exp(-v * v) + sqrt(abs(v));
}
"""

N20 = 1 << 20


def _elementwise_inputs():
    rng = np.random.default_rng(1234)
    return (rng.standard_normal(N20) * 2.0).astype(np.float32)


def test_elementwise_2_20_threads_element_by_element(device, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "8")      # several workers even on a small machine
    k = kernel_from_source(device, ELEMENTWISE, name="elementwise")
    x = _elementwise_inputs()
    bx, by, bz = buf(device, x), buf(device, n=N20), buf(device, n=N20)
    a, b, c = np.float32(0.75), np.float32(-1.5), np.float32(0.25)
    k.dispatch(thread_count=[N20, 1, 1], vars={"x": bx, "y": by, "z": bz}, count=N20, a=float(a), b=float(b),
               c=float(c))
    y, z = read(by), read(bz)
    # the same float32 operations in the same order (no FP contraction): bit-exact
    want_y = a * x * x + b * x + c
    bad = np.nonzero(y != want_y)[0]
    assert bad.size == 0, f"{bad.size} mismatches, first at {bad[:5]}: {y[bad[:5]]} vs {want_y[bad[:5]]}"
    want_z = (np.sin(x.astype(np.float64)) * np.exp(-(x.astype(np.float64) ** 2)) +
              np.sqrt(np.abs(x.astype(np.float64))))
    err = np.abs(z - want_z) / np.maximum(1.0, np.abs(want_z))
    assert np.all(err < 1e-5), f"max rel error {err.max()} at {int(err.argmax())}"
    assert device_mod._get_pool().nthreads == 8


_ONE_THREAD = textwrap.dedent("""
    import sys, numpy as np, slangjit as spy
    sys.path.insert(0, sys.argv[1])
    from test_compute_api import ELEMENTWISE, N20, _elementwise_inputs, kernel_from_source, buf, read
    from slangjit.runtime import device as device_mod
    device = spy.create_device(type=spy.DeviceType.cpu)
    k = kernel_from_source(device, ELEMENTWISE, name="elementwise")
    x = _elementwise_inputs()
    bx, by, bz = buf(device, x), buf(device, n=N20), buf(device, n=N20)
    k.dispatch(thread_count=[N20, 1, 1], vars={"x": bx, "y": by, "z": bz}, count=N20, a=0.75, b=-1.5, c=0.25)
    assert device_mod._get_pool().nthreads == 1
    sys.stdout.buffer.write(by.to_numpy().tobytes() + bz.to_numpy().tobytes())
""")


def test_single_thread_gives_identical_bytes(device, monkeypatch, tmp_path):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "4")
    k = kernel_from_source(device, ELEMENTWISE, name="elementwise")
    x = _elementwise_inputs()
    bx, by, bz = buf(device, x), buf(device, n=N20), buf(device, n=N20)
    k.dispatch(thread_count=[N20, 1, 1], vars={"x": bx, "y": by, "z": bz}, count=N20, a=0.75, b=-1.5, c=0.25)
    multi = by.to_numpy().tobytes() + bz.to_numpy().tobytes()
    env = dict(os.environ, SLANGJIT_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", _ONE_THREAD, str(Path(__file__).parent)], capture_output=True,
                       env=env, cwd=str(ROOT), timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert len(p.stdout) == len(multi)
    assert p.stdout == multi


# ------------------------------------------------------------------------------------------ bindings


def test_struct_global_and_entry_param_as_dicts(device):
    k = kernel_from_source(device, """
        struct Params { float scale; float3 offset; int n; uint2 pair; };
        uniform Params g;
        RWStructuredBuffer<float> res;

        [numthreads(4, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uniform Params p)
        {
            uint i = tid.x;
            if (i >= uint(p.n)) return;
            res[i] = g.scale * float(i) + g.offset.y + p.scale * p.offset.z + float(p.pair.x + g.pair.y);
        }
        """, name="structs")
    out = buf(device, n=10)
    k.dispatch(thread_count=[10, 1, 1], vars={"res": out, "g": {"scale": 2.0, "offset": [0, 5.0, 0], "n": 0,
                                                                 "pair": [0, 7]}},
               p={"scale": 3.0, "offset": [0, 0, 0.5], "n": 10, "pair": [100, 0]})
    np.testing.assert_array_equal(read(out), 2.0 * np.arange(10) + 5.0 + 1.5 + 107.0)


def test_vectors(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<float4> res;
        StructuredBuffer<float4> inp;
        RWStructuredBuffer<int2> iout;

        [numthreads(8, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uniform float4 scale, uniform int2 shift)
        {
            uint i = tid.x;
            float4 v = inp[i];
            res[i] = v * scale + v.wzyx - float4(dot(v.xyz, v.xyz), length(v.xy), 0.0, 1.0);
            iout[i] = int2(int(i), -int(i)) * 3 + shift;
        }
        """, name="vectors")
    rng = np.random.default_rng(0)
    v = rng.standard_normal((16, 4)).astype(np.float32)
    scale = np.array([1, 2, 3, 4], np.float32)
    out, iout = buf(device, n=16, struct_size=16), buf(device, n=16, struct_size=8)
    k.dispatch(thread_count=[16, 1, 1], vars={"res": out, "inp": buf(device, v), "iout": iout}, scale=scale,
               shift=[10, 20])
    want = v * scale + v[:, ::-1] - np.stack([np.sum(v[:, :3] ** 2, 1), np.sqrt(np.sum(v[:, :2] ** 2, 1)),
                                              np.zeros(16), np.ones(16)], 1)
    np.testing.assert_allclose(read(out).reshape(16, 4), want, rtol=1e-5, atol=1e-5)
    i = np.arange(16)
    np.testing.assert_array_equal(read(iout, np.int32).reshape(16, 2), np.stack([3 * i + 10, -3 * i + 20], 1))


def test_entry_point_uniforms_as_kwargs(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<int> res;
        [numthreads(1, 1, 1)]
        void computeMain(uniform int a, uniform uint b, uniform float c, uniform bool flag, uniform double d)
        {
            res[0] = a;
            res[1] = int(b);
            res[2] = int(c * 10.0);
            res[3] = flag ? 1 : 2;
            res[4] = int(d * 100.0);
        }
        """, name="kwargs")
    out = buf(device, n=5, dtype=np.int32)
    k.dispatch(thread_count=[1, 1, 1], vars={"res": out}, a=-7, b=9, c=1.5, flag=True, d=2.25)
    np.testing.assert_array_equal(read(out, np.int32), [-7, 9, 15, 1, 225])


def test_cbuffer(device):
    k = kernel_from_source(device, """
        cbuffer Consts { float gain; float bias; uint count; };
        RWStructuredBuffer<float> res;
        [numthreads(16, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            if (tid.x < count)
                res[tid.x] = gain * float(tid.x) + bias;
        }
        """, name="cbuf")
    out = buf(device, n=40)
    k.dispatch(thread_count=[40, 1, 1], vars={"res": out, "Consts": {"gain": 0.5, "bias": -1.0, "count": 33}})
    want = np.where(np.arange(40) < 33, 0.5 * np.arange(40) - 1.0, 0.0)
    np.testing.assert_array_equal(read(out), want.astype(np.float32))


def test_pointer_bound_to_device_address(device):
    k = kernel_from_source(device, """
        [numthreads(32, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* src, uniform float* dst, uniform uint n)
        {
            uint i = tid.x;
            if (i >= n) return;
            dst[i] = src[i] * 2.0 + src[(i + 1) % n];
        }
        """, name="pointers")
    x = np.arange(100, dtype=np.float32)
    bsrc, bdst = buf(device, x), buf(device, n=100)
    k.dispatch(thread_count=[100, 1, 1], src=bsrc.device_address, dst=bdst.device_address, n=100)
    np.testing.assert_array_equal(read(bdst), x * 2 + np.roll(x, -1))


def test_structured_buffer_float3(device):
    k = kernel_from_source(device, """
        StructuredBuffer<float3> pts;
        RWStructuredBuffer<float3> res;
        [numthreads(16, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            float3 p = pts[tid.x];
            res[tid.x] = cross(p, float3(0.0, 0.0, 1.0)) + p.zxy;
        }
        """, name="f3")
    rng = np.random.default_rng(3)
    p = rng.standard_normal((64, 3)).astype(np.float32)
    out = buf(device, n=64, struct_size=12)
    k.dispatch(thread_count=[64, 1, 1], vars={"pts": buf(device, p), "res": out})
    want = np.cross(p, np.array([0, 0, 1], np.float32)) + p[:, [2, 0, 1]]
    np.testing.assert_allclose(read(out).reshape(64, 3), want, rtol=1e-6, atol=1e-6)


def test_rw_byte_address_buffer(device):
    k = kernel_from_source(device, """
        ByteAddressBuffer src;
        RWByteAddressBuffer dst;
        [numthreads(8, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            uint i = tid.x;
            uint v = src.Load(i * 4);
            dst.Store(i * 8, v * 3u);
            dst.Store(i * 8 + 4, asuint(float(v) * 0.5));
        }
        """, name="bab")
    src = np.arange(32, dtype=np.uint32) + 1
    bsrc = device.create_buffer(size=128, usage=RW, data=src)
    bdst = device.create_buffer(size=256, usage=RW)
    k.dispatch(thread_count=[32, 1, 1], vars={"src": bsrc, "dst": bdst})
    words = read(bdst, np.uint32).reshape(32, 2)
    np.testing.assert_array_equal(words[:, 0], src * 3)
    np.testing.assert_array_equal(words[:, 1].view(np.float32), src.astype(np.float32) * 0.5)


def test_byte_address_load2_store4(device):
    k = kernel_from_source(device, """
        RWByteAddressBuffer b;
        [numthreads(1, 1, 1)]
        void computeMain()
        {
            uint2 v = b.Load2(0);
            b.Store4(16, uint4(v.x + v.y, v.x * v.y, 7u, 9u));
        }
        """, name="bab2")
    b = device.create_buffer(size=32, usage=RW, data=np.array([3, 4, 0, 0, 0, 0, 0, 0], np.uint32))
    k.dispatch(thread_count=[1, 1, 1], vars={"b": b})
    np.testing.assert_array_equal(read(b, np.uint32)[4:], [7, 12, 7, 9])


# ------------------------------------------------------------------------------------------ atomics


def test_interlocked_add_from_many_threads(device, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "8")
    k = kernel_from_source(device, """
        RWStructuredBuffer<int> counter;
        RWStructuredBuffer<uint> hist;
        [numthreads(64, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            InterlockedAdd(counter[0], 1);
            int old;
            InterlockedAdd(counter[1], 2, old);
            InterlockedMax(counter[2], int(tid.x));
            InterlockedAdd(hist[tid.x % 16u], 1u);
        }
        """, name="atomics")
    n = 1 << 18
    counter, hist = buf(device, n=3, dtype=np.int32), buf(device, n=16, dtype=np.uint32)
    k.dispatch(thread_count=[n, 1, 1], vars={"counter": counter, "hist": hist})
    np.testing.assert_array_equal(read(counter, np.int32), [n, 2 * n, n - 1])
    np.testing.assert_array_equal(read(hist, np.uint32), np.full(16, n // 16))


def test_atomic_int_structured_buffer(device, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "8")
    k = kernel_from_source(device, """
        RWStructuredBuffer<Atomic<int>> c;
        [numthreads(32, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            c[0].add(1);
            c[1].max(int(tid.x));
            c[2].sub(3);
            c[3].min(-int(tid.x));
        }
        """, name="atomicT")
    n = 100_000
    c = buf(device, n=4, dtype=np.int32)
    k.dispatch(thread_count=[n, 1, 1], vars={"c": c})
    np.testing.assert_array_equal(read(c, np.int32), [n, n - 1, -3 * n, -(n - 1)])


def test_interlocked_compare_exchange(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<uint> b;
        RWStructuredBuffer<uint> winners;
        [numthreads(64, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            uint orig;
            InterlockedCompareExchange(b[0], 0u, tid.x + 1u, orig);
            if (orig == 0u)
                InterlockedAdd(winners[0], 1u);
        }
        """, name="cas")
    b, w = buf(device, n=1, dtype=np.uint32), buf(device, n=1, dtype=np.uint32)
    k.dispatch(thread_count=[4096, 1, 1], vars={"b": b, "winners": w})
    assert read(w, np.uint32)[0] == 1
    assert 1 <= read(b, np.uint32)[0] <= 4096


# ------------------------------------------------------------------------------------------ dispatch shapes


def test_2d_dispatch_ids(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<uint4> res;
        [numthreads(4, 2, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uint3 gid : SV_GroupID, uint3 gtid : SV_GroupThreadID,
                         uint gi : SV_GroupIndex, uniform uint width, uniform uint height)
        {
            if (tid.x >= width || tid.y >= height) return;
            uint i = tid.y * width + tid.x;
            res[i] = uint4(gid.x * 100u + gid.y, gtid.x * 10u + gtid.y, gi, tid.z + gid.z + gtid.z);
        }
        """, name="ids2d")
    w, h = 13, 7
    out = buf(device, n=w * h, struct_size=16)
    k.dispatch(thread_count=[w, h, 1], vars={"res": out}, width=w, height=h)
    got = read(out, np.uint32).reshape(h, w, 4)
    y, x = np.mgrid[0:h, 0:w]
    np.testing.assert_array_equal(got[..., 0], (x // 4) * 100 + y // 2)
    np.testing.assert_array_equal(got[..., 1], (x % 4) * 10 + y % 2)
    np.testing.assert_array_equal(got[..., 2], (y % 2) * 4 + x % 4)
    np.testing.assert_array_equal(got[..., 3], 0)


def test_3d_dispatch_ids(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<uint> gids;
        RWStructuredBuffer<uint> gtids;
        RWStructuredBuffer<uint> gis;
        [numthreads(2, 3, 4)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uint3 gid : SV_GroupID, uint3 gtid : SV_GroupThreadID,
                         uint gi : SV_GroupIndex, uniform uint3 size)
        {
            if (any(tid >= size)) return;
            uint i = (tid.z * size.y + tid.y) * size.x + tid.x;
            gids[i] = (gid.z * 16u + gid.y) * 16u + gid.x;
            gtids[i] = (gtid.z * 16u + gtid.y) * 16u + gtid.x;
            gis[i] = gi;
        }
        """, name="ids3d")
    sx, sy, sz = 5, 7, 9
    n = sx * sy * sz
    gids, gtids, gis = (buf(device, n=n, dtype=np.uint32) for _ in range(3))
    k.dispatch(thread_count=[sx, sy, sz], vars={"gids": gids, "gtids": gtids, "gis": gis}, size=[sx, sy, sz])
    z, y, x = np.mgrid[0:sz, 0:sy, 0:sx]
    np.testing.assert_array_equal(read(gids, np.uint32).reshape(sz, sy, sx), ((z // 4) * 16 + y // 3) * 16 + x // 2)
    np.testing.assert_array_equal(read(gtids, np.uint32).reshape(sz, sy, sx), ((z % 4) * 16 + y % 3) * 16 + x % 2)
    np.testing.assert_array_equal(read(gis, np.uint32).reshape(sz, sy, sx), (z % 4) * 6 + (y % 3) * 2 + x % 2)


def test_groupshared_reduction_with_barriers(device):
    # A tree reduction in groupshared memory: correct only if every barrier holds for the
    # whole group (the CPU backend runs such groups as fibers).
    k = kernel_from_source(device, """
        groupshared float tile[64];
        StructuredBuffer<float> x;
        RWStructuredBuffer<float> sums;
        [numthreads(64, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uint gi : SV_GroupIndex, uint3 gid : SV_GroupID)
        {
            tile[gi] = x[tid.x];
            GroupMemoryBarrierWithGroupSync();
            for (uint s = 32; s > 0; s >>= 1)
            {
                if (gi < s)
                    tile[gi] += tile[gi + s];
                GroupMemoryBarrierWithGroupSync();
            }
            if (gi == 0u)
                sums[gid.x] = tile[0];
        }
        """, name="gshared")
    x = np.arange(64 * 8, dtype=np.float32)
    sums = buf(device, n=8)
    k.dispatch(thread_count=[64 * 8, 1, 1], vars={"x": buf(device, x), "sums": sums})
    np.testing.assert_array_equal(read(sums), x.reshape(8, 64).sum(1))


# ------------------------------------------------------------------------------------------ language features


def test_generics_and_interfaces_in_kernel(device):
    k = kernel_from_source(device, """
        interface IShape { float area(); float scaled(float k); }
        struct Square : IShape {
            float side;
            float area() { return side * side; }
            float scaled(float k) { return area() * k; }
        }
        struct Circle : IShape {
            float r;
            float area() { return 3.0 * r * r; }
            float scaled(float k) { return area() * k * 2.0; }
        }
        T twice<T : IArithmetic>(T x) { return x + x; }
        float total<S : IShape>(S s, float k) { return s.area() + s.scaled(k); }
        struct Pair<T> { T a; T b; T sum() { return a + b; } }
        float sumN<let N : int>(float v[N]) { float s = 0.0; for (int i = 0; i < N; i++) s += v[i]; return s; }

        RWStructuredBuffer<float> res;
        [numthreads(8, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            float f = float(tid.x);
            Square sq = { f };
            Circle c = { f + 1.0 };
            Pair<float> p = { f, 2.0 };
            float arr[3] = { f, f, 1.0 };
            res[tid.x] = total(sq, 2.0) + total(c, 1.0) + twice(f) + float(twice(int(tid.x))) + p.sum() + sumN(arr);
        }
        """, name="generics")
    out = buf(device, n=8)
    k.dispatch(thread_count=[8, 1, 1], vars={"res": out})
    f = np.arange(8, dtype=np.float32)
    want = (f * f + f * f * 2) + (3 * (f + 1) ** 2 + 3 * (f + 1) ** 2 * 2) + 2 * f + 2 * f + (f + 2) + (2 * f + 1)
    np.testing.assert_allclose(read(out), want, rtol=1e-6)


def test_generic_associated_type(device):
    k = kernel_from_source(device, """
        interface IProducer { associatedtype Out; Out make(int i); }
        struct IntMaker : IProducer { typealias Out = int; int make(int i) { return i * 3; } }
        P.Out runIt<P : IProducer>(P p, int i) { P.Out r = p.make(i); return r; }
        RWStructuredBuffer<int> res;
        [numthreads(4, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            IntMaker m;
            res[tid.x] = runIt(m, int(tid.x)) + 1;
        }
        """, name="assoc")
    out = buf(device, n=4, dtype=np.int32)
    k.dispatch(thread_count=[4, 1, 1], vars={"res": out})
    np.testing.assert_array_equal(read(out, np.int32), [1, 4, 7, 10])


def test_import_module_from_include_paths(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "mathlib.slang").write_text(textwrap.dedent("""
        module mathlib;
        public float sq(float x) { return x * x; }
        public struct Acc { public float total; [mutating] public void add(float v) { total += v; } }
    """))
    (tmp_path / "main.slang").write_text(textwrap.dedent("""
        import mathlib;
        RWStructuredBuffer<float> res;
        [numthreads(16, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            Acc a;
            a.total = 0.0;
            a.add(sq(float(tid.x)));
            a.add(1.0);
            res[tid.x] = a.total;
        }
    """))
    dev = spy.create_device(type=spy.DeviceType.cpu, include_paths=[str(lib)])
    program = dev.load_program(str(tmp_path / "main.slang"), ["computeMain"])
    k = dev.create_compute_kernel(program)
    out = buf(dev, n=16)
    k.dispatch(thread_count=[16, 1, 1], vars={"res": out})
    np.testing.assert_array_equal(read(out), np.arange(16, dtype=np.float32) ** 2 + 1)


def test_load_program_by_name_from_include_paths(tmp_path):
    (tmp_path / "kern.slang").write_text(textwrap.dedent("""
        RWStructuredBuffer<uint> res;
        [numthreads(8, 1, 1)]
        void main2(uint3 tid : SV_DispatchThreadID) { res[tid.x] = tid.x * tid.x; }
    """))
    dev = spy.create_device(type=spy.DeviceType.cpu, include_paths=[str(tmp_path)])
    k = dev.create_compute_kernel(dev.load_program("kern", ["main2"]))
    out = buf(dev, n=8, dtype=np.uint32)
    k.dispatch(thread_count=[8, 1, 1], vars={"res": out})
    np.testing.assert_array_equal(read(out, np.uint32), np.arange(8) ** 2)


def test_half_buffers(device):
    k = kernel_from_source(device, """
        StructuredBuffer<half> x;
        RWStructuredBuffer<half> y;
        RWStructuredBuffer<float> yf;
        [numthreads(32, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uniform half scale)
        {
            half v = x[tid.x];
            y[tid.x] = v * scale + half(1.0);
            yf[tid.x] = float(v) * 2.0;
        }
        """, name="halves")
    x = (np.arange(64, dtype=np.float16) - 32) / np.float16(8)
    y, yf = buf(device, n=64, dtype=np.float16), buf(device, n=64)
    k.dispatch(thread_count=[64, 1, 1], vars={"x": buf(device, x), "y": y, "yf": yf}, scale=0.5)
    np.testing.assert_array_equal(read(y, np.float16), x * np.float16(0.5) + np.float16(1))
    np.testing.assert_array_equal(read(yf), x.astype(np.float32) * 2)


def test_control_flow_and_integer_ops(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<int> res;
        int collatz(int n) {
            int steps = 0;
            while (n != 1) { n = (n % 2 == 0) ? n / 2 : 3 * n + 1; steps++; }
            return steps;
        }
        [numthreads(16, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID)
        {
            int i = int(tid.x) + 1;
            int r = 0;
            switch (i % 4) {
            case 0: r = collatz(i); break;
            case 1: r = (i << 3) ^ 0x55; break;
            case 2: r = -i >> 1; break;
            default: for (int j = 0; j < i; ++j) { if (j == 5) continue; r += j; } break;
            }
            res[tid.x] = r;
        }
        """, name="cflow")
    out = buf(device, n=64, dtype=np.int32)
    k.dispatch(thread_count=[64, 1, 1], vars={"res": out})

    def collatz(n):
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s

    want = []
    for t in range(64):
        i = t + 1
        if i % 4 == 0:
            want.append(collatz(i))
        elif i % 4 == 1:
            want.append((i << 3) ^ 0x55)
        elif i % 4 == 2:
            want.append(-i >> 1)
        else:
            want.append(sum(j for j in range(i) if j != 5))
    np.testing.assert_array_equal(read(out, np.int32), want)


def test_matrix_mul(device):
    k = kernel_from_source(device, """
        StructuredBuffer<float4> v;
        RWStructuredBuffer<float4> res;
        [numthreads(4, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uniform float4x4 m)
        {
            res[tid.x] = mul(m, v[tid.x]);
        }
        """, name="matmul")
    rng = np.random.default_rng(5)
    m = rng.standard_normal((4, 4)).astype(np.float32)
    v = rng.standard_normal((8, 4)).astype(np.float32)
    out = buf(device, n=8, struct_size=16)
    k.dispatch(thread_count=[8, 1, 1], vars={"v": buf(device, v), "res": out}, m=m)
    np.testing.assert_allclose(read(out).reshape(8, 4), v @ m.T, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------ errors

SIMPLE = """
RWStructuredBuffer<float> res;
StructuredBuffer<float> inp;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    res[tid.x] = inp[tid.x] + 1.0;
}
"""


def test_missing_binding_is_an_error(device):
    k = kernel_from_source(device, SIMPLE, name="simple")
    with pytest.raises(ValueError, match="inp"):
        k.dispatch(thread_count=[64, 1, 1], vars={"res": buf(device, n=64)})


def test_unknown_variable_name_is_an_error(device):
    k = kernel_from_source(device, SIMPLE, name="simple")
    with pytest.raises(ValueError, match="nosuch"):
        k.dispatch(thread_count=[64, 1, 1], vars={"res": buf(device, n=64), "inp": buf(device, n=64),
                                                  "nosuch": 1})
    with pytest.raises((ValueError, TypeError), match="bogus"):
        k.dispatch(thread_count=[64, 1, 1], vars={"res": buf(device, n=64), "inp": buf(device, n=64)}, bogus=3)


def test_wrong_binding_type_is_an_error(device):
    k = kernel_from_source(device, SIMPLE, name="simple")
    with pytest.raises(TypeError, match="inp"):
        k.dispatch(thread_count=[64, 1, 1], vars={"res": buf(device, n=64), "inp": 3.0})


def test_buffer_too_small_for_dispatch_does_not_crash(device):
    k = kernel_from_source(device, SIMPLE, name="simple")
    n_small, n_threads = 10, 1 << 16
    inp = buf(device, np.arange(n_small, dtype=np.float32))
    out = buf(device, n=n_small + 6)
    k.dispatch(thread_count=[n_threads, 1, 1], vars={"res": out, "inp": inp})   # must not segfault
    got = read(out)
    np.testing.assert_array_equal(got[:n_small], np.arange(n_small) + 1.0)      # in-bounds reads/writes
    np.testing.assert_array_equal(got[n_small:], 1.0)                         # reads past the end are 0


def test_out_of_range_write_index_dropped(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<int> res;
        [numthreads(1, 1, 1)]
        void computeMain(uniform int idx)
        {
            res[idx] = 42;
            res[0] = res[idx] + 1;
        }
        """, name="oob")
    out = buf(device, n=4, dtype=np.int32)
    for idx in (4, 1000000, -1, -1000000):
        k.dispatch(thread_count=[1, 1, 1], vars={"res": out}, idx=idx)
        np.testing.assert_array_equal(read(out, np.int32), [1, 0, 0, 0])


def test_bad_slang_raises_compile_error_with_code_and_line(device):
    src = "RWStructuredBuffer<float> res;\n[numthreads(1,1,1)]\nvoid computeMain()\n{\n    res[0] = undefined_name + 1.0;\n}\n"
    with pytest.raises(spy.CompileError) as ei:
        kernel_from_source(device, src, name="bad1")
    msg = str(ei.value)
    assert ei.value.code.startswith("E")
    assert ei.value.diagnostics[0].loc.line == 5
    assert "undefined_name" in msg and ":5:" in msg and "^" in msg


def test_syntax_error_from_file(tmp_path):
    p = tmp_path / "broken.slang"
    p.write_text("[numthreads(1,1,1)]\nvoid computeMain()\n{\n    int x = 1 +;\n}\n")
    dev = spy.create_device(type=spy.DeviceType.cpu)
    with pytest.raises(spy.CompileError) as ei:
        dev.load_program(str(p), ["computeMain"])
    assert ei.value.diagnostics[0].loc.line == 4
    assert "broken.slang:4:" in str(ei.value)


def test_type_error_and_missing_entry_point(device):
    with pytest.raises(spy.CompileError) as ei:
        kernel_from_source(device, "[numthreads(1,1,1)]\nvoid computeMain()\n{\n  float3 v = float3(1,2,3);\n"
                                   "  int2 w = v.xyzw;\n}\n", name="bad2")
    assert ei.value.diagnostics[0].loc.line == 5
    with pytest.raises(spy.CompileError) as ei:
        kernel_from_source(device, SIMPLE, entry="notThere", name="bad3")
    assert "notThere" in str(ei.value)


def test_missing_module_file(device):
    with pytest.raises(FileNotFoundError):
        device.load_program("definitely_not_a_module_xyz", ["computeMain"])


def test_missing_import(device):
    with pytest.raises(spy.CompileError) as ei:
        kernel_from_source(device, "import no_such_module_abc;\n[numthreads(1,1,1)] void computeMain() {}\n",
                           name="bad4")
    assert ei.value.diagnostics[0].loc.line == 1


# ------------------------------------------------------------------------------------------ more language / binding


def test_struct_with_buffers_arrays_and_constant_buffer(device):
    k = kernel_from_source(device, """
        struct Bufs { RWStructuredBuffer<float> o; StructuredBuffer<float> i; float k; };
        uniform Bufs b;
        uniform float arr[4];
        uniform float3 g3;
        ConstantBuffer<Bufs> cb;
        [numthreads(4, 1, 1)]
        void computeMain(uint3 t : SV_DispatchThreadID) { b.o[t.x] = b.i[t.x] * b.k + arr[t.x] + g3.z + cb.k; }
        """, name="structres")
    x, o = buf(device, np.arange(4, dtype=np.float32)), buf(device, n=4)
    k.dispatch(thread_count=[4, 1, 1], vars={"b": {"o": o, "i": x, "k": 2.0}, "arr": [10, 20, 30, 40],
                                             "g3": [0, 0, 0.5], "cb": {"o": o, "i": x, "k": 100.0}})
    np.testing.assert_array_equal(read(o), np.arange(4) * 2 + np.array([10, 20, 30, 40]) + 0.5 + 100)


def test_structured_buffer_of_structs(device):
    k = kernel_from_source(device, """
        struct P { float3 pos; float w; int2 id; };
        StructuredBuffer<P> inp;
        RWStructuredBuffer<P> res;
        [numthreads(4, 1, 1)]
        void computeMain(uint3 t : SV_DispatchThreadID)
        {
            P p = inp[t.x];
            p.pos = p.pos * 2.0;
            p.w += 1.0;
            p.id = p.id.yx + int2(1, 1);
            res[t.x] = p;
        }
        """, name="structbuf")
    dt = np.dtype([("pos", np.float32, 3), ("w", np.float32), ("id", np.int32, 2)])
    assert dt.itemsize == 24
    a = np.zeros(8, dt)
    a["pos"] = np.arange(24, dtype=np.float32).reshape(8, 3)
    a["w"] = np.arange(8)
    a["id"] = np.stack([np.arange(8), -np.arange(8)], 1)
    out = buf(device, n=8, struct_size=24)
    k.dispatch(thread_count=[8, 1, 1], vars={"inp": buf(device, a, struct_size=24), "res": out})
    got = out.to_numpy().view(dt)
    np.testing.assert_array_equal(got["pos"], a["pos"] * 2)
    np.testing.assert_array_equal(got["w"], a["w"] + 1)
    np.testing.assert_array_equal(got["id"], a["id"][:, ::-1] + 1)


def test_atomics_on_pointer_and_byte_address_buffer(device, monkeypatch):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "8")
    k = kernel_from_source(device, """
        RWByteAddressBuffer bab;
        [numthreads(32, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uniform int* p)
        {
            InterlockedAdd(*p, 1);
            int o;
            InterlockedAdd(p[1], 2, o);
            bab.InterlockedAdd(4, 3u);
            uint old;
            bab.InterlockedMax(8, tid.x, old);
        }
        """, name="ptratomic")
    b, bab = buf(device, n=2, dtype=np.int32), device.create_buffer(size=16, usage=RW)
    k.dispatch(thread_count=[32 * 1000, 1, 1], vars={"bab": bab}, p=b.device_address)
    np.testing.assert_array_equal(read(b, np.int32), [32000, 64000])
    np.testing.assert_array_equal(read(bab, np.uint32), [0, 96000, 31999, 0])


def test_get_dimensions(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<uint> res;
        RWByteAddressBuffer bab;
        [numthreads(1, 1, 1)]
        void computeMain()
        {
            uint n, s;
            res.GetDimensions(n, s);
            res[0] = n;
            res[1] = s;
            uint bn;
            bab.GetDimensions(bn);
            res[2] = bn;
        }
        """, name="dims")
    res = buf(device, n=5, dtype=np.uint32)
    k.dispatch(thread_count=[1, 1, 1], vars={"res": res, "bab": device.create_buffer(size=16, usage=RW)})
    np.testing.assert_array_equal(read(res, np.uint32)[:3], [5, 4, 16])


def test_generic_struct_with_value_parameter_and_static_interface_methods(device):
    k = kernel_from_source(device, """
        interface IOp { static float apply(float a, float b); }
        struct AddOp : IOp { static float apply(float a, float b) { return a + b; } }
        struct MulOp : IOp { static float apply(float a, float b) { return a * b; } }
        struct Reducer<Op : IOp, let N : int> {
            float vals[N];
            float run() { float acc = vals[0]; for (int i = 1; i < N; i++) acc = Op.apply(acc, vals[i]); return acc; }
        }
        interface IFunc { float eval(float x); }
        struct Lin : IFunc { float a; float b; float eval(float x) { return a * x + b; } }
        struct Compose<F : IFunc, G : IFunc> : IFunc { F f; G g; float eval(float x) { return f.eval(g.eval(x)); } }
        RWStructuredBuffer<float> res;
        [numthreads(1, 1, 1)]
        void computeMain()
        {
            Reducer<AddOp, 4> r1;
            Reducer<MulOp, 3> r2;
            for (int i = 0; i < 4; i++) r1.vals[i] = float(i + 1);
            for (int i = 0; i < 3; i++) r2.vals[i] = float(i + 2);
            res[0] = r1.run();
            res[1] = r2.run();
            Lin l1 = { 2.0, 1.0 };
            Lin l2 = { 3.0, 0.0 };
            Compose<Lin, Lin> c;
            c.f = l1;
            c.g = l2;
            res[2] = c.eval(1.0);
        }
        """, name="genstruct")
    res = buf(device, n=3)
    k.dispatch(thread_count=[1, 1, 1], vars={"res": res})
    np.testing.assert_array_equal(read(res), [10, 24, 7])


def test_misc_language_features(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<float> res;
        void f(inout float a, out float b, float c = 5.0) { a = a + c; b = a * 2.0; }
        static const float tbl[4] = { 1.0, 2.0, 4.0, 8.0 };
        enum Color { Red, Green = 5, Blue };
        namespace ns { float g(float x) { return x + 100.0; } }
        struct S {
            float v;
            property float twice { get { return v * 2.0; } }
            __subscript(int i) -> float { get { return v + float(i); } }
            static float k() { return 7.0; }
            __init(float x) { v = x; }
        }
        extension S { float thrice() { return v * 3.0; } }
        [numthreads(4, 1, 1)]
        void computeMain(uint3 t : SV_DispatchThreadID)
        {
            float a = float(t.x);
            float b;
            f(a, b);
            f(a, b, 1.0);
            S s = S(a);
            res[t.x] = b + tbl[t.x] + float(int(Color.Blue)) + ns::g(0.0) + s.twice + s[2] + S.k() + s.thrice();
        }
        """, name="misc")
    res = buf(device, n=4)
    k.dispatch(thread_count=[4, 1, 1], vars={"res": res})
    t = np.arange(4.0)
    a = t + 6
    want = a * 2 + np.array([1, 2, 4, 8]) + 6 + 100 + a * 2 + a + 2 + 7 + a * 3
    np.testing.assert_array_equal(read(res), want)


def test_integer_widths_and_wrapping(device):
    k = kernel_from_source(device, """
        RWStructuredBuffer<int64_t> res;
        RWStructuredBuffer<double> dd;
        [numthreads(1, 1, 1)]
        void computeMain(uniform int64_t a, uniform uint64_t b, uniform double c)
        {
            res[0] = a * 3;
            res[1] = int64_t(b >> 33);
            res[2] = int64_t(c * 1e10);
            uint u = 0xFFFFFFFFu;
            res[3] = int64_t(u + 2u);
            int8_t b8 = int8_t(127);
            b8 += int8_t(1);
            res[4] = int64_t(b8);
            uint16_t h = uint16_t(65535);
            h++;
            res[5] = int64_t(h);
            dd[0] = sqrt(c);
            dd[1] = c / 3.0;
        }
        """, name="ints")
    res, dd = buf(device, n=6, dtype=np.int64), buf(device, n=2, dtype=np.float64)
    k.dispatch(thread_count=[1, 1, 1], vars={"res": res, "dd": dd}, a=-(1 << 40), b=1 << 62, c=2.0)
    np.testing.assert_array_equal(read(res, np.int64), [-(1 << 40) * 3, (1 << 62) >> 33, 20000000000, 1, -128, 0])
    np.testing.assert_array_equal(read(dd, np.float64), [np.sqrt(2.0), 2.0 / 3.0])
