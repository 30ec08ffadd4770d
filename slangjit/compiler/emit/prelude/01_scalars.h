// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// @section scalars always
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
// compiles to a register move).  Types of different sizes, as Slang's reinterpret: the leading
// bytes are copied and the rest of `To` is zero (reinterpret<float4>(1.0f) = (1, 0, 0, 0),
// reinterpret<int>(float4(...)) = the bits of .x).
template <class To, class From>
SJ_FN To bit_cast(const From& from) {
    static_assert(std::is_trivially_copyable<From>::value && std::is_trivially_copyable<To>::value,
                  "bit_cast: types must be trivially copyable");
    To to;
    if (sizeof(To) != sizeof(From)) memset(&to, 0, sizeof(To));
    memcpy(&to, &from, sizeof(To) < sizeof(From) ? sizeof(To) : sizeof(From));
    return to;
}
