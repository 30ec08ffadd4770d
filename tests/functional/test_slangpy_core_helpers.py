"""SlangPy helpers beside the call API: `set_print_generated_shaders` (slangpy.core.calldata, SlangPy's
test_shader_printing.py), `parse_generic_signature` (slangpy.core.utils, test_name_parse.py), and calls of
many thread groups (test_large_dispatches.py: the call index is right past any per-row group limit)."""
from __future__ import annotations

import io
from contextlib import redirect_stdout

import numpy as np
import pytest

import slangjit as spy
from slangjit.core.calldata import set_print_generated_shaders
from slangjit.core.utils import parse_generic_signature


@pytest.mark.parametrize("text, expected", [
    ("MyType", ("MyType", [])), ("vector<float,4>", ("vector", ["float", "4"])),
    ("vector<float, 4>", ("vector", ["float", "4"])),
    ("Tensor<vector<float, 4>, 2>", ("Tensor", ["vector<float, 4>", "2"])),
    ("A<B<C<int, 1>, 2>, D<float>>", ("A", ["B<C<int, 1>, 2>", "D<float>"]))])
def test_parse_generic_signature(text, expected):
    assert parse_generic_signature(text) == expected


@pytest.mark.parametrize("bad", ["A<int", "A<int>>", "A<B<int>"])
def test_parse_generic_signature_unbalanced(bad):
    with pytest.raises(ValueError, match="parse_generic_signature"):
        parse_generic_signature(bad)


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
def test_print_generated_shaders(device):
    m = spy.Module.load_from_source(device, "sj_print_shaders", "int add_numbers(int a, int b) { return a + b; }")
    set_print_generated_shaders(True)
    try:
        out = io.StringIO()
        with redirect_stdout(out):
            assert m.add_numbers(5, 10) == 15
        text = out.getvalue()
        assert "GENERATED SHADER: add_numbers" in text and "END SHADER: add_numbers" in text
        assert "=" * 80 in text and "add_numbers(" in text and "_sj_main" in text
    finally:
        set_print_generated_shaders(False)
    out = io.StringIO()
    with redirect_stdout(out):
        assert m.add_numbers(np.int32(1), 2) == 3               # a new signature, printing off
    assert "GENERATED SHADER" not in out.getvalue()


LARGE = r"""
import "slangpy";
void record_call_id(int index, RWStructuredBuffer<uint> markers, uint row_stride, uint count)
{
    uint tid = uint(index);
    if (tid == 0) markers[0] = 1;
    if (tid == row_stride - 1) markers[1] = tid;
    if (tid == row_stride) markers[2] = tid;
    if (tid == count - 1) markers[3] = tid;
}
void record_thread_id(uint tid, RWStructuredBuffer<uint> markers, uint row_stride, uint count)
{
    if (tid == 0) markers[0] = 1;
    if (tid == row_stride - 1) markers[1] = tid;
    if (tid == row_stride) markers[2] = tid;
    if (tid == count - 1) markers[3] = tid;
}
"""
ROW = 65535 * 32          # one row of 65535 thread groups of 32: the old single-row dispatch limit
COUNT = ROW + 17


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
@pytest.mark.parametrize("how", ["grid", "call_group", "thread_count"])
def test_large_dispatch(device, how):
    m = spy.Module.load_from_source(device, "sj_large_dispatch", LARGE)
    markers = spy.Tensor.zeros(device, (4,), dtype="uint")
    if how == "grid":
        m.record_call_id(spy.grid((COUNT,)), markers.storage, ROW, COUNT)
    elif how == "call_group":
        m.record_call_id.call_group_shape(spy.Shape((32,)))(spy.grid((COUNT,)), markers.storage, ROW, COUNT)
    else:
        m.record_thread_id(spy.thread_id(), markers.storage, ROW, COUNT, _thread_count=COUNT)
    np.testing.assert_array_equal(markers.to_numpy().view(np.uint32).reshape(-1),
                                  np.array([1, ROW - 1, ROW, COUNT - 1], np.uint32))
