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

import sys

from . import ast
from .lexer import Token
from .parse_base import (ASSIGN_OPS, BIN_PREC, BUILTIN_TYPES, DIRECTIONS, MODIFIERS, PARAM_MODS, RESERVED,
                         _GENERIC_FOLLOW, _MAX_DEPTH, _TYPE_DECL_WORDS, ParserBase, _Fail, _Fatal,
                         _is_builtin_type_name)
from .parse_exprs import ExprParserMixin
from .parse_func_ext import FuncExtensionParserMixin
from .parse_lazy import LazyBodyParserMixin, _diagnosed
from .parse_stmts import StmtParserMixin
from .preprocessor import preprocess
from ..source import CompileError, Diagnostic, Loc, SourceFile, error


class Parser(StmtParserMixin, ExprParserMixin, FuncExtensionParserMixin, LazyBodyParserMixin, ParserBase):
    """Module, attributes and declarations (statements: parse_stmts.py; types and expressions:
    parse_exprs.py; token cursor: parse_base.py)."""

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
            # `[[vk::binding(0, 0)]]`: the C++ spelling of the same list
            double = self.at("[")
            if double:
                self.advance()
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
            if double:
                self.expect("]")
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
            if (gprefix is not None or mods) and t.kind == "op" and t.text == "[" and self.peek().kind == "id":
                # `__generic<T> [ForceInline, Differentiable] T f(...)`, `static [attr] ...`: attributes
                # may follow the generic prefix and modifiers, as in Slang.
                attrs = attrs + self.parse_attrs()
                continue
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
            elif kw == "property" and self.peek().kind == "id":
                d = self.parse_property()
            elif kw == "__subscript":
                d = self.parse_subscript()
            elif kw == "__init":
                d = self.parse_init()
            elif kw == "func" and self.peek().kind == "id":
                d = self.parse_func_keyword()
            elif kw == "__func_extension":
                ds = self.parse_func_extension()
                for x in ds:
                    x.attrs = attrs + x.attrs
                    x.mods = mods | x.mods
                return ds
            elif kw == "let" or (kw == "var" and self.peek().kind == "id"):
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
            gp = self.parse_generic_params() if self.at("<") else []
            d = self.parse_func_rest(name, ty, gp, t.loc)
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

    def parse_array_dims(self, ty, type_position: bool = False):
        """`name[2][3]` (a declarator) is 2 arrays of 3, as in C; `float[2][3]` (dimensions on the
        type itself) is read left to right, as Slang does: 3 arrays of float[2]."""
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
        for size, loc in (dims if type_position else reversed(dims)):
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
                if self.at(")"):          # a trailing comma, as Slang allows: `f(uint3 tid : SV_...,)`
                    self.advance()
                    return params
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
            if t.text in DIRECTIONS and self.peek().kind == "id":
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
        return self.func_decl(name, params, ret_type, gparams, where, sem, loc)

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
        return self.func_decl(name, params, ret, gp, where, None, t.loc)

    def parse_init(self) -> ast.FuncDecl:
        t = self.advance()
        gp = self.parse_generic_params() if self.at("<") else []
        params = self.parse_params()
        where = self.parse_where()
        return self.func_decl("__init", params, None, gp, where, None, t.loc)

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
                also = []
                ty = None
                if self.accept(":"):
                    ty, *also = self.parse_constraints()
                default = self.parse_type() if self.accept("=") else None
                self.known_types.add(t.text)
                params.append(ast.GenericParam(t.text, "type", ty, default, also=also, loc=t.loc))
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
                if self.accept("=="):
                    clauses.append(ast.WhereClause(subj, self.parse_type(), equal=True, loc=start.loc))
                else:
                    self.expect(":", "':' or '=='")
                    clauses += [ast.WhereClause(subj, c, loc=start.loc) for c in self.parse_constraints()]
                while self.at(","):
                    # `where T : IA, U : IB` or `where T : IA, IB`
                    save = self.pos
                    self.advance()
                    try:
                        self._spec(self.parse_type)
                        is_new = self.at(":") or self.at("==")
                    except _Fail:
                        is_new = False
                    self.pos = save + 1
                    if is_new:
                        break
                    clauses += [ast.WhereClause(subj, c, loc=start.loc) for c in self.parse_constraints()]
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
        if self.accept("="):
            # `export struct X : I = Y;` binds the link-time type `extern struct X : I;` (an alias of Y)
            ty = self.parse_type()
            self.expect(";")
            return ast.TypeAliasDecl(nt.text, ty, gp, bases, loc=nt.loc)
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
        if self.at("&") and not gp:
            # `typealias IAB = IA & IB;`: an interface conjunction, usable as a constraint
            parts = [ty]
            while self.accept("&"):
                parts.append(self.parse_type())
            self.conj_aliases[nt.text] = parts
            self.alias_writes += 1
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
        return _ref_as_get_set(accs)


def _ref_as_get_set(accs: list) -> list:
    """`ref { return storage; }` (the accessor that yields the storage itself) read as the `get` and `set`
    it stands for, where the property has none of its own: `get { return storage; }` and
    `set { storage = newValue; }`, so reads, writes and read-modify-writes all reach the storage."""
    kinds = {a.kind for a in accs}
    out = [a for a in accs if a.kind != "ref"]
    for a in accs:
        if a.kind != "ref":
            continue
        stmts = a.body.stmts if isinstance(a.body, ast.Block) else []
        if len(stmts) != 1 or not isinstance(stmts[0], ast.Return) or stmts[0].value is None:
            out.append(a)          # a body the checker reports (only `return <storage>;` is understood)
            continue
        e = stmts[0].value
        attrs = [x for x in a.attrs if x.name != "mutating"]
        if "get" not in kinds:
            out.append(ast.Accessor("get", None, ast.Block([ast.Return(e, loc=e.loc)], loc=a.loc),
                                    set(a.mods) - {"mutating"}, attrs, loc=a.loc))
        if "set" not in kinds:
            assign = ast.Assign("=", e, ast.Name("newValue", loc=a.loc), loc=e.loc)
            out.append(ast.Accessor("set", None, ast.Block([ast.ExprStmt(assign, loc=e.loc)], loc=a.loc),
                                    set(a.mods), attrs, loc=a.loc))
    return out


def parse_tokens(toks: list[Token], path: str) -> list:
    p = Parser(toks, path)
    return p.parse_module()


def parse_module(text: str, path: str, include_paths=(), defines: dict | None = None,
                 deps: list | None = None, absent: list | None = None, lazy_bodies: bool = False) -> ast.Module:
    """Lex, preprocess and parse one Slang module (`deps`, if given, gets every #included file's path;
    `absent` every include candidate probed and not found).  `lazy_bodies`: the `{ ... }` bodies of functions,
    methods and initializers are matched by braces and parsed when first read (ast.LazyBodyFuncDecl); an
    error in one is then reported when it is read, as the same located CompileError.  Preprocessing is done
    first and whole, so a deferred body is the same tokens an eager parse reads."""
    state = {"p": None}

    def run():
        toks = preprocess(text, path, include_paths or (), defines, deps=deps, absent=absent)
        p = state["p"] = Parser(toks, path)
        p.lazy_bodies = lazy_bodies
        decls = p.parse_module()
        sf = toks[-1].loc.file
        return ast.Module(path, decls, loc=Loc(sf, 1, 1))
    return _diagnosed(run, state, path, text)


def parse_type_name(text: str):
    """The type expression a host names in text (`Foo`, `ns.Foo`, `Gen<float>`, e.g. a type
    conformance), or None when the text is not one."""
    try:
        mod = parse_module(f"typealias __type_name = {text};", "<type name>")
        return mod.decls[0].type if len(mod.decls) == 1 else None
    except (CompileError, IndexError, AttributeError):
        return None
