"""Issue 15: `read_buffer` / `write_buffer` (a raw element offset into a tensor's storage, slangpy.slang)
never touch memory outside the elements the view can reach: a read there gives 0, a write is dropped --
as for `load` / `store` outside the shape."""
import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.usefixtures("private_cache")

SRC = r"""
float rdb(Tensor<float, 1> t, int i) { return t.read_buffer(i); }
float rdb2(Tensor<float, 2> t, int i) { return t.read_buffer(i); }
void wrb(RWTensor<float, 1> t, int i) { t.write_buffer(i, 9.0); }
void wrbw(WTensor<float, 1> t, int i) { t.write_buffer(i, 7.0); }
"""


def test_read_buffer_outside_the_view_reads_zero(device):
    m = spy.Module.load_from_source(device, "raw_index_rd", SRC)
    t = spy.Tensor.from_numpy(device, np.arange(1, 5, dtype=np.float32))
    assert [m.rdb(t, i) for i in (0, 3, 4, 100, -1, -(2 ** 31))] == [1, 4, 0, 0, 0, 0]
    v = t.view([2], [2], 1)                         # elements 1 and 3 of the storage
    assert [m.rdb(v, i) for i in (1, 3, 0, 4)] == [2, 4, 0, 0]
    big = np.arange(1, 9, dtype=np.float32).reshape(2, 4)[:, :2]     # reaches storage offsets 0..5
    assert [m.rdb2(big, i) for i in (0, 5, 6, 7, -1)] == [1, 6, 0, 0, 0]


def test_write_buffer_outside_the_view_is_dropped(device):
    m = spy.Module.load_from_source(device, "raw_index_wr", SRC)
    big = np.arange(1, 9, dtype=np.float32)
    for i in (2, 5, 100, -1):
        m.wrb(big[:2], i)
        m.wrbw(big[:2], i)
    np.testing.assert_array_equal(big, np.arange(1, 9))
    m.wrb(big[:2], 1)
    assert big[1] == 9
    m.wrbw(big[:2], 0)
    assert big[0] == 7
