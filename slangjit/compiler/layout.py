"""Memory layout of types as the generated C++ / CUDA lays them out (the C-natural rules of
types.size_align): what reflection reports and what the runtime and the functional layer pack."""
from __future__ import annotations

from . import types as T
from .reflection import FieldLayout, TypeLayout


def type_layout(t: T.Type) -> TypeLayout:
    size, align = T.size_align(t)
    name = str(t)
    if isinstance(t, T.EnumType):
        t = t.underlying
    if isinstance(t, T.ScalarType):
        return TypeLayout("scalar", name, size, align, scalar=T.NUMPY_NAMES.get(t))
    if isinstance(t, T.VectorType):
        return TypeLayout("vector", name, size, align, scalar=T.NUMPY_NAMES.get(t.elem), count=t.n)
    if isinstance(t, T.MatrixType):
        return TypeLayout("matrix", name, size, align, scalar=T.NUMPY_NAMES.get(t.elem), count=t.rows, cols=t.cols)
    if isinstance(t, T.ArrayType):
        return TypeLayout("array", name, size, align, count=t.n or 0, element=type_layout(t.elem))
    if isinstance(t, T.AtomicType):
        return TypeLayout("scalar", name, size, align, scalar=T.NUMPY_NAMES.get(t.elem))
    if isinstance(t, T.PointerType):
        el = type_layout(t.elem) if t.elem != T.VOID else None
        return TypeLayout("pointer", name, 8, 8, element=el)
    if isinstance(t, T.BufferType):
        el = type_layout(t.elem) if t.elem is not None else None
        return TypeLayout("buffer", name, 16, 8, element=el, writable=t.writable,
                          buffer_kind="byteaddress" if t.byte_address else "structured")
    if isinstance(t, T.StructType):
        fields = []
        off = 0
        for fname, ft in t.info.field_list():
            s, a = T.size_align(ft)
            off = (off + a - 1) // a * a
            fields.append(FieldLayout(fname, off, type_layout(ft)))
            off += s
        return TypeLayout("struct", name, size, align, fields=fields)
    return TypeLayout("struct", name, size, align)


def block_layout(items: list[tuple[str, T.Type]]) -> tuple[list[FieldLayout], int]:
    off, al = 0, 1
    out = []
    for name, t in items:
        s, a = T.size_align(t)
        off = (off + a - 1) // a * a
        out.append(FieldLayout(name, off, type_layout(t)))
        off += s
        al = max(al, a)
    return out, max(8, (off + al - 1) // al * al)
