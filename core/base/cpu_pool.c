/*
 * The CPU memory pool.
 *
 * Deep-learning loops allocate and free the same few sizes over and over;
 * going to malloc each time costs page faults and zeroing for large blocks.
 * Freed blocks are therefore kept on a free list per size class
 * (size_class.h) and handed out again. Blocks above the largest class go
 * straight to the system. DEFT_POOL=off bypasses the cache,
 * so tools such as ASan see every allocation and free.
 *
 * Small blocks (up to 4 KiB) also pass through a per-thread cache of a few
 * blocks per class, so the common case of an operator output freed soon
 * after takes no lock: the dispatch benchmark showed the shared lock to be
 * the largest single cost of a call on a tiny array.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/base/memstat.h"
#include "core/base/once.h"
#include "core/base/size_class.h"
#include "core/base/tls.h"

#define THREAD_CLASSES 25 /* classes up to 4 KiB */
#define THREAD_DEPTH   16 /* blocks per class in a thread's cache */

typedef struct free_block {
    struct free_block *next;
} free_block_t;

typedef struct thread_cache {
    int count[THREAD_CLASSES];
    void *blocks[THREAD_CLASSES][THREAD_DEPTH];
} thread_cache_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block_t *free_lists[DEFT_CLASS_COUNT];
static deft_once_t config_once = DEFT_ONCE_INIT;
static pthread_key_t cache_key;
static int caching_enabled;
static DEFT_TLS_FAST thread_cache_t *tl_cache;

static void push_global(int cls, void *ptr) {
    free_block_t *block = ptr;
    pthread_mutex_lock(&pool_lock);
    block->next = free_lists[cls];
    free_lists[cls] = block;
    pthread_mutex_unlock(&pool_lock);
}

static void *pop_global(int cls) {
    pthread_mutex_lock(&pool_lock);
    free_block_t *block = free_lists[cls];
    if (block) free_lists[cls] = block->next;
    pthread_mutex_unlock(&pool_lock);
    return block;
}

/* Move a thread's cached blocks to the shared lists (thread exit, release). */
static void flush_thread_cache(void *arg) {
    thread_cache_t *cache = arg;
    for (int cls = 0; cls < THREAD_CLASSES; cls++)
        while (cache->count[cls] > 0) push_global(cls, cache->blocks[cls][--cache->count[cls]]);
}

/* At thread exit; as records.c's lists, made again if a later destructor frees a buffer. */
static void free_thread_cache(void *arg) {
    flush_thread_cache(arg);
    free(arg);
    tl_cache = NULL;
}

static void read_config(void) {
    const char *env = getenv("DEFT_POOL");
    caching_enabled = !(env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0));
    pthread_key_create(&cache_key, free_thread_cache);
}

bool deft_cpu_pool_caching(void) {
    deft_once(&config_once, read_config);
    return caching_enabled;
}

static thread_cache_t *thread_cache(void) {
    if (!tl_cache && (tl_cache = calloc(1, sizeof *tl_cache)) != NULL)
        pthread_setspecific(cache_key, tl_cache);
    return tl_cache;
}

static void *system_alloc(size_t capacity) {
    void *ptr = NULL;
    if (posix_memalign(&ptr, DEFT_CPU_ALIGN, capacity) != 0) return NULL;
    deft_memstat_held_add(deft_device_cpu(), (int64_t)capacity);
    return ptr;
}

static void system_free(void *ptr, size_t capacity) {
    free(ptr);
    deft_memstat_held_add(deft_device_cpu(), -(int64_t)capacity);
}

static void cpu_release_cached(deft_device_t dev) {
    deft_once(&config_once, read_config);
    if (tl_cache) flush_thread_cache(tl_cache);
    for (int cls = 0; cls < DEFT_CLASS_COUNT; cls++) {
        pthread_mutex_lock(&pool_lock);
        free_block_t *list = free_lists[cls];
        free_lists[cls] = NULL;
        pthread_mutex_unlock(&pool_lock);
        int64_t released = 0;
        while (list) {
            free_block_t *next = list->next;
            system_free(list, deft_class_capacity(cls));
            released += (int64_t)deft_class_capacity(cls);
            list = next;
        }
        if (released) deft_memstat_cached_add(dev, -released);
    }
}

static void *take_cached(int cls) {
    thread_cache_t *cache = cls < THREAD_CLASSES ? thread_cache() : NULL;
    if (cache && cache->count[cls] > 0) return cache->blocks[cls][--cache->count[cls]];
    return pop_global(cls);
}

static int cpu_alloc(deft_device_t dev, size_t nbytes, void **out, size_t *capacity,
                     deft_fences_t **fences) {
    *fences = NULL;
    deft_once(&config_once, read_config);
    size_t cap = (nbytes + DEFT_CPU_ALIGN - 1) & ~(size_t)(DEFT_CPU_ALIGN - 1);
    int cls = caching_enabled ? deft_size_class(nbytes, &cap) : -1;
    void *ptr = cls >= 0 ? take_cached(cls) : NULL;
    if (ptr) deft_memstat_cached_add(dev, -(int64_t)cap);
    if (!ptr) ptr = system_alloc(cap);
    if (!ptr) {
        /* The cache may hold enough memory for this request: give it back and retry. */
        cpu_release_cached(dev);
        ptr = system_alloc(cap);
    }
    if (!ptr)
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes on cpu(0)", nbytes);
    *out = ptr;
    *capacity = cap;
    return 0;
}

static void cpu_free(deft_device_t dev, void *ptr, size_t capacity, deft_fences_t *fences) {
    (void)fences; /* CPU buffers have none */
    size_t cap;
    int cls = caching_enabled ? deft_size_class(capacity, &cap) : -1;
    if (cls < 0) {
        system_free(ptr, capacity);
        return;
    }
    deft_memstat_cached_add(dev, (int64_t)capacity);
    thread_cache_t *cache = cls < THREAD_CLASSES ? thread_cache() : NULL;
    if (cache && cache->count[cls] < THREAD_DEPTH) {
        cache->blocks[cls][cache->count[cls]++] = ptr;
        return;
    }
    push_global(cls, ptr);
}

const deft_allocator_t deft_cpu_pool = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .release_cached = cpu_release_cached,
};
