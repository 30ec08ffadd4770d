"""The kernels of texture calls (slangpy.slang's buffer-backed Texture*/RWTexture* and textures vectorised as
containers), in their GPU form, compile to PTX with NVRTC (no GPU needed).  The calls themselves run on a GPU
in test_slangpy_textures.py with the "cuda" device."""
import numpy as np
import pytest

import slangjit as spy
from slangjit import Format, TextureType
from slangjit.compiler import SourceSpec, compile_program

from cuda_kernels import nvrtc_ptx

SRC = r"""
import "slangpy";
void copy_value(float4 value, out float4 dest) { dest = value; }
void copy_pixel_texture_1d(int1 position, Texture1D<float4> src, RWTexture1D<float4> dst)
{ dst[position] = src[position]; }
void copy_pixel_texture_2d_array(int3 position, Texture2DArray<float4> src, RWTexture2DArray<float4> dst)
{ dst[position.yzx] = src[position.yzx]; }
float sample3(float value, Texture3D<float> tex) { uint w, h, d; tex.GetDimensions(w, h, d); return tex[uint3(2, 1, 3)] * value + float(w); }
"""


@pytest.fixture(scope="module")
def m():
    return spy.Module.load_from_source(spy.create_device(spy.DeviceType.cpu), "textures_nvrtc", SRC)


@pytest.mark.parametrize("case", ["container", "tex1d", "tex2d_array", "tex3d_broadcast"])
def test_texture_kernels_compile_with_nvrtc(m, case):
    d = m.device
    rw = spy.TextureUsage.shader_resource | spy.TextureUsage.unordered_access

    def tex(t, **kw):
        return d.create_texture(type=t, format=kw.pop("format", Format.rgba32_float), usage=rw, **kw)
    fn, args = {
        "container": lambda: (m.copy_value, (tex(TextureType.texture_2d, width=4, height=4),
                                              tex(TextureType.texture_2d, width=4, height=4))),
        "tex1d": lambda: (m.copy_pixel_texture_1d,
                          (spy.Tensor(spy.Tensor.from_numpy(d, np.arange(4, dtype=np.int32)).storage, "int1", (4,)),
                           tex(TextureType.texture_1d, width=4), tex(TextureType.texture_1d, width=4))),
        "tex2d_array": lambda: (m.copy_pixel_texture_2d_array,
                                (np.zeros((2, 4, 4, 3), np.int32),
                                 tex(TextureType.texture_2d_array, width=4, height=4, array_length=2),
                                 tex(TextureType.texture_2d_array, width=4, height=4, array_length=2))),
        "tex3d_broadcast": lambda: (m.sample3, (np.ones(3, np.float32),
                                                tex(TextureType.texture_3d, width=3, height=4, depth=5,
                                                    format=Format.r32_float))),
    }[case]()
    cd = fn.debug_build_call_data(*args)
    for code in (cd.code, cd._codegen(cd._gen_args, nt=256, unroll=4)):
        prog = compile_program([SourceSpec(path="textures_nvrtc.slang", text=m._source_text + "\n" + code,
                                           name="textures_nvrtc")], ["_sj_main"], target="cuda",
                               include_paths=[spy.SHADER_PATH])
        assert b".entry" in nvrtc_ptx(prog.source)
