"""`__func_extension` declarations: a derivative attached to a function from outside it.

    __func_extension fwd_diff(f)(DifferentialPair<float> x) -> DifferentialPair<float> { ... }
    __func_extension bwd_diff(f)(inout DifferentialPair<float> x, float dOut) { ... }
    __func_extension<T : IFloat> fwd_diff(g<T>)(DifferentialPair<T> x) -> DifferentialPair<T> { ... }
    __func_extension fwd_diff(S.method)(DifferentialPair<S> self, DifferentialPair<float> x) -> ...

Slang desugars these into extensions of the function's differentiability interfaces.  Here each is
an ordinary function carrying `[ForwardDerivativeOf(target)]` / `[BackwardDerivativeOf(target)]`,
which the checker already resolves (by overload resolution against the derivative signature).
Slang gates the form behind `-experimental-feature`; slangjit accepts it without a flag.
"""
from __future__ import annotations

from . import ast
from ..source import error

FUNC_EXT_KINDS = {"fwd_diff": "ForwardDerivativeOf", "__fwd_diff": "ForwardDerivativeOf",
                  "bwd_diff": "BackwardDerivativeOf", "__bwd_diff": "BackwardDerivativeOf"}


class FuncExtensionParserMixin:
    def parse_func_extension(self) -> ast.FuncDecl:
        kw = self.advance()
        gp = self.parse_generic_params() if self.at("<") else []
        t = self.ident("fwd_diff, bwd_diff or __apply after __func_extension")
        if t.text in ("apply", "__apply"):
            raise error("E0012", f"`__func_extension {t.text}(...)` (a custom forward pass returning a "
                                 f"backward continuation) is not supported; give the backward derivative "
                                 f"with `__func_extension bwd_diff(f)(...)` or [BackwardDerivative]", t.loc)
        if t.text not in FUNC_EXT_KINDS:
            self.fail("fwd_diff or bwd_diff", t)
        open_tok = self.expect("(")
        target = self.parse_expr()
        self.expect_close(")", open_tok)
        params = self.parse_params()
        ret = None
        if self.accept("->"):
            ret = self.parse_type()
        where = self.parse_where()
        body = self.parse_func_body()
        name = f"{t.text.strip('_')}_ext_{kw.loc.line}_{kw.loc.col}"     # not a name users can write
        name = "__" + name
        d = ast.FuncDecl(name, params, ret, body, gp, where, None, loc=kw.loc)
        d.attrs = [ast.Attribute(FUNC_EXT_KINDS[t.text], [target], loc=t.loc)]
        return d
