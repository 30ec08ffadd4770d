"""Behavioural port of SlangPy's test_call_groups.py: `func.call_group_shape(Shape(...))` with
CallShapeInfo::get_call_id / get_call_group_id / get_call_group_thread_id in 1 to 5 dimensions (aligned,
misaligned, smaller than a group), their exact values (group = index // G, thread = index % G), thread ids
within groups, and the validation messages for bad group shapes."""
from __future__ import annotations

import math

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, Shape

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

CASES = [
    ((8,), (2,)), ((9,), (2,)), ((1,), (4,)), ((8, 6), (2, 3)), ((9, 7), (2, 3)), ((1, 1), (4, 4)),
    ((8, 6, 4), (2, 3, 2)), ((9, 7, 5), (2, 3, 2)), ((8, 6, 4, 4), (2, 3, 2, 2)), ((9, 7, 5, 3), (2, 3, 2, 2)),
    ((8, 6, 4, 4, 2), (2, 3, 2, 2, 2)), ((9, 7, 5, 3, 3), (2, 3, 2, 2, 2)),
]
EDGE = [((32,), (1,)), ((32, 32), (32, 1)), ((32, 32), (1, 32)), ((100, 4, 2), (32, 2, 2)), ((3, 5), (10, 10)),
        ((8, 4, 12), (4, 8, 6))]


def _ptype(d):
    return {1: "uint", 2: "uint2", 3: "uint3", 4: "uint4"}.get(d, f"uint[{d}]")


def _mod(device, name, src):
    return spy.Module.load_from_source(device, name, 'import "slangpy";\n' + src)


def test_call_group_functions_exist(device):
    m = _mod(device, "port_cg_exist", """
float all_three(uint2 cell)
{
    CallShapeInfo a = CallShapeInfo::get_call_id();
    CallShapeInfo b = CallShapeInfo::get_call_group_id();
    CallShapeInfo c = CallShapeInfo::get_call_group_thread_id();
    return 1.0f;
}""")
    r = m.all_three(spy.grid((4, 6)), _result="numpy")
    assert r.shape == (4, 6) and np.all(r == 1.0)


def test_1d_call_groups_with_validation(device):
    m = _mod(device, "port_cg_1d", """
uint ids_1d(uint cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    return (g.shape[0] << 16) | t.shape[0];
}""")
    r = m.ids_1d.call_group_shape(Shape((2,)))(spy.grid((8,)), _result="numpy")
    assert r.shape == (8,)
    np.testing.assert_array_equal(r >> 16, np.arange(8) // 2)
    np.testing.assert_array_equal(r & 0xFFFF, np.arange(8) % 2)


PACK2 = """
uint ids_2d(uint2 cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    return (g.shape[0] << 24) | (g.shape[1] << 16) | (t.shape[0] << 8) | t.shape[1];
}"""


@pytest.mark.parametrize("cs,gs", [((4, 4), (2, 2)), ((6, 4), (2, 2)), ((8, 6), (2, 3)), ((5, 7), (2, 2)),
                                   ((3, 3), (1, 1)), ((2, 2), (4, 4))])
def test_call_group_math_2d(device, cs, gs):
    m = _mod(device, "port_cg_2d", PACK2)
    r = m.ids_2d.call_group_shape(Shape(gs))(spy.grid(cs), _result="numpy")
    y, x = np.indices(cs)
    np.testing.assert_array_equal((r >> 24) & 0xFF, y // gs[0])
    np.testing.assert_array_equal((r >> 16) & 0xFF, x // gs[1])
    np.testing.assert_array_equal((r >> 8) & 0xFF, y % gs[0])
    np.testing.assert_array_equal(r & 0xFF, x % gs[1])


def test_call_group_math_5d_validation(device):
    m = _mod(device, "port_cg_5d", """
uint ids_5d(uint[5] cell)
{
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    return (g.shape[2] << 16) | (t.shape[3] << 8) | t.shape[4];
}""")
    cs, gs = (3, 2, 2, 2, 2), (1, 1, 2, 2, 2)
    res = NDBuffer(device=device, shape=cs, dtype=int)
    m.ids_5d.call_group_shape(Shape(gs))(spy.grid(cs), _result=res)
    r = res.to_numpy()
    idx = np.indices(cs)
    assert np.any(r > 0)
    np.testing.assert_array_equal((r >> 16) & 0xFFFF, idx[2] // 2)
    np.testing.assert_array_equal((r >> 8) & 0xFF, idx[3] % 2)
    np.testing.assert_array_equal(r & 0xFF, idx[4] % 2)


@pytest.mark.parametrize("cs,gs", CASES + EDGE)
def test_call_group_dimensions(device, cs, gs):
    d = len(cs)
    m = _mod(device, f"port_cg_dims{d}", f"""
int dims_ok({_ptype(d)} cell)
{{
    CallShapeInfo c = CallShapeInfo::get_call_id();
    CallShapeInfo g = CallShapeInfo::get_call_group_id();
    CallShapeInfo t = CallShapeInfo::get_call_group_thread_id();
    return (c.dimension == {d}) && (g.dimension == {d}) && (t.dimension == {d});
}}
int flat_ids({_ptype(d)} cell, int which)
{{
    CallShapeInfo c = which == 0 ? CallShapeInfo::get_call_id()
                    : which == 1 ? CallShapeInfo::get_call_group_id() : CallShapeInfo::get_call_group_thread_id();
    int acc = 0;
    for (int i = 0; i < {d}; i++) acc = acc * 64 + c.shape[i];
    return acc;
}}""")
    res = NDBuffer(device=device, shape=cs, dtype=float)
    m.dims_ok.call_group_shape(Shape(gs))(spy.grid(cs), _result=res)
    assert np.all(res.to_numpy() == 1)
    idx = np.indices(cs)

    def pack(parts):
        acc = np.zeros(cs, np.int64)
        for p in parts:
            acc = acc * 64 + p
        return acc
    f = m.flat_ids.call_group_shape(Shape(gs))
    for which, want in ((0, pack(idx)), (1, pack([idx[i] // gs[i] for i in range(d)])),
                        (2, pack([idx[i] % gs[i] for i in range(d)]))):
        if np.max(want) >= 2 ** 31:
            continue
        np.testing.assert_array_equal(f(spy.grid(cs), which, _result="numpy"), want)


BASIC2 = "float basic2(uint2 p) { return 1.0f; }"


def test_call_group_error_handling(device):
    m = _mod(device, "port_cg_err", BASIC2)
    with pytest.raises((ValueError, RuntimeError)):
        m.basic2.call_group_shape(Shape((-1, 2)))(spy.grid((4, 4)), _result="numpy")
    with pytest.raises((ValueError, RuntimeError)):
        m.basic2.call_group_shape(Shape((0, 2)))(spy.grid((4, 4)), _result="numpy")


def test_call_group_dimension_validation_simple(device):
    m = _mod(device, "port_cg_err", BASIC2)
    with pytest.raises((ValueError, RuntimeError)) as e:
        m.basic2.call_group_shape(Shape((2, 0)))(spy.grid((4, 4)), _result="numpy")
    assert "call_group_shape[1] = 0" in str(e.value) and "must be >= 1" in str(e.value)
    assert np.all(m.basic2.call_group_shape(Shape((2, 2)))(spy.grid((4, 4)), _result="numpy") == 1.0)


def test_call_group_dimension_validation_too_many_dims(device):
    m2 = _mod(device, "port_cg_err", BASIC2)
    m1 = _mod(device, "port_cg_err1", "float basic1(uint p) { return 1.0f; }")
    with pytest.raises((ValueError, RuntimeError)) as e:
        m2.basic2.call_group_shape(Shape((2, 2, 2)))(spy.grid((4, 4)), _result="numpy")
    msg = str(e.value)
    assert "call_group_shape dimension (3)" in msg and "call_shape dimension (2)" in msg
    assert "cannot have more dimensions than call_shape" in msg
    with pytest.raises((ValueError, RuntimeError)) as e:
        m1.basic1.call_group_shape(Shape((1, 1, 1, 1, 1)))(spy.grid((8,)), _result="numpy")
    assert "call_group_shape dimension (5)" in str(e.value) and "call_shape dimension (1)" in str(e.value)


def test_call_group_dimension_validation_negative_values(device):
    m = _mod(device, "port_cg_err", BASIC2)
    with pytest.raises((ValueError, RuntimeError)) as e:
        m.basic2.call_group_shape(Shape((2, -1)))(spy.grid((4, 4)), _result="numpy")
    assert "call_group_shape[1] = -1" in str(e.value) and "must be >= 1" in str(e.value)
    with pytest.raises((ValueError, RuntimeError)) as e:
        m.basic2.call_group_shape(Shape((0, -1)))(spy.grid((4, 4)), _result="numpy")
    assert "call_group_shape[0] = 0" in str(e.value) and "must be >= 1" in str(e.value)


def test_call_group_dimension_validation_zero_dimensions(device):
    m = _mod(device, "port_cg_err", BASIC2)
    r = m.basic2.call_group_shape(Shape(()))(spy.grid((4, 4)), _result="numpy")
    assert r.shape == (4, 4) and np.all(r == 1.0)


def test_call_group_math_verified_thread_id_patterns(device, tmp_path, monkeypatch):
    m = _mod(device, "port_cg_tid", """
uint3 tid_pattern(uint2 cell, uint3 thread_id)
{
    CallShapeInfo c = CallShapeInfo::get_call_id();
    return uint3(c.shape[1], c.shape[0], thread_id.x);
}""")
    cs = (32, 64)
    y, x = np.indices(cs)
    r = m.tid_pattern(spy.grid(cs), spy.thread_id(), _result="numpy")
    np.testing.assert_array_equal(r[..., 0], x)
    np.testing.assert_array_equal(r[..., 1], y)
    np.testing.assert_array_equal(r[..., 2], y * 64 + x)
    # groups of (4, 8): threads numbered group by group (row-major over groups), row-major within a group
    monkeypatch.chdir(tmp_path)
    spy.set_dump_generated_shaders(True)
    try:
        r = m.tid_pattern.call_group_shape(Shape((4, 8)))(spy.grid(cs), spy.thread_id(), _result="numpy")
    finally:
        spy.set_dump_generated_shaders(False)
    assert any(p.suffix == ".slang" and "tid_pattern" in p.read_text() for p in (tmp_path / ".temp").iterdir())
    np.testing.assert_array_equal(r[..., 0], x)
    np.testing.assert_array_equal(r[..., 1], y)
    group = (y // 4) * (64 // 8) + (x // 8)
    np.testing.assert_array_equal(r[..., 2], group * 32 + (y % 4) * 8 + (x % 8))
    assert list(r[1, 0]) == [0, 1, 8] and list(r[0, 8]) == [8, 0, 32] and list(r[4, 0]) == [0, 4, 256]
    assert list(r[31, 63]) == [63, 31, 2047]
