// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ atomics
// @section atomics needs: cuda_atomics red_add minmax
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
