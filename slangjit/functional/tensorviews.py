"""slang-torch's `TensorView<T>` and `DiffTensorView<T>` as parameters of functional calls (SlangPy's TensorView
support).  The Slang side is the one the torch bindings use (compiler/slang/slangtorch.slang); a module that names
these types gets `import slangtorch;` beside `import slangpy;` (typeview.library_imports).

As in SlangPy, a tensor bound to a TensorView parameter is passed whole: it adds no call dimensions, and the
function indexes it itself (`load(i)`, `store(i, v)`, `size(0)`).  Its element must be the view's element type,
or a scalar whose last dimensions make up the element (a float tensor of shape (N, 2) for `TensorView<float2>`).
A `DiffTensorView` gets its `diff` view from `diff_pair(x, x_grad)` (in `.bwds` calls: a load's gradient is added
into it, a store's gradient read from it) or from a spy.Tensor's gradients (grad_out, else grad_in); without one it
is a view of nothing (loads give 0, stores are dropped)."""
from __future__ import annotations

import struct

import numpy as np

from ..runtime import layout_pack as lp
from . import typeview as S
from . import values as V
from .tensorbase import _contig_strides as _contig
from .errors import BoundVariableException
from .leaves import Leaf, TensorParamLeaf

MAX_DIMS = 8           # TensorView's _sizes / _strides arrays (slangtorch.slang)


def _is_tensor(v) -> bool:
    return getattr(v, "_sj_tensor", False) is True


def _elem_of(v):
    """The element type of a spy.Tensor or numpy array (None for anything else)."""
    if _is_tensor(v):
        return v.dtype
    if isinstance(v, np.ndarray):
        if v.dtype.name not in S.NUMPY_TO_SCALAR or v.dtype.names is not None:
            return None
        return S.scalar(S.NUMPY_TO_SCALAR[v.dtype.name])
    return None


def natural_view(refl, v, pattern: "S.TensorViewT"):
    """The concrete TensorView type a tensor argument gives a (generic) TensorView parameter."""
    if pattern.is_concrete():
        return pattern
    dt = _elem_of(v.primal if isinstance(v, V.DiffPair) else v)
    return None if dt is None else refl.find_type(f"{pattern.vkind}<{dt.name}>")


def _consumed_dims(name: str, P: "S.TensorViewT", dt, shape) -> int:
    """How many last dimensions of the argument make up one element of the view (0: its element is the view's)."""
    E = P.elem
    if dt == E:
        return 0
    if isinstance(dt, S.ScalarT) and E.is_concrete() and E.kind in ("vector", "matrix", "array") and \
            E.scalar == dt.name:
        ne = len(E.shape)
        if len(shape) >= ne and tuple(shape[len(shape) - ne:]) == tuple(E.shape):
            return ne
        raise ValueError(f"argument '{name}': a tensor of {dt.name} with shape {tuple(shape)} does not match "
                         f"{P.name}: its last dimensions must be {tuple(E.shape)}")
    raise TypeError(f"argument '{name}': Cannot bind tensor with dtype {dt.name} to {P.name}")


def bind_tensorview(v, P: "S.TensorViewT", direction: str, name: str, getter) -> Leaf:
    """The leaf of a tensor (spy.Tensor, numpy array; torch tensors arrive as spy.Tensor views) or a
    diff_pair of tensors bound to a TensorView / DiffTensorView parameter."""
    if direction != "in":
        raise BoundVariableException(f"argument '{name}': a {P.vkind} parameter must be an input (it is written "
                                     "through its own store())")
    if not P.is_concrete():
        raise TypeError(f"argument '{name}': cannot resolve the element type of {P.name}")
    pair = isinstance(v, V.DiffPair)
    if pair and P.vkind != "DiffTensorView":
        raise TypeError(f"argument '{name}': a diff_pair is bound to a DiffTensorView parameter, not {P.name}")
    parts = [("primal", v.primal if pair else v)]
    if pair and v.grad is not None:
        parts.append(("grad", v.grad))
    is_np = []
    for what, x in parts:
        dt = _elem_of(x)
        if dt is None:
            raise TypeError(f"argument '{name}': python type {type(x).__name__} does not match {P.name} "
                            "(pass a spy.Tensor, a numpy array or a torch tensor)")
        if what == "grad" and P.elem.derivative != P.elem:
            raise TypeError(f"argument '{name}': {P.name} has no gradient of its own element type "
                            f"({P.elem.name}): its diff view cannot be given")
        _consumed_dims(name, P, dt, x.shape)
        is_np.append(isinstance(x, np.ndarray))
    if pair and len(parts) == 2 and tuple(parts[0][1].shape) != tuple(parts[1][1].shape):
        raise ValueError(f"argument '{name}': the gradient's shape {tuple(parts[1][1].shape)} is not the primal's "
                         f"{tuple(parts[0][1].shape)}")
    return TensorViewLeaf(name, P, getter, any(is_np))


class TensorViewLeaf(TensorParamLeaf):
    """A whole tensor bound to a TensorView / DiffTensorView parameter.  Uniforms per view: the element pointer,
    8 strides (in elements), 8 sizes, the number of dimensions and the element size; the kernel builds the view
    struct from them.  A TensorParamLeaf for the rest of the call machinery (written through its own store(),
    refused by torch autograd)."""
    has_shape = False
    kind = "tensorview"

    def __init__(self, name, ptype: "S.TensorViewT", getter, is_numpy: bool):
        Leaf.__init__(self, name, ptype, getter)
        self.concrete = ptype.vkind
        self.D = 0
        self.ndim = 0
        self.k = 0
        self.is_numpy = is_numpy
        self.grad_in = self.grad_out = False
        self.cd = 0
        self.writable = True
        self.writes = True             # the function may store through the view

    def _parts(self):
        p = [self.u + "_"]
        if self.concrete == "DiffTensorView":
            p.append(self.u + "_df_")
        return p

    def elem(self, p):
        e = self.ptype.elem
        return (e.derivative or e).name if p.endswith("_df_") else e.name

    def uniforms(self):
        out = []
        for p in self._parts():
            out += [(p + "d", self.elem(p) + "*"), (p + "st", f"int64_t[{MAX_DIMS}]"),
                    (p + "sz", f"uint[{MAX_DIMS}]"), (p + "n", "uint"), (p + "es", "uint")]
        return out

    def call_stride_uniforms(self):
        return []

    def _tv(self, kb, p):
        var = kb.tmp()
        kb.line(f"TensorView<{self.elem(p)}> {var};")
        for f, u in (("_data", "d"), ("_strides", "st"), ("_sizes", "sz"), ("_dims", "n"), ("_elsize", "es")):
            kb.line(f"{var}.{f} = {p}{u};")
        return var

    def emit_load(self, kb):
        pv = self._tv(kb, self.u + "_")
        if self.concrete != "DiffTensorView":
            return pv
        dv = self._tv(kb, self.u + "_df_")
        var = kb.tmp()
        kb.line(f"{self.ptype.name} {var};")
        kb.line(f"{var}.primal = {pv};")
        kb.line(f"{var}.diff = {dv};")
        return var

    def shape(self, v):
        return ()

    def _write_view(self, blk, p, x, keep, elem):
        """Packs view `p` over x (spy.Tensor or numpy array; None: a view of nothing)."""
        o = self.offsets
        if x is None:
            struct.pack_into("<Q", blk, o[p + "d"], 0)
            struct.pack_into(f"<{MAX_DIMS}q", blk, o[p + "st"], *([0] * MAX_DIMS))
            struct.pack_into(f"<{MAX_DIMS}I", blk, o[p + "sz"], *([0] * MAX_DIMS))
            struct.pack_into("<I", blk, o[p + "n"], 0)
            struct.pack_into("<I", blk, o[p + "es"], 0)
            return
        if isinstance(x, np.ndarray):
            if self.stage is not None:
                if not x.flags.writeable:
                    x = np.array(x)                  # what the function writes lands in a copy, dropped
                buf = self.stage.upload(x)
                addr, shp, st, off, isz = buf.device_address, x.shape, _contig(x.shape), 0, x.itemsize
                keep.append((self, x, buf, None))
            else:
                if not x.dtype.isnative or not x.flags.writeable:
                    x = lp.native(x) if not x.dtype.isnative else np.array(x)   # written in a copy, dropped
                    keep.append((self, x, None, None))
                isz = x.itemsize
                addr, shp, st, off = x.ctypes.data, x.shape, tuple(s // isz for s in x.strides), 0
        else:
            addr, shp, st, off, isz = x.storage._addr, tuple(x._shape), tuple(x._strides), x.offset, x.dtype.size
        dt = _elem_of(x)
        ne = _consumed_dims(self.name, self.ptype, dt, shp) if dt != elem else 0
        n = 1
        for e in shp[len(shp) - ne:]:
            n *= e
        if ne:
            inner = _contig(shp[len(shp) - ne:])
            if tuple(st[len(st) - ne:]) != tuple(inner) or any(s % n for s in st[:len(st) - ne]) or off % n:
                raise ValueError(f"argument '{self.name}': the last dimensions of a tensor bound to "
                                 f"{self.ptype.name} must be contiguous (shape {tuple(shp)}, strides {tuple(st)})")
            shp, st = shp[:len(shp) - ne], tuple(s // n for s in st[:len(st) - ne])
        if len(shp) > MAX_DIMS:
            raise ValueError(f"argument '{self.name}': {self.ptype.vkind} holds at most {MAX_DIMS} dimensions, "
                             f"got {len(shp)}")
        pad = MAX_DIMS - len(shp)
        struct.pack_into("<Q", blk, o[p + "d"], addr + off * isz)
        struct.pack_into(f"<{MAX_DIMS}q", blk, o[p + "st"], *(list(st) + [0] * pad))
        struct.pack_into(f"<{MAX_DIMS}I", blk, o[p + "sz"], *(list(shp) + [0] * pad))
        struct.pack_into("<I", blk, o[p + "n"], len(shp))
        struct.pack_into("<I", blk, o[p + "es"], isz * n)

    def pack(self, v, blk, call_shape, keep):
        E = self.ptype.elem
        if isinstance(v, V.DiffPair):
            primal, grad = v.primal, v.grad
        else:
            primal = v
            grad = (v.grad_out if v.grad_out is not None else v.grad_in) if _is_tensor(v) else None
        self._write_view(blk, self.u + "_", primal, keep, E)
        if self.concrete == "DiffTensorView":
            self._write_view(blk, self.u + "_df_", grad, keep, E.derivative or E)
