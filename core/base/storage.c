#include "core/base/storage.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/base/memstat.h"
#include "core/base/profiler.h"
#include "core/base/records.h"
#include "core/base/refcount.h"

static const deft_allocator_t *_Atomic allocators[DEFT_DEV_GPU + 1] = {
    [DEFT_DEV_CPU] = &deft_cpu_pool,
};

void deft_allocator_register(deft_device_type_t type, const deft_allocator_t *allocator) {
    atomic_store(&allocators[type], allocator);
}

const deft_allocator_t *deft_allocator_get(deft_device_type_t type) {
    return atomic_load(&allocators[type]);
}

static const deft_allocator_t *_Atomic pinned;

void deft_allocator_register_pinned(const deft_allocator_t *allocator) {
    atomic_store(&pinned, allocator);
}

const deft_allocator_t *deft_allocator_pinned(void) {
    return atomic_load(&pinned);
}

/* Buffers this small sit in the storage record, 64-byte aligned after the
 * header: scalars and short vectors cost no trip to the pool and back. */
#define INLINE_MAX 256
#define DATA_ALIGN 64
/* AddressSanitizer sees overruns only between separate allocations. */
#if defined(__SANITIZE_ADDRESS__)
#define INLINE_ALLOWED false
#else
#define INLINE_ALLOWED true
#endif

static void *inline_buffer(deft_storage_t *storage) {
    uintptr_t at = ((uintptr_t)(storage + 1) + DATA_ALIGN - 1) & ~(uintptr_t)(DATA_ALIGN - 1);
    return (void *)at;
}

_Static_assert(sizeof(deft_storage_t) + DATA_ALIGN - 1 + INLINE_MAX <= DEFT_RECORD_SIZE,
               "inline buffers fit the storage record");

static atomic_bool gpu_made;
static _Atomic uint64_t last_id;

static uint64_t new_id(void) {
    return atomic_fetch_add_explicit(&last_id, 1, memory_order_relaxed) + 1;
}

bool deft_storage_gpu_made(void) {
    return atomic_load_explicit(&gpu_made, memory_order_acquire);
}

static void note_device(deft_device_t dev) {
    if (dev.type == DEFT_DEV_GPU && !deft_storage_gpu_made())
        atomic_store_explicit(&gpu_made, true, memory_order_release);
}

/* A buffer coming into use, or going out of it: the memory statistics and the profiler. */
static void count_allocated(deft_device_t dev, size_t nbytes) {
    deft_memstat_buffer_allocated(dev, nbytes);
    if (deft_profiling(DEFT_PROF_MEMORY))
        deft_profiler_instant("memory", "alloc", 't', "bytes", (int64_t)nbytes);
}

static void count_freed(deft_device_t dev, size_t nbytes) {
    deft_memstat_buffer_freed(dev, nbytes);
    if (deft_profiling(DEFT_PROF_MEMORY))
        deft_profiler_instant("memory", "free", 't', "bytes", (int64_t)nbytes);
}

int deft_storage_new(deft_device_t dev, size_t nbytes, deft_storage_t **out) {
    const deft_allocator_t *allocator = deft_allocator_get(dev.type);
    if (!allocator)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "no allocator for device type %d", dev.type);
    return deft_storage_new_from(allocator, dev, nbytes, out);
}

int deft_storage_new_from(const deft_allocator_t *allocator, deft_device_t dev, size_t nbytes,
                          deft_storage_t **out) {
    bool own = allocator == deft_allocator_get(dev.type);
    deft_storage_t *storage = deft_record_alloc();
    if (!storage) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a storage record");
    storage->data = NULL;
    storage->capacity = 0;
    deft_fences_t *fences = NULL;
    storage->inline_data = INLINE_ALLOWED && own && nbytes > 0 && nbytes <= INLINE_MAX &&
                           dev.type == DEFT_DEV_CPU && deft_cpu_pool_caching();
    storage->allocator = own ? NULL : allocator;
    if (storage->inline_data) {
        storage->data = inline_buffer(storage);
        storage->capacity = INLINE_MAX;
    } else if (nbytes > 0 &&
               allocator->alloc(dev, nbytes, &storage->data, &storage->capacity, &fences)) {
        deft_record_free(storage);
        return -1;
    }
    atomic_init(&storage->refcount, 1);
    atomic_init(&storage->version, 0);
    storage->id = new_id();
    atomic_init(&storage->fences, fences);
    atomic_init(&storage->shared, false);
    storage->device = dev;
    note_device(dev);
    storage->nbytes = nbytes;
    storage->external_free = NULL;
    storage->external_ctx = NULL;
    count_allocated(dev, nbytes);
    *out = storage;
    return 0;
}

int deft_storage_wrap(deft_device_t dev, void *data, size_t nbytes, void (*external_free)(void *),
                      void *ctx, deft_storage_t **out) {
    deft_storage_t *storage = deft_record_alloc();
    if (!storage) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a storage record");
    atomic_init(&storage->refcount, 1);
    atomic_init(&storage->version, 0);
    storage->id = new_id();
    atomic_init(&storage->fences, NULL);
    atomic_init(&storage->shared, true);
    storage->device = dev;
    note_device(dev);
    storage->data = nbytes ? data : NULL;
    storage->nbytes = storage->capacity = nbytes;
    storage->external_free = external_free;
    storage->external_ctx = ctx;
    storage->inline_data = false;
    storage->allocator = NULL;
    *out = storage;
    return 0;
}

deft_storage_t *deft_storage_retain(deft_storage_t *storage) {
    atomic_fetch_add_explicit(&storage->refcount, 1, memory_order_relaxed);
    return storage;
}

void deft_storage_release(deft_storage_t *storage) {
    if (!storage) return;
    if (!deft_release_last(&storage->refcount)) return;
    deft_fences_t *fences = atomic_load_explicit(&storage->fences, memory_order_acquire);
    if (storage->external_free) {
        /* The lender may reuse the memory at once: deft's work on it must be done. */
        deft_fence_host_wait(storage, true);
        deft_fences_free(fences);
        storage->external_free(storage->external_ctx);
        deft_record_free(storage);
        return;
    }
    /* The block's next user must not inherit a failure of this buffer's value. */
    deft_fences_drop_checks(fences);
    if (storage->data && !storage->inline_data)
        (storage->allocator ? storage->allocator : deft_allocator_get(storage->device.type))
            ->free(storage->device, storage->data, storage->capacity, fences);
    count_freed(storage->device, storage->nbytes);
    deft_record_free(storage);
}

bool deft_storage_parkable(const deft_storage_t *storage) {
    return storage->device.type == DEFT_DEV_CPU && storage->capacity <= INLINE_MAX &&
           storage->data && !storage->external_free && !storage->allocator &&
           !atomic_load_explicit(&storage->shared, memory_order_relaxed) &&
           atomic_load_explicit(&storage->refcount, memory_order_relaxed) == 1 &&
           deft_cpu_pool_caching();
}

void deft_storage_park(deft_storage_t *storage) {
    count_freed(storage->device, storage->nbytes);
}

void deft_storage_unpark(deft_storage_t *storage, size_t nbytes) {
    storage->id = new_id(); /* new contents: nothing kept of the old may match */
    storage->nbytes = nbytes;
    count_allocated(storage->device, nbytes);
}
