/*
 * Device allocators. The storage layer allocates through one allocator per
 * device type; the CPU pool is built in and the GPU layer registers its own,
 * so base never depends on the layers above it.
 */
#ifndef DEFT_CORE_ALLOCATOR_H
#define DEFT_CORE_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>

#include "core/base/device.h"

typedef struct deft_fences deft_fences_t; /* fence.h */

typedef struct deft_allocator {
    /* Allocate at least nbytes (> 0); report the block's real capacity and
     * the fences its last user left (NULL when none: always on the CPU). */
    int (*alloc)(deft_device_t dev, size_t nbytes, void **out, size_t *capacity,
                 deft_fences_t **fences);
    /* Return a block from alloc with the capacity it reported and the
     * buffer's fences (taken over). */
    void (*free)(deft_device_t dev, void *ptr, size_t capacity, deft_fences_t *fences);
    /* Give cached free blocks back to the system. */
    void (*release_cached)(deft_device_t dev);
} deft_allocator_t;

void deft_allocator_register(deft_device_type_t type, const deft_allocator_t *allocator);
const deft_allocator_t *deft_allocator_get(deft_device_type_t type);

/* Page-locked host memory, which GPUs copy from and to at full speed without
 * staging: the GPU layer registers it (core/gpu/gpu_host.c); NULL without
 * CUDA. Its blocks are CPU memory. */
void deft_allocator_register_pinned(const deft_allocator_t *allocator);
const deft_allocator_t *deft_allocator_pinned(void);

/* The CPU pool: 64-byte aligned blocks in size classes, cached for reuse. */
extern const deft_allocator_t deft_cpu_pool;
/* False under DEFT_POOL=off: every buffer then comes from the system, one
 * allocation each, so memory checkers see each one on its own. */
bool deft_cpu_pool_caching(void);

/* Alignment of every CPU buffer, enough for AVX-512 loads. */
#define DEFT_CPU_ALIGN 64

#endif
