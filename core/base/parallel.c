/*
 * The helper pool behind deft_parallel_for.
 *
 * One job runs at a time. The caller publishes it by bumping a generation
 * counter; helpers poll that counter for a short while (a job often follows
 * another) before sleeping on a condition variable. Everyone, caller
 * included, claims chunks from an atomic cursor, and the caller waits only
 * for chunks that someone claimed and is running, so no job waits on a
 * sleeping helper: a helper that wakes late finds nothing left and goes back.
 *
 * The job lives in the pool, and the cursor carries the job's number beside
 * the next chunk: a helper claims a chunk with a compare-and-swap that fails
 * once its job is over, so the caller never waits for helpers to let go of
 * a finished job, and a helper stalled by the scheduler delays only the
 * chunk it holds. Chunks are small (16 per thread) for the same reason.
 */
#define _GNU_SOURCE
#include "core/base/parallel.h"
#include "core/base/fpmode.h"
#include "core/base/spin.h"
#include "core/base/tls.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS       64
#define CHUNKS_PER_THREAD 16
#define CHUNK_BITS        40 /* the cursor: job number << CHUNK_BITS | next chunk */
#define CHUNK_MASK        ((1ull << CHUNK_BITS) - 1)
/* The most a helper polls without a job while a graph runs (parallel.h). */
#define DEFT_SPIN_HOT_NS 500000

/* The job's description is atomic only because a late helper may read it
 * while the next job is written; it then fails its claim and ignores it. */
typedef struct job {
    _Atomic(deft_range_fn) fn;
    _Atomic(void *) ctx;
    atomic_llong n, chunk;
    atomic_ullong cursor;
    atomic_llong finished; /* items done */
} job_t;

static struct {
    pthread_once_t once;
    pthread_mutex_t busy; /* held by the thread whose job is running */
    pthread_mutex_t sleep_lock;
    pthread_cond_t wake;
    atomic_ulong generation; /* the number of the job published last */
    atomic_bool stopping;
    atomic_int hot; /* graph runs under way */
    job_t job;
    int threads;
    int helpers_started;
    pthread_t helpers[MAX_THREADS];
} pool = {
    .once = PTHREAD_ONCE_INIT,
    .busy = PTHREAD_MUTEX_INITIALIZER,
    .sleep_lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
};

/* Run chunks of job number `number` until none is left (or it is over).
 *
 * A helper late for its job may read the description while the next job's
 * is being written, a mix of both. The caller closes the cursor before it
 * writes a description (deft_parallel_for), and the fence below pairs with
 * its release fence: if any field read here is the next job's, the closing
 * happened before the claim, and the claim fails. */
static void run_chunks(unsigned long number) {
    job_t *job = &pool.job;
    unsigned long long tag = (unsigned long long)(number & (~0ull >> CHUNK_BITS)) << CHUNK_BITS;
    unsigned long long cursor = atomic_load_explicit(&job->cursor, memory_order_acquire);
    if ((cursor & ~CHUNK_MASK) != tag) return; /* another job's: ours is over */
    deft_range_fn fn = atomic_load_explicit(&job->fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&job->ctx, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&job->n, memory_order_relaxed);
    int64_t chunk = atomic_load_explicit(&job->chunk, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    for (;;) {
        if ((cursor & ~CHUNK_MASK) != tag || (cursor & CHUNK_MASK) == CHUNK_MASK) return;
        int64_t begin = (int64_t)(cursor & CHUNK_MASK) * chunk;
        if (begin >= n) return;
        if (!atomic_compare_exchange_weak(&job->cursor, &cursor, cursor + 1)) continue;
        int64_t end = begin + chunk < n ? begin + chunk : n;
        fn(ctx, begin, end);
        atomic_fetch_add_explicit(&job->finished, end - begin, memory_order_release);
        cursor = atomic_load(&job->cursor);
    }
}

/* Whether to poll on once spin's time is up: a graph runs, and the helper
 * has polled less than DEFT_SPIN_HOT_NS since `start` (then spin gets more). */
static bool poll_longer(deft_spin_t *spin, int64_t start) {
    if (atomic_load_explicit(&pool.hot, memory_order_relaxed) <= 0 ||
        spin->deadline_ns - start >= DEFT_SPIN_HOT_NS)
        return false;
    spin->deadline_ns += DEFT_SPIN_NS;
    return true;
}

static unsigned long wait_for_generation(unsigned long seen) {
    deft_spin_t spin = deft_spin_start(DEFT_SPIN_NS);
    const int64_t start = spin.deadline_ns - DEFT_SPIN_NS;
    do {
        unsigned long now = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (now != seen || atomic_load(&pool.stopping)) return now;
    } while (deft_spin_again(&spin) || poll_longer(&spin, start));
    pthread_mutex_lock(&pool.sleep_lock);
    unsigned long now;
    while ((now = atomic_load(&pool.generation)) == seen && !atomic_load(&pool.stopping))
        pthread_cond_wait(&pool.wake, &pool.sleep_lock);
    pthread_mutex_unlock(&pool.sleep_lock);
    return now;
}

static void *helper_main(void *arg) {
    (void)arg;
    deft_fpmode_flush_denormals(); /* see fpmode.h */
    /* 0, not the current generation: the first job may be published before
     * this thread gets here, and it would then wait for the next one. */
    unsigned long seen = 0;
    for (;;) {
        seen = wait_for_generation(seen);
        if (atomic_load(&pool.stopping)) return NULL;
        run_chunks(seen);
    }
}

static int configured_threads(void) {
    const char *env = getenv("DEFT_NUM_THREADS");
    long n = env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static void stop_helpers(void) {
    atomic_store(&pool.stopping, true);
    pthread_mutex_lock(&pool.sleep_lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.sleep_lock);
    for (int i = 0; i < pool.helpers_started; i++) pthread_join(pool.helpers[i], NULL);
    pool.helpers_started = 0;
}

/* A forked child has none of the parent's helpers: it runs every job serially. */
static void forget_helpers_in_child(void) {
    pool.helpers_started = 0;
    pool.threads = 1;
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.sleep_lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
}

static void start_pool(void) {
    pool.threads = configured_threads();
    for (int i = 0; i + 1 < pool.threads; i++) {
        if (pthread_create(&pool.helpers[i], NULL, helper_main, NULL) != 0) break;
        pool.helpers_started++;
    }
    pool.threads = pool.helpers_started + 1;
    pthread_atfork(NULL, NULL, forget_helpers_in_child);
    atexit(stop_helpers);
}

void deft_parallel_hot_begin(void) {
    atomic_fetch_add_explicit(&pool.hot, 1, memory_order_relaxed);
}

void deft_parallel_hot_end(void) {
    atomic_fetch_sub_explicit(&pool.hot, 1, memory_order_relaxed);
}

static atomic_int running_ops;
static DEFT_TLS_FAST unsigned long tl_jobs;

unsigned long deft_parallel_jobs(void) {
    return tl_jobs;
}

void deft_parallel_op_begin(void) {
    atomic_fetch_add_explicit(&running_ops, 1, memory_order_relaxed);
}

void deft_parallel_op_end(void) {
    atomic_fetch_sub_explicit(&running_ops, 1, memory_order_relaxed);
}

int deft_parallel_budget(void) {
    int threads = deft_parallel_threads();
    int others = atomic_load_explicit(&running_ops, memory_order_relaxed) - 1;
    int budget = threads - (others > 0 ? others : 0);
    return budget < 1 ? 1 : budget;
}

int deft_parallel_threads(void) {
    pthread_once(&pool.once, start_pool);
    return pool.threads;
}

/* Wait for the chunks others claimed: poll, then give the core away, since a
 * helper holding a chunk may be waiting for this very core. */
static void wait_finished(int64_t n) {
    deft_spin_t spin = deft_spin_start(DEFT_SPIN_NS);
    while (atomic_load_explicit(&pool.job.finished, memory_order_acquire) < n)
        if (!deft_spin_again(&spin)) sched_yield();
}

void deft_parallel_for(int64_t n, int64_t grain, deft_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = n >= 2 * grain ? deft_parallel_budget() : 1;
    if (threads < 2 || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    tl_jobs++;
    int64_t chunk = (n + CHUNKS_PER_THREAD * threads - 1) / (CHUNKS_PER_THREAD * threads);
    job_t *job = &pool.job;
    unsigned long number = atomic_load_explicit(&pool.generation, memory_order_relaxed) + 1;
    unsigned long long tag = (unsigned long long)(number & (~0ull >> CHUNK_BITS)) << CHUNK_BITS;
    /* Closed (no chunk can be claimed) before the description changes: see run_chunks. */
    atomic_store_explicit(&job->cursor, tag | CHUNK_MASK, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&job->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&job->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&job->n, n, memory_order_relaxed);
    atomic_store_explicit(&job->chunk, chunk < grain ? grain : chunk, memory_order_relaxed);
    atomic_store_explicit(&job->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&job->cursor, tag, memory_order_release); /* open */
    atomic_store_explicit(&pool.generation, number, memory_order_release);
    pthread_mutex_lock(&pool.sleep_lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.sleep_lock);
    run_chunks(number);
    wait_finished(n);
    pthread_mutex_unlock(&pool.busy);
}

typedef struct pair {
    deft_task_fn fn[2];
    void *ctx[2];
} pair_t;

static void run_pair_range(void *arg, int64_t begin, int64_t end) {
    const pair_t *p = arg;
    for (int64_t i = begin; i < end; i++) p->fn[i](p->ctx[i]);
}

void deft_parallel_pair(deft_task_fn a, void *ctx_a, deft_task_fn b, void *ctx_b) {
    pair_t p = {{a, b}, {ctx_a, ctx_b}};
    deft_parallel_for(2, 1, run_pair_range, &p);
}
