"""Which parameters of a function instance take no derivative because of their declared type (Slang
decides differentiability from the declared type, not from the type a call instantiates it with):
a generic `T x` whose constraints do not make it differentiable, an associated type whose declaration
is not differentiable, an interface-typed parameter whose interface is not IDifferentiable."""
from __future__ import annotations

from ..parse import ast
from ..source import CompileError
from .. import types as T
from .results import BuiltinIfaceRes


class NoDiffMixin:
    def generic_nodiff_params(self, d: ast.FuncDecl, genv, unconstrained: bool = True) -> frozenset:
        """Indices of parameters declared with a generic type (`T x`, or an associated type `T.A x`) whose
        constraints do not make it differentiable (none at all included, outside the core library whose
        generic intrinsics such as `select<T>` carry their derivative rules), and "ret" for such a result. Slang decides differentiability from the declared
        type, not from the type a call instantiates it with: `f<M : IMaterial>(M m, ...)` takes `m`
        without a derivative even when the concrete material is IDifferentiable."""
        tparams = {g.name: g for g in d.generic_params if g.kind == "type"}
        if not tparams:
            return frozenset()
        ctx = self.ctx_for_env(genv)
        out = set()
        rt = d.return_type
        if isinstance(rt, ast.Name) and rt.name in tparams:
            cons = self.generic_constraints(d, tparams[rt.name])
            if (cons or unconstrained) and not any(self.constraint_differentiable(c, ctx) for c in cons):
                out.add("ret")             # an unconstrained `T` result: no derivative, as in Slang
        for i, p in enumerate(d.params):
            t = p.type
            if isinstance(t, ast.Name) and t.name in tparams:
                cons = self.generic_constraints(d, tparams[t.name])
                # unconstrained (`f<T>(T x)`) or only non-differentiable user interfaces: no derivative
                if (cons or unconstrained) and not any(self.constraint_differentiable(c, ctx) for c in cons):
                    out.add(i)
            elif isinstance(t, ast.Member) and isinstance(t.base, ast.Name) and t.base.name in tparams:
                # an associated type: differentiable when its own declaration says so
                found = False
                for c in self.generic_constraints(d, tparams[t.base.name]):
                    decl = self.constraint_interface_decl(c, ctx)
                    a = next((m for m in getattr(decl, "members", []) if isinstance(m, ast.AssocTypeDecl)
                              and m.name == t.name), None) if decl is not None else None
                    if a is not None:
                        found = True
                        if any(self.constraint_differentiable(x, ctx) for x in a.constraints):
                            break
                else:
                    if found:
                        out.add(i)
        return frozenset(out)

    @staticmethod
    def generic_constraints(d: ast.FuncDecl, g: ast.GenericParam) -> list:
        cons = ([g.type] if g.type is not None else []) + list(g.also)
        return cons + [w.constraint for w in d.where if not w.equal and isinstance(w.subject, ast.Name)
                       and w.subject.name == g.name]

    def constraint_differentiable(self, c, ctx) -> bool:
        """Does a generic constraint make a type differentiable? Only a user interface that does not
        extend IDifferentiable says no (built-in constraints such as IFloat are left as they were)."""
        try:
            r = self.resolve_base(c, ctx)
        except CompileError:
            return True
        return self.iface_type_differentiable(r)

    def iface_type_differentiable(self, r) -> bool:
        """False only for an interface that extends neither IDifferentiable nor IDifferentiablePtrType."""
        if isinstance(r, T.InterfaceType):
            return self.iface_extends(r, BuiltinIfaceRes("IDifferentiable")) or \
                self.iface_extends(r, BuiltinIfaceRes("IDifferentiablePtrType"))
        return True

    def iface_param_differentiable(self, t, ctx) -> bool:
        try:
            r = self.resolve_type(t, ctx)
        except CompileError:
            return True
        return self.iface_type_differentiable(r)

    def constraint_interface_decl(self, c, ctx):
        try:
            r = self.resolve_base(c, ctx)
        except CompileError:
            return None
        return r.info.sym.decl if isinstance(r, T.InterfaceType) else None
