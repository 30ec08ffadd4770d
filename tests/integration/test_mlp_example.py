"""The seed 002 MLP training example (examples/mlp_training): gradients against numpy, and a short training.

* one learnGradient dispatch over a small batch gives the weight/bias gradients of a float64 numpy
  model of the same network (analytic backprop, itself checked by central finite differences);
* the emulated half atomic add loses no update when many threads of several groups add into the
  same gradients at once;
* adjustParameters takes the gradient step and clears the gradients;
* a shortened training run makes the loss fall at least 10x.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy

import mlp_reference as ref   # tests/helpers (on sys.path through tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp_training"


def _load_train_module():
    spec = importlib.util.spec_from_file_location("mlp_train_example", EXAMPLE / "train.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


mt = _load_train_module()


pytestmark = pytest.mark.usefixtures("private_cache")


# ------------------------------------------------------------------------------------------ float64 model

def losses(p, xy):
    return ref.losses(mt, p, xy)


def preactivations(p, xy):
    return ref.preactivations(mt, p, xy)


def samples_away_from_kinks(p, rng, n, margin=0.05):
    """n samples (float32, exactly representable in half) whose leaky-ReLU inputs are all at least
    `margin` from 0: there half rounding cannot flip a unit's slope (a flip changes the unit's
    gradient 100x and says nothing about the derivative code)."""
    out = []
    while len(out) < n:
        xy = rng.uniform(-1, 1, (4 * n, 2)).astype(np.float16).astype(np.float32)
        z1, z2 = preactivations(p.astype(np.float64), xy.astype(np.float64))
        ok = (np.abs(z1).min(1) > margin) & (np.abs(z2).min(1) > margin)
        out.extend(xy[ok])
    return np.array(out[:n], np.float32)


def loss_and_grad(p, xy):
    return ref.loss_and_grad(mt, p, xy)


def test_numpy_backprop_matches_finite_differences():
    rng = np.random.default_rng(5)
    p = mt.init_parameters(5).astype(np.float64)
    xy = rng.uniform(-1, 1, (8, 2))
    _, g = loss_and_grad(p, xy)
    h = 1e-6
    fd = np.array([(losses(p + h * np.eye(p.size)[k], xy).sum() - losses(p - h * np.eye(p.size)[k], xy).sum()) / (2 * h)
                   for k in range(p.size)])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------ kernels

def test_one_gradient_step_matches_float64_numpy(device):
    rng = np.random.default_rng(11)
    params = mt.init_parameters(11)
    n = 16
    xy = samples_away_from_kinks(params, rng, n)
    tr = mt.MLPTrainer(device, params, max_batch=n)
    tr.set_inputs(xy)
    tr.learn_gradient(0, n, slot=0)
    got = tr.read_grads().astype(np.float64)
    # the kernel converts the inputs to half and computes in half: the model gets the same inputs
    want_l, want = loss_and_grad(params.astype(np.float64), xy.astype(np.float16).astype(np.float64))
    assert np.all(np.isfinite(got))
    scale = np.abs(want).max()
    err = np.abs(got - want)
    # half arithmetic (11-bit significand) through two layers and a 16-sample sum: errors of a few
    # 1e-3 of the largest gradient; a wrong formula or a lost atomic update is far larger.
    assert err.max() <= 5e-3 * scale, (
        f"max |grad error| {err.max():.4g} at {int(err.argmax())} (scale {scale:.4g})\n{got}\n{want}")
    rel = err / np.maximum(np.abs(want), 0.05 * scale)
    assert rel.max() < 0.03, f"max relative error {rel.max():.3g} at {int(rel.argmax())}"
    sums, maxs = tr.read_losses(1)
    np.testing.assert_allclose(sums[0], want_l.sum(), rtol=1e-2)
    np.testing.assert_allclose(maxs[0], want_l.max(), rtol=1e-2)

    # adjustParameters: param -= grad * lr (in half), gradient cleared
    lr = 0.01
    g16 = tr.read_grads()
    tr.adjust_parameters(lr)
    new = tr.read_params().astype(np.float64)
    lr16 = np.float64(np.float16(lr))
    step = params.astype(np.float64) - g16.astype(np.float64) * lr16
    # half rounding of the product grad * lr and of the difference: one ulp of each
    tol = (np.spacing(np.abs(step).astype(np.float16)).astype(np.float64) +
           np.spacing(np.abs(g16.astype(np.float64) * lr16).astype(np.float16)).astype(np.float64))
    assert np.all(np.abs(new - step) <= tol), np.max(np.abs(new - step) / tol)
    assert np.all(tr.read_grads() == 0)


def test_half_atomic_add_loses_no_update(device, monkeypatch):
    """512 threads (two groups, run on two workers) add the gradient of the SAME sample into the same
    half gradients: the emulated atomic add must give exactly the sequential half sum."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "2")
    params = mt.init_parameters(3)
    xy1 = np.array([[0.375, -0.625]], np.float32)
    one = mt.MLPTrainer(device, params, max_batch=1)
    one.set_inputs(xy1)
    one.learn_gradient(0, 1)
    g1 = one.read_grads()

    n = 512
    many = mt.MLPTrainer(device, params, max_batch=n)
    many.set_inputs(np.repeat(xy1, n, axis=0))
    many.learn_gradient(0, n)
    got = many.read_grads()

    want = np.zeros_like(g1)
    for _ in range(n):           # equal addends: the result does not depend on the order
        want = (want + g1).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    sums, maxs = many.read_losses(1)
    l1 = one.read_losses(1)[0][0]
    np.testing.assert_allclose(sums[0], n * l1, rtol=1e-5)
    assert maxs[0] == np.float32(l1)


# ------------------------------------------------------------------------------------------ training

def test_short_training_loss_falls_10x():
    r = mt.train(steps=2500, batch=64, seed=2, device="cpu", log_every=0, plot=None, quiet=True)
    assert r["finite"]
    assert r["ratio"] >= 10.0, f"loss fell only {r['ratio']:.2f}x ({r['first']:.4f} -> {r['last']:.4f})"
    assert np.all(np.isfinite(r["params"].astype(np.float64)))


def test_main_exit_status(capsys):
    # 30 steps cannot reach a 1000x drop: the script must report failure through its exit status
    assert mt.main(["--steps", "30", "--log-every", "10", "--plot", "", "--min-drop", "1000"]) == 1
    out = capsys.readouterr().out
    assert "step    10  loss" in out and "FAILED" in out
    assert mt.main(["--steps", "30", "--log-every", "0", "--plot", "", "--min-drop", "1.01"]) == 0


def test_cuda_request_falls_back_or_runs(capsys):
    dev, kind = mt.create_device("cuda")
    assert kind in ("cuda", "cpu")
    if kind == "cpu":
        assert "could not be created" in capsys.readouterr().out


def test_loss_plot(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "loss.png"
    assert mt.write_plot(np.geomspace(3, 0.05, 50), np.geomspace(10, 0.2, 50), str(out), lambda *a: None)
    assert out.stat().st_size > 1000
