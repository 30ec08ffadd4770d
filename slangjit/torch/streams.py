"""Kernels of a call with CUDA torch tensors run on `torch.cuda.current_stream(device)`.

The CUDA device's launches read their stream from the GPU's shared context (`device._ctx.stream`) at launch
time; for the duration of the call it is torch's current stream of the tensors' device, so the kernels are
ordered with torch's work on that stream and nothing synchronises the host (torch's caching allocator
recycles the call's tensors in that stream's order).  On the CPU device this is a no-op.  Calls from several
host threads on one GPU at once are not supported while a torch stream is swapped in.
"""
from __future__ import annotations

import torch

from ..runtime.cuda import _stream_handle


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL = _Null()
_HANDLES: dict = {}


class _TorchStream:
    __slots__ = ("ctx", "tdev", "old")

    def __init__(self, ctx, tdev):
        self.ctx, self.tdev = ctx, tdev

    def __enter__(self):
        s = torch.cuda.current_stream(self.tdev)
        h = _HANDLES.get(s.cuda_stream)
        if h is None:
            h = _HANDLES[s.cuda_stream] = _stream_handle(s)
        self.old = self.ctx.stream
        self.ctx.stream = h
        return h

    def __exit__(self, *exc):
        self.ctx.stream = self.old
        return False


def on_torch_stream(device, tensors):
    if getattr(device, "_host_memory", True) or not tensors:
        return _NULL
    return _TorchStream(device._ctx, tensors[0].device)
