"""The functional API, spy.Tensor, DLPack and warp-aggregated atomics on a real GPU (skipped without one).

The other functional test files (tests/functional/) run on the "auto" device of tests/conftest.py, which is
`spy.create_device()`: the CUDA device on a machine with a usable GPU, so they run there unchanged.  This file
adds what is CUDA-specific."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy

# Every test runs on the CUDA device (tests/conftest.py `device`; skipped without a usable GPU).
pytestmark = pytest.mark.parametrize("device", ["cuda"], indirect=True)


ATOMICS = r"""
RWStructuredBuffer<float> acc;
RWStructuredBuffer<half> hacc;
RWStructuredBuffer<double> dacc;
RWStructuredBuffer<uint> keys;
RWStructuredBuffer<float> lsum;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint n, uniform uint skip)
{
    uint i = tid.x;
    if (i >= n) return;
    if (skip != 0 && (i % 3) == 1) return;          // divergent: a third of the lanes leave early
    uint k = keys[i];
    float v = float(i % 7);
    if ((i & 4) != 0) {                              // two divergent branches add into the same keys
        InterlockedAdd(acc[k], v);
    } else {
        InterlockedAdd(acc[k], v + 1.0);
    }
    InterlockedAdd(hacc[k % 4], half(1.0));
    InterlockedAdd(dacc[k], double(i % 5));
    float local = 0.0;
    InterlockedAdd(local, v);                        // thread-private: added directly
    lsum[i] = local;
}
"""


@pytest.mark.parametrize("pattern", ["same", "distinct", "mod3", "random", "pairs"])
@pytest.mark.parametrize("n,skip", [(4099, 1), (1 << 16, 0), (37, 1)])
def test_warp_aggregated_atomic_add_exact(device, tmp_path, pattern, n, skip):
    p = tmp_path / "atom.slang"
    p.write_text(ATOMICS)
    k = device.create_compute_kernel(device.load_program(str(p), ["computeMain"]))
    rng = np.random.default_rng(n)
    nk = 64
    keys = {"same": np.zeros(n), "distinct": np.arange(n) % nk if n <= nk else np.arange(n) % nk,
            "mod3": np.arange(n) % 3, "random": rng.integers(0, nk, n),
            "pairs": (np.arange(n) // 2) % nk}[pattern].astype(np.uint32)
    UA = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    acc = device.create_buffer(size=4 * nk, usage=UA)
    hacc = device.create_buffer(size=2 * 4, usage=UA)
    dacc = device.create_buffer(size=8 * nk, usage=UA)
    kb = device.create_buffer(size=4 * n, usage=UA, data=keys)
    lsum = device.create_buffer(size=4 * n, usage=UA)
    k.dispatch([n, 1, 1], vars={"acc": acc, "hacc": hacc, "dacc": dacc, "keys": kb, "lsum": lsum}, n=n, skip=skip)
    i = np.arange(n)
    live = ~((i % 3) == 1) if skip else np.ones(n, bool)
    v = (i % 7).astype(np.float64) + np.where((i & 4) != 0, 0.0, 1.0)
    want = np.bincount(keys[live], weights=v[live], minlength=nk)
    np.testing.assert_array_equal(acc.to_numpy().view(np.float32).astype(np.float64), want)
    wantd = np.bincount(keys[live], weights=(i % 5)[live].astype(np.float64), minlength=nk)
    np.testing.assert_array_equal(dacc.to_numpy().view(np.float64), wantd)
    wanth = np.bincount(keys[live] % 4, minlength=4).astype(np.float64)
    got_h = hacc.to_numpy().view(np.float16).astype(np.float64)
    if wanth.max() <= 2048:                       # exactly representable in half
        np.testing.assert_array_equal(got_h, wanth)
    ls = lsum.to_numpy().view(np.float32)
    np.testing.assert_array_equal(ls[live], (i % 7)[live].astype(np.float32))


POLY = """
[Differentiable]
float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }
"""


def test_functional_poly_fwd_bwds_broadcast_grads(device):
    m = spy.Module.load_from_source(device, "cpoly", POLY)
    n = 100003
    xs = (np.arange(n) % 9 - 4).astype(np.float32)
    x = spy.Tensor.from_numpy(device, xs).with_grads(zero=True)
    a = spy.Tensor.from_numpy(device, np.array([2.0], np.float32)).with_grads(zero=True)
    y = m.poly(a, 8.0, -1.0, x)
    np.testing.assert_array_equal(y.to_numpy(), 2 * xs * xs + 8 * xs - 1)
    y = y.with_grads()
    y.grad.copy_from_numpy(np.ones(n, np.float32))
    m.poly.bwds(a, 8.0, -1.0, x, y)
    np.testing.assert_array_equal(x.grad.to_numpy(), 4 * xs + 8)
    # d/da = sum(x^2): integers, exact in float32 (< 2^24) whatever the order of the atomic adds
    assert a.grad.to_numpy()[0] == float(np.sum(xs.astype(np.float64) ** 2))


def test_functional_numpy_args_and_refs(device):
    m = spy.Module.load_from_source(device, "cnp", """
void twice(float x, out float y) { y = 2 * x; }
float add(float a, float b) { return a + b; }
void inc(inout int v) { v += 1; }
""")
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    m.twice(x, y)
    np.testing.assert_array_equal(y, 2 * x)
    assert m.add(1.5, 2.0) == 3.5
    r = spy.ValueRef(41)
    m.inc(r)
    assert r.value == 42
    np.testing.assert_array_equal(m.add.return_type(np.ndarray)(x, x[::-1].copy()), np.full(10, 9, np.float32))


def test_tensor_views_and_fill(device):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = spy.Tensor.from_numpy(device, a)
    assert t.device is device
    np.testing.assert_array_equal(t[1:3, ::2].to_numpy(), a[1:3, ::2])
    np.testing.assert_array_equal(spy.Tensor.ones(device, (5,), float).to_numpy(), np.ones(5))
    t.clear()
    assert not t.to_numpy().any()
    g = t.with_grads()
    assert g.grad.device is device


def test_dlpack_torch_roundtrip(device):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    t = spy.Tensor.from_numpy(device, np.arange(12, dtype=np.float32).reshape(3, 4))
    tt = torch.from_dlpack(t)
    assert tt.is_cuda and tuple(tt.shape) == (3, 4)
    np.testing.assert_array_equal(tt.cpu().numpy(), np.arange(12).reshape(3, 4))
    tt.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.to_numpy(), 2 * np.arange(12).reshape(3, 4))
    src = torch.arange(10, dtype=torch.float32, device="cuda") * 3
    s = spy.Tensor.from_dlpack(src, device=device)
    np.testing.assert_array_equal(s.to_numpy(), np.arange(10) * 3)
    m = spy.Module.load_from_source(device, "cdl", "float sq(float x) { return x * x; }")
    np.testing.assert_array_equal(m.sq(s).to_numpy(), (np.arange(10) * 3.0) ** 2)


def test_dlpack_cupy_roundtrip(device):
    cp = pytest.importorskip("cupy")
    try:
        c = cp.arange(6, dtype=cp.float32)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"cupy unusable: {e}")
    s = spy.Tensor.from_dlpack(c, device=device)
    np.testing.assert_array_equal(s.to_numpy(), np.arange(6))
    t = spy.Tensor.from_numpy(device, np.arange(5, dtype=np.int32))
    np.testing.assert_array_equal(cp.asnumpy(cp.from_dlpack(t)), np.arange(5))
