"""A front-end cache hit whose generated source stays on disk until something reads it.

A program entry (frontend_cache.py) is nearly all C++ / CUDA source (~150-250 KB for the seed MLP's programs, its
reflection 1-3 KB), and a warm process that finds its library or cubin in the cache never needs the source: the
library's key takes the source's sha256, stored with the reflection.  Reading, MAC-checking and unpickling the
source was ~0.6 ms of the MLP module's 2.8 ms cache hit (fresh memory: every 250 KB buffer page-faults).  So the
entry keeps the source in a region of its own with its own MAC, and `LazySourceProgram.source` reads it at first
use: MAC checked (under the entry's key), its sha256 compared with the one stored with the reflection.  Where that
fails (the entry was removed or damaged since the hit) the program is compiled again without the cache and its
source used if it has that sha256 (the compiler is deterministic for the inputs the key covers); if the module's
files changed meanwhile it has not, and reading the source raises an error that says to load the program again.
"""
from __future__ import annotations

import copy
import hashlib
import threading
from pathlib import Path
from typing import Callable, Optional

from .. import cache_paths
from .reflection import CompiledProgram


def source_key(key: str) -> str:
    """What the source region's MAC is made under (never a program entry's own key)."""
    return key + "\0source"


class SourceRef:
    """Where a hit's source lies: the entry file, the region's offset and length, its MAC."""

    def __init__(self, folder: Path, path: Path, key: str, offset: int, length: int, mac: bytes, head: str,
                 recompile: Optional[Callable] = None):
        self.folder, self.path, self.key = folder, path, key
        self.offset, self.length, self.mac, self.head = offset, length, mac, head
        self.recompile = recompile          # () -> a CompiledProgram compiled without the cache
        self._text: Optional[str] = None
        self._lock = threading.Lock()

    def text(self, sha256: bytes) -> str:
        with self._lock:
            if self._text is None:
                self._text = self._read(sha256)
            return self._text

    def _read(self, sha256: bytes) -> str:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(self.length)
            if len(data) == self.length and cache_paths.mac_ok(self.folder, source_key(self.key), data, self.mac) \
                    and hashlib.sha256(data).digest() == sha256:
                return data.decode("utf-8", "surrogatepass")
        except (OSError, UnicodeDecodeError):
            pass
        if cache_paths.writable(self.folder):
            cache_paths.remove_entry(self.path)     # damaged or gone: the next process compiles it afresh
        prog = self.recompile() if self.recompile is not None else None
        if prog is not None and prog.source_sha256() == sha256:
            return prog.source
        raise RuntimeError(f"the generated source of a cached program ({self.path}) can no longer be read and the "
                           f"program's files changed since it was loaded: load the program again")


class LazySourceProgram(CompiledProgram):
    """A CompiledProgram from a disk hit whose `source` is read from the entry at first use (SourceRef).  Copies
    share the reference; pickling or deep-copying gives a plain CompiledProgram with the source read."""

    @property
    def source(self) -> str:            # type: ignore[override]
        d = self.__dict__
        text = d.get("_source_text")
        if text is None:
            text = d["_source_text"] = d["_source_ref"].text(d["_source_sha256"])
        return text

    @source.setter
    def source(self, value: str) -> None:
        d = self.__dict__
        d["_source_text"] = value
        d.pop("_source_sha256", None)       # recomputed from the new text
        d.pop("_source_ref", None)

    def source_head(self) -> str:
        """The source's first line, without reading the source."""
        d = self.__dict__
        if "_source_ref" in d:
            return d["_source_ref"].head
        text = self.source
        i = text.find("\n")
        return text if i < 0 else text[:i]

    def _plain_state(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_source_ref", "_source_text")}
        state["source"] = self.source
        return state

    def __reduce_ex__(self, protocol):
        state = self._plain_state()
        args = tuple(state.pop(f) for f in ("source", "target", "reflection", "timings"))
        return (CompiledProgram, args, state)

    def __copy__(self):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __deepcopy__(self, memo):
        plain = object.__new__(CompiledProgram)
        plain.__dict__.update(copy.deepcopy(self._plain_state(), memo))
        return plain


def lazy_program(program: CompiledProgram, ref: SourceRef) -> LazySourceProgram:
    """A LazySourceProgram with `program`'s attributes (its `source` field left out) reading its source from ref."""
    new = object.__new__(LazySourceProgram)
    d = new.__dict__
    d.update(program.__dict__)
    d.pop("source", None)
    d["_source_ref"] = ref
    return new


def source_head(prog) -> str:
    """The first line of a program's generated source, without reading a LazySourceProgram's source."""
    head = getattr(prog, "source_head", None)
    if head is not None:
        return head()
    text = prog.source
    i = text.find("\n")
    return text if i < 0 else text[:i]


def text_of(source) -> str:
    """A source given to a compiler runtime: the text itself, or a callable returning it (a program's lazily kept
    source: read only where a build needs it)."""
    return source() if callable(source) else source
