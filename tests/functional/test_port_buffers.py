"""Behavioural port of SlangPy's test_buffers.py: a raw device buffer for a StructuredBuffer parameter, and a
read-only buffer refused for an RWStructuredBuffer with SlangPy's message."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
float first_of(StructuredBuffer<float> b) { return b[0]; }
void clear_first(RWStructuredBuffer<float> b) { b[0] = 0.0f; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_buffers", SRC)


def test_unstructured_buffer(device, m):
    buf = device.create_buffer(size=4, usage=spy.BufferUsage.shader_resource)
    buf.copy_from_numpy(np.full((1,), 5.0, dtype=np.float32))
    assert m.first_of(buf) == 5.0


def test_buffer_usage_error(device, m):
    ro = device.create_buffer(size=4, usage=spy.BufferUsage.shader_resource)
    with pytest.raises(Exception, match=r"Buffer\[rw=False\] does not match slang type RWStructuredBuffer"):
        m.clear_first(ro)


def test_rw_buffer_written(device, m):
    rw = device.create_buffer(size=8, usage=spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access)
    rw.copy_from_numpy(np.array([3.0, 4.0], np.float32))
    m.clear_first(rw)
    np.testing.assert_array_equal(rw.to_numpy().view(np.float32), [0.0, 4.0])
