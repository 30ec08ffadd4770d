"""Marshalling and kernel generation for one call signature.

A call `fn(*args, **kwargs)` is described by its *signature*: the Python types of the arguments and, for
containers, their element types, dimensionality, writability and gradients (never values or sizes).  For
each new signature `CallData` resolves the overload, binds every argument to its parameter as one or more
*leaves* (a dict becomes one leaf per field), computes each leaf's dimensionality, writes a compute kernel
in Slang that loads each leaf at the thread's call index, calls the function (or `bwd_diff` of it) and
stores the outputs, and compiles it.  Later calls with the same signature only compute the call shape,
pack the uniforms (data pointers, strides, scalar values) into the entry point's parameter block and run
the kernel.

Container strides are packed per *call* dimension (zero where an argument is broadcast), so a kernel does
not depend on sizes: element offset = _o + sum(_sj_cid[c] * _cs[c]).  A thread handles up to `unroll` call
elements, reading the arguments of all of them before the first call (KernelBuilder, CallData._codegen);
a multi-dimensional call whose views are all linear in the flat call index (contiguous, row offset, fully
broadcast) runs a second kernel that skips the per-dimension indices: offset = _o + flat * _cs[cd - 1].
"""
from __future__ import annotations

import struct
from typing import Any, Optional

import numpy as np

from ..runtime import layout_pack as lp
from ..runtime.device import BufferUsage
from ..tensor import Tensor, staged
from . import typeview as S
from . import values as V
from .errors import KernelGenException
from .generators import Generator

NUMTHREADS = 32          # group size of generated kernels on the CPU device
NUMTHREADS_GPU = 256     # ... and on a GPU device
_I32 = struct.Struct("<i")
_PRINT_SHADERS = [False]  # SlangPy's set_print_generated_shaders (slangjit.core.calldata)


def set_print_generated_shaders(enabled: bool) -> None:
    """Print each Slang kernel the functional API generates (on stdout, when a new call signature is
    compiled), between `GENERATED SHADER: <function>` / `END SHADER: <function>` lines, as SlangPy does."""
    _PRINT_SHADERS[0] = bool(enabled)


def is_print_generated_shaders() -> bool:
    return _PRINT_SHADERS[0]


def print_generated_shader(name: str, code: str) -> None:
    bar = "=" * 80
    print(f"{bar}\nGENERATED SHADER: {name}\n{bar}\n{code.strip()}\n{bar}\nEND SHADER: {name}\n{bar}", flush=True)
_U64 = struct.Struct("<Q")


class Staging:
    """How host data (numpy arguments, ValueRef / DiffPair scratch) reaches the kernels of a device whose
    memory is not host-visible (CUDA): temporary device buffers, uploaded before the launch and read back
    after it.  A CPU device takes this path too when its `functional_staged` option is set (tests of the GPU
    path without a GPU; see tensor.staged)."""

    def __init__(self, device):
        self.device = device
        self.usage = BufferUsage.shader_resource | BufferUsage.unordered_access
        self.gpu = not getattr(device, "_host_memory", True)

    def upload(self, a: np.ndarray):
        raw = np.ascontiguousarray(lp.native(a)).reshape(-1).view(np.uint8)
        b = self.device.create_buffer(size=max(8, raw.size), usage=self.usage)
        if raw.size:
            b.set_data(raw)
        return b

    @staticmethod
    def read(buf, nbytes: int) -> np.ndarray:
        if nbytes > buf.size:                  # as the CUDA buffer's read_bytes: never past the staged data
            raise ValueError(f"staging: reading {nbytes} bytes from a {buf.size}-byte buffer")
        rb = getattr(buf, "read_bytes", None)
        if rb is not None:
            return rb(0, nbytes)
        return buf.to_numpy()[:nbytes]


def staging_for(device) -> Optional[Staging]:
    return Staging(device) if staged(device) else None




# ----------------------------------------------------------------------------------------- signatures

def _sig_tensor(v):
    gi, go = v.grad_in, v.grad_out
    return ("T", v.dtype.name, len(v._shape), v.writable, gi is not None, go is not None,
            gi is not None and gi is go)


def _sig_numpy(v):
    return ("N", v.dtype.str, v.ndim)


def _sig_list(v):
    if len(v) > 8:
        return ("L", len(v), signature(v[0]) if v else None)
    return ("L", tuple(signature(x) for x in v))


def _sig_dict(v):
    return ("D",) + tuple((k, signature(x) if k != "_type" else x) for k, x in v.items())


def signature(v) -> Any:
    t = type(v)
    f = _SIG.get(t)
    if f is not None:
        return f(v)
    if t in _PLAIN:
        return t
    return _sig_slow(v)


def _sig_slow(v):
    if isinstance(v, Tensor):
        return _sig_tensor(v)
    if isinstance(v, (V.VectorValue, V.MatrixValue)):
        _PLAIN.add(type(v))
        return type(v)
    if isinstance(v, Generator):
        return v.sig()
    if isinstance(v, V.ValueRef):
        return ("R", signature(v.value))
    if isinstance(v, V.DiffPair):
        return ("P", signature(v.primal), v.grad is not None)
    if isinstance(v, range):
        return ("range",)
    if isinstance(v, np.ndarray):
        return _sig_numpy(v)
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        return ("npscalar", v.dtype.str)
    if hasattr(v, "get_this"):
        return ("I", type(v).__name__, signature(v.get_this()))
    if getattr(v, "_sj_buffer", False):
        return ("B", int(v.usage))
    if isinstance(v, dict):
        return _sig_dict(v)
    if isinstance(v, (list, tuple)):
        return _sig_list(v)
    return ("?", type(v))


_PLAIN: set = {int, float, bool, type(None), str}
_SIG: dict = {np.ndarray: _sig_numpy, list: _sig_list, dict: _sig_dict, Tensor: _sig_tensor}


def register_signature(tp: type, fn) -> None:
    """How to compute the call-signature part of values of type `tp` (a later stage's argument types, e.g.
    torch tensors, whose calls a hook takes over: a constant is enough)."""
    _SIG[tp] = fn


# ----------------------------------------------------------------------------------------- helpers

def _py_type_name(v) -> str:
    if isinstance(v, Tensor):
        return f"Tensor[{v.dtype.name},{len(v.shape)}]"
    if isinstance(v, np.ndarray):
        return f"numpy.ndarray[{v.dtype},{v.ndim}]"
    return type(v).__name__


def _scalar_to_slang(v) -> S.SType:
    if isinstance(v, bool) or isinstance(v, np.bool_):
        return S.scalar("bool")
    if isinstance(v, (int, np.integer)):
        return S.scalar("int")
    return S.scalar("float")


def _zero_expr(t: S.SType) -> str:
    """Slang text of the zero of differential type t."""
    if isinstance(t, (S.ScalarT, S.VectorT, S.MatrixT)):
        return f"{t.name}(0)"
    if isinstance(t, S.ArrayT):
        return "{" + ", ".join(_zero_expr(t.elem) for _ in range(t.n)) + "}"
    if isinstance(t, S.StructT):
        return f"{t.name}.dzero()"          # a Differential is its own Differential
    raise KernelGenException(f"Exception in kernel generation: no zero value for differential type {t.name}")


def _idx_paths(shape) -> list:
    return [tuple(i) for i in np.ndindex(*shape)] if shape else [()]


def unify(pattern: S.SType, actual: S.SType, b: dict) -> bool:
    """Bind generic names in `pattern` so that it equals `actual`."""
    if isinstance(pattern, S.GenericT):
        if pattern.name in b and isinstance(b[pattern.name], S.SType):
            return b[pattern.name] == actual
        b[pattern.name] = actual
        return True
    if isinstance(pattern, S.ScalarT):
        return pattern == actual
    if isinstance(pattern, S.VectorT):
        if not isinstance(actual, S.VectorT):
            return False
        return unify(pattern.elem, actual.elem, b) and _unify_n(pattern.n, actual.n, b)
    if isinstance(pattern, S.MatrixT):
        if not isinstance(actual, S.MatrixT):
            return False
        return unify(pattern.elem, actual.elem, b) and _unify_n(pattern.rows, actual.rows, b) and \
            _unify_n(pattern.cols, actual.cols, b)
    if isinstance(pattern, S.ArrayT):
        if not isinstance(actual, S.ArrayT):
            return False
        return unify(pattern.elem, actual.elem, b) and _unify_n(pattern.n, actual.n, b)
    if isinstance(pattern, S.StructT):
        if not isinstance(actual, S.StructT):
            return False
        if pattern.decl_key != actual.decl_key:
            return False
        return all(unify(p, a, b) if isinstance(p, S.SType) else _unify_n(p, a, b)
                   for p, a in zip(pattern.args, actual.args))
    if isinstance(pattern, S.TensorT):
        if not isinstance(actual, S.TensorT):
            return False
        return unify(pattern.elem, actual.elem, b) and _unify_n(pattern.dims, actual.dims, b)
    if isinstance(pattern, S.TensorViewT):
        return isinstance(actual, S.TensorViewT) and pattern.vkind == actual.vkind and \
            unify(pattern.elem, actual.elem, b)
    return pattern == actual


def _unify_n(p, a, b) -> bool:
    if isinstance(p, S.ValueParam):
        if p.name in b and not isinstance(b[p.name], S.ValueParam):
            return b[p.name] == a
        b[p.name] = a
        return True
    return p == a


def generic_names(t) -> set:
    out = set()

    def walk(x):
        if isinstance(x, S.GenericT):
            out.add(x.name)
        elif isinstance(x, S.ValueParam):
            out.add(x.name)
        elif isinstance(x, (S.VectorT, S.ArrayT)):
            walk(x.elem)
            walk(x.n)
        elif isinstance(x, S.MatrixT):
            walk(x.elem)
            walk(x.rows)
            walk(x.cols)
        elif isinstance(x, S.TensorT):
            walk(x.elem)
            walk(x.dims)
        elif isinstance(x, S.TensorViewT):
            walk(x.elem)
        elif isinstance(x, S.StructT):
            for a in x.args:
                walk(a)
    walk(t)
    return out

