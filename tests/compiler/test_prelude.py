"""Tests for the C++ prelude (slangjit/compiler/emit/prelude.h) and core.slang.

One C++ program exercising the prelude is generated, compiled once per available compiler
(with -Wall -Werror so the header stays warning-free) and run; it prints `key values...`
lines that the individual tests compare against numpy / plain Python.
"""
from __future__ import annotations

import math
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PRELUDE = ROOT / "slangjit" / "compiler" / "emit" / "prelude.h"
CORE = ROOT / "slangjit" / "compiler" / "core" / "core.slang"

COMPILERS = [c for c in ("g++", "clang++") if shutil.which(c)]
FLAGS = ["-std=c++17", "-O2", "-fwrapv", "-Wall", "-Wno-unused-function", "-Werror", "-pthread"]

RNG = np.random.default_rng(1234)
MA = RNG.uniform(-2, 2, (3, 4)).astype(np.float32)
MB = RNG.uniform(-2, 2, (4, 2)).astype(np.float32)
MV4 = RNG.uniform(-2, 2, 4).astype(np.float32)
MV3 = RNG.uniform(-2, 2, 3).astype(np.float32)
M2 = RNG.uniform(-2, 2, (2, 2)).astype(np.float64)
M3 = RNG.uniform(-2, 2, (3, 3)).astype(np.float64)
M4 = RNG.uniform(-2, 2, (4, 4)).astype(np.float64)

BIT_VALUES_U = [0, 1, 2, 3, 0x80000000, 0xFFFFFFFF, 0x12345678, 0x00F0F000, 0x7FFFFFFF, 0x10]
BIT_VALUES_I = [0, 1, -1, -2, 5, -5, 0x7FFFFFFF, -0x80000000, 0x00100000, -0x00100001]
HALF_IN = [0.1, 0.2, 1.0 / 3.0, 65504.0, 65520.0, 1e-5, 6e-8, -2.5, 1.0009765625, 1.00048828125,
           1.00146484375, 3.14159265]
ATOMIC_THREADS = 8
ATOMIC_ITERS = 10000


def _flist(a) -> str:
    return ", ".join("%.9ef" % float(x) for x in np.asarray(a, np.float32).ravel())


def _dlist(a) -> str:
    return ", ".join(repr(float(x)) for x in np.asarray(a, np.float64).ravel())


CPP = r"""
#include "@PRELUDE@"
#include <cmath>    // NAN, INFINITY (the prelude declares only the C functions it calls)
#include <thread>
#include <vector>
namespace sj { namespace t {   // inside sj so unqualified names find sj:: before ::round etc.

template <class T> static void pf(const T& x) {
    if constexpr (detail::is_fp<T>::value) printf(" %.17g", double(x));
    else if constexpr (std::is_same<T, bool>::value) printf(" %d", int(x));
    else if constexpr (std::is_signed<T>::value) printf(" %lld", (long long)x);
    else printf(" %llu", (unsigned long long)x);
}
template <class T, int N> static void pf(const vec<T, N>& v) { for (int i = 0; i < N; ++i) pf(v[i]); }
template <class T, int R, int C> static void pf(const mat<T, R, C>& m) { for (int i = 0; i < R; ++i) pf(m[i]); }
template <class... A> static void out(const char* key, const A&... a) {
    printf("%s", key);
    int d[] = {0, (pf(a), 0)...};
    (void)d;
    printf("\n");
}
// Opaque values so the compiler cannot constant-fold the interesting paths.
template <class T> static T opaque(T x) {
    __asm__ volatile("" : : "r"(&x) : "memory");
    return x;
}

static void test_vec() {
    vec<float, 3> a{{1.0f, 2.0f, 3.0f}}, b{{4.0f, -5.0f, 6.5f}};
    a = opaque(a);
    out("vadd", a + b);
    out("vsub", a - b);
    out("vmul", a * b);
    out("vdiv", a / b);
    out("vmod", b % a);                 // fmod, sign of dividend
    out("vneg", -a);
    out("vscal", a * 2.0f, 10.0f - a, 1.0f / a);
    out("vcmp", a < b, a == a, a != b, a >= 2.0f, 2.0f < a);
    out("vlogic", (a < b) && (a > 1.5f), (a < b) || (a > 2.5f), !(a < b));
    vec<float, 3> c = a;
    c += b; c *= 2.0f; c -= vec<float, 3>{{1, 1, 1}}; c /= 2.0f;
    out("vcompound", c);
    vec<int, 4> i4{{7, -7, 100, -2147483647 - 1}}, j4{{2, 2, 0, -1}};
    i4 = opaque(i4);
    out("vidiv", i4 / j4, i4 % j4);
    out("vibit", i4 & 6, i4 | 1, i4 ^ j4, ~i4);
    out("vishift", i4 << 33, i4 >> vec<int, 4>{{1, 33, 2, 31}});
    vec<int, 2> k{{1, 5}};
    vec<int, 2> kpost = k++;
    ++k;
    --k;
    out("vincdec", kpost, k);
    out("vcat", vcat<float, 4>(1.0f, vec<float, 2>{{2.0f, 3.0f}}, 4.0f), vcat<int, 3>(vec<int, 3>{{7, 8, 9}}),
        vsplat<double, 2>(2.5));
    out("vidx", a[0], a[2u], a[(int64_t)1]);
}

static void test_swizzle() {
    vec<float, 4> v{{1.0f, 2.0f, 3.0f, 4.0f}};
    v = opaque(v);
    out("swz", swizzle<2, 1, 0>(v), swizzle<0, 0, 0>(2.0f), swizzle<3>(v), swizzle<3, 3>(v));
    swizzle_ref<0, 2>(v) += vec<float, 2>{{10.0f, 20.0f}};
    out("swzref1", v);
    swizzle_ref<1, 0>(v) = swizzle<0, 1>(v);   // swap x and y
    out("swzref2", v);
    swizzle_ref<1>(v) *= 3.0f;
    swizzle_ref<3, 2>(v) -= vec<float, 2>{{1.0f, 2.0f}};
    out("swzref3", v);
    vec<float, 2> r = swizzle_ref<3, 0>(v);
    out("swzref4", r);
    vec<int, 3> iv{{1, 2, 3}};
    swizzle_ref<2, 0>(iv) <<= vec<int, 2>{{1, 2}};
    swizzle_ref<0, 1>(iv) %= vec<int, 2>{{3, 0}};
    out("swzref5", iv);
    float s = 5.0f;
    swizzle_ref<0>(s) += 1.0f;
    out("swzref6", s);
}

static void test_mat() {
    mat<float, 3, 4> A = mcat<float, 3, 4>(@MA@);
    mat<float, 4, 2> B = mcat<float, 4, 2>(@MB@);
    vec<float, 4> v4{{@MV4@}};
    vec<float, 3> v3{{@MV3@}};
    out("mm", mul(A, B));
    out("mv", mul(A, v4));
    out("vm", mul(v3, A));
    out("vv", mul(v4, v4));
    out("ms", mul(2.0f, A), mul(A, 0.5f));
    out("mt", transpose(A));
    mat<double, 2, 2> M2 = mcat<double, 2, 2>(@M2@);
    mat<double, 3, 3> M3 = mcat<double, 3, 3>(@M3@);
    mat<double, 4, 4> M4 = mcat<double, 4, 4>(@M4@);
    out("det", determinant(M2), determinant(M3), determinant(M4));
    mat<float, 2, 3> R = mcat<float, 2, 3>(vec<float, 3>{{1, 2, 3}}, vec<float, 3>{{4, 5, 6}});
    mat<float, 2, 3> R2 = mat<float, 2, 3>{{vec<float, 3>{{1, 1, 1}}, vec<float, 3>{{2, 2, 2}}}};
    R2 += R;
    R2 *= 2.0f;
    out("mops", R + R, R * R, -R, R - 1.0f, R2, msplat<float, 2, 3>(7.0f));
    R[1][2] = 60.0f;
    R[0] = vec<float, 3>{{9, 8, 7}};
    out("mindex", R, R[1]);
    out("mconv", convert<mat<int, 2, 2>>(R), convert<mat<double, 2, 3>>(R));
    out("msin", sin(R));
}

static void test_convert() {
    vec<float, 4> f{{1.7f, -2.5f, 3.2f, -0.4f}};
    out("conv", convert<vec<int, 4>>(f), convert<vec<int, 2>>(f), convert<int>(f), convert<vec<float, 3>>(2),
        convert<uint8_t>(300), convert<bool>(0.5f), convert<half>(1.5), convert<float>(half(2.25f)),
        convert<vec<float, 4>>(f));
}

static void test_intsafety() {
    int32_t imin = opaque<int32_t>(-2147483647 - 1), zero = opaque(0), m1 = opaque(-1);
    out("div32", sj::div(7, zero), sj::mod(7, zero), sj::div(imin, m1), sj::mod(imin, m1), sj::div(-7, opaque(2)),
        sj::mod(-7, opaque(2)));
    out("divu32", sj::div(7u, opaque(0u)), sj::mod(7u, opaque(0u)), sj::div(0xFFFFFFFFu, opaque(2u)));
    int64_t lmin = opaque<int64_t>(INT64_MIN);
    out("div64", sj::div(lmin, int64_t(m1)), sj::mod(lmin, int64_t(m1)), sj::div(int64_t(5), int64_t(zero)));
    int8_t cmin = opaque<int8_t>(-128);
    out("div8", sj::div(cmin, int8_t(-1)), sj::mod(cmin, int8_t(-1)), sj::div(int8_t(9), int8_t(0)));
    out("divvec", sj::div(vec<int, 3>{{6, 6, imin}}, vec<int, 3>{{zero, 4, m1}}),
        sj::mod(vec<uint32_t, 2>{{6u, 7u}}, 0u), sj::div(12, vec<int, 2>{{0, 5}}));
    out("shift", sj::shl(1, opaque(33)), sj::shr(-16, opaque(34)), sj::shl(uint8_t(1), 9), sj::shl(int64_t(1), 65),
        sj::shr(0x80000000u, 63), sj::shl(-1, 31), sj::shr(int8_t(-128), 7), sj::shl(1, -1));
    out("shiftvec", sj::shl(vec<uint32_t, 2>{{1u, 3u}}, vec<int, 2>{{32, 4}}), sj::shr(vec<int, 2>{{-64, 64}}, 3u));
}

static void test_buffers() {
    float storage[6] = {-1.0f, 1.0f, 2.0f, 3.0f, 4.0f, -1.0f};   // guards at both ends
    RWStructuredBuffer<float> buf{storage + 1, 4};
    out("sbin", buf[0], buf[3u], buf[int64_t(2)]);
    out("sboob", buf[4], buf[-1], buf[100u], buf[uint64_t(1) << 40]);
    buf[4] = 99.0f;
    buf[-1] = 99.0f;
    buf[4u] += 5.0f;
    out("sboobafter", buf[4], buf[-1], storage[0], storage[5]);
    uint32_t n = 0, stride = 0;
    buf.GetDimensions(n, stride);
    out("sbdims", n, stride, buf.getCount(), sizeof(buf));
    StructuredBuffer<vec<float, 3>> vb{nullptr, 0};
    out("sbnull", vb[0], vb.Load(5));

    uint32_t words[6] = {0xDEADBEEFu, 1u, 2u, 3u, 4u, 0xDEADBEEFu};
    RWByteAddressBuffer bab{reinterpret_cast<uint8_t*>(words + 1), 16};
    out("bab", bab.Load(0), bab.Load(12), bab.Load2(4), bab.Load3(4), bab.Load4(0), bab.LoadT<float>(0) == asfloat(1u));
    out("baboob", bab.Load(13), bab.Load(16), bab.Load(~uint64_t(0)), bab.Load(uint64_t(-4)), bab.Load4(4));
    bab.Store(16, 7u);
    bab.Store(uint64_t(-2), 7u);
    bab.Store4(4, vec<uint32_t, 4>{{9, 9, 9, 9}});
    bab.Store(8, 20u);
    bab.StoreT<uint16_t>(14, uint16_t(0xABCD));
    out("babstore", words[0], words[1], words[2], words[3], words[4], words[5]);
    uint32_t orig = 123, dims = 0;
    bab.InterlockedAdd(0, 5u, orig);
    out("babatom1", orig, bab.Load(0));
    bab.InterlockedAdd(16, 5u, orig);
    out("babatom2", orig, words[5]);
    bab.InterlockedMax(4, -1, orig);                 // signed compare: keeps 2
    int iorig = 0;
    bab.InterlockedMax(4, 100u, iorig);              // unsigned
    bab.InterlockedCompareExchange(8, 20u, 21u, orig);
    bab.InterlockedExchange(12, 0xFFu, orig);
    bab.GetDimensions(dims);
    out("babatom3", iorig, words[2], words[3], orig, words[4], dims);
    float fw[2] = {1.5f, 0.0f};
    RWByteAddressBuffer fb{reinterpret_cast<uint8_t*>(fw), 8};
    float forig = 0;
    fb.InterlockedAddF32(0, 2.25f, forig);
    fb.InterlockedAddF32(8, 2.25f, forig);
    out("babf32", fw[0], forig);
    uint64_t qw[2] = {1, 2};
    RWByteAddressBuffer qb{reinterpret_cast<uint8_t*>(qw), 16};
    uint64_t qorig = 0;
    qb.InterlockedAdd64(8, uint64_t(1) << 40, qorig);
    out("bab64", qw[1], qorig);
}

static void test_atomics() {
    Atomic<float> af{0.0f};
    Atomic<int32_t> ai{0};
    Atomic<double> ad{0.0};
    half hs[4] = {half(0.0f), half(0.0f), half(0.0f), half(0.0f)};
    Atomic<half> ah{half(0.0f)};
    std::vector<std::thread> ts;
    for (int t = 0; t < @THREADS@; ++t)
        ts.emplace_back([&, t] {
            for (int i = 0; i < @ITERS@; ++i) {
                af.add(float(i % 7 + t));
                ai.add(1);
                ad.add(0.5);
                if (i < 250) {
                    InterlockedAdd(hs[1], half(1.0f));     // 2-byte aligned, shares a word with hs[0]
                    InterlockedAdd(hs[0], half(2.0f));
                    ah.add(half(1.0f));
                }
            }
        });
    for (auto& th : ts) th.join();
    out("atomthreads", af.load(), ai.load(), ad.load(), hs[0], hs[1], hs[2], ah.load());

    uint32_t raw[3] = {5u, 10u, 15u};
    RWStructuredBuffer<Atomic<uint32_t>> ab{reinterpret_cast<Atomic<uint32_t>*>(raw), 3};
    uint32_t o1 = ab[0].add(3u), o2 = ab[1].max(7u), o3 = ab[2].compareExchange(15u, 1u), o4 = ab[2].compareExchange(15u, 9u);
    uint32_t o5 = ab[1].exchange(42u), o6 = ab[0].increment(), o7 = ab[0].and_(6u), o8 = ab[0].or_(0x100u),
             o9 = ab[0].xor_(1u);
    ab[5].add(1u);   // OOB: discarded
    out("atommethods", raw[0], raw[1], raw[2], o1, o2, o3, o4, o5, o6, o7, o8, o9);

    int32_t x = 10, ox = 0;
    InterlockedAdd(x, 5);
    InterlockedMin(x, 3, ox);
    int32_t omax = 0;
    InterlockedMax(x, -4, omax);
    int32_t oc1 = 0, oc2 = 0;
    InterlockedCompareExchange(x, 3, 8, oc1);
    InterlockedCompareExchange(x, 3, 9, oc2);
    InterlockedCompareStore(x, 8, 11);
    int32_t oex = 0;
    InterlockedExchange(x, 20, oex);
    uint32_t u = 0xF0u, ou = 0;
    InterlockedAnd(u, 0x3Cu);
    InterlockedOr(u, 0x01u, ou);
    InterlockedXor(u, 0xFFu);
    out("interlocked", x, ox, omax, oc1, oc2, oex, u, ou);
    float fx = 1.0f, fo = 0.0f;
    InterlockedAdd(fx, 0.5f, fo);
    InterlockedMax(fx, 4.0f);
    InterlockedMin(fx, -2.0f);
    float fe = 0.0f;
    InterlockedExchange(fx, 7.0f, fe);
    float fc = 0.0f;
    InterlockedCompareExchange(fx, 7.0f, 8.0f, fc);
    out("interlockedf", fx, fo, fe, fc);
    half hv[3] = {half(1.0f), half(2.0f), half(3.0f)};
    half ho = half(0.0f), hc = half(0.0f);
    InterlockedAdd(hv[1], half(0.5f), ho);
    InterlockedAdd(hv[2], half(-1.0f));
    InterlockedCompareExchange(hv[0], half(1.0f), half(6.0f), hc);
    InterlockedMax(hv[2], half(10.0f));
    out("interlockedh", hv[0], hv[1], hv[2], ho, hc);
    uint64_t big = 1, bo = 0;
    InterlockedAdd(big, uint64_t(1) << 40, bo);
    out("interlocked64", big, bo);
}

static void test_bits() {
    const uint32_t U[] = {@BITU@};
    const int32_t I[] = {@BITI@};
    printf("bitsu");
    for (uint32_t x : U) pf(countbits(opaque(x))), pf(firstbithigh(opaque(x))), pf(firstbitlow(opaque(x))), pf(reversebits(opaque(x)));
    printf("\nbitsi");
    for (int32_t x : I) pf(countbits(opaque(x))), pf(firstbithigh(opaque(x))), pf(firstbitlow(opaque(x))), pf(reversebits(opaque(x)));
    printf("\n");
    out("bitsvec", countbits(vec<uint32_t, 2>{{7u, 0u}}), firstbithigh(vec<int, 2>{{-1, 8}}),
        firstbithigh(uint64_t(1) << 40), countbits(int64_t(-1)), reversebits(uint8_t(1)), reversebits(uint16_t(3)),
        reversebits(uint64_t(1)), reversebits(int16_t(1)), firstbithigh(int8_t(-1)), firstbitlow(uint16_t(0x100)));
    out("cast", asuint(1.0f), asint(-2.0f), asfloat(0x40490fdbu), asfloat(int32_t(0x3f800000)),
        asuint(vec<float, 2>{{0.5f, -0.0f}}), bit_cast<uint64_t>(1.0));
    uint32_t lo = 0, hi = 0;
    asuint(3.141592653589793, lo, hi);
    out("castd", lo, hi, asdouble(lo, hi), asuint16(half(1.0f)), asfloat16(uint16_t(0x3C00)), asint16(half(-2.0f)));
}

static void test_half() {
    const float H[] = {@HALF@};
    printf("halfbits");
    for (float x : H) pf(f32tof16(opaque(x)));
    printf("\nhalfback");
    for (float x : H) pf(f16tof32(f32tof16(opaque(x))));
    printf("\n");
    half a = opaque(half(0.1f)), b = opaque(half(0.2f));
    out("halfarith", half(a + b), half(a * b), half(a / b), sqrt(half(2.0f)), sin(half(1.0f)),
        vec<half, 2>{{a, b}} * half(3.0f));
}

static void test_math() {
    float nan = opaque(NAN), inf = opaque(INFINITY);
    out("sign", sign(-2.5f), sign(0.0f), sign(3.0f), sign(-0.0f), sign(nan), sign(-7), sign(0u), sign(9ll),
        sign(vec<double, 3>{{-1.0, 0.0, 2.0}}), sign(half(-3.0f)));
    out("smooth", smoothstep(0.0f, 1.0f, 0.25f), smoothstep(1.0, 3.0, 2.5), smoothstep(0.0f, 1.0f, -1.0f),
        smoothstep(0.0f, 1.0f, 2.0f), smoothstep(vsplat<float, 2>(0.0f), vsplat<float, 2>(2.0f), vec<float, 2>{{0.5f, 1.5f}}));
    out("round", round(2.5f), round(-2.5f), round(0.49999997f), round(1.5), trunc(-1.7f), floor(-1.5f), ceil(-1.5f),
        frac(-1.25f), frac(2.75), fmod(-7.0f, 3.0f));
    out("basic", saturate(-0.5f), saturate(1.5f), saturate(0.3f), lerp(2.0f, 4.0f, 0.25f), step(1.0f, 0.5f),
        step(1.0f, 1.0f), clamp(5, 0, 3), clamp(-5.0f, -1.0f, 1.0f), clamp(7u, 1u, 5u), rsqrt(4.0f), rcp(8.0),
        mad(2, 3, 4), mad(1.5f, 2.0f, 0.25f), fma(2.0, 3.0, 1.0));
    out("minmax", min(nan, 1.0f), min(1.0f, nan), max(nan, 2.0f), min(-3, 2), max(0xFFFFFFFFu, 1u), min(int64_t(-5), int64_t(4)),
        max(vec<float, 2>{{1, 5}}, vec<float, 2>{{3, 2}}), abs(-2147483647 - 1), abs(-3), abs(-2.5f),
        abs(vec<int, 2>{{-1, 2}}));
    out("class", isnan(nan), isnan(1.0f), isinf(inf), isinf(-inf), isinf(nan), isfinite(inf), isfinite(1.0),
        isnan(vec<float, 2>{{nan, 0.0f}}), isinf(half(inf)));
    out("trans", sin(1.0f), cos(1.0), tan(0.5f), asin(0.5f), acos(0.5), atan(2.0f), atan2(1.0f, -1.0f), sinh(1.0f),
        cosh(1.0f), tanh(0.5f), asinh(1.0f), acosh(2.0f), atanh(0.5f), exp(1.0f), exp2(10.0f), log(10.0f),
        log2(1024.0f), log10(1000.0f), pow(2.0f, 0.5f), sqrt(2.0), degrees(3.14159265358979), radians(180.0f),
        ldexp(3.0f, 4.0f), ldexp(3.0, 2), copysign(2.0f, -0.0f), fmin(1.0f, 2.0f), fmax(1.0f, 2.0f));
    float fs = 0, fc = 0, fi = 0, fe = 0;
    sincos(0.5f, fs, fc);
    float fr = modf(-3.75f, fi);
    float fm = frexp(80.0f, fe);
    vec<float, 2> ve;
    vec<float, 2> vm = frexp(vec<float, 2>{{8.0f, 0.75f}}, ve);
    out("outparams", fs, fc, fr, fi, fm, fe, vm, ve);
    vec<float, 3> a{{1.0f, 2.0f, 2.0f}}, b{{0.0f, 1.0f, 0.0f}};
    out("geom", dot(a, b), cross(a, b), length(a), normalize(a), distance(a, b), reflect(a, b),
        refract(vec<float, 3>{{0.6f, -0.8f, 0.0f}}, b, 0.9f), refract(vec<float, 3>{{0.99f, -0.141f, 0.0f}}, b, 1.5f),
        faceforward(b, a, b), dot(vec<int, 3>{{1, 2, 3}}, vec<int, 3>{{4, 5, 6}}), length(-3.0f));
    out("anyall", any(vec<bool, 3>{{false, true, false}}), all(vec<bool, 3>{{false, true, true}}), any(vec<float, 2>{{0, 0}}),
        all(vec<int, 2>{{1, 2}}), any(0.0f), all(3), select(true, 1, 2), select(vec<bool, 2>{{true, false}}, vec<float, 2>{{1, 2}},
        vec<float, 2>{{3, 4}}), select(vec<bool, 2>{{false, true}}, 5, 6), and_(vec<bool, 2>{{true, true}}, vec<bool, 2>{{true, false}}));
}

static void test_misc() {
    array<int, 3> arr{{1, 2, 3}};
    array<int, 3> arr2 = arr;
    arr2[1] = 20;
    arr = arr2;
    array<vec<float, 2>, 2> av{{vec<float, 2>{{1, 2}}, vec<float, 2>{{3, 4}}}};
    out("array", arr[0], arr[1], arr[2u], av[1], arr.getCount());
    out("wave", WaveGetLaneIndex(), WaveGetLaneCount(), WaveIsFirstLane(), WaveActiveSum(5), WaveActiveProduct(3.0f),
        WaveActiveMin(vec<int, 2>{{1, 2}}), WavePrefixSum(7), WavePrefixSum(vec<float, 2>{{1, 2}}), WavePrefixProduct(7.0),
        WaveActiveAllTrue(true), WaveActiveAnyTrue(false), WaveActiveCountBits(true), WaveReadLaneFirst(9),
        WaveReadLaneAt(4u, 0), WaveActiveAllEqual(1.0f), WaveActiveBallot(true), WaveActiveBitOr(6u));
    AllMemoryBarrier();
    GroupMemoryBarrierWithGroupSync();
    DeviceMemoryBarrier();
    static_assert(std::is_trivially_copyable<vec<float, 3>>::value && std::is_standard_layout<mat<float, 3, 3>>::value, "");
    static_assert(sizeof(Atomic<float>) == 4 && sizeof(Atomic<uint64_t>) == 8, "");
    static_assert(std::is_same<decltype(swizzle<0>(vec<int, 2>{{1, 2}})), int>::value, "");
    out("sizes", sizeof(vec<half, 3>), sizeof(mat<double, 2, 3>), sizeof(array<vec<float, 3>, 2>), sizeof(RWStructuredBuffer<Atomic<half>>));
}

}}  // namespace sj::t

int main() {
    using namespace sj::t;
    test_vec();
    test_swizzle();
    test_mat();
    test_convert();
    test_intsafety();
    test_buffers();
    test_atomics();
    test_bits();
    test_half();
    test_math();
    test_misc();
    printf("done\n");
    return 0;
}
"""


def _source() -> str:
    repl = {
        "@PRELUDE@": str(PRELUDE),
        "@MA@": _flist(MA), "@MB@": _flist(MB), "@MV4@": _flist(MV4), "@MV3@": _flist(MV3),
        "@M2@": _dlist(M2), "@M3@": _dlist(M3), "@M4@": _dlist(M4),
        "@BITU@": ", ".join("0x%Xu" % v for v in BIT_VALUES_U),
        "@BITI@": ", ".join("int32_t(%d)" % v if v != -0x80000000 else "int32_t(-2147483647 - 1)" for v in BIT_VALUES_I),
        "@HALF@": ", ".join("%.9ef" % v for v in HALF_IN),
        "@THREADS@": str(ATOMIC_THREADS), "@ITERS@": str(ATOMIC_ITERS),
    }
    s = CPP
    for k, v in repl.items():
        s = s.replace(k, v)
    return s


def _compile_and_run(compiler: str, tmp: Path, extra: list[str]) -> dict[str, list[float]]:
    src = tmp / "prelude_test.cpp"
    exe = tmp / ("prelude_test_" + compiler.replace("+", "p"))
    src.write_text(_source())
    r = subprocess.run([compiler, *FLAGS, *extra, str(src), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, f"{compiler} failed:\n{r.stderr[:20000]}"
    assert r.stderr.strip() == "", f"{compiler} warnings:\n{r.stderr[:20000]}"
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "done"
    res: dict[str, list[float]] = {}
    for line in lines[:-1]:
        key, *vals = line.split()
        res[key] = [float(v) for v in vals]
    return res


# Each compiler in three configurations: defaults (native _Float16 where the compiler has
# it, 16-bit CAS for half atomics), half atomics through the containing 32-bit word (the
# CUDA flavour's path), and the software half used by compilers without _Float16.
VARIANTS = {"default": [], "word": ["-DSJ_HALF_CAS_VIA_WORD=1"], "softhalf": ["-DSJ_SOFT_HALF"]}


@pytest.fixture(scope="module", params=[(c, v) for c in COMPILERS for v in VARIANTS] or [None],
                ids=lambda p: "-".join(p) if p else "none")
def R(request, tmp_path_factory):
    if request.param is None:
        pytest.skip("no C++ compiler found")
    compiler, variant = request.param
    return _compile_and_run(compiler, tmp_path_factory.mktemp("prelude"), VARIANTS[variant])


def close(got, want, rtol=1e-6, atol=1e-6):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64).ravel()
    assert got.shape == want.shape, (got, want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# ----------------------------------------------------------------------------- vectors

def test_vector_ops(R):
    a = np.array([1, 2, 3], np.float32)
    b = np.array([4, -5, 6.5], np.float32)
    close(R["vadd"], a + b)
    close(R["vsub"], a - b)
    close(R["vmul"], a * b)
    close(R["vdiv"], a / b)
    close(R["vmod"], np.fmod(b, a))
    close(R["vneg"], -a)
    close(R["vscal"], np.concatenate([a * 2, 10 - a, 1 / a]))
    close(R["vcmp"], np.concatenate([a < b, a == a, a != b, a >= 2, 2 < a]))
    close(R["vlogic"], np.concatenate([(a < b) & (a > 1.5), (a < b) | (a > 2.5), ~(a < b)]))
    close(R["vcompound"], ((a + b) * 2 - 1) / 2)
    close(R["vidiv"], [3, -3, -1, -2**31, 1, -1, 100, 0])
    i4 = np.array([7, -7, 100, -2**31], np.int64)
    j4 = np.array([2, 2, 0, -1], np.int64)
    wrap = lambda x: ((np.asarray(x) + 2**31) % 2**32) - 2**31
    close(R["vibit"], np.concatenate([i4 & 6, i4 | 1, i4 ^ j4, ~i4]))
    close(R["vishift"], np.concatenate([wrap(i4 << 1), i4 >> np.array([1, 1, 2, 31])]))
    close(R["vincdec"], [1, 5, 2, 6])
    close(R["vcat"], [1, 2, 3, 4, 7, 8, 9, 2.5, 2.5])
    close(R["vidx"], [1, 3, 2])


def test_swizzle(R):
    close(R["swz"], [3, 2, 1, 2, 2, 2, 4, 4, 4])
    close(R["swzref1"], [11, 2, 23, 4])
    close(R["swzref2"], [2, 11, 23, 4])
    close(R["swzref3"], [2, 33, 21, 3])
    close(R["swzref4"], [3, 2])
    close(R["swzref5"], [1, 2, 6])
    close(R["swzref6"], [6])


# ----------------------------------------------------------------------------- matrices

def test_matrix(R):
    A, B = MA.astype(np.float64), MB.astype(np.float64)
    close(R["mm"], A @ B, rtol=1e-5, atol=1e-5)
    close(R["mv"], A @ MV4, rtol=1e-5, atol=1e-5)
    close(R["vm"], MV3 @ A, rtol=1e-5, atol=1e-5)
    close(R["vv"], MV4 @ MV4, rtol=1e-5)
    close(R["ms"], np.concatenate([(2 * A).ravel(), (A * 0.5).ravel()]))
    close(R["mt"], A.T)
    close(R["det"], [np.linalg.det(M2), np.linalg.det(M3), np.linalg.det(M4)], rtol=1e-10, atol=1e-12)
    Rm = np.array([[1, 2, 3], [4, 5, 6]], np.float64)
    R2 = (np.array([[1] * 3, [2] * 3]) + Rm) * 2
    close(R["mops"], np.concatenate([(Rm + Rm).ravel(), (Rm * Rm).ravel(), (-Rm).ravel(), (Rm - 1).ravel(),
                                     R2.ravel(), [7] * 6]))
    Rm[1, 2] = 60
    Rm[0] = [9, 8, 7]
    close(R["mindex"], np.concatenate([Rm.ravel(), Rm[1]]))
    close(R["mconv"], np.concatenate([Rm[:2, :2].ravel(), Rm.ravel()]))
    close(R["msin"], np.sin(Rm.astype(np.float32)).ravel(), rtol=1e-6)


def test_convert(R):
    close(R["conv"], [1, -2, 3, 0, 1, -2, 1, 2, 2, 2, 44, 1, 1.5, 2.25, 1.7, -2.5, 3.2, -0.4], rtol=1e-6)


# ----------------------------------------------------------------------------- integer safety

def test_div_mod_safety(R):
    close(R["div32"], [-1, 7, -2**31, 0, -3, -1])
    close(R["divu32"], [0xFFFFFFFF, 7, 0x7FFFFFFF])
    assert R["div64"][0] == float(-2**63) and R["div64"][1:] == [0, -1]
    close(R["div8"], [-128, 0, -1])
    close(R["divvec"], [-1, 1, -2**31, 6, 7, -1, 2])


def test_shift_masking(R):
    close(R["shift"], [2, -4, 2, 2, 1, -2**31, -1, -2**31])
    close(R["shiftvec"], [1, 48, -8, 8])


# ----------------------------------------------------------------------------- buffers

def test_structured_buffer_oob(R):
    close(R["sbin"], [1, 4, 3])
    close(R["sboob"], [0, 0, 0, 0])
    close(R["sboobafter"], [0, 0, -1, -1])
    close(R["sbdims"], [4, 4, 4, 16])
    close(R["sbnull"], [0] * 6)


def test_byte_address_buffer(R):
    close(R["bab"], [1, 4, 2, 3, 2, 3, 4, 1, 2, 3, 4, 1])
    close(R["baboob"], [0, 0, 0, 0, 0, 0, 0, 0])
    # Store4(4) is out of range (4 + 16 > 16) and must be discarded; 0xABCD lands in the
    # upper half of word 3 (offset 14).
    close(R["babstore"], [0xDEADBEEF, 1, 2, 20, 0xABCD0004, 0xDEADBEEF], rtol=0, atol=0)
    close(R["babatom1"], [1, 6])
    close(R["babatom2"], [0, 0xDEADBEEF])
    close(R["babatom3"], [2, 100, 21, 0xABCD0004, 0xFF, 16], rtol=0, atol=0)
    close(R["babf32"], [3.75, 0.0])
    close(R["bab64"], [2 + 2**40, 2])


# ----------------------------------------------------------------------------- atomics

def test_atomic_threads(R):
    fsum = sum(i % 7 + t for t in range(ATOMIC_THREADS) for i in range(ATOMIC_ITERS))
    assert fsum < 2**24
    got = R["atomthreads"]
    assert got[0] == fsum
    assert got[1] == ATOMIC_THREADS * ATOMIC_ITERS
    assert got[2] == ATOMIC_THREADS * ATOMIC_ITERS * 0.5
    assert got[3:] == [2 * 250 * ATOMIC_THREADS, 250 * ATOMIC_THREADS, 0, 250 * ATOMIC_THREADS]


def test_atomic_methods(R):
    # raw0: 5+3=8, inc 9, &6 -> 0, |0x100 -> 0x100, ^1 -> 0x101
    close(R["atommethods"], [0x101, 42, 1, 5, 10, 15, 1, 10, 8, 9, 0, 0x100])


def test_interlocked(R):
    close(R["interlocked"], [20, 15, 3, 3, 8, 11, (0x30 | 1) ^ 0xFF, 0x30])
    close(R["interlockedf"], [8, 1, -2, 7])
    close(R["interlockedh"], [6, 2.5, 10, 2, 1])
    close(R["interlocked64"], [1 + 2**40, 1])


# ----------------------------------------------------------------------------- bits

def _fbh_u(x):
    return x.bit_length() - 1 if x else 0xFFFFFFFF


def _fbh_i(x):
    if x < 0:
        x = ~x
    return x.bit_length() - 1 if x else -1


def _fbl(x, neg):
    x &= 0xFFFFFFFF
    if x == 0:
        return -1 if neg else 0xFFFFFFFF
    return (x & -x).bit_length() - 1


def _rev(x):
    return int("{:032b}".format(x & 0xFFFFFFFF)[::-1], 2)


def test_bit_ops(R):
    want = []
    for x in BIT_VALUES_U:
        want += [bin(x).count("1"), _fbh_u(x), _fbl(x, False), _rev(x)]
    close(R["bitsu"], want, rtol=0, atol=0)
    want = []
    tos = lambda v: v - 2**32 if v >= 2**31 else v
    for x in BIT_VALUES_I:
        want += [bin(x & 0xFFFFFFFF).count("1"), _fbh_i(x), _fbl(x, True), tos(_rev(x))]
    close(R["bitsi"], want, rtol=0, atol=0)
    close(R["bitsvec"], [3, 0, -1, 3, 40, 64, 0x80, 0xC000, 2**63, -2**15, -1, 8], rtol=0, atol=0)


def test_bit_casts(R):
    f2u = lambda f: struct.unpack("<I", struct.pack("<f", f))[0]
    close(R["cast"], [f2u(1.0), struct.unpack("<i", struct.pack("<f", -2.0))[0],
                      struct.unpack("<f", struct.pack("<I", 0x40490FDB))[0], 1.0, f2u(0.5), 0x80000000,
                      struct.unpack("<Q", struct.pack("<d", 1.0))[0]], rtol=0, atol=0)
    lo, hi = struct.unpack("<II", struct.pack("<d", 3.141592653589793))
    close(R["castd"], [lo, hi, 3.141592653589793, 0x3C00, 1.0, np.float16(-2.0).view(np.int16)], rtol=0, atol=0)


# ----------------------------------------------------------------------------- half

@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_half_rounding(R):
    want = [int(np.float32(v).astype(np.float16).view(np.uint16)) for v in HALF_IN]
    close(R["halfbits"], want, rtol=0, atol=0)
    close(R["halfback"], [float(np.float32(v).astype(np.float16)) for v in HALF_IN], rtol=0, atol=0)
    h = np.float16
    a, b = h(np.float32(0.1)), h(np.float32(0.2))
    want = [h(np.float32(a) + np.float32(b)), h(np.float32(a) * np.float32(b)), h(np.float32(a) / np.float32(b)),
            h(np.sqrt(np.float32(2))), h(np.sin(np.float32(1))), h(np.float32(a) * 3), h(np.float32(b) * 3)]
    close(R["halfarith"], [float(x) for x in want], rtol=0, atol=0)


# ----------------------------------------------------------------------------- math

def test_sign_and_steps(R):
    close(R["sign"], [-1, 0, 1, 0, 0, -1, 0, 1, -1, 0, 1, -1], atol=0)
    ss = lambda e0, e1, x: (lambda t: t * t * (3 - 2 * t))(min(max((x - e0) / (e1 - e0), 0.0), 1.0))
    close(R["smooth"], [ss(0, 1, 0.25), ss(1, 3, 2.5), 0, 1, ss(0, 2, 0.5), ss(0, 2, 1.5)])
    close(R["round"], [3, -3, 0, 2, -1, -2, -1, 0.75, 0.75, -1])
    close(R["basic"], [0, 1, 0.3, 2.5, 0, 1, 3, -1, 5, 0.5, 0.125, 10, 3.25, 7])
    close(R["minmax"], [1, 1, 2, -3, 0xFFFFFFFF, -5, 3, 5, -2**31, 3, 2.5, 1, 2])
    close(R["class"], [1, 0, 1, 1, 0, 0, 1, 1, 0, 1])


def test_transcendentals(R):
    want = [math.sin(1), math.cos(1.0), math.tan(0.5), math.asin(0.5), math.acos(0.5), math.atan(2), math.atan2(1, -1),
            math.sinh(1), math.cosh(1), math.tanh(0.5), math.asinh(1), math.acosh(2), math.atanh(0.5), math.e, 1024,
            math.log(10), 10, 3, math.sqrt(2), math.sqrt(2), 180.0, math.pi, 48, 12, -2, 1, 2]
    close(R["trans"], want, rtol=1e-6)
    close(R["outparams"], [math.sin(0.5), math.cos(0.5), -0.75, -3, 0.625, 7, 0.5, 0.75, 4, 0], rtol=1e-6)


def test_geometry(R):
    a = np.array([1, 2, 2.0])
    b = np.array([0, 1, 0.0])

    def refract(i, n, eta):
        d = n @ i
        k = 1 - eta * eta * (1 - d * d)
        return np.zeros(3) if k < 0 else eta * i - (eta * d + np.sqrt(k)) * n

    want = np.concatenate([[a @ b], np.cross(a, b), [3], a / 3, [np.linalg.norm(a - b)], a - 2 * (a @ b) * b,
                           refract(np.array([0.6, -0.8, 0]), b, 0.9), refract(np.array([0.99, -0.141, 0]), b, 1.5),
                           -b, [32, 3]])
    close(R["geom"], want, rtol=1e-6, atol=1e-6)
    close(R["anyall"], [1, 0, 0, 1, 0, 1, 1, 1, 4, 6, 5, 1, 0])


def test_misc(R):
    close(R["array"], [1, 20, 3, 3, 4, 3])
    close(R["wave"], [0, 1, 1, 5, 3, 1, 2, 0, 0, 0, 1, 1, 0, 1, 9, 4, 1, 1, 0, 0, 0, 6])
    close(R["sizes"], [6, 48, 24, 16])


# ----------------------------------------------------------------------------- core.slang

def test_core_slang_exists():
    text = CORE.read_text()
    for name in ["sin", "mul", "transpose", "countbits", "asfloat", "InterlockedAdd", "WaveActiveSum", "getPi"]:
        assert f" {name}" in text or f"\n{name}" in text, name


def test_core_slang_parses():
    try:
        from slangjit.compiler.parse.parser import parse_module  # type: ignore
    except Exception as e:  # being written concurrently
        pytest.skip(f"parser not importable: {e}")
    mod = parse_module(CORE.read_text(), str(CORE))
    assert len(mod.decls) > 100


# ----------------------------------------------------------------------------- core.slang <-> prelude contract
#
# Every body-less declaration in core.slang is instantiated for representative types and
# called as `sj::<name>(args...)` exactly as the emitter will (arguments of the declared
# parameter types, out/inout as lvalues); the C++ result type must equal the declared one.

_SLANG_TO_CPP = {
    "float": "float", "double": "double", "half": "sj::half", "bool": "bool", "int": "int32_t",
    "uint": "uint32_t", "int8_t": "int8_t", "int16_t": "int16_t", "int64_t": "int64_t", "uint8_t": "uint8_t",
    "uint16_t": "uint16_t", "uint64_t": "uint64_t", "void": "void", "uint4": "sj::vec<uint32_t,4>",
}
_CONSTRAINT_TYPES = {
    "__BuiltinFloatingPointType": ["float", "double", "half"],
    "__BuiltinArithmeticType": ["int", "uint", "int64_t", "float", "double", "half"],
    "__BuiltinSignedArithmeticType": ["int", "float", "half"],
    "__BuiltinIntegerType": ["int", "uint", "int64_t", "uint64_t", "int16_t", "uint8_t"],
    "__BuiltinLogicalType": ["bool", "int", "uint"],
    "__BuiltinType": ["bool", "int", "float"],
    None: ["float", "int"],
}
_VALUE_PARAMS = {"N": 3, "R": 2, "C": 4}


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _core_intrinsics():
    import re
    decls = []
    cpp_name = None
    depth = 0
    for raw in CORE.read_text().splitlines():
        line = raw.split("//")[0].strip()
        if not line:
            continue
        if depth:                                    # inside an extension body
            depth += line.count("{") - line.count("}")
            continue
        if line.startswith("extension"):
            depth = 0
            continue
        if line == "{":
            depth = 1
            continue
        m = re.match(r'\[__cpp\("([^"]+)"\)\]$', line)
        if m:
            cpp_name = m.group(1)
            continue
        if line.startswith("[") and line.endswith("]"):
            continue                                 # other attributes ([Differentiable] ...)
        if "{" in line or not line.endswith(";"):
            continue                                 # a function with a body: not an intrinsic
        m = re.match(r"(.+?)\s+(\w+)(?:<(.*)>)?\((.*)\);$", line)
        assert m, f"unrecognised core.slang line: {raw!r}"
        ret, name, gens, params = m.groups()
        if not (cpp_name and "$T" in cpp_name):     # explicit-template spellings are checked by emit tests
            decls.append((cpp_name or "sj::" + name, ret.strip(), _split_top(gens or ""), _split_top(params)))
        cpp_name = None
    return decls


def _cpp_type(t: str, env: dict) -> str:
    import re
    t = t.strip()
    m = re.match(r"(vector|matrix)<(.*)>$", t)
    if m:
        args = [_cpp_type(a, env) for a in _split_top(m.group(2))]
        return ("sj::vec<%s>" if m.group(1) == "vector" else "sj::mat<%s>") % ",".join(args)
    if t in env:
        return str(env[t])
    if t.isdigit():
        return t
    return _SLANG_TO_CPP[t]


def _contract_source() -> tuple[str, int]:
    import itertools
    body, n = [], 0
    for cpp, ret, gens, params in _core_intrinsics():
        tparams, env = [], dict(_VALUE_PARAMS)
        for g in gens:
            if g.startswith("let "):
                continue
            name, _, cons = g.partition(":")
            tparams.append((name.strip(), _CONSTRAINT_TYPES[cons.strip() or None]))
        for combo in itertools.product(*[c for _, c in tparams]) if tparams else [()]:
            env2 = dict(env)
            env2.update({p: _SLANG_TO_CPP[t] for (p, _), t in zip(tparams, combo)})
            decls, args = [], []
            for i, p in enumerate(params):
                words = p.split()
                if words[0] in ("in", "out", "inout"):
                    direction, ptype = words[0], " ".join(words[1:-1])
                else:
                    direction, ptype = "in", " ".join(words[:-1])
                ct = _cpp_type(ptype, env2)
                if direction == "in":
                    args.append(f"{ct}{{}}")
                else:
                    decls.append(f"{ct} a{i}{{}};")
                    args.append(f"a{i}")
            call = f"{cpp}({', '.join(args)})"
            rt = _cpp_type(ret, env2)
            n += 1
            body.append("    { %s static_assert(std::is_same<decltype(%s), %s>::value, \"%s -> %s\"); (void)%s; }"
                        % (" ".join(decls), call, rt, call.replace('"', ""), rt, call))
    src = '#include "%s"\n#include <type_traits>\nint main() {\n%s\n    return 0;\n}\n' % (PRELUDE, "\n".join(body))
    return src, n


@pytest.mark.parametrize("compiler", COMPILERS or [None])
@pytest.mark.parametrize("variant", ["default", "softhalf"])
def test_core_slang_contract(compiler, variant, tmp_path):
    if compiler is None:
        pytest.skip("no C++ compiler found")
    src, n = _contract_source()
    assert n > 500
    (tmp_path / "contract.cpp").write_text(src)
    r = subprocess.run([compiler, *FLAGS, *VARIANTS[variant], "-O0", "-c", str(tmp_path / "contract.cpp"), "-o", str(tmp_path / "c.o")],
                       capture_output=True, text=True)
    errs = [l for l in r.stderr.splitlines() if "error" in l][:40]
    assert r.returncode == 0 and not r.stderr.strip(), "\n".join(errs) or r.stderr[:5000]
