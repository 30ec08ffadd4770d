"""Acceptance: the Python of seeds 000 and 001 (examples/seeds/) runs on the CPU and prints the values the
seeds' formulas give (checked against numpy)."""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = os.path.join(ROOT, "examples", "seeds")


def _run(name):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", os.path.join(SEEDS, name)],
                       capture_output=True, text=True, cwd=SEEDS, env=env, timeout=600)
    return p


def _arrays(text):
    out = []
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("[") or line.replace(".", "").replace("-", "").isdigit():
            out.append(np.array([float(v) for v in line.strip("[]").split()], dtype=np.float64))
    return out


X = np.array([1, 2, 3, 4], np.float64)


def test_seed_000():
    p = _run("000_autodiff.py")
    assert p.returncode == 0, p.stderr
    vals = _arrays(p.stdout)
    np.testing.assert_allclose(vals[0], 2 * X * X + 8 * X - 1)
    np.testing.assert_allclose(vals[1], 4 * X + 8)


def test_seed_001_tensors_and_custom_derivative():
    p = _run("001_difftensors.py")
    vals = _arrays(p.stdout)
    assert len(vals) >= 7, p.stdout + p.stderr
    np.testing.assert_allclose(vals[0], 2 * X * X + 8 * X - 1)     # [9, 23, 41, 63] (the seed's comment slips)
    np.testing.assert_allclose(vals[1], 4 * X + 8)
    np.testing.assert_allclose(vals[2], [2, 2, 2, 2])                # d(2v)/dv with grad_in = 1
    data = np.array([0.25, 0.5, 0.75, 1.5])
    np.testing.assert_allclose(vals[3], data[0] + data[1])
    np.testing.assert_allclose(vals[4], data[0] + data[1])
    s = np.clip(data, 0, 1)
    np.testing.assert_allclose(vals[5], np.where(data >= 1, 1.0, s * s * (3 - 2 * s)))
    np.testing.assert_allclose(vals[6], np.where((data > 0) & (data < 1), 6 * data * (1 - data), 0.0))


def test_seed_001_linear_layer():
    p = _run("001_difftensors.py")
    assert p.returncode == 0, p.stderr[-2000:]
    vals = _arrays(p.stdout)
    rng = np.random.default_rng(1)
    W = rng.standard_normal((3, 4)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal(3).astype(np.float32).astype(np.float64)
    x = rng.standard_normal(4).astype(np.float32).astype(np.float64)
    y = W @ x + b
    g = 2 * y
    np.testing.assert_allclose(vals[7], y, rtol=1e-5)
    np.testing.assert_allclose(np.concatenate(vals[8:11]), np.outer(g, x).reshape(-1), rtol=1e-4)
    np.testing.assert_allclose(vals[11], g, rtol=1e-4)
    np.testing.assert_allclose(vals[12], W.T @ g, rtol=1e-4)
