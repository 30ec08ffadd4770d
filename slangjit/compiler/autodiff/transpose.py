"""Transposition of a linear (tangent) expression: given the adjoint `seed` of the expression's
value, accumulate into the adjoints of the variables it reads.  Leaves are adjoint variables
(and field / element / swizzle paths into them), exactly where the forward rule put tangents."""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir.walk import expr_children
from .. import types as T
from ..ir.difftypes import zero
from ..ir.difftypes import add, is_float_like


class Transposer:
    def __init__(self, is_adj_var):
        self.is_adj_var = is_adj_var        # Var -> bool
        self.n = 0

    def accumulate(self, path: ir.Expr, value: ir.Expr, out: list):
        if isinstance(path, ir.Field) and path.name == "value" and isinstance(path.obj.type, T.OptionalType):
            # into an Optional's value: the optional gains one (none is its zero)
            ot = path.obj.type
            out.append(ir.ExprStmt(ir.Assign(ot, "=", path.obj, add(path.obj, ir.Construct(ot, [value])))))
            return
        if is_float_like(path.type):
            out.append(ir.ExprStmt(ir.Assign(path.type, "+=", path, value)))
        else:
            out.append(ir.ExprStmt(ir.Assign(path.type, "=", path, add(path, value))))

    def has_adj(self, e) -> bool:
        if e is None:
            return False
        if isinstance(e, ir.LocalRef):
            return self.is_adj_var(e.var)
        return any(self.has_adj(c) for c in expr_children(e))

    def is_path(self, e) -> bool:
        while isinstance(e, (ir.Field, ir.Index, ir.Swizzle)):
            if isinstance(e, ir.Swizzle) and len(set(e.indices)) != len(e.indices):
                return False
            e = e.obj
        return isinstance(e, ir.LocalRef) and self.is_adj_var(e.var)

    def bind(self, seed: ir.Expr, out: list) -> ir.Expr:
        if isinstance(seed, (ir.LocalRef, ir.Const)):
            return seed
        self.n += 1
        v = ir.Var(f"sd{self.n}", seed.type)
        out.append(ir.VarDecl(v, seed))
        return ir.LocalRef(seed.type, v)

    def reduce(self, x: ir.Expr, t: T.Type) -> ir.Expr:
        if x.type == t:
            return x
        if isinstance(t, T.ScalarType) and isinstance(x.type, T.VectorType):
            ones = ir.Construct(x.type, [ir.Const(x.type.elem, 1.0)], splat=True)
            return ir.Intrinsic(x.type.elem, "sj::dot", [x, ones])
        if isinstance(t, T.ScalarType) and isinstance(x.type, T.ScalarType):
            return ir.Convert(t, x)
        if isinstance(t, T.ScalarType) and isinstance(x.type, T.MatrixType):
            ones = ir.Construct(x.type.row_type, [ir.Const(x.type.elem, 1.0)], splat=True)
            onesr = ir.Construct(T.VectorType(x.type.elem, x.type.rows), [ir.Const(x.type.elem, 1.0)], splat=True)
            return ir.Intrinsic(x.type.elem, "sj::dot", [ir.Intrinsic(T.VectorType(x.type.elem, x.type.cols), "sj::mul", [onesr, x]), ones])
        return x

    def tr(self, e: ir.Expr, seed: ir.Expr, out: list):
        if e is None or not self.has_adj(e):
            return
        seed = self.bind(seed, out)
        if self.is_path(e):
            if isinstance(e, ir.Swizzle) and len(e.indices) > 1:
                for k, j in enumerate(e.indices):
                    tgt = ir.Index(e.type.elem, e.obj, ir.Const(T.INT, j))
                    out.append(ir.ExprStmt(ir.Assign(tgt.type, "+=", tgt, ir.Index(e.type.elem, seed, ir.Const(T.INT, k)))))
                return
            if isinstance(e, ir.Swizzle):
                e = ir.Index(e.type, e.obj, ir.Const(T.INT, e.indices[0]))
            self.accumulate(e, self.reduce(seed, e.type), out)
            return
        m = getattr(self, "t_" + type(e).__name__, None)
        if m is None:
            raise NotImplementedError(f"transpose of {type(e).__name__}")
        m(e, seed, out)

    def t_Binary(self, e, seed, out):
        a, b = e.lhs, e.rhs
        if e.op == "+":
            self.tr(a, self.reduce(seed, a.type), out)
            self.tr(b, self.reduce(seed, b.type), out)
        elif e.op == "-":
            self.tr(a, self.reduce(seed, a.type), out)
            if self.has_adj(b):
                self.tr(b, self.reduce(ir.Unary(seed.type, "-", seed), b.type), out)
        elif e.op == "*":
            if self.has_adj(a):
                self.tr(a, self.reduce(ir.Binary(e.type, "*", seed, b), a.type), out)
            if self.has_adj(b):
                self.tr(b, self.reduce(ir.Binary(e.type, "*", a, seed), b.type), out)
        elif e.op == "/":
            self.tr(a, self.reduce(ir.Binary(e.type, "/", seed, b), a.type), out)
        else:
            raise NotImplementedError(f"transpose of operator {e.op}")

    def t_Unary(self, e, seed, out):
        if e.op == "-":
            self.tr(e.operand, ir.Unary(seed.type, "-", seed), out)
        elif e.op == "+":
            self.tr(e.operand, seed, out)

    def t_Convert(self, e, seed, out):
        self.tr(e.operand, ir.Convert(e.operand.type, seed), out)

    def t_Detach(self, e, seed, out):
        pass

    def _via_temp(self, e, seed, out, assign):
        v = ir.Var(f"sc{self.n}", e.obj.type)
        self.n += 1
        out.append(ir.VarDecl(v, zero(e.obj.type)))
        assign(ir.LocalRef(v.type, v))
        self.tr(e.obj, ir.LocalRef(v.type, v), out)

    def t_Swizzle(self, e, seed, out):
        def assign(tmp):
            if len(e.indices) == 1:
                tgt = ir.Index(e.type, tmp, ir.Const(T.INT, e.indices[0]))
                self.accumulate(tgt, seed, out)
                return
            el = e.type.elem
            for k, j in enumerate(e.indices):
                tgt = ir.Index(el, tmp, ir.Const(T.INT, j))
                out.append(ir.ExprStmt(ir.Assign(el, "+=", tgt, ir.Index(el, seed, ir.Const(T.INT, k)))))
        if isinstance(e.obj.type, T.ScalarType):
            self.tr(e.obj, self.reduce(seed, e.obj.type), out)
            return
        self._via_temp(e, seed, out, assign)

    def t_Index(self, e, seed, out):
        self._via_temp(e, seed, out, lambda tmp: self.accumulate(ir.Index(e.type, tmp, e.index), seed, out))

    def t_Field(self, e, seed, out):
        self._via_temp(e, seed, out, lambda tmp: self.accumulate(ir.Field(e.type, tmp, e.name), seed, out))

    def t_Select(self, e, seed, out):
        a: list = []
        b: list = []
        self.tr(e.then, seed, a)
        self.tr(e.else_, seed, b)
        if a or b:
            out.append(ir.If(e.cond, ir.Block(a), ir.Block(b)))

    def t_Construct(self, e, seed, out):
        t = e.type
        if not e.args:
            return
        if e.splat:
            self.tr(e.args[0], self.reduce(seed, e.args[0].type), out)
            return
        if isinstance(t, T.VectorType):
            k = 0
            for a in e.args:
                if isinstance(a.type, T.VectorType):
                    n = a.type.n
                    part = ir.Swizzle(a.type, seed, tuple(range(k, k + n)))
                    k += n
                else:
                    part = ir.Index(t.elem, seed, ir.Const(T.INT, k))
                    k += 1
                self.tr(a, part, out)
            return
        if isinstance(t, T.MatrixType):
            k = 0
            for a in e.args:
                if isinstance(a.type, T.VectorType) and a.type.n == t.cols and k % t.cols == 0:
                    part = ir.Index(t.row_type, seed, ir.Const(T.INT, k // t.cols))
                    k += t.cols
                elif isinstance(a.type, T.ScalarType):
                    row = ir.Index(t.row_type, seed, ir.Const(T.INT, k // t.cols))
                    part = ir.Index(t.elem, row, ir.Const(T.INT, k % t.cols))
                    k += 1
                elif isinstance(a.type, T.MatrixType) and a.type == t:
                    part = seed
                    k += t.rows * t.cols
                else:
                    raise NotImplementedError("transpose of a mixed matrix construction")
                self.tr(a, part, out)
            return
        if isinstance(t, T.ArrayType):
            for i, a in enumerate(e.args):
                self.tr(a, ir.Index(t.elem, seed, ir.Const(T.INT, i)), out)
            return
        if isinstance(t, T.StructType):
            for (fname, ft), a in zip(t.info.field_list(), e.args):
                self.tr(a, ir.Field(ft, seed, fname), out)
            return
        if isinstance(t, T.PairType):
            self.tr(e.args[0], ir.Field(t.primal, seed, "p"), out)
            if len(e.args) > 1:
                self.tr(e.args[1], ir.Field(t.diff, seed, "d"), out)
            return
        if isinstance(t, T.TupleType):
            for i, a in enumerate(e.args):
                self.tr(a, ir.Field(t.elems[i], seed, f"_{i}"), out)
            return
        if isinstance(t, T.OptionalType):
            self.tr(e.args[0], ir.Field(t.elem, seed, "value"), out)    # none's value is zero
            return
        if isinstance(t, T.ScalarType):
            self.tr(e.args[0], seed, out)
            return
        raise NotImplementedError(f"transpose of constructing {t}")

    def t_Intrinsic(self, e, seed, out):
        name = e.name.replace("sj::", "")
        args = e.args
        lin = [i for i, a in enumerate(args) if self.has_adj(a)]
        if name == "select":
            c, a, b = args
            z = zero(seed.type)
            self.tr(a, ir.Intrinsic(seed.type, "sj::select", [c, seed, z]), out)
            self.tr(b, ir.Intrinsic(seed.type, "sj::select", [c, z, seed]), out)
            return
        if name in ("dot",) or (name == "mul" and all(isinstance(a.type, T.VectorType) for a in args)):
            a, b = args
            if 0 in lin:
                self.tr(a, ir.Binary(b.type, "*", b, seed), out)
            if 1 in lin:
                self.tr(b, ir.Binary(a.type, "*", a, seed), out)
            return
        if name == "cross":
            a, b = args
            if 0 in lin:
                self.tr(a, ir.Intrinsic(a.type, "sj::cross", [b, seed]), out)
            if 1 in lin:
                self.tr(b, ir.Intrinsic(b.type, "sj::cross", [seed, a]), out)
            return
        if name == "WaveActiveSum":
            self.tr(args[0], ir.Intrinsic(args[0].type, "sj::WaveActiveSum", [seed]), out)
            return
        if name == "transpose":
            self.tr(args[0], ir.Intrinsic(args[0].type, "sj::transpose", [seed]), out)
            return
        if name == "mul":
            a, b = args
            ta, tb = a.type, b.type
            if isinstance(ta, T.MatrixType) and isinstance(tb, T.VectorType):        # M v
                if 1 in lin:
                    self.tr(b, ir.Intrinsic(tb, "sj::mul", [seed, a]), out)
                if 0 in lin:
                    rows = [ir.Binary(ta.row_type, "*", b, ir.Index(ta.elem, seed, ir.Const(T.INT, r))) for r in range(ta.rows)]
                    self.tr(a, ir.Construct(ta, rows), out)
                return
            if isinstance(ta, T.VectorType) and isinstance(tb, T.MatrixType):        # v M
                if 0 in lin:
                    self.tr(a, ir.Intrinsic(ta, "sj::mul", [b, seed]), out)
                if 1 in lin:
                    rows = [ir.Binary(tb.row_type, "*", seed, ir.Index(tb.elem, a, ir.Const(T.INT, r))) for r in range(tb.rows)]
                    self.tr(b, ir.Construct(tb, rows), out)
                return
            if isinstance(ta, T.MatrixType) and isinstance(tb, T.MatrixType):
                if 0 in lin:
                    bt = T.MatrixType(tb.elem, tb.cols, tb.rows)
                    self.tr(a, ir.Intrinsic(ta, "sj::mul", [seed, ir.Intrinsic(bt, "sj::transpose", [b])]), out)
                if 1 in lin:
                    at = T.MatrixType(ta.elem, ta.cols, ta.rows)
                    self.tr(b, ir.Intrinsic(tb, "sj::mul", [ir.Intrinsic(at, "sj::transpose", [a]), seed]), out)
                return
        raise NotImplementedError(f"transpose of {e.name}")
