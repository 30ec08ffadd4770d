"""The CPU backend's performance paths (issue 20): the host instruction set chosen at run time and part
of the cache key, and per-worker (privatised) accumulation of thread-uniform gradient adds."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.runtime import cpu_compiler as cc

pytestmark = pytest.mark.usefixtures("private_cache")

RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access


# ------------------------------------------------------------------------------------------ instruction set


def test_isa_levels_have_nested_flags():
    assert cc.isa_flags("portable") == ()
    prev = ()
    for level in cc.ISA_LEVELS[1:]:
        flags = cc.isa_flags(level)
        assert flags[:len(prev)] == prev and len(flags) > len(prev)
        prev = flags
    assert "-mf16c" in cc.isa_flags("v3") and "-mavx512f" not in cc.isa_flags("v3")
    assert "-mavx512f" in cc.isa_flags("v4")


def test_isa_is_part_of_the_cache_key(monkeypatch):
    src = 'extern "C" int sj_isa_probe(void) { return 1; }\n'
    keys = {}
    for level in ("portable", "v3"):
        monkeypatch.setenv("SLANGJIT_CPU_ISA", level)
        assert cc.host_isa() == level
        keys[level] = cc.library_key(src)
    assert keys["portable"] != keys["v3"]
    monkeypatch.setenv("SLANGJIT_CPU_ISA", "v3")
    assert cc.library_key(src) == keys["v3"]


def test_isa_env_rejects_unknown_level(monkeypatch):
    monkeypatch.setenv("SLANGJIT_CPU_ISA", "avx9000")
    with pytest.raises(ValueError, match="SLANGJIT_CPU_ISA"):
        cc.compile_flags()


def test_fp_contraction_stays_off():
    assert "-ffp-contract=off" in cc.compile_flags()
    assert not any("fast-math" in f or f.startswith("-Ofast") or f == "-march=native" for f in cc.compile_flags())


HALF_KERNEL = """
RWStructuredBuffer<half> a;
RWStructuredBuffer<half> b;
RWStructuredBuffer<half> o;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    o[i] = a[i] * b[i] + a[i] / (b[i] + 3.0h);
}
"""


@pytest.mark.parametrize("level", ["portable", "host"])
def test_half_arithmetic_same_on_every_isa(level, monkeypatch, tmp_path):
    if level == "host":
        monkeypatch.delenv("SLANGJIT_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("SLANGJIT_CPU_ISA", level)
    rng = np.random.default_rng(3)
    a = rng.uniform(-4, 4, 256).astype(np.float16)
    b = rng.uniform(-4, 4, 256).astype(np.float16)
    dev = spy.create_device(type=spy.DeviceType.cpu)
    p = tmp_path / "h.slang"
    p.write_text(HALF_KERNEL)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    bufs = [dev.create_buffer(element_count=256, struct_size=2, usage=RW, data=x) for x in (a, b, np.zeros_like(a))]
    k.dispatch(thread_count=[256, 1, 1], vars={"a": bufs[0], "b": bufs[1], "o": bufs[2]})
    got = bufs[2].to_numpy().view(np.float16)[:256]
    # each operation rounded to half, as numpy's float16 does
    want = (a * b) + (a / (b + np.float16(3.0)))
    np.testing.assert_array_equal(got, want)
