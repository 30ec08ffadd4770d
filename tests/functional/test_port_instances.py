"""Behavioural port of SlangPy's test_instances.py, against slangpy_api/particles.slang (the same Particle /
Material declarations as SlangPy's test module): `this` objects (get_this / update_this call counts),
InstanceList over a tensor and over SOA dicts (ValueRefs written back), InstanceTensor passed to free
functions, nested and custom instance lists, subclassed InstanceList, and `.bwds` through a method of an
InstanceDifferentiableBuffer (gradients checked analytically)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit import (InstanceDifferentiableBuffer, InstanceList, InstanceTensor, RandFloatArg, Struct, Tensor,
                      ValueRef, float2, float3, floatRef)

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

PARTICLES = Path(__file__).resolve().parent / "slangpy_api" / "particles.slang"


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_file(device, str(PARTICLES))


class ThisType:
    def __init__(self, data):
        self.data = data
        self.get_called = 0
        self.update_called = 0

    def get_this(self):
        self.get_called += 1
        return self.data

    def update_this(self, value):
        self.update_called += 1


def _flat(data) -> np.ndarray:
    return np.array([list(d["position"]) + list(d["velocity"]) + [d["size"]] + list(d["material"]["color"])
                     + list(d["material"]["emission"]) for d in data], dtype=np.float64)


def test_this_interface(m):
    P = m.Particle
    assert isinstance(P, Struct)
    buf = Tensor.empty(m.device, dtype=P, element_count=1)
    this = ThisType(buf)
    P.reset.bind(this)(float2(1, 2), float2(3, 4))
    d = buf.to_numpy()
    np.testing.assert_array_equal(_flat(d), [[1, 2, 3, 4, 0.5, 1, 1, 1, 0, 0, 0]])
    assert this.get_called == 3 and this.update_called == 1


def test_this_interface_soa(m):
    this = ThisType({"position": Tensor.empty(m.device, dtype=float2, element_count=1), "velocity": float2(1, 0),
                     "size": 0.5, "material": {"color": float3(1, 1, 1), "emission": float3(0, 0, 0)}})
    m.Particle.reset.bind(this)(float2(1, 2), float2(3, 4))
    data = this.data["position"].storage.to_numpy().view(np.float32)
    assert len(data) == 2 and data[0] == 1.0 and data[1] == 2.0


def test_loose_instance_as_buffer(m):
    P = m.Particle
    buf = Tensor.empty(m.device, dtype=P, element_count=1)
    inst = InstanceList(P, buf)
    inst.construct(float2(1, 2), float2(3, 4))
    d = buf.to_numpy()
    np.testing.assert_array_equal([list(x["position"]) for x in d], [[1, 2]])
    np.testing.assert_array_equal([list(x["velocity"]) for x in d], [[3, 4]])
    inst.reset(float2(0, 0), float2(0, 1))
    inst.update_position(1.0)
    d = buf.to_numpy()
    np.testing.assert_array_equal([list(x["position"]) for x in d], [[0, 1]])
    np.testing.assert_array_equal([list(x["velocity"]) for x in d], [[0, 1]])


def test_loose_instance_soa(m):
    inst = InstanceList(m.Particle, {
        "position": Tensor.empty(m.device, dtype=float2, element_count=1), "velocity": ValueRef(float2(9999)),
        "size": floatRef(9999), "material": {"color": ValueRef(float3(9999)), "emission": ValueRef(float3(9999))}})
    inst.construct(float2(1, 2), float2(3, 4))
    d = inst.position.storage.to_numpy().view(np.float32)
    assert (d[0], d[1]) == (1.0, 2.0)
    assert inst.velocity.value == float2(3, 4) and inst.size.value == 0.5
    inst.reset(float2(0, 0), float2(0, 1))
    inst.update_position(1.0)
    d = inst.position.storage.to_numpy().view(np.float32)
    assert len(d) == 2 and (d[0], d[1]) == (0.0, 1.0)


def _quads(data):
    out = np.zeros((len(data), 4, 2), np.float64)
    for i, row in enumerate(data):
        pos, vel, size = row[0:2], row[2:4], row[4]
        if np.linalg.norm(vel) < 0.01:
            vel = np.array([0.0, 1.0])
        up = vel / np.linalg.norm(vel)
        right = np.array([-up[1], up[0]])
        out[i] = [pos + (right + up) * size, pos + (-right + up) * size, pos + (-right - up) * size,
                  pos + (right - up) * size]
    return out


def test_pass_instance_to_function(m):
    P = m.Particle
    ps = InstanceTensor(P, shape=(1000,))
    ps.construct(position=float2(10, 10), velocity=RandFloatArg(min=-1, max=1, dim=2))
    expect = _flat(ps._data.to_numpy())
    assert np.all(np.abs(expect[:, 2:4]) <= 1) and len(np.unique(expect[:, 2])) > 900
    ps.update_position(dt=1.0 / 60.0)
    expect[:, 0:2] += expect[:, 2:4] / 60.0
    got = _flat(ps._data.to_numpy())
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)
    Quad = m["float2[4]"]
    assert isinstance(Quad, Struct)
    quads = InstanceTensor(Quad, ps.shape)
    m.get_particle_quad(ps, _result=quads)
    np.testing.assert_allclose(quads._data.storage.to_numpy().view(np.float32).reshape(-1, 4, 2), _quads(got),
                               rtol=1e-5, atol=1e-5)


def test_pass_nested_instance_to_function(m):
    P, Mat = m.Particle, m.Material
    assert isinstance(Mat, Struct)
    ps = InstanceList(P, {"position": Tensor.empty(m.device, dtype=float2, element_count=1000),
                          "velocity": float2(0, 0), "size": 0.5, "material": InstanceTensor(Mat, shape=(1000,))})
    ps.construct(position=float2(10, 10), velocity=float2(0, 0))
    mats = ps._data["material"]._data.to_numpy()
    flat = np.array([list(x["color"]) + list(x["emission"]) for x in mats])
    np.testing.assert_array_equal(flat, np.tile([1, 1, 1, 0, 0, 0], (1000, 1)))
    np.testing.assert_array_equal(ps._data["position"].to_numpy(), np.full((1000, 2), 10.0))


class CustomInstanceList:
    def __init__(self, device, data):
        self.device, self.data = device, data

    def get_this(self):
        t = Tensor.empty(self.device, dtype=float2, element_count=len(self.data))
        t.copy_from_numpy(np.array([[v.x, v.y] for v in self.data], np.float32))
        return t

    def update_this(self, value):
        a = value.to_numpy().view(np.float32).reshape(-1, 2)
        self.data = [float2(v[0], v[1]) for v in a]


def test_custom_instance_list(m):
    ps = InstanceList(m.Particle, {"position": CustomInstanceList(m.device, [float2(x, x) for x in [1, 2, 3, 4]])})
    ps.construct(position=float2(10, 10), velocity=float2(0, 0))
    data = ps._data["position"].data
    assert len(data) == 4 and all(v == float2(10, 10) for v in data)


class ExtendedInstanceList(InstanceList):
    def __init__(self, struct):
        super().__init__(struct)
        self.position = Tensor.empty(struct.device, dtype=float2, element_count=1000)
        self.velocity = Tensor.empty(struct.device, dtype=float2, element_count=1000)
        self.size = 0.5
        self.material = {"color": float3(1, 1, 1), "emission": float3(0, 0, 0)}

    def update(self):
        self.update_position(1.0 / 60.0)


def test_extended_instance_list(m):
    ps = ExtendedInstanceList(m.Particle)
    ps.construct(position=float2(10, 10), velocity=float2(0, 1))
    ps.update()
    np.testing.assert_allclose(ps.position.to_numpy().reshape(-1, 2), np.tile([10, 10 + 1.0 / 60.0], (1000, 1)),
                               rtol=1e-6)


def test_backwards_diff(m):
    n = 1000
    ps = InstanceDifferentiableBuffer(m.Particle, shape=(n,))
    ps.construct(position=float2(10, 10), velocity=RandFloatArg(min=-1, max=1, dim=2))
    nxt = ps.calc_next_position(dt=1.0 / 60.0, _result="tensor").with_grads()
    nxt.grad.copy_from_numpy(np.ones((n, 2), np.float32))
    dts = Tensor.empty(m.device, shape=(n,), dtype=float).with_grads()
    dts.storage.copy_from_numpy(np.full(n, 1.0 / 60.0, np.float32))
    ps.calc_next_position.bwds(dt=dts, _result=nxt)
    prim = _flat(ps.buffer.to_numpy())
    grads = _flat(ps.buffer.grad.to_numpy())
    np.testing.assert_allclose(nxt.to_numpy().reshape(-1, 2), prim[:, 0:2] + prim[:, 2:4] / 60.0, rtol=1e-6)
    np.testing.assert_array_equal(grads[:, 0:2], 1.0)
    np.testing.assert_allclose(grads[:, 2:4], 1.0 / 60.0, rtol=1e-6)
    np.testing.assert_allclose(dts.grad.to_numpy(), prim[:, 2] + prim[:, 3], rtol=1e-5, atol=1e-7)
