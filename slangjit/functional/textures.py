"""Textures and samplers in functional calls (runtime/textures.py holds the texture itself).

A texture argument is bound as the tensor of one of its mip levels (mip 0, or a view's `mip`): shape
([layers,] [depth,] [height,] width), element the texel (`float4` for rgba32_float and rgba8_unorm).  So a
texture meets a `float4` parameter as a container of texels (the call vectorises over them) and a
`Texture2D<float4>` / `RWTexture2D<float4>` parameter as slangpy.slang's buffer-backed texture of that level,
which also reaches the levels below it (`_mips`, for `Load` with a mip and `SampleLevel`) and knows the
format's rounding (`_fmt`, for stores to normalised / sRGB formats): the tensor carries both as
`_sj_tex_info`.  A sampler argument is bound as the values of slangpy.slang's `SamplerState` struct.
`_result=Texture` (or "texture") returns the call's result as a 1-D, 2-D or 3-D texture.
"""
from __future__ import annotations

from ..runtime.textures import Sampler, Texture, TextureType, TextureUsage, TextureView, format_for
from ..tensor import Tensor

TEXTURE_TYPES = (Texture, TextureView, Sampler)


def texture_tensor(v) -> Tensor:
    """The tensor (cached on the texture) over the mip level a texture or texture view binds."""
    tex, mip = (v.texture, v.mip) if isinstance(v, TextureView) else (v, 0)
    cache = tex.__dict__.setdefault("_sj_tensors", {})
    t = cache.get(mip)
    if t is None:
        dt = tex.scalar if tex.channels == 1 else f"{tex.scalar}{tex.channels}"
        t = Tensor(tex.storage, dtype=dt, shape=tex.mip_shape(mip), offset=tex.mip_offsets[mip])
        t._sj_tex_info = (tex.mip_count - mip, tex.fmt_code)
        cache[mip] = t
    return t


def _unwrap(a):
    if type(a) is Sampler:
        return a.fields()
    return texture_tensor(a)


def untexture(args: tuple, kwargs: dict):
    """`args` / `kwargs` with every texture (view) replaced by its bound tensor, every sampler by the values
    of its `SamplerState`."""
    args = tuple(_unwrap(a) if type(a) in TEXTURE_TYPES else a for a in args)
    if kwargs:
        kwargs = {k: _unwrap(a) if type(a) in TEXTURE_TYPES else a for k, a in kwargs.items()}
    return args, kwargs


def has_texture(args: tuple, kwargs: dict) -> bool:
    for a in args:
        if type(a) in TEXTURE_TYPES:
            return True
    return bool(kwargs) and any(type(a) in TEXTURE_TYPES for a in kwargs.values())


def wants_texture(r) -> bool:
    return r is Texture or (isinstance(r, str) and r == "texture")


def tensor_to_texture(t: Tensor) -> Texture:
    """A new texture holding the tensor's elements (1 to 3 dimensions, scalar or 2/4-vector texels)."""
    nd = len(t.shape)
    if not 1 <= nd <= 3:
        raise ValueError(f"_result=Texture: the call's result has {nd} dimensions; a texture has 1 to 3")
    el = t.dtype
    scalar = el.name if el.kind == "scalar" else (el.elem.name if el.kind == "vector" else None)
    channels = 1 if el.kind == "scalar" else (el.n if el.kind == "vector" else 0)
    if scalar is None:
        raise ValueError(f"_result=Texture: {el.name} is not a texel type (a scalar or a 2/4-vector)")
    fmt = format_for(scalar, channels)
    ttype = (TextureType.texture_1d, TextureType.texture_2d, TextureType.texture_3d)[nd - 1]
    ext = list(reversed(t.shape)) + [1, 1]
    tex = t.device.create_texture(type=ttype, format=fmt, width=ext[0], height=ext[1], depth=ext[2],
                                  usage=TextureUsage.shader_resource | TextureUsage.unordered_access)
    tex.copy_from_numpy(t.to_numpy())
    return tex
