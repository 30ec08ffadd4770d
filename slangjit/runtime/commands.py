"""Command encoders (SlangPy's `device.create_command_encoder()`): work recorded now, run at submit.

    enc = device.create_command_encoder()
    module.f.append_to(enc, a, b, _result=r)        # or module.f(a, b, _result=r, _append_to=enc)
    kernel.dispatch([n, 1, 1], vars, command_encoder=enc)
    device.submit_command_buffer(enc.finish())      # runs the recorded work in order

Recording resolves and compiles a functional call (its errors are raised where it is appended); the
dispatch itself runs at submit, reading the arguments' contents as they are then.  Devices run submitted
work synchronously, so a submitted buffer's results are visible when `submit_command_buffer` returns.
Callbacks registered on the device are told when a recording is submitted, and when an encoder is
discarded (garbage-collected) without being finished."""
from __future__ import annotations

import enum
import itertools
import weakref
from typing import Any, Callable, Optional

_RECORDING_IDS = itertools.count(1)
_SUBMIT_IDS = itertools.count(1)
_CALLBACK_IDS = itertools.count(1)


class CommandQueueType(enum.IntEnum):
    graphics = 0


class CommandRecordingEvent:
    """What a recording callback receives: the device, the recording's id and, on submit, the command
    buffer and the submission's id."""

    def __init__(self, device, id: int, command_buffer=None, submit_id: int = 0):
        self.device = device
        self.id = id
        self.command_buffer = command_buffer
        self.submit_id = submit_id


class CommandBuffer:
    def __init__(self, device, ops: list, queue: CommandQueueType, recording_id: int):
        self.device = device
        self._ops = ops
        self.queue = queue
        self.recording_id = recording_id
        self.submitted = False


def _discarded(device_ref, recording_id: int, state: dict) -> None:
    dev = device_ref()
    if dev is None or state["finished"]:
        return
    callbacks(dev)._fire("discarded", CommandRecordingEvent(dev, recording_id))


class CommandEncoder:
    def __init__(self, device, queue: CommandQueueType = CommandQueueType.graphics):
        self.device = device
        self.queue = CommandQueueType(queue)
        self.recording_id = next(_RECORDING_IDS)
        self._ops: list = []
        self._state = {"finished": False}
        weakref.finalize(self, _discarded, weakref.ref(device), self.recording_id, self._state)

    @property
    def finished(self) -> bool:
        return self._state["finished"]

    def append(self, op: Callable[[], Any]) -> None:
        """Record `op` (called with no arguments at submit)."""
        if self._state["finished"]:
            raise RuntimeError("Command encoder is finished: create a new one to record more work")
        self._ops.append(op)

    # Barriers and resource-state transitions order work on a GPU queue; recorded work here runs in order, one
    # operation after the other, so they have nothing to do beyond checking their arguments.
    def global_barrier(self) -> None:
        if self._state["finished"]:
            raise RuntimeError("Command encoder is finished: create a new one to record more work")

    def set_buffer_state(self, buffer, state) -> None:
        self.global_barrier()
        if not getattr(buffer, "_sj_buffer", False):
            raise TypeError(f"set_buffer_state: expected a Buffer, got {type(buffer).__name__}")
        int(state)          # a ResourceState (or its integer value)

    def set_texture_state(self, texture, state) -> None:
        self.global_barrier()
        if not getattr(texture, "_sj_texture", False):
            raise TypeError(f"set_texture_state: expected a Texture, got {type(texture).__name__}")
        int(state)

    def finish(self) -> CommandBuffer:
        if self._state["finished"]:
            raise RuntimeError("Command encoder is finished: finish() was already called")
        self._state["finished"] = True
        return CommandBuffer(self.device, self._ops, self.queue, self.recording_id)


class _Callbacks:
    def __init__(self):
        self._cbs: dict = {"discarded": {}, "submitted": {}}

    def register(self, kind: str, fn) -> int:
        if not callable(fn):
            raise TypeError(f"register_command_recording_{kind}_callback: expected a callable, got {fn!r}")
        i = next(_CALLBACK_IDS)
        self._cbs[kind][i] = fn
        return i

    def unregister(self, kind: str, i: int) -> None:
        self._cbs[kind].pop(i, None)

    def _fire(self, kind: str, event) -> None:
        for fn in list(self._cbs[kind].values()):
            fn(event)


def callbacks(device) -> _Callbacks:
    cb = device.__dict__.get("_sj_recording_callbacks")
    if cb is None:
        cb = device.__dict__["_sj_recording_callbacks"] = _Callbacks()
    return cb


def submit(device, command_buffer: CommandBuffer, queue: Optional[CommandQueueType] = None) -> int:
    """Run a finished command buffer's work in recording order; returns the submission's id."""
    if not isinstance(command_buffer, CommandBuffer):
        raise TypeError(f"submit_command_buffer: expected a CommandBuffer (CommandEncoder.finish()), "
                        f"got {type(command_buffer).__name__}")
    if command_buffer.device is not device:
        raise ValueError("submit_command_buffer: the command buffer was recorded for another device")
    if command_buffer.submitted:
        raise RuntimeError("submit_command_buffer: this command buffer was already submitted")
    command_buffer.submitted = True
    for op in command_buffer._ops:
        op()
    sid = next(_SUBMIT_IDS)
    callbacks(device)._fire("submitted", CommandRecordingEvent(device, command_buffer.recording_id,
                                                               command_buffer, sid))
    return sid
