"""A small model of Slang types for the functional API, and reflection of a module's declarations.

The functional API needs to know a function's parameters (names, directions, types, `no_diff`,
`[Differentiable]`), the fields of structs, and the layout of element types (to allocate tensors and read
them back).  It gets them from the parser's syntax tree (`slangjit.compiler.parser`), resolving type
expressions itself; the generated kernel is then compiled and checked by the real compiler.
"""
from __future__ import annotations

import os
from typing import Any, Optional

import numpy as np

from ..compiler.parse import ast

# ----------------------------------------------------------------------------------------- types

_SCALARS = {
    # name: (numpy dtype, kind)   kind: f float, i signed, u unsigned, b bool
    "bool": ("bool", "b"), "int8_t": ("int8", "i"), "int16_t": ("int16", "i"), "int": ("int32", "i"),
    "int64_t": ("int64", "i"), "uint8_t": ("uint8", "u"), "uint16_t": ("uint16", "u"), "uint": ("uint32", "u"),
    "uint64_t": ("uint64", "u"), "half": ("float16", "f"), "float": ("float32", "f"), "double": ("float64", "f"),
}
_SCALAR_ALIASES = {"int32_t": "int", "uint32_t": "uint", "float16_t": "half", "float32_t": "float",
                   "float64_t": "double", "dword": "uint", "intptr_t": "int64_t", "uintptr_t": "uint64_t",
                   "size_t": "uint64_t"}
_VEC_PREFIXES = sorted(list(_SCALARS) + list(_SCALAR_ALIASES), key=len, reverse=True)

NUMPY_TO_SCALAR = {"float32": "float", "float64": "double", "float16": "half", "int8": "int8_t",
                   "int16": "int16_t", "int32": "int", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
                   "uint32": "uint", "uint64": "uint64_t", "bool": "bool"}

TENSOR_KINDS = {
    # name: (writable, readable, diff-interface, concrete)
    "ITensor": "r", "IWTensor": "w", "IRWTensor": "rw",
    "Tensor": "r", "WTensor": "w", "RWTensor": "rw", "AtomicTensor": "rw",
    "IDiffTensor": "r", "IWDiffTensor": "w", "IRWDiffTensor": "rw",
    "DiffTensor": "r", "WDiffTensor": "w", "RWDiffTensor": "rw",
    "PrimalTensor": "r", "WPrimalTensor": "w", "RWPrimalTensor": "rw",
}
BUFFER_KINDS = {"StructuredBuffer", "RWStructuredBuffer", "ByteAddressBuffer", "RWByteAddressBuffer"}


class SType:
    """A Slang type.  `name` is its Slang spelling (usable in generated code)."""
    kind = "?"
    name = "?"
    size = 0
    align = 1
    shape: tuple = ()
    scalar: Optional[str] = None          # innermost scalar type name ("float")

    @property
    def full_name(self) -> str:
        return self.name

    @property
    def differentiable(self) -> bool:
        return False

    @property
    def derivative(self) -> Optional["SType"]:
        return self if self.differentiable else None

    @property
    def np_dtype(self):
        if self.scalar is None:
            return None
        return np.dtype(_SCALARS[self.scalar][0])

    def is_concrete(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"SType({self.name})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other):
        return isinstance(other, SType) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def key(self):
        return (self.kind, self.name)


class ScalarT(SType):
    kind = "scalar"

    def __init__(self, name: str):
        self.name = _SCALAR_ALIASES.get(name, name)
        self.scalar = self.name
        self.np = np.dtype(_SCALARS[self.name][0])
        self.size = self.align = self.np.itemsize
        self.skind = _SCALARS[self.name][1]

    @property
    def differentiable(self):
        return self.skind == "f"


class VoidT(SType):
    kind = "void"
    name = "void"


class VectorT(SType):
    kind = "vector"

    def __init__(self, elem: SType, n):
        self.elem, self.n = elem, n
        if isinstance(elem, ScalarT) and isinstance(n, int):
            self.name = f"{elem.name}{n}"
            self.size, self.align = elem.size * n, elem.align
            self.shape = (n,)
            self.scalar = elem.scalar
        else:
            self.name = f"vector<{elem.name},{n}>"

    def is_concrete(self):
        return isinstance(self.n, int) and self.elem.is_concrete()

    @property
    def differentiable(self):
        return isinstance(self.elem, ScalarT) and self.elem.differentiable


class MatrixT(SType):
    kind = "matrix"

    def __init__(self, elem: SType, rows, cols):
        self.elem, self.rows, self.cols = elem, rows, cols
        if isinstance(elem, ScalarT) and isinstance(rows, int) and isinstance(cols, int):
            self.name = f"{elem.name}{rows}x{cols}"
            self.size, self.align = elem.size * rows * cols, elem.align
            self.shape = (rows, cols)
            self.scalar = elem.scalar
        else:
            self.name = f"matrix<{elem.name},{rows},{cols}>"

    def is_concrete(self):
        return isinstance(self.rows, int) and isinstance(self.cols, int) and self.elem.is_concrete()

    @property
    def differentiable(self):
        return isinstance(self.elem, ScalarT) and self.elem.differentiable


class ArrayT(SType):
    kind = "array"

    def __init__(self, elem: SType, n):
        self.elem, self.n = elem, n
        inner, dims = elem, ""
        self.name = f"{elem.name}[{n}]" if not isinstance(elem, ArrayT) else _array_name(elem, n)
        if isinstance(n, int) and elem.is_concrete():
            self.size, self.align = elem.size * n, elem.align
            self.shape = (n,) + tuple(elem.shape)
            self.scalar = elem.scalar

    def is_concrete(self):
        return isinstance(self.n, int) and self.elem.is_concrete()

    @property
    def differentiable(self):
        return self.elem.differentiable

    @property
    def derivative(self):
        d = self.elem.derivative
        return None if d is None else ArrayT(d, self.n)


def _array_name(elem: "ArrayT", n) -> str:
    # T[a][b] in Slang spelling: an array of n arrays of elem -> base[n][inner]
    dims = [n]
    e = elem
    while isinstance(e, ArrayT):
        dims.append(e.n)
        e = e.elem
    return e.name + "".join(f"[{d}]" for d in dims)


class StructT(SType):
    kind = "struct"

    def __init__(self, name: str, decl: Optional[ast.StructDecl], refl: "ModuleReflection", bindings: dict,
                 args: tuple = ()):
        self.name = name
        self.decl = decl
        self.refl = refl
        self.bindings = bindings
        self.args = args
        self._fields: Optional[list] = None
        self._diff: Optional[bool] = None

    def key(self):
        return ("struct", self.name)

    @property
    def fields(self) -> dict:
        if self._fields is None:
            out = []
            if self.decl is not None:
                for m in self.decl.members:
                    if isinstance(m, ast.VarDecl) and not ({"static", "const"} & m.mods) and m.type is not None:
                        out.append((m.name, self.refl.resolve(m.type, self.bindings, self)))
            self._fields = out
            off, al = 0, 1
            for _, ft in out:
                a = max(ft.align, 1)
                off = (off + a - 1) // a * a + ft.size
                al = max(al, a)
            self.size = max((off + al - 1) // al * al, 1 if not out else 0)
            self.align = al
        return dict(self._fields)

    def field_list(self) -> list:
        self.fields
        return list(self._fields)

    def field_offsets(self) -> list:
        off, res = 0, []
        for n, ft in self.field_list():
            a = max(ft.align, 1)
            off = (off + a - 1) // a * a
            res.append((n, off, ft))
            off += ft.size
        return res

    def __getattribute__(self, item):
        if item in ("size", "align") and object.__getattribute__(self, "_fields") is None:
            object.__getattribute__(self, "fields")
        return object.__getattribute__(self, item)

    def bases(self) -> list[str]:
        if self.decl is None:
            return []
        out = []
        for b in self.decl.bases:
            out.append(_expr_name(b))
        return out

    @property
    def differentiable(self):
        if self._diff is None:
            self._diff = any(b in ("IDifferentiable", "IDifferentiablePtrType") for b in self.bases())
        return self._diff

    @property
    def derivative(self):
        if not self.differentiable:
            return None
        # `typealias Differential = X;` inside the struct, else the struct itself (Slang synthesises one; we
        # approximate it as the same layout, which holds for structs of differentiable fields).
        if self.decl is not None:
            for m in self.decl.members:
                if isinstance(m, ast.TypeAliasDecl) and m.name == "Differential":
                    return self.refl.resolve(m.type, self.bindings, self)
        return self


class TensorT(SType):
    kind = "tensor"

    def __init__(self, tkind: str, elem: SType, dims):
        self.tkind, self.elem, self.dims = tkind, elem, dims
        self.name = f"{tkind}<{elem.name}, {dims}>"
        self.access = TENSOR_KINDS[tkind]

    @property
    def is_diff(self):
        return "Diff" in self.tkind

    @property
    def is_interface(self):
        return self.tkind.startswith("I")

    def is_concrete(self):
        return isinstance(self.dims, int) and self.elem.is_concrete()


class BufferT(SType):
    kind = "buffer"

    def __init__(self, bkind: str, elem: Optional[SType]):
        self.bkind, self.elem = bkind, elem
        self.name = bkind if elem is None else f"{bkind}<{elem.name}>"
        self.size, self.align = 16, 8


class PointerT(SType):
    kind = "pointer"

    def __init__(self, elem: SType):
        self.elem = elem
        self.name = f"{elem.name}*"
        self.size = self.align = 8


class GenericT(SType):
    """A generic type parameter not bound yet (or an interface type used as a parameter type)."""
    kind = "generic"

    def __init__(self, name: str, constraint: Optional[str] = None, interface: bool = False):
        self.name = name
        self.constraint = constraint
        self.interface = interface

    def is_concrete(self):
        return False


class ValueParam:
    """A generic value parameter (`let N : int`) not bound yet."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name

    def __str__(self):
        return self.name


class InterfaceT(SType):
    kind = "interface"

    def __init__(self, name: str, decl):
        self.name = name
        self.decl = decl

    def is_concrete(self):
        return False


class EnumT(SType):
    kind = "enum"

    def __init__(self, name: str, underlying: ScalarT):
        self.name = name
        self.underlying = underlying
        self.size, self.align = underlying.size, underlying.align
        self.scalar = underlying.scalar


class DiffPairT(SType):
    kind = "diffpair"

    def __init__(self, primal: SType):
        self.primal = primal
        self.name = f"DifferentialPair<{primal.name}>"


def scalar(name: str) -> ScalarT:
    return _scalar_cache.get(name) or ScalarT(name)


_scalar_cache: dict = {}
for _n in list(_SCALARS) + list(_SCALAR_ALIASES):
    _scalar_cache[_n] = ScalarT(_n)


def builtin_type(name: str) -> Optional[SType]:
    """float, float3, int2x2, ... (no user types)."""
    if name in _scalar_cache:
        return _scalar_cache[name]
    if name == "void":
        return VoidT()
    for p in _VEC_PREFIXES:
        if name.startswith(p) and len(name) > len(p):
            rest = name[len(p):]
            if len(rest) == 1 and rest in "1234":
                return VectorT(_scalar_cache[p], int(rest))
            if len(rest) == 3 and rest[0] in "1234" and rest[1] == "x" and rest[2] in "1234":
                return MatrixT(_scalar_cache[p], int(rest[0]), int(rest[2]))
    return None


def parse_type_string(s: str, refl: Optional["ModuleReflection"] = None) -> SType:
    """Parse a type written as a string ("float", "float3", "float[4]", "vector<float,3>", "MyStruct")."""
    s = s.strip()
    t = builtin_type(s)
    if t is not None:
        return t
    from ..compiler.parse.parser import Parser
    from ..compiler.parse.lexer import tokenize
    try:
        from ..compiler.parse.preprocessor import preprocess
        toks = preprocess(f"{s} __x;", "<type>", (), {})
        p = Parser(toks, "<type>")
        decls = p.parse_module()
        texpr = decls[0].type
    except Exception:
        raise ValueError(f"Could not parse type '{s}'") from None
    if refl is None:
        refl = ModuleReflection.empty()
    return refl.resolve(texpr, {}, None)


def _expr_name(e) -> str:
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.GenericApp):
        return _expr_name(e.base)
    if isinstance(e, ast.Member):
        return e.name
    return "?"


# ----------------------------------------------------------------------------------------- reflection


class ParamInfo:
    def __init__(self, name: str, type_expr, direction: str, no_diff: bool, has_default: bool):
        self.name = name
        self.type_expr = type_expr
        self.direction = direction if direction in ("in", "out", "inout") else ("inout" if direction == "ref" else "in")
        self.no_diff = no_diff
        self.has_default = has_default


class FuncInfo:
    """One overload of a function (or method) as declared."""

    def __init__(self, decl: ast.FuncDecl, refl: "ModuleReflection", owner: Optional[StructT] = None):
        self.decl = decl
        self.refl = refl
        self.owner = owner
        self.name = decl.name
        self.params = [ParamInfo(p.name, p.type, p.direction, "no_diff" in p.mods, p.default is not None)
                       for p in decl.params]
        attrs = {a.name for a in decl.attrs}
        self.differentiable = bool(attrs & {"Differentiable", "BackwardDifferentiable", "ForwardDifferentiable"})
        self.is_static = "static" in decl.mods or decl.name == "__init"
        self.is_ctor = decl.name == "__init"
        self.mutating = "mutating" in decl.mods or "mutating" in attrs
        self.generic_params = decl.generic_params
        self.has_this = owner is not None and not self.is_static

    def __repr__(self):
        return f"FuncInfo({self.name})"


class ModuleReflection:
    """Top-level declarations of a module and of the modules it imports (slangpy excluded)."""

    def __init__(self):
        self.funcs: dict[str, list[ast.FuncDecl]] = {}
        self.structs: dict[str, ast.StructDecl] = {}
        self.interfaces: dict[str, ast.InterfaceDecl] = {}
        self.aliases: dict[str, ast.TypeAliasDecl] = {}
        self.enums: dict[str, ast.EnumDecl] = {}
        self.consts: dict[str, Any] = {}
        self.globals: dict[str, ast.VarDecl] = {}
        self._struct_cache: dict = {}

    @classmethod
    def empty(cls) -> "ModuleReflection":
        return cls()

    @classmethod
    def from_source(cls, text: str, path: str, include_paths) -> "ModuleReflection":
        from ..compiler.parse.parser import parse_module
        from ..compiler.parse.preprocessor import DEFAULT_DEFINES
        r = cls()
        seen: set = set()

        def load(text, path):
            mod = parse_module(text, path, list(include_paths), dict(DEFAULT_DEFINES))
            r._add_decls(mod.decls, load_import=lambda d: imp(d, path))

        def imp(d: ast.ImportDecl, from_path: str):
            name = d.module
            if name in ("slangpy", "slangpy.slang"):
                return
            fname = name if d.is_path else name.replace(".", os.sep).replace("_", "-") + ".slang"
            names = [fname]
            if not d.is_path:
                names.append(name.replace(".", os.sep) + ".slang")
            elif not fname.endswith(".slang"):
                names.append(fname + ".slang")
            base = os.path.dirname(from_path) if from_path else "."
            for dd in [base] + list(include_paths) + ["."]:
                for n in names:
                    c = os.path.join(dd, n)
                    if os.path.isfile(c):
                        key = os.path.realpath(c)
                        if key in seen:
                            return
                        seen.add(key)
                        with open(c, encoding="utf-8") as f:
                            load(f.read(), c)
                        return
            # not found: the compiler will report it

        load(text, path)
        return r

    def _add_decls(self, decls, load_import=None, prefix: str = ""):
        for d in decls:
            if isinstance(d, ast.FuncDecl):
                self.funcs.setdefault(d.name, []).append(d)
            elif isinstance(d, ast.StructDecl):
                self.structs[d.name] = d
            elif isinstance(d, ast.InterfaceDecl):
                self.interfaces[d.name] = d
            elif isinstance(d, ast.TypeAliasDecl):
                self.aliases[d.name] = d
            elif isinstance(d, ast.EnumDecl):
                self.enums[d.name] = d
            elif isinstance(d, ast.VarDecl):
                self.globals[d.name] = d
                if ("static" in d.mods or "const" in d.mods) and d.init is not None:
                    self.consts[d.name] = d.init
            elif isinstance(d, ast.NamespaceDecl):
                self._add_decls(d.members, load_import)
            elif isinstance(d, ast.ImportDecl) and d.kind in ("import", "include") and load_import is not None:
                load_import(d)

    # -- type resolution

    def eval_int(self, e, bindings: dict):
        if isinstance(e, ast.IntLit):
            return e.value
        if isinstance(e, ast.Name):
            if e.name in bindings:
                return bindings[e.name]
            if e.name in self.consts:
                return self.eval_int(self.consts[e.name], bindings)
            return ValueParam(e.name)
        if isinstance(e, ast.Binary):
            a, b = self.eval_int(e.lhs, bindings), self.eval_int(e.rhs, bindings)
            if isinstance(a, int) and isinstance(b, int):
                return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}.get(e.op, 0)
            return ValueParam("?")
        if isinstance(e, ast.Unary) and e.op == "-":
            v = self.eval_int(e.operand, bindings)
            return -v if isinstance(v, int) else v
        return ValueParam("?")

    def resolve(self, e, bindings: dict, this_struct: Optional[StructT] = None) -> SType:
        if isinstance(e, ast.Name):
            n = e.name
            if n in bindings:
                b = bindings[n]
                return b if isinstance(b, SType) else GenericT(n)
            t = builtin_type(n)
            if t is not None:
                return t
            if n == "This" and this_struct is not None:
                return this_struct
            return self.named_type(n, [], bindings)
        if isinstance(e, ast.ThisTypeExpr) and this_struct is not None:
            return this_struct
        if isinstance(e, ast.GenericApp):
            base = _expr_name(e.base)
            args = e.args
            if base == "vector":
                return VectorT(self.resolve(args[0], bindings, this_struct), self.eval_int(args[1], bindings))
            if base == "matrix":
                return MatrixT(self.resolve(args[0], bindings, this_struct), self.eval_int(args[1], bindings),
                               self.eval_int(args[2], bindings))
            if base == "Array":
                return ArrayT(self.resolve(args[0], bindings, this_struct), self.eval_int(args[1], bindings))
            if base in TENSOR_KINDS:
                return TensorT(base, self.resolve(args[0], bindings, this_struct),
                               self.eval_int(args[1], bindings) if len(args) > 1 else 1)
            if base in BUFFER_KINDS:
                return BufferT(base, self.resolve(args[0], bindings, this_struct) if args else None)
            if base == "Ptr":
                return PointerT(self.resolve(args[0], bindings, this_struct))
            if base == "DifferentialPair":
                return DiffPairT(self.resolve(args[0], bindings, this_struct))
            return self.named_type(base, args, bindings, this_struct)
        if isinstance(e, ast.ArrayTypeExpr):
            el = self.resolve(e.element, bindings, this_struct)
            n = None if e.size is None else self.eval_int(e.size, bindings)
            return ArrayT(el, n)
        if isinstance(e, ast.PointerTypeExpr):
            return PointerT(self.resolve(e.element, bindings, this_struct))
        if isinstance(e, ast.Member):
            base = self.resolve(e.base, bindings, this_struct)
            if e.name == "Differential":
                d = base.derivative if base.is_concrete() else None
                return d if d is not None else GenericT(f"{base.name}.Differential")
            return GenericT(f"{base.name}.{e.name}")
        if isinstance(e, ast.Name) is False and isinstance(e, ast.Expr):
            return GenericT("?")
        return GenericT("?")

    def named_type(self, n: str, args: list, bindings: dict, this_struct=None) -> SType:
        if n in BUFFER_KINDS:
            return BufferT(n, None)
        if n in self.aliases:
            a = self.aliases[n]
            b = dict(bindings)
            for gp, ae in zip(a.generic_params, args):
                b[gp.name] = self._generic_arg(gp, ae, bindings)
            return self.resolve(a.type, b, this_struct)
        if n in self.structs:
            d = self.structs[n]
            b = {}
            vals = []
            for i, gp in enumerate(d.generic_params):
                if i < len(args):
                    v = self._generic_arg(gp, args[i], bindings)
                elif gp.default is not None:
                    v = self._generic_arg(gp, gp.default, {})
                else:
                    v = GenericT(gp.name) if gp.kind != "value" else ValueParam(gp.name)
                b[gp.name] = v
                vals.append(v)
            name = n if not vals else f"{n}<{', '.join(str(v.name if isinstance(v, SType) else v) for v in vals)}>"
            key = name
            if key in self._struct_cache:
                return self._struct_cache[key]
            st = StructT(name, d, self, b, tuple(vals))
            self._struct_cache[key] = st
            return st
        if n in self.enums:
            d = self.enums[n]
            u = scalar("int") if d.underlying is None else self.resolve(d.underlying, {}, None)
            return EnumT(n, u)
        if n in self.interfaces:
            return InterfaceT(n, self.interfaces[n])
        if n in TENSOR_KINDS:
            return TensorT(n, GenericT("T"), ValueParam("D"))
        return GenericT(n)

    def _generic_arg(self, gp: ast.GenericParam, e, bindings):
        if gp.kind == "value":
            return self.eval_int(e, bindings)
        return self.resolve(e, bindings)

    def find_type(self, name: str) -> Optional[SType]:
        t = builtin_type(name)
        if t is not None:
            return t
        if name in self.structs or name in self.aliases or name in self.enums:
            return self.named_type(name, [], {})
        if "<" in name or "[" in name:
            try:
                return parse_type_string(name, self)
            except ValueError:
                return None
        return None
