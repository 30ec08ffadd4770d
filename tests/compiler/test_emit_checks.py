"""The emitter's access checks (emit/cpp.py x_Index / x_Deref, prelude 13_checks.h): constant in-range
indices are left unchecked, dynamic local-array indices go through sj::at (sj::at_chk in the checked
mode), a recursive function gets a stack guard, reverse-mode loops record [MaxIters] overruns, and the
CUDA text of both modes compiles with NVRTC."""
from __future__ import annotations

import re

import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import PipelineOptions

pytestmark = pytest.mark.usefixtures("private_cache")

SRC = """
RWStructuredBuffer<float> outb;
uniform int idx;
uniform float* p;
[Differentiable]
float f(float x, int count)
{
    float y = x;
    [MaxIters(4)]
    for (int i = 0; i < count; i++)
        y = y * x + 1.0;
    return y;
}
int depth(int k) { if (k <= 0) return 0; return 1 + depth(k - 1); }
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID)
{
    float a[4] = { 1, 2, 3, 4 };
    float3 v = float3(1, 2, 3);
    var d = diffPair(1.5, 0.0);
    bwd_diff(f)(d, idx, 1.0);
    outb[0] = a[2] + a[idx] + v[idx] + v.y + d.d + *p + float(depth(idx));
}
"""


def _compile(target="cpp", checked=False):
    src = compile_program([SourceSpec(text=SRC, name="checks")], ["main"], target=target,
                          options=PipelineOptions(checked=checked)).source
    return src if target == "cuda" else src[src.index("struct sj_Globals"):]     # the generated part


def test_default_mode_checks_only_dynamic_indices():
    src = _compile()
    assert re.search(r"\ba_\d+\[2\]", src)                 # constant index: no check
    assert re.search(r"sj::at\(a_\d+, ", src)             # dynamic local-array index
    assert re.search(r"sj::at\(v_\d+, ", src)             # dynamic vector index
    assert "sj::at_chk" not in src                         # checks that record are the checked mode's
    assert "sj::deref(" in src                             # null pointers are caught in every mode
    assert "sj::stack_exhausted(" in src                   # depth() is recursive
    assert "sj::fail(3u" in src                            # the [MaxIters] overrun flag
    assert re.search(r"stk\d+_\d+\.data\[", src)           # reverse-mode stacks: in range by construction


def test_checked_mode_checks_every_access():
    src = _compile(checked=True)
    assert re.search(r"sj::at_chk\(a_\d+, ", src) and re.search(r"sj::at_chk\(v_\d+, ", src)
    assert re.search(r"sj::at_chk\(sj_g->outb_\d+, ", src)
    sites = compile_program([SourceSpec(text=SRC, name="checks")], ["main"],
                            options=PipelineOptions(checked=True)).reflection.error_sites
    assert 'checks.slang:22: local array index out of range (float[4])' in sites


def test_recursion_guard_only_on_call_cycles():
    src = _compile()
    assert src.count("sj::stack_exhausted(") == 1


@pytest.mark.parametrize("checked", [False, True])
def test_cuda_checks_compile_with_nvrtc(checked):
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    src = _compile("cuda", checked)
    assert ("sj::at_chk(" in src[src.index("sj_Globals"):]) == checked
    ptx, _log = cuda_compiler.compile_source(src, "compute_90")
    assert b".entry" in ptx and b"sj_error_record" in ptx
    # depth() is recursive: on CUDA it takes a hidden depth counter (prelude sj::depth_exceeded), never the
    # CPU's stack-address guard, and the module asks for a per-thread stack (sj_stack_bytes)
    gen = src[src.index("sj_Globals"):]
    assert "sj::stack_exhausted(" not in gen and b"sj_stack_bytes" in ptx
    assert re.search(r"static __device__ int32_t depth_\d+\(int32_t k_\d+, int sj_depth\);", gen)
    assert gen.count("sj::depth_exceeded(sj_depth, ") == 1
    assert re.search(r"depth_\d+\(\(k_\d+ - 1\), sj_depth \+ 1\)", gen)      # on the cycle: one level deeper
    assert re.search(r"depth_\d+\([^()]*, 0\)", gen)                          # from outside it: level 0


def test_cuda_recursion_limit_fits_the_stack_ptxas_reports():
    """The guard's limit (emit/cuda.py CudaTarget.depth_limit) times the frame size ptxas reports for the
    recursive function, plus the other functions' frames, fits the per-thread stack the module asks for."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    rec = """
RWStructuredBuffer<int> outb;
uniform int n;
int depth(int k)
{
    int a[64];
    for (int i = 0; i < 64; i++) a[i] = k * i;
    if (k <= 0) return 0;
    return depth(k - 1) + depth(k - 2 - k) + a[(k * 7) & 63] - a[(k * 5) & 63] + 1;
}
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID) { outb[0] = depth(n); }
"""
    src = compile_program([SourceSpec(text=rec, name="rec")], ["main"], target="cuda").source
    limit = int(re.search(r"sj::depth_exceeded\(sj_depth, (\d+), ", src).group(1))
    stack = int(re.search(r"__device__ unsigned char sj_stack_bytes\[(\d+)\];", src).group(1))
    _img, log = cuda_compiler.compile_source(src, "sm_90", extra_options=("--ptxas-options=-v",))
    frames = {m.group(1): int(m.group(2)) for m in
              re.finditer(r"Function properties for (\S+)\s*\n\S*\s*\.?\s*(\d+) bytes stack frame", log)}
    if not any("depth" in k for k in frames):
        try:
            with open("/proc/self/maps") as f:
                libs = sorted({ln.split()[-1] for ln in f if "nvrtc" in ln or "nvJitLink" in ln or "ptx" in ln})
        except OSError:
            libs = []
        raise AssertionError(f"no frame sizes in NVRTC's log {log!r}; NVRTC {cuda_compiler.nvrtc_version()}, "
                             f"loaded: {libs}")
    rec_frame = max(v for k, v in frames.items() if "depth" in k)
    others = sum(v for k, v in frames.items() if "depth" not in k)
    assert 4 <= limit <= 1024 and stack >= 16384
    assert others + (limit + 1) * rec_frame <= stack, (limit, stack, frames)


def test_cuda_without_recursion_has_no_guard_nor_stack_symbol():
    src = compile_program([SourceSpec(text=SRC.replace("1 + depth(k - 1)", "1 + k"), name="flat")], ["main"],
                          target="cuda").source
    gen = src[src.index("sj_Globals"):]
    assert "sj::stack_exhausted(" not in gen and "sj::depth_exceeded(" not in gen and "sj_depth" not in gen
    assert "sj_stack_bytes" not in src


def test_trusted_entry_pointers_skip_only_the_entrys_own_pointer_parameters():
    """PipelineOptions.trusted_entry_pointers (the functional API's generated kernels): accesses through the
    entry point's own pointer parameters are not null-checked on the CPU; a pointer reached any other way
    (here: a helper's parameter) still is, and without the option every access is."""
    from slangjit.compiler import SourceSpec, compile_program
    from slangjit.compiler.passes.options import PipelineOptions
    src = """
void add_one(float* q) { *q = *q + 1.0; }
[numthreads(1, 1, 1)]
void main(uint3 tid : SV_DispatchThreadID, uniform float* p)
{
    p[tid.x] = p[tid.x] * 2.0;
    add_one(p);
}
"""
    def checks(options):
        code = compile_program([SourceSpec(text=src, name="trust")], ["main"], options=options).source
        body = code[code.index("static void main_"):]          # the entry's definition and what follows
        return code.count("sj::ptr_at("), code.count("sj::deref("), body
    idx_default, deref_default, _ = checks(PipelineOptions())
    idx_trusted, deref_trusted, _ = checks(PipelineOptions(trusted_entry_pointers=True))
    assert idx_default >= 2 and deref_default >= 2
    assert idx_trusted == 0                      # p[tid.x]: the entry's own parameter
    assert deref_trusted == deref_default        # *q in the helper: still checked
    idx_checked, _, _ = checks(PipelineOptions(trusted_entry_pointers=True, checked=True))
    assert idx_checked >= 2                      # the checked mode checks everything
