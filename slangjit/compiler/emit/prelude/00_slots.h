// Gradient slots of coarsened CUDA kernels (emit/cuda.py coarse_kernel, slot numbering in
// ir/red_slots.py): per-thread (or tensor-core) accumulation of thread-uniform adds, and the flushes
// that add the sums into memory at the end of the kernel.  Needs 00_backend.h (lane_id, red_add_fp).
#if SJ_CUDA
// @section slots needs: red_add cuda_base
namespace sj_cuda {
// Per-thread accumulation of gradient adds (the coarsened kernels of emit/cuda.py, slot numbering in
// ir/red_slots.py).  One GPU thread runs many logical threads in turn; each thread-uniform add site
// has a static slot: a float accumulator in a register (acc[slot], a constant index once NVRTC has
// inlined and unrolled) and, per warp, the address it belongs to (tab[slot] in shared memory, key =
// address | 1 for half).  An add whose address is the slot's address goes into the register; the
// first add claims the slot; any other address (a "uniform" load that was not, a thread-private
// address) takes the ordinary path.  The kernel adds each slot's warp sum into memory once, at its
// end (racc_out_all).  Deferred adds are visible to later dispatches, not to reads in the same one
// (the emitter only coarsens kernels without barriers or fences, as for the block cache).
template <class T> struct type_identity { typedef T type; };
#define SJ_SLOT(base, k) ((base) < 0 ? -1 : (base) + (k))
// The slot's first add claims it (true: add into the register); an address that is not the slot's
// is added the ordinary way (false).  Out of line: it runs once per slot and kernel, or never.
template <class T> __device__ __noinline__ bool racc_take(unsigned long long* t, T* p, T v) {
    const unsigned long long key = (unsigned long long)p | (sizeof(T) == 2 ? 1ull : 0ull);
    if (__isGlobal(p)) {
        const unsigned long long prev = atomicCAS(t, 0ull, key);
        if (prev == 0ull || prev == key) return true;
    }
    red_add_fp(p, v);
    return false;
}
__device__ __forceinline__ void racc_add_key(unsigned long long key, float v) {
    if (key & 1ull) (void)atomicAdd(reinterpret_cast<__half*>(key & ~1ull), __float2half_rn(v));
    else (void)atomicAdd(reinterpret_cast<float*>(key), v);
}
// The accumulators: float by default; SJ_RACC_HALF=1 packs two slots into a __half2 (half the
// registers, half-precision sums per thread; measured by benchmarks/gpu_mlp_breakdown.py).
#ifndef SJ_RACC_HALF
#define SJ_RACC_HALF 0
#endif
#ifndef SJ_RACC_SHARED
#define SJ_RACC_SHARED 0
#endif
#ifndef SJ_RACC_SHARED_HALF
#define SJ_RACC_SHARED_HALF 0
#endif
#ifndef SJ_RACC_MMA
#define SJ_RACC_MMA 0
#endif
#if SJ_RACC_MMA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#undef SJ_RACC_MMA
#define SJ_RACC_MMA 0          // sized for sm_90's shared memory: float register slots instead
#endif
#if SJ_RACC_MMA
// Tensor-core slots (emit/cuda.py MMA_SLOTS; every site half).  A lane does not keep sums: each add
// stores the half value in the warp's stage in shared memory, [slot][lane] (64-byte rows, 16-byte
// chunks swizzled so that both the lanes' stores and the fragment reads are free of bank conflicts).
// After each logical thread (racc_step, the whole warp) one mma.m16n8k16 per 16 slots and 16 lanes
// multiplies a stage (A: slots x lanes) by ones (B), so the float accumulators D gain the warp's sums
// of the 16 slots; then that stage is cleared.  SJ_RACC_MMA_STAGES stages per warp (emit/cuda.py
// MMA_STAGES): with one, a step sums the stage just written; with two, they are used in turn and a
// step sums the stage of the turn before.  Session 5's kernel stalled reading the stage just written
// (0.35 against 0.12 ms for the seed MLP on the H100); the fused one does not, and one stage, half
// the shared memory, measured 0.105-0.107 against 0.110-0.112 ms (session 7).  SJ_RACC_MMA_NT = tiles of 16
// slots; a stage is SJ_RACC_MMA_NT * 1024 bytes.  Stores are token-chained asm without a memory
// clobber, as for SJ_RACC_SHARED.
#define SJ_RACC_LEN(n) 1
#define SJ_RACC_STAGE_BYTES (SJ_RACC_MMA_NT * 1024u)
#ifndef SJ_RACC_MMA_STAGES
#define SJ_RACC_MMA_STAGES 2
#endif
// The stage a step sums: the other one with two stages, else the one just written.
#define SJ_RACC_PREV(cur) (SJ_RACC_MMA_STAGES == 2 ? ((cur) ^ SJ_RACC_STAGE_BYTES) : (cur))
// Float sites (a kernel may mix them with half ones) keep a float register per slot, f[slot].
struct racc_t { unsigned stage; unsigned cur; unsigned tok; unsigned off[4]; float d[SJ_RACC_MMA_NT][2];
                float f[SJ_RACC_MMA_NS]; };
__device__ __forceinline__ void racc_clear_stage(unsigned base, int tiles) {
    for (unsigned i = lane_id(); i < unsigned(tiles) * 64u; i += 32u)
        asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" :: "r"(base + 16u * i), "r"(0u) : "memory");
}
// Where lane `lane` keeps its value in a row of 16-byte chunks swizzled by `j` = (row >> 1) & 3.
__device__ __forceinline__ unsigned racc_lane_offset(unsigned lane, unsigned j) {
    return (((lane >> 3) ^ j) << 4) + 2u * (lane & 7u);
}
// A lane's half value (its bits) into the stage at shared address `a`: token-chained, no memory clobber.
__device__ __forceinline__ void racc_store(racc_t* acc, unsigned a, unsigned short bits) {
    asm("{ st.shared.b16 [%1], %2; mov.b32 %0, %3; }" : "=r"(acc->tok) : "r"(a), "h"(bits), "r"(acc->tok));
}
__device__ __forceinline__ void racc_begin(racc_t* acc, int n, const void* smem) {
    const unsigned lane = lane_id();
    acc->stage = unsigned(__cvta_generic_to_shared(smem));
    acc->cur = 0u;
    acc->tok = 0u;
#pragma unroll
    for (unsigned j = 0; j < 4u; ++j) acc->off[j] = racc_lane_offset(lane, j);
#pragma unroll
    for (int t = 0; t < SJ_RACC_MMA_NT; ++t) acc->d[t][0] = acc->d[t][1] = 0.0f;
#pragma unroll
    for (int k = 0; k < SJ_RACC_MMA_NS; ++k) acc->f[k] = 0.0f;    // only the float sites' stay live
    racc_clear_stage(acc->stage, SJ_RACC_MMA_STAGES * SJ_RACC_MMA_NT);
    asm volatile("bar.warp.sync -1;" ::: "memory");
}
template <class T> __device__ __forceinline__ void racc_put(racc_t* acc, int slot, T v) {
    if constexpr (sizeof(T) == 4) {
        acc->f[slot] += float(v);
    } else {
        racc_store(acc, acc->stage + acc->cur + 64u * unsigned(slot) + acc->off[(slot >> 1) & 3], __half_as_ushort(__half(v)));
    }
}
// D += (stage at `buf`) x ones, for the first n slots (the whole warp, after a warp barrier).
__device__ __forceinline__ void racc_mma(racc_t* acc, unsigned buf, int n, unsigned tok) {
    const unsigned lane = lane_id(), one = 0x3C003C00u;    // two halves 1.0
#pragma unroll
    for (int t = 0; t < SJ_RACC_MMA_NT; ++t) {
        if (t * 16 >= n) break;
#pragma unroll
        for (unsigned ks = 0; ks < 2u; ++ks) {
            const unsigned row = 16u * t + ((lane >> 3) & 1u) * 8u + (lane & 7u), chunk = 2u * ks + (lane >> 4);
            const unsigned a = acc->stage + buf + 64u * row + ((chunk ^ ((row >> 1) & 3u)) << 4);
            unsigned a0, a1, a2, a3;
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(a), "r"(tok));
            // B is all ones, so D's columns are equal: C = {lo, lo, hi, hi} keeps 2 floats per tile.
            float unused0, unused1;
            asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                "{%10, %10, %11, %11};"
                : "=f"(acc->d[t][0]), "=f"(unused0), "=f"(acc->d[t][1]), "=f"(unused1)
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(one), "r"(one), "f"(acc->d[t][0]), "f"(acc->d[t][1]));
        }
    }
}
// Called by the whole warp after each logical thread: sum the previous turn's stage, clear it, and
// write the next turn into it.
__device__ __forceinline__ void racc_step(racc_t* acc, int n, bool clear = true) {
    unsigned tok;
    asm volatile("{ bar.warp.sync -1; mov.b32 %0, %1; }" : "=r"(tok) : "r"(acc->tok) : "memory");
    const unsigned prev = SJ_RACC_PREV(acc->cur);
    racc_mma(acc, prev, n, tok);
    asm volatile("bar.warp.sync -1;" ::: "memory");        // every lane has read the stage
    if (clear) racc_clear_stage(acc->stage + prev, (n + 15) / 16);
    asm volatile("{ bar.warp.sync -1; mov.b32 %0, %1; }" : "=r"(acc->tok) : "r"(tok) : "memory");
    acc->cur = prev;
}
// `clear` false (emit/cuda.py, where ir/slot_coverage.py shows that a lane that finishes its logical
// thread writes every slot): the stage is not cleared after each step, and a lane whose logical thread
// returns before its first slot writes zeros into its column here instead.
__device__ __forceinline__ void racc_abandon(racc_t* acc, int n) {
    const unsigned lane = lane_id();
    for (int k = 0; k < n; ++k)
        racc_store(acc, acc->stage + acc->cur + 64u * unsigned(k) + racc_lane_offset(lane, (unsigned(k) >> 1) & 3u), 0);
}
// After the last turn: with two stages, sum the stage it wrote (with one, its step did).
__device__ __forceinline__ void racc_finish(racc_t* acc, int n) {
    if (SJ_RACC_MMA_STAGES == 1) return;
    unsigned tok;
    asm volatile("{ bar.warp.sync -1; mov.b32 %0, %1; }" : "=r"(tok) : "r"(acc->tok) : "memory");
    racc_mma(acc, SJ_RACC_PREV(acc->cur), n, tok);
}
#elif SJ_RACC_SHARED
// Slots in shared memory (emit/cuda.py SHARED_SLOTS): per warp [slot][lane], a lane's slot k at
// element k * 32 of its column, so a warp's 32 lanes touch 32 consecutive elements (no bank
// conflicts).  racc_t is the thread's state: the column's shared address and an ordering token.
// Every access is an asm without a memory clobber that takes the token and yields the next one: the
// token chain keeps the accesses in order and alive, and NVRTC does not see them as memory the
// program's own loads could alias (a volatile asm or a C++ store would make it reload every
// parameter after every add).
#define SJ_RACC_LEN(n) 1
struct racc_t { unsigned base; unsigned tok; };
#if SJ_RACC_SHARED_HALF
#define SJ_RACC_BYTES 2
#define SJ_RACC_INIT "{ st.shared.b16 [%1], %2; mov.b32 %0, %3; }"
#define SJ_RACC_LD "ld.shared.b16 %0, [%1];"
#define SJ_RACC_ADD "{ .reg .b16 t; ld.shared.b16 t, [%1]; add.rn.f16 t, t, %2; st.shared.b16 [%1], t; mov.b32 %0, %3; }"
typedef unsigned short racc_bits;
#define SJ_RACC_C "h"
template <class T> __device__ __forceinline__ racc_bits racc_bits_of(T v) { return __half_as_ushort(__half(v)); }
__device__ __forceinline__ float racc_value(racc_bits u) { return __half2float(__ushort_as_half(u)); }
#else
#define SJ_RACC_BYTES 4
#define SJ_RACC_INIT "{ st.shared.f32 [%1], %2; mov.b32 %0, %3; }"
#define SJ_RACC_LD "ld.shared.f32 %0, [%1];"
#define SJ_RACC_ADD "{ .reg .f32 t; ld.shared.f32 t, [%1]; add.rn.f32 t, t, %2; st.shared.f32 [%1], t; mov.b32 %0, %3; }"
typedef float racc_bits;
#define SJ_RACC_C "f"
template <class T> __device__ __forceinline__ racc_bits racc_bits_of(T v) { return float(v); }
__device__ __forceinline__ float racc_value(racc_bits u) { return u; }
#endif
__device__ __forceinline__ racc_t racc_column(const void* smem, unsigned column) {
    return racc_t{unsigned(__cvta_generic_to_shared(smem)) + column * SJ_RACC_BYTES, 0u};
}
__device__ __forceinline__ unsigned racc_addr(const racc_t* acc, int slot) { return acc->base + unsigned(slot) * (32u * SJ_RACC_BYTES); }
__device__ __forceinline__ void racc_init(racc_t* acc, int slot) {
    asm(SJ_RACC_INIT : "=r"(acc->tok) : "r"(racc_addr(acc, slot)), SJ_RACC_C(racc_bits_of(0.0f)), "r"(acc->tok));
}
__device__ __forceinline__ float racc_get(const racc_t* acc, int slot) {
    racc_bits u;
    asm(SJ_RACC_LD : "=" SJ_RACC_C(u) : "r"(racc_addr(acc, slot)), "r"(acc->tok));
    return racc_value(u);
}
template <class T> __device__ __forceinline__ void racc_put(racc_t* acc, int slot, T v) {
    asm(SJ_RACC_ADD : "=r"(acc->tok) : "r"(racc_addr(acc, slot)), SJ_RACC_C(racc_bits_of(v)), "r"(acc->tok));
}
#elif SJ_RACC_HALF
typedef __half2 racc_t;
#define SJ_RACC_LEN(n) (((n) + 1) / 2)
__device__ __forceinline__ racc_t racc_zero() { return __float2half2_rn(0.0f); }
__device__ __forceinline__ float racc_get(const racc_t* acc, int slot) {
    return (slot & 1) ? __high2float(acc[slot >> 1]) : __low2float(acc[slot >> 1]);
}
template <class T> __device__ __forceinline__ void racc_put(racc_t* acc, int slot, T v) {
    const __half h = __float2half_rn(float(v));
    acc[slot >> 1] = __hadd2(acc[slot >> 1], (slot & 1) ? __halves2half2(__float2half_rn(0.0f), h)
                                                         : __halves2half2(h, __float2half_rn(0.0f)));
}
#else
typedef float racc_t;
#define SJ_RACC_LEN(n) (n)
__device__ __forceinline__ racc_t racc_zero() { return 0.0f; }
__device__ __forceinline__ float racc_get(const racc_t* acc, int slot) { return acc[slot]; }
template <class T> __device__ __forceinline__ void racc_put(racc_t* acc, int slot, T v) { acc[slot] += float(v); }
#endif
#if !SJ_RACC_MMA
// Register slots (and SJ_RACC_SHARED, which sets its slots up itself): the same interface as the
// tensor-core slots.  A slot's warp sum is a shuffle reduction at the end (racc_warp_out).
__device__ __forceinline__ void racc_step(racc_t*, int, bool = true) {}
__device__ __forceinline__ void racc_finish(racc_t*, int) {}
__device__ __forceinline__ void racc_abandon(racc_t*, int) {}
#if !SJ_RACC_SHARED
__device__ __forceinline__ void racc_begin(racc_t* acc, int n, const void*) {
#pragma unroll
    for (int k = 0; k < SJ_RACC_LEN(n); ++k) acc[k] = racc_zero();
}
#endif
#endif
// mode 0: check the address at every add.  Where ir/slot_invariance.py proves every slot's address
// the same in all logical threads: mode 1 (claim) adds and records the address, mode 2 only adds.
template <class T> __device__ __forceinline__ void racc_add(racc_t* acc, unsigned long long* tab, int slot, int mode,
                                                            T* p, typename type_identity<T>::type v) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "racc_add: half or float");
    if (slot < 0) { red_add_fp(p, v); return; }    // not in a coarsened kernel: the ordinary path
    const unsigned long long key = (unsigned long long)p | (sizeof(T) == 2 ? 1ull : 0ull);
    if (mode == 0) {
        if (tab[slot] == key || racc_take(tab + slot, p, T(v))) racc_put(acc, slot, v);
        return;
    }
    racc_put(acc, slot, v);
    if (mode == 1) tab[slot] = key;
}
// Has every slot of the warp's table an address?  (Called by the whole warp.)
__device__ inline bool racc_claimed(const unsigned long long* tab, unsigned n) {
    bool ok = true;
    for (unsigned k = lane_id(); k < n; k += 32u) ok = ok && tab[k] != 0ull;
    return __all_sync(0xFFFFFFFFu, ok);
}
// Called by a whole warp with its slot's key (the same in every lane): the warp's sum goes to *part
// for the block-combined flush (emit/cuda.py coarse_kernel: each warp parks its sums in shared memory,
// then the block adds them, racc_flush_block / racc_flush_grid), or with no `part` into memory: one
// atomic per warp and slot.  Same-address atomics serialise in L2: on the H100 the seed MLP's per-warp
// atomics (148 half adds from each of ~1000 warps) took longer than all of its arithmetic.
__device__ __noinline__ void racc_warp_out(unsigned long long key, float* part, float v) {
    if (key == 0ull) return;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    if (lane_id() != 0) return;
    if (part != nullptr) *part = v;
    else racc_add_key(key, v);
}
// Called by every thread of the block after __syncthreads(); `t` is the thread's index in the block.
// Warps whose slot holds another address (possible only where the addresses were not proven
// invariant) add on their own.
__device__ inline void racc_flush_block(const unsigned long long* tab, const float* part, unsigned ns,
                                        unsigned warps, unsigned t) {
    for (unsigned k = t; k < ns; k += 32u * warps) {
        unsigned long long key = 0ull;
        float s = 0.0f;
        for (unsigned w = 0; w < warps; ++w) {
            const unsigned long long kw = tab[w * ns + k];
            if (kw == 0ull) continue;
            if (key == 0ull || kw == key) { key = kw; s += part[w * ns + k]; }
            else racc_add_key(kw, part[w * ns + k]);
        }
        if (key != 0ull) racc_add_key(key, s);
    }
}
// The grid-combined flush, for kernels whose slot addresses are proven invariant (emit/cuda.py
// coarse_kernel; the runtime passes `scratch`, zeroed once: a launch counter, the slots' addresses,
// and one row of block sums per block).  Each block writes its slot sums; the last block to finish
// adds each slot's total with one atomic.  Even one atomic per block and slot was too many: the
// seed MLP's 132 x 148 half adds into one gradient buffer took half its time on the H100.
__device__ inline void racc_flush_grid(const unsigned long long* tab, const float* part, unsigned ns, unsigned warps,
                                       unsigned t, unsigned char* scratch) {
    unsigned* const launches = reinterpret_cast<unsigned*>(scratch);
    unsigned long long* const keys = reinterpret_cast<unsigned long long*>(scratch + 16);
    float* const sums = reinterpret_cast<float*>(keys + ns);
    for (unsigned k = t; k < ns; k += 32u * warps) {
        unsigned long long key = 0ull;
        float s = 0.0f;
        for (unsigned w = 0; w < warps; ++w) {
            const unsigned long long kw = tab[w * ns + k];
            if (kw != 0ull) { key = kw; s += part[w * ns + k]; }   // proven: the same address in every warp
        }
        if (key != 0ull) keys[k] = key;                               // ... and in every block
        sums[blockIdx.x * ns + k] = s;
    }
    __shared__ bool sj_last_block;
    __threadfence();
    __syncthreads();
    if (t == 0) sj_last_block = atomicAdd(launches, 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!sj_last_block) return;
    __threadfence();
    const volatile float* const vs = sums;
    for (unsigned k = t; k < ns; k += 32u * warps) {
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;     // four chains: the loads overlap
        unsigned b = 0;
        for (; b + 4u <= gridDim.x; b += 4u) {
            s0 += vs[b * ns + k]; s1 += vs[(b + 1u) * ns + k]; s2 += vs[(b + 2u) * ns + k]; s3 += vs[(b + 3u) * ns + k];
        }
        for (; b < gridDim.x; ++b) s0 += vs[b * ns + k];
        const unsigned long long key = static_cast<const volatile unsigned long long*>(keys)[k];
        if (key != 0ull) { racc_add_key(key, (s0 + s1) + (s2 + s3)); keys[k] = 0ull; }
    }
    if (t == 0) *launches = 0u;                                       // ready for the next launch
}
// Every slot's warp sum, into part[k] (part != nullptr) or into memory (racc_warp_out).
#if SJ_RACC_MMA
// Lane 4g holds the half slots 16t + g (d[t][0]) and 16t + g + 8 (d[t][1]); a float slot's (its key's
// bit 0 clear) sum is the shuffle sum of f[k].
__device__ __forceinline__ void racc_out_all(const racc_t* acc, const unsigned long long* tab, float* part, int n) {
#pragma unroll
    for (int k = 0; k < n; ++k)
        if (!(tab[k] & 1ull)) racc_warp_out(tab[k], part != nullptr ? part + k : nullptr, acc->f[k]);
    const unsigned lane = lane_id();
    if (lane & 3u) return;
#pragma unroll
    for (int t = 0; t < SJ_RACC_MMA_NT; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int k = 16 * t + int(lane >> 2) + 8 * h;
            if (k >= n || !(tab[k] & 1ull)) continue;
            if (part != nullptr) part[k] = acc->d[t][h];
            else racc_add_key(tab[k], acc->d[t][h]);
        }
}
#else
__device__ __forceinline__ void racc_out_all(racc_t* acc, const unsigned long long* tab, float* part, int n) {
#pragma unroll
    for (int k = 0; k < n; ++k) racc_warp_out(tab[k], part != nullptr ? part + k : nullptr, racc_get(acc, k));
}
#endif
}  // namespace sj_cuda
#endif  // SJ_CUDA
