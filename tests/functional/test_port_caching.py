"""Behavioural port of SlangPy's test_caching.py and test_buffer_sizes.py: call data equal for equal argument
signatures and different otherwise, a mapped call sharing the compute pipeline of the unmapped one, and the
shapes, strides and storage sizes of tensors."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = 'import "slangpy";\nfloat foo(float a, float b) { return a + b; }'


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_caching", SRC)


def test_scalar_types(m):
    f = m.foo.as_func()
    ff, ff2 = f.debug_build_call_data(1.0, 2.0), f.debug_build_call_data(1.0, 2.0)
    ii, ii2 = f.debug_build_call_data(1, 2), f.debug_build_call_data(1, 2)
    i_f = f.debug_build_call_data(1, 2.0)
    assert ff == ff2 and ii == ii2 and ff != ii and i_f != ii
    assert f(1, 2.5) == 3.5 and f(1, 2) == 3.0


def test_share_compute_pipeline_with_same_mapping(device, m):
    f = m.foo.as_func()
    b0 = Tensor.empty(device, program_layout=m.layout, dtype=float, shape=(100,))
    b1 = Tensor.empty(device, program_layout=m.layout, dtype=float, shape=(100,))
    cd = f.debug_build_call_data(b0, b1)
    mapped = f.map((0,), (0,)).debug_build_call_data(b0, b1)
    assert cd != mapped
    assert cd.pipeline == mapped.pipeline
    b0.copy_from_numpy(np.arange(100, dtype=np.float32))
    b1.copy_from_numpy(np.full(100, 0.5, np.float32))
    np.testing.assert_array_equal(f.map((0,), (0,))(b0, b1, _result="numpy"), np.arange(100) + 0.5)


@pytest.mark.parametrize("shape,strides,size", [((10,), (1,), 40), ((10, 5), (5, 1), 200),
                                                ((8, 10, 5), (50, 5, 1), 1600)])
def test_buffer_shapes(device, shape, strides, size):
    t = Tensor.empty(device, dtype=float, shape=shape)
    assert t.shape == shape and t.strides == strides and t.storage.size == size
