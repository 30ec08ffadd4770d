"""The leaves of a call: how each argument (value, container, tensor, reference, generator, struct) is
declared in the generated kernel, loaded/stored at the call index and packed into the uniforms; and the
KernelBuilder that assembles the kernel text.  See calldata.py for the overall model."""
from __future__ import annotations

import struct
from typing import Optional

import numpy as np

from ..runtime import layout_pack as lp
from . import typeview as S
from . import values as V
from .errors import KernelGenException, ShapeMismatchError
from .generators import Generator

from .calldata import Staging, _I32, _U64, _contig, _idx_paths, _zero_expr


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


def _np_view(blk):
    return blk if isinstance(blk, np.ndarray) else np.frombuffer(blk, dtype=np.uint8)


def _plain(v):
    if isinstance(v, (V.VectorValue,)):
        return list(v)
    if isinstance(v, V.MatrixValue):
        return v.to_numpy()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if k != "_type"}
    return v


_FAST_FMT = {"float": "f", "double": "d", "int": "i", "uint": "I", "bool": "?", "int64_t": "q", "uint64_t": "Q",
             "int16_t": "h", "uint16_t": "H", "int8_t": "b", "uint8_t": "B", "half": "e"}


def _elem_shape_message(name: str, P: S.SType, shp, ne: int) -> str:
    want = tuple(P.shape)
    got = tuple(shp[len(shp) - ne:]) if len(shp) >= ne else tuple(shp)
    if ne == 1:
        return (f"argument '{name}': expected last dimension {want[0]} ({P.name}), got {got[-1] if got else 0} "
                f"(array shape {tuple(shp)})")
    return f"argument '{name}': expected last {ne} dimensions {want} ({P.name}), got {got} (array shape {tuple(shp)})"


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
        kb.line(f"int {var}_o = {off};")
        kb.line(f"{t.name} {var};")
        for path in _idx_paths(t.shape):
            e = " + ".join([f"{var}_o"] + [f"{i} * {p}es[{j}]" for j, i in enumerate(path)])
            kb.line(f"{var}{''.join(f'[{i}]' for i in path)} = {p}d[{e}];")
        return var

    def emit_load(self, kb):
        return self._load_from(kb, self.u + "_", self.ptype)

    def emit_store(self, kb, expr):
        p = self.u + "_"
        off = kb.offset(p, self.cd)
        if not self.ne:
            kb.line(f"{p}d[{off}] = {expr};")
            return
        var = kb.tmp()
        kb.line(f"int {var}_o = {off};")
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
        # plain read-modify-write accumulates; else an atomic add (warp-aggregated on CUDA).  The read of the
        # old value happens in the load phase, with the thread's other reads, so that the elements a thread
        # handles keep their loads in flight together (the store comes after the call).
        p = self.u + "_go"
        D = self.ptype.derivative
        var = kb.tmp()
        kb.line(f"int {var}_o = {kb.offset(p, self.cd)};")
        kb.line(f"{D.name} {var}_prev = {_zero_expr(D)};")
        if not self.ne:
            kb.line(f"if ({p}a == 0) {var}_prev = {p}d[{var}_o];")
            return var
        kb.line(f"if ({p}a == 0) {{")
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
            kb.line(f"if ({p}a != 0) {{")
            for path in _float_paths(D):
                kb.line(f"    InterlockedAdd((*({p}d + {var}_o)){path}, {var}{path});")
            kb.line(f"}} else {p}d[{var}_o] = {self.ptype.name}.dadd({var}_prev, {var});")
            return
        if not self.ne:
            kb.line(f"if ({p}a != 0) _sj_atomic_add({p}d + {var}_o, {var}); "
                    f"else {p}d[{var}_o] = {var}_prev + {var};")
            return
        kb.line(f"if ({p}a != 0) {{")
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

    def pack(self, v, blk, call_shape, keep):
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
            distinct = not self.shared_grads and self._distinct_per_thread(g._shape, g._strides, call_shape)
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

    def pack(self, v, blk, call_shape, keep):
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
        if init is not None:
            lp.pack_value(mem, 0, self.layout, _plain(init), self.name, lp.PackContext("argument"))
        st = self.stage
        if st is not None:
            mem = st.upload(mem)
            keep[-1] = (self, v, mem, None)
        struct.pack_into("<Q", blk, self.offsets[self.u + "_d"], mem.device_address if st else mem.ctypes.data)
        if self.kind == "pair":
            # the gradient has the Differential's layout (a struct's synthesized Differential differs)
            g = lp.aligned_zeros(max((self.ptype.derivative or self.ptype).size, 8))
            if v.grad is not None:
                lp.pack_value(g, 0, self.grad_layout, _plain(v.grad), self.name, lp.PackContext("argument"))
            if st is not None:
                g = st.upload(g)
            keep[-1] = (self, v, mem, g)
            struct.pack_into("<Q", blk, self.offsets[self.u + "_g"], g.device_address if st else g.ctypes.data)


class GeneratorLeaf(Leaf):
    def __init__(self, name, ptype, getter, gen: Generator, cd_hint=None):
        super().__init__(name, ptype, getter)
        self.gen = gen
        self.kind = gen.kind
        if self.kind == "grid":
            self.k = gen.dims
            self.has_shape = True
        elif self.kind == "call_id":
            self.k = -1
        self.cd = 0

    def uniforms(self):
        if self.kind == "grid":
            return [(self.u + "_off", f"int[{self.k}]"), (self.u + "_st", f"int[{self.k}]")]
        if self.kind in ("wang_hash", "rand_float"):
            u = [(self.u + "_seed", "uint"), (self.u + "_w", "int")]
            if self.kind == "rand_float":
                u += [(self.u + "_lo", "float"), (self.u + "_hi", "float")]
            return u
        return []

    def _deliver(self, comps: list, order_array: bool) -> str:
        """Deliver a list of int expressions (array order) to the parameter type."""
        P = self.ptype
        if isinstance(P, S.ScalarT):
            return f"{P.name}({comps[-1]})" if comps else f"{P.name}(0)"
        if isinstance(P, S.VectorT):
            n = P.n
            rev = list(reversed(comps))[:n]
            rev += ["0"] * (n - len(rev))
            return f"{P.name}({', '.join(f'{P.elem.name}({c})' for c in rev)})"
        if isinstance(P, S.ArrayT):
            n = P.n
            cs = comps[-n:] if len(comps) >= n else ["0"] * (n - len(comps)) + comps
            return "{" + ", ".join(f"{P.elem.name}({c})" for c in cs) + "}"
        raise ValueError(f"Could not find suitable conversion from {self._gname()} to {P.name}")

    def _gname(self):
        if self.kind == "grid":
            return f"GridArg<{self.k}>"
        return {"call_id": "CallIdArg", "thread_id": "ThreadIdArg", "wang_hash": "WangHashArg",
                "rand_float": "RandFloatArg"}[self.kind]

    def emit_load(self, kb):
        P = self.ptype
        if self.kind == "call_id":
            return self._materialize(kb, self._deliver([kb.cid(c) for c in range(kb.cd)], True))
        if self.kind == "grid":
            comps = [f"({self.u}_off[{i}] + {kb.cid(self.mapping[i])} * {self.u}_st[{i}])" for i in range(self.k)]
            return self._materialize(kb, self._deliver(comps, True))
        if self.kind == "thread_id":
            tid = kb.tid or kb.flat             # the dispatch thread (differs from the call index in call groups)
            if isinstance(P, S.ScalarT):
                return f"{P.name}({tid})"
            if isinstance(P, S.VectorT):
                comps = [tid] + ["0"] * (P.n - 1)
                return f"{P.name}({', '.join(f'{P.elem.name}({c})' for c in comps)})"
            raise ValueError(f"Could not find suitable conversion from ThreadIdArg to {P.name}")
        if self.kind == "wang_hash":
            if isinstance(P, S.ScalarT):
                return f"{P.name}(_sj_wang_hash_scalar(uint({kb.flat}), {self.u}_seed, {self.u}_w))"
            return f"{P.name}(_sj_wang_hash_vec<{P.n}>(uint({kb.flat}), {self.u}_seed, {self.u}_w))"
        if self.kind == "rand_float":
            lo, hi = self.u + "_lo", self.u + "_hi"
            if isinstance(P, S.ScalarT):
                return (f"{P.name}(_sj_hash_to_float(_sj_wang_hash_scalar(uint({kb.flat}), {self.u}_seed, "
                        f"{self.u}_w), {lo}, {hi}))")
            var = kb.tmp()
            kb.line(f"vector<uint, {P.n}> {var}_h = _sj_wang_hash_vec<{P.n}>(uint({kb.flat}), {self.u}_seed, {self.u}_w);")
            kb.line(f"{P.name} {var};")
            for i in range(P.n):
                kb.line(f"{var}[{i}] = _sj_hash_to_float({var}_h[{i}], {lo}, {hi});")
            return var
        raise ValueError(f"unknown generator {self.kind}")

    def _materialize(self, kb, expr):
        if expr.startswith("{"):
            var = kb.tmp()
            kb.line(f"{self.ptype.name} {var} = {expr};")
            return var
        return expr

    def shape(self, v):
        if self.kind == "grid":
            return tuple(v.shape)
        return ()

    def pack(self, v, blk, call_shape, keep):
        o = self.offsets
        if self.kind == "grid":
            struct.pack_into(f"<{self.k}i", blk, o[self.u + "_off"], *v.offset)
            struct.pack_into(f"<{self.k}i", blk, o[self.u + "_st"], *v.stride)
        elif self.kind in ("wang_hash", "rand_float"):
            struct.pack_into("<I", blk, o[self.u + "_seed"], v.seed)
            _I32.pack_into(blk, o[self.u + "_w"], v.warmup)
            if self.kind == "rand_float":
                struct.pack_into("<f", blk, o[self.u + "_lo"], v.min)
                struct.pack_into("<f", blk, o[self.u + "_hi"], v.max)


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
            if not getattr(c, "drop_writes", False):     # a plain value: the kernel's write is dropped
                c.emit_store(kb, f"{var}.{f}")


# ----------------------------------------------------------------------------------------- kernel builder


class KernelBuilder:
    """Writes the per-element code of a generated kernel.

    A thread handles `unroll` call elements (see CallData._codegen).  Each element is written in two parts: the
    load phase (every read of an argument, into locals) and the body (the call, then the stores).  The kernel
    puts the load phases of all its elements before the first body, so a thread's reads are in flight together
    (a store could alias a later read, so the compiler may not hoist reads over it on its own).  Names local to
    an element end with its suffix (`kb.name`, `kb.flat`, `kb.cid`; `kb.tmp` names are unique anyway).

    In the `linear` variant every strided view is addressed as `_o + flat * _cs[cd - 1]` (the host packs the one
    linear stride there when each view's call strides are a multiple of the call shape's row-major strides)
    instead of splitting the flat index into per-dimension indices."""

    def __init__(self, cd: int, linear: bool = False):
        self.cd = cd
        self.linear = linear
        self.lines: list[str] = []
        self._n = 0
        self.indent = "    "
        self.sfx = ""
        self._has_cid = False
        self.load_lines: list[str] = []
        self.body_lines: list[str] = []
        self.tid = None                 # the thread index, where it is not the flat call index

    def tmp(self) -> str:
        self._n += 1
        return f"_t{self._n}"

    def line(self, s: str):
        self.lines.append(self.indent + s)

    # -- elements

    def start_element(self, sfx: str):
        self.sfx = sfx
        self._has_cid = False
        self.load_lines, self.body_lines = [], []
        self.lines = self.load_lines

    def start_body(self):
        self.lines = self.body_lines

    def name(self, base: str) -> str:
        return base + self.sfx

    @property
    def flat(self) -> str:
        """The element's flat call index (row-major over the call shape)."""
        return f"_sj_flat{self.sfx}"

    def cid(self, c: int) -> str:
        """The element's index along call dimension c (split from the flat index on first use)."""
        if self.cd == 1:
            return self.flat
        cid = f"_sj_cid{self.sfx}"
        if not self._has_cid:
            self._has_cid = True
            self.line(f"int {cid}[{self.cd}];")
            self.line(f"int _sj_rem{self.sfx} = {self.flat};")
            for c2 in reversed(range(self.cd)):
                self.line(f"{cid}[{c2}] = _sj_rem{self.sfx} % _sj_cs[{c2}];")
                if c2:
                    self.line(f"_sj_rem{self.sfx} = _sj_rem{self.sfx} / _sj_cs[{c2}];")
        return f"{cid}[{c}]"

    def offset(self, p: str, cd: int) -> str:
        """Element offset of a strided view with uniforms `{p}o` and `{p}cs[cd]` (cd = the call's dims)."""
        if not cd:
            return f"{p}o"
        if self.linear or cd == 1:
            return f"{p}o + {self.flat} * {p}cs[{cd - 1}]"
        return f"{p}o" + "".join(f" + {self.cid(c)} * {p}cs[{c}]" for c in range(cd))


def _float_paths(t: S.SType, prefix: str = "") -> list:
    """Access paths (".a.b[1].x") of every floating-point scalar inside a differential type."""
    if isinstance(t, S.ScalarT):
        return [prefix] if t.skind == "f" else []
    if isinstance(t, S.VectorT):
        return [f"{prefix}.{c}" for c in "xyzw"[:t.n]] if t.elem.skind == "f" else []
    if isinstance(t, S.MatrixT):
        return [f"{prefix}[{r}].{c}" for r in range(t.rows) for c in "xyzw"[:t.cols]] if t.elem.skind == "f" else []
    if isinstance(t, S.ArrayT):
        return [q for i in range(t.n) for q in _float_paths(t.elem, f"{prefix}[{i}]")]
    if isinstance(t, S.StructT):
        return [q for n, ft in t.field_list() for q in _float_paths(ft, f"{prefix}.{n}")]
    raise KernelGenException(f"Exception in kernel generation: cannot accumulate a gradient of type {t.name}")
