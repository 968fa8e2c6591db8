/*
 * Scheduling: pushing operations, running them on workers or inline, errors
 * and waiting.
 *
 * An operation whose dependencies are met is "ready". A ready operation
 * that is small runs at once on the thread that made it ready, when that is
 * the host (a hand-off to a sleeping worker costs 10-50 us, far more than a
 * small kernel); a large one goes to the ready queue for the workers, so the
 * host runs ahead. A worker that finishes an operation runs the first
 * operation it made ready itself, without a trip through the queue, and
 * queues the rest. Workers poll briefly before sleeping, because work often
 * arrives in bursts.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/device.h"
#include "core/base/device_check.h"
#include "core/base/fence.h"
#include "core/base/fpmode.h"
#include "core/base/parallel.h"
#include "core/base/profiler.h"
#include "core/base/records.h"
#include "core/base/once.h"
#include "core/base/spin.h"
#include "core/base/tls.h"
#include "core/engine/engine_internal.h"

#define MAX_WORKERS 64
/* Bytes that queued operations may hold before a push waits: enough for the
 * host to run several steps of a large model ahead, little next to memory. */
#define DEFAULT_MAX_PENDING_BYTES (1L << 30)

static struct {
    deft_once_t config_once;
    bool naive;
    int num_workers;
    long max_pending;
    long long max_pending_bytes;

    pthread_mutex_t lock; /* queues, sleeping, started, stopping, progress waiters */
    pthread_cond_t work;
    pthread_cond_t progress;
    engine_op_t *head[2], *tail[2]; /* [1]: priority > 0 */
    atomic_int queued;
    int sleeping;
    int started;
    bool stopping;
    pthread_t threads[MAX_WORKERS];

    atomic_long pending;        /* pushed and not yet finished */
    atomic_long helped;         /* operations run by threads waiting for all work */
    atomic_llong pending_bytes; /* their bytes */
    _Atomic(deft_engine_release_fn) release_hook;
    _Atomic(deft_engine_reacquire_fn) reacquire_hook;
    atomic_int progress_waiters;

    pthread_mutex_t failures_lock;
    struct failure_log *failures; /* per thread, since its last wait-all */
    atomic_uint last_thread_id;
    pthread_key_t thread_key; /* forgets an exiting thread's failures */
} engine = {
    .config_once = DEFT_ONCE_INIT,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .progress = PTHREAD_COND_INITIALIZER,
    .failures_lock = PTHREAD_MUTEX_INITIALIZER,
};

static DEFT_TLS_FAST bool tl_worker;
/* The thread failures are reported to: this thread's own id, or while it
 * runs a queued operation, the id of the thread that pushed it. 0: none yet. */
static DEFT_TLS_FAST uint32_t tl_thread;
static DEFT_TLS_FAST engine_op_t *tl_running;          /* the queued operation this thread runs */
static DEFT_TLS_FAST const engine_op_t *tl_acting_for; /* the operation this thread works inside */

/* ---- configuration ---- */

static long env_long(const char *name, long fallback, long lo, long hi) {
    const char *text = getenv(name);
    if (!text || !*text) return fallback;
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || v < lo) return fallback;
    return v > hi ? hi : v;
}

static void forget_thread_failures(void *id);
static uint32_t this_thread_id(void);
static void park_workers_before_fork(void);
static void resume_workers_after_fork(void);
static void forget_workers_in_child(void);

static void configure(void) {
    const char *mode = getenv("DEFT_ENGINE");
    engine.naive = mode && strcmp(mode, "naive") == 0;
    /* Naive mode is for debugging: a bad index fails the call that made
     * it, as on the CPU, so the GPU's checks wait for their verdict. */
    if (engine.naive) deft_fence_set_synchronous_checks(true);
    /* The host thread is busy too (it calls the operators and runs the small
     * ones itself): one core is left to it. */
    int threads = deft_parallel_threads();
    engine.num_workers =
        (int)env_long("DEFT_ENGINE_WORKERS", threads > 1 ? threads - 1 : 1, 1, MAX_WORKERS);
    engine.max_pending = env_long("DEFT_ENGINE_MAX_PENDING", 16384, 1, 1L << 30);
    engine.max_pending_bytes =
        env_long("DEFT_ENGINE_MAX_PENDING_BYTES", DEFAULT_MAX_PENDING_BYTES, 1, LONG_MAX);
    deft_check_set_owner_fn(this_thread_id);
    pthread_key_create(&engine.thread_key, forget_thread_failures);
    pthread_atfork(park_workers_before_fork, resume_workers_after_fork, forget_workers_in_child);
}

static void ensure_configured(void) {
    deft_once(&engine.config_once, configure);
}

bool deft_engine_is_naive(void) {
    ensure_configured();
    return engine.naive;
}

int deft_engine_num_workers(void) {
    ensure_configured();
    return engine.naive ? 0 : engine.num_workers;
}

long deft_engine_max_pending(void) {
    ensure_configured();
    return engine.max_pending;
}

long deft_engine_pending(void) {
    return atomic_load(&engine.pending);
}

long long deft_engine_max_pending_bytes(void) {
    ensure_configured();
    return engine.max_pending_bytes;
}

long long deft_engine_pending_bytes(void) {
    return atomic_load(&engine.pending_bytes);
}

/* ---- blocking, with a binding's hooks around it ---- */

void deft_engine_set_block_hooks(deft_engine_release_fn release,
                                 deft_engine_reacquire_fn reacquire) {
    atomic_store(&engine.release_hook, release);
    atomic_store(&engine.reacquire_hook, reacquire);
}

typedef struct blocking {
    deft_engine_reacquire_fn reacquire; /* the pair is read once: a hook changed
                                           meanwhile never pairs with the other */
    void *state;
} blocking_t;

static blocking_t block_begin(void) {
    deft_engine_release_fn release = atomic_load(&engine.release_hook);
    blocking_t b = {atomic_load(&engine.reacquire_hook), NULL};
    if (!release || !b.reacquire) return (blocking_t){NULL, NULL};
    b.state = release();
    return b;
}

static void block_end(blocking_t b) {
    if (b.reacquire) b.reacquire(b.state);
}

bool deft_engine_on_worker(void) {
    return tl_worker;
}

/* ---- error values ---- */

/* When even an error cannot be allocated, this one is used: its one
 * permanent reference keeps it from ever being freed. */
static engine_error_t out_of_memory = {1, DEFT_ERR_OUT_OF_MEMORY,
                                       "out of memory while recording an error"};

engine_error_t *engine_error_new(deft_error_kind_t kind, const char *message) {
    size_t len = strlen(message) + 1;
    engine_error_t *error = malloc(sizeof *error + len);
    if (!error) return engine_error_retain(&out_of_memory);
    atomic_init(&error->refcount, 1);
    error->kind = kind;
    error->message = memcpy(error + 1, message, len); /* the text follows the record */
    return error;
}

engine_error_t *engine_error_retain(engine_error_t *error) {
    atomic_fetch_add_explicit(&error->refcount, 1, memory_order_relaxed);
    return error;
}

void engine_error_release(engine_error_t *error) {
    if (error && atomic_fetch_sub_explicit(&error->refcount, 1, memory_order_acq_rel) == 1)
        free(error);
}

static int report(engine_error_t *error) {
    deft_error_restore(error->kind, error->message);
    engine_error_release(error);
    return -1;
}

/* ---- failures, per thread ---- */

/*
 * Each thread that pushes work has a log of the failures of that work since
 * its last wait-all: the first failure and how many more. Threads are named
 * by a number, not a pointer to the log, so that an operation need not hold
 * a reference; the log goes when its thread exits.
 */
typedef struct failure_log {
    uint32_t thread;
    engine_error_t *first;
    long more;
    struct failure_log *next;
} failure_log_t;

__attribute__((noinline)) static uint32_t new_thread_id(void) {
    ensure_configured();
    uint32_t id = atomic_fetch_add(&engine.last_thread_id, 1) + 1;
    pthread_setspecific(engine.thread_key, (void *)(uintptr_t)id);
    return tl_thread = id;
}

static inline uint32_t this_thread(void) {
    return tl_thread ? tl_thread : new_thread_id();
}

/* Who owns a device-side check made now: the thread whose work this is. */
static uint32_t this_thread_id(void) {
    return this_thread();
}

/* Called with failures_lock held: the log of a thread and the link to it. */
static failure_log_t **find_log(uint32_t thread) {
    failure_log_t **link = &engine.failures;
    while (*link && (*link)->thread != thread) link = &(*link)->next;
    return link;
}

/* Work pushed by `thread` failed with error (a new failure, not one passed on). */
__attribute__((noinline)) static void log_failure(uint32_t thread, engine_error_t *error) {
    pthread_mutex_lock(&engine.failures_lock);
    failure_log_t **link = find_log(thread), *log = *link;
    if (!log && (log = calloc(1, sizeof *log)) != NULL) {
        log->thread = thread;
        *link = log;
    }
    if (log && !log->first)
        log->first = engine_error_retain(error);
    else if (log)
        log->more++;
    pthread_mutex_unlock(&engine.failures_lock);
}

/* Take a thread's log out of the list (NULL when nothing failed). */
static failure_log_t *take_log(uint32_t thread) {
    pthread_mutex_lock(&engine.failures_lock);
    failure_log_t **link = find_log(thread), *log = *link;
    if (log) *link = log->next;
    pthread_mutex_unlock(&engine.failures_lock);
    return log;
}

static void forget_thread_failures(void *id) {
    failure_log_t *log = take_log((uint32_t)(uintptr_t)id);
    if (log) engine_error_release(log->first);
    free(log);
}

/* ---- ready lists and the queue ---- */

void ready_list_add(ready_list_t *list, engine_op_t *op) {
    op->next_ready = NULL;
    if (list->tail)
        list->tail->next_ready = op;
    else
        list->head = op;
    list->tail = op;
}

static engine_op_t *ready_list_pop(ready_list_t *list) {
    engine_op_t *op = list->head;
    if (op) {
        list->head = op->next_ready;
        if (!list->head) list->tail = NULL;
    }
    return op;
}

void op_dependency_met(engine_op_t *op, ready_list_t *ready) {
    if (atomic_fetch_sub_explicit(&op->wait, 1, memory_order_acq_rel) == 1)
        ready_list_add(ready, op);
}

static void *worker_main(void *arg);

/* Called with engine.lock held. */
static void start_workers(void) {
    for (; engine.started < engine.num_workers; engine.started++) {
        if (pthread_create(&engine.threads[engine.started], NULL, worker_main, NULL) != 0) break;
    }
}

static void schedule(engine_op_t *op) {
    int level = op->priority > 0;
    op->next_ready = NULL;
    pthread_mutex_lock(&engine.lock);
    if (engine.started < engine.num_workers) start_workers();
    if (engine.tail[level])
        engine.tail[level]->next_ready = op;
    else
        engine.head[level] = op;
    engine.tail[level] = op;
    atomic_fetch_add(&engine.queued, 1);
    if (engine.sleeping > 0) pthread_cond_signal(&engine.work);
    pthread_mutex_unlock(&engine.lock);
}

/* Called with engine.lock held. */
static engine_op_t *dequeue_locked(void) {
    for (int level = 1; level >= 0; level--) {
        engine_op_t *op = engine.head[level];
        if (!op) continue;
        engine.head[level] = op->next_ready;
        if (!engine.head[level]) engine.tail[level] = NULL;
        atomic_fetch_sub(&engine.queued, 1);
        return op;
    }
    return NULL;
}

/* ---- running an operation ---- */

/* A pushed operation of `bytes` finished: wake whoever waits for the engine to
 * drain, or for room (when this finish brought a bound from full to not). */
static void finish_pending(size_t bytes) {
    long long bytes_before = bytes ? atomic_fetch_sub(&engine.pending_bytes, (long long)bytes) : 0;
    bool room_made = bytes_before >= engine.max_pending_bytes &&
                     bytes_before - (long long)bytes < engine.max_pending_bytes;
    long left = atomic_fetch_sub(&engine.pending, 1) - 1;
    if ((left == 0 || left == engine.max_pending - 1 || room_made) &&
        atomic_load(&engine.progress_waiters)) {
        pthread_mutex_lock(&engine.lock);
        pthread_cond_broadcast(&engine.progress);
        pthread_mutex_unlock(&engine.lock);
    }
}

static void free_op(engine_op_t *op) {
    int n = op->num_reads + op->num_writes;
    for (int i = 0; i < n; i++) deft_var_release(op->vars[i].var);
    if (op->vars != op->inline_vars) free(op->vars);
    deft_record_free(op);
}

/* The failure the work just reported on this thread, as an error value,
 * logged for the thread that the work is reported to. */
__attribute__((noinline)) static engine_error_t *work_failed(void) {
    engine_error_t *error = engine_error_new(deft_error_kind(), deft_error_message());
    log_failure(this_thread(), error);
    return error;
}

/* fn(ctx), its errors named after the API function `origin`. */
static inline engine_error_t *run_work(deft_engine_fn fn, void *ctx, const char *origin) {
    const char *caller = deft_error_swap_function(origin);
    unsigned fpmode = deft_fpmode_enter(); /* inline on a caller's thread: flush denormals */
    int status = fn(ctx);
    deft_fpmode_leave(fpmode);
    deft_error_swap_function(caller);
    return status == 0 ? NULL : work_failed();
}

/* run_work counted against the thread budget and timed for the profiler. */
__attribute__((noinline)) static engine_error_t *run_work_measured(deft_engine_fn fn, void *ctx,
                                                                   const char *name,
                                                                   const char *origin, bool small,
                                                                   deft_device_t device) {
    /* Small operations never split across threads: they do not count against
     * the budget of the large ones running beside them. */
    if (!small) deft_parallel_op_begin();
    double start = deft_profiling(DEFT_PROF_IMPERATIVE) ? deft_profiler_now() : 0;
    engine_error_t *error = run_work(fn, ctx, origin);
    if (start != 0 && name)
        deft_profiler_op_span("operator", name, deft_profiler_device_name(device), start,
                              deft_profiler_now());
    if (!small) deft_parallel_op_end();
    return error;
}

/* Call the work; a failure becomes an error value (retained for the caller).
 * Small work unprofiled, most imperative calls, takes no frame of its own. */
static inline engine_error_t *call_work(deft_engine_fn fn, void *ctx, const char *name,
                                        const char *origin, bool small, deft_device_t device) {
    if (small && !deft_profiling(DEFT_PROF_IMPERATIVE)) return run_work(fn, ctx, origin);
    return run_work_measured(fn, ctx, name, origin, small, device);
}

/* Mark the writes failed (if error) or new (a success overwrote any failure
 * they held), and release the operation's variables in order. */
static void complete_vars(const op_var_t *vars, int num_reads, int n, engine_error_t *error,
                          ready_list_t *ready) {
    for (int i = num_reads; i < n; i++)
        if (error)
            var_set_error(vars[i].var, error);
        else
            var_clear_error(vars[i].var);
    engine_error_release(error);
    for (int i = 0; i < num_reads; i++) var_complete_read(vars[i].var, ready);
    for (int i = num_reads; i < n; i++) var_complete_write(vars[i].var, ready);
}

/* Run (or skip, if something it reads failed) one ready operation; what it
 * makes ready goes to `ready`. Its failure is reported to its pusher. */
static void execute(engine_op_t *op, ready_list_t *ready) {
    int n = op->num_reads + op->num_writes;
    engine_error_t *error = NULL;
    for (int i = 0; i < n && !error; i++)
        if (i < op->num_reads || op->vars[i].read) error = var_error(op->vars[i].var);
    if (!error && op->fn) {
        uint32_t thread = tl_thread;
        engine_op_t *running = tl_running;
        tl_thread = op->thread, tl_running = op;
        error = call_work(op->fn, op->ctx, op->name, op->origin, op->small, op->device);
        tl_thread = thread, tl_running = running;
    }
    if (op->free_ctx) op->free_ctx(op->ctx);
    complete_vars(op->vars, op->num_reads, n, error, ready);
    size_t bytes = op->bytes;
    free_op(op);
    finish_pending(bytes);
}

/* Run what became ready on this thread when it is cheap (or the engine is
 * naive); queue the rest. An operation without work only wakes a waiting
 * thread: it runs at once wherever it became ready, so a wait is never
 * delayed behind queued work. */
static void dispatch(ready_list_t *ready) {
    engine_op_t *op;
    while ((op = ready_list_pop(ready)) != NULL) {
        if (engine.naive || !op->fn || (op->small && !tl_worker))
            execute(op, ready);
        else
            schedule(op);
    }
}

static engine_op_t *take_work(void) {
    deft_spin_t spin = deft_spin_start(DEFT_SPIN_NS);
    while (atomic_load_explicit(&engine.queued, memory_order_relaxed) == 0 &&
           deft_spin_again(&spin)) {
    }
    pthread_mutex_lock(&engine.lock);
    engine_op_t *op;
    while (!(op = dequeue_locked()) && !engine.stopping) {
        engine.sleeping++;
        pthread_cond_wait(&engine.work, &engine.lock);
        engine.sleeping--;
    }
    pthread_mutex_unlock(&engine.lock);
    return op;
}

/* Run op, then the first operation it made ready, and so on, as a worker:
 * the rest of what becomes ready is queued. */
static void run_chain(engine_op_t *op) {
    while (op) {
        ready_list_t ready = {NULL, NULL}, later = {NULL, NULL};
        execute(op, &ready);
        op = NULL; /* continue with the first made ready that has work */
        for (engine_op_t *next; (next = ready_list_pop(&ready)) != NULL;) {
            if (!next->fn)
                execute(next, &ready);
            else if (!op)
                op = next;
            else
                ready_list_add(&later, next);
        }
        for (engine_op_t *rest; (rest = ready_list_pop(&later)) != NULL;) schedule(rest);
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    tl_worker = true;
    deft_fpmode_flush_denormals();                     /* see core/base/fpmode.h */
    pthread_setname_np(pthread_self(), "deft engine"); /* named in profiler traces */
    engine_op_t *op;
    while ((op = take_work()) != NULL) run_chain(op);
    return NULL;
}

/* ---- pushing ---- */

static bool listed(deft_var_t *const *vars, int n, const deft_var_t *var) {
    for (int i = 0; i < n; i++)
        if (vars[i] == var) return true;
    return false;
}

static bool listed_in_op(const engine_op_t *op, int from, int to, const deft_var_t *var) {
    for (int i = from; i < to; i++)
        if (op->vars[i].var == var) return true;
    return false;
}

static void add_var(engine_op_t *op, int *n, deft_var_t *var, bool write, bool read, bool retain) {
    op->vars[*n] = (op_var_t){retain ? deft_var_retain(var) : var, op, NULL, write, read};
    (*n)++;
}

/*
 * Operations with many variables (a graph run with thousands of inputs) find
 * the ones listed twice by sorting them, not by comparing every pair.
 */
#define PAIRWISE_VARS 32

typedef struct var_use {
    deft_var_t *var;
    bool write, read;
} var_use_t;

static int compare_uses(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const var_use_t *)a)->var,
              y = (uintptr_t)((const var_use_t *)b)->var;
    return (x > y) - (x < y);
}

/* The reads and first num_writes writes of d, each variable once (a write if
 * any use writes it), in *n; NULL when out of memory. The caller frees it. */
static var_use_t *unique_uses(const deft_engine_op_desc_t *d, int num_writes, int *n) {
    int total = d->num_reads + num_writes, m = 0;
    var_use_t *u = malloc((size_t)total * sizeof *u);
    if (!u) return NULL;
    for (int i = 0; i < d->num_reads; i++) u[i] = (var_use_t){d->reads[i], false, true};
    for (int i = 0; i < num_writes; i++)
        u[d->num_reads + i] = (var_use_t){d->writes[i], true, false};
    qsort(u, (size_t)total, sizeof *u, compare_uses);
    for (int i = 0; i < total; i++) {
        if (m > 0 && u[m - 1].var == u[i].var) {
            u[m - 1].write |= u[i].write, u[m - 1].read |= u[i].read;
            continue;
        }
        u[m++] = u[i];
    }
    *n = m;
    return u;
}

static void add_var(engine_op_t *op, int *n, deft_var_t *var, bool write, bool read, bool retain);

static int collect_many_vars(const deft_engine_op_desc_t *d, int num_writes, engine_op_t *op,
                             bool retain) {
    int m, n = 0;
    var_use_t *u = unique_uses(d, num_writes, &m);
    if (!u) return -1;
    op->vars = m <= OP_INLINE_VARS ? op->inline_vars : malloc((size_t)m * sizeof *op->vars);
    if (!op->vars) {
        free(u);
        return -1;
    }
    for (int i = 0; i < m; i++)
        if (!u[i].write) add_var(op, &n, u[i].var, false, true, retain);
    op->num_reads = n;
    for (int i = 0; i < m; i++)
        if (u[i].write) add_var(op, &n, u[i].var, true, u[i].read, retain);
    op->num_writes = n - op->num_reads;
    free(u);
    return 0;
}

/* Reads not also written, and writes, each once: the variables op depends on.
 * A queued operation holds a reference to each; one run at once borrows them. */
/* num_writes: how many of d->writes to take (run_now leaves the fresh ones out). */
static int collect_vars(const deft_engine_op_desc_t *d, int num_writes, engine_op_t *op,
                        bool retain) {
    int total = d->num_reads + num_writes;
    if (total > PAIRWISE_VARS) return collect_many_vars(d, num_writes, op, retain);
    op->vars = total <= OP_INLINE_VARS ? op->inline_vars : malloc((size_t)total * sizeof *op->vars);
    if (!op->vars) return -1;
    int n = 0;
    for (int i = 0; i < d->num_reads; i++) {
        deft_var_t *v = d->reads[i];
        if (!listed(d->writes, num_writes, v) && !listed_in_op(op, 0, n, v))
            add_var(op, &n, v, false, true, retain);
    }
    op->num_reads = n;
    for (int i = 0; i < num_writes; i++)
        if (!listed_in_op(op, op->num_reads, n, d->writes[i]))
            add_var(op, &n, d->writes[i], true, listed(d->reads, d->num_reads, d->writes[i]),
                    retain);
    op->num_writes = n - op->num_reads;
    return 0;
}

static bool full(void) {
    return atomic_load(&engine.pending) >= engine.max_pending ||
           atomic_load(&engine.pending_bytes) >= engine.max_pending_bytes;
}

/* Back-pressure: the host waits while the queue is full (by operations or by
 * bytes). Workers never wait: the work they push is what empties the queue. */
static void wait_for_room(void) {
    if (!full() || tl_worker) return;
    blocking_t b = block_begin();
    atomic_fetch_add(&engine.progress_waiters, 1);
    pthread_mutex_lock(&engine.lock);
    while (full()) pthread_cond_wait(&engine.progress, &engine.lock);
    pthread_mutex_unlock(&engine.lock);
    atomic_fetch_sub(&engine.progress_waiters, 1);
    block_end(b);
}

/* Whether a variable is listed twice among the reads and the first num_writes
 * writes (out of memory: true, which takes the careful way). */
static bool any_listed_twice(const deft_engine_op_desc_t *d, int num_writes) {
    if (d->num_reads + num_writes > PAIRWISE_VARS) {
        int m = 0;
        var_use_t *u = unique_uses(d, num_writes, &m);
        bool twice = !u || m < d->num_reads + num_writes;
        free(u);
        return twice;
    }
    for (int i = 0; i < d->num_reads; i++)
        if (listed(d->reads, i, d->reads[i]) || listed(d->writes, num_writes, d->reads[i]))
            return true;
    for (int i = 1; i < num_writes; i++)
        if (listed(d->writes, i, d->writes[i])) return true;
    return false;
}

/* Each variable once, as collect_vars lists them: reads not also written, then writes. */
static void list_once(const deft_engine_op_desc_t *d, int num_writes, deft_var_t **unique,
                      int *num_reads, int *num_unique) {
    int n = 0;
    for (int i = 0; i < d->num_reads; i++)
        if (!listed(d->writes, num_writes, d->reads[i]) && !listed(unique, n, d->reads[i]))
            unique[n++] = d->reads[i];
    *num_reads = n;
    for (int i = 0; i < num_writes; i++)
        if (!listed(unique + *num_reads, n - *num_reads, d->writes[i])) unique[n++] = d->writes[i];
    *num_unique = n;
}

/*
 * A small operation off the GPU that only reads shared variables (its writes are
 * fresh): each variable's lock is held across the work instead of counting
 * the read in and out, one locked instruction per variable instead of two.
 * The work only computes (kernels take no variable's lock). 1 when a
 * variable is busy: nothing was done, and the counted way waits.
 */
static inline __attribute__((always_inline)) int
run_holding(const deft_engine_op_desc_t *d, deft_var_t *const *reads, int num_reads) {
    int held = 0;
    while (held < num_reads && var_try_hold(reads[held])) held++;
    engine_error_t *error = NULL;
    if (held == num_reads && d->fn)
        error = call_work(d->fn, d->ctx, d->name, d->origin, d->small, d->device);
    int ran = held == num_reads;
    while (held > 0) var_unhold(reads[--held]);
    for (int i = 0; error && i < d->num_writes; i++) var_set_error(d->writes[i], error);
    engine_error_release(error);
    return ran ? 0 : 1;
}

/* deft_engine_run_now's body, forced inline into it and into deft_engine_push:
 * with two call sites GCC keeps it out of line, and LTO then no longer inlines
 * it into imperative invoke, whose every instruction counts. */
static inline __attribute__((always_inline)) int run_now(const deft_engine_op_desc_t *d) {
    /* Fresh variables are idle and private: no locked instruction for them (each
     * costs as much as the rest of the call). They still get the error, if any. */
    int shared = d->num_writes - d->num_fresh_writes;
    deft_var_t *const *reads = d->reads, *const *writes = d->writes;
    int num_reads = d->num_reads, num_writes = shared;
    deft_var_t *unique[OP_INLINE_VARS];
    if (any_listed_twice(d, shared)) { /* rare (an input given as output): list each once */
        if (d->num_reads + shared > OP_INLINE_VARS) return 1;
        int n;
        list_once(d, shared, unique, &num_reads, &n);
        reads = unique, writes = unique + num_reads, num_writes = n - num_reads;
    }
    if (shared == 0 && d->device.type != DEFT_DEV_GPU && run_holding(d, reads, num_reads) == 0)
        return 0;
    int started_reads = 0, started_writes = 0;
    while (started_reads < num_reads && var_try_start(reads[started_reads], false)) started_reads++;
    while (started_reads == num_reads && started_writes < num_writes &&
           var_try_start(writes[started_writes], true))
        started_writes++;
    /* else busy: what was started is undone below, and the caller pushes */
    bool ready_now = started_reads == num_reads && started_writes == num_writes;
    /* Not counted as pending: it finishes before the caller's API call returns. */
    engine_error_t *error = ready_now && d->fn
                                ? call_work(d->fn, d->ctx, d->name, d->origin, d->small, d->device)
                                : NULL;
    for (int i = shared; error && i < d->num_writes; i++) var_set_error(d->writes[i], error);
    for (int i = 0; error && i < num_writes; i++) var_set_error(writes[i], error);
    engine_error_release(error);
    ready_list_t ready = {NULL, NULL};
    for (int i = 0; i < started_reads; i++) var_complete_read(reads[i], &ready);
    for (int i = 0; i < started_writes; i++) var_complete_write(writes[i], &ready);
    if (ready.head) dispatch(&ready); /* mostly nothing waited: no call */
    return ready_now ? 0 : 1;
}

int deft_engine_run_now(const deft_engine_op_desc_t *d) {
    ensure_configured();
    return run_now(d);
}

int deft_engine_push(const deft_engine_op_desc_t *d) {
    ensure_configured();
    /* Pushed, it would run inline when its variables are free (dispatch): then
     * it may as well run at once, without an operation record. */
    if (d->small && !tl_worker && run_now(d) == 0) {
        if (d->free_ctx) d->free_ctx(d->ctx);
        return 0;
    }
    engine_op_t *op = deft_record_alloc();
    if (!op || collect_vars(d, d->num_writes, memset(op, 0, offsetof(engine_op_t, inline_vars)),
                            true) != 0) {
        deft_record_free(op);
        if (d->free_ctx) d->free_ctx(d->ctx);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an engine operation");
    }
    op->fn = d->fn;
    op->free_ctx = d->free_ctx;
    op->ctx = d->ctx;
    op->name = d->name;
    op->origin = d->origin;
    op->priority = d->priority;
    op->small = d->small;
    op->thread = this_thread();
    op->device = d->device;
    op->bytes = d->bytes;
    int n = op->num_reads + op->num_writes;
    atomic_init(&op->wait, n + 1);

    if (!d->never_block) wait_for_room();
    atomic_fetch_add(&engine.pending, 1);
    if (op->bytes) atomic_fetch_add(&engine.pending_bytes, (long long)op->bytes);
    ready_list_t ready = {NULL, NULL};
    for (int i = 0; i < n; i++) var_append(&op->vars[i], &ready);
    op_dependency_met(op, &ready); /* the hold taken while registering */
    dispatch(&ready);
    return 0;
}

/* ---- waiting ---- */

typedef struct sync_point {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
} sync_point_t;

static void signal_sync(void *arg) {
    sync_point_t *s = arg;
    pthread_mutex_lock(&s->lock);
    s->done = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static int refuse_on_worker(void) {
    return deft_error(DEFT_ERR_VALUE,
                      "waiting from inside an engine operation would deadlock; wait from the "
                      "host thread");
}

static int refuse_inside_work(const char *what) {
    if (tl_worker) return refuse_on_worker();
    return deft_error(DEFT_ERR_VALUE,
                      "%s from inside the callback of operator '%s' would wait forever: the "
                      "operator finishes only when the callback returns",
                      what, tl_acting_for->name ? tl_acting_for->name : "(unnamed)");
}

/* Whether waiting for var would wait for the operation this thread works
 * inside (a custom operator's callback waiting on that operator's output). */
static bool waits_for_itself(const deft_var_t *var, bool for_write) {
    const engine_op_t *op = tl_acting_for;
    for (int i = 0; op && i < op->num_reads + op->num_writes; i++)
        if (op->vars[i].var == var && (op->vars[i].write || for_write)) return true;
    return false;
}

typedef enum wait_mode { WAIT_READ, WAIT_WRITE, WAIT_OVERWRITE } wait_mode_t;

/* Wait until var is free for the mode; then report the failure it keeps,
 * except to a caller about to overwrite it. */
static int wait_var(deft_var_t *var, wait_mode_t mode) {
    bool for_write = mode != WAIT_READ;
    if (!var_idle(var, for_write)) {
        if (tl_worker) return refuse_on_worker();
        if (waits_for_itself(var, for_write))
            return refuse_inside_work("waiting for an array that the operator writes");
        sync_point_t s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
        deft_engine_op_desc_t d = {.free_ctx = signal_sync,
                                   .ctx = &s,
                                   .name = "WaitForVar",
                                   .origin = "DeftNDArrayWaitToRead",
                                   .small = true};
        if (for_write)
            d.writes = &var, d.num_writes = 1;
        else
            d.reads = &var, d.num_reads = 1;
        if (deft_engine_push(&d)) return -1;
        blocking_t b = block_begin();
        pthread_mutex_lock(&s.lock);
        while (!s.done) pthread_cond_wait(&s.cond, &s.lock);
        pthread_mutex_unlock(&s.lock);
        block_end(b);
        pthread_mutex_destroy(&s.lock);
        pthread_cond_destroy(&s.cond);
    }
    engine_error_t *error = mode == WAIT_OVERWRITE ? NULL : var_error(var);
    return error ? report(error) : 0;
}

/* An engine wait, as a span in the "engine" domain when the profiler asks for it. */
static int profiled_wait(const char *name, deft_var_t *var, wait_mode_t mode) {
    if (!deft_profiling(DEFT_PROF_API)) return wait_var(var, mode);
    double start = deft_profiler_now();
    int status = wait_var(var, mode);
    deft_profiler_span("engine", name, start, deft_profiler_now());
    return status;
}

int deft_engine_wait_to_read(deft_var_t *var) {
    return profiled_wait("WaitToRead", var, WAIT_READ);
}

int deft_engine_wait_to_write(deft_var_t *var) {
    return profiled_wait("WaitToWrite", var, WAIT_WRITE);
}

int deft_engine_wait_to_overwrite(deft_var_t *var) {
    return profiled_wait("WaitToWrite", var, WAIT_OVERWRITE);
}

void deft_engine_overwritten(deft_var_t *var) {
    var_clear_error(var);
}

/*
 * While it waits for all work, the calling thread runs queued operations as a
 * worker would: its core would idle otherwise (the engine leaves one core to
 * it), and so independent operations still run two at a time with one
 * worker. Only there: a wait for all work wants everything done anyway, and
 * its caller holds no lock (a push waiting for room may hold one that a
 * queued operation takes).
 */
static void help_while_waiting(void) {
    while (atomic_load(&engine.pending) != 0 && atomic_load(&engine.queued) > 0) {
        pthread_mutex_lock(&engine.lock);
        engine_op_t *op = dequeue_locked();
        pthread_mutex_unlock(&engine.lock);
        if (!op) return;
        tl_worker = true; /* what it pushes never waits; it waits for nothing */
        run_chain(op);
        tl_worker = false;
        atomic_fetch_add_explicit(&engine.helped, 1, memory_order_relaxed);
    }
}

long deft_engine_helped(void) {
    return atomic_load(&engine.helped);
}

static void wait_idle(void) {
    if (atomic_load(&engine.pending) == 0) return;
    blocking_t b = block_begin();
    help_while_waiting();
    atomic_fetch_add(&engine.progress_waiters, 1);
    pthread_mutex_lock(&engine.lock);
    while (atomic_load(&engine.pending) != 0) pthread_cond_wait(&engine.progress, &engine.lock);
    pthread_mutex_unlock(&engine.lock);
    atomic_fetch_sub(&engine.progress_waiters, 1);
    block_end(b);
}

bool deft_engine_inside_work(void) {
    return tl_worker || tl_acting_for;
}

int deft_engine_wait_all(void) {
    ensure_configured();
    if (deft_engine_inside_work()) return refuse_inside_work("waiting for all work");
    double start = deft_profiling(DEFT_PROF_API) ? deft_profiler_now() : 0;
    wait_idle();
    if (start != 0) deft_profiler_span("engine", "WaitAll", start, deft_profiler_now());
    /* The GPU work is queued: wait for it, for the device-side checks it made. */
    if (deft_device_synchronize_used()) return -1;
    failure_log_t *log = tl_thread ? take_log(tl_thread) : NULL;
    long failed_checks = 0;
    deft_check_t *check = tl_thread ? deft_checks_take_failed(tl_thread, &failed_checks) : NULL;
    if (!log && !check) return 0;
    /* The message is an operation's failure if any (the log and the checks
     * keep no common order), else the first failed check's, as its wait
     * words it. */
    if (!log) deft_check_resolve(check);
    deft_error_kind_t kind = log ? log->first->kind : deft_error_kind();
    const char *first = log ? log->first->message : deft_error_message();
    long more = (log ? log->more : -1) + failed_checks;
    char text[DEFT_ERROR_MAX];
    if (more)
        snprintf(text, sizeof text, "%s (and %ld more failure%s since the last wait for all work)",
                 first, more, more == 1 ? "" : "s");
    else
        snprintf(text, sizeof text, "%s", first);
    deft_error_restore(kind, text);
    deft_check_release(check);
    if (log) engine_error_release(log->first);
    free(log);
    return -1;
}

const engine_op_t *deft_engine_running(void) {
    return tl_running;
}

void deft_engine_act_for(const engine_op_t *op) {
    tl_acting_for = op;
}

void deft_engine_shutdown(void) {
    ensure_configured();
    if (deft_engine_inside_work()) return;
    wait_idle();
    pthread_mutex_lock(&engine.lock);
    engine.stopping = true;
    pthread_cond_broadcast(&engine.work);
    int started = engine.started;
    pthread_mutex_unlock(&engine.lock);
    for (int i = 0; i < started; i++) pthread_join(engine.threads[i], NULL);
    pthread_mutex_lock(&engine.lock);
    engine.started = 0;
    engine.stopping = false;
    pthread_mutex_unlock(&engine.lock);
}

/*
 * A worker that has just finished an operation may still be freeing what it
 * held (DeftWaitAll returns as soon as the work is done), and a fork then
 * would copy into the child a lock the worker holds inside malloc: glibc's
 * malloc guards against that, a sanitizer's allocator does not. So a fork
 * waits, briefly and only when nothing is pending, until every worker
 * sleeps, and keeps the engine's lock so that none wakes until it is done.
 */
static void park_workers_before_fork(void) {
    pthread_mutex_lock(&engine.lock);
    for (int tries = 0;
         tries < 100000 && engine.sleeping < engine.started && atomic_load(&engine.pending) == 0;
         tries++) {
        pthread_mutex_unlock(&engine.lock);
        sched_yield();
        pthread_mutex_lock(&engine.lock);
    }
}

static void resume_workers_after_fork(void) {
    pthread_mutex_unlock(&engine.lock);
}

/*
 * fork() copies only the calling thread: the child has no workers, and any
 * operation queued or running in the parent never completes in the child.
 * The child starts with fresh locks and no workers; workers start again on
 * first use. Fork only with nothing pending (DeftWaitAll first).
 */
static void forget_workers_in_child(void) {
    pthread_mutex_init(&engine.lock, NULL);
    pthread_cond_init(&engine.work, NULL);
    pthread_cond_init(&engine.progress, NULL);
    pthread_mutex_init(&engine.failures_lock, NULL);
    engine.head[0] = engine.head[1] = engine.tail[0] = engine.tail[1] = NULL;
    atomic_store(&engine.queued, 0);
    atomic_store(&engine.pending, 0);
    atomic_store(&engine.pending_bytes, 0);
    atomic_store(&engine.progress_waiters, 0);
    engine.sleeping = 0;
    engine.started = 0;
    engine.stopping = false;
}

__attribute__((destructor)) static void stop_at_unload(void) {
    deft_engine_shutdown();
}
