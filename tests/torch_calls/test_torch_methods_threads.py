"""Struct methods called on instances with torch tensors (values, gradients through torch.autograd checked
analytically and with float64 gradcheck), and calls with torch tensors from several host threads at once
(on CUDA each thread on its own torch stream: the stream swap is serialised per GPU context)."""
import contextlib
import threading

import numpy as np
import pytest
import torch

import slangjit as spy
from torch_src import tdev

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = """
struct Poly {
    float a; float b;
    [Differentiable] float eval(float x) { return a * x * x + b * x; }
};
struct PolyD {
    double a; double b;
    [Differentiable] double eval(double x) { return a * x * x * x + b * x; }
};
[Differentiable]
float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "torch_methods", SRC)


def test_method_on_instance_with_torch_tensors(m, device):
    inst = spy.InstanceList(m.Poly, {"a": 2.0, "b": 3.0})
    x = torch.tensor([1.0, -2.0, 3.5], device=tdev(device))
    y = inst.eval(x)
    assert isinstance(y, torch.Tensor) and y.device == x.device
    xn = x.cpu().numpy()
    np.testing.assert_allclose(y.cpu().numpy(), 2 * xn * xn + 3 * xn, rtol=1e-6)
    xg = x.clone().requires_grad_(True)
    inst.eval(xg).sum().backward()
    np.testing.assert_allclose(xg.grad.cpu().numpy(), 4 * xn + 3, rtol=1e-6)     # d/dx (2x^2 + 3x)


def test_method_gradcheck_float64(m, device):
    inst = spy.InstanceList(m.PolyD, {"a": 1.5, "b": -0.5})
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(6, generator=g, dtype=torch.float64) * 2 - 1).to(tdev(device)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: inst.eval(t), (x,))


def test_torch_tensor_inside_instance_data_is_a_clear_error(m, device):
    inst = spy.InstanceList(m.Poly, {"a": torch.tensor([2.0, 4.0], device=tdev(device)), "b": 3.0})
    with pytest.raises(Exception, match=r"this\.a"):
        inst.eval(torch.tensor([1.0, 2.0], device=tdev(device)))


def test_calls_from_several_threads(m, device):
    """Four threads, each on its own torch stream on CUDA, call forward + backward 40 times; every result
    and gradient is checked (a call launching on another thread's stream, or a lost stream restore, would
    read unfinished inputs or leave the device on a wrong stream)."""
    n = 1 << 14
    errors: list = []

    def worker(k):
        try:
            s = None if getattr(device, "_host_memory", True) else torch.cuda.Stream()
            ctx = torch.cuda.stream(s) if s is not None else contextlib.nullcontext()
            with ctx:
                for it in range(40):
                    x = torch.full((n,), float(k + 1), device=tdev(device)).requires_grad_(True)
                    a = torch.tensor([float(it)], device=tdev(device), requires_grad=True)
                    y = m.poly(a, 1.0, 2.0, x)
                    y.sum().backward()
                    xv = float(k + 1)
                    want_y = it * xv * xv + xv + 2.0
                    if not (torch.all(y.detach() == want_y) and torch.all(x.grad == 2 * it * xv + 1.0)
                            and abs(float(a.grad) - n * xv * xv) <= 1e-6 * n * xv * xv):
                        errors.append((k, it))
            if s is not None:
                s.synchronize()
        except Exception as e:          # reported below, with the thread
            errors.append((k, repr(e)))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []



def test_result_shape_follows_numpy_arguments(m, device):
    """A torch tensor broadcast against numpy arrays of changing length (one call signature): the result
    takes each call's shape (the plan's call-shape cache must not answer for shapes it does not key on)."""
    x = torch.tensor([2.0], device=tdev(device))
    for n in (3, 5, 2):
        b = np.arange(n, dtype=np.float32)
        y = m.poly(1.0, b, 0.5, x)
        assert tuple(y.shape) == (n,)
        np.testing.assert_allclose(y.cpu().numpy(), 4.0 + 2.0 * b + 0.5, rtol=1e-6)


def test_number_arguments_are_read_on_every_call(m, device):
    """One call signature, changing Python numbers: each call (forward and gradient) uses its own values."""
    x = torch.tensor([2.0, -1.0], device=tdev(device))
    xn = x.cpu().numpy()
    for a, b in ((1.0, 0.0), (3.0, 2.0), (-0.5, 4.0)):
        np.testing.assert_allclose(m.poly(a, b, 1.0, x).cpu().numpy(), a * xn * xn + b * xn + 1.0, rtol=1e-6)
        xg = x.clone().requires_grad_(True)
        m.poly(a, b, 1.0, xg).sum().backward()
        np.testing.assert_allclose(xg.grad.cpu().numpy(), 2 * a * xn + b, rtol=1e-6)

