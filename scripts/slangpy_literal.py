#!/usr/bin/env python3
"""Run SlangPy's own functional tests, unchanged, against slangjit (the "literal run").

SlangPy's sources are not part of this repository and this script fetches nothing: give it the path of a SlangPy
checkout (or of any folder holding a copy of its `slangpy/tests/slangpy_tests/` directory).  It

1. copies the selected test files and the `.slang` files beside them into WORK/tests/ (WORK defaults to
   /tmp/slangpy_literal/run), unmodified;
2. writes a shim package WORK/shim/slangpy that maps SlangPy's import paths onto slangjit's names (below);
3. runs pytest on each file (with WORK/shim first on PYTHONPATH) and prints the passed / failed / skipped counts per
   file, and writes them to WORK/results.json.

    python scripts/slangpy_literal.py SLANGPY_CHECKOUT [--work DIR] [--device cpu|cuda] [--files a.py,b.py] [-k EXPR]

What the shim does, and only this (it never changes a value, a shape or an exception):
* `import slangpy` is `slangjit` plus test plumbing names slangjit has no use for: `SlangCompilerOptions` (a dict),
  `SlangDebugInfoLevel`, `Logger` / `LogLevel` (no-ops), `set_dump_generated_shaders`.
* `slangpy.<any submodule>` (`slangpy.types`, `slangpy.types.buffer`, `slangpy.core.function`, `slangpy.reflection`,
  ...) is a module whose attributes are looked up in `slangjit`, then `slangjit.core.*`, `slangjit.functional.*` and
  `slangjit.tensor`.  A name slangjit lacks is an ImportError / AttributeError in the test: a failure, counted.
* `slangpy.core.calldata.SLANG_PATH` is slangjit's `SHADER_PATH` (the folder holding `slangpy.slang`).
* `slangpy.testing.helpers` (and a top-level `helpers` module, which older test files import) provides SlangPy's test
  helper names written for slangjit: `DEFAULT_DEVICE_TYPES` (`[DeviceType.cpu]`, or the device given with
  --device / $SLANGPY_DEVICE), `get_device` (slangjit's `create_device`, include paths = the tests' folder and
  SHADER_PATH), `create_module` / `create_function_from_module` (`device.load_module_from_source` then
  `spy.Module(...)`; a dotted name finds a struct method), `read_ndbuffer_from_numpy` / `write_ndbuffer_from_numpy`
  (through `cursor()`), and the `test_id` fixture.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

# SlangPy's functional-API test files run here.  Left out (they test SlangPy's internals, or other helpers own them):
# kernel/code generation and type resolution (test_kernel_gen, test_code_gen, test_type_resolution, test_name_parse,
# test_generate_api, test_bake), reflection (test_reflection*, test_cursor_marshall, test_descriptor_marshall,
# test_write_to_cursor_marshall, test_python_cursor_writer, test_tostring), the native bridge
# (test_native_bridge, test_bridge_fallback_gaps, test_cpp_coverage_*), signature hashing, neural / fusion /
# raytracing / profiler / shader printing / image loading / performance, torch (test_torch*, test_pytorch*,
# test_value_torch_pipeline: the torch integration is measured separately), TensorView / DiffTensorView parameters
# (test_tensorview, test_difftensorview: helper compat-c's part), and files built on SlangPy's marshalling classes
# (test_interfaces and test_return_types register `Marshall` subclasses in `slangpy.bindings.typeregistry`).
# On the CPU, test_pointers selects no device (its POINTER_DEVICE_TYPES are vulkan and cuda) and test_scalar_return
# skips itself at import without a CUDA torch; both count on CUDA.
FILES = [
    "test_array.py", "test_array_return_arrays.py", "test_buffer_views.py", "test_buffers.py", "test_caching.py",
    "test_call_group_integrations.py", "test_call_groups.py", "test_command_buffer.py", "test_custom_types.py",
    "test_diff_loop_runtime_start.py", "test_differential_function_call.py", "test_diffpair_type.py",
    "test_difftensor_load_variants.py", "test_dtypes.py", "test_errors.py", "test_generics.py", "test_grid.py",
    "test_instances.py", "test_linking.py", "test_modules.py", "test_nd_function_call.py",
    "test_ndbuffer.py", "test_numpy.py", "test_packed_arg.py", "test_pointers.py", "test_raw_dispatch.py",
    "test_scalar_parameter_conversion.py", "test_scalar_return.py",
    "test_sets_and_hooks.py", "test_shape.py", "test_shapes.py", "test_simple_function_call.py",
    "test_structured_dtype.py", "test_structured_numpy.py", "test_tensor.py", "test_tensor_with_grads.py",
    "test_transforms.py", "test_type_conformances.py", "test_vector_function_call.py", "test_vectorizing.py",
]

SUBDIR = os.path.join("slangpy", "tests", "slangpy_tests")

INIT = '''"""Shim: SlangPy's import paths mapped onto slangjit (scripts/slangpy_literal.py)."""
import enum as _enum
import importlib as _importlib
import importlib.abc as _abc
import importlib.util as _util
import sys as _sys
import types as _types

import slangjit as _sj
from slangjit import *  # noqa: F401,F403
from slangjit import SHADER_PATH, set_dump_generated_shaders  # noqa: F401

_SOURCES = ["slangjit"]
for _name in ("slangjit.core", "slangjit.core.calldata", "slangjit.core.utils", "slangjit.tensor",
              "slangjit.functional.function", "slangjit.functional.module", "slangjit.functional.values",
              "slangjit.functional.generators", "slangjit.functional.instances", "slangjit.functional.packed",
              "slangjit.functional.layout", "slangjit.functional.errors", "slangjit.functional.tensorbase",
              "slangjit.functional.callhelpers", "slangjit.functional.callgroups",
              "slangjit.runtime.device", "slangjit.runtime.base", "slangjit.runtime.commands",
              "slangjit.runtime.textures"):
    try:
        _importlib.import_module(_name)
        _SOURCES.append(_name)
    except ImportError:
        pass


# SlangPy's native base classes, named by some tests: slangjit has one class for each
_ALIASES = {"NativeNDBuffer": "NDBuffer", "NativeTensor": "Tensor"}


def _lookup(name):
    name = _ALIASES.get(name, name)
    for src in _SOURCES:
        mod = _sys.modules[src]
        if name in vars(mod):
            return vars(mod)[name]
    for src in _SOURCES:
        mod = _sys.modules[src]
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(name)


class SlangCompilerOptions(dict):
    """Test plumbing: the include paths reach create_device."""


class SlangDebugInfoLevel(_enum.IntEnum):
    none = 0
    minimal = 1
    standard = 2
    maximal = 3


class LogLevel(_enum.IntEnum):
    debug = 0
    info = 1
    warn = 2
    error = 3
    fatal = 4


class Logger:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *a, **k: None


SLANG_PATH = SHADER_PATH


def __getattr__(name):
    return _lookup(name)


class _Sub(_types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "SLANG_PATH":
            return SHADER_PATH
        try:
            return _lookup(name)
        except AttributeError:
            pass
        # a nested submodule (slangpy.types.buffer)
        full = self.__name__ + "." + name
        try:
            return _importlib.import_module(full)
        except ImportError:
            raise AttributeError(f"slangjit has no {name!r} (looked up for {full})")


class _Finder(_abc.MetaPathFinder, _abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("slangpy.") or fullname == "slangpy.testing" \\
                or fullname.startswith("slangpy.testing."):
            return None
        return _util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec):
        mod = _Sub(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


_sys.meta_path.insert(0, _Finder())
'''

TESTING_INIT = '''from . import helpers  # noqa: F401
'''

HELPERS = '''"""Shim: SlangPy's test helper names, written for slangjit (scripts/slangpy_literal.py)."""
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit import DeviceType

SHADER_DIR = Path(os.environ.get("SLANGPY_LITERAL_TESTS", Path(__file__).parent))
_DEV = os.environ.get("SLANGPY_DEVICE", "cpu")
DEFAULT_DEVICE_TYPES = [DeviceType[_DEV]]
_DEVICES = {}


def should_skip_test_for_device(device_type):
    return False


@pytest.fixture
def test_id(request):
    return hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]


def get_device(type, use_cache=True, cuda_interop=False, **kwargs):
    key = (type, cuda_interop)
    if use_cache and key in _DEVICES:
        return _DEVICES[key]
    dev = spy.create_device(type, include_paths=[str(SHADER_DIR), spy.SHADER_PATH])
    if use_cache:
        _DEVICES[key] = dev
    return dev


def get_torch_device(type, use_cache=True):
    """A device for torch interop tests: CUDA only (skipped without a CUDA torch)."""
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    if type != DeviceType.cuda or not torch.cuda.is_available():
        pytest.skip("torch interop tests need a CUDA device")
    return get_device(type, use_cache=use_cache, cuda_interop=True)


def create_module(device, module_source, link=[], options={}):
    name = hashlib.sha256(module_source.encode()).hexdigest()[:16]
    return spy.Module(device.load_module_from_source(name, module_source), link=link, options=options)


def create_function_from_module(device, func_name, module_source, link=[], options={}):
    if 'import "slangpy";' not in module_source:
        module_source = 'import "slangpy";\\n' + module_source
    module = create_module(device, module_source, link=link, options=options)
    parts = func_name.split(".")
    if len(parts) == 1:
        fn = module.find_function(parts[0])
    else:
        fn = module.find_function_in_struct("::".join(parts[:-1]), parts[-1])
    if fn is None:
        raise ValueError(f"Could not find function {func_name}")
    return fn


def _kind(cursor):
    k = cursor.element_type_layout.kind      # compared with TypeReflection.Kind, as SlangPy's helper does
    K = spy.TypeReflection.Kind
    return {K.scalar: "scalar", K.vector: "vector", K.matrix: "matrix"}.get(k, k)


def read_tensor_from_numpy(buffer):
    cursor = buffer.cursor()
    out = np.array([])
    for i in range(int(np.prod(buffer.shape))):
        v = cursor[i].read()
        if _kind(cursor) == "matrix":
            v = v.to_numpy()
        out = np.append(out, v)   # as SlangPy's helper: flattened, struct elements as dicts
    return out


def write_tensor_from_numpy(buffer, data, element_count=0):
    cursor = buffer.cursor()
    kind = _kind(cursor)
    et = cursor.element_type
    if element_count == 0:
        if kind == "scalar":
            element_count = 1
        elif kind == "vector":
            element_count = et.col_count
        elif kind == "matrix":
            element_count = et.row_count * et.col_count
        else:
            raise ValueError(f"element_count not set and type is not scalar or vector: {kind}")
    for i in range(int(np.prod(buffer.shape))):
        if kind == "scalar":
            cursor[i].write(data[i])
        else:
            chunk = np.array(data[i * element_count:(i + 1) * element_count])
            if kind == "matrix":
                chunk = chunk.reshape(et.row_count, et.col_count)
            cursor[i].write(chunk)
    cursor.apply()


read_ndbuffer_from_numpy = read_tensor_from_numpy
write_ndbuffer_from_numpy = write_tensor_from_numpy
'''


def make_shim(work: str) -> str:
    shim = os.path.join(work, "shim")
    pkg = os.path.join(shim, "slangpy")
    os.makedirs(os.path.join(pkg, "testing"), exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write(INIT)
    with open(os.path.join(pkg, "testing", "__init__.py"), "w") as f:
        f.write(TESTING_INIT)
    with open(os.path.join(pkg, "testing", "helpers.py"), "w") as f:
        f.write(HELPERS)
    return shim


def copy_tests(checkout: str, work: str, files) -> str:
    src = os.path.join(checkout, SUBDIR)
    if not os.path.isdir(src):
        src = checkout
    dst = os.path.join(work, "tests")
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name.endswith(".slang") or name.endswith(".slangh") or name in files:
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))
    # older test files `import helpers` / `from . import helpers`
    with open(os.path.join(dst, "helpers.py"), "w") as f:
        f.write("from slangpy.testing.helpers import *  # noqa: F401,F403\n"
                "from slangpy.testing.helpers import test_id  # noqa: F401\n")
    open(os.path.join(dst, "conftest.py"), "a").close()
    open(os.path.join(dst, "__init__.py"), "a").close()   # files that do `from . import helpers`
    return dst


def run_file(tests: str, shim: str, name: str, device: str, kexpr: str | None, timeout: int):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([shim, tests, os.environ.get("PYTHONPATH", "")]),
               SLANGPY_DEVICE=device, SLANGPY_LITERAL_TESTS=tests)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", name]
    if kexpr:
        cmd += ["-k", kexpr]
    try:
        p = subprocess.run(cmd, cwd=tests, env=env, capture_output=True, text=True, timeout=timeout)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or "") if isinstance(e.stdout, str) else ""
        out += "\nTIMEOUT"
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error", "xfailed", "xpassed")}
    tail = out.strip().splitlines()[-1] if out.strip() else ""
    for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", tail):
        counts["error" if k.startswith("error") else k] += int(n)
    return counts, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkout", help="a SlangPy checkout (or a folder holding its slangpy_tests files)")
    ap.add_argument("--work", default="/tmp/slangpy_literal/run")
    ap.add_argument("--device", default=os.environ.get("SLANGPY_DEVICE", "cpu"), choices=["cpu", "cuda"])
    ap.add_argument("--files", default=None, help="comma-separated subset of the test files")
    ap.add_argument("-k", default=None, help="pytest -k expression")
    ap.add_argument("--timeout", type=int, default=1200)
    ap.add_argument("--show", action="store_true", help="print each file's pytest output")
    a = ap.parse_args()
    files = a.files.split(",") if a.files else FILES
    shim = make_shim(a.work)
    tests = copy_tests(a.checkout, a.work, files)
    results = {}
    tot = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for name in files:
        if not os.path.exists(os.path.join(tests, name)):
            print(f"{name:42s} (not in the checkout)")
            continue
        counts, out = run_file(tests, shim, name, a.device, a.k, a.timeout)
        results[name] = counts
        if a.show:
            print(out)
        for k in tot:
            tot[k] += counts[k]
        print(f"{name:42s} passed {counts['passed']:4d}  failed {counts['failed']:3d}  "
              f"errors {counts['error']:3d}  skipped {counts['skipped']:3d}", flush=True)
        with open(os.path.join(a.work, "log_" + name.replace(".py", ".txt")), "w") as f:
            f.write(out)
    ran = tot["passed"] + tot["failed"] + tot["error"]
    print(f"{'total':42s} passed {tot['passed']:4d}  failed {tot['failed']:3d}  errors {tot['error']:3d}  "
          f"skipped {tot['skipped']:3d}  ({100.0 * tot['passed'] / max(ran, 1):.1f}% of those run)")
    with open(os.path.join(a.work, "results.json"), "w") as f:
        json.dump({"device": a.device, "files": results, "total": tot}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
