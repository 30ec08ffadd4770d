// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ waves & barriers
// @section waves needs: minmax conversions
#if SJ_CUDA
// CUDA: a wave is a warp of 32 lanes; the participating lanes are __activemask() (the lanes
// converged at the call, as in Slang's CUDA target).  Reductions over a full warp are
// __shfl_xor_sync butterflies (every lane ends with bit-identical results); over a partial
// mask each lane combines the active lanes' values in lane order with __shfl_sync.  Values of
// any type (scalars, vectors, matrices, arrays, structs) are shuffled as 32-bit words.
namespace detail {
SJ_FN uint32_t wave_lane() { uint32_t r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
template <class T> SJ_FN T shfl(unsigned mask, const T& x, int lane) {
    if constexpr (sizeof(T) == 4 && std::is_trivially_copyable<T>::value) {
        return bit_cast<T>(__shfl_sync(mask, bit_cast<unsigned>(x), lane));
    } else {
        constexpr int W = int((sizeof(T) + 3) / 4);
        unsigned w[W];
        w[W - 1] = 0u;
        memcpy(w, &x, sizeof(T));
        for (int i = 0; i < W; ++i) w[i] = __shfl_sync(mask, w[i], lane);
        T r;
        memcpy(&r, w, sizeof(T));
        return r;
    }
}
template <class T> SJ_FN T shfl_xor(unsigned mask, const T& x, int m) {
    if constexpr (sizeof(T) == 4 && std::is_trivially_copyable<T>::value) {
        return bit_cast<T>(__shfl_xor_sync(mask, bit_cast<unsigned>(x), m));
    } else {
        constexpr int W = int((sizeof(T) + 3) / 4);
        unsigned w[W];
        w[W - 1] = 0u;
        memcpy(w, &x, sizeof(T));
        for (int i = 0; i < W; ++i) w[i] = __shfl_xor_sync(mask, w[i], m);
        T r;
        memcpy(&r, w, sizeof(T));
        return r;
    }
}
struct op_sum { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a + b); } };
struct op_prod { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a * b); } };
struct op_min { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return ::sj::min(a, b); } };
struct op_max { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return ::sj::max(a, b); } };
struct op_and { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a & b); } };
struct op_or { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a | b); } };
struct op_xor { template <class T> SJ_FN T operator()(const T& a, const T& b) const { return T(a ^ b); } };
template <class T, class Op> SJ_FN T wave_reduce(const T& x, Op op) {
    const unsigned mask = __activemask();
    if (mask == 0xFFFFFFFFu) {
        T v = x;
        for (int m = 1; m < 32; m <<= 1) v = op(v, shfl_xor(mask, v, m));
        return v;
    }
    unsigned rest = mask;
    const int first = __ffs(rest) - 1;
    rest &= rest - 1u;
    T v = shfl(mask, x, first);
    while (rest) {
        const int l = __ffs(rest) - 1;
        rest &= rest - 1u;
        v = op(v, shfl(mask, x, l));
    }
    return v;
}
// Exclusive scan over the active lanes below this one, in lane order.
template <class T, class Op> SJ_FN T wave_prefix(const T& x, Op op, const T& identity) {
    const unsigned mask = __activemask();
    const unsigned below = mask & ((1u << wave_lane()) - 1u);
    T v = identity;
    unsigned rest = mask;
    while (rest) {
        const int l = __ffs(rest) - 1;
        rest &= rest - 1u;
        const T o = shfl(mask, x, l);
        if (below & (1u << l)) v = op(v, o);
    }
    return v;
}
}  // namespace detail
SJ_FN uint32_t WaveGetLaneIndex() { return detail::wave_lane(); }
SJ_FN uint32_t WaveGetLaneCount() { return 32u; }
SJ_FN bool WaveIsFirstLane() { return int(detail::wave_lane()) == __ffs(__activemask()) - 1; }
template <class T> SJ_FN T WaveActiveSum(const T& x) { return detail::wave_reduce(x, detail::op_sum()); }
template <class T> SJ_FN T WaveActiveProduct(const T& x) { return detail::wave_reduce(x, detail::op_prod()); }
template <class T> SJ_FN T WaveActiveMin(const T& x) { return detail::wave_reduce(x, detail::op_min()); }
template <class T> SJ_FN T WaveActiveMax(const T& x) { return detail::wave_reduce(x, detail::op_max()); }
template <class T> SJ_FN T WaveActiveBitAnd(const T& x) { return detail::wave_reduce(x, detail::op_and()); }
template <class T> SJ_FN T WaveActiveBitOr(const T& x) { return detail::wave_reduce(x, detail::op_or()); }
template <class T> SJ_FN T WaveActiveBitXor(const T& x) { return detail::wave_reduce(x, detail::op_xor()); }
template <class T> SJ_FN T WaveReadLaneFirst(const T& x) {
    const unsigned mask = __activemask();
    return detail::shfl(mask, x, __ffs(mask) - 1);
}
template <class T, class I> SJ_FN T WaveReadLaneAt(const T& x, I lane) { return detail::shfl(__activemask(), x, int(lane)); }
template <class T> SJ_FN T WaveBroadcastLaneAt(const T& x, int lane) { return detail::shfl(__activemask(), x, lane); }
template <class T> SJ_FN T WavePrefixSum(const T& x) { return detail::wave_prefix(x, detail::op_sum(), convert<T>(0)); }
template <class T> SJ_FN T WavePrefixProduct(const T& x) { return detail::wave_prefix(x, detail::op_prod(), convert<T>(1)); }
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN bool WaveActiveAllEqual(const T& x) {
    const unsigned mask = __activemask();
    const T f = detail::shfl(mask, x, __ffs(mask) - 1);
    return __all_sync(mask, detail::calc_t<T>(f) == detail::calc_t<T>(x)) != 0;
}
template <class T, int N>
SJ_FN vec<bool, N> WaveActiveAllEqual(const vec<T, N>& x) {
    vec<bool, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = WaveActiveAllEqual(x.v[i]);
    return r;
}
SJ_FN bool WaveActiveAllTrue(bool b) { return __all_sync(__activemask(), b) != 0; }
SJ_FN bool WaveActiveAnyTrue(bool b) { return __any_sync(__activemask(), b) != 0; }
SJ_FN uint32_t WaveActiveCountBits(bool b) { return uint32_t(__popc(__ballot_sync(__activemask(), b))); }
SJ_FN uint32_t WavePrefixCountBits(bool b) {
    return uint32_t(__popc(__ballot_sync(__activemask(), b) & ((1u << detail::wave_lane()) - 1u)));
}
SJ_FN vec<uint32_t, 4> WaveActiveBallot(bool b) {
    return vec<uint32_t, 4>{{__ballot_sync(__activemask(), b), 0u, 0u, 0u}};
}
SJ_FN void AllMemoryBarrier() { __threadfence(); }
SJ_FN void AllMemoryBarrierWithGroupSync() { __threadfence(); __syncthreads(); }
SJ_FN void DeviceMemoryBarrier() { __threadfence(); }
SJ_FN void DeviceMemoryBarrierWithGroupSync() { __threadfence(); __syncthreads(); }
SJ_FN void GroupMemoryBarrier() { __threadfence_block(); }
SJ_FN void GroupMemoryBarrierWithGroupSync() { __syncthreads(); }
#else
// The CPU backend runs each thread as its own wave of size 1, so every wave operation is
// the identity / its single-lane value.
SJ_FN uint32_t WaveGetLaneIndex() { return 0u; }
SJ_FN uint32_t WaveGetLaneCount() { return 1u; }
SJ_FN bool WaveIsFirstLane() { return true; }
template <class T> SJ_FN T WaveActiveSum(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveProduct(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveMin(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveMax(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveBitAnd(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveBitOr(const T& x) { return x; }
template <class T> SJ_FN T WaveActiveBitXor(const T& x) { return x; }
template <class T> SJ_FN T WaveReadLaneFirst(const T& x) { return x; }
template <class T, class I> SJ_FN T WaveReadLaneAt(const T& x, I) { return x; }
template <class T> SJ_FN T WaveBroadcastLaneAt(const T& x, int) { return x; }
template <class T> SJ_FN T WavePrefixSum(const T&) { return convert<T>(0); }
template <class T> SJ_FN T WavePrefixProduct(const T&) { return convert<T>(1); }
template <class T, SJ_IF(detail::is_scalar<T>::value)>
SJ_FN bool WaveActiveAllEqual(const T&) { return true; }
template <class T, int N>
SJ_FN vec<bool, N> WaveActiveAllEqual(const vec<T, N>&) { return vsplat<bool, N>(true); }
SJ_FN bool WaveActiveAllTrue(bool b) { return b; }
SJ_FN bool WaveActiveAnyTrue(bool b) { return b; }
SJ_FN uint32_t WaveActiveCountBits(bool b) { return b ? 1u : 0u; }
SJ_FN uint32_t WavePrefixCountBits(bool) { return 0u; }
SJ_FN vec<uint32_t, 4> WaveActiveBallot(bool b) { return vec<uint32_t, 4>{{b ? 1u : 0u, 0u, 0u, 0u}}; }

// Group barriers.  Kernels without a group-sync barrier run the threads of a group one after
// another (cheapest).  A kernel that uses one runs each thread of a group as a fiber
// (ucontext): a barrier switches back to the group's scheduler, which resumes every thread
// round-robin, so all threads reach the barrier before any passes it - the GPU semantics.
// Memory ordering between groups on different OS threads is only guaranteed for atomics.
namespace fiber {
struct Group {
    ucontext_t sched;
    ucontext_t* ctx = nullptr;
    char* stacks = nullptr;
    bool* done = nullptr;
    uint32_t cap = 0;
    uint32_t current = 0;
    void (*body)(void*, uint32_t) = nullptr;
    void* arg = nullptr;
};
static const size_t kStackSize = 256 * 1024;   // per thread of a group; untouched pages cost nothing
inline Group*& current_group() { static thread_local Group* g = nullptr; return g; }
inline void trampoline() {
    Group* g = current_group();
    uint32_t t = g->current;
    g->body(g->arg, t);
    g->done[t] = true;                         // returning resumes uc_link = the scheduler
}
// Runs body(arg, t) for t in [0, n) as cooperating fibers.
inline void run(uint32_t n, void (*body)(void*, uint32_t), void* arg) {
    static thread_local Group g;
    if (g.cap < n) {
        std::free(g.ctx); std::free(g.stacks); std::free(g.done);
        g.ctx = (ucontext_t*)std::malloc(sizeof(ucontext_t) * n);
        g.stacks = (char*)std::malloc(kStackSize * n);
        g.done = (bool*)std::malloc(n);
        g.cap = n;
    }
    g.body = body;
    g.arg = arg;
    Group* prev = current_group();
    current_group() = &g;
    for (uint32_t t = 0; t < n; ++t) {
        getcontext(&g.ctx[t]);
        g.ctx[t].uc_stack.ss_sp = g.stacks + kStackSize * t;
        g.ctx[t].uc_stack.ss_size = kStackSize;
        g.ctx[t].uc_link = &g.sched;
        makecontext(&g.ctx[t], (void (*)())trampoline, 0);
        g.done[t] = false;
    }
    bool pending = true;
    while (pending) {
        pending = false;
        for (uint32_t t = 0; t < n; ++t) {
            if (g.done[t]) continue;
            g.current = t;
            swapcontext(&g.sched, &g.ctx[t]);
            if (!g.done[t]) pending = true;
        }
    }
    current_group() = prev;
}
inline void barrier() {
    Group* g = current_group();
    if (g) swapcontext(&g->ctx[g->current], &g->sched);
}
}  // namespace fiber

SJ_FN void AllMemoryBarrier() {}
SJ_FN void AllMemoryBarrierWithGroupSync() { fiber::barrier(); }
SJ_FN void DeviceMemoryBarrier() {}
SJ_FN void DeviceMemoryBarrierWithGroupSync() { fiber::barrier(); }
SJ_FN void GroupMemoryBarrier() {}
SJ_FN void GroupMemoryBarrierWithGroupSync() { fiber::barrier(); }
#endif  // SJ_CUDA

// @section sj_close always
}  // namespace sj
#undef SJ_IF
