"""The per-signature fast plan of a functional call: a closure, made once
per `CallData` (binding.py) when its signature allows it, that runs a call with only what the arguments
change — their values, the call shape, the result — and nothing that the signature fixes.

What it does per call: picks the argument values, computes the call shape (the same checks and messages as
`CallData._call_shape`), allocates the result (always a fresh tensor), packs scalars with one prebuilt
`struct.Struct.pack_into` each and 1-D tensors' address / offset / stride directly into a parameter block
taken from the plan's own free list, and calls the launcher through a prototype-less ctypes function
pointer with prebuilt pointer arguments.  A call of 4 groups or more, or one the unit-stride / linear
variants may take, goes through `CallData.dispatch_block` as before; a scalar that does not fit its format
is packed by the leaf's general path, which names the argument in its error.

On a GPU (CUDA) or staged device the plan packs the same way and launches through `dispatch_block`.
Signatures it does not take (and that keep `CallData.run`): `.set` globals, call groups, `_thread_count`,
IThis instances, numpy / list / dict / reference arguments, `out` values returned by reference, several
arguments accumulating into one gradient."""
from __future__ import annotations

import ctypes
import struct
from typing import Callable, Optional

from ..runtime.kernel_errors import ErrorRecord, raise_if_failed, sites_lookup
from ..tensor import Tensor
from .leaves import ContainerLeaf, ValueLeaf

_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_VP = ctypes.c_void_p
_SMALL_GROUPS = 4          # fewer groups run on the calling thread (runtime/cpu_pool.py's pools do the same)


class _Frame:
    """A parameter block with its error record and the pointer arguments of the launcher call, reused by the
    calls of one signature (one frame per call in flight: a frame is taken from the free list for the call and
    given back after it)."""
    __slots__ = ("blk", "rec", "p_blk", "p_rec")

    def __init__(self, psize: int):
        self.blk = ctypes.create_string_buffer(psize)
        self.rec = ErrorRecord()
        self.p_blk = _VP(ctypes.addressof(self.blk))
        self.p_rec = _VP(ctypes.addressof(self.rec))


def _raw_entry(kernel, fn):
    """The entry's launcher as a function pointer without a prototype (argtypes None): called with ctypes
    pointer objects and small Python ints (the uint32 group range), it converts nothing (the prototyped `fn`
    converts six arguments per call, 0.2-0.3 us)."""
    raw = kernel.library.lib[kernel.entry.symbol]      # a new function pointer object each time
    if ctypes.cast(raw, _VP).value != ctypes.cast(fn, _VP).value:
        return None
    return raw


def build_fast_plan(cd, unit_min: int) -> Optional[Callable]:
    """The fast call of CallData `cd`, or None when its signature needs the general `run`."""
    node = cd.node
    if (cd.groups is not None or cd.tc_mode or cd.instance_leaves or node.sets or len(cd.go_leaves) > 1
            or cd.post_leaves or cd.auto_result not in (None, "tensor")):
        return None
    auto_leaf = cd.result.leaf if cd.auto_result == "tensor" else None
    scalars, tensors1, others = [], [], []
    for lf in cd.leaves:
        if lf is auto_leaf:
            continue
        t = type(lf)
        if t is ValueLeaf and lf.fmt is not None:
            scalars.append((lf.get, lf.fmt.pack_into, lf.off, lf))
        elif t is ContainerLeaf and not lf.is_numpy and not lf.temp:
            if lf.fast1 and not (lf.grad_in or lf.grad_out):
                tensors1.append((lf.get,) + tuple(lf.fast1))
            else:
                others.append(lf)
        else:
            return None
    kernel, fn, launch = cd._kern
    # A CPU device with host memory runs a small call itself; a GPU (or staged) device, an unrolled kernel,
    # launch through CallData.dispatch_block (the packed block is copied at the launch: reusable at once)
    direct = cd.stage is None and launch is None and cd.off_u is None
    if auto_leaf is not None:                    # the result: one of the tensors the kernel writes
        if auto_leaf.fast1:
            auto_pack = auto_leaf.fast1
        else:
            others.append(auto_leaf)
            auto_pack = None
    raw = _raw_entry(kernel, fn) if direct else None
    direct = raw is not None
    srcs = tuple(cd._srcs)
    has_res = cd.result is not None
    res_pos = cd.result_from_pos
    auto = auto_leaf is not None
    device = cd.device
    ret_t = cd.ret_t
    ret_size = (ret_t.size or 1) if auto else 0
    fill = not cd.fills_result
    psize = cd.psize
    off_n, off_cs, cs_fmt = cd.off_n, cd.off_cs, struct.Struct(cd._cs_fmt) if cd.cd else None
    nt = cd.nt
    call_shape = cd._call_shape
    # A 1-D call over 1-D tensors only: the call shape is their common extent (any other: the general
    # computation, which also gives the error message of a mismatch)
    shape_gets = tuple(lf.get for lf in cd.shape_leaves) if (
        cd.cd == 1 and not cd.elem_leaves and all(type(lf) is ContainerLeaf and lf.fast1 for lf in cd.shape_leaves)) \
        else None
    frames: list = []
    gcs = {g: (ctypes.c_uint32 * 3)(g, 1, 1) for g in range(1, _SMALL_GROUPS)}
    p_gc = {g: _VP(ctypes.addressof(a)) for g, a in gcs.items()}
    p_zero_g = _VP(cd._zero_g)
    cd._fast_memory = (gcs, cd._zero_g_arr)        # what the pointers above point into, alive with the plan
    alloc = Tensor._alloc
    convert = node._convert_return if node.return_type_mode is not None else None
    bwds = cd.bwds
    name = cd.name
    keep: list = []                      # the leaves on this path keep nothing alive (checked after packing)

    def slow_pack(blk, vals, n, cs, out):
        _I32.pack_into(blk, off_n, n)
        if cs_fmt is not None:
            cs_fmt.pack_into(blk, off_cs, *cs)
        for get, pack_into, off, lf in scalars:
            v = get(vals)
            try:
                pack_into(blk, off, v)
            except (struct.error, OverflowError):      # the leaf's general path names what is wrong
                lf.pack(v, blk, cs, keep)
        for get, o_d, o_o, o_cs in tensors1:
            v = get(vals)
            _U64.pack_into(blk, o_d, v.storage._addr)
            _I32.pack_into(blk, o_o, v.offset)
            _I32.pack_into(blk, o_cs, v._strides[0] if v._shape[0] != 1 else 0)
        if auto and auto_pack is not None:
            o_d, o_o, o_cs = auto_pack
            _U64.pack_into(blk, o_d, out.storage._addr)
            _I32.pack_into(blk, o_o, 0)
            _I32.pack_into(blk, o_cs, 1 if cs[0] != 1 else 0)

    packer = _one_struct_packer(off_n, off_cs, cd.cd, scalars, tensors1, auto_pack if auto else None)
    cd._fast_pack_format = packer.__defaults__[0].format if packer is not None else None     # (tests)
    packer = packer or slow_pack

    def fast(args: tuple, kwargs: dict):
        vals = [args[i] if pos else kwargs[i] for pos, i in srcs]
        res_v = None
        if has_res:
            res_v = args[-1] if res_pos else kwargs.get("_result")
            vals.append(res_v)
        if shape_gets is not None:
            n = 1
            for get in shape_gets:
                m = get(vals)._shape[0]
                if m != n and m != 1:
                    if n != 1:
                        call_shape(vals)         # raises the mismatch
                    n = m
            cs = (n,)
        else:
            cs = call_shape(vals)
            n = 1
            for c in cs:
                n *= c
        cd.last_call_shape = tuple(cs)
        out = None
        if auto:
            out = alloc(device, ret_t, tuple(cs), fill, ret_size)
            vals[-1] = out
        try:
            fr = frames.pop()
        except IndexError:
            fr = _Frame(psize)
        blk = fr.blk
        try:
            packer(blk, vals, n, cs, out)
        except (struct.error, OverflowError):          # the per-field path: a scalar's leaf names what is wrong
            slow_pack(blk, vals, n, cs, out)
        for lf in others:
            lf.pack(lf.get(vals), blk, cs, keep)
        if keep:                                    # not expected: never let memory go while a kernel runs
            keep.clear()
            frames.append(fr)
            return cd.run(args, kwargs)
        groups = -(-n // nt)
        if not direct or groups >= _SMALL_GROUPS or n >= unit_min or cd.lin_slots is not None:
            try:
                cd.dispatch_block(node, blk, cs, n)
            finally:
                frames.append(fr)
        elif groups > 0:
            cd.last_unit = False
            rec = fr.rec
            raw(p_zero_g, fr.p_blk, p_gc[groups], 0, groups, fr.p_rec)
            if rec.code:                           # the frame's record holds the failure: it is not reused
                raise_if_failed(rec, sites_lookup(kernel.compiled.reflection.error_sites), name)
            frames.append(fr)
        else:
            frames.append(fr)
        if bwds or not has_res:
            return None
        ret = out if auto else res_v
        return convert(ret, cd) if convert is not None else ret

    return fast



def _one_struct_packer(off_n: int, off_cs: Optional[int], cdim: int, scalars: list, tensors1: list, auto_pack):
    """`pack(blk, vals, n, cs, out)` writing what slow_pack writes with ONE `struct.Struct.pack_into` (fields in
    offset order, padding between them): a Python function generated from the fields' offsets and format
    codes (no user text reaches it).  None when fields would overlap (never for a kernel's parameter block)."""
    fields = [(off_n, "i", "n")]
    if off_cs is not None:
        fields += [(off_cs + 4 * c, "i", f"cs[{c}]") for c in range(cdim)]
    ns: dict = {}
    lines = []
    for k, (get, _, off, lf) in enumerate(scalars):
        ns[f"s{k}"] = get
        fields.append((off, lf.fmt.format.lstrip("<"), f"s{k}(vals)"))
    for k, (get, o_d, o_o, o_cs) in enumerate(tensors1):
        ns[f"g{k}"] = get
        lines.append(f"    t{k} = g{k}(vals)")
        fields += [(o_d, "Q", f"t{k}.storage._addr"), (o_o, "i", f"t{k}.offset"),
                   (o_cs, "i", f"(t{k}._strides[0] if t{k}._shape[0] != 1 else 0)")]
    if auto_pack is not None:
        o_d, o_o, o_cs = auto_pack
        fields += [(o_d, "Q", "out.storage._addr"), (o_o, "i", "0"), (o_cs, "i", "(1 if n != 1 else 0)")]
    fields.sort(key=lambda f: f[0])
    fmt, pos, exprs = "<", fields[0][0], []
    for off, code, expr in fields:
        if off < pos:
            return None
        if off > pos:
            fmt += f"{off - pos}x"
        fmt += code
        pos = off + struct.calcsize("<" + code)
        exprs.append(expr)
    ns["_S"] = struct.Struct(fmt)
    src = ("def pack(blk, vals, n, cs, out, _S=_S):\n" + "\n".join(lines) + ("\n" if lines else "") +
           f"    _S.pack_into(blk, {fields[0][0]}, {', '.join(exprs)})\n")
    exec(compile(src, "<slangjit fast call packer>", "exec"), ns)   # noqa: S102  (offsets and format codes only)
    return ns["pack"]
