"""Walking IR: every node below a node (`walk`), an expression's operands (`expr_children`).
(Which functions an entry reaches and which intrinsics they call: passes/reach.py.)"""
from __future__ import annotations

import dataclasses
from typing import Iterator

from . import nodes as ir


_CHILD_FIELDS: dict = {}


def _child_fields(cls) -> tuple:
    """The fields of a node class that may hold child nodes (None: not a node class)."""
    f = _CHILD_FIELDS.get(cls, False)
    if f is False:
        f = (tuple(x.name for x in dataclasses.fields(cls) if x.name not in ("type", "loc", "func", "var"))
             if dataclasses.is_dataclass(cls) else None)
        _CHILD_FIELDS[cls] = f
    return f


def walk(node) -> Iterator:
    """Every IR node (expressions, statements, switch cases) below `node`, `node` included."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
            continue
        names = _child_fields(type(n))
        if names is None:
            continue
        yield n
        for name in names:
            v = getattr(n, name)
            if isinstance(v, list) or _child_fields(type(v)) is not None:
                stack.append(v)


def expr_children(e) -> Iterator:
    """The operand expressions of expression `e` (not its type, location, callee or variable)."""
    for name in e.__dataclass_fields__:
        if name in ("type", "loc", "func", "var"):
            continue
        v = getattr(e, name)
        if isinstance(v, list):
            yield from (x for x in v if isinstance(x, ir.Expr))
        elif isinstance(v, ir.Expr):
            yield v
