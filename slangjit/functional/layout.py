"""`module.layout`: a module's declarations as reflection objects, in the shape SlangPy's
`module.layout` (a Slang ProgramLayout) has them.

    layout = module.layout
    f = layout.find_function_by_name("polynomial")     # FunctionReflection (None when there is none)
    f.name, f.return_type.full_name, [(p.name, p.type.full_name, p.modifiers) for p in f.parameters]
    s = layout.find_type_by_name("Particle")            # TypeReflection: kind, fields, name
    layout.find_function_by_name_in_type(s, "reset")
    layout.find_struct_by_name("Particle")              # the TypeReflection of a struct, None otherwise

Every fact is read from the module's reflection (functional/typeview.py, itself the compiler's checker),
never from the source text."""
from __future__ import annotations

import enum
from typing import Optional

from . import typeview as S
from .typeview import BufferLayout  # noqa: F401  (re-exported: module.py, tensor.py)


class TypeKind(enum.IntEnum):
    """SlangPy's TypeReflection.Kind names."""
    none = 0
    struct = 1
    array = 2
    matrix = 3
    vector = 4
    scalar = 5
    constant_buffer = 6
    resource = 7
    sampler_state = 8
    texture_buffer = 9
    shader_storage_buffer = 10
    parameter_block = 11
    generic_type_parameter = 12
    interface = 13
    output_stream = 14
    specialized = 15
    feedback = 16
    pointer = 17


_KINDS = {"scalar": TypeKind.scalar, "vector": TypeKind.vector, "matrix": TypeKind.matrix,
          "array": TypeKind.array, "struct": TypeKind.struct, "tensor": TypeKind.struct,
          "enum": TypeKind.scalar, "pointer": TypeKind.pointer, "buffer": TypeKind.resource,
          "interface": TypeKind.interface, "generic": TypeKind.generic_type_parameter,
          "diffpair": TypeKind.struct, "void": TypeKind.none}


class ScalarType(enum.IntEnum):
    """SlangPy's TypeReflection.ScalarType names."""
    none = 0
    void = 1
    bool = 2
    int32 = 3
    uint32 = 4
    int64 = 5
    uint64 = 6
    float16 = 7
    float32 = 8
    float64 = 9
    int8 = 10
    uint8 = 11
    int16 = 12
    uint16 = 13


_SCALAR_NAMES = {ScalarType.bool: "bool", ScalarType.int32: "int", ScalarType.uint32: "uint",
                 ScalarType.int64: "int64_t", ScalarType.uint64: "uint64_t", ScalarType.float16: "half",
                 ScalarType.float32: "float", ScalarType.float64: "double", ScalarType.int8: "int8_t",
                 ScalarType.uint8: "uint8_t", ScalarType.int16: "int16_t", ScalarType.uint16: "uint16_t"}


class TypeReflection:
    Kind = TypeKind
    ScalarType = ScalarType

    def __init__(self, t: S.SType):
        self._t = t

    @property
    def buffer_layout(self) -> BufferLayout:
        return BufferLayout(self._t)

    @property
    def _sj_stype(self) -> S.SType:        # a TypeReflection is accepted wherever a dtype is (tensor.resolve_dtype)
        return self._t

    @property
    def name(self) -> str:
        n = self._t.name
        return n.split("<", 1)[0] if "<" in n else n

    @property
    def full_name(self) -> str:
        return self._t.name

    @property
    def kind(self) -> TypeKind:
        return _KINDS.get(self._t.kind, TypeKind.none)

    @property
    def fields(self) -> list:
        t = self._t
        if isinstance(t, S.StructT):
            return [VariableReflection(n, ft) for n, ft in t.fields.items()]
        return []

    @property
    def element_type(self) -> Optional["TypeReflection"]:
        e = getattr(self._t, "elem", None)
        return TypeReflection(e) if isinstance(e, S.SType) else None

    @property
    def element_count(self) -> int:
        t = self._t
        if isinstance(t, (S.VectorT, S.ArrayT)):
            return t.n if isinstance(t.n, int) else 0
        return 0

    @property
    def col_count(self) -> int:
        t = self._t
        return t.n if isinstance(t, S.VectorT) else (t.cols if isinstance(t, S.MatrixT) else 0)

    @property
    def row_count(self) -> int:
        return self._t.rows if isinstance(self._t, S.MatrixT) else (1 if isinstance(self._t, S.VectorT) else 0)

    @property
    def scalar_type(self) -> Optional[str]:
        return self._t.scalar

    @property
    def size(self) -> int:
        return self._t.size

    @property
    def differentiable(self) -> bool:
        return self._t.differentiable

    def __eq__(self, other):
        return isinstance(other, TypeReflection) and self._t == other._t

    def __hash__(self):
        return hash(self._t)

    def __repr__(self):
        return f"TypeReflection({self.full_name})"


class VariableReflection:
    """A struct field or a function parameter: name, type, and for a parameter its modifiers
    ("in" "out" "inout", and "no_diff")."""

    def __init__(self, name: str, t: S.SType, modifiers: tuple = (), has_default: bool = False):
        self.name = name
        self.type = TypeReflection(t)
        self.modifiers = modifiers
        self.has_default = has_default

    def has_modifier(self, m) -> bool:
        return getattr(m, "name", m) in self.modifiers

    def __repr__(self):
        return f"VariableReflection({self.name}: {self.type.full_name})"


class FunctionReflection:
    """One function (all its overloads): the first overload's signature, and `overloads` for each."""

    def __init__(self, name: str, infos: list, parent: Optional[TypeReflection] = None):
        self.name = name
        self._infos = infos
        self._info = infos[0]
        self.parent = parent

    @property
    def full_name(self) -> str:
        return f"{self.parent.full_name}::{self.name}" if self.parent is not None else self.name

    @property
    def is_overloaded(self) -> bool:
        return len(self._infos) > 1

    @property
    def overloads(self) -> list:
        return [FunctionReflection(self.name, [i], self.parent) for i in self._infos]

    @property
    def parameters(self) -> list:
        out = []
        for p in self._info.params:
            mods = (p.direction,) + (("no_diff",) if p.no_diff else ())
            out.append(VariableReflection(p.name, p.type, mods, p.has_default))
        return out

    @property
    def return_type(self) -> Optional[TypeReflection]:
        r = self._info.return_type
        return None if isinstance(r, S.VoidT) else TypeReflection(r)

    @property
    def have_return_value(self) -> bool:
        return self.return_type is not None

    @property
    def differentiable(self) -> bool:
        return self._info.differentiable

    @property
    def is_static(self) -> bool:
        return self._info.is_static

    @property
    def mutating(self) -> bool:
        return self._info.mutating

    @property
    def is_generic(self) -> bool:
        return bool(self._info.generic_params)

    @property
    def generic_parameters(self) -> list:
        return [g.name for g in self._info.generic_params]

    def has_modifier(self, m) -> bool:
        name = getattr(m, "name", m)
        if name == "differentiable":
            return self.differentiable
        if name == "mutating":
            return self.mutating
        if name == "static":
            return self.is_static
        return False

    def __repr__(self):
        return f"FunctionReflection({self.full_name}, overloads={len(self._infos)})"


class ModuleLayout:
    def __init__(self, module):
        self._module = module

    @property
    def module(self):
        return self._module

    def find_type_by_name(self, name: str) -> Optional[TypeReflection]:
        t = self._module._refl.find_type(name)
        return TypeReflection(t) if t is not None else None

    def scalar_type(self, st: ScalarType) -> TypeReflection:
        name = _SCALAR_NAMES.get(ScalarType(st))
        if name is None:
            raise ValueError(f"scalar_type: {st!r} is not a scalar type")
        return self.find_type_by_name(name)

    def find_struct_by_name(self, name: str) -> Optional[TypeReflection]:
        t = self._module._refl.find_type(name)
        return TypeReflection(t) if isinstance(t, S.StructT) else None

    def find_function_by_name(self, name: str) -> Optional[FunctionReflection]:
        if "::" in name or "." in name:
            tname, fname = name.replace("::", ".").rsplit(".", 1)
            t = self.find_type_by_name(tname)
            return self.find_function_by_name_in_type(t, fname) if t is not None else None
        infos = self._module._refl.functions(name)
        return FunctionReflection(name, infos) if infos else None

    def find_function_by_name_in_type(self, type_, name: str) -> Optional[FunctionReflection]:
        if isinstance(type_, str):
            type_ = self.find_type_by_name(type_)
        t = getattr(type_, "_t", type_)
        if not isinstance(t, S.StructT):
            return None
        slang_name = "__init" if name in ("__init", "$init") else name
        infos = self._module._refl.methods(t, slang_name)
        return FunctionReflection(slang_name, infos, TypeReflection(t)) if infos else None

    def __repr__(self):
        return f"ModuleLayout({self._module.name})"
