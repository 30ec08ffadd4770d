"""Fixtures of the slang-torch binding tests: `tdev`, the torch device of the parametrized `device`
fixture ("cpu" everywhere; "cuda" skipped without a usable GPU or a CUDA build of torch), and `slang_dir`."""
from __future__ import annotations

from pathlib import Path

import pytest

try:
    import torch
except ImportError:          # the test modules skip themselves (pytest.importorskip)
    torch = None

SLANG = Path(__file__).resolve().parent / "slang"


@pytest.fixture(scope="module")
def tdev(device):
    kind = "cuda" if type(device).__name__.lower().startswith("cuda") else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device (CPU build of torch)")
    return kind


@pytest.fixture
def slang_dir():
    return SLANG
