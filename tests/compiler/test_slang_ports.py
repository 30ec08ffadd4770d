"""Ports of Slang's own test programs (tests/compiler/slang_ports/, issue 19's held-out style).

Each `NAME.slang` there re-expresses one program of Slang's test suite (tests/autodiff, ...) in the
conformance format: `//TEST_INPUT:` lines describe its buffers, `NAME.slang.expected.txt` holds the
expected output (from the reference compiler, `harness.py run FILE --backend oracle`, or computed by
hand / float64 finite differences where a comment in the program says the reference compiler available
here cannot answer). Files without a `//TEST` line are modules the programs import.

Every program runs on the `device` fixture (CPU here; CUDA on a GPU machine:
`python -m pytest -q tests/compiler/test_slang_ports.py -k cuda`) and its generated CUDA is compiled
with NVRTC. docs/lang-coverage.md records the pass rate and the forms that still fail (`KNOWN_FAILING`).
"""
from __future__ import annotations

import glob
import os
import re
import struct

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program

HERE = os.path.dirname(os.path.abspath(__file__))
PORTS = os.path.join(HERE, "slang_ports")

# Forms that still fail, each with the reason (docs/lang-coverage.md lists them too). A program here is
# expected to fail (strict xfail): when it starts passing the test says so and it must leave the list.
KNOWN_FAILING: dict[str, str] = {
}


def _programs():
    out = []
    for p in sorted(glob.glob(os.path.join(PORTS, "*.slang"))):
        with open(p, encoding="utf-8") as f:
            if re.search(r"^//TEST\(", f.read(), re.M):
                out.append(os.path.basename(p)[:-len(".slang")])
    return out


PROGRAMS = _programs()

_BUF = re.compile(r"^//\s*TEST_INPUT:\s*ubuffer\(data=\[([^\]]*)\],\s*stride=(\d+)\)\s*:\s*(out\s*,)?\s*name\s*=?\s*(\w+)")
_SET = re.compile(r"^//\s*TEST_INPUT:\s*set\s+(\w+)\s*=\s*(out\s+)?ubuffer\(data=\[([^\]]*)\],\s*stride=(\d+)\)")
_CONF = re.compile(r"^//\s*TEST_INPUT:\s*type_conformance\s+(\w+)\s*:\s*(\w+)\s*=\s*(\d+)")


class Spec:
    def __init__(self, name: str):
        self.name = name
        self.path = os.path.join(PORTS, name + ".slang")
        with open(self.path, encoding="utf-8") as f:
            self.text = f.read()
        self.buffers: list[tuple[str, bytes, bool]] = []    # (name, data, is output)
        self.conformances: list[tuple[str, str, int]] = []
        for line in self.text.splitlines():
            if m := _BUF.match(line):
                self.buffers.append((m.group(4), _words(m.group(1)), bool(m.group(3))))
            elif m := _SET.match(line):
                self.buffers.append((m.group(1), _words(m.group(3)), bool(m.group(2))))
            elif m := _CONF.match(line):
                self.conformances.append((m.group(2), m.group(1), int(m.group(3))))
        m = re.search(r"^//TOLERANCE:\s*abs=([0-9.eE+-]+)", self.text, re.M)
        self.abs_tol = float(m.group(1)) if m else None       # a stochastic estimate: absolute tolerance
        m = re.search(r"\[numthreads\((\d+),\s*(\d+),\s*(\d+)\)\]", self.text)
        self.threads = [int(v) for v in m.groups()] if m else [1, 1, 1]

    def element_type(self, buf: str) -> str:
        m = re.search(r"RWStructuredBuffer<(\w+)>\s+" + buf + r"\b", self.text)
        return m.group(1) if m else "uint"

    def is_pointer(self, buf: str) -> bool:
        return re.search(r"\w+\s*\*\s*" + buf + r"\s*;", self.text) is not None


def _words(data: str) -> bytes:
    out = b""
    for tok in data.replace(",", " ").split():
        if re.fullmatch(r"-?\d+", tok):
            out += struct.pack("<I", int(tok) & 0xFFFFFFFF)
        else:
            out += struct.pack("<f", float(tok.rstrip("fF")))
    return out or b"\0\0\0\0"


def _run(device, spec: Spec) -> list[str]:
    """The program's output buffers printed as Slang's test runner prints them (-output-using-type)."""
    module = device.load_module(spec.path)
    entry = module.entry_point("computeMain", type_conformances=spec.conformances) if spec.conformances \
        else module.entry_point("computeMain")
    kernel = device.create_compute_kernel(device.link_program([module], [entry]))
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    bufs, vars_ = {}, {}
    for name, data, _ in spec.buffers:
        arr = np.frombuffer(data, dtype=np.uint8).copy()
        bufs[name] = device.create_buffer(element_count=len(data) // 4, struct_size=4, usage=usage, data=arr)
        vars_[name] = bufs[name].device_address if spec.is_pointer(name) else bufs[name]
    kernel.dispatch(thread_count=spec.threads, vars=vars_)
    lines = []
    for name, data, is_out in spec.buffers:
        if not is_out:
            continue
        raw = bufs[name].to_numpy().view(np.uint8)[:len(data)]
        t = spec.element_type(name)
        if t in ("float", "float2", "float3", "float4"):     # vectors print as their scalars
            lines.append("type: float")
            lines += ["%f" % v for v in raw.view(np.float32)]
        elif t == "int":
            lines.append("type: int32_t")
            lines += ["%d" % v for v in raw.view(np.int32)]
        elif t == "uint":
            lines.append("type: uint32_t")
            lines += ["%u" % v for v in raw.view(np.uint32)]
        else:
            lines += ["%X" % v for v in raw.view(np.uint32)]
    return lines


def _same(actual: str, expected: str, abs_tol=None) -> bool:
    """slang-test's comparison: text equal, or floats within a relative 1e-4 (a zero matches only zero)."""
    if actual.strip() == expected.strip():
        return True
    try:
        a, e = float(actual), float(expected)
    except ValueError:
        return False
    if abs_tol is not None:
        return abs(a - e) <= abs_tol
    if a == 0.0 or e == 0.0:
        return abs(a - e) < 1e-6
    return abs(a - e) < 1e-4 * (abs(a) + abs(e))


def _check(device, name: str):
    spec = Spec(name)
    with open(spec.path + ".expected.txt", encoding="utf-8") as f:
        expected = [ln for ln in f.read().splitlines() if ln.strip()]
    actual = _run(device, spec)
    assert len(actual) >= len(expected), f"{name}: {len(actual)} output lines, expected {len(expected)}"
    bad = [(i, a, e) for i, (a, e) in enumerate(zip(actual, expected)) if not _same(a, e, spec.abs_tol)]
    assert not bad, f"{name}: lines differ (index, actual, expected): {bad}"


def _param(name: str):
    if name in KNOWN_FAILING:
        return pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_FAILING[name], strict=True))
    return name


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
@pytest.mark.parametrize("name", [_param(n) for n in PROGRAMS])
def test_port_runs(device, name):
    _check(device, name)


@pytest.mark.parametrize("name", [_param(n) for n in PROGRAMS])
def test_port_cuda_compiles(name):
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    spec = Spec(name)
    prog = compile_program([SourceSpec(path=spec.path)], ["computeMain"], target="cuda", include_paths=[PORTS],
                           type_conformances=spec.conformances)
    ptx, _ = cuda_compiler.compile_source(prog.source, "compute_90")
    assert b".entry" in ptx


def test_every_program_has_an_expectation():
    assert len(PROGRAMS) >= 30
    missing = [n for n in PROGRAMS if not os.path.exists(os.path.join(PORTS, n + ".slang.expected.txt"))]
    assert not missing
    assert not set(KNOWN_FAILING) - set(PROGRAMS), "KNOWN_FAILING names a program that does not exist"
