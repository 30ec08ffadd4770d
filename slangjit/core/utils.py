"""SlangPy's `slangpy.core.utils` helpers."""
from __future__ import annotations


def parse_generic_signature(name: str) -> tuple:
    """Split a type name into its base name and its top-level generic arguments, as text:
    `"Tensor<vector<float, 4>, 2>"` -> `("Tensor", ["vector<float, 4>", "2"])`, `"MyType"` -> `("MyType", [])`."""
    if not isinstance(name, str):
        raise TypeError(f"parse_generic_signature: expected a type name (str), got {type(name).__name__}")
    lt = name.find("<")
    if lt < 0:
        return (name, [])
    base = name[:lt].strip()
    body = name[lt + 1:].rstrip()
    if not body.endswith(">"):
        raise ValueError(f"parse_generic_signature: '{name}' has no closing '>'")
    body = body[:-1]
    args, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth < 0:
                raise ValueError(f"parse_generic_signature: unbalanced '>' in '{name}'")
        elif ch == "," and depth == 0:
            args.append(body[start:i].strip())
            start = i + 1
    if depth != 0:
        raise ValueError(f"parse_generic_signature: unbalanced '<' in '{name}'")
    args.append(body[start:].strip())
    return (base, args)
