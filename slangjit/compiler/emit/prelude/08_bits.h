// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ bit operations
// @section bits needs: math_lift
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
