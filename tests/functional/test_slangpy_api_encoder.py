"""Command encoders (`device.create_command_encoder()`, `func.append_to(enc, ...)`, `_append_to=enc`,
`kernel.dispatch(..., command_encoder=enc)`, `device.submit_command_buffer(enc.finish())`), recording
callbacks, `Tensor.cursor()` element access and `DiffPair.get/set`."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import slangjit as spy
from slangjit import float2, float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
[Differentiable]
float3 polynomial(float3 a, float3 b) { return a * a + b + 1; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "encpoly", SRC)


def _tensors(device, rng):
    a_np = rng.random((10, 3), dtype=np.float32)
    b_np = rng.random((10, 3), dtype=np.float32)
    a = spy.Tensor.from_numpy(device, a_np).with_grads(zero=True)
    b = spy.Tensor.from_numpy(device, b_np).with_grads(zero=True)
    a = spy.Tensor(a.storage, float3, (10,), grad_in=_f3(a.grad), grad_out=_f3(a.grad))
    b = spy.Tensor(b.storage, float3, (10,), grad_in=_f3(b.grad), grad_out=_f3(b.grad))
    res = spy.Tensor.zeros(device, (10,), dtype=float3).with_grads(zero=True)
    res.grad.copy_from_numpy(np.ones((10, 3), np.float32))
    return a_np, b_np, a, b, res


def _f3(t):
    return spy.Tensor(t.storage, float3, (10,))


@pytest.mark.parametrize("use_arg", [True, False])
def test_appended_calls_run_at_submit(m, device, use_arg):
    a_np, b_np, a, b, res = _tensors(device, np.random.default_rng(1))
    enc = device.create_command_encoder()
    assert enc.queue == spy.CommandQueueType.graphics
    assert isinstance(enc.recording_id, int) and enc.recording_id != 0
    poly = m.polynomial.as_func()
    if use_arg:
        assert poly(a, b, _result=res, _append_to=enc) is None
        poly.bwds(a, b, _result=res, _append_to=enc)
    else:
        poly.append_to(enc, a, b, _result=res)
        poly.bwds.append_to(enc, a, b, _result=res)
    assert np.all(res.to_numpy() == 0)                        # nothing ran yet
    submitted = []
    cb = device.register_command_recording_submitted_callback(
        lambda ev: submitted.append((ev.id, ev.command_buffer.recording_id, ev.submit_id, ev.device is device)))
    buf = enc.finish()
    assert buf.recording_id == enc.recording_id and buf.queue == enc.queue
    device.submit_command_buffer(buf)
    device.unregister_command_recording_submitted_callback(cb)
    assert len(submitted) == 1 and submitted[0][0] == buf.recording_id == submitted[0][1]
    assert submitted[0][2] != 0 and submitted[0][3]
    np.testing.assert_allclose(res.to_numpy(), a_np * a_np + b_np + 1, rtol=1e-6)
    np.testing.assert_allclose(a.grad.to_numpy(), 2 * a_np, rtol=1e-6)
    np.testing.assert_allclose(b.grad.to_numpy(), np.ones_like(b_np))
    poly(a, b, _result=res, _append_to=None)                  # None: runs now
    with pytest.raises(RuntimeError, match="Command encoder is finished"):
        poly.append_to(enc, a, b, _result=res)
    with pytest.raises(RuntimeError, match="already submitted"):
        device.submit_command_buffer(buf)


def test_appended_calls_see_values_at_submit(m, device):
    a = spy.Tensor.from_numpy(device, np.zeros((4, 3), np.float32))
    a = spy.Tensor(a.storage, float3, (4,))
    b = spy.Tensor.zeros(device, (4,), dtype=float3)
    res = spy.Tensor.zeros(device, (4,), dtype=float3)
    enc = device.create_command_encoder()
    m.polynomial.append_to(enc, a, b, _result=res)
    a.copy_from_numpy(np.full((4, 3), 2, np.float32))         # changed after recording, before submit
    device.submit_command_buffer(enc.finish())
    assert np.all(res.to_numpy() == 5)


def test_discarded_recordings_are_reported(device):
    seen, other = [], []
    i1 = device.register_command_recording_discarded_callback(lambda ev: seen.append((ev.id, ev.device is device)))
    i2 = device.register_command_recording_discarded_callback(lambda ev: other.append(ev.id))
    assert i1 != i2
    device.unregister_command_recording_discarded_callback(i2)
    enc = device.create_command_encoder()
    rid = enc.recording_id
    del enc
    gc.collect()
    finished = device.create_command_encoder()
    device.submit_command_buffer(finished.finish())
    del finished
    gc.collect()
    device.unregister_command_recording_discarded_callback(i1)
    assert seen == [(rid, True)] and other == []


def test_kernel_dispatch_recorded(device, tmp_path):
    p = tmp_path / "k.slang"
    p.write_text("RWStructuredBuffer<float> o;\n[shader(\"compute\")][numthreads(4,1,1)]\n"
                 "void main(uint3 t : SV_DispatchThreadID) { o[t.x] = float(t.x) * 3.0; }\n")
    k = device.create_compute_kernel(device.load_program(str(p), ["main"]))
    buf = device.create_buffer(element_count=8, struct_size=4, usage=spy.BufferUsage.unordered_access)
    enc = device.create_command_encoder()
    k.dispatch([8, 1, 1], vars={"o": buf}, command_encoder=enc)
    assert np.all(buf.to_numpy().view(np.float32) == 0)
    device.submit_command_buffer(enc.finish())
    assert buf.to_numpy().view(np.float32).tolist() == [3.0 * i for i in range(8)]


def test_cursor_reads_and_writes(device):
    t = spy.Tensor.zeros(device, (3,), dtype=float3)
    c = t.cursor()
    assert len(c) == 3 and c.element_type_layout.kind == spy.TypeReflection.Kind.vector and c.element_type.col_count == 3
    c[0].write(np.array([1, 2, 3], np.float32))
    c[2].write(float3(4, 5, 6))
    assert t.to_numpy().sum() == 0                           # not applied yet
    c.apply()
    assert t.to_numpy().tolist() == [[1, 2, 3], [0, 0, 0], [4, 5, 6]]
    assert t.cursor()[2].read() == float3(4, 5, 6)
    s = spy.Tensor.from_numpy(device, np.array([1.5, -2.0], np.float32))
    assert [s.cursor()[i].read() for i in range(2)] == [1.5, -2.0]
    with pytest.raises(IndexError):
        s.cursor()[2]
    mt = spy.Tensor.zeros(device, (2,), dtype=spy.float2x2)
    c = mt.cursor()
    assert c.element_type_layout.kind == spy.TypeReflection.Kind.matrix
    assert (c.element_type.row_count, c.element_type.col_count) == (2, 2)
    c[1].write(np.array([[1, 2], [3, 4]], np.float32))
    c.apply()
    assert np.array_equal(mt.cursor()[1].read().to_numpy(), [[1, 2], [3, 4]])
    assert np.array_equal(mt.to_numpy()[1], [[1, 2], [3, 4]])


def test_cursor_struct_elements(device):
    mod = spy.Module.load_from_source(device, "curs", "struct P { float2 p; int n; float w[2]; };\n"
                                      "P mk(int i) { P r; r.p = float2(i, -i); r.n = i * 10; r.w[0] = 0.5 * i;"
                                      " r.w[1] = 1; return r; }")
    t = mod.mk(np.arange(3, dtype=np.int32), _result="tensor")
    c = t.cursor()
    assert c.element_type_layout.kind == spy.TypeReflection.Kind.struct
    assert c[2].read() == {"p": float2(2, -2), "n": 20, "w": [1.0, 1.0]}
    assert c[1]["n"].read() == 10 and c[1]["w"][0].read() == 0.5
    c[0].write({"p": float2(9, 8), "n": 7, "w": [6.0, 5.0]})
    c[1]["n"].write(-1)
    c.apply()
    got = t.cursor()
    assert got[0].read() == {"p": float2(9, 8), "n": 7, "w": [6.0, 5.0]} and got[1]["n"].read() == -1


def test_diffpair_get_set(device):
    p = spy.DiffPair(1.5, 0.25)
    assert p.get(spy.PrimType.primal) == 1.5 and p.get(spy.PrimType.derivative) == 0.25
    p.set(spy.PrimType.primal, 3.0)
    p.set(spy.PrimType.derivative, -1.0)
    assert (p.primal, p.grad) == (3.0, -1.0)
    with pytest.raises(ValueError, match="PrimType"):
        p.get("neither")
