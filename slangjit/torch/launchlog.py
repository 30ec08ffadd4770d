"""What calls with torch tensors launch: `launch_log()` records, per direction, the kernels a call ran and the
torch fills and copies it asked for, with the bytes each moves (benchmarks/torch_calls.py prints them; a test
checks the counts).  Inactive, it costs one list test per call."""
from __future__ import annotations


class LaunchLog:
    """What calls with torch tensors launched while the log was active: `events`, one per kernel launch or torch
    fill / copy the call asked for, as (direction 'forward' | 'backward', what, path 'fast' | 'general', bytes
    read, bytes written).  Bytes are those of the distinct elements touched (a stride-0 dimension is read
    once); an atomic or read-modify-write gradient counts as read and written."""

    def __init__(self):
        self.events: list = []

    def summary(self) -> dict:
        """direction -> {'launches': kernels + fills + copies, 'kernels', 'fills', 'copies', 'read', 'written'}."""
        out: dict = {}
        for d, what, _path, r, w in self.events:
            s = out.setdefault(d, {"launches": 0, "kernels": 0, "fills": 0, "copies": 0, "read": 0, "written": 0})
            s["launches"] += 1
            s[{"kernel": "kernels", "fill": "fills", "copy": "copies"}[what]] += 1
            s["read"] += r
            s["written"] += w
        return out


_LOG: list = []                     # the active logs (launch_log), innermost last


class launch_log:
    """`with slangjit.torch.launch_log() as log:` records the launches of calls with torch tensors (LaunchLog)."""

    def __enter__(self) -> LaunchLog:
        self.log = LaunchLog()
        _LOG.append(self.log)
        return self.log

    def __exit__(self, *exc):
        _LOG.remove(self.log)
        return False


def nbytes_touched(t) -> int:
    """Bytes of the distinct elements of a tensor (a stride-0 dimension counts once)."""
    n = 1
    for d, s in zip(t.shape, t.stride()):
        if d == 0:
            return 0
        if s != 0:
            n *= d
    return n * t.element_size()


def log_event(direction: str, what: str, path: str, read: int, written: int) -> None:
    for lg in _LOG:
        lg.events.append((direction, what, path, read, written))
