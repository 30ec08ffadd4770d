"""Behavioural port of SlangPy's test_command_buffer.py: calls and `.bwds` calls recorded into a command
encoder (`_append_to=` or `append_to`), run only at submit; recording ids; discarded / submitted recording
callbacks (registered, unregistered, unregistering themselves); a finished encoder refused."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import slangjit as spy
from slangjit import CommandQueueType, Tensor, float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = "[Differentiable] float3 polynomial(float3 a, float3 b) { return a * a + b + 1; }"


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "port_cmdbuf", SRC)


@pytest.mark.parametrize("use_arg", [True, False])
def test_command_buffer(m, use_arg):
    dev = m.device
    poly = m.polynomial.as_func()
    enc = dev.create_command_encoder()
    assert enc.queue == CommandQueueType.graphics
    assert isinstance(enc.recording_id, int) and enc.recording_id != 0

    discarded, second, unreg = [], [], []

    def on_discarded(ev):
        assert ev.device == dev
        discarded.append(ev.id)
        dev.unregister_command_recording_discarded_callback(cb1)

    def on_second(ev):
        assert ev.device == dev
        second.append(ev.id)

    cb1 = dev.register_command_recording_discarded_callback(on_discarded)
    cb2 = dev.register_command_recording_discarded_callback(on_second)
    cb3 = dev.register_command_recording_discarded_callback(lambda ev: unreg.append(ev.id))
    assert isinstance(cb1, int) and isinstance(cb2, int) and cb1 != cb3
    dev.unregister_command_recording_discarded_callback(cb3)
    tmp = dev.create_command_encoder()
    rid = tmp.recording_id
    del tmp
    gc.collect()
    assert discarded == [rid] and second == [rid] and unreg == []
    dev.unregister_command_recording_discarded_callback(cb1)
    dev.unregister_command_recording_discarded_callback(cb2)

    a = Tensor.empty(dev, (10,), dtype=float3).with_grads()
    b = Tensor.empty(dev, (10,), dtype=float3).with_grads()
    res = Tensor.empty(dev, (10,), dtype=float3).with_grads()
    rng = np.random.default_rng(0)
    ad, bd = rng.random((10, 3)).astype(np.float32), rng.random((10, 3)).astype(np.float32)
    a.copy_from_numpy(ad)
    b.copy_from_numpy(bd)
    res.copy_from_numpy(np.zeros((10, 3), np.float32))
    res.grad.copy_from_numpy(np.ones((10, 3), np.float32))
    if use_arg:
        poly(a, b, _result=res, _append_to=enc)
        poly.bwds(a, b, _result=res, _append_to=enc)
    else:
        poly.append_to(enc, a, b, _result=res)
        poly.bwds.append_to(enc, a, b, _result=res)
    assert np.all(res.to_numpy() == 0.0)                       # nothing ran before submit

    subs, subs2, unreg_s = [], [], []

    def on_sub(ev):
        assert ev.device == dev
        subs.append((ev.id, ev.command_buffer.recording_id, ev.submit_id))
        dev.unregister_command_recording_submitted_callback(s1)

    def on_sub2(ev):
        subs2.append((ev.id, ev.command_buffer.recording_id, ev.submit_id))

    s1 = dev.register_command_recording_submitted_callback(on_sub)
    s2 = dev.register_command_recording_submitted_callback(on_sub2)
    s3 = dev.register_command_recording_submitted_callback(lambda ev: unreg_s.append(ev.id))
    assert s1 != s3
    dev.unregister_command_recording_submitted_callback(s3)
    cb = enc.finish()
    assert cb.queue == enc.queue and cb.recording_id == enc.recording_id
    dev.submit_command_buffer(cb)
    assert len(subs) == 1 and len(subs2) == 1 and unreg_s == []
    assert subs[0][0] == cb.recording_id and subs[0][1] == cb.recording_id and subs[0][2] != 0
    assert subs2[0] == subs[0]
    dev.unregister_command_recording_submitted_callback(s1)
    dev.unregister_command_recording_submitted_callback(s2)

    np.testing.assert_allclose(res.to_numpy(), ad * ad + bd + 1, rtol=1e-6)
    np.testing.assert_allclose(a.grad.to_numpy(), 2 * ad, rtol=1e-6)
    np.testing.assert_array_equal(b.grad.to_numpy(), np.ones((10, 3)))
    poly(a, b, _result=res, _append_to=None)                    # a None encoder: run now


def test_reuse_finished_command_encoder(m):
    poly = m.polynomial.as_func()
    a, b, res = (Tensor.empty(m.device, (10,), dtype=float3) for _ in range(3))
    enc = m.device.create_command_encoder()
    poly.append_to(enc, a, b, _result=res)
    m.device.submit_command_buffer(enc.finish())
    with pytest.raises(Exception, match="Command encoder is finished"):
        poly.append_to(enc, a, b, _result=res)
