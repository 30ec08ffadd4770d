"""`spy.math`: the vector helpers SlangPy programs call on Python-side vectors (`spy.float2` & co) —
`length`, `normalize`, `dot`, `cross`, `lerp`, `clamp`, `min`/`max`, `abs`, `sqrt`, ... — computed in float64 and
returned as the argument's vector type (a scalar for `length`, `dot`, `distance`)."""
from __future__ import annotations

import math as _m

from .values import VectorValue, MatrixValue, vector_class


def _vals(v):
    if isinstance(v, VectorValue):
        return list(v._v)
    raise TypeError(f"spy.math: expected a vector (spy.float2, spy.float3, ...), got {type(v).__name__}")


def _like(v, vals):
    return type(v)(*vals)


def _pair(a, b):
    va = _vals(a) if isinstance(a, VectorValue) else None
    vb = _vals(b) if isinstance(b, VectorValue) else None
    if va is None and vb is None:
        raise TypeError("spy.math: expected at least one vector argument")
    n = len(va if va is not None else vb)
    if va is None:
        va = [a] * n
    if vb is None:
        vb = [b] * n
    if len(va) != len(vb):
        raise ValueError(f"spy.math: vectors of different lengths ({len(va)} and {len(vb)})")
    return va, vb, (a if isinstance(a, VectorValue) else b)


def dot(a, b):
    va, vb, _ = _pair(a, b)
    return sum(float(x) * float(y) for x, y in zip(va, vb))


def length(v):
    return _m.sqrt(dot(v, v))


def distance(a, b):
    va, vb, t = _pair(a, b)
    return _m.sqrt(sum((float(x) - float(y)) ** 2 for x, y in zip(va, vb)))


def normalize(v):
    n = length(v)
    if n == 0.0:
        raise ValueError("spy.math.normalize: the vector has length 0")
    return _like(v, [float(x) / n for x in _vals(v)])


def cross(a, b):
    va, vb = _vals(a), _vals(b)
    if len(va) != 3 or len(vb) != 3:
        raise ValueError("spy.math.cross: expected two 3-component vectors")
    return _like(a, [va[1] * vb[2] - va[2] * vb[1], va[2] * vb[0] - va[0] * vb[2], va[0] * vb[1] - va[1] * vb[0]])


def _map1(f):
    def g(v):
        if isinstance(v, VectorValue):
            return _like(v, [f(float(x)) for x in v._v])
        return f(float(v))
    return g


def _map2(f):
    def g(a, b):
        if not isinstance(a, VectorValue) and not isinstance(b, VectorValue):
            return f(a, b)
        va, vb, t = _pair(a, b)
        return _like(t, [f(x, y) for x, y in zip(va, vb)])
    return g


abs = _map1(lambda x: x if x >= 0 else -x)  # noqa: A001
sqrt = _map1(_m.sqrt)
floor = _map1(_m.floor)
ceil = _map1(_m.ceil)
sin = _map1(_m.sin)
cos = _map1(_m.cos)
exp = _map1(_m.exp)
min = _map2(lambda x, y: x if x <= y else y)  # noqa: A001
max = _map2(lambda x, y: x if x >= y else y)  # noqa: A001


def lerp(a, b, t):
    va, vb, ty = _pair(a, b)
    vt = _vals(t) if isinstance(t, VectorValue) else [t] * len(va)
    return _like(ty, [x + (y - x) * s for x, y, s in zip(va, vb, vt)])


def clamp(v, lo, hi):
    return min(max(v, lo), hi)


__all__ = ["dot", "length", "distance", "normalize", "cross", "abs", "sqrt", "floor", "ceil", "sin", "cos", "exp",
           "min", "max", "lerp", "clamp", "VectorValue", "MatrixValue", "vector_class"]
