"""Small helpers of CallData (binding.py): declarations in the generated kernel, argument getters, the type a
`.map(...)` names."""
from __future__ import annotations

import os

from ..tensor import resolve_dtype
from . import typeview as S
from . import values as V
from .leaves import TensorParamLeaf


def _constant_decl(name: str, v) -> str:
    if isinstance(v, bool):
        return f"export static const bool {name} = {'true' if v else 'false'};\n"
    if isinstance(v, int):
        return f"export static const int {name} = {v};\n"
    if isinstance(v, float):
        return f"export static const float {name} = {v!r};\n"
    if isinstance(v, (V.VectorValue,)):
        t = V.slang_type_of_vector(v)
        return f"export static const {t.name} {name} = {t.name}({', '.join(repr(x) for x in v)});\n"
    raise ValueError(f"constants: unsupported value for '{name}': {v!r}")


def _uniform_decl(utype: str, uname: str) -> str:
    # `int[3] x` -> `int x[3]`; the type syntax appends the outer count last (`int[2][3]` is 3 arrays of
    # int[2]) and the declarator puts it first (`int x[3][2]`)
    if utype.endswith("]") and "[" in utype and not utype.endswith("*"):
        base, dims = utype.split("[", 1)
        counts = dims[:-1].split("][")
        return f"uniform {base} {uname}" + "".join(f"[{c}]" for c in reversed(counts))
    return f"uniform {utype} {uname}"


# SlangPy's debugging switch (slangpy.set_dump_generated_shaders): write each generated kernel's source to
# .temp/<module>_<function>.slang in the working directory when it is compiled.
DEBUG_SETTINGS = {"dump_generated_shaders": False}
DUMP_FOLDER = ".temp"


def set_dump_generated_shaders(value: bool) -> None:
    DEBUG_SETTINGS["dump_generated_shaders"] = bool(value)


def dump_generated_shader(module_name: str, function_name: str, text: str) -> None:
    if not DEBUG_SETTINGS["dump_generated_shaders"]:
        return
    os.makedirs(DUMP_FOLDER, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in f"{module_name}_{function_name}")
    with open(os.path.join(DUMP_FOLDER, safe + ".slang"), "w", encoding="utf-8") as f:
        f.write(text)


def _decl_type(P: S.SType, leaf) -> str:
    if isinstance(leaf, TensorParamLeaf):
        return "var"
    if isinstance(P, S.ArrayT):
        return "var"
    return P.name


def _getter(i):
    return lambda vals: vals[i]


def _bound(x) -> bool:
    return x is not None and not isinstance(x, (S.GenericT, S.ValueParam))


def _exact(v, t) -> bool:
    if isinstance(v, bool):
        return t.name == "bool"
    if isinstance(v, int):
        return t.name == "int"
    if isinstance(v, float):
        return t.name == "float"
    return True


def _type_override(m, refl):
    if m is None or isinstance(m, tuple):
        return None
    try:
        return resolve_dtype(m, None) if not isinstance(m, str) else (refl.find_type(m) or S.parse_type_string(m, refl))
    except Exception:
        return None


def _value_for(b, args, kwargs, sources):
    if b.pname == "_result":
        return kwargs.get("_result")
    src = sources[b.index]
    return args[src[1]] if src[0] == "pos" else kwargs[src[1]]
