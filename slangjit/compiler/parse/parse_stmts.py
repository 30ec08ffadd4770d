"""Statements of the Slang grammar (blocks, declarations vs expression statements, control flow,
statement attributes).  A mixin of the Parser in parser.py."""
from __future__ import annotations

from . import ast
from .parse_base import (ASSIGN_OPS, BIN_PREC, BUILTIN_TYPES, DIRECTIONS, MODIFIERS, PARAM_MODS, RESERVED,
                         _GENERIC_FOLLOW, _MAX_DEPTH, _TYPE_DECL_WORDS, _Fail, _Fatal, _is_builtin_type_name)
from ..source import Loc


class StmtParserMixin:
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
            if tx == "let" or (tx == "var" and self.peek().kind == "id"):
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
        elif it.kind == "id" and (it.text == "let" or (it.text == "var" and self.peek().kind == "id")):
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
