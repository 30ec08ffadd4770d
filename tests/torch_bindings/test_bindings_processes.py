"""Two processes loading (and launching) the same new module at once, on one empty cache folder: both succeed."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

CHILD = r"""
import sys, torch, slangjit.torch as st
m = st.loadModule(sys.argv[1])
x = torch.arange(8.); y = torch.zeros(8)
m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
assert torch.equal(y, x * x), y
print("ok")
"""


def test_two_processes_load_at_once(slang_dir, tmp_path):
    src = tmp_path / "square.slang"
    src.write_text((slang_dir / "square.slang").read_text().replace("input[i.x] * input[i.x]",
                                                                      "input[i.x] * input[i.x] + 0.0"))
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(src)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == "ok"
    assert sorted(os.listdir(tmp_path)) == ["cache", "square.slang"]


WARM_CHILD = r"""
import sys, torch, slangjit.torch as st
from slangjit.compiler import frontend_cache
m = st.loadModule(sys.argv[1])
x = torch.arange(8., device=sys.argv[2]); y = torch.zeros(8, device=sys.argv[2])
m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
assert torch.equal(y, x * x), y
(kern, _plan), = m._runtime(x.device).entries.values()
if sys.argv[2] == "cuda":       # the cubin: from the disk cache, no NVRTC
    built, secs = not kern.timings["cache_hit"], kern.timings["nvrtc"]
else:                           # the C++ library: from the disk cache, no C++ compiler
    built, secs = not kern.library.from_disk, kern.library.compile_seconds
print(frontend_cache.stats["misses"], frontend_cache.stats["disk_hits"], int(built), secs)
"""


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
def test_second_process_load_and_first_launch_hit_the_caches(slang_dir, tmp_path, tdev):
    """A new process's loadModule + first launch compiles nothing: the front end (Slang -> C++ / CUDA) and
    the library / cubin come from the disk cache the first process filled (counted by the runtime, not
    timed)."""
    src = tmp_path / "square.slang"
    src.write_text((slang_dir / "square.slang").read_text().replace("input[i.x] * input[i.x]",
                                                                      "input[i.x] * input[i.x] + 0.0 * 2.0"))
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(tmp_path / "cache"))

    def run():
        r = subprocess.run([sys.executable, "-c", WARM_CHILD, str(src), tdev], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        misses, hits, built, secs = r.stdout.split()
        return int(misses), int(hits), int(built), float(secs)

    misses, _hits, built, secs = run()
    assert misses >= 1 and built == 1 and secs > 0             # the first process built everything
    misses, hits, built, secs = run()
    assert misses == 0 and hits >= 1, (misses, hits)           # no Slang front-end / emit work
    assert built == 0 and secs == 0.0                          # no C++ / NVRTC compile
