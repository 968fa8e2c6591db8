/*
 * The dependency engine (MXNet's design, in C).
 *
 * Every array has an engine variable. An operation is pushed with the
 * variables it reads and the ones it writes; it runs once every earlier
 * write to what it reads, and every earlier read and write of what it
 * writes, is done. Operations on independent variables run in parallel on
 * a pool of worker threads, so the host thread runs ahead of the work.
 *
 * Errors are values: a failing operation's message is attached to the
 * variables it writes; operations reading such a variable do not run and
 * pass the same message on; every wait on a failed variable reports it,
 * until a successful write replaces the value. A wait-all reports the
 * failures of the waiting thread's own work. DEFT_ENGINE=naive runs every
 * operation on the pushing thread.
 */
#ifndef DEFT_CORE_ENGINE_H
#define DEFT_CORE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/device.h"

typedef struct deft_var deft_var_t;

/* A new variable with one reference; NULL (error set) when out of memory. */
deft_var_t *deft_var_new(void);
deft_var_t *deft_var_retain(deft_var_t *var);
/* Drop a reference; never blocks: pending operations hold their own. */
void deft_var_release(deft_var_t *var);
/* Whether the caller's reference is the only one and no failure is kept:
 * no operation is pending on it, and it can serve a new array as it is. */
bool deft_var_reusable(deft_var_t *var);

/* The work: return 0, or -1 with the thread's error set (deft_error). */
typedef int (*deft_engine_fn)(void *ctx);
/* Called once after the work ran or was skipped, on any thread. */
typedef void (*deft_engine_free_fn)(void *ctx);

typedef struct deft_engine_op_desc {
    deft_engine_fn fn;
    deft_engine_free_fn free_ctx; /* may be NULL */
    void *ctx;
    deft_var_t *const *reads;
    int num_reads;
    deft_var_t *const *writes;
    int num_writes;
    int priority;       /* larger runs first among ready operations */
    const char *name;   /* static string, for errors and the profiler */
    const char *origin; /* the API function that pushed it, named in errors */
    /* Cheap enough to run on the pushing thread when ready. Its work must not
     * wait for other threads: run at once, it may hold its reads' locks. */
    bool small;
    deft_device_t device; /* where the work runs, for the profiler (zero-initialised: the CPU) */
    bool never_block;     /* skip back-pressure: pushed under a lock that finishing work may take */
    /* The last num_fresh_writes writes are variables the pusher just made and
     * nobody else can see yet: run_now needs no locking for them. */
    int num_fresh_writes;
    /* Bytes of the arrays the operation reads and writes, which a queued
     * operation keeps alive: counted against DEFT_ENGINE_MAX_PENDING_BYTES. */
    size_t bytes;
} deft_engine_op_desc_t;

/*
 * Schedule an operation. A variable listed twice, or as both read and
 * written, counts once (as written). A small one pushed from outside the
 * workers whose variables are free runs before this returns (as
 * deft_engine_run_now). Blocks while too many operations, or too many of
 * their bytes, are pending (back-pressure), except on worker threads. On failure (out of memory)
 * nothing is scheduled and ctx is freed.
 */
int deft_engine_push(const deft_engine_op_desc_t *desc);

/*
 * Run a small operation at once on this thread, if none of its variables
 * is busy or holds an error: the same effect as pushing it and having it
 * run inline, without queueing it. Returns 0 when it ran (its failure, if
 * any, is kept on its writes as for a pushed operation) and 1 when it did
 * not, in which case nothing happened and the caller pushes it. free_ctx is
 * not called: ctx may live on the caller's stack.
 */
int deft_engine_run_now(const deft_engine_op_desc_t *desc);

/*
 * Block until the variable's pending writes (and, for write, reads) are done;
 * -1 with the failure's message if the variable holds one. A failure is
 * sticky: every wait reports it until a write that does not read the
 * variable succeeds. Waiting, from inside an operator's callback (see
 * deft_engine_act_for), for a variable that operator writes is an error.
 */
int deft_engine_wait_to_read(deft_var_t *var);
int deft_engine_wait_to_write(deft_var_t *var);
/* Wait as for a write, without reporting a kept failure: the caller is about
 * to replace the whole value, and then calls deft_engine_overwritten. */
int deft_engine_wait_to_overwrite(deft_var_t *var);
void deft_engine_overwritten(deft_var_t *var);

/*
 * Block until nothing is pending, running queued operations on this thread
 * meanwhile, then until the GPUs are idle. -1 when work pushed by this
 * thread failed since its last wait-all, a device-side check of it included
 * (core/base/device_check.h: one whose buffers are still alive): the first
 * failure's message, and how many more there were. Other threads' failures
 * are theirs; arrays keep their failures.
 */
int deft_engine_wait_all(void);

/* Wait for pending work and stop the workers; the engine restarts on next use. */
void deft_engine_shutdown(void);

/* True on an engine worker thread. */
bool deft_engine_on_worker(void);
/* True on a worker, or on a thread working inside an operation (act_for):
 * waiting for all work, or shutting down, would wait for itself there. */
bool deft_engine_inside_work(void);

/*
 * Work done on another thread for a running operation (a custom operator's
 * callback): the operation's kernel passes deft_engine_running() to the
 * helper thread, which calls deft_engine_act_for(op) before the work and
 * deft_engine_act_for(NULL) after it. Meanwhile waits that would wait for
 * that operation are refused instead of hanging.
 */
typedef struct engine_op deft_engine_work_t;
const deft_engine_work_t *deft_engine_running(void);
void deft_engine_act_for(const deft_engine_work_t *work);

/* Engine settings, read once from the environment. */
bool deft_engine_is_naive(void);
int deft_engine_num_workers(void);
long deft_engine_max_pending(void);
/* Operations pushed and not yet finished. */
long deft_engine_pending(void);
/* Queued operations that a thread waiting for all work ran itself (for tests). */
long deft_engine_helped(void);
/* The bound on pending operations' bytes (DEFT_ENGINE_MAX_PENDING_BYTES): a
 * push waits while the queued operations hold this many bytes or more, so one
 * operation larger than the bound still runs, alone. */
long long deft_engine_max_pending_bytes(void);
/* Bytes (deft_engine_op_desc_t.bytes) of the operations pushed and not yet finished. */
long long deft_engine_pending_bytes(void);

/*
 * Called around every place where a thread outside the workers may sleep
 * waiting for the engine (back-pressure, a wait for a variable, a wait for
 * all work): `release` before, `reacquire(what release returned)` after. A
 * language binding lets its interpreter run meanwhile (Python's GIL). Both
 * NULL: none. A push that may block must not be made while holding a lock
 * that a thread holding the binding's lock may take (else mark it never_block).
 */
typedef void *(*deft_engine_release_fn)(void);
typedef void (*deft_engine_reacquire_fn)(void *state);
void deft_engine_set_block_hooks(deft_engine_release_fn release,
                                 deft_engine_reacquire_fn reacquire);

#endif
