"""Compile-time benchmark: `load_program` -> first dispatch for a ~300-line Slang module.

    python benchmarks/compile_time.py [--cold N] [--warm N]

Every measurement runs in a fresh Python process (so no in-memory cache helps):

* cold   empty cache dir (a new temporary SLANGJIT_CACHE_DIR per run): front end (core library
         parse + parse + check + emit, from `CompiledProgram.timings`) and the C++ compile
         (`kernel.timings["cxx"]`).
* warm   new process, disk caches filled by a cold run: the front-end cache and the compiled
         library cache; nothing is parsed and no C++ compiler runs.  Measured with bytecode
         caching on (as after a normal `pip install`) and, for reference, with
         PYTHONDONTWRITEBYTECODE=1 (every slangjit module imported from source).
* warm, front-end cache off (SLANGJIT_NO_FRONTEND_CACHE=1): the front end runs, the C++ library
         comes from the disk cache.

    python benchmarks/compile_time.py --module-load N [--against OTHER_CHECKOUT]

* module load: a functional `spy.Module.load_from_source` (declaration reflection: the core library and
         slangpy.slang declared) + its first call (`polynomial` over a 4-element tensor), in new processes on a
         warm cache (after one cold process per tree, also reported); process CPU and wall, medians of N.
         With --against, the same runs of another checkout (e.g. a `git archive` of the branch point, its own
         cache folder) alternate with this one's, so both see the same machine load.

    python benchmarks/compile_time.py --mlp-cold N [--against OTHER_CHECKOUT] [--early-pch]
    python benchmarks/compile_time.py --mlp-hit N [--against OTHER_CHECKOUT]

* MLP cold compile: the seed MLP module of benchmarks/cpu_mlp.py (`learnGradient` + `adjustParameters`, its
         native-add source) in a new process on a new empty cache folder: `load_program` + `create_compute_kernel`
         for both until both libraries are loaded (as cpu_mlp.py's cold line; import and device creation
         excluded), wall and CPU (the process and its compiler processes); then a second process on the same
         folder (cache hit).  N rounds; with --against, each round runs the other checkout too (its own cache
         folders, order alternating), so both see the same machine load.  --early-pch: this tree's children with
         CpuOptions.early_pch on (`--early-pch --against .` compares it with the default in one tree).

* MLP cache hit (--mlp-hit): per tree one cold process on a cache folder of its own, then N new processes on it
         (trees alternating): device creation, "ready", and both together (wall ms; median, quartiles, range).

"ready" = `load_program` + `create_compute_kernel` + the kernel's library loaded (the C++ build runs in
the background from `load_program` on, and a kernel loads its library at first use: this waits for it).  Medians of
several runs are printed; nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODULE = HERE / "data" / "module300.slang"


def child() -> None:
    t_import = time.perf_counter()
    import numpy as np
    import slangjit as spy
    t_imported = time.perf_counter()
    device = spy.create_device(type=spy.DeviceType.cpu)
    t0 = time.perf_counter()
    program = device.load_program(str(MODULE), ["renderMain"])
    t1 = time.perf_counter()
    kernel = device.create_compute_kernel(program)
    kernel.library      # the C++ build runs in the background from load_program on: wait for the library here
    t2 = time.perf_counter()
    w = h = 16
    image = device.create_buffer(element_count=w * h, struct_size=16, usage=spy.BufferUsage.unordered_access)
    kernel.dispatch(thread_count=[w, h, 1], vars={
        "image": image,
        "particles": device.create_buffer(element_count=1, struct_size=32, usage=spy.BufferUsage.unordered_access),
        "stats": device.create_buffer(element_count=2, struct_size=4, usage=spy.BufferUsage.unordered_access),
        "scene": {"width": w, "height": h, "samples": 1, "frame": 0, "exposure": 1.0},
        "camera": {"position": [0, 1.5, -5], "forward": [0, 0, 1], "up": [0, 1, 0], "fov": 1.0},
    })
    t3 = time.perf_counter()
    img = image.to_numpy().view(np.float32).reshape(h, w, 4)
    assert np.all(np.isfinite(img)) and np.all(img[..., 3] == 1.0)
    print(json.dumps({
        "import_s": t_imported - t_import,
        "load_program_s": t1 - t0,
        "create_kernel_s": t2 - t1,
        "ready_s": t2 - t0,
        "first_dispatch_s": t3 - t2,
        "frontend": dict(program.compiled.timings),
        "frontend_cache": getattr(program.compiled, "frontend_cache", None),
        "kernel_timings": dict(kernel.timings),
        "library_from_disk": kernel.library.from_disk,
    }))


MODULE_SRC = """
[Differentiable]
float polynomial(float a, float b, float c, float x) { return a * x * x + b * x + c; }
"""


def module_child() -> None:
    import numpy as np
    import slangjit as spy
    device = spy.create_device(type=spy.DeviceType.cpu)
    x = spy.Tensor.from_numpy(device, np.arange(4, dtype=np.float32))
    c0, w0 = time.process_time(), time.perf_counter()
    m = spy.Module.load_from_source(device, "poly", MODULE_SRC)
    c1, w1 = time.process_time(), time.perf_counter()
    r = m.polynomial(a=2.0, b=8.0, c=-1.0, x=x)
    c2, w2 = time.process_time(), time.perf_counter()
    v = np.arange(4)
    assert np.allclose(r.to_numpy(), 2 * v * v + 8 * v - 1)
    print(json.dumps({"load_cpu": c1 - c0, "load_wall": w1 - w0, "call_cpu": c2 - c1, "call_wall": w2 - w1}))


def module_load(n: int, against) -> None:
    trees = [("this", ROOT)] + ([("against", Path(against).resolve())] if against else [])
    caches = {name: tempfile.mkdtemp(prefix=f"sj-bench-mod-{name}-") for name, _ in trees}
    pycs = {name: tempfile.mkdtemp(prefix=f"sj-pyc-{name}-") for name, _ in trees}

    def run(name, root):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SLANGJIT_NO_FRONTEND_CACHE")}
        env.update(SLANGJIT_CACHE_DIR=caches[name], PYTHONPYCACHEPREFIX=pycs[name], PYTHONPATH=str(root))
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--module-child"], capture_output=True,
                           text=True, env=env, cwd=str(root))
        if p.returncode != 0:
            raise SystemExit(f"child failed:\n{p.stderr}")
        return json.loads(p.stdout.strip().splitlines()[-1])
    cold = {name: run(name, root) for name, root in trees}
    warm: dict = {name: [] for name, _ in trees}
    for _ in range(n):
        for name, root in trees:
            warm[name].append(run(name, root))
    med = statistics.median
    print(f"functional Module.load_from_source + first call, new processes; warm: median of {n}"
          + (" (alternating)" if against else ""))
    print(f"{'':<34}" + "".join(f"{name + ' (ms)':>16}" for name, _ in trees))
    for label, rows, key in (("cold: load, CPU", "cold", "load_cpu"), ("cold: load, wall", "cold", "load_wall"),
                             ("cold: first call, wall", "cold", "call_wall"),
                             ("warm: load, CPU", "warm", "load_cpu"), ("warm: load, wall", "warm", "load_wall"),
                             ("warm: first call, CPU", "warm", "call_cpu"),
                             ("warm: first call, wall", "warm", "call_wall")):
        vals = [cold[name][key] if rows == "cold" else med(r[key] for r in warm[name]) for name, _ in trees]
        print(f"  {label:<32}" + "".join(f"{ms(v):>16}" for v in vals))
    if against:
        for key in ("load_cpu", "load_wall"):
            a, b = med(r[key] for r in warm["against"]), med(r[key] for r in warm["this"])
            print(f"  warm {key}: against / this = {a / b:.2f}x")


MLP_CHILD = r"""
import json, os, sys, time
import slangjit as spy
kw = {}
if os.environ.get("SJ_BENCH_EARLY_PCH"):      # --early-pch: CpuOptions.early_pch on (this tree only)
    import dataclasses
    from slangjit.compiler.passes.options import DEFAULT_OPTIONS
    kw["compile_options"] = dataclasses.replace(DEFAULT_OPTIONS, cpu=dataclasses.replace(DEFAULT_OPTIONS.cpu, early_pch=True))
td = time.perf_counter()
dev = spy.create_device(type=spy.DeviceType.cpu, **kw)
c0, t0 = os.times(), time.perf_counter()
kernels = [dev.create_compute_kernel(dev.load_program(sys.argv[1], [e])) for e in ("learnGradient", "adjustParameters")]
t1 = time.perf_counter()
for k in kernels:
    k.library
t2 = time.perf_counter()
c2 = os.times()
cpu = sum(c2[:4]) - sum(c0[:4])
print(json.dumps({"created": t1 - t0, "ready": t2 - t0, "cpu": cpu, "file": spy.__file__, "device": t0 - td,
                  "from_disk": [k.library.from_disk for k in kernels]}))
"""


def _mlp_child(root: Path, src: Path, cache: str, extra: dict) -> dict:
    """One MLP_CHILD process of the tree at `root` on the cache folder `cache` (`extra`: more environment)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SLANGJIT_NO_FRONTEND_CACHE",
                                                            "SJ_BENCH_EARLY_PCH")}
    env.update(SLANGJIT_CACHE_DIR=cache, PYTHONPATH=str(root), **extra)
    p = subprocess.run([sys.executable, "-c", MLP_CHILD, str(src)], capture_output=True, text=True, env=env,
                       cwd=str(root))
    if p.returncode != 0:
        raise SystemExit(f"child failed:\n{p.stderr}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert Path(r["file"]).resolve().is_relative_to(root), (r["file"], root)
    return r


def mlp_cold(n: int, against, early_pch: bool = False) -> None:
    sys.path.insert(0, str(HERE))
    import cpu_mlp
    src = Path(tempfile.mkdtemp(prefix="sj-mlp-src-")) / "mlp.slang"
    src.write_text(cpu_mlp.patched_source(True))
    trees = [("this", ROOT)] + ([("against", Path(against).resolve())] if against else [])
    pycs = {name: tempfile.mkdtemp(prefix=f"sj-pyc-{name}-") for name, _ in trees}
    if early_pch:
        print("this: CpuOptions.early_pch on")

    def run(name, root, cache):
        extra = dict(PYTHONPYCACHEPREFIX=pycs[name])
        if early_pch and name == "this":
            extra["SJ_BENCH_EARLY_PCH"] = "1"
        return _mlp_child(root, src, cache, extra)

    for name, root in trees:            # bytecode written once per tree (not part of any figure)
        run(name, root, tempfile.mkdtemp(prefix="sj-mlp-warmup-"))
    rows: dict = {name: {"cold": [], "hit": []} for name, _ in trees}
    for i in range(n):
        for name, root in (trees if i % 2 == 0 else trees[::-1]):
            cache = tempfile.mkdtemp(prefix=f"sj-mlp-cold-{name}-")
            cold = run(name, root, cache)
            hit = run(name, root, cache)
            assert not any(cold["from_disk"]) and all(hit["from_disk"]), (cold, hit)
            rows[name]["cold"].append(cold)
            rows[name]["hit"].append(hit)
    med = statistics.median
    print(f"seed MLP module (learnGradient + adjustParameters), new process, empty cache; {n} rounds"
          + (" (trees alternating)" if against else "") + f"; load average {os.getloadavg()[0]:.2f}")
    print(f"{'':<44}" + "".join(f"{name:>22}" for name, _ in trees))
    for label, kind, key, fmt in (("cold: ready, wall ms (median / min)", "cold", "ready", 0),
                                  ("cold: CPU ms incl. compilers (median / min)", "cold", "cpu", 0),
                                  ("cold: front ends done, wall ms (median)", "cold", "created", 0),
                                  ("cache hit: ready, wall ms (median / min)", "hit", "ready", 1)):
        cells = []
        for name, _ in trees:
            v = [r[key] * 1e3 for r in rows[name][kind]]
            cells.append(f"{med(v):.{fmt}f}" + ("" if "created" in label else f" / {min(v):.{fmt}f}"))
        print(f"  {label:<42}" + "".join(f"{c:>22}" for c in cells))
    for name, _ in trees:
        print(f"  {name}: cold ready ms per round: " + ", ".join(f"{r['ready'] * 1e3:.0f}" for r in rows[name]["cold"]))
    if against:
        for key in ("ready", "cpu"):
            a = med(r[key] for r in rows["against"]["cold"])
            b = med(r[key] for r in rows["this"]["cold"])
            print(f"  cold {key}: against / this = {a / b:.2f}x")


def mlp_hit(n: int, against) -> None:
    """The MLP module's cache hit: per tree one cold process on a cache folder of its own, then n new processes
    on it, trees alternating; device creation and "ready" (as mlp_cold) wall ms."""
    sys.path.insert(0, str(HERE))
    import cpu_mlp
    src = Path(tempfile.mkdtemp(prefix="sj-mlp-src-")) / "mlp.slang"
    src.write_text(cpu_mlp.patched_source(True))
    trees = [("this", ROOT)] + ([("against", Path(against).resolve())] if against else [])
    caches = {name: tempfile.mkdtemp(prefix=f"sj-mlp-hit-{name}-") for name, _ in trees}

    def run(name, root):
        return _mlp_child(root, src, caches[name], {})

    for name, root in trees:
        run(name, root)                 # cold: fills the folder (and writes the bytecode)
        assert all(run(name, root)["from_disk"])
    rows: dict = {name: [] for name, _ in trees}
    for i in range(n):
        for name, root in (trees if i % 2 == 0 else trees[::-1]):
            rows[name].append(run(name, root))
    print(f"seed MLP module, cache hit (new process, warm cache folder); {n} runs each"
          + (" (trees alternating)" if against else "") + f"; load average {os.getloadavg()[0]:.2f}")
    print(f"{'wall ms: median (q1-q3) [min-max]':<44}" + "".join(f"{name:>36}" for name, _ in trees))
    for label, f in (("device creation", lambda r: r.get("device", float("nan"))), ("ready", lambda r: r["ready"]),
                     ("device creation + ready", lambda r: r.get("device", float("nan")) + r["ready"])):
        cells = []
        for name, _ in trees:
            v = sorted(f(r) * 1e3 for r in rows[name])
            q = statistics.quantiles(v, n=4) if len(v) > 1 else (v[0], v[0], v[0])
            cells.append(f"{statistics.median(v):.2f} ({q[0]:.2f}-{q[2]:.2f}) [{v[0]:.2f}-{v[-1]:.2f}]")
        print(f"  {label:<42}" + "".join(f"{c:>36}" for c in cells))


def run_child(env_extra: dict, drop=()) -> dict:
    env = dict(os.environ)
    for k in drop:
        env.pop(k, None)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"], capture_output=True, text=True,
                       env=env, cwd=str(ROOT))
    if p.returncode != 0:
        raise SystemExit(f"child failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def ms(x: float) -> str:
    return f"{x * 1e3:9.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--warm", type=int, default=9)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--module-child", action="store_true")
    ap.add_argument("--module-load", type=int, default=0, metavar="N")
    ap.add_argument("--mlp-cold", type=int, default=0, metavar="N")
    ap.add_argument("--mlp-hit", type=int, default=0, metavar="N")
    ap.add_argument("--early-pch", action="store_true", help="--mlp-cold: this tree with CpuOptions.early_pch on")
    ap.add_argument("--against", default=None, help="another checkout to alternate with (--module-load, --mlp-cold)")
    args = ap.parse_args()
    if args.child:
        child()
        return
    if args.module_child:
        module_child()
        return
    if args.module_load:
        module_load(args.module_load, args.against)
        return
    if args.mlp_cold:
        mlp_cold(args.mlp_cold, args.against, args.early_pch)
        return
    if args.mlp_hit:
        mlp_hit(args.mlp_hit, args.against)
        return

    lines = sum(1 for _ in open(MODULE))
    print(f"module: {MODULE.relative_to(ROOT)} ({lines} lines), entry point renderMain")
    pyc = tempfile.mkdtemp(prefix="sj-pyc-")
    bytecode = {"PYTHONPYCACHEPREFIX": pyc}
    no_bytecode = {"PYTHONDONTWRITEBYTECODE": "1"}

    cold = []
    cache = None
    for i in range(args.cold):
        cache = tempfile.mkdtemp(prefix="sj-bench-cold-")
        r = run_child({"SLANGJIT_CACHE_DIR": cache, **bytecode}, drop=["PYTHONDONTWRITEBYTECODE",
                                                                       "SLANGJIT_NO_FRONTEND_CACHE"])
        assert r["frontend_cache"] is None and not r["library_from_disk"], r
        cold.append(r)

    def fe(r, with_core=True):
        t = r["frontend"]
        return sum(v for k, v in t.items() if with_core or k != "core")

    warm_env = {"SLANGJIT_CACHE_DIR": cache}
    warm = [run_child({**warm_env, **bytecode}, drop=["PYTHONDONTWRITEBYTECODE", "SLANGJIT_NO_FRONTEND_CACHE"])
            for _ in range(args.warm)]
    warm_src = [run_child({**warm_env, **no_bytecode}, drop=["SLANGJIT_NO_FRONTEND_CACHE", "PYTHONPYCACHEPREFIX"])
                for _ in range(args.warm)]
    warm_nofe = [run_child({**warm_env, **bytecode, "SLANGJIT_NO_FRONTEND_CACHE": "1"},
                           drop=["PYTHONDONTWRITEBYTECODE"]) for _ in range(args.warm)]
    for r in warm + warm_src:
        assert r["frontend_cache"] == "disk" and r["library_from_disk"], r
    for r in warm_nofe:
        assert r["frontend_cache"] is None and r["library_from_disk"], r

    med = statistics.median
    print()
    print(f"{'cold (empty cache), median of ' + str(len(cold)):<58}{'ms':>9}")
    print("-" * 67)
    stages = ["core", "parse", "check", "emit"]
    for s in stages:
        print(f"  front end: {s:<45}{ms(med(r['frontend'].get(s, 0.0) for r in cold))}")
    print(f"  front end total (core library + parse + check + emit)    {ms(med(fe(r) for r in cold))}")
    print(f"  front end without the core library (parsed once/process) {ms(med(fe(r, False) for r in cold))}")
    print(f"  C++ compile (g++)                                        {ms(med(r['kernel_timings']['cxx'] for r in cold))}")
    print(f"  load_program -> kernel ready                             {ms(med(r['ready_s'] for r in cold))}")
    print(f"  first dispatch (16x16 pixels, 1 sample)                  {ms(med(r['first_dispatch_s'] for r in cold))}")
    print()
    print(f"{'warm (new process, disk caches), median of ' + str(args.warm):<58}{'ms':>9}")
    print("-" * 67)
    for title, rs in (("front-end cache + library cache, .pyc cached", warm),
                      ("front-end cache + library cache, no .pyc", warm_src),
                      ("library cache only (SLANGJIT_NO_FRONTEND_CACHE=1)", warm_nofe)):
        print(f"  {title}")
        print(f"    load_program                                           {ms(med(r['load_program_s'] for r in rs))}")
        print(f"    create_compute_kernel (library from disk)              {ms(med(r['create_kernel_s'] for r in rs))}")
        print(f"    load_program -> kernel ready                           {ms(med(r['ready_s'] for r in rs))}")
        print(f"    first dispatch                                         {ms(med(r['first_dispatch_s'] for r in rs))}")
    print()
    print(f"  (import slangjit in the child: {ms(med(r['import_s'] for r in warm)).strip()} ms with .pyc, "
          f"{ms(med(r['import_s'] for r in warm_src)).strip()} ms without; not part of the load time)")


if __name__ == "__main__":
    main()
