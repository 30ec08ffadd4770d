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
#if defined(__GLIBC__) && !defined(__CUDACC__) && !defined(SJ_STD_CMATH)
// The C math functions the prelude calls (::sinf, ::pow, ...), declared as glibc's <math.h> declares them
// (C linkage, noexcept): <cmath> with its C++ overloads and special functions is ~0.06 s of parsing per
// translation unit, more than the rest of the prelude.  The compiler knows them as built-ins either way.
extern "C" {
float acosf(float) noexcept; double acos(double) noexcept;
float acoshf(float) noexcept; double acosh(double) noexcept;
float asinf(float) noexcept; double asin(double) noexcept;
float asinhf(float) noexcept; double asinh(double) noexcept;
float atanf(float) noexcept; double atan(double) noexcept;
float atanhf(float) noexcept; double atanh(double) noexcept;
float ceilf(float) noexcept; double ceil(double) noexcept;
float cosf(float) noexcept; double cos(double) noexcept;
float coshf(float) noexcept; double cosh(double) noexcept;
float expf(float) noexcept; double exp(double) noexcept;
float exp2f(float) noexcept; double exp2(double) noexcept;
float fabsf(float) noexcept; double fabs(double) noexcept;
float floorf(float) noexcept; double floor(double) noexcept;
float logf(float) noexcept; double log(double) noexcept;
float log10f(float) noexcept; double log10(double) noexcept;
float log2f(float) noexcept; double log2(double) noexcept;
float roundf(float) noexcept; double round(double) noexcept;
float sinf(float) noexcept; double sin(double) noexcept;
float sinhf(float) noexcept; double sinh(double) noexcept;
float sqrtf(float) noexcept; double sqrt(double) noexcept;
float tanf(float) noexcept; double tan(double) noexcept;
float tanhf(float) noexcept; double tanh(double) noexcept;
float truncf(float) noexcept; double trunc(double) noexcept;
float atan2f(float, float) noexcept; double atan2(double, double) noexcept;
float copysignf(float, float) noexcept; double copysign(double, double) noexcept;
float fmaxf(float, float) noexcept; double fmax(double, double) noexcept;
float fminf(float, float) noexcept; double fmin(double, double) noexcept;
float fmodf(float, float) noexcept; double fmod(double, double) noexcept;
float powf(float, float) noexcept; double pow(double, double) noexcept;
float fmaf(float, float, float) noexcept; double fma(double, double, double) noexcept;
float frexpf(float, int*) noexcept; double frexp(double, int*) noexcept;
float ldexpf(float, int) noexcept; double ldexp(double, int) noexcept;
float modff(float, float*) noexcept; double modf(double, double*) noexcept;
}
#else
#include <cmath>
#endif
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

// The sections live in prelude/*.h; prelude_text() pastes them here in this order (C++ compilers
// can also read this file directly: the includes are relative to it).
#include "prelude/00_backend.h"
#include "prelude/00_slots.h"
#include "prelude/01_scalars.h"
#include "prelude/02_integer.h"
#include "prelude/03_vectors.h"
#include "prelude/04_matrices.h"
#include "prelude/05_arrays.h"
#include "prelude/06_conversions.h"
#include "prelude/07_math.h"
#include "prelude/08_bits.h"
#include "prelude/09_atomics.h"
#include "prelude/10_buffers.h"
#include "prelude/11_waves.h"
#include "prelude/12_dynamic.h"
#include "prelude/13_checks.h"
#include "prelude/14_printf.h"
