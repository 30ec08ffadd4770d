"""Textures (SlangPy's test_textures.py, behaviour ported): `device.create_texture` (TextureDesc or keywords),
`copy_from_numpy` / `to_numpy` per layer and mip, texture arguments vectorised over their texels, texture
views selecting a mip level, Texture1D/2D/3D(Array) and RW variants as parameters, textures broadcast to
every thread, `_result=Texture`."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import ALL_MIPS, Format, TextureDesc, TextureType, TextureUsage

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
float4 return_value(float4 value) { return value; }
void copy_value(float4 value, out float4 dest) { dest = value; }
void copy_pixel_texture_1d(int1 position, Texture1D<float4> src, RWTexture1D<float4> dst)
{ dst[position] = src[position]; }
void copy_pixel_texture_2d(int2 position, Texture2D<float4> src, RWTexture2D<float4> dst)
{ dst[position] = src[position]; }
void copy_pixel_texture_1d_array(int2 position, Texture1DArray<float4> src, RWTexture1DArray<float4> dst)
{ dst[position.yx] = src[position.yx]; }
void copy_pixel_texture_2d_array(int3 position, Texture2DArray<float4> src, RWTexture2DArray<float4> dst)
{ dst[position.yzx] = src[position.yzx]; }
void copy_pixel_texture_3d(int3 position, Texture3D<float4> src, RWTexture3D<float4> dst)
{ dst[position] = src[position]; }
T passthru<T>(T t) { return t; }
float sample_texture_1d_broadcast(Texture1D<float> tex) { return tex[uint(2)]; }
float sample_texture_2d_broadcast(Texture2D<float> tex) { return tex[uint2(3, 1)]; }
float sample_texture_3d_with_scalar(float value, Texture3D<float> tex) { return tex[uint3(2, 1, 3)] * value; }
uint2 dims_2d(Texture2D<float4> tex) { uint w, h; tex.GetDimensions(w, h); return uint2(w, h); }
float4 out_of_range(Texture2D<float4> tex) { return tex[int2(-1, 0)] + tex[int2(1000, 0)]; }
"""

RW = TextureUsage.shader_resource | TextureUsage.unordered_access
SIZE = 8


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "textures", SRC)


def _desc(ttype, slices, mips):
    d = TextureDesc()
    d.format = Format.rgba32_float
    d.usage = RW
    d.mip_count = mips
    d.array_length = slices
    if slices > 1:
        ttype = {TextureType.texture_1d: TextureType.texture_1d_array,
                 TextureType.texture_2d: TextureType.texture_2d_array}[ttype]
    d.type = ttype
    d.width = SIZE
    if ttype != TextureType.texture_1d and ttype != TextureType.texture_1d_array:
        d.height = SIZE
    if ttype == TextureType.texture_3d:
        d.depth = SIZE
    return d


def _fill(tex, rng):
    data = []
    for layer in range(tex.array_length):
        mips = []
        for mip in range(tex.mip_count):
            ext = tex.mip_extent(mip)
            a = rng.random(ext + (4,), dtype=np.float32)
            tex.copy_from_numpy(a, layer=layer, mip=mip)
            mips.append(a)
        data.append(mips)
    return data


def _grid(ttype, slices):
    """Coordinates of every texel, as SlangPy's test passes them: (.., [x, y, z]) for plain textures,
    ([layer, x, (y)]) for arrays, shape = the texture's texel shape."""
    if slices == 1:
        n = {TextureType.texture_1d: 1, TextureType.texture_2d: 2, TextureType.texture_3d: 3}[ttype]
        idx = np.indices((SIZE,) * n)                    # idx[k] = coordinate along axis k (outermost first)
        return np.stack(list(idx), -1).astype(np.int32)
    n = {TextureType.texture_1d: 1, TextureType.texture_2d: 2}[ttype]
    idx = np.indices((slices,) + (SIZE,) * n)
    return np.stack(list(idx), -1).astype(np.int32)


@pytest.mark.parametrize("ttype", [TextureType.texture_1d, TextureType.texture_2d, TextureType.texture_3d])
@pytest.mark.parametrize("slices", [1, 3])
@pytest.mark.parametrize("mips", [ALL_MIPS, 1])
def test_read_write_texture(m, device, ttype, slices, mips):
    if ttype == TextureType.texture_3d and slices > 1:
        return
    rng = np.random.default_rng(1)
    src = device.create_texture(_desc(ttype, slices, mips))
    dst = device.create_texture(_desc(ttype, slices, mips))
    assert src.mip_count == (4 if mips == ALL_MIPS else 1)      # 8, 4, 2, 1
    data = _fill(src, rng)
    # as SlangPy's test: one thread per texel, each copying the texel at its coordinate (the coordinates
    # are a permutation of the texels, so every texel is copied once)
    g = _grid(ttype, slices)
    dims = g.shape[-1]
    coords = spy.Tensor.from_numpy(device, g).view(g.shape[:-1] + (dims,)) if dims > 1 else g[..., 0]
    nm = f"copy_pixel_{ttype.name}{'_array' if slices > 1 else ''}"
    if dims > 1:
        coords = spy.Tensor(coords.storage, f"int{dims}", g.shape[:-1])
    else:
        coords = spy.Tensor(spy.Tensor.from_numpy(device, np.ascontiguousarray(g)).storage, "int1", g.shape[:-1])
    getattr(m, nm)(coords, src, dst)
    for layer in range(src.array_length):
        np.testing.assert_array_equal(dst.to_numpy(layer=layer, mip=0), data[layer][0])


@pytest.mark.parametrize("ttype", [TextureType.texture_1d, TextureType.texture_2d, TextureType.texture_3d])
@pytest.mark.parametrize("slices", [1, 3])
def test_copy_mip_values_with_views(m, device, ttype, slices):
    if ttype == TextureType.texture_3d and slices > 1:
        return
    rng = np.random.default_rng(2)
    src = device.create_texture(_desc(ttype, slices, ALL_MIPS))
    dst = device.create_texture(_desc(ttype, slices, ALL_MIPS))
    data = _fill(src, rng)
    m.copy_value(src, dst)                      # the texture itself: mip 0
    for layer in range(src.array_length):
        np.testing.assert_array_equal(dst.to_numpy(layer=layer, mip=0), data[layer][0])
        assert not dst.to_numpy(layer=layer, mip=1).any()
    for mip in range(src.mip_count):
        m.copy_value(src.create_view(mip=mip), dst.create_view(mip=mip))
    for layer in range(src.array_length):
        for mip in range(src.mip_count):
            np.testing.assert_array_equal(dst.to_numpy(layer=layer, mip=mip), data[layer][mip])


@pytest.mark.parametrize("shape", [(2, 2), (8, 2), (16, 32), (4, 128)])
def test_texture_2d_shapes(m, device, shape):
    data = np.random.default_rng(3).random(shape + (4,), dtype=np.float32)
    tex = device.create_texture(type=TextureType.texture_2d, width=shape[1], height=shape[0], usage=RW,
                                format=Format.rgba32_float, data=data)
    assert (tex.width, tex.height) == (shape[1], shape[0])
    np.testing.assert_array_equal(m.return_value(tex, _result="numpy"), data)
    np.testing.assert_array_equal(m.dims_2d(tex), [shape[1], shape[0]])


@pytest.mark.parametrize("shape", [(2, 2, 2), (8, 2, 4), (4, 16, 2)])
def test_texture_3d_shapes(m, device, shape):
    data = np.random.default_rng(4).random(shape + (4,), dtype=np.float32)
    tex = device.create_texture(type=TextureType.texture_3d, width=shape[2], height=shape[1], depth=shape[0],
                                usage=RW, format=Format.rgba32_float, data=data)
    np.testing.assert_array_equal(m.return_value(tex, _result="numpy"), data)


@pytest.mark.parametrize("texel", ["float", "uint", "int16_t", "uint8_t", "half"])
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("channels", [1, 2, 4])
def test_texture_return_value(m, device, texel, dims, channels):
    shape = (6, 5, 4)[:dims]
    rng = np.random.default_rng(5)
    np_dt = {"float": np.float32, "uint": np.uint32, "int16_t": np.int16, "uint8_t": np.uint8,
             "half": np.float16}[texel]
    data = (rng.integers(0, 100, shape + (channels,)) if texel not in ("float", "half")
            else rng.random(shape + (channels,))).astype(np_dt)
    dtype = texel if channels == 1 else f"{texel}{channels}"
    buf = spy.NDBuffer(device, dtype, shape=shape)
    buf.copy_from_numpy(data)
    for rt in (spy.Texture, "texture"):
        res = m.passthru.map(buf.dtype)(buf, _result=rt)
        assert isinstance(res, spy.Texture)
        assert res.type == (TextureType.texture_1d, TextureType.texture_2d, TextureType.texture_3d)[dims - 1]
        assert res.width == shape[-1]
        if dims >= 2:
            assert res.height == shape[-2]
        if dims == 3:
            assert res.depth == shape[-3]
        pref = {1: "r", 2: "rg", 4: "rgba"}[channels]
        suff = {"float": "32_float", "uint": "32_uint", "int16_t": "16_sint", "uint8_t": "8_uint",
                "half": "16_float"}[texel]
        assert res.format == Format[pref + suff]
        np.testing.assert_array_equal(res.to_numpy(), data.squeeze(-1) if channels == 1 else data)


def test_texture_broadcast(m, device):
    rng = np.random.default_rng(6)
    d1 = rng.random(8, dtype=np.float32)
    t1 = device.create_texture(type=TextureType.texture_1d, width=8, format=Format.r32_float, usage=RW, data=d1)
    assert m.sample_texture_1d_broadcast(t1) == pytest.approx(d1[2])
    d2 = rng.random((4, 8), dtype=np.float32)
    t2 = device.create_texture(type=TextureType.texture_2d, width=8, height=4, format=Format.r32_float, usage=RW,
                               data=d2)
    assert m.sample_texture_2d_broadcast(t2) == pytest.approx(d2[1, 3])           # uint2(x=3, y=1)
    d3 = rng.random((5, 4, 3), dtype=np.float32)
    t3 = device.create_texture(type=TextureType.texture_3d, width=3, height=4, depth=5, format=Format.r32_float,
                               usage=RW, data=d3)
    vals = np.array([1.0, 2.0, -3.0], np.float32)
    res = m.sample_texture_3d_with_scalar(vals, t3, _result="numpy")             # texture broadcast to 3 threads
    np.testing.assert_allclose(res, vals * d3[3, 1, 2], rtol=1e-6)


def test_out_of_range_reads_give_zero(m, device):
    data = np.ones((2, 2, 4), np.float32)
    tex = device.create_texture(type=TextureType.texture_2d, width=2, height=2, format=Format.rgba32_float,
                                usage=RW, data=data)
    assert list(m.out_of_range(tex)) == [0, 0, 0, 0]


def test_texture_errors(m, device):
    with pytest.raises(ValueError, match="format"):
        device.create_texture(type=TextureType.texture_2d, width=4, height=4)
    with pytest.raises(ValueError, match="multisampled"):
        device.create_texture(type=TextureType.texture_2d_ms, width=4, height=4, format=Format.r32_float)
    tex = device.create_texture(type=TextureType.texture_2d, width=4, height=4, format=Format.r32_float)
    with pytest.raises(ValueError, match="mip 1 out of range"):
        tex.to_numpy(mip=1)
    with pytest.raises(ValueError, match="does not fit"):
        tex.copy_from_numpy(np.zeros((3, 4), np.float32))
    wide = device.create_texture(type=TextureType.texture_2d, width=4, height=2, format=Format.r32_float)
    with pytest.raises(ValueError, match=r"does not fit mip 0 of the texture \(expected \(2, 4\)"):
        wide.copy_from_numpy(np.zeros((4, 2), np.float32))          # same size, transposed: refused
    wide.copy_from_numpy(np.arange(8, dtype=np.float32).reshape(2, 4, 1))   # a trailing channel of 1 is fine
    np.testing.assert_array_equal(wide.to_numpy(), np.arange(8).reshape(2, 4))
    with pytest.raises(TypeError, match="unexpected keyword"):
        device.create_texture(type=TextureType.texture_2d, width=4, colour=1)
    f = device.create_texture(type=TextureType.texture_2d, width=4, height=4, format=Format.rgba32_float)
    with pytest.raises(TypeError, match="read-only .*RWTexture2D<float4>.*'dst'"):
        m.copy_pixel_texture_2d(np.zeros((4, 4, 2), np.int32), f, f)


def test_read_write_texture_instance_buffer_coords(m, device):
    """SlangPy's form of the copy: grid coordinates in an InstanceBuffer of `int2` (copy_from_numpy), full
    mip chain, mip 0 copied."""
    g = np.stack(np.indices((SIZE, SIZE)), -1).astype(np.int32)
    coords = spy.InstanceBuffer(struct=m.int2.as_struct(), shape=g.shape[:-1])
    coords.copy_from_numpy(g)
    src = device.create_texture(_desc(TextureType.texture_2d, 1, ALL_MIPS))
    dst = device.create_texture(_desc(TextureType.texture_2d, 1, ALL_MIPS))
    data = _fill(src, np.random.default_rng(9))
    m.copy_pixel_texture_2d(coords, src, dst)
    np.testing.assert_array_equal(dst.to_numpy(), data[0][0])
