"""What name resolution yields (values, types, overload sets, ...), the checker's record of an
instantiated struct or interface, and small helpers every checker file shares.  A leaf of check/:
the checker's mixins import it; it imports none of them."""
from __future__ import annotations

from typing import Any, Optional

from ..parse import ast
from ..ir import nodes as ir
from ..source import error
from .. import types as T
from .scope import DeclSym, Env, GlobalSym, InterfaceSym, StructSym

BUFFER_KINDS = {"StructuredBuffer", "RWStructuredBuffer", "ByteAddressBuffer", "RWByteAddressBuffer",
                "Buffer", "RWBuffer", "AppendStructuredBuffer", "ConsumeStructuredBuffer",
                "RasterizerOrderedStructuredBuffer", "RasterizerOrderedBuffer", "RasterizerOrderedByteAddressBuffer"}


class StructInstance:
    """One concrete struct type: fields in order plus the member environment."""

    def __init__(self, sym: StructSym, args: tuple, env: Env, type_: T.StructType):
        self.sym = sym
        self.args = args
        self.env = env                 # binds generic params, `This`, and every member name
        self.type = type_
        self.fields: list[tuple[str, T.Type, Optional[ast.Expr], Env]] = []
        self.bases: list[Any] = []     # interface types it declares
        self.c_name = ""
        self.has_init = False
        self.ready = False

    def field_list(self):
        return [(n, t) for n, t, _, _ in self.fields]

    def field_type(self, name: str) -> Optional[T.Type]:
        for n, t, _, _ in self.fields:
            if n == name:
                return t
        return None


class InterfaceInstance:
    def __init__(self, sym: InterfaceSym, args: tuple, env: Env):
        self.sym, self.args, self.env = sym, args, env
        self.bases: list[T.InterfaceType] = []


class CBufferMemberSym(DeclSym):
    def __init__(self, decl, env, cbuffer: GlobalSym):
        super().__init__(decl, env)
        self.cbuffer = cbuffer


# ---------------------------------------------------------------------- resolution results

class Res:
    pass


class ValueRes(Res):
    def __init__(self, expr: ir.Expr):
        self.expr = expr


class TypeRes(Res):
    def __init__(self, type: T.Type):
        self.type = type


class OverloadRes(Res):
    """A set of functions named at a call site, maybe with an implicit `this` and explicit
    generic arguments."""
    def __init__(self, cands: list, this: Optional[ir.Expr] = None, type_args: Optional[list] = None,
                 name: str = "", static_owner: Optional[T.Type] = None):
        self.cands = cands
        self.this = this
        self.type_args = type_args
        self.name = name
        self.static_owner = static_owner


class GenericRes(Res):
    def __init__(self, sym: DeclSym):
        self.sym = sym


class NamespaceRes(Res):
    def __init__(self, env: Env):
        self.env = env


class BuiltinIfaceRes(Res):
    def __init__(self, name: str):
        self.name = name

    def __str__(self):
        return self.name


class PropertyRes(Res):
    def __init__(self, obj: ir.Expr, getter, setter, type_: T.Type, name: str):
        self.obj, self.getter, self.setter, self.type, self.name = obj, getter, setter, type_, name




def const_expr(v, loc) -> ir.Expr:
    if isinstance(v, T.ValueVar):
        return ir.ValueVarExpr(T.INT, v)
    if isinstance(v, bool):
        return ir.Const(T.BOOL, v, loc=loc)
    if isinstance(v, int):
        return ir.Const(T.INT, v, loc=loc)
    if isinstance(v, float):
        return ir.Const(T.FLOAT, v, loc=loc)
    if isinstance(v, ir.Expr):
        return v
    raise error("E2021", f"invalid generic value {v!r}", loc)


def types_equal(a: T.Type, b: T.Type) -> bool:
    return a is b or a == b


def describe(e: ast.Expr) -> str:
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Member):
        return describe(e.base) + "." + e.name
    if isinstance(e, ast.GenericApp):
        return describe(e.base) + "<...>"
    return type(e).__name__
