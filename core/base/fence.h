/*
 * Ordering GPU work across streams (MXNet's GPU engine, by events).
 *
 * Each thread queues its GPU work on a stream of its own per device (one of
 * DEFT_GPU_STREAMS), so independent operations overlap on the device. The
 * engine orders operations on the host, but an operation ends for the
 * engine once its kernels are queued, not done: work queued on one stream
 * must still wait for the earlier work on another stream that touched the
 * same buffers. A buffer remembers that work as fences (points of the
 * streams it was queued on): its last write, and the reads since, at most
 * one per stream (a later point of a stream covers an earlier one). Before
 * queueing, a stream waits for the fences of other streams that the access
 * needs (a read the last write; a write that and every read); after
 * queueing, one new fence per device replaces them. The host blocks only
 * where it reads: waiting for a buffer waits for its fences.
 *
 * A fence records its CUDA event only when a wait needs it (another stream,
 * or the host), on its stream at that moment: a chain of operations on one
 * thread's stream records no event at all, where an event per operation
 * cost about as much as the launch. The late event also covers work queued
 * after the fenced work, so such a wait waits a little longer, never less.
 *
 * Freed GPU memory keeps its fences in the caching pool, and the next
 * storage to get the block inherits them, so the first work on the reused
 * memory waits for the last work on the old. Fences exist only for GPU
 * storages; CPU work never pays for them.
 */
#ifndef DEFT_CORE_FENCE_H
#define DEFT_CORE_FENCE_H

#include <stdbool.h>

#include "core/base/device_check.h"
#include "core/base/tensor.h"

/* What a write does to the value, for its device-side checks (device_check.h). */
typedef enum deft_access_value {
    DEFT_VALUE_NEW,    /* a new value: the run's checks replace the buffer's */
    DEFT_VALUE_UPDATE, /* an in-place update, which reads the old value: its checks go on */
    DEFT_VALUE_SAME,   /* fenced as a write, but unchanged: the buffer keeps its checks */
} deft_access_value_t;

/* One access of an operation to a buffer. */
typedef struct deft_access {
    deft_storage_t *storage; /* NULL, CPU and zero-size storages are skipped */
    bool write;
    deft_access_value_t value; /* for a write (a read is DEFT_VALUE_SAME whatever it says) */
} deft_access_t;

/* Before queueing GPU work: the calling thread's stream of each GPU storage's
 * device waits for the earlier work the access must follow. */
int deft_fence_begin(const deft_access_t *access, int n);
/* After queueing it: later work on other streams will wait for it. */
int deft_fence_end(const deft_access_t *access, int n);

/* Queue GPU work: fn(ctx) between the two above. The accesses are fenced
 * even when fn fails, since part of its work may be queued.
 *
 * Device-side checks (device_check.h): meanwhile fn's kernels may defer
 * their checks to the run (deft_check_defer), which also carries the
 * checks of the buffers it reads; the buffers it writes then carry them
 * all, until written again, and deft_fence_host_check reports a failed
 * one. A run that writes host memory (a copy from the device: the host
 * waited for its inputs already) resolves them at once instead, and fails
 * with the first failure's message, as does a run that would carry more
 * than a few dozen (it waits for the device then: the host ran far ahead). */
int deft_fence_run(const deft_access_t *access, int n, int (*fn)(void *ctx), void *ctx);

/* Make every check synchronous (or not, the default): the naive engine's
 * mode, where a bad call must fail where it is made. */
void deft_fence_set_synchronous_checks(bool on);
/* After the host waited for a buffer's last write (deft_fence_host_wait):
 * 0, or -1 with the message of a failed check that its value depends on. */
int deft_fence_host_check(deft_storage_t *storage);

/* The host waits until a GPU storage's last write (and, for `write`, every
 * read since) is done on the device; nothing to do for the CPU. */
int deft_fence_host_wait(deft_storage_t *storage, bool write);

/* The calling thread's stream of GPU `id` waits for what is queued on
 * stream `slot` of it so far (nothing to do when that is its own stream):
 * for work handed between threads (a custom operator's callback thread).
 * Without an event the host waits for the device instead. */
int deft_fence_join(int id, int slot);

/* Whether any access is to GPU memory (and so needs fences at all). */
bool deft_fence_any_gpu(const deft_access_t *access, int n);
/* Accesses of n tensors, all reads or all writes, into `access` (room for n). */
void deft_fence_tensors(const deft_tensor_t *t, int n, bool write, deft_access_t *access);

/* How many events the fences have recorded, since the process started (tests). */
long deft_fence_events_recorded(void);

/* Drop a buffer's fences (the pool, when its block goes back to the device). */
void deft_fences_free(deft_fences_t *fences);
/* Drop a buffer's checks (its storage is freed: the next user of the block
 * keeps the fences, not the verdict on the old value). */
void deft_fences_drop_checks(deft_fences_t *fences);

#endif
