"""Buffer-backed textures (SlangPy's `Device.create_texture`, `Texture`, `TextureDesc`, `Format` ...).

A texture is one dense buffer per mip level, its texels stored outermost dimension first:
[layer,] [depth,] [height,] width (a cube texture is 6 * array_length layers of 2-D faces).  There is no
filtering hardware behind it on any device: the functional API binds one mip level like a tensor (a texture
argument for a `float4` parameter vectorises over the texels; for a `Texture2D<float4>` parameter the kernel
reads the level through slangpy.slang's buffer-backed Texture2D).  Formats are the ones whose texel is a
plain Slang scalar or vector (no normalised or packed formats).
"""
from __future__ import annotations

from enum import IntEnum, IntFlag

import numpy as np

ALL_MIPS = 0
_RW_USAGE = 8 | 16          # BufferUsage.shader_resource | unordered_access (runtime/base.py)
# a texture without TextureUsage.unordered_access is read-only in calls (its buffers are shader_resource only)


class TextureType(IntEnum):
    texture_1d = 0
    texture_1d_array = 1
    texture_2d = 2
    texture_2d_array = 3
    texture_2d_ms = 4
    texture_2d_ms_array = 5
    texture_3d = 6
    texture_cube = 7
    texture_cube_array = 8


class TextureUsage(IntFlag):
    none = 0
    shader_resource = 1
    unordered_access = 2
    render_target = 4
    depth_stencil = 8
    present = 16
    copy_source = 32
    copy_destination = 64
    resolve_source = 128
    resolve_destination = 256
    typeless = 512
    shared = 1024


_SCALARS = (("float", "32_float", np.float32), ("half", "16_float", np.float16), ("uint", "32_uint", np.uint32),
            ("int", "32_sint", np.int32), ("uint16_t", "16_uint", np.uint16), ("int16_t", "16_sint", np.int16),
            ("uint8_t", "8_uint", np.uint8), ("int8_t", "8_sint", np.int8))
# format name -> (Slang scalar, channels, numpy dtype)
FORMAT_TEXELS = {}
for _s, _suffix, _np in _SCALARS:
    for _ch, _prefix in ((1, "r"), (2, "rg"), (4, "rgba")):
        FORMAT_TEXELS[_prefix + _suffix] = (_s, _ch, _np)
Format = IntEnum("Format", ["undefined"] + list(FORMAT_TEXELS), start=0)
Format.__doc__ = "Texel formats slangjit's buffer-backed textures support (a plain scalar or vector per texel)."


def format_for(scalar: str, channels: int) -> "Format":
    """The Format whose texel is `scalar` with `channels` channels (ValueError if none)."""
    for name, (s, ch, _) in FORMAT_TEXELS.items():
        if s == scalar and ch == channels:
            return Format[name]
    raise ValueError(f"No texture format has texels of {channels} x {scalar}")


class TextureDesc:
    """SlangPy's texture description (the fields `Device.create_texture` reads)."""

    def __init__(self, **kw):
        self.type = TextureType.texture_2d
        self.format = Format.undefined
        self.width = self.height = self.depth = 1
        self.array_length = 1
        self.mip_count = 1
        self.sample_count = 1
        self.usage = TextureUsage.shader_resource
        self.label = ""
        for k, v in kw.items():
            if not hasattr(self, k):
                raise TypeError(f"TextureDesc has no field '{k}'")
            setattr(self, k, v)


def _full_mips(*extent) -> int:
    n, m = 1, max(extent)
    while m > 1:
        m //= 2
        n += 1
    return n


class Texture:
    """A texture: `type`, `format`, `width`/`height`/`depth`, `array_length`, `mip_count`, one buffer per mip."""

    _sj_texture = True

    def __init__(self, device, desc: TextureDesc):
        self.device = device
        self.desc = desc
        t = TextureType(int(desc.type))
        if t in (TextureType.texture_2d_ms, TextureType.texture_2d_ms_array):
            raise ValueError("create_texture: multisampled textures are not supported (slangjit has no render "
                             "targets)")
        try:
            fmt = Format(int(desc.format)) if not isinstance(desc.format, str) else Format[desc.format]
        except (KeyError, ValueError):
            fmt = None
        if fmt is None or fmt == Format.undefined:
            raise ValueError(f"create_texture: format {desc.format!r} is not supported; supported: "
                             f"{', '.join(FORMAT_TEXELS)}")
        self.type, self.format = t, fmt
        self.scalar, self.channels, self.np_dtype = FORMAT_TEXELS[fmt.name]
        dims = {TextureType.texture_1d: 1, TextureType.texture_1d_array: 1, TextureType.texture_2d: 2,
                TextureType.texture_2d_array: 2, TextureType.texture_3d: 3, TextureType.texture_cube: 2,
                TextureType.texture_cube_array: 2}[t]
        self.width = int(desc.width)
        self.height = int(desc.height) if dims >= 2 else 1
        self.depth = int(desc.depth) if dims >= 3 else 1
        self.array_length = int(desc.array_length or 1)
        for nm in ("width", "height", "depth", "array_length"):
            if getattr(self, nm) < 1:
                raise ValueError(f"create_texture: {nm} must be >= 1 (got {getattr(self, nm)})")
        if t == TextureType.texture_3d and self.array_length > 1:
            raise ValueError("create_texture: 3-D textures cannot be arrays (array_length must be 1)")
        self.dims = dims
        extent = (self.width, self.height, self.depth)[:dims]
        full = _full_mips(*extent)
        mips = int(desc.mip_count)
        self.mip_count = full if mips == ALL_MIPS else min(mips, full)
        if mips < 0:
            raise ValueError(f"create_texture: mip_count must be >= 0 (got {mips})")
        self.usage = TextureUsage(int(desc.usage))
        self.layers = self.array_length * (6 if t in (TextureType.texture_cube, TextureType.texture_cube_array)
                                           else 1)
        self.is_layered = t in (TextureType.texture_1d_array, TextureType.texture_2d_array,
                                TextureType.texture_cube, TextureType.texture_cube_array)
        self.texel_size = np.dtype(self.np_dtype).itemsize * self.channels
        self._buffers = []
        for m in range(self.mip_count):
            n = int(np.prod(self.mip_extent(m))) * self.layers
            self._buffers.append(device.create_buffer(size=n * self.texel_size, struct_size=self.texel_size,
                                                      usage=_RW_USAGE if self.usage & TextureUsage.unordered_access else 8))

    def mip_extent(self, mip: int) -> tuple:
        """The texel shape of one layer of mip level `mip`, outermost first: ([depth,] [height,] width)."""
        ext = [max(1, v >> mip) for v in (self.width, self.height, self.depth)[:self.dims]]
        return tuple(reversed(ext))

    def mip_shape(self, mip: int) -> tuple:
        """The texel shape of mip level `mip` as bound in a call: ([layers,] [depth,] [height,] width)."""
        return ((self.layers,) if self.is_layered else ()) + self.mip_extent(mip)

    def _check(self, layer: int, mip: int):
        if not 0 <= mip < self.mip_count:
            raise ValueError(f"mip {mip} out of range (the texture has {self.mip_count} mip levels)")
        if not 0 <= layer < self.layers:
            raise ValueError(f"layer {layer} out of range (the texture has {self.layers} layers)")

    def _np_shape(self, mip: int) -> tuple:
        return self.mip_extent(mip) + ((self.channels,) if self.channels > 1 else ())

    def copy_from_numpy(self, data, layer: int = 0, mip: int = 0) -> None:
        self._check(layer, mip)
        a = np.asarray(data)
        want = self._np_shape(mip)
        shape = a.shape[:-1] if self.channels == 1 and a.ndim == len(want) + 1 and a.shape[-1] == 1 else a.shape
        if tuple(shape) != want:
            raise ValueError(f"copy_from_numpy: data of shape {a.shape} does not fit mip {mip} of the texture "
                             f"(expected {want}: [depth,] [height,] width[, channels])")
        raw = np.ascontiguousarray(a.astype(self.np_dtype, copy=False)).reshape(-1).view(np.uint8)
        self._buffers[mip].set_data(raw, layer * raw.size)

    def to_numpy(self, layer: int = 0, mip: int = 0) -> np.ndarray:
        self._check(layer, mip)
        n = int(np.prod(self.mip_extent(mip))) * self.texel_size
        raw = self._buffers[mip].to_numpy()[layer * n:(layer + 1) * n]
        return raw.view(self.np_dtype).reshape(self._np_shape(mip))

    def create_view(self, mip: int = 0, **kw) -> "TextureView":
        """A view of one mip level (SlangPy's `create_view(mip=...)`; other subresource ranges are not
        supported)."""
        for k, v in kw.items():
            if k in ("layer", "layer_count", "mip_count") and v in (None, 0, 1, -1) or k in ("format", "label"):
                continue
            raise ValueError(f"create_view: '{k}' is not supported (slangjit views select one mip level)")
        self._check(0, int(mip))
        return TextureView(self, int(mip))

    def __repr__(self) -> str:
        return (f"Texture(type={self.type.name}, format={self.format.name}, width={self.width}, "
                f"height={self.height}, depth={self.depth}, array_length={self.array_length}, "
                f"mip_count={self.mip_count})")


class TextureView:
    """One mip level of a texture, bound in a call in place of the texture's mip 0."""

    _sj_texture = True

    def __init__(self, texture: Texture, mip: int):
        self.texture, self.mip = texture, mip

    def __repr__(self) -> str:
        return f"TextureView({self.texture!r}, mip={self.mip})"


def make_texture(device, desc=None, **kw) -> Texture:
    """`Device.create_texture(desc)` or `create_texture(type=..., width=..., format=..., data=...)`."""
    data = kw.pop("data", None)
    if desc is None:
        desc = TextureDesc()
    elif not isinstance(desc, TextureDesc):
        d = TextureDesc()
        for k in vars(d):
            if hasattr(desc, k):
                setattr(d, k, getattr(desc, k))
        desc = d
    for k, v in kw.items():
        if not hasattr(desc, k):
            raise TypeError(f"create_texture() got an unexpected keyword argument '{k}'")
        setattr(desc, k, v)
    tex = Texture(device, desc)
    if data is not None:
        tex.copy_from_numpy(data)
    return tex
