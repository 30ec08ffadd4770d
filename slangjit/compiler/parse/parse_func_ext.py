"""`__func_extension` declarations: a derivative attached to a function from outside it.

    __func_extension fwd_diff(f)(DifferentialPair<float> x) -> DifferentialPair<float> { ... }
    __func_extension bwd_diff(f)(inout DifferentialPair<float> x, float dOut) { ... }
    __func_extension<T : IFloat> fwd_diff(g<T>)(DifferentialPair<T> x) -> DifferentialPair<T> { ... }
    __func_extension fwd_diff(S.method)(DifferentialPair<S> self, DifferentialPair<float> x) -> ...
    __func_extension __apply(f)(float x) -> Tuple<float, Ctx> { ... }

Slang desugars these into extensions of the function's differentiability interfaces.  Here a
fwd_diff / bwd_diff form is an ordinary function carrying `[ForwardDerivativeOf(target)]` /
`[BackwardDerivativeOf(target)]`, which the checker resolves like any such attribute (overload
resolution against the derivative signature).  An `__apply` form (a forward pass returning the
primal result and a context whose `operator()(out dx..., dOut)` is the backward pass) becomes that
function plus a backward derivative calling it:

    [BackwardDerivativeOf(f)]
    void bwd(inout DifferentialPair<float> x, float.Differential dOut)
    { let t = apply(x.p); var ctx = t._1; float.Differential dx; ctx(dx, dOut); x = diffPair(x.p, dx); }

Slang gates the form behind `-experimental-feature`; slangjit accepts it without a flag.
"""
from __future__ import annotations

from . import ast
from ..source import error

FUNC_EXT_KINDS = {"fwd_diff": "ForwardDerivativeOf", "__fwd_diff": "ForwardDerivativeOf",
                  "bwd_diff": "BackwardDerivativeOf", "__bwd_diff": "BackwardDerivativeOf",
                  "apply": "apply", "__apply": "apply"}

# Parameter types that carry no derivative (an `__apply` passes them through unchanged).
_NON_DIFF_TYPES = {"int", "uint", "bool", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
                   "uint32_t", "uint64_t", "dword"}


class FuncExtensionParserMixin:
    def parse_func_extension(self) -> list:
        kw = self.advance()
        gp = self.parse_generic_params() if self.at("<") else []
        t = self.ident("fwd_diff, bwd_diff or __apply after __func_extension")
        if t.text not in FUNC_EXT_KINDS:
            self.fail("fwd_diff, bwd_diff or __apply", t)
        open_tok = self.expect("(")
        target = self.parse_expr()
        self.expect_close(")", open_tok)
        params = self.parse_params()
        ret = None
        if self.accept("->"):
            ret = self.parse_type()
        where = self.parse_where()
        body = self.parse_func_body()
        base = f"__{t.text.strip('_')}_ext_{kw.loc.line}_{kw.loc.col}"      # not a name users can write
        d = ast.FuncDecl(base, params, ret, body, gp, where, None, loc=kw.loc)
        kind = FUNC_EXT_KINDS[t.text]
        if kind != "apply":
            d.attrs = [ast.Attribute(kind, [target], loc=t.loc)]
            return [d]
        if isinstance(target, ast.Member) and _uses_this(body):
            # `__apply(S::method)()` whose body uses `this`: the forward pass is a method of S (an
            # extension member, so `this` is the receiver) and the backward derivative takes the
            # receiver first, as `inout DifferentialPair<S>` (its context's first output is dThis).
            fwd = ast.FuncDecl(base, params, ret, body, [], [], None, loc=kw.loc)
            ext = ast.ExtensionDecl(target.base, [fwd], gp, [], where, loc=kw.loc)
            return [ext, _apply_backward(d, target, t.loc, this_type=target.base)]
        return [d, _apply_backward(d, target, t.loc)]


def _uses_this(node) -> bool:
    """Does an AST subtree mention `this`?"""
    if isinstance(node, ast.ThisExpr):
        return True
    if isinstance(node, list):
        return any(_uses_this(x) for x in node)
    if isinstance(node, ast.Node):
        return any(_uses_this(v) for v in vars(node).values() if isinstance(v, (list, ast.Node)))
    return False


def _apply_backward(apply: ast.FuncDecl, target: ast.Expr, loc, this_type=None) -> ast.FuncDecl:
    """The [BackwardDerivativeOf(target)] function that runs `apply` and then its context (with
    this_type: `apply` is a method of that type and the derivative takes the receiver first)."""
    ret = apply.return_type
    if not (isinstance(ret, ast.GenericApp) and isinstance(ret.base, ast.Name) and ret.base.name == "Tuple"
            and len(ret.args) == 2):
        raise error("E0012", "`__func_extension __apply(f)(...)` must return `Tuple<Result, Context>` (the "
                             "primal result and a context whose operator() is the backward pass)", apply.loc)
    if apply.body is None:
        raise error("E0012", "`__func_extension __apply(f)(...)` needs a body", apply.loc)

    def name(n):
        return ast.Name(n, loc=loc)

    def member(e, n):
        return ast.Member(e, n, loc=loc)

    params, call_args, stmts, grads, writes = [], [], [], [], []
    if this_type is not None:
        params.append(ast.Param("__self", ast.GenericApp(name("DifferentialPair"), [this_type], loc=loc), "inout",
                                loc=loc))
        stmts.append(ast.DeclStmt([ast.VarDecl("__d_self", member(this_type, "Differential"), loc=loc)], loc=loc))
        grads.append(name("__d_self"))
        writes.append(ast.ExprStmt(ast.Assign("=", name("__self"), ast.Call(
            name("diffPair"), [member(name("__self"), "p"), name("__d_self")], loc=loc), loc=loc), loc=loc))
    for p in apply.params:
        if p.direction not in ("in", ""):
            raise error("E0012", f"`__apply` parameter '{p.name}' must be an `in` parameter", p.loc)
        diff = "no_diff" not in p.mods and not (isinstance(p.type, ast.Name) and p.type.name in _NON_DIFF_TYPES)
        if not diff:
            params.append(ast.Param(p.name, p.type, "in", mods=set(p.mods), loc=p.loc))
            call_args.append(name(p.name))
            continue
        pair = ast.GenericApp(name("DifferentialPair"), [p.type], loc=loc)
        params.append(ast.Param(p.name, pair, "inout", loc=p.loc))
        call_args.append(member(name(p.name), "p"))
        g = f"__d_{p.name}"
        stmts.append(ast.DeclStmt([ast.VarDecl(g, member(p.type, "Differential"), loc=loc)], loc=loc))
        grads.append(name(g))
        writes.append(ast.ExprStmt(ast.Assign("=", name(p.name), ast.Call(
            name("diffPair"), [member(name(p.name), "p"), name(g)], loc=loc), loc=loc), loc=loc))
    result = ret.args[0]
    if not (isinstance(result, ast.Name) and result.name == "void"):
        params.append(ast.Param("__dOut", member(result, "Differential"), "in", loc=loc))
        grads.append(name("__dOut"))
    callee = name(apply.name) if this_type is None else member(member(name("__self"), "p"), apply.name)
    if apply.generic_params and this_type is None:
        callee = ast.GenericApp(callee, [name(g.name) for g in apply.generic_params], loc=loc)
    head = [ast.DeclStmt([ast.VarDecl("__t", None, ast.Call(callee, call_args, loc=loc), keyword="let", loc=loc)],
                         loc=loc),
            ast.DeclStmt([ast.VarDecl("__ctx", None, member(name("__t"), "_1"), keyword="var", loc=loc)], loc=loc)]
    run = [ast.ExprStmt(ast.Call(name("__ctx"), grads, loc=loc), loc=loc)]
    body = ast.Block(head + stmts + run + writes, loc=loc)
    bwd = ast.FuncDecl(apply.name + "_bwd", params, None, body, list(apply.generic_params), list(apply.where),
                       None, loc=apply.loc)
    bwd.attrs = [ast.Attribute("BackwardDerivativeOf", [target], loc=loc)]
    return bwd
