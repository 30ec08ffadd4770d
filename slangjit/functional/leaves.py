"""The leaves of a call: how each argument (value, container, tensor, reference, struct) is declared in the
generated kernel, loaded/stored at the call index and packed into the uniforms (generator leaves: genleaf.py;
the KernelBuilder: kernelbuilder.py).  See calldata.py for the overall model."""
from __future__ import annotations

import struct
from typing import Optional

import numpy as np

from ..compiler.ir.difftypes import diff_field_name
from ..runtime import layout_pack as lp
from . import typeview as S
from . import values as V
from .errors import KernelGenException, ShapeMismatchError
from .kernelbuilder import KernelBuilder, _float_paths  # noqa: F401  (KernelBuilder: for annotations)

from .calldata import Staging, _I32, _U64, _idx_paths, _zero_expr
from .tensorbase import _contig_strides as _contig


# ----------------------------------------------------------------------------------------- leaves


class Leaf:
    """One argument (or one field of a dict argument) bound to a Slang type."""
    k = 0                    # container dimensionality (-1: matches the call)
    mapping: Optional[tuple] = None
    writable = False
    has_shape = False        # contributes to the call shape
    differentiable = False   # carries gradients for .bwds
    explicit_map = False
    writes = True            # the kernel may write through it (numpy arguments are read back when staged)
    stage: Optional[Staging] = None
    kind = ""

    def __init__(self, name: str, ptype: S.SType, getter):
        self.name = name               # for messages: the parameter name ("b", "_result", "s.x")
        self.ptype = ptype
        self.get = getter              # values list -> this leaf's Python value
        self.u = ""                    # uniform prefix, set by the kernel builder
        self.offsets: dict = {}

    def uniforms(self) -> list:
        return []

    def emit_load(self, kb: "KernelBuilder") -> str:
        raise NotImplementedError

    def emit_store(self, kb: "KernelBuilder", expr: str) -> None:
        raise KernelGenException(f"Exception in kernel generation: can't write to argument '{self.name}'")

    def shape(self, v) -> tuple:
        return ()

    def pack(self, v, blk, call_shape, keep) -> None:
        pass

    def after(self, v, keep) -> None:
        pass

    def has_grads(self) -> bool:
        return False

    def finalize(self):
        """Called once the uniform offsets are known."""
        if self.u in self.offsets:
            self.off = self.offsets[self.u]

    def call_stride_uniforms(self) -> list:
        """Names of this leaf's per-call-dimension stride arrays (`int[cd]`): the host checks them to pick the
        linear kernel variant, which reads only their last slot (see CallData._linear_strides)."""
        return []

    # bwds
    def emit_grad_in(self, kb) -> str:
        return _zero_expr(self.ptype.derivative)

    def emit_grad_prefetch(self, kb) -> Optional[str]:
        """Load phase of .bwds: read what emit_grad_out will accumulate into (a name passed back to it)."""
        return None

    def emit_grad_out(self, kb, expr: str, pre: Optional[str] = None) -> None:
        pass


def _w_i32(blk, off, v):
    _I32.pack_into(blk, off, v)


class ValueLeaf(Leaf):
    """A Python value passed as a uniform of the parameter type (dimensionality 0)."""

    def __init__(self, name, ptype, getter, fast_fmt: Optional[str] = None):
        super().__init__(name, ptype, getter)
        self.fmt = struct.Struct("<" + fast_fmt) if fast_fmt else None
        self.layout = None

    def uniforms(self):
        return [(self.u, self.ptype.name)]

    def emit_load(self, kb):
        return self.u

    def pack(self, v, blk, call_shape, keep):
        fmt = self.fmt
        if fmt is not None:
            try:
                fmt.pack_into(blk, self.off, v)
                return
            except (struct.error, OverflowError):      # the general path below says what is wrong
                pass
        off = self.offsets[self.u]
        P = self.ptype
        if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
            if isinstance(P, S.ScalarT) and P.skind in "iu":
                v = int(v)
            elif isinstance(P, S.VectorT):
                v = [v] * P.n
        lp.pack_value(_np_view(blk), off, self.layout, _plain(v), self.name, lp.PackContext("argument"))


class ReadOnlyValueLeaf(ValueLeaf):
    """A plain value for a field of a writable SOA dict: read, and the function's writes to it dropped."""

    def emit_store(self, kb, expr):
        pass


class GradValueLeaf(ValueLeaf):
    """A plain value given for an output of a .bwds call: the output's gradient (ptype is the Differential)."""

    def emit_load(self, kb):
        return self.u

    def emit_store(self, kb, expr):
        pass

    def emit_grad_in(self, kb):
        return self.u


def _np_view(blk):
    return blk if isinstance(blk, np.ndarray) else np.frombuffer(blk, dtype=np.uint8)


def _plain(v):
    if getattr(v, "_sj_tensor", False):          # a spy.Tensor inside a value: packed by the struct it meets
        return v                                 # (Tensor._sj_struct_fields: Tensor<T, D>, DiffTensor<T, D> ...)
    if isinstance(v, (V.VectorValue,)):
        return list(v)
    if isinstance(v, V.MatrixValue):
        return v.to_numpy()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if k != "_type"}
    return v


_FAST_FMT = {"float": "f", "double": "d", "int": "i", "uint": "I", "bool": "?", "int64_t": "q", "uint64_t": "Q",
             "int16_t": "h", "uint16_t": "H", "int8_t": "b", "uint8_t": "B", "half": "e"}


def _elem_shape_message(name: str, P: S.SType, shp, ne: int) -> str:
    want = tuple(P.shape)
    got = tuple(shp[len(shp) - ne:]) if len(shp) >= ne else tuple(shp)
    # which dimensions differ, then SlangPy's phrase ("does not match the expected shape")
    tail = f"; the array's shape does not match the expected shape (..., {', '.join(str(w) for w in want)})"
    if ne == 1:
        return (f"argument '{name}': expected last dimension {want[0]} ({P.name}), got {got[-1] if got else 0} "
                f"(array shape {tuple(shp)})" + tail)
    return (f"argument '{name}': expected last {ne} dimensions {want} ({P.name}), got {got} "
            f"(array shape {tuple(shp)})" + tail)


class ContainerLeaf(Leaf):
    """A strided container (spy.Tensor, numpy array, vectorised list) bound to an element type.

    Its last `ne` dims may be consumed by a vector/matrix/array parameter of the container's scalar type."""
    has_shape = True
    kind = "np"

    def __init__(self, name, ptype, getter, dtype: S.SType, ndim: int, ne: int, writable: bool, is_numpy: bool,
                 grads=(False, False)):
        super().__init__(name, ptype, getter)
        self.dtype = dtype
        self.ndim = ndim
        self.ne = ne
        self.k = ndim - ne
        self.writable = writable
        self.is_numpy = is_numpy
        self.elem_name = dtype.name          # pointer element type
        self.grad_in, self.grad_out = grads
        self.cd = 0
        self.fast1 = None

    def finalize(self):
        p = self.u + "_"
        if not self.is_numpy and self.cd == 1 and self.k == 1 and not self.ne:
            self.fast1 = (self.offsets[p + "d"], self.offsets[p + "o"], self.offsets[p + "cs"])

    def has_grads(self):
        return self.grad_in or self.grad_out

    def uniforms(self):
        u = [(self.u + "_d", self.elem_name + "*"), (self.u + "_o", "int")]
        if self.cd:
            u.append((self.u + "_cs", f"int[{self.cd}]"))
        if self.ne:
            u.append((self.u + "_es", f"int[{self.ne}]"))
        if self.grad_in:
            u += [(self.u + "_gid", self.grad_elem + "*"), (self.u + "_gio", "int")]
            if self.cd:
                u.append((self.u + "_gics", f"int[{self.cd}]"))
            if self.ne:
                u.append((self.u + "_gies", f"int[{self.ne}]"))
        if self.grad_out:
            u += [(self.u + "_god", self.grad_elem + "*"), (self.u + "_goo", "int"), (self.u + "_goa", "int")]
            if self.cd:
                u.append((self.u + "_gocs", f"int[{self.cd}]"))
            if self.ne:
                u.append((self.u + "_goes", f"int[{self.ne}]"))
        return u

    @property
    def grad_elem(self):
        d = self.dtype.derivative
        return (d or self.dtype).name

    def call_stride_uniforms(self):
        if not self.cd:
            return []
        return [self.u + "_cs"] + ([self.u + "_gics"] if self.grad_in else []) + \
            ([self.u + "_gocs"] if self.grad_out else [])

    def _load_from(self, kb, p, t: S.SType):
        off = kb.offset(p, self.cd)
        if not self.ne:
            return f"{p}d[{off}]"
        var = kb.tmp()
        kb.line(f"{kb.ity} {var}_o = {off};")
        kb.line(f"{t.name} {var};")
        for path in _idx_paths(t.shape):
            e = " + ".join([f"{var}_o"] + [f"{i} * {p}es[{j}]" for j, i in enumerate(path)])
            kb.line(f"{var}{''.join(f'[{i}]' for i in path)} = {p}d[{e}];")
        return var

    convert = False          # elements of another scalar type, converted to the parameter's on load

    def emit_load(self, kb):
        if self.convert:
            if isinstance(self.ptype, S.PointerT):
                return f"(({self.ptype.name})({self._load_from(kb, self.u + '_', self.dtype)}))"
            return f"{self.ptype.name}({self._load_from(kb, self.u + '_', self.dtype)})"
        return self._load_from(kb, self.u + "_", self.ptype)

    def emit_store(self, kb, expr):
        p = self.u + "_"
        off = kb.offset(p, self.cd)
        if not self.ne:
            kb.line(f"{p}d[{off}] = {self.dtype.name + '(' + expr + ')' if self.convert else expr};")
            return
        var = kb.tmp()
        kb.line(f"{kb.ity} {var}_o = {off};")
        kb.line(f"{self.ptype.name} {var} = {expr};")
        for path in _idx_paths(self.ptype.shape):
            e = " + ".join([f"{var}_o"] + [f"{i} * {p}es[{j}]" for j, i in enumerate(path)])
            kb.line(f"{p}d[{e}] = {var}{''.join(f'[{i}]' for i in path)};")

    def emit_grad_in(self, kb):
        if not self.grad_in:
            return _zero_expr(self.ptype.derivative)
        return self._load_from(kb, self.u + "_gi", self.ptype.derivative)

    def emit_grad_prefetch(self, kb):
        if not self.grad_out:
            return None
        # `_goa` (packed per call): 0 when no two threads of the call touch the same gradient element, then a
        # plain read-modify-write accumulates; 1: an atomic add (warp-aggregated on CUDA); 2 (slangjit.torch's
        # direct launcher, for a fresh uninitialised gradient that every thread writes one distinct element
        # of): a plain store, nothing read (prev stays zero).  The read of the
        # old value happens in the load phase, with the thread's other reads, so that the elements a thread
        # handles keep their loads in flight together (the store comes after the call).
        p = self.u + "_go"
        D = self.ptype.derivative
        var = kb.tmp()
        kb.line(f"{kb.ity} {var}_o = {kb.offset(p, self.cd)};")
        kb.line(f"{D.name} {var}_prev = {_zero_expr(D)};")
        if not self.ne:
            kb.line(f"if ({kb.goa(p)} == 0) {var}_prev = {p}d[{var}_o];")
            return var
        kb.line(f"if ({kb.goa(p)} == 0) {{")
        for path in _idx_paths(self.ptype.shape):
            e = " + ".join([f"{var}_o"] + [f"{i} * {p}es[{j}]" for j, i in enumerate(path)])
            kb.line(f"    {var}_prev{''.join(f'[{i}]' for i in path)} = {p}d[{e}];")
        kb.line("}")
        return var

    def emit_grad_out(self, kb, expr, pre=None):
        if not self.grad_out:
            return
        p = self.u + "_go"
        var = pre if pre is not None else self.emit_grad_prefetch(kb)
        kb.line(f"{self.ptype.derivative.name} {var} = {expr};")
        D = self.ptype.derivative
        if isinstance(D, S.StructT):
            # A struct Differential (e.g. the compiler's synthesized {x, y} of `struct S { float x; int n;
            # float y; }`): added with S.dadd, atomically one float at a time.
            kb.line(f"if ({kb.goa(p)} == 1) {{")
            for path in _float_paths(D):
                kb.line(f"    InterlockedAdd((*({p}d + {var}_o)){path}, {var}{path});")
            kb.line(f"}} else {p}d[{var}_o] = {self.ptype.name}.dadd({var}_prev, {var});")
            return
        if not self.ne:
            kb.line(f"if ({kb.goa(p)} == 1) _sj_atomic_add({p}d + {var}_o, {var}); "
                    f"else {p}d[{var}_o] = {var}_prev + {var};")
            return
        kb.line(f"if ({kb.goa(p)} == 1) {{")
        for path in _idx_paths(self.ptype.shape):
            e = " + ".join([f"{var}_o"] + [f"{i} * {p}es[{j}]" for j, i in enumerate(path)])
            kb.line(f"    _sj_atomic_add({p}d + ({e}), {var}{''.join(f'[{i}]' for i in path)});")
        kb.line("} else {")
        for path in _idx_paths(self.ptype.shape):
            e = " + ".join([f"{var}_o"] + [f"{i} * {p}es[{j}]" for j, i in enumerate(path)])
            ix = ''.join(f'[{i}]' for i in path)
            kb.line(f"    {p}d[{e}] = {var}_prev{ix} + {var}{ix};")
        kb.line("}")

    # -- runtime

    def _geom(self, v):
        """(address, shape, strides in elements, offset) of a value."""
        if self.is_numpy:
            a = v
            isz = a.itemsize
            return a.ctypes.data, a.shape, tuple(s // isz for s in a.strides), 0
        return v.storage._addr, v._shape, v._strides, v.offset

    def shape(self, v):
        if self.is_numpy:
            shp = v.shape
        else:
            shp = v._shape
        if self.ne:
            want = self.ptype.shape
            got = shp[len(shp) - self.ne:]
            if tuple(got) != tuple(want):
                raise ShapeMismatchError(_elem_shape_message(self.name, self.ptype, shp, self.ne))
            return tuple(shp[:len(shp) - self.ne])
        return tuple(shp)

    def _pack_view(self, blk, p, addr, shp, st, off, call_shape):
        o = self.offsets
        _U64.pack_into(blk, o[p + "d"], addr)
        _I32.pack_into(blk, o[p + "o"], off)
        cd = self.cd
        if cd:
            if cd == 1 and self.k == 1:
                _I32.pack_into(blk, o[p + "cs"], st[0] if shp[0] != 1 else 0)
            else:
                cs = [0] * cd
                m = self.mapping
                for i in range(self.k):
                    if shp[i] != 1:
                        cs[m[i]] += st[i]
                struct.pack_into(f"<{cd}i", blk, o[p + "cs"], *cs)
        if self.ne:
            struct.pack_into(f"<{self.ne}i", blk, o[p + "es"], *st[self.k:])

    temp = False             # the value is an array converted from the argument on every call (see Binder.bind)

    def pack(self, v, blk, call_shape, keep):
        if self.temp and self.stage is None:   # keep it alive until the launch returns (staged: copied)
            keep.append((self, v, None, None))
        if self.is_numpy and self.stage is not None:
            buf = self.stage.upload(v)
            self._pack_view(blk, self.u + "_", buf.device_address, v.shape, _contig(v.shape), 0, call_shape)
            keep.append((self, v, buf, None))
            return
        if self.is_numpy:
            if not v.flags.c_contiguous and any(s < 0 for s in v.strides):
                raise ValueError(f"argument '{self.name}': numpy arrays with negative strides are not supported")
            if not v.dtype.isnative:           # big-endian: read from a native copy (writes are refused at bind)
                v = lp.native(v)
                keep.append((self, v, None, None))
            addr, shp, st, off = self._geom(v)
            self._pack_view(blk, self.u + "_", addr, shp, st, off, call_shape)
        elif self.fast1:                       # 1-D tensor over a 1-D call, no consumed element dims
            o_d, o_o, o_cs = self.fast1
            _U64.pack_into(blk, o_d, v.storage._addr)
            _I32.pack_into(blk, o_o, v.offset)
            _I32.pack_into(blk, o_cs, v._strides[0] if v._shape[0] != 1 else 0)
        else:
            self._pack_view(blk, self.u + "_", v.storage._addr, v._shape, v._strides, v.offset, call_shape)
        if self.grad_in or self.grad_out:
            self._check_grads(v)
        if self.grad_in:
            g = v.grad_in
            self._pack_view(blk, self.u + "_gi", g.storage._addr, g._shape, g._strides, g.offset, call_shape)
        if self.grad_out:
            g = v.grad_out
            self._pack_view(blk, self.u + "_go", g.storage._addr, g._shape, g._strides, g.offset, call_shape)
            distinct = not self.shared_grads and self._distinct_cached(g._shape, g._strides, call_shape)
            _I32.pack_into(blk, self.offsets[self.u + "_goa"], 0 if distinct else 1)

    def _check_grads(self, v):
        for what, g in (("grad_in", v.grad_in if self.grad_in else None),
                        ("grad_out", v.grad_out if self.grad_out else None)):
            if g is None:
                continue
            gs, vs = tuple(g._shape), tuple(v._shape)
            # same dims; a call dim of extent 1 broadcasts (a broadcast_to view keeps its grads' shape)
            if gs != vs and (len(gs) != len(vs) or gs[self.k:] != vs[self.k:] or
                             any(a != b and a != 1 for a, b in zip(gs[:self.k], vs[:self.k]))):
                raise ValueError(f"argument '{self.name}': its {what} tensor has shape {gs}, "
                                 f"expected the tensor's shape {vs}")

    shared_grads = False     # set per call when another argument accumulates into the same storage
    _distinct_memo = None    # (shape, strides, call shape) -> _distinct_per_thread's answer (a pure function)

    def _distinct_cached(self, shp, st, call_shape) -> bool:
        memo = self._distinct_memo
        if memo is None:
            memo = self._distinct_memo = {}
        key = (shp, st, tuple(call_shape))
        r = memo.get(key)
        if r is None:
            r = self._distinct_per_thread(shp, st, call_shape)
            if len(memo) < 256:
                memo[key] = r
        return r

    def _distinct_per_thread(self, shp, st, call_shape) -> bool:
        """True when the threads of the call touch pairwise different elements of a view (shape/strides in
        elements, the leaf's k call dims then its ne element dims): every call dim of extent > 1 is one dim
        of the view (no broadcasting) and the view does not overlap itself."""
        m = self.mapping if self.mapping is not None else tuple(range(self.k))
        covered = set()
        for i in range(self.k):
            if shp[i] != 1:
                c = m[i]
                if c in covered:
                    return False
                covered.add(c)
        for c, n in enumerate(call_shape):
            if n > 1 and c not in covered:
                return False
        extent = 1
        for s, d in sorted((abs(s), d) for d, s in zip(shp, st) if d > 1):
            if s < extent:
                return False
            extent += (d - 1) * s
        return True


class ValueListLeaf(ContainerLeaf):
    """A Python list of N values (dicts for a struct, ...) vectorised over a parameter of their type: the values
    are packed per call into an array of the parameter's layout, read as a 1-D container of N elements."""

    def __init__(self, name, ptype, getter):
        super().__init__(name, ptype, getter, ptype, 1, 0, False, True)
        self.layout = ptype.layout
        self.temp = True

    def shape(self, v):
        return (len(v),)

    def pack(self, v, blk, call_shape, keep):
        stride = max(self.layout.size, 1)
        raw = lp.aligned_zeros(stride * max(len(v), 1))
        ctx = lp.PackContext("argument")
        for i, x in enumerate(v):
            lp.pack_value(raw, i * stride, self.layout, _plain(x), f"{self.name}[{i}]", ctx)
        if self.stage is not None:
            buf = self.stage.upload(raw)
            keep.append((self, v, buf, None))
            addr = buf.device_address
        else:
            keep.append((self, raw, None, None))
            addr = raw.ctypes.data
        self._pack_view(blk, self.u + "_", addr, (len(v),), (1,), 0, call_shape)


class TensorParamLeaf(Leaf):
    """A tensor bound to a tensor-typed parameter (Tensor<T,D>, ITensor<T,D>, IDiffTensor<T,D> ...): each thread
    gets a view of the last D dims (k = ndim - D)."""
    has_shape = True

    def __init__(self, name, ptype: S.TensorT, getter, concrete: str, ndim: int, is_numpy: bool, grads=(False, False)):
        super().__init__(name, ptype, getter)
        self.concrete = concrete      # e.g. "DiffTensor"
        self.D = ptype.dims
        self.ndim = ndim
        self.k = ndim - self.D
        self.is_numpy = is_numpy
        self.grad_in, self.grad_out = grads
        self.cd = 0
        self.writable = "w" in ptype.access

    def uniforms(self):
        out = []
        for p in self._parts():
            out += [(p + "d", self.elem(p) + "*"), (p + "o", "int"), (p + "sh", f"uint[{self.D}]"),
                    (p + "st", f"int[{self.D}]")]
            if self.cd:
                out.append((p + "cs", f"int[{self.cd}]"))
        if self.ptype.is_texture:        # mip levels reachable from the bound one, format code (textures.py)
            out += [(self.u + "_mips", "int"), (self.u + "_fmt", "int")]
        return out

    def call_stride_uniforms(self):
        return [p + "cs" for p in self._parts()] if self.cd else []

    def elem(self, p):
        if p.endswith("_g_"):
            return self.ptype.elem.derivative.name
        return self.ptype.elem.name

    def _parts(self):
        p = [self.u + "_"]
        if self.concrete in ("DiffTensor", "RWDiffTensor"):
            p.append(self.u + "_go_")
        if self.concrete in ("WDiffTensor", "RWDiffTensor"):
            p.append(self.u + "_gi_")
        return p

    def _view(self, kb, p, tname):
        var = kb.tmp()
        kb.line(f"{tname} {var};")
        kb.line(f"{var}._data = {p}d;")
        kb.line(f"{var}._shape = {p}sh;")
        kb.line(f"{var}._strides = {p}st;")
        kb.line(f"{var}._offset = {kb.offset(p, self.cd)};")
        return var

    def emit_load(self, kb):
        T, D = self.ptype.elem.name, self.D
        Td = (self.ptype.elem.derivative or self.ptype.elem).name
        c = self.concrete
        u = self.u
        if c in ("Tensor", "WTensor", "RWTensor", "AtomicTensor"):
            return self._view(kb, u + "_", f"{c}<{T}, {D}>")
        if self.ptype.is_texture:
            var = self._view(kb, u + "_", f"{c}<{T}>")
            kb.line(f"{var}._mips = {u}_mips;")
            kb.line(f"{var}._fmt = {u}_fmt;")
            return var
        prim_kind = "Tensor" if c in ("DiffTensor", "PrimalTensor") else "RWTensor"
        pv = self._view(kb, u + "_", f"{prim_kind}<{T}, {D}>")
        var = kb.tmp()
        kb.line(f"{c}<{T}, {D}> {var};")
        kb.line(f"{var}._primal = {pv};")
        if c in ("DiffTensor", "RWDiffTensor"):
            kb.line(f"{var}._grad_out = {self._view(kb, u + '_go_', f'AtomicTensor<{Td}, {D}>')};")
        if c in ("WDiffTensor", "RWDiffTensor"):
            kb.line(f"{var}._grad_in = {self._view(kb, u + '_gi_', f'Tensor<{Td}, {D}>')};")
        return var

    def emit_store(self, kb, expr):
        pass       # tensors are written through their own store()

    def shape(self, v):
        shp = v.shape if self.is_numpy else v._shape
        return tuple(shp[:self.k])

    def _pack_one(self, blk, p, addr, shp, st, off):
        o = self.offsets
        struct.pack_into("<Q", blk, o[p + "d"], addr)
        _I32.pack_into(blk, o[p + "o"], off)
        struct.pack_into(f"<{self.D}I", blk, o[p + "sh"], *shp[self.k:])
        struct.pack_into(f"<{self.D}i", blk, o[p + "st"], *st[self.k:])
        if self.cd:
            cs = [0] * self.cd
            for i in range(self.k):
                if shp[i] != 1:
                    cs[self.mapping[i]] += st[i]
            struct.pack_into(f"<{self.cd}i", blk, o[p + "cs"], *cs)

    temp = False             # the value is an array converted from the argument on every call (see Binder.bind)

    def pack(self, v, blk, call_shape, keep):
        if self.temp and self.stage is None:   # keep it alive until the launch returns (staged: copied)
            keep.append((self, v, None, None))
        if self.ptype.is_texture:
            mips, fmt = getattr(v, "_sj_tex_info", (1, 0))
            _I32.pack_into(blk, self.offsets[self.u + "_mips"], mips if self.k == 0 else 1)
            _I32.pack_into(blk, self.offsets[self.u + "_fmt"], fmt)
        if self.is_numpy and self.stage is not None:
            buf = self.stage.upload(v)
            self._pack_one(blk, self.u + "_", buf.device_address, v.shape, _contig(v.shape), 0)
            keep.append((self, v, buf, None))
            return
        if self.is_numpy:
            if not v.dtype.isnative:           # big-endian: read from a native copy (writes are refused at bind)
                v = lp.native(v)
                keep.append((self, v, None, None))
            isz = v.itemsize
            self._pack_one(blk, self.u + "_", v.ctypes.data, v.shape, tuple(s // isz for s in v.strides), 0)
            return
        self._pack_one(blk, self.u + "_", v.storage._addr, v._shape, v._strides, v.offset)
        parts = self._parts()
        for p, g in ((self.u + "_go_", v.grad_out), (self.u + "_gi_", v.grad_in)):
            if p not in parts:
                continue
            if g is None:        # forward call of a concrete Diff tensor without grads: a null gradient view
                self._pack_one(blk, p, 0, v._shape, (0,) * len(v._shape), 0)
            else:
                self._pack_one(blk, p, g.storage._addr, g._shape, g._strides, g.offset)


class RefLeaf(Leaf):
    grad_layout = None          # layout of the gradient (the Differential), set when the kernel is compiled

    """ValueRef / DiffPair / auto-allocated scalar result: a single element in a scratch buffer."""

    def __init__(self, name, ptype, getter, kind: str, writable=True):
        super().__init__(name, ptype, getter)
        self.kind = kind            # "ref", "pair", "result"
        self.writable = writable
        self.grad = False
        self.layout = None

    def has_grads(self):
        return self.kind == "pair"

    def uniforms(self):
        u = [(self.u + "_d", self.ptype.name + "*")]
        if self.kind == "pair":
            u.append((self.u + "_g", (self.ptype.derivative or self.ptype).name + "*"))
        return u

    def emit_load(self, kb):
        return f"{self.u}_d[0]"

    def emit_store(self, kb, expr):
        kb.line(f"{self.u}_d[0] = {expr};")

    def emit_grad_in(self, kb):
        if self.kind != "pair":
            return _zero_expr(self.ptype.derivative)
        return f"{self.u}_g[0]"

    def emit_grad_out(self, kb, expr, pre=None):
        if self.kind == "pair":
            kb.line(f"{self.u}_g[0] = {expr};")

    def _scratch(self, keep):
        return lp.aligned_zeros(max(self.ptype.size, 8))

    def pack(self, v, blk, call_shape, keep):
        mem = self._scratch(keep)
        keep.append((self, v, mem, None))
        init = v.value if self.kind == "ref" else (v.primal if self.kind == "pair" else None)
        if init is not None and not (self.kind == "pair" and _default_zero(init, self.ptype)):
            lp.pack_value(mem, 0, self.layout, _plain(init), self.name, lp.PackContext("argument"))
        st = self.stage
        if st is not None:
            mem = st.upload(mem)
            keep[-1] = (self, v, mem, None)
        struct.pack_into("<Q", blk, self.offsets[self.u + "_d"], mem.device_address if st else mem.ctypes.data)
        if self.kind == "pair":
            # the gradient has the Differential's layout (a struct's synthesized Differential differs)
            g = lp.aligned_zeros(max((self.ptype.derivative or self.ptype).size, 8))
            if v.grad is not None and not _default_zero(v.grad, self.ptype.derivative or self.ptype):
                lp.pack_value(g, 0, self.grad_layout, _plain(v.grad), self.name, lp.PackContext("argument"))
            if st is not None:
                g = st.upload(g)
            keep[-1] = (self, v, mem, g)
            struct.pack_into("<Q", blk, self.offsets[self.u + "_g"], g.device_address if st else g.ctypes.data)


def _default_zero(g, D: S.SType) -> bool:
    """A DiffPair's default gradient (a Python 0 / 0.0) for a non-scalar Differential: the zeroed buffer."""
    return isinstance(g, (int, float)) and not isinstance(g, bool) and g == 0 and not isinstance(D, S.ScalarT)


class StructLeaf(Leaf):
    """A dict bound to a struct (or vector) parameter: one child leaf per field (SOA)."""

    def __init__(self, name, ptype, getter, children: list):
        super().__init__(name, ptype, getter)
        self.children = children     # [(field, leaf)]
        self.writable = all(c.writable for _, c in children)

    def emit_load(self, kb):
        var = kb.tmp()
        kb.line(f"{self.ptype.name} {var};")
        for f, c in self.children:
            kb.line(f"{var}.{f} = {c.emit_load(kb)};")
        return var

    def emit_store(self, kb, expr):
        var = kb.tmp()
        kb.line(f"{self.ptype.name} {var} = {expr};")
        for f, c in self.children:
            c.emit_store(kb, f"{var}.{f}")

    # .bwds: each field's gradient goes to (comes from) the field of the Differential holding it
    def _diff_children(self):
        D = self.ptype.derivative
        if D is None:
            return None, []
        out = []
        for f, c in self.children:
            if isinstance(self.ptype, S.VectorT):
                df = f
            elif isinstance(self.ptype, S.StructT):
                df = diff_field_name(self.ptype.ct, f)
            else:
                df = None
            if df is not None:
                out.append((df, c))
        return D, out

    def has_grads(self):
        return any(c.has_grads() for _, c in self.children)

    def emit_grad_in(self, kb):
        D, kids = self._diff_children()
        if D is None:
            return _zero_expr(self.ptype.derivative)
        var = kb.tmp()
        kb.line(f"{D.name} {var} = {_zero_expr(D)};")
        for df, c in kids:
            if c.has_grads():
                kb.line(f"{var}.{df} = {c.emit_grad_in(kb)};")
        return var

    def emit_grad_prefetch(self, kb):
        _, kids = self._diff_children()
        return [(df, c, c.emit_grad_prefetch(kb)) for df, c in kids]

    def emit_grad_out(self, kb, expr, pre=None):
        if pre is None:
            pre = self.emit_grad_prefetch(kb)
        for df, c, cpre in pre:
            c.emit_grad_out(kb, f"{expr}.{df}", cpre)
