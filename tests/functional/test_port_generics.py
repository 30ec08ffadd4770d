"""Behavioural port of SlangPy's test_generics.py: generic functions over vector<float,N>, float[N],
float[N][N] and matrix<float,N,N> given NDBuffers / Tensors of a type found with `module.layout`, and a
generic function found by its full specialisation (struct type arguments with arithmetic constraints)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def _roundtrip(device, container, slang_type, generic, elem_type, name):
    mod = spy.Module.load_from_source(device, name, f"{slang_type} get{generic}({slang_type} v) {{ return v; }}")
    et = mod.layout.find_type_by_name(elem_type)
    assert et is not None
    shape = (1024,)
    rng = np.random.default_rng(11)
    if container == "buffer":
        src = NDBuffer(device, dtype=et, shape=shape)
        src.copy_from_numpy(rng.random(src.storage.size // 4).astype(np.float32))
        res = mod.get(src)
    else:
        src = Tensor.empty(device, dtype=et, shape=shape)
        src.copy_from_numpy(rng.random(src.storage.size // 4).astype(np.float32))
        res = mod.get(src, _result="tensor")
    assert res.dtype == src.dtype
    a, b = src.to_numpy(), res.to_numpy()
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("container", ["buffer", "tensor"])
@pytest.mark.parametrize("dim", [1, 2, 3, 4])
def test_generic_vector(device, container, dim):
    _roundtrip(device, container, "vector<float,N>", "<let N: int>", f"float{dim}", f"port_gen_v{dim}")


@pytest.mark.parametrize("container", ["buffer", "tensor"])
def test_generic_array(device, container):
    _roundtrip(device, container, "float[N]", "<let N: int>", "float[2]", "port_gen_a")


@pytest.mark.parametrize("container", ["buffer", "tensor"])
def test_generic_2d_array(device, container):
    _roundtrip(device, container, "float[N][N]", "<let N: int>", "float[2][2]", "port_gen_a2")


@pytest.mark.parametrize("container", ["buffer", "tensor"])
def test_generic_matrix(device, container):
    _roundtrip(device, container, "matrix<float,N,N>", "<let N: int>", "float2x2", "port_gen_m")


LAYERS = """
interface ILayer<int N, int M> { float[M] eval(float[N] x); }
struct Dense<int N, int M> : ILayer<N, M>
{
    float[M] eval(float[N] x)
    {
        float[M] r;
        [ForceUnroll]
        for (int i = 0; i < M; ++i) r[i] = float(N * 100 + M);
        return r;
    }
};
float train<int L, E : ILayer<12, L>, D : ILayer<L + 6, 3>>(E e, D d)
{
    float[12] x;
    float[L + 6] y;
    return e.eval(x)[0] + d.eval(y)[2];
}
"""


class _Layer:
    def __init__(self, n, m):
        self.n, self.m = n, m

    def get_this(self):
        return {"_type": f"Dense<{self.n}, {self.m}> "}


def test_arithmetic_generic_arguments_explicit(device):
    mod = spy.Module.load_from_source(device, "port_gen_layers", LAYERS)
    enc, dec = _Layer(12, 8), _Layer(14, 3)
    f = mod.find_function(f"train<{enc.m}, {enc.get_this()['_type']}, {dec.get_this()['_type']}>")
    assert f is not None
    assert f(enc, dec) == 1208.0 + 1403.0
