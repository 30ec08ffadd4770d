"""Parser infrastructure: failures, token/grammar tables and the token cursor (ParserBase).

Split from parser.py; see its docstring for the grammar decisions."""
from __future__ import annotations

import re
import sys

from . import ast
from .lexer import Token
from .preprocessor import preprocess
from ..source import CompileError, Diagnostic, Loc, SourceFile, error

_MAX_DEPTH = 200


class _Fail(Exception):
    """A parse failure (cheap to raise during speculation; converted to CompileError)."""

    def __init__(self, code, message, loc):
        self.code = code
        self.message = message
        self.loc = loc


class _Fatal(Exception):
    """A failure that speculation must not swallow (nesting too deep)."""

    def __init__(self, code, message, loc):
        self.code = code
        self.message = message
        self.loc = loc


BIN_PREC = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}
ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}

# Words that can never name a type or a variable.
RESERVED = {
    "if", "else", "for", "while", "do", "switch", "case", "default", "return", "break", "continue",
    "discard", "struct", "class", "interface", "enum", "namespace", "typealias", "typedef", "import",
    "extension", "let", "true", "false", "this", "sizeof", "alignof",
    "countof", "is", "as", "where", "operator", "__subscript", "__init", "cbuffer", "tbuffer",
    "associatedtype", "using", "__generic", "implementing", "__include",
}
# Not reserved: `in` `out` `inout` `var` `func` `property` are keywords only where the grammar expects
# them (a parameter direction or `var x` / `func f` / `property p` before a name), elsewhere ordinary
# identifiers, as in Slang (`float out[4] = ...;`, `float var = 0.0;`).

MODIFIERS = {
    "static", "const", "uniform", "groupshared", "public", "private", "internal", "export", "extern",
    "inline", "override", "no_diff", "nointerpolation", "precise", "mutating", "nonmutating",
    "__extern_cpp", "__exported", "shared", "volatile", "row_major", "column_major", "snorm", "unorm",
    "linear", "centroid", "noperspective", "globallycoherent", "__global", "__prefix", "__postfix",
    "constexpr", "__noinline",
    # Slang 2026's existential qualifiers (`dyn interface IFoo`, `dyn IFoo v`, `some IFoo p`): an
    # interface-typed declaration is already static where its type is known and dynamic where not.
    "dyn", "some",
}

DIRECTIONS = {"in": "in", "out": "out", "inout": "inout", "ref": "ref", "constref": "constref",
              "__ref": "ref", "__constref": "constref"}
PARAM_MODS = MODIFIERS | {"uniform", "no_diff", "const"}

BUILTIN_TYPES = {
    "void", "bool", "int", "uint", "float", "double", "half", "int8_t", "int16_t", "int32_t",
    "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "float16_t", "float32_t", "float64_t",
    "dword", "vector", "matrix", "intptr_t", "uintptr_t", "size_t", "char",
}
_VEC_RE = re.compile(r"(?:bool|int|uint|float|double|half|int8_t|int16_t|int32_t|int64_t|uint8_t|"
                     r"uint16_t|uint32_t|uint64_t|float16_t|float32_t|float64_t)[1-4](?:x[1-4])?$")

# After `Name<args>` the next token must be one of these for the `<` to be a generic application.
_GENERIC_FOLLOW = {"(", "::", ".", ")", ",", ";", "]", "}", "{", ">"}

_TYPE_DECL_WORDS = {"struct", "class", "interface", "enum", "typealias", "associatedtype"}


def _is_builtin_type_name(name: str) -> bool:
    return name in BUILTIN_TYPES or _VEC_RE.match(name) is not None


class ParserBase:
    """Token cursor, speculation and error helpers shared by the parser's parts."""

    def __init__(self, toks: list[Token], path: str):
        self.toks = toks
        self.pos = 0
        self.last = len(toks) - 1
        self.path = path
        self.depth = 0
        self.known_types: set[str] = set()
        self.conj_aliases: dict[str, list] = {}      # `typealias IAB = IA & IB;` -> [IA, IB]
        self._generic_fail: dict[int, _Fail] = {}   # `<` positions where generic args failed
        self.generic_depth = 0                      # inside how many generic argument lists
        self.spec = 0                               # inside how many speculative parses
        self.depth_hit = None                       # where speculation first ran too deep
        self.lazy_bodies = False                    # defer function bodies (parser.py func_decl)
        self.alias_writes = 0                       # conj_aliases assignments (names_snapshot's key)
        self._brace_match = None
        self._snap_key = None
        self._snap = None
        self._prescan()

    # ------------------------------------------------------------------ helpers

    def _prescan(self):
        toks = self.toks
        kt = self.known_types
        n = len(toks)
        for i, t in enumerate(toks):
            if t.kind == "id" and t.text in _TYPE_DECL_WORDS and i + 1 < n:
                nt = toks[i + 1]
                if nt.kind == "id" and nt.text == "class" and i + 2 < n:
                    nt = toks[i + 2]
                if nt.kind == "id":
                    kt.add(nt.text)

    @property
    def tok(self) -> Token:
        return self.toks[self.pos]

    def peek(self, k=1) -> Token:
        i = self.pos + k
        return self.toks[i if i <= self.last else self.last]

    def advance(self) -> Token:
        t = self.toks[self.pos]
        if self.pos < self.last:
            self.pos += 1
        return t

    def at(self, text: str) -> bool:
        t = self.toks[self.pos]
        return t.text == text and t.kind != "str"

    def accept(self, text: str) -> bool:
        t = self.toks[self.pos]
        if t.text == text and t.kind != "str":
            if self.pos < self.last:
                self.pos += 1
            return True
        return False

    @staticmethod
    def describe(t: Token) -> str:
        if t.kind == "eof":
            return "end of file"
        return f"'{t.text}'"

    def fail(self, expected: str, t: Token | None = None):
        t = t or self.toks[self.pos]
        raise _Fail("E0010", f"expected {expected}, found {self.describe(t)}", t.loc)

    def expect(self, text: str, what: str | None = None) -> Token:
        t = self.toks[self.pos]
        if t.text == text and t.kind != "str":
            if self.pos < self.last:
                self.pos += 1
            return t
        self.fail(what or f"'{text}'", t)

    def expect_close(self, text: str, open_tok: Token) -> Token:
        """Like expect, but reaching the end of file reports an unterminated block (E0011)."""
        t = self.toks[self.pos]
        if t.kind == "eof":
            raise _Fail("E0011", f"unterminated '{open_tok.text}' (opened here): expected '{text}' "
                        f"before end of file", open_tok.loc)
        return self.expect(text)

    def ident(self, what: str = "an identifier") -> Token:
        t = self.toks[self.pos]
        if t.kind == "id" and t.text not in RESERVED:
            if self.pos < self.last:
                self.pos += 1
            return t
        self.fail(what, t)

    def is_ident(self, t: Token) -> bool:
        return t.kind == "id" and t.text not in RESERVED

    def _spec(self, fn, *args):
        """Run a speculative sub-parse (its failures are caught by the caller)."""
        self.spec += 1
        try:
            return fn(*args)
        finally:
            self.spec -= 1

    def enter(self):
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.depth -= 1
            t = self.toks[self.pos]
            # while speculating, too deep just means "not this alternative"
            if self.spec and self.depth_hit is None:
                self.depth_hit = t.loc
            raise (_Fail if self.spec else _Fatal)("E0010", "nesting too deep", t.loc)

    def eof_in_body(self, open_tok: Token):
        if self.toks[self.pos].kind == "eof":
            raise _Fail("E0011", f"unterminated '{open_tok.text}' (opened here): expected '}}' before "
                        f"end of file", open_tok.loc)

    def parse_constraints(self) -> list:
        """`IA & IB & ...` after `:` in a generic parameter or `where` clause; a conjunction alias
        (`typealias IAB = IA & IB;`) stands for its parts."""
        out = [self.parse_type()]
        while self.accept("&"):
            out.append(self.parse_type())
        return [p for c in out for p in (self.conj_aliases.get(c.name, [c]) if isinstance(c, ast.Name) else [c])]
