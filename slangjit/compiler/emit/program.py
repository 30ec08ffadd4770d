"""Assembles one translation unit: prelude, types, globals, functions and entry launchers."""
from __future__ import annotations

import os

from ..ir import nodes as ir
from .. import types as T
from ..reflection import EntryPointInfo, ProgramReflection
from ..source import error
from .cpp import CppEmitter, block_layout, prelude_text

SYSTEM_VALUES = {"sv_dispatchthreadid": "dtid", "sv_groupid": "gid", "sv_groupthreadid": "gtid",
                 "sv_groupindex": "gindex"}


# Test switch (SLANGJIT_FUSE_ENTRIES=1, with a fresh SLANGJIT_CACHE_DIR): run the CUDA coarsened kernels'
# inlining, value reuse and dead-code removal (emit/cuda.py FUSE_COARSE) on every CPU entry point, with
# no adds deferred, so that the whole CPU suite exercises those passes.
FUSE_ENTRIES = os.environ.get("SLANGJIT_FUSE_ENTRIES") == "1"


def fuse_entries(entries: list[ir.Function]) -> None:
    from ..ir.fusion import inline_copy, reuse_and_prune
    for fn in entries:
        inline_copy(fn)
        reuse_and_prune(fn)


def emit_program(functions: list[ir.Function], globals_: list[ir.GlobalVar],
                 entries: list[tuple[ir.Function, tuple[int, int, int]]], target: str = "cpp",
                 group_barrier: bool = False):
    if target == "cuda":
        from .cuda import emit_program_cuda     # the CUDA flavour (kernel ABI documented there)
        return emit_program_cuda(functions, globals_, entries)
    if FUSE_ENTRIES:
        fuse_entries([fn for fn, _ in entries])
    em = CppEmitter(target)
    uniforms = [g for g in globals_ if g.kind == "uniform"]
    others = [g for g in globals_ if g.kind != "uniform"]

    # Globals block.
    g_fields, g_size = block_layout([(g.slang_name, g.type) for g in uniforms])
    g_lines = ["struct sj_Globals {"]
    for g, fl in zip(uniforms, g_fields):
        g_lines.append(f"    {em.ctype(g.type)} {g.name};")
    if not uniforms:
        g_lines.append("    char sj_unused;")
    g_lines.append("};")
    for g, fl in zip(uniforms, g_fields):
        g_lines.append(f"static_assert(offsetof(sj_Globals, {g.name}) == {fl.offset}, \"layout of {g.slang_name}\");")
    g_lines.append("static thread_local sj_Globals* sj_g;")

    # Static globals (constants, groupshared, per-thread statics).
    s_lines = []
    for g in others:
        ct = em.ctype(g.type)
        init = f" = {em.expr(g.init)}" if g.init is not None else " = {}"
        if g.kind == "const":
            s_lines.append(f"static const {ct} {g.name}{init};")
        else:
            s_lines.append(f"static thread_local {ct} {g.name}{init};")

    protos = [em.prototype(fn) + ";" for fn in functions]
    for fn in functions:
        em.function(fn)
    body_lines = em.lines

    # Entry launchers.
    refl = ProgramReflection(globals=g_fields, globals_size=g_size)
    launchers = []
    for fn, numthreads in entries:
        sname, call_args, p_fields, p_size, lines = entry_params(em, fn, numthreads, "sj_P->")
        for fl in p_fields:
            lines.append(f"static_assert(offsetof({sname}, {fl.name}) == {fl.offset}, \"layout of {fl.name}\");")
        nx, ny, nz = numthreads
        symbol = f"sj_entry_{fn.slang_name}"
        if group_barrier:
            # Threads of a group run as fibers so group barriers hold (prelude: sj::fiber).
            lines += [
                f"struct sj_Group_{fn.slang_name} {{ const {sname}* sj_P; uint32_t sj_gx, sj_gy, sj_gz; }};",
                f"static void sj_thread_{fn.slang_name}(void* sj_arg, uint32_t sj_t)",
                "{",
                f"    const sj_Group_{fn.slang_name}* sj_G = (const sj_Group_{fn.slang_name}*)sj_arg;",
                "    const auto* sj_P = sj_G->sj_P;",
                "    (void)sj_P;",
                "    uint32_t sj_gx = sj_G->sj_gx, sj_gy = sj_G->sj_gy, sj_gz = sj_G->sj_gz;",
                f"    uint32_t sj_tx = sj_t % {nx}u, sj_ty = (sj_t / {nx}u) % {ny}u, sj_tz = sj_t / {nx * ny}u;",
                f"    {fn.name}({', '.join(call_args)});",
                "}",
                f'extern "C" SJ_EXPORT void {symbol}(void* sj_gp, void* sj_pp, const uint32_t* sj_gc, uint32_t sj_begin, uint32_t sj_end)',
                "{",
                "    sj_g = (sj_Globals*)sj_gp;",
                f"    sj_Group_{fn.slang_name} sj_G{{(const {sname}*)sj_pp, 0u, 0u, 0u}};",
                "    for (uint32_t sj_lin = sj_begin; sj_lin < sj_end; ++sj_lin)",
                "    {",
                "        sj_G.sj_gx = sj_lin % sj_gc[0];",
                "        uint32_t sj_rest = sj_lin / sj_gc[0];",
                "        sj_G.sj_gy = sj_rest % sj_gc[1]; sj_G.sj_gz = sj_rest / sj_gc[1];",
                f"        sj::fiber::run({nx * ny * nz}u, &sj_thread_{fn.slang_name}, &sj_G);",
                "    }",
                "}",
            ]
            launchers.append("\n".join(lines))
            refl.entry_points[fn.slang_name] = EntryPointInfo(fn.slang_name, symbol, numthreads, p_fields, p_size)
            continue
        lines += [
            f'extern "C" SJ_EXPORT void {symbol}(void* sj_gp, void* sj_pp, const uint32_t* sj_gc, uint32_t sj_begin, uint32_t sj_end)',
            "{",
            "    sj_g = (sj_Globals*)sj_gp;",
            f"    const {sname}* sj_P = (const {sname}*)sj_pp;",
            "    (void)sj_P;",
            "    for (uint32_t sj_lin = sj_begin; sj_lin < sj_end; ++sj_lin)",
            "    {",
            "        uint32_t sj_gx = sj_lin % sj_gc[0], sj_rest = sj_lin / sj_gc[0];",
            "        uint32_t sj_gy = sj_rest % sj_gc[1], sj_gz = sj_rest / sj_gc[1];",
            f"        for (uint32_t sj_tz = 0; sj_tz < {nz}u; ++sj_tz)",
            f"        for (uint32_t sj_ty = 0; sj_ty < {ny}u; ++sj_ty)",
            f"        for (uint32_t sj_tx = 0; sj_tx < {nx}u; ++sj_tx)",
            "        {",
            f"            {fn.name}({', '.join(call_args)});",
            "        }",
            "    }",
            "}",
        ]
        launchers.append("\n".join(lines))
        refl.entry_points[fn.slang_name] = EntryPointInfo(fn.slang_name, symbol, numthreads, p_fields, p_size)

    parts = [
        prelude_text(),
        "#include <cstddef>",
        "#ifndef SJ_EXPORT\n#define SJ_EXPORT __attribute__((visibility(\"default\")))\n#endif",
        "\n".join(em.struct_out),
        "\n".join(g_lines),
        "\n".join(s_lines),
        "\n".join(protos),
        "\n".join(body_lines),
        "\n\n".join(launchers),
    ]
    return "\n\n".join(parts) + "\n", refl


def entry_params(em: CppEmitter, fn: ir.Function, numthreads, access: str):
    """An entry point's parameters: system values become launcher expressions, the rest form the
    `uniform` parameter block.  Returns (struct name, call arguments, block layout, block size,
    the struct's C++ lines).  `access` reads a field of the block (`sj_P->` / `sj_P.`)."""
    decl = fn.attrs.get("decl")
    params_items, call_args = [], []
    for i, p in enumerate(fn.params):
        ap = decl.params[i] if decl is not None and i < len(decl.params) else None
        sem = (ap.semantic or "").lower() if ap is not None else ""
        if sem in SYSTEM_VALUES:
            call_args.append(system_value_arg(em, SYSTEM_VALUES[sem], p.type, numthreads))
        elif sem.startswith("sv_"):
            raise error("E5003", f"system value '{ap.semantic}' is not supported on this target", ap.loc)
        else:
            params_items.append((p.name, p.type))
            call_args.append(f"{access}{p.name}")
    p_fields, p_size = block_layout(params_items)
    sname = f"sj_Params_{fn.slang_name}"
    lines = [f"struct {sname} {{"] + [f"    {em.ctype(t)} {name};" for name, t in params_items]
    if not params_items:
        lines.append("    char sj_unused;")
    lines.append("};")
    return sname, call_args, p_fields, p_size, lines


def system_value_params(fn: ir.Function) -> set[int]:
    """Indices of an entry point's parameters that are bound to system values (thread ids)."""
    decl = fn.attrs.get("decl")
    out = set()
    for i, ap in enumerate(decl.params if decl is not None else ()):
        if (ap.semantic or "").lower().startswith("sv_"):
            out.add(i)
    return out


def system_value_arg(em: CppEmitter, which: str, t: T.Type, numthreads) -> str:
    nx, ny, nz = numthreads
    if which == "gindex":
        # SV_GroupIndex: flattened thread index within the group.
        v = f"(sj_tz * {nx * ny}u + sj_ty * {nx}u + sj_tx)"
        return em.convert_str(v, T.UINT, t)
    vecs = {
        "dtid": f"sj::vec<uint32_t, 3>{{{{sj_gx * {nx}u + sj_tx, sj_gy * {ny}u + sj_ty, sj_gz * {nz}u + sj_tz}}}}",
        "gid": "sj::vec<uint32_t, 3>{{sj_gx, sj_gy, sj_gz}}",
        "gtid": "sj::vec<uint32_t, 3>{{sj_tx, sj_ty, sj_tz}}",
    }
    v = vecs[which]
    if isinstance(t, T.ScalarType):
        return em.convert_str(f"{v}[0]", T.UINT, t)
    if isinstance(t, T.VectorType):
        if t.n < 3:
            v = f"sj::swizzle<{','.join(str(i) for i in range(t.n))}>({v})"
        return em.convert_str(v, T.VectorType(T.UINT, t.n), t)
    raise ValueError(f"bad system value type {t}")
