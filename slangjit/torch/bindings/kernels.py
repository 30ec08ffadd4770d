"""Bound kernels: `m.sqr(input=x, output=y).launchRaw(blockSize=(256,1,1), gridSize=(g,1,1))`, and the
`.fwd` / `.bwd` derivative launches taking (primal, grad) pairs.

Each bound kernel is compiled as up to three compute entry points (primal, forward, backward) that
loadModule appends to the module (see module.py); a launch of blockSize x gridSize logical CUDA threads
runs ceil(total / 64) thread groups of 64, each thread recovering its (blockIdx, threadIdx) from its
linear index, so block and grid sizes never cause a recompile.  On the CPU the groups run on the
runtime's thread pool and a wave is one thread (the CPU backend's wave width); on CUDA a warp is 32
consecutive threads of one block when the block size is a multiple of 32, as on a GPU launch."""
from __future__ import annotations

import ctypes
import struct
import threading
import warnings

from ...runtime import layout_pack as _lp
from . import marshal as M

GROUP = 64                                    # numthreads of the generated entry points
_LAUNCH = struct.Struct("<3I3II")             # _sjt_bs, _sjt_gs, _sjt_total
_VARIANT_SUFFIX = {"primal": "", "fwd": "_fwd", "bwd": "_bwd"}
_tls = threading.local()


def _param_block(plan):
    """This thread's parameter block for `plan`, zeroed, its address and the address of a void*[1] holding
    that address (what cuLaunchKernel takes).  One block per thread and plan, reused: a launch reads it
    before returning (the CPU runs synchronously; cuLaunchKernel copies the parameters), and zero bytes
    stand for "no tensor" (a gradient view of nothing)."""
    blocks = getattr(_tls, "blocks", None)
    if blocks is None:
        blocks = _tls.blocks = {}
    hit = blocks.get(id(plan))
    if hit is None or hit[2] is not plan:
        block = _lp.aligned_zeros(plan.size)
        argp = (ctypes.c_void_p * 1)(block.ctypes.data)
        hit = blocks[id(plan)] = (block, block.ctypes.data, plan, ctypes.addressof(argp), argp)
    elif plan.rezero:
        ctypes.memset(hit[1], 0, plan.size)
    return hit


def entry_name(kernel: str, variant: str) -> str:
    return f"__sjt_{kernel}{_VARIANT_SUFFIX[variant]}"


class _ParamPlan:
    """How one parameter is packed, from its layout in the compiled entry point."""
    __slots__ = ("name", "offset", "layout", "kind", "elem", "gelem", "written", "n", "sub")

    def __init__(self, field, written: bool):
        self.name = field.name
        self.offset = field.offset
        self.layout = field.layout
        self.kind = M.view_kind(field.layout)
        self.written = written
        self.elem = self.gelem = None
        self.n = 0
        self.sub = {}
        if self.kind == "TensorView":
            self.elem = M.ElemInfo(field.layout)
        elif self.kind:
            self.sub = {f.name: f for f in field.layout.fields}
            self.elem = M.ElemInfo(self.sub["primal"].layout)
            self.gelem = M.ElemInfo(self.sub["diff"].layout)
            if self.kind in ("DiffTensorViewR", "DiffTensorViewASR"):
                self.n = M.generic_n(field.layout)
                if self.n < 1:
                    raise ValueError(f"parameter '{self.name}': {field.layout.name} needs N >= 1")


class _EntryPlan:
    def __init__(self, kinfo, entry):
        fields = {f.name: f for f in entry.params}
        self.launch_offsets = [fields[n].offset for n in ("_sjt_bs", "_sjt_gs", "_sjt_total")]
        assert self.launch_offsets == [0, 12, 24], self.launch_offsets
        self.size = max(entry.params_size, 32)
        self.params = [_ParamPlan(fields[p.name], p.written) for p in kinfo.params]
        # A plan of tensor views and scalars / vectors / matrices rewrites every byte it uses on every launch,
        # so its block needs no reset; differentiable views (a missing gradient is zero bytes) and aggregates
        # (structs, arrays) are packed into a zeroed block.
        self.rezero = any(p.kind != "TensorView" and (p.kind or p.layout.kind not in ("scalar", "vector", "matrix"))
                          for p in self.params)


def _int3(v, what: str):
    if type(v) is tuple and len(v) == 3:     # the common case, proven by exact types (bool is not int)
        a, b, c = v
        if type(a) is int and type(b) is int and type(c) is int and a >= 0 and b >= 0 and c >= 0:
            return v
    if not isinstance(v, (tuple, list)) or len(v) != 3 or \
            not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise TypeError(f"launchRaw: {what} must be a tuple of 3 ints, got {v!r}")
    if any(x < 0 for x in v):
        raise ValueError(f"launchRaw: {what} must not be negative, got {tuple(v)}")
    return v


class LaunchableObject:
    """A bound call waiting for its launch sizes (slang-torch's LaunchableObject)."""

    def __init__(self, fn: "WrappedFunction", variant: str, kwargs: dict):
        self._fn = fn
        self._variant = variant
        self._kwargs = kwargs
        self._launched = False

    def launchRaw(self, blockSize, gridSize):
        self._launched = True
        self._fn._launch(self._variant, self._kwargs, _int3(blockSize, "blockSize"), _int3(gridSize, "gridSize"))

    def launchTotal(self, blockSize, totalSize):
        self._launched = True
        raise NotImplementedError("launchTotal is not implemented (as in slang-torch); use launchRaw")

    def autoLaunch(self, totalSize):
        self._launched = True
        raise NotImplementedError("autoLaunch is not implemented (as in slang-torch); use launchRaw")

    def __del__(self):
        if not getattr(self, "_launched", True):
            warnings.warn(f"the call of kernel '{self._fn._display}' was never launched: call "
                          ".launchRaw(blockSize=(x,y,z), gridSize=(x,y,z)) on it", RuntimeWarning, stacklevel=2)


class WrappedFunction:
    """A bound kernel: call with keyword arguments, then `.launchRaw(blockSize=, gridSize=)`."""

    def __init__(self, module, kinfo, variant: str = "primal"):
        self._module = module
        self._kinfo = kinfo
        self._variant = variant
        self._names = [p.name for p in kinfo.params]
        self._nameset = frozenset(self._names)
        self._display = kinfo.name + ("" if variant == "primal" else "." + variant)
        if variant == "primal":
            self.fwd = WrappedFunction(module, kinfo, "fwd") if kinfo.bind_fwd else _NoDerivative(kinfo.name, "fwd")
            self.bwd = WrappedFunction(module, kinfo, "bwd") if kinfo.bind_bwd else _NoDerivative(kinfo.name, "bwd")

    def __call__(self, *args, **kwargs) -> LaunchableObject:
        if args:
            raise ValueError(f"kernel '{self._display}' does not support positional arguments, use keyword "
                             f"arguments instead: {', '.join(self._names)}")
        if kwargs.keys() != self._nameset:
            unknown = [k for k in kwargs if k not in self._nameset]
            missing = [k for k in self._names if k not in kwargs]
            msg = f"kernel '{self._display}' takes the arguments ({', '.join(self._names)})"
            if unknown:
                msg += f"; unknown: {', '.join(unknown)}"
            if missing:
                msg += f"; missing: {', '.join(missing)}"
            raise TypeError(msg)
        return LaunchableObject(self, self._variant, kwargs)

    def __repr__(self):
        return f"<slang-torch kernel {self._display}({', '.join(self._names)})>"

    # -- launch

    def _launch(self, variant: str, kwargs: dict, bs, gs) -> None:
        total = bs[0] * bs[1] * bs[2] * gs[0] * gs[1] * gs[2]
        devno = self._device_of(kwargs)
        if total == 0:
            return
        if total >= 1 << 32:
            raise ValueError(f"launchRaw: {total} threads in one launch; at most 2^32 - 1")
        rt = self._module._runtime_of(devno)
        kern, plan = rt.entry(self._kinfo, variant)
        block, addr, _, argp, _ = _param_block(plan)
        _LAUNCH.pack_into(block, 0, bs[0], bs[1], bs[2], gs[0], gs[1], gs[2], total)
        after = []
        for p in plan.params:
            value = kwargs[p.name]
            if p.kind == "TensorView" and type(value) is not tuple:
                M.view_into(block, p.offset, value, p.name, p.elem, devno, p.written)
            else:
                self._pack(block, p, value, variant, devno, total, after)
        rt.launch(kern, addr, argp, -(-total // GROUP))
        for step in after:
            step()

    def _device_of(self, kwargs) -> int:
        """The launch's device as torch's get_device() numbers it (-1: the CPU): that of the first tensor
        among the arguments (in parameter order, looking into pairs, structs and lists)."""
        torch = M._torch_mod or M._torch()
        Tensor = torch.Tensor
        for v in kwargs.values():                # the common case: a tensor argument
            if type(v) is Tensor:
                if v.is_cuda:
                    return v.get_device()
                if v.is_cpu:
                    return -1
            break

        def find(v, depth=0):
            if isinstance(v, Tensor):
                if not (v.is_cuda or v.is_cpu):
                    raise ValueError(f"kernel '{self._display}': a tensor on {v.device}; slang-torch kernels run "
                                     "on CPU and CUDA tensors")
                return v.get_device()
            if depth < 4:
                items = v.values() if isinstance(v, dict) else v if isinstance(v, (tuple, list)) else ()
                for x in items:
                    d = find(x, depth + 1)
                    if d is not None:
                        return d
            return None

        for p in self._kinfo.params:
            d = find(kwargs[p.name])
            if d is not None:
                return d
        return -1

    def _pack(self, block, p: _ParamPlan, value, variant, devno: int, total, after) -> None:
        name = p.name
        if not p.kind:
            M.pack_plain(block, p.offset, p.layout, value, name, self._module._structs, devno, p.written)
            return
        if p.kind == "TensorView":
            if isinstance(value, tuple):
                raise TypeError(f"argument '{name}': TensorView parameter takes a tensor, got a tuple")
            M.view_into(block, p.offset, value, name, p.elem, devno, p.written)
            return
        primal, grad = M.split_pair(value, name)
        M.view_into(block, p.offset + p.sub["primal"].offset, primal, name, p.elem, devno, p.written)
        if variant == "primal" or grad is None:
            return                         # no gradient: a view of nothing (every access is out of bounds)
        gname = name + " (grad)"
        if not isinstance(grad, M._torch().Tensor):
            raise TypeError(f"argument '{name}': the gradient must be a torch.Tensor, got {type(grad).__name__}")
        if tuple(grad.shape) != tuple(primal.shape):
            raise ValueError(f"argument '{name}': gradient of shape {tuple(grad.shape)} for a primal of shape "
                             f"{tuple(primal.shape)}; they must match")
        gwritable = variant == "bwd" or p.written
        M.view_into(block, p.offset + p.sub["diff"].offset, grad, gname, p.gelem, devno, gwritable)
        if variant != "bwd":
            return
        torch = M._torch()
        device = grad.device
        vshape = tuple(grad.shape[:-1]) if p.gelem.width else tuple(grad.shape)
        if p.kind == "DiffTensorViewR":
            reps = torch.zeros((p.n,) + tuple(grad.shape), dtype=grad.dtype, device=device)
            M.view_into(block, p.offset + p.sub["replicas"].offset, reps[0], gname, p.gelem, devno, True)
            struct.pack_into("<q", block, p.offset + p.sub["replicaStride"].offset, reps[0].numel() //
                             max(p.gelem.width, 1))
            after.append(lambda g=grad, r=reps: _sum_replicas(g, r))
        elif p.kind == "DiffTensorViewASR":
            slots = total * p.n
            idx = torch.full((slots,), -1, dtype=torch.int64, device=device)
            val = torch.zeros((slots, p.gelem.width) if p.gelem.width else (slots,), dtype=grad.dtype,
                              device=device)
            off = p.offset + p.sub["replicas"].offset
            block[off:off + M._TV.size] = memoryview(M.shape_view_bytes(vshape, p.gelem))
            M.view_into(block, p.offset + p.sub["slotIndex"].offset, idx, gname,
                        M.ElemInfo(p.sub["slotIndex"].layout), devno, True)
            M.view_into(block, p.offset + p.sub["slotValue"].offset, val, gname, p.gelem, devno, True)
            after.append(lambda g=grad, i=idx, v=val: _scatter_reduce(g, i, v))


def _sum_replicas(grad, reps) -> None:
    """DiffTensorViewR's after step: the gradient gets the sum of its N replicas."""
    acc = reps.sum(0, dtype=reps.dtype if reps.dtype.is_floating_point and reps.element_size() >= 4 else None)
    grad.add_(acc.to(grad.dtype))


def _scatter_reduce(grad, idx, val) -> None:
    """DiffTensorViewASR's after step: scatter-add the recorded (index, gradient) pairs."""
    torch = M._torch()
    keep = idx >= 0
    i, v = idx[keep], val[keep]
    if i.numel() == 0:
        return
    width = grad.shape[-1] if val.dim() == 2 else 0
    n = grad.numel() // (width or 1)
    acc = torch.zeros((n, width) if width else (n,), dtype=torch.float32 if grad.dtype == torch.float16 else grad.dtype,
                      device=grad.device)
    acc.index_add_(0, i, v.to(acc.dtype))
    grad.add_(acc.view(grad.shape).to(grad.dtype))


class _NoDerivative:
    def __init__(self, name: str, which: str):
        self._name, self._which = name, which

    def __call__(self, *args, **kwargs):
        mode = "fwd-mode" if self._which == "fwd" else "bwd-mode"
        raise ValueError(f"kernel '{self._name}' does not have a {mode} derivative attached: mark it "
                         "[Differentiable] (with [AutoPyBindCUDA] / [PyBindCUDA(Auto)])")


class TorchEntryPoint:
    """A [TorchEntryPoint] host function: not supported (slangjit has no Slang host code)."""

    def __init__(self, name: str):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(
            f"'{self._name}' is a [TorchEntryPoint] host function; slangjit does not run Slang host code "
            "(TorchTensor<T>.alloc, __dispatch_kernel). Bind the kernel with [AutoPyBindCUDA] and allocate "
            "the tensors in Python instead")
