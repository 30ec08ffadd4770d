"""Float64 reference of the seed 002 MLP (examples/mlp_training): 4 -> 16 -> 4, leaky ReLU, input
encoding (x, y, x^2, y^2), loss = squared error against the example's ground truth.  `T` is the
example's train.py module (parameter layout and ground truth).  tests/test_mlp_example.py checks the
gradient against finite differences."""
from __future__ import annotations

import numpy as np


def unpack(T, p):
    (w1, b1, i1, o1), (w2, b2, i2, o2) = T.parameter_layout()[0]
    return p[w1:b1].reshape(o1, i1), p[b1:b1 + o1], p[w2:b2].reshape(o2, i2), p[b2:b2 + o2]


def _forward(T, p, xy):
    W1, B1, W2, B2 = unpack(T, p)
    x, y = xy[:, 0], xy[:, 1]
    e = np.stack([x, y, x * x, y * y], 1)
    z1 = e @ W1.T + B1
    a1 = np.where(z1 < 0, 0.01 * z1, z1)
    z2 = a1 @ W2.T + B2
    a2 = np.where(z2 < 0, 0.01 * z2, z2)
    return e, z1, a1, z2, a2 - T.groundtruth(x, y)


def preactivations(T, p, xy):
    _, z1, _, z2, _ = _forward(T, p, xy)
    return z1, z2


def losses(T, p, xy):
    """Per-sample loss |MLP(x, y) - f(x, y)|^2."""
    d = _forward(T, p, xy)[-1]
    return (d * d).sum(1)


def loss_and_grad(T, p, xy):
    """Per-sample losses and the gradient of their SUM w.r.t. the parameters (the kernel's layout)."""
    e, z1, a1, z2, d = _forward(T, p, xy)
    W2 = unpack(T, p)[2]
    dz2 = 2 * d * np.where(z2 < 0, 0.01, 1.0)
    dz1 = (dz2 @ W2) * np.where(z1 < 0, 0.01, 1.0)
    (w1, b1, _, o1), (w2, b2, _, o2) = T.parameter_layout()[0]
    g = np.zeros_like(p)
    g[w1:b1] = (dz1.T @ e).ravel()
    g[b1:b1 + o1] = dz1.sum(0)
    g[w2:b2] = (dz2.T @ a1).ravel()
    g[b2:b2 + o2] = dz2.sum(0)
    return (d * d).sum(1), g
