"""The IR: concrete (fully specialized), typed, structured code.

The checker produces it; the emitter prints it; autodiff transforms it.  Every expression has
a concrete `type`; generics, methods, properties, overloaded operators and implicit conversions
are already resolved into plain calls, conversions and field accesses.  Control flow stays
structured (if / loops / switch) because both C++ and CUDA want it that way and because the
reverse-mode transform needs loop structure to size its checkpoint storage.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..source import Loc, NO_LOC
from ..types import Type
from .program import next_var_uid


class Var:
    """A local variable or parameter.  `uid` is unique within the compile (ir/program.py numbering)."""

    def __init__(self, name: str, type: Type, direction: str = "in", loc: Loc = NO_LOC):
        self.uid = next_var_uid()
        self.name = name
        self.type = type
        self.direction = direction     # for parameters: "in", "out", "inout"
        self.loc = loc

    def __repr__(self):
        return f"Var({self.name}#{self.uid}: {self.type})"


class GlobalVar:
    def __init__(self, name: str, type: Type, kind: str, init: Optional["Expr"] = None, loc: Loc = NO_LOC):
        self.name = name               # unique C name
        self.slang_name = name         # the name a host binds it by (may be dotted for cbuffer members)
        self.type = type
        self.kind = kind               # "uniform" (in the globals block), "static", "const", "groupshared"
        self.init = init
        self.loc = loc


# ----------------------------------------------------------------------------- expressions

@dataclass(eq=False)
class Expr:
    type: Type
    loc: Loc = field(default=NO_LOC, kw_only=True)


@dataclass(eq=False)
class Const(Expr):
    value: Any                          # int / float / bool


@dataclass(eq=False)
class LocalRef(Expr):
    var: Var


@dataclass(eq=False)
class GlobalRef(Expr):
    var: GlobalVar


@dataclass(eq=False)
class Call(Expr):
    func: "Function"
    args: list[Expr]                    # out/inout arguments are lvalues


@dataclass(eq=False)
class Intrinsic(Expr):
    """A call to a C++ prelude function (`sj::sin`) or a builtin operation spelled by `name`."""
    name: str
    args: list[Expr]
    out_params: tuple = ()              # indices of arguments passed by reference


@dataclass(eq=False)
class MethodCall(Expr):
    """A builtin object's method (buffer.GetDimensions, atomic.add) emitted as obj.name(args)."""
    obj: Expr
    name: str
    args: list[Expr]
    via_pointer: bool = False


@dataclass(eq=False)
class Unary(Expr):
    op: str                             # "-", "!", "~", "+"
    operand: Expr


@dataclass(eq=False)
class Binary(Expr):
    op: str                             # + - * / % & | ^ << >> && || == != < > <= >=
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class Assign(Expr):
    op: str                             # "=" or a compound "+=" ... (operands already the same type)
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class IncDec(Expr):
    op: str                             # "++" or "--"
    prefix: bool
    operand: Expr


@dataclass(eq=False)
class Convert(Expr):
    operand: Expr


@dataclass(eq=False)
class Construct(Expr):
    """A value of `type` built from args: vector/matrix concatenation, struct member-wise,
    array element-wise, or (no args) the zero / default value."""
    args: list[Expr]
    splat: bool = False                 # one scalar argument broadcast to a vector/matrix


@dataclass(eq=False)
class Field(Expr):
    obj: Expr
    name: str
    via_pointer: bool = False


@dataclass(eq=False)
class Swizzle(Expr):
    obj: Expr
    indices: tuple


@dataclass(eq=False)
class Index(Expr):
    obj: Expr                           # array, vector, matrix (row), buffer, pointer
    index: Expr


@dataclass(eq=False)
class Deref(Expr):
    ptr: Expr


@dataclass(eq=False)
class AddressOf(Expr):
    operand: Expr


@dataclass(eq=False)
class Select(Expr):
    cond: Expr                          # scalar bool: short-circuit ?: ; vector: element-wise
    then: Expr
    else_: Expr


@dataclass(eq=False)
class Comma(Expr):
    first: Expr
    second: Expr


@dataclass(eq=False)
class Detach(Expr):
    """`no_diff expr` / `detach(expr)`: the value, with a zero derivative."""
    operand: Expr


@dataclass(eq=False)
class SystemValue(Expr):
    """SV_DispatchThreadID / SV_GroupID / SV_GroupThreadID / SV_GroupIndex, as uint3 / uint."""
    name: str


@dataclass(eq=False)
class StmtExpr(Expr):
    """Statements evaluated for effect, then `result` (used for copy-out of out-args)."""
    stmts: list["Stmt"]
    result: Optional[Expr]


@dataclass(eq=False)
class OutConvert(Expr):
    """An out/inout argument whose type differs from the parameter: the emitter passes a
    temporary of `type` and converts back after the call."""
    lvalue: Expr


@dataclass(eq=False)
class NoneExpr(Expr):
    """The `none` literal of Optional<T>."""


@dataclass(eq=False)
class ValueVarExpr(Expr):
    """A generic value parameter during inference (never reaches the emitter)."""
    var: Any


# ----------------------------------------------------------------------------- statements

@dataclass(eq=False)
class Stmt:
    loc: Loc = field(default=NO_LOC, kw_only=True)


@dataclass(eq=False)
class Block(Stmt):
    stmts: list[Stmt]


@dataclass(eq=False)
class VarDecl(Stmt):
    var: Var
    init: Optional[Expr]


@dataclass(eq=False)
class ExprStmt(Stmt):
    expr: Expr


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Optional[Stmt] = None


@dataclass(eq=False)
class Loop(Stmt):
    """for / while / do-while.  `init` runs once; `cond` is tested before (or, for do-while,
    after) each iteration; `step` runs after the body and on `continue`."""
    kind: str                           # "for", "while", "do"
    init: list[Stmt]
    cond: Optional[Expr]
    step: Optional[Expr]
    body: Stmt
    label: Optional[str] = None
    attrs: dict = field(default_factory=dict)   # "unroll", "max_iters", ...


@dataclass(eq=False)
class SwitchCase:
    values: list[int]
    is_default: bool
    body: list[Stmt]


@dataclass(eq=False)
class Switch(Stmt):
    value: Expr
    cases: list[SwitchCase]
    label: Optional[str] = None


@dataclass(eq=False)
class Break(Stmt):
    label: Optional[str] = None         # a labeled break leaves the named loop/switch


@dataclass(eq=False)
class Continue(Stmt):
    label: Optional[str] = None


@dataclass(eq=False)
class Return(Stmt):
    value: Optional[Expr] = None


@dataclass(eq=False)
class Discard(Stmt):
    pass


# ----------------------------------------------------------------------------- module level

class Function:
    def __init__(self, name: str, params: list[Var], ret: Type, loc: Loc = NO_LOC):
        self.name = name                # unique C name
        self.slang_name = name
        self.params = params
        self.ret = ret
        self.body: Optional[Block] = None
        self.loc = loc
        self.attrs: dict = {}           # "entry": EntryInfo, "differentiable": ...
        self.intrinsic: Optional[str] = None   # C++ spelling for body-less core functions

    def __repr__(self):
        return f"Function({self.name})"


class Module:
    """One compiled program: everything reachable from its entry points."""

    def __init__(self):
        self.structs: list = []         # StructType in dependency order (fields before users)
        self.globals: list[GlobalVar] = []
        self.functions: list[Function] = []
        self.entry_points: list[Function] = []
