/*
 * Storage: a reference-counted buffer on one device.
 *
 * Arrays, views and (later) graph nodes and engine operations each hold a
 * reference; the buffer returns to its device's pool when the last goes.
 */
#ifndef DEFT_CORE_STORAGE_H
#define DEFT_CORE_STORAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/device.h"

typedef struct deft_fences deft_fences_t; /* fence.h */

typedef struct deft_storage {
    atomic_int refcount;
    deft_device_t device;
    void *data;      /* NULL when nbytes is 0 */
    size_t nbytes;   /* bytes asked for */
    size_t capacity; /* bytes the allocator gave */
    /* Bumped by every write through an array (deft_ndarray_touch): values kept
     * for later (memoised results, values saved for backward) notice changes. */
    atomic_uint version;
    /* Unique to this buffer's life (a recycled record or a spare reused gets a
     * new one): with version, a key for what a kernel derives from the
     * contents and keeps (the convolution's packed weights, op.h). */
    uint64_t id;
    /* Memory lent by someone else (DLPack): given back through this instead
     * of the device's pool, and not counted in the memory statistics. */
    void (*external_free)(void *ctx);
    void *external_ctx;
    /* GPU work to wait for before touching the buffer (fence.h); made on
     * first use, inherited from the pool with a reused block. */
    _Atomic(deft_fences_t *) fences;
    /* Small CPU buffers live in the storage record itself (storage.c). */
    bool inline_data;
    /* Where data came from when not the device's own allocator (page-locked
     * host memory, deft_storage_new_from); NULL otherwise. */
    const struct deft_allocator *allocator;
    /* Writable outside deft (exported or imported through DLPack): writes
     * there bump no version, so no value of it can be trusted unchanged. */
    atomic_bool shared;
} deft_storage_t;

_Static_assert(sizeof(deft_storage_t) <= 512, "records hold storage headers");

/* New storage with one reference, contents undefined; -1 on bad device or OOM. */
int deft_storage_new(deft_device_t dev, size_t nbytes, deft_storage_t **out);

/* A buffer on dev from `allocator` rather than the device's own (which gets
 * it back when the storage goes). */
int deft_storage_new_from(const struct deft_allocator *allocator, deft_device_t dev, size_t nbytes,
                          deft_storage_t **out);

/* Storage over memory the caller lends (`data`, `nbytes` on `dev`): one
 * reference, marked shared; external_free(ctx) (not NULL) runs when the last goes. */
int deft_storage_wrap(deft_device_t dev, void *data, size_t nbytes, void (*external_free)(void *),
                      void *ctx, deft_storage_t **out);

/* Whether any GPU buffer has been made in this process: until one is, no
 * work needs GPU fences (fence.h) and graph runs skip listing their buffers. */
bool deft_storage_gpu_made(void);

/*
 * Storage an array may keep for its next use (ndarray.c, the spare): a small
 * CPU buffer of deft's own, reachable only through the caller's reference.
 * Parked, it counts as released in the memory statistics; unparked for
 * nbytes (at most its capacity), as new storage of that size.
 */
bool deft_storage_parkable(const deft_storage_t *storage);
void deft_storage_park(deft_storage_t *storage);
void deft_storage_unpark(deft_storage_t *storage, size_t nbytes);

deft_storage_t *deft_storage_retain(deft_storage_t *storage);
/* Drop a reference; NULL is a no-op. */
void deft_storage_release(deft_storage_t *storage);

#endif
