"""The derivative functions of a program, and the facts about each function's derivatives.

The checker decides, per function: its primal substitute (`[PrimalSubstitute]`), its custom forward
and backward derivatives (`[ForwardDerivative(g)]`, `[BackwardDerivativeOf(f)]`, ...) and, for a core
intrinsic, its derivative rule (the `[ForwardDerivativeOf(sin)]` function of core/derivatives.slang).
Those are resolutions of names and overloads, so they are checker work; they are recorded here as
data.  `fwd(fn)` / `bwd(fn)` make the *shell* of a derivative function (its signature; a custom
derivative when there is one) and queue it; autodiff (compiler/autodiff) builds the queued bodies.

While the checker runs, a fact that is not recorded yet is computed by the checker's resolver
(`source`, check/derivatives.py) and recorded.  `seal()` drops the resolver: from then on (autodiff
and later) the facts are a table, and asking for one that was not recorded is an internal error.
The checker records, before sealing, the facts of every function reachable from a queued derivative
(check/derivatives.py `prepare`).  A fact may be a CompileError (say, a custom derivative whose
signature does not match): it is raised where the fact is used, as if it had been computed there.
"""
from __future__ import annotations

from typing import Optional

from .. import types as T
from ..source import CompileError, error
from . import nodes as ir
from .difftypes import diff_type, is_ptr_kind, pair_of, recorded_facts
from .fwd_transpose import transposed_bwd
from .program import unique_name

DIFF_ATTRS = {"Differentiable", "ForwardDifferentiable", "BackwardDifferentiable", "TreatAsDifferentiable",
              "BackwardDerivative", "ForwardDerivative", "PrimalSubstitute"}

# A function marked with one of these has its body differentiated by bwd_diff even when it has a
# user forward derivative (Slang's behaviour); without them bwd_diff transposes the forward one.
BODY_DIFF_ATTRS = {"Differentiable", "BackwardDifferentiable", "TreatAsDifferentiable"}

FACT_KINDS = ("subst", "fwd", "bwd", "rule")     # substitute, custom fwd, custom bwd, intrinsic rule

_MISSING = object()


def attrs(fn: ir.Function) -> dict:
    return fn.attrs.get("attrs", {})


def has_own_facts(fn: ir.Function) -> bool:
    """Can fn have a substitute, custom derivative or rule at all?  A function with no declaration
    and no attributes (a generated derivative, a dispatcher) cannot."""
    return fn.attrs.get("decl") is not None or bool(attrs(fn)) or fn.intrinsic is not None


class Derivatives:
    def __init__(self, functions: list, source=None):
        self.functions = functions            # the program's function list: shells are appended to it
        self.source = source                  # the checker's resolver until seal()
        self.facts: dict = {}                 # (kind, id(fn)) -> Function / rule tuple / None / CompileError
        self.fwd_cache: dict[int, ir.Function] = {}
        self.bwd_cache: dict[int, ir.Function] = {}
        self.pending: list = []               # (kind, fn, shell, loc): bodies autodiff builds
        self.transposed: set = set()          # id(F): user forward derivatives bwd_diff transposes
        self.subst_origin: dict = {}          # id(substitute) -> the function it stands in for
        self.struct_facts = source.struct_facts if source is not None else recorded_facts

    def seal(self):
        """The checker is done: facts are data from here on."""
        self.source = None
        self.struct_facts = recorded_facts

    # ------------------------------------------------------------------ facts

    def fact(self, kind: str, fn: ir.Function):
        key = (kind, id(fn))
        v = self.facts.get(key, _MISSING)
        if v is _MISSING:
            if self.source is not None:
                self.facts[key] = None                 # recursion: nothing while it is being decided
                try:
                    v = self.source.compute(kind, fn)
                except CompileError as ex:
                    v = ex
                self.facts[key] = v
            elif not has_own_facts(fn):
                v = None
            else:
                raise error("E9003", f"internal compiler error: the derivative facts of '{fn.slang_name}' were not "
                                     f"recorded before autodiff (this is a slangjit bug)", fn.loc)
        if isinstance(v, CompileError):
            raise v
        return v

    def substitute(self, fn: ir.Function) -> Optional[ir.Function]:
        return self.fact("subst", fn)

    def find_custom(self, fn: ir.Function, mode: str) -> Optional[ir.Function]:
        return self.fact(mode, fn)

    def intrinsic_rule(self, fn: ir.Function):
        """(rule function, its P expression, its D expression) for a core intrinsic, or None."""
        return self.fact("rule", fn)

    def _sub(self, fn):
        g = self.substitute(fn)
        if g is None or g is fn:
            return None
        self.subst_origin.setdefault(id(g), fn)
        return g

    def _custom(self, fn: ir.Function, mode: str) -> Optional[ir.Function]:
        """fn's user derivative; for a primal substitute that derivative code calls in place of the
        function it stands in for, that function's user derivative (the substitute replaces the primal
        computation only: `[BackwardDerivativeOf(f)]` stays f's derivative, as in Slang)."""
        c = self.find_custom(fn, mode)
        orig = self.subst_origin.get(id(fn))
        if c is None and orig is not None:
            c = self.find_custom(orig, mode)
        return c

    # ------------------------------------------------------------------ types and signatures

    def diff_type(self, t: T.Type) -> Optional[T.Type]:
        return diff_type(t, self.struct_facts)

    def is_ptr(self, t: T.Type) -> bool:
        return is_ptr_kind(t, self.struct_facts)

    def pair(self, t: T.Type, d: T.Type) -> T.PairType:
        return pair_of(t, d, self.struct_facts)

    def signature(self, fn: ir.Function):
        """Per parameter: its Differential type, or None when it gets no derivative; and the result's."""
        if "ad_sig" in fn.attrs:
            return fn.attrs["ad_sig"]
        decl = fn.attrs.get("decl")
        dparams = list(decl.params) if decl is not None else []
        offset = len(fn.params) - len(dparams)
        out = []
        for i, p in enumerate(fn.params):
            ap = dparams[i - offset] if i >= offset and dparams else None
            if p.name == "this" and i == 0 and offset == 1:
                if "NoDiffThis" in attrs(fn):
                    out.append(None)
                    continue
            elif ap is not None and ("no_diff" in ap.mods or i - offset in fn.attrs.get("generic_nodiff", ())):
                out.append(None)
                continue
            d = self.diff_type(p.type)
            if d is not None and p.direction != "in" and self.is_ptr(p.type):
                raise error("E6014", f"'{fn.slang_name}': differentiable pointer parameter '{p.name}' must be an "
                                     f"`in` parameter (its differential is storage the caller provides)", fn.loc)
            out.append(d)
        rd = self.diff_type(fn.ret) if fn.ret != T.VOID and "ret" not in fn.attrs.get("generic_nodiff", ()) else None
        if rd is not None and self.is_ptr(fn.ret):
            raise error("E6014", f"'{fn.slang_name}' returns differentiable pointer type '{fn.ret}': its "
                                 f"differential could not be known; return it from a non-differentiable "
                                 f"function, or pass the pointer in", fn.loc)
        fn.attrs["ad_sig"] = (out, rd)
        return out, rd

    def is_differentiable(self, fn: ir.Function) -> bool:
        if fn.attrs.get("generated_derivative") or id(fn) in self.transposed:
            return True
        if self.substitute(fn) is not None:
            return True
        if DIFF_ATTRS & set(attrs(fn)):
            return True
        return self.find_custom(fn, "fwd") is not None or self.find_custom(fn, "bwd") is not None

    # ------------------------------------------------------------------ derivative functions

    def fwd(self, fn: ir.Function, loc) -> ir.Function:
        """The forward derivative of fn: its custom one, or a generated shell queued for autodiff."""
        if id(fn) in self.fwd_cache:
            return self.fwd_cache[id(fn)]
        sub = self._sub(fn)
        custom = self._custom(fn, "fwd")
        if sub is not None and custom is None:
            g = self.fwd(sub, loc)
            self.fwd_cache[id(fn)] = g
            return g
        if custom is not None:
            self.fwd_cache[id(fn)] = custom
            return custom
        pd, rd = self.signature(fn)
        params = [ir.Var(p.name, self.pair(p.type, d) if d is not None else p.type, p.direction)
                  for p, d in zip(fn.params, pd)]
        ret = T.PairType(fn.ret, rd) if rd is not None else fn.ret
        g = ir.Function(unique_name("fwd_" + fn.name), params, ret, loc=fn.loc)
        g.slang_name = "fwd_" + fn.slang_name
        g.attrs["generated_derivative"] = ("fwd", fn)
        g.attrs["decl"] = None
        g.attrs["ad_sig"] = ([self.diff_type(p.type) for p in params],
                             self.diff_type(ret) if ret != T.VOID else None)
        self.fwd_cache[id(fn)] = g
        # A function whose only derivative is a user backward one (not itself marked differentiable)
        # has no forward derivative: in forward mode it is a constant, as in Slang.
        bwd_only = sub is None and not (BODY_DIFF_ATTRS & set(attrs(fn))) and "ForwardDifferentiable" not in attrs(fn) \
            and self.find_custom(fn, "bwd") is not None
        kind = "fwd-zero" if "TreatAsDifferentiable" in attrs(fn) or bwd_only else \
            "fwd-intrinsic" if fn.intrinsic is not None else "fwd"
        self.pending.append((kind, fn, g, loc))
        self.functions.append(g)
        return g

    def bwd(self, fn: ir.Function, loc) -> ir.Function:
        """The backward derivative of fn: its custom one, or a generated shell queued for autodiff."""
        if id(fn) in self.bwd_cache:
            return self.bwd_cache[id(fn)]
        sub = self._sub(fn)
        custom = self._custom(fn, "bwd")
        if sub is not None and custom is None:
            g = self.bwd(sub, loc)
            self.bwd_cache[id(fn)] = g
            return g
        if custom is not None:
            self.bwd_cache[id(fn)] = custom
            return custom
        pd, rd = self.signature(fn)
        fwd_only = self.find_custom(fn, "fwd") if sub is None and fn.intrinsic is None else None
        decl = fn.attrs.get("decl")
        has_body = fn.body is not None or getattr(decl, "body", None) is not None
        if fwd_only is not None and (not has_body or not (BODY_DIFF_ATTRS & set(attrs(fn)))):
            g = transposed_bwd(self, fn, fwd_only, self.bwd_params(fn, pd, rd), loc)
            if g is not None:
                self.bwd_cache[id(fn)] = g
                self.functions.append(g)
                return g
        params = self.bwd_params(fn, pd, rd)
        g = ir.Function(unique_name("bwd_" + fn.name), params, T.VOID, loc=fn.loc)
        g.slang_name = "bwd_" + fn.slang_name
        g.attrs["generated_derivative"] = ("bwd", fn)
        g.attrs["decl"] = None
        self.bwd_cache[id(fn)] = g
        kind = "bwd-zero" if "TreatAsDifferentiable" in attrs(fn) else \
            "bwd-intrinsic" if fn.intrinsic is not None else "bwd"
        self.pending.append((kind, fn, g, loc))
        self.functions.append(g)
        return g

    def bwd_params(self, fn: ir.Function, pd, rd) -> list:
        params = []
        for p, d in zip(fn.params, pd):
            if d is None:
                params.append(ir.Var(p.name, p.type, "out" if p.direction == "out" else "in"))
            elif p.direction == "out":
                params.append(ir.Var(p.name, d, "in"))
            elif self.is_ptr(p.type):
                # never written: the gradient goes through the pointer (Slang passes it by value)
                params.append(ir.Var(p.name, self.pair(p.type, d), "in"))
            else:
                params.append(ir.Var(p.name, T.PairType(p.type, d), "inout"))
        if rd is not None:
            params.append(ir.Var("dOut", rd, "in"))
        return params
