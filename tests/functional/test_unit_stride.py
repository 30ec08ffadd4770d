"""The unit-stride variant of generated kernels (CPU): big calls whose every view is contiguous in call order run
a kernel that addresses elements as offset + flat index (64-bit) over the full groups, vectorised across threads
(`#pragma omp simd`, CpuOptions.simd_threads), and the general kernel over the last partial group.

Values are checked against numpy (float64 references where rounding could differ; small integers where every
evaluation order is exact), for sizes with and without a partial group, offsets, 2-D calls, gradients
accumulated into existing values, and the cases that must keep the general kernel (strided / transposed views,
broadcast tensors, two arguments accumulating into one gradient, small calls)."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.functional.binding import UNIT_MIN_THREADS

SRC = r"""
[Differentiable]
float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }
[Differentiable]
float mad3(float a, float b, float c) { return a * b + c; }
float3 scale3(float3 v, float s) { return v * s; }
int iadd(int a, int b) { return a + b * 3; }
void split(float a, out float lo, inout float acc) { lo = a - 1; acc = acc + a; }
"""

N = UNIT_MIN_THREADS + 45          # a partial last group (32 threads per group on the CPU)


@pytest.fixture
def m():
    return spy.Module.load_from_source(spy.create_device(type=spy.DeviceType.cpu), "unit_stride", SRC)


def _cd(node):
    (cd,) = node._cache.values()
    return cd


def _ints(rng, shape):
    return rng.integers(-8, 9, shape).astype(np.float32)


@pytest.mark.parametrize("n", [N, UNIT_MIN_THREADS, UNIT_MIN_THREADS * 2 + 31])
def test_forward_values_and_variant(m, n):
    rng = np.random.default_rng(0)
    xs = rng.uniform(-2, 2, n).astype(np.float32)
    x = spy.Tensor.from_numpy(m.device, xs)
    y = m.poly(0.5, -1.25, 3.0, x)
    cd = _cd(m.poly)
    assert cd.last_unit
    assert "#pragma omp simd" in cd._unit_kerns[()][0].compiled.source
    assert "#pragma omp simd" not in cd.kernel.compiled.source
    want = (np.float32(0.5) * xs * xs + np.float32(-1.25) * xs) + np.float32(3.0)   # the same float32 order
    np.testing.assert_array_equal(y.to_numpy(), want)
    # _result= into an existing tensor; every element written (no stale values from the first call)
    out = spy.Tensor.from_numpy(m.device, np.full(n, np.nan, np.float32))
    m.poly(0.5, -1.25, 3.0, x, _result=out)
    np.testing.assert_array_equal(out.to_numpy(), want)


def test_small_call_keeps_general_kernel(m):
    xs = np.arange(UNIT_MIN_THREADS - 1, dtype=np.float32)
    y = m.poly(1.0, 2.0, 3.0, spy.Tensor.from_numpy(m.device, xs))
    assert not _cd(m.poly).last_unit
    np.testing.assert_array_equal(y.to_numpy(), xs * xs + 2 * xs + 3)


def test_bwds_accumulates_into_existing_gradients(m):
    rng = np.random.default_rng(1)
    xs = rng.uniform(-1, 1, N).astype(np.float32)
    g0 = rng.uniform(-1, 1, N).astype(np.float32)
    gy = rng.uniform(-1, 1, N).astype(np.float32)
    x = spy.Tensor.from_numpy(m.device, xs).with_grads()
    x.grad.copy_from_numpy(g0)
    y = m.poly(2.0, 8.0, -1.0, x).with_grads()
    y.grad.copy_from_numpy(gy)
    m.poly.bwds(2.0, 8.0, -1.0, x, y)
    cd = _cd(m.poly.bwds)
    assert cd.last_unit
    want = g0.astype(np.float64) + gy.astype(np.float64) * (4.0 * xs.astype(np.float64) + 8.0)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=2e-6, atol=2e-6)
    m.poly.bwds(2.0, 8.0, -1.0, x, y)                          # a second call adds again
    want2 = want + gy.astype(np.float64) * (4.0 * xs.astype(np.float64) + 8.0)
    np.testing.assert_allclose(x.grad.to_numpy(), want2, rtol=4e-6, atol=4e-6)


def test_offset_view_and_2d_call(m):
    rng = np.random.default_rng(2)
    base = _ints(rng, (N + 100,))
    t = spy.Tensor.from_numpy(m.device, base)
    v = t[37:37 + N]                                            # contiguous, offset 37
    r = m.mad3(v, 2.0, 1.0)
    assert _cd(m.mad3).last_unit
    np.testing.assert_array_equal(r.to_numpy(), base[37:37 + N] * 2 + 1)
    a, b, c = (_ints(rng, (300, 257)) for _ in range(3))
    m2 = spy.Module.load_from_source(m.device, "unit_stride_2d", SRC)
    r2 = m2.mad3(*(spy.Tensor.from_numpy(m.device, z) for z in (a, b, c)))
    assert _cd(m2.mad3).last_unit
    np.testing.assert_array_equal(r2.to_numpy(), a * b + c)


def test_strided_transposed_and_broadcast_views_keep_general_kernel(m):
    rng = np.random.default_rng(3)
    base = _ints(rng, (2 * N,))
    t = spy.Tensor.from_numpy(m.device, base)
    r = m.mad3(t[::2], 3.0, 1.0)                               # every other element
    assert not _cd(m.mad3).last_unit
    np.testing.assert_array_equal(r.to_numpy(), base[::2] * 3 + 1)
    a = _ints(rng, (257, 300))
    b = _ints(rng, (300, 257))
    m2 = spy.Module.load_from_source(m.device, "unit_stride_t", SRC)
    ta = spy.Tensor.from_numpy(m.device, a)
    r2 = m2.mad3(ta.view((300, 257), (1, 300)), spy.Tensor.from_numpy(m.device, b), 1.0)   # transposed
    assert not _cd(m2.mad3).last_unit
    np.testing.assert_array_equal(r2.to_numpy(), a.T * b + 1)
    m3 = spy.Module.load_from_source(m.device, "unit_stride_b", SRC)
    one = spy.Tensor.from_numpy(m.device, np.array([5.0], np.float32))
    r3 = m3.mad3(one, spy.Tensor.from_numpy(m.device, base[:N].copy()), 1.0)   # shape (1,) broadcast
    assert not _cd(m3.mad3).last_unit
    np.testing.assert_array_equal(r3.to_numpy(), 5 * base[:N] + 1)


def test_shared_gradient_storage_keeps_atomic_kernel(m):
    """Two arguments accumulating into one gradient tensor: atomic adds, never the unit variant."""
    rng = np.random.default_rng(4)
    xs = _ints(rng, (N,))
    x = spy.Tensor.from_numpy(m.device, xs).with_grads(zero=True)
    y = m.mad3(x, x, 0.0).with_grads()
    y.grad.copy_from_numpy(np.ones(N, np.float32))
    m.mad3.bwds(x, x, 0.0, y)
    assert not _cd(m.mad3.bwds).last_unit
    np.testing.assert_array_equal(x.grad.to_numpy(), 2 * xs)


def test_vectors_ints_numpy_and_out_params(m):
    rng = np.random.default_rng(5)
    v = rng.uniform(-1, 1, (N, 3)).astype(np.float32)
    r = m.scale3(v, 2.0, _result=np.zeros((N, 3), np.float32))     # numpy arrays, float3 elements:
    assert not _cd(m.scale3).last_unit                  # a call stride of 3 floats keeps the general kernel
    np.testing.assert_array_equal(r, v * 2)
    a = rng.integers(-1000, 1000, N).astype(np.int32)
    b = rng.integers(-1000, 1000, N).astype(np.int32)
    ri = m.iadd(spy.Tensor.from_numpy(m.device, a), spy.Tensor.from_numpy(m.device, b))
    assert _cd(m.iadd).last_unit
    np.testing.assert_array_equal(ri.to_numpy(), a + b * 3)
    an = _ints(rng, (N,))
    rn = m.mad3(spy.Tensor.from_numpy(m.device, an), 2.0, 0.5)
    np.testing.assert_array_equal(rn.to_numpy(), an * 2 + 0.5)
    lo = spy.Tensor.from_numpy(m.device, np.zeros(N, np.float32))
    acc0 = _ints(rng, (N,))
    acc = spy.Tensor.from_numpy(m.device, acc0.copy())
    m.split(spy.Tensor.from_numpy(m.device, an), lo, acc)
    assert _cd(m.split).last_unit
    np.testing.assert_array_equal(lo.to_numpy(), an - 1)
    np.testing.assert_array_equal(acc.to_numpy(), acc0 + an)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_worker_counts(m, monkeypatch, threads):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", threads)
    rng = np.random.default_rng(6)
    n = 4 * UNIT_MIN_THREADS + 7
    a, b = _ints(rng, (n,)), _ints(rng, (n,))
    r = m.mad3(spy.Tensor.from_numpy(m.device, a), spy.Tensor.from_numpy(m.device, b), 2.0)
    assert _cd(m.mad3).last_unit
    np.testing.assert_array_equal(r.to_numpy(), a * b + 2)


# ----------------------------------------------------------------------------- big results: reused storage

from slangjit.functional import tensorbase as _tb  # noqa: E402

BIG = (1 << 20) // 4 + 3                # float results of more than POOL_MIN_BYTES


@pytest.fixture
def pool():
    _tb.clear_buffer_pool()
    yield _tb
    _tb.clear_buffer_pool()


def test_dead_result_storage_is_reused_and_fully_written(m, pool):
    rng = np.random.default_rng(7)
    a, b = _ints(rng, (BIG,)), _ints(rng, (BIG,))
    ta, tb = spy.Tensor.from_numpy(m.device, a), spy.Tensor.from_numpy(m.device, b)
    r1 = m.mad3(ta, tb, 1.0)
    assert type(r1.storage).__name__ == "_PooledBuffer"
    np.testing.assert_array_equal(r1.to_numpy(), a * b + 1)
    addr = r1.storage.device_address
    del r1
    r2 = m.mad3(tb, ta, -3.0)                                   # same size: the same memory again
    assert r2.storage.device_address == addr
    np.testing.assert_array_equal(r2.to_numpy(), b * a - 3)


def test_reuse_never_aliases_live_arrays(m, pool):
    rng = np.random.default_rng(8)
    a = _ints(rng, (BIG,))
    ta = spy.Tensor.from_numpy(m.device, a)
    r1 = m.mad3(ta, 2.0, 0.0)
    addr = r1.storage.device_address
    view = r1.storage._mem.view(np.float32)[:BIG]               # a live view of the storage's memory
    exported = np.from_dlpack(m.mad3(ta, 3.0, 0.0))             # a DLPack consumer of a result that died here
    del r1
    r2 = m.mad3(ta, 5.0, 0.0)
    r3 = m.mad3(ta, 7.0, 0.0)
    assert addr not in (r2.storage.device_address, r3.storage.device_address)
    np.testing.assert_array_equal(view, a * 2)                   # untouched by the later calls
    np.testing.assert_array_equal(exported, a * 3)
    np.testing.assert_array_equal(r2.to_numpy(), a * 5)
    np.testing.assert_array_equal(r3.to_numpy(), a * 7)


def test_results_the_kernel_may_not_fill_stay_zeroed(m, pool):
    """A call with `_thread_count` (fewer threads than elements) and a struct result keep zeroed storage."""
    src = r"""
struct P { float x; int16_t k; };
P mk(float v) { P p; p.x = v; p.k = int16_t(1); return p; }
float twice(float v) { return v * 2; }
"""
    mm = spy.Module.load_from_source(m.device, "unit_stride_fill", src)
    v = spy.Tensor.from_numpy(m.device, np.ones(BIG, np.float32))
    r = mm.mk(v)
    (cd,) = mm.mk._cache.values()
    assert not cd.fills_result and type(r.storage).__name__ != "_PooledBuffer"
    assert mm.twice.resolve(v).fills_result
