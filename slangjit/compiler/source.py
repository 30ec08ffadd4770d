"""Source files, locations and user-facing diagnostics.

Every error a user can cause is a `Diagnostic` raised inside a `CompileError`; the text carries
the code, file:line:col, the source line and a caret, so no compiler internals leak out.
"""
from __future__ import annotations

from dataclasses import dataclass


class SourceFile:
    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text
        self._line_starts: list[int] | None = None

    def line_starts(self) -> list[int]:
        if self._line_starts is None:
            starts = [0]
            for i, ch in enumerate(self.text):
                if ch == "\n":
                    starts.append(i + 1)
            self._line_starts = starts
        return self._line_starts

    def line_text(self, line: int) -> str:
        starts = self.line_starts()
        if line < 1 or line > len(starts):
            return ""
        begin = starts[line - 1]
        end = self.text.find("\n", begin)
        return self.text[begin:] if end < 0 else self.text[begin:end]


class Loc:
    """A position in a source file (1-based line and column); a value (compared and hashed by its three
    fields; never changed after construction).  A plain slotted class rather than a frozen dataclass: the
    lexer makes one per token, and a frozen dataclass's constructor costs three times as much."""
    __slots__ = ("file", "line", "col")

    def __init__(self, file: SourceFile | None, line: int, col: int):
        self.file = file
        self.line = line
        self.col = col

    def __eq__(self, other):
        if other.__class__ is not Loc:
            return NotImplemented
        return (self.file, self.line, self.col) == (other.file, other.line, other.col)

    def __hash__(self):
        return hash((self.file, self.line, self.col))

    def __repr__(self) -> str:
        return f"Loc(file={self.file!r}, line={self.line!r}, col={self.col!r})"

    def __reduce__(self):
        return (Loc, (self.file, self.line, self.col))

    def __str__(self) -> str:
        name = self.file.path if self.file else "<unknown>"
        return f"{name}:{self.line}:{self.col}"


NO_LOC = Loc(None, 0, 0)


@dataclass
class Diagnostic:
    code: str          # e.g. "E1001"
    message: str
    loc: Loc
    severity: str = "error"

    def format(self) -> str:
        head = f"{self.loc}: {self.severity} {self.code}: {self.message}"
        if self.loc.file is None:
            return head
        line = self.loc.file.line_text(self.loc.line).rstrip("\r")
        caret = " " * max(0, self.loc.col - 1) + "^"
        # Tabs keep their width so the caret lines up under the offending token.
        caret = "".join("\t" if c == "\t" else " " for c in line[: max(0, self.loc.col - 1)]) + "^"
        return f"{head}\n{line}\n{caret}"


class CompileError(Exception):
    """The single exception type for user errors found while compiling Slang."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.format() for d in diagnostics))

    @property
    def code(self) -> str:
        return self.diagnostics[0].code

    @property
    def loc(self) -> Loc:
        return self.diagnostics[0].loc


def error(code: str, message: str, loc: Loc) -> CompileError:
    return CompileError(Diagnostic(code, message, loc))


def decode_source(data: bytes, path: str) -> str:
    """The text of a source file: UTF-8 (a leading byte-order mark dropped).  Bytes that are not
    UTF-8 are a located error (E0002) at the line and column of the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        good = data[:e.start].decode("utf-8")
        line = good.count("\n") + 1
        col = len(good) - (good.rfind("\n") + 1) + 1
        shown = SourceFile(path, data.decode("utf-8", errors="replace"))
        raise error("E0002", f"source file is not valid UTF-8 (byte 0x{data[e.start]:02x}); "
                    f"save it as UTF-8", Loc(shown, line, col)) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_source(path: str) -> str:
    """Read a Slang source file as text (see decode_source); OSError passes through."""
    with open(path, "rb") as f:
        return decode_source(f.read(), path)
