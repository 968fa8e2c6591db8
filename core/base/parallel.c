/*
 * The helper pool behind deft_parallel_for.
 *
 * One job runs at a time. The caller publishes it by bumping a generation
 * counter; helpers spin on that counter for a short while (a job often
 * follows another) before sleeping on a condition variable. Everyone,
 * caller included, claims chunks from an atomic cursor, and the caller
 * spins until the last chunk is finished, so no job ever waits on a sleep.
 */
#define _GNU_SOURCE
#include "core/base/parallel.h"
#include "core/base/fpmode.h"
#include "core/base/spin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

typedef struct job {
    deft_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong cursor;
    atomic_llong finished; /* items done */
} job_t;

static struct {
    pthread_once_t once;
    pthread_mutex_t busy; /* held by the thread whose job is running */
    pthread_mutex_t sleep_lock;
    pthread_cond_t wake;
    atomic_ulong generation;
    atomic_bool stopping;
    job_t *_Atomic job;
    atomic_int active; /* helpers that may be touching the job */
    int threads;
    int helpers_started;
    pthread_t helpers[MAX_THREADS];
} pool = {
    .once = PTHREAD_ONCE_INIT,
    .busy = PTHREAD_MUTEX_INITIALIZER,
    .sleep_lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
};

static void run_chunks(job_t *job) {
    for (;;) {
        int64_t begin = atomic_fetch_add(&job->cursor, job->chunk);
        if (begin >= job->n) return;
        int64_t end = begin + job->chunk < job->n ? begin + job->chunk : job->n;
        job->fn(job->ctx, begin, end);
        atomic_fetch_add_explicit(&job->finished, end - begin, memory_order_release);
    }
}

static unsigned long wait_for_generation(unsigned long seen) {
    deft_spin_t spin = deft_spin_start(DEFT_SPIN_NS);
    do {
        unsigned long now = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (now != seen || atomic_load(&pool.stopping)) return now;
    } while (deft_spin_again(&spin));
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
        /* Announce first, then look: the caller clears the job, then waits for
         * active to drain, so the job (on the caller's stack) outlives us. */
        atomic_fetch_add(&pool.active, 1);
        job_t *job = atomic_load(&pool.job);
        if (job) run_chunks(job);
        atomic_fetch_sub(&pool.active, 1);
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

static atomic_int running_ops;

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

void deft_parallel_for(int64_t n, int64_t grain, deft_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = n >= 2 * grain ? deft_parallel_budget() : 1;
    if (threads < 2 || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    /* Four chunks per thread balance uneven progress without much claiming. */
    int64_t chunk = (n + 4 * threads - 1) / (4 * threads);
    job_t job = {.fn = fn, .ctx = ctx, .n = n, .chunk = chunk < grain ? grain : chunk};
    atomic_init(&job.cursor, 0);
    atomic_init(&job.finished, 0);
    atomic_store(&pool.job, &job);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
    pthread_mutex_lock(&pool.sleep_lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.sleep_lock);
    run_chunks(&job);
    while (atomic_load_explicit(&job.finished, memory_order_acquire) < n) deft_cpu_relax();
    atomic_store(&pool.job, NULL);
    while (atomic_load(&pool.active) != 0) deft_cpu_relax();
    pthread_mutex_unlock(&pool.busy);
}
