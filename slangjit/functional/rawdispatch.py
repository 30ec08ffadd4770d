"""`Function.dispatch(thread_count, vars, **kwargs)`: raw dispatch of a function whose first parameter is the
dispatch thread id (or of a `[shader("compute")]` entry point)."""
from __future__ import annotations

import warnings

from ..compiler import SourceSpec, compile_program
from ..runtime.base import device_compile_options, thread_count3
from . import typeview as S
from .callhelpers import _constant_decl


def raw_dispatch(node, thread_count, vars: dict, **kwargs):
    fn = node.function
    mod = fn.module
    # SlangPy's raw-dispatch rules (its wording)
    if len(fn.overloads) > 1:
        raise ValueError("Cannot use raw dispatch on overloaded functions.")
    cand = fn.overloads[0]
    if cand.owner is not None or getattr(node, "this", None) is not None:
        raise ValueError("Cannot use raw dispatch on type methods.")
    if any(p.direction != "in" for p in cand.params):
        raise ValueError("Raw dispatch functions cannot have out or inout parameters.")
    if not isinstance(cand.return_type, S.VoidT):
        raise ValueError("Raw dispatch functions cannot have return values.")
    if getattr(node, "bwds_mode", False):
        raise ValueError("Raw dispatch cannot run a backwards (.bwds) call.")
    consts = dict(getattr(node, "constants_", {}) or {})
    # a keyword the function has no parameter for is ignored, as SlangPy does, with a warning naming it (a
    # misspelt name leaves the real parameter unset, which the kernel reports: every uniform must be given)
    known = {p.name for p in cand.params}
    for extra in [n for n in kwargs if n not in known]:
        warnings.warn(f"dispatch: '{cand.name}' has no parameter '{extra}'; the argument is ignored "
                      f"(parameters: {', '.join(sorted(known)) or 'none'})", UserWarning, stacklevel=3)
        del kwargs[extra]
    thread_count = list(thread_count3(thread_count))      # 1 to 3 integers >= 0 ("12" and 7.9 are errors)
    key = ("raw", tuple(sorted(kwargs)), repr(sorted(consts.items())), node.thread_group_size_)
    cache = fn._node_caches.setdefault("raw", {})
    k = cache.get(key)
    if k is None:
        is_entry = "shader" in cand.attrs
        prefix = "".join("\n" + _constant_decl(c, v) for c, v in consts.items())
        if is_entry:
            compiled = compile_program([SourceSpec(path=mod._source_path, text=mod._source_text + prefix,
                                                   name=mod.name)],
                                       [cand.name], target=mod.device._target,
                                       include_paths=mod._include_paths,
                                       options=device_compile_options(mod.device))
            k = mod.device._create_kernel_from_compiled(compiled, cand.name)
        else:
            params = cand.params
            if not params:
                raise ValueError(f"dispatch: '{cand.name}' needs a first parameter for the dispatch thread id")
            decl = []
            call = ["_sj_tid"]
            for p in params[1:]:
                decl.append(f"uniform {p.type.name} {p.name}")
                call.append(p.name)
            first = params[0].type.name
            nx, ny, nz = node.thread_group_size_ or (32, 1, 1)
            code = (prefix + "\nimport \"slangpy\";\n[shader(\"compute\")]\n"
                    f"[numthreads({nx}, {ny}, {nz})]\n"
                    f"void _sj_raw(uint3 _sj_tid0 : SV_DispatchThreadID, uniform uint3 _sj_count"
                    f"{''.join(', ' + d for d in decl)})\n{{\n"
                    "    if (any(_sj_tid0 >= _sj_count)) return;\n"
                    f"    {first} _sj_tid = {first}(_sj_tid0);\n"
                    f"    {cand.name}({', '.join(call)});\n}}\n")
            compiled = compile_program([SourceSpec(path=mod._source_path, text=mod._source_text + code,
                                                   name=mod.name)], ["_sj_raw"], target=mod.device._target,
                                       include_paths=mod._include_paths,
                                       options=device_compile_options(mod.device))
            if compiled.reflection.uses_call_shape:
                raise ValueError(f"dispatch: '{cand.name}' uses CallShapeInfo, which only calls set (a raw dispatch "
                                 "has no call shape: use the dispatch thread id parameter)")
            k = mod.device._create_kernel_from_compiled(compiled, "_sj_raw")
            k._sj_raw = True
        cache[key] = k
    # values given with .set(...) (dicts, or hooks called with the function node), then `vars`
    merged: dict = {}
    for item in getattr(node, "sets", ()):
        merged.update(item(node) if callable(item) else item)
    merged.update(vars)
    vars = {n: _tensor_view(v) for n, v in merged.items()}
    vals = dict(kwargs)
    for name, v in list(vals.items()):
        vals[name] = _tensor_view(v)
    tc = thread_count
    if getattr(k, "_sj_raw", False):
        vals["_sj_count"] = tc
    k.dispatch(tc, vars=vars, **vals)


def _tensor_view(v):
    """A spy.Tensor as the fields of a slangpy Tensor<T, D> uniform (other values unchanged)."""
    if getattr(v, "_sj_tensor", False):
        return {"_data": v.storage._addr, "_shape": list(v.shape), "_strides": list(v.strides), "_offset": v.offset}
    if isinstance(v, dict):
        return {k: _tensor_view(x) for k, x in v.items()}
    return v

