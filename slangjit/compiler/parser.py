"""Recursive-descent parser for Slang: tokens (after preprocessing) -> `ast.Module`.

Public API:
    parse_module(text, path, include_paths=(), defines=None) -> ast.Module

Errors are CompileErrors: E0001 lexical, E0010 unexpected token ("expected X, found 'Y'"),
E0011 unterminated block / comment, E0020 preprocessor.  No other exception escapes.

Ambiguities are resolved the way Slang does:
  * `a < b ...` after a name is a generic application when the arguments parse and the
    closing `>` is followed by one of `( :: . ) , ; ] } { >` or the end of input; otherwise `<`
    is less-than.
  * `(T)x` is a cast when `T` parses as a type and is followed by something that can start an
    operand (identifier, literal, `(`, `!`, `~`; also `-`/`+` when `T` is a builtin or declared type).
  * At statement level, `Type name ...` (a type followed by an identifier and `= ; , [ :`) is a
    declaration; anything else is an expression statement.
  * `no_diff expr` in an expression is represented as `Call(Name("no_diff"), [expr])`, the same
    tree as `no_diff(expr)`.
"""
from __future__ import annotations

import re
import sys

from . import ast
from .lexer import Token
from .preprocessor import preprocess
from .source import CompileError, Diagnostic, Loc, SourceFile, error

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
    "extension", "let", "var", "func", "property", "true", "false", "this", "sizeof", "alignof",
    "countof", "is", "as", "where", "operator", "__subscript", "__init", "cbuffer", "tbuffer",
    "associatedtype", "using", "__generic", "implementing", "__include", "in", "out", "inout",
}

MODIFIERS = {
    "static", "const", "uniform", "groupshared", "public", "private", "internal", "export", "extern",
    "inline", "override", "no_diff", "nointerpolation", "precise", "mutating", "nonmutating",
    "__extern_cpp", "__exported", "shared", "volatile", "row_major", "column_major", "snorm", "unorm",
    "linear", "centroid", "noperspective", "globallycoherent", "__global", "__prefix", "__postfix",
    "constexpr", "__noinline",
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


class Parser:
    def __init__(self, toks: list[Token], path: str):
        self.toks = toks
        self.pos = 0
        self.last = len(toks) - 1
        self.path = path
        self.depth = 0
        self.known_types: set[str] = set()
        self._generic_fail: dict[int, _Fail] = {}   # `<` positions where generic args failed
        self.generic_depth = 0                      # inside how many generic argument lists
        self.spec = 0                               # inside how many speculative parses
        self.depth_hit = None                       # where speculation first ran too deep
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

    # ------------------------------------------------------------------ module

    def parse_module(self) -> list:
        decls = []
        while self.toks[self.pos].kind != "eof":
            decls.extend(self.parse_decls("module"))
        return decls

    # ------------------------------------------------------------------ attributes

    def parse_attrs(self) -> list:
        attrs = []
        while self.at("["):
            open_tok = self.advance()
            while True:
                t = self.toks[self.pos]
                if t.kind != "id":
                    self.fail("an attribute name", t)
                self.advance()
                name = t.text
                while self.at("::") or (self.at(".") and self.peek().kind == "id"):
                    sep = self.advance().text
                    name += sep + self.ident().text
                args = []
                if self.at("("):
                    p = self.advance()
                    if not self.at(")"):
                        while True:
                            args.append(self.parse_assign())
                            if not self.accept(","):
                                break
                    self.expect_close(")", p)
                attrs.append(ast.Attribute(name, args, loc=t.loc))
                if not self.accept(","):
                    break
            self.expect_close("]", open_tok)
        return attrs

    # ------------------------------------------------------------------ declarations

    def parse_decls(self, ctx: str) -> list:
        """One declaration (several VarDecls for `int a, b;`).  ctx: module/struct/interface/local."""
        self.enter()
        try:
            return self._parse_decls(ctx)
        finally:
            self.depth -= 1

    def _parse_decls(self, ctx: str) -> list:
        start = self.toks[self.pos]
        attrs = self.parse_attrs()
        mods: set = set()
        gprefix = None
        while True:
            t = self.toks[self.pos]
            if t.kind != "id":
                break
            if t.text == "__generic" and self.peek().text == "<":
                self.advance()
                gprefix = (gprefix or []) + self.parse_generic_params()
                continue
            if t.text in MODIFIERS and self.peek().kind == "id":
                mods.add(t.text)
                self.advance()
                continue
            break
        t = self.toks[self.pos]
        loc = t.loc
        if t.kind == "op" and t.text == ";" and not attrs and not mods:
            self.advance()
            return []
        if t.kind == "id":
            kw = t.text
            if kw in ("struct", "class"):
                d = self.parse_struct()
            elif kw == "interface":
                d = self.parse_interface()
            elif kw == "extension":
                d = self.parse_extension()
            elif kw == "typealias":
                d = self.parse_typealias()
            elif kw == "typedef":
                d = self.parse_typedef()
            elif kw == "enum":
                d = self.parse_enum()
            elif kw == "namespace":
                d = self.parse_namespace()
            elif kw == "using":
                d = self.parse_using()
            elif kw in ("cbuffer", "tbuffer"):
                d = self.parse_cbuffer()
            elif kw in ("import", "__include", "module", "implementing") and \
                    (self.peek().kind in ("id", "str")):
                d = self.parse_import()
            elif kw == "associatedtype":
                d = self.parse_assoctype()
            elif kw == "property":
                d = self.parse_property()
            elif kw == "__subscript":
                d = self.parse_subscript()
            elif kw == "__init":
                d = self.parse_init()
            elif kw == "func":
                d = self.parse_func_keyword()
            elif kw in ("let", "var"):
                ds = self.parse_let_var()
                for x in ds:
                    x.attrs = list(attrs)
                    x.mods = set(mods)
                return ds
            else:
                d = None
            if d is not None:
                if gprefix:
                    if hasattr(d, "generic_params"):
                        d.generic_params = gprefix + d.generic_params
                d.attrs = attrs + d.attrs
                d.mods = mods | d.mods
                return [d]
        # `Type name ...`: a function or variable(s)
        ty = self.parse_type()
        t = self.toks[self.pos]
        if t.kind == "id" and t.text == "operator":
            self.advance()
            name = self.parse_operator_name()
            d = self.parse_func_rest(name, ty, [], t.loc)
        else:
            nt = self.ident("a declaration name")
            if self.at("<") and ctx != "local":
                gp = self.parse_generic_params()
                if not self.at("("):
                    self.fail("'('")
                d = self.parse_func_rest(nt.text, ty, gp, nt.loc)
            elif self.at("("):
                d = self.parse_func_rest(nt.text, ty, [], nt.loc)
            else:
                ds = self.parse_declarators(ty, nt)
                for x in ds:
                    x.attrs = list(attrs)
                    x.mods = set(mods)
                return ds
        if gprefix:
            d.generic_params = gprefix + d.generic_params
        d.attrs = attrs
        d.mods = mods
        return [d]

    def parse_operator_name(self) -> str:
        t = self.toks[self.pos]
        if t.kind != "op":
            self.fail("an operator", t)
        if t.text == "(" and self.peek().text == ")":
            self.advance()
            self.advance()
            return "operator()"
        if t.text == "[" and self.peek().text == "]":
            self.advance()
            self.advance()
            return "operator[]"
        self.advance()
        n = self.toks[self.pos]
        if t.text == ">" and n.kind == "op" and not n.space and n.text in (">", ">="):
            self.advance()
            return "operator>" + n.text
        if t.text in ("(", ")", "[", "]", "{", "}", ";", ".", "::", "#", "##"):
            self.fail("an operator", t)
        return "operator" + t.text

    def parse_declarators(self, ty, name_tok) -> list:
        decls = []
        while True:
            vty = self.parse_array_dims(ty)
            sem = self.parse_semantic()
            init = None
            if self.accept("="):
                init = self.parse_assign()
            decls.append(ast.VarDecl(name_tok.text, vty, init, sem, "", loc=name_tok.loc))
            if not self.accept(","):
                break
            name_tok = self.ident("a variable name")
        self.expect(";")
        return decls

    def parse_array_dims(self, ty):
        if not self.at("["):
            return ty
        dims = []
        while self.at("["):
            o = self.advance()
            if self.at("]"):
                dims.append((None, o.loc))
            else:
                dims.append((self.parse_expr(), o.loc))
            self.expect_close("]", o)
        for size, loc in reversed(dims):
            ty = ast.ArrayTypeExpr(ty, size, loc=loc)
        return ty

    def parse_semantic(self):
        if not self.at(":"):
            return None
        self.advance()
        t = self.ident("a semantic name")
        sem = t.text
        if self.at("("):
            # register(u0) / packoffset(c0.x)
            o = self.advance()
            parts = []
            depth = 1
            while True:
                u = self.toks[self.pos]
                if u.kind == "eof":
                    self.expect_close(")", o)
                self.advance()
                if u.text == "(":
                    depth += 1
                elif u.text == ")":
                    depth -= 1
                    if depth == 0:
                        break
                parts.append(u.text)
            sem += "(" + "".join(parts) + ")"
        return sem

    def parse_let_var(self) -> list:
        kwt = self.advance()
        decls = []
        while True:
            nt = self.ident("a variable name")
            ty = None
            if self.accept(":"):
                ty = self.parse_type()
            init = None
            if self.accept("="):
                init = self.parse_assign()
            decls.append(ast.VarDecl(nt.text, ty, init, None, kwt.text, loc=nt.loc))
            if not self.accept(","):
                break
        self.expect(";")
        return decls

    def parse_params(self) -> list:
        o = self.expect("(")
        params = []
        if self.at("void") and self.peek().text == ")":
            self.advance()
        if self.at(")"):
            self.advance()
            return params
        while True:
            params.append(self.parse_param())
            if self.accept(","):
                continue
            self.expect_close(")", o)
            return params

    def parse_param(self) -> ast.Param:
        attrs = self.parse_attrs()
        start = self.toks[self.pos]
        direction = "in"
        mods: set = set()
        while True:
            t = self.toks[self.pos]
            if t.kind != "id":
                break
            if t.text in DIRECTIONS:
                d = DIRECTIONS[t.text]
                direction = "inout" if (direction == "in" and d == "out" and "in" in mods) else d
                if t.text == "in":
                    mods.add("in")
                self.advance()
                continue
            if t.text in PARAM_MODS and self.peek().kind == "id":
                mods.add(t.text)
                self.advance()
                continue
            break
        mods.discard("in")
        t = self.toks[self.pos]
        if self.is_ident(t) and self.peek().text == ":":
            # modern spelling `name : Type`
            self.advance()
            self.advance()
            ty = self.parse_type(allow_pack=True)
            name = t.text
            loc = t.loc
        else:
            ty = self.parse_type(allow_pack=True)
            name = ""
            loc = start.loc
            t = self.toks[self.pos]
            if self.is_ident(t):
                self.advance()
                name = t.text
                loc = t.loc
        ty = self.parse_array_dims(ty)
        sem = self.parse_semantic()
        default = None
        if self.accept("="):
            default = self.parse_assign()
        return ast.Param(name, ty, direction, default, sem, attrs, mods, loc=loc)

    def parse_func_rest(self, name, ret_type, gparams, loc) -> ast.FuncDecl:
        params = self.parse_params()
        sem = None
        if self.accept("->"):
            ret_type = self.parse_type()
        if self.at(":"):
            sem = self.parse_semantic()
        where = self.parse_where()
        body = self.parse_func_body()
        return ast.FuncDecl(name, params, ret_type, body, gparams, where, sem, loc=loc)

    def parse_func_body(self):
        if self.at("{"):
            return self.parse_block()
        if self.accept(";"):
            return None
        self.fail("'{' or ';'")

    def parse_func_keyword(self) -> ast.FuncDecl:
        self.advance()
        t = self.toks[self.pos]
        if t.kind == "id" and t.text == "operator":
            self.advance()
            name = self.parse_operator_name()
            gp = []
        else:
            self.ident("a function name")
            name = t.text
            gp = self.parse_generic_params() if self.at("<") else []
        params = self.parse_params()
        ret = None
        if self.accept("->"):
            ret = self.parse_type()
        where = self.parse_where()
        body = self.parse_func_body()
        return ast.FuncDecl(name, params, ret, body, gp, where, None, loc=t.loc)

    def parse_init(self) -> ast.FuncDecl:
        t = self.advance()
        gp = self.parse_generic_params() if self.at("<") else []
        params = self.parse_params()
        where = self.parse_where()
        body = self.parse_func_body()
        return ast.FuncDecl("__init", params, None, body, gp, where, None, loc=t.loc)

    def parse_generic_params(self) -> list:
        o = self.expect("<")
        params = []
        if self.accept(">"):
            return params
        while True:
            t = self.toks[self.pos]
            if t.kind == "id" and t.text == "let":
                self.advance()
                nt = self.ident("a generic parameter name")
                ty = self.parse_type() if self.accept(":") else None
                default = self.parse_binary(9) if self.accept("=") else None
                params.append(ast.GenericParam(nt.text, "value", ty, default, loc=nt.loc))
            elif t.kind == "id" and t.text == "each":
                self.advance()
                nt = self.ident("a type pack name")
                ty = self.parse_type() if self.accept(":") else None
                self.known_types.add(nt.text)
                params.append(ast.GenericParam(nt.text, "pack", ty, None, loc=nt.loc))
            elif self.is_ident(t) and self.peek().text in (":", ",", ">", "="):
                self.advance()
                ty = self.parse_type() if self.accept(":") else None
                default = self.parse_type() if self.accept("=") else None
                self.known_types.add(t.text)
                params.append(ast.GenericParam(t.text, "type", ty, default, loc=t.loc))
            elif t.kind == "id" and t.text in ("typename", "class") and self.is_ident(self.peek()):
                self.advance()
                nt = self.ident()
                ty = self.parse_type() if self.accept(":") else None
                default = self.parse_type() if self.accept("=") else None
                self.known_types.add(nt.text)
                params.append(ast.GenericParam(nt.text, "type", ty, default, loc=nt.loc))
            else:
                ty = self.parse_type()
                nt = self.ident("a generic parameter name")
                default = self.parse_binary(9) if self.accept("=") else None
                params.append(ast.GenericParam(nt.text, "value", ty, default, loc=nt.loc))
            if self.accept(","):
                continue
            if self.toks[self.pos].kind == "eof":
                self.expect_close(">", o)
            self.expect(">", "',' or '>'")
            return params

    def parse_where(self) -> list:
        clauses = []
        while self.at("where"):
            self.advance()
            if self.at("optional"):
                self.advance()
            while True:
                start = self.toks[self.pos]
                subj = self.parse_type()
                self.expect(":")
                clauses.append(ast.WhereClause(subj, self.parse_type(), loc=start.loc))
                while self.at(","):
                    # `where T : IA, U : IB` or `where T : IA, IB`
                    save = self.pos
                    self.advance()
                    try:
                        self._spec(self.parse_type)
                        is_new = self.at(":")
                    except _Fail:
                        is_new = False
                    self.pos = save + 1
                    if is_new:
                        break
                    clauses.append(ast.WhereClause(subj, self.parse_type(), loc=start.loc))
                else:
                    break
        return clauses

    def parse_bases(self) -> list:
        bases = []
        if self.accept(":"):
            while True:
                bases.append(self.parse_type())
                if not self.accept(","):
                    break
        return bases

    def parse_member_body(self, ctx) -> list:
        o = self.expect("{")
        members = []
        while not self.at("}"):
            self.eof_in_body(o)
            members.extend(self.parse_decls(ctx))
        self.advance()
        return members

    def parse_struct(self):
        kw = self.advance()
        nt = self.ident("a struct name")
        self.known_types.add(nt.text)
        gp = self.parse_generic_params() if self.at("<") else []
        bases = self.parse_bases()
        where = self.parse_where()
        if self.accept(";"):
            return ast.StructDecl(nt.text, [], gp, bases, where, kw.text == "class", loc=nt.loc)
        members = self.parse_member_body("struct")
        self.accept(";")
        return ast.StructDecl(nt.text, members, gp, bases, where, kw.text == "class", loc=nt.loc)

    def parse_interface(self):
        self.advance()
        nt = self.ident("an interface name")
        self.known_types.add(nt.text)
        gp = self.parse_generic_params() if self.at("<") else []
        bases = self.parse_bases()
        self.parse_where()
        members = self.parse_member_body("interface")
        self.accept(";")
        return ast.InterfaceDecl(nt.text, members, gp, bases, loc=nt.loc)

    def parse_extension(self):
        kw = self.advance()
        gp = self.parse_generic_params() if self.at("<") else []
        target = self.parse_type()
        bases = self.parse_bases()
        where = self.parse_where()
        members = self.parse_member_body("struct")
        self.accept(";")
        return ast.ExtensionDecl(target, members, gp, bases, where, loc=kw.loc)

    def parse_typealias(self):
        self.advance()
        nt = self.ident("a type alias name")
        self.known_types.add(nt.text)
        gp = self.parse_generic_params() if self.at("<") else []
        if self.at(":"):
            # `typealias X : IFoo = T;` (constraint ignored)
            self.advance()
            self.parse_type()
        self.expect("=")
        ty = self.parse_type()
        self.expect(";")
        return ast.TypeAliasDecl(nt.text, ty, gp, loc=nt.loc)

    def parse_typedef(self):
        self.advance()
        ty = self.parse_type()
        nt = self.ident("a type name")
        self.known_types.add(nt.text)
        ty = self.parse_array_dims(ty)
        self.expect(";")
        return ast.TypeAliasDecl(nt.text, ty, [], loc=nt.loc)

    def parse_assoctype(self):
        self.advance()
        nt = self.ident("an associated type name")
        self.known_types.add(nt.text)
        cons = self.parse_bases()
        for w in self.parse_where():
            cons.append(w.constraint)
        self.expect(";")
        return ast.AssocTypeDecl(nt.text, cons, loc=nt.loc)

    def parse_enum(self):
        self.advance()
        is_class = False
        if self.at("class") or self.at("struct"):
            self.advance()
            is_class = True
        nt = self.ident("an enum name")
        self.known_types.add(nt.text)
        underlying = self.parse_type() if self.accept(":") else None
        o = self.expect("{")
        cases = []
        while not self.at("}"):
            self.eof_in_body(o)
            self.parse_attrs()
            ct = self.ident("an enum case name")
            val = self.parse_assign() if self.accept("=") else None
            cases.append(ast.EnumCase(ct.text, val, loc=ct.loc))
            if not self.accept(","):
                self.eof_in_body(o)
                if not self.at("}"):
                    self.fail("',' or '}'")
        self.advance()
        self.accept(";")
        return ast.EnumDecl(nt.text, cases, underlying, is_class, loc=nt.loc)

    def parse_namespace(self):
        self.advance()
        nt = self.ident("a namespace name")
        name = nt.text
        while self.at(".") or self.at("::"):
            self.advance()
            name += "." + self.ident().text
        members = self.parse_member_body("module")
        self.accept(";")
        return ast.NamespaceDecl(name, members, loc=nt.loc)

    def parse_using(self):
        kw = self.advance()
        if self.at("namespace"):
            self.advance()
        elif self.is_ident(self.toks[self.pos]) and self.peek().text == "=":
            nt = self.advance()
            self.advance()
            ty = self.parse_type()
            self.expect(";")
            self.known_types.add(nt.text)
            return ast.TypeAliasDecl(nt.text, ty, [], loc=nt.loc)
        target = self.parse_type()
        self.expect(";")
        return ast.UsingDecl(target, loc=kw.loc)

    def parse_cbuffer(self):
        self.advance()
        nt = self.ident("a buffer name")
        self.parse_semantic()
        members = self.parse_member_body("struct")
        self.accept(";")
        return ast.CBufferDecl(nt.text, members, loc=nt.loc)

    def parse_import(self):
        kw = self.advance()
        kind = {"import": "import", "__include": "include", "module": "module",
                "implementing": "implementing"}[kw.text]
        t = self.toks[self.pos]
        if t.kind == "str":
            self.advance()
            d = ast.ImportDecl(t.value, True, kind, loc=kw.loc)
        else:
            name = self.ident("a module name").text
            while self.at(".") or self.at("::"):
                self.advance()
                name += "." + self.ident("a module name").text
            d = ast.ImportDecl(name, False, kind, loc=kw.loc)
        self.expect(";")
        return d

    def parse_property(self):
        self.advance()
        t = self.toks[self.pos]
        if self.is_ident(t) and self.peek().text == ":":
            self.advance()
            self.advance()
            name_tok = t
            ty = self.parse_type()
        else:
            ty = self.parse_type()
            name_tok = self.ident("a property name")
        if self.accept(";"):
            return ast.PropertyDecl(name_tok.text, ty, [], loc=name_tok.loc)
        accessors = self.parse_accessors(ty)
        return ast.PropertyDecl(name_tok.text, ty, accessors, loc=name_tok.loc)

    def parse_subscript(self):
        kw = self.advance()
        params = self.parse_params()
        self.expect("->")
        ret = self.parse_type()
        if self.accept(";"):
            return ast.SubscriptDecl(params, ret, [], loc=kw.loc)
        accessors = self.parse_accessors(ret)
        return ast.SubscriptDecl(params, ret, accessors, loc=kw.loc)

    def parse_accessors(self, value_type) -> list:
        o = self.expect("{")
        accs = []
        while not self.at("}"):
            self.eof_in_body(o)
            attrs = self.parse_attrs()
            mods = set()
            while self.toks[self.pos].kind == "id" and self.toks[self.pos].text in MODIFIERS:
                mods.add(self.advance().text)
            t = self.toks[self.pos]
            if t.kind != "id" or t.text not in ("get", "set", "ref", "modify"):
                self.fail("'get', 'set' or 'ref'", t)
            self.advance()
            param = None
            if t.text == "set" and self.at("("):
                o2 = self.advance()
                pt = self.toks[self.pos]
                if self.is_ident(pt) and self.peek().text == ")":
                    # `set(v)`: the parameter has the property's type
                    self.advance()
                    param = ast.Param(pt.text, value_type, loc=pt.loc)
                else:
                    param = self.parse_param()
                self.expect_close(")", o2)
            body = self.parse_func_body()
            accs.append(ast.Accessor(t.text, param, body, mods, attrs, loc=t.loc))
        self.advance()
        return accs

    # ------------------------------------------------------------------ types

    def parse_type(self, allow_pack: bool = False):
        self.enter()
        try:
            return self._parse_type(allow_pack)
        finally:
            self.depth -= 1

    def _parse_type(self, allow_pack):
        t = self.toks[self.pos]
        if t.kind != "id":
            self.fail("a type", t)
        tx = t.text
        if tx == "This":
            self.advance()
            ty = ast.ThisTypeExpr(loc=t.loc)
        elif tx == "expand" and allow_pack:
            self.advance()
            return ast.ExpandExpr(self.parse_type(allow_pack), loc=t.loc)
        elif tx == "each" and allow_pack:
            self.advance()
            return ast.EachExpr(self.parse_type(allow_pack), loc=t.loc)
        elif tx in RESERVED:
            self.fail("a type", t)
        else:
            self.advance()
            ty = ast.Name(tx, loc=t.loc)
        toks = self.toks
        while True:
            t = toks[self.pos]
            if t.kind != "op":
                break
            tx = t.text
            if tx == "<":
                self.advance()
                ty = ast.GenericApp(ty, self.parse_generic_args(t), loc=ty.loc)
            elif tx == "." or tx == "::":
                nt = toks[self.pos + 1] if self.pos < self.last else t
                if nt.kind != "id":
                    break
                self.advance()
                self.advance()
                ty = ast.Member(ty, nt.text, tx, loc=nt.loc)
            elif tx == "*":
                self.advance()
                ty = ast.PointerTypeExpr(ty, loc=t.loc)
            elif tx == "[":
                ty = self.parse_array_dims(ty)
            else:
                break
        return ty

    def parse_generic_args(self, open_tok) -> list:
        """Arguments after `<` up to and including the closing `>`.  Failures are memoised by
        position so that speculation (`a < b < c ...`) stays linear."""
        key = self.pos
        f = self._generic_fail.get(key)
        if f is not None:
            raise f
        self.generic_depth += 1
        try:
            return self._parse_generic_args(open_tok)
        except _Fail as f:
            self._generic_fail[key] = f
            raise
        finally:
            self.generic_depth -= 1

    def _parse_generic_args(self, open_tok) -> list:
        args = []
        if self.accept(">"):
            return args
        while True:
            args.append(self.parse_generic_arg())
            if self.accept(","):
                continue
            if self.toks[self.pos].kind == "eof":
                self.expect_close(">", open_tok)
            self.expect(">", "',' or '>'")
            return args

    def parse_generic_arg(self):
        save = self.pos
        t = self.toks[self.pos]
        if t.kind == "id":
            try:
                ty = self._spec(self.parse_type, True)
                nt = self.toks[self.pos]
                if nt.kind == "op" and nt.text in (",", ">"):
                    return ty
            except _Fail:
                pass
            self.pos = save
        return self.parse_binary(9)

    def try_type(self):
        save = self.pos
        try:
            return self._spec(self.parse_type)
        except _Fail:
            self.pos = save
            return None

    def is_typey(self, e, strict=False) -> bool:
        """Does the type expression `e` certainly denote a type (for cast disambiguation)?"""
        if isinstance(e, ast.Name):
            return _is_builtin_type_name(e.name) or (not strict and e.name in self.known_types)
        if isinstance(e, ast.GenericApp):
            return strict is False or self.is_typey(e.base, True)
        if isinstance(e, ast.PointerTypeExpr):
            return not strict or self.is_typey(e.element, True)
        if isinstance(e, ast.ArrayTypeExpr):
            return self.is_typey(e.element, strict)
        if isinstance(e, ast.Member):
            return not strict and self.is_typey(e.base)
        if isinstance(e, ast.ThisTypeExpr):
            return not strict
        return False

    # ------------------------------------------------------------------ statements

    def parse_block(self) -> ast.Block:
        o = self.expect("{")
        stmts = []
        while True:
            t = self.toks[self.pos]
            if t.kind == "op" and t.text == "}":
                self.advance()
                return ast.Block(stmts, loc=o.loc)
            if t.kind == "eof":
                raise _Fail("E0011", "unterminated block: '{' opened here is never closed", o.loc)
            stmts.append(self.parse_stmt())

    def parse_stmt(self):
        self.enter()
        try:
            return self._parse_stmt()
        finally:
            self.depth -= 1

    def _parse_stmt(self):
        t = self.toks[self.pos]
        tx = t.text
        if t.kind == "op":
            if tx == "{":
                return self.parse_block()
            if tx == ";":
                self.advance()
                return ast.Empty(loc=t.loc)
            if tx == "[":
                attrs = self.parse_attrs()
                s = self.parse_stmt()
                s.attrs = attrs + s.attrs
                return s
        elif t.kind == "id":
            if tx == "if":
                return self.parse_if()
            if tx == "for":
                return self.parse_for()
            if tx == "while":
                self.advance()
                o = self.expect("(")
                cond = self.parse_expr()
                self.expect_close(")", o)
                return ast.While(cond, self.parse_stmt(), loc=t.loc)
            if tx == "do":
                self.advance()
                body = self.parse_stmt()
                self.expect("while")
                o = self.expect("(")
                cond = self.parse_expr()
                self.expect_close(")", o)
                self.expect(";")
                return ast.DoWhile(body, cond, loc=t.loc)
            if tx == "switch":
                return self.parse_switch()
            if tx == "return":
                self.advance()
                if self.accept(";"):
                    return ast.Return(None, loc=t.loc)
                e = self.parse_expr()
                self.expect(";")
                return ast.Return(e, loc=t.loc)
            if tx == "break" or tx == "continue":
                self.advance()
                label = None
                if self.is_ident(self.toks[self.pos]):
                    label = self.advance().text
                self.expect(";")
                return (ast.Break if tx == "break" else ast.Continue)(label, loc=t.loc)
            if tx == "discard":
                self.advance()
                self.expect(";")
                return ast.Discard(loc=t.loc)
            if tx in ("let", "var"):
                return ast.DeclStmt(self.parse_let_var(), loc=t.loc)
            if tx in ("struct", "class", "enum", "typealias", "typedef", "interface", "extension",
                      "using"):
                return ast.DeclStmt(self.parse_decls("local"), loc=t.loc)
            if tx in ("case", "default"):
                self.fail("a statement", t)
            nt = self.toks[self.pos + 1] if self.pos < self.last else t
            if nt.kind == "op" and nt.text == ":" and tx not in RESERVED:
                self.advance()
                self.advance()
                return ast.Labeled(tx, self.parse_stmt(), loc=t.loc)
            if self.looks_like_decl():
                return ast.DeclStmt(self.parse_decls("local"), loc=t.loc)
        e = self.parse_expr()
        self.expect(";")
        return ast.ExprStmt(e, loc=t.loc)

    def looks_like_decl(self) -> bool:
        """At a statement start: is this `[mods] Type name (= ; , [ :)`?"""
        save = self.pos
        toks = self.toks
        try:
            had_mod = False
            while True:
                t = toks[self.pos]
                if t.kind == "id" and t.text in MODIFIERS and self.peek().kind == "id":
                    self.advance()
                    had_mod = True
                else:
                    break
            if self.at("[") and had_mod:
                return True
            self._spec(self.parse_type)
            t = toks[self.pos]
            if t.kind == "id" and t.text not in RESERVED:
                nt = self.peek()
                return nt.kind == "op" and nt.text in ("=", ";", ",", "[", ":")
            return False
        except _Fail:
            return False
        finally:
            self.pos = save

    def parse_if(self):
        t = self.advance()
        o = self.expect("(")
        if self.at("let") or self.at("var"):
            self.advance()
            nt = self.ident("a variable name")
            if self.accept(":"):
                self.parse_type()
            self.expect("=")
            value = self.parse_expr()
            self.expect_close(")", o)
            then = self.parse_stmt()
            else_ = self.parse_stmt() if self.accept("else") else None
            return ast.IfLet(nt.text, value, then, else_, loc=t.loc)
        cond = self.parse_expr()
        self.expect_close(")", o)
        then = self.parse_stmt()
        else_ = self.parse_stmt() if self.accept("else") else None
        return ast.If(cond, then, else_, loc=t.loc)

    def parse_for(self):
        t = self.advance()
        o = self.expect("(")
        it = self.toks[self.pos]
        if self.accept(";"):
            init = None
        elif it.kind == "id" and it.text in ("let", "var"):
            init = ast.DeclStmt(self.parse_let_var(), loc=it.loc)
        elif self.looks_like_decl():
            init = ast.DeclStmt(self.parse_decls("local"), loc=it.loc)
        else:
            e = self.parse_expr()
            self.expect(";")
            init = ast.ExprStmt(e, loc=it.loc)
        cond = None if self.at(";") else self.parse_expr()
        self.expect(";")
        step = None if self.at(")") else self.parse_expr()
        self.expect_close(")", o)
        body = self.parse_stmt()
        return ast.For(init, cond, step, body, loc=t.loc)

    def parse_switch(self):
        t = self.advance()
        o = self.expect("(")
        value = self.parse_expr()
        self.expect_close(")", o)
        ob = self.expect("{")
        cases = []
        cur = None
        while True:
            u = self.toks[self.pos]
            if u.kind == "op" and u.text == "}":
                self.advance()
                break
            if u.kind == "eof":
                raise _Fail("E0011", "unterminated switch body: '{' opened here is never closed", ob.loc)
            if u.kind == "id" and u.text in ("case", "default"):
                if cur is None or cur.body:
                    cur = ast.SwitchCase([], False, [], loc=u.loc)
                    cases.append(cur)
                self.advance()
                if u.text == "case":
                    cur.values.append(self.parse_ternary())
                else:
                    cur.is_default = True
                self.expect(":")
                continue
            if cur is None:
                self.fail("'case' or 'default'", u)
            cur.body.append(self.parse_stmt())
        return ast.Switch(value, cases, loc=t.loc)

    # ------------------------------------------------------------------ expressions

    def parse_expr(self):
        e = self.parse_assign()
        while self.at(","):
            t = self.advance()
            e = ast.Binary(",", e, self.parse_assign(), loc=t.loc)
        return e

    def parse_assign(self):
        lhs = self.parse_ternary()
        t = self.toks[self.pos]
        if t.kind == "op":
            tx = t.text
            if tx in ASSIGN_OPS:
                self.advance()
                return ast.Assign(tx, lhs, self.parse_assign(), loc=t.loc)
            if tx == ">":
                n = self.peek()
                if n.kind == "op" and n.text == ">=" and not n.space:
                    self.advance()
                    self.advance()
                    return ast.Assign(">>=", lhs, self.parse_assign(), loc=t.loc)
        return lhs

    def parse_ternary(self):
        cond = self.parse_binary(1)
        t = self.toks[self.pos]
        if t.kind == "op" and t.text == "?":
            self.advance()
            then = self.parse_expr()
            self.expect(":")
            else_ = self.parse_assign()
            return ast.Conditional(cond, then, else_, loc=t.loc)
        return cond

    def parse_binary(self, min_prec):
        lhs = self.parse_unary()
        toks = self.toks
        while True:
            t = toks[self.pos]
            tx = t.text
            width = 1
            if t.kind == "op":
                prec = BIN_PREC.get(tx)
                if prec is None:
                    return lhs
                if tx == ">":
                    n = toks[self.pos + 1] if self.pos < self.last else t
                    if n.kind == "op" and not n.space and n is not t:
                        if n.text == ">":
                            tx, prec, width = ">>", 8, 2
                        elif n.text == ">=":
                            return lhs          # `>>=` assignment
            elif t.kind == "id" and (tx == "is" or tx == "as"):
                prec = 7
            else:
                return lhs
            if prec < min_prec:
                return lhs
            self.advance()
            if width == 2:
                self.advance()
            if tx == "is":
                lhs = ast.IsExpr(lhs, self.parse_type(), loc=t.loc)
            elif tx == "as":
                lhs = ast.AsExpr(lhs, self.parse_type(), loc=t.loc)
            else:
                lhs = ast.Binary(tx, lhs, self.parse_binary(prec + 1), loc=t.loc)

    def parse_unary(self):
        self.enter()
        try:
            return self._parse_unary()
        finally:
            self.depth -= 1

    def _parse_unary(self):
        t = self.toks[self.pos]
        tx = t.text
        if t.kind == "op":
            if tx in ("-", "+", "!", "~", "*", "&", "++", "--"):
                self.advance()
                return ast.Unary(tx, self.parse_unary(), loc=t.loc)
            if tx == "(":
                lam = self.try_lambda()
                if lam is not None:
                    return lam
                c = self.try_cast()
                if c is not None:
                    return c
        elif t.kind == "id":
            nt = self.peek()
            if tx == "no_diff" and (nt.kind in ("id", "int", "float") or nt.text == "("):
                self.advance()
                operand = self.parse_unary()
                return ast.Call(ast.Name("no_diff", loc=t.loc), [operand], loc=t.loc)
            if tx == "expand" and (nt.kind == "id" or nt.text == "("):
                self.advance()
                return ast.ExpandExpr(self.parse_unary(), loc=t.loc)
            if tx == "each" and (nt.kind == "id" or nt.text == "("):
                self.advance()
                return ast.EachExpr(self.parse_unary(), loc=t.loc)
            if tx in ("sizeof", "alignof", "countof"):
                self.advance()
                o = self.expect("(")
                save = self.pos
                operand = None
                try:
                    ty = self._spec(self.parse_type)
                    if self.at(")"):
                        operand = ty
                except _Fail:
                    pass
                if operand is None:
                    self.pos = save
                    operand = self.parse_expr()
                self.expect_close(")", o)
                return self.parse_postfix(ast.SizeOfExpr(operand, tx, loc=t.loc))
        return self.parse_postfix(self.parse_primary())

    def try_cast(self):
        o = self.toks[self.pos]
        save = self.pos
        self.advance()
        t = self.toks[self.pos]
        if t.kind != "id" or t.text in ("each", "expand", "no_diff", "this") or t.text in RESERVED:
            self.pos = save
            return None
        try:
            ty = self._spec(self.parse_type)
        except _Fail:
            self.pos = save
            return None
        if not self.at(")"):
            self.pos = save
            return None
        n = self.peek()
        cast = False
        if n.kind in ("int", "float", "str"):
            cast = True
        elif n.kind == "id":
            cast = n.text not in ("is", "as") and (n.text not in RESERVED or n.text in (
                "this", "true", "false", "sizeof", "countof", "alignof"))
        elif n.kind == "op":
            if n.text in ("(", "!", "~"):
                cast = self.is_typey(ty)
            elif n.text in ("-", "+", "++", "--"):
                cast = self.is_typey(ty)
            elif n.text in ("*", "&"):
                cast = self.is_typey(ty, strict=True)
        if not cast:
            self.pos = save
            return None
        self.advance()      # ')'
        operand = self.parse_unary()
        return ast.Cast(ty, operand, loc=o.loc)

    def try_lambda(self):
        # `(params) => body`: find the matching ')' and look for '=>'
        toks = self.toks
        i = self.pos + 1
        depth = 1
        limit = min(self.last, self.pos + 64)
        while i <= limit:
            x = toks[i]
            if x.kind == "op":
                if x.text == "(":
                    depth += 1
                elif x.text == ")":
                    depth -= 1
                    if depth == 0:
                        break
                elif x.text in (";", "{", "}"):
                    return None
            elif x.kind == "eof":
                return None
            i += 1
        else:
            return None
        if i + 1 > self.last or toks[i + 1].text != "=>" or toks[i + 1].kind != "op":
            return None
        o = self.advance()
        params = []
        if not self.at(")"):
            while True:
                # untyped `x` or typed `int x`
                t = self.toks[self.pos]
                if self.is_ident(t) and self.peek().text in (",", ")"):
                    self.advance()
                    params.append(ast.Param(t.text, None, loc=t.loc))
                else:
                    params.append(self.parse_param())
                if not self.accept(","):
                    break
        self.expect_close(")", o)
        arrow = self.expect("=>")
        if self.at("{"):
            body = self.parse_block()
        else:
            e = self.parse_assign()
            body = ast.Return(e, loc=e.loc)
        return ast.LambdaExpr(params, body, loc=o.loc)

    def parse_primary(self):
        t = self.toks[self.pos]
        k = t.kind
        if k == "id":
            tx = t.text
            if tx in RESERVED:
                if tx == "true" or tx == "false":
                    self.advance()
                    return ast.BoolLit(tx == "true", loc=t.loc)
                if tx == "this":
                    self.advance()
                    return ast.ThisExpr(loc=t.loc)
                self.fail("an expression", t)
            self.advance()
            if tx == "This":
                return ast.ThisTypeExpr(loc=t.loc)
            return ast.Name(tx, loc=t.loc)
        if k == "int":
            self.advance()
            return ast.IntLit(t.value, t.suffix, loc=t.loc)
        if k == "float":
            self.advance()
            return ast.FloatLit(t.value, t.suffix, t.text, loc=t.loc)
        if k == "str":
            self.advance()
            v = t.value
            while self.toks[self.pos].kind == "str":
                v += self.advance().value
            return ast.StringLit(v, loc=t.loc)
        if k == "op":
            if t.text == "(":
                self.advance()
                e = self.parse_expr()
                self.expect_close(")", t)
                return e
            if t.text == "{":
                return self.parse_init_list()
        self.fail("an expression", t)

    def parse_init_list(self):
        o = self.advance()
        items = []
        while not self.at("}"):
            if self.toks[self.pos].kind == "eof":
                self.expect_close("}", o)
            items.append(self.parse_assign())
            if not self.accept(","):
                if self.toks[self.pos].kind == "eof":
                    self.expect_close("}", o)
                if not self.at("}"):
                    self.fail("',' or '}'")
        self.advance()
        return ast.InitList(items, loc=o.loc)

    def parse_args(self, o) -> list:
        args = []
        if self.accept(")"):
            return args
        while True:
            args.append(self.parse_assign())
            if self.accept(","):
                continue
            self.expect_close(")", o)
            return args

    def parse_postfix(self, e):
        toks = self.toks
        while True:
            t = toks[self.pos]
            if t.kind != "op":
                return e
            tx = t.text
            if tx == "." or tx == "::" or tx == "->":
                self.advance()
                nt = toks[self.pos]
                if nt.kind != "id":
                    self.fail("a member name", nt)
                self.advance()
                e = ast.Member(e, nt.text, tx, loc=nt.loc)
            elif tx == "(":
                self.advance()
                e = ast.Call(e, self.parse_args(t), loc=e.loc)
            elif tx == "[":
                self.advance()
                idx = []
                if not self.at("]"):
                    while True:
                        idx.append(self.parse_assign())
                        if not self.accept(","):
                            break
                self.expect_close("]", t)
                e = ast.Index(e, idx, loc=e.loc)
            elif tx == "++" or tx == "--":
                self.advance()
                e = ast.Postfix(tx, e, loc=t.loc)
            elif tx == "<" and isinstance(e, (ast.Name, ast.Member, ast.ThisTypeExpr)):
                g = self.try_generic_app(e)
                if g is None:
                    return e
                e = g
            else:
                return e

    def try_generic_app(self, base):
        save = self.pos
        o = self.advance()
        try:
            args = self._spec(self.parse_generic_args, o)
        except _Fail:
            self.pos = save
            return None
        n = self.toks[self.pos]
        if n.kind == "eof" or (n.kind == "op" and n.text in _GENERIC_FOLLOW and
                               (n.text != ">" or self.generic_depth > 0)):
            # a following `>` only closes an enclosing generic argument list
            return ast.GenericApp(base, args, loc=base.loc)
        self.pos = save
        return None


def parse_tokens(toks: list[Token], path: str) -> list:
    p = Parser(toks, path)
    return p.parse_module()


def parse_module(text: str, path: str, include_paths=(), defines: dict | None = None,
                 deps: list | None = None) -> ast.Module:
    """Lex, preprocess and parse one Slang module (`deps`, if given, gets every #included file's path)."""
    old_limit = sys.getrecursionlimit()
    if old_limit < 12000:
        sys.setrecursionlimit(12000)
    p = None
    try:
        toks = preprocess(text, path, include_paths or (), defines, deps=deps)
        p = Parser(toks, path)
        decls = p.parse_module()
        sf = toks[-1].loc.file
        return ast.Module(path, decls, loc=Loc(sf, 1, 1))
    except _Fail as f:
        if p is not None and p.depth_hit is not None:
            raise error("E0010", "nesting too deep", p.depth_hit) from None
        raise CompileError(Diagnostic(f.code, f.message, f.loc)) from None
    except _Fatal as f:
        raise CompileError(Diagnostic(f.code, f.message, f.loc)) from None
    except CompileError:
        raise
    except RecursionError:
        loc = p.tok.loc if p is not None else Loc(SourceFile(path, text), 1, 1)
        raise error("E0010", "program nested too deeply", loc) from None
    except Exception as ex:   # never leak an internal exception for bad input
        loc = p.tok.loc if p is not None else Loc(SourceFile(path, text), 1, 1)
        raise error("E0010", f"could not parse this ({type(ex).__name__}: {ex})", loc) from None
    finally:
        if old_limit < 12000:
            sys.setrecursionlimit(old_limit)
