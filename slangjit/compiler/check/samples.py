"""Sample generic arguments for checking a generic function's body when a module is loaded.

Slang checks a generic body once, against its constraints; slangjit checks bodies per
instantiation.  To report the errors of generic functions at load (as SlangPy does) without
reporting errors Slang would not, a generic function is instantiated with up to two sample
argument lists chosen to satisfy its constraints (`T : __BuiltinFloatingPointType` -> float, then
int or double; `T : IFoo` -> the module's structs conforming to IFoo; `let N : int` -> its default, else
4, then 7; an interface-typed parameter -> conforming structs), and only the errors both samples
produce are reported: an error that depends on the choice is not a property of the body.  A
function with an unconstrained type parameter, a parameter pack, or constraints no sample meets is
not checked here (its errors surface where it is called)."""
from __future__ import annotations

from .. import types as T
from ..source import CompileError
from .scope import Env, FuncSym, TypeSym, ValueSym
from .results import const_expr

_SCALARS = [T.FLOAT, T.INT, T.DOUBLE, T.UINT, T.HALF, T.BOOL]    # (varied kinds first)


def _param_choices(chk, d, env: Env, structs: list):
    """Candidates per generic parameter of declaration d (binding the first of each in env as it
    goes, for later constraints); None when some parameter cannot be sampled."""
    if any(p.kind == "pack" for p in d.generic_params):
        return None
    choices: list = []
    ctx = chk.ctx_for_env(env)
    for p in d.generic_params:
        if p.kind == "value":
            if p.default is not None:
                try:
                    v = chk.generic_args([p.default], ctx)[0]
                except CompileError:
                    return None
                cands = [v]
            else:
                cands = [4, 7]
            env.add(p.name, ValueSym(p.name, const_expr(cands[0], d.loc)))
        else:
            constraints = []
            try:
                for c in ([p.type] if p.type is not None else []) + list(p.also):
                    constraints.append(chk.resolve_base(c, ctx))
            except CompileError:
                return None
            if not constraints:
                return None                    # unconstrained: no sample stands for every type
            cands = [t for t in _SCALARS + [T.VectorType(T.FLOAT, 3)] + structs
                     if all(_conforms(chk, t, c) for c in constraints)][:2]
            if not cands:
                return None
            env.add(p.name, TypeSym(p.name, cands[0]))
        choices.append(cands)
    return choices


def sample_struct_args(chk, ssym, structs: list) -> list:
    """Up to two generic-argument lists for a generic struct (its methods are then checked)."""
    choices = _param_choices(chk, ssym.decl, Env(ssym.env, "generic"), structs)
    if choices is None or getattr(ssym.decl, "where", None):
        return []
    out = []
    for k in (0, 1):
        args = [c[min(k, len(c) - 1)] for c in choices]
        if out and _same(args, out[0]):
            break
        out.append(args)
    return out


def sample_type_args(chk, sym: FuncSym, structs: list) -> list:
    """Up to two type-argument lists for instantiate_function(sym, ...); [] when the function
    cannot be sampled.  `structs`: the module's non-generic struct types."""
    d = sym.decl
    env = Env(sym.env, "generic")
    choices = _param_choices(chk, d, env, structs)   # per generic parameter: its candidates
    if choices is None:
        return []
    # interface-typed parameters are implicit generics
    impl: list = []
    try:
        ptypes = chk.param_types(sym, env)
    except CompileError:
        return []
    for i, pt in enumerate(ptypes):
        if isinstance(pt, T.InterfaceType):
            cands = [t for t in structs if _conforms(chk, t, pt)][:2]
            if not cands:
                return []
            impl.append((i, cands))
    samples = []
    for k in (0, 1):
        args = [c[min(k, len(c) - 1)] for c in choices] + \
            [("impl", i, c[min(k, len(c) - 1)]) for i, c in impl]
        if samples and _same(args, samples[0]):
            break
        if d.where and not _where_holds(chk, sym, args):
            continue
        samples.append(args)
    return samples


def _conforms(chk, t, c) -> bool:
    try:
        return chk.conforms(t, c)
    except CompileError:
        return False


def _where_holds(chk, sym, args) -> bool:
    d = sym.decl
    try:
        genv = chk.bind_generics(d.generic_params, [a for a in args if not isinstance(a, tuple)], sym.env, d.loc, None)
        c = chk.ctx_for_env(genv)
        return all(chk.where_holds(w, c) for w in d.where)
    except CompileError:
        return False


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b))


def errors_in_all(runs: list) -> list:
    """The diagnostics (lists per sample) every sample produced, keyed by code and place."""
    if not runs:
        return []
    keys = None
    for diags in runs:
        k = {(d.code, d.loc.line, d.loc.col) for d in diags}
        keys = k if keys is None else keys & k
    return [d for d in runs[0] if (d.code, d.loc.line, d.loc.col) in keys]


def describe_sample(sym: FuncSym, args: list) -> str:
    """`T = float, N = 4` for the note added to a sampled body's diagnostics."""
    d = sym.decl
    parts = [f"{p.name} = {a}" for p, a in zip(d.generic_params, [a for a in args if not isinstance(a, tuple)])]
    parts += [f"{d.params[a[1]].name}: {a[2]}" for a in args if isinstance(a, tuple)]
    return ", ".join(parts)

