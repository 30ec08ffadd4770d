"""The warm-start path of the CPU backend: the compiler's version parsed without a regular expression (same
answers as the pattern it replaced, plus GCC installed as `c++`, as on Ubuntu), and creating a CPU device
starts no process (platform.processor() ran `uname -p`)."""
from __future__ import annotations

import subprocess

import pytest

import slangjit as spy
from slangjit.runtime import cpu_compiler as cc


@pytest.mark.parametrize("text, want", [
    ("g++ (GCC) 13.3.0", ("gcc", 13)),
    ("g++ (GCC) 9.4.0\nCopyright (C) 2019", ("gcc", 9)),
    ("g++ (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022", ("gcc", 12)),
    ("c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0\nCopyright (C) 2023", ("gcc", 13)),
    ("Ubuntu clang version 16.0.6 (15)\nTarget: x86_64-pc-linux-gnu", ("clang", 16)),
    ("Apple clang version 15.0.0 (clang-1500.3.9.4)", ("clang", 15)),
    ("clang version 14.0.0", ("clang", 14)),
    ("g++ foo 12.2.0-1", ("gcc", 12)),
    ("g++ x 1.2", ("", 0)),
    ("some other compiler 3.1", ("", 0)),
])
def test_compiler_major(text, want):
    assert cc._compiler_major(text) == want


def test_half_flag_for_gcc13_named_cxx(tmp_path, monkeypatch):
    fake = tmp_path / "c++"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0'; "
                    "exit 0; fi\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cc, "_half_flags", {})
    monkeypatch.setattr(cc, "_version_cache", {})
    assert cc.half_rounding_flags((str(fake),)) == ("-fexcess-precision=16",)


def test_cpu_device_creation_starts_no_process(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError(f"a process was started: {a[:1]}")
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    dev = spy.create_device(type=spy.DeviceType.cpu)
    assert dev.info is not None
