/*
 * NDArray: a reference-counted tensor. Public handles, views and recorded
 * graph nodes each hold one reference, so freeing a handle never pulls
 * memory from under anything else that still uses the array.
 *
 * An array made by a recorded call has an entry: the graph node and output
 * that produce it (record.h). A lazy array (deferred compute) has an entry
 * and no storage yet; it gets storage when something needs its value
 * (deferred.h), and keeps its entry so the recorded graph can be exported.
 */
#ifndef DEFT_CORE_NDARRAY_H
#define DEFT_CORE_NDARRAY_H

#include <stdatomic.h>
#include <stdbool.h>

#include "core/base/records.h"
#include "core/base/tensor.h"
#include "core/op/op.h"
#include "core/engine/engine.h"
#include "core/graph/node.h"

struct deft_view_link;

typedef struct deft_ndarray {
    atomic_int refcount;
    deft_tensor_t tensor;
    deft_var_t *var;          /* orders the operations that read and write this array */
    deft_entry_t entry;       /* the recorded node producing it (a reference), or none */
    _Atomic uint64_t memo_id; /* memo.h: 0 until memoisation first sees it */
    unsigned kept_version;    /* a kept value: its storage's version when kept */
    /* Lent to a custom operator's callback: its writes compute the kernel's
     * outputs, so they do not count as changes of the contents. */
    bool lent;
    /* A strided view's link to the storage it views (view.h), else NULL. */
    struct deft_view_link *link;
} deft_ndarray_t;

_Static_assert(sizeof(deft_ndarray_t) <= DEFT_RECORD_SIZE, "records hold array headers");

/*
 * New array with one reference and fresh storage; zero-filled when `zero`,
 * otherwise undefined contents. -1 on an oversized shape or out of memory.
 */
int deft_ndarray_new(const deft_shape_t *shape, deft_dtype_t dtype, deft_device_t device, bool zero,
                     deft_ndarray_t **out);

/* An array over `tensor`, whose storage reference it takes over on success. */
int deft_ndarray_from_tensor(const deft_tensor_t *tensor, deft_ndarray_t **out);

/* A lazy array: described, with an engine variable and `entry` (the
 * reference is taken over), but no storage. */
int deft_ndarray_new_lazy(const deft_desc_t *desc, deft_device_t device, deft_entry_t entry,
                          deft_ndarray_t **out);

/* An array with a shape and dtype but no data: what backward binds for a
 * forward value of which only the shape is read (op.h, shape_inputs). */
int deft_ndarray_new_placeholder(const deft_desc_t *desc, deft_device_t device,
                                 deft_ndarray_t **out);

/* Another array on the same storage and engine variable, without an entry:
 * how recorded nodes keep a value without keeping the array's history. Its
 * kept_version is the contents' version now, so a later write shows. */
int deft_ndarray_alias(deft_ndarray_t *arr, deft_ndarray_t **out);

/* A view: an array of `shape` over arr's storage, `offset` elements after
 * arr's first, on arr's engine variable (so work through either is ordered,
 * and each sees the other's writes), without history. -1 when arr is lazy
 * (no storage yet) or the window does not fit in arr. */
int deft_ndarray_view(deft_ndarray_t *arr, int64_t offset, const deft_shape_t *shape,
                      deft_ndarray_t **out);

/* No storage yet: a lazy array waiting to be computed. */
static inline bool deft_ndarray_is_lazy(const deft_ndarray_t *arr) {
    return __atomic_load_n(&arr->tensor.storage, __ATOMIC_ACQUIRE) == NULL;
}

deft_ndarray_t *deft_ndarray_retain(deft_ndarray_t *arr);
/* Retain unless the last reference is already gone (for weak pointers); NULL then. */
deft_ndarray_t *deft_ndarray_try_retain(deft_ndarray_t *arr);
/* Drop a reference; NULL is a no-op. */
void deft_ndarray_release(deft_ndarray_t *arr);

/* Note a write to the array (its contents are about to change). */
static inline void deft_ndarray_touch(deft_ndarray_t *arr) {
    if (arr->tensor.storage && !arr->lent)
        atomic_fetch_add_explicit(&arr->tensor.storage->version, 1, memory_order_relaxed);
}

/* The version of the array's contents (0 while lazy). */
static inline unsigned deft_ndarray_version(const deft_ndarray_t *arr) {
    const deft_storage_t *s = __atomic_load_n(&arr->tensor.storage, __ATOMIC_ACQUIRE);
    return s ? atomic_load_explicit(&s->version, memory_order_relaxed) : 0;
}

/* Wait for pending writes (and, for write, reads), computing a lazy array
 * first; -1 with an asynchronous failure. */
int deft_ndarray_wait_to_read(deft_ndarray_t *arr);
int deft_ndarray_wait_to_write(deft_ndarray_t *arr);

/* Copies between an array and host memory, after waiting for pending work;
 * nbytes must match exactly. */
int deft_ndarray_copy_to_host(deft_ndarray_t *arr, void *data, size_t nbytes);
int deft_ndarray_copy_from_host(deft_ndarray_t *arr, const void *data, size_t nbytes);

/* A copy of arr (on any device) in page-locked host memory, after waiting for
 * its pending writes; an error naming the cause where there is none to have
 * (no CUDA, or no GPU). */
int deft_ndarray_pinned_copy(deft_ndarray_t *arr, deft_ndarray_t **out);

/* Whether arr's elements are in page-locked host memory. */
bool deft_ndarray_is_pinned(const deft_ndarray_t *arr);

#endif
