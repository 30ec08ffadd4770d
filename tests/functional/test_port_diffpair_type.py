"""Behavioural port of SlangPy's test_diffpair_type.py: DiffPair construction and defaults, get / set by
PrimType, the signature string, and the diffPair / floatDiffPair factories (no device needed)."""
from __future__ import annotations

from slangjit import DiffPair, PrimType, diffPair, floatDiffPair


def test_basic():
    dp = DiffPair(1.0, 2.0)
    assert (dp.primal, dp.grad, dp.needs_grad) == (1.0, 2.0, True)


def test_none_primal_defaults_to_zero():
    dp = DiffPair(None, 3.0)
    assert (dp.primal, dp.grad) == (0.0, 3.0)


def test_none_grad_defaults_to_type_default():
    dp = DiffPair(5.0, None)
    assert dp.primal == 5.0 and isinstance(dp.grad, float) and dp.grad == 0.0


def test_both_none():
    dp = DiffPair(None, None)
    assert (dp.primal, dp.grad) == (0.0, 0.0)


def test_needs_grad_false():
    assert DiffPair(1.0, 2.0, needs_grad=False).needs_grad is False


def test_int_types():
    dp = DiffPair(5, None)
    assert dp.primal == 5 and isinstance(dp.grad, int) and dp.grad == 0


def test_get():
    dp = DiffPair(10.0, 20.0)
    assert dp.get(PrimType.primal) == 10.0 and dp.get(PrimType.derivative) == 20.0


def test_set():
    dp = DiffPair(0.0, 0.0)
    dp.set(PrimType.primal, 42.0)
    dp.set(PrimType.derivative, 99.0)
    assert (dp.primal, dp.grad) == (42.0, 99.0)


def test_signatures():
    assert DiffPair(1.0, 2.0).slangpy_signature == "[float,float,True]"
    assert DiffPair(1, 2).slangpy_signature == "[int,int,True]"
    assert DiffPair(1.0, 2.0, needs_grad=False).slangpy_signature == "[float,float,False]"


def test_diffPair_factory():
    dp = diffPair()
    assert (dp.primal, dp.grad, dp.needs_grad) == (0.0, 0.0, True)
    dp = diffPair(3.0, 4.0)
    assert (dp.primal, dp.grad) == (3.0, 4.0)
    assert diffPair(1.0, 2.0, needs_grad=False).needs_grad is False


def test_floatDiffPair_factory():
    dp = floatDiffPair()
    assert (dp.primal, dp.grad, dp.needs_grad) == (0.0, 1.0, True)
    dp = floatDiffPair(5.0, 10.0)
    assert (dp.primal, dp.grad) == (5.0, 10.0)
    assert floatDiffPair(needs_grad=False).needs_grad is False
