"""Read-only questions about a program's call graph: which functions an entry point reaches, which
intrinsics they call, which of an entry's parameters are system values.  The passes ask them to pick
per-kernel strategies (e.g. the CUDA block cache for gradient atomics); nothing here changes the IR."""
from __future__ import annotations

from typing import Iterator, Optional

from ..ir import nodes as ir
from ..ir.walk import walk


class BodyNodes(dict):
    """id(Function) -> the nodes of its body in `walk` order (a list; empty without a body), walked on first
    request.  For analyses that walk the same bodies several times while nothing changes them (one plan of
    passes/cpu_adds.py): a list is read many times faster than the walk is repeated.  Keeps the functions it
    was asked about alive, so an id is never reused while it lives."""

    def __init__(self):
        super().__init__()
        self._keep: list = []

    def put(self, fn: ir.Function, nodes: list) -> None:
        """fn's body nodes, walked by the caller (list(walk(fn.body)))."""
        self[id(fn)] = nodes
        self._keep.append(fn)

    def of(self, fn: ir.Function) -> list:
        k = id(fn)
        nodes = self.get(k)
        if nodes is None:
            nodes = self[k] = list(walk(fn.body)) if fn.body is not None else []
            self._keep.append(fn)
        return nodes


def _nodes(fn: ir.Function, memo: Optional[BodyNodes]):
    if memo is not None:
        return memo.of(fn)
    return walk(fn.body) if fn.body is not None else ()


def reachable(entry: ir.Function, memo: Optional[BodyNodes] = None) -> list[ir.Function]:
    """`entry` and every function it calls, directly or not (each once).  `memo`: body nodes to reuse."""
    seen: dict[int, ir.Function] = {}
    todo = [entry]
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen[id(fn)] = fn
        if fn.body is not None:
            todo.extend(n.func for n in _nodes(fn, memo) if isinstance(n, ir.Call))
    return list(seen.values())


def intrinsic_calls(functions: list[ir.Function], memo: Optional[BodyNodes] = None) -> Iterator[ir.Intrinsic]:
    for fn in functions:
        if fn.body is not None:
            yield from (n for n in _nodes(fn, memo) if isinstance(n, ir.Intrinsic))


def system_value_params(fn: ir.Function) -> set[int]:
    """Indices of an entry point's parameters that are bound to system values (thread ids)."""
    decl = fn.attrs.get("decl")
    out = set()
    for i, ap in enumerate(decl.params if decl is not None else ()):
        if (ap.semantic or "").lower().startswith("sv_"):
            out.add(i)
    return out
