"""Functional API §1.11: call_id, grid, thread_id, wang_hash, rand_float."""
import numpy as np
import pytest

import slangjit as spy
from slangjit.functional.generators import _wang_hash_py

SRC = r"""
int2 id_vec(int2 id) { return id; }
int ida(int id[2]) { return id[0] * 100 + id[1]; }
int id1(int id) { return id; }
uint tid(uint3 t) { return t.x * 1000 + t.y; }
uint hash1(uint h) { return h; }
uint3 hash3(uint3 h) { return h; }
float rnd(float f) { return f; }
float2 rnd2(float2 f) { return f; }
float read2(int2 idx, ITensor<float, 2> t) { return t[idx.y, idx.x]; }
int3 bad(int3 v) { return v; }
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "gen", SRC)


def test_call_id_vector_is_reversed(m):
    r = m.id_vec(spy.call_id(), _result=np.zeros((3, 4, 2), np.int32))
    rows, cols = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(r[..., 0], cols)   # .x is the last (fastest) dimension
    np.testing.assert_array_equal(r[..., 1], rows)


def test_call_id_array_order(m):
    r = m.ida(spy.call_id(), _result=np.zeros((3, 4), np.int32))
    np.testing.assert_array_equal(r, np.arange(3)[:, None] * 100 + np.arange(4)[None, :])


def test_grid_defines_shape(m):
    r = m.ida(spy.grid((2, 5)), _result="numpy")
    assert r.shape == (2, 5)
    np.testing.assert_array_equal(r, np.arange(2)[:, None] * 100 + np.arange(5)[None, :])


def test_grid_offset_stride(m):
    r = m.ida(spy.grid((2, 3), offset=(10, 1), stride=(2, 3)), _result="numpy")
    want = (10 + 2 * np.arange(2))[:, None] * 100 + (1 + 3 * np.arange(3))[None, :]
    np.testing.assert_array_equal(r, want)


def test_grid_1d_to_int(m):
    np.testing.assert_array_equal(m.id1(spy.grid(1), _result=np.zeros(4, np.int32)), np.arange(4))
    np.testing.assert_array_equal(m.id1(spy.grid((6,)), _result="numpy"), np.arange(6))


def test_grid_with_tensor(m):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = spy.Tensor.from_numpy(m.device, a)
    r = m.read2(spy.grid(shape=t.shape), t, _result="numpy")
    np.testing.assert_array_equal(r, a)


def test_grid_bad_conversion(m):
    with pytest.raises(ValueError, match="Could not find suitable conversion from GridArg<2> to int3"):
        m.bad(spy.grid((2, 2)))


def test_thread_id(m):
    r = m.tid(spy.thread_id(), _result=np.zeros((2, 3), np.uint32))
    np.testing.assert_array_equal(r, np.arange(6).reshape(2, 3) * 1000)


def test_wang_hash_matches_reference(m):
    seed = 1234
    r = m.hash1(spy.wang_hash(seed=seed), _result=np.zeros(8, np.uint32))
    s = _wang_hash_py(seed)
    want = [_wang_hash_py(i ^ s) for i in range(8)]
    np.testing.assert_array_equal(r, want)


def test_wang_hash_vector(m):
    seed = 99
    r = m.hash3(spy.wang_hash(seed=seed, hash_seed=False), _result=np.zeros((4, 3), np.uint32))
    for t in range(4):
        h = (t * 3) ^ seed
        exp = []
        for _ in range(3):
            h = _wang_hash_py(h)
            exp.append(h)
        np.testing.assert_array_equal(r[t], exp)


def test_rand_float(m):
    r = m.rnd(spy.rand_float(-2.0, 3.0, seed=7), _result=np.zeros(1000, np.float32))
    assert r.min() >= -2.0 and r.max() < 3.0 and r.std() > 1.0
    s = _wang_hash_py(7)
    h = _wang_hash_py(5 ^ s)
    assert r[5] == pytest.approx(-2.0 + 5.0 * (h & 0x7FFFFF) / 2 ** 23, rel=1e-6)
    r2 = m.rnd2(spy.rand_float(0, 1), _result=np.zeros((10, 2), np.float32))
    assert r2.shape == (10, 2) and 0 <= r2.min() and r2.max() < 1
