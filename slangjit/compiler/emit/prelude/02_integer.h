// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ integer safety
// @section integer
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
