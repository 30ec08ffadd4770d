"""Behavioural port of SlangPy's test_grid.py and test_nd_function_call.py: `spy.grid` for int vectors and
int arrays of 1 to 6 dimensions, with strides and offsets, with a fixed shape or only a dimension count
(shape from the result), generic vector parameters, and the errors for mismatched sizes; a 2-D call over
tensors writing an out parameter."""
from __future__ import annotations

import random

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor, grid

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def _grid_test(device, dims=2, datatype="array", stride=1, offset=0, fixed_shape=True):
    random.seed(42)
    shape = tuple(random.randint(5, 15) for _ in range(dims))
    gen = ""
    if datatype == "vector":
        bt = st = f"int{dims}"
    elif datatype == "array":
        bt = st = f"int[{dims}]"
    else:
        bt, st, gen = f"int{dims}", "vector<int, N>", "<let N: int>"
    mod = spy.Module.load_from_source(device, f"port_grid_{datatype}_{dims}", f"{st} get{gen}({st} v) {{ return v; }}")
    res = Tensor.empty(device, shape=shape, dtype=mod.layout.find_type_by_name(bt))
    offs = tuple(offset for _ in shape)
    strides = tuple(stride for _ in shape)
    g = grid(shape if fixed_shape else len(shape), offset=offs, stride=strides if stride != 1 else None)
    mod.get(g, _result=res)
    data = res.to_numpy().view(np.int32).reshape(shape + (dims,))
    expect = np.indices(shape).transpose(*(tuple(range(1, dims + 1)) + (0,))) * stride + offset
    if datatype != "array":
        expect = np.flip(expect, axis=-1)                 # a vector's x is the innermost call index
    np.testing.assert_array_equal(data, expect)


@pytest.mark.parametrize("stride", [1, 3])
@pytest.mark.parametrize("dims", [1, 2, 3, 4])
def test_grid_vectors(device, dims, stride):
    _grid_test(device, dims=dims, datatype="vector", stride=stride)


def test_grid_generic_vectors(device):
    _grid_test(device, dims=3, datatype="genvector")


@pytest.mark.parametrize("dims", [1, 3, 6])
def test_grid_arrays(device, dims):
    _grid_test(device, dims=dims, datatype="array")


@pytest.mark.parametrize("offset", [-100, 50])
def test_grid_offsets(device, offset):
    _grid_test(device, offset=offset)


@pytest.mark.parametrize("stride", [1, 3])
def test_grid_implicit_shape(device, stride):
    _grid_test(device, fixed_shape=False, stride=stride)


@pytest.mark.parametrize("param", ["int3", "int[3]"])
def test_grid_error_pass_to_bad_size(device, param):
    mod = spy.Module.load_from_source(device, f"port_grid_bad_{param[-2]}",
                                      f"int3 get({param} v) {{ return int3(0); }}")
    with pytest.raises(ValueError, match="Could not find suitable"):
        mod.get(grid(shape=(2, 2)), _result="numpy")


def test_basic_3d_call(device):
    mod = spy.Module.load_from_source(device, "port_nd_call", "void add_nd(float a, float b, out float c) { c = a + b; }")
    rng = np.random.default_rng(0)
    ad, bd = rng.random((2, 2)).astype(np.float32), rng.random((2, 2)).astype(np.float32)
    a, b, c = (Tensor.empty(device, shape=(2, 2), dtype=float) for _ in range(3))
    a.storage.copy_from_numpy(ad)
    b.storage.copy_from_numpy(bd)
    mod.add_nd(a, b, c)
    np.testing.assert_array_equal(c.storage.to_numpy().view(np.float32).reshape(2, 2), ad + bd)
