"""The native worker pool's source (C++, compiled once per compiler and flags into the CPU cache by
runtime/cpu_pool.py through cpu_compiler.load_library: the same MAC-checked cache as the kernels).

Workers are native threads (all signals blocked, 8 MiB stacks), created once per pool.  A dispatch is one
call, `sjp_run`, made with the GIL released: it publishes the job in the pool (the kernel library's chunk
runner `sj_run_chunks_ctx`, the launcher, its arguments), bumps the generation word the idle workers wait on
(spinning for `spin_ns`, then in futex_wait), runs its own share of chunks on the calling thread, closes the job (a
worker that has not taken a share by then takes none: one the OS was slow to wake or had descheduled does not
hold the dispatch back), waits for those that took one (spin, then futex), and calls the library's
`sj_finish_chunks`, which combines the participants'
accumulators (each left in its own 64-byte record) in participant order: one add per slot into memory.

The generation word holds the job's participant count in its low 12 bits, so a worker that is not a
participant of the job never reads the job (which the next dispatch may already be rewriting).  The pool is
taken by one dispatch at a time (`busy`); a dispatch that finds it taken (another Python thread's), a pool
stopped, or one inherited through fork() (its threads do not exist in the child: pthread_atfork bumps an
epoch) runs its whole range on the calling thread and returns 1."""
from __future__ import annotations

POOL_ABI = 2            # sjp_abi(): the Python side's expectations

SOURCE = r"""// slangjit native worker pool (runtime/cpu_pool_native.py)
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#define SJP_EXPORT extern "C" __attribute__((visibility("default")))

typedef void (*sjp_runner_t)(void*, void*, void*, const void*, uint64_t*, uint32_t, uint32_t, void*, void*);
typedef void (*sjp_finish_t)(void*, uint32_t, uint32_t);

namespace {
constexpr uint32_t kCtx = 64;            // bytes per participant's accumulator record (sj::RangeCtx)
constexpr uint32_t kChunksPerWorker = 8; // enough that a descheduled worker holds back little
constexpr uint32_t kMaxThreads = 4095;   // the participant count lives in the generation word's low 12 bits

struct Job {
    sjp_runner_t runner; void* launcher; void* gp; void* pp; const void* gc;
    uint32_t total, chunk; void* ep; sjp_finish_t finish;
};

constexpr uint64_t kClosed = uint64_t(1) << 31;

struct Pool {
    alignas(64) uint32_t gen;            // futex word: (sequence << 12) | participants of the current job
    alignas(64) uint64_t started;        // (gen << 32) | closed bit | workers that took a share of the job
    alignas(64) uint32_t done;           // futex word: workers that finished their share
    uint32_t caller_waits;
    alignas(64) uint64_t next;           // the chunk counter
    alignas(64) uint32_t sleepers;       // workers in futex_wait on gen
    alignas(64) uint32_t busy;
    uint32_t stopped;
    uint32_t nthreads;                   // participants at most: the caller + nthreads - 1 workers
    uint64_t spin_ns;
    uint64_t epoch;
    uint64_t dispatches, inline_runs, shares;   // statistics (read by tests)
    Job job;
    char* ctxs;                          // nthreads * kCtx
};

struct WorkerArg { Pool* pool; uint32_t index; };

uint64_t g_epoch = 1;                    // bumped in a fork()ed child: its inherited pools have no threads

void after_fork_child() { g_epoch++; }

__attribute__((constructor)) void register_fork_handler() { pthread_atfork(nullptr, nullptr, after_fork_child); }

inline void fwait(uint32_t* a, uint32_t v) { syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0); }
inline void fwake(uint32_t* a, int n) { syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0); }

inline uint64_t now_ns() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Spin until *a != v, for at most `ns` nanoseconds; the value seen (== v when the time ran out).
inline uint32_t spin_while(uint32_t* a, uint32_t v, uint64_t ns) {
    uint32_t w = __atomic_load_n(a, __ATOMIC_ACQUIRE);
    if (w != v || ns == 0) return w;
    const uint64_t t0 = now_ns();
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            relax();
            w = __atomic_load_n(a, __ATOMIC_ACQUIRE);
            if (w != v) return w;
        }
        if (now_ns() - t0 >= ns) return w;
    }
}

typedef void (*sjp_launcher_t)(void*, void*, const void*, uint32_t, uint32_t, void*);

// Participant i of k: chunks claimed through the library's runner, or (a library without one: runner null)
// the i-th of k contiguous ranges.
inline void run_share(const Job& j, uint32_t i, uint32_t k, uint64_t* next, char* ctx) {
    if (j.runner) {
        j.runner(j.launcher, j.gp, j.pp, j.gc, next, j.total, j.chunk, j.ep, ctx);
    } else {
        const uint32_t b = uint32_t(uint64_t(j.total) * i / k), e = uint32_t(uint64_t(j.total) * (i + 1) / k);
        if (b < e) ((sjp_launcher_t)j.launcher)(j.gp, j.pp, j.gc, b, e, j.ep);
    }
}

void* worker_main(void* arg) {
    WorkerArg wa = *(WorkerArg*)arg;
    free(arg);
    Pool* p = wa.pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t w = spin_while(&p->gen, seen, p->spin_ns);
        if (w == seen) {
            __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            while ((w = __atomic_load_n(&p->gen, __ATOMIC_SEQ_CST)) == seen) fwait(&p->gen, seen);
            __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
        }
        seen = w;
        if (__atomic_load_n(&p->stopped, __ATOMIC_ACQUIRE)) return nullptr;
        if (wa.index >= (w & 0xfffu)) continue;        // not a participant: the job is not ours to read
        // Take a share unless the caller has closed the job (it ran out of chunks before this worker woke:
        // a worker the OS was slow to wake or had descheduled never holds the dispatch back).
        uint64_t s = __atomic_load_n(&p->started, __ATOMIC_ACQUIRE);
        bool take = false;
        while (uint32_t(s >> 32) == w && !(s & kClosed))
            if (__atomic_compare_exchange_n(&p->started, &s, s + 1, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                take = true;
                break;
            }
        if (!take) continue;
        run_share(p->job, wa.index, w & 0xfffu, &p->next, p->ctxs + size_t(wa.index) * kCtx);
        __atomic_add_fetch(&p->done, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&p->caller_waits, __ATOMIC_SEQ_CST)) fwake(&p->done, 1);
    }
}

void run_inline(sjp_runner_t runner, void* launcher, void* gp, void* pp, const void* gc, uint32_t total, void* ep,
                sjp_finish_t finish) {
    if (!runner) { ((sjp_launcher_t)launcher)(gp, pp, gc, 0, total, ep); return; }
    alignas(64) char ctx[kCtx];
    uint64_t next = 0;
    runner(launcher, gp, pp, gc, &next, total, total, ep, ctx);
    finish(ctx, 1, kCtx);
}
}  // namespace

SJP_EXPORT int sjp_abi() { return 2; }

// A pool of `nthreads` participants (the caller and nthreads - 1 workers); null when threads cannot be made.
SJP_EXPORT void* sjp_create(uint32_t nthreads, uint64_t spin_ns) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads > kMaxThreads) nthreads = kMaxThreads;
    Pool* p = (Pool*)aligned_alloc(64, (sizeof(Pool) + 63) / 64 * 64);
    if (!p) return nullptr;
    memset((void*)p, 0, sizeof(Pool));
    p->nthreads = nthreads;
    p->spin_ns = spin_ns;
    p->epoch = g_epoch;
    p->ctxs = (char*)aligned_alloc(64, size_t(nthreads) * kCtx);
    if (!p->ctxs) { free(p); return nullptr; }
    memset(p->ctxs, 0, size_t(nthreads) * kCtx);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, size_t(8) << 20);   // kernels' recursion budget is 1 MiB of it
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);            // signals go to the interpreter's threads
    uint32_t made = 1;
    for (uint32_t i = 1; i < nthreads; ++i) {
        WorkerArg* a = (WorkerArg*)malloc(sizeof(WorkerArg));
        if (!a) break;
        a->pool = p;
        a->index = i;
        pthread_t t;
        if (pthread_create(&t, &attr, worker_main, a) != 0) { free(a); break; }
        ++made;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_attr_destroy(&attr);
    p->nthreads = made;                  // the workers that exist: a job never waits for one that does not
    return p;
}

SJP_EXPORT uint32_t sjp_threads(void* pool) { return ((Pool*)pool)->nthreads; }

SJP_EXPORT void sjp_stats(void* pool, uint64_t* out) {
    Pool* p = (Pool*)pool;
    out[0] = __atomic_load_n(&p->dispatches, __ATOMIC_RELAXED);
    out[1] = __atomic_load_n(&p->inline_runs, __ATOMIC_RELAXED);
    out[2] = __atomic_load_n(&p->shares, __ATOMIC_RELAXED);
}

// One dispatch of `launcher` over groups [0, total) on at most `k` participants (runner null: `launcher` on
// k contiguous ranges, no accumulators to combine).  0: run on the pool;
// 1: run on the calling thread alone (the pool was taken, stopped or inherited through fork()).
SJP_EXPORT int sjp_run(void* pool, void* runner_, void* launcher, void* gp, void* pp, const void* gc,
                       uint32_t total, uint32_t k, void* ep, void* finish_) {
    Pool* p = (Pool*)pool;
    sjp_runner_t runner = (sjp_runner_t)runner_;
    sjp_finish_t finish = (sjp_finish_t)finish_;
    if (k > p->nthreads) k = p->nthreads;
    if (k > total) k = total;
    if (k <= 1 || p->epoch != g_epoch || __atomic_load_n(&p->stopped, __ATOMIC_ACQUIRE) ||
        __atomic_exchange_n(&p->busy, 1u, __ATOMIC_ACQUIRE) != 0) {
        if (k > 1 && p->epoch == g_epoch) __atomic_add_fetch(&p->inline_runs, 1, __ATOMIC_RELAXED);
        run_inline(runner, launcher, gp, pp, gc, total, ep, finish);
        return 1;
    }
    uint32_t chunk = total / (k * kChunksPerWorker);
    if (chunk < 1) chunk = 1;
    p->job = Job{runner, launcher, gp, pp, gc, total, chunk, ep, finish};
    p->next = 0;
    for (uint32_t i = 1; i < k; ++i)                 // a worker that takes no share leaves an empty record
        ((void**)(p->ctxs + size_t(i) * kCtx))[0] = nullptr;
    const uint32_t g = ((((__atomic_load_n(&p->gen, __ATOMIC_RELAXED) >> 12) + 1) & 0xfffffu) << 12) | k;
    __atomic_store_n(&p->done, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&p->started, uint64_t(g) << 32, __ATOMIC_RELAXED);
    __atomic_store_n(&p->gen, g, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST)) fwake(&p->gen, 0x7fffffff);
    run_share(p->job, 0, k, &p->next, p->ctxs);
    if (!runner)                                     // fixed ranges: every worker's must run (a legacy library)
        while (uint32_t(__atomic_load_n(&p->started, __ATOMIC_ACQUIRE) & 0xfffu) < k - 1) sched_yield();
    // Close the job: workers that have not taken a share by now will not; wait for those that have.
    const uint32_t n = uint32_t(__atomic_fetch_or(&p->started, kClosed, __ATOMIC_ACQ_REL) & 0xfffu);
    uint32_t d = __atomic_load_n(&p->done, __ATOMIC_ACQUIRE);
    if (d != n) {
        // the others have at most one chunk each to go: spin, then sleep
        const uint64_t t0 = now_ns();
        while ((d = __atomic_load_n(&p->done, __ATOMIC_ACQUIRE)) != n && now_ns() - t0 < p->spin_ns)
            for (int i = 0; i < 64; ++i) relax();
        if (d != n) {
            __atomic_store_n(&p->caller_waits, 1u, __ATOMIC_SEQ_CST);
            while ((d = __atomic_load_n(&p->done, __ATOMIC_SEQ_CST)) != n) fwait(&p->done, d);
            __atomic_store_n(&p->caller_waits, 0u, __ATOMIC_RELAXED);
        }
    }
    __atomic_add_fetch(&p->shares, n, __ATOMIC_RELAXED);
    if (runner) finish(p->ctxs, k, kCtx);
    __atomic_add_fetch(&p->dispatches, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&p->busy, 0u, __ATOMIC_RELEASE);
    return 0;
}

// The workers exit (after a dispatch in flight); the pool's memory stays (a caller may still hold it: its
// dispatches then run on the calling thread).
SJP_EXPORT void sjp_stop(void* pool) {
    Pool* p = (Pool*)pool;
    while (__atomic_exchange_n(&p->busy, 1u, __ATOMIC_ACQUIRE) != 0) {
        struct timespec t = {0, 50000};
        nanosleep(&t, nullptr);
    }
    __atomic_store_n(&p->stopped, 1u, __ATOMIC_RELEASE);
    const uint32_t g = ((((__atomic_load_n(&p->gen, __ATOMIC_RELAXED) >> 12) + 1) & 0xfffffu) << 12);
    __atomic_store_n(&p->gen, g, __ATOMIC_SEQ_CST);
    fwake(&p->gen, 0x7fffffff);
    __atomic_store_n(&p->busy, 0u, __ATOMIC_RELEASE);
}
"""
