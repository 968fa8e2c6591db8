#include "core/base/device_pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/memstat.h"
#include "core/base/size_class.h"

typedef struct cached_block {
    void *ptr;
    deft_fences_t *fences;
    struct cached_block *next;
} cached_block_t;

struct deft_device_pool {
    deft_device_t device;
    deft_device_memory_t memory;
    pthread_mutex_t lock;
    cached_block_t *lists[DEFT_CLASS_COUNT];
};

deft_device_pool_t *deft_device_pool_new(deft_device_t dev, const deft_device_memory_t *memory) {
    deft_device_pool_t *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->device = dev;
    pool->memory = *memory;
    pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

void deft_device_pool_destroy(deft_device_pool_t *pool) {
    if (!pool) return;
    deft_device_pool_release_cached(pool);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

static void *take_cached(deft_device_pool_t *pool, int cls, deft_fences_t **fences) {
    pthread_mutex_lock(&pool->lock);
    cached_block_t *block = pool->lists[cls];
    if (block) pool->lists[cls] = block->next;
    pthread_mutex_unlock(&pool->lock);
    if (!block) return NULL;
    void *ptr = block->ptr;
    *fences = block->fences;
    free(block);
    deft_memstat_cached_add(pool->device, -(int64_t)deft_class_capacity(cls));
    return ptr;
}

static int raw_alloc(deft_device_pool_t *pool, size_t capacity, void **out) {
    int status = pool->memory.alloc(pool->device, capacity, out);
    if (status == 0) deft_memstat_held_add(pool->device, (int64_t)capacity);
    return status;
}

static void raw_free(deft_device_pool_t *pool, void *ptr, size_t capacity, deft_fences_t *fences) {
    pool->memory.free(pool->device, ptr);
    deft_fences_free(fences); /* the device's free waited for its work */
    deft_memstat_held_add(pool->device, -(int64_t)capacity);
}

/* "1.5 GiB": sizes in messages people read. */
static void human_size(char *buf, size_t len, double bytes) {
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

static int out_of_memory(deft_device_pool_t *pool, size_t nbytes) {
    char want[32], used[32], device_free[32] = "?", total[32] = "?";
    human_size(want, sizeof want, (double)nbytes);
    human_size(used, sizeof used, (double)deft_memstat_get(pool->device, DEFT_MEMSTAT_LIVE_BYTES));
    size_t free_bytes, total_bytes;
    if (pool->memory.info && pool->memory.info(pool->device, &free_bytes, &total_bytes) == 0) {
        human_size(device_free, sizeof device_free, (double)free_bytes);
        human_size(total, sizeof total, (double)total_bytes);
    }
    return deft_error(DEFT_ERR_OUT_OF_MEMORY,
                      "out of memory on %s(%d): cannot allocate %s (%s in use by arrays, %s "
                      "free of %s on the device)",
                      pool->device.type == DEFT_DEV_GPU ? "gpu" : "device", pool->device.id, want,
                      used, device_free, total);
}

int deft_device_pool_alloc(deft_device_pool_t *pool, size_t nbytes, void **out, size_t *capacity,
                           deft_fences_t **fences) {
    size_t cap = nbytes;
    int cls = deft_size_class(nbytes, &cap);
    *fences = NULL;
    void *ptr = cls >= 0 ? take_cached(pool, cls, fences) : NULL;
    if (ptr) {
        *out = ptr, *capacity = cap;
        return 0;
    }
    int status = raw_alloc(pool, cap, &ptr);
    if (status == DEFT_DEVICE_OUT_OF_MEMORY) {
        /* Blocks of other sizes may add up to what is needed. */
        deft_device_pool_release_cached(pool);
        status = raw_alloc(pool, cap, &ptr);
    }
    if (status == DEFT_DEVICE_OUT_OF_MEMORY) return out_of_memory(pool, nbytes);
    if (status) return -1;
    *out = ptr, *capacity = cap;
    return 0;
}

void deft_device_pool_free(deft_device_pool_t *pool, void *ptr, size_t capacity,
                           deft_fences_t *fences) {
    size_t cap;
    int cls = deft_size_class(capacity, &cap);
    cached_block_t *block = cls >= 0 ? malloc(sizeof *block) : NULL;
    if (!block) { /* too large to cache, or no room to remember it */
        raw_free(pool, ptr, capacity, fences);
        return;
    }
    block->ptr = ptr;
    block->fences = fences;
    pthread_mutex_lock(&pool->lock);
    block->next = pool->lists[cls];
    pool->lists[cls] = block;
    pthread_mutex_unlock(&pool->lock);
    deft_memstat_cached_add(pool->device, (int64_t)capacity);
}

void deft_device_pool_release_cached(deft_device_pool_t *pool) {
    for (int cls = 0; cls < DEFT_CLASS_COUNT; cls++) {
        pthread_mutex_lock(&pool->lock);
        cached_block_t *list = pool->lists[cls];
        pool->lists[cls] = NULL;
        pthread_mutex_unlock(&pool->lock);
        int64_t released = 0;
        while (list) {
            cached_block_t *next = list->next;
            raw_free(pool, list->ptr, deft_class_capacity(cls), list->fences);
            released += (int64_t)deft_class_capacity(cls);
            free(list);
            list = next;
        }
        if (released) deft_memstat_cached_add(pool->device, -released);
    }
}
