"""Helpers for tests of generated CUDA, shared by runtime/test_cuda_coarse.py and compiler/test_fuse.py:
compiling CUDA C++ with NVRTC (skipping where NVRTC is not loadable), reading a coarsened kernel's slot
count, and the MLP example's source as benchmarks/gpu_mlp.py runs it."""
from __future__ import annotations

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def slots(prog, entry: str = "computeMain"):
    """Slot count of a coarsened entry, or None when the kernel is not coarsened."""
    if not prog.reflection.entry_points[entry].grid_stride:
        return None
    m = re.search(r"sj_acc.*// slots: (\d+)", prog.source)
    assert m, "coarsened kernel without accumulators"
    return int(m.group(1))


def nvrtc_ptx(src: str) -> bytes:
    """PTX for compute_90 from NVRTC; the test is skipped where cuda-bindings or NVRTC is missing."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    ptx, _ = cuda_compiler.compile_source(src, "compute_90")
    return ptx


def gpu_mlp():
    """benchmarks/gpu_mlp.py as a module."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import gpu_mlp as mod
        return mod
    finally:
        sys.path.pop(0)


def mlp_native_add() -> str:
    """examples/mlp_training/mlp.slang with the emulated half add replaced by InterlockedAdd and the
    loss gradient scaled by gpu_mlp.LOSS_SCALE, as benchmarks/gpu_mlp.py runs it."""
    return gpu_mlp().patched_source()
