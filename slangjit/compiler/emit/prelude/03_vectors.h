// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ vectors
// @section vectors needs: integer
template <class T, int N>
struct vec {
    static_assert(N >= 1, "vector size must be at least 1");   // > 4: CoopVec<T, N>
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
// @section swizzle needs: vectors
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
// @section vectors
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
