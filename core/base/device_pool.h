/*
 * A caching pool for memory the host cannot touch (GPU memory).
 *
 * cudaMalloc and cudaFree take tens of microseconds to milliseconds and
 * cudaFree synchronizes the whole device, so freed blocks are kept in
 * lists per size class (size_class.h) and handed out again, as the CPU
 * pool does. The lists live in host memory, since the blocks cannot hold
 * their own links. When the device runs out, the pool gives its cached
 * blocks back and tries once more before reporting the failure. A cached
 * block keeps the fences of its last buffer (fence.h), and the next buffer
 * to get it inherits them; they are dropped when the block goes back to
 * the device, whose free waits for the device anyway.
 *
 * The pool knows nothing of CUDA: the GPU layer supplies the raw calls, and
 * the CPU tests drive the same code over a fake device with a byte limit.
 */
#ifndef DEFT_CORE_DEVICE_POOL_H
#define DEFT_CORE_DEVICE_POOL_H

#include <stddef.h>

#include "core/base/device.h"
#include "core/base/fence.h"

/* What a raw allocation call reports besides success. */
#define DEFT_DEVICE_OUT_OF_MEMORY 1

typedef struct deft_device_memory {
    /* 0; DEFT_DEVICE_OUT_OF_MEMORY when the device is full; -1 on another
     * failure, with the error set. */
    int (*alloc)(deft_device_t dev, size_t nbytes, void **out);
    void (*free)(deft_device_t dev, void *ptr);
    /* The device's free and total bytes, for out-of-memory messages; -1 if unknown. */
    int (*info)(deft_device_t dev, size_t *free_bytes, size_t *total_bytes);
} deft_device_memory_t;

typedef struct deft_device_pool deft_device_pool_t;

/* NULL when out of host memory. */
deft_device_pool_t *deft_device_pool_new(deft_device_t dev, const deft_device_memory_t *memory);
/* Gives every cached block back, then the pool itself; blocks in use stay the caller's. */
void deft_device_pool_destroy(deft_device_pool_t *pool);

/* At least nbytes (> 0), its capacity in *capacity; -1 with an error naming
 * the device and the sizes when the device cannot supply it. */
int deft_device_pool_alloc(deft_device_pool_t *pool, size_t nbytes, void **out, size_t *capacity,
                           deft_fences_t **fences);
/* A block from deft_device_pool_alloc with the capacity it reported and its
 * buffer's fences (taken over). */
void deft_device_pool_free(deft_device_pool_t *pool, void *ptr, size_t capacity,
                           deft_fences_t *fences);
/* Give every cached block back to the device. */
void deft_device_pool_release_cached(deft_device_pool_t *pool);

#endif
