// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ math
// @section math_lift needs: vectors
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

// @section cmath needs: math_lift
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
// exp10 through pow: exact at integral exponents (C's exp10 is a GNU extension)
SJ_FN float exp10(float x) { return ::powf(10.0f, x); }
SJ_FN double exp10(double x) { return ::pow(10.0, x); }
SJ_FN half exp10(half x) { return half(::powf(10.0f, float(x))); }
SJ_LIFT1(exp10)

// @section minmax needs: math_lift
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

// @section math needs: math_lift cmath minmax
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
