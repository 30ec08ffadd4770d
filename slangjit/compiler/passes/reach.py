"""Read-only questions about a program's call graph: which functions an entry point reaches, which
intrinsics they call, which of an entry's parameters are system values.  The passes ask them to pick
per-kernel strategies (e.g. the CUDA block cache for gradient atomics); nothing here changes the IR."""
from __future__ import annotations

from typing import Iterator

from ..ir import nodes as ir
from ..ir.walk import walk


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


def system_value_params(fn: ir.Function) -> set[int]:
    """Indices of an entry point's parameters that are bound to system values (thread ids)."""
    decl = fn.attrs.get("decl")
    out = set()
    for i, ap in enumerate(decl.params if decl is not None else ()):
        if (ap.semantic or "").lower().startswith("sv_"):
            out.add(i)
    return out
