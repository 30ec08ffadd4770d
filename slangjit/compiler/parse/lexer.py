"""Tokenizer for Slang source text.

One compiled master regular expression scans the whole text (`finditer`), so there is no
per-character Python loop.  Every token carries its `Loc` (file, 1-based line and column),
`bol` (first token of a source line: used for preprocessor directives) and `space`
(whitespace or a comment precedes it: used for `#define F(` and for telling `>>` from `> >`).

Token kinds:
    "id"    identifiers and keywords (the parser decides which words are keywords)
    "int"   integer literal (decimal, 0x hex, 0b binary, 0 octal) and char literal; value: int
    "float" floating literal; value: float, text kept as written
    "str"   string literal; value: the unescaped string
    "op"    operator / punctuation
    "bad"   something that is not a token (unknown character, unterminated literal);
            the preprocessor reports it (E0001) if it reaches active code
    "eof"   end of input

`>>` and `>>=` are lexed as `>` followed by an adjacent (`space == False`) `>` / `>=` so that
closing two generic argument lists needs no token splitting; the parser and the `#if`
evaluator glue them back into shift operators.
"""
from __future__ import annotations

import re

from ..source import Loc, SourceFile, error


class Token:
    __slots__ = ("kind", "text", "value", "suffix", "loc", "bol", "space", "hide")

    def __init__(self, kind, text, value, suffix, loc, bol, space, hide=None):
        self.kind = kind
        self.text = text
        self.value = value
        self.suffix = suffix
        self.loc = loc
        self.bol = bol
        self.space = space
        self.hide = hide          # macro names that must not expand this token (preprocessor)

    def copy(self, loc=None, hide=None, bol=False, space=None):
        return Token(self.kind, self.text, self.value, self.suffix,
                     self.loc if loc is None else loc, bol,
                     self.space if space is None else space,
                     self.hide if hide is None else hide)

    def __repr__(self):
        return f"Token({self.kind}, {self.text!r}, {self.loc.line}:{self.loc.col})"


_OPERATORS = [
    "<<=", "...", "::", "->", "=>", "++", "--", "&&", "||", "==", "!=", "<=", ">=", "<<",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##",
    "+", "-", "*", "/", "%", "=", "<", ">", "!", "~", "&", "|", "^", "?", ":", ";", ",",
    ".", "(", ")", "[", "]", "{", "}", "#", "@", "$", "\\",
]
# `@`, `$` and a stray backslash are lexed as operators only to be reported as errors
# below; keep them out of the operator group.
_ERROR_CHARS = {"@", "$", "\\"}
_OPERATORS = sorted((o for o in _OPERATORS if o not in _ERROR_CHARS), key=len, reverse=True)

_FLOAT = r"(?:(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?:lf|LF|[fFhHlL])?"
_INT = r"(?:0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)(?:[uUlLzZ]|ll|LL)*"

# Horizontal white space before a token is part of its match (the `sp` group), so most tokens take one
# match, not two; line breaks, line continuations and comments are matches of their own.
_MASTER = re.compile(
    r"(?P<sp>[ \t\f\v]+)?"
    r"(?:(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<nl>\r?\n)"
    r"|(?P<ws>(?:[ \t\f\v\r]|\\\r?\n)+)"
    r"|(?P<lc>//[^\n]*)"
    r"|(?P<bc>/\*.*?\*/)"
    r"|(?P<bcu>/\*)"
    r"|(?P<float>" + _FLOAT + r")(?![A-Za-z0-9_])"
    r"|(?P<int>" + _INT + r")(?![A-Za-z0-9_.])"
    r"|(?P<str>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<chr>'(?:[^'\\\n]|\\.)+')"
    r"|(?P<gtgt>>>=?)"
    r"|(?P<op>" + "|".join(re.escape(o) for o in _OPERATORS) + r")"
    r"|(?P<badstr>\"(?:[^\"\\\n]|\\.)*|'(?:[^'\\\n]|\\.)*'?)"
    r"|(?P<badnum>\d[A-Za-z0-9_.]*)"
    r"|(?P<bad>.))",
    re.S,
)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"',
            "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?"}
_ESC_RE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)", re.S)


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body

    def rep(m):
        s = m.group(1)
        if s[0] == "x":
            return chr(int(s[1:], 16) & 0x10FFFF)
        if s[0] in "01234567":
            return chr(int(s, 8))
        return _ESCAPES.get(s, s)
    return _ESC_RE.sub(rep, body)


def _int_value(text: str):
    """(value, suffix) of an integer literal; suffix lower-cased."""
    m = re.match(r"(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)(.*)$", text)
    digits, suffix = m.group(1), m.group(2).lower()
    if digits[:2] in ("0x", "0X"):
        v = int(digits[2:], 16)
    elif digits[:2] in ("0b", "0B"):
        v = int(digits[2:], 2)
    elif len(digits) > 1 and digits[0] == "0" and all(c in "01234567" for c in digits):
        v = int(digits, 8)
    else:
        v = int(digits, 10)
    return v, suffix


def tokenize(text: str, file: SourceFile | None = None, line: int = 1, col0: int = 1,
             raise_errors: bool = False) -> list[Token]:
    """Split `text` into tokens (no EOF token).  Lexical errors become "bad" tokens unless
    `raise_errors`; an unterminated block comment always raises E0011."""
    if file is None:
        file = SourceFile("<text>", text)
    toks: list[Token] = []
    append = toks.append
    line_start = 0 - (col0 - 1)
    bol = True
    space = False
    for m in _MASTER.finditer(text):
        kind = m.lastgroup
        if kind == "id" or kind == "op":           # most tokens: no conversion
            s = m.group(kind)
            start = m.end() - len(s)
            append(Token(kind, s, None, "", Loc(file, line, start - line_start + 1), bol,
                         space or start != m.start()))
            bol = False
            space = False
            continue
        if kind == "nl":
            line += 1
            line_start = m.end()
            bol = True
            space = True
            continue
        s = m.group(kind)
        start = m.end() - len(s)
        if kind == "ws" or kind == "lc" or kind == "bc":
            n = s.count("\n")
            if n:
                line += n
                line_start = start + s.rfind("\n") + 1
                if kind == "bc":
                    bol = True
            space = True
            continue
        if start != m.start():
            space = True
        loc = Loc(file, line, start - line_start + 1)
        if kind == "int":
            v, suf = _int_value(s)
            append(Token("int", s, v, suf, loc, bol, space))
        elif kind == "float":
            body = s
            suf = ""
            if body[-2:] in ("lf", "LF"):
                suf = "l"
                body = body[:-2]
            elif body[-1] in "fFhHlL":
                suf = body[-1].lower()
                body = body[:-1]
            append(Token("float", s, float(body), suf, loc, bol, space))
        elif kind == "gtgt":
            append(Token("op", ">", None, "", loc, bol, space))
            loc2 = Loc(file, line, start - line_start + 2)
            append(Token("op", s[1:], None, "", loc2, False, False))
        elif kind == "str":
            append(Token("str", s, _unescape(s[1:-1]), "", loc, bol, space))
        elif kind == "chr":
            val = _unescape(s[1:-1])
            if len(val) == 1:
                v = ord(val)
            else:
                v = 0
                for ch in val:
                    v = (v << 8) | (ord(ch) & 0xFF)
            append(Token("int", s, v, "", loc, bol, space))
        elif kind == "bcu":
            raise error("E0011", "unterminated block comment", loc)
        else:
            if kind == "badstr":
                msg = "unterminated string literal" if s[0] == '"' else "bad character literal"
            elif kind == "badnum":
                msg = f"invalid numeric literal '{s}'"
            else:
                msg = f"unexpected character '{s}'" if s.isprintable() else f"unexpected character {s!r}"
            if raise_errors:
                raise error("E0001", msg, loc)
            append(Token("bad", s, msg, "", loc, bol, space))
        bol = False
        space = False
    return toks


def eof_token(text: str, file: SourceFile) -> Token:
    lines = text.split("\n")
    return Token("eof", "", None, "", Loc(file, len(lines), len(lines[-1]) + 1), True, True)


def lex(text: str, path: str = "<text>") -> list[Token]:
    """Tokenize a whole file, raising E0001 on the first lexical error, with an EOF token."""
    sf = SourceFile(path, text)
    toks = tokenize(text, sf, raise_errors=True)
    toks.append(eof_token(text, sf))
    return toks
