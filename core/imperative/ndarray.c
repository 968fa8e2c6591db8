#include "core/imperative/ndarray.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/base/records.h"
#include "core/imperative/deferred.h"
#include "core/imperative/record.h"
#include "core/imperative/view.h"
#include "core/base/refcount.h"

/*
 * The one way an array record is made: one reference, the tensor and entry
 * given (both taken over), and a fresh engine variable unless `var` (taken
 * over too) is given. On failure nothing taken over is released.
 */
static inline __attribute__((always_inline)) int
make_array(const deft_tensor_t *tensor, deft_entry_t entry, deft_var_t *var, deft_ndarray_t **out) {
    deft_ndarray_t *arr = deft_record_alloc();
    if (!arr) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an array record");
    if (!var && !(var = deft_var_new())) {
        deft_record_free(arr);
        return -1;
    }
    atomic_init(&arr->refcount, 1);
    atomic_init(&arr->memo_id, 0);
    arr->kept_version = 0;
    arr->lent = false;
    arr->link = NULL;
    arr->tensor = *tensor;
    arr->var = var;
    arr->entry = entry;
    *out = arr;
    return 0;
}

static const deft_entry_t no_entry = {NULL, 0};

static int zero_tensor(void *arg) {
    const deft_tensor_t *t = arg;
    return deft_device_zero(deft_tensor_data(t), t->device, deft_tensor_nbytes(t));
}

/*
 * The spare: the last array freed on this thread when it was small and
 * private (its storage and engine variable reachable through it alone),
 * kept whole for the next small CPU array made here. Most operator calls
 * make one array and free one; reusing it skips three records and the
 * set-up of a storage and a variable, a tenth of a call. CPython keeps
 * freed floats for the same reason.
 */
static DEFT_TLS_FAST deft_ndarray_t *tl_spare;
static DEFT_TLS_FAST bool tl_spare_registered;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static pthread_key_t spare_key;

static void free_whole(deft_ndarray_t *arr) {
    deft_storage_release(arr->tensor.storage);
    deft_var_release(arr->var);
    deft_record_free(arr);
}

/*
 * The lazy spare, likewise: the last lazy array freed on this thread before
 * it was computed, with its engine variable (private, and never given work).
 * Recording in a loop makes a lazy array per call and frees the previous
 * one; reusing it skips two records and a variable's set-up.
 */
static DEFT_TLS_FAST deft_ndarray_t *tl_lazy_spare;

/* At thread exit: what this thread kept goes for good. Should a later key
 * destructor free an array, it registers again and the next round drops it. */
static void drop_spare(void *unused) {
    (void)unused;
    deft_ndarray_t *spare = tl_spare, *lazy = tl_lazy_spare;
    tl_spare = tl_lazy_spare = NULL;
    tl_spare_registered = false;
    if (lazy) free_whole(lazy);
    if (!spare) return;
    deft_storage_unpark(spare->tensor.storage, spare->tensor.storage->nbytes);
    free_whole(spare);
}

static void make_spare_key(void) {
    pthread_key_create(&spare_key, drop_spare);
}

/* This thread's spares are dropped when it exits; false if they cannot be. */
static bool spares_registered(void) {
    if (tl_spare_registered) return true;
    pthread_once(&spare_once, make_spare_key);
    if (pthread_setspecific(spare_key, &tl_spare)) return false;
    tl_spare_registered = true;
    return true;
}

/* Keep a dead array (no history) whole when it was private; false: free it. */
static bool keep_as_spare(deft_ndarray_t *arr) {
    if (arr->lent || !deft_var_reusable(arr->var)) return false;
    if (!arr->tensor.storage) { /* lazy, never computed */
        if (tl_lazy_spare || !spares_registered()) return false;
        tl_lazy_spare = arr;
        return true;
    }
    if (tl_spare || !deft_storage_parkable(arr->tensor.storage) || !spares_registered())
        return false;
    deft_storage_park(arr->tensor.storage);
    tl_spare = arr;
    return true;
}

/* The spare as a new array of this shape, when its buffer holds nbytes. */
static deft_ndarray_t *take_spare(const deft_shape_t *shape, deft_dtype_t dtype,
                                  deft_device_t device, size_t nbytes) {
    deft_ndarray_t *arr = tl_spare;
    if (!arr || nbytes == 0 || nbytes > arr->tensor.storage->capacity ||
        !deft_device_equal(device, arr->tensor.storage->device))
        return NULL;
    tl_spare = NULL;
    deft_storage_unpark(arr->tensor.storage, nbytes);
    atomic_store_explicit(&arr->refcount, 1, memory_order_relaxed);
    atomic_store_explicit(&arr->memo_id, 0, memory_order_relaxed);
    arr->kept_version = 0;
    arr->tensor = (deft_tensor_t){*shape, dtype, device, arr->tensor.storage, 0};
    return arr;
}

int deft_ndarray_new(const deft_shape_t *shape, deft_dtype_t dtype, deft_device_t device, bool zero,
                     deft_ndarray_t **out) {
    size_t nbytes;
    if (deft_shape_nbytes(shape, deft_dtype_size(dtype), &nbytes)) return -1;
    if ((*out = take_spare(shape, dtype, device, nbytes)) != NULL) {
        if (zero) memset(deft_tensor_data(&(*out)->tensor), 0, nbytes);
        return 0;
    }
    deft_tensor_t t = {*shape, dtype, device, NULL, 0};
    if (deft_storage_new(device, nbytes, &t.storage)) return -1;
    deft_access_t written = {t.storage, true,
                             DEFT_VALUE_NEW}; /* a reused GPU block: after its last work */
    if ((zero && deft_fence_run(&written, 1, zero_tensor, &t)) ||
        make_array(&t, no_entry, NULL, out)) {
        deft_storage_release(t.storage);
        return -1;
    }
    return 0;
}

int deft_ndarray_from_tensor(const deft_tensor_t *tensor, deft_ndarray_t **out) {
    return make_array(tensor, no_entry, NULL, out);
}

int deft_ndarray_new_lazy(const deft_desc_t *desc, deft_device_t device, deft_entry_t entry,
                          deft_ndarray_t **out) {
    deft_ndarray_t *arr = tl_lazy_spare;
    if (!arr) {
        deft_tensor_t t = {desc->shape, desc->dtype, device, NULL, 0};
        return make_array(&t, entry, NULL, out);
    }
    tl_lazy_spare = NULL; /* its variable, link, lent flag and storage are as a new one's */
    atomic_store_explicit(&arr->refcount, 1, memory_order_relaxed);
    atomic_store_explicit(&arr->memo_id, 0, memory_order_relaxed);
    arr->kept_version = 0;
    arr->tensor.shape = desc->shape;
    arr->tensor.dtype = desc->dtype;
    arr->tensor.device = device;
    arr->tensor.offset = 0;
    arr->entry = entry;
    *out = arr;
    return 0;
}

int deft_ndarray_new_placeholder(const deft_desc_t *desc, deft_device_t device,
                                 deft_ndarray_t **out) {
    deft_tensor_t t = {desc->shape, desc->dtype, device, NULL, 0};
    if (deft_storage_new(device, 0, &t.storage)) return -1;
    if (make_array(&t, no_entry, NULL, out)) {
        deft_storage_release(t.storage);
        return -1;
    }
    return 0;
}

/* A strided view's link is the view's own: drop it before the array goes. */
static void drop_link(deft_ndarray_t *arr) {
    if (!arr->link) return;
    deft_ndarray_release(arr->link->root);
    free(arr->link);
    arr->link = NULL;
}

int deft_ndarray_alias(deft_ndarray_t *arr, deft_ndarray_t **out) {
    deft_view_link_t *link = NULL;
    if (arr->link) { /* another view of the same elements, through the same buffer */
        if (!(link = malloc(sizeof *link)))
            return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a view");
        *link = *arr->link;
        deft_ndarray_retain(link->root);
    }
    if (make_array(&arr->tensor, no_entry, arr->var, out)) {
        if (link) deft_ndarray_release(link->root);
        free(link);
        return -1;
    }
    (*out)->link = link;
    deft_storage_retain(arr->tensor.storage);
    deft_var_retain(arr->var);
    (*out)->kept_version = deft_ndarray_version(arr);
    return 0;
}

int deft_ndarray_view(deft_ndarray_t *arr, int64_t offset, const deft_shape_t *shape,
                      deft_ndarray_t **out) {
    if (deft_ndarray_is_lazy(arr))
        return deft_error(DEFT_ERR_VALUE, "the array is lazy (deferred compute): it has no "
                                          "storage to view until it is computed");
    if (arr->link) /* its buffer is not the viewed elements */
        return deft_error(DEFT_ERR_VALUE, "the array is a strided view: make a strided view "
                                          "of it (DeftNDArrayStridedView) instead");
    int64_t size = deft_shape_size(&arr->tensor.shape), count = deft_shape_size(shape);
    if (offset < 0 || count > size || offset > size - count) {
        char text[DEFT_SHAPE_STR_MAX];
        return deft_error(DEFT_ERR_INDEX,
                          "a view of %lld elements from element %lld does not fit in an "
                          "array of %lld (shape %s)",
                          (long long)count, (long long)offset, (long long)size,
                          deft_shape_format(&arr->tensor.shape, text, sizeof text));
    }
    if (deft_ndarray_alias(arr, out)) return -1;
    (*out)->tensor.shape = *shape;
    (*out)->tensor.offset += (size_t)offset * deft_dtype_size(arr->tensor.dtype);
    return 0;
}

deft_ndarray_t *deft_ndarray_try_retain(deft_ndarray_t *arr) {
    int n = atomic_load_explicit(&arr->refcount, memory_order_relaxed);
    while (n > 0)
        if (atomic_compare_exchange_weak_explicit(&arr->refcount, &n, n + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return arr;
    return NULL;
}

deft_ndarray_t *deft_ndarray_retain(deft_ndarray_t *arr) {
    atomic_fetch_add_explicit(&arr->refcount, 1, memory_order_relaxed);
    return arr;
}

/*
 * Dropping a reference to an array with history: true when it was the last.
 * A lazy array can be retained through its node's weak `live` slot (by a
 * trigger's walk, record.h), so refcount.h's shortcut does not hold as it is.
 * The holder of the only reference forgets the array there first (which
 * waits out any walk that read the slot): if no walk took a reference
 * meanwhile, none can any more, and the last reference goes without a locked
 * instruction, one of the few a recorded call in a loop makes.
 */
static bool release_with_history(deft_ndarray_t *arr, bool *forgotten) {
    *forgotten = atomic_load_explicit(&arr->refcount, memory_order_acquire) == 1 &&
                 deft_record_forget_live(arr);
    if (*forgotten && atomic_load_explicit(&arr->refcount, memory_order_acquire) == 1) return true;
    return atomic_fetch_sub_explicit(&arr->refcount, 1, memory_order_acq_rel) == 1;
}

void deft_ndarray_release(deft_ndarray_t *arr) {
    if (!arr) return;
    /* Autograd may be giving a new output its entry on another thread while a
     * finished call drops its reference: read the node as it is published. */
    bool history = __atomic_load_n(&arr->entry.node, __ATOMIC_ACQUIRE) != NULL, forgotten = false;
    bool last = history ? release_with_history(arr, &forgotten) : deft_release_last(&arr->refcount);
    if (!last) return;
    if (arr->entry.node) { /* after this no recorded node reaches it: a spare like any other */
        if (forgotten)
            deft_node_release(arr->entry.node);
        else
            deft_record_release_entry(arr);
        arr->entry = no_entry;
    }
    drop_link(arr);
    if (!keep_as_spare(arr)) free_whole(arr);
}

static int check_host_buffer(const deft_ndarray_t *arr, const void *data, size_t nbytes) {
    size_t expected = deft_tensor_nbytes(&arr->tensor);
    if (nbytes != expected) {
        char shape[DEFT_SHAPE_STR_MAX];
        return deft_error(DEFT_ERR_VALUE, "nbytes is %zu, expected %zu for shape %s of %s", nbytes,
                          expected, deft_shape_format(&arr->tensor.shape, shape, sizeof shape),
                          deft_dtype_name(arr->tensor.dtype));
    }
    if (nbytes > 0 && data == NULL)
        return deft_error(DEFT_ERR_VALUE, "data is NULL but nbytes is %zu", nbytes);
    return 0;
}

/* On a GPU an operation ends, for the engine, once its kernels are queued:
 * the waits also wait for the array's fences on the device, and then
 * report a failed device-side check that its value depends on (an index
 * out of range, found by a kernel after the call returned). */
int deft_ndarray_wait_to_read(deft_ndarray_t *arr) {
    if (deft_ndarray_is_lazy(arr) && deft_deferred_compute(1, &arr)) return -1;
    if (deft_engine_wait_to_read(arr->var)) return -1;
    if (deft_fence_host_wait(arr->tensor.storage, false)) return -1;
    return deft_fence_host_check(arr->tensor.storage);
}

int deft_ndarray_wait_to_write(deft_ndarray_t *arr) {
    if (deft_ndarray_is_lazy(arr) && deft_deferred_compute(1, &arr)) return -1;
    if (deft_engine_wait_to_write(arr->var)) return -1;
    if (deft_fence_host_wait(arr->tensor.storage, true)) return -1;
    return deft_fence_host_check(arr->tensor.storage);
}

int deft_ndarray_copy_to_host(deft_ndarray_t *arr, void *data, size_t nbytes) {
    if (check_host_buffer(arr, data, nbytes)) return -1;
    if (arr->link) return deft_view_copy_to_host(arr, data);
    if (deft_ndarray_wait_to_read(arr)) return -1;
    return deft_device_copy(data, deft_device_cpu(), deft_tensor_data(&arr->tensor),
                            arr->tensor.device, nbytes);
}

typedef struct host_copy {
    const deft_tensor_t *dst;
    const void *src;
} host_copy_t;

static int copy_from_host(void *arg) {
    const host_copy_t *c = arg;
    return deft_device_copy(deft_tensor_data(c->dst), c->dst->device, c->src, deft_device_cpu(),
                            deft_tensor_nbytes(c->dst));
}

int deft_ndarray_copy_from_host(deft_ndarray_t *arr, const void *data, size_t nbytes) {
    if (deft_ndarray_is_lazy(arr))
        return deft_error(DEFT_ERR_VALUE,
                          "the array is lazy (deferred compute): its value is the result of a "
                          "recorded operation and cannot be overwritten");
    if (check_host_buffer(arr, data, nbytes)) return -1;
    if (arr->link) return deft_view_copy_from_host(arr, data); /* a part of the root */
    if (deft_engine_wait_to_overwrite(arr->var)) return -1;
    deft_ndarray_touch(arr);
    /* On a GPU the copy is queued after the array's last work, not waited for. */
    host_copy_t copy = {&arr->tensor, data};
    deft_access_t written = {arr->tensor.storage, true, DEFT_VALUE_NEW};
    if (deft_fence_run(&written, 1, copy_from_host, &copy)) return -1;
    deft_engine_overwritten(arr->var); /* a failure it kept is gone with its old value */
    return 0;
}

int deft_ndarray_pinned_copy(deft_ndarray_t *arr, deft_ndarray_t **out) {
    const deft_allocator_t *pinned = deft_allocator_pinned();
    if (!pinned)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "page-locked host memory needs CUDA, and deft was built without it");
    if (deft_device_gpu_count() == 0)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "page-locked host memory needs a GPU, and deft found none");
    deft_tensor_t t = {arr->tensor.shape, arr->tensor.dtype, deft_device_cpu(), NULL, 0};
    if (deft_storage_new_from(pinned, t.device, deft_tensor_nbytes(&t), &t.storage)) return -1;
    if (make_array(&t, no_entry, NULL, out)) {
        deft_storage_release(t.storage);
        return -1;
    }
    /* A block from the cache may still feed a GPU copy of its last user. */
    if (deft_fence_host_wait(t.storage, true) ||
        deft_ndarray_copy_to_host(arr, deft_tensor_data(&t), deft_tensor_nbytes(&t))) {
        deft_ndarray_release(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

bool deft_ndarray_is_pinned(const deft_ndarray_t *arr) {
    const deft_storage_t *s = __atomic_load_n(&arr->tensor.storage, __ATOMIC_ACQUIRE);
    return s && s->allocator && s->allocator == deft_allocator_pinned();
}
