"""Differentiable types: T.Differential, zero and addition of differentials.

float/half/double, their vectors and matrices are their own Differential; arrays of
differentiable elements are differentiable element-wise; a struct conforming to
IDifferentiable gets a synthesized Differential struct holding its differentiable fields
(not `no_diff`, not integer), unless it names its own `Differential`.
DifferentialPair<T> is differentiable with Differential = DifferentialPair<T.Differential>
(so derivatives of derivatives work).

A struct conforming to IDifferentiablePtrType ("pointer kind") names its Differential, which
is another pointer kind: the location of its gradient storage.  Its derivatives take a
DifferentialPtrPair by value and are never accumulated or transposed, so pointer kinds are
left out of arrays' and structs' differentials.
"""
from __future__ import annotations

from typing import Optional

from ..parse import ast
from .. import types as T
from ..ir import nodes as ir


def is_float_like(t: T.Type) -> bool:
    s = T.scalar_of(t)
    return s is not None and s.kind == "float" and isinstance(t, (T.ScalarType, T.VectorType, T.MatrixType))


def is_ptr_kind(chk, t: T.Type) -> bool:
    """Does t conform to IDifferentiablePtrType?"""
    if not isinstance(t, T.StructType) or t.info is None:
        return False
    info = t.info
    if "ptr_kind" not in info.__dict__:
        from ..check.checker import BuiltinIfaceRes
        info.ptr_kind = False            # (re-entry while the bases are resolved)
        info.ptr_kind = chk.conforms(t, BuiltinIfaceRes("IDifferentiablePtrType"))
    return info.ptr_kind


def pair_of(chk, t: T.Type, d: T.Type) -> T.PairType:
    """The pair type a derivative uses for a value of type t with differential d."""
    return T.PtrPairType(t, d) if is_ptr_kind(chk, t) else T.PairType(t, d)


def diff_type(chk, t: T.Type) -> Optional[T.Type]:
    if is_float_like(t):
        return t
    if isinstance(t, T.ArrayType):
        if is_ptr_kind(chk, t.elem):
            return None
        e = diff_type(chk, t.elem)
        return T.ArrayType(e, t.n) if e is not None else None
    if isinstance(t, T.PtrPairType):
        return None
    if isinstance(t, T.PairType):
        d = diff_type(chk, t.diff)
        return T.PairType(t.diff, d) if d is not None else None
    if isinstance(t, T.TupleType):
        elems = [diff_type(chk, e) for e in t.elems]
        if all(e is None for e in elems):
            return None
        return T.TupleType(tuple(e if e is not None else T.FLOAT for e in elems))
    if isinstance(t, T.StructType):
        return struct_diff_type(chk, t)
    return None


def struct_diff_type(chk, t: T.StructType) -> Optional[T.Type]:
    info = t.info
    if "diff_type" in info.__dict__:
        return info.diff_type
    info.diff_type = None
    if getattr(info, "differential_of", None) is not None:
        info.diff_type = t                      # a synthesized Differential is its own Differential
        return t
    own = [s for s in chk.member_syms(t, "Differential")]
    if is_ptr_kind(chk, t):
        return _ptr_diff_type(chk, t, own)
    if own:
        from ..check.checker import TypeRes
        res = chk.sym_to_res(own, None, t.info.sym.decl.loc, chk.ctx_for_env(t.info.env), "Differential")
        if isinstance(res, TypeRes) and res.type is not t:
            info.diff_type = res.type
            if isinstance(res.type, T.StructType):
                res.type.info.diff_type = res.type
            return res.type
        if isinstance(res, TypeRes):
            info.diff_type = t
            return t
    from ..check.checker import BuiltinIfaceRes
    if not chk.conforms(t, BuiltinIfaceRes("IDifferentiable")) or not _declares_differentiable(chk, t):
        return None
    fields = []
    decl_members = {m.name: m for m in info.sym.decl.members if isinstance(m, ast.VarDecl)}
    self_diff = True
    for name, ft, _, _ in info.fields:
        m = decl_members.get(name)
        if (m is not None and "no_diff" in m.mods) or is_ptr_kind(chk, ft):
            self_diff = False
            continue
        dt = diff_type(chk, ft)
        if dt is not None:
            fields.append((name, dt))
        if dt is None or dt != ft:
            self_diff = False
    if self_diff and fields:
        # Every field is its own Differential: so is the struct (as in Slang).
        info.diff_type = t
        return t
    if not fields:
        # Slang gives such a type an empty Differential; one dummy field keeps C++ happy.
        pass
    from ..check.members import TypeLiteral
    from ..check.scope import StructSym
    sdecl = ast.StructDecl(f"{info.sym.decl.name}_Differential",
                           [ast.VarDecl(n, TypeLiteral(ft)) for n, ft in fields], loc=info.sym.decl.loc)
    sym = StructSym(sdecl, info.env)
    dt = chk.instantiate_struct(sym, [], info.sym.decl.loc)
    dt.name = f"{t.name}.Differential"
    dt.info.differential_of = t
    dt.info.diff_type = dt
    info.diff_type = dt
    return dt


def _ptr_diff_type(chk, t: T.StructType, own: list) -> T.Type:
    """A pointer kind's Differential: named by the type (Slang has no synthesized one, since
    gradient storage cannot be made up by the compiler) and itself a pointer kind."""
    from ..check.checker import TypeRes
    from ..source import error
    loc = t.info.sym.decl.loc
    res = chk.sym_to_res(own, None, loc, chk.ctx_for_env(t.info.env), "Differential") if own else None
    if not isinstance(res, TypeRes):
        raise error("E6016", f"'{t}' conforms to IDifferentiablePtrType but declares no Differential type "
                             f"(e.g. `typealias Differential = {t};`)", loc)
    d = res.type
    if d is not t and not is_ptr_kind(chk, d):
        raise error("E6016", f"the Differential of pointer type '{t}' must itself conform to "
                             f"IDifferentiablePtrType, not be '{d}'", loc)
    t.info.diff_type = d
    return d


def _declares_differentiable(chk, t) -> bool:
    return True


def field_is_diff(chk, struct_t: T.StructType, name: str) -> Optional[T.Type]:
    """The Differential field type for `name`, or None if the field has no derivative."""
    dt = diff_type(chk, struct_t)
    if dt is None or not isinstance(dt, T.StructType):
        return None
    if dt is struct_t:
        return struct_t.info.field_type(name)
    return dt.info.field_type(name)


def zero(t: T.Type) -> ir.Expr:
    return ir.Construct(t, [])


def add(chk, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """a + b for two differentials of the same type."""
    t = a.type
    if is_float_like(t):
        return ir.Binary(t, "+", a, b)
    if isinstance(t, T.ArrayType):
        return ir.Construct(t, [add(chk, ir.Index(t.elem, a, ir.Const(T.INT, i)), ir.Index(t.elem, b, ir.Const(T.INT, i)))
                                for i in range(t.n or 0)])
    if isinstance(t, T.StructType):
        return ir.Construct(t, [add(chk, ir.Field(ft, a, n), ir.Field(ft, b, n)) for n, ft in t.info.field_list()])
    if isinstance(t, T.PairType):
        return ir.Construct(t, [add(chk, ir.Field(t.primal, a, "p"), ir.Field(t.primal, b, "p")),
                                add(chk, ir.Field(t.diff, a, "d"), ir.Field(t.diff, b, "d"))])
    if isinstance(t, T.TupleType):
        return ir.Construct(t, [add(chk, ir.Field(e, a, f"_{i}"), ir.Field(e, b, f"_{i}")) for i, e in enumerate(t.elems)])
    raise ValueError(f"cannot add differentials of type {t}")


def scale(chk, s: ir.Expr, a: ir.Expr) -> ir.Expr:
    t = a.type
    if is_float_like(t):
        return ir.Binary(t, "*", a, s if T.scalar_of(s.type) == T.scalar_of(t) else ir.Convert(T.scalar_of(t), s))
    if isinstance(t, T.ArrayType):
        return ir.Construct(t, [scale(chk, s, ir.Index(t.elem, a, ir.Const(T.INT, i))) for i in range(t.n or 0)])
    if isinstance(t, T.StructType):
        return ir.Construct(t, [scale(chk, s, ir.Field(ft, a, n)) for n, ft in t.info.field_list()])
    raise ValueError(f"cannot scale differentials of type {t}")


def diff_field_name(chk, struct_t: T.StructType, name: str) -> Optional[str]:
    """The field of struct_t's Differential that holds the derivative of field `name`
    (same name, or the one named by [DerivativeMember(D.f)])."""
    dt = diff_type(chk, struct_t)
    if not isinstance(dt, T.StructType) or is_ptr_kind(chk, struct_t):
        return None             # a pointer's fields are addressing data, not differentiable values
    for m in struct_t.info.sym.decl.members:
        if isinstance(m, ast.VarDecl) and m.name == name:
            if "no_diff" in m.mods:
                return None
            for a in m.attrs:
                if a.name == "DerivativeMember" and a.args and isinstance(a.args[0], ast.Member):
                    return a.args[0].name
    return name if dt.info.field_type(name) is not None else None
