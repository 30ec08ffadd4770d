"""The kernels of test_slangpy_textures_sampling.py (sampling, mip Load, cube textures, normalised-format
stores), in their GPU form, compile to PTX with NVRTC (no GPU needed).  The calls themselves run on a GPU in
test_slangpy_textures_sampling.py with the "cuda" device."""
import numpy as np
import pytest

import slangjit as spy
from slangjit import Format, TextureType
from slangjit.compiler import SourceSpec, compile_program

from cuda_kernels import nvrtc_ptx

from test_slangpy_textures_sampling import SRC


@pytest.fixture(scope="module")
def m():
    return spy.Module.load_from_source(spy.create_device(spy.DeviceType.cpu), "tex_sampling_nvrtc", SRC)


def _args(d, case):
    rw = spy.TextureUsage.shader_resource | spy.TextureUsage.unordered_access
    s = d.create_sampler()
    f2 = np.zeros((4, 2), np.float32)
    f3 = np.zeros((4, 3), np.float32)
    f1 = np.zeros(4, np.float32)

    def tex(t, fmt=Format.rgba32_float, **kw):
        return d.create_texture(type=t, format=fmt, usage=rw, mip_count=0 if t != TextureType.texture_3d else 1,
                                **kw)
    t2 = tex(TextureType.texture_2d, width=8, height=8)
    return {
        "sample_level_2d": (f2, f1, t2, s), "sample_grad_2d": (f2, f2, f2, t2, s),
        "gather_2d": (f2, tex(TextureType.texture_2d, Format.r32_float, width=4, height=4), s),
        "sample_1d": (f1, f1, tex(TextureType.texture_1d, Format.r32_float, width=8), s),
        "sample_3d": (f3, tex(TextureType.texture_3d, Format.rg32_float, width=4, height=4, depth=4), s),
        "sample_2d_array": (f3, f1, tex(TextureType.texture_2d_array, width=4, height=4, array_length=2), s),
        "sample_cube": (f3, tex(TextureType.texture_cube, width=4, height=4), s),
        "load_mip": (np.zeros((4, 3), np.int32), t2),
        "cube_store": (np.zeros((4, 3), np.int32), np.zeros((4, 4), np.float32),
                       tex(TextureType.texture_cube, width=4, height=4)),
        "store_2d": (np.zeros((4, 2), np.int32), np.zeros((4, 4), np.float32),
                     tex(TextureType.texture_2d, Format.rgba8_unorm_srgb, width=4, height=4)),
    }[case]


@pytest.mark.parametrize("case", ["sample_level_2d", "sample_grad_2d", "gather_2d", "sample_1d", "sample_3d",
                                  "sample_2d_array", "sample_cube", "load_mip", "cube_store", "store_2d"])
def test_sampling_kernels_compile_with_nvrtc(m, case):
    cd = getattr(m, case).debug_build_call_data(*_args(m.device, case))
    prog = compile_program([SourceSpec(path="tex_sampling_nvrtc.slang", text=m._source_text + "\n" + cd.code,
                                       name="tex_sampling_nvrtc")], ["_sj_main"], target="cuda",
                           include_paths=[spy.SHADER_PATH])
    assert b".entry" in nvrtc_ptx(prog.source)
