"""The suite's shared `device` fixture (tests/conftest.py): CPU unless parametrized, "auto" is what
`spy.create_device()` picks, one device per kind for the whole session."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.runtime import cuda as sj_cuda


def test_default_is_the_cpu_device(device):
    assert device.type == spy.DeviceType.cpu
    b = device.create_buffer(element_count=4, struct_size=4,
                             usage=spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access,
                             data=np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(b.to_numpy().view(np.float32), [0, 1, 2, 3])


@pytest.mark.parametrize("device", ["auto"], indirect=True)
def test_auto_is_create_devices_choice(device):
    want = spy.DeviceType.cuda if sj_cuda.is_available() else spy.DeviceType.cpu
    assert device.type == want == spy.create_device().type


@pytest.mark.parametrize("device", ["cpu"], indirect=True)
def test_one_device_per_kind_per_session(device, _device_pool):
    assert _device_pool["cpu"] is device
