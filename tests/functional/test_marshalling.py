"""Functional API §1.4: Python value -> Slang type marshalling."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
float addf(float a, float b) { return a + b; }
int addi(int a, int b) { return a + b; }
int64_t big(int64_t a) { return a + 1; }
bool negate(bool b) { return !b; }
half halve(half h) { return h * 0.5h; }
uint8_t inc8(uint8_t a) { return a + 1; }
float3 add3(float3 a, float3 b) { return a + b; }
float dot3(float3 a, float3 b) { return dot(a, b); }
int3 addi3(int3 a, int3 b) { return a + b; }
float4x4 mat_scale(float4x4 m, float s) { return m * s; }
float2 mat_row(float2 r) { return r * 2.0; }
float sum4(float x[4]) { return x[0] + x[1] + x[2] + x[3]; }
float arr5(Array<float, 5> a) { float s = 0; for (int i = 0; i < 5; i++) s += a[i]; return s; }
int[3] make_arr(int a) { int r[3] = { a, a + 1, a + 2 }; return r; }
struct Pair { float x; int n; };
float use_pair(Pair p) { return p.x * float(p.n); }
Pair make_pair(float x, int n) { Pair p; p.x = x; p.n = n; return p; }
struct Outer { Pair p; float3 v; };
Outer make_outer(float x) { Outer o; o.p.x = x; o.p.n = 2; o.v = float3(x, x, x); return o; }
float read_buf(StructuredBuffer<float> b, int i) { return b[i]; }
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "marsh", SRC)


def test_int_to_float_param(m):
    assert m.addf(1, 2) == 3.0


def test_float_to_int_param(m):
    assert m.addi(1.5, 2) == 3


def test_int64(m):
    assert m.big(2 ** 40) == 2 ** 40 + 1


def test_bool(m):
    assert m.negate(True) is False


def test_half(m):
    assert m.halve(3.0) == 1.5


def test_uint8(m):
    assert m.inc8(254) == 255


def test_vectors(m):
    assert m.add3(spy.float3(1, 2, 3), spy.float3(4, 5, 6)) == spy.float3(5, 7, 9)
    assert m.addi3(spy.int3(1, 2, 3), spy.int3(1, 1, 1)) == spy.int3(2, 3, 4)
    assert isinstance(m.add3(spy.float3(0), spy.float3(1)), spy.float3)


def test_scalar_splat_to_vector(m):
    assert m.add3(1.0, spy.float3(1, 2, 3)) == spy.float3(2, 3, 4)


def test_list_to_vector(m):
    assert m.add3([1.0, 2.0, 3.0], spy.float3(1, 1, 1)) == spy.float3(2, 3, 4)


def test_vector_to_scalar_vectorises(m):
    r = m.addf(spy.float3(1, 2, 3), 10.0, _result="numpy")
    np.testing.assert_array_equal(r, [11, 12, 13])


def test_matrix(m):
    mat = spy.float4x4(np.arange(16, dtype=np.float32))
    r = m.mat_scale(mat, 2.0)
    assert isinstance(r, spy.float4x4)
    np.testing.assert_array_equal(r.to_numpy(), np.arange(16).reshape(4, 4) * 2)


def test_matrix_rows_vectorise_over_vector(m):
    mat = spy.float2x2([[1, 2], [3, 4]])
    np.testing.assert_array_equal(m.mat_row(mat, _result="numpy"), [[2, 4], [6, 8]])


def test_list_to_array(m):
    assert m.sum4([1.0, 2.0, 3.0, 4.0]) == 10.0
    assert m.arr5([1.0, 2.0, 3.0, 4.0, 5.0]) == 15.0


def test_returned_array_is_list(m):
    assert m.make_arr(5) == [5, 6, 7]


def test_list_vectorises_scalar(m):
    np.testing.assert_array_equal(m.addf([1, 2, 3, 4], 1.0, _result="numpy"), [2, 3, 4, 5])


def test_dict_to_struct(m):
    assert m.use_pair({"x": 2.5, "n": 4}) == 10.0
    assert m.use_pair({"_type": "Pair", "x": 1.0, "n": 3}) == 3.0


def test_dict_fields_vectorise_independently(m):
    r = m.use_pair({"x": np.array([1, 2, 3], np.float32), "n": 2}, _result="numpy")
    np.testing.assert_array_equal(r, [2, 4, 6])


def test_struct_return_is_dict(m):
    assert m.make_pair(1.5, 3) == {"x": 1.5, "n": 3}
    o = m.make_outer(2.0)
    assert o["p"] == {"x": 2.0, "n": 2} and o["v"] == spy.float3(2, 2, 2)


def test_unknown_struct_field(m):
    with pytest.raises(ValueError, match="Slang type 'Pair' has no field 'z'"):
        m.use_pair({"x": 1.0, "n": 2, "z": 3})


def test_numpy_arrays(m):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(m.addf(a, a, _result="numpy"), 2 * a)
    i = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(m.addi(i, 1, _result="numpy"), i + 1)


def test_numpy_non_contiguous(m):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    np.testing.assert_array_equal(m.addf(a, 1.0, _result="numpy"), a + 1)


def test_numpy_trailing_dims_to_vector(m):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    r = m.dot3(a, spy.float3(1, 1, 1), _result="numpy")
    np.testing.assert_array_equal(r, a.sum(axis=1))


def test_numpy_trailing_dim_mismatch(m):
    # names the argument, expected vs got; a ValueError, and a RuntimeError as SlangPy raises
    with pytest.raises(RuntimeError, match=r"argument 'a': expected last dimension 3 \(float3\), got 2"):
        m.dot3(np.zeros((4, 2), np.float32), spy.float3(1, 1, 1))
    with pytest.raises(ValueError, match=r"argument 'a': expected last dimension 3 \(float3\), got 2"):
        m.dot3(np.zeros((4, 2), np.float32), spy.float3(1, 1, 1))


def test_float64_array_to_float_rejected(m):
    with pytest.raises(ValueError, match="parameter 'a'") as e:
        m.addf(np.ones(3), 1.0)
    assert "float64" in str(e.value) and "does not match slang type float" in str(e.value)


def test_int_array_to_float_rejected(m):
    with pytest.raises(spy.ResolveException, match="does not match slang type float"):
        m.addf(np.ones(3, np.int32), 1.0)


def test_range(m):
    np.testing.assert_array_equal(m.addi(range(10, 20, 2), 0, _result="numpy"), [10, 12, 14, 16, 18])


def test_unsupported_type(m):
    with pytest.raises(spy.BoundVariableException, match="Unsupported type"):
        m.addf("hi", 1.0)


def test_buffer_to_structured_buffer(m):
    d = m.device
    buf = d.create_buffer(data=np.array([1.5, 2.5, 3.5], np.float32), usage=spy.BufferUsage.shader_resource)
    assert m.read_buf(buf, 2) == 3.5


def test_tensor_float3_elements(m):
    t = spy.Tensor.from_numpy(m.device, np.arange(6, dtype=np.float32).reshape(2, 3))
    r = m.add3(t, spy.float3(1, 1, 1))      # float tensor (2,3) -> float3, dimensionality 1
    assert r.shape == (2,) and r.dtype.name == "float3"
    np.testing.assert_array_equal(r.to_numpy(), np.arange(6).reshape(2, 3) + 1)
