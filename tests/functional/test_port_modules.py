"""Behavioural port of SlangPy's test_modules.py (against slangpy_api/particles.slang, the same Particle /
Material declarations as SlangPy's test module): structs and their methods as Struct / Function objects,
constructors writing NDBuffers of structs, read-only and mutating methods over NDBuffers, a free function
reading structs, and an SOA dict for a mutating `this` (plain values are inputs, SlangPy's rule)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit import Function, NDBuffer, Struct, float2, float3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

PARTICLES = Path(__file__).resolve().parent / "slangpy_api" / "particles.slang"


@pytest.fixture(scope="module")
def m(device):
    return spy.Module(device.load_module(str(PARTICLES)))


def test_create_module(m):
    P, Mat = m.Particle, m.Material
    assert isinstance(P, Struct) and isinstance(Mat, Struct)
    for f in (P.__init, P.reset, P.calc_next_position, P.update_position, Mat.__init, m.get_particle_quad):
        assert isinstance(f, Function)


def test_init_particle(m):
    buf = NDBuffer(m.device, m.Particle, 1)
    m.Particle.__init(float2(1.0, 2.0), float2(3.0, 4.0), _result=buf)
    d = buf.to_numpy()
    assert [list(x["position"]) for x in d] == [[1.0, 2.0]]
    assert [list(x["velocity"]) for x in d] == [[3.0, 4.0]]
    assert [float(x["size"]) for x in d] == [0.5]
    assert [list(x["material"]["color"]) for x in d] == [[1.0, 1.0, 1.0]]
    assert [list(x["material"]["emission"]) for x in d] == [[0.0, 0.0, 0.0]]


def test_call_read_only_func(m):
    buf = NDBuffer(m.device, m.Particle, 1)
    m.Particle.__init(float2(0, 0), float2(0.1, 0.2), _result=buf)
    nxt = m.Particle.calc_next_position(buf, 0.5)
    np.testing.assert_allclose(nxt.storage.to_numpy().view(np.float32)[:2], [0.05, 0.1], rtol=1e-6)


def test_call_mutable_func(m):
    buf = NDBuffer(m.device, m.Particle, 1)
    m.Particle.__init(float2(0, 0), float2(0.1, 0.2), _result=buf)
    m.Particle.update_position(buf, 0.5)
    np.testing.assert_allclose(buf.storage.to_numpy().view(np.float32)[:4], [0.05, 0.1, 0.1, 0.2], rtol=1e-6)


def test_read_back_with_global_func(m):
    buf = NDBuffer(m.device, m.Particle, 1)
    m.Particle.__init(float2(0, 0), float2(0, 0.2), _result=buf)
    m.Particle.update_position(buf, 0.5)
    res = NDBuffer(m.device, m["float2[4]"], 1)
    m.get_particle_quad(buf, _result=res)
    np.testing.assert_allclose(res.storage.to_numpy().view(np.float32).reshape(-1, 2),
                               [[-0.5, 0.6], [0.5, 0.6], [0.5, -0.4], [-0.5, -0.4]], rtol=1e-6, atol=1e-7)


def test_soa_particles(m):
    soa = {"position": NDBuffer(m.device, float2, 1), "velocity": float2(1, 0), "size": 0.5,
           "material": {"color": float3(1, 1, 1), "emission": float3(0, 0, 0)}}
    m.Particle.__init(float2(0, 0), float2(0.1, 0.2), _result=soa)
    m.Particle.update_position(soa, 0.5)
    # the constructor's velocity is not kept (a plain value is an input), so update uses float2(1, 0)
    np.testing.assert_allclose(soa["position"].storage.to_numpy().view(np.float32)[:2], [0.5, 0.0])
