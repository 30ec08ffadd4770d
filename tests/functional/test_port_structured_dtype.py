"""Behavioural port of SlangPy's test_structured_dtype.py and test_structured_numpy.py: numpy structured arrays
into NDBuffers / Tensors of Slang structs (copy_from_numpy, from_numpy with dtype=), read back (by bytes, by
field, and through BufferCursor), the raw-bytes route, plain dtypes, struct alignment (float3, 64-bit, arrays),
and the errors for a missing dtype, a byte-size mismatch and a structured array passed to a call."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import BufferCursor, NDBuffer, Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
import "slangpy";
struct Point2D { float x; float y; };
struct SingleField { float value; };
struct IntStruct { int a; int b; uint c; };
struct Vec3Struct { float3 position; float3 normal; };
struct Double64Struct { double value; int64_t big_int; };
struct TrainingSample { float valid; int material_id; float2 uv; float3 wi; float3 wo; int mip_level; float3 target; };
struct ArrayStruct { float values[4]; int count; };
float sum_point(Point2D p) { return p.x + p.y; }
void copy_sample(TrainingSample s, out TrainingSample o) { o = s; }
"""
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
POINT = np.dtype([("x", np.float32), ("y", np.float32)])
SAMPLE = np.dtype([("valid", np.float32), ("material_id", np.int32), ("uv", np.float32, (2,)),
                   ("wi", np.float32, (3,)), ("wo", np.float32, (3,)), ("mip_level", np.int32),
                   ("target", np.float32, (3,))])


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_structured", SRC)


def _points(n):
    d = np.zeros(n, POINT)
    d["x"] = np.arange(n, dtype=np.float32)
    d["y"] = np.arange(n, dtype=np.float32) * 2.0
    return d


def test_ndbuffer_copy_from_numpy_structured_dtype(device, m):
    d = _points(10)
    buf = NDBuffer(device, dtype=m.Point2D, shape=(10,), usage=RW)
    buf.copy_from_numpy(d)
    r = buf.to_numpy().view(POINT).flatten()
    np.testing.assert_array_equal(r["x"], d["x"])
    np.testing.assert_array_equal(r["y"], d["y"])
    assert buf.to_numpy().tobytes() == d.tobytes()


@pytest.mark.parametrize("cls", [NDBuffer, Tensor])
def test_from_numpy_with_explicit_dtype(device, m, cls):
    d = _points(5)
    buf = cls.from_numpy(device, d, dtype=m.Point2D)
    assert tuple(buf.shape) == (5,)
    r = buf.to_numpy().view(POINT).flatten()
    np.testing.assert_array_equal(r["x"], d["x"])
    assert buf.to_numpy().tobytes() == d.tobytes()


@pytest.mark.parametrize("cls", [NDBuffer, Tensor])
def test_from_numpy_structured_requires_explicit_type(device, cls):
    with pytest.raises(ValueError, match="Structured numpy dtype"):
        cls.from_numpy(device, np.zeros(10, POINT))


def test_copy_from_numpy_raw_bytes_workaround(device, m):
    d = _points(5)
    buf = NDBuffer(device, dtype=m.Point2D, shape=(5,), usage=RW)
    buf.copy_from_numpy(d.view(np.uint8))
    r = buf.to_numpy().view(POINT).flatten()
    np.testing.assert_array_equal(r["x"], d["x"])
    np.testing.assert_array_equal(r["y"], d["y"])


def test_simple_dtype_still_works(device):
    f = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    np.testing.assert_array_equal(NDBuffer.from_numpy(device, f).to_numpy().view(np.float32), f)
    i = np.array([1, 2, 3, 4], np.int32)
    np.testing.assert_array_equal(NDBuffer.from_numpy(device, i).to_numpy().view(np.int32), i)


def test_issue_636_structured_dtype(device, m):
    dt = np.dtype([("valid", np.float32, (1,)), ("material_id", np.int32, (1,)), ("uv", np.float32, (2,)),
                   ("wi", np.float32, (3,)), ("wo", np.float32, (3,)), ("mip_level", np.int32, (1,)),
                   ("target", np.float32, (3,))])
    n = 10
    d = np.zeros(n, dt)
    d["valid"] = 1.0
    d["material_id"] = np.arange(n).reshape(-1, 1)
    d["uv"][:, 0], d["uv"][:, 1] = 0.5, 0.75
    d["wi"][:, 2] = np.arange(n)
    d["target"][:] = [1.0, 2.0, 3.0]
    d["mip_level"] = 7
    buf = NDBuffer(device, dtype=m.TrainingSample, shape=(n,), usage=RW)
    buf.copy_from_numpy(d)
    cur = BufferCursor(buf.dtype.buffer_layout.reflection, buf.storage)
    for i in range(n):
        e = cur[i]
        assert e["valid"].read() == d["valid"][i][0]
        assert e["material_id"].read() == d["material_id"][i][0]
        np.testing.assert_array_equal(np.asarray(list(e["uv"].read())), d["uv"][i])
        np.testing.assert_array_equal(np.asarray(list(e["wi"].read())), d["wi"][i])
        np.testing.assert_array_equal(np.asarray(list(e["wo"].read())), d["wo"][i])
        assert e["mip_level"].read() == 7
        np.testing.assert_array_equal(np.asarray(list(e["target"].read())), d["target"][i])


def test_training_sample_roundtrip_and_call(device, m):
    n = 8
    d = np.zeros(n, SAMPLE)
    d["valid"] = np.arange(n)
    d["material_id"] = np.arange(n) * 10
    d["uv"] = np.stack([np.arange(n), np.arange(n) + 1], axis=1)
    d["wi"] = [1.0, 0.0, 0.0]
    d["wo"] = [0.0, 1.0, 0.0]
    d["mip_level"] = np.arange(n)
    d["target"] = 0.5
    assert m.TrainingSample.buffer_layout.stride == SAMPLE.itemsize
    buf = NDBuffer(device, dtype=m.TrainingSample, shape=(n,))
    buf.copy_from_numpy(d)
    assert buf.to_numpy().tobytes() == d.tobytes()
    out = NDBuffer(device, dtype=m.TrainingSample, shape=(n,))
    m.copy_sample(buf, out)
    assert out.to_numpy().tobytes() == d.tobytes()


def test_single_field_struct(device, m):
    dt = np.dtype([("value", np.float32)])
    d = np.zeros(8, dt)
    d["value"] = np.arange(1, 9)
    buf = NDBuffer(device, dtype=m.SingleField, shape=(8,), usage=RW)
    buf.copy_from_numpy(d)
    np.testing.assert_array_equal(buf.to_numpy().view(dt).flatten()["value"], d["value"])


def test_integer_struct(device, m):
    dt = np.dtype([("a", np.int32), ("b", np.int32), ("c", np.uint32)])
    d = np.zeros(5, dt)
    d["a"] = [-1, -2, 3, 4, 5]
    d["b"] = [10, 20, 30, 40, 50]
    d["c"] = [0xFFFFFFFF, 0x12345678, 0xDEADBEEF, 100, 0]
    buf = NDBuffer(device, dtype=m.IntStruct, shape=(5,), usage=RW)
    buf.copy_from_numpy(d)
    r = buf.to_numpy().view(dt).flatten()
    for k in ("a", "b", "c"):
        np.testing.assert_array_equal(r[k], d[k])


def test_vec3_struct(device, m):
    dt = np.dtype([("position", np.float32, (3,)), ("normal", np.float32, (3,))])
    d = np.zeros(4, dt)
    d["position"] = np.arange(12).reshape(4, 3)
    d["normal"] = [[0, 1, 0], [1, 0, 0], [0, 0, 1], [0.577, 0.577, 0.577]]
    buf = NDBuffer(device, dtype=m.Vec3Struct, shape=(4,), usage=RW)
    buf.copy_from_numpy(d)
    cur = BufferCursor(buf.dtype.buffer_layout.reflection, buf.storage)
    for i in range(4):
        np.testing.assert_array_equal(np.asarray(list(cur[i]["position"].read())), d["position"][i])
        np.testing.assert_array_equal(np.asarray(list(cur[i]["normal"].read())), d["normal"][i])


def test_64bit_types_struct(device, m):
    dt = np.dtype([("value", np.float64), ("big_int", np.int64)])
    d = np.zeros(4, dt)
    d["value"] = [3.14159265358979, 2.71828182845904, 1.41421356237309, 1.61803398874989]
    d["big_int"] = [2 ** 60, 2 ** 61, 2 ** 62, 2 ** 63 - 1]
    buf = NDBuffer(device, dtype=m.Double64Struct, shape=(4,), usage=RW)
    buf.copy_from_numpy(d)
    r = buf.to_numpy().view(dt).flatten()
    np.testing.assert_array_equal(r["value"], d["value"])
    np.testing.assert_array_equal(r["big_int"], d["big_int"])


def test_array_in_struct(device, m):
    dt = np.dtype([("values", np.float32, (4,)), ("count", np.int32)])
    d = np.zeros(3, dt)
    d["values"] = np.arange(1, 13).reshape(3, 4)
    d["count"] = [4, 3, 2]
    buf = NDBuffer(device, dtype=m.ArrayStruct, shape=(3,), usage=RW)
    buf.copy_from_numpy(d)
    r = buf.to_numpy().view(dt).flatten()
    np.testing.assert_array_equal(r["values"], d["values"])
    np.testing.assert_array_equal(r["count"], d["count"])


def test_copy_from_structured_numpy_size_mismatch(device, m):
    buf = NDBuffer(device, dtype=m.TrainingSample, shape=(1,))
    with pytest.raises(ValueError, match="byte size"):
        buf.copy_from_numpy(np.zeros(1, POINT))


def test_tensor_from_numpy_structured_size_mismatch(device, m):
    with pytest.raises(ValueError, match="does not match"):
        Tensor.from_numpy(device, np.zeros(1, POINT), dtype=m.TrainingSample)


def test_direct_call_with_structured_numpy_raises(device, m):
    with pytest.raises(spy.BoundVariableException, match="Structured numpy dtype"):
        m.sum_point(np.array([(1.0, 2.0)], POINT))
