"""Conditioning of a derivative, for the autodiff property test's fwd_diff-vs-bwd_diff comparison.

fwd_diff and bwd_diff compute the same derivative as sums of products of local partial derivatives, in
different orders.  In float32 each sum is rounded, so where the derivative is a small difference of large
terms (cancellation) the two modes may differ by far more than a relative tolerance of the result allows,
although each is as accurate as float32 permits.  The scale of that rounding is the *absolute* derivative:
the derivative recomputed with every local partial and every tangent replaced by its absolute value,

    A(z) = sum over paths x -> z of |product of the local partials along the path|,

which equals |df/dx| when nothing cancels and is much larger when large terms cancel.  Each mode's rounding
error is a small multiple of eps32 * A (eps32 = 2^-23, the float32 unit roundoff times 2); the property test
allows |fwd - bwd| up to COND_ULPS * eps32 * A on top of its relative tolerance.  For a well-conditioned
derivative A ~ |df/dx| and the allowance is ~1e-6 relative: nothing is widened.

`Dual` carries (value, tangent, absolute tangent) for the three input directions at once through the
property test's float64 evaluator (which computes with `M.sin` etc. and Python operators, so plain floats and
Duals both work).  Its tangent is checked against finite differences by the tests, so its rules are checked
too.
"""
from __future__ import annotations

import math

EPS32 = 2.0 ** -23
COND_ULPS = 2        # each mode's rounding error: at most about eps32 * A (the largest partial sums are ~A)


def _v(x):
    return x.v if isinstance(x, Dual) else x


class Dual:
    """v: value; d: tangent (d/dx, d/dy, d/dz); a: absolute tangent (see the module docstring)."""
    __slots__ = ("v", "d", "a")

    def __init__(self, v, d=(0.0, 0.0, 0.0), a=(0.0, 0.0, 0.0)):
        self.v, self.d, self.a = float(v), tuple(d), tuple(a)

    @staticmethod
    def seed(v, i):
        e = tuple(1.0 if j == i else 0.0 for j in range(3))
        return Dual(v, e, e)

    # z = f(self, other) with partials fp, fq
    def _bin(self, o, v, fp, fq):
        if not isinstance(o, Dual):
            return Dual(v, [fp * d for d in self.d], [abs(fp) * a for a in self.a])
        return Dual(v, [fp * p + fq * q for p, q in zip(self.d, o.d)],
                    [abs(fp) * p + abs(fq) * q for p, q in zip(self.a, o.a)])

    def _un(self, v, fp):
        return Dual(v, [fp * d for d in self.d], [abs(fp) * a for a in self.a])

    def __add__(self, o):
        return self._bin(o, self.v + _v(o), 1.0, 1.0)

    __radd__ = __add__

    def __sub__(self, o):
        return self._bin(o, self.v - _v(o), 1.0, -1.0)

    def __rsub__(self, o):
        return self._un(o - self.v, -1.0)

    def __mul__(self, o):
        return self._bin(o, self.v * _v(o), _v(o), self.v)

    __rmul__ = __mul__

    def __truediv__(self, o):
        q = _v(o)
        return self._bin(o, self.v / q, 1.0 / q, -self.v / (q * q))

    def __rtruediv__(self, o):
        return self._un(o / self.v, -o / (self.v * self.v))

    def __pow__(self, o):
        q = _v(o)
        z = self.v ** q
        fq = math.log(self.v) * z if self.v > 0 else 0.0
        return self._bin(o, z, q * self.v ** (q - 1) if self.v != 0 else 0.0, fq)

    def __rpow__(self, o):
        z = o ** self.v
        return self._un(z, math.log(o) * z if o > 0 else 0.0)

    def __neg__(self):
        return self._un(-self.v, -1.0)

    def __abs__(self):
        return self._un(abs(self.v), 1.0 if self.v > 0 else -1.0)

    def __float__(self):
        return self.v

    def __lt__(self, o):
        return self.v < _v(o)

    def __le__(self, o):
        return self.v <= _v(o)

    def __gt__(self, o):
        return self.v > _v(o)

    def __ge__(self, o):
        return self.v >= _v(o)

    def __repr__(self):
        return f"Dual({self.v!r}, d={self.d}, a={self.a})"


def _fn(f, df):
    def g(x):
        if isinstance(x, Dual):
            return x._un(f(x.v), df(x.v))
        return f(x)
    return g


class M:
    """The math functions the evaluator uses, for floats and Duals."""
    sin = staticmethod(_fn(math.sin, math.cos))
    cos = staticmethod(_fn(math.cos, lambda t: -math.sin(t)))
    tanh = staticmethod(_fn(math.tanh, lambda t: 1.0 - math.tanh(t) ** 2))
    atan = staticmethod(_fn(math.atan, lambda t: 1.0 / (1.0 + t * t)))
    sqrt = staticmethod(_fn(math.sqrt, lambda t: 0.5 / math.sqrt(t)))
    log = staticmethod(_fn(math.log, lambda t: 1.0 / t))
    exp = staticmethod(_fn(math.exp, math.exp))

    @staticmethod
    def floor(x):
        return math.floor(_v(x))


def cond_ok(fwd: float, bwd: float, absolute: float) -> bool:
    """fwd_diff and bwd_diff agree up to the relative tolerance plus float32 rounding at the derivative's scale."""
    return abs(bwd - fwd) <= 1e-3 * abs(fwd) + 1e-4 + COND_ULPS * EPS32 * absolute
