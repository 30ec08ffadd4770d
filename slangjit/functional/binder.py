"""Binding Python values to a function's parameters (`Binder`): overload matching, dimensionality,
vectorisation and the leaf that carries each argument.  Used by CallData in binding.py."""
from __future__ import annotations

import struct
from typing import Optional

import numpy as np

from . import typeview as S
from . import values as V
from .calldata import (_py_type_name, _scalar_to_slang)
from .genleaf import GeneratorLeaf
from .leaves import (ContainerLeaf, GradValueLeaf, Leaf, RefLeaf, StructLeaf, TensorParamLeaf,
                     ReadOnlyValueLeaf, ValueLeaf, ValueListLeaf, _FAST_FMT)
from .errors import AccessError, BoundVariableException
from .generators import Generator
from .tensorviews import bind_tensorview, natural_view

_RESERVED_KW = ("_result", "_thread_count", "_append_to", "_this")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")



class _Fail(Exception):
    pass


def _one_vector_of(a, b) -> bool:
    """a is vector<b, 1> (the same memory layout as b: Texture2D<vector<float,1>> over a float texture)."""
    return isinstance(a, S.VectorT) and a.n == 1 and a.elem == b


def _is_tensor(v) -> bool:
    return getattr(v, "_sj_tensor", False) is True


class Bound:
    """One Slang parameter (or the result) with its bound argument."""

    def __init__(self, pname: str, ptype: S.SType, direction: str, no_diff: bool, leaf: Leaf, index):
        self.pname, self.ptype, self.direction, self.no_diff, self.leaf, self.index = \
            pname, ptype, direction, no_diff, leaf, index


def _all_leaves(leaf):
    if isinstance(leaf, StructLeaf):
        for _, c in leaf.children:
            yield from _all_leaves(c)
    else:
        yield leaf


# ----------------------------------------------------------------------------------------- binding values


class Binder:
    def __init__(self, fn_name: str, refl: S.ModuleTypes, bwds: bool, options: Optional[dict] = None):
        self.fn_name = fn_name
        self.refl = refl
        self.bwds = bwds
        options = options or {}
        # SlangPy's module options: a container over a parameter of its element type without .map, and
        # a container's last dimensions consumed by a vector/matrix/array parameter (both on by default)
        self.implicit_element_casts = bool(options.get("implicit_element_casts", True))
        self.implicit_tensor_casts = bool(options.get("implicit_tensor_casts", True))
        self._soa_depth = 0          # > 0 while binding the fields of a dict (structure of arrays)
        self.snapshots: dict = {}    # id(IThis object) -> (object, its get_this()) during one call
        self.instance_leaves: list = []   # leaves bound to an IThis object's data (outermost first)

    # natural Slang type of a Python value (for generic inference)
    def natural(self, v, pattern: S.SType, type_override=None, dims_map=None) -> Optional[S.SType]:
        if type_override is not None:
            return type_override
        if isinstance(v, (bool, int, float, np.number)):
            return _scalar_to_slang(v)
        if isinstance(v, (V.VectorValue, V.MatrixValue)):
            return V.slang_type_of_vector(v)
        if isinstance(pattern, S.TensorViewT) and (_is_tensor(v) or isinstance(v, (np.ndarray, V.DiffPair))):
            return natural_view(self.refl, v, pattern)
        if _is_tensor(v) or isinstance(v, np.ndarray):
            dt = v.dtype if _is_tensor(v) else S.scalar(S.NUMPY_TO_SCALAR.get(v.dtype.name, "float"))
            nd = len(v.shape)
            if isinstance(pattern, S.TensorT):
                d = pattern.dims if isinstance(pattern.dims, int) else nd
                return S.TensorT(pattern.tkind, dt, d, pattern.decls)
            if isinstance(pattern, S.GenericT):
                if dims_map is not None and len(dims_map) == nd:
                    return dt           # explicit mapping of every dimension: the element is the value
                raise _Fail("Ambiguous call: a tensor to the generic parameter type "
                            f"'{pattern.name}' (use .map to give the element type)")
            return dt
        if isinstance(v, V.ValueRef):
            return self.natural(v.value, pattern) if v.value is not None else None
        if isinstance(v, V.DiffPair):
            return self.natural(v.primal, pattern)
        if isinstance(v, dict) and "_type" in v:
            t = self.refl.find_type(v["_type"])
            return t
        if isinstance(v, range):
            return S.scalar("int")
        if getattr(v, "_sj_generator", False) and getattr(v, "kind", "") in ("grid", "call_id", "thread_id") \
                and v.dims > 0 and isinstance(pattern, (S.VectorT, S.ArrayT)):
            # an index generator of known dimensions: an int vector / array of that many components
            el = pattern.elem if isinstance(pattern.elem, S.ScalarT) and pattern.elem.skind in "iu" \
                else S.scalar("int")
            return S.VectorT(el, v.dims) if isinstance(pattern, S.VectorT) else S.ArrayT(el, v.dims)
        if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
            if isinstance(pattern, S.GenericT):
                return None
            el = S.scalar("float") if any(isinstance(x, float) for x in v) else S.scalar("int")
            pel = getattr(pattern, "elem", None) if isinstance(pattern, (S.ArrayT, S.VectorT)) else None
            if isinstance(pel, S.ScalarT) and pel.skind in "fiu" and (pel.skind == "f" or el.name == "int"):
                el = pel                  # Python numbers take the parameter's element type (half[N] <- [1.0, ...])
            if isinstance(pattern, S.VectorT):
                return S.VectorT(el, len(v))
            return S.ArrayT(el, len(v))
        if hasattr(v, "get_this"):
            return self.natural(self._this_value(v), pattern)
        return None

    def _this_value(self, v):
        """v.get_this(), asked once per binding (SlangPy asks an instance once while it sets a call up)."""
        memo = self.__dict__.setdefault("_this_memo", {})
        got = memo.get(id(v))
        if got is None or got[0] is not v:
            got = memo[id(v)] = (v, v.get_this())
        return got[1]

    def bind(self, v, P: S.SType, direction: str, name: str, getter, type_override=None, dims_map=None) -> Leaf:
        if hasattr(v, "get_this") and not isinstance(v, (dict, list)) and not _is_tensor(v):
            # an IThis object (instance list, ...): its leaves read one get_this() per call (`snapshots`, cleared
            # by CallData.run), and update_this() receives that same value after the call
            inner = v.get_this()
            snaps = self.snapshots

            def this_getter(vals, g=getter, snaps=snaps):
                o = g(vals)
                r = snaps.get(id(o))
                if r is None:
                    r = snaps[id(o)] = (o, o.get_this())
                return r[1]

            leaf = self.bind(inner, P, direction, name, this_getter, type_override)
            leaf.instance_getter = getter
            self.instance_leaves.append(leaf)
            return leaf
        writes = direction in ("out", "inout")
        if v is None and dims_map is not None:
            # SlangPy's wording when a mapped argument is None
            raise BoundVariableException(f"Explicit vectorization raised exception: NotImplementedError: argument "
                                         f"{name} is None, which has no dimensions to map")
        if v is None:
            raise BoundVariableException(f"Failed to create type marshall for argument {name}: None with error:\n"
                                         "Unsupported type <class 'NoneType'>")
        if isinstance(v, Generator):
            if writes:
                raise BoundVariableException("Cannot read back value for non-writable type")
            leaf = GeneratorLeaf(name, P, getter, v)
            self._check_generator(leaf, P)
            return leaf
        if isinstance(P, S.TensorViewT) and (_is_tensor(v) or isinstance(v, (np.ndarray, V.DiffPair))):
            return bind_tensorview(v, P, direction, name, getter)
        if _is_tensor(v) or isinstance(v, np.ndarray):
            return self.bind_container(v, P, direction, name, getter,
                                       explicit=dims_map is not None or type_override is not None,
                                       type_override=type_override)
        if isinstance(v, V.ValueRef):
            if not P.is_concrete():
                raise _Fail(f"python type ValueRef does not match slang type {P.name}")
            if v.value is not None:
                nat = self.natural(v.value, P)
                if nat is not None and not self._value_converts(v.value, nat, P):
                    raise _Fail(f"python type {_py_type_name(v.value)} does not match slang type {P.name}")
            return RefLeaf(name, P, getter, "ref")
        if isinstance(v, V.DiffPair):
            return RefLeaf(name, P, getter, "pair")
        if isinstance(v, dict):
            return self.bind_dict(v, P, direction, name, getter)
        if isinstance(v, range):
            if writes:
                raise BoundVariableException("Cannot read back value for non-writable type")
            if not (isinstance(P, S.ScalarT) and P.skind in "iu"):
                raise _Fail(f"python type range does not match slang type {P.name}")
            g = lambda vals, g=getter, dt=P.np: np.arange(g(vals).start, g(vals).stop, g(vals).step, dtype=dt)
            leaf = ContainerLeaf(name, P, g, P, 1, 0, False, True)
            leaf.temp = True
            return leaf
        if getattr(v, "_sj_buffer", False):
            return self.bind_buffer(v, P, name, getter)
        if writes and self.bwds and direction == "out" and P.derivative is not None and \
                isinstance(v, (int, float, np.floating, V.VectorValue, V.MatrixValue, list)) and \
                not isinstance(v, bool):
            # .bwds: a plain value for an output (the result) is its gradient, e.g. f.bwds(x, 1.0)
            D = P.derivative
            if not self._value_converts(v, self.natural(v, D), D):
                raise _Fail(f"python type {_py_type_name(v)} does not match the gradient type {D.name}")
            return GradValueLeaf(name, D, getter, _FAST_FMT.get(D.name) if isinstance(D, S.ScalarT) else None)
        if writes and self._soa_depth and isinstance(v, (bool, int, float, np.number, V.VectorValue, V.MatrixValue)):
            # a plain value for a field of a writable SOA dict (e.g. a mutating method's `this`): an input, and
            # what the function writes to the field is dropped (as SlangPy; pass a ValueRef to read it back)
            P2 = P
            if not self._value_converts(v, self.natural(v, P2), P2):
                raise _Fail(f"python type {_py_type_name(v)} does not match slang type {P.name}")
            return ReadOnlyValueLeaf(name, P, getter, _FAST_FMT.get(P.name) if isinstance(P, S.ScalarT) else None)
        if writes:
            raise BoundVariableException("Cannot read back value for non-writable type")
        if isinstance(v, str) or not isinstance(v, (bool, int, float, np.number, V.VectorValue, V.MatrixValue,
                                                        list, tuple)):
            raise BoundVariableException(f"Failed to create type marshall for argument {name}: {v!r} with error:\n"
                                         f"Unsupported type {type(v)!r}")
        # plain values
        nat = self.natural(v, P)
        if self._value_converts(v, nat, P):
            fmt = _FAST_FMT.get(P.name) if isinstance(P, S.ScalarT) else None
            leaf = ValueLeaf(name, P, getter, fmt)
            leaf.value_type = nat      # the Python value's own type, converted when packed (debug_only_bindings)
            return leaf
        # a list of values of the parameter's type (dicts for a struct ...): a 1-D container of them
        if isinstance(v, (list, tuple)) and v and P.is_concrete() and isinstance(P, (S.StructT, S.ArrayT)) and \
                all(self._value_converts(x, None if isinstance(x, (dict, list, tuple)) else self.natural(x, P), P)
                    for x in v):
            return ValueListLeaf(name, P, getter)
        # vectorise a vector / matrix / list over a parameter of its element (row) type
        arr_dt = None
        if isinstance(v, V.VectorValue) and isinstance(P, S.ScalarT) and P.name == (
                v._elem if v._elem != "float16_t" else "half"):
            arr_dt = P
            conv = lambda x, dt=P.np: np.array(x._v, dtype=dt)
            ne = 0
        elif isinstance(v, V.MatrixValue) and isinstance(P, S.ScalarT) and P.name == v._elem:
            arr_dt = P                # a matrix over a parameter of its element type: call shape (rows, cols)
            conv = lambda x: x.to_numpy()
            ne = 0
        elif isinstance(v, V.MatrixValue) and isinstance(P, S.VectorT) and P.n == v._cols and \
                P.elem.name == v._elem:
            arr_dt = P.elem
            conv = lambda x: x.to_numpy()
            ne = 1
        elif isinstance(v, (list, tuple)) and v and P.is_concrete() and P.scalar is not None and \
                P.kind in ("scalar", "vector", "matrix", "array"):
            try:
                a = np.asarray(_plain_list(v), dtype=S.scalar(P.scalar).np)
            except (TypeError, ValueError):
                a = None
            if a is not None and a.ndim > len(P.shape) and tuple(a.shape[a.ndim - len(P.shape):]) == tuple(P.shape):
                arr_dt = S.scalar(P.scalar)
                conv = lambda x, dt=a.dtype: np.asarray(_plain_list(x), dtype=dt)
                ne = len(P.shape)
                nd = a.ndim
        if arr_dt is not None:
            if isinstance(v, (list, tuple)):
                ndim = nd
            elif isinstance(v, V.MatrixValue):
                ndim = 2
            else:
                ndim = 1
            leaf = ContainerLeaf(name, P, lambda vals, g=getter, c=conv: c(g(vals)), arr_dt, ndim, ne, False, True)
            leaf.temp = True          # a fresh array per call: it must outlive the launch
            return leaf
        raise _Fail(f"python type {_py_type_name(v)} does not match slang type {P.name}")

    def _value_converts(self, v, nat: Optional[S.SType], P: S.SType) -> bool:
        if isinstance(P, (S.GenericT, S.InterfaceT)):
            return False
        if isinstance(v, dict):
            # a dict of plain values for a struct (e.g. an element of a list for a struct array: [{"x": 1}, ...])
            if not (isinstance(P, S.StructT) and P.is_concrete()):
                return False
            fields = P.fields
            for k, x in v.items():
                if k == "_type":
                    continue
                if k not in fields:
                    return False
                ft = fields[k]
                if not self._value_converts(x, None if isinstance(x, (dict, list, tuple)) else self.natural(x, ft), ft):
                    return False
            return True
        if getattr(v, "_sj_buffer", False):           # a buffer inside a list / dict value
            return isinstance(P, S.BufferT) and (not P.bkind.startswith("RW") or bool(int(v.usage) & 16))
        if _is_tensor(v):                               # a tensor inside a list / dict value: its Tensor<T, D>
            if not (isinstance(P, S.TensorT) and P.elem == v.dtype and P.dims == len(v.shape) and
                    ("w" not in P.access or v.writable)):
                return False
            if P.tkind in ("Tensor", "RWTensor", "WTensor", "PrimalTensor", "WPrimalTensor", "RWPrimalTensor"):
                return True
            need = {"DiffTensor": ("grad_out",), "WDiffTensor": ("grad_in",),
                    "RWDiffTensor": ("grad_out", "grad_in")}.get(P.tkind, None)
            return need is not None and all(getattr(v, g) is not None for g in need)
        if isinstance(v, (list, tuple)):
            if isinstance(P, (S.ArrayT, S.VectorT)) and P.is_concrete():
                if len(v) != P.n:
                    return False
                if isinstance(P, S.VectorT):
                    return all(isinstance(x, (int, float)) for x in v)
                return all(self._value_converts(x, None if isinstance(x, (dict, list, tuple)) else
                                                self.natural(x, P.elem), P.elem) for x in v)
            if isinstance(P, S.MatrixT) and P.is_concrete():
                return len(v) == P.rows and all(isinstance(r, (list, tuple)) and len(r) == P.cols for r in v)
            return False
        if nat is None:
            return False
        if isinstance(v, (bool, int, float, np.number)):
            if isinstance(P, (S.ScalarT, S.EnumT)):
                return True
            if isinstance(P, S.VectorT) and P.is_concrete() and not isinstance(v, bool):
                return True       # splat
            if isinstance(P, S.PointerT) and isinstance(v, int):
                return True
            return False
        if isinstance(v, (V.VectorValue, V.MatrixValue)):
            return nat == P
        return False

    def _check_generator(self, leaf: GeneratorLeaf, P: S.SType):
        ok = False
        kind = leaf.kind
        if kind in ("call_id", "grid"):
            if isinstance(P, S.ScalarT) and P.skind in "iu":
                ok = kind == "call_id" or leaf.k == 1
            elif isinstance(P, S.VectorT) and isinstance(P.elem, S.ScalarT) and P.elem.skind in "iu":
                ok = kind == "call_id" or P.n == leaf.k
            elif isinstance(P, S.ArrayT) and isinstance(P.elem, S.ScalarT) and P.elem.skind in "iu":
                ok = kind == "call_id" or P.n == leaf.k
        elif kind == "thread_id":
            ok = (isinstance(P, S.ScalarT) and P.skind in "iu") or (
                isinstance(P, S.VectorT) and P.elem.skind in "iu" and P.n <= 3)
        elif kind == "wang_hash":
            ok = (isinstance(P, S.ScalarT) and P.name == "uint") or (
                isinstance(P, S.VectorT) and P.elem.name == "uint" and P.n <= 4)
        elif kind == "rand_float":
            ok = (isinstance(P, S.ScalarT) and P.name == "float") or (
                isinstance(P, S.VectorT) and P.elem.name == "float" and P.n <= 4)
        if not ok:
            raise ValueError(f"Could not find suitable conversion from {leaf._gname()} to {P.name}")

    def bind_container(self, v, P: S.SType, direction, name, getter, explicit=False, type_override=None) -> Leaf:
        is_np = isinstance(v, np.ndarray)
        if is_np:
            if v.dtype.names is not None:
                raise BoundVariableException(f"Failed to create type marshall for argument {name}: Structured numpy "
                                             f"dtype {v.dtype} is not supported in calls; copy it into a tensor of "
                                             f"the struct type (Tensor.from_numpy(device, data, dtype=...))")
            if v.dtype.name not in S.NUMPY_TO_SCALAR:
                raise BoundVariableException(f"Failed to create type marshall for argument {name}: numpy array of "
                                             f"dtype {v.dtype} with error:\nUnsupported numpy dtype")
            dt = S.scalar("bool" if v.dtype.name == "int8" else S.NUMPY_TO_SCALAR[v.dtype.name])
            writable = bool(v.flags.writeable)
            grads = (False, False)
            if not v.dtype.isnative and (direction in ("out", "inout") or
                                         (isinstance(P, S.TensorT) and "w" in P.access)):
                raise BoundVariableException(
                    f"argument '{name}': numpy array has non-native byte order (dtype {v.dtype.str}), which the "
                    f"kernel cannot write; pass a native array (a.astype(a.dtype.newbyteorder('=')))")
        else:
            dt = v.dtype
            writable = v.writable
            grads = (v.grad_in is not None, v.grad_out is not None)
        nd = len(v.shape)
        writes = direction in ("out", "inout")
        if isinstance(P, S.BufferT) and not is_np:
            return self.bind_tensor_buffer(v, P, name, getter)
        if isinstance(P, S.TensorT):
            if not (P.elem == dt or _one_vector_of(P.elem, dt) or _one_vector_of(dt, P.elem)):
                raise TypeError(f"Can't convert tensor with element type {dt.name} to tensor with element type "
                                f"{P.elem.name}")
            if "w" in P.access and not writable:
                raise AccessError(f"Can't pass a read-only tensor to a writable tensor ({P.name}) for argument "
                                f"'{name}'")
            if nd < P.dims:
                raise _Fail(f"python type {_py_type_name(v)} does not match slang type {P.name} "
                            f"(too few dimensions)")
            concrete = self._concrete_tensor(P, v if not is_np else None)
            leaf = TensorParamLeaf(name, P, getter, concrete, nd, is_np)
            leaf.writes = "w" in P.access
            return leaf
        if writes and not writable:
            raise BoundVariableException("Cannot read back value for non-writable type")
        ne = 0
        convert = False
        if P == dt:
            ne = 0
        elif dt.kind == "scalar" and P.is_concrete() and P.kind in ("vector", "matrix", "array") and \
                P.scalar == dt.name and len(P.shape) <= nd:
            ne = len(P.shape)
        elif explicit and isinstance(P, S.ScalarT) and dt.kind == "scalar" and \
                P.skind in "fiu" and dt.skind in "fiu" and (type_override is None or type_override in (dt, P)):
            # SlangPy: an explicit mapping (.map((0,)) or .map(float)) makes the element type the container's,
            # which the call converts to the parameter's (a float tensor into an `int` parameter)
            convert = True
        elif direction == "out" and isinstance(P, S.ScalarT) and dt.kind == "scalar" and \
                P.skind in "fiu" and dt.skind in "fiu":
            # SlangPy: a result / out container of another numeric scalar type receives the value converted
            # (an `int` function's results in a float NDBuffer)
            convert = True
        elif isinstance(P, S.PointerT) and dt.kind == "scalar" and dt.name in ("uint64_t", "int64_t") and \
                direction == "in":
            convert = True      # SlangPy: a container of 64-bit device addresses vectorises over a pointer parameter
        else:
            raise _Fail(f"python type {_py_type_name(v)} does not match slang type {P.name}")
        if not explicit and not self.implicit_element_casts:
            raise _Fail(f"python type {_py_type_name(v)} does not match slang type {P.name} (implicit element "
                        f"casts are disabled: use .map to vectorise)")
        if ne and not explicit and not self.implicit_tensor_casts:
            raise _Fail(f"python type {_py_type_name(v)} does not match slang type {P.name} (implicit tensor casts "
                        f"are disabled)")
        use_grads = (False, False)
        if self.bwds and not is_np:
            use_grads = grads
        if convert and any(use_grads):
            raise _Fail(f"argument '{name}': a tensor of {dt.name} converted to {P.name} carries no gradients "
                        f"through the conversion (pass a tensor of {P.name})")
        leaf = ContainerLeaf(name, P, getter, dt, nd, ne, writable, is_np, use_grads)
        leaf.writes = writes
        leaf.convert = convert
        return leaf

    def _concrete_tensor(self, P: S.TensorT, v) -> str:
        tk = P.tkind
        if tk in ("ITensor",):
            return "Tensor"
        if tk == "IWTensor":
            return "WTensor"
        if tk == "IRWTensor":
            return "RWTensor"
        gi = v is not None and v.grad_in is not None
        go = v is not None and v.grad_out is not None
        if tk == "IDiffTensor":
            return "DiffTensor" if (self.bwds and go) else "PrimalTensor"
        if tk == "IWDiffTensor":
            return "WDiffTensor" if (self.bwds and gi) else "WPrimalTensor"
        if tk == "IRWDiffTensor":
            return "RWDiffTensor" if (self.bwds and gi and go) else "RWPrimalTensor"
        if tk in ("DiffTensor", "WDiffTensor", "RWDiffTensor"):
            need_go = tk != "WDiffTensor"
            need_gi = tk != "DiffTensor"
            if self.bwds and ((need_go and not go) or (need_gi and not gi)):
                raise TypeError(f"On none-cuda platforms, {P.name} requires a tensor with an associated "
                                f"{'output' if need_go and not go else 'input'} gradient")
        return tk

    def bind_dict(self, v: dict, P: S.SType, direction, name, getter) -> Leaf:
        if "_type" in v:
            t = self.refl.find_type(v["_type"])
            if t is None:
                raise _Fail(f"Unknown type '{v['_type']}'")
            if isinstance(P, (S.GenericT, S.InterfaceT)) or not P.is_concrete():
                P = t
        if isinstance(P, S.StructT):
            fields = P.fields
        elif isinstance(P, S.VectorT) and P.is_concrete():
            fields = {c: P.elem for c in "xyzw"[:P.n]}
        else:
            raise _Fail(f"python type dict does not match slang type {P.name}")
        children = []
        self._soa_depth += 1
        try:
            for k, fv in v.items():
                if k == "_type":
                    continue
                if k not in fields:
                    raise ValueError(f"Slang type '{P.name}' has no field '{k}'")
                child = self.bind(fv, fields[k], direction, f"{name}.{k}",
                                  lambda vals, g=getter, k=k: g(vals)[k])
                children.append((k, child))
        finally:
            self._soa_depth -= 1
        return StructLeaf(name, P, getter, children)

    def bind_buffer(self, v, P, name, getter) -> Leaf:
        if isinstance(P, S.PointerT) or (isinstance(P, S.ScalarT) and P.name in ("uint64_t", "int64_t")):
            leaf = ValueLeaf(name, P, lambda vals, g=getter: g(vals).device_address, "Q")
            return leaf
        if isinstance(P, S.BufferT):
            if P.bkind.startswith("RW") and not (int(v.usage) & 16):
                raise ValueError(f"Buffer[rw=False] does not match slang type {P.name}")
            leaf = BufferLeaf(name, P, getter)
            return leaf
        raise _Fail(f"python type Buffer does not match slang type {P.name}")


    def bind_tensor_buffer(self, v, P: S.BufferT, name, getter) -> Leaf:
        """A spy.Tensor for a (RW)StructuredBuffer<T> parameter: its elements, in order, as the buffer (SlangPy
        passes the tensor's storage; the call gets no dimensions from it)."""
        if P.elem is None or P.elem != v.dtype:
            raise _Fail(f"python type {_py_type_name(v)} does not match slang type {P.name} (element type "
                        f"{v.dtype.name})")
        if P.bkind.startswith("RW") and not v.writable:
            raise _Fail(f"a read-only tensor does not match slang type {P.name}")
        return TensorBufferLeaf(name, P, getter)


class TensorBufferLeaf(Leaf):
    """A contiguous spy.Tensor bound to a structured buffer parameter."""

    def uniforms(self):
        return [(self.u, self.ptype.name)]

    def emit_load(self, kb):
        return self.u

    def emit_store(self, kb, expr):
        pass                     # written through the buffer

    def pack(self, v, blk, call_shape, keep):
        if not v.is_contiguous():
            raise ValueError(f"argument '{self.name}': a tensor bound to {self.ptype.name} must be contiguous "
                             f"(shape {tuple(v.shape)}, strides {tuple(v.strides)})")
        n = 1
        for d in v.shape:
            n *= d
        struct.pack_into("<QQ", blk, self.offsets[self.u], v.storage._addr + v.offset * v.dtype.size, n)


class BufferLeaf(Leaf):
    def uniforms(self):
        return [(self.u, self.ptype.name)]

    def emit_load(self, kb):
        return self.u

    def pack(self, v, blk, call_shape, keep):
        el = self.ptype.elem
        count = v.size // (el.size if el is not None and el.size else 1)
        struct.pack_into("<QQ", blk, self.offsets[self.u], v.device_address, count)


def _plain_list(v):
    if isinstance(v, (V.VectorValue,)):
        return list(v)
    if isinstance(v, V.MatrixValue):
        return v.to_numpy().tolist()
    if isinstance(v, (list, tuple)):
        return [_plain_list(x) for x in v]
    return v
