"""The direct path of calls with torch tensors (slangjit/torch/fastpath.py): a cached call signature packs the
kernel's parameter block straight from the tensors, forward and .bwds.  Each test calls a signature several
times (the first call resolves it on the general path, later ones take the direct one), checks values against
numpy / analytic / float64 finite differences, checks that the direct path ran (launch_log) and that it gives
the same bits as the general path, and that the checks guarding a result still raise naming the argument."""
import threading

import numpy as np
import pytest
import torch

import slangjit as spy
from slangjit.torch import calls, launch_log
from torch_src import SRC, tdev

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

EXTRA = r"""
[Differentiable]
float2 rot2(float2 v, float t) { return float2(v.x * cos(t) - v.y * sin(t), v.x * sin(t) + v.y * cos(t)); }

[Differentiable]
double wsum(double a, double b, double w) { return w * a + (1.0 - w) * b * b; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "torch_fast", SRC + EXTRA)


def _plan(fn, *args, **kwargs):
    key, _ = calls._fast_key(fn, args, kwargs)
    return calls._PLANS.get(key)


def _paths(log, direction):
    return [e[2] for e in log.events if e[0] == direction and e[1] == "kernel"]


def _general(fn, *args, **kwargs):
    """The same call on the general path (the plan's direct path switched off for it)."""
    p = _plan(fn, *args, **kwargs)
    saved = p.fast
    p.fast = False
    try:
        return fn(*args, **kwargs)
    finally:
        p.fast = saved


def _poly_ref(a, b, c, x):
    return a * x * x + b * x + c


# ---- forward

def test_forward_values_and_path(m, device):
    d = tdev(device)
    f = m.polynomial
    for k in range(4):
        x = torch.linspace(-1, 1, 37 + k, device=d)
        with launch_log() as log:
            y = f(2.0, 8.0 - k, -1.0, x)              # values change between calls: packed per call
        np.testing.assert_allclose(y.cpu().numpy(), _poly_ref(2.0, 8.0 - k, -1.0, x.cpu().numpy()), rtol=1e-6,
                                   atol=1e-6)
        if k >= 1:
            assert _paths(log, "forward") == ["fast"]
    assert _plan(f, 2.0, 8.0, -1.0, x).fast


def test_fast_and_general_give_identical_bits(m, device):
    d = tdev(device)
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(1000, generator=g) * 4 - 2).to(d)
    f = m.polynomial
    for _ in range(2):
        f(1.5, -3.0, 0.25, x)
    y_fast = f(1.5, -3.0, 0.25, x)
    y_gen = _general(f, 1.5, -3.0, 0.25, x)
    assert torch.equal(y_fast, y_gen)


def test_strided_and_expanded_inputs(m, device):
    d = tdev(device)
    base = torch.arange(24, dtype=torch.float64, device=d).reshape(4, 6) / 7
    a = torch.tensor([0.5, -1.0, 2.0, 3.0, 0.25, 1.0], dtype=torch.float64, device=d).expand(4, 6)   # stride 0
    for x in (base, base[:, ::2].t(), base.t(), base[1:, 2:]):
        aa = a[:x.shape[0], :x.shape[1]] if x.shape == base.shape else torch.full_like(x, 0.5).expand_as(x)
        for _ in range(3):
            y = m.polyd(aa, 2.0, -1.0, x)
        ref = _poly_ref(aa.cpu().numpy(), 2.0, -1.0, x.cpu().numpy())
        np.testing.assert_allclose(y.cpu().numpy(), ref, rtol=1e-12)
        assert torch.equal(y, _general(m.polyd, aa, 2.0, -1.0, x))


def test_vector_elements_and_keywords(m, device):
    d = tdev(device)
    v = torch.randn(9, 2, generator=torch.Generator().manual_seed(1)).to(d)
    for t in (0.3, 0.7, -1.1):
        with launch_log() as log:
            r = m.rot2(v=v, t=t)
        vn = v.cpu().numpy()
        ref = np.stack([vn[:, 0] * np.cos(t) - vn[:, 1] * np.sin(t), vn[:, 0] * np.sin(t) + vn[:, 1] * np.cos(t)],
                       axis=1)
        np.testing.assert_allclose(r.cpu().numpy(), ref, rtol=1e-5, atol=1e-6)
    assert _paths(log, "forward") == ["fast"]


def test_scalar_and_empty_calls(m, device):
    d = tdev(device)
    for k in range(3):
        x = torch.tensor(1.0 + k, device=d)
        y = m.polynomial(2.0, 1.0, 0.5, x)
        assert y.shape == () and float(y) == pytest.approx(_poly_ref(2.0, 1.0, 0.5, 1.0 + k))
    for _ in range(3):
        y = m.polynomial(2.0, 1.0, 0.5, torch.empty(0, device=d))
        assert y.shape == (0,)


def test_out_and_result_tensors(m, device):
    d = tdev(device)
    x = torch.linspace(0, 1, 11, dtype=torch.float64, device=d)
    for _ in range(3):
        y = torch.empty_like(x)
        z = torch.empty_like(x)
        with launch_log() as log:
            m.split_out(x, y, z)
        np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() ** 2, rtol=1e-12)
        np.testing.assert_allclose(z.cpu().numpy(), 3 * x.cpu().numpy(), rtol=1e-12)
    assert _paths(log, "forward") == ["fast"]
    xf = torch.linspace(0, 1, 11, device=d)
    for _ in range(3):
        r = torch.full_like(xf, float("nan"))
        out = m.polynomial(1.0, 2.0, 3.0, xf, _result=r)
        assert out is r
        np.testing.assert_allclose(r.cpu().numpy(), _poly_ref(1.0, 2.0, 3.0, xf.cpu().numpy()), rtol=1e-6)


# ---- the checks still guard a result on the direct path

def test_checks_raise_naming_the_argument(m, device):
    d = tdev(device)
    f = m.polynomial
    x = torch.ones(8, device=d)
    for _ in range(3):
        f(torch.ones(1, device=d), 2.0, 3.0, x)
    assert _plan(f, torch.ones(1, device=d), 2.0, 3.0, x).fast
    with pytest.raises(ValueError, match="Shape mismatch"):
        f(torch.ones(3, device=d), 2.0, 3.0, x)            # a new set of shapes: broadcast checked
    with pytest.raises(ValueError, match="_result"):
        f(torch.ones(1, device=d), 2.0, 3.0, x, _result=torch.empty(1, device=d).expand(8))
    with pytest.raises(Exception, match="Argument 'x'.*double"):
        f(torch.ones(1, device=d), 2.0, 3.0, x.double())   # float64 into a float parameter
    with pytest.raises(TypeError, match="bfloat16"):
        f(torch.ones(1, device=d), 2.0, 3.0, x.bfloat16())
    v = torch.ones(4, 3, dtype=torch.float64, device=d)
    for _ in range(3):
        m.normalize3(v)
    with pytest.raises(ValueError, match="'v'"):
        m.normalize3(torch.ones(4, 4, dtype=torch.float64, device=d))   # element dims: float3 wants 3
    xs = torch.ones(4, device=d)
    for _ in range(2):
        m.sq_inout(xs.clone())
    with pytest.raises(ValueError, match="inout"):
        m.sq_inout(xs.clone().requires_grad_(True) * 1.0)
    with pytest.raises(ValueError, match="overlapping|stride-0"):
        y = torch.empty(4, dtype=torch.float64, device=d)
        m.split_out(torch.ones(4, dtype=torch.float64, device=d), y, torch.empty(1, dtype=torch.float64,
                                                                                   device=d).expand(4))


# ---- backward

def test_backward_values_paths_and_launches(m, device):
    d = tdev(device)
    f = m.polynomial
    a = torch.tensor([1.5], device=d, requires_grad=True)         # broadcast: atomic adds into zeros
    x = torch.linspace(-2, 2, 301, device=d, requires_grad=True)  # distinct: a plain store into torch.empty
    for k in range(4):
        a.grad = x.grad = None
        with launch_log() as log:
            f(a, 8.0, -1.0, x).sum().backward()                  # grad_output: an expanded stride-0 tensor
        xn = x.detach().cpu().numpy()
        np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * 1.5 * xn + 8.0, rtol=1e-5, atol=1e-5)
        assert a.grad.item() == pytest.approx(float((xn * xn).sum()), rel=1e-5)
    assert _paths(log, "forward") == ["fast"] and _paths(log, "backward") == ["fast"]
    s = log.summary()
    assert s["forward"]["launches"] == 1
    assert s["backward"]["kernels"] == 1 and s["backward"]["fills"] == 1 and s["backward"]["copies"] == 0
    # bytes: forward reads x and a, writes y; backward reads x, a and one element of the expanded gradient,
    # writes x.grad once (no read), and a.grad (atomic: read + write) after its fill
    n = 301 * 4
    assert s["forward"]["read"] == n + 4 and s["forward"]["written"] == n
    assert s["backward"]["read"] == n + 4 + 4 + 4 and s["backward"]["written"] == n + 4 + 4


def test_backward_fresh_gradient_is_taken_without_a_copy(m, device):
    d = tdev(device)
    x = torch.linspace(-1, 1, 64, device=d, requires_grad=True)
    gy = torch.ones(64, device=d)
    for _ in range(3):
        x.grad = None
        m.polynomial(2.0, 1.0, 0.0, x).backward(gy)
    x.grad = None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        m.polynomial(2.0, 1.0, 0.0, x).backward(gy)
    names = [e.name for e in prof.events()]
    assert "aten::copy_" not in names and "aten::zero_" not in names and "aten::fill_" not in names, names
    np.testing.assert_allclose(x.grad.cpu().numpy(), 4 * x.detach().cpu().numpy() + 1.0, rtol=1e-5, atol=1e-6)
    # .sum().backward(): the incoming gradient is an expanded stride-0 tensor, read in place (not materialised)
    x.grad = None
    y = m.polynomial(2.0, 1.0, 0.0, x).sum()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        y.backward()
    names = [e.name for e in prof.events()]
    assert not {"aten::copy_", "aten::contiguous", "aten::clone"} & set(names), names
    # the only fill is torch's ones_like for the 0-dim y
    assert [e.input_shapes[0] for e in prof.events() if e.name == "aten::fill_"] == [[]]
    np.testing.assert_allclose(x.grad.cpu().numpy(), 4 * x.detach().cpu().numpy() + 1.0, rtol=1e-5, atol=1e-6)


def test_non_contiguous_grad_output(m, device):
    d = tdev(device)
    x = torch.linspace(-1, 1, 50, dtype=torch.float64, device=d, requires_grad=True)
    big = torch.linspace(0, 3, 100, dtype=torch.float64, device=d)
    for _ in range(3):
        x.grad = None
        m.polyd(0.5, -2.0, 1.0, x).backward(big[::2])
        np.testing.assert_allclose(x.grad.cpu().numpy(),
                                   (x.detach().cpu().numpy() - 2.0) * big[::2].cpu().numpy(), rtol=1e-12)


def test_fast_and_general_backward_identical(m, device):
    d = tdev(device)
    g = torch.Generator().manual_seed(7)
    a0 = torch.rand(1, 5, generator=g, dtype=torch.float64).to(d)
    x0 = torch.rand(4, 5, generator=g, dtype=torch.float64).to(d)
    c0 = torch.rand(4, 1, generator=g, dtype=torch.float64).to(d)
    w = torch.rand(4, 5, generator=g, dtype=torch.float64).to(d)

    def grads(general):
        a, x, c = (t.clone().requires_grad_(True) for t in (a0, x0, c0))
        y = _general(m.polyd, a, 2.0, c, x) if general else m.polyd(a, 2.0, c, x)
        (y * w).sum().backward()
        return a.grad, x.grad, c.grad
    for _ in range(3):
        fast = grads(False)
    gen = grads(True)
    for u, v in zip(fast, gen):
        assert torch.equal(u, v)
    # analytic: d/da = x^2 w (summed over rows), d/dx = (2 a x + 2) w, d/dc = w (summed over columns)
    np.testing.assert_allclose(fast[0].cpu().numpy(), (x0 * x0 * w).sum(0, keepdim=True).cpu().numpy(), rtol=1e-12)
    np.testing.assert_allclose(fast[1].cpu().numpy(), ((2 * a0 * x0 + 2) * w).cpu().numpy(), rtol=1e-12)
    np.testing.assert_allclose(fast[2].cpu().numpy(), w.sum(1, keepdim=True).cpu().numpy(), rtol=1e-12)


def test_gradcheck_on_the_direct_path(m, device):
    d = tdev(device)
    g = torch.Generator().manual_seed(11)
    a = torch.rand(1, generator=g, dtype=torch.float64).to(d).requires_grad_(True)
    b = torch.rand(6, generator=g, dtype=torch.float64).to(d).requires_grad_(True)
    w = (torch.rand(6, generator=g, dtype=torch.float64) * 0.8 + 0.1).to(d).requires_grad_(True)
    f = m.wsum
    for _ in range(3):
        f(a, b, w).sum().backward()
    assert _plan(f, a, b, w).fast
    with launch_log() as log:
        assert torch.autograd.gradcheck(lambda a, b, w: f(a, b, w), (a, b, w))
    assert set(_paths(log, "backward")) == {"fast"} and set(_paths(log, "forward")) == {"fast"}
    v = torch.randn(5, 3, generator=g, dtype=torch.float64).to(d)
    v = (v + torch.sign(v) * 0.5).requires_grad_(True)
    for _ in range(2):
        m.normalize3(v).sum().backward()
    assert torch.autograd.gradcheck(lambda v: m.normalize3(v), (v,))


def test_out_parameters_backward_on_the_direct_path(m, device):
    d = tdev(device)
    x = torch.linspace(-1, 1, 9, dtype=torch.float64, device=d, requires_grad=True)
    gy = torch.linspace(1, 2, 9, dtype=torch.float64, device=d)
    gz = torch.linspace(-1, 0, 9, dtype=torch.float64, device=d)
    for _ in range(4):
        x.grad = None
        y = torch.empty(9, dtype=torch.float64, device=d)
        z = torch.empty(9, dtype=torch.float64, device=d)
        with launch_log() as log:
            m.split_out(x, y, z)
            torch.autograd.backward([y, z], [gy, gz])
        np.testing.assert_allclose(x.grad.cpu().numpy(), (2 * x * gy + 3 * gz).detach().cpu().numpy(), rtol=1e-12)
    assert _paths(log, "forward") == ["fast"] and _paths(log, "backward") == ["fast"]


def test_retain_graph_and_values_per_node(m, device):
    d = tdev(device)
    x = torch.linspace(0, 1, 16, device=d, requires_grad=True)
    ys = [m.polynomial(float(k), 1.0, 0.0, x) for k in range(4)]      # one node per value of a
    for k, y in enumerate(ys):
        x.grad = None
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * (2 * k * x.detach().cpu().numpy() + 1.0), rtol=1e-5,
                                   atol=1e-6)
    with pytest.raises(RuntimeError, match="double backward"):
        y = m.polynomial(1.0, 1.0, 0.0, x)
        torch.autograd.grad(y.sum(), x, create_graph=True)


def test_threads_share_a_plan(m, device):
    d = tdev(device)
    f = m.polynomial
    f(1.0, 2.0, 3.0, torch.ones(4, device=d))
    errors = []

    def work(seed):
        try:
            for i in range(60):
                x = torch.full((257,), float(seed + i), device=d)
                y = f(1.0, float(seed), 3.0, x)
                ref = _poly_ref(1.0, float(seed), 3.0, float(seed + i))
                if not torch.allclose(y, torch.full_like(y, ref)):
                    errors.append((seed, i))
        except Exception as e:        # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work, args=(s,)) for s in (1, 2, 3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_staged_device_takes_the_direct_path(device):
    """A CPU device in staged mode (the GPU path's data movement without a GPU): every leaf of its calls carries
    the call's Staging, as on CUDA; torch tensors still take the direct path (only numpy arrays are staged)."""
    if not getattr(device, "_host_memory", True):
        pytest.skip("the staged CPU device is a CPU-only stand-in for CUDA")
    dev = spy.create_device(type=spy.DeviceType.cpu)
    dev.functional_staged = True
    ms = spy.Module.load_from_source(dev, "torch_fast_staged", SRC)
    x = torch.linspace(-1, 1, 33, requires_grad=True)
    for k in range(3):
        x.grad = None
        with launch_log() as log:
            ms.polynomial(2.0, float(k), 0.5, x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy() + k, rtol=1e-5, atol=1e-6)
    assert _paths(log, "forward") == ["fast"] and _paths(log, "backward") == ["fast"]


def test_kernel_errors_raise_on_the_direct_path(m, device):
    """A failure the kernel records (a reverse-mode loop past its [MaxIters(16)] bound) is raised on the direct
    path as on the general one, and the signature keeps working afterwards."""
    if not getattr(device, "_host_memory", True):
        pytest.skip("CUDA reads its error record in the checked mode only")
    x = torch.linspace(0.1, 0.5, 4, dtype=torch.float64, requires_grad=True)
    ok = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    for _ in range(3):
        x.grad = None
        m.powloop(x, ok).sum().backward()
    assert _plan(m.powloop, x, ok).fast
    with pytest.raises(RuntimeError, match="MaxIters"):
        m.powloop(x, torch.tensor([1, 2, 30, 4], dtype=torch.int32)).sum().backward()
    x.grad = None
    m.powloop(x, ok).sum().backward()
    eps = 1e-6
    xd = x.detach()
    fd = (m.powloop(xd + eps, ok) - m.powloop(xd - eps, ok)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), fd.numpy(), rtol=1e-6, atol=1e-8)


def test_gradient_of_an_input_no_thread_reaches_is_zero(m, device):
    """A broadcast input of a call with no threads (x has no elements) gets a zero gradient from torch.zeros, not
    uninitialised memory (a plain-store gradient is only used where the threads write every element)."""
    d = tdev(device)
    a = torch.tensor([1.5], device=d, requires_grad=True)
    x = torch.empty(0, device=d, requires_grad=True)
    for _ in range(4):
        a.grad = None
        with launch_log() as log:
            m.polynomial(a, 2.0, 1.0, x).sum().backward()
        assert a.grad.item() == 0.0 and x.grad.shape == (0,)
    assert _paths(log, "backward") == ["fast"]
    assert log.summary()["backward"]["fills"] == 1
