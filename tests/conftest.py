"""Fixtures shared by the whole suite.

Layout: the tests are grouped by the stage they exercise, in the order of docs/architecture.md:
``compiler/`` (lexer, preprocessor, parser, checker, autodiff, IR passes, emitters and the NVRTC compile
of the generated CUDA, front-end cache), ``runtime/`` (the compute API, the CPU and CUDA devices),
``functional/`` (the functional API: modules, calls, tensors, gradients) and ``integration/`` (README,
examples, CLI, conformance extras, the architecture check).  ``helpers/`` holds modules the tests
import (``mlp_reference``, ``cuda_stub_driver``); it is put on ``sys.path`` here.

``device``: one fixture for every test that needs a device.  It is a CPU device unless the module (or
test) parametrizes it indirectly::

    pytestmark = pytest.mark.parametrize("device", ["cuda"], indirect=True)          # CUDA only
    pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)   # both
    pytestmark = pytest.mark.parametrize("device", ["auto"], indirect=True)          # spy.create_device()

"auto" is what ``spy.create_device()`` picks: the CUDA device where a usable GPU is present, else the
CPU (the functional tests run on it, so a GPU machine runs them on CUDA unchanged).  "cuda" skips, with
the reason, where no usable CUDA GPU is present.  Each kind of device is created once per session; the
fixture itself is module-scoped so that pytest keeps each module's tests together (a session-scoped
parametrized fixture would regroup tests across modules by parameter).

``private_cache``: a module's own compile-cache directory (``SLANGJIT_CACHE_DIR`` set to
``<pytest basetemp>/sjcache-<module>`` for the module's lifetime), for modules whose tests count cache
hits or must not share compiled programs with other modules.  Use it with
``pytestmark = pytest.mark.usefixtures("private_cache")``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import slangjit as spy
from slangjit.compiler import frontend_cache
from slangjit.runtime import cpu_compiler as cc
from slangjit.runtime import cuda as sj_cuda

TESTS = Path(__file__).resolve().parent
HELPERS = TESTS / "helpers"
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))

NO_CUDA = "no usable CUDA GPU (or cuda-bindings missing)"
DEVICE_KINDS = ("cpu", "cuda", "auto")


@pytest.fixture(scope="session")
def _device_pool():
    """One device per kind for the whole session, made on first use."""
    return {}


@pytest.fixture(scope="module")
def device(request, _device_pool):
    kind = getattr(request, "param", "cpu")
    if kind not in DEVICE_KINDS:
        raise ValueError(f"device fixture: unknown kind {kind!r} (expected one of {DEVICE_KINDS})")
    if kind == "cuda" and not sj_cuda.is_available():
        pytest.skip(NO_CUDA)
    if kind not in _device_pool:
        _device_pool[kind] = (spy.create_device() if kind == "auto"
                              else spy.create_device(type=getattr(spy.DeviceType, kind)))
    return _device_pool[kind]


@pytest.fixture(scope="module")
def private_cache(request, tmp_path_factory):
    """SLANGJIT_CACHE_DIR = <basetemp>/sjcache-<module name> while the module's tests run."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    d = tmp_path_factory.getbasetemp() / f"sjcache-{name}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLANGJIT_CACHE_DIR", str(d))
        yield d


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cache folder of the test's own, no $SLANGJIT_CXXFLAGS / $SLANGJIT_NO_PCH, and no library, precompiled
    header or front-end result remembered in this process (the C++ build tests: cold compile, readahead, PCH)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(d))
    monkeypatch.delenv("SLANGJIT_CXXFLAGS", raising=False)
    monkeypatch.delenv("SLANGJIT_NO_PCH", raising=False)
    cc.clear_memory_cache()
    cc._pch_ok.clear()
    frontend_cache.clear_memory_cache()
    yield d
    cc.clear_memory_cache()
    cc._pch_ok.clear()
