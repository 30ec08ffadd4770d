"""Compile-time evaluation of IR expressions: constant conversion and folding.

Integer results wrap to their type's width; float literals are rounded to the width they are
stored in; anything not constant folds to None.  Used by the checker (array sizes, generic
value arguments, `[numthreads]`), by autodiff (loop bounds) and by the optimizer.
"""
from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from .. import types as T
from . import nodes as ir

def fold_value(e: ir.Expr) -> Any:
    """The compile-time value of e, or None."""
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Convert) and isinstance(e.type, T.ScalarType):
        v = fold_value(e.operand)
        if v is None:
            return None
        return fold_convert(ir.Const(e.operand.type, v), e.type, e.loc).value \
            if isinstance(fold_convert(ir.Const(e.operand.type, v), e.type, e.loc), ir.Const) else None
    if isinstance(e, ir.GlobalRef) and e.var.kind == "const" and e.var.init is not None:
        return fold_value(e.var.init)
    if isinstance(e, ir.Unary):
        v = fold_value(e.operand)
        if v is None:
            return None
        if e.op == "-":
            return wrap(-v, e.type)
        if e.op == "!":
            return not v
        if e.op == "~":
            return wrap(~int(v), e.type)
        return v
    if isinstance(e, ir.Binary):
        a, b = fold_value(e.lhs), fold_value(e.rhs)
        if a is None or b is None:
            return None
        return fold_binary(e.op, a, b, e.lhs.type, e.type)
    if isinstance(e, ir.Select):
        c = fold_value(e.cond)
        if c is None:
            return None
        return fold_value(e.then if c else e.else_)
    return None


def wrap(v, t: T.Type):
    s = T.scalar_of(t)
    if s is None or s.kind not in ("int", "uint") or isinstance(v, float):
        return v
    v = int(v) & ((1 << s.bits) - 1)
    if s.kind == "int" and v >= 1 << (s.bits - 1):
        v -= 1 << s.bits
    return v


def fold_binary(op: str, a, b, operand_t: T.Type, result_t: T.Type):
    s = T.scalar_of(operand_t)
    if s is None or not isinstance(result_t, T.ScalarType):
        return None
    is_int = s.kind in ("int", "uint", "bool")
    try:
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op == "/":
            if is_int:
                if b == 0:
                    return None
                r = int(a / b) if (a < 0) != (b < 0) else a // b
            else:
                r = a / b
        elif op == "%":
            if is_int:
                if b == 0:
                    return None
                r = int(math.fmod(a, b))
            else:
                r = math.fmod(a, b)
        elif op == "<<":
            r = a << (b & (s.bits - 1))
        elif op == ">>":
            r = a >> (b & (s.bits - 1))
        elif op == "&":
            r = a & b
        elif op == "|":
            r = a | b
        elif op == "^":
            r = a ^ b
        elif op == "&&":
            r = bool(a) and bool(b)
        elif op == "||":
            r = bool(a) or bool(b)
        elif op == "==":
            r = a == b
        elif op == "!=":
            r = a != b
        elif op == "<":
            r = a < b
        elif op == ">":
            r = a > b
        elif op == "<=":
            r = a <= b
        elif op == ">=":
            r = a >= b
        else:
            return None
    except (ZeroDivisionError, OverflowError, TypeError, ValueError):
        return None
    return wrap(r, result_t)


def fold_convert(e: ir.Expr, dst: T.ScalarType, loc) -> ir.Expr:
    """Convert a constant at compile time (keeps literal arithmetic exact), else emit Convert."""
    if isinstance(e, ir.Const) and isinstance(e.type, T.ScalarType):
        v = e.value
        try:
            if dst.kind == "float":
                return ir.Const(dst, round_float(float(v), dst.bits), loc=loc)
            if dst.kind == "bool":
                return ir.Const(dst, bool(v), loc=loc)
            if dst.kind in ("int", "uint"):
                if isinstance(v, float):
                    if v != v or v in (float("inf"), float("-inf")):
                        return ir.Convert(dst, e, loc=loc)
                    v = int(v)
                v = int(v) & ((1 << dst.bits) - 1)
                if dst.kind == "int" and v >= 1 << (dst.bits - 1):
                    v -= 1 << dst.bits
                return ir.Const(dst, v, loc=loc)
        except (OverflowError, ValueError):
            pass
    return ir.Convert(dst, e, loc=loc)


def round_float(v: float, bits: int) -> float:
    """The value a float literal has once stored in a `bits`-wide float."""
    if bits == 32:
        try:
            return struct.unpack("<f", struct.pack("<f", v))[0]
        except OverflowError:
            return float("inf") if v > 0 else float("-inf")
    if bits == 16:
        return float(np.float16(v))
    return v
