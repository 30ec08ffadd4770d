// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ buffers
// Out-of-bounds accesses never touch memory outside [data, data+count): element access
// returns a per-thread scratch element that is zeroed on every OOB access, so an OOB read
// yields 0 and an OOB write lands in the scratch and is discarded.
// @section bounds
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

// @section buffers needs: bounds
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

// @section byte_buffers needs: bounds vectors atomics
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

// @section layout_checks auto needs: buffers byte_buffers atomics matrices
static_assert(sizeof(StructuredBuffer<float>) == 16, "buffer handle layout");
static_assert(sizeof(RWStructuredBuffer<vec<float, 3>>) == 16, "buffer handle layout");
static_assert(sizeof(RWByteAddressBuffer) == 16, "buffer handle layout");
static_assert(sizeof(Atomic<half>) == 2 && sizeof(Atomic<double>) == 8, "Atomic<T> layout");
static_assert(sizeof(vec<float, 3>) == 12 && sizeof(mat<float, 3, 3>) == 36, "vector layout");
static_assert(std::is_standard_layout<Atomic<float>>::value, "Atomic<T> layout");
