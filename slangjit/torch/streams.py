"""Kernels of a call with CUDA torch tensors run on `torch.cuda.current_stream(device)`.

The CUDA device's launches read their stream from the GPU's shared context (`device._ctx.stream`) at launch
time; for the duration of the call it is torch's current stream of the tensors' device, so the kernels are
ordered with torch's work on that stream and nothing synchronises the host (torch's caching allocator
recycles the call's tensors in that stream's order).  On the CPU device this is a no-op.

Threads: the swapped-in stream is a field of the GPU context, so a call holds that context's lock from the
swap to its restore; calls with torch tensors from several host threads on one GPU run one after another
(each on its own thread's current torch stream), never on each other's stream.  A plain slangjit call (no
torch tensors) from another thread during that time does not take the lock and may launch on the swapped-in
stream: it stays correct (a stream orders work, it never loses it) but is ordered after that torch stream's work.
"""
from __future__ import annotations

import threading

import torch

from ..runtime.cuda import _stream_handle


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL = _Null()
_HANDLES: dict = {}
_LOCKS: dict = {}                 # id(GPU context) -> the lock held while its stream is swapped
_LOCKS_LOCK = threading.Lock()


def _lock_of(ctx):
    lk = _LOCKS.get(id(ctx))
    if lk is None:
        with _LOCKS_LOCK:
            lk = _LOCKS.get(id(ctx))
            if lk is None:
                lk = _LOCKS[id(ctx)] = (threading.RLock(), ctx)   # ctx kept alive: its id stays unique
    return lk[0]


class _TorchStream:
    __slots__ = ("ctx", "tdev", "old")

    def __init__(self, ctx, tdev):
        self.ctx, self.tdev = ctx, tdev

    def __enter__(self):
        s = torch.cuda.current_stream(self.tdev)
        h = _HANDLES.get(s.cuda_stream)
        if h is None:
            h = _HANDLES[s.cuda_stream] = _stream_handle(s)
        lock = _lock_of(self.ctx)
        lock.acquire()
        self.old = self.ctx.stream
        self.ctx.stream = h
        return h

    def __exit__(self, *exc):
        self.ctx.stream = self.old
        _lock_of(self.ctx).release()
        return False


def on_torch_stream(device, tensors):
    if getattr(device, "_host_memory", True) or not tensors:
        return _NULL
    return _TorchStream(device._ctx, tensors[0].device)
