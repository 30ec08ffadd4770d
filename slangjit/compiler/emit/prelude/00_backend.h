// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ backend
// @section backend always
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SJ_CUDA 1
// Device-only: the generated code is never run on the host, and wave / atomic intrinsics are
// __device__ functions (a __host__ __device__ caller would be diagnosed by nvcc's host pass).
#define SJ_FN __device__ inline
#else
#define SJ_CUDA 0
#define SJ_FN inline
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SJ_LIKELY(x) __builtin_expect(!!(x), 1)
#define SJ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define SJ_LIKELY(x) (x)
#define SJ_UNLIKELY(x) (x)
#endif

// Bit intrinsics.  Arguments are never zero when these are used.
#if SJ_CUDA
#define SJ_POPC32(x) __popc(x)
#define SJ_POPC64(x) __popcll(x)
#define SJ_CLZ32(x) __clz(x)
#define SJ_CLZ64(x) __clzll(x)
#define SJ_CTZ32(x) (__ffs(x) - 1)
#define SJ_CTZ64(x) (__ffsll(x) - 1)
#else
#define SJ_POPC32(x) __builtin_popcount(x)
#define SJ_POPC64(x) __builtin_popcountll(x)
#define SJ_CLZ32(x) __builtin_clz(x)
#define SJ_CLZ64(x) __builtin_clzll(x)
#define SJ_CTZ32(x) __builtin_ctz(x)
#define SJ_CTZ64(x) __builtin_ctzll(x)
#endif

// Atomic primitives.  All read-modify-write operations in this file are built from these
// (integer fetch ops + a generic compare-exchange on the object representation), so a
// CUDA flavour only needs to redefine this block.  Sequentially consistent: on x86 RMW
// costs the same either way and it keeps lock-style user code correct on aarch64.
#if !SJ_CUDA
#define SJ_ATOMIC_LOAD(p, out) __atomic_load((p), (out), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_STORE(p, v) __atomic_store((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_CAS(p, expected, desired) \
    __atomic_compare_exchange((p), (expected), (desired), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_SUB(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_AND(p, v) __atomic_fetch_and((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_OR(p, v) __atomic_fetch_or((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_FETCH_XOR(p, v) __atomic_fetch_xor((p), (v), __ATOMIC_SEQ_CST)
#define SJ_ATOMIC_XCHG(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
// Hides where a pointer came from, so the compiler does not warn about (or "optimise") the
// 4-byte word access that covers a lone 2-byte half.
#define SJ_LAUNDER_PTR(p) __asm__("" : "+r"(p))
#else
// CUDA: the same primitives on atomicCAS / atomicAdd / ... (device scope, relaxed: CUDA's
// atomic* functions; a __threadfence() is not implied).  Operands of 1 or 2 bytes that have no
// native instruction use a compare-exchange on the aligned 32-bit word that contains them.
// @section cuda_atomics
namespace sj_cuda {
template <class T> __device__ inline uint64_t to_bits(const T& x) {
    if constexpr (sizeof(T) == 8) { uint64_t u; memcpy(&u, &x, 8); return u; }
    else if constexpr (sizeof(T) == 4) { uint32_t u; memcpy(&u, &x, 4); return u; }
    else if constexpr (sizeof(T) == 2) { uint16_t u; memcpy(&u, &x, 2); return u; }
    else { uint8_t u; memcpy(&u, &x, 1); return u; }
}
template <class T> __device__ inline T from_bits(uint64_t u) {
    T x;
    if constexpr (sizeof(T) == 8) { memcpy(&x, &u, 8); }
    else if constexpr (sizeof(T) == 4) { const uint32_t w = uint32_t(u); memcpy(&x, &w, 4); }
    else if constexpr (sizeof(T) == 2) { const uint16_t w = uint16_t(u); memcpy(&x, &w, 2); }
    else { const uint8_t w = uint8_t(u); memcpy(&x, &w, 1); }
    return x;
}
template <class T> __device__ inline void load(T* p, T* out) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "atomic operand size");
    if constexpr (sizeof(T) == 8) *out = from_bits<T>(*(volatile unsigned long long*)p);
    else if constexpr (sizeof(T) == 4) *out = from_bits<T>(*(volatile unsigned int*)p);
    else if constexpr (sizeof(T) == 2) *out = from_bits<T>(*(volatile unsigned short*)p);
    else *out = from_bits<T>(*(volatile unsigned char*)p);
}
// Compare-exchange of a 1- or 2-byte value through its containing aligned 32-bit word.
template <class T> __device__ inline bool cas_sub(T* p, T* expected, T* desired) {
    const unsigned long long a = (unsigned long long)p;
    unsigned int* w = (unsigned int*)(a & ~3ull);
    const unsigned sh = unsigned(a & 3ull) * 8u;
    const unsigned m = (sizeof(T) == 2 ? 0xFFFFu : 0xFFu) << sh;
    const unsigned e = unsigned(to_bits(*expected)) << sh, d = unsigned(to_bits(*desired)) << sh;
    unsigned old = *(volatile unsigned int*)w;
    while (true) {
        if ((old & m) != e) { *expected = from_bits<T>((old & m) >> sh); return false; }
        const unsigned prev = atomicCAS(w, old, (old & ~m) | d);
        if (prev == old) return true;
        old = prev;
    }
}
template <class T> __device__ inline bool cas(T* p, T* expected, T* desired) {
    if constexpr (sizeof(T) == 8) {
        const unsigned long long e = to_bits(*expected);
        const unsigned long long o = atomicCAS((unsigned long long*)p, e, (unsigned long long)to_bits(*desired));
        if (o == e) return true;
        *expected = from_bits<T>(o);
        return false;
    } else if constexpr (sizeof(T) == 4) {
        const unsigned e = unsigned(to_bits(*expected));
        const unsigned o = atomicCAS((unsigned int*)p, e, unsigned(to_bits(*desired)));
        if (o == e) return true;
        *expected = from_bits<T>(o);
        return false;
    } else {
        return cas_sub(p, expected, desired);
    }
}
template <class T, class F> __device__ inline T cas_loop(T* p, F f) {
    T old;
    load(p, &old);
    T nv;
    do { nv = f(old); } while (!cas(p, &old, &nv));
    return old;
}
// Integer fetch-ops: native for 32/64-bit operands (signed values go through the unsigned
// instruction: two's complement wrap-around is the same), a CAS loop for 8/16-bit ones.
#define SJ_CUDA_FETCH(NAME, NATIVE, EXPR)                                                          \
    template <class T> __device__ inline T NAME(T* p, T v) {                                       \
        if constexpr (sizeof(T) == 4) return T(NATIVE((unsigned int*)p, (unsigned int)v));         \
        else if constexpr (sizeof(T) == 8)                                                         \
            return T(NATIVE((unsigned long long*)p, (unsigned long long)v));                       \
        else return cas_loop(p, [&](T a) { return T(EXPR); });                                     \
    }
SJ_CUDA_FETCH(fetch_add, atomicAdd, a + v)
SJ_CUDA_FETCH(fetch_and, atomicAnd, a & v)
SJ_CUDA_FETCH(fetch_or, atomicOr, a | v)
SJ_CUDA_FETCH(fetch_xor, atomicXor, a ^ v)
SJ_CUDA_FETCH(exchange, atomicExch, v)
#undef SJ_CUDA_FETCH
template <class T> __device__ inline T fetch_sub(T* p, T v) { return fetch_add(p, T(T(0) - v)); }
template <class T> __device__ inline void store(T* p, T* v) {
    if constexpr (sizeof(T) >= 4) (void)exchange((typename std::conditional<sizeof(T) == 8, unsigned long long, unsigned int>::type*)p,
                                                 (typename std::conditional<sizeof(T) == 8, unsigned long long, unsigned int>::type)to_bits(*v));
    else (void)cas_loop(p, [&](T) { return *v; });
}
// Native floating-point add (sm_60+ double, sm_70+ half) and integer min/max.
template <class T> __device__ inline T add_fp(T* p, T v) { return atomicAdd(p, v); }
template <class T> __device__ inline T min_int(T* p, T v) {
    typedef typename std::conditional<sizeof(T) == 8,
        typename std::conditional<std::is_signed<T>::value, long long, unsigned long long>::type,
        typename std::conditional<std::is_signed<T>::value, int, unsigned int>::type>::type N;
    return T(atomicMin((N*)p, N(v)));
}
template <class T> __device__ inline T max_int(T* p, T v) {
    typedef typename std::conditional<sizeof(T) == 8,
        typename std::conditional<std::is_signed<T>::value, long long, unsigned long long>::type,
        typename std::conditional<std::is_signed<T>::value, int, unsigned int>::type>::type N;
    return T(atomicMax((N*)p, N(v)));
}
}  // namespace sj_cuda
#define SJ_ATOMIC_LOAD(p, out) ::sj_cuda::load((p), (out))
#define SJ_ATOMIC_STORE(p, v) ::sj_cuda::store((p), (v))
#define SJ_ATOMIC_CAS(p, expected, desired) ::sj_cuda::cas((p), (expected), (desired))
#define SJ_ATOMIC_FETCH_ADD(p, v) ::sj_cuda::fetch_add((p), (v))
#define SJ_ATOMIC_FETCH_SUB(p, v) ::sj_cuda::fetch_sub((p), (v))
#define SJ_ATOMIC_FETCH_AND(p, v) ::sj_cuda::fetch_and((p), (v))
#define SJ_ATOMIC_FETCH_OR(p, v) ::sj_cuda::fetch_or((p), (v))
#define SJ_ATOMIC_FETCH_XOR(p, v) ::sj_cuda::fetch_xor((p), (v))
#define SJ_ATOMIC_XCHG(p, v) ::sj_cuda::exchange((p), (v))
#define SJ_LAUNDER_PTR(p) ((void)0)
// @section cuda_base always
namespace sj_cuda {
__device__ __forceinline__ unsigned lane_id() {
    unsigned l;
    asm("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}
struct grid3 { uint32_t x, y, z; };
}  // namespace sj_cuda
// @section red_add needs: cuda_base
namespace sj_cuda {
// Floating-point add whose result is not needed (InterlockedAdd(dest, v), gradient accumulation).
// Many threads adding into one parameter must not serialise on it, so the adds are combined
// before they reach global memory, in two ways:
//  * Warp aggregation (always): the lanes of a warp that add into the same address sum their
//    values with shuffles and one lane per distinct address does the atomic.  Works for any set
//    of active lanes (divergent or partial warps): lanes are grouped with __match_any_sync on the
//    address, then reduced by a tree over each group ("voting and shuffling").
//  * The block cache (SJ_RED_CACHE, chosen per translation unit by the emitter, see
//    emit/cuda.py): when a whole warp adds into one global float/half address, the 32 values go
//    into a per-thread-block table in shared memory (one row per address, a few float columns:
//    the warp folds its values into as many lanes by shuffles, each adds into its own column), and the block adds each row's sum into global memory
//    once, when all its threads have finished.  A 2^20-thread batch adding into 148 parameters
//    then does ~148 global atomics per block instead of per warp.  The deferred adds are visible
//    to later dispatches (and to the host), not to later reads in the same dispatch; the emitter
//    only turns the cache on for kernels without barriers or memory fences, where such a read
//    could not be ordered after the other threads' adds anyway.  Rows are summed in float (more
//    accurate than half-by-half accumulation).  A full table falls back to warp aggregation.
// Thread-private (local) addresses are added directly.  The sum's association order differs from
// one-atomic-per-thread, as any atomic order does.
#ifndef SJ_RED_CACHE
#define SJ_RED_CACHE 0
#endif
#if SJ_RED_CACHE
#ifndef SJ_RED_COLS
#define SJ_RED_COLS 32                   // one column per lane (measured fastest for the seed 002 MLP)
#endif
constexpr unsigned kRedRows = 256;      // distinct addresses per block (power of two)
constexpr unsigned kRedCols = SJ_RED_COLS;
// Row keys: 0 = free; (address << 2) | (half ? 2 : 0) | ready.  An address's home row is its
// element index mod kRedRows (so a contiguous gradient buffer maps without collisions).  A row
// is claimed by a CAS to the key without the ready bit, zeroed by the claiming warp, then
// published with the bit.
__shared__ unsigned long long sj_red_keys[kRedRows];
__shared__ float sj_red_vals[kRedRows * kRedCols];

// A warp's 32 values folded by shuffles into lanes [0, kRedCols), which add them into their own
// columns of a row: fewer columns mean fewer shared-memory atomics (and contention between warps)
// for more shuffles (measured in benchmarks/gpu_mlp_breakdown.py).
__device__ __forceinline__ float red_fold(float f) {
    for (unsigned o = 16u; o >= kRedCols; o >>= 1) f += __shfl_down_sync(0xFFFFFFFFu, f, o);
    return f;
}
__device__ __forceinline__ void red_cache_begin() {
    const unsigned n = blockDim.x * blockDim.y * blockDim.z;
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    for (unsigned r = t; r < kRedRows; r += n) sj_red_keys[r] = 0ull;
    __syncthreads();
}
__device__ __forceinline__ void red_cache_end() {
    __syncthreads();
    const unsigned n = blockDim.x * blockDim.y * blockDim.z;
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    for (unsigned r = t; r < kRedRows; r += n) {
        const unsigned long long k = sj_red_keys[r];
        if (!(k & 1ull)) continue;
        float s = 0.0f;
        for (unsigned c = 0; c < kRedCols; ++c) s += sj_red_vals[r * kRedCols + ((c + t) & (kRedCols - 1u))];
        if (k & 2ull) (void)atomicAdd(reinterpret_cast<__half*>(k >> 2), __float2half_rn(s));
        else (void)atomicAdd(reinterpret_cast<float*>(k >> 2), s);
    }
}
// The row of `key` (claimed if new; -1 when the table has no room), probing from its home row h.
// Called by a whole warp with one key, so every lane gets the same answer.
__device__ inline int red_row_probe(unsigned long long key, unsigned h, unsigned lane) {
    volatile unsigned long long* keys = sj_red_keys;
    for (unsigned i = 0; i < 32u; ++i) {
        const unsigned r = (h + i) & (kRedRows - 1u);
        unsigned long long k = keys[r];
        if (k == 0ull) {
            unsigned long long prev = 0ull;
            if (lane == 0) prev = atomicCAS(&sj_red_keys[r], 0ull, key & ~1ull);
            prev = __shfl_sync(0xFFFFFFFFu, prev, 0);
            if (prev == 0ull) {                  // ours: zero the row, then publish it
                for (unsigned c = lane; c < kRedCols; c += 32u) sj_red_vals[r * kRedCols + c] = 0.0f;
                __threadfence_block();
                __syncwarp();
                if (lane == 0) keys[r] = key;
                __syncwarp();
                return int(r);
            }
            k = prev;
        }
        if ((k | 1ull) == key) {                  // our address; another warp may still be zeroing it
            while (keys[r] != key) {}
            __threadfence_block();
            return int(r);
        }
    }
    return -1;
}
#else
__device__ __forceinline__ void red_cache_begin() {}
__device__ __forceinline__ void red_cache_end() {}
#endif
template <class T> __device__ inline void red_add_fp(T* p, T v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if (!__isGlobal(p) && !__isShared(p)) { *p = T(*p + v); return; }
    const unsigned active = __activemask();
    const unsigned lane = lane_id();
#if SJ_RED_CACHE
    if constexpr (sizeof(T) <= 4) {
        const unsigned long long a = (unsigned long long)p;
        const unsigned long long key = (a << 2) | (sizeof(T) == 2 ? 3ull : 1ull);
        const unsigned h = unsigned(a >> (sizeof(T) == 2 ? 1 : 2)) & (kRedRows - 1u);
        // Hot path: the whole warp adds into one address that already has its home row.  (Equal
        // low words + every lane's full key equal to the row's key = one address.)
        if (active == 0xFFFFFFFFu &&
            __all_sync(0xFFFFFFFFu, unsigned(a) == __shfl_sync(0xFFFFFFFFu, unsigned(a), 0) &&
                                    ((volatile unsigned long long*)sj_red_keys)[h] == key)) {
            const float f = red_fold(float(v));
            if (lane < kRedCols) (void)atomicAdd(&sj_red_vals[h * kRedCols + lane], f);
            return;
        }
        if (active == 0xFFFFFFFFu && __all_sync(0xFFFFFFFFu, a == __shfl_sync(0xFFFFFFFFu, a, 0) && __isGlobal(p))) {
            const int r = red_row_probe(key, h, lane);
            float f = red_fold(float(v));
            if (r >= 0) {
                if (lane < kRedCols) (void)atomicAdd(&sj_red_vals[unsigned(r) * kRedCols + lane], f);
            } else {                             // table full: one atomic for the warp
                if (lane >= kRedCols) f = 0.0f;
                for (unsigned o = kRedCols / 2u; o > 0u; o >>= 1) f += __shfl_down_sync(0xFFFFFFFFu, f, o);
                if (lane == 0) (void)atomicAdd(p, T(f));
            }
            return;
        }
    }
#endif
    // Lanes grouped by address (any set of active lanes), a tree sum per group, one atomic each.
    const unsigned peers = __match_any_sync(active, (unsigned long long)p);
    if (peers == 0xFFFFFFFFu) {          // the whole warp adds into one address (a broadcast parameter)
        for (int o = 16; o > 0; o >>= 1) v = T(v + __shfl_xor_sync(0xFFFFFFFFu, v, o));
        if (lane == 0) (void)atomicAdd(p, v);
        return;
    }
    const unsigned rank = __popc(peers & ((1u << lane) - 1u));
    unsigned hi = peers & ~((2u << lane) - 1u);      // my group's lanes above me (lane 31: none)
    unsigned rel = rank;
    while (__any_sync(active, hi != 0u)) {
        const int next = __ffs(hi);                 // 1 + the next lane of my group still in the tree
        const T t = __shfl_sync(active, v, next ? next - 1 : int(lane));
        if (next) v = T(v + t);
        hi &= __ballot_sync(active, (rel & 1u) == 0u);
        rel >>= 1;
    }
    if (rank == 0u) (void)atomicAdd(p, v);
#else
    (void)atomicAdd(p, v);
#endif
}
}  // namespace sj_cuda
#endif

// @section backend_tail always
// How atomics on half work: 1 = compare-exchange on the aligned 32-bit word that contains
// the half (only needs 32-bit CAS: the CUDA choice; it touches the 2 neighbouring bytes,
// which AddressSanitizer reports for a lone half), 0 = native 16-bit compare-exchange.
#ifndef SJ_HALF_CAS_VIA_WORD
#define SJ_HALF_CAS_VIA_WORD SJ_CUDA
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "slangjit prelude assumes a little-endian target"
#endif
