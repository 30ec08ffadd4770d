// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ matrices
// @section matrices needs: vectors
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
