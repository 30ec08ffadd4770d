"""Differentiable pointers (IDifferentiablePtrType) inside a differentiated body.

A pointer's differential is not a derivative to accumulate or transpose: it is the location of
the gradient storage, provided by the caller beside the primal and handed unchanged to the
derivatives of the functions the pointer is passed to (as a DifferentialPtrPair).  Both modes
carry it in a companion variable (forward mode: the pointer's tangent variable; reverse mode: a
variable set in the forward sweep and saved/restored with the primal).

The differential can be followed through copies of a pointer parameter (and selects between
such copies), but not through a pointer built, modified or returned inside the body: nothing
says where its gradient storage is (real Slang rejects such code too), so passing one to a
differentiable call is error E6015 at that call.
"""
from __future__ import annotations

from typing import Optional

from .. import types as T
from ..ir import nodes as ir
from ..ir.walk import lvalue_root
from ..source import error
from ..ir.difftypes import is_ptr_kind


def ptr_vars_with_diff(params_ok: set, params_other: set, body: ir.Stmt) -> set:
    """The pointer-kind variables of `body` whose differential is known everywhere: parameters
    in params_ok and locals only ever assigned whole from such variables (parameters in
    params_other, e.g. `no_diff` ones, have none)."""
    defs: dict = {}
    bad: set = set(params_other)
    declared: set = set()

    def target(lhs, rhs):
        v = lvalue_root(lhs)
        if v is None or not is_ptr_kind(v.type):
            return
        if isinstance(lhs, ir.LocalRef) and rhs is not None:
            defs.setdefault(v.uid, []).append(rhs)
        else:
            bad.add(v.uid)            # a field written, or an out/inout argument

    def calls(e):
        if isinstance(e, ir.Call):
            for a, p in zip(e.args, e.func.params):
                if p.direction in ("out", "inout"):
                    target(a, None)
        elif isinstance(e, ir.Intrinsic):
            for i in e.out_params:
                target(e.args[i], None)
        elif isinstance(e, ir.MethodCall):
            for a in e.args:
                if isinstance(a, ir.OutConvert):
                    target(a.lvalue, None)

    def walk(s):
        if isinstance(s, ir.Block):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, ir.VarDecl):
            if is_ptr_kind(s.var.type):
                declared.add(s.var.uid)
                if s.init is not None:
                    defs.setdefault(s.var.uid, []).append(s.init)
            if s.init is not None:
                calls(s.init)
        elif isinstance(s, ir.ExprStmt):
            e = s.expr
            if isinstance(e, ir.Assign):
                target(e.lhs, e.rhs if e.op == "=" else None)
                e = e.rhs
            elif isinstance(e, ir.IncDec):
                target(e.operand, None)
            calls(e)
        elif isinstance(s, ir.If):
            walk(s.then)
            if s.else_ is not None:
                walk(s.else_)
        elif isinstance(s, ir.Loop):
            for x in s.init:
                walk(x)
            walk(s.body)
            for x in getattr(s, "step_stmts", []):
                walk(x)
            if s.step is not None:
                walk(ir.ExprStmt(s.step))
        elif isinstance(s, ir.Switch):
            for c in s.cases:
                for x in c.body:
                    walk(x)

    walk(body)
    ok = (set(params_ok) | declared | set(defs)) - bad
    changed = True
    while changed:
        changed = False
        for u in list(ok):
            if any(not _known(r, ok) for r in defs.get(u, ())):
                ok.discard(u)
                changed = True
    return ok


def _known(e, ok: set) -> bool:
    if isinstance(e, ir.LocalRef):
        return e.var.uid in ok
    if isinstance(e, ir.Select):
        return _known(e.then, ok) and _known(e.else_, ok)
    if isinstance(e, ir.Construct) and isinstance(e.type, T.ArrayType) and e.args:
        return all(_known(a, ok) for a in e.args)           # an array of known pointers
    if isinstance(e, ir.Index) and isinstance(e.obj.type, T.ArrayType):
        return _known(e.obj, ok)
    return False


def ptr_diff_expr(e: ir.Expr, companion) -> Optional[ir.Expr]:
    """The differential pointer of a pointer-valued expression, from `companion(var)`."""
    if isinstance(e, ir.LocalRef):
        return companion(e.var)
    if isinstance(e, ir.Select):
        a, b = ptr_diff_expr(e.then, companion), ptr_diff_expr(e.else_, companion)
        if a is None or b is None:
            return None
        return ir.Select(a.type, e.cond, a, b)
    if isinstance(e, ir.Construct) and isinstance(e.type, T.ArrayType) and e.args:
        ds = [ptr_diff_expr(a, companion) for a in e.args]
        if any(d is None for d in ds):
            return None
        return ir.Construct(T.ArrayType(ds[0].type, e.type.n), ds)
    if isinstance(e, ir.Index) and isinstance(e.obj.type, T.ArrayType):
        d = ptr_diff_expr(e.obj, companion)
        return None if d is None else ir.Index(d.type.elem, d, e.index)
    return None


def unknown_ptr_diff(fn: ir.Function, callee: ir.Function, param: ir.Var, loc):
    return error("E6015", f"the gradient storage of pointer argument '{param.name}' of '{callee.slang_name}' is "
                          f"unknown here: inside differentiable '{fn.slang_name}', only its differentiable pointer "
                          f"parameters (not no_diff ones) and copies of them carry a DifferentialPtrPair "
                          f"differential; pass the pointer in, or call a non-differentiable function", loc)

