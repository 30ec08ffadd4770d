"""The C preprocessor subset Slang programs use, working on the lexer's token stream.

Supported: `#define` (object-like and function-like, `#` stringize, `##` pasting, `...` /
`__VA_ARGS__`, bodies continued with backslash-newline), `#undef`, `#if` / `#elif` / `#else` /
`#endif` with integer constant expressions and `defined`, `#ifdef` / `#ifndef`, `#include "f"`
(relative to the including file, then the include paths) and `#include <f>` (include paths),
`#pragma` (ignored; `#pragma once` honoured), `#error`, `#warning` (ignored), `#line`,
`#version` and `#extension` (ignored).  `__LINE__` and `__FILE__` are built in.

Directives are recognised by C rules: `#` as the first token of a line.  Tokens produced by a
macro expansion carry the location of the macro use (tokens that came from a macro's arguments
keep their own).  Every error is a CompileError with code E0020 (E0001 for a lexical error in
active code).
"""
from __future__ import annotations

import os

from .lexer import Token, tokenize, eof_token
from ..source import CompileError, Loc, SourceFile, error, read_source

# Predefined macros of every compile (as Slang defines them), before `-D` arguments.
DEFAULT_DEFINES = {"__SLANG__": "1", "__HLSL__": "1", "SLANG": "1", "__slangjit__": "1"}

_EMPTY = frozenset()
_MAX_INCLUDE_DEPTH = 64
_MAX_EXPANSIONS = 200000


class _Macro:
    __slots__ = ("name", "params", "variadic", "body", "func")

    def __init__(self, name, params, variadic, body, func):
        self.name = name
        self.params = params          # list[str] (function-like)
        self.variadic = variadic
        self.body = body              # list[Token]
        self.func = func


class _Reader:
    """A token source with a push-back stack (macro expansions are pushed back for rescanning)."""
    __slots__ = ("toks", "i", "stack")

    def __init__(self, toks):
        self.toks = toks
        self.i = 0
        self.stack: list[Token] = []

    def next(self):
        if self.stack:
            return self.stack.pop()
        if self.i < len(self.toks):
            t = self.toks[self.i]
            self.i += 1
            return t
        return None

    def peek(self):
        if self.stack:
            return self.stack[-1]
        if self.i < len(self.toks):
            return self.toks[self.i]
        return None

    def push(self, toks):
        self.stack.extend(reversed(toks))


def _perr(msg, loc):
    return error("E0020", msg, loc)


class Preprocessor:
    def __init__(self, include_paths=(), defines=None):
        self.include_paths = [str(p) for p in include_paths or ()]
        self.macros: dict[str, _Macro] = {}
        self.once: set[str] = set()
        self.depth = 0
        self.expansions = 0
        deffile = SourceFile("<command line>", "")
        for k, v in (defines or {}).items():
            v = "1" if v is None else str(v)
            body = tokenize(v, SourceFile("<command line>", v))
            for t in body:
                t.bol = False
            self.macros[str(k)] = _Macro(str(k), [], False, body, False)
        self._deffile = deffile
        self.deps: list | None = None          # paths of #included files are appended here when set
        self.absent: list | None = None        # include candidates probed and not found (a file there later shadows)

    # ------------------------------------------------------------------ entry points

    def run(self, text: str, path: str) -> list[Token]:
        sf = SourceFile(path, text)
        out: list[Token] = []
        self._process(sf, tokenize(text, sf), out)
        out.append(eof_token(text, sf))
        return out

    # ------------------------------------------------------------------ files

    def _process(self, sf: SourceFile, toks: list[Token], out: list[Token]):
        reader = _Reader(toks)
        conds: list[list] = []
        active = True
        macros = self.macros
        append = out.append
        ntoks = len(toks)
        while True:
            if reader.stack:
                t = reader.stack.pop()
                from_file = False
            elif reader.i < ntoks:
                t = toks[reader.i]
                reader.i += 1
                from_file = True
            else:
                break
            if from_file and t.bol and t.kind == "op" and t.text == "#":
                # collect the directive's tokens (to the end of the logical line)
                j = reader.i
                while j < ntoks and not toks[j].bol:
                    j += 1
                line = toks[reader.i:j]
                reader.i = j
                active = self._directive(t, line, conds, active, sf, out)
                continue
            if not active:
                continue
            if t.kind == "id":
                m = macros.get(t.text)
                if m is not None and (t.hide is None or t.text not in t.hide):
                    exp = self._expand_macro(m, t, reader)
                    if exp is not None:
                        reader.push(exp)
                        continue
                elif t.text == "__LINE__":
                    append(Token("int", str(t.loc.line), t.loc.line, "", t.loc, False, t.space))
                    continue
                elif t.text == "__FILE__":
                    p = t.loc.file.path if t.loc.file else ""
                    append(Token("str", '"' + p.replace("\\", "\\\\") + '"', p, "", t.loc, False, t.space))
                    continue
            elif t.kind == "bad":
                raise error("E0001", t.value, t.loc)
            append(t)
        if conds:
            raise _perr("unterminated conditional directive (missing #endif)", conds[-1][3])

    # ------------------------------------------------------------------ directives

    def _directive(self, hash_tok, line, conds, active, sf, out) -> bool:
        if not line:
            return active                      # null directive
        d = line[0]
        name = d.text if d.kind == "id" else ""
        args = line[1:]
        if name in ("if", "ifdef", "ifndef"):
            # condition stack entries: [parent_active, branch_taken, seen_else, loc of the #if]
            if not active:
                conds.append([False, True, False, hash_tok.loc])
                return False
            if name == "if":
                val = self._eval_condition(args, d)
            else:
                if not args or args[0].kind != "id":
                    raise _perr(f"#{name} expects a macro name", args[0].loc if args else d.loc)
                val = (args[0].text in self.macros) == (name == "ifdef")
            conds.append([True, bool(val), False, hash_tok.loc])
            return bool(val)
        if name in ("elif", "else", "endif"):
            if not conds:
                raise _perr(f"#{name} without #if", d.loc)
            top = conds[-1]
            if name == "endif":
                conds.pop()
                return top[0]
            if top[2]:
                raise _perr(f"#{name} after #else", d.loc)
            if name == "else":
                top[2] = True
            if not top[0] or top[1]:
                return False
            val = True if name == "else" else self._eval_condition(args, d)
            if val:
                top[1] = True
            return bool(val)
        if not active:
            return False
        if name == "define":
            self._define(d, args)
        elif name == "undef":
            if not args or args[0].kind != "id":
                raise _perr("#undef expects a macro name", args[0].loc if args else d.loc)
            self.macros.pop(args[0].text, None)
        elif name == "include":
            self._include(d, args, sf, out)
        elif name == "pragma":
            if args and args[0].kind == "id" and args[0].text == "once":
                self.once.add(_norm(sf.path))
        elif name == "error":
            msg = " ".join(t.text for t in args)
            raise _perr(f"#error {msg}".rstrip(), d.loc)
        elif name in ("warning", "line", "version", "extension"):
            pass
        elif d.kind == "int":
            pass                               # `# 12 "file"` line marker
        else:
            raise _perr(f"unknown preprocessor directive '#{d.text}'", d.loc)
        return True

    def _define(self, d, args):
        if not args or args[0].kind != "id":
            raise _perr("#define expects a macro name", args[0].loc if args else d.loc)
        name_tok = args[0]
        name = name_tok.text
        rest = args[1:]
        if rest and rest[0].kind == "op" and rest[0].text == "(" and not rest[0].space:
            params: list[str] = []
            variadic = False
            i = 1
            expect_param = True
            while True:
                if i >= len(rest):
                    raise _perr("unterminated macro parameter list", rest[-1].loc)
                t = rest[i]
                if t.kind == "op" and t.text == ")":
                    if params and expect_param:
                        raise _perr("expected a parameter name", t.loc)
                    i += 1
                    break
                if not expect_param:
                    if t.kind == "op" and t.text == ",":
                        expect_param = True
                        i += 1
                        continue
                    raise _perr(f"expected ',' or ')' in macro parameters, found '{t.text}'", t.loc)
                if t.kind == "id" and not variadic:
                    params.append(t.text)
                elif t.kind == "op" and t.text == "...":
                    variadic = True
                    params.append("__VA_ARGS__")
                else:
                    raise _perr(f"expected a parameter name, found '{t.text}'", t.loc)
                expect_param = False
                i += 1
            body = [t.copy() for t in rest[i:]]
            self.macros[name] = _Macro(name, params, variadic, body, True)
        else:
            body = [t.copy() for t in rest]
            self.macros[name] = _Macro(name, [], False, body, False)
        if body:
            body[0].space = False
        for t in body:
            t.bol = False

    def _include(self, d, args, sf, out):
        if not args:
            raise _perr("#include expects a file name", d.loc)
        t = args[0]
        if t.kind == "str":
            fname = t.text[1:-1]
            dirs = [os.path.dirname(sf.path) or "."] + self.include_paths
        elif t.kind == "op" and t.text == "<":
            parts = []
            for u in args[1:]:
                if u.kind == "op" and u.text == ">":
                    break
                parts.append((" " if u.space and parts else "") + u.text)
            else:
                raise _perr("expected '>' after #include <file", t.loc)
            fname = "".join(parts)
            dirs = list(self.include_paths)
        else:
            raise _perr(f"#include expects \"file\" or <file>, found '{t.text}'", t.loc)
        path = None
        if os.path.isabs(fname):
            if os.path.isfile(fname):
                path = fname
        else:
            for dd in dirs:
                cand = os.path.join(dd, fname)
                if os.path.isfile(cand):
                    path = cand
                    break
                if self.absent is not None:
                    self.absent.append(cand)
        if path is None:
            raise _perr(f"cannot find include file '{fname}'", t.loc)
        if self.deps is not None:
            self.deps.append(path)
        if _norm(path) in self.once:
            return
        if self.depth >= _MAX_INCLUDE_DEPTH:
            raise _perr("#include nested too deeply (recursive include?)", t.loc)
        try:
            text = read_source(path)
        except OSError as e:
            raise _perr(f"cannot read include file '{fname}': {e}", t.loc)
        nsf = SourceFile(path, text)
        self.depth += 1
        try:
            self._process(nsf, tokenize(text, nsf), out)
        finally:
            self.depth -= 1

    # ------------------------------------------------------------------ expansion

    def _expand_macro(self, m: _Macro, t: Token, reader: _Reader):
        """Expansion of the use of `m` at `t` (reading arguments from `reader`), or None when a
        function-like macro name is not followed by `(`."""
        self.expansions += 1
        if self.expansions > _MAX_EXPANSIONS:
            raise _perr("macro expansion too deep or too long", t.loc)
        hide = (t.hide or _EMPTY) | {m.name}
        loc = t.loc
        if not m.func:
            res = [b.copy(loc=loc, hide=hide) for b in m.body]
            res = self._paste_all([[x] if not _is_paste(x) else None for x in res], loc, hide)
            if res:
                res[0].space = t.space
            return res
        nxt = reader.peek()
        if nxt is None or nxt.kind != "op" or nxt.text != "(":
            return None
        reader.next()
        args = self._collect_args(reader, t)
        np = len(m.params)
        if m.variadic:
            if len(args) > np:
                va = args[np - 1]
                for extra in args[np:]:
                    va = va + [Token("op", ",", None, "", loc, False, False)] + extra
                args = args[:np - 1] + [va]
            elif len(args) == np - 1:
                args = args + [[]]
        if np == 0 and len(args) == 1 and not args[0]:
            args = []
        if len(args) != np:
            raise _perr(f"macro '{m.name}' expects {np} argument(s), got {len(args)}", t.loc)
        pidx = {p: i for i, p in enumerate(m.params)}
        expanded: dict[int, list] = {}
        body = m.body
        segs = []
        nb = len(body)
        i = 0
        while i < nb:
            b = body[i]
            if b.kind == "op" and b.text == "#" and i + 1 < nb and body[i + 1].kind == "id" \
                    and body[i + 1].text in pidx:
                arg = args[pidx[body[i + 1].text]]
                s = _spell(arg)
                segs.append([Token("str", '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"', s, "",
                                   loc, False, b.space, hide)])
                i += 2
                continue
            if b.kind == "op" and b.text == "##":
                segs.append(None)
                i += 1
                continue
            if b.kind == "id" and b.text in pidx:
                k = pidx[b.text]
                near_paste = (i + 1 < nb and _is_paste(body[i + 1])) or (i > 0 and _is_paste(body[i - 1]))
                if near_paste:
                    toks = [a.copy(hide=(a.hide or _EMPTY) | hide) for a in args[k]]
                    if not toks:
                        toks = [Token("pm", "", None, "", loc, False, False, hide)]
                else:
                    if k not in expanded:
                        expanded[k] = self.expand_list(args[k])
                    toks = [a.copy(hide=(a.hide or _EMPTY) | hide) for a in expanded[k]]
                if toks:
                    toks[0].space = b.space
                segs.append(toks)
                i += 1
                continue
            segs.append([b.copy(loc=loc, hide=hide)])
            i += 1
        res = self._paste_all(segs, loc, hide)
        if res:
            res[0].space = t.space
        return res

    def _paste_all(self, segs, loc, hide):
        res: list[Token] = []
        pending = False
        for seg in segs:
            if seg is None:
                pending = True
                continue
            if pending and res and seg:
                left = res.pop()
                res.extend(self._paste(left, seg[0], loc, hide))
                res.extend(seg[1:])
            else:
                res.extend(seg)
            pending = False
        return [x for x in res if x.kind != "pm"]

    def _paste(self, a: Token, b: Token, loc, hide):
        if a.kind == "pm":
            return [b]
        if b.kind == "pm":
            return [a]
        text = a.text + b.text
        toks = tokenize(text, SourceFile("<paste>", text))
        if len(toks) == 1 and toks[0].kind != "bad":
            r = toks[0]
            return [Token(r.kind, r.text, r.value, r.suffix, loc, False, a.space, hide)]
        if len(toks) == 2 and text in (">>", ">>="):
            return [Token("op", ">", None, "", loc, False, a.space, hide),
                    Token("op", text[1:], None, "", loc, False, False, hide)]
        raise _perr(f"pasting '{a.text}' and '{b.text}' does not give a valid token", loc)

    def _collect_args(self, reader: _Reader, name_tok: Token) -> list[list[Token]]:
        args: list[list[Token]] = []
        cur: list[Token] = []
        depth = 0
        while True:
            t = reader.next()
            if t is None:
                raise _perr(f"unterminated invocation of macro '{name_tok.text}'", name_tok.loc)
            if t.kind == "op":
                tx = t.text
                if tx in ("(", "[", "{"):
                    depth += 1
                elif tx in (")", "]", "}"):
                    if depth == 0:
                        if tx == ")":
                            args.append(cur)
                            return args
                    else:
                        depth -= 1
                elif tx == "," and depth == 0:
                    args.append(cur)
                    cur = []
                    continue
            cur.append(t)

    def expand_list(self, toks: list[Token]) -> list[Token]:
        """Fully macro-expand a token list (macro arguments, #if expressions)."""
        reader = _Reader(toks)
        out: list[Token] = []
        macros = self.macros
        while True:
            t = reader.next()
            if t is None:
                return out
            if t.kind == "id":
                m = macros.get(t.text)
                if m is not None and (t.hide is None or t.text not in t.hide):
                    exp = self._expand_macro(m, t, reader)
                    if exp is not None:
                        reader.push(exp)
                        continue
            out.append(t)

    # ------------------------------------------------------------------ #if expressions

    def _eval_condition(self, args: list[Token], d: Token) -> int:
        if not args:
            raise _perr(f"#{d.text} expects an expression", d.loc)
        # replace `defined X` / `defined(X)` before expansion
        toks: list[Token] = []
        i = 0
        n = len(args)
        while i < n:
            t = args[i]
            if t.kind == "id" and t.text == "defined":
                j = i + 1
                paren = j < n and args[j].kind == "op" and args[j].text == "("
                if paren:
                    j += 1
                if j >= n or args[j].kind != "id":
                    raise _perr("'defined' expects a macro name", args[j].loc if j < n else t.loc)
                v = 1 if args[j].text in self.macros else 0
                j += 1
                if paren:
                    if j >= n or args[j].kind != "op" or args[j].text != ")":
                        raise _perr("expected ')' after 'defined(NAME'", args[j].loc if j < n else t.loc)
                    j += 1
                toks.append(Token("int", str(v), v, "", t.loc, False, t.space))
                i = j
                continue
            toks.append(t)
            i += 1
        toks = self.expand_list(toks)
        ev = _CondEval(toks, d)
        v = ev.parse(0)
        if ev.i < len(toks):
            raise _perr(f"unexpected '{toks[ev.i].text}' in #{d.text} expression", toks[ev.i].loc)
        return v


def _is_paste(t):
    return t.kind == "op" and t.text == "##"


def _spell(toks):
    parts = []
    for k, t in enumerate(toks):
        if k and t.space:
            parts.append(" ")
        parts.append(t.text)
    return "".join(parts)


def _norm(path):
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


_BIN_PREC = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}


class _CondEval:
    """Integer constant expression evaluator for #if / #elif."""

    def __init__(self, toks, d):
        self.toks = toks
        self.i = 0
        self.d = d
        self.depth = 0

    def _tok(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _fail(self, msg):
        t = self._tok()
        raise _perr(msg, t.loc if t is not None else self.d.loc)

    def _binop(self):
        t = self._tok()
        if t is None or t.kind != "op":
            return None, 0
        tx = t.text
        if tx == ">" and self.i + 1 < len(self.toks):
            n = self.toks[self.i + 1]
            if n.kind == "op" and not n.space and n.text == ">":
                return ">>", 2
        if tx in _BIN_PREC:
            return tx, 1
        return None, 0

    def parse(self, min_prec):
        self.depth += 1
        if self.depth > 200:
            self._fail("#if expression nested too deeply")
        lhs = self.unary()
        while True:
            op, width = self._binop()
            if op is None:
                t = self._tok()
                if t is not None and t.kind == "op" and t.text == "?" and min_prec == 0:
                    self.i += 1
                    a = self.parse(0)
                    t2 = self._tok()
                    if t2 is None or t2.kind != "op" or t2.text != ":":
                        self._fail("expected ':' in #if expression")
                    self.i += 1
                    b = self.parse(0)
                    lhs = a if lhs else b
                    continue
                break
            prec = _BIN_PREC[op]
            if prec < min_prec:
                break
            self.i += width
            rhs = self.parse(prec + 1)
            lhs = self._apply(op, lhs, rhs)
        self.depth -= 1
        return lhs

    def _apply(self, op, a, b):
        if op == "||":
            return 1 if (a or b) else 0
        if op == "&&":
            return 1 if (a and b) else 0
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        if op == "&":
            return a & b
        if op == "==":
            return int(a == b)
        if op == "!=":
            return int(a != b)
        if op == "<":
            return int(a < b)
        if op == ">":
            return int(a > b)
        if op == "<=":
            return int(a <= b)
        if op == ">=":
            return int(a >= b)
        if op in ("<<", ">>"):
            if b < 0 or b > 4096:
                self._fail("bad shift count in #if expression")
            return a << b if op == "<<" else a >> b
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            self._fail("division by zero in #if expression")
        q = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            q = -q
        if op == "/":
            return q
        return a - q * b

    def unary(self):
        t = self._tok()
        if t is None:
            self._fail("unexpected end of #if expression")
        self.i += 1
        if t.kind == "int":
            return t.value
        if t.kind == "id":
            return 1 if t.text == "true" else 0
        if t.kind == "op":
            if t.text == "(":
                v = self.parse(0)
                t2 = self._tok()
                if t2 is None or t2.kind != "op" or t2.text != ")":
                    self._fail("expected ')' in #if expression")
                self.i += 1
                return v
            if t.text in ("-", "+", "!", "~"):
                self.depth += 1
                if self.depth > 200:
                    self._fail("#if expression nested too deeply")
                v = self.unary()
                self.depth -= 1
                return -v if t.text == "-" else v if t.text == "+" else int(not v) if t.text == "!" else ~v
        if t.kind == "bad":
            raise error("E0001", t.value, t.loc)
        self.i -= 1
        self._fail(f"unexpected '{t.text}' in #{self.d.text} expression")


def preprocess(text: str, path: str, include_paths=(), defines=None, deps: list | None = None,
               absent: list | None = None) -> list[Token]:
    """Tokens of `text` after preprocessing, ending with an EOF token.

    `deps`, if given, gets the path of every file `#include`d, and `absent` every include candidate probed
    before the file found (for the front-end cache: a file created there later would shadow the include)."""
    pp = Preprocessor(include_paths, defines)
    pp.deps = deps
    pp.absent = absent
    return pp.run(text, path)
