"""Seed 004's `sqr` example, written as in the seed: forward, .fwd and .bwd with correct values."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import slangjit.torch as st                                     # noqa: E402

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def test_seed_sqr(slang_dir, tdev):
    m = st.loadModule(str(slang_dir / "seed_sqr.slang"))
    x = torch.tensor([1., 2., 3., 4., 5.], device=tdev)
    bs, gs = (256, 1, 1), (1, 1, 1)
    y = torch.zeros_like(x)
    m.sqr(input=x, output=y).launchRaw(blockSize=bs, gridSize=gs)
    assert torch.equal(y.cpu(), torch.tensor([1., 4., 9., 16., 25.]))
    dx, y, dy = torch.tensor([1., 1., 0., 0., 2.], device=tdev), torch.zeros_like(x), torch.zeros_like(x)
    m.sqr.fwd(input=(x, dx), output=(y, dy)).launchRaw(blockSize=bs, gridSize=gs)
    assert torch.equal(y.cpu(), torch.tensor([1., 4., 9., 16., 25.]))
    assert torch.equal(dy.cpu(), torch.tensor([2., 4., 0., 0., 20.]))
    gx, gy = torch.zeros_like(x), torch.tensor([1., 2., 3., 4., 5.], device=tdev)
    m.sqr.bwd(input=(x, gx), output=(y, gy)).launchRaw(blockSize=bs, gridSize=gs)
    assert torch.equal(gx.cpu(), torch.tensor([2., 8., 18., 32., 50.]))
