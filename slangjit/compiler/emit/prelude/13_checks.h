// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ checks
// The error record of a dispatch (runtime/kernel_errors.py reads it after the dispatch and raises).
// The first failed check of a dispatch wins (code 0: no error); `site` indexes the program's table
// of Slang locations (ProgramReflection.error_sites), `index`/`count` say what was wrong.
// Local-array / vector / matrix indices (sj::at) never touch memory outside the object in any mode:
// an out-of-range read gives 0 and a write lands in a discarded scratch element, as for buffers.
// The checked mode (PipelineOptions.checked) also records the failure (sj::at_chk); in both modes a
// null pointer dereference, a [MaxIters] overrun of a reverse-mode loop and too deep recursion are
// recorded (and the dereference reads 0 / drops its write).
// @section checks always
namespace sj {
struct ErrorRecord {
    uint32_t code;
    uint32_t site;
    int64_t index;
    int64_t count;
};
enum : uint32_t { ERR_INDEX = 1, ERR_NULL = 2, ERR_MAX_ITERS = 3, ERR_RECURSION = 4 };
#if SJ_CUDA
}  // namespace sj
__device__ sj::ErrorRecord sj_error_record;     // read by symbol (cuModuleGetGlobal)
namespace sj {
SJ_FN ErrorRecord* error_record() { return &sj_error_record; }
#else
inline ErrorRecord*& error_record() {
    static thread_local ErrorRecord unused;      // launchers point this at the dispatch's record
    static thread_local ErrorRecord* r = &unused;
    return r;
}
#endif
#if SJ_CUDA
__device__ __noinline__
#else
__attribute__((noinline, cold)) inline
#endif
void report(uint32_t code, uint32_t site, int64_t index, int64_t count) {
    ErrorRecord* r = error_record();
#if SJ_CUDA
    if (atomicCAS(&r->code, 0u, code) == 0u) {
#else
    uint32_t none = 0;
    if (__atomic_compare_exchange_n(&r->code, &none, code, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
#endif
        r->site = site;
        r->index = index;
        r->count = count;
    }
}
// Records a failure and yields false (a [MaxIters] overrun ends its loop: `cond && (n < N || fail(..))`).
SJ_FN bool fail(uint32_t code, uint32_t site) {
    report(code, site, 0, 0);
    return false;
}

// Depth-counted recursion guard (the CUDA target's; it assumes nothing about where or how the stack
// grows): every function on a call cycle takes a hidden `int sj_depth` (its guarded callers pass one more
// than their own, other callers 0) and calls this first.  Deeper than `limit` (emit/cuda.py chooses it so
// that `limit` frames fit the per-thread stack the runtime sets) records ERR_RECURSION and returns a zero
// value; from then on every guarded call of the dispatch returns at once too (unwinding, as on the CPU:
// the record's code is read back).
SJ_FN bool depth_exceeded(int depth, int limit, uint32_t site) {
    if (SJ_LIKELY(depth <= limit))
        return *reinterpret_cast<volatile uint32_t*>(&error_record()->code) == ERR_RECURSION;
    report(ERR_RECURSION, site, 0, 0);
    return true;
}
}  // namespace sj
// @section checks_index needs: bounds arrays vectors
namespace sj {
namespace detail {
template <class T, int N> SJ_FN uint64_t extent(const array<T, N>&) { return uint64_t(N); }
template <class T, int N> SJ_FN uint64_t extent(const vec<T, N>&) { return uint64_t(N); }
template <class T, int R, int C> SJ_FN uint64_t extent(const mat<T, R, C>&) { return uint64_t(R); }
}  // namespace detail
}  // namespace sj
// @section checks_buf auto needs: checks_index buffers
namespace sj {
namespace detail {
template <class T> SJ_FN uint64_t extent(const StructuredBuffer<T>& b) { return b.count; }
template <class T> SJ_FN uint64_t extent(const RWStructuredBuffer<T>& b) { return b.count; }
}  // namespace detail
}  // namespace sj
// @section checks_index
namespace sj {
namespace detail {
template <class T> struct elem_of { typedef T type; };
template <class T> struct elem_of<T&> { typedef typename std::remove_cv<T>::type type; };
template <class I> SJ_FN int64_t as_i64(I i) { return static_cast<int64_t>(i); }
}  // namespace detail

// a[i] for a local array, vector or matrix row, with a dynamic index: in range or a scratch element.
template <class A, class I>
SJ_FN auto at(A&& a, I i) -> decltype(a[i]) {
    if (SJ_LIKELY(detail::in_bounds(i, detail::extent(a)))) return a[i];
    return detail::oob_scratch<typename detail::elem_of<decltype(a[i])>::type>();
}
// The checked mode's a[i] (also buffers): an out-of-range index is recorded at `site`.
template <class A, class I>
SJ_FN auto at_chk(A&& a, I i, uint32_t site) -> decltype(a[i]) {
    if (SJ_LIKELY(detail::in_bounds(i, detail::extent(a)))) return a[i];
    report(ERR_INDEX, site, detail::as_i64(i), int64_t(detail::extent(a)));
    return detail::oob_scratch<typename detail::elem_of<decltype(a[i])>::type>();
}
// *p: a null pointer is recorded at `site`; the read gives 0 and a write is dropped.
template <class T>
SJ_FN T& deref(T* p, uint32_t site) {
    if (SJ_LIKELY(p != nullptr)) return *p;
    report(ERR_NULL, site, 0, 0);
    return detail::oob_scratch<typename std::remove_cv<T>::type>();
}
// p[i]: as deref for a null p (pointers carry no extent; other addresses are the program's to keep valid).
template <class T, class I>
SJ_FN T& ptr_at(T* p, I i, uint32_t site) {
    if (SJ_LIKELY(p != nullptr)) return p[i];
    report(ERR_NULL, site, 0, 0);
    return detail::oob_scratch<typename std::remove_cv<T>::type>();
}
// A byte-address access of n bytes at `off` (checked mode): recorded when it does not fit.
template <class B>
SJ_FN uint64_t bytes_chk(const B& b, uint64_t off, uint64_t n, uint32_t site) {
    if (SJ_LIKELY(b.fits(off, n))) return off;
    report(ERR_INDEX, site, int64_t(off), int64_t(b.count));
    return off;
}

#if !SJ_CUDA
// Recursion guard of functions on a call cycle: each thread (or group fiber) may use `budget` bytes
// of stack below the mark its launcher sets; a call beyond it records ERR_RECURSION and returns a
// zero value, and every guarded call of the thread returns at once from then on (unwinding).
struct StackState {
    uintptr_t limit = 0;
    bool unwinding = false;
};
inline StackState& stack_state() { static thread_local StackState s; return s; }
inline void stack_mark(size_t budget) {
    char here;
    StackState& s = stack_state();
    uintptr_t h = reinterpret_cast<uintptr_t>(&here);
    s.limit = h > budget ? h - budget : 0;
    s.unwinding = false;
}
inline bool stack_exhausted(uint32_t site) {
    StackState& s = stack_state();
    if (s.unwinding) return true;
    char here;
    if (reinterpret_cast<uintptr_t>(&here) < s.limit) {
        s.unwinding = true;
        report(ERR_RECURSION, site, 0, 0);
        return true;
    }
    return false;
}
#endif
}  // namespace sj
