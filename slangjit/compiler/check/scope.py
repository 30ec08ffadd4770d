"""Lexical environments and the symbols they hold.

Generics are checked once per instantiation (like C++ templates, memoized by declaration and
arguments), so an environment binds generic parameter names directly to concrete types or
constant values; nothing here is abstract.
"""
from __future__ import annotations

from typing import Any, Optional

from ..parse import ast
from ..types import Type


class Sym:
    name: str = ""


class TypeSym(Sym):
    def __init__(self, name: str, type: Type):
        self.name, self.type = name, type


class ValueSym(Sym):
    """A value known by name: a local variable (LocalRef), a bound generic value (Const)."""
    def __init__(self, name: str, expr: Any):
        self.name, self.expr = name, expr


class DeclSym(Sym):
    """A declaration together with the environment it was declared in."""
    def __init__(self, decl: ast.Decl, env: "Env", owner: Optional[Type] = None):
        self.decl = decl
        self.env = env
        self.owner = owner            # the struct/extension target type for members
        self.name = getattr(decl, "name", "")
        self.cache: dict = {}         # instantiations keyed by generic arguments


class FuncSym(DeclSym):
    @property
    def is_static(self) -> bool:
        return "static" in self.decl.mods or self.decl.name == "__init"


class StructSym(DeclSym):
    pass


class InterfaceSym(DeclSym):
    pass


class AliasSym(DeclSym):
    pass


class EnumSym(DeclSym):
    pass


class GlobalSym(DeclSym):
    """A module-level or static member variable (uniform, static const, groupshared ...)."""


class FieldSym(Sym):
    """A struct field, found through the implicit `this` of a method."""
    def __init__(self, name: str, type: Type):
        self.name, self.type = name, type


class PropertySym(DeclSym):
    pass


class SubscriptSym(DeclSym):
    pass


class AssocTypeSym(DeclSym):
    pass


class PackSym(Sym):
    """A variadic generic pack: `each T` (types) or the parameter `expand each T args` (values)."""
    def __init__(self, name: str, items: list, is_type: bool):
        self.name, self.items, self.is_type = name, items, is_type


class NamespaceSym(Sym):
    def __init__(self, name: str, env: "Env"):
        self.name, self.env = name, env


class Env:
    def __init__(self, parent: Optional["Env"] = None, kind: str = "block"):
        self.parent = parent
        self.kind = kind              # "module" "namespace" "struct" "function" "block" "generic"
        self.names: dict[str, list[Sym]] = {}
        self.usings: list["Env"] = []
        self.prefer_usings = False
        self.this_type: Optional[Type] = parent.this_type if parent else None
        self.module: Any = parent.module if parent else None

    def add(self, name: str, sym: Sym):
        self.names.setdefault(name, []).append(sym)

    def lookup_local(self, name: str) -> list[Sym]:
        if self.prefer_usings:
            # Interface default bodies: the conforming type's own members win over defaults.
            for u in self.usings:
                f = u.lookup_local(name)
                if f:
                    return f
        found = self.names.get(name)
        if found:
            return found
        for u in self.usings:
            f = u.lookup_local(name)
            if f:
                return f
        return []

    def lookup(self, name: str) -> list[Sym]:
        env: Optional[Env] = self
        while env is not None:
            found = env.lookup_local(name)
            if found:
                # Overloads of a function name may be spread over enclosing scopes (e.g. methods
                # vs globals); the innermost scope that has the name wins, as in C++.
                return found
            env = env.parent
        return []


class CoreEnv(Env):
    """The core library's environment.  Some of its modules are declared on demand (`on_demand`): a program
    that names none of what they declare (`triggers`: their top-level names, plain enums' cases and the
    members of their extensions) never pays for parsing them.  The first lookup of a trigger name here, or of
    a member of that name (check/members.py `member_syms`), declares them, ahead of the other core symbols,
    as if they had been declared first (the order the eager core library had)."""

    def __init__(self):
        super().__init__(kind="module")
        self.triggers: frozenset = frozenset()
        self.on_demand = None           # callable() -> None that declares the modules; None once done

    def require(self, name: str) -> None:
        if name in self.triggers and self.on_demand is not None:
            declare, self.on_demand = self.on_demand, None
            declare()

    def lookup_local(self, name: str) -> list[Sym]:
        if name in self.triggers and self.on_demand is not None:
            self.require(name)
        return Env.lookup_local(self, name)
