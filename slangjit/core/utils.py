"""SlangPy's `slangpy.core.utils` helpers: `parse_generic_signature`, `find_type_layout_for_buffer`."""
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


def find_type_layout_for_buffer(program_layout, slang_type_name: str):
    """The element type a buffer / NDBuffer of `slang_type_name` holds, looked up in a module's layout
    (`module.layout` or `device_module.layout`); usable as an NDBuffer / Tensor dtype."""
    if not isinstance(slang_type_name, str):
        raise TypeError(f"find_type_layout_for_buffer: expected a type name (str), got "
                        f"{type(slang_type_name).__name__}")
    find = getattr(program_layout, "find_type_by_name", None)
    if find is None:
        raise TypeError(f"find_type_layout_for_buffer: expected a module layout, got {type(program_layout).__name__}")
    t = find(slang_type_name)
    if t is None:
        raise ValueError(f"find_type_layout_for_buffer: no type named '{slang_type_name}' in the module")
    return t
