"""Behavioural port of SlangPy's test_difftensor_load_variants.py and test_difftensor_interface_bwd.py:
DiffTensor.load_once / load_uniform against load (values and gradients), and gradients flowing through the
array / vector load and store requirements of IDiffTensor / IWDiffTensor / IRWDiffTensor parameters, called
through interface-typed parameters and through generic functions constrained by those interfaces."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

LOADS = """
import slangpy;
[Differentiable]
void sq_once(DiffTensor<float, 1> x, WDiffTensor<float, 1> r, int i) { float v = x.load_once(i); r.store(i, v * v); }
[Differentiable]
void sq_load(DiffTensor<float, 1> x, WDiffTensor<float, 1> r, int i) { float v = x.load(i); r.store(i, v * v); }
[Differentiable]
void bc_uniform(DiffTensor<float, 1> w, WDiffTensor<float, 1> r, int i) { r.store(i, w.load_uniform(0)); }
[Differentiable]
void bc_load(DiffTensor<float, 1> w, WDiffTensor<float, 1> r, int i) { r.store(i, w.load(0)); }
"""

N = 4
IFACE = """
import slangpy;
[Differentiable]
void ld_arr(IDiffTensor<float, 1> x, WDiffTensor<float, 1> o, int i) { o.store(int[1](i), x.load(int[1](i)) * 3.0f); }
[Differentiable]
void ld_vec(IDiffTensor<float, 1> x, WDiffTensor<float, 1> o, int i) { o.store(int[1](i), x.load(vector<int, 1>(i)) * 3.0f); }
[Differentiable]
void ld_gen_impl<T : IDiffTensor<float, 1>>(T x, WDiffTensor<float, 1> o, int i) { o.store(int[1](i), x.load(int[1](i)) * 3.0f); }
[Differentiable]
void ld_gen(DiffTensor<float, 1> x, WDiffTensor<float, 1> o, int i) { ld_gen_impl(x, o, i); }
[Differentiable]
void rw_ld_arr(IRWDiffTensor<float, 1> x, WDiffTensor<float, 1> o, int i) { o.store(int[1](i), x.load(int[1](i)) * 3.0f); }
[Differentiable]
void rw_ld_vec(IRWDiffTensor<float, 1> x, WDiffTensor<float, 1> o, int i) { o.store(int[1](i), x.load(vector<int, 1>(i)) * 3.0f); }
[Differentiable]
void st_arr(DiffTensor<float, 1> x, IWDiffTensor<float, 1> o, int i) { o.store(int[1](i), x.load(int[1](i)) * 3.0f); }
[Differentiable]
void st_vec(DiffTensor<float, 1> x, IWDiffTensor<float, 1> o, int i) { o.store(vector<int, 1>(i), x.load(int[1](i)) * 3.0f); }
[Differentiable]
void st_gen_impl<T : IWDiffTensor<float, 1>>(DiffTensor<float, 1> x, T o, int i) { o.store(int[1](i), x.load(int[1](i)) * 3.0f); }
[Differentiable]
void st_gen(DiffTensor<float, 1> x, WDiffTensor<float, 1> o, int i) { st_gen_impl(x, o, i); }
[Differentiable]
void rw_st_arr(DiffTensor<float, 1> x, IRWDiffTensor<float, 1> o, int i) { o.store(int[1](i), x.load(int[1](i)) * 3.0f); }
[Differentiable]
void rw_st_vec(DiffTensor<float, 1> x, IRWDiffTensor<float, 1> o, int i) { o.store(vector<int, 1>(i), x.load(int[1](i)) * 3.0f); }
"""
IFACE_FUNCS = ["ld_arr", "ld_vec", "ld_gen", "rw_ld_arr", "rw_ld_vec", "st_arr", "st_vec", "st_gen", "rw_st_arr",
               "rw_st_vec"]


@pytest.fixture(scope="module")
def loads(device):
    return spy.Module.load_from_source(device, "port_dt_loads", LOADS)


def _result(device, n):
    r = Tensor.empty(device, shape=(n,), dtype=float).with_grads()
    r.grad_in.storage.copy_from_numpy(np.ones(n, np.float32))
    return r


def _run_square(device, fn, xs):
    x = Tensor.from_numpy(device, xs).with_grads()
    r = _result(device, len(xs))
    for i in range(len(xs)):
        fn(x, r, i)
    np.testing.assert_allclose(r.to_numpy(), xs * xs, rtol=1e-6)
    for i in range(len(xs)):
        fn.bwds(x, r, i)
    return x.grad_out.to_numpy()


def test_load_once_square_correctness(device, loads):
    xs = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    np.testing.assert_allclose(_run_square(device, loads.sq_once, xs), 2 * xs, atol=1e-5)


def test_load_once_matches_load(device, loads):
    xs = np.array([1.0, 2.0, 3.0], np.float32)
    a = _run_square(device, loads.sq_once, xs)
    b = _run_square(device, loads.sq_load, xs)
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(b, 2 * xs, atol=1e-5)


def _run_bcast(device, fn, n):
    w = Tensor.from_numpy(device, np.array([3.0], np.float32)).with_grads()
    r = _result(device, n)
    for i in range(n):
        fn(w, r, i)
    np.testing.assert_array_equal(r.to_numpy(), np.full(n, 3.0))
    for i in range(n):
        fn.bwds(w, r, i)
    return w.grad_out.to_numpy()


def test_load_uniform_broadcast_correctness(device, loads):
    np.testing.assert_allclose(_run_bcast(device, loads.bc_uniform, 5), [5.0], atol=1e-5)


def test_load_uniform_matches_load(device, loads):
    np.testing.assert_allclose(_run_bcast(device, loads.bc_uniform, 5), _run_bcast(device, loads.bc_load, 5),
                               atol=1e-5)


@pytest.fixture(scope="module")
def iface(device):
    return spy.Module.load_from_source(device, "port_dt_iface", IFACE)


@pytest.mark.parametrize("name", IFACE_FUNCS)
def test_interface_load_store_bwd(device, iface, name):
    f = iface.find_function(name)
    assert f is not None
    xs = np.arange(1, N + 1, dtype=np.float32)
    x = Tensor.from_numpy(device, xs).with_grads(zero=True)
    out = Tensor.zeros(device, shape=(N,), dtype=float).with_grads(zero=True)
    idx = Tensor.from_numpy(device, np.arange(N, dtype=np.int32))
    f(x, out, idx)
    np.testing.assert_allclose(out.to_numpy(), xs * 3.0)
    out.grad_in.storage.copy_from_numpy(np.ones(N, np.float32))
    f.bwds(x, out, idx)
    np.testing.assert_allclose(x.grad_out.to_numpy(), 3.0)
