"""Functional API §1.2 / §1.12: struct types, constructors, methods, [mutating], InstanceList, InstanceTensor."""
import numpy as np
import pytest

import slangjit as spy

SRC = r"""
struct Particle
{
    float2 position;
    float2 velocity;

    __init(float2 p, float2 v) { position = p; velocity = v; }
    [mutating] void update(float dt) { position = position + velocity * dt; }
    float2 get_position() { return position; }
    static float twice(float x) { return 2.0 * x; }
};
struct Pair { float x; int n; };
"""



# The device is `spy.create_device()`'s choice (tests/conftest.py "auto"): CUDA on a machine with a usable
# GPU, else the CPU.
pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "st", SRC)


def test_struct_lookup(m):
    p = m.Particle
    assert isinstance(p, spy.Struct) and p.name == "Particle"
    assert set(p.fields) == {"position", "velocity"}
    assert m.find_struct("Nope") is None
    with pytest.raises(ValueError, match="Could not find struct"):
        m.require_struct("Nope")
    with pytest.raises(AttributeError, match="Struct 'Particle' has no method or sub-type named 'nope'"):
        m.Particle.nope


def test_constructor_scalar(m):
    r = m.Particle(spy.float2(1, 2), spy.float2(3, 4))
    assert r == {"position": spy.float2(1, 2), "velocity": spy.float2(3, 4)}
    assert m.Particle.__init(spy.float2(0, 0), spy.float2(1, 1))["velocity"] == spy.float2(1, 1)


def test_static_method(m):
    assert m.Particle.twice(4.0) == 8.0


def test_methods_this_first(m):
    t = spy.Tensor.empty(m.device, (5,), m.Particle)
    m.Particle.__init(spy.float2(1, 2), spy.float2(3, 4), _result=t)
    m.Particle.update(t, 0.5)
    pos = m.Particle.get_position(t, _result="numpy")
    np.testing.assert_allclose(pos, np.tile([2.5, 4.0], (5, 1)))


def test_constructor_soa_result(m):
    pos = spy.Tensor.empty(m.device, (3,), spy.float2)
    vel = spy.Tensor.empty(m.device, (3,), spy.float2)
    m.Particle(np.arange(6, dtype=np.float32).reshape(3, 2), spy.float2(1, 0),
               _result={"position": pos, "velocity": vel})
    np.testing.assert_array_equal(pos.to_numpy(), np.arange(6).reshape(3, 2))
    np.testing.assert_array_equal(vel.to_numpy(), np.tile([1, 0], (3, 1)))


def test_instance_list_with_tensor(m):
    t = spy.Tensor.empty(m.device, (4,), m.Particle)
    il = spy.InstanceList(m.Particle, t)
    il.construct(spy.float2(0, 0), spy.float2(1, 2))
    il.update(2.0)
    np.testing.assert_allclose(il.get_position(_result="numpy"), np.tile([2.0, 4.0], (4, 1)))


def test_instance_list_soa(m):
    pos = np.zeros((3, 2), np.float32)
    vel = np.ones((3, 2), np.float32)
    il = spy.InstanceList(m.Particle, {"position": pos, "velocity": vel})
    il.update(0.25)
    np.testing.assert_allclose(pos, 0.25 * np.ones((3, 2)))
    assert il.position is pos


def test_instance_tensor(m):
    it = spy.InstanceTensor(m.Particle, (6,))
    assert it.shape == (6,) and it.tensor.dtype.name == "Particle"
    it.construct(spy.float2(1, 1), spy.float2(-1, 0))
    it.update(1.0)
    np.testing.assert_allclose(it.get_position(_result="numpy"), np.tile([0.0, 1.0], (6, 1)))


def test_subclassed_instance_list(m):
    class Emitter(spy.InstanceList):
        def __init__(self, st, data):
            super().__init__(st, data)
            self.count = 0          # python-only attribute

    e = Emitter(m.Particle, spy.Tensor.empty(m.device, (2,), m.Particle))
    e.construct(spy.float2(5, 5), spy.float2(0, 0))
    e.count += 1
    assert e.count == 1
    np.testing.assert_array_equal(e.get_position(_result="numpy"), [[5, 5], [5, 5]])


def test_struct_as_tensor_dtype(m):
    t = spy.Tensor.zeros(m.device, (3,), m.Pair)
    a = t.to_numpy()
    assert t.dtype.size == 8 and a.shape == (3,) and a.dtype.itemsize == 8 and len(a.dtype.names) == 2
