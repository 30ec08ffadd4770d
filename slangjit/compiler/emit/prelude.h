// slangjit C++ prelude.
//
// Pasted verbatim at the top of every generated C++ translation unit, so it must be
// self-contained (standard headers only).  Everything lives in namespace `sj`.
//
// Construction conventions (the emitter relies on these exact spellings):
//   vector literal  : sj::vec<T,N>{{a, b, c}}      elements must already be of type T
//                     (brace-init rejects narrowing); sj::vcat<T,N>(...) accepts any mix of
//                     scalars / vec / mat (flattened in order, each component static_cast to T)
//   splat           : sj::vsplat<T,N>(s), sj::msplat<T,R,C>(s)
//   matrix literal  : sj::mcat<T,R,C>(...) (scalars / row vectors / matrices flattened in
//                     row-major order), or sj::mat<T,R,C>{{row0, row1, ...}} with rows vec<T,C>
//   array literal   : sj::array<T,N>{{a, b, c}}
//   zero value      : T{} works for vec, mat, array, buffers and Atomic
//   conversion      : sj::convert<To>(x)
//   swizzle (rvalue): sj::swizzle<i...>(x) -> vec<T,K>, or plain T when K == 1
//   swizzle (lvalue): sj::swizzle_ref<i...>(x) -> proxy (K > 1) or T& (K == 1)
//   half literal    : sj::half(1.5f)
//   templated method: buf.template LoadT<T>(off) / buf.template StoreT<T>(off, v)
//   integer / and % : sj::div(a, b) / sj::mod(a, b); << and >>: sj::shl / sj::shr
//                     (the vec/mat operators already route through these)
//
// Design notes
//   * Storage is plain arrays so every type is standard-layout, trivially copyable and has
//     the same bytes as Slang's CPU layout: vec<float,3> is 12 bytes (no padding),
//     mat<T,R,C> is R rows of vec<T,C> (row-major), Atomic<T> is exactly a T.
//   * Every operation that could trap or be UB in C++ but is well defined (or merely
//     "undefined value") in shader languages is routed through a safe helper: integer
//     division/modulo, shift counts, buffer indexing.  Dynamic indexing of vec/mat/array
//     is NOT bounds checked (the emitter mostly indexes them with constants).
//   * CUDA: every function is SJ_FN; the few things that differ between CPU and GPU
//     (half, atomics, bit intrinsics, per-thread scratch) are isolated in the "backend"
//     section below so a CUDA flavour only has to swap that block.
#pragma once

#if !defined(__CUDACC_RTC__) && !defined(__CUDACC__)
#include <ucontext.h>
#include <cstdlib>
#endif
#if !defined(__CUDACC_RTC__)
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cmath>
#include <type_traits>
#include <utility>
#else
// ---------------------------------------------------------------------------- CUDA (NVRTC)
// NVRTC has no C++ standard library headers: the few pieces this file uses are defined here
// (fixed-width integers, <type_traits> subset, offsetof, INT64_C).  memcpy/memset/printf and
// the C math functions are NVRTC built-ins.  cuda_fp16.h comes from the nvidia-cuda-runtime
// wheel's include directory (the runtime passes it with --include-path).
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
typedef long long intptr_t;
#ifndef INT64_C
#define INT64_C(c) c##LL
#define UINT64_C(c) c##ULL
#endif
#ifndef offsetof
#define offsetof(T, m) __builtin_offsetof(T, m)
#endif
namespace std {
template <class T, T v> struct integral_constant {
    static constexpr T value = v;
    typedef T value_type;
    constexpr operator T() const { return v; }
};
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <bool C, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool C, class A, class B> struct conditional { typedef A type; };
template <class A, class B> struct conditional<false, A, B> { typedef B type; };
template <class T> struct remove_cv { typedef T type; };
template <class T> struct remove_cv<const T> { typedef T type; };
template <class T> struct remove_cv<volatile T> { typedef T type; };
template <class T> struct remove_cv<const volatile T> { typedef T type; };
namespace sj_detail {
template <class T> struct is_int_base : false_type {};
#define SJ_STD_INT(T) template <> struct is_int_base<T> : true_type {};
SJ_STD_INT(bool) SJ_STD_INT(char) SJ_STD_INT(signed char) SJ_STD_INT(unsigned char) SJ_STD_INT(short)
SJ_STD_INT(unsigned short) SJ_STD_INT(int) SJ_STD_INT(unsigned int) SJ_STD_INT(long) SJ_STD_INT(unsigned long)
SJ_STD_INT(long long) SJ_STD_INT(unsigned long long)
#undef SJ_STD_INT
template <class T> struct is_fp_base : false_type {};
template <> struct is_fp_base<float> : true_type {};
template <> struct is_fp_base<double> : true_type {};
template <> struct is_fp_base<long double> : true_type {};
template <class T> struct mk_unsigned { typedef T type; };
template <> struct mk_unsigned<char> { typedef unsigned char type; };
template <> struct mk_unsigned<signed char> { typedef unsigned char type; };
template <> struct mk_unsigned<short> { typedef unsigned short type; };
template <> struct mk_unsigned<int> { typedef unsigned int type; };
template <> struct mk_unsigned<long> { typedef unsigned long type; };
template <> struct mk_unsigned<long long> { typedef unsigned long long type; };
}  // namespace sj_detail
template <class T> struct is_integral : sj_detail::is_int_base<typename remove_cv<T>::type> {};
template <class T> struct is_floating_point : sj_detail::is_fp_base<typename remove_cv<T>::type> {};
template <class T> struct is_arithmetic
    : integral_constant<bool, is_integral<T>::value || is_floating_point<T>::value> {};
template <class T> struct is_signed
    : integral_constant<bool, is_arithmetic<T>::value && (T(-1) < T(0))> {};
template <class T> struct make_unsigned { typedef typename sj_detail::mk_unsigned<typename remove_cv<T>::type>::type type; };
template <class T> struct is_trivially_copyable : integral_constant<bool, __is_trivially_copyable(T)> {};
template <class T> struct is_standard_layout : integral_constant<bool, __is_standard_layout(T)> {};
}  // namespace std
#endif
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include <cuda_fp16.h>
#endif

// ============================================================================ backend
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SJ_CUDA 1
// Device-only: the generated code is never run on the host, and wave / atomic intrinsics are
// __device__ functions (a __host__ __device__ caller would be diagnosed by nvcc's host pass).
#define SJ_FN __device__ inline
#else
#define SJ_CUDA 0
#define SJ_FN inline
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SJ_LIKELY(x) __builtin_expect(!!(x), 1)
#define SJ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define SJ_LIKELY(x) (x)
#define SJ_UNLIKELY(x) (x)
#endif

// Bit intrinsics.  Arguments are never zero when these are used.
#if SJ_CUDA
#define SJ_POPC32(x) __popc(x)
#define SJ_POPC64(x) __popcll(x)
#define SJ_CLZ32(x) __clz(x)
#define SJ_CLZ64(x) __clzll(x)
#define SJ_CTZ32(x) (__ffs(x) - 1)
#define SJ_CTZ64(x) (__ffsll(x) - 1)
#else
#define SJ_POPC32(x) __builtin_popcount(x)
#define SJ_POPC64(x) __builtin_popcountll(x)
#define SJ_CLZ32(x) __builtin_clz(x)
#define SJ_CLZ64(x) __builtin_clzll(x)
#define SJ_CTZ32(x) __builtin_ctz(x)
#define SJ_CTZ64(x) __builtin_ctzll(x)
#endif

// Atomic primitives.  All read-modify-write operations in this file are built from these
// (integer fetch ops + a generic compare-exchange on the object representation), so a
// CUDA flavour only needs to redefine this block.  Sequentially consistent: on x86 RMW
// costs the same either way and it keeps lock-style user code correct on aarch64.
#if !SJ_CUDA
#define SJ_ATOMIC_LOAD(p, out) __atomic_load((p), (out), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_STORE(p, v) __atomic_store((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_CAS(p, expected, desired) \
    __atomic_compare_exchange((p), (expected), (desired), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_SUB(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_AND(p, v) __atomic_fetch_and((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_OR(p, v) __atomic_fetch_or((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_XOR(p, v) __atomic_fetch_xor((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_XCHG(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
// Hides where a pointer came from, so the compiler does not warn about (or "optimise") the
// 4-byte word access that covers a lone 2-byte half.
#define SJ_LAUNDER_PTR(p) __asm__("" : "+r"(p))
#else
// CUDA: the same primitives on atomicCAS / atomicAdd / ... (device scope, relaxed: CUDA's
// atomic* functions; a __threadfence() is not implied).  Operands of 1 or 2 bytes that have no
// native instruction use a compare-exchange on the aligned 32-bit word that contains them.
namespace sj_cuda {
template <class T> __device__ inline uint64_t to_bits(const T& x) {
    if constexpr (sizeof(T) == 8) { uint64_t u; memcpy(&u, &x, 8); return u; }
    else if constexpr (sizeof(T) == 4) { uint32_t u; memcpy(&u, &x, 4); return u; }
    else if constexpr (sizeof(T) == 2) { uint16_t u; memcpy(&u, &x, 2); return u; }
    else { uint8_t u; memcpy(&u, &x, 1); return u; }
}
template <class T> __device__ inline T from_bits(uint64_t u) {
    T x;
    if constexpr (sizeof(T) == 8) { memcpy(&x, &u, 8); }
    else if constexpr (sizeof(T) == 4) { const uint32_t w = uint32_t(u); memcpy(&x, &w, 4); }
    else if constexpr (sizeof(T) == 2) { const uint16_t w = uint16_t(u); memcpy(&x, &w, 2); }
    else { const uint8_t w = uint8_t(u); memcpy(&x, &w, 1); }
    return x;
}
template <class T> __device__ inline void load(T* p, T* out) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "atomic operand size");
    if constexpr (sizeof(T) == 8) *out = from_bits<T>(*(volatile unsigned long long*)p);
    else if constexpr (sizeof(T) == 4) *out = from_bits<T>(*(volatile unsigned int*)p);
    else if constexpr (sizeof(T) == 2) *out = from_bits<T>(*(volatile unsigned short*)p);
    else *out = from_bits<T>(*(volatile unsigned char*)p);
}
// Compare-exchange of a 1- or 2-byte value through its containing aligned 32-bit word.
template <class T> __device__ inline bool cas_sub(T* p, T* expected, T* desired) {
    const unsigned long long a = (unsigned long long)p;
    unsigned int* w = (unsigned int*)(a & ~3ull);
    const unsigned sh = unsigned(a & 3ull) * 8u;
    const unsigned m = (sizeof(T) == 2 ? 0xFFFFu : 0xFFu) << sh;
    const unsigned e = unsigned(to_bits(*expected)) << sh, d = unsigned(to_bits(*desired)) << sh;
    unsigned old = *(volatile unsigned int*)w;
    while (true) {
        if ((old & m) != e) { *expected = from_bits<T>((old & m) >> sh); return false; }
        const unsigned prev = atomicCAS(w, old, (old & ~m) | d);
        if (prev == old) return true;
        old = prev;
    }
}
template <class T> __device__ inline bool cas(T* p, T* expected, T* desired) {
    if constexpr (sizeof(T) == 8) {
        const unsigned long long e = to_bits(*expected);
        const unsigned long long o = atomicCAS((unsigned long long*)p, e, (unsigned long long)to_bits(*desired));
        if (o == e) return true;
        *expected = from_bits<T>(o);
        return false;
    } else if constexpr (sizeof(T) == 4) {
        const unsigned e = unsigned(to_bits(*expected));
        const unsigned o = atomicCAS((unsigned int*)p, e, unsigned(to_bits(*desired)));
        if (o == e) return true;
        *expected = from_bits<T>(o);
        return false;
    } else {
        return cas_sub(p, expected, desired);
    }
}
template <class T, class F> __device__ inline T cas_loop(T* p, F f) {
    T old;
    load(p, &old);
    T nv;
    do { nv = f(old); } while (!cas(p, &old, &nv));
    return old;
}
// Integer fetch-ops: native for 32/64-bit operands (signed values go through the unsigned
// instruction: two's complement wrap-around is the same), a CAS loop for 8/16-bit ones.
#define SJ_CUDA_FETCH(NAME, NATIVE, EXPR)                                                          \
    template <class T> __device__ inline T NAME(T* p, T v) {                                       \
        if constexpr (sizeof(T) == 4) return T(NATIVE((unsigned int*)p, (unsigned int)v));         \
        else if constexpr (sizeof(T) == 8)                                                         \
            return T(NATIVE((unsigned long long*)p, (unsigned long long)v));                       \
        else return cas_loop(p, [&](T a) { return T(EXPR); });                                     \
    }
SJ_CUDA_FETCH(fetch_add, atomicAdd, a + v)
SJ_CUDA_FETCH(fetch_and, atomicAnd, a & v)
SJ_CUDA_FETCH(fetch_or, atomicOr, a | v)
SJ_CUDA_FETCH(fetch_xor, atomicXor, a ^ v)
SJ_CUDA_FETCH(exchange, atomicExch, v)
#undef SJ_CUDA_FETCH
template <class T> __device__ inline T fetch_sub(T* p, T v) { return fetch_add(p, T(T(0) - v)); }
template <class T> __device__ inline void store(T* p, T* v) {
    if constexpr (sizeof(T) >= 4) (void)exchange((typename std::conditional<sizeof(T) == 8, unsigned long long, unsigned int>::type*)p,
                                                 (typename std::conditional<sizeof(T) == 8, unsigned long long, unsigned int>::type)to_bits(*v));
    else (void)cas_loop(p, [&](T) { return *v; });
}
// Native floating-point add (sm_60+ double, sm_70+ half) and integer min/max.
template <class T> __device__ inline T add_fp(T* p, T v) { return atomicAdd(p, v); }
// Warp-aggregated floating-point add whose result is not needed (InterlockedAdd(dest, v), gradient
// accumulation): the lanes of a warp that add into the same address sum their values with shuffles
// and one lane per distinct address does the atomic, so many threads adding into one parameter do
// not serialise on it.  Works for any set of active lanes (divergent or partial warps): lanes are
// grouped with __match_any_sync on the address, then reduced by a tree over each group
// (E. Westphal's "voting and shuffling" reduction).  Thread-private (local) addresses are added
// directly.  The sum's association order differs from one-atomic-per-thread, as any atomic order does.
__device__ __forceinline__ unsigned lane_id() {
    unsigned l;
    asm("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}
template <class T> __device__ inline void red_add_fp(T* p, T v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if (!__isGlobal(p) && !__isShared(p)) { *p = T(*p + v); return; }
    const unsigned active = __activemask();
    const unsigned lane = lane_id();
    const unsigned peers = __match_any_sync(active, (unsigned long long)p);
    if (peers == 0xFFFFFFFFu) {          // the whole warp adds into one address (a broadcast parameter)
        for (int o = 16; o > 0; o >>= 1) v = T(v + __shfl_xor_sync(0xFFFFFFFFu, v, o));
        if (lane == 0) (void)atomicAdd(p, v);
        return;
    }
    const unsigned rank = __popc(peers & ((1u << lane) - 1u));
    unsigned hi = peers & ~((2u << lane) - 1u);      // my group's lanes above me (lane 31: none)
    unsigned rel = rank;
    while (__any_sync(active, hi != 0u)) {
        const int next = __ffs(hi);                 // 1 + the next lane of my group still in the tree
        const T t = __shfl_sync(active, v, next ? next - 1 : int(lane));
        if (next) v = T(v + t);
        hi &= __ballot_sync(active, (rel & 1u) == 0u);
        rel >>= 1;
    }
    if (rank == 0u) (void)atomicAdd(p, v);
#else
    (void)atomicAdd(p, v);
#endif
}
template <class T> __device__ inline T min_int(T* p, T v) {
    typedef typename std::conditional<sizeof(T) == 8,
        typename std::conditional<std::is_signed<T>::value, long long, unsigned long long>::type,
        typename std::conditional<std::is_signed<T>::value, int, unsigned int>::type>::type N;
    return T(atomicMin((N*)p, N(v)));
}
template <class T> __device__ inline T max_int(T* p, T v) {
    typedef typename std::conditional<sizeof(T) == 8,
        typename std::conditional<std::is_signed<T>::value, long long, unsigned long long>::type,
        typename std::conditional<std::is_signed<T>::value, int, unsigned int>::type>::type N;
    return T(atomicMax((N*)p, N(v)));
}
}  // namespace sj_cuda
#define SJ_ATOMIC_LOAD(p, out) ::sj_cuda::load((p), (out))
#define SJ_ATOMIC_STORE(p, v) ::sj_cuda::store((p), (v))
#define SJ_ATOMIC_CAS(p, expected, desired) ::sj_cuda::cas((p), (expected), (desired))
#define SJ_ATOMIC_FETCH_ADD(p, v) ::sj_cuda::fetch_add((p), (v))
#define SJ_ATOMIC_FETCH_SUB(p, v) ::sj_cuda::fetch_sub((p), (v))
#define SJ_ATOMIC_FETCH_AND(p, v) ::sj_cuda::fetch_and((p), (v))
#define SJ_ATOMIC_FETCH_OR(p, v) ::sj_cuda::fetch_or((p), (v))
#define SJ_ATOMIC_FETCH_XOR(p, v) ::sj_cuda::fetch_xor((p), (v))
#define SJ_ATOMIC_XCHG(p, v) ::sj_cuda::exchange((p), (v))
#define SJ_LAUNDER_PTR(p) ((void)0)
#endif

// How atomics on half work: 1 = compare-exchange on the aligned 32-bit word that contains
// the half (only needs 32-bit CAS: the CUDA choice; it touches the 2 neighbouring bytes,
// which AddressSanitizer reports for a lone half), 0 = native 16-bit compare-exchange.
#ifndef SJ_HALF_CAS_VIA_WORD
#define SJ_HALF_CAS_VIA_WORD SJ_CUDA
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "slangjit prelude assumes a little-endian target"
#endif

namespace sj {

// ============================================================================ scalar types
// half: the compiler's _Float16 where it exists (GCC >= 12, clang >= 15 on x86_64; aarch64);
// otherwise (e.g. GCC 11 / clang 14 on x86_64, or -DSJ_SOFT_HALF) a 2-byte software type
// that converts to/from float with round-to-nearest-even; its arithmetic happens in float
// (a + b is a float), so code must convert results back with half(...), as this file does.
#if SJ_CUDA
typedef __half half;  // requires <cuda_fp16.h>; the CUDA flavour provides it
#define SJ_NATIVE_HALF 1
#elif defined(__FLT16_MANT_DIG__) && !defined(SJ_SOFT_HALF)
typedef _Float16 half;
#define SJ_NATIVE_HALF 1
#else
#define SJ_NATIVE_HALF 0
namespace detail {
// Branch-light conversions after F. Giesen ("half_to_float_fast" / "float_to_half_fast3_rtne");
// they rely on IEEE round-to-nearest float addition with subnormals (no -ffast-math).
SJ_FN uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
SJ_FN float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
SJ_FN uint16_t f32_to_f16_bits(float f) {
    const uint32_t f32infty = 255u << 23, f16max = (127u + 16u) << 23;
    const uint32_t denorm_magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    uint32_t fu = f32_bits(f);
    const uint32_t sign = fu & 0x80000000u;
    fu ^= sign;
    uint32_t o;
    if (fu >= f16max) {
        o = fu > f32infty ? 0x7E00u : 0x7C00u;  // NaN -> qNaN, overflow -> inf
    } else if (fu < (113u << 23)) {          // subnormal half or zero: let the FPU round
        o = f32_bits(f32_from_bits(fu) + f32_from_bits(denorm_magic_u)) - denorm_magic_u;
    } else {
        const uint32_t mant_odd = (fu >> 13) & 1u;
        fu += (uint32_t(15 - 127) << 23) + 0xFFFu;
        fu += mant_odd;
        o = fu >> 13;
    }
    return uint16_t(o | (sign >> 16));
}
SJ_FN float f16_bits_to_f32(uint16_t h) {
    const uint32_t shifted_exp = 0x7C00u << 13;
    uint32_t o = uint32_t(h & 0x7FFFu) << 13;
    const uint32_t e = shifted_exp & o;
    o += uint32_t(127 - 15) << 23;
    if (e == shifted_exp) o += uint32_t(128 - 16) << 23;  // inf / NaN
    else if (e == 0) o = f32_bits(f32_from_bits(o + (1u << 23)) - f32_from_bits(113u << 23));  // subnormal
    return f32_from_bits(o | (uint32_t(h & 0x8000u) << 16));
}
}  // namespace detail
struct half {
    uint16_t bits;
    half() = default;
    template <class A, typename std::enable_if<std::is_arithmetic<A>::value, int>::type = 0>
    SJ_FN half(A a) : bits(detail::f32_to_f16_bits(float(a))) {}
    SJ_FN operator float() const { return detail::f16_bits_to_f32(bits); }
#define SJ_HALF_COMPOUND(OP) \
    SJ_FN half& operator OP##=(float o) { return *this = half(float(*this) OP o); }
    SJ_HALF_COMPOUND(+)
    SJ_HALF_COMPOUND(-)
    SJ_HALF_COMPOUND(*)
    SJ_HALF_COMPOUND(/)
#undef SJ_HALF_COMPOUND
    SJ_FN half& operator++() { return *this += 1.0f; }
    SJ_FN half& operator--() { return *this -= 1.0f; }
    SJ_FN half operator++(int) { half o = *this; *this += 1.0f; return o; }
    SJ_FN half operator--(int) { half o = *this; *this -= 1.0f; return o; }
};
#endif

namespace detail {
template <class T> struct is_half : std::is_same<typename std::remove_cv<T>::type, half> {};
template <class T> struct is_fp
    : std::integral_constant<bool, std::is_floating_point<T>::value || is_half<T>::value> {};
template <class T> struct is_int
    : std::integral_constant<bool, std::is_integral<T>::value && !std::is_same<T, bool>::value> {};
template <class T> struct is_scalar
    : std::integral_constant<bool, std::is_arithmetic<T>::value || is_half<T>::value> {};
// Arithmetic on half goes through float (exactly what hardware without native fp16 does,
// and it avoids relying on the compiler's excess-precision rules).
template <class T> struct calc { typedef T type; };
template <> struct calc<half> { typedef float type; };
template <class T> using calc_t = typename calc<T>::type;
// Blocks template argument deduction, so `v * 2` deduces T from the vector only.
template <class T> struct nodeduce_s { typedef T type; };
template <class T> using nodeduce = typename nodeduce_s<T>::type;
}  // namespace detail

#define SJ_IF(...) typename std::enable_if<(__VA_ARGS__), int>::type = 0

// Reinterpret the bytes of `from` as `To` (memcpy is the only portable, UB-free way and
// compiles to a register move).
template <class To, class From>
SJ_FN To bit_cast(const From& from) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast: size mismatch");
    static_assert(std::is_trivially_copyable<From>::value && std::is_trivially_copyable<To>::value,
                  "bit_cast: types must be trivially copyable");
    To to;
    memcpy(&to, &from, sizeof(To));
    return to;
}

// ============================================================================ integer safety
// Division by zero returns all-ones (-1 for signed, UINT_MAX for unsigned; what D3D does
// for unsigned) and modulo by zero returns the dividend, which keeps a == (a/b)*b + a%b.
// INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0 instead of trapping.
// Floating-point div/mod are provided too (plain / and fmod) so generic code can call them.
template <class T, SJ_IF(detail::is_int<T>::value)>
SJ_FN T div(T a, detail::nodeduce<T> b) {
    typedef typename std::make_unsigned<T>::type U;
    if (SJ_UNLIKELY(b == 0)) return T(~T(0));
    if constexpr (std::is_signed<T>::value) {
        if (SJ_UNLIKELY(b == T(-1))) return T(U(0) - U(a));
    }
    return T(a / b);
}
template <class T, SJ_IF(detail::is_int<T>::value)>
SJ_FN T mod(T a, detail::nodeduce<T> b) {
    if (SJ_UNLIKELY(b == 0)) return a;
    if constexpr (std::is_signed<T>::value) {
        if (SJ_UNLIKELY(b == T(-1))) return T(0);
    }
    return T(a % b);
}
SJ_FN float div(float a, float b) { return a / b; }
SJ_FN double div(double a, double b) { return a / b; }
SJ_FN half div(half a, half b) { return half(float(a) / float(b)); }
SJ_FN float mod(float a, float b) { return ::fmodf(a, b); }
SJ_FN double mod(double a, double b) { return ::fmod(a, b); }
SJ_FN half mod(half a, half b) { return half(::fmodf(float(a), float(b))); }

// Shift counts are masked by (bit width - 1) like D3D/SPIR-V drivers do; left shifts go
// through the unsigned type so shifting a negative value is not UB.  shr is arithmetic
// for signed types.
template <class T, class S, SJ_IF(detail::is_int<T>::value && detail::is_int<S>::value)>
SJ_FN T shl(T a, S b) {
    typedef typename std::make_unsigned<T>::type U;
    const unsigned n = unsigned(b) & unsigned(sizeof(T) * 8 - 1);
    return T(U(U(a) << n));
}
template <class T, class S, SJ_IF(detail::is_int<T>::value && detail::is_int<S>::value)>
SJ_FN T shr(T a, S b) {
    const unsigned n = unsigned(b) & unsigned(sizeof(T) * 8 - 1);
    return T(a >> n);
}

// ============================================================================ vectors
template <class T, int N>
struct vec {
    static_assert(N >= 1 && N <= 4, "vector size must be 1..4");
    T v[N];
    template <class I> SJ_FN T& operator[](I i) { return v[i]; }
    template <class I> SJ_FN const T& operator[](I i) const { return v[i]; }
};
template <class T, int R, int C> struct mat;

namespace detail {
template <class T> struct ncomp { static constexpr int value = 1; };
template <class T, int N> struct ncomp<vec<T, N>> { static constexpr int value = N; };
template <class T, int R, int C> struct ncomp<mat<T, R, C>> { static constexpr int value = R * C; };
template <class T> struct is_vec : std::false_type {};
template <class T, int N> struct is_vec<vec<T, N>> : std::true_type {};
template <class T> struct is_mat : std::false_type {};
template <class T, int R, int C> struct is_mat<mat<T, R, C>> : std::true_type {};

template <class... A> struct total_comps;
template <> struct total_comps<> { static constexpr int value = 0; };
template <class A, class... B> struct total_comps<A, B...> {
    static constexpr int value = ncomp<A>::value + total_comps<B...>::value;
};

// Flatten one argument of vcat/mcat into out[k...].
template <class T, class S>
SJ_FN void put(T* out, int& k, const S& s) { out[k++] = static_cast<T>(s); }
template <class T, class U, int N>
SJ_FN void put(T* out, int& k, const vec<U, N>& x) {
    for (int i = 0; i < N; ++i) out[k++] = static_cast<T>(x.v[i]);
}
template <class T, class U, int R, int C>
SJ_FN void put(T* out, int& k, const mat<U, R, C>& m);
}  // namespace detail

// Concatenate scalars / vectors (/ matrices) into a vec<T,N>.
template <class T, int N, class... A>
SJ_FN vec<T, N> vcat(const A&... a) {
    static_assert(detail::total_comps<A...>::value == N, "vcat: component count mismatch");
    vec<T, N> r;
    int k = 0;
    T* out = r.v;
    (void)out;
    (void)k;
    int dummy[] = {0, (detail::put(out, k, a), 0)...};
    (void)dummy;
    return r;
}
template <class T, int N>
SJ_FN vec<T, N> vsplat(detail::nodeduce<T> s) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = s;
    return r;
}

// ---- element-wise operators.  The element expression is computed in the promoted type
// and cast back (T(...)) so small integer types and half behave like the shader type.
#define SJ_VEC_BINOP(OP, EXPR)                                                                 \
    template <class T, int N>                                                                  \
    SJ_FN vec<T, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {                      \
        vec<T, N> r;                                                                           \
        for (int i = 0; i < N; ++i) { const T x = a.v[i], y = b.v[i]; r.v[i] = T(EXPR); }    \
        return r;                                                                              \
    }                                                                                          \
    template <class T, int N>                                                                  \
    SJ_FN vec<T, N> operator OP(const vec<T, N>& a, detail::nodeduce<T> y) {                   \
        vec<T, N> r;                                                                           \
        for (int i = 0; i < N; ++i) { const T x = a.v[i]; r.v[i] = T(EXPR); }                 \
        return r;                                                                              \
    }                                                                                          \
    template <class T, int N>                                                                  \
    SJ_FN vec<T, N> operator OP(detail::nodeduce<T> x, const vec<T, N>& b) {                   \
        vec<T, N> r;                                                                           \
        for (int i = 0; i < N; ++i) { const T y = b.v[i]; r.v[i] = T(EXPR); }                 \
        return r;                                                                              \
    }                                                                                          \
    template <class T, int N>                                                                  \
    SJ_FN vec<T, N>& operator OP##=(vec<T, N>& a, const vec<T, N>& b) { return a = a OP b; }  \
    template <class T, int N>                                                                  \
    SJ_FN vec<T, N>& operator OP##=(vec<T, N>& a, detail::nodeduce<T> b) { return a = a OP b; }

SJ_VEC_BINOP(+, x + y)
SJ_VEC_BINOP(-, x - y)
SJ_VEC_BINOP(*, x * y)
SJ_VEC_BINOP(/, ::sj::div(x, y))  // safe for integers
SJ_VEC_BINOP(%, ::sj::mod(x, y))  // fmod for floats, safe for integers
SJ_VEC_BINOP(&, x & y)
SJ_VEC_BINOP(|, x | y)
SJ_VEC_BINOP(^, x ^ y)
SJ_VEC_BINOP(<<, ::sj::shl(x, y))  // masked count
SJ_VEC_BINOP(>>, ::sj::shr(x, y))
#undef SJ_VEC_BINOP

#define SJ_VEC_CMP(OP)                                                                 \
    template <class T, int N>                                                          \
    SJ_FN vec<bool, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {           \
        vec<bool, N> r;                                                                \
        for (int i = 0; i < N; ++i) r.v[i] = a.v[i] OP b.v[i];                         \
        return r;                                                                      \
    }                                                                                  \
    template <class T, int N>                                                          \
    SJ_FN vec<bool, N> operator OP(const vec<T, N>& a, detail::nodeduce<T> b) {        \
        vec<bool, N> r;                                                                \
        for (int i = 0; i < N; ++i) r.v[i] = a.v[i] OP b;                              \
        return r;                                                                      \
    }                                                                                  \
    template <class T, int N>                                                          \
    SJ_FN vec<bool, N> operator OP(detail::nodeduce<T> a, const vec<T, N>& b) {        \
        vec<bool, N> r;                                                                \
        for (int i = 0; i < N; ++i) r.v[i] = a OP b.v[i];                              \
        return r;                                                                      \
    }
SJ_VEC_CMP(==)
SJ_VEC_CMP(!=)
SJ_VEC_CMP(<)
SJ_VEC_CMP(>)
SJ_VEC_CMP(<=)
SJ_VEC_CMP(>=)
#undef SJ_VEC_CMP

// Logical ops on bool vectors are element-wise and therefore not short-circuiting
// (same as HLSL 2018 / Slang for vectors).
#define SJ_VEC_LOGIC(OP)                                                                        \
    template <int N>                                                                            \
    SJ_FN vec<bool, N> operator OP(const vec<bool, N>& a, const vec<bool, N>& b) {              \
        vec<bool, N> r;                                                                         \
        for (int i = 0; i < N; ++i) r.v[i] = a.v[i] OP b.v[i];                                  \
        return r;                                                                               \
    }                                                                                           \
    template <int N>                                                                            \
    SJ_FN vec<bool, N> operator OP(const vec<bool, N>& a, bool b) {                             \
        vec<bool, N> r;                                                                         \
        for (int i = 0; i < N; ++i) r.v[i] = a.v[i] OP b;                                       \
        return r;                                                                               \
    }                                                                                           \
    template <int N>                                                                            \
    SJ_FN vec<bool, N> operator OP(bool a, const vec<bool, N>& b) {                             \
        vec<bool, N> r;                                                                         \
        for (int i = 0; i < N; ++i) r.v[i] = a OP b.v[i];                                       \
        return r;                                                                               \
    }
SJ_VEC_LOGIC(&&)
SJ_VEC_LOGIC(||)
#undef SJ_VEC_LOGIC

template <class T, int N>
SJ_FN vec<bool, N> operator!(const vec<T, N>& a) {
    vec<bool, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = !a.v[i];
    return r;
}
template <class T, int N>
SJ_FN vec<T, N> operator-(const vec<T, N>& a) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = T(-a.v[i]);
    return r;
}
template <class T, int N>
SJ_FN vec<T, N> operator+(const vec<T, N>& a) { return a; }
template <class T, int N>
SJ_FN vec<T, N> operator~(const vec<T, N>& a) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = T(~a.v[i]);
    return r;
}
template <class T, int N>
SJ_FN vec<T, N>& operator++(vec<T, N>& a) { return a += T(1); }
template <class T, int N>
SJ_FN vec<T, N>& operator--(vec<T, N>& a) { return a -= T(1); }
template <class T, int N>
SJ_FN vec<T, N> operator++(vec<T, N>& a, int) { vec<T, N> o = a; a += T(1); return o; }
template <class T, int N>
SJ_FN vec<T, N> operator--(vec<T, N>& a, int) { vec<T, N> o = a; a -= T(1); return o; }

// ---- swizzles
namespace detail {
template <int... I> struct idx_list {};
template <int N, int... I>
SJ_FN constexpr bool idx_in_range() {
    bool ok = true;
    const int idx[] = {I...};
    for (int k = 0; k < int(sizeof...(I)); ++k) ok = ok && idx[k] >= 0 && idx[k] < N;
    return ok;
}
template <int... I>
SJ_FN constexpr bool idx_distinct() {
    const int idx[] = {I...};
    for (int a = 0; a < int(sizeof...(I)); ++a)
        for (int b = a + 1; b < int(sizeof...(I)); ++b)
            if (idx[a] == idx[b]) return false;
    return true;
}
template <class T, int K> struct swz_ret {
    typedef vec<T, K> type;
    template <class... A> SJ_FN static type make(const A&... a) { return type{{a...}}; }
};
template <class T> struct swz_ret<T, 1> {
    typedef T type;
    SJ_FN static type make(const T& a) { return a; }
};
template <int I, class T> SJ_FN const T& pick(const T& s) { return s; }
}  // namespace detail

// A 1-component swizzle yields a plain T: Slang's `v.x` is a scalar.
template <int... I, class T, int N>
SJ_FN typename detail::swz_ret<T, int(sizeof...(I))>::type swizzle(const vec<T, N>& x) {
    static_assert(detail::idx_in_range<N, I...>(), "swizzle index out of range");
    return detail::swz_ret<T, int(sizeof...(I))>::make(x.v[I]...);
}
// Scalars swizzle as 1-vectors: swizzle<0,0,0>(2.0f) == vec<float,3>{{2,2,2}}.
template <int... I, class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN typename detail::swz_ret<T, int(sizeof...(I))>::type swizzle(const T& s) {
    static_assert(detail::idx_in_range<1, I...>(), "swizzle index out of range for a scalar");
    return detail::swz_ret<T, int(sizeof...(I))>::make(detail::pick<I>(s)...);
}

// Writable swizzle.  Assignment reads the whole right-hand side first, so `v.xy = v.yx`
// behaves.  Reading converts implicitly to vec<T,K>.
template <class T, int N, int... I>
struct swizzle_proxy {
    static constexpr int K = int(sizeof...(I));
    static_assert(detail::idx_distinct<I...>(), "swizzle_ref: repeated component in an lvalue swizzle");
    vec<T, N>& ref;
    SJ_FN operator vec<T, K>() const { return vec<T, K>{{ref.v[I]...}}; }
    SJ_FN vec<T, K> get() const { return vec<T, K>{{ref.v[I]...}}; }
    SJ_FN swizzle_proxy& operator=(const vec<T, K>& o) {
        const vec<T, K> t = o;
        const int idx[K] = {I...};
        for (int k = 0; k < K; ++k) ref.v[idx[k]] = t.v[k];
        return *this;
    }
    SJ_FN swizzle_proxy& operator=(const swizzle_proxy& o) { return *this = o.get(); }
#define SJ_SWZ_COMPOUND(OP) \
    SJ_FN swizzle_proxy& operator OP##=(const vec<T, K>& o) { return *this = (get() OP o); }
    SJ_SWZ_COMPOUND(+)
    SJ_SWZ_COMPOUND(-)
    SJ_SWZ_COMPOUND(*)
    SJ_SWZ_COMPOUND(/)
    SJ_SWZ_COMPOUND(%)
    SJ_SWZ_COMPOUND(&)
    SJ_SWZ_COMPOUND(|)
    SJ_SWZ_COMPOUND(^)
    SJ_SWZ_COMPOUND(<<)
    SJ_SWZ_COMPOUND(>>)
#undef SJ_SWZ_COMPOUND
};
namespace detail {
template <class T, int N, int... I> struct swz_ref_sel {
    typedef swizzle_proxy<T, N, I...> type;
    SJ_FN static type make(vec<T, N>& v) { return type{v}; }
};
template <class T, int N, int I> struct swz_ref_sel<T, N, I> {
    typedef T& type;
    SJ_FN static type make(vec<T, N>& v) { return v.v[I]; }
};
}  // namespace detail
template <int... I, class T, int N>
SJ_FN typename detail::swz_ref_sel<T, N, I...>::type swizzle_ref(vec<T, N>& x) {
    static_assert(detail::idx_in_range<N, I...>(), "swizzle index out of range");
    return detail::swz_ref_sel<T, N, I...>::make(x);
}
template <int I, class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN T& swizzle_ref(T& s) {
    static_assert(I == 0, "scalar lvalue swizzle must be .x");
    return s;
}

// vector forms of the integer-safety helpers
template <class T, int N>
SJ_FN vec<T, N> div(const vec<T, N>& a, const vec<T, N>& b) { return a / b; }
template <class T, int N>
SJ_FN vec<T, N> div(const vec<T, N>& a, detail::nodeduce<T> b) { return a / b; }
template <class T, int N>
SJ_FN vec<T, N> div(detail::nodeduce<T> a, const vec<T, N>& b) { return a / b; }
template <class T, int N>
SJ_FN vec<T, N> mod(const vec<T, N>& a, const vec<T, N>& b) { return a % b; }
template <class T, int N>
SJ_FN vec<T, N> mod(const vec<T, N>& a, detail::nodeduce<T> b) { return a % b; }
template <class T, int N>
SJ_FN vec<T, N> mod(detail::nodeduce<T> a, const vec<T, N>& b) { return a % b; }
template <class T, class S, int N>
SJ_FN vec<T, N> shl(const vec<T, N>& a, const vec<S, N>& b) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = shl(a.v[i], b.v[i]);
    return r;
}
template <class T, class S, int N, SJ_IF(detail::is_int<S>::value)>
SJ_FN vec<T, N> shl(const vec<T, N>& a, S b) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = shl(a.v[i], b);
    return r;
}
template <class T, class S, int N>
SJ_FN vec<T, N> shr(const vec<T, N>& a, const vec<S, N>& b) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = shr(a.v[i], b.v[i]);
    return r;
}
template <class T, class S, int N, SJ_IF(detail::is_int<S>::value)>
SJ_FN vec<T, N> shr(const vec<T, N>& a, S b) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = shr(a.v[i], b);
    return r;
}

// ============================================================================ matrices
template <class T, int R, int C>
struct mat {
    static_assert(R >= 1 && R <= 4 && C >= 1 && C <= 4, "matrix size must be 1..4");
    vec<T, C> rows[R];  // row-major
    template <class I> SJ_FN vec<T, C>& operator[](I i) { return rows[i]; }
    template <class I> SJ_FN const vec<T, C>& operator[](I i) const { return rows[i]; }
};

namespace detail {
template <class T, class U, int R, int C>
SJ_FN void put(T* out, int& k, const mat<U, R, C>& m) {
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) out[k++] = static_cast<T>(m.rows[i].v[j]);
}
}  // namespace detail

// Flatten scalars / vectors / matrices in row-major order; R row vectors of size C is the
// common case and is the same thing.
template <class T, int R, int C, class... A>
SJ_FN mat<T, R, C> mcat(const A&... a) {
    static_assert(detail::total_comps<A...>::value == R * C, "mcat: component count mismatch");
    T flat[R * C];
    int k = 0;
    int dummy[] = {0, (detail::put(flat, k, a), 0)...};
    (void)dummy;
    mat<T, R, C> m;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) m.rows[i].v[j] = flat[i * C + j];
    return m;
}
template <class T, int R, int C>
SJ_FN mat<T, R, C> msplat(detail::nodeduce<T> s) {
    mat<T, R, C> m;
    for (int i = 0; i < R; ++i) m.rows[i] = vsplat<T, C>(s);
    return m;
}

// Element-wise operators (HLSL `*` on matrices is element-wise; use sj::mul for products).
#define SJ_MAT_BINOP(OP)                                                                     \
    template <class T, int R, int C>                                                         \
    SJ_FN mat<T, R, C> operator OP(const mat<T, R, C>& a, const mat<T, R, C>& b) {           \
        mat<T, R, C> r;                                                                      \
        for (int i = 0; i < R; ++i) r.rows[i] = a.rows[i] OP b.rows[i];                      \
        return r;                                                                            \
    }                                                                                        \
    template <class T, int R, int C>                                                         \
    SJ_FN mat<T, R, C> operator OP(const mat<T, R, C>& a, detail::nodeduce<T> b) {           \
        mat<T, R, C> r;                                                                      \
        for (int i = 0; i < R; ++i) r.rows[i] = a.rows[i] OP b;                              \
        return r;                                                                            \
    }                                                                                        \
    template <class T, int R, int C>                                                         \
    SJ_FN mat<T, R, C> operator OP(detail::nodeduce<T> a, const mat<T, R, C>& b) {           \
        mat<T, R, C> r;                                                                      \
        for (int i = 0; i < R; ++i) r.rows[i] = a OP b.rows[i];                              \
        return r;                                                                            \
    }                                                                                        \
    template <class T, int R, int C>                                                         \
    SJ_FN mat<T, R, C>& operator OP##=(mat<T, R, C>& a, const mat<T, R, C>& b) {             \
        return a = a OP b;                                                                   \
    }                                                                                        \
    template <class T, int R, int C>                                                         \
    SJ_FN mat<T, R, C>& operator OP##=(mat<T, R, C>& a, detail::nodeduce<T> b) {             \
        return a = a OP b;                                                                   \
    }
SJ_MAT_BINOP(+)
SJ_MAT_BINOP(-)
SJ_MAT_BINOP(*)
SJ_MAT_BINOP(/)
SJ_MAT_BINOP(%)
SJ_MAT_BINOP(&)
SJ_MAT_BINOP(|)
SJ_MAT_BINOP(^)
#undef SJ_MAT_BINOP

#define SJ_MAT_CMP(OP)                                                                      \
    template <class T, int R, int C>                                                        \
    SJ_FN mat<bool, R, C> operator OP(const mat<T, R, C>& a, const mat<T, R, C>& b) {       \
        mat<bool, R, C> r;                                                                  \
        for (int i = 0; i < R; ++i) r.rows[i] = a.rows[i] OP b.rows[i];                     \
        return r;                                                                           \
    }
SJ_MAT_CMP(==)
SJ_MAT_CMP(!=)
SJ_MAT_CMP(<)
SJ_MAT_CMP(>)
SJ_MAT_CMP(<=)
SJ_MAT_CMP(>=)
#undef SJ_MAT_CMP

template <class T, int R, int C>
SJ_FN mat<T, R, C> operator-(const mat<T, R, C>& a) {
    mat<T, R, C> r;
    for (int i = 0; i < R; ++i) r.rows[i] = -a.rows[i];
    return r;
}
template <class T, int R, int C>
SJ_FN mat<T, R, C> operator+(const mat<T, R, C>& a) { return a; }
template <class T, int R, int C>
SJ_FN mat<bool, R, C> operator!(const mat<T, R, C>& a) {
    mat<bool, R, C> r;
    for (int i = 0; i < R; ++i) r.rows[i] = !a.rows[i];
    return r;
}
template <class T, int R, int C>
SJ_FN mat<T, R, C>& operator++(mat<T, R, C>& a) { return a += T(1); }
template <class T, int R, int C>
SJ_FN mat<T, R, C>& operator--(mat<T, R, C>& a) { return a -= T(1); }

// ---- products.  Vectors on the left are rows, on the right columns (HLSL mul).
template <class T, int R, int K, int C>
SJ_FN mat<T, R, C> mul(const mat<T, R, K>& a, const mat<T, K, C>& b) {
    mat<T, R, C> r;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) {
            T s = T(0);
            for (int k = 0; k < K; ++k) s = T(s + a.rows[i].v[k] * b.rows[k].v[j]);
            r.rows[i].v[j] = s;
        }
    return r;
}
template <class T, int R, int C>
SJ_FN vec<T, R> mul(const mat<T, R, C>& m, const vec<T, C>& x) {
    vec<T, R> r;
    for (int i = 0; i < R; ++i) {
        T s = T(0);
        for (int k = 0; k < C; ++k) s = T(s + m.rows[i].v[k] * x.v[k]);
        r.v[i] = s;
    }
    return r;
}
template <class T, int R, int C>
SJ_FN vec<T, C> mul(const vec<T, R>& x, const mat<T, R, C>& m) {
    vec<T, C> r;
    for (int j = 0; j < C; ++j) {
        T s = T(0);
        for (int k = 0; k < R; ++k) s = T(s + x.v[k] * m.rows[k].v[j]);
        r.v[j] = s;
    }
    return r;
}
template <class T, int N>
SJ_FN T mul(const vec<T, N>& a, const vec<T, N>& b) {
    T s = T(0);
    for (int i = 0; i < N; ++i) s = T(s + a.v[i] * b.v[i]);
    return s;
}
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN T mul(T a, T b) { return T(a * b); }
template <class T, int N>
SJ_FN vec<T, N> mul(detail::nodeduce<T> s, const vec<T, N>& x) { return s * x; }
template <class T, int N>
SJ_FN vec<T, N> mul(const vec<T, N>& x, detail::nodeduce<T> s) { return x * s; }
template <class T, int R, int C>
SJ_FN mat<T, R, C> mul(detail::nodeduce<T> s, const mat<T, R, C>& m) { return s * m; }
template <class T, int R, int C>
SJ_FN mat<T, R, C> mul(const mat<T, R, C>& m, detail::nodeduce<T> s) { return m * s; }

template <class T, int R, int C>
SJ_FN mat<T, C, R> transpose(const mat<T, R, C>& m) {
    mat<T, C, R> r;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) r.rows[j].v[i] = m.rows[i].v[j];
    return r;
}

template <class T>
SJ_FN T determinant(const mat<T, 1, 1>& m) { return m.rows[0].v[0]; }
template <class T>
SJ_FN T determinant(const mat<T, 2, 2>& m) {
    return T(m.rows[0].v[0] * m.rows[1].v[1] - m.rows[0].v[1] * m.rows[1].v[0]);
}
template <class T>
SJ_FN T determinant(const mat<T, 3, 3>& m) {
    const vec<T, 3>&a = m.rows[0], &b = m.rows[1], &c = m.rows[2];
    return T(a.v[0] * (b.v[1] * c.v[2] - b.v[2] * c.v[1]) - a.v[1] * (b.v[0] * c.v[2] - b.v[2] * c.v[0]) +
             a.v[2] * (b.v[0] * c.v[1] - b.v[1] * c.v[0]));
}
template <class T>
SJ_FN T determinant(const mat<T, 4, 4>& m) {
    // Laplace expansion along the first two rows using 2x2 minors.
    const T* r0 = m.rows[0].v; const T* r1 = m.rows[1].v;
    const T* r2 = m.rows[2].v; const T* r3 = m.rows[3].v;
    const T s0 = r0[0] * r1[1] - r1[0] * r0[1];
    const T s1 = r0[0] * r1[2] - r1[0] * r0[2];
    const T s2 = r0[0] * r1[3] - r1[0] * r0[3];
    const T s3 = r0[1] * r1[2] - r1[1] * r0[2];
    const T s4 = r0[1] * r1[3] - r1[1] * r0[3];
    const T s5 = r0[2] * r1[3] - r1[2] * r0[3];
    const T c5 = r2[2] * r3[3] - r3[2] * r2[3];
    const T c4 = r2[1] * r3[3] - r3[1] * r2[3];
    const T c3 = r2[1] * r3[2] - r3[1] * r2[2];
    const T c2 = r2[0] * r3[3] - r3[0] * r2[3];
    const T c1 = r2[0] * r3[2] - r3[0] * r2[2];
    const T c0 = r2[0] * r3[1] - r3[0] * r2[1];
    return T(s0 * c5 - s1 * c4 + s2 * c3 + s3 * c2 - s4 * c1 + s5 * c0);
}

// ============================================================================ arrays
// Value-semantics fixed array (C arrays cannot be returned or assigned).
template <class T, int N>
struct array {
    T data[N];
    template <class I> SJ_FN T& operator[](I i) { return data[i]; }
    template <class I> SJ_FN const T& operator[](I i) const { return data[i]; }
    SJ_FN uint32_t getCount() const { return uint32_t(N); }
};

// ============================================================================ conversions
// convert<To>(x): scalar->scalar static_cast, vec->vec / mat->mat element-wise (same shape,
// or truncation to a smaller shape as HLSL allows), scalar->vec/mat splat, vec->scalar
// takes .x, identity for everything else.  Float->int of NaN/out-of-range values is a
// plain static_cast (an unspecified value on x86/aarch64, never a trap).
namespace detail {
template <class To, class From> struct conv {
    SJ_FN static To go(const From& x) { return static_cast<To>(x); }
};
template <class B, int M, class A, int N> struct conv<vec<B, M>, vec<A, N>> {
    SJ_FN static vec<B, M> go(const vec<A, N>& x) {
        static_assert(M <= N, "convert: cannot widen a vector");
        vec<B, M> r;
        for (int i = 0; i < M; ++i) r.v[i] = static_cast<B>(x.v[i]);
        return r;
    }
};
template <class B, int N, class A> struct conv<vec<B, N>, A> {
    SJ_FN static vec<B, N> go(const A& x) { return vsplat<B, N>(static_cast<B>(x)); }
};
template <class B, class A, int N> struct conv<B, vec<A, N>> {
    SJ_FN static B go(const vec<A, N>& x) { return static_cast<B>(x.v[0]); }
};
template <class B, int R2, int C2, class A, int R, int C> struct conv<mat<B, R2, C2>, mat<A, R, C>> {
    SJ_FN static mat<B, R2, C2> go(const mat<A, R, C>& x) {
        static_assert(R2 <= R && C2 <= C, "convert: cannot widen a matrix");
        mat<B, R2, C2> r;
        for (int i = 0; i < R2; ++i)
            for (int j = 0; j < C2; ++j) r.rows[i].v[j] = static_cast<B>(x.rows[i].v[j]);
        return r;
    }
};
template <class B, int R, int C, class A> struct conv<mat<B, R, C>, A> {
    SJ_FN static mat<B, R, C> go(const A& x) { return msplat<B, R, C>(static_cast<B>(x)); }
};
}  // namespace detail
template <class To, class From>
SJ_FN To convert(const From& x) { return detail::conv<To, From>::go(x); }

// ============================================================================ math
// Lifting of scalar functions to vectors and matrices (element-wise).  The result element
// type follows the scalar overload, so isnan(vec<float,3>) is vec<bool,3>.
#define SJ_LIFT1(name)                                                                        \
    template <class T, int N>                                                                 \
    SJ_FN auto name(const vec<T, N>& a)->vec<decltype(name(a.v[0])), N> {                     \
        vec<decltype(name(a.v[0])), N> r;                                                     \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i]);                                    \
        return r;                                                                             \
    }                                                                                         \
    template <class T, int R, int C>                                                          \
    SJ_FN auto name(const mat<T, R, C>& a)->mat<decltype(name(a.rows[0].v[0])), R, C> {       \
        mat<decltype(name(a.rows[0].v[0])), R, C> r;                                          \
        for (int i = 0; i < R; ++i) r.rows[i] = name(a.rows[i]);                              \
        return r;                                                                             \
    }
#define SJ_LIFT2(name)                                                                        \
    template <class T, int N>                                                                 \
    SJ_FN vec<T, N> name(const vec<T, N>& a, const vec<T, N>& b) {                            \
        vec<T, N> r;                                                                          \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i], b.v[i]);                            \
        return r;                                                                             \
    }                                                                                         \
    template <class T, int R, int C>                                                          \
    SJ_FN mat<T, R, C> name(const mat<T, R, C>& a, const mat<T, R, C>& b) {                   \
        mat<T, R, C> r;                                                                       \
        for (int i = 0; i < R; ++i) r.rows[i] = name(a.rows[i], b.rows[i]);                   \
        return r;                                                                             \
    }
#define SJ_LIFT3(name)                                                                        \
    template <class T, int N>                                                                 \
    SJ_FN vec<T, N> name(const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c) {        \
        vec<T, N> r;                                                                          \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i], b.v[i], c.v[i]);                    \
        return r;                                                                             \
    }                                                                                         \
    template <class T, int R, int C>                                                          \
    SJ_FN mat<T, R, C> name(const mat<T, R, C>& a, const mat<T, R, C>& b,                     \
                            const mat<T, R, C>& c) {                                          \
        mat<T, R, C> r;                                                                       \
        for (int i = 0; i < R; ++i) r.rows[i] = name(a.rows[i], b.rows[i], c.rows[i]);        \
        return r;                                                                             \
    }

// C math library wrappers: float uses the f-suffixed function, half goes through float.
#define SJ_CMATH1(name, cfn)                                                       \
    SJ_FN float name(float x) { return ::cfn##f(x); }                              \
    SJ_FN double name(double x) { return ::cfn(x); }                               \
    SJ_FN half name(half x) { return half(::cfn##f(float(x))); }                   \
    SJ_LIFT1(name)
#define SJ_CMATH2(name, cfn)                                                       \
    SJ_FN float name(float x, float y) { return ::cfn##f(x, y); }                  \
    SJ_FN double name(double x, double y) { return ::cfn(x, y); }                  \
    SJ_FN half name(half x, half y) { return half(::cfn##f(float(x), float(y))); } \
    SJ_LIFT2(name)

SJ_CMATH1(sin, sin)
SJ_CMATH1(cos, cos)
SJ_CMATH1(tan, tan)
SJ_CMATH1(asin, asin)
SJ_CMATH1(acos, acos)
SJ_CMATH1(atan, atan)
SJ_CMATH1(sinh, sinh)
SJ_CMATH1(cosh, cosh)
SJ_CMATH1(tanh, tanh)
SJ_CMATH1(asinh, asinh)
SJ_CMATH1(acosh, acosh)
SJ_CMATH1(atanh, atanh)
SJ_CMATH1(exp, exp)
SJ_CMATH1(exp2, exp2)
SJ_CMATH1(log, log)
SJ_CMATH1(log2, log2)
SJ_CMATH1(log10, log10)
SJ_CMATH1(sqrt, sqrt)
SJ_CMATH1(floor, floor)
SJ_CMATH1(ceil, ceil)
SJ_CMATH1(round, round)  // half-way cases away from zero, like C roundf
SJ_CMATH1(trunc, trunc)
SJ_CMATH2(atan2, atan2)
SJ_CMATH2(pow, pow)
SJ_CMATH2(fmod, fmod)
SJ_CMATH2(copysign, copysign)
SJ_CMATH2(fmin, fmin)
SJ_CMATH2(fmax, fmax)
#undef SJ_CMATH1
#undef SJ_CMATH2

SJ_FN float abs(float x) { return ::fabsf(x); }
SJ_FN double abs(double x) { return ::fabs(x); }
SJ_FN half abs(half x) { return half(::fabsf(float(x))); }
// abs(INT_MIN) == INT_MIN (wraps), computed without signed overflow.
template <class T, SJ_IF(detail::is_int<T>::value)>
SJ_FN T abs(T x) {
    typedef typename std::make_unsigned<T>::type U;
    return x < 0 ? T(U(0) - U(x)) : x;
}
SJ_LIFT1(abs)

// min/max: when exactly one operand is NaN the other one is returned (D3D rules / fmin),
// written as compares so the compiler can use minss/fminnm instead of a libm call.
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN T min(T a, T b) {
    typedef detail::calc_t<T> C;
    const C x = C(a), y = C(b);
    return T((x < y || y != y) ? x : y);
}
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN T max(T a, T b) {
    typedef detail::calc_t<T> C;
    const C x = C(a), y = C(b);
    return T((x > y || y != y) ? x : y);
}
template <class T, SJ_IF(detail::is_int<T>::value || std::is_same<T, bool>::value)>
SJ_FN T min(T a, T b) { return a < b ? a : b; }
template <class T, SJ_IF(detail::is_int<T>::value || std::is_same<T, bool>::value)>
SJ_FN T max(T a, T b) { return a > b ? a : b; }
SJ_LIFT2(min)
SJ_LIFT2(max)
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
SJ_LIFT3(clamp)

// sign returns int (HLSL); NaN gives 0.
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN int sign(T x) {
    typedef detail::calc_t<T> C;
    return int(C(x) > C(0)) - int(C(x) < C(0));
}
SJ_LIFT1(sign)

// Floating-point helpers computed in calc_t (float for half) and rounded once.
#define SJ_FPFN1(name, EXPR)                                         \
    template <class T, SJ_IF(detail::is_fp<T>::value)>               \
    SJ_FN T name(T x_) {                                             \
        typedef detail::calc_t<T> C;                                 \
        const C x = C(x_);                                           \
        return T(EXPR);                                              \
    }                                                                \
    SJ_LIFT1(name)
#define SJ_FPFN2(name, EXPR)                                         \
    template <class T, SJ_IF(detail::is_fp<T>::value)>               \
    SJ_FN T name(T x_, T y_) {                                       \
        typedef detail::calc_t<T> C;                                 \
        const C x = C(x_), y = C(y_);                                \
        return T(EXPR);                                              \
    }                                                                \
    SJ_LIFT2(name)
#define SJ_FPFN3(name, EXPR)                                         \
    template <class T, SJ_IF(detail::is_fp<T>::value)>               \
    SJ_FN T name(T x_, T y_, T z_) {                                 \
        typedef detail::calc_t<T> C;                                 \
        const C x = C(x_), y = C(y_), z = C(z_);                     \
        return T(EXPR);                                              \
    }                                                                \
    SJ_LIFT3(name)

SJ_FPFN1(rsqrt, C(1) / sqrt(x))
SJ_FPFN1(rcp, C(1) / x)
SJ_FPFN1(frac, x - floor(x))
SJ_FPFN1(saturate, x < C(0) ? C(0) : (x > C(1) ? C(1) : x))  // NaN -> NaN
SJ_FPFN1(degrees, x * C(57.295779513082320876798154814105))
SJ_FPFN1(radians, x * C(0.017453292519943295769236907684886))
SJ_FPFN2(step, y >= x ? C(1) : C(0))          // step(edge, x)
SJ_FPFN2(ldexp, x * exp2(y))                  // HLSL: exponent is a float
SJ_FPFN3(lerp, x + (y - x) * z)
// smoothstep(lo, hi, x): Hermite ramp of saturate((x - lo) / (hi - lo)).
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN T smoothstep(T lo, T hi, T x) {
    typedef detail::calc_t<T> C;
    C t = (C(x) - C(lo)) / (C(hi) - C(lo));
    t = t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
    return T(t * t * (C(3) - C(2) * t));
}
SJ_LIFT3(smoothstep)
SJ_FN float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
SJ_FN double fma(double a, double b, double c) { return ::fma(a, b, c); }
SJ_FN half fma(half a, half b, half c) { return half(::fmaf(float(a), float(b), float(c))); }
SJ_LIFT3(fma)
// mad is a*b+c, not necessarily fused; valid for integers too.
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN T mad(T a, T b, T c) {
    typedef detail::calc_t<T> C;
    return T(C(a) * C(b) + C(c));
}
SJ_LIFT3(mad)
SJ_FN float ldexp(float x, int e) { return ::ldexpf(x, e); }
SJ_FN double ldexp(double x, int e) { return ::ldexp(x, e); }
#undef SJ_FPFN1
#undef SJ_FPFN2
#undef SJ_FPFN3

// Classification: compare-based so it also works for half and under CUDA.
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN bool isnan(T x) { typedef detail::calc_t<T> C; return C(x) != C(x); }
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN bool isfinite(T x) { typedef detail::calc_t<T> C; return C(x) - C(x) == C(0); }
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN bool isinf(T x) { return !isnan(x) && !isfinite(x); }
SJ_LIFT1(isnan)
SJ_LIFT1(isfinite)
SJ_LIFT1(isinf)

// out-parameter functions
SJ_FN float frexp(float x, int& e) { return ::frexpf(x, &e); }
SJ_FN double frexp(double x, int& e) { return ::frexp(x, &e); }
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN T frexp(T x, T& e) {  // HLSL: exponent returned in a float
    int ie = 0;
    const T m = T(frexp(detail::calc_t<T>(x), ie));
    e = T(ie);
    return m;
}
SJ_FN float modf(float x, float& ip) { return ::modff(x, &ip); }
SJ_FN double modf(double x, double& ip) { return ::modf(x, &ip); }
SJ_FN half modf(half x, half& ip) {
    float fi = 0.0f;
    const float fr = ::modff(float(x), &fi);
    ip = half(fi);
    return half(fr);
}
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN void sincos(T x, T& s, T& c) { s = sin(x); c = cos(x); }
#define SJ_LIFT_OUT2(name)                                                      \
    template <class T, class E, int N>                                             \
    SJ_FN vec<T, N> name(const vec<T, N>& x, vec<E, N>& e) {                       \
        vec<T, N> r;                                                               \
        for (int i = 0; i < N; ++i) r.v[i] = name(x.v[i], e.v[i]);                 \
        return r;                                                                  \
    }                                                                              \
    template <class T, class E, int Rr, int C>                                     \
    SJ_FN mat<T, Rr, C> name(const mat<T, Rr, C>& x, mat<E, Rr, C>& e) {           \
        mat<T, Rr, C> r;                                                           \
        for (int i = 0; i < Rr; ++i) r.rows[i] = name(x.rows[i], e.rows[i]);       \
        return r;                                                                  \
    }
SJ_LIFT_OUT2(frexp)
SJ_LIFT_OUT2(modf)
#undef SJ_LIFT_OUT2
template <class T, int N>
SJ_FN void sincos(const vec<T, N>& x, vec<T, N>& s, vec<T, N>& c) {
    for (int i = 0; i < N; ++i) sincos(x.v[i], s.v[i], c.v[i]);
}
template <class T, int R, int C>
SJ_FN void sincos(const mat<T, R, C>& x, mat<T, R, C>& s, mat<T, R, C>& c) {
    for (int i = 0; i < R; ++i) sincos(x.rows[i], s.rows[i], c.rows[i]);
}

// ---- geometric functions
template <class T, int N>
SJ_FN T dot(const vec<T, N>& a, const vec<T, N>& b) {
    typedef detail::calc_t<T> C;
    C s = C(0);
    for (int i = 0; i < N; ++i) s = C(s + C(a.v[i]) * C(b.v[i]));
    return T(s);
}
template <class T>
SJ_FN vec<T, 3> cross(const vec<T, 3>& a, const vec<T, 3>& b) {
    return vec<T, 3>{{T(a.v[1] * b.v[2] - a.v[2] * b.v[1]), T(a.v[2] * b.v[0] - a.v[0] * b.v[2]),
                      T(a.v[0] * b.v[1] - a.v[1] * b.v[0])}};
}
template <class T, int N>
SJ_FN T length(const vec<T, N>& a) {
    typedef detail::calc_t<T> C;
    C s = C(0);
    for (int i = 0; i < N; ++i) s += C(a.v[i]) * C(a.v[i]);
    return T(sqrt(s));
}
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN T length(T x) { return abs(x); }
template <class T, int N>
SJ_FN vec<T, N> normalize(const vec<T, N>& a) {
    typedef detail::calc_t<T> C;
    C s = C(0);
    for (int i = 0; i < N; ++i) s += C(a.v[i]) * C(a.v[i]);
    const C inv = C(1) / sqrt(s);
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = T(C(a.v[i]) * inv);
    return r;
}
template <class T, int N>
SJ_FN T distance(const vec<T, N>& a, const vec<T, N>& b) { return length(a - b); }
template <class T, SJ_IF(detail::is_fp<T>::value)>
SJ_FN T distance(T a, T b) { return abs(T(a - b)); }
template <class T, int N>
SJ_FN vec<T, N> reflect(const vec<T, N>& i, const vec<T, N>& n) {
    return i - T(T(2) * dot(n, i)) * n;
}
template <class T, int N>
SJ_FN vec<T, N> refract(const vec<T, N>& i, const vec<T, N>& n, detail::nodeduce<T> eta) {
    typedef detail::calc_t<T> C;
    const C d = C(dot(n, i)), e = C(eta);
    const C k = C(1) - e * e * (C(1) - d * d);
    if (k < C(0)) return vsplat<T, N>(T(0));
    return T(e) * i - T(e * d + sqrt(k)) * n;
}
template <class T, int N>
SJ_FN vec<T, N> faceforward(const vec<T, N>& n, const vec<T, N>& i, const vec<T, N>& ng) {
    return dot(ng, i) < T(0) ? n : -n;
}

// ---- any / all / select
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN bool any(T x) { return x != T(0); }
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN bool all(T x) { return x != T(0); }
template <class T, int N>
SJ_FN bool any(const vec<T, N>& x) {
    bool r = false;
    for (int i = 0; i < N; ++i) r = r || (x.v[i] != T(0));
    return r;
}
template <class T, int N>
SJ_FN bool all(const vec<T, N>& x) {
    bool r = true;
    for (int i = 0; i < N; ++i) r = r && (x.v[i] != T(0));
    return r;
}
template <class T, int R, int C>
SJ_FN bool any(const mat<T, R, C>& x) {
    bool r = false;
    for (int i = 0; i < R; ++i) r = r || any(x.rows[i]);
    return r;
}
template <class T, int R, int C>
SJ_FN bool all(const mat<T, R, C>& x) {
    bool r = true;
    for (int i = 0; i < R; ++i) r = r && all(x.rows[i]);
    return r;
}
// Both sides are evaluated (they are already values here), as in HLSL select().
template <class T>
SJ_FN T select(bool c, const T& a, const T& b) { return c ? a : b; }
template <class T, int N>
SJ_FN vec<T, N> select(const vec<bool, N>& c, const vec<T, N>& a, const vec<T, N>& b) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = c.v[i] ? a.v[i] : b.v[i];
    return r;
}
template <class T, int N, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN vec<T, N> select(const vec<bool, N>& c, T a, T b) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = c.v[i] ? a : b;
    return r;
}
// Element-wise logical and/or on bool vectors (Slang `and()`/`or()`; C++ reserves the names).
SJ_FN bool and_(bool a, bool b) { return a && b; }
SJ_FN bool or_(bool a, bool b) { return a || b; }
template <int N>
SJ_FN vec<bool, N> and_(const vec<bool, N>& a, const vec<bool, N>& b) { return a && b; }
template <int N>
SJ_FN vec<bool, N> or_(const vec<bool, N>& a, const vec<bool, N>& b) { return a || b; }

// ============================================================================ bit operations
template <class T, SJ_IF(detail::is_int<T>::value)>
SJ_FN uint32_t countbits(T x) {
    typedef typename std::make_unsigned<T>::type U;
    return sizeof(T) == 8 ? uint32_t(SJ_POPC64(uint64_t(U(x)))) : uint32_t(SJ_POPC32(uint32_t(U(x))));
}
// Index of the highest set bit; for negative signed values the highest *clear* bit (the
// first bit that differs from the sign).  No such bit -> all ones (-1 / 0xFFFFFFFF).
template <class T, SJ_IF(detail::is_int<T>::value)>
SJ_FN T firstbithigh(T x) {
    typedef typename std::make_unsigned<T>::type U;
    U u = U(x);
    if constexpr (std::is_signed<T>::value) {
        if (x < 0) u = U(~u);
    }
    if (u == 0) return T(~T(0));
    if (sizeof(T) == 8) return T(63 - SJ_CLZ64(uint64_t(u)));
    return T(31 - SJ_CLZ32(uint32_t(u)));
}
template <class T, SJ_IF(detail::is_int<T>::value)>
SJ_FN T firstbitlow(T x) {
    typedef typename std::make_unsigned<T>::type U;
    const U u = U(x);
    if (u == 0) return T(~T(0));
    if (sizeof(T) == 8) return T(SJ_CTZ64(uint64_t(u)));
    return T(SJ_CTZ32(uint32_t(u)));
}
namespace detail {
SJ_FN uint32_t rev32(uint32_t x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
    return (x >> 16) | (x << 16);
}
}  // namespace detail
// Reverses the bits within the width of T.
template <class T, SJ_IF(detail::is_int<T>::value)>
SJ_FN T reversebits(T x) {
    typedef typename std::make_unsigned<T>::type U;
    if constexpr (sizeof(T) == 8) {
        const uint64_t u = uint64_t(x);
        return T((uint64_t(detail::rev32(uint32_t(u))) << 32) | uint64_t(detail::rev32(uint32_t(u >> 32))));
    } else {
        return T(U(detail::rev32(uint32_t(U(x))) >> (32 - 8 * sizeof(T))));
    }
}
SJ_LIFT1(countbits)
SJ_LIFT1(firstbithigh)
SJ_LIFT1(firstbitlow)
SJ_LIFT1(reversebits)

// ---- reinterpretation
SJ_FN float asfloat(uint32_t x) { return bit_cast<float>(x); }
SJ_FN float asfloat(int32_t x) { return bit_cast<float>(x); }
SJ_FN float asfloat(float x) { return x; }
SJ_FN uint32_t asuint(float x) { return bit_cast<uint32_t>(x); }
SJ_FN uint32_t asuint(int32_t x) { return uint32_t(x); }
SJ_FN uint32_t asuint(uint32_t x) { return x; }
SJ_FN int32_t asint(float x) { return bit_cast<int32_t>(x); }
SJ_FN int32_t asint(uint32_t x) { return int32_t(x); }
SJ_FN int32_t asint(int32_t x) { return x; }
SJ_FN double asdouble(uint32_t lo, uint32_t hi) { return bit_cast<double>(uint64_t(lo) | (uint64_t(hi) << 32)); }
SJ_FN void asuint(double d, uint32_t& lo, uint32_t& hi) {
    const uint64_t b = bit_cast<uint64_t>(d);
    lo = uint32_t(b);
    hi = uint32_t(b >> 32);
}
SJ_FN half asfloat16(uint16_t x) { return bit_cast<half>(x); }
SJ_FN half asfloat16(int16_t x) { return bit_cast<half>(x); }
SJ_FN half asfloat16(half x) { return x; }
SJ_FN uint16_t asuint16(half x) { return bit_cast<uint16_t>(x); }
SJ_FN uint16_t asuint16(uint16_t x) { return x; }
SJ_FN uint16_t asuint16(int16_t x) { return uint16_t(x); }
SJ_FN int16_t asint16(half x) { return bit_cast<int16_t>(x); }
SJ_FN int16_t asint16(uint16_t x) { return int16_t(x); }
SJ_FN int16_t asint16(int16_t x) { return x; }
// f32tof16 rounds to nearest-even; the half lives in the low 16 bits of the uint.
SJ_FN float f16tof32(uint32_t x) { return float(bit_cast<half>(uint16_t(x & 0xFFFFu))); }
SJ_FN uint32_t f32tof16(float x) { return uint32_t(bit_cast<uint16_t>(half(x))); }
SJ_LIFT1(asfloat)
SJ_LIFT1(asuint)
SJ_LIFT1(asint)
SJ_LIFT1(asfloat16)
SJ_LIFT1(asuint16)
SJ_LIFT1(asint16)
SJ_LIFT1(f16tof32)
SJ_LIFT1(f32tof16)
template <int N>
SJ_FN vec<double, N> asdouble(const vec<uint32_t, N>& lo, const vec<uint32_t, N>& hi) {
    vec<double, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = asdouble(lo.v[i], hi.v[i]);
    return r;
}
#undef SJ_LIFT1
#undef SJ_LIFT2
#undef SJ_LIFT3

// ============================================================================ atomics
// All atomic RMW ops return the previous value.  Integers use native fetch ops; float and
// double use a compare-exchange loop on the object bytes (so -0.0/NaN payloads compare
// bitwise, like InterlockedCompareExchangeFloatBitwise).  half uses either a 16-bit CAS
// or a CAS on the aligned 32-bit word containing it (SJ_HALF_CAS_VIA_WORD); both work
// for any 2-byte aligned half, no 4-byte alignment needed.
namespace detail {
template <class T>
SJ_FN T atomic_load(T* p) {
    T r;
    SJ_ATOMIC_LOAD(p, &r);
    return r;
}
template <class T, class F>
SJ_FN T cas_update(T* p, F f) {
    T old = atomic_load(p);
    T nv;
    do { nv = f(old); } while (!SJ_ATOMIC_CAS(p, &old, &nv));
    return old;
}
template <class F>
SJ_FN half cas_update_half(half* p, F f) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    uint32_t* w = reinterpret_cast<uint32_t*>(a & ~uintptr_t(3));
    SJ_LAUNDER_PTR(w);
    const unsigned sh = unsigned(a & 2u) * 8u;  // little-endian: low half at the lower address
    uint32_t old = atomic_load(w);
    uint32_t nw;
    half oh;
    do {
        oh = bit_cast<half>(uint16_t(old >> sh));
        const uint16_t nb = bit_cast<uint16_t>(half(f(oh)));
        nw = (old & ~(0xFFFFu << sh)) | (uint32_t(nb) << sh);
    } while (!SJ_ATOMIC_CAS(w, &old, &nw));
    return oh;
}
template <class T, class F>
SJ_FN T update(T* p, F f) {
    if constexpr (is_half<T>::value && SJ_HALF_CAS_VIA_WORD) return cas_update_half(p, f);
    else return cas_update(p, f);
}

template <class T> SJ_FN T atomic_add(T* p, T v) {
#if SJ_CUDA
    if constexpr (is_fp<T>::value) return ::sj_cuda::add_fp(p, v);  // native float/double/half atomicAdd
#endif
    if constexpr (is_int<T>::value) return SJ_ATOMIC_FETCH_ADD(p, v);
    else return update(p, [&](T o) { return T(o + v); });
}
template <class T> SJ_FN T atomic_sub(T* p, T v) {
    if constexpr (is_int<T>::value) return SJ_ATOMIC_FETCH_SUB(p, v);
    else return update(p, [&](T o) { return T(o - v); });
}
template <class T> SJ_FN T atomic_and(T* p, T v) { return SJ_ATOMIC_FETCH_AND(p, v); }
template <class T> SJ_FN T atomic_or(T* p, T v) { return SJ_ATOMIC_FETCH_OR(p, v); }
template <class T> SJ_FN T atomic_xor(T* p, T v) { return SJ_ATOMIC_FETCH_XOR(p, v); }
template <class T> SJ_FN T atomic_min(T* p, T v) {
#if SJ_CUDA
    if constexpr (is_int<T>::value && (sizeof(T) == 4 || sizeof(T) == 8)) return ::sj_cuda::min_int(p, v);
#endif
    return update(p, [&](T o) { return ::sj::min(o, v); });
}
template <class T> SJ_FN T atomic_max(T* p, T v) {
#if SJ_CUDA
    if constexpr (is_int<T>::value && (sizeof(T) == 4 || sizeof(T) == 8)) return ::sj_cuda::max_int(p, v);
#endif
    return update(p, [&](T o) { return ::sj::max(o, v); });
}
template <class T> SJ_FN T atomic_exchange(T* p, T v) {
    if constexpr (is_int<T>::value) return SJ_ATOMIC_XCHG(p, v);
    else return update(p, [&](T) { return v; });
}
// Returns the previous value; stores v only if the previous bytes equal cmp's bytes.
template <class T> SJ_FN T atomic_cas(T* p, T cmp, T v) {
    if constexpr (is_half<T>::value && SJ_HALF_CAS_VIA_WORD) {
        const uint16_t cb = bit_cast<uint16_t>(cmp);
        return cas_update_half(p, [&](half o) { return bit_cast<uint16_t>(o) == cb ? v : o; });
    } else {
        T expected = cmp;
        SJ_ATOMIC_CAS(p, &expected, &v);
        return expected;  // on failure the builtin wrote the current value here
    }
}
template <class T> SJ_FN void atomic_store(T* p, T v) {
    if constexpr (is_half<T>::value && SJ_HALF_CAS_VIA_WORD) atomic_exchange(p, v);
    else SJ_ATOMIC_STORE(p, &v);
}
}  // namespace detail

// Slang's Atomic<T>.  Exactly a T in memory, so RWStructuredBuffer<Atomic<T>> reads back as
// plain T bytes.  The trailing int parameters accept (and ignore) Slang MemoryOrder values;
// every operation is sequentially consistent.
template <class T>
struct Atomic {
    T value;
    SJ_FN T load(int = 0) { return detail::atomic_load(&value); }
    SJ_FN void store(T v, int = 0) { detail::atomic_store(&value, v); }
    SJ_FN T add(T v, int = 0) { return detail::atomic_add(&value, v); }
    SJ_FN T sub(T v, int = 0) { return detail::atomic_sub(&value, v); }
    SJ_FN T max(T v, int = 0) { return detail::atomic_max(&value, v); }
    SJ_FN T min(T v, int = 0) { return detail::atomic_min(&value, v); }
    SJ_FN T and_(T v, int = 0) { return detail::atomic_and(&value, v); }
    SJ_FN T or_(T v, int = 0) { return detail::atomic_or(&value, v); }
    SJ_FN T xor_(T v, int = 0) { return detail::atomic_xor(&value, v); }
    SJ_FN T exchange(T v, int = 0) { return detail::atomic_exchange(&value, v); }
    SJ_FN T compareExchange(T cmp, T v, int = 0, int = 0) { return detail::atomic_cas(&value, cmp, v); }
    SJ_FN T increment(int = 0) { return detail::atomic_add(&value, T(1)); }
    SJ_FN T decrement(int = 0) { return detail::atomic_sub(&value, T(1)); }
};

// HLSL Interlocked* on any lvalue (groupshared, buffer element, local).
#define SJ_INTERLOCKED(NAME, OP)                                                               \
    template <class T>                                                                         \
    SJ_FN void NAME(T& dest, detail::nodeduce<T> v) { (void)detail::OP(&dest, v); }            \
    template <class T>                                                                         \
    SJ_FN void NAME(T& dest, detail::nodeduce<T> v, T& original) { original = detail::OP(&dest, v); }
#if SJ_CUDA
// CUDA: a floating-point InterlockedAdd without `original` is warp-aggregated (sj_cuda::red_add_fp).
template <class T>
SJ_FN void InterlockedAdd(T& dest, detail::nodeduce<T> v) {
    if constexpr (detail::is_fp<T>::value) ::sj_cuda::red_add_fp(&dest, T(v));
    else (void)detail::atomic_add(&dest, v);
}
template <class T>
SJ_FN void InterlockedAdd(T& dest, detail::nodeduce<T> v, T& original) { original = detail::atomic_add(&dest, v); }
#else
SJ_INTERLOCKED(InterlockedAdd, atomic_add)
#endif
SJ_INTERLOCKED(InterlockedMin, atomic_min)
SJ_INTERLOCKED(InterlockedMax, atomic_max)
SJ_INTERLOCKED(InterlockedAnd, atomic_and)
SJ_INTERLOCKED(InterlockedOr, atomic_or)
SJ_INTERLOCKED(InterlockedXor, atomic_xor)
#undef SJ_INTERLOCKED
template <class T>
SJ_FN void InterlockedExchange(T& dest, detail::nodeduce<T> v, T& original) {
    original = detail::atomic_exchange(&dest, v);
}
template <class T>
SJ_FN void InterlockedCompareExchange(T& dest, detail::nodeduce<T> cmp, detail::nodeduce<T> v, T& original) {
    original = detail::atomic_cas(&dest, cmp, v);
}
template <class T>
SJ_FN void InterlockedCompareStore(T& dest, detail::nodeduce<T> cmp, detail::nodeduce<T> v) {
    (void)detail::atomic_cas(&dest, cmp, v);
}

// ============================================================================ buffers
// Out-of-bounds accesses never touch memory outside [data, data+count): element access
// returns a per-thread scratch element that is zeroed on every OOB access, so an OOB read
// yields 0 and an OOB write lands in the scratch and is discarded.
namespace detail {
template <class T> struct alignas(T) scratch_bytes { unsigned char b[sizeof(T)]; };
template <class T>
SJ_FN T& oob_scratch() {
#if SJ_CUDA
    // CUDA: one device-global scratch element per type (there is no thread_local).  OOB writes
    // land there and are discarded; an OOB read sees 0 unless another thread's OOB write
    // races with it (out-of-bounds accesses are a program error on GPUs anyway).
    static scratch_bytes<T> s;
#else
    static thread_local scratch_bytes<T> s;
#endif
    memset(&s, 0, sizeof(T));
    return *reinterpret_cast<T*>(&s);
}
// Negative signed indices convert to huge unsigned values and fail the check.
template <class I>
SJ_FN bool in_bounds(I i, uint64_t count) {
    static_assert(std::is_integral<I>::value, "buffer index must be an integer");
    return static_cast<uint64_t>(i) < count;
}
}  // namespace detail

#define SJ_STRUCTURED_BUFFER(NAME)                                                            \
    template <class T>                                                                        \
    struct NAME {                                                                             \
        T* data;                                                                              \
        uint64_t count; /* elements */                                                        \
        template <class I>                                                                    \
        SJ_FN T& operator[](I i) const {                                                      \
            if (SJ_LIKELY(detail::in_bounds(i, count))) return data[static_cast<uint64_t>(i)];\
            return detail::oob_scratch<T>();                                                  \
        }                                                                                     \
        template <class I>                                                                    \
        SJ_FN T Load(I i) const { return (*this)[i]; }                                        \
        SJ_FN void GetDimensions(uint32_t& n, uint32_t& stride) const {                       \
            n = uint32_t(count);                                                              \
            stride = uint32_t(sizeof(T));                                                     \
        }                                                                                     \
        SJ_FN uint32_t getCount() const { return uint32_t(count); }                           \
    };
SJ_STRUCTURED_BUFFER(StructuredBuffer)
SJ_STRUCTURED_BUFFER(RWStructuredBuffer)
#undef SJ_STRUCTURED_BUFFER

// Byte-address buffers: offsets are in bytes; loads/stores use memcpy so any alignment
// works.  Interlocked ops align the offset down to the operand size (D3D ignores the low
// address bits) because hardware atomics require natural alignment.
#define SJ_BYTE_ADDRESS_BUFFER(NAME)                                                                  \
    struct NAME {                                                                                     \
        uint8_t* data;                                                                                \
        uint64_t count; /* bytes */                                                                   \
        SJ_FN bool fits(uint64_t off, uint64_t n) const { return off <= count && n <= count - off; }  \
        template <class T>                                                                            \
        SJ_FN T LoadT(uint64_t off) const {                                                           \
            T r;                                                                                      \
            if (SJ_LIKELY(fits(off, sizeof(T)))) memcpy(&r, data + off, sizeof(T));                   \
            else memset(&r, 0, sizeof(T));                                                            \
            return r;                                                                                 \
        }                                                                                             \
        SJ_FN uint32_t Load(uint64_t off) const { return LoadT<uint32_t>(off); }                      \
        SJ_FN vec<uint32_t, 2> Load2(uint64_t off) const { return LoadT<vec<uint32_t, 2>>(off); }     \
        SJ_FN vec<uint32_t, 3> Load3(uint64_t off) const { return LoadT<vec<uint32_t, 3>>(off); }     \
        SJ_FN vec<uint32_t, 4> Load4(uint64_t off) const { return LoadT<vec<uint32_t, 4>>(off); }     \
        SJ_FN void GetDimensions(uint32_t& n) const { n = uint32_t(count); }                          \
        SJ_FN uint32_t getCount() const { return uint32_t(count); }                                   \
        SJ_BYTE_ADDRESS_BUFFER_RW                                                                     \
    };

#define SJ_BYTE_ADDRESS_BUFFER_RW
SJ_BYTE_ADDRESS_BUFFER(ByteAddressBuffer)
#undef SJ_BYTE_ADDRESS_BUFFER_RW

#define SJ_BAB_ATOMIC(NAME, OP, W)                                                                  \
    template <class V>                                                                              \
    SJ_FN void NAME(uint64_t off, V v) const {                                                      \
        typedef W<V> T;                                                                             \
        if (T* p = word<T>(off)) (void)detail::OP(p, T(v));                                         \
    }                                                                                               \
    template <class V, class O>                                                                     \
    SJ_FN void NAME(uint64_t off, V v, O& orig) const {                                             \
        typedef W<V> T;                                                                             \
        T* p = word<T>(off);                                                                        \
        orig = p ? O(detail::OP(p, T(v))) : O(0);                                                   \
    }
#define SJ_BYTE_ADDRESS_BUFFER_RW                                                                         \
    template <class T>                                                                                    \
    SJ_FN void StoreT(uint64_t off, const T& v) const {                                                   \
        if (SJ_LIKELY(fits(off, sizeof(T)))) memcpy(data + off, &v, sizeof(T));                           \
    }                                                                                                     \
    SJ_FN void Store(uint64_t off, uint32_t v) const { StoreT(off, v); }                                  \
    SJ_FN void Store2(uint64_t off, const vec<uint32_t, 2>& v) const { StoreT(off, v); }                  \
    SJ_FN void Store3(uint64_t off, const vec<uint32_t, 3>& v) const { StoreT(off, v); }                  \
    SJ_FN void Store4(uint64_t off, const vec<uint32_t, 4>& v) const { StoreT(off, v); }                  \
    template <class T>                                                                                    \
    SJ_FN T* word(uint64_t off) const {                                                                   \
        off &= ~uint64_t(sizeof(T) - 1);                                                                  \
        return fits(off, sizeof(T)) ? reinterpret_cast<T*>(data + off) : nullptr;                        \
    }                                                                                                     \
    SJ_BAB_ATOMIC(InterlockedAdd, atomic_add, detail::word32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedMin, atomic_min, detail::word32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedMax, atomic_max, detail::word32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedAnd, atomic_and, detail::word32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedOr, atomic_or, detail::word32_t)                                             \
    SJ_BAB_ATOMIC(InterlockedXor, atomic_xor, detail::word32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedExchange, atomic_exchange, detail::word32_t)                                 \
    SJ_BAB_ATOMIC(InterlockedAdd64, atomic_add, detail::word64_t)                                         \
    SJ_BAB_ATOMIC(InterlockedMin64, atomic_min, detail::word64_t)                                         \
    SJ_BAB_ATOMIC(InterlockedMax64, atomic_max, detail::word64_t)                                         \
    SJ_BAB_ATOMIC(InterlockedAnd64, atomic_and, detail::word64_t)                                         \
    SJ_BAB_ATOMIC(InterlockedOr64, atomic_or, detail::word64_t)                                           \
    SJ_BAB_ATOMIC(InterlockedXor64, atomic_xor, detail::word64_t)                                         \
    SJ_BAB_ATOMIC(InterlockedExchange64, atomic_exchange, detail::word64_t)                               \
    SJ_BAB_ATOMIC(InterlockedAddF32, atomic_add, detail::f32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedMinF32, atomic_min, detail::f32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedMaxF32, atomic_max, detail::f32_t)                                           \
    SJ_BAB_ATOMIC(InterlockedExchangeF32, atomic_exchange, detail::f32_t)                                 \
    SJ_BAB_ATOMIC(InterlockedAddF16, atomic_add, detail::f16_t)                                           \
    SJ_BAB_ATOMIC(InterlockedAddF64, atomic_add, detail::f64_t)                                           \
    template <class V, class O>                                                                           \
    SJ_FN void InterlockedCompareExchange(uint64_t off, V cmp, V v, O& orig) const {                      \
        typedef detail::word32_t<V> T;                                                                    \
        T* p = word<T>(off);                                                                              \
        orig = p ? O(detail::atomic_cas(p, T(cmp), T(v))) : O(0);                                         \
    }                                                                                                     \
    template <class V>                                                                                    \
    SJ_FN void InterlockedCompareStore(uint64_t off, V cmp, V v) const {                                  \
        typedef detail::word32_t<V> T;                                                                    \
        if (T* p = word<T>(off)) (void)detail::atomic_cas(p, T(cmp), T(v));                               \
    }                                                                                                     \
    template <class V, class O>                                                                           \
    SJ_FN void InterlockedCompareExchange64(uint64_t off, V cmp, V v, O& orig) const {                    \
        typedef detail::word64_t<V> T;                                                                    \
        T* p = word<T>(off);                                                                              \
        orig = p ? O(detail::atomic_cas(p, T(cmp), T(v))) : O(0);                                         \
    }                                                                                                     \
    template <class V>                                                                                    \
    SJ_FN void InterlockedCompareStore64(uint64_t off, V cmp, V v) const {                                \
        typedef detail::word64_t<V> T;                                                                    \
        if (T* p = word<T>(off)) (void)detail::atomic_cas(p, T(cmp), T(v));                               \
    }

namespace detail {
// The signedness of the value argument picks signed or unsigned min/max, as in HLSL.
template <class V> using word32_t = typename std::conditional<std::is_signed<V>::value, int32_t, uint32_t>::type;
template <class V> using word64_t = typename std::conditional<std::is_signed<V>::value, int64_t, uint64_t>::type;
template <class V> using f32_t = float;
template <class V> using f64_t = double;
template <class V> using f16_t = half;
}  // namespace detail

SJ_BYTE_ADDRESS_BUFFER(RWByteAddressBuffer)
#undef SJ_BYTE_ADDRESS_BUFFER_RW
#undef SJ_BYTE_ADDRESS_BUFFER
#undef SJ_BAB_ATOMIC

static_assert(sizeof(StructuredBuffer<float>) == 16, "buffer handle layout");
static_assert(sizeof(RWStructuredBuffer<vec<float, 3>>) == 16, "buffer handle layout");
static_assert(sizeof(RWByteAddressBuffer) == 16, "buffer handle layout");
static_assert(sizeof(Atomic<half>) == 2 && sizeof(Atomic<double>) == 8, "Atomic<T> layout");
static_assert(sizeof(vec<float, 3>) == 12 && sizeof(mat<float, 3, 3>) == 36, "vector layout");
static_assert(std::is_standard_layout<Atomic<float>>::value, "Atomic<T> layout");

// ============================================================================ waves & barriers
#if SJ_CUDA
// CUDA: a wave is a warp of 32 lanes; the participating lanes are __activemask() (the lanes
// converged at the call, as in Slang's CUDA target).  Reductions over a full warp are
// __shfl_xor_sync butterflies (every lane ends with bit-identical results); over a partial
// mask each lane combines the active lanes' values in lane order with __shfl_sync.  Values of
// any type (scalars, vectors, matrices, arrays, structs) are shuffled as 32-bit words.
namespace detail {
SJ_FN uint32_t lane_id() { uint32_t r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
template <class T> SJ_FN T shfl(unsigned mask, const T& x, int lane) {
    if constexpr (sizeof(T) == 4 && std::is_trivially_copyable<T>::value) {
        return bit_cast<T>(__shfl_sync(mask, bit_cast<unsigned>(x), lane));
    } else {
        constexpr int W = int((sizeof(T) + 3) / 4);
        unsigned w[W];
        w[W - 1] = 0u;
        memcpy(w, &x, sizeof(T));
        for (int i = 0; i < W; ++i) w[i] = __shfl_sync(mask, w[i], lane);
        T r;
        memcpy(&r, w, sizeof(T));
        return r;
    }
}
template <class T> SJ_FN T shfl_xor(unsigned mask, const T& x, int m) {
    if constexpr (sizeof(T) == 4 && std::is_trivially_copyable<T>::value) {
        return bit_cast<T>(__shfl_xor_sync(mask, bit_cast<unsigned>(x), m));
    } else {
        constexpr int W = int((sizeof(T) + 3) / 4);
        unsigned w[W];
        w[W - 1] = 0u;
        memcpy(w, &x, sizeof(T));
        for (int i = 0; i < W; ++i) w[i] = __shfl_xor_sync(mask, w[i], m);
        T r;
        memcpy(&r, w, sizeof(T));
        return r;
    }
}
struct op_sum { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a + b); } };
struct op_prod { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a * b); } };
struct op_min { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return ::sj::min(a, b); } };
struct op_max { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return ::sj::max(a, b); } };
struct op_and { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a & b); } };
struct op_or { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a | b); } };
struct op_xor { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a ^ b); } };
template <class T, class Op> SJ_FN T wave_reduce(const T& x, Op op) {
    const unsigned mask = __activemask();
    if (mask == 0xFFFFFFFFu) {
        T v = x;
        for (int m = 1; m < 32; m <<= 1) v = op(v, shfl_xor(mask, v, m));
        return v;
    }
    unsigned rest = mask;
    const int first = __ffs(rest) - 1;
    rest &= rest - 1u;
    T v = shfl(mask, x, first);
    while (rest) {
        const int l = __ffs(rest) - 1;
        rest &= rest - 1u;
        v = op(v, shfl(mask, x, l));
    }
    return v;
}
// Exclusive scan over the active lanes below this one, in lane order.
template <class T, class Op> SJ_FN T wave_prefix(const T& x, Op op, const T& identity) {
    const unsigned mask = __activemask();
    const unsigned below = mask & ((1u << lane_id()) - 1u);
    T v = identity;
    unsigned rest = mask;
    while (rest) {
        const int l = __ffs(rest) - 1;
        rest &= rest - 1u;
        const T o = shfl(mask, x, l);
        if (below & (1u << l)) v = op(v, o);
    }
    return v;
}
}  // namespace detail
SJ_FN uint32_t WaveGetLaneIndex() { return detail::lane_id(); }
SJ_FN uint32_t WaveGetLaneCount() { return 32u; }
SJ_FN bool WaveIsFirstLane() { return int(detail::lane_id()) == __ffs(__activemask()) - 1; }
template <class T> SJ_FN T WaveActiveSum(const T& x) { return detail::wave_reduce(x, detail::op_sum()); }
template <class T> SJ_FN T WaveActiveProduct(const T& x) { return detail::wave_reduce(x, detail::op_prod()); }
template <class T> SJ_FN T WaveActiveMin(const T& x) { return detail::wave_reduce(x, detail::op_min()); }
template <class T> SJ_FN T WaveActiveMax(const T& x) { return detail::wave_reduce(x, detail::op_max()); }
template <class T> SJ_FN T WaveActiveBitAnd(const T& x) { return detail::wave_reduce(x, detail::op_and()); }
template <class T> SJ_FN T WaveActiveBitOr(const T& x) { return detail::wave_reduce(x, detail::op_or()); }
template <class T> SJ_FN T WaveActiveBitXor(const T& x) { return detail::wave_reduce(x, detail::op_xor()); }
template <class T> SJ_FN T WaveReadLaneFirst(const T& x) {
    const unsigned mask = __activemask();
    return detail::shfl(mask, x, __ffs(mask) - 1);
}
template <class T, class I> SJ_FN T WaveReadLaneAt(const T& x, I lane) { return detail::shfl(__activemask(), x, int(lane)); }
template <class T> SJ_FN T WaveBroadcastLaneAt(const T& x, int lane) { return detail::shfl(__activemask(), x, lane); }
template <class T> SJ_FN T WavePrefixSum(const T& x) { return detail::wave_prefix(x, detail::op_sum(), convert<T>(0)); }
template <class T> SJ_FN T WavePrefixProduct(const T& x) { return detail::wave_prefix(x, detail::op_prod(), convert<T>(1)); }
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN bool WaveActiveAllEqual(const T& x) {
    const unsigned mask = __activemask();
    const T f = detail::shfl(mask, x, __ffs(mask) - 1);
    return __all_sync(mask, detail::calc_t<T>(f) == detail::calc_t<T>(x)) != 0;
}
template <class T, int N>
SJ_FN vec<bool, N> WaveActiveAllEqual(const vec<T, N>& x) {
    vec<bool, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = WaveActiveAllEqual(x.v[i]);
    return r;
}
SJ_FN bool WaveActiveAllTrue(bool b) { return __all_sync(__activemask(), b) != 0; }
SJ_FN bool WaveActiveAnyTrue(bool b) { return __any_sync(__activemask(), b) != 0; }
SJ_FN uint32_t WaveActiveCountBits(bool b) { return uint32_t(__popc(__ballot_sync(__activemask(), b))); }
SJ_FN uint32_t WavePrefixCountBits(bool b) {
    return uint32_t(__popc(__ballot_sync(__activemask(), b) & ((1u << detail::lane_id()) - 1u)));
}
SJ_FN vec<uint32_t, 4> WaveActiveBallot(bool b) {
    return vec<uint32_t, 4>{{__ballot_sync(__activemask(), b), 0u, 0u, 0u}};
}
SJ_FN void AllMemoryBarrier() { __threadfence(); }
SJ_FN void AllMemoryBarrierWithGroupSync() { __threadfence(); __syncthreads(); }
SJ_FN void DeviceMemoryBarrier() { __threadfence(); }
SJ_FN void DeviceMemoryBarrierWithGroupSync() { __threadfence(); __syncthreads(); }
SJ_FN void GroupMemoryBarrier() { __threadfence_block(); }
SJ_FN void GroupMemoryBarrierWithGroupSync() { __syncthreads(); }
#else
// The CPU backend runs each thread as its own wave of size 1, so every wave operation is
// the identity / its single-lane value.
SJ_FN uint32_t WaveGetLaneIndex() { return 0u; }
SJ_FN uint32_t WaveGetLaneCount() { return 1u; }
SJ_FN bool WaveIsFirstLane() { return true; }
template <class T> SJ_FN T WaveActiveSum(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveProduct(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveMin(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveMax(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveBitAnd(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveBitOr(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveBitXor(const T& x) { return x; }
template <class T> SJ_FN T WaveReadLaneFirst(const T& x) { return x; }
template <class T, class I> SJ_FN T WaveReadLaneAt(const T& x, I) { return x; }
template <class T> SJ_FN T WaveBroadcastLaneAt(const T& x, int) { return x; }
template <class T> SJ_FN T WavePrefixSum(const T&) { return convert<T>(0); }
template <class T> SJ_FN T WavePrefixProduct(const T&) { return convert<T>(1); }
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN bool WaveActiveAllEqual(const T&) { return true; }
template <class T, int N>
SJ_FN vec<bool, N> WaveActiveAllEqual(const vec<T, N>&) { return vsplat<bool, N>(true); }
SJ_FN bool WaveActiveAllTrue(bool b) { return b; }
SJ_FN bool WaveActiveAnyTrue(bool b) { return b; }
SJ_FN uint32_t WaveActiveCountBits(bool b) { return b ? 1u : 0u; }
SJ_FN uint32_t WavePrefixCountBits(bool) { return 0u; }
SJ_FN vec<uint32_t, 4> WaveActiveBallot(bool b) { return vec<uint32_t, 4>{{b ? 1u : 0u, 0u, 0u, 0u}}; }

// Group barriers.  Kernels without a group-sync barrier run the threads of a group one after
// another (cheapest).  A kernel that uses one runs each thread of a group as a fiber
// (ucontext): a barrier switches back to the group's scheduler, which resumes every thread
// round-robin, so all threads reach the barrier before any passes it - the GPU semantics.
// Memory ordering between groups on different OS threads is only guaranteed for atomics.
namespace fiber {
struct Group {
    ucontext_t sched;
    ucontext_t* ctx = nullptr;
    char* stacks = nullptr;
    bool* done = nullptr;
    uint32_t cap = 0;
    uint32_t current = 0;
    void (*body)(void*, uint32_t) = nullptr;
    void* arg = nullptr;
};
static const size_t kStackSize = 256 * 1024;   // per thread of a group; untouched pages cost nothing
inline Group*& current_group() { static thread_local Group* g = nullptr; return g; }
inline void trampoline() {
    Group* g = current_group();
    uint32_t t = g->current;
    g->body(g->arg, t);
    g->done[t] = true;                         // returning resumes uc_link = the scheduler
}
// Runs body(arg, t) for t in [0, n) as cooperating fibers.
inline void run(uint32_t n, void (*body)(void*, uint32_t), void* arg) {
    static thread_local Group g;
    if (g.cap < n) {
        std::free(g.ctx); std::free(g.stacks); std::free(g.done);
        g.ctx = (ucontext_t*)std::malloc(sizeof(ucontext_t) * n);
        g.stacks = (char*)std::malloc(kStackSize * n);
        g.done = (bool*)std::malloc(n);
        g.cap = n;
    }
    g.body = body;
    g.arg = arg;
    Group* prev = current_group();
    current_group() = &g;
    for (uint32_t t = 0; t < n; ++t) {
        getcontext(&g.ctx[t]);
        g.ctx[t].uc_stack.ss_sp = g.stacks + kStackSize * t;
        g.ctx[t].uc_stack.ss_size = kStackSize;
        g.ctx[t].uc_link = &g.sched;
        makecontext(&g.ctx[t], (void (*)())trampoline, 0);
        g.done[t] = false;
    }
    bool pending = true;
    while (pending) {
        pending = false;
        for (uint32_t t = 0; t < n; ++t) {
            if (g.done[t]) continue;
            g.current = t;
            swapcontext(&g.sched, &g.ctx[t]);
            if (!g.done[t]) pending = true;
        }
    }
    current_group() = prev;
}
inline void barrier() {
    Group* g = current_group();
    if (g) swapcontext(&g->ctx[g->current], &g->sched);
}
}  // namespace fiber

SJ_FN void AllMemoryBarrier() {}
SJ_FN void AllMemoryBarrierWithGroupSync() { fiber::barrier(); }
SJ_FN void DeviceMemoryBarrier() {}
SJ_FN void DeviceMemoryBarrierWithGroupSync() { fiber::barrier(); }
SJ_FN void GroupMemoryBarrier() {}
SJ_FN void GroupMemoryBarrierWithGroupSync() { fiber::barrier(); }
#endif  // SJ_CUDA

}  // namespace sj
#undef SJ_IF
