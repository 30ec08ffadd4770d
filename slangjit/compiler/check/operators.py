"""Operators and assignment with Slang's typing rules: unary/binary operators on scalars,
vectors and matrices (usual arithmetic conversions), overloaded operators on structs, tuple and
Optional comparisons, ?:, assignment (compound, through properties and subscripts), l-values
and constant folding."""
from __future__ import annotations

from typing import Any

from ..parse import ast
from ..ir import nodes as ir
from ..source import CompileError, Loc
from .. import types as T
from ..ir.fold import fold_convert, fold_value
from .calls import InitListArg, types_eq
from .scope import FuncSym
from .exprs import SubscriptRes
from .results import OverloadRes, PropertyRes

ARITH_OPS = {"+", "-", "*", "/", "%"}
BIT_OPS = {"&", "|", "^"}
CMP_OPS = {"==", "!=", "<", ">", "<=", ">="}


class OperatorsMixin:
    # ------------------------------------------------------------------ operators

    def pointer_offset_check(self, t, op, loc):
        """Pointer arithmetic takes an integer offset (`p + 1.5` is an error, as in C)."""
        if not (isinstance(t, T.ScalarType) and t.kind in ("int", "uint")):
            raise self.err("E3076", f"pointer arithmetic '{op}' needs an integer offset, got '{t}'", loc)

    def unary(self, e: ast.Unary, ctx) -> ir.Expr:
        loc = e.loc
        if e.op in ("++", "--"):
            x = self.expr(e.operand, ctx)
            return self.incdec(e.operand, x, e.op, True, loc, ctx)
        x = self.expr(e.operand, ctx)
        t = x.type
        if e.op == "&":
            self.require_lvalue(x, loc, "operand of '&'")
            return ir.AddressOf(T.PointerType(t), x, loc=loc)
        if e.op == "*":
            if not isinstance(t, T.PointerType):
                raise self.err("E3070", f"cannot dereference '{t}'", loc)
            return ir.Deref(t.elem, x, loc=loc)
        if isinstance(t, T.StructType):
            return self.operator_call("operator" + e.op, [x], loc, ctx)
        if e.op == "!":
            bt = T.with_scalar(t, T.BOOL)
            return ir.Unary(bt, "!", self.coerce(x, bt, loc), loc=loc)
        s = T.scalar_of(t)
        if s is None:
            raise self.err("E3071", f"operator '{e.op}' cannot be applied to '{t}'", loc)
        if e.op == "~":
            if s.kind not in ("int", "uint", "bool"):
                raise self.err("E3071", f"operator '~' needs an integer, got '{t}'", loc)
        if s.kind == "bool" or isinstance(t, T.EnumType):
            t = T.with_scalar(t, T.INT)
            x = self.coerce(x, t, loc)
        if e.op == "+":
            return x
        if e.op == "-" and isinstance(x, ir.Const) and isinstance(x.value, (int, float)) and not isinstance(x.value, bool):
            return fold_convert(ir.Const(t, -x.value, loc=loc), t, loc) if t.kind != "float" else ir.Const(t, -x.value, loc=loc)
        return ir.Unary(t, e.op, x, loc=loc)

    def incdec(self, operand_ast, x: ir.Expr, op: str, prefix: bool, loc: Loc, ctx) -> ir.Expr:
        if isinstance(operand_ast, (ast.Member, ast.Index)):
            res = self.index(operand_ast, ctx) if isinstance(operand_ast, ast.Index) else self.resolve(operand_ast, ctx)
            if isinstance(res, (PropertyRes, SubscriptRes)):
                # `obj.prop++` / `obj[i]--`: through the accessors, as `+= 1`; a postfix form gives the old value.
                step = self.assign(ast.Assign(op[0] + "=", operand_ast, ast.IntLit(1, loc=loc), loc=loc), ctx)
                if prefix:
                    return ir.StmtExpr(x.type, [ir.ExprStmt(step, loc=loc)], self.expr(operand_ast, ctx), loc=loc)
                old = ir.Var("__old", x.type)
                return ir.StmtExpr(x.type, [ir.VarDecl(old, x), ir.ExprStmt(step, loc=loc)],
                                   ir.LocalRef(x.type, old, loc=loc), loc=loc)
        self.require_lvalue(x, loc, f"operand of '{op}'")
        if T.scalar_of(x.type) is None and not isinstance(x.type, T.PointerType):
            raise self.err("E3071", f"operator '{op}' cannot be applied to '{x.type}'", loc)
        return ir.IncDec(x.type, op, prefix, x, loc=loc)

    def arith_result(self, a: T.Type, b: T.Type, op: str, loc: Loc) -> T.Type:
        sa, sb = T.scalar_of(a), T.scalar_of(b)
        if sa is None or sb is None:
            raise self.err("E3072", f"operator '{op}' cannot be applied to '{a}' and '{b}'", loc)
        s = T.join_scalars(sa, sb)
        if s.kind == "bool" and op not in ("&", "|", "^", "==", "!="):
            s = T.INT
        if isinstance(a, T.MatrixType) or isinstance(b, T.MatrixType):
            if isinstance(a, T.MatrixType) and isinstance(b, T.MatrixType):
                if (a.rows, a.cols) != (b.rows, b.cols):
                    raise self.err("E3073", f"matrix shapes differ: '{a}' {op} '{b}'", loc)
                return T.MatrixType(s, a.rows, a.cols)
            m = a if isinstance(a, T.MatrixType) else b
            o = b if m is a else a
            if isinstance(o, T.VectorType):
                raise self.err("E3073", f"operator '{op}' cannot combine '{a}' and '{b}' (use mul)", loc)
            return T.MatrixType(s, m.rows, m.cols)
        if isinstance(a, T.VectorType) and isinstance(b, T.VectorType):
            if a.n != b.n:
                self.warn("W3002", f"implicit truncation: '{a}' {op} '{b}'", loc)
            return T.VectorType(s, min(a.n, b.n))
        if isinstance(a, T.VectorType):
            return T.VectorType(s, a.n)
        if isinstance(b, T.VectorType):
            return T.VectorType(s, b.n)
        return s

    def operand_to(self, x: ir.Expr, rt: T.Type, loc: Loc) -> ir.Expr:
        """Convert an operand to the operation type; scalars stay scalar against vectors
        (the prelude's operators broadcast them), but take the element type."""
        if isinstance(x.type, (T.ScalarType, T.EnumType)) and isinstance(rt, (T.VectorType, T.MatrixType)):
            return self.coerce(x, rt.elem, loc)
        if isinstance(x.type, T.VectorType) and isinstance(rt, T.VectorType) and x.type.n != rt.n:
            return self.coerce(x, rt, loc, explicit=True)
        return self.coerce(x, rt, loc)

    def binary(self, e: ast.Binary, ctx) -> ir.Expr:
        loc = e.loc
        op = e.op
        if op == ",":
            a = self.expr(e.lhs, ctx)
            b = self.expr(e.rhs, ctx)
            return ir.Comma(b.type, a, b, loc=loc)
        a = self.expr(e.lhs, ctx)
        b = self.expr(e.rhs, ctx)
        return self.binary_op(op, a, b, loc, ctx)

    def binary_op(self, op: str, a: ir.Expr, b: ir.Expr, loc: Loc, ctx) -> ir.Expr:
        ta, tb = a.type, b.type
        if op in CMP_OPS and (isinstance(ta, T.OptionalType) and isinstance(b, ir.NoneExpr) or
                              isinstance(tb, T.OptionalType) and isinstance(a, ir.NoneExpr)):
            opt = a if isinstance(ta, T.OptionalType) else b
            has = ir.Field(T.BOOL, opt, "hasValue", loc=loc)
            return ir.Unary(T.BOOL, "!", has, loc=loc) if op == "==" else has
        if op in CMP_OPS and isinstance(ta, T.TupleType) and isinstance(tb, T.TupleType) and len(ta.elems) == len(tb.elems):
            return self.tuple_compare(op, a, b, loc, ctx)
        if isinstance(ta, T.EnumType) and ta is tb and op in BIT_OPS and not self.has_operator("operator" + op, ctx):
            u = ta.underlying
            return ir.Convert(ta, ir.Binary(u, op, ir.Convert(u, a, loc=loc), ir.Convert(u, b, loc=loc), loc=loc), loc=loc)
        if isinstance(ta, (T.StructType,)) or isinstance(tb, T.StructType) or \
                (isinstance(ta, T.EnumType) and isinstance(tb, T.EnumType) and op in ("|", "&", "^") and
                 self.has_operator("operator" + op, ctx)):
            return self.operator_call("operator" + op, [a, b], loc, ctx)
        if op in ("&&", "||"):
            if isinstance(ta, T.VectorType) or isinstance(tb, T.VectorType):
                rt = self.arith_result(T.with_scalar(ta, T.BOOL), T.with_scalar(tb, T.BOOL), op, loc)
                rt = T.with_scalar(rt, T.BOOL)
                return ir.Binary(rt, op, self.coerce(a, rt, loc), self.coerce(b, rt, loc), loc=loc)
            return ir.Binary(T.BOOL, op, self.coerce(a, T.BOOL, loc), self.coerce(b, T.BOOL, loc), loc=loc)
        if isinstance(ta, T.PointerType) and op in ("+", "-") and T.scalar_of(tb) is not None:
            if op == "-" and isinstance(tb, T.PointerType):
                return ir.Binary(T.INT64, "-", a, b, loc=loc)
            self.pointer_offset_check(tb, op, loc)
            return ir.Binary(ta, op, a, b, loc=loc)
        if isinstance(ta, T.PointerType) and op in CMP_OPS:
            return ir.Binary(T.BOOL, op, a, self.coerce(b, ta, loc, explicit=True), loc=loc)
        if op in ("<<", ">>"):
            sa, sb = T.scalar_of(ta), T.scalar_of(tb)
            if sa is None or sb is None or sa.kind not in ("int", "uint", "bool") or sb.kind not in ("int", "uint", "bool"):
                raise self.err("E3072", f"operator '{op}' needs integers, got '{ta}' and '{tb}'", loc)
            if sa.kind == "bool" or isinstance(ta, T.EnumType):
                ta = T.with_scalar(ta, T.INT)
                a = self.coerce(a, ta, loc)
            rt = ta
            if isinstance(tb, T.VectorType) and not isinstance(ta, T.VectorType):
                rt = T.VectorType(ta, tb.n)
                a = self.coerce(a, rt, loc)
            b = self.operand_to(b, T.with_scalar(rt if isinstance(tb, T.VectorType) else T.scalar_of(rt), T.scalar_of(rt)), loc)
            return ir.Binary(rt, op, a, b, loc=loc)
        rt = self.arith_result(ta, tb, op, loc)
        if op in BIT_OPS or op == "%":
            if T.scalar_of(rt).kind == "float" and op != "%":
                raise self.err("E3072", f"operator '{op}' needs integers, got '{ta}' and '{tb}'", loc)
        a2 = self.operand_to(a, rt, loc)
        b2 = self.operand_to(b, rt, loc)
        if op in CMP_OPS:
            res_t = T.with_scalar(rt, T.BOOL)
            return ir.Binary(res_t, op, a2, b2, loc=loc)
        return ir.Binary(rt, op, a2, b2, loc=loc)

    def tuple_compare(self, op, a, b, loc, ctx) -> ir.Expr:
        """Lexicographic comparison of two tuples (a and b are evaluated once each)."""
        va, vb = ir.Var("ta", a.type), ir.Var("tb", b.type)
        ra, rb = ir.LocalRef(a.type, va), ir.LocalRef(b.type, vb)
        n = len(a.type.elems)
        fa = [ir.Field(a.type.elems[i], ra, f"_{i}", loc=loc) for i in range(n)]
        fb = [ir.Field(b.type.elems[i], rb, f"_{i}", loc=loc) for i in range(n)]
        if op in ("==", "!="):
            r = None
            for x, y in zip(fa, fb):
                c = self.binary_op("==", x, y, loc, ctx)
                r = c if r is None else ir.Binary(T.BOOL, "&&", r, c, loc=loc)
            r = r if r is not None else ir.Const(T.BOOL, True)
            res = r if op == "==" else ir.Unary(T.BOOL, "!", r, loc=loc)
        else:
            strict = op in ("<", ">")
            lt = "<" if op in ("<", "<=") else ">"
            res = ir.Const(T.BOOL, not strict)
            for x, y in reversed(list(zip(fa, fb))):
                res = ir.Select(T.BOOL, self.binary_op(lt, x, y, loc, ctx), ir.Const(T.BOOL, True),
                                ir.Select(T.BOOL, self.binary_op("==", x, y, loc, ctx), res, ir.Const(T.BOOL, False)))
        return ir.StmtExpr(T.BOOL, [ir.VarDecl(va, a), ir.VarDecl(vb, b)], res, loc=loc)

    def has_operator(self, name, ctx) -> bool:
        return any(isinstance(s, FuncSym) for s in ctx.env.lookup(name))

    def operator_call(self, name: str, args: list, loc: Loc, ctx) -> ir.Expr:
        cands = [s for s in ctx.env.lookup(name) if isinstance(s, FuncSym)]
        # Member operators of the first operand's type.
        if args and isinstance(args[0].type, T.StructType):
            members = [s for s in self.member_syms(args[0].type, name) if isinstance(s, FuncSym)]
            if members:
                try:
                    return self.resolve_overload(OverloadRes(members, this=args[0], name=name), args[1:], loc, ctx)
                except CompileError:
                    if not cands:
                        raise
        for a in args:
            if isinstance(a.type, T.StructType):
                # Operators declared beside the struct (e.g. in its namespace or as static members).
                for s in self.member_syms(a.type, name):
                    if isinstance(s, FuncSym) and s.is_static and s not in cands:
                        cands.append(s)
        if not cands:
            raise self.err("E3072", f"no operator '{name[8:]}' for "
                           f"{' and '.join(repr(str(a.type)) for a in args)}", loc)
        return self.resolve_overload(OverloadRes(cands, name=name), args, loc, ctx)

    def conditional(self, e: ast.Conditional, ctx) -> ir.Expr:
        c = self.expr(e.cond, ctx)
        a = self.expr(e.then, ctx)
        b = self.expr(e.else_, ctx)
        loc = e.loc
        if types_eq(a.type, b.type):
            rt = a.type
        elif isinstance(a, ir.NoneExpr) and isinstance(b.type, T.OptionalType):
            rt = b.type
        elif isinstance(b, ir.NoneExpr) and isinstance(a.type, T.OptionalType):
            rt = a.type
        elif T.scalar_of(a.type) is not None and T.scalar_of(b.type) is not None:
            rt = self.arith_result(a.type, b.type, "?:", loc)
        else:
            raise self.err("E3074", f"branches of ?: have different types '{a.type}' and '{b.type}'", loc)
        if isinstance(c.type, T.VectorType):
            if not isinstance(rt, T.VectorType):
                rt = T.VectorType(rt, c.type.n)
            ct = T.VectorType(T.BOOL, rt.n)
            args = [self.coerce(c, ct, loc), self.coerce(a, rt, loc), self.coerce(b, rt, loc)]
            # the core `select` (not a bare intrinsic), so that autodiff finds its derivative rule
            sel = self.resolve(ast.Name("select", loc=loc), self.ctx_for_env(self.core_env))
            return self.resolve_overload(sel, args, loc, ctx)
        return ir.Select(rt, self.coerce(c, T.BOOL, loc), self.coerce(a, rt, loc), self.coerce(b, rt, loc), loc=loc)

    # ------------------------------------------------------------------ assignment

    def assign(self, e: ast.Assign, ctx) -> ir.Expr:
        loc = e.loc
        # An indexed target may be a set-only __subscript: resolve it without reading it.
        lres = self.index(e.lhs, ctx) if isinstance(e.lhs, ast.Index) else self.resolve(e.lhs, ctx)
        if isinstance(lres, PropertyRes) or isinstance(lres, SubscriptRes):
            return self.assign_accessor(lres, e, ctx)
        lhs = self.value_of(lres, e.lhs.loc, ctx)
        self.require_lvalue(lhs, e.lhs.loc, "left side of an assignment")
        if e.op == "=":
            if isinstance(e.rhs, ast.InitList):
                rhs = self.init_list(e.rhs, lhs.type, ctx)
            else:
                rhs = self.coerce(self.expr(e.rhs, ctx), lhs.type, e.rhs.loc)
            return ir.Assign(lhs.type, "=", lhs, rhs, loc=loc)
        op = e.op[:-1]
        rhs = self.expr(e.rhs, ctx)
        if isinstance(lhs.type, T.AtomicType) and op in ("+", "-"):
            # `atomicBuffer[i] += v` is an atomic add.
            return ir.MethodCall(lhs.type.elem, lhs, "add" if op == "+" else "sub",
                                 [self.coerce(rhs, lhs.type.elem, e.rhs.loc)], loc=loc)
        if isinstance(lhs.type, T.StructType) or isinstance(rhs.type, T.StructType):
            syms = ctx.env.lookup("operator" + e.op) or (self.member_syms(lhs.type, "operator" + e.op)
                                                          if isinstance(lhs.type, T.StructType) else [])
            if syms:
                fs = [s for s in syms if isinstance(s, FuncSym)]
                if fs and fs[0].owner is not None and not fs[0].is_static:
                    return self.resolve_overload(OverloadRes(fs, this=lhs, name="operator" + e.op), [rhs], loc, ctx)
                return self.resolve_overload(OverloadRes(fs, name="operator" + e.op), [lhs, rhs], loc, ctx)
            value = self.operator_call("operator" + op, [lhs, rhs], loc, ctx)
            return ir.Assign(lhs.type, "=", lhs, self.coerce(value, lhs.type, loc), loc=loc)
        if isinstance(lhs.type, T.PointerType):
            if op not in ("+", "-"):
                raise self.err("E3076", f"operator '{e.op}' cannot be applied to pointer '{lhs.type}'", loc)
            self.pointer_offset_check(rhs.type, op, loc)
            return ir.Assign(lhs.type, e.op, lhs, rhs, loc=loc)
        full = self.binary_op(op, lhs, rhs, loc, ctx)
        if types_eq(full.type, lhs.type) and isinstance(full, ir.Binary):
            # Keep the compound form so the lvalue is evaluated once.
            return ir.Assign(lhs.type, e.op, lhs, full.rhs, loc=loc)
        if self.simple_lvalue(lhs):
            return ir.Assign(lhs.type, "=", lhs, self.coerce(full, lhs.type, loc, explicit=True), loc=loc)
        # A complex lvalue whose operation type differs: take its address once.
        ptr_var = ir.Var("__lv", T.PointerType(lhs.type))
        decl = ir.VarDecl(ptr_var, ir.AddressOf(T.PointerType(lhs.type), lhs, loc=loc))
        deref = ir.Deref(lhs.type, ir.LocalRef(ptr_var.type, ptr_var), loc=loc)
        full2 = self.binary_op(op, deref, rhs, loc, ctx)
        return ir.StmtExpr(lhs.type, [decl], ir.Assign(lhs.type, "=", deref,
                                                       self.coerce(full2, lhs.type, loc, explicit=True), loc=loc), loc=loc)

    def simple_lvalue(self, e: ir.Expr) -> bool:
        """No side effects when evaluated twice."""
        if isinstance(e, (ir.LocalRef, ir.GlobalRef)):
            return True
        if isinstance(e, (ir.Field, ir.Swizzle)):
            return self.simple_lvalue(e.obj)
        if isinstance(e, ir.Index):
            return self.simple_lvalue(e.obj) and isinstance(e.index, (ir.Const, ir.LocalRef))
        if isinstance(e, ir.Deref):
            return self.simple_lvalue(e.ptr)
        return False

    def assign_accessor(self, res, e: ast.Assign, ctx) -> ir.Expr:
        loc = e.loc
        if res.setter is None:
            raise self.err("E3075", "cannot assign: no setter", loc)
        if isinstance(e.rhs, ast.InitList):
            rhs = self.init_list(e.rhs, res.type, ctx)
        else:
            rhs = self.expr(e.rhs, ctx)
        if e.op != "=":
            cur = self.value_of(res, loc, ctx)
            rhs = self.binary_op(e.op[:-1], cur, rhs, loc, ctx)
        rhs = self.coerce(rhs, res.type, loc, explicit=e.op != "=")
        args = []
        if res.obj is not None and res.setter.params and res.setter.params[0].name == "this":
            self.require_lvalue(res.obj, loc, "object of a property assignment")
            args.append(res.obj)
        if isinstance(res, SubscriptRes):
            args.extend(res.indices)
        args.append(rhs)
        return self.make_call(res.setter, args, loc)

    def require_lvalue(self, e, loc: Loc, what: str):
        if isinstance(e, InitListArg) or not self.is_lvalue(e):
            raise self.err("E3080", f"{what} must be an l-value (a variable, field, element or dereference)", loc)

    def is_lvalue(self, e) -> bool:
        if isinstance(e, ir.LocalRef):
            return getattr(e.var, "mutable", True)
        if isinstance(e, ir.GlobalRef):
            return e.var.kind in ("static", "groupshared")
        if isinstance(e, ir.Field):
            return e.via_pointer or self.is_lvalue(e.obj) or isinstance(e.obj, ir.Deref)
        if isinstance(e, ir.Swizzle):
            return len(set(e.indices)) == len(e.indices) and self.is_lvalue(e.obj)
        if isinstance(e, ir.Index):
            ot = e.obj.type
            if isinstance(ot, T.BufferType):
                return ot.writable
            if isinstance(ot, T.PointerType):
                return True
            return self.is_lvalue(e.obj)
        if isinstance(e, ir.Deref):
            return True
        if isinstance(e, ir.Assign) and e.op == "=":
            return False
        return False

    # ------------------------------------------------------------------ folding

    def fold(self, e: ir.Expr) -> Any:
        """The compile-time value of e, or None (ir/fold.py)."""
        return fold_value(e)

