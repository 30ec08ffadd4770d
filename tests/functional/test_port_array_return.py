"""Behavioural port of SlangPy's test_array_return_arrays.py and test_scalar_parameter_conversion.py:
half[N] results from lists and tensors (generic N resolved from the list's length or named), a tensor's
trailing dimension consumed by an array parameter; Python ints for float fields / parameters and a list for
`Array<float, 5>`."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = r"""
import "slangpy";
half[N] twice_channels<let N : int>(half[N] data)
{
    [ForceUnroll]
    for (int i = 0; i < N; ++i) data[i] = 2.h * data[i];
    return data;
}
struct Uniform { float x; }
int field_to_int(Uniform u) { return int(u.x); }
int param_to_int(float x) { return int(x); }
int array_sum(Array<float, 5> x) { return int(x[0] + x[1] + x[2] + x[3] + x[4]); }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_arr_ret", SRC)


@pytest.mark.parametrize("name", ["twice_channels<8>", "twice_channels"])
def test_return_array_value_from_python_list(m, name):
    f = m.find_function(name)
    assert f is not None
    out = f([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    assert isinstance(out, list) and len(out) == 8
    np.testing.assert_array_equal(np.array(out, np.float32), 2.0 * np.arange(1, 9))


def test_return_array_value_from_tensor_scalar(device, m):
    t = Tensor.from_numpy(device, np.arange(8, dtype=np.float16))
    out = m.find_function("twice_channels<8>")(t)
    assert isinstance(out, list) and len(out) == 8
    np.testing.assert_array_equal(np.array(out, np.float32), 2.0 * np.arange(8))


def test_tensor_coercion_trailing_dim_into_array_element(device, m):
    x = ((np.random.default_rng(0).random((4, 4, 8)) - 0.5) * 2).astype(np.float16)
    y = m.find_function("twice_channels<8>").return_type(Tensor)(Tensor.from_numpy(device, x)).to_numpy()
    assert y.shape == (4, 4, 8)
    np.testing.assert_array_equal(y, x * np.float16(2))


def test_scalar_to_field_conversion(m):
    assert m.field_to_int({"x": 512}) == 512


def test_scalar_to_parameter_conversion(m):
    assert m.param_to_int(512) == 512


def test_array_conversion(m):
    assert m.array_sum([1, 2, 3, 4, 5]) == 15
