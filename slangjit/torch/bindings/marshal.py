"""Torch tensors and Python values into a bound kernel's parameter block.

A parameter's layout (from the compiled entry point's reflection) says what it is: `TensorView<T>`,
one of the differentiable views (`DiffTensorView<T>`, `...AA<T>`, `...R<T, N>`, `...ASR<T, N>`), or a
plain value (scalar, vector, matrix, array, struct) packed by the runtime's layout packer.  Tensors are
passed by address with their strides (no copy, no contiguity requirement); a tensor is checked for its
dtype (exact, no implicit cast), its device, at most 8 dimensions, and stride 0 where the kernel may
write (broadcast inputs are readable)."""
from __future__ import annotations

import struct
from collections import namedtuple

from ...runtime import layout_pack as _lp

MAXD = 8
_TV = struct.Struct("<Q8q8III")        # _data, _strides[8], _sizes[8], _dims, _elsize
_NULL_TV = _TV.pack(0, *([0] * MAXD), *([0] * MAXD), 0, 0)

# slang-torch's (primal, grad) pair; grad defaults to None
DiffTensorView = namedtuple("DiffTensorView", ["value", "grad"], defaults=[None])

_SCALAR_TORCH = {"float32": "float32", "float64": "float64", "float16": "float16", "int32": "int32",
                 "uint32": "uint32", "int64": "int64", "uint64": "uint64", "int16": "int16", "uint16": "uint16",
                 "int8": "int8", "uint8": "uint8", "bool": "bool"}

VIEW_KINDS = ("TensorView", "DiffTensorView", "DiffTensorViewAA", "DiffTensorViewR", "DiffTensorViewASR")


def view_kind(layout) -> str:
    """'TensorView', 'DiffTensorView', 'DiffTensorViewAA', 'DiffTensorViewR', 'DiffTensorViewASR' or ''."""
    if layout.kind != "struct":
        return ""
    base = layout.name.split("<", 1)[0]
    return base if base in VIEW_KINDS else ""


def generic_n(layout) -> int:
    """N of DiffTensorViewR<T, N> / DiffTensorViewASR<T, N>."""
    return int(layout.name.rsplit(",", 1)[1].rstrip(">").strip())


class ElemInfo:
    """The element type of a TensorView field: torch dtype name and vector width (0 for a scalar)."""
    __slots__ = ("dtype", "width", "size", "name", "tdtype")

    def __init__(self, tv_layout):
        el = next(f for f in tv_layout.fields if f.name == "_data").layout.element
        if el.kind == "scalar":
            self.width = 0
            scalar = el.scalar
        elif el.kind == "vector":
            self.width = el.count
            scalar = el.scalar
        else:
            raise TypeError(f"TensorView of {el.name} is not supported (scalars and vectors only)")
        if scalar not in _SCALAR_TORCH:
            raise TypeError(f"TensorView of {el.name} has no torch dtype")
        self.dtype = _SCALAR_TORCH[scalar]
        self.tdtype = getattr(_torch(), self.dtype, None)     # the torch.dtype (a singleton) when torch has it
        self.size = el.size
        self.name = el.name


def device_name(devno: int) -> str:
    """A device number as torch spells the device: -1 is the CPU (torch's Tensor.get_device())."""
    return "cpu" if devno < 0 else f"cuda:{devno}"


# The packed TensorView for each dimension count: pad bytes ("x") are zero, so one pack_into writes the
# whole view (data pointer, strides, sizes, dims, element size) straight into the parameter block.
_TV_ND = [struct.Struct(f"<Q{nd}q{8 * (MAXD - nd)}x{nd}I{4 * (MAXD - nd)}xII") for nd in range(MAXD + 1)]
assert all(s.size == _TV.size for s in _TV_ND)


def view_into(block, offset: int, t, name: str, elem: ElemInfo, devno: int, writable: bool) -> None:
    """Pack the TensorView of tensor `t` (argument `name`) into `block` at `offset`.  `devno` is the launch's
    device as torch's get_device() numbers it (-1: the CPU)."""
    torch = _torch_mod or _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"argument '{name}': expected a torch.Tensor ({elem.name} elements), got "
                        f"{type(t).__name__}")
    if t.get_device() != devno or not (t.is_cuda if devno >= 0 else t.is_cpu):
        raise ValueError(f"argument '{name}': tensor is on {t.device}, but this launch runs on "
                         f"{device_name(devno)} (all tensors of a launch must be on one device; no implicit "
                         "transfer)")
    if t.dtype is not elem.tdtype and str(t.dtype)[6:] != elem.dtype:
        dt = str(t.dtype)[6:]
        raise TypeError(f"argument '{name}': expected a torch.{elem.dtype} tensor for {elem.name} elements, "
                        f"got torch.{dt} (no implicit cast; use .to(torch.{elem.dtype}))")
    shape = t.shape
    strides = t.stride()
    if elem.width:
        if len(shape) == 0 or shape[-1] != elem.width or (strides[-1] != 1 and shape[-1] > 1):
            raise ValueError(f"argument '{name}': {elem.name} elements need a last dimension of {elem.width} with "
                             f"stride 1, got shape {tuple(shape)} strides {tuple(strides)}")
        shape = shape[:-1]
        strides = strides[:-1]
        if any(s % elem.width for s in strides):
            raise ValueError(f"argument '{name}': strides {tuple(t.stride())} are not whole {elem.name} elements")
        strides = [s // elem.width for s in strides]
    nd = len(shape)
    if nd > MAXD:
        raise ValueError(f"argument '{name}': {nd} dimensions, at most {MAXD} are supported")
    if writable and 0 in strides:
        for d in range(nd):
            if strides[d] == 0 and shape[d] > 1:
                raise ValueError(f"argument '{name}': a broadcast tensor (stride 0 in dimension {d}) cannot be "
                                 "written by the kernel; pass .contiguous() (broadcast tensors are accepted "
                                 "where the kernel only reads)")
    if nd and max(shape) >= 1 << 32:
        raise ValueError(f"argument '{name}': dimension of {max(shape)} elements exceeds 2^32 - 1")
    _TV_ND[nd].pack_into(block, offset, 0 if 0 in shape else t.data_ptr(), *strides, *shape, nd, elem.size)


def shape_view_bytes(shape, elem: ElemInfo) -> bytes:
    """A view of no memory whose offsets are the contiguous (row-major) element indices of `shape`."""
    nd = len(shape)
    strides, s = [], 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    strides.reverse()
    pad = MAXD - nd
    return _TV.pack(0, *strides, *([0] * pad), *shape, *([0] * pad), nd, elem.size)


def split_pair(value, name: str):
    """(primal, grad) from slang-torch's accepted forms: DiffTensorView(value=, grad=), (p, g), (p,), p."""
    if isinstance(value, DiffTensorView):
        return value.value, value.grad
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        if len(value) == 2:
            return value[0], value[1]
        if len(value) == 1:
            return value[0], None
        raise TypeError(f"argument '{name}': expected a tensor, a (primal, grad) pair, a 1-tuple or "
                        f"DiffTensorView(value=, grad=), got a {len(value)}-tuple")
    return value, None


def struct_dict(value, layout, name: str, structs: dict):
    """A struct argument as the dict the layout packer takes: from the module's namedtuple, a dict or a
    positional tuple; nested structs recursively.  Wrong field names or arity raise TypeError."""
    names = [f.name for f in layout.fields]
    if hasattr(value, "_asdict"):
        if list(value._fields) != names:
            raise TypeError(f"argument '{name}': expected {layout.name}({', '.join(names)}), got "
                            f"{type(value).__name__}({', '.join(value._fields)})")
        d = value._asdict()
    elif isinstance(value, dict):
        extra = [k for k in value if k not in names]
        missing = [k for k in names if k not in value]
        if extra or missing:
            raise TypeError(f"argument '{name}': {layout.name} has fields ({', '.join(names)})"
                            + (f"; unknown: {', '.join(map(str, extra))}" if extra else "")
                            + (f"; missing: {', '.join(missing)}" if missing else ""))
        d = dict(value)
    elif isinstance(value, (tuple, list)):
        if len(value) != len(names):
            raise TypeError(f"argument '{name}': {layout.name} has {len(names)} fields ({', '.join(names)}), "
                            f"got {len(value)} values")
        d = dict(zip(names, value))
    else:
        raise TypeError(f"argument '{name}': expected {layout.name} as m.{layout.name}(...), a dict or a tuple, "
                        f"got {type(value).__name__}")
    for f in layout.fields:
        if f.layout.kind == "struct" and not view_kind(f.layout) and not contains_view(f.layout):
            d[f.name] = struct_dict(d[f.name], f.layout, f"{name}.{f.name}", structs)
    return d


def contains_view(layout) -> bool:
    if view_kind(layout):
        return True
    if layout.kind == "struct":
        return any(contains_view(f.layout) for f in layout.fields)
    if layout.kind == "array" and layout.element is not None:
        return contains_view(layout.element)
    return False


def pack_plain(block, offset: int, layout, value, name: str, structs: dict, devno: int = -1,
               writable=True) -> None:
    """A value parameter; struct fields that are TensorViews take tensors (slang-torch's struct-of-tensors)."""
    vk = view_kind(layout)
    if vk == "TensorView":
        view_into(block, offset, value, name, ElemInfo(layout), devno, writable)
        return
    if vk:
        raise TypeError(f"argument '{name}': {layout.name} inside a struct or array is not supported "
                        "(pass differentiable views as kernel parameters)")
    if layout.kind == "struct" and contains_view(layout):
        d = struct_dict(value, layout, name, structs)
        for f in layout.fields:
            pack_plain(block, offset + f.offset, f.layout, d[f.name], f"{name}.{f.name}", structs, devno, writable)
        return
    if layout.kind == "array" and contains_view(layout):
        items = list(value) if isinstance(value, (list, tuple)) else None
        if items is None or len(items) != layout.count:
            raise TypeError(f"argument '{name}': expected {layout.count} values for {layout.name}")
        stride = layout.size // max(layout.count, 1)
        for i, v in enumerate(items):
            pack_plain(block, offset + i * stride, layout.element, v, f"{name}[{i}]", structs, devno, writable)
        return
    if layout.kind == "struct":
        value = struct_dict(value, layout, name, structs)
    if _torch_mod is not None and isinstance(value, _torch_mod.Tensor):
        raise TypeError(f"argument '{name}': parameter of type {layout.name} takes a value, not a tensor")
    ctx = _lp.PackContext("argument")
    _lp.pack_value(block, offset, layout, value, name, ctx)


def struct_types(layout, out: dict) -> None:
    """Every struct type a plain parameter uses, as namedtuple classes (slang-torch's m.Foo)."""
    if layout.kind == "struct" and not view_kind(layout):
        nm = layout.name
        if nm.isidentifier() and nm not in out:
            out[nm] = namedtuple(nm, [f.name for f in layout.fields])
        for f in layout.fields:
            struct_types(f.layout, out)
    elif layout.kind == "array" and layout.element is not None:
        struct_types(layout.element, out)


_torch_mod = None


def _torch():
    global _torch_mod
    if _torch_mod is None:
        import torch  # reason: torch is optional; imported on the first launch only
        _torch_mod = torch
    return _torch_mod
