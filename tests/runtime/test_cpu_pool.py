"""The CPU device's worker pools (runtime/cpu_pool.py): the native pool (native threads, one GIL-releasing call
per dispatch) and the Python pool, each at several thread counts; the participants' privatised sums combined
once per dispatch after the join (emit/program.py sj_finish_chunks); several Python threads and devices
dispatching at once; fork() after the pool started; errors recorded by kernels on workers; KeyboardInterrupt
during a dispatch; process exit with a pool alive; the cheap `dispatch` path (cpu.py FastDispatch)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import PipelineOptions
from slangjit.runtime import cpu_pool
from slangjit.runtime.kernel_errors import KernelError

ROOT = Path(__file__).resolve().parents[2]
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
NO_LANES = PipelineOptions().with_cpu(lanes=False)      # the scalar launcher (privatised adds on its stack)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the native pool is Linux-only")


@pytest.fixture(params=["native", "python"])
def pool_kind(request, monkeypatch):
    """Which pool the dispatches of the test get (the native one is built first if need be)."""
    if request.param == "python":
        monkeypatch.setenv("SLANGJIT_POOL", "python")
    else:
        monkeypatch.delenv("SLANGJIT_POOL", raising=False)
        assert cpu_pool.native_ready(wait=True, timeout=300), "the native pool's library could not be built"
    return request.param


def _assert_kind(kind: str) -> None:
    p = cpu_pool._get_pool()
    if p.nthreads > 1:
        assert p.native == (kind == "native")


def _kernel(dev, tmp_path, text: str, name: str = "k"):
    p = tmp_path / f"{name}.slang"
    p.write_text(text)
    return dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))


def _slots(text: str, options: PipelineOptions) -> int:
    src = compile_program([SourceSpec(text=text, name="adds.slang")], ["computeMain"], target="cpp",
                          options=options).source
    m = re.search(r"privatised gradient adds: (\d+) slots", src)
    return int(m.group(1)) if m else 0


# every thread adds into its own element (not atomically: a group run twice would show) and, through a
# thread-uniform address, 1 and tid % 4 into g[0] and g[1] (privatised: per-participant sums)
COVER = r"""
[numthreads(16, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint* outp, uniform float* g, uniform uint n)
{
    if (tid.x >= n) return;
    outp[tid.x] = outp[tid.x] + tid.x * 3u + 1u;
    InterlockedAdd(g[0], 1.0);
    InterlockedAdd(g[1], float(tid.x % 4u));
}
"""


@pytest.mark.parametrize("options", [PipelineOptions(), NO_LANES], ids=["lanes", "scalar"])
@pytest.mark.parametrize("threads,n", [("1", 16 * 1000), ("2", 16 * 1000 - 5), ("3", 16 * 1001 - 7),
                                       ("8", 40), ("17", 16 * 5 - 1), ("17", 16 * 2000 + 3)])
def test_every_group_once_and_sums_once(pool_kind, threads, n, options, monkeypatch, tmp_path):
    """Values at several thread counts: more threads than groups, chunks that do not divide the groups,
    a partial last group; privatised sums exact (integers in float32)."""
    assert _slots(COVER, options) == 2
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", threads)
    dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=options)
    k = _kernel(dev, tmp_path, COVER)
    outp = dev.create_buffer(element_count=n + 16, struct_size=4, usage=RW, data=np.zeros(n + 16, np.uint32))
    g = dev.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.array([0.5, 0.0], np.float32))
    for _ in range(2):
        k.dispatch(thread_count=[n + 16, 1, 1], outp=outp.device_address, g=g.device_address, n=n)
    _assert_kind(pool_kind)
    got = outp.to_numpy().view(np.uint32)
    t = np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(got[:n], (2 * (t * 3 + 1)).astype(np.uint32))
    assert not got[n:].any()
    gs = g.to_numpy().view(np.float32)
    assert gs[0] == 0.5 + 2 * n and gs[1] == 2 * float((t % 4).sum())


def test_native_pool_runs_on_its_workers(monkeypatch, tmp_path):
    """The native pool's dispatches run on the pool (not on the calling thread alone), with every worker's share."""
    monkeypatch.delenv("SLANGJIT_POOL", raising=False)
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "4")
    assert cpu_pool.native_ready(wait=True, timeout=300)
    p = cpu_pool._get_pool()
    assert p.native and p.nthreads == 4
    d0, _, s0 = p.stats()
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = _kernel(dev, tmp_path, COVER)
    n = 16 * 4096
    outp = dev.create_buffer(element_count=n, struct_size=4, usage=RW, data=np.zeros(n, np.uint32))
    g = dev.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.zeros(2, np.float32))
    for _ in range(20):
        k.dispatch(thread_count=[n, 1, 1], outp=outp.device_address, g=g.device_address, n=n)
    d1, _, s1 = p.stats()
    assert d1 - d0 == 20 and s1 > s0          # workers took shares (up to 3 per dispatch)
    assert s1 - s0 <= 3 * 20
    assert g.to_numpy().view(np.float32)[0] == 20 * n


# ------------------------------------------------------------------------------------------ concurrency

ADD = r"""
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* g, uniform uint n)
{
    if (tid.x >= n) return;
    InterlockedAdd(g[0], 1.0);
    InterlockedAdd(g[1], float(tid.x & 7u) * 0.25);
}
"""


def test_concurrent_dispatches_add_exactly_once(pool_kind, monkeypatch, tmp_path):
    """Three Python threads (two devices; privatised and plain atomic kernels) add into one buffer at once:
    every dispatch's sums arrive exactly once (dyadic values: exact in float32)."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "3")
    dev1 = spy.create_device(type=spy.DeviceType.cpu)
    dev2 = spy.create_device(type=spy.DeviceType.cpu, compile_options=PipelineOptions().with_cpu(privatize_adds=False))
    assert _slots(ADD, PipelineOptions()) == 2
    k1 = _kernel(dev1, tmp_path, ADD, "a1")
    k2 = _kernel(dev2, tmp_path, ADD, "a2")
    k3 = _kernel(dev1, tmp_path, ADD.replace("32, 1, 1", "64, 1, 1"), "a3")
    g = dev1.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.zeros(2, np.float32))
    sizes = {k1: 32 * 300 - 9, k2: 32 * 40 + 1, k3: 64 * 200 - 1}
    reps = 25
    errors = []
    start = threading.Barrier(3)

    def work(k):
        try:
            start.wait()
            for _ in range(reps):
                n = sizes[k]
                k.dispatch(thread_count=[n, 1, 1], g=g.device_address, n=n)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work, args=(k,)) for k in (k1, k2, k3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors
    _assert_kind(pool_kind)
    want0 = reps * sum(sizes.values())
    want1 = reps * sum(float((np.arange(n) & 7).sum()) * 0.25 for n in sizes.values())
    got = g.to_numpy().view(np.float32)
    assert got[0] == want0 and got[1] == want1


def test_thread_count_change_replaces_the_pool(pool_kind, monkeypatch, tmp_path):
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = _kernel(dev, tmp_path, ADD)
    g = dev.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.zeros(2, np.float32))
    n = 32 * 500
    for threads in ("2", "5", "1", "3"):
        monkeypatch.setenv("SLANGJIT_NUM_THREADS", threads)
        k.dispatch(thread_count=[n, 1, 1], g=g.device_address, n=n)
        assert cpu_pool._get_pool().nthreads == int(threads)
    assert g.to_numpy().view(np.float32)[0] == 4 * n


# ------------------------------------------------------------------------------------------ errors, signals

NULL = r"""
[numthreads(8, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* outp, uniform float* bad, uniform uint at)
{
    outp[tid.x] = 1.0;
    if (tid.x == at)
        outp[0] = *bad;
}
"""


def test_errors_recorded_on_workers_are_raised(pool_kind, monkeypatch, tmp_path):
    """A failure recorded by whichever participant runs the failing group is raised after the dispatch, with
    its location; the pool keeps working."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "4")
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = _kernel(dev, tmp_path, NULL)
    n = 8 * 4000
    out = dev.create_buffer(element_count=n, struct_size=4, usage=RW)
    for at in (n - 1, n // 2, 3):
        with pytest.raises(KernelError, match=r"null pointer") as ei:
            k.dispatch(thread_count=[n, 1, 1], outp=out.device_address, bad=0, at=at)
        assert ei.value.location.endswith(":7")
    buf = dev.create_buffer(element_count=1, struct_size=4, usage=RW, data=np.array([2.5], np.float32))
    out2 = dev.create_buffer(element_count=n, struct_size=4, usage=RW)
    k.dispatch(thread_count=[n, 1, 1], outp=out2.device_address, bad=buf.device_address, at=5)
    _assert_kind(pool_kind)
    got = out2.to_numpy().view(np.float32)
    assert got[0] == 2.5 and (got[1:] == 1.0).all()


SLOW = r"""
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* outp, uniform uint iters)
{
    float a = float(tid.x & 15u);
    for (uint i = 0; i < iters; i++)
        a = a * 0.5 + 1.0;
    outp[tid.x] = a + 1.0;
}
"""


def test_keyboard_interrupt_after_the_dispatch(pool_kind, monkeypatch, tmp_path):
    """Ctrl-C during a dispatch: the dispatch completes (workers write into memory the caller owns), then
    KeyboardInterrupt is raised; the pool keeps working."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "3")
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = _kernel(dev, tmp_path, SLOW)
    n = 64 * 256
    out = dev.create_buffer(element_count=n, struct_size=4, usage=RW)
    k.dispatch(thread_count=[n, 1, 1], outp=out.device_address, iters=10)
    t0 = time.perf_counter()
    k.dispatch(thread_count=[n, 1, 1], outp=out.device_address, iters=2000)
    one = time.perf_counter() - t0
    iters = int(2000 * max(1.0, 0.6 / max(one, 1e-4)))          # a dispatch of ~0.6 s or more
    out.copy_from_numpy(np.zeros(n, np.float32))
    main = threading.get_ident()
    timer = threading.Timer(0.1, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            k.dispatch(thread_count=[n, 1, 1], outp=out.device_address, iters=iters)
            time.sleep(5)               # a dispatch shorter than the timer: the interrupt arrives here
    finally:
        timer.join()
    assert (out.to_numpy().view(np.float32) == 3.0).all()       # a -> 2 (a fixed point), + 1, every thread
    k.dispatch(thread_count=[n, 1, 1], outp=out.device_address, iters=1)
    _assert_kind(pool_kind)
    want = np.arange(n) % 16 * 0.5 + 2.0
    np.testing.assert_array_equal(out.to_numpy().view(np.float32), want.astype(np.float32))


# ------------------------------------------------------------------------------------------ processes

_FORK_CHILD = r"""
import os, sys, threading, time
import numpy as np
sys.path.insert(0, {root!r})
import slangjit as spy
from slangjit.runtime import cpu_pool
os.environ["SLANGJIT_NUM_THREADS"] = "3"
if {native!r}:
    assert cpu_pool.native_ready(wait=True, timeout=300)
else:
    os.environ["SLANGJIT_POOL"] = "python"
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
dev = spy.create_device(type=spy.DeviceType.cpu)
k = dev.create_compute_kernel(dev.load_program({path!r}, ["computeMain"]))
n = 32 * 3000
g = dev.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.zeros(2, np.float32))
k.dispatch(thread_count=[n, 1, 1], g=g.device_address, n=n)
assert cpu_pool._get_pool().native == {native!r}
stop = False
def busy():                              # another Python thread holds the pool while we fork
    while not stop:
        k.dispatch(thread_count=[n, 1, 1], g=g.device_address, n=n)
t = threading.Thread(target=busy, daemon=True)
t.start()
time.sleep(0.05)
codes = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            g2 = dev.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.zeros(2, np.float32))
            for _ in range(3):
                k.dispatch(thread_count=[n, 1, 1], g=g2.device_address, n=n)
            ok = g2.to_numpy().view(np.float32)[0] == 3 * n and cpu_pool._get_pool().native == {native!r}
            os._exit(0 if ok else 3)
        except BaseException:
            os._exit(4)
    deadline = time.time() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            codes.append(os.waitstatus_to_exitcode(status))
            break
        if time.time() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            codes.append("hung")
            break
        time.sleep(0.01)
stop = True
t.join()
print("CODES", codes)
"""


def test_fork_after_the_pool_started(pool_kind, tmp_path):
    """fork() while the pool's threads exist (and while another thread is dispatching on it): the child's
    dispatches run (on a pool of its own) and give the right sums; the parent's go on."""
    k = tmp_path / "add.slang"
    k.write_text(ADD)
    script = _FORK_CHILD.format(root=str(ROOT), native=pool_kind == "native", path=str(k))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "CODES [0, 0, 0, 0]" in p.stdout, p.stdout + p.stderr[-3000:]


_EXIT_CHILD = r"""
import os, sys, threading
import numpy as np
sys.path.insert(0, {root!r})
import slangjit as spy
from slangjit.runtime import cpu_pool
os.environ["SLANGJIT_NUM_THREADS"] = "4"
assert cpu_pool.native_ready(wait=True, timeout=300)
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
dev = spy.create_device(type=spy.DeviceType.cpu)
k = dev.create_compute_kernel(dev.load_program({path!r}, ["computeMain"]))
n = 32 * 3000
g = dev.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.zeros(2, np.float32))
k.dispatch(thread_count=[n, 1, 1], g=g.device_address, n=n)
assert cpu_pool._get_pool().native
def busy():
    while True:
        k.dispatch(thread_count=[n, 1, 1], g=g.device_address, n=n)
threading.Thread(target=busy, daemon=True).start()
print("EXITING", flush=True)
{exit}
"""


@pytest.mark.parametrize("how", ["return", "sys.exit(0)", "os._exit(0)"])
def test_process_exit_with_a_pool_alive(how, tmp_path):
    k = tmp_path / "add.slang"
    k.write_text(ADD)
    script = _EXIT_CHILD.format(root=str(ROOT), path=str(k), exit="" if how == "return" else how)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "EXITING" in p.stdout, p.stderr[-3000:]


# ------------------------------------------------------------------------------------------ dispatch's fast path

SCALARS = r"""
[numthreads(4, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float* outp, uniform uint u, uniform int i,
                 uniform half h, uniform double d, uniform float f)
{
    if (tid.x != 0) return;
    outp[0] = float(u); outp[1] = float(i); outp[2] = float(h); outp[3] = float(d); outp[4] = f;
}
"""


def test_fast_dispatch_packs_as_the_general_path(tmp_path):
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = _kernel(dev, tmp_path, SCALARS)
    out = dev.create_buffer(element_count=5, struct_size=4, usage=RW)
    cases = [dict(u=7, i=-3, h=1.5, d=0.1, f=2.25), dict(u=np.uint32(9), i=True, h=2, d=np.float32(0.5), f=1e-3),
             dict(u=-1, i=5, h=65504.0, d=1e300, f=-0.0)]
    for kw in cases:
        k.dispatch(thread_count=[4, 1, 1], outp=out.device_address, **kw)
        fast = out.to_numpy().view(np.float32).copy()
        out.copy_from_numpy(np.full(5, np.nan, np.float32))
        k.dispatch(thread_count=(4,), outp=out.device_address, **kw)          # the general path (one component)
        np.testing.assert_array_equal(fast, out.to_numpy().view(np.float32))
    assert any(p for p in k._plans.values())
    got = out.to_numpy().view(np.float32)
    assert got[0] == np.float32(2 ** 32 - 1) and got[2] == 65504.0 and got[3] == np.float32(np.inf)
    # values the fast path does not take reach the general path and its errors, which name the argument
    with pytest.raises(TypeError, match="'outp'"):
        k.dispatch(thread_count=[4, 1, 1], outp=True, u=1, i=1, h=1.0, d=1.0, f=1.0)
    with pytest.raises(TypeError, match="'outp'"):
        k.dispatch(thread_count=[4, 1, 1], outp=1.5, u=1, i=1, h=1.0, d=1.0, f=1.0)
    with pytest.raises(ValueError, match="'f'"):
        k.dispatch(thread_count=[4, 1, 1], outp=out.device_address, u=1, i=1, h=1.0, d=1.0, f=1e39)
    with pytest.raises(ValueError, match="'h'"):
        k.dispatch(thread_count=[4, 1, 1], outp=out.device_address, u=1, i=1, h=1e6, d=1.0, f=1.0)
    with pytest.raises(TypeError, match="'u'"):
        k.dispatch(thread_count=[4, 1, 1], outp=out.device_address, u=1.5, i=1, h=1.0, d=1.0, f=1.0)
    with pytest.raises(ValueError, match="'u'"):
        k.dispatch(thread_count=[4, 1, 1], outp=out.device_address, u=1 << 40, i=1, h=1.0, d=1.0, f=1.0)
    with pytest.raises(ValueError, match="no value .*'f'"):
        k.dispatch(thread_count=[4, 1, 1], outp=out.device_address, u=1, i=1, h=1.0, d=1.0)
    with pytest.raises(ValueError, match="unknown variable 'zz'"):
        k.dispatch(thread_count=[4, 1, 1], outp=out.device_address, u=1, i=1, h=1.0, d=1.0, f=1.0, zz=1)
    with pytest.raises(ValueError, match="negative"):
        k.dispatch(thread_count=[-4, 1, 1], outp=out.device_address, u=1, i=1, h=1.0, d=1.0, f=1.0)
    k.dispatch(thread_count=[0, 1, 1], outp=0, u=1, i=1, h=1.0, d=1.0, f=1.0)      # nothing to run


def test_fast_dispatch_blocks_are_not_shared_between_threads(monkeypatch, tmp_path):
    """Several Python threads dispatching one kernel with different values at once: each dispatch's block
    holds its own values until it is done."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "2")
    text = r"""
[numthreads(16, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint* outp, uniform uint v, uniform uint n)
{
    if (tid.x < n) outp[tid.x] = v + tid.x;
}
"""
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = _kernel(dev, tmp_path, text)
    n = 16 * 600
    bufs = [dev.create_buffer(element_count=n, struct_size=4, usage=RW) for _ in range(4)]
    errors = []

    def work(j):
        try:
            for r in range(40):
                v = 1000 * j + r
                k.dispatch(thread_count=[n, 1, 1], outp=bufs[j].device_address, v=v, n=n)
                got = bufs[j].to_numpy().view(np.uint32)
                if not (got == v + np.arange(n, dtype=np.uint32)).all():
                    errors.append((j, r))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work, args=(j,)) for j in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors


def test_recorded_dispatch_runs_at_submit(tmp_path):
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = _kernel(dev, tmp_path, ADD)
    g = dev.create_buffer(element_count=2, struct_size=4, usage=RW, data=np.zeros(2, np.float32))
    enc = dev.create_command_encoder()
    k.dispatch(thread_count=[320, 1, 1], command_encoder=enc, g=g.device_address, n=320)
    assert g.to_numpy().view(np.float32)[0] == 0
    dev.submit_command_buffer(enc.finish())
    assert g.to_numpy().view(np.float32)[0] == 320
