"""Call groups (`func.call_group_shape(G)`) and `CallShapeInfo` (slangpy.slang): the call is run in groups
of G elements over a grid of ceil(call shape / G) groups; a function reads its call index, its group's index
and its index in the group.  Every element is checked against the definition: call id = group id * G +
thread id, within the call shape; each group's elements get consecutive dispatch threads, row-major."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import slangjit as spy
from slangjit import Shape
from slangjit.compiler import SourceSpec, compile_program

BOTH = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";

uint packed2(uint2 cell) {
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    return (g.shape[0] << 24) | (g.shape[1] << 16) | (t.shape[0] << 8) | t.shape[1];
}

uint3 ids(uint2 cell, uint3 tid) {
    CallShapeInfo c = CallShapeInfo::get_call_id();
    return uint3(c.shape[1], c.shape[0], tid.x);
}

int all_dims(int[5] cell, int d) {
    CallShapeInfo c = CallShapeInfo::get_call_id();
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    int ok = int(c.dimension == d && g.dimension == d && t.dimension == d);
    for (int i = 0; i < 5; i++) ok = ok & int(c.shape[i] == cell[i]);
    return ok;
}

float one(uint2 cell) { return 1.0; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "callgroups", SRC)


def _split(r):
    return (r >> 24) & 255, (r >> 16) & 255, (r >> 8) & 255, r & 255


@BOTH
@pytest.mark.parametrize("cs,G", [((4, 4), (2, 2)), ((6, 4), (2, 2)), ((8, 6), (2, 3)), ((5, 7), (2, 2)),
                                  ((3, 3), (1, 1)), ((2, 2), (4, 4)), ((9, 7), (2, 3)), ((1, 1), (4, 4)),
                                  ((32, 32), (32, 1)), ((3, 5), (10, 10)), ((8, 6), (3,))])
def test_group_ids_2d(m, cs, G):
    r = m.packed2.call_group_shape(Shape(G))(spy.grid(cs), _result="numpy")
    assert r.shape == cs
    gy, gx, ty, tx = _split(r)
    Gp = (1,) * (2 - len(G)) + tuple(G)
    y, x = np.meshgrid(range(cs[0]), range(cs[1]), indexing="ij")
    assert np.array_equal(gy, y // Gp[0]) and np.array_equal(ty, y % Gp[0])
    assert np.array_equal(gx, x // Gp[1]) and np.array_equal(tx, x % Gp[1])


@BOTH
def test_no_groups_means_groups_of_one(m):
    r = m.packed2(spy.grid((3, 4)), _result="numpy")
    gy, gx, ty, tx = _split(r)
    y, x = np.meshgrid(range(3), range(4), indexing="ij")
    assert np.array_equal(gy, y) and np.array_equal(gx, x) and not ty.any() and not tx.any()
    assert np.array_equal(m.packed2.call_group_shape(Shape(()))(spy.grid((3, 4)), _result="numpy"), r)


@BOTH
def test_thread_ids_follow_groups(m):
    cs, G = (32, 64), (4, 8)
    plain = m.ids(spy.grid(cs), spy.thread_id(), _result="numpy")
    y, x = np.meshgrid(range(cs[0]), range(cs[1]), indexing="ij")
    assert np.array_equal(plain[..., 0], x) and np.array_equal(plain[..., 1], y)
    assert np.array_equal(plain[..., 2], y * 64 + x)
    grouped = m.ids.call_group_shape(Shape(G))(spy.grid(cs), spy.thread_id(), _result="numpy")
    assert np.array_equal(grouped[..., 0], x) and np.array_equal(grouped[..., 1], y)
    group = (y // 4) * (64 // 8) + (x // 8)
    assert np.array_equal(grouped[..., 2], group * 32 + (y % 4) * 8 + (x % 8))
    assert grouped[1, 0].tolist() == [0, 1, 8] and grouped[0, 8].tolist() == [8, 0, 32]
    assert grouped[4, 0].tolist() == [0, 4, 256] and grouped[31, 63].tolist() == [63, 31, 2047]


@BOTH
@pytest.mark.parametrize("cs,G", [((9, 7, 5, 3, 3), (2, 3, 2, 2, 2)), ((3, 2, 2, 2, 2), (1, 1, 2, 2, 2)),
                                  ((8, 6, 4, 4, 2), (2, 3, 2, 2, 2)), ((4, 3, 2, 2, 2), (3, 1))])
def test_five_dimensions(m, cs, G):
    r = m.all_dims.call_group_shape(Shape(G))(spy.grid(cs), 5, _result="numpy")
    assert r.shape == cs and np.all(r == 1)


@BOTH
def test_group_shape_errors(m):
    for bad, msg in [((2, 0), "call_group_shape[1] = 0"), ((2, -1), "call_group_shape[1] = -1"),
                     ((0, -1), "call_group_shape[0] = 0")]:
        with pytest.raises(ValueError) as e:
            m.one.call_group_shape(Shape(bad))(spy.grid((4, 4)), _result="numpy")
        assert msg in str(e.value) and "must be >= 1" in str(e.value)
    with pytest.raises(ValueError) as e:
        m.one.call_group_shape(Shape((2, 2, 2)))(spy.grid((4, 4)), _result="numpy")
    s = str(e.value)
    assert "call_group_shape dimension (3)" in s and "call_shape dimension (2)" in s
    assert "cannot have more dimensions than call_shape" in s
    assert np.all(m.one.call_group_shape(Shape((2, 2)))(spy.grid((4, 4)), _result="numpy") == 1)


@BOTH
def test_groups_with_tensors_and_thread_group_size(m, device):
    mod = spy.Module.load_from_source(device, "cgt", "import \"slangpy\";\n"
                                      "float f(float a) { CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();"
                                      " return a * 10 + t.shape[0]; }")
    a = np.arange(37, dtype=np.float32)
    for tgs in (None, 1, 7, 64):
        fn = mod.f if tgs is None else mod.f.thread_group_size(tgs)
        r = fn.call_group_shape(Shape((4,)))(a, _result="numpy")
        assert np.array_equal(r, a * 10 + np.arange(37) % 4)
    with pytest.raises(ValueError, match="thread_group_size"):
        mod.f.thread_group_size(0)


def test_call_group_kernel_compiles_with_nvrtc():
    """The kernel a GPU call generates with call groups and CallShapeInfo, compiled to PTX."""
    from cuda_kernels import nvrtc_ptx
    dev = spy.create_device(spy.DeviceType.cpu)
    dev.functional_staged = True
    mod = spy.Module.load_from_source(dev, "cgnv", SRC)
    cd = mod.packed2.call_group_shape(Shape((2, 3))).debug_build_call_data(spy.grid((9, 7)))
    prog = compile_program([SourceSpec(path="cgnv.slang", text=mod._source_text + "\n" + cd.code, name="cgnv")],
                           ["_sj_main"], target="cuda", include_paths=[spy.SHADER_PATH])
    assert b".entry" in nvrtc_ptx(prog.source)


@BOTH
def test_call_shape_info_through_an_import(device):
    from pathlib import Path
    here = Path(__file__).resolve().parent / "slangpy_api"
    mod = spy.Module.load_from_source(device, "cgimp", f'import "{(here / "callinfo_lib").as_posix()}";\n'
                                      "int f(int2 cell) { return outer_index() * 10 + cell.x; }")
    r = mod.f(spy.grid((3, 4)), _result="numpy")
    y, x = np.meshgrid(range(3), range(4), indexing="ij")
    assert np.array_equal(r, y * 10 + x)


@BOTH
def test_call_shape_info_refused_in_raw_dispatch(device):
    mod = spy.Module.load_from_source(device, "cgraw", 'import "slangpy";\n'
                                      "void k(uint3 tid, RWTensor<int, 1> o) { CallShapeInfo c = "
                                      "CallShapeInfo::get_call_id(); o[tid.x] = c.shape[0]; }")
    o = spy.Tensor.zeros(device, shape=(4,), dtype=int)
    with pytest.raises(ValueError, match="uses CallShapeInfo"):
        mod.k.dispatch(spy.uint3(4, 1, 1), o=o)
