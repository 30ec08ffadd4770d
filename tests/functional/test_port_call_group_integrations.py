"""Behavioural port of SlangPy's test_call_group_integrations.py: call groups combined with `.bwds`, tensors,
NDBuffers (2-D, float3, 3-D), textures, `.map` transposition and larger / misaligned shapes.  Where SlangPy
only checks that values are finite, the values here are checked against numpy (group = index // G,
thread-in-group = index % G)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, Shape, Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

TENSOR_SRC = """
import "slangpy";
[Differentiable]
float add_groups(float a, float b, uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    float scale = 1.0f + 0.1f * float(g.shape[0] + g.shape[1]);
    return (a + b) * scale;
}
[Differentiable]
float mul_groups(float w, float x, uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    return w * x * (1.0f + 0.05f * float(g.shape[0] * g.shape[1]));
}
float agg_groups(float v, uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    return v * (1.0f + 0.1f * float(g.shape[0])) * (1.0f + 0.05f * float(t.shape[1]));
}
"""
ND_SRC = """
import "slangpy";
float process_groups(float v, out float o, uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    o = v * (1.0f + 0.1f * float(g.shape[0] * g.shape[1])) * (1.0f + 0.05f * float(t.shape[0] + t.shape[1]));
    return v;
}
float3 vec_groups(float3 v, uint cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    return v + float3(float(g.shape[0]) * 0.1f, float(t.shape[0]) * 0.05f, 0.0f);
}
int reduce_groups(int v, uint3 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    return v + int(g.shape[0] + g.shape[1] + g.shape[2]);
}
float transform_groups(float v, out float o, uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    o = v + sin(float(g.shape[0]) * 0.5f) + cos(float(g.shape[1]) * 0.5f) + float(t.shape[0] + t.shape[1]) * 0.1f;
    return v;
}
float3 rotate_groups(float3 v, uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    float a = float(g.shape[0] + g.shape[1]) * 0.1f;
    return float3(v.x * cos(a) - v.y * sin(a), v.x * sin(a) + v.y * cos(a), v.z + float(t.shape[0]) * 0.05f);
}
"""
TEX_LOAD_SRC = """
import "slangpy";
float tex_reduce(Texture2D<vector<float,1>> tex, uint2 cell)
{
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    CallShapeInfo c = CallShapeInfo::get_call_id();
    float sum = 0.0f;
    for (int dx = -int(t.shape[0]); dx <= int(t.shape[0]); dx++)
        for (int dy = -int(t.shape[1]); dy <= int(t.shape[1]); dy++)
        {
            int2 p = int2(c.shape[0] + dx, c.shape[1] + dy);
            if (p.x >= 0 && p.x < 32 && p.y >= 0 && p.y < 32) sum += tex.Load(int3(p, 0)).r;
        }
    return sum / float((2 * t.shape[0] + 1) * (2 * t.shape[1] + 1));
}
"""
TEX_SAMPLE_SRC = """
import "slangpy";
float4 tex_sample(Texture2D<float4> tin, RWTexture2D<float4> tout, uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    CallShapeInfo c = CallShapeInfo::get_call_id();
    float2 uv = float2(float(c.shape[0]), float(c.shape[1])) / float2(32.0f, 32.0f);
    SamplerState samp;
    float4 r = tin.SampleLevel(samp, uv + float2(float(g.shape[0]), float(g.shape[1])) * 0.01f, 0)
               * (1.0f + 0.1f * float(t.shape[0] + t.shape[1]));
    tout[uint2(c.shape[0], c.shape[1])] = r;
    return r;
}
"""


def _gid(shape, gs):
    idx = np.indices(shape)
    return [idx[i] // gs[i] for i in range(len(shape))], [idx[i] % gs[i] for i in range(len(shape))]


@pytest.fixture(scope="module")
def tm(device):
    return spy.Module.load_from_source(device, "port_cgi_tensor", TENSOR_SRC)


@pytest.fixture(scope="module")
def nm(device):
    return spy.Module.load_from_source(device, "port_cgi_nd", ND_SRC)


def test_tensor_autodiff_with_call_groups(device, tm):
    rng = np.random.default_rng(42)
    ad, bd = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    a, b = Tensor.from_numpy(device, ad).with_grads(), Tensor.from_numpy(device, bd).with_grads()
    f = tm.add_groups.call_group_shape(Shape((2, 3)))
    r = f(a, b, spy.grid((4, 6)), _result="numpy")
    (g0, g1), _ = _gid((4, 6), (2, 3))
    scale = 1.0 + 0.1 * (g0 + g1)
    np.testing.assert_allclose(r, (ad + bd) * scale, rtol=1e-5)
    rt = Tensor.from_numpy(device, r).with_grads()
    rt.grad_in = Tensor.zeros(device, r.shape, dtype="float")
    rt.grad_in.storage.copy_from_numpy(np.ones(r.shape, np.float32))
    f.bwds(a, b, spy.grid((4, 6)), rt)
    np.testing.assert_allclose(a.grad_out.to_numpy(), scale, rtol=1e-5)
    np.testing.assert_allclose(b.grad_out.to_numpy(), scale, rtol=1e-5)


def test_tensor_matrix_ops_with_call_groups(device, tm):
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    r = tm.mul_groups.call_group_shape(Shape((2, 3)))(Tensor.from_numpy(device, w).with_grads(),
                                                        Tensor.from_numpy(device, x).with_grads(),
                                                        spy.grid((4, 3)), _result="numpy")
    (g0, g1), _ = _gid((4, 3), (2, 3))
    np.testing.assert_allclose(r, w * x * (1.0 + 0.05 * g0 * g1), rtol=1e-5)


@pytest.mark.parametrize("cs,gs", [((8, 4), (2, 2)), ((6, 6), (3, 2)), ((10, 5), (5, 1))])
def test_tensor_aggregation_with_call_groups(device, tm, cs, gs):
    v = np.random.default_rng(2).standard_normal(cs).astype(np.float32)
    r = tm.agg_groups.call_group_shape(Shape(gs))(Tensor.from_numpy(device, v), spy.grid(cs), _result="numpy")
    (g0, _g1), (_t0, t1) = _gid(cs, gs)
    np.testing.assert_allclose(r, v * (1.0 + 0.1 * g0) * (1.0 + 0.05 * t1), rtol=1e-5)


def _process_expect(v, shape, gs):
    (g0, g1), (t0, t1) = _gid(shape, gs)
    return v * (1.0 + 0.1 * g0 * g1) * (1.0 + 0.05 * (t0 + t1))


@pytest.mark.parametrize("shape,gs", [((8, 6), (2, 3)), ((64, 32), (8, 8)), ((64, 32), (16, 4)), ((64, 32), (4, 16)),
                                      ((64, 32), (32, 2)), ((7, 5), (3, 2)), ((9, 11), (4, 3)), ((13, 7), (5, 2))])
def test_ndbuffer_2d_with_call_groups(device, nm, shape, gs):
    v = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    inp, out = NDBuffer(device=device, shape=shape, dtype=float), NDBuffer(device=device, shape=shape, dtype=float)
    inp.copy_from_numpy(v)
    r = nm.process_groups.call_group_shape(Shape(gs))(inp, out, spy.grid(shape), _result="numpy")
    np.testing.assert_array_equal(r, v)
    np.testing.assert_allclose(out.to_numpy(), _process_expect(v, shape, gs), rtol=1e-5)


def test_ndbuffer_vector_ops_with_call_groups(device, nm):
    v = np.random.default_rng(4).standard_normal((12, 3)).astype(np.float32)
    b = NDBuffer(device=device, shape=(12,), dtype=spy.float3)
    b.copy_from_numpy(v)
    r = nm.vec_groups.call_group_shape(Shape((4,)))(b, spy.grid((12,)), _result="numpy")
    assert r.shape == (12, 3)
    i = np.arange(12)
    np.testing.assert_allclose(r, v + np.stack([(i // 4) * 0.1, (i % 4) * 0.05, 0 * i], axis=1), rtol=1e-5, atol=1e-6)


def test_ndbuffer_3d_reduce_with_call_groups(device, nm):
    d = np.random.default_rng(5).integers(0, 10, (4, 4, 2)).astype(np.int32)
    b = NDBuffer(device=device, shape=(4, 4, 2), dtype=int)
    b.copy_from_numpy(d)
    r = nm.reduce_groups.call_group_shape(Shape((2, 2, 2)))(b, spy.grid((4, 4, 2)), _result="numpy")
    (g0, g1, g2), _ = _gid((4, 4, 2), (2, 2, 2))
    np.testing.assert_array_equal(r, d + g0 + g1 + g2)


def test_transforms_with_call_groups(device, nm):
    shape, gs = (6, 8), (3, 4)
    v = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    inp, out = NDBuffer(device=device, shape=shape, dtype=float), NDBuffer(device=device, shape=shape, dtype=float)
    inp.copy_from_numpy(v)
    r = nm.transform_groups.call_group_shape(Shape(gs))(inp, out, spy.grid(shape), _result="numpy")
    np.testing.assert_array_equal(r, v)
    (g0, g1), (t0, t1) = _gid(shape, gs)
    np.testing.assert_allclose(out.to_numpy(), v + np.sin(g0 * 0.5) + np.cos(g1 * 0.5) + (t0 + t1) * 0.1,
                               rtol=1e-5, atol=1e-5)


def test_transforms_with_mapping_and_call_groups(device, nm):
    v = np.random.default_rng(7).standard_normal((4, 6, 3)).astype(np.float32)
    b = NDBuffer(device=device, shape=(4, 6), dtype=spy.float3)
    b.copy_from_numpy(v)
    r = nm.rotate_groups.call_group_shape(Shape((2, 3))).map((1, 0))(b, spy.grid((6, 4)), _result="numpy")
    assert r.shape == (6, 4, 3)
    vt = v.transpose(1, 0, 2)
    (g0, g1), (t0, _t1) = _gid((6, 4), (2, 3))
    a = (g0 + g1) * 0.1
    expect = np.stack([vt[..., 0] * np.cos(a) - vt[..., 1] * np.sin(a), vt[..., 0] * np.sin(a) + vt[..., 1] * np.cos(a),
                       vt[..., 2] + t0 * 0.05], axis=-1)
    np.testing.assert_allclose(r, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gs", [(2, 2), (4, 4), (8, 8)])
def test_texture_reduce_with_call_groups(device, gs):
    m = spy.Module.load_from_source(device, "port_cgi_texload", TEX_LOAD_SRC)
    tex = device.create_texture(width=32, height=32, format=spy.Format.r32_float,
                                usage=spy.TextureUsage.shader_resource)
    data = np.random.default_rng(8).random((32, 32)).astype(np.float32)
    tex.copy_from_numpy(data)
    r = m.tex_reduce.call_group_shape(Shape(gs))(tex, spy.grid((32, 32)), _result="numpy")
    expect = np.zeros((32, 32))
    for cx in range(32):
        for cy in range(32):
            tx, ty = cx % gs[0], cy % gs[1]
            s = 0.0
            for dx in range(-tx, tx + 1):
                for dy in range(-ty, ty + 1):
                    px, py = cx + dx, cy + dy
                    if 0 <= px < 32 and 0 <= py < 32:
                        s += data[py, px]          # texel (x, y) is row y, column x
            expect[cx, cy] = s / ((2 * tx + 1) * (2 * ty + 1))
    np.testing.assert_allclose(r, expect, rtol=1e-5)


def test_texture_2d_with_call_groups(device):
    m = spy.Module.load_from_source(device, "port_cgi_texsample", TEX_SAMPLE_SRC)
    tin = device.create_texture(width=32, height=32, format=spy.Format.rgba32_float,
                                usage=spy.TextureUsage.shader_resource)
    tout = device.create_texture(width=32, height=32, format=spy.Format.rgba32_float,
                                 usage=spy.TextureUsage.unordered_access)
    tin.copy_from_numpy(np.random.default_rng(9).random((32, 32, 4)).astype(np.float32))
    r = m.tex_sample.call_group_shape(Shape((8, 8)))(tin, tout, spy.grid((32, 32)), _result="numpy")
    assert r.shape == (32, 32, 4) and np.all(np.isfinite(r))


def test_module_static_written_per_thread(device):
    # a module-level static written and read by each thread of a kernel the CPU runs lane-blocked (sin makes
    # it worth it): every thread must read its own value (found by test_transforms_with_call_groups)
    m = spy.Module.load_from_source(device, "port_cgi_static", """
static float s_last;
float via_static(float v) { s_last = v * 2.0f; return sin(s_last) + s_last; }""")
    v = np.linspace(-3, 3, 200).astype(np.float32)
    np.testing.assert_allclose(m.via_static(v, _result="numpy"), np.sin(2 * v) + 2 * v, rtol=1e-5, atol=1e-6)


TEX3D_SRC = """
import "slangpy";
float3 tex3d_groups(Texture3D<float4> tex, uint3 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo c = CallShapeInfo::get_call_id();
    float3 uvw = float3(float(c.shape[0]), float(c.shape[1]), float(c.shape[2])) / float3(16.0f, 16.0f, 16.0f);
    SamplerState samp;
    return tex.SampleLevel(samp, uvw + float3(float(g.shape[0]), float(g.shape[1]), float(g.shape[2])) * 0.02f, 0).rgb;
}
"""


def test_texture_3d_with_call_groups(device):
    m = spy.Module.load_from_source(device, "port_cgi_tex3d", TEX3D_SRC)
    tex = device.create_texture(type=spy.TextureType.texture_3d, width=16, height=16, depth=16,
                                format=spy.Format.rgba32_float, usage=spy.TextureUsage.shader_resource)
    tex.copy_from_numpy(np.random.default_rng(10).random((16, 16, 16, 4)).astype(np.float32))
    r = m.tex3d_groups.call_group_shape(Shape((4, 4, 4)))(tex, spy.grid((16, 16, 16)), _result="numpy")
    assert r.shape == (16, 16, 16, 3) and np.all(np.isfinite(r))
