"""Views of the compiler's types for the functional layer.

The functional layer matches Python values against Slang parameter types and writes Slang text; for that it
needs a type's spelling, its shape (vector length, array size ...), its numpy element type, its layout and its
Differential.  Every one of those facts comes from the compiler: a view holds a compiler type (`ct`, from
`slangjit.compiler.types`) and the module's `ModuleDecls` (compiler/reflect_decls.py) that resolved it, and
derives the rest from them (size/alignment/field offsets from the compiler's layout, `derivative` from the
Differential the compiler synthesizes).  The view classes only give the functional code something to
dispatch on (`isinstance(P, VectorT)`); there is no type resolution here.

`view(ct, decls)` wraps a compiler type; `scalar(name)`, `VectorT(elem, n)`, `ArrayT(elem, n)`,
`MatrixT(elem, r, c)`, `TensorT(kind, elem, dims, decls)` build the natural types of Python values.
Generic parameters in the parameter patterns of generic functions show up as `GenericT` / `ValueParam`.
"""
from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from ..compiler import types as T


def _reflect():
    """compiler.reflect_decls, imported on first use: it brings the checker and emitter, which `import slangjit`
    need not pay for (~70 ms of import time, measured)."""
    from ..compiler import reflect_decls    # deferred for import time (see above), not to dodge a cycle
    return reflect_decls

NUMPY_TO_SCALAR = {"float32": "float", "float64": "double", "float16": "half", "int8": "int8_t",
                   "int16": "int16_t", "int32": "int", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
                   "uint32": "uint", "uint64": "uint64_t", "bool": "bool"}

TENSOR_KINDS = {
    # name: access (r read, w write)
    "ITensor": "r", "IWTensor": "w", "IRWTensor": "rw",
    "Tensor": "r", "WTensor": "w", "RWTensor": "rw", "AtomicTensor": "rw",
    "IDiffTensor": "r", "IWDiffTensor": "w", "IRWDiffTensor": "rw",
    "DiffTensor": "r", "WDiffTensor": "w", "RWDiffTensor": "rw",
    "PrimalTensor": "r", "WPrimalTensor": "w", "RWPrimalTensor": "rw",
}
# slangpy.slang's buffer-backed textures: bound like a tensor of their dimensions (runtime/textures.py)
TEXTURE_DIMS = {"Texture1D": 1, "Texture2D": 2, "Texture3D": 3, "Texture1DArray": 2, "Texture2DArray": 3,
                "TextureCube": 3}
TEXTURE_DIMS.update({"RW" + k: v for k, v in list(TEXTURE_DIMS.items())})
TENSOR_KINDS.update({k: "rw" if k.startswith("RW") else "r" for k in TEXTURE_DIMS})
_SKIND = {"float": "f", "int": "i", "uint": "u", "bool": "b"}


class BufferLayout:
    """SlangPy's `Struct.buffer_layout`: `size`, `alignment` and `stride` of the type as a buffer element."""

    def __init__(self, t: "SType"):
        self.type = t
        self.size, self.alignment = t.size, max(1, t.align)
        self.stride = -(-self.size // self.alignment) * self.alignment

    @property
    def reflection(self) -> "BufferLayout":      # SlangPy's TypeLayoutReflection (`.size`, `.stride`)
        return self

    def __repr__(self):
        return f"BufferLayout({self.type.name}, size={self.size}, alignment={self.alignment}, stride={self.stride})"


class SType:
    """A compiler type seen by the functional layer.  `name` is its Slang spelling (usable in generated code)."""
    kind = "?"
    name = "?"
    ct: Any = None                  # the compiler type (None: an open generic pattern)
    decls: Any = None               # the ModuleDecls that resolved it (struct members, Differential)
    shape: tuple = ()
    scalar: Optional[str] = None    # innermost scalar type name ("float")

    @property
    def full_name(self) -> str:
        return self.name

    def is_concrete(self) -> bool:
        return self.ct is not None and not T.contains_vars(self.ct)

    @property
    def size(self) -> int:
        return T.size_align(self.ct)[0] if self.is_concrete() else 0

    @property
    def align(self) -> int:
        return T.size_align(self.ct)[1] if self.is_concrete() else 1

    @property
    def layout(self):
        return _reflect().layout(self.ct)

    @property
    def buffer_layout(self) -> BufferLayout:
        return BufferLayout(self)

    @property
    def derivative(self) -> Optional["SType"]:
        """The Differential type, as the compiler synthesizes it (None: not differentiable)."""
        if not self.is_concrete():
            return None
        if self.decls is not None:
            d = self.decls.differential(self.ct)
        else:
            d = _reflect().builtin_differential(self.ct)
        return None if d is None else (self if d is self.ct or d == self.ct else view(d, self.decls))

    @property
    def differentiable(self) -> bool:
        return self.derivative is not None

    @property
    def np_dtype(self):
        if self.scalar is None:
            return None
        return np.dtype(T.NUMPY_NAMES[T.SCALAR_NAMES[self.scalar]])

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

    def __init__(self, ct: T.ScalarType):
        self.ct = ct
        self.name = self.scalar = ct.name
        self.np = np.dtype(T.NUMPY_NAMES[ct])
        self.skind = _SKIND[ct.kind]


class VoidT(SType):
    kind = "void"
    name = "void"
    ct = T.VOID


def _count(n):
    return ValueParam(n.name) if isinstance(n, T.ValueVar) else n


def _ct_count(n):
    return n if isinstance(n, int) else None


class VectorT(SType):
    kind = "vector"

    def __init__(self, elem: SType, n, ct=None, decls=None):
        self.elem, self.n = elem, _count(n)
        self.decls = decls
        self.ct = ct if ct is not None else (T.VectorType(elem.ct, n) if elem.ct is not None and
                                            _ct_count(n) is not None else None)
        if isinstance(elem, ScalarT) and isinstance(self.n, int):
            self.name = f"{elem.name}{self.n}" if self.n <= 4 else f"CoopVec<{elem.name},{self.n}>"
            self.shape = (self.n,)
            self.scalar = elem.scalar
        else:
            self.name = f"vector<{elem.name},{self.n}>"


class MatrixT(SType):
    kind = "matrix"

    def __init__(self, elem: SType, rows, cols, ct=None, decls=None):
        self.elem, self.rows, self.cols = elem, _count(rows), _count(cols)
        self.decls = decls
        self.ct = ct if ct is not None else (T.MatrixType(elem.ct, rows, cols) if elem.ct is not None and
                                            isinstance(rows, int) and isinstance(cols, int) else None)
        if isinstance(elem, ScalarT) and isinstance(self.rows, int) and isinstance(self.cols, int):
            self.name = f"{elem.name}{self.rows}x{self.cols}"
            self.shape = (self.rows, self.cols)
            self.scalar = elem.scalar
        else:
            self.name = f"matrix<{elem.name},{self.rows},{self.cols}>"


class ArrayT(SType):
    kind = "array"

    def __init__(self, elem: SType, n, ct=None, decls=None):
        self.elem, self.n = elem, _count(n)
        self.decls = decls if decls is not None else elem.decls
        self.ct = ct if ct is not None else (T.ArrayType(elem.ct, n) if elem.ct is not None and
                                            _ct_count(n) is not None else None)
        # Slang's type syntax appends the outer count: an array of n arrays of m T is T[m][n] (as `T x[n][m]`)
        self.name = f"{elem.name}[{self.n}]"
        if isinstance(self.n, int) and elem.is_concrete():
            self.shape = (self.n,) + tuple(elem.shape)
            self.scalar = elem.scalar



class StructT(SType):
    kind = "struct"

    def __init__(self, ct: T.StructType, decls):
        self.ct, self.decls = ct, decls
        self.name = ct.name
        self.args = tuple(view(a, decls) if isinstance(a, (T.Type, T.TypeVar)) else _count(a) for a in ct.args)

    @property
    def decl_key(self):
        """Identifies the struct declaration (generic structs: all instantiations share it)."""
        return id(self.ct.info.sym)

    @property
    def fields(self) -> dict:
        return dict(self.field_list())

    def field_list(self) -> list:
        return [(n, view(ft, self.decls)) for n, ft in self.decls.fields(self.ct)]

    def field_offsets(self) -> list:
        views = dict(self.field_list())
        return [(f.name, f.offset, views[f.name]) for f in self.layout.fields]

    def methods(self, name: str) -> list:
        return self.decls.methods(self.ct, name)


class TensorViewT(SType):
    """slang-torch's `TensorView<T>` / `DiffTensorView<T>` (compiler/slang/slangtorch.slang) as a parameter type: a
    whole tensor bound to one parameter (SlangPy: no call dimensions), `elem` its element type."""
    kind = "tensorview"

    def __init__(self, vkind: str, ct, elem: SType, decls):
        self.vkind, self.ct, self.elem, self.decls = vkind, ct, elem, decls
        self.name = ct.name if not T.contains_vars(ct) else f"{vkind}<{elem.name}>"

    def key(self):
        return (self.kind, self.name)


class TensorT(SType):
    """A slangpy tensor type (`Tensor<float, 2>`) or tensor interface (`IDiffTensor<T, D>`)."""
    kind = "tensor"

    def __init__(self, tkind: str, elem: SType, dims, decls=None, ct=None):
        self.tkind, self.elem, self.dims = tkind, elem, _count(dims)
        self.decls = decls
        self._ct = ct
        self.is_texture = tkind in TEXTURE_DIMS
        self.name = f"{tkind}<{elem.name}>" if self.is_texture else f"{tkind}<{elem.name}, {self.dims}>"
        self.access = TENSOR_KINDS[tkind]

    @property
    def ct(self):
        if self._ct is None and self.decls is not None and self.elem.ct is not None and isinstance(self.dims, int):
            self._ct = self.decls.apply(self.tkind, [self.elem.ct] if self.is_texture else [self.elem.ct, self.dims])
        return self._ct

    @property
    def is_diff(self):
        return "Diff" in self.tkind

    @property
    def is_interface(self):
        return self.tkind.startswith("I")

    def is_concrete(self):
        return isinstance(self.dims, int) and self.elem.is_concrete()

    @property
    def derivative(self):
        return None


class BufferT(SType):
    kind = "buffer"

    def __init__(self, ct: T.BufferType, decls=None):
        self.ct, self.decls = ct, decls
        self.bkind = ct.kind
        self.elem = view(ct.elem, decls) if ct.elem is not None else None
        self.name = self.bkind if self.elem is None else f"{self.bkind}<{self.elem.name}>"


class PointerT(SType):
    kind = "pointer"

    def __init__(self, ct: T.PointerType, decls=None):
        self.ct, self.decls = ct, decls
        self.elem = view(ct.elem, decls)
        self.name = f"{self.elem.name}*"


class GenericT(SType):
    """A generic type parameter of a function, not bound yet."""
    kind = "generic"

    def __init__(self, name: str):
        self.name = name

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

    def __eq__(self, other):
        return isinstance(other, ValueParam) and other.name == self.name

    def __hash__(self):
        return hash(("ValueParam", self.name))


class InterfaceT(SType):
    kind = "interface"

    def __init__(self, ct: T.InterfaceType, decls=None):
        self.ct, self.decls = ct, decls
        self.name = ct.name

    def is_concrete(self):
        return False


class EnumT(SType):
    kind = "enum"

    def __init__(self, ct: T.EnumType, decls=None):
        self.ct, self.decls = ct, decls
        self.name = ct.name
        self.underlying = view(ct.underlying, decls)
        self.scalar = self.underlying.scalar

    @property
    def cases(self) -> dict:
        return dict(self.ct.info)


class DiffPairT(SType):
    kind = "diffpair"

    def __init__(self, ct: T.PairType, decls=None):
        self.ct, self.decls = ct, decls
        self.primal = view(ct.primal, decls)
        self.name = f"DifferentialPair<{self.primal.name}>"


class OtherT(SType):
    """Any other compiler type (atomics, tuples, optionals ...): spelling and layout only."""
    kind = "other"

    def __init__(self, ct, decls=None):
        self.ct, self.decls = ct, decls
        self.name = str(ct)


def view(ct, decls=None) -> SType:
    """The view of compiler type `ct` (resolved by `decls`, a reflect_decls.ModuleDecls)."""
    if isinstance(ct, T.ScalarType):
        return VoidT() if ct == T.VOID else scalar(ct.name)
    if isinstance(ct, T.TypeVar):
        return GenericT(ct.name)
    if isinstance(ct, T.VectorType):
        return VectorT(view(ct.elem, decls), ct.n, ct, decls)
    if isinstance(ct, T.MatrixType):
        return MatrixT(view(ct.elem, decls), ct.rows, ct.cols, ct, decls)
    if isinstance(ct, T.ArrayType):
        return ArrayT(view(ct.elem, decls), ct.n, ct, decls)
    if isinstance(ct, (T.StructType, T.InterfaceType)):
        tk = decls.generic_name(ct) if decls is not None else None
        if tk in TENSOR_KINDS and _is_slangpy(decls.declared_in(ct)):
            args = list(ct.args) + [1] * (2 - len(ct.args))
            if tk in TEXTURE_DIMS:
                args[1] = TEXTURE_DIMS[tk]
            return TensorT(tk, view(args[0], decls), args[1], decls, ct if not T.contains_vars(ct) else None)
        if tk in TENSOR_VIEWS and isinstance(ct, T.StructType) and _is_slangtorch(decls.declared_in(ct)):
            return TensorViewT(tk, ct, view(ct.args[0], decls), decls)
        return StructT(ct, decls) if isinstance(ct, T.StructType) else InterfaceT(ct, decls)
    if isinstance(ct, T.EnumType):
        return EnumT(ct, decls)
    if isinstance(ct, T.BufferType):
        return BufferT(ct, decls)
    if isinstance(ct, T.PointerType):
        return PointerT(ct, decls)
    if isinstance(ct, T.PairType):
        return DiffPairT(ct, decls)
    return OtherT(ct, decls)


def _is_slangtorch(path) -> bool:
    return isinstance(path, str) and path.replace("\\", "/").endswith("/slangtorch.slang")


TENSOR_VIEWS = ("TensorView", "DiffTensorView")
# Names of slang-torch's library (slangtorch.slang), built into Slang's core module: a module that uses one
# gets `import slangtorch;` beside `import slangpy;` (library_imports), so SlangPy modules see them as in Slang.
_SLANGTORCH_NAMES = re.compile(r"\b(?:TensorView|DiffTensorView|cuda(?:ThreadIdx|BlockIdx|BlockDim|GridDim|GlobalIdx))\b")


def uses_slangtorch(text: str) -> bool:
    return _SLANGTORCH_NAMES.search(text) is not None


def library_imports(text: str) -> str:
    """The imports appended to a module's text for its declarations and its generated kernels."""
    return "\nimport slangpy;\n" + ("import slangtorch;\n" if uses_slangtorch(text) else "")


def _is_slangpy(path) -> bool:
    return isinstance(path, str) and path.replace("\\", "/").endswith(("/slangpy.slang", "/slangpy_textures.slang"))


_scalar_cache: dict = {}


def scalar(name: str) -> ScalarT:
    s = _scalar_cache.get(name)
    if s is None:
        s = _scalar_cache[name] = ScalarT(T.SCALAR_NAMES[name])
    return s


def builtin_type(name: str) -> Optional[SType]:
    """float, float3, int2x2, ... (no user types)."""
    ct = _reflect().builtin_type(name)
    return None if ct is None else view(ct)


def to_compiler(x):
    """A generic argument (view or int) as the compiler takes it."""
    if isinstance(x, SType):
        return x.ct
    return x


class ParamInfo:
    """One parameter of an overload (the implicit `this` of a method included)."""

    def __init__(self, name: str, direction: str, no_diff: bool, has_default: bool, type_=None):
        self.name = name
        self.direction = direction
        self.no_diff = no_diff
        self.has_default = has_default
        self.type = type_          # its view (a pattern for generic functions)


class FuncInfo:
    """One overload of a function or method: reflect_decls.FunctionDecl with views of its types."""

    def __init__(self, fd, struct: Optional[StructT] = None):
        self.fd = fd
        decls = fd.decls
        self.name = fd.name
        self.key = fd.key
        self.params = [ParamInfo(p.name, p.direction, p.no_diff, p.has_default, view(p.type, decls))
                       for p in fd.params]
        self.return_type = view(fd.return_type, decls) if fd.return_type is not None else VoidT()
        self.differentiable = fd.differentiable
        self.is_static = fd.is_static
        self.is_ctor = fd.is_ctor
        self.mutating = fd.mutating
        self.generic_params = fd.generic_params
        self.owner = struct if struct is not None else (view(fd.owner, decls) if fd.owner is not None else None)
        self.has_this = fd.has_this
        self.attrs = {a.name for a in fd.sym.decl.attrs}
        # (generic parameter, interface name) of each `T : IFoo` constraint spelled as a plain name
        self.constraints = [(g.name, g.type.name) for g in getattr(fd.sym.decl, "generic_params", ())
                            if g.kind == "type" and type(g.type).__name__ == "Name"]

    def signature(self, bindings: dict) -> tuple:
        """(parameter views, return view) with the generic parameters bound (`bindings`: name -> view / int)."""
        if not self.generic_params:
            return [p.type for p in self.params], self.return_type
        args = [to_compiler(bindings[g.name]) for g in self.generic_params]
        ps, r = self.fd.signature(args)
        d = self.fd.decls
        return [view(p, d) for p in ps], (view(r, d) if r is not None else VoidT())

    def __repr__(self):
        return f"FuncInfo({self.name})"


class ModuleTypes:
    """A module's declarations as the functional layer sees them (views over reflect_decls.ModuleDecls)."""

    def __init__(self, decls):
        self.decls = decls
        self._types: dict = {}

    @classmethod
    def load(cls, text: str, path: str, include_paths, compiler_args=()) -> "ModuleTypes":
        # The generated kernels import slangpy after the module's text: so do its declarations.
        return cls(_reflect().ModuleDecls.load(text + library_imports(text), path, include_paths, compiler_args))

    @staticmethod
    def check(text: str, path: str, include_paths, compiler_args=()) -> list:
        """Every error in the module's checkable bodies (its non-generic functions), as diagnostics."""
        return _reflect().ModuleDecls.check_all(text + library_imports(text), path, include_paths, compiler_args)

    def functions(self, name: str) -> list:
        return [FuncInfo(fd) for fd in self.decls.functions(name)]

    def methods(self, struct: StructT, name: str) -> list:
        return [FuncInfo(fd, struct) for fd in self.decls.methods(struct.ct, name)]

    def find_type(self, name: str) -> Optional[SType]:
        """The type `name` spells in the module (`S`, `float3`, `vector<float,3>`, `Tensor<float,2>`, `MLVec<16>`)."""
        if name in self._types:
            return self._types[name]
        ct = self.decls.find_type(name)
        t = None if ct is None else view(ct, self.decls)
        self._types[name] = t
        return t

    def generic_args(self, text: str) -> list:
        """`<4, float>` -> [4, view of float]."""
        return [view(a, self.decls) if isinstance(a, T.Type) else a for a in self.decls.generic_args(text)]


def parse_type_string(s: str, types: Optional[ModuleTypes] = None) -> SType:
    """A type written as a string, resolved by the module's declarations (builtin types without one)."""
    t = types.find_type(s) if types is not None else builtin_type(s.strip())
    if t is None and types is None:
        t = ModuleTypes.load("", "<types>", ()).find_type(s)      # vector<float,3>, float[4] ... of no module
    if t is None:
        raise ValueError(f"Could not parse type '{s}'")
    return t
