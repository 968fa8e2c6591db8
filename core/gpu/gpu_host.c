/*
 * Page-locked ("pinned") host memory: CPU buffers the GPU's copy engines
 * read and write directly, at full bus speed and without a staging copy
 * through a pinned bounce buffer, as pageable memory needs. A caching pool
 * (core/base/device_pool.h) over cudaHostAlloc and cudaFreeHost, since
 * pinning and unpinning pages costs far more than a batch's copy: what a
 * data loader pins each batch comes back from the cache. PyTorch's caching
 * host allocator does the same.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "core/base/allocator.h"
#include "core/base/device_pool.h"
#include "core/base/error.h"
#include "core/gpu/gpu.h"

static int raw_alloc(deft_device_t dev, size_t nbytes, void **out) {
    (void)dev;
    cudaError_t e = cudaHostAlloc(out, nbytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return DEFT_DEVICE_OUT_OF_MEMORY;
    }
    return deft_gpu_check(e, "cudaHostAlloc");
}

static void raw_free(deft_device_t dev, void *ptr) {
    (void)dev;
    cudaFreeHost(ptr);
}

static int info(deft_device_t dev, size_t *free_bytes, size_t *total_bytes) {
    (void)dev, (void)free_bytes, (void)total_bytes;
    return -1;
}

static const deft_device_memory_t pinned_memory = {raw_alloc, raw_free, info};

static deft_device_pool_t *pool;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void make_pool(void) {
    pool = deft_device_pool_new(deft_device_cpu(), &pinned_memory);
}

static int host_alloc(deft_device_t dev, size_t nbytes, void **out, size_t *capacity,
                      deft_fences_t **fences) {
    (void)dev;
    pthread_once(&pool_once, make_pool);
    if (!pool) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the pinned host pool");
    return deft_device_pool_alloc(pool, nbytes, out, capacity, fences);
}

static void host_free(deft_device_t dev, void *ptr, size_t capacity, deft_fences_t *fences) {
    (void)dev;
    deft_device_pool_free(pool, ptr, capacity, fences); /* it allocated ptr: the pool exists */
}

static void host_release_cached(deft_device_t dev) {
    (void)dev;
    if (pool) deft_device_pool_release_cached(pool);
}

static const deft_allocator_t deft_gpu_host_pool = {
    .alloc = host_alloc,
    .free = host_free,
    .release_cached = host_release_cached,
};

/* Only a pointer is stored here: CUDA starts on the first allocation. */
__attribute__((constructor)) static void register_pinned_host(void) {
    deft_allocator_register_pinned(&deft_gpu_host_pool);
}
