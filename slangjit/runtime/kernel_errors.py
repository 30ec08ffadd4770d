"""Failures a kernel records while it runs (prelude 13_checks.h) and the exception the runtime raises
after the dispatch.

The error record: one per dispatch, `ErrorRecord` below (16 bytes + 8: code, site, index, count; the
first failure of the dispatch wins, code 0 means none).  On the CPU the runtime passes its address as
the launcher's sixth argument (`void* sj_ep`, emit/program.py CppTarget.launcher); each worker thread
points its thread-local `sj::error_record()` at it for the range it runs.  On CUDA it is the module
global `sj_error_record` (`__device__ sj::ErrorRecord`), read back after a launch in the checked mode.
`site` indexes the program's table of failure sites ("file:line: what failed"), which its reflection
carries (`ProgramReflection.error_sites`), on both targets.

What is recorded: in every mode, a null pointer dereference, a reverse-mode loop that runs past its
[MaxIters(N)] bound (or constant trip count) and recursion deeper than the stack budget (1 MiB per
worker thread, half a fiber's stack in kernels with group barriers); in the checked mode
(PipelineOptions.checked) also every out-of-range local-array, vector, matrix, buffer and
byte-address-buffer index.
"""
from __future__ import annotations

import ctypes

ERR_INDEX, ERR_NULL, ERR_MAX_ITERS, ERR_RECURSION = 1, 2, 3, 4
ERROR_RECORD_SYMBOL = "sj_error_record"      # the CUDA module global (prelude 13_checks.h)
_WHAT = {ERR_INDEX: "index out of range", ERR_NULL: "null pointer dereference",
         ERR_MAX_ITERS: "[MaxIters] overrun", ERR_RECURSION: "recursion too deep"}


class ErrorRecord(ctypes.Structure):
    """The layout of prelude sj::ErrorRecord."""
    _fields_ = [("code", ctypes.c_uint32), ("site", ctypes.c_uint32),
                ("index", ctypes.c_int64), ("count", ctypes.c_int64)]


class KernelError(IndexError, RuntimeError):
    """A check in the generated code failed during a dispatch.  `location` is the Slang "file:line",
    `code` one of ERR_*; the message says what failed.  An IndexError (most failures are out-of-range
    accesses) and a RuntimeError."""

    def __init__(self, message: str, code: int, location: str):
        super().__init__(message)
        self.code = code
        self.location = location


def raise_if_failed(rec: ErrorRecord, site_text, entry_name: str) -> None:
    """Raise KernelError when the dispatch recorded a failure; `site_text(i)` gives site i's text."""
    code = rec.code
    if not code:
        return
    try:
        text = site_text(rec.site) or "?"
    except Exception:  # noqa: BLE001  (an unreadable site still raises the failure)
        text = "?"
    location, _, what = text.partition(": ")
    what = what or _WHAT.get(code, f"error {code}")
    if code == ERR_INDEX:
        what += f": index {rec.index}, valid range [0, {rec.count})"
    raise KernelError(f"{location}: {what} (dispatch of '{entry_name}')", code, location)


def sites_lookup(sites):
    """site_text over a program's reflection.error_sites."""
    return lambda i: sites[i] if 0 <= i < len(sites) else "?"
