"""The backward derivative of a function that has only a user forward derivative.

`[ForwardDerivative(F)] float f(float x)` with no backward derivative: `bwd_diff(f)` is the
transpose of the linear map `dx -> F(diffPair(x, dx)).d` at the given primal point, so both
modes agree with the user's derivative (differentiating f's body instead would silently ignore
it).  The linear map is written as a function `L(x, dx) = F(diffPair(x, dx)).d` whose primal
inputs carry no derivative; reverse mode of L (built by autodiff like any other) is its
transpose, and the backward derivative of f calls it:

    bwd_f(inout DifferentialPair<float> x, float dOut)
    { var t = diffPair(0, 0); bwd_L(x.p, t, dOut); x.d = t.d; }

The user's F must be linear in the differentials (as any forward derivative is).
"""
from __future__ import annotations

from typing import Optional

from .. import types as T
from . import nodes as ir
from .difftypes import zero
from .program import unique_name


def transposed_bwd(derivs, fn: ir.Function, F: ir.Function, shell_params: list, loc) -> Optional[ir.Function]:
    """The body-carrying backward derivative of fn (parameters `shell_params`, as Derivatives.bwd
    lays them out) built from its forward derivative F, or None where the form is not handled
    (differentiable pointers)."""
    pd, rd = derivs.signature(fn)
    if any(d is not None and derivs.is_ptr(p.type) for p, d in zip(fn.params, pd)):
        return None
    fparams = list(F.params)
    if len(fparams) == len(fn.params) - 1 and fn.params and fn.params[0].name == "this" \
            and (not F.params or F.params[0].name != "this"):
        return None                      # a static derivative of a method: not this form
    if len(fparams) != len(fn.params):
        return None
    # A member's user derivative that takes `this` as a plain value gives no derivative for it: `this`
    # enters L as a primal only (the backward derivative passes the pair's primal part).
    plain = [i == 0 and p.name == "this" and d is not None and fp.type == p.type
             for i, (p, d, fp) in enumerate(zip(fn.params, pd, fparams))]
    pd = [None if pl else d for d, pl in zip(pd, plain)]
    # L: per fn parameter, the primal (no derivative) and, if differentiable, its tangent.
    lparams, lsig, largs, pre, post = [], [], [], [], []
    for p, d, fp in zip(fn.params, pd, fparams):
        if d is None:
            v = ir.Var(p.name, p.type, p.direction)
            lparams.append(v)
            lsig.append(None)
            largs.append(ir.LocalRef(p.type, v))
            continue
        pt = fp.type
        if not isinstance(pt, T.PairType):
            return None
        xp = None
        if p.direction != "out":
            xp = ir.Var(p.name + "_p", p.type, "in")
            lparams.append(xp)
            lsig.append(None)
        t = ir.Var(p.name + "_d", d, p.direction)
        lparams.append(t)
        lsig.append(d)
        pr = ir.Var(p.name + "_pair", pt)
        init = ir.Construct(pt, [ir.LocalRef(p.type, xp), ir.LocalRef(d, t)]) if xp is not None else zero(pt)
        pre.append(ir.VarDecl(pr, init))
        largs.append(ir.LocalRef(pt, pr))
        if p.direction != "in":
            post.append(ir.ExprStmt(ir.Assign(d, "=", ir.LocalRef(d, t), ir.Field(d, ir.LocalRef(pt, pr), "d"))))
    call = ir.Call(F.ret, F, largs)
    body = list(pre)
    if rd is not None:
        if not isinstance(F.ret, T.PairType):
            return None
        r = ir.Var("r", F.ret)
        body.append(ir.VarDecl(r, call))
        body += post
        body.append(ir.Return(ir.Field(rd, ir.LocalRef(F.ret, r), "d")))
    else:
        body.append(ir.ExprStmt(call))
        body += post
    L = ir.Function(unique_name("lin_" + fn.name), lparams, rd if rd is not None else T.VOID, loc=fn.loc)
    L.slang_name = "lin_" + fn.slang_name
    L.attrs["decl"] = None
    L.attrs["ad_sig"] = (lsig, rd)
    L.attrs["linearized_from"] = F
    L.body = ir.Block(body)
    derivs.functions.append(L)
    derivs.transposed.add(id(F))
    h = derivs.bwd(L, loc)
    # bwd_f: call bwd_L with the primal parts and fresh tangent pairs, hand the adjoints back.
    bparams = [ir.Var(p.name, p.type, p.direction) for p in shell_params]
    bstmts, hargs, after = [], [], []
    hp_iter = iter(h.params)
    for (p, d, pl), bp in zip(zip(fn.params, pd, plain), bparams):
        ref = ir.LocalRef(bp.type, bp)
        if d is None:
            next(hp_iter)
            hargs.append(ir.Field(p.type, ref, "p") if pl else ref)
            continue
        if p.direction != "out":
            next(hp_iter)
            hargs.append(ir.Field(p.type, ref, "p"))
        hp = next(hp_iter)
        if p.direction == "out":
            hargs.append(ref)                 # the adjoint of the out value
            continue
        q = ir.Var(p.name + "_t", hp.type)
        seed = ir.Field(d, ref, "d") if p.direction == "inout" else zero(d)
        bstmts.append(ir.VarDecl(q, ir.Construct(hp.type, [zero(d), seed])))
        hargs.append(ir.LocalRef(hp.type, q))
        after.append(ir.ExprStmt(ir.Assign(d, "=", ir.Field(d, ref, "d"),
                                           ir.Field(d, ir.LocalRef(hp.type, q), "d"))))
    if rd is not None:
        hargs.append(ir.LocalRef(bparams[-1].type, bparams[-1]))
    bstmts.append(ir.ExprStmt(ir.Call(T.VOID, h, hargs)))
    g = ir.Function(unique_name("bwd_" + fn.name), bparams, T.VOID, loc=fn.loc)
    g.slang_name = "bwd_" + fn.slang_name
    g.attrs["decl"] = None
    g.attrs["transposed_from"] = F
    g.body = ir.Block(bstmts + after)
    return g
