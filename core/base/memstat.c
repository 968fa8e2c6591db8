/*
 * Memory counters.
 *
 * Allocation and free are on the dispatch path, and an atomic
 * read-modify-write costs several nanoseconds, so each thread keeps its own
 * counters: only that thread writes them (plain relaxed stores), and a
 * reader sums every thread's counters under a lock. When a thread exits,
 * its counts move to a global `retired` total. The peak is tracked on
 * bytes held from the system (in use or cached), which change only on the
 * allocators' slow paths, so it stays exact without touching the fast path.
 */
#include "core/base/memstat.h"
#include "core/base/tls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { LOCAL_LIVE_BYTES, LOCAL_LIVE_BUFFERS, LOCAL_CACHED_BYTES, LOCAL_COUNT };

typedef struct thread_counters {
    atomic_llong value[DEFT_DEVICE_SLOTS][LOCAL_COUNT];
    struct thread_counters *next, *prev;
} thread_counters_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_counters_t *registry;
static long long retired[DEFT_DEVICE_SLOTS][LOCAL_COUNT]; /* guarded by registry_lock */
static atomic_llong held[DEFT_DEVICE_SLOTS], peak[DEFT_DEVICE_SLOTS],
    system_allocs[DEFT_DEVICE_SLOTS];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static DEFT_TLS_FAST thread_counters_t *tl_counters;

static void retire_thread(void *arg) {
    thread_counters_t *c = arg;
    pthread_mutex_lock(&registry_lock);
    for (int s = 0; s < DEFT_DEVICE_SLOTS; s++)
        for (int k = 0; k < LOCAL_COUNT; k++) retired[s][k] += atomic_load(&c->value[s][k]);
    if (c->prev)
        c->prev->next = c->next;
    else
        registry = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&registry_lock);
    free(c);
    tl_counters = NULL; /* a later key destructor counting again registers anew */
}

static void make_key(void) {
    pthread_key_create(&exit_key, retire_thread);
}

/* This thread's counters, registered on first use; NULL only if malloc fails. */
static thread_counters_t *local(void) {
    if (tl_counters) return tl_counters;
    thread_counters_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_once(&key_once, make_key);
    pthread_mutex_lock(&registry_lock);
    c->next = registry;
    if (registry) registry->prev = c;
    registry = c;
    pthread_mutex_unlock(&registry_lock);
    pthread_setspecific(exit_key, c);
    tl_counters = c;
    return c;
}

/* Single writer: a relaxed load and store, no locked instruction. */
static inline void add(atomic_llong *v, long long delta) {
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

static inline void bump_buffers(deft_device_t dev, long long bytes, long long buffers) {
    thread_counters_t *c = tl_counters ? tl_counters : local();
    if (!c) return;
    atomic_llong *v = c->value[deft_device_slot(dev)];
    add(&v[LOCAL_LIVE_BYTES], bytes);
    add(&v[LOCAL_LIVE_BUFFERS], buffers);
}

void deft_memstat_buffer_allocated(deft_device_t dev, size_t nbytes) {
    bump_buffers(dev, (long long)nbytes, 1);
}

void deft_memstat_buffer_freed(deft_device_t dev, size_t nbytes) {
    bump_buffers(dev, -(long long)nbytes, -1);
}

void deft_memstat_cached_add(deft_device_t dev, int64_t delta) {
    thread_counters_t *c = tl_counters ? tl_counters : local();
    if (c) add(&c->value[deft_device_slot(dev)][LOCAL_CACHED_BYTES], delta);
}

void deft_memstat_held_add(deft_device_t dev, int64_t delta) {
    int slot = deft_device_slot(dev);
    long long now = atomic_fetch_add(&held[slot], delta) + delta;
    long long seen = atomic_load(&peak[slot]);
    while (now > seen && !atomic_compare_exchange_weak(&peak[slot], &seen, now)) {
    }
    if (delta > 0) atomic_fetch_add(&system_allocs[slot], 1);
}

static int64_t sum_local(int slot, int which) {
    pthread_mutex_lock(&registry_lock);
    long long total = retired[slot][which];
    for (thread_counters_t *c = registry; c; c = c->next)
        total += atomic_load_explicit(&c->value[slot][which], memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
    return total;
}

int64_t deft_memstat_get(deft_device_t dev, deft_memstat_kind_t kind) {
    int slot = deft_device_slot(dev);
    switch (kind) {
    case DEFT_MEMSTAT_LIVE_BYTES:
        return sum_local(slot, LOCAL_LIVE_BYTES);
    case DEFT_MEMSTAT_LIVE_BUFFERS:
        return sum_local(slot, LOCAL_LIVE_BUFFERS);
    case DEFT_MEMSTAT_CACHED_BYTES:
        return sum_local(slot, LOCAL_CACHED_BYTES);
    case DEFT_MEMSTAT_PEAK_BYTES:
        return atomic_load(&peak[slot]);
    case DEFT_MEMSTAT_SYSTEM_ALLOCS:
        return atomic_load(&system_allocs[slot]);
    default:
        return 0;
    }
}
