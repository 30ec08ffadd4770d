"""Struct instances as SlangPy uses them: a method bound to an object with get_this / update_this,
`spy.InstanceList` over a tensor of structs or a dict of per-field values (SOA), `InstanceTensor`,
mutating methods writing back, instances passed to free functions, and `.bwds` through a method of an
`InstanceDifferentiableBuffer` (gradients checked analytically).  particles.slang declares its structs
`: IDifferentiable, IAtomicAddable` as SlangPy's test module does."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit import float2, float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

HERE = Path(__file__).resolve().parent / "slangpy_api"
NF = 11           # floats in a Particle: position 2, velocity 2, size 1, material color 3 + emission 3


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_file(device, str(HERE / "particles.slang"))


def particles_np(t) -> np.ndarray:
    return t.to_numpy().view(np.float32).reshape(-1, NF)


class Wrapper:
    """The `this` protocol: get_this gives the data, update_this is told after the call."""

    def __init__(self, data):
        self.data = data
        self.get_called = 0
        self.update_called = 0

    def get_this(self):
        self.get_called += 1
        return self.data

    def update_this(self, value):
        self.update_called += 1


def test_iatomicaddable_struct_is_a_struct(m):
    P = m.Particle
    assert isinstance(P, spy.Struct)
    assert set(P.fields) == {"position", "velocity", "size", "material"}
    assert P.differentiable


def test_bound_this_object(m, device):
    buf = spy.Tensor.empty(device, dtype=m.Particle, element_count=1)
    assert buf.shape == (1,)
    this = Wrapper(buf)
    m.Particle.reset.bind(this)(float2(1, 2), float2(3, 4))
    p = particles_np(buf)[0]
    assert list(p[:5]) == [1, 2, 3, 4, 0.5]
    assert list(p[5:]) == [1, 1, 1, 0, 0, 0]
    # once for the signature, once to set the call up, once for the call; one update after it
    assert (this.get_called, this.update_called) == (3, 1)
    m.Particle.reset.bind(this)(float2(5, 6), float2(7, 8))
    assert list(particles_np(buf)[0][:4]) == [5, 6, 7, 8]
    assert this.update_called == 2


def test_bound_this_soa_with_plain_fields(m, device):
    pos = spy.Tensor.empty(device, shape=(1,), dtype=float2)
    this = Wrapper({"position": pos, "velocity": float2(1, 0), "size": 0.5,
                    "material": {"color": float3(1, 1, 1), "emission": float3(0, 0, 0)}})
    m.Particle.reset.bind(this)(float2(1, 2), float2(3, 4))
    assert pos.to_numpy().tolist() == [[1.0, 2.0]]
    # plain values are read only: what the method wrote to them is dropped
    assert this.data["velocity"] == float2(1, 0) and this.data["size"] == 0.5


def test_instance_list_over_tensor(m, device):
    buf = spy.Tensor.empty(device, shape=(1,), dtype=m.Particle)
    inst = spy.InstanceList(m.Particle, buf)
    inst.construct(float2(1, 2), float2(3, 4))
    assert list(particles_np(buf)[0][:4]) == [1, 2, 3, 4]
    inst.reset(float2(0, 0), float2(0, 1))
    inst.update_position(1.0)
    assert list(particles_np(buf)[0][:4]) == [0, 1, 0, 1]


def test_instance_list_soa_refs(m, device):
    inst = spy.InstanceList(m.Particle, {
        "position": spy.Tensor.empty(device, shape=(1,), dtype=float2),
        "velocity": spy.ValueRef(float2(9999)),
        "size": spy.floatRef(9999),
        "material": {"color": spy.ValueRef(float3(9999)), "emission": spy.ValueRef(float3(9999))},
    })
    inst.construct(float2(1, 2), float2(3, 4))
    assert inst.position.to_numpy().tolist() == [[1.0, 2.0]]
    assert inst.velocity.value == float2(3, 4) and inst.size.value == 0.5
    assert inst.material["color"].value == float3(1, 1, 1)
    inst.reset(float2(0, 0), float2(0, 1))
    inst.update_position(1.0)
    assert inst.position.to_numpy().tolist() == [[0.0, 1.0]]
    assert inst.velocity.value == float2(0, 1)


def _quads(p: np.ndarray) -> np.ndarray:
    out = np.zeros((len(p), 4, 2), np.float64)
    for i, row in enumerate(p.astype(np.float64)):
        pos, vel, size = row[0:2], row[2:4], row[4]
        if np.linalg.norm(vel) < 0.01:
            vel = np.array([0.0, 1.0])
        up = vel / np.linalg.norm(vel)
        right = np.array([-up[1], up[0]])
        out[i] = [pos + (right + up) * size, pos + (-right + up) * size,
                  pos + (-right - up) * size, pos + (right - up) * size]
    return out


def test_instance_tensor_to_function(m):
    ps = spy.InstanceTensor(m.Particle, shape=(200,))
    ps.construct(position=float2(10, 10), velocity=spy.RandFloatArg(min=-1, max=1, dim=2))
    before = particles_np(ps._data).astype(np.float64)
    assert np.all(before[:, 0:2] == 10)
    assert np.all(np.abs(before[:, 2:4]) <= 1) and np.std(before[:, 2:4]) > 0.2
    ps.update_position(dt=1.0 / 60.0)
    after = particles_np(ps._data)
    want = before.copy()
    want[:, 0:2] += before[:, 2:4] / 60.0
    assert np.allclose(after, want, atol=1e-5)
    Quad = m["float2[4]"]
    quads = spy.InstanceTensor(Quad, ps.shape)
    m.get_particle_quad(ps, _result=quads)
    got = quads._data.to_numpy().reshape(-1, 4, 2)
    assert np.allclose(got, _quads(after), atol=1e-5)


def test_nested_instance_in_soa(m, device):
    mats = spy.InstanceTensor(m.Material, shape=(50,))
    ps = spy.InstanceList(m.Particle, {"position": spy.Tensor.empty(device, shape=(50,), dtype=float2),
                                       "velocity": float2(0, 0), "size": 0.5, "material": mats})
    ps.construct(position=float2(10, 10), velocity=float2(0, 0))
    mat = mats._data.to_numpy().view(np.float32).reshape(-1, 6)
    assert np.all(mat == [1, 1, 1, 0, 0, 0])
    assert np.all(ps.position.to_numpy() == 10)


class CustomPositions:
    """An instance that keeps its data in Python: a fresh tensor per call, read back in update_this."""

    def __init__(self, device, data):
        self.device = device
        self.data = data

    def get_this(self):
        t = spy.Tensor.empty(self.device, shape=(len(self.data),), dtype=float2)
        t.copy_from_numpy(np.array([[v.x, v.y] for v in self.data], np.float32))
        return t

    def update_this(self, value):
        self.data = [float2(*map(float, r)) for r in value.to_numpy().reshape(-1, 2)]


def test_custom_instance_in_soa(m, device):
    ps = spy.InstanceList(m.Particle, {"position": CustomPositions(device, [float2(x, x) for x in range(1, 5)])})
    ps.construct(position=float2(10, 12), velocity=float2(0, 0))
    assert ps._data["position"].data == [float2(10, 12)] * 4


class Particles(spy.InstanceList):
    def __init__(self, struct, n):
        super().__init__(struct)
        self.position = spy.Tensor.empty(struct.device, shape=(n,), dtype=float2)
        self.velocity = spy.Tensor.empty(struct.device, shape=(n,), dtype=float2)
        self.size = 0.5
        self.material = {"color": float3(1, 1, 1), "emission": float3(0, 0, 0)}

    def update(self):
        self.update_position(1.0 / 60.0)


def test_extended_instance_list(m):
    ps = Particles(m.Particle, 7)
    ps.construct(position=float2(10, 10), velocity=float2(0, 1))
    ps.update()
    assert np.allclose(ps.position.to_numpy(), [[10, 10 + 1.0 / 60.0]] * 7)
    assert np.allclose(ps.velocity.to_numpy(), [[0, 1]] * 7)


def test_backwards_through_method(m, device):
    n = 64
    ps = spy.InstanceDifferentiableBuffer(m.Particle, shape=(n,))
    ps.construct(position=float2(10, 10), velocity=spy.RandFloatArg(min=-1, max=1, dim=2))
    nxt = ps.calc_next_position(dt=1.0 / 60.0, _result="tensor").with_grads()
    nxt.grad.copy_from_numpy(np.ones((n, 2), np.float32))
    dts = spy.Tensor.empty(device, shape=(n,), dtype=float).with_grads(zero=True)
    dts.copy_from_numpy(np.full((n,), 1.0 / 60.0, np.float32))
    ps.calc_next_position.bwds(dt=dts, _result=nxt)
    prim = particles_np(ps.buffer)
    grad = particles_np(ps.buffer.grad)
    assert np.allclose(nxt.to_numpy(), prim[:, 0:2] + prim[:, 2:4] / 60.0, atol=1e-6)
    assert np.all(grad[:, 0:2] == 1)                          # d next / d position
    assert np.allclose(grad[:, 2:4], 1.0 / 60.0)              # d next / d velocity
    assert np.all(grad[:, 4:] == 0)                           # size and material do not reach the result
    assert np.allclose(dts.grad.to_numpy(), prim[:, 2] + prim[:, 3], atol=1e-6)


def test_struct_methods_and_ndbuffer(m, device):
    P = m.Particle
    assert isinstance(P.__init, spy.Function) and isinstance(m.Material.__init, spy.Function)
    assert isinstance(P.reset, spy.Function) and isinstance(m.get_particle_quad, spy.Function)
    buf = spy.NDBuffer(device, P, 1)
    P.__init(float2(0, 0), float2(0.1, 0.2), _result=buf)
    assert np.allclose(P.calc_next_position(buf, 0.5).to_numpy(), [[0.05, 0.1]])
    P.update_position(buf, 0.5)
    assert np.allclose(particles_np(buf)[0][:4], [0.05, 0.1, 0.1, 0.2])
    b2 = spy.NDBuffer(device, P, element_count=1)
    P.__init(float2(0, 0), float2(0, 0.2), _result=b2)
    P.update_position(b2, 0.5)
    quads = spy.NDBuffer(device, m["float2[4]"], shape=(1,))
    m.get_particle_quad(b2, _result=quads)
    assert np.allclose(quads.to_numpy().reshape(-1, 2), [[-0.5, 0.6], [0.5, 0.6], [0.5, -0.4], [-0.5, -0.4]])
    with pytest.raises(ValueError, match="element_count or shape"):
        spy.NDBuffer(device, float2)


def test_soa_dict_as_result_and_this(m, device):
    soa = {"position": spy.NDBuffer(device, float2, 1), "velocity": float2(1, 0), "size": 0.5,
           "material": {"color": float3(1, 1, 1), "emission": float3(0, 0, 0)}}
    m.Particle.__init(float2(0, 0), float2(0.1, 0.2), _result=soa)
    m.Particle.update_position(soa, 0.5)                  # velocity is the dict's (1, 0), read only
    assert np.allclose(soa["position"].to_numpy(), [[0.5, 0.0]])


def test_instance_kernels_compile_with_nvrtc(device):
    """The kernels a GPU call generates for a mutating method over SOA fields, a constructor into a
    tensor of structs and `.bwds` through a method, as CUDA C++ compiled to PTX by NVRTC."""
    from cuda_kernels import nvrtc_ptx
    from slangjit.compiler import SourceSpec, compile_program
    dev = spy.create_device(spy.DeviceType.cpu, include_paths=[str(HERE)])
    dev.functional_staged = True
    mod = spy.Module.load_from_file(dev, str(HERE / "particles.slang"))
    P = mod.Particle
    soa = {"position": spy.Tensor.empty(dev, shape=(8,), dtype=float2), "velocity": float2(1, 0), "size": 0.5,
           "material": {"color": float3(1, 1, 1), "emission": float3(0, 0, 0)}}
    ps = spy.InstanceDifferentiableBuffer(P, shape=(8,))
    nxt = spy.Tensor.zeros(dev, shape=(8,), dtype=float2).with_grads(zero=True)
    dts = spy.Tensor.zeros(dev, shape=(8,), dtype=float).with_grads(zero=True)
    cds = [P.update_position.debug_build_call_data(soa, 0.5),
           P.__init.debug_build_call_data(float2(1, 2), spy.RandFloatArg(min=-1, max=1, dim=2), _result=ps._data),
           P.calc_next_position.bwds.debug_build_call_data(ps._data, dts, _result=nxt)]
    for cd in cds:
        prog = compile_program([SourceSpec(path=str(HERE / "particles.slang"), text=mod._source_text + "\n" + cd.code,
                                           name="particles")], ["_sj_main"], target="cuda",
                               include_paths=[spy.SHADER_PATH, str(HERE)])
        assert b".entry" in nvrtc_ptx(prog.source)


def test_experimental_diffinstancelist_import_path(device):
    """SlangPy's `slangpy.experimental.diffinstancelist` path gives the same classes as the package root."""
    from slangjit.experimental import diffinstancelist as dil
    assert dil.InstanceDifferentiableBuffer is spy.InstanceDifferentiableBuffer
    assert dil.InstanceDifferentiableTensor is spy.InstanceDifferentiableTensor
