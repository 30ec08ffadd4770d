"""Texture sampling and the texture features beyond texel access: `SamplerState` from
`device.create_sampler(...)` (filters, addressing modes, LOD bias / clamps, border colour) with `Sample`,
`SampleLevel`, `SampleBias`, `SampleGrad`, `Gather` on 1-D, 2-D, 3-D, array and cube textures; `Load` of
a mip level; TextureCube texel access; normalised and sRGB formats (values converted on read and rounded on
write as the format defines).  Every value is checked against a float64 numpy implementation of the D3D
sampling rules (texel centres at (i + 0.5) / size, bilinear / trilinear weights, nearest / linear mips)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import (Format, TextureAddressingMode as AM, TextureFilteringMode as FM, TextureType,
                      TextureUsage)

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = r"""
import "slangpy";
float4 sample_level_2d(float2 uv, float lod, Texture2D<float4> tex, SamplerState s) { return tex.SampleLevel(s, uv, lod); }
float4 sample_2d(float2 uv, Texture2D<float4> tex, SamplerState s) { return tex.Sample(s, uv); }
float4 sample_bias_2d(float2 uv, float bias, Texture2D<float4> tex, SamplerState s) { return tex.SampleBias(s, uv, bias); }
float4 sample_grad_2d(float2 uv, float2 ddx, float2 ddy, Texture2D<float4> tex, SamplerState s)
{ return tex.SampleGrad(s, uv, ddx, ddy); }
float4 gather_2d(float2 uv, Texture2D<float> tex, SamplerState s) { return tex.Gather(s, uv); }
float sample_1d(float u, float lod, Texture1D<float> tex, SamplerState s) { return tex.SampleLevel(s, u, lod); }
float2 sample_3d(float3 uvw, Texture3D<float2> tex, SamplerState s) { return tex.SampleLevel(s, uvw, 0.0); }
float4 sample_2d_array(float3 uvl, float lod, Texture2DArray<float4> tex, SamplerState s)
{ return tex.SampleLevel(s, uvl, lod); }
float sample_1d_array(float2 ul, Texture1DArray<float> tex, SamplerState s) { return tex.SampleLevel(s, ul, 0.0); }
float4 sample_cube(float3 dir, TextureCube<float4> tex, SamplerState s) { return tex.SampleLevel(s, dir, 0.0); }
float4 load_mip(int3 p, Texture2D<float4> tex) { return tex.Load(p); }
float4 load_mip_array(int4 p, Texture2DArray<float4> tex) { return tex.Load(p); }
float4 cube_texel(int3 p, TextureCube<float4> tex) { return tex[p]; }
void cube_store(int3 p, float4 v, RWTextureCube<float4> tex) { tex[p] = v; }
uint3 dims_mip(uint mip, Texture2D<float4> tex) { uint w, h, l; tex.GetDimensions(mip, w, h, l); return uint3(w, h, l); }
void store_2d(int2 p, float4 v, RWTexture2D<float4> tex) { tex[p] = v; }
float4 read_2d(int2 p, Texture2D<float4> tex) { return tex[p]; }
float4 sample_unorm(float2 uv, Texture2D<float4> tex, SamplerState s) { return tex.SampleLevel(s, uv, 0.0); }
float4 sample_unset_sampler(float2 uv, Texture2D<float4> tex) { SamplerState s; return tex.SampleLevel(s, uv, 0.5); }
void copy_value(float4 value, out float4 dest) { dest = value; }
"""

RW = TextureUsage.shader_resource | TextureUsage.unordered_access


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "sj_tex_sampling", SRC)


# ---- the numpy reference (float64)

def _addr(i, n, mode):
    i = np.asarray(i, np.int64)
    if mode == AM.wrap:
        return np.mod(i, n)
    if mode == AM.clamp_to_edge:
        return np.clip(i, 0, n - 1)
    if mode == AM.clamp_to_border:
        return np.where((i < 0) | (i >= n), -1, i)
    if mode == AM.mirror_repeat:
        r = np.mod(i, 2 * n)
        return np.where(r < n, r, 2 * n - 1 - r)
    a = np.where(i < 0, -i - 1, i)              # mirror_once
    return np.minimum(a, n - 1)


class Ref:
    """Sampling of a list of mip levels (arrays [d, h, w, C] of one layer) as the D3D rules define it."""

    def __init__(self, levels, modes=(AM.wrap,) * 3, border=(1, 1, 1, 1), dims=2):
        self.levels = [np.asarray(lv, np.float64) for lv in levels]
        self.modes, self.dims = modes, dims
        self.border = np.asarray(border, np.float64)[:self.levels[0].shape[-1]]

    def fetch(self, L, x, y, z):
        lv = self.levels[L]
        d, h, w = lv.shape[:3]
        xi, yi, zi = _addr(x, w, self.modes[0]), _addr(y, h, self.modes[1]), _addr(z, d, self.modes[2])
        bad = (xi < 0) | (yi < 0) | (zi < 0)
        v = lv[np.maximum(zi, 0), np.maximum(yi, 0), np.maximum(xi, 0)]
        return np.where(bad[..., None], self.border, v)

    def level(self, L, uvw, linear):
        lv = self.levels[L]
        d, h, w = lv.shape[:3]
        uvw = np.asarray(uvw, np.float64)
        t = uvw * np.array([w, h, d])[:uvw.shape[-1]]
        n = len(uvw)
        if not linear:
            idx = np.floor(t).astype(np.int64)
            cols = [idx[:, k] if k < self.dims else np.zeros(n, np.int64) for k in range(3)]
            return self.fetch(L, *cols)
        t = t - 0.5
        b = np.floor(t)
        f = t - b
        b = b.astype(np.int64)
        out = 0.0
        for corner in np.ndindex(*(2,) * self.dims):
            wgt = np.ones(n)
            cols = []
            for k in range(3):
                if k < self.dims:
                    wgt = wgt * (f[:, k] if corner[k] else 1 - f[:, k])
                    cols.append(b[:, k] + corner[k])
                else:
                    cols.append(np.zeros(n, np.int64))
            out = out + wgt[:, None] * self.fetch(L, *cols)
        return out

    def sample(self, uvw, lod, s):
        lod = np.broadcast_to(np.asarray(lod, np.float64), (len(uvw),))
        lo = np.clip(lod + s.mip_lod_bias, s.min_lod, s.max_lod)
        out = []
        for i in range(len(uvw)):
            li = lo[i]
            filt = s.mag_filter if li <= 0 else s.min_filter
            li = min(max(li, 0.0), len(self.levels) - 1)
            one = uvw[i:i + 1]
            if s.mip_filter == FM.point:
                out.append(self.level(int(np.floor(li + 0.5)), one, filt == FM.linear)[0])
                continue
            l0 = int(np.floor(li))
            fr = li - l0
            a = self.level(l0, one, filt == FM.linear)[0]
            if fr > 0:
                a = a * (1 - fr) + self.level(min(l0 + 1, len(self.levels) - 1), one, filt == FM.linear)[0] * fr
            out.append(a)
        return np.array(out)


def _tex2d(device, rng, w, h, mips, channels=4, fmt=Format.rgba32_float):
    t = device.create_texture(type=TextureType.texture_2d, format=fmt, width=w, height=h, mip_count=mips, usage=RW)
    levels = []
    for mip in range(t.mip_count):
        ext = t.mip_extent(mip)
        a = rng.random(ext + ((channels,) if channels > 1 else ()), dtype=np.float32)
        t.copy_from_numpy(a, mip=mip)
        levels.append(a.reshape((1,) + ext + (channels,)))
    return t, levels


UV = np.array([[0.0, 0.0], [0.5, 0.5], [0.13, 0.77], [0.99, 0.01], [-0.3, 1.4], [1.7, -2.2], [0.031, 0.52],
               [2.49, 0.6]], np.float32)


@pytest.mark.parametrize("filt", [FM.point, FM.linear])
@pytest.mark.parametrize("mode", list(AM))
def test_sample_level_filters_and_address_modes(device, m, filt, mode):
    rng = np.random.default_rng(1)
    tex, levels = _tex2d(device, rng, 8, 4, 1)
    s = device.create_sampler(min_filter=filt, mag_filter=filt, mip_filter=FM.point, address_u=mode,
                              address_v=mode, border_color=(0.25, 0.5, 0.75, 1.0))
    got = m.sample_level_2d(UV, np.zeros(len(UV), np.float32), tex, s, _result="numpy")
    ref = Ref(levels, (mode, mode, mode), (0.25, 0.5, 0.75, 1.0)).sample(np.c_[UV, np.zeros(len(UV))], 0.0, s)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    assert m.sample_2d(UV, tex, s, _result="numpy") == pytest.approx(got)       # Sample: LOD 0


@pytest.mark.parametrize("mip_filter", [FM.point, FM.linear])
def test_trilinear_between_mips(device, m, mip_filter):
    rng = np.random.default_rng(2)
    tex, levels = _tex2d(device, rng, 16, 8, 0)                         # a full chain: 5 levels
    assert tex.mip_count == 5
    s = device.create_sampler(mip_filter=mip_filter, address_u=AM.clamp_to_edge, address_v=AM.mirror_repeat)
    lods = np.array([0.0, 0.4, 0.5, 1.25, 2.75, 3.5, 6.0, -1.0], np.float32)
    got = m.sample_level_2d(UV, lods, tex, s, _result="numpy")
    ref = Ref(levels, (AM.clamp_to_edge, AM.mirror_repeat, AM.wrap)).sample(np.c_[UV, np.zeros(len(UV))], lods, s)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_lod_bias_and_clamps(device, m):
    rng = np.random.default_rng(3)
    tex, levels = _tex2d(device, rng, 16, 16, 0)
    s = device.create_sampler(mip_lod_bias=0.75, min_lod=0.5, max_lod=2.25, mag_filter=FM.point)
    bias = np.linspace(-3, 4, len(UV)).astype(np.float32)
    got = m.sample_bias_2d(UV, bias, tex, s, _result="numpy")
    ref = Ref(levels).sample(np.c_[UV, np.zeros(len(UV))], bias, s)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_sample_grad_picks_the_lod_of_the_derivatives(device, m):
    rng = np.random.default_rng(4)
    tex, levels = _tex2d(device, rng, 32, 16, 0)
    s = device.create_sampler()
    ddx = np.array([[1 / 32, 0]] * 4 + [[4 / 32, 0]] * 4, np.float32)
    ddy = np.array([[0, 1 / 16], [0, 2 / 16], [0, 3 / 16], [0, 0.5]] * 2, np.float32)
    got = m.sample_grad_2d(UV, ddx, ddy, tex, s, _result="numpy")
    lod = np.log2(np.maximum(np.hypot(ddx[:, 0] * 32, ddx[:, 1] * 16), np.hypot(ddy[:, 0] * 32, ddy[:, 1] * 16)))
    ref = Ref(levels).sample(np.c_[UV, np.zeros(len(UV))], lod, s)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_gather(device, m):
    rng = np.random.default_rng(5)
    tex, levels = _tex2d(device, rng, 8, 8, 1, channels=1, fmt=Format.r32_float)
    s = device.create_sampler(address_u=AM.wrap, address_v=AM.clamp_to_edge)
    got = m.gather_2d(UV, tex, s, _result="numpy")
    ref = Ref(levels, (AM.wrap, AM.clamp_to_edge, AM.wrap))
    t = UV.astype(np.float64) * 8 - 0.5
    x0, y0 = np.floor(t[:, 0]).astype(int), np.floor(t[:, 1]).astype(int)
    z = np.zeros_like(x0)
    expect = np.stack([ref.fetch(0, x0, y0 + 1, z)[:, 0], ref.fetch(0, x0 + 1, y0 + 1, z)[:, 0],
                       ref.fetch(0, x0 + 1, y0, z)[:, 0], ref.fetch(0, x0, y0, z)[:, 0]], -1)
    np.testing.assert_allclose(got, expect, rtol=1e-6)


def test_sample_1d_3d_and_arrays(device, m):
    rng = np.random.default_rng(6)
    s = device.create_sampler(address_u=AM.mirror_once, address_v=AM.wrap, address_w=AM.clamp_to_edge)
    # 1-D with mips
    t1 = device.create_texture(type=TextureType.texture_1d, format=Format.r32_float, width=16, mip_count=0,
                               usage=RW)
    lv1 = []
    for mip in range(t1.mip_count):
        a = rng.random(t1.mip_extent(mip), dtype=np.float32)
        t1.copy_from_numpy(a, mip=mip)
        lv1.append(a.reshape(1, 1, -1, 1))
    u = np.array([0.0, 0.2, 0.51, 0.97, -0.4, 1.3], np.float32)
    lod = np.array([0.0, 0.5, 1.0, 2.2, 3.9, 0.7], np.float32)
    got = m.sample_1d(u, lod, t1, s, _result="numpy")
    ref = Ref(lv1, (AM.mirror_once, AM.wrap, AM.clamp_to_edge), dims=1).sample(u[:, None], lod, s)[:, 0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # 3-D, two channels
    t3 = device.create_texture(type=TextureType.texture_3d, format=Format.rg32_float, width=4, height=3, depth=5,
                               usage=RW)
    a3 = rng.random((5, 3, 4, 2), dtype=np.float32)
    t3.copy_from_numpy(a3)
    uvw = rng.uniform(-0.5, 1.5, (12, 3)).astype(np.float32)
    got = m.sample_3d(uvw, t3, s, _result="numpy")
    ref = Ref([a3], (AM.mirror_once, AM.wrap, AM.clamp_to_edge), dims=3).sample(uvw, 0.0, s)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # 2-D array with mips: the layer is rounded and clamped
    ta = device.create_texture(type=TextureType.texture_2d_array, format=Format.rgba32_float, width=8, height=8,
                               array_length=3, mip_count=0, usage=RW)
    layers = [[rng.random(ta.mip_extent(mip) + (4,), dtype=np.float32) for mip in range(ta.mip_count)]
              for _ in range(3)]
    for li, lvs in enumerate(layers):
        for mip, a in enumerate(lvs):
            ta.copy_from_numpy(a, layer=li, mip=mip)
    uvl = np.c_[UV, np.array([0, 1, 2, 1.4, 1.6, -3, 7, 0.49])].astype(np.float32)
    lods = np.array([0, 1.5, 0.2, 2.0, 3.0, 0.9, 1.1, 0.0], np.float32)
    got = m.sample_2d_array(uvl, lods, ta, s, _result="numpy")
    for i in range(len(uvl)):
        layer = int(np.clip(np.floor(uvl[i, 2] + 0.5), 0, 2))
        ref = Ref([a[None] for a in layers[layer]], (AM.mirror_once, AM.wrap, AM.clamp_to_edge)).sample(
            np.c_[uvl[i:i + 1, :2], [[0.0]]], lods[i:i + 1], s)
        np.testing.assert_allclose(got[i], ref[0], rtol=1e-5, atol=1e-6)
    # 1-D array
    t1a = device.create_texture(type=TextureType.texture_1d_array, format=Format.r32_float, width=8,
                                array_length=2, usage=RW)
    rows = rng.random((2, 8), dtype=np.float32)
    for li in range(2):
        t1a.copy_from_numpy(rows[li], layer=li)
    ul = np.array([[0.3, 0], [0.3, 1], [0.9, 0.6], [-0.2, 5]], np.float32)
    got = m.sample_1d_array(ul, t1a, s, _result="numpy")
    for i in range(len(ul)):
        layer = int(np.clip(np.floor(ul[i, 1] + 0.5), 0, 1))
        ref = Ref([rows[layer].reshape(1, 1, 8, 1)], (AM.mirror_once, AM.wrap, AM.clamp_to_edge), dims=1)
        np.testing.assert_allclose(got[i], ref.sample(ul[i:i + 1, :1], 0.0, s)[0, 0], rtol=1e-5, atol=1e-6)


def _cube_face_uv(d):
    x, y, z = d
    ax, ay, az = abs(x), abs(y), abs(z)
    if ax >= ay and ax >= az:
        face, sc, tc, ma = (0, -z, -y, ax) if x >= 0 else (1, z, -y, ax)
    elif ay >= az:
        face, sc, tc, ma = (2, x, z, ay) if y >= 0 else (3, x, -z, ay)
    else:
        face, sc, tc, ma = (4, x, -y, az) if z >= 0 else (5, -x, -y, az)
    return face, (sc / ma + 1) / 2, (tc / ma + 1) / 2


def test_texture_cube(device, m):
    rng = np.random.default_rng(7)
    tc = device.create_texture(type=TextureType.texture_cube, format=Format.rgba32_float, width=4, height=4,
                               usage=RW)
    faces = rng.random((6, 4, 4, 4), dtype=np.float32)
    for f in range(6):
        tc.copy_from_numpy(faces[f], layer=f)
    # texel access: (x, y, face)
    p = np.array([[0, 0, 0], [3, 1, 2], [2, 3, 5], [1, 2, 4], [4, 0, 0]], np.int32)
    got = m.cube_texel(p, tc, _result="numpy")
    expect = np.array([faces[f, y, x] if x < 4 else np.zeros(4) for x, y, f in p])
    np.testing.assert_array_equal(got, expect)
    # sampling a direction: the face of its major axis, clamped at the face's edges
    s = device.create_sampler(address_u=AM.wrap, address_v=AM.wrap)
    dirs = np.array([[1, 0.2, -0.3], [-1, 0.5, 0.5], [0.1, 1, 0.3], [0.2, -1, -0.7], [0.3, 0.4, 1],
                     [-0.6, 0.1, -1], [0.9, 0.95, 0.1]], np.float32)
    got = m.sample_cube(dirs, tc, s, _result="numpy")
    for i, d in enumerate(dirs.astype(np.float64)):
        f, u, v = _cube_face_uv(d)
        ref = Ref([faces[f][None]], (AM.clamp_to_edge,) * 3).sample(np.array([[u, v, 0.0]]), 0.0, s)
        np.testing.assert_allclose(got[i], ref[0], rtol=1e-5, atol=1e-6)
    # writes through RWTextureCube
    vals = rng.random((3, 4), dtype=np.float32)
    m.cube_store(np.array([[1, 1, 3], [0, 2, 5], [3, 3, 0]], np.int32), vals, tc)
    assert np.array_equal(tc.to_numpy(layer=3)[1, 1], vals[0])
    assert np.array_equal(tc.to_numpy(layer=5)[2, 0], vals[1])
    assert np.array_equal(tc.to_numpy(layer=0)[3, 3], vals[2])


def test_load_of_a_mip_level_and_dimensions(device, m):
    rng = np.random.default_rng(8)
    tex, levels = _tex2d(device, rng, 8, 4, 0)
    p = np.array([[0, 0, 0], [7, 3, 0], [3, 1, 1], [1, 0, 2], [0, 0, 3], [5, 0, 2], [0, 0, 4], [-1, 0, 1]],
                 np.int32)
    got = m.load_mip(p, tex, _result="numpy")
    expect = []
    for x, y, mip in p:
        lv = levels[mip][0] if 0 <= mip < len(levels) else None
        ok = lv is not None and 0 <= x < lv.shape[1] and 0 <= y < lv.shape[0]
        expect.append(lv[y, x] if ok else np.zeros(4))
    np.testing.assert_array_equal(got, np.array(expect, np.float32))
    dims = m.dims_mip(np.arange(4, dtype=np.uint32), tex, _result="numpy")
    np.testing.assert_array_equal(dims, [[8, 4, 4], [4, 2, 4], [2, 1, 4], [1, 1, 4]])
    # a view of mip 1 reaches the levels below it: its Load(mip 0) is the texture's mip 1
    got = m.load_mip(np.array([[1, 1, 0], [0, 0, 1]], np.int32), tex.create_view(mip=1), _result="numpy")
    np.testing.assert_array_equal(got, np.stack([levels[1][0][1, 1], levels[2][0][0, 0]]))
    # arrays: (x, y, layer, mip)
    ta = device.create_texture(type=TextureType.texture_2d_array, format=Format.rgba32_float, width=4, height=4,
                               array_length=2, mip_count=0, usage=RW)
    data = {(li, mip): rng.random(ta.mip_extent(mip) + (4,), dtype=np.float32)
            for li in range(2) for mip in range(ta.mip_count)}
    for (li, mip), a in data.items():
        ta.copy_from_numpy(a, layer=li, mip=mip)
    q = np.array([[1, 2, 0, 0], [3, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 2], [0, 0, 1, 2]], np.int32)
    got = m.load_mip_array(q, ta, _result="numpy")
    np.testing.assert_array_equal(got, np.stack([data[(li, mip)][y, x] for x, y, li, mip in q]))


@pytest.mark.parametrize("fmt, npt, decode", [
    (Format.rgba8_unorm, np.uint8, lambda r: r / 255.0),
    (Format.rgba8_snorm, np.int8, lambda r: np.maximum(r / 127.0, -1.0)),
    (Format.rgba16_unorm, np.uint16, lambda r: r / 65535.0),
    (Format.rgba16_snorm, np.int16, lambda r: np.maximum(r / 32767.0, -1.0))])
def test_normalised_formats(device, m, fmt, npt, decode):
    rng = np.random.default_rng(9)
    info = np.iinfo(npt)
    raw = rng.integers(info.min, info.max, (4, 8, 4), endpoint=True).astype(npt)
    raw[0, 0] = [info.min, info.max, 0, 1]
    tex = device.create_texture(type=TextureType.texture_2d, format=fmt, width=8, height=4, usage=RW, data=raw)
    # stored integers round-trip, except snorm's minimum, which reads as -1.0 like min + 1 (texels are stored
    # as the values a shader reads): to_numpy gives min + 1 (docs/slangpy-compat.md)
    np.testing.assert_array_equal(tex.to_numpy(), np.maximum(raw, -info.max) if info.min < 0 else raw)
    p = np.stack(np.meshgrid(np.arange(8), np.arange(4)), -1).reshape(-1, 2).astype(np.int32)
    got = m.read_2d(p, tex, _result="numpy").reshape(4, 8, 4)
    np.testing.assert_allclose(got, decode(raw.astype(np.float64)), rtol=1e-6, atol=1e-7)
    # a kernel's store rounds to the format (and clamps to its range)
    vals = np.array([[0.3, -0.4, 1.7, 0.5], [0.01, 0.999, -2.0, 0.25]], np.float32)
    m.store_2d(np.array([[0, 0], [5, 2]], np.int32), vals, tex)
    lo = -1.0 if info.min < 0 else 0.0
    mx = float(info.max)
    expect_raw = np.rint(np.clip(vals.astype(np.float64), lo, 1.0) * mx).astype(npt)
    np.testing.assert_array_equal(tex.to_numpy()[[0, 2], [0, 5]], expect_raw)
    back = m.read_2d(np.array([[0, 0], [5, 2]], np.int32), tex, _result="numpy")
    np.testing.assert_allclose(back, decode(expect_raw.astype(np.float64)), rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match="rgba.*stored integers"):
        tex.copy_from_numpy(raw.astype(np.float32))


def _srgb_to_linear(c):
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def test_srgb_and_bgra_formats(device, m):
    rng = np.random.default_rng(10)
    raw = rng.integers(0, 255, (2, 4, 4), endpoint=True).astype(np.uint8)
    tex = device.create_texture(type=TextureType.texture_2d, format=Format.rgba8_unorm_srgb, width=4, height=2,
                                usage=RW, data=raw)
    p = np.stack(np.meshgrid(np.arange(4), np.arange(2)), -1).reshape(-1, 2).astype(np.int32)
    got = m.read_2d(p, tex, _result="numpy").reshape(2, 4, 4)
    c = raw.astype(np.float64) / 255.0
    expect = np.concatenate([_srgb_to_linear(c[..., :3]), c[..., 3:]], -1)        # alpha stays linear
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(tex.to_numpy(), raw)
    # a store encodes linear -> sRGB bytes
    lin = np.array([[0.2, 0.5, 0.001, 0.5]], np.float32)
    m.store_2d(np.array([[1, 1]], np.int32), lin, tex)
    lin64 = lin.astype(np.float64)[0]
    enc = np.where(lin64 <= 0.0031308, lin64 * 12.92, 1.055 * lin64 ** (1 / 2.4) - 0.055)
    enc[3] = lin64[3]
    np.testing.assert_array_equal(tex.to_numpy()[1, 1], np.rint(enc * 255).astype(np.uint8))
    # bgra8_unorm: the stored bytes are B, G, R, A; a shader reads R, G, B, A
    bgra = np.array([[[10, 20, 30, 255], [0, 128, 255, 0]]], np.uint8)
    tb = device.create_texture(type=TextureType.texture_2d, format=Format.bgra8_unorm, width=2, height=1,
                               usage=RW, data=bgra)
    got = m.read_2d(np.array([[0, 0], [1, 0]], np.int32), tb, _result="numpy")
    np.testing.assert_allclose(got, bgra[0][:, [2, 1, 0, 3]] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(tb.to_numpy(), bgra)
    # filtering happens on the decoded values
    s = device.create_sampler(address_u=AM.clamp_to_edge, address_v=AM.clamp_to_edge)
    got = m.sample_unorm(np.array([[0.5, 0.5]], np.float32), tb, s, _result="numpy")
    np.testing.assert_allclose(got[0], (bgra[0][0, [2, 1, 0, 3]].astype(np.float64) + bgra[0][1, [2, 1, 0, 3]]) / 2 / 255.0, rtol=1e-6)


def test_unset_sampler_state_is_the_default_sampler(device, m):
    rng = np.random.default_rng(11)
    tex, levels = _tex2d(device, rng, 8, 8, 0)
    got = m.sample_unset_sampler(UV, tex, _result="numpy")
    s = device.create_sampler()
    ref = Ref(levels, (AM.wrap,) * 3).sample(np.c_[UV, np.zeros(len(UV))], 0.5, s)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_normalised_texture_written_as_a_container(device, m):
    # a texture bound as a plain container of texels: the written floats are rounded by to_numpy and by
    # every read through a Texture* parameter
    tex = device.create_texture(type=TextureType.texture_2d, format=Format.rgba8_unorm, width=2, height=1,
                                usage=RW)
    vals = np.array([[[0.3, 0.61, 1.2, -0.1], [0.5, 0.25, 0.0, 1.0]]], np.float32)
    m.copy_value(vals, tex)
    raw = np.rint(np.clip(vals.astype(np.float64), 0, 1) * 255).astype(np.uint8)
    np.testing.assert_array_equal(tex.to_numpy(), raw)
    got = m.read_2d(np.array([[0, 0], [1, 0]], np.int32), tex, _result="numpy")
    np.testing.assert_allclose(got, raw[0] / 255.0, rtol=1e-6)


def test_sampling_an_integer_texture_is_a_compile_error(device):
    src = 'import "slangpy";\nint f(float2 uv, Texture2D<int> t, SamplerState s) { return t.SampleLevel(s, uv, 0.0); }'
    with pytest.raises(spy.CompileError, match=r"E3096.*filter float textures only.*texel type is int\)"):
        spy.Module.load_from_source(device, "sj_tex_int_sample", src)


def test_sampler_argument_errors(device):
    with pytest.raises(ValueError, match="address_u must be a TextureAddressingMode"):
        device.create_sampler(address_u=17)
    with pytest.raises(TypeError, match="unexpected keyword argument 'filter'"):
        device.create_sampler(filter=FM.point)
    with pytest.raises(ValueError, match="anisotropic"):
        device.create_sampler(max_anisotropy=8)
    with pytest.raises(ValueError, match="border_color must have 4 components"):
        device.create_sampler(border_color=(1, 2))
    d = spy.SamplerDesc(min_filter=FM.point, address_v=AM.clamp_to_border)
    s = device.create_sampler(d)
    assert s.min_filter == FM.point and s.address_v == AM.clamp_to_border and s.mag_filter == FM.linear
