"""Read-only questions about IR function bodies: which functions a function reaches, which
intrinsics it calls.  Used by the emitters to pick per-kernel strategies (e.g. the CUDA block
cache for gradient atomics); nothing here changes the IR."""
from __future__ import annotations

import dataclasses
from typing import Iterator

from . import nodes as ir


def walk(node) -> Iterator:
    """Every IR node (expressions, statements, switch cases) below `node`, `node` included."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
            continue
        if not dataclasses.is_dataclass(n):
            continue
        yield n
        for f in dataclasses.fields(n):
            if f.name in ("type", "loc", "func", "var"):
                continue
            v = getattr(n, f.name)
            if isinstance(v, list) or dataclasses.is_dataclass(v):
                stack.append(v)


def reachable(entry: ir.Function) -> list[ir.Function]:
    """`entry` and every function it calls, directly or not (each once)."""
    seen: dict[int, ir.Function] = {}
    todo = [entry]
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen[id(fn)] = fn
        if fn.body is not None:
            todo.extend(n.func for n in walk(fn.body) if isinstance(n, ir.Call))
    return list(seen.values())


def intrinsic_calls(functions: list[ir.Function]) -> Iterator[ir.Intrinsic]:
    for fn in functions:
        if fn.body is not None:
            yield from (n for n in walk(fn.body) if isinstance(n, ir.Intrinsic))


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
