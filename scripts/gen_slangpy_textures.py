"""Writes slangjit/compiler/slang/slangpy_textures.slang (the texture structs of slangpy.slang: twelve
near-identical Texture*/RWTexture* structs).  Run it after editing either part:

    python scripts/gen_slangpy_textures.py
"""
import os

HEADER = r"""// ---- textures (SlangPy's Texture1D/2D/3D, their arrays, TextureCube, RW variants) and samplers
//
// slangjit's textures are buffer-backed: a texture is one dense buffer holding its mip levels in turn, each
// level's texels outermost dimension first ([layer,] [depth,] [height,] width).  A call binds one level
// like a tensor (`_data`, `_shape`, `_strides`, `_offset`: the texture's mip 0 or a view's `mip`) and says
// how many levels follow it (`_mips`, counting the bound one) and how stores round (`_fmt`, the texture's
// format: 0 plain, 1 unorm8, 2 snorm8, 3 unorm16, 4 snorm16, 5 sRGB8; normalised and sRGB texels are
// stored as the float values a shader reads).  Coordinates are vectors with .x = width (the innermost
// dimension) and, for arrays and cube faces, the layer after the texel coordinates, then the mip level for
// `Load`, as in Slang.  Reads outside the texture give 0 and writes outside it are dropped.
//
// Sampling (`Sample`, `SampleLevel`, `SampleBias`, `SampleGrad`, `Gather`) is implemented here with a
// `SamplerState` (`Device.create_sampler`): point / linear filters for magnification, minification and
// between mip levels, the five addressing modes, LOD bias and clamps, border colour.  Weights are exact
// (hardware uses 8-bit fractions); `Sample` in a compute kernel samples at LOD 0 plus the bias, as Slang's
// CUDA target does; cube textures are sampled per face with clamped edges (no filtering across faces).

// A `SamplerState` declared without a value samples as `create_sampler()`'s default sampler does.
public struct SamplerState
{
    public int _min_filter = 1;   // TextureFilteringMode: 0 point, 1 linear
    public int _mag_filter = 1;
    public int _mip_filter = 1;
    public int _address_u = 0;    // TextureAddressingMode: 0 wrap, 1 clamp_to_edge, 2 clamp_to_border,
    public int _address_v = 0;    //                        3 mirror_repeat, 4 mirror_once
    public int _address_w = 0;
    public float _mip_lod_bias = 0.0;
    public float _min_lod = -1000.0;
    public float _max_lod = 1000.0;
    public float4 _border = float4(1.0, 1.0, 1.0, 1.0);
}

// The texel index `i` maps to under addressing `mode` in a dimension of `n` texels; -1: the border colour.
public int _sj_tex_addr(int i, int n, int mode)
{
    if (mode == 0) { int m = i % n; return m < 0 ? m + n : m; }
    if (mode == 1) return clamp(i, 0, n - 1);
    if (mode == 2) return (i < 0 || i >= n) ? -1 : i;
    if (mode == 3) { int p = 2 * n; int m = i % p; if (m < 0) m += p; return m < n ? m : p - 1 - m; }
    int a = i < 0 ? -i - 1 : i;
    return min(a, n - 1);
}

public void _sj_tex_border(float4 c, out float r) { r = c.x; }
public void _sj_tex_border(float4 c, out float2 r) { r = c.xy; }
public void _sj_tex_border(float4 c, out float3 r) { r = c.xyz; }
public void _sj_tex_border(float4 c, out float4 r) { r = c; }
public void _sj_tex_border(float4 c, out half r) { r = half(c.x); }
public void _sj_tex_border(float4 c, out half2 r) { r = half2(c.xy); }
public void _sj_tex_border(float4 c, out half4 r) { r = half4(c); }
public void _sj_tex_border<T>(float4 c, out T r) { T z; r = z; }

// Sampling filters float texels only (as in Slang): `Sample*` of an integer texture is a compile error.
public void _sj_sampling_needs_a_float_texel_type<T>(T v) {}
""" + "".join(f"public void _sj_sampling_needs_a_float_texel_type({t}{n} v) {{ static_assert(false, \"Sample/SampleLevel/"
              f"SampleGrad/Gather filter float textures only, as in Slang (this texture's texel type is {t}{n})\"); }}\n"
              for t in ("int", "uint", "int16_t", "uint16_t", "int8_t", "uint8_t") for n in ("", "2", "3", "4")) + r"""

public float _sj_tex_red(float v) { return v; }
public float _sj_tex_red(float2 v) { return v.x; }
public float _sj_tex_red(float3 v) { return v.x; }
public float _sj_tex_red(float4 v) { return v.x; }
public float _sj_tex_red(half v) { return float(v); }
public float _sj_tex_red(half2 v) { return float(v.x); }
public float _sj_tex_red(half4 v) { return float(v.x); }

// A value rounded as a store to a texture of format code `fmt` rounds it (see the top of this section).
// Loads round too (a no-op for what a store wrote): values written through a texture bound as a plain
// container of texels are not rounded when written.
public float _sj_tex_q1(float v, int fmt)
{
    if (fmt == 1 || fmt == 5) return round(clamp(v, 0.0, 1.0) * 255.0) / 255.0;
    if (fmt == 2) return round(clamp(v, -1.0, 1.0) * 127.0) / 127.0;
    if (fmt == 3) return round(clamp(v, 0.0, 1.0) * 65535.0) / 65535.0;
    if (fmt == 4) return round(clamp(v, -1.0, 1.0) * 32767.0) / 32767.0;
    return v;
}
public float _sj_tex_srgb_q(float v)
{
    float c = clamp(v, 0.0, 1.0);
    float s = c <= 0.0031308 ? c * 12.92 : 1.055 * pow(c, 1.0 / 2.4) - 0.055;
    s = round(clamp(s, 0.0, 1.0) * 255.0) / 255.0;
    return s <= 0.04045 ? s / 12.92 : pow((s + 0.055) / 1.055, 2.4);
}
public float _sj_tex_quant(float v, int fmt) { return fmt == 5 ? _sj_tex_srgb_q(v) : _sj_tex_q1(v, fmt); }
public float2 _sj_tex_quant(float2 v, int fmt) { return float2(_sj_tex_quant(v.x, fmt), _sj_tex_quant(v.y, fmt)); }
public float4 _sj_tex_quant(float4 v, int fmt)
{
    if (fmt == 0) return v;
    return float4(_sj_tex_quant(v.x, fmt), _sj_tex_quant(v.y, fmt), _sj_tex_quant(v.z, fmt), _sj_tex_q1(v.w, fmt));
}
public T _sj_tex_quant<T>(T v, int fmt) { return v; }

// One texture as the sampling code sees it: level 0 (the bound level) at `off0` with strides
// (layer, z, y, x); the levels after it packed densely after one another, all layers of a level together.
public struct _SjTexView<T>
{
    public T* data;
    public int off0;
    public int s_layer;
    public int s_z;
    public int s_y;
    public int s_x;
    public uint w;
    public uint h;
    public uint d;
    public uint layers;
    public int mips;
    public int fmt;         // the texture's format code: loads round as the format does
    public int dims;        // 1, 2 or 3: the filtered dimensions

    public uint ext_w(int L) { return max(1u, w >> uint(L)); }
    public uint ext_h(int L) { return max(1u, h >> uint(L)); }
    public uint ext_d(int L) { return max(1u, d >> uint(L)); }

    // the offset of texel (x, y, z) of `layer` in level L (all in range)
    public int at(int L, int layer, int x, int y, int z)
    {
        if (L == 0) return off0 + layer * s_layer + z * s_z + y * s_y + x * s_x;
        int o = off0 + int(layers * w * h * d);
        for (int j = 1; j < L; j++) o += int(layers * ext_w(j) * ext_h(j) * ext_d(j));
        return o + ((layer * int(ext_d(L)) + z) * int(ext_h(L)) + y) * int(ext_w(L)) + x;
    }

    // Load: texel (x, y, z) of `layer` in level L, 0 outside the texture
    public T load(int L, int layer, int x, int y, int z)
    {
        if (L < 0 || L >= mips || uint(layer) >= layers || uint(x) >= ext_w(L) || uint(y) >= ext_h(L) ||
            uint(z) >= ext_d(L)) { T zero; return zero; }
        return _sj_tex_quant(data[at(L, layer, x, y, z)], fmt);
    }

    public T fetch(int L, int layer, int x, int y, int z, SamplerState s)
    {
        int xi = _sj_tex_addr(x, int(ext_w(L)), s._address_u);
        int yi = _sj_tex_addr(y, int(ext_h(L)), s._address_v);
        int zi = _sj_tex_addr(z, int(ext_d(L)), s._address_w);
        if (xi < 0 || yi < 0 || zi < 0) { T b; _sj_tex_border(s._border, b); return b; }
        return _sj_tex_quant(data[at(L, layer, xi, yi, zi)], fmt);
    }

    public T level(int L, int layer, float3 uvw, int filter, SamplerState s)
    {
        float3 t = uvw * float3(float(ext_w(L)), float(ext_h(L)), float(ext_d(L)));
        if (filter == 0)
            return fetch(L, layer, int(floor(t.x)), dims > 1 ? int(floor(t.y)) : 0, dims > 2 ? int(floor(t.z)) : 0, s);
        t = t - 0.5;
        float3 b = floor(t);
        float3 f = t - b;
        int x0 = int(b.x);
        int y0 = dims > 1 ? int(b.y) : 0;
        int z0 = dims > 2 ? int(b.z) : 0;
        T r = fetch(L, layer, x0, y0, z0, s) * (1.0 - f.x) + fetch(L, layer, x0 + 1, y0, z0, s) * f.x;
        if (dims == 1) return r;
        T r1 = fetch(L, layer, x0, y0 + 1, z0, s) * (1.0 - f.x) + fetch(L, layer, x0 + 1, y0 + 1, z0, s) * f.x;
        r = r * (1.0 - f.y) + r1 * f.y;
        if (dims == 2) return r;
        T q0 = fetch(L, layer, x0, y0, z0 + 1, s) * (1.0 - f.x) + fetch(L, layer, x0 + 1, y0, z0 + 1, s) * f.x;
        T q1 = fetch(L, layer, x0, y0 + 1, z0 + 1, s) * (1.0 - f.x) + fetch(L, layer, x0 + 1, y0 + 1, z0 + 1, s) * f.x;
        return r * (1.0 - f.z) + (q0 * (1.0 - f.y) + q1 * f.y) * f.z;
    }

    public int layer_of(float l) { return clamp(int(floor(l + 0.5)), 0, int(layers) - 1); }

    public T sample(int layer, float3 uvw, float lod, SamplerState s)
    {
        T probe;
        _sj_sampling_needs_a_float_texel_type(probe);
        float l = clamp(lod + s._mip_lod_bias, s._min_lod, s._max_lod);
        int filter = l <= 0.0 ? s._mag_filter : s._min_filter;
        l = clamp(l, 0.0, float(mips - 1));
        if (s._mip_filter == 0) return level(int(floor(l + 0.5)), layer, uvw, filter, s);
        int l0 = int(floor(l));
        float f = l - float(l0);
        T a = level(l0, layer, uvw, filter, s);
        if (f == 0.0) return a;
        return a * (1.0 - f) + level(min(l0 + 1, mips - 1), layer, uvw, filter, s) * f;
    }

    public float lod_of(float3 ddx, float3 ddy)
    {
        float3 size = float3(float(w), float(h), float(d));
        float3 mask = float3(1.0, dims > 1 ? 1.0 : 0.0, dims > 2 ? 1.0 : 0.0);
        float a = length(ddx * size * mask);
        float b = length(ddy * size * mask);
        return log2(max(max(a, b), 1e-30));
    }

    // Gather: the red channels of the 2x2 texels bilinear filtering of level 0 would read, in Slang's order
    // (x0, y1), (x1, y1), (x1, y0), (x0, y0)
    public float4 gather(int layer, float2 uv, SamplerState s)
    {
        float2 t = uv * float2(float(w), float(h)) - 0.5;
        int x0 = int(floor(t.x));
        int y0 = int(floor(t.y));
        return float4(_sj_tex_red(fetch(0, layer, x0, y0 + 1, 0, s)), _sj_tex_red(fetch(0, layer, x0 + 1, y0 + 1, 0, s)),
                      _sj_tex_red(fetch(0, layer, x0 + 1, y0, 0, s)), _sj_tex_red(fetch(0, layer, x0, y0, 0, s)));
    }
}

// A cube direction as (u, v, face): faces +X, -X, +Y, -Y, +Z, -Z.
public float3 _sj_cube_uvf(float3 dir)
{
    float3 a = abs(dir);
    float sc, tc, ma, face;
    if (a.x >= a.y && a.x >= a.z) { ma = a.x; face = dir.x >= 0.0 ? 0.0 : 1.0; sc = dir.x >= 0.0 ? -dir.z : dir.z; tc = -dir.y; }
    else if (a.y >= a.z) { ma = a.y; face = dir.y >= 0.0 ? 2.0 : 3.0; sc = dir.x; tc = dir.y >= 0.0 ? dir.z : -dir.z; }
    else { ma = a.z; face = dir.z >= 0.0 ? 4.0 : 5.0; sc = dir.z >= 0.0 ? dir.x : -dir.x; tc = -dir.y; }
    ma = max(ma, 1e-30);
    return float3((sc / ma + 1.0) * 0.5, (tc / ma + 1.0) * 0.5, face);
}

public SamplerState _sj_cube_sampler(SamplerState s)
{
    SamplerState c = s;
    c._address_u = 1;
    c._address_v = 1;
    c._address_w = 1;
    return c;
}
"""

KINDS = [  # name, N, dims, layered, coord comps (for Load without mip), view mapping
    ("Texture1D", 1, 1, False), ("Texture2D", 2, 2, False), ("Texture3D", 3, 3, False),
    ("Texture1DArray", 2, 1, True), ("Texture2DArray", 3, 2, True), ("TextureCube", 3, 2, True)]
out = []
def L(s=""): out.append(s)

def view(name, N, dims, layered):
    # shape index (outermost first): [layer], [d], [h], w
    names = (["layer"] if layered else []) + ["z", "y", "x"][3 - (N - (1 if layered else 0)):]
    m = {n: i for i, n in enumerate(names)}
    L("    public _SjTexView<T> _v()")
    L("    {")
    L("        _SjTexView<T> v;")
    L("        v.data = _data; v.off0 = _offset; v.mips = _mips; v.fmt = _fmt; v.dims = %d;" % dims)
    for comp, ext in (("layer", "layers"), ("z", "d"), ("y", "h"), ("x", "w")):
        if comp in m:
            L(f"        v.s_{comp} = _strides[{m[comp]}]; v.{ext} = _shape[{m[comp]}];")
        else:
            L(f"        v.s_{comp} = 0; v.{ext} = 1u;")
    L("        return v;")
    L("    }")

def common(name, N, rw):
    L(f"public struct {name}<T>")
    L("{")
    L("    public T* _data;")
    L(f"    public uint _shape[{N}];")
    L(f"    public int _strides[{N}];")
    L("    public int _offset;")
    L("    public int _mips;")
    L("    public int _fmt;")
    L(f"    public int _index(int idx[{N}]) {{ int o = _offset; for (int i = 0; i < {N}; i++) o += idx[i] * _strides[i]; return o; }}")
    L(f"    public bool _sj_in(int idx[{N}]) {{ for (int i = 0; i < {N}; i++) if (uint(idx[i]) >= _shape[i]) return false; return true; }}")
    L(f"    public T _sj_load(int idx[{N}]) {{ if (!_sj_in(idx)) {{ T z; return z; }} return _sj_tex_quant(_data[_index(idx)], _fmt); }}")
    if rw:
        L(f"    public void _sj_store(int idx[{N}], T v) {{ if (_sj_in(idx)) _data[_index(idx)] = _sj_tex_quant(v, _fmt); }}")

def access(name, N, rw):
    if N == 1:
        L("    public T Load(int p) { int idx[1]; idx[0] = p; return _sj_load(idx); }")
        if rw:
            L("    public void Store(int p, T v) { int idx[1]; idx[0] = p; _sj_store(idx, v); }")
            L("    public __subscript(int p) -> T { get { return Load(p); } set { Store(p, newValue); } }")
            L("    public __subscript(uint p) -> T { get { return Load(int(p)); } set { Store(int(p), newValue); } }")
            L("    public __subscript(vector<int, 1> p) -> T { get { return Load(p.x); } set { Store(p.x, newValue); } }")
        else:
            L("    public __subscript(int p) -> T { get { return Load(p); } }")
            L("    public __subscript(uint p) -> T { get { return Load(int(p)); } }")
            L("    public __subscript(vector<int, 1> p) -> T { get { return Load(p.x); } }")
    else:
        L(f"    public T Load(vector<int, {N}> p) {{ return _sj_load(_sj_rev<{N}>(p)); }}")
        if rw:
            L(f"    public void Store(vector<int, {N}> p, T v) {{ _sj_store(_sj_rev<{N}>(p), v); }}")
            L(f"    public __subscript(vector<int, {N}> p) -> T {{ get {{ return Load(p); }} set {{ Store(p, newValue); }} }}")
            L(f"    public __subscript(vector<uint, {N}> p) -> T {{ get {{ return Load(vector<int, {N}>(p)); }} set {{ Store(vector<int, {N}>(p), newValue); }} }}")
        else:
            L(f"    public __subscript(vector<int, {N}> p) -> T {{ get {{ return Load(p); }} }}")
            L(f"    public __subscript(vector<uint, {N}> p) -> T {{ get {{ return Load(vector<int, {N}>(p)); }} }}")

DIMS = {"Texture1D": ("out uint width", "width = _shape[0];", ["width"]),
        "Texture2D": ("out uint width, out uint height", "width = _shape[1]; height = _shape[0];", ["width", "height"]),
        "Texture3D": ("out uint width, out uint height, out uint depth",
                      "width = _shape[2]; height = _shape[1]; depth = _shape[0];", ["width", "height", "depth"]),
        "Texture1DArray": ("out uint width, out uint elements", "width = _shape[1]; elements = _shape[0];", ["width"]),
        "Texture2DArray": ("out uint width, out uint height, out uint elements",
                           "width = _shape[2]; height = _shape[1]; elements = _shape[0];", ["width", "height"]),
        "TextureCube": ("out uint width, out uint height", "width = _shape[2]; height = _shape[1];", ["width", "height"])}

MIPLOAD = {"Texture1D": ("int2", "p.y, 0, p.x, 0, 0"), "Texture2D": ("int3", "p.z, 0, p.x, p.y, 0"),
           "Texture3D": ("int4", "p.w, 0, p.x, p.y, p.z"), "Texture1DArray": ("int3", "p.z, p.y, p.x, 0, 0"),
           "Texture2DArray": ("int4", "p.w, p.z, p.x, p.y, 0"), "TextureCube": ("int4", "p.w, p.z, p.x, p.y, 0")}

# name -> (coordinate type, layer expr, uvw expr, derivative type, ddx->float3)
SAMPLE = {"Texture1D": ("float", "0", "float3(c, 0.0, 0.0)", "float", "float3({0}, 0.0, 0.0)"),
          "Texture2D": ("float2", "0", "float3(c, 0.0)", "float2", "float3({0}, 0.0)"),
          "Texture3D": ("float3", "0", "c", "float3", "{0}"),
          "Texture1DArray": ("float2", "v.layer_of(c.y)", "float3(c.x, 0.0, 0.0)", "float", "float3({0}, 0.0, 0.0)"),
          "Texture2DArray": ("float3", "v.layer_of(c.z)", "float3(c.xy, 0.0)", "float2", "float3({0}, 0.0)")}

for name, N, dims, layered in KINDS:
    for rw in (False, True):
        nm = ("RW" if rw else "") + name
        common(nm, N, rw)
        if name == "TextureCube":
            # texel access as a 2-D array of faces: (x, y, face)
            L("    public T Load(vector<int, 3> p) { return _sj_load(_sj_rev<3>(p)); }")
            if rw:
                L("    public void Store(vector<int, 3> p, T v) { _sj_store(_sj_rev<3>(p), v); }")
                L("    public __subscript(vector<int, 3> p) -> T { get { return Load(p); } set { Store(p, newValue); } }")
                L("    public __subscript(vector<uint, 3> p) -> T { get { return Load(vector<int, 3>(p)); } set { Store(vector<int, 3>(p), newValue); } }")
            else:
                L("    public __subscript(vector<int, 3> p) -> T { get { return Load(p); } }")
                L("    public __subscript(vector<uint, 3> p) -> T { get { return Load(vector<int, 3>(p)); } }")
        else:
            access(nm, N, rw)
        sig, body, exts = DIMS[name]
        L(f"    public void GetDimensions({sig}) {{ {body} }}")
        view(nm, N, dims, layered)
        if not rw:
            ct, args = MIPLOAD[name]
            L(f"    public T Load({ct} p) {{ return _v().load({args}); }}")
            # GetDimensions(mip, ..., out levels)
            outs = ", ".join(f"out uint {e}" for e in exts)
            extra = ", out uint elements" if name in ("Texture1DArray", "Texture2DArray") else ""
            sets = " ".join(f"{e} = max(1u, {e} >> mip);" for e in exts)
            call_args = ", ".join(exts + (["elements"] if extra else []))
            L(f"    public void GetDimensions(uint mip, {outs}{extra}, out uint levels) {{ GetDimensions({call_args}); {sets} levels = uint(_mips); }}")
            if name == "TextureCube":
                L("    public T SampleLevel(SamplerState s, float3 dir, float lod) { float3 f = _sj_cube_uvf(dir); _SjTexView<T> v = _v(); return v.sample(int(f.z), float3(f.xy, 0.0), lod, _sj_cube_sampler(s)); }")
                L("    public T Sample(SamplerState s, float3 dir) { return SampleLevel(s, dir, 0.0); }")
                L("    public T SampleBias(SamplerState s, float3 dir, float bias) { return SampleLevel(s, dir, bias); }")
            else:
                ct, lay, uvw, dt, d3 = SAMPLE[name]
                L(f"    public T SampleLevel(SamplerState s, {ct} c, float lod) {{ _SjTexView<T> v = _v(); return v.sample({lay}, {uvw}, lod, s); }}")
                L(f"    public T Sample(SamplerState s, {ct} c) {{ return SampleLevel(s, c, 0.0); }}")
                L(f"    public T SampleBias(SamplerState s, {ct} c, float bias) {{ return SampleLevel(s, c, bias); }}")
                L(f"    public T SampleGrad(SamplerState s, {ct} c, {dt} ddx, {dt} ddy) {{ _SjTexView<T> v = _v(); return v.sample({lay}, {uvw}, v.lod_of({d3.format('ddx')}, {d3.format('ddy')}), s); }}")
                if name == "Texture2D":
                    L("    public float4 Gather(SamplerState s, float2 c) { _SjTexView<T> v = _v(); return v.gather(0, c, s); }")
                if name == "Texture2DArray":
                    L("    public float4 Gather(SamplerState s, float3 c) { _SjTexView<T> v = _v(); return v.gather(v.layer_of(c.z), c.xy, s); }")
        L("}")



if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "slangjit", "compiler", "slang", "slangpy_textures.slang")
    with open(path, "w", encoding="utf-8") as f:
        f.write("// Generated by scripts/gen_slangpy_textures.py: edit that, then run it.\n" + HEADER + "\n" +
                "\n".join(out) + "\n")
