"""Calls with torch tensors as autograd nodes (SlangPy's test_torch_autograd_workflows.py and
test_pytorch_gradient_parity.py behaviour): gradcheck in float64 for the five functions of issue 17,
parity with the same function written in torch, nn.Parameter, broadcasting, retain_graph, memory, and the
clear errors (inout, create_graph)."""
import gc
import weakref

import numpy as np
import pytest
import torch

import slangjit as spy
from torch_src import SRC, tdev

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "torch_ad", SRC)


def _r(*shape, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1).to(tdev(device)).requires_grad_(True)


# ---- gradcheck (float64 finite differences) for the five functions of the issue

def test_gradcheck_polynomial(m, device):
    a, b, x = _r(1, device=device, seed=1), _r(1, device=device, seed=2), _r(7, device=device, seed=3)
    assert torch.autograd.gradcheck(lambda a, b, x: m.polyd(a, b, -1.0, x), (a, b, x))


def test_gradcheck_vector_normalize(m, device):
    v = _r(5, 3, device=device, seed=4)
    with torch.no_grad():
        v += torch.sign(v) * 0.5               # keep away from 0
    assert torch.autograd.gradcheck(lambda v: m.normalize3(v), (v,))


def test_gradcheck_struct_argument(m, device):
    x, y, w = _r(6, device=device, seed=5), _r(6, device=device, seed=6), _r(1, device=device, seed=7)
    assert torch.autograd.gradcheck(lambda x, y, w: m.pt_len2({"x": x, "y": y}, w), (x, y, w))


def test_gradcheck_broadcast_call(m, device):
    a = _r(1, 4, device=device, seed=8)        # broadcast over the rows
    x = _r(3, 4, device=device, seed=9)
    c = _r(3, 1, device=device, seed=10)       # broadcast over the columns
    assert torch.autograd.gradcheck(lambda a, x, c: m.polyd(a, 2.0, c, x), (a, x, c))


def test_gradcheck_loop(m, device):
    x = _r(6, device=device, seed=11)
    n = torch.tensor([0, 1, 2, 3, 5, 7], dtype=torch.int32, device=tdev(device))
    assert torch.autograd.gradcheck(lambda x: m.powloop(x, n), (x,))


def test_gradcheck_out_params(m, device):
    x = _r(5, device=device, seed=12)

    def f(x):
        y = torch.empty(5, dtype=torch.float64, device=x.device)
        z = torch.empty(5, dtype=torch.float64, device=x.device)
        m.split_out(x, y, z)
        return y, z
    assert torch.autograd.gradcheck(f, (x,))


# ---- parity with torch's own autograd (test_pytorch_gradient_parity)

def test_gradient_parity_with_torch(m, device):
    d = tdev(device)
    x = torch.linspace(-2, 2, 50, device=d, requires_grad=True)
    a = torch.nn.Parameter(torch.tensor([1.5], device=d))
    w = torch.linspace(0, 1, 50, device=d)
    (m.polynomial(a, -3.0, 0.5, x) * w).sum().backward()
    gx, ga = x.grad.clone(), a.grad.clone()
    x2 = x.detach().clone().requires_grad_(True)
    a2 = a.detach().clone().requires_grad_(True)
    ((a2 * x2 * x2 - 3.0 * x2 + 0.5) * w).sum().backward()
    np.testing.assert_allclose(gx.cpu().numpy(), x2.grad.cpu().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ga.cpu().numpy(), a2.grad.cpu().numpy(), rtol=1e-5)


def test_vector_parity(m, device):
    v = torch.randn(8, 3, device=tdev(device), requires_grad=True)
    s = torch.randn(8, device=tdev(device), requires_grad=True)
    g = torch.randn(8, 3, device=tdev(device))
    m.scale3(v, s).backward(g)
    np.testing.assert_allclose(v.grad.cpu().numpy(), (g * s.detach()[:, None]).cpu().numpy(), rtol=1e-6)
    np.testing.assert_allclose(s.grad.cpu().numpy(), (g * v.detach()).sum(1).cpu().numpy(), rtol=1e-5)


# ---- workflows

def test_parameter_training_loop_converges(m, device):
    d = tdev(device)
    xs = torch.linspace(-1, 1, 64, device=d)
    ys = 2.0 * xs * xs + 8.0 * xs - 1.0
    p = torch.nn.Parameter(torch.zeros(3, device=d))
    opt = torch.optim.Adam([p], lr=0.1)
    for _ in range(300):
        opt.zero_grad()
        loss = ((m.polynomial(p[0:1], p[1:2], p[2:3], xs) - ys) ** 2).mean()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(p.detach().cpu().numpy(), [2, 8, -1], atol=2e-2)


def test_gradients_accumulate_and_retain_graph(m, device):
    x = torch.tensor([1., 2., 3.], device=tdev(device), requires_grad=True)
    y = m.polynomial(2.0, 8.0, -1.0, x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * (4 * np.array([1, 2, 3]) + 8))


def test_non_contiguous_grad_output(m, device):
    x = torch.randn(4, 5, device=tdev(device), requires_grad=True)
    r = m.polynomial(1.0, 0.0, 0.0, x)
    g = torch.randn(5, 4, device=tdev(device)).t()        # a transposed view
    r.backward(g)
    np.testing.assert_allclose(x.grad.cpu().numpy(), (2 * x.detach() * g).cpu().numpy(), rtol=1e-6)


def test_no_grad_inputs_get_no_grad(m, device):
    x = torch.ones(3, device=tdev(device), requires_grad=True)
    a = torch.ones(1, device=tdev(device))
    m.polynomial(a, 1.0, 1.0, x).sum().backward()
    assert a.grad is None and x.grad is not None


def test_no_memory_growth(m, device):
    x = torch.randn(1000, device=tdev(device), requires_grad=True)
    refs = []
    for i in range(50):
        r = m.polynomial(2.0, 1.0, 0.0, x)
        r.sum().backward()
        refs.append(weakref.ref(r))
        del r
    gc.collect()
    assert sum(1 for w in refs if w() is not None) == 0
    n0 = len(gc.get_objects())
    for i in range(200):
        m.polynomial(2.0, 1.0, 0.0, x).sum().backward()
    gc.collect()
    assert len(gc.get_objects()) - n0 < 200      # no per-iteration residue (200 iterations)


def test_inout_requires_grad_is_an_error(m, device):
    x = torch.ones(3, device=tdev(device), requires_grad=True)
    with pytest.raises(ValueError, match="inout parameter in a call that needs gradients"):
        m.sq_inout(x.clone())


def test_inout_without_grad_works(m, device):
    x = torch.tensor([1., 2., 3.], device=tdev(device))
    m.sq_inout(x)
    np.testing.assert_allclose(x.cpu().numpy(), [1, 4, 9])


def test_create_graph_is_a_clear_error(m, device):
    x = torch.ones(3, device=tdev(device), requires_grad=True)
    y = m.polynomial(1.0, 0.0, 0.0, x).sum()
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(y, x, create_graph=True)


def test_no_grad_mode_makes_no_node(m, device):
    x = torch.ones(3, device=tdev(device), requires_grad=True)
    with torch.no_grad():
        r = m.polynomial(1.0, 0.0, 0.0, x)
    assert r.grad_fn is None and not r.requires_grad


def test_grads_through_views(m, device):
    d = tdev(device)
    base = torch.randn(4, 6, device=d, requires_grad=True)
    a = torch.tensor(1.5, device=d, requires_grad=True)
    xv = base.t()[1:4]                              # a transposed slice: (3, 4), strides (1, 6), offset 1
    r = m.polynomial(a.expand(3, 4), 0.0, 0.0, xv)  # an expanded (stride-0) input that requires grad
    g = torch.randn(3, 4, device=d)
    r.backward(g)
    expect = torch.zeros(4, 6, device=d)
    expect.t()[1:4] = 2 * 1.5 * xv.detach() * g
    np.testing.assert_allclose(base.grad.cpu().numpy(), expect.cpu().numpy(), rtol=1e-5, atol=1e-6)
    terms = (xv.detach() ** 2 * g).double()      # float32 adds in any order: error relative to sum |terms|
    np.testing.assert_allclose(float(a.grad), float(terms.sum()), rtol=1e-5, atol=1e-6 * float(terms.abs().sum()))


def test_preallocated_result_in_autograd(m, device):
    d = tdev(device)
    x = torch.tensor([1., 2., 3.], device=d, requires_grad=True)
    out = torch.empty(3, device=d)
    r = m.polynomial(2.0, 8.0, -1.0, x, _result=out)
    assert r is out and r.grad_fn is not None
    r.sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 4 * np.array([1, 2, 3]) + 8)
