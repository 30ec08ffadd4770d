"""`Function.dispatch(thread_count, vars, **kwargs)`: raw dispatch of a function whose first parameter is the
dispatch thread id (or of a `[shader("compute")]` entry point)."""
from __future__ import annotations

from ..compiler import SourceSpec, compile_program
from ..runtime.base import device_compile_options, thread_count3
from .callgroups import constant_decl


def raw_dispatch(node, thread_count, vars: dict, **kwargs):
    fn = node.function
    mod = fn.module
    cand = fn.overloads[0]
    thread_count = list(thread_count3(thread_count))      # 1 to 3 integers >= 0 ("12" and 7.9 are errors)
    consts = "".join(constant_decl(k, v) for k, v in node.constants_.items())    # node.constants(...)
    key = ("raw", tuple(sorted(kwargs)), (node.thread_group_size_, consts), tuple(thread_count))
    cache = fn._node_caches.setdefault("raw", {})
    k = cache.get(key[:3])
    if k is None:
        is_entry = "shader" in cand.attrs
        if is_entry:
            compiled = compile_program([SourceSpec(path=mod._source_path, text=mod._source_text + "\n" + consts,
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
            code = ("\nimport \"slangpy\";\n" + consts + "[shader(\"compute\")]\n"
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
            if "_sj_csi_" in compiled.source:
                raise ValueError(f"dispatch: '{cand.name}' uses CallShapeInfo, which only calls set (a raw dispatch "
                                 "has no call shape: use the dispatch thread id parameter)")
            k = mod.device._create_kernel_from_compiled(compiled, "_sj_raw")
            k._sj_raw = True
        cache[key[:3]] = k
    vals = dict(kwargs)
    for name, v in list(vals.items()):
        if getattr(v, "_sj_tensor", False):
            vals[name] = {"_data": v.storage._addr, "_shape": list(v.shape), "_strides": list(v.strides),
                          "_offset": v.offset}
    tc = thread_count
    if getattr(k, "_sj_raw", False):
        vals["_sj_count"] = tc
    k.dispatch(tc, vars=vars, **vals)
