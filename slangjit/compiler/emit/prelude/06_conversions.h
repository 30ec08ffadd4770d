// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ conversions
// convert<To>(x): scalar->scalar static_cast, vec->vec / mat->mat element-wise (same shape,
// or truncation to a smaller shape as HLSL allows), scalar->vec/mat splat, vec->scalar
// takes .x, identity for everything else.  Float->int of NaN/out-of-range values is a
// plain static_cast (an unspecified value on x86/aarch64, never a trap).
// @section conversions needs: vectors
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
}  // namespace detail
// @section conv_mat auto needs: conversions matrices
namespace detail {
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
// @section conversions
template <class To, class From>
SJ_FN To convert(const From& x) { return detail::conv<To, From>::go(x); }
