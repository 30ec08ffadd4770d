"""Buffer-backed textures and samplers (SlangPy's `Device.create_texture`, `Texture`, `TextureDesc`, `Format`,
`Device.create_sampler`, `Sampler`, `SamplerDesc` ...).

A texture is one dense buffer holding every mip level in turn, each level's texels stored outermost dimension
first: [layer,] [depth,] [height,] width (a cube texture is 6 * array_length layers of 2-D faces).  There is no
filtering hardware behind it on any device: the functional API binds the texture like a tensor of one mip
level (a texture argument for a `float4` parameter vectorises over the texels; for a `Texture2D<float4>`
parameter the kernel reads the texture through slangpy.slang's buffer-backed Texture2D, which reaches every
mip level from the bound one down and implements `Sample*` / `Gather` with a `SamplerState` in Slang).
Normalised (`unorm` / `snorm`) and sRGB formats are stored as float texels holding the values a shader reads
(`rgba8_unorm` texel 255 is 1.0, sRGB texels are decoded to linear); `copy_from_numpy` / `to_numpy` take and give
the stored integers, converted as the format defines, and a kernel's store rounds to the format's precision.
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
# Normalised / sRGB formats: stored as float texels (what a shader reads); name -> (code, numpy dtype of the
# stored integers, channel order of the stored integers).  The code is the texture struct's `_fmt`
# (slangpy.slang `_sj_tex_quant`): 1 unorm8, 2 snorm8, 3 unorm16, 4 snorm16, 5 sRGB8 (alpha linear).
FORMAT_NORM = {}
for _code, _suffix, _np in ((1, "8_unorm", np.uint8), (2, "8_snorm", np.int8), (3, "16_unorm", np.uint16),
                            (4, "16_snorm", np.int16)):
    for _ch, _prefix in ((1, "r"), (2, "rg"), (4, "rgba")):
        FORMAT_NORM[_prefix + _suffix] = (_code, _np, None)
FORMAT_NORM["rgba8_unorm_srgb"] = (5, np.uint8, None)
FORMAT_NORM["bgra8_unorm"] = (1, np.uint8, (2, 1, 0, 3))
FORMAT_NORM["bgra8_unorm_srgb"] = (5, np.uint8, (2, 1, 0, 3))
for _n in FORMAT_NORM:
    FORMAT_TEXELS[_n] = ("float", 4 if _n.startswith(("rgba", "bgra")) else (2 if _n.startswith("rg") else 1),
                         np.float32)
Format = IntEnum("Format", ["undefined"] + list(FORMAT_TEXELS), start=0)
Format.__doc__ = ("Texel formats slangjit's buffer-backed textures support: a plain scalar or vector per texel, "
                  "or a normalised / sRGB format (8 or 16 bits a channel).")


def _srgb_to_linear(c):
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(c):
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(np.maximum(c, 0.0031308), 1.0 / 2.4) - 0.055)


def decode_texels(fmt_name: str, raw: np.ndarray) -> np.ndarray:
    """The float values a shader reads from stored integers `raw` of a normalised / sRGB format."""
    code, npt, order = FORMAT_NORM[fmt_name]
    if order is not None:
        raw = raw[..., list(order)]
    x = raw.astype(np.float64)
    if code in (1, 3, 5):
        x = x / float(np.iinfo(npt).max)
    else:
        x = np.maximum(x / float(np.iinfo(npt).max), -1.0)
    if code == 5:
        x = x.copy()
        x[..., :3] = _srgb_to_linear(x[..., :3])
    return x.astype(np.float32)


def encode_texels(fmt_name: str, vals: np.ndarray) -> np.ndarray:
    """The stored integers of a normalised / sRGB format for shader values `vals` (rounded to nearest)."""
    code, npt, order = FORMAT_NORM[fmt_name]
    x = np.asarray(vals, dtype=np.float64)
    if code == 5:
        x = x.copy()
        x[..., :3] = _linear_to_srgb(np.clip(x[..., :3], 0.0, 1.0))
    mx = float(np.iinfo(npt).max)
    x = np.clip(x, 0.0, 1.0) if code in (1, 3, 5) else np.clip(x, -1.0, 1.0)
    out = np.rint(x * mx).astype(npt)
    if order is not None:
        inv = [list(order).index(i) for i in range(len(order))]
        out = out[..., inv]
    return out


def format_for(scalar: str, channels: int) -> "Format":
    """The Format whose texel is `scalar` with `channels` channels (ValueError if none)."""
    for name, (s, ch, _) in FORMAT_TEXELS.items():
        if s == scalar and ch == channels and name not in FORMAT_NORM:
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
        norm = FORMAT_NORM.get(fmt.name)
        self.fmt_code = norm[0] if norm else 0          # slangpy.slang's `_fmt`: how a store rounds
        self.raw_dtype = norm[1] if norm else self.np_dtype     # what copy_from_numpy / to_numpy exchange
        # every mip level in one buffer, level after level: `mip_offsets[m]` texels from the start
        self.mip_offsets, total = [], 0
        for m in range(self.mip_count):
            self.mip_offsets.append(total)
            total += int(np.prod(self.mip_extent(m))) * self.layers
        self.storage = device.create_buffer(size=total * self.texel_size, struct_size=self.texel_size,
                                            usage=_RW_USAGE if self.usage & TextureUsage.unordered_access else 8)

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
        if self.fmt_code:
            if a.dtype.kind not in "iu":
                raise TypeError(f"copy_from_numpy: format {self.format.name} takes its stored integers "
                                f"({np.dtype(self.raw_dtype).name} data), got {a.dtype.name}")
            a = decode_texels(self.format.name, a.reshape(want if self.channels > 1 else want + (1,))
                              .astype(self.raw_dtype)).reshape(a.shape)
        raw = np.ascontiguousarray(a.astype(self.np_dtype, copy=False)).reshape(-1).view(np.uint8)
        self.storage.set_data(raw, (self.mip_offsets[mip] * self.texel_size) + layer * raw.size)

    def to_numpy(self, layer: int = 0, mip: int = 0) -> np.ndarray:
        self._check(layer, mip)
        n = int(np.prod(self.mip_extent(mip))) * self.texel_size
        start = self.mip_offsets[mip] * self.texel_size + layer * n
        vals = self.storage.to_numpy()[start:start + n].view(self.np_dtype).reshape(self._np_shape(mip))
        if self.fmt_code:
            return encode_texels(self.format.name, vals.reshape(vals.shape[:len(self.mip_extent(mip))] + (-1,))
                                 ).reshape(vals.shape)
        return vals

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


def _desc(cls, desc, kw: dict, what: str):
    """A `cls` descriptor from `desc` (None, a `cls`, or any object with some of its attributes) and keyword
    overrides; an unknown keyword is a TypeError naming `what`."""
    if desc is None:
        desc = cls()
    elif not isinstance(desc, cls):
        d = cls()
        for k in vars(d):
            if hasattr(desc, k):
                setattr(d, k, getattr(desc, k))
        desc = d
    for k, v in kw.items():
        if not hasattr(desc, k):
            raise TypeError(f"{what}() got an unexpected keyword argument '{k}'")
        setattr(desc, k, v)
    return desc


def make_texture(device, desc=None, **kw) -> Texture:
    """`Device.create_texture(desc)` or `create_texture(type=..., width=..., format=..., data=...)`."""
    data = kw.pop("data", None)
    tex = Texture(device, _desc(TextureDesc, desc, kw, "create_texture"))
    if data is not None:
        tex.copy_from_numpy(data)
    return tex


# ---- samplers (SlangPy's `Device.create_sampler`, `SamplerDesc`, `Sampler`)

class TextureFilteringMode(IntEnum):
    point = 0
    linear = 1


class TextureAddressingMode(IntEnum):
    wrap = 0
    clamp_to_edge = 1
    clamp_to_border = 2
    mirror_repeat = 3
    mirror_once = 4


class TextureReductionOp(IntEnum):
    average = 0
    comparison = 1
    minimum = 2
    maximum = 3


class ComparisonFunc(IntEnum):
    never = 0
    less = 1
    equal = 2
    less_equal = 3
    greater = 4
    not_equal = 5
    greater_equal = 6
    always = 7


class SamplerDesc:
    """SlangPy's sampler description: filters (`min_filter`, `mag_filter`, `mip_filter`), addressing modes
    (`address_u/v/w`), `mip_lod_bias`, `min_lod` / `max_lod`, `border_color`; `reduction_op`,
    `comparison_func` and `max_anisotropy` are accepted but only `average` / `never` / 1 are implemented."""

    def __init__(self, **kw):
        self.min_filter = self.mag_filter = self.mip_filter = TextureFilteringMode.linear
        self.reduction_op = TextureReductionOp.average
        self.address_u = self.address_v = self.address_w = TextureAddressingMode.wrap
        self.mip_lod_bias = 0.0
        self.max_anisotropy = 1
        self.comparison_func = ComparisonFunc.never
        self.border_color = (1.0, 1.0, 1.0, 1.0)
        self.min_lod = -1000.0
        self.max_lod = 1000.0
        self.label = ""
        for k, v in kw.items():
            if not hasattr(self, k):
                raise TypeError(f"SamplerDesc has no field '{k}'")
            setattr(self, k, v)


def _enum_field(cls, name: str, v):
    try:
        return cls[v] if isinstance(v, str) else cls(int(v))
    except (KeyError, ValueError, TypeError):
        raise ValueError(f"create_sampler: {name} must be a {cls.__name__} ({', '.join(cls.__members__)}), "
                         f"got {v!r}") from None


class Sampler:
    """A sampler: the filtering and addressing a `SamplerState` parameter samples textures with."""

    _sj_sampler = True

    def __init__(self, device, desc: SamplerDesc):
        self.device = device
        self.desc = desc
        for nm in ("min_filter", "mag_filter", "mip_filter"):
            setattr(self, nm, _enum_field(TextureFilteringMode, nm, getattr(desc, nm)))
        for nm in ("address_u", "address_v", "address_w"):
            setattr(self, nm, _enum_field(TextureAddressingMode, nm, getattr(desc, nm)))
        self.reduction_op = _enum_field(TextureReductionOp, "reduction_op", desc.reduction_op)
        self.comparison_func = _enum_field(ComparisonFunc, "comparison_func", desc.comparison_func)
        if self.reduction_op != TextureReductionOp.average:
            raise ValueError(f"create_sampler: reduction_op {self.reduction_op.name} is not supported "
                             f"(slangjit's samplers filter by averaging)")
        if int(desc.max_anisotropy) > 1:
            raise ValueError("create_sampler: anisotropic filtering (max_anisotropy > 1) is not supported")
        bc = tuple(float(x) for x in desc.border_color)
        if len(bc) != 4:
            raise ValueError(f"create_sampler: border_color must have 4 components, got {len(bc)}")
        self.border_color = bc
        self.mip_lod_bias, self.min_lod, self.max_lod = (float(desc.mip_lod_bias), float(desc.min_lod),
                                                         float(desc.max_lod))
        for nm in ("mip_lod_bias", "min_lod", "max_lod"):
            if not np.isfinite(getattr(self, nm)):
                raise ValueError(f"create_sampler: {nm} must be finite (got {getattr(self, nm)})")

    def fields(self) -> dict:
        """The values of slangpy.slang's `SamplerState` struct this sampler binds as."""
        return {"_min_filter": int(self.min_filter), "_mag_filter": int(self.mag_filter),
                "_mip_filter": int(self.mip_filter), "_address_u": int(self.address_u),
                "_address_v": int(self.address_v), "_address_w": int(self.address_w),
                "_mip_lod_bias": self.mip_lod_bias, "_min_lod": self.min_lod, "_max_lod": self.max_lod,
                "_border": self.border_color}

    def __repr__(self) -> str:
        return (f"Sampler(min_filter={self.min_filter.name}, mag_filter={self.mag_filter.name}, "
                f"mip_filter={self.mip_filter.name}, address=({self.address_u.name}, {self.address_v.name}, "
                f"{self.address_w.name}))")


def make_sampler(device, desc=None, **kw) -> Sampler:
    """`Device.create_sampler(desc)` or `create_sampler(min_filter=..., address_u=..., ...)`."""
    return Sampler(device, _desc(SamplerDesc, desc, kw, "create_sampler"))
