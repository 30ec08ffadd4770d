"""The per-signature fast plan of a functional call (functional/fastcall.py) and the `__call__` lookup by the
arguments as given (function.py): from the second call of a signature on the CPU device, a call runs the
plan.  These tests check its values against numpy (sizes below, at and above the calling thread's 4 groups
and the unit-stride threshold), that every result is a fresh tensor (never memory a live result holds), that
errors still name the argument (shape mismatch, a scalar that does not fit), `_result=`, broadcasting,
`.bwds` gradients against the analytic derivative, `return_type`, and calls from several Python threads.
The values tests run on CUDA too (the plan packs the same block and launches through dispatch_block), and on
a CPU device that stages host data as a GPU device does."""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import slangjit as spy
from slangjit.functional.binding import UNIT_MIN_THREADS

SRC = r"""
[Differentiable]
float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }
int iscale(int k, int v) { return k * v; }
float add2(float x, float y) { return x + y; }
"""

CPU_AND_CUDA = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


@pytest.fixture
def m(device):
    return spy.Module.load_from_source(device, "fastcall_t", SRC)


def _cd(node):
    (cd,) = node._cache.values()
    return cd


def _t(device, a):
    return spy.Tensor.from_numpy(device, np.asarray(a))


@CPU_AND_CUDA
@pytest.mark.parametrize("n", [1, 3, 32, 33, 95, 96, 97, 128, 129, 1000, UNIT_MIN_THREADS + 5])
def test_values_every_size(m, device, n):
    rng = np.random.default_rng(n)
    for it in range(3):          # the first call builds the plan, the next ones run it
        x = rng.integers(-8, 9, n).astype(np.float32)
        a, b, c = int(rng.integers(-4, 5)), float(rng.integers(-4, 5)), -1
        r = m.poly(a=a, b=b, c=c, x=_t(device, x))
        np.testing.assert_array_equal(r.to_numpy(), (a * x * x + b * x + c).astype(np.float32), err_msg=f"it={it}")
    cd = _cd(m.poly)
    assert cd._fast_call is not None                 # a GPU's calls launch through dispatch_block
    # n, the call shape, a, b, c, x's address / offset / stride and the result's, packed at once
    assert re.sub(r"\d*x", "", cd._fast_pack_format) == "<iifffQiiQii"
    if device.type == spy.DeviceType.cpu:
        assert cd.last_unit == (n >= UNIT_MIN_THREADS)


def test_positional_and_int_values(m, device):
    v = np.arange(-5, 6, dtype=np.int32)
    for k in (3, -7, 0):
        r = m.iscale(k, _t(device, v))
        np.testing.assert_array_equal(r.to_numpy(), k * v)
    assert _cd(m.iscale)._fast_call is not None


def test_result_is_always_fresh(m, device):
    x = _t(device, np.arange(8, dtype=np.float32))
    r1 = m.poly(a=1, b=0, c=0, x=x)
    r2 = m.poly(a=2, b=0, c=0, x=x)
    held = [m.poly(a=float(i), b=0, c=0, x=x) for i in range(20)]
    view = r2.to_numpy()
    addrs = {r.storage._addr for r in [r1, r2] + held}
    assert len(addrs) == 22                          # no two live results share memory
    for _ in range(20):
        m.poly(a=100, b=0, c=0, x=x)                 # results dropped at once: their memory may come back
    xs = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(r1.to_numpy(), xs * xs)
    np.testing.assert_array_equal(r2.to_numpy(), 2 * xs * xs)
    np.testing.assert_array_equal(view, 2 * xs * xs)
    for i, r in enumerate(held):
        np.testing.assert_array_equal(r.to_numpy(), i * xs * xs)


def test_shape_mismatch_names_argument(m, device):
    a, b = _t(device, np.ones(4, np.float32)), _t(device, np.ones(5, np.float32))
    m.add2(a, a)                                     # the plan exists from the second call on
    m.add2(a, a)
    assert _cd(m.add2)._fast_call is not None
    with pytest.raises(ValueError, match=r"Shape mismatch for y between value \(5\) and call \(4\)"):
        m.add2(a, b)
    with pytest.raises(ValueError, match=r"Shape mismatch for y between value \(5\) and call \(4\)"):
        m.add2(x=a, y=b)
    np.testing.assert_array_equal(m.add2(a, a).to_numpy(), np.full(4, 2, np.float32))   # still works


def _error_of(call):
    with pytest.raises((ValueError, OverflowError, TypeError)) as ei:
        call()
    return str(ei.value)


def test_scalar_that_does_not_fit_names_argument(m, device):
    x = _t(device, np.ones(4, np.float32))
    v = _t(device, np.ones(4, np.int32))
    # the general path's message (first call of a fresh module: no plan) ...
    fresh = spy.Module.load_from_source(device, "fastcall_t2", SRC)
    want_f = _error_of(lambda: fresh.poly(a=1e39, b=0.0, c=0.0, x=x))
    want_i = _error_of(lambda: fresh.iscale(2 ** 40, v))
    assert want_f.startswith("argument 'a': value 1e+39 does not fit a float")
    assert want_i == "argument 'k': value 1099511627776 is out of range for int"
    # ... is the fast path's
    m.poly(a=1.0, b=0.0, c=0.0, x=x)
    m.poly(a=1.0, b=0.0, c=0.0, x=x)
    m.iscale(2, v)
    m.iscale(2, v)
    assert _cd(m.poly)._fast_call is not None and _cd(m.iscale)._fast_call is not None
    assert _error_of(lambda: m.poly(a=1e39, b=0.0, c=0.0, x=x)) == want_f
    assert _error_of(lambda: m.iscale(2 ** 40, v)) == want_i
    np.testing.assert_array_equal(m.iscale(3, v).to_numpy(), np.full(4, 3, np.int32))


@CPU_AND_CUDA
def test_result_argument_and_broadcast(m, device):
    xs = np.arange(6, dtype=np.float32)
    x = _t(device, xs)
    one = _t(device, np.array([10], np.float32))
    for it in range(3):
        out = spy.Tensor.empty(device, (6,), "float")
        r = m.add2(x, one, _result=out)
        assert r is out
        np.testing.assert_array_equal(out.to_numpy(), xs + 10)
        r2 = m.add2(one, x)
        np.testing.assert_array_equal(r2.to_numpy(), xs + 10)
        r3 = m.add2(x, 0.5)
        np.testing.assert_array_equal(r3.to_numpy(), xs + 0.5)


@CPU_AND_CUDA
def test_bwds_gradients(m, device):
    rng = np.random.default_rng(3)
    for n in (5, 200):
        xs = rng.uniform(-2, 2, n).astype(np.float32)
        x = _t(device, xs).with_grads(zero=True)
        res = m.poly(a=2, b=8, c=-1, x=x).with_grads()
        res.grad.copy_from_numpy(np.ones(n, np.float32))
        for k in range(1, 4):                        # gradients accumulate: k times the derivative
            m.poly.bwds(a=2, b=8, c=-1, x=x, _result=res)
            np.testing.assert_allclose(x.grad.to_numpy(), k * (4 * xs.astype(np.float64) + 8), rtol=1e-6)


def test_return_type_numpy(m, device):
    x = _t(device, np.arange(4, dtype=np.float32))
    f = m.poly.return_type(np.ndarray)
    for _ in range(3):
        r = f(a=1, b=1, c=1, x=x)
        assert isinstance(r, np.ndarray)
        np.testing.assert_array_equal(r, np.arange(4) ** 2 + np.arange(4) + 1)
    for _ in range(2):
        r = m.poly(a=1, b=1, c=1, x=x, _result="numpy")
        assert isinstance(r, np.ndarray)


def test_python_threads(m, device):
    xs = [np.arange(i + 1, dtype=np.float32) for i in range(8)]
    ts = [_t(device, a) for a in xs]
    m.poly(a=1, b=0, c=0, x=ts[0])
    errors = []

    def worker(k):
        try:
            for i in range(300):
                j = (i + k) % 8
                r = m.poly(a=float(k), b=1.0, c=0.0, x=ts[j])
                np.testing.assert_array_equal(r.to_numpy(), k * xs[j] * xs[j] + xs[j])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    th = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors, errors[0]


def test_staged_device_values():
    """The GPU path's packing without a GPU: a CPU device that stages host data (functional_staged) runs
    the plan through dispatch_block."""
    dev = spy.create_device(type=spy.DeviceType.cpu)
    dev.functional_staged = True
    mod = spy.Module.load_from_source(dev, "fastcall_staged", SRC)
    rng = np.random.default_rng(9)
    for n in (1, 7, 300):
        for _ in range(3):
            x = rng.integers(-8, 9, n).astype(np.float32)
            y = rng.integers(-8, 9, n).astype(np.float32)
            r = mod.add2(_t(dev, x), _t(dev, y))
            np.testing.assert_array_equal(r.to_numpy(), x + y)
            r = mod.poly(a=2, b=-1, c=3, x=_t(dev, x))
            np.testing.assert_array_equal(r.to_numpy(), 2 * x * x - x + 3)
    assert _cd(mod.add2)._fast_call is not None and _cd(mod.poly)._fast_call is not None
