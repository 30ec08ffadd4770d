"""The CUDA flavour of the C-family emitter: IR -> CUDA C++ for NVRTC (or `nvcc -ptx`).

Only what differs from the C++ target lives here; expressions and statements are CppEmitter's.

Translation unit: `#define SJ_CUDA_TU 1`, the prelude (whose `#if SJ_CUDA` blocks supply `__half`,
native atomics, warp-level wave ops and barriers; under `__CUDACC_RTC__` it defines the few std
pieces it needs, since NVRTC has no standard headers), the struct definitions, the globals
block, statics, `__device__` functions, and one kernel per entry point.

Kernel ABI (the CUDA counterpart of the CPU ABI in reflection.py):

    extern "C" __global__ void __launch_bounds__(NX*NY*NZ)
    sj_entry_<name>(const sj_Params_<name> sj_P);

* Launch with block size = [numthreads] (NX, NY, NZ) and grid = the group counts
  (ceil(thread_count / numthreads) per axis). Every thread of every group runs, as on the CPU
  (no bounds check against the requested thread count, as in Slang).
* `sj_P` is the entry point's `uniform` parameter block, passed by value as the kernel's only
  parameter: `EntryPointInfo.params_size` bytes laid out as `EntryPointInfo.params` says
  (the driver copies sizeof(sj_Params_<name>) <= params_size bytes from the packed block).
* The globals block (`ProgramReflection.globals`, `globals_size` bytes, same layout as on the
  CPU) lives in `__constant__` memory at the module symbol `sj_globals` (see GLOBALS_SYMBOL);
  the runtime copies the packed block there (cuMemcpyHtoDAsync on the launch stream) before
  the launch. Launches of one module are therefore ordered on one stream by the runtime.
* Buffers are `{T* data; uint64 count}` and pointers are 8 bytes: device addresses.
* SV_DispatchThreadID = blockIdx * blockDim + threadIdx, SV_GroupID = blockIdx,
  SV_GroupThreadID = threadIdx, SV_GroupIndex = threadIdx flattened (x fastest).
* `groupshared` globals are `__shared__` storage; `static` (per-thread mutable) globals live in
  a device array with one slot per resident hardware thread (SM id, warp id, lane), and are
  re-initialised at the start of every thread; `static const` globals are `__device__ const`
  scalars, or inline functions returning the value for aggregates.
"""
from __future__ import annotations

from ..ir import nodes as ir
from ..ir import scan
from .. import types as T
from ..reflection import CUDA_GLOBALS_SYMBOL, EntryPointInfo, ProgramReflection
from ..source import error
from .cpp import CppEmitter, block_layout, prelude_text

GLOBALS_SYMBOL = CUDA_GLOBALS_SYMBOL
# Per-thread storage for mutable `static` globals: one slot per (SM < 256, warp < 64, lane).
STATIC_SLOTS = 256 * 64 * 32


class CudaEmitter(CppEmitter):
    def __init__(self):
        super().__init__("cuda")
        self.global_kinds: dict[str, str] = {}     # C name -> how references are spelled

    def prototype(self, fn: ir.Function) -> str:
        ps = ", ".join(self.param_decl(p) for p in fn.params)
        return f"static __device__ {self.ctype(fn.ret)} {fn.name}({ps})"

    def x_GlobalRef(self, e):
        v = e.var
        if v.kind == "uniform":
            return f"sj_g->{v.name}"
        how = self.global_kinds.get(v.name)
        if how == "shared":
            return f"(*reinterpret_cast<{self.ctype(v.type)}*>({v.name}_raw))"
        if how == "static":
            return f"(*reinterpret_cast<{self.ctype(v.type)}*>(&{v.name}_raw[sj_static_slot() * {words(v.type)}]))"
        if how == "constfn":
            return f"{v.name}()"
        return v.name

    def const(self, t, v):
        if isinstance(t, T.ScalarType) and t.kind == "float":
            fv = float(v)
            if fv != fv or fv in (float("inf"), float("-inf")):
                bits = {16: "half", 32: "float", 64: "double"}[t.bits]
                lit = "__builtin_nan(\"\")" if fv != fv else ("__builtin_huge_val()" if fv > 0 else "(-__builtin_huge_val())")
                if bits == "half":
                    return f"((sj::half)(float){lit})"
                return f"(({bits}){lit})"
        return super().const(t, v)


def words(t: T.Type) -> int:
    size, _ = T.size_align(t)
    return max(1, (size + 7) // 8)


def _is_literal(e) -> bool:
    return isinstance(e, ir.Const) and isinstance(e.type, (T.ScalarType, T.EnumType))


# Intrinsics that order memory between threads: a kernel that uses one may read, after it, what
# other threads added, so its adds must reach memory in program order (no block cache).
_ORDERING = {f"sj::{n}" for n in ("AllMemoryBarrier", "AllMemoryBarrierWithGroupSync", "DeviceMemoryBarrier",
                                  "DeviceMemoryBarrierWithGroupSync", "GroupMemoryBarrier",
                                  "GroupMemoryBarrierWithGroupSync")}


def _is_red_add(i: ir.Intrinsic) -> bool:
    """InterlockedAdd(dest, v) on a float/half scalar: the result is unused (see red_add_fp)."""
    t = i.args[0].type if i.args else None
    return (i.name == "sj::InterlockedAdd" and len(i.args) == 2 and isinstance(t, T.ScalarType)
            and t.kind == "float" and t.bits in (16, 32))


def red_cache_entries(entries: list[ir.Function]) -> list[ir.Function]:
    """The entry points whose kernels get the block cache for float adds (prelude: red_add_fp).

    Those that add into a thread-uniform address with an unused-result float/half InterlockedAdd
    (gradients of parameters every thread shares; ir/uniformity.py) - if no entry that adds also
    reaches a barrier or memory fence.  The cache is per translation unit (the adds share one
    prelude function), so one entry that must not defer turns it off for all.  Kernels whose adds
    all go to per-thread addresses (scatter, `.bwds` into per-element gradients) do not pay for it."""
    from .program import system_value_params
    from ..ir.uniformity import Uniformity
    users, ordered, uniform = [], False, False
    for fn in entries:
        calls = list(scan.intrinsic_calls(scan.reachable(fn)))
        reds = [i for i in calls if _is_red_add(i)]
        if not reds:
            continue
        users.append(fn)           # with the cache on, every kernel that can add must set it up
        ordered = ordered or any(i.name in _ORDERING for i in calls)
        u = Uniformity(fn, system_value_params(fn))
        uniform = uniform or any(u.address_is_uniform(i.args[0]) for i in reds)
    return users if uniform and not ordered else []


def emit_program_cuda(functions: list[ir.Function], globals_: list[ir.GlobalVar],
                      entries: list[tuple[ir.Function, tuple[int, int, int]]]):
    from .program import entry_params
    em = CudaEmitter()
    uniforms = [g for g in globals_ if g.kind == "uniform"]
    others = [g for g in globals_ if g.kind != "uniform"]

    # Globals block: C layout checked by static_assert, stored in __constant__ memory.
    g_fields, g_size = block_layout([(g.slang_name, g.type) for g in uniforms])
    g_lines = [
        "// Layout checks (NVRTC 13.0 has no __builtin_offsetof: sizes are still checked there).",
        "#if !defined(__CUDACC_RTC__) || __has_builtin(__builtin_offsetof)",
        "#define SJ_CHECK_OFFSET(T, m, off, msg) static_assert(__builtin_offsetof(T, m) == off, msg);",
        "#else",
        "#define SJ_CHECK_OFFSET(T, m, off, msg)",
        "#endif",
        "struct sj_Globals {"]
    for g in uniforms:
        g_lines.append(f"    {em.ctype(g.type)} {g.name};")
    if not uniforms:
        g_lines.append("    char sj_unused;")
    g_lines.append("};")
    for g, fl in zip(uniforms, g_fields):
        g_lines.append(f"SJ_CHECK_OFFSET(sj_Globals, {g.name}, {fl.offset}, \"layout of {g.slang_name}\")")
    g_lines.append(f"static_assert(sizeof(sj_Globals) <= {g_size}, \"globals block size\");")
    # Raw storage: struct types with default member initializers cannot be __constant__ objects.
    g_lines.append(f"__constant__ unsigned long long {GLOBALS_SYMBOL}[{max(1, g_size // 8)}];")
    g_lines.append(f"#define sj_g (reinterpret_cast<sj_Globals*>({GLOBALS_SYMBOL}))")

    s_lines = []
    static_inits = []
    has_static = False
    for g in others:
        ct = em.ctype(g.type)
        if g.kind == "const":
            if g.init is not None and _is_literal(g.init):
                s_lines.append(f"static __device__ const {ct} {g.name} = {em.expr(g.init)};")
                em.global_kinds[g.name] = "value"
            else:
                init = em.expr(g.init) if g.init is not None else f"{ct}{{}}"
                s_lines.append(f"static __device__ __forceinline__ {ct} {g.name}() {{ return {init}; }}")
                em.global_kinds[g.name] = "constfn"
        elif g.kind == "groupshared":
            s_lines.append(f"static __shared__ unsigned long long {g.name}_raw[{words(g.type)}];")
            em.global_kinds[g.name] = "shared"
        else:
            has_static = True
            s_lines.append(f"static __device__ unsigned long long {g.name}_raw[{STATIC_SLOTS * words(g.type)}ull];")
            em.global_kinds[g.name] = "static"
    if has_static:
        s_lines.insert(0, "\n".join([
            "static __device__ __forceinline__ unsigned sj_static_slot() {",
            "    unsigned sm, warp, lane;",
            "    asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm));",
            "    asm volatile(\"mov.u32 %0, %%warpid;\" : \"=r\"(warp));",
            "    asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));",
            "    return ((sm & 255u) * 64u + (warp & 63u)) * 32u + lane;",
            "}"]))
    for g in others:
        if em.global_kinds.get(g.name) == "static":
            ref = em.x_GlobalRef(ir.GlobalRef(g.type, g))
            init = em.expr(g.init) if g.init is not None else f"{em.ctype(g.type)}{{}}"
            static_inits.append(f"    {ref} = {init};")

    protos = [em.prototype(fn) + ";" for fn in functions]
    for fn in functions:
        em.function(fn)
    body_lines = em.lines

    refl = ProgramReflection(globals=g_fields, globals_size=g_size)
    cached = {id(fn) for fn in red_cache_entries([fn for fn, _ in entries])}
    kernels = []
    for fn, numthreads in entries:
        sname, call_args, p_fields, p_size, lines = entry_params(em, fn, numthreads, "sj_P.")
        for fl in p_fields:
            lines.append(f"SJ_CHECK_OFFSET({sname}, {fl.name}, {fl.offset}, \"layout of {fl.name}\")")
        lines.append(f"static_assert(sizeof({sname}) <= {p_size}, \"parameter block size\");")
        nx, ny, nz = numthreads
        symbol = f"sj_entry_{fn.slang_name}"
        lines += [
            f'extern "C" __global__ void __launch_bounds__({nx * ny * nz}) {symbol}(const {sname} sj_P)',
            "{",
            "    (void)sj_P;",
            "    const uint32_t sj_tx = threadIdx.x, sj_ty = threadIdx.y, sj_tz = threadIdx.z;",
            "    const uint32_t sj_gx = blockIdx.x, sj_gy = blockIdx.y, sj_gz = blockIdx.z;",
            "    (void)sj_tx; (void)sj_ty; (void)sj_tz; (void)sj_gx; (void)sj_gy; (void)sj_gz;",
            *static_inits,
            *(["    ::sj_cuda::red_cache_begin();"] if id(fn) in cached else []),
            f"    {fn.name}({', '.join(call_args)});",
            *(["    ::sj_cuda::red_cache_end();"] if id(fn) in cached else []),
            "}",
        ]
        kernels.append("\n".join(lines))
        refl.entry_points[fn.slang_name] = EntryPointInfo(fn.slang_name, symbol, numthreads, p_fields, p_size)

    parts = [
        "// Generated by slangjit for CUDA (NVRTC / nvcc). Kernel ABI: slangjit/compiler/emit/cuda.py.",
        *(["#define SJ_RED_CACHE 1   // block cache for float adds (prelude: red_add_fp)"] if cached else []),
        prelude_text(),
        "\n".join(em.struct_out),
        "\n".join(g_lines),
        "\n".join(s_lines),
        "\n".join(protos),
        "\n".join(body_lines),
        "\n\n".join(kernels),
    ]
    return "\n\n".join(parts) + "\n", refl
