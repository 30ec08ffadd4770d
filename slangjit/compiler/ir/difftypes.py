"""Differentiable types, read from the facts the checker recorded: T.Differential, pair types,
zero, addition and scaling of differentials.

float/half/double, their vectors and matrices are their own Differential; arrays of
differentiable elements are differentiable element-wise; DifferentialPair<T> is differentiable
with Differential = DifferentialPair<T.Differential> (so derivatives of derivatives work);
tuples element-wise.  Those rules are structural and live here.  What a *struct* is decided by
the checker (check/difftypes.py), which records it on the struct's info before autodiff runs:

    info.ptr_kind     does the struct conform to IDifferentiablePtrType ("pointer kind")?
    info.diff_type    its Differential type (None: not differentiable)
    info.diff_error   the CompileError to raise when its Differential is asked for
    info.diff_fields  field name -> the field of the Differential holding its derivative (or None)

A pointer kind's Differential is another pointer kind: the location of its gradient storage.  Its
derivatives take a DifferentialPtrPair by value and are never accumulated or transposed, so pointer
kinds are left out of structs' differentials; an array of pointer kinds is itself a pointer kind.

`diff_type` / `is_ptr_kind` take an optional `struct_facts` hook: the checker passes the function
that computes (and records) a struct's facts; every later stage reads the recorded ones.
"""
from __future__ import annotations

from typing import Callable, Optional

from .. import types as T
from ..source import error
from . import nodes as ir


def is_float_like(t: T.Type) -> bool:
    s = T.scalar_of(t)
    return s is not None and s.kind == "float" and isinstance(t, (T.ScalarType, T.VectorType, T.MatrixType))


def recorded_facts(t: T.StructType):
    """The checker's facts for struct type t (see the module docstring)."""
    info = t.info
    if "diff_type" not in info.__dict__ or "ptr_kind" not in info.__dict__:
        raise error("E9003", f"internal compiler error: no autodiff facts were recorded for struct '{t}' "
                             f"(this is a slangjit bug)", info.sym.decl.loc)
    return info


def is_ptr_kind(t: T.Type, struct_facts: Callable = recorded_facts) -> bool:
    """Does t conform to IDifferentiablePtrType?  An array of pointer kinds is one too (its
    Differential is the array of the elements' Differentials), as in Slang's core library."""
    if isinstance(t, T.ArrayType):
        return is_ptr_kind(t.elem, struct_facts)
    if not isinstance(t, T.StructType) or t.info is None:
        return False
    return bool(struct_facts(t).ptr_kind)


def pair_of(t: T.Type, d: T.Type, struct_facts: Callable = recorded_facts) -> T.PairType:
    """The pair type a derivative uses for a value of type t with differential d."""
    return T.PtrPairType(t, d) if is_ptr_kind(t, struct_facts) else T.PairType(t, d)


def diff_type(t: T.Type, struct_facts: Callable = recorded_facts) -> Optional[T.Type]:
    if is_float_like(t):
        return t
    if isinstance(t, T.ArrayType):
        e = diff_type(t.elem, struct_facts)
        return T.ArrayType(e, t.n) if e is not None else None
    if isinstance(t, T.PtrPairType):
        return None
    if isinstance(t, T.PairType):
        d = diff_type(t.diff, struct_facts)
        return T.PairType(t.diff, d) if d is not None else None
    if isinstance(t, T.TupleType):
        elems = [diff_type(e, struct_facts) for e in t.elems]
        if all(e is None for e in elems):
            return None
        return T.TupleType(tuple(e if e is not None else T.FLOAT for e in elems))
    if isinstance(t, T.OptionalType):
        # Optional<T>.Differential = Optional<T.Differential> (none: no derivative)
        e = diff_type(t.elem, struct_facts) if not is_ptr_kind(t.elem, struct_facts) else None
        return T.OptionalType(e) if e is not None else None
    if isinstance(t, T.InterfaceType) and struct_facts is recorded_facts and "diff_type" not in t.info.__dict__:
        return None             # an interface no dynamic value was made of
    if isinstance(t, (T.StructType, T.InterfaceType)) and t.info is not None:
        # (an interface type here is a dynamic value: check/dynamic.py records its Differential)
        info = struct_facts(t)
        err = info.__dict__.get("diff_error")
        if err is not None:
            raise err
        return info.diff_type
    return None


def diff_field_name(struct_t: T.StructType, name: str) -> Optional[str]:
    """The field of struct_t's Differential that holds the derivative of field `name`
    (same name, or the one named by [DerivativeMember(D.f)]); None: no derivative."""
    dt = diff_type(struct_t)
    if not isinstance(dt, T.StructType) or is_ptr_kind(struct_t):
        return None             # a pointer's fields are addressing data, not differentiable values
    return struct_t.info.diff_fields.get(name)


def zero(t: T.Type) -> ir.Expr:
    return ir.Construct(t, [])


def add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """a + b for two differentials of the same type."""
    t = a.type
    if is_float_like(t):
        return ir.Binary(t, "+", a, b)
    if isinstance(t, T.ArrayType):
        return ir.Construct(t, [add(ir.Index(t.elem, a, ir.Const(T.INT, i)), ir.Index(t.elem, b, ir.Const(T.INT, i)))
                                for i in range(t.n or 0)])
    if isinstance(t, T.StructType):
        return ir.Construct(t, [add(ir.Field(ft, a, n), ir.Field(ft, b, n)) for n, ft in t.info.field_list()])
    if isinstance(t, T.PairType):
        return ir.Construct(t, [add(ir.Field(t.primal, a, "p"), ir.Field(t.primal, b, "p")),
                                add(ir.Field(t.diff, a, "d"), ir.Field(t.diff, b, "d"))])
    if isinstance(t, T.TupleType):
        return ir.Construct(t, [add(ir.Field(e, a, f"_{i}"), ir.Field(e, b, f"_{i}")) for i, e in enumerate(t.elems)])
    if isinstance(t, T.OptionalType):
        # none is the zero: a + b where both hold a value, else whichever holds one
        both = ir.Construct(t, [add(ir.Field(t.elem, a, "value"), ir.Field(t.elem, b, "value"))])
        return ir.Select(t, ir.Field(T.BOOL, a, "hasValue"),
                         ir.Select(t, ir.Field(T.BOOL, b, "hasValue"), both, a), b)
    raise ValueError(f"cannot add differentials of type {t}")


def scale(s: ir.Expr, a: ir.Expr) -> ir.Expr:
    t = a.type
    if is_float_like(t):
        return ir.Binary(t, "*", a, s if T.scalar_of(s.type) == T.scalar_of(t) else ir.Convert(T.scalar_of(t), s))
    if isinstance(t, T.ArrayType):
        return ir.Construct(t, [scale(s, ir.Index(t.elem, a, ir.Const(T.INT, i))) for i in range(t.n or 0)])
    if isinstance(t, T.StructType):
        return ir.Construct(t, [scale(s, ir.Field(ft, a, n)) for n, ft in t.info.field_list()])
    if isinstance(t, T.OptionalType):
        return ir.Select(t, ir.Field(T.BOOL, a, "hasValue"),
                         ir.Construct(t, [scale(s, ir.Field(t.elem, a, "value"))]), a)
    raise ValueError(f"cannot scale differentials of type {t}")
