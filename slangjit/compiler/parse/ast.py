"""The syntax tree the parser produces and the checker consumes.

Types are written as expressions (`Name`, `Member`, `GenericApp`, `ArrayTypeExpr`,
`PointerTypeExpr`) because Slang's grammar does not separate them (`Foo<T>(x)` is a
constructor call, `T.getPi()` a static call); the checker decides what each denotes.
Every node carries `loc` so diagnostics can point at it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional

from ..source import Loc, NO_LOC


@dataclass
class Node:
    loc: Loc = field(default=NO_LOC, kw_only=True)


@dataclass
class Attribute(Node):
    name: str                      # e.g. "numthreads", "Differentiable", "MaxIters"
    args: list["Expr"] = field(default_factory=list)


# ----------------------------------------------------------------------------- expressions

class Expr(Node):
    pass


@dataclass
class Name(Expr):
    name: str


@dataclass
class IntLit(Expr):
    value: int
    suffix: str = ""               # "", "u", "l", "ll", "ul", "ull", "z" ... lower-cased


@dataclass
class FloatLit(Expr):
    value: float
    suffix: str = ""               # "", "f", "h", "l" (double) lower-cased
    text: str = ""                 # as written, for exact re-emission


@dataclass
class BoolLit(Expr):
    value: bool


@dataclass
class StringLit(Expr):
    value: str


@dataclass
class Member(Expr):
    base: Expr
    name: str
    op: str = "."                  # ".", "::" or "->"


@dataclass
class GenericApp(Expr):
    base: Expr
    args: list[Expr]               # type or value arguments


@dataclass
class Call(Expr):
    callee: Expr
    args: list[Expr]


@dataclass
class Index(Expr):
    base: Expr
    indices: list[Expr]            # a[i] has one; __subscript may take several: a[i, j]


@dataclass
class Unary(Expr):
    op: str                        # "-", "+", "!", "~", "++", "--" (prefix), "*" (deref), "&" (address-of)
    operand: Expr


@dataclass
class Postfix(Expr):
    op: str                        # "++" or "--"
    operand: Expr


@dataclass
class Binary(Expr):
    op: str                        # arithmetic, comparison, logical, bitwise, shift, ","
    lhs: Expr
    rhs: Expr


@dataclass
class Assign(Expr):
    op: str                        # "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="
    lhs: Expr
    rhs: Expr


@dataclass
class Conditional(Expr):
    cond: Expr
    then: Expr
    else_: Expr


@dataclass
class Cast(Expr):
    type: Expr                     # C-style cast `(T)x`
    operand: Expr


@dataclass
class InitList(Expr):
    items: list[Expr]              # `{a, b, {c}}`; `{}` has no items


@dataclass
class ArrayTypeExpr(Expr):
    element: Expr
    size: Optional[Expr]           # None for unsized `T[]`


@dataclass
class PointerTypeExpr(Expr):
    element: Expr


@dataclass
class ThisExpr(Expr):             # `this`
    pass


@dataclass
class ThisTypeExpr(Expr):         # `This`
    pass


@dataclass
class IsExpr(Expr):
    operand: Expr
    type: Expr


@dataclass
class AsExpr(Expr):
    operand: Expr
    type: Expr


@dataclass
class SizeOfExpr(Expr):
    operand: Expr                  # a type or a value
    kind: str = "sizeof"           # "sizeof", "alignof" or "countof"


@dataclass
class ExpandExpr(Expr):           # `expand <expr using each T>`
    operand: Expr


@dataclass
class EachExpr(Expr):             # `each T` / `each x`
    operand: Expr


@dataclass
class LambdaExpr(Expr):
    params: list["Param"]
    body: "Stmt"                   # a Block, or an ExprStmt-equivalent Return for `=> expr`


# ----------------------------------------------------------------------------- statements

@dataclass
class Stmt(Node):
    attrs: list[Attribute] = field(default_factory=list, kw_only=True)


@dataclass
class Block(Stmt):
    stmts: list[Stmt]


@dataclass
class ExprStmt(Stmt):
    expr: Expr


@dataclass
class DeclStmt(Stmt):
    decls: list["Decl"]            # local variables (several for `int a, b;`), or a local struct/typealias


@dataclass
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Optional[Stmt] = None


@dataclass
class IfLet(Stmt):                 # `if (let x = optionalExpr) ... else ...`
    name: str
    value: Expr
    then: Stmt
    else_: Optional[Stmt] = None


@dataclass
class For(Stmt):
    init: Optional[Stmt]           # DeclStmt or ExprStmt
    cond: Optional[Expr]
    step: Optional[Expr]
    body: Stmt


@dataclass
class While(Stmt):
    cond: Expr
    body: Stmt


@dataclass
class DoWhile(Stmt):
    body: Stmt
    cond: Expr


@dataclass
class SwitchCase(Node):
    values: list[Expr]             # empty and is_default for `default:`; several for shared labels
    is_default: bool
    body: list[Stmt]               # statements until the next label (fall-through is preserved)


@dataclass
class Switch(Stmt):
    value: Expr
    cases: list[SwitchCase]


@dataclass
class Break(Stmt):
    label: Optional[str] = None


@dataclass
class Continue(Stmt):
    label: Optional[str] = None


@dataclass
class Return(Stmt):
    value: Optional[Expr] = None


@dataclass
class Discard(Stmt):
    pass


@dataclass
class Empty(Stmt):
    pass


@dataclass
class Labeled(Stmt):
    label: str
    stmt: Stmt


# ----------------------------------------------------------------------------- declarations

@dataclass
class Decl(Node):
    attrs: list[Attribute] = field(default_factory=list, kw_only=True)
    mods: set[str] = field(default_factory=set, kw_only=True)   # static const uniform groupshared public ...


@dataclass
class GenericParam(Node):
    name: str
    kind: str                      # "type", "value" (`let N : int` / `int N`) or "pack" (`each T`)
    type: Optional[Expr] = None    # constraint interface for "type"/"pack" (may be None); value type for "value"
    default: Optional[Expr] = None
    also: list = field(default_factory=list, kw_only=True)   # further constraints: `T : IA & IB` -> [IB]


@dataclass
class WhereClause(Node):
    subject: Expr                  # `where T : IFoo` -> subject Name("T"), constraint Name("IFoo")
    constraint: Expr
    equal: bool = field(default=False, kw_only=True)   # `where T.Differential == T`: the two types are equal


@dataclass
class VarDecl(Decl):
    name: str
    type: Optional[Expr]           # None for `let x = ...` / `var x = ...`
    init: Optional[Expr] = None
    semantic: Optional[str] = None  # `: SV_DispatchThreadID`
    keyword: str = ""              # "let", "var" or "" (typed declaration)


@dataclass
class Param(Node):
    name: str
    type: Expr
    direction: str = "in"          # "in", "out", "inout", "ref", "constref"
    default: Optional[Expr] = None
    semantic: Optional[str] = None
    attrs: list[Attribute] = field(default_factory=list)
    mods: set[str] = field(default_factory=set)   # "uniform", "no_diff", "const" ...


@dataclass
class FuncDecl(Decl):
    name: str                      # "__init" for constructors; "operator+" etc. for operators
    params: list[Param]
    return_type: Optional[Expr]    # None for __init / void when omitted
    body: Optional[Block]          # None for a declaration only (interfaces, core intrinsics)
    generic_params: list[GenericParam] = field(default_factory=list)
    where: list[WhereClause] = field(default_factory=list)
    semantic: Optional[str] = None  # return-value semantic


class LazyBodyFuncDecl(FuncDecl):
    """A FuncDecl whose body is made when first read, by `self._sj_load()` (by default the no-argument callable
    `_sj_loader` in the instance's dict): the parser defers the bodies of the compiler's own library functions
    (parser.py, `lazy_bodies`), the front-end cache unpickles its trees' bodies on demand (frontend_cache.py
    overrides `_sj_load`).  Declaring a module needs only the signatures.  Everywhere else it is the FuncDecl
    it stands for: isinstance holds, and the body read is the tree an eager parse gives."""

    def __init__(self, *args, **kwargs):
        if args or kwargs:                 # as FuncDecl; with no arguments, an empty one for an unpickler
            super().__init__(*args, **kwargs)

    def _sj_load(self):
        return self.__dict__["_sj_loader"]()

    @property
    def body(self):
        d = self.__dict__
        b = d.get("_sj_body", d)
        if b is d:
            with _LAZY_LOCK:               # one body object per decl, also when two threads race here
                b = d.get("_sj_body", d)
                if b is d:
                    b = self._sj_load()
                    d["_sj_body"] = b
                    d.pop("_sj_loader", None)
        return b

    @body.setter
    def body(self, value):
        self.__dict__["_sj_body"] = value

    def is_loaded(self) -> bool:
        return "_sj_body" in self.__dict__


_LAZY_LOCK = threading.RLock()


@dataclass
class Accessor(Node):
    kind: str                      # "get", "set", "ref"
    param: Optional[Param]         # the setter's parameter (None: implicit `newValue`)
    body: Optional[Block]
    mods: set[str] = field(default_factory=set)   # e.g. "mutating" / "nonmutating"
    attrs: list[Attribute] = field(default_factory=list)


@dataclass
class PropertyDecl(Decl):
    name: str
    type: Expr
    accessors: list[Accessor]


@dataclass
class SubscriptDecl(Decl):
    params: list[Param]
    return_type: Expr
    accessors: list[Accessor]


@dataclass
class StructDecl(Decl):
    name: str
    members: list[Decl]
    generic_params: list[GenericParam] = field(default_factory=list)
    bases: list[Expr] = field(default_factory=list)
    where: list[WhereClause] = field(default_factory=list)
    is_class: bool = False


@dataclass
class InterfaceDecl(Decl):
    name: str
    members: list[Decl]
    generic_params: list[GenericParam] = field(default_factory=list)
    bases: list[Expr] = field(default_factory=list)


@dataclass
class AssocTypeDecl(Decl):
    name: str
    constraints: list[Expr] = field(default_factory=list)


@dataclass
class ExtensionDecl(Decl):
    target: Expr
    members: list[Decl]
    generic_params: list[GenericParam] = field(default_factory=list)
    bases: list[Expr] = field(default_factory=list)
    where: list[WhereClause] = field(default_factory=list)


@dataclass
class TypeAliasDecl(Decl):
    name: str
    type: Expr
    generic_params: list[GenericParam] = field(default_factory=list)
    bases: list[Expr] = field(default_factory=list)   # `export struct X : I = Y;`: Y must conform to I


@dataclass
class EnumCase(Node):
    name: str
    value: Optional[Expr] = None


@dataclass
class EnumDecl(Decl):
    name: str
    cases: list[EnumCase]
    underlying: Optional[Expr] = None
    is_class: bool = False


@dataclass
class NamespaceDecl(Decl):
    name: str                      # may be dotted: `namespace a.b` / `a::b`
    members: list[Decl]


@dataclass
class UsingDecl(Decl):
    target: Expr                   # `using namespace a.b;` / `using a;`


@dataclass
class CBufferDecl(Decl):
    name: str
    members: list[Decl]            # VarDecls


@dataclass
class ImportDecl(Decl):
    module: str                    # `import a.b;` -> "a.b"; `import "x.slang";` -> "x.slang"
    is_path: bool = False          # written as a string
    kind: str = "import"           # "import", "include" (`__include`), "implementing", "module"


@dataclass
class Module(Node):
    path: str
    decls: list[Decl]
