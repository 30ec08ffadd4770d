"""Python value types of the functional API: vectors (`spy.float3`), matrices (`spy.float4x4`), `ValueRef`,
`DiffPair`, and the dtype names (`spy.float32` ...)."""
from __future__ import annotations

import enum

from typing import Any

import numpy as np

from . import typeview as S


class VectorValue:
    """Base of spy.float3 & co: a small fixed-size vector with .x .y .z .w."""
    __slots__ = ("_v",)
    _elem = "float"
    _n = 3
    _np = np.float32
    _conv = float

    def __init__(self, *args):
        n = self._n
        if len(args) == 0:
            vals = [self._conv(0)] * n
        elif len(args) == 1 and isinstance(args[0], (int, float, bool, np.number)):
            vals = [self._conv(args[0])] * n
        elif len(args) == 1:
            vals = [self._conv(v) for v in list(np.asarray(args[0]).reshape(-1))]
        else:
            vals = []
            for a in args:
                if isinstance(a, VectorValue):
                    vals.extend(self._conv(v) for v in a._v)
                else:
                    vals.append(self._conv(a))
        if len(vals) != n:
            raise ValueError(f"{type(self).__name__} needs {n} components, got {len(vals)}")
        object.__setattr__(self, "_v", vals)

    def __getattr__(self, name):
        idx = "xyzw".find(name) if len(name) == 1 else -1
        if idx < 0 and len(name) == 1:
            idx = "rgba".find(name)
        if 0 <= idx < self._n:
            return self._v[idx]
        if len(name) > 1 and all(c in "xyzw"[:self._n] for c in name):
            vals = [self._v["xyzw".index(c)] for c in name]
            return vector_class(self._elem, len(vals))(*vals)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        idx = "xyzw".find(name) if len(name) == 1 else -1
        if 0 <= idx < self._n:
            self._v[idx] = self._conv(value)
            return
        raise AttributeError(name)

    def __getitem__(self, i):
        return self._v[i]

    def __setitem__(self, i, v):
        self._v[i] = self._conv(v)

    def __len__(self):
        return self._n

    def __iter__(self):
        return iter(self._v)

    def __eq__(self, other):
        if isinstance(other, VectorValue):
            return self._v == other._v
        if isinstance(other, (int, float, bool, np.number)):
            # as the arithmetic operators: a scalar stands for a vector of copies of itself
            return all(v == other for v in self._v)
        try:
            return list(other) == self._v
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash((type(self).__name__, tuple(self._v)))

    def _bin(self, other, op):
        o = other._v if isinstance(other, VectorValue) else [other] * self._n
        return type(self)(*[op(a, b) for a, b in zip(self._v, o)])

    def __add__(self, o):
        return self._bin(o, lambda a, b: a + b)

    def __sub__(self, o):
        return self._bin(o, lambda a, b: a - b)

    def __mul__(self, o):
        return self._bin(o, lambda a, b: a * b)

    def __truediv__(self, o):
        return self._bin(o, lambda a, b: a / b)

    __radd__ = __add__
    __rmul__ = __mul__

    def __neg__(self):
        return type(self)(*[-a for a in self._v])

    def to_numpy(self):
        return np.array(self._v, dtype=self._np)

    def __array__(self, dtype=None, copy=None):
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(repr(v) for v in self._v)})"

    __str__ = __repr__


class MatrixValue:
    __slots__ = ("_m",)
    _elem = "float"
    _rows = 4
    _cols = 4
    _np = np.float32

    def __init__(self, *args):
        if len(args) == 0:
            m = np.zeros((self._rows, self._cols), self._np)
        else:
            src = args[0] if len(args) == 1 else args
            if isinstance(src, MatrixValue):
                src = src._m
            m = np.array(src, dtype=self._np).reshape(self._rows, self._cols)
        object.__setattr__(self, "_m", m)

    @classmethod
    def identity(cls):
        return cls(np.eye(cls._rows, cls._cols, dtype=cls._np))

    @classmethod
    def zeros(cls):
        return cls()

    def __getitem__(self, i):
        r = self._m[i]
        if isinstance(i, int):
            return vector_class(self._elem, self._cols)(*r.tolist())
        return r

    def __setitem__(self, i, v):
        self._m[i] = np.asarray(v, dtype=self._np)

    def to_numpy(self):
        return self._m.copy()

    def __array__(self, dtype=None, copy=None):
        return self._m.copy() if dtype is None else self._m.astype(dtype)

    def __eq__(self, other):
        try:
            return bool(np.array_equal(self._m, np.asarray(other)))
        except Exception:
            return NotImplemented

    def __hash__(self):
        return hash(self._m.tobytes())

    def __repr__(self):
        return f"{type(self).__name__}({self._m.tolist()})"


_VEC_ELEMS = {"float": (np.float32, float), "int": (np.int32, int), "uint": (np.uint32, int),
              "bool": (np.bool_, bool), "float16_t": (np.float16, float), "half": (np.float16, float),
              "double": (np.float64, float), "int64_t": (np.int64, int), "uint64_t": (np.uint64, int)}
_vector_classes: dict = {}
_matrix_classes: dict = {}


def vector_class(elem: str, n: int):
    key = (elem, n)
    c = _vector_classes.get(key)
    if c is None:
        npt, conv = _VEC_ELEMS[elem]
        c = type(f"{elem}{n}", (VectorValue,), {"__slots__": (), "_elem": elem, "_n": n, "_np": npt, "_conv": conv})
        _vector_classes[key] = c
    return c


def matrix_class(elem: str, rows: int, cols: int):
    key = (elem, rows, cols)
    c = _matrix_classes.get(key)
    if c is None:
        c = type(f"{elem}{rows}x{cols}", (MatrixValue,), {"__slots__": (), "_elem": elem, "_rows": rows,
                                                          "_cols": cols, "_np": _VEC_ELEMS[elem][0]})
        _matrix_classes[key] = c
    return c


def slang_type_of_vector(v) -> S.SType:
    e = "half" if v._elem == "float16_t" else v._elem
    if isinstance(v, MatrixValue):
        return S.MatrixT(S.scalar(e), v._rows, v._cols)
    return S.VectorT(S.scalar(e), v._n)


def python_value_of(t: S.SType, raw: np.ndarray):
    """Bytes of one element of type t (a uint8 array) -> a Python value."""
    if isinstance(t, S.ScalarT):
        v = raw[:t.size].view(t.np)[0]
        return bool(v) if t.name == "bool" else (float(v) if t.skind == "f" else int(v))
    if isinstance(t, S.EnumT):
        return int(raw[:t.size].view(t.underlying.np)[0])
    if isinstance(t, S.VectorT):
        vals = raw[:t.size].view(t.elem.np)
        el = "float16_t" if t.elem.name == "half" else t.elem.name
        if (el, t.n) in [(k[0], k[1]) for k in _VEC_ELEMS.items()] or el in _VEC_ELEMS:
            return vector_class(el, t.n)(*[x.item() for x in vals])
        return [x.item() for x in vals]
    if isinstance(t, S.MatrixT):
        vals = raw[:t.size].view(t.elem.np).reshape(t.rows, t.cols)
        return matrix_class("float16_t" if t.elem.name == "half" else t.elem.name, t.rows, t.cols)(vals)
    if isinstance(t, S.ArrayT):
        es = t.elem.size
        return [python_value_of(t.elem, raw[i * es:(i + 1) * es]) for i in range(t.n)]
    if isinstance(t, S.StructT):
        return {n: python_value_of(ft, raw[off:off + ft.size]) for n, off, ft in t.field_offsets()}
    if isinstance(t, S.PointerT):
        return int(raw[:8].view(np.uint64)[0])
    raise TypeError(f"can't convert a value of type {t.name} to Python")


# ----------------------------------------------------------------------------------------- refs / pairs


class ValueRef:
    """A scalar/struct value that can be written back by `out`/`inout` parameters: `.value`."""

    def __init__(self, init_value: Any = None):
        self.value = init_value

    def __repr__(self):
        return f"ValueRef({self.value!r})"


def floatRef(init_value: float = 0.0) -> ValueRef:
    return ValueRef(float(init_value))


def intRef(init_value: int = 0) -> ValueRef:
    return ValueRef(int(init_value))


class DiffPair:
    """A differentiable scalar/vector: primal `.primal` (`.p`) and gradient `.grad` (`.d`)."""

    def __init__(self, p: Any = None, d: Any = None, needs_grad: bool = True, is_input: bool = True):
        # as SlangPy: a missing primal is 0.0, a missing gradient the zero of the primal's Python type
        self.primal = p if p is not None else 0.0
        if d is None and hasattr(self.primal, "shape") and not isinstance(self.primal, (VectorValue, MatrixValue)):
            pass            # a tensor / array without a gradient (a DiffTensorView's diff view is then empty)
        elif d is None:
            try:
                d = type(self.primal)()
            except TypeError:
                d = 0.0
        self.grad = d
        self.needs_grad = needs_grad
        self.is_input = is_input         # SlangPy's flag (a DiffTensorView's diff tensor is read and written alike)

    def with_parts(self, p, d) -> "DiffPair":
        """A pair of other values with this one's flags (the torch layer swaps tensors for views)."""
        r = DiffPair(p, d, self.needs_grad, self.is_input)
        return r

    p = property(lambda self: self.primal, lambda self, v: setattr(self, "primal", v))
    d = property(lambda self: self.grad, lambda self, v: setattr(self, "grad", v))

    def get(self, t):
        """The primal (t = PrimType.primal / "primal") or the gradient (PrimType.derivative / "derivative")."""
        return self.primal if _prim_kind(t) == "primal" else self.grad

    def set(self, t, value) -> None:
        if _prim_kind(t) == "primal":
            self.primal = value
        else:
            self.grad = value

    @property
    def slangpy_signature(self) -> str:
        return f"[{type(self.primal).__name__},{type(self.grad).__name__},{self.needs_grad}]"

    def __repr__(self):
        return f"DiffPair(p={self.primal!r}, d={self.grad!r})"


class PrimType(enum.Enum):
    """Which half of a DiffPair: its primal value or its derivative."""
    primal = "primal"
    derivative = "derivative"


def _prim_kind(t) -> str:
    k = t.value if isinstance(t, PrimType) else getattr(t, "name", t)
    if k in ("primal", "derivative"):
        return k
    if k in ("grad", "d"):
        return "derivative"
    raise ValueError(f"DiffPair: expected PrimType.primal or PrimType.derivative, got {t!r}")


def diffPair(p: Any = None, d: Any = None, needs_grad: bool = True) -> DiffPair:
    return DiffPair(p, d, needs_grad)


def diff_pair(p: Any = None, d: Any = None, is_input: bool = True, needs_grad: bool = True) -> DiffPair:
    """SlangPy's `diff_pair(primal, grad, is_input=True)` (a pair of tensors for a DiffTensorView, or values)."""
    return DiffPair(p, d, needs_grad, is_input)


def floatDiffPair(p: float = 0.0, d: float = 1.0, needs_grad: bool = True) -> DiffPair:
    return DiffPair(float(p), float(d), needs_grad)


# ----------------------------------------------------------------------------------------- dtype names

float32 = S.scalar("float")
float64 = S.scalar("double")
float16 = S.scalar("half")
int8 = S.scalar("int8_t")
int16 = S.scalar("int16_t")
int32 = S.scalar("int")
int64 = S.scalar("int64_t")
uint8 = S.scalar("uint8_t")
uint16 = S.scalar("uint16_t")
uint32 = S.scalar("uint")
uint64 = S.scalar("uint64_t")

# spy.float3 etc.
_exports: dict = {}
for _e in ("float", "int", "uint", "bool", "float16_t"):
    for _n in (1, 2, 3, 4):
        _exports[f"{_e}{_n}"] = vector_class(_e, _n)
for _r in (2, 3, 4):
    for _c in (2, 3, 4):
        _exports[f"float{_r}x{_c}"] = matrix_class("float", _r, _c)
globals().update(_exports)
VECTOR_EXPORTS = sorted(_exports)
