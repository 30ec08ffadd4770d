"""The type system: scalar, vector, matrix, array, struct, buffer, pointer, enum types.

Types are immutable and compare structurally, except struct/enum/interface types whose identity
is their declaration instance.  `TypeVar` / `ValueVar` are placeholders used only while inferring
generic arguments (generics are checked per instantiation, so nothing downstream sees them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union


class Type:
    def is_numeric_scalar(self) -> bool:
        return False

    @property
    def slang(self) -> str:          # Slang spelling, for messages
        return str(self)


@dataclass(frozen=True)
class ScalarType(Type):
    name: str        # "void" "bool" "int8_t" ... "int" "uint" "int64_t" "uint64_t" "half" "float" "double"
    kind: str        # "void" "bool" "int" "uint" "float"
    bits: int

    def __str__(self):
        return self.name

    def is_numeric_scalar(self):
        return self.kind in ("int", "uint", "float")

    @property
    def is_float(self):
        return self.kind == "float"

    @property
    def is_integer(self):
        return self.kind in ("int", "uint")


VOID = ScalarType("void", "void", 0)
BOOL = ScalarType("bool", "bool", 8)
INT8 = ScalarType("int8_t", "int", 8)
INT16 = ScalarType("int16_t", "int", 16)
INT = ScalarType("int", "int", 32)
INT64 = ScalarType("int64_t", "int", 64)
UINT8 = ScalarType("uint8_t", "uint", 8)
UINT16 = ScalarType("uint16_t", "uint", 16)
UINT = ScalarType("uint", "uint", 32)
UINT64 = ScalarType("uint64_t", "uint", 64)
HALF = ScalarType("half", "float", 16)
FLOAT = ScalarType("float", "float", 32)
DOUBLE = ScalarType("double", "float", 64)

SCALAR_NAMES: dict[str, ScalarType] = {
    "void": VOID, "bool": BOOL,
    "int8_t": INT8, "int16_t": INT16, "int": INT, "int32_t": INT, "int64_t": INT64,
    "uint8_t": UINT8, "uint16_t": UINT16, "uint": UINT, "uint32_t": UINT, "uint64_t": UINT64,
    "half": HALF, "float16_t": HALF, "float": FLOAT, "float32_t": FLOAT, "double": DOUBLE, "float64_t": DOUBLE,
    "dword": UINT, "intptr_t": INT64, "uintptr_t": UINT64, "size_t": UINT64,
}
# Short names usable as vector/matrix prefixes: float3, int2x2, half4, uint64_t2 ...
VECTOR_PREFIXES = {"bool": BOOL, "int": INT, "uint": UINT, "half": HALF, "float": FLOAT, "double": DOUBLE,
                   "int8_t": INT8, "int16_t": INT16, "int64_t": INT64, "uint8_t": UINT8, "uint16_t": UINT16,
                   "uint64_t": UINT64, "float16_t": HALF, "float32_t": FLOAT, "float64_t": DOUBLE,
                   "int32_t": INT, "uint32_t": UINT, "min16float": HALF, "dword": UINT}

# Promotion order for the usual arithmetic conversions (Slang's "join" of two scalar types).
_RANK = {BOOL: 0, INT8: 1, UINT8: 2, INT16: 3, UINT16: 4, INT: 5, UINT: 6, INT64: 7, UINT64: 8,
         HALF: 9, FLOAT: 10, DOUBLE: 11}

NUMPY_NAMES = {BOOL: "bool", INT8: "int8", INT16: "int16", INT: "int32", INT64: "int64", UINT8: "uint8",
               UINT16: "uint16", UINT: "uint32", UINT64: "uint64", HALF: "float16", FLOAT: "float32",
               DOUBLE: "float64"}


def scalar_rank(t: ScalarType) -> int:
    return _RANK.get(t, -1)


def join_scalars(a: ScalarType, b: ScalarType) -> ScalarType:
    if a == b:
        return a
    return a if _RANK.get(a, 0) >= _RANK.get(b, 0) else b


@dataclass(frozen=True)
class TypeVar(Type):
    """A generic type parameter while its argument is being inferred."""
    name: str
    uid: int

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class ValueVar:
    """A generic value parameter (`let N : int`) while its argument is being inferred."""
    name: str
    uid: int

    def __str__(self):
        return self.name


Count = Union[int, ValueVar]


@dataclass(frozen=True)
class VectorType(Type):
    elem: Type
    n: Count

    def __str__(self):
        if isinstance(self.n, int) and self.n > 4:
            return f"CoopVec<{self.elem},{self.n}>"     # only a cooperative vector is longer than 4
        if isinstance(self.elem, ScalarType) and isinstance(self.n, int):
            return f"{self.elem}{self.n}"
        return f"vector<{self.elem},{self.n}>"


@dataclass(frozen=True)
class MatrixType(Type):
    elem: Type
    rows: Count
    cols: Count

    def __str__(self):
        if isinstance(self.elem, ScalarType) and isinstance(self.rows, int) and isinstance(self.cols, int):
            return f"{self.elem}{self.rows}x{self.cols}"
        return f"matrix<{self.elem},{self.rows},{self.cols}>"

    @property
    def row_type(self) -> VectorType:
        return VectorType(self.elem, self.cols)


@dataclass(frozen=True)
class ArrayType(Type):
    elem: Type
    n: Optional[Count]     # None: unsized

    def __str__(self):
        return f"{self.elem}[{'' if self.n is None else self.n}]"


@dataclass(frozen=True)
class PointerType(Type):
    elem: Type

    def __str__(self):
        return f"{self.elem}*"


@dataclass(frozen=True)
class BufferType(Type):
    kind: str              # "StructuredBuffer" "RWStructuredBuffer" "ByteAddressBuffer" "RWByteAddressBuffer" ...
    elem: Optional[Type]   # None for byte-address buffers

    def __str__(self):
        return self.kind if self.elem is None else f"{self.kind}<{self.elem}>"

    @property
    def writable(self) -> bool:
        return self.kind.startswith("RW") or self.kind.startswith("Append") or self.kind.startswith("Consume")

    @property
    def byte_address(self) -> bool:
        return "ByteAddress" in self.kind


@dataclass(frozen=True)
class AtomicType(Type):
    elem: ScalarType

    def __str__(self):
        return f"Atomic<{self.elem}>"


class NominalType(Type):
    """Struct / enum / interface types: identity is the declaration instance."""
    name: str

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


class StructType(NominalType):
    def __init__(self, name: str, info: Any, args: tuple = ()):
        self.name = name             # Slang spelling, e.g. "Stack<int,4>"
        self.info = info             # the checker's StructInstance (fields, methods ...)
        self.args = args             # generic arguments (types / ints)


class EnumType(NominalType):
    def __init__(self, name: str, info: Any, underlying: ScalarType):
        self.name = name
        self.info = info
        self.underlying = underlying


class InterfaceType(NominalType):
    def __init__(self, name: str, info: Any, args: tuple = ()):
        self.name = name
        self.info = info
        self.args = args


@dataclass(frozen=True)
class TupleType(Type):
    elems: tuple

    def __str__(self):
        return "Tuple<" + ",".join(map(str, self.elems)) + ">"


@dataclass(frozen=True)
class OptionalType(Type):
    elem: Type

    def __str__(self):
        return f"Optional<{self.elem}>"


@dataclass(frozen=True)
class PairType(Type):
    """DifferentialPair<T>: the primal and its differential, fields `p` and `d`."""
    primal: Type
    diff: Type

    def __str__(self):
        return f"DifferentialPair<{self.primal}>"


@dataclass(frozen=True)
class PtrPairType(PairType):
    """DifferentialPtrPair<T> for an IDifferentiablePtrType T: the primal pointer and the pointer
    to its gradient storage.  Derivatives pass it by value (it is never transposed); a distinct
    class so that it never equals a DifferentialPair of the same types."""

    def __str__(self):
        return f"DifferentialPtrPair<{self.primal}>"


@dataclass(frozen=True)
class StringType(Type):
    def __str__(self):
        return "String"


# ----------------------------------------------------------------------------- queries

def scalar_of(t: Type) -> Optional[ScalarType]:
    if isinstance(t, ScalarType):
        return t
    if isinstance(t, (VectorType, MatrixType)) and isinstance(t.elem, ScalarType):
        return t.elem
    if isinstance(t, EnumType):
        return t.underlying
    return None


def with_scalar(t: Type, s: ScalarType) -> Type:
    """The same shape as t with element type s."""
    if isinstance(t, VectorType):
        return VectorType(s, t.n)
    if isinstance(t, MatrixType):
        return MatrixType(s, t.rows, t.cols)
    return s


def is_arith(t: Type) -> bool:
    s = scalar_of(t)
    return s is not None and s.kind in ("bool", "int", "uint", "float")


def contains_vars(t: Any) -> bool:
    if isinstance(t, (TypeVar, ValueVar)):
        return True
    if isinstance(t, VectorType):
        return contains_vars(t.elem) or contains_vars(t.n)
    if isinstance(t, MatrixType):
        return contains_vars(t.elem) or contains_vars(t.rows) or contains_vars(t.cols)
    if isinstance(t, (ArrayType, PointerType, AtomicType, OptionalType)):
        return contains_vars(t.elem) or (isinstance(t, ArrayType) and contains_vars(t.n))
    if isinstance(t, BufferType):
        return t.elem is not None and contains_vars(t.elem)
    if isinstance(t, (StructType, InterfaceType)):
        return any(contains_vars(a) for a in t.args)
    if isinstance(t, TupleType):
        return any(contains_vars(a) for a in t.elems)
    if isinstance(t, PairType):
        return contains_vars(t.primal)
    return False


# Builtin interfaces each scalar type conforms to (checked when a generic is instantiated).
_FLOATS = {HALF, FLOAT, DOUBLE}
_INTS = {INT8, INT16, INT, INT64, UINT8, UINT16, UINT, UINT64}
_SIGNED_INTS = {INT8, INT16, INT, INT64}


def builtin_conforms(t: Type, iface: str) -> Optional[bool]:
    """None when `iface` is not a builtin interface name."""
    s = t if isinstance(t, ScalarType) else None
    vec_ok = isinstance(t, (VectorType, MatrixType)) and isinstance(t.elem, ScalarType)
    elem = t.elem if vec_ok else None
    if iface in ("__BuiltinType", "IComparable", "IRangedValue"):
        return s is not None or vec_ok or isinstance(t, EnumType)
    if iface == "__BuiltinArithmeticType":
        return s in _FLOATS | _INTS
    if iface == "IArithmetic":
        return (s in _FLOATS | _INTS) or (vec_ok and elem in _FLOATS | _INTS)
    if iface in ("__BuiltinSignedArithmeticType",):
        return s in _FLOATS | _SIGNED_INTS
    if iface in ("__BuiltinIntegerType", "IInteger"):
        return s in _INTS
    if iface in ("__BuiltinFloatingPointType", "IFloat", "__BuiltinRealType"):
        return (s in _FLOATS) or (iface == "IFloat" and vec_ok and elem in _FLOATS)
    if iface in ("__BuiltinLogicalType", "ILogical"):
        return s in _INTS or s == BOOL
    if iface == "IDifferentiable":
        return (s in _FLOATS) or (vec_ok and elem in _FLOATS) or \
            (isinstance(t, ArrayType) and builtin_conforms(t.elem, iface) is True)
    if iface in ("IDefaultInitializable",):
        return True
    if iface == "IAtomicAddable":       # types whose values an atomic add can accumulate (gradients)
        return (s in _FLOATS | _INTS) or (vec_ok and elem in _FLOATS | _INTS)
    return None


# ----------------------------------------------------------------------------- layout

def size_align(t: Type) -> tuple[int, int]:
    """C natural layout, as documented in reflection.py."""
    if isinstance(t, ScalarType):
        b = max(1, t.bits // 8) if t != VOID else 0
        return b, max(1, b)
    if isinstance(t, EnumType):
        return size_align(t.underlying)
    if isinstance(t, VectorType):
        s, a = size_align(t.elem)
        return s * t.n, a
    if isinstance(t, MatrixType):
        s, a = size_align(t.elem)
        return s * t.rows * t.cols, a
    if isinstance(t, ArrayType):
        s, a = size_align(t.elem)
        return s * (t.n or 0), a
    if isinstance(t, AtomicType):
        return size_align(t.elem)
    if isinstance(t, PointerType):
        return 8, 8
    if isinstance(t, BufferType):
        return 16, 8
    if isinstance(t, InterfaceType):
        words = getattr(t.info, "dyn_words", None)       # a dynamic value (check/dynamic.py): header + payload
        return (16 + 4 * words, 4) if words else (0, 1)
    if isinstance(t, StructType):
        off, al = 0, 1
        for _, ft in t.info.field_list():
            s, a = size_align(ft)
            off = (off + a - 1) // a * a + s
            al = max(al, a)
        return max((off + al - 1) // al * al, 1 if not t.info.field_list() else 0), al
    if isinstance(t, TupleType):
        off, al = 0, 1
        for ft in t.elems:
            s, a = size_align(ft)
            off = (off + a - 1) // a * a + s
            al = max(al, a)
        return (off + al - 1) // al * al, al
    if isinstance(t, PairType):
        return size_align(TupleType((t.primal, t.diff)))
    if isinstance(t, OptionalType):
        s, a = size_align(t.elem)
        off = (s + 0) + 1
        return (off + a - 1) // a * a, a
    return 0, 1
