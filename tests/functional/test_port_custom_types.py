"""Behavioural port of SlangPy's test_custom_types.py: the generator arguments (thread_id, call_id,
WangHashArg / wang_hash, RandFloatArg / rand_float, grid, range) against numpy, SOA dicts of generators for a
struct, and a Python int / float for a struct field of the other type."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, RandFloatArg, WangHashArg, calc_wang_hash_numpy, float3, uint3

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def _ident(device, tname, name):
    return spy.Module.load_from_source(device, name, f"{tname} ident({tname} v) {{ return v; }}").ident


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("dims", [-1, 0, 1, 2, 3])
def test_thread_id(device, dims, signed):
    it = "int" if signed else "uint"
    tname, elems, arg = ({-1: (f"{it}3", 3, -1), 0: (it, 1, 1)}.get(dims) or (f"{it}{dims}", dims, dims))
    f = _ident(device, tname, f"port_ct_tid_{tname}")
    res = NDBuffer(element_count=128, device=device, dtype=f.module.layout.find_type_by_name(tname))
    f(spy.thread_id(arg), _result=res)
    data = res.to_numpy().reshape(-1, elems)
    expect = np.zeros((128, elems))
    expect[:, 0] = np.arange(128)
    np.testing.assert_array_equal(data, expect)


@pytest.mark.parametrize("array", [False, True])
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("dims", [-1, 1, 2, 3])
def test_call_id(device, dims, signed, array):
    it = "int" if signed else "uint"
    n = 3 if dims == -1 else dims
    tname = f"int[{n}]" if array else f"{it}{n}"
    f = _ident(device, tname, f"port_ct_cid_{tname.replace('[', '_').replace(']', '')}")
    res = NDBuffer(shape=(16,) * n, device=device, dtype=f.module.layout.find_type_by_name(tname))
    f(spy.call_id(dims), _result=res)
    data = res.to_numpy().reshape(-1, n)
    expect = np.indices((16,) * n).reshape(n, -1).T
    if not array and n > 1:
        expect = np.flip(expect, axis=1)          # a vector's x is the innermost call index
    np.testing.assert_array_equal(data, expect)


def _expected_hashes(count, k, seed, warmup, hash_seed):
    ids = np.arange(count, dtype=np.uint32) * np.uint32(k)
    seeds = np.full(count, seed, np.uint32)
    if hash_seed:
        seeds = calc_wang_hash_numpy(seeds)
    h = ids
    for _ in range(warmup):
        h = calc_wang_hash_numpy(h)
    out = [calc_wang_hash_numpy(h ^ seeds)]
    for _ in range(k - 1):
        out.append(calc_wang_hash_numpy(out[-1]))
    return np.stack(out, axis=-1)


def test_calc_wang_hash_numpy(device):
    def ref(s):                      # the hash spelled out on Python ints
        s = (s ^ 61) ^ (s >> 16)
        s = (s * 9) & 0xFFFFFFFF
        s ^= s >> 4
        s = (s * 0x27D4EB2D) & 0xFFFFFFFF
        return s ^ (s >> 15)
    xs = [0, 1, 2, 61, 12345, 2640457667, 0xFFFFFFFF]
    np.testing.assert_array_equal(calc_wang_hash_numpy(np.array(xs, np.uint32)), [ref(x) for x in xs])


@pytest.mark.parametrize("seed", [0, 2640457667])
@pytest.mark.parametrize("hash_seed", [False, True])
@pytest.mark.parametrize("warmup", [0, 1, 2])
def test_wang_hash(device, warmup, hash_seed, seed):
    f = _ident(device, "uint3", "port_ct_wh3")
    res = NDBuffer(element_count=16, device=device, dtype=uint3)
    f(WangHashArg(3, seed=seed, warmup=warmup, hash_seed=hash_seed), _result=res)
    np.testing.assert_array_equal(res.to_numpy().reshape(-1, 3), _expected_hashes(16, 3, seed, warmup, hash_seed))


@pytest.mark.parametrize("seed", [0, 2640457667])
@pytest.mark.parametrize("hash_seed", [False, True])
@pytest.mark.parametrize("warmup", [0, 1, 2])
def test_wang_hash_scalar(device, warmup, hash_seed, seed):
    f = _ident(device, "uint", "port_ct_wh1")
    res = NDBuffer(element_count=16, device=device, dtype=f.module.uint)
    f(spy.wang_hash(warmup=warmup, hash_seed=hash_seed, seed=seed), _result=res)
    np.testing.assert_array_equal(res.to_numpy(), _expected_hashes(16, 1, seed, warmup, hash_seed)[:, 0])


def _uniq_fraction(read):
    a, b = read(0), read(1)
    _, counts = np.unique(np.concatenate((a, b)), return_counts=True)
    return 1 - np.sum(counts > 1) / len(a)


def test_wang_seq_seeds(device):
    f = _ident(device, "uint", "port_ct_wh1")

    def reader(n, **kw):
        def read(seed):
            res = NDBuffer(element_count=n, device=device, dtype=f.module.uint)
            f(spy.wang_hash(seed=seed, **kw), _result=res)
            return res.storage.to_numpy().view(np.uint32)[:n]
        return read
    assert _uniq_fraction(reader(16, warmup=0, hash_seed=False)) < 0.01      # sequential seeds: coherent
    assert _uniq_fraction(reader(16, warmup=0, hash_seed=True)) > 0.99999
    assert _uniq_fraction(reader(3840 * 2160, warmup=1, hash_seed=False)) > 0.99999


@pytest.mark.parametrize("seed", [0, 2640457667])
@pytest.mark.parametrize("hash_seed", [False, True])
@pytest.mark.parametrize("warmup", [0, 1, 2])
def test_rand_float(device, warmup, hash_seed, seed):
    f = _ident(device, "float3", "port_ct_rf3")
    res = NDBuffer(element_count=1000, device=device, dtype=float3)
    f(RandFloatArg(1.0, 3.0, 3, warmup=warmup, hash_seed=hash_seed, seed=seed), _result=res)
    u = (_expected_hashes(1000, 3, seed, warmup, hash_seed) & 0x7FFFFF) / float(0x800000)
    np.testing.assert_allclose(res.to_numpy().reshape(-1, 3), 1.0 + 2.0 * u, rtol=1e-6)


def test_rand_float_uniformity(device):
    # SlangPy draws 10^9 values (tolerance 1e-4 per bucket); 2^24 here keeps the CPU run short, with the
    # tolerance scaled to ~10 standard deviations of a bucket's count
    buckets_n = 17
    mod = spy.Module.load_from_source(device, "port_ct_bucket", f"""
void add_to_bucket(int id, RWByteAddressBuffer bucket, float value)
{{
    int idx = int(value * {buckets_n - 1});
    bucket.InterlockedAdd(idx * 4, 1);
}}""")
    buckets = NDBuffer(element_count=buckets_n, device=device, dtype=int)
    count = 1 << 24
    mod.add_to_bucket(spy.grid((count,)), buckets.storage, spy.rand_float())
    res = buckets.to_numpy().view(np.int32)
    per = count / (buckets_n - 1)
    assert res.sum() == count
    assert np.all(np.abs(res[:-1] - per) / per < 10 / np.sqrt(per))
    assert res[-1] == 0                                    # 1.0 never drawn


def test_rand_soa(device):
    f = spy.Module.load_from_source(device, "port_ct_soa", """
struct Particle { float3 pos; float3 vel; };
Particle ident(Particle p) { return p; }""").ident
    res = NDBuffer(element_count=16, device=device, dtype=f.module.layout.find_type_by_name("Particle"))
    f({"pos": RandFloatArg(-100.0, 100.0, 3), "vel": RandFloatArg(0.0, np.pi * 2.0, 3)}, _result=res)
    data = res.to_numpy()
    pos = np.array([d["pos"] for d in data])
    vel = np.array([d["vel"] for d in data])
    assert pos.shape == (16, 3) and vel.shape == (16, 3)
    assert np.all(pos >= -100.0) and np.all(pos <= 100.0) and np.all(vel >= 0) and np.all(vel <= 2 * np.pi)
    assert len(np.unique(pos)) > 40                        # random, not constant


def test_range(device):
    f = _ident(device, "int", "port_ct_range")
    res = f(range(10, 20, 2))
    np.testing.assert_array_equal(res.storage.to_numpy().view(np.int32)[:5], [10, 12, 14, 16, 18])


@pytest.mark.parametrize("ptype,field", [(int, "float"), (float, "int")])
def test_parameter_to_field_conversion(device, ptype, field):
    f = spy.Module.load_from_source(device, f"port_ct_field_{field}", f"""
struct Uniform {{ {field} x; }}
int fieldval(Uniform u) {{ return int(u.x); }}""").fieldval
    assert f({"x": ptype(512)}) == 512
