"""The long mode of the autodiff property test (tests/compiler/test_autodiff_property.py): the same generator
of random differentiable programs, checked against float64 finite differences (fwd_diff and bwd_diff, and
against each other), for as many programs as SLANGJIT_PROPERTY_PROGRAMS says (read when the test runs;
unset: skipped).  Issue 15 asks for >= 10,000 programs once; the run is recorded in benchmarks/RESULTS.md.

    SLANGJIT_PROPERTY_PROGRAMS=10000 python -m pytest -q -s tests/compiler/test_autodiff_property_long.py
"""
from __future__ import annotations

import os
import sys
import time
import zlib

import pytest

from ad_conditioning import Dual  # noqa: E402
from test_autodiff_property import (BATCH, N_POINTS, Gen, RandomChooser, _report, choose_points,  # noqa: E402
                                    run_batches)

pytestmark = pytest.mark.usefixtures("private_cache")


# ------------------------------------------------------------------------------------------ long mode
# SLANGJIT_PROPERTY_PROGRAMS=10000 (read when the test runs) checks that many more generated programs, drawn
# by `random.Random` seeds (Hypothesis's derandomized search yields few distinct functions past ~1,000):
# function k is `Gen(RandomChooser(SEED0 + k), vsig=(k % 3 == 0)).function()`, so a mismatch is reproduced
# from its seed alone.  SLANGJIT_PROPERTY_SEED moves the first seed.  Progress goes to stderr.

LONG_CHUNK = 900       # programs per run_batches call (10 batches), bounding what is held in memory


def long_mode_count():
    try:
        return int(os.environ.get("SLANGJIT_PROPERTY_PROGRAMS", "0") or 0)
    except ValueError:
        raise pytest.UsageError("SLANGJIT_PROPERTY_PROGRAMS must be an integer") from None


def random_functions(n: int, seed0: int):
    """n distinct generated functions with sample points, from consecutive seeds; (functions, stats)."""
    out, seen, k = [], set(), 0
    stats = {"generated": 0, "duplicates": 0, "no_points": 0}
    while len(out) < n:
        seed = seed0 + k
        fn = Gen(RandomChooser(seed), k % 3 == 0).function()
        fn.seed = seed
        k += 1
        stats["generated"] += 1
        key = (fn.vsig, fn.body_text)
        if key in seen:
            stats["duplicates"] += 1
            continue
        seen.add(key)
        if choose_points(fn, zlib.crc32(fn.body_text.encode())):
            out.append(fn)
        else:
            stats["no_points"] += 1
    return out, stats


def test_random_chooser_generates_checkable_programs():
    """The long mode's generator (the same Gen driven by random seeds) yields distinct programs with points."""
    fns, stats = random_functions(40, 7)
    assert len(fns) == 40 and len({f.body_text for f in fns}) == 40
    assert all(f.points for f in fns) and any(f.vsig for f in fns) and not all(f.vsig for f in fns)
    again, _ = random_functions(40, 7)
    assert [f.body_text for f in again] == [f.body_text for f in fns]     # reproducible from the seed


def test_generated_programs_long_mode(device, monkeypatch):
    n = long_mode_count()
    if n <= 0:
        pytest.skip("long mode: set SLANGJIT_PROPERTY_PROGRAMS=N (e.g. 10000) to check N random programs")
    seed0 = int(os.environ.get("SLANGJIT_PROPERTY_SEED", "1000000"))
    monkeypatch.setenv("SLANGJIT_CXXFLAGS", "-O0")
    t0 = time.time()
    checked, mismatches, failures, stats_all = 0, [], [], {}
    done = 0
    while done < n:
        m = min(LONG_CHUNK, n - done)
        fns, stats = random_functions(m, seed0)
        seed0 = max(f.seed for f in fns) + 1
        for k, v in stats.items():
            stats_all[k] = stats_all.get(k, 0) + v
        batches = [fns[i:i + BATCH] for i in range(0, len(fns), BATCH)]
        c, mm, ff = run_batches(device, batches, f"adlong{done}_")
        seeds = {f.text("g"): f.seed for f in fns}
        mismatches += [(f"// seed {seeds.get(t)}\n{t}", bad) for t, bad in mm]
        failures += [(f"// seed {seeds.get(t)}\n{t}", msg) for t, msg in ff]
        checked += c
        done += m
        print(f"autodiff property long mode: {checked}/{n} checked in {time.time() - t0:.0f} s, "
              f"{len(mismatches)} mismatching, {len(failures)} failing to compile", file=sys.stderr, flush=True)
    print(f"\nautodiff property long mode: {checked} random programs (seeds from "
          f"{os.environ.get('SLANGJIT_PROPERTY_SEED', '1000000')}) checked in {time.time() - t0:.0f} s, "
          f"{checked * N_POINTS * 3} directions x (fwd, bwd); {len(mismatches)} mismatching, "
          f"{len(failures)} failing to compile; generation: {stats_all}", file=sys.stderr)
    assert not failures and not mismatches, _report(mismatches, failures)
    assert checked == n


# ------------------------------------------------------------------------------------------ conditioning
# The 10,000-program run of session 8 found one fwd_diff/bwd_diff disagreement (seed 1004878, d/dz at the third
# point: fwd 3/512, bwd 0.005229, finite differences 0.005499).  It is float32 cancellation, not a wrong rule:
# the derivative is the sum of terms ~1e4 (a loop `t = t * (-t) + ...` four times) -- its absolute derivative
# (ad_conditioning.py) is ~2.2e4 -- and the same generated code built in double gives fwd = bwd to 1e-12.  The
# comparison now allows float32 rounding at that scale (COND_ULPS * eps32 * A); these tests keep it honest.

SEED_1004878 = 1004878


def test_dual_tangents_match_finite_differences():
    """The evaluator run on Duals gives the float64 gradient (its rules agree with finite differences), and the
    absolute derivative is never below |gradient| (equal where nothing cancels)."""
    checked = 0
    for seed in range(150):
        fn = Gen(RandomChooser(seed), seed % 3 == 0).function()
        if not choose_points(fn, zlib.crc32(fn.body_text.encode())):
            continue
        for pt, _v, g in fn.points:
            d, a = fn.tangents(pt)
            for gi, di, ai in zip(g, d, a):
                assert abs(gi - di) <= 1e-5 * (1 + abs(gi)), (seed, pt, g, d)
                assert ai >= abs(di) * (1 - 1e-12)
            checked += 1
    assert checked >= 200
    x = Dual.seed(0.7, 0)
    d = (x * x - x * x)          # cancels exactly: derivative 0, absolute derivative 2 * 2 * 0.7
    assert d.d[0] == 0.0 and abs(d.a[0] - 2.8) < 1e-12


def _seed_fn():
    fn = Gen(RandomChooser(SEED_1004878), False).function()
    assert choose_points(fn, zlib.crc32(fn.body_text.encode()))
    return fn


def test_seed_1004878_fwd_and_bwd_agree_in_double(device):
    """The same generated function and helpers with float -> double: fwd_diff and bwd_diff agree to 1e-12 and
    equal the float64 dual evaluation, so the float32 disagreement is rounding, not a rule."""
    import re
    import numpy as np
    from test_autodiff_property import HELPERS, RW

    fn = _seed_fn()
    pt, _v, g = fn.points[2]
    d, a = fn.tangents(pt)
    assert a[2] > 1e4 and abs(d[2]) < 1e-2           # ill-conditioned: terms ~1e4 cancel to 0.0055

    def dbl(s):
        return re.sub(r"\bfloat", "double", s)
    src = dbl(HELPERS) + dbl(fn.text("g")) + f"""
RWStructuredBuffer<double> outb;
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{{
    double x = {pt[0]!r}; double y = {pt[1]!r}; double z = {pt[2]!r};
    outb[0] = fwd_diff(g)(diffPair(x, 0.0), diffPair(y, 0.0), diffPair(z, 1.0)).d;
    var px = diffPair(x, 0.0); var py = diffPair(y, 0.0); var pz = diffPair(z, 0.0);
    bwd_diff(g)(px, py, pz, 1.0);
    outb[1] = pz.d;
}}
"""
    m = device.load_module_from_source("adseed1004878d", src)
    k = device.create_compute_kernel(device.link_program([m], [m.entry_point("computeMain")]))
    b = device.create_buffer(element_count=2, struct_size=8, usage=RW)
    k.dispatch(thread_count=[1, 1, 1], vars={"outb": b})
    fwd, bwd = b.to_numpy().view(np.float64)
    assert abs(fwd - bwd) <= 1e-12 and abs(fwd - d[2]) <= 1e-12 and abs(fwd - g[2]) <= 1e-8, (fwd, bwd, d[2], g[2])


def test_seed_1004878_passes_in_float32(device, monkeypatch):
    """The float32 batch check of that function passes (it failed the plain 1e-3/1e-4 fwd-vs-bwd tolerance),
    while the conditioning allowance stays far below a real error where the derivative is well conditioned."""
    from ad_conditioning import cond_ok
    from test_autodiff_property import run_batches

    fn = _seed_fn()
    monkeypatch.setenv("SLANGJIT_CXXFLAGS", "-O0")
    checked, mm, ff = run_batches(device, [[fn]], "adseed1004878")
    assert checked == 1 and not mm and not ff, (mm, ff)
    a_bad = fn.tangents(fn.points[2][0])[1][2]
    a_good = fn.tangents(fn.points[0][0])[1][2]
    assert cond_ok(0.005859375, 0.005229, a_bad)          # the session-8 values: float32 rounding at A ~ 2.2e4
    assert not cond_ok(0.005859375, 0.005229, a_good)     # the same gap where A ~ 11 is a mismatch
    assert not cond_ok(1.0, 1.01, 1.0)
