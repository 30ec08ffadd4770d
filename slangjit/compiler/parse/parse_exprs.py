"""Types and expressions of the Slang grammar (precedence climbing; generic-vs-less-than and
cast disambiguation).  A mixin of the Parser in parser.py."""
from __future__ import annotations

from . import ast
from .parse_base import (ASSIGN_OPS, BIN_PREC, BUILTIN_TYPES, DIRECTIONS, MODIFIERS, PARAM_MODS, RESERVED,
                         _GENERIC_FOLLOW, _MAX_DEPTH, _TYPE_DECL_WORDS, _Fail, _Fatal, _is_builtin_type_name)
from ..source import Loc


class ExprParserMixin:
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
                ty = self.parse_array_dims(ty, type_position=True)
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
        # A matrix layout modifier on a type argument (`DifferentialPair<row_major float3x3>`) says how
        # the matrix is stored in memory; values of either layout are the same type here.
        while self.toks[self.pos].kind == "id" and self.toks[self.pos].text in ("row_major", "column_major"):
            self.pos += 1
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
                # `(T*) &x`, `(G<U>) *p`: a parenthesised pointer or generic type cannot end an expression
                cast = isinstance(ty, (ast.PointerTypeExpr, ast.GenericApp)) or self.is_typey(ty, strict=True)
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
                name = nt.text
                if name == "operator" and self.at("(") and self.peek().text == ")":
                    # `f.operator()` names the call operator (`bwd_diff(f.operator())(...)`)
                    self.advance()
                    self.advance()
                    name = "operator()"
                e = ast.Member(e, name, tx, loc=nt.loc)
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
