/*
 * Checks whose verdict the device gives later (bad labels, indices out of
 * range, found by a kernel on a GPU).
 *
 * A checked GPU kernel notes the first offending position on the device;
 * that verdict is copied, on the same stream, into page-locked host memory,
 * and the call returns at once: the host does not wait for the device to
 * learn whether a call was valid. The kernels themselves stay in bounds
 * whatever the input (they clip or skip bad positions), so nothing breaks
 * meanwhile. The pending check travels with the fences (fence.h) of what
 * the operation wrote, and of whatever later work read that, and is
 * resolved where the host waits for those buffers anyway: a failed check
 * then reports the operator's message, as the synchronous check did.
 *
 * A check is reference counted: every fence that carries it holds one.
 * Its verdict's memory goes back to its owner (the GPU layer's slot pool)
 * when the last reference goes.
 */
#ifndef DEFT_CORE_DEVICE_CHECK_H
#define DEFT_CORE_DEVICE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the device writes: the first offending position and the value there. */
typedef struct deft_check_verdict {
    uint64_t first; /* DEFT_CHECK_PASSED, DEFT_CHECK_PENDING or a position */
    double value;
} deft_check_verdict_t;

#define DEFT_CHECK_PASSED UINT64_MAX
/* Set by the host before the copy is queued: the device has not answered yet. */
#define DEFT_CHECK_PENDING (UINT64_MAX - 1)

/* Sets the thread's error for a failed verdict (the operator's message) and
 * returns -1; ctx is the caller's copy (deft_check_report_t). */
typedef int (*deft_check_report_fn)(const void *ctx, int64_t first, double value);

/* How to word a failure: fn, and ctx_size bytes at ctx that the check copies. */
typedef struct deft_check_report {
    deft_check_report_fn fn;
    const void *ctx;
    size_t ctx_size;
} deft_check_report_t;

#ifdef __cplusplus
extern "C" {
#endif

typedef struct deft_check deft_check_t;

/* A pending check of work queued on stream `slot` of GPU `id`, whose verdict
 * the device will write to `verdict` (page-locked host memory, set to
 * DEFT_CHECK_PENDING by the caller). release(release_arg) runs once the last
 * reference goes: no one reads `verdict` after that. NULL (error set) when
 * out of memory; release is then not called. */
deft_check_t *deft_check_new(int id, int slot, volatile const deft_check_verdict_t *verdict,
                             const deft_check_report_t *report, void (*release)(void *),
                             void *release_arg);
deft_check_t *deft_check_retain(deft_check_t *check);
void deft_check_release(deft_check_t *check); /* NULL-safe */

/* The device and stream the checked work was queued on. */
int deft_check_device(const deft_check_t *check);
int deft_check_slot(const deft_check_t *check);

/* Whether the device has answered that the check passed. Does not wait: a
 * check that reads false may still pass. */
bool deft_check_passed(const deft_check_t *check);

/* Whether the device has not answered yet (the host did not wait for it). */
bool deft_check_pending(const deft_check_t *check);

/* Once the host has waited for the checked work: 0 when it passed, else -1
 * with the operator's message. */
int deft_check_resolve(const deft_check_t *check);

/* Who owns the checks made now (the engine: the thread whose work this is,
 * whose wait-all reports them); called when a check is made. */
void deft_check_set_owner_fn(uint32_t (*owner)(void));

/* Once the devices are idle: the first of `owner`'s live checks that failed
 * and were not taken before (retained; NULL when none), and in *failed how
 * many there are. Each is taken once. */
deft_check_t *deft_checks_take_failed(uint32_t owner, long *failed);

/* How many checks are alive (tests: none may leak). */
long deft_check_live(void);

/* Whether a GPU kernel queued now may defer its check: a deft_fence_run on
 * this thread collects them, and checks are not synchronous (fence.c, where
 * the runs are; declared here for the CUDA code, which cannot include fence.h). */
bool deft_check_deferring(void);
/* Hand a pending check to the run in progress on this thread (only when
 * deft_check_deferring()); takes over the caller's reference. -1 when out
 * of memory (the check is dropped). */
int deft_check_defer(deft_check_t *check);

#ifdef __cplusplus
}
#endif

#endif
