/*
 * The GPU allocator: a caching device pool (core/base/device_pool.h) per
 * GPU over cudaMalloc and cudaFree. Never managed memory: its page
 * migrations would hide transfers that deft's copies make explicit.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "core/base/allocator.h"
#include "core/base/device_pool.h"
#include "core/base/error.h"
#include "core/gpu/gpu.h"

static deft_device_pool_t *pools[DEFT_MAX_GPUS];
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static int raw_alloc(deft_device_t dev, size_t nbytes, void **out) {
    if (deft_gpu_use(dev.id)) return -1;
    cudaError_t e = cudaMalloc(out, nbytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return DEFT_DEVICE_OUT_OF_MEMORY;
    }
    return deft_gpu_check(e, "cudaMalloc");
}

static void raw_free(deft_device_t dev, void *ptr) {
    /* cudaFree waits for the device: this runs only when the cache is
     * given back, not for each array freed. */
    if (deft_gpu_use(dev.id) == 0) cudaFree(ptr);
}

static int info(deft_device_t dev, size_t *free_bytes, size_t *total_bytes) {
    return deft_gpu_memory(dev.id, free_bytes, total_bytes);
}

static const deft_device_memory_t cuda_memory = {raw_alloc, raw_free, info};

static deft_device_pool_t *pool_of(deft_device_t dev) {
    pthread_mutex_lock(&pools_lock);
    if (!pools[dev.id]) pools[dev.id] = deft_device_pool_new(dev, &cuda_memory);
    deft_device_pool_t *pool = pools[dev.id];
    pthread_mutex_unlock(&pools_lock);
    return pool;
}

static int gpu_alloc(deft_device_t dev, size_t nbytes, void **out, size_t *capacity,
                     deft_fences_t **fences) {
    deft_device_pool_t *pool = pool_of(dev);
    if (!pool)
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the pool of gpu(%d)", dev.id);
    return deft_device_pool_alloc(pool, nbytes, out, capacity, fences);
}

static void gpu_free(deft_device_t dev, void *ptr, size_t capacity, deft_fences_t *fences) {
    /* it allocated ptr, so it exists */
    deft_device_pool_free(pool_of(dev), ptr, capacity, fences);
}

static void gpu_release_cached(deft_device_t dev) {
    deft_device_pool_t *pool = pool_of(dev);
    if (pool) deft_device_pool_release_cached(pool);
}

const deft_allocator_t deft_gpu_pool = {
    .alloc = gpu_alloc,
    .free = gpu_free,
    .release_cached = gpu_release_cached,
};
