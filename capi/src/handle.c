#include "capi/src/handle.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/tls.h"

#define MAGIC_BASE      0xDEF70000u
#define MAGIC_FREED     0xDEF7DEADu
#define SHELLS_PER_SLAB 1024

typedef struct shell {
    _Atomic uint32_t magic;
    void *object;
    struct shell *next_free;
} shell_t;

/* With their article, as messages use them: "expected an NDArray handle". */
static const char *const kind_names[DEFT_HANDLE_KIND_COUNT] = {
    [DEFT_HANDLE_NDARRAY] = "an NDArray",
    [DEFT_HANDLE_SYMBOL] = "a Symbol",
    [DEFT_HANDLE_CACHED_OP] = "a CachedOp",
    [DEFT_HANDLE_PROFILE_DOMAIN] = "a profile domain",
    [DEFT_HANDLE_PROFILE_OBJECT] = "a profile object",
};

static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static shell_t *free_head, *free_tail;
/* Live handles are counted per thread (a locked add per handle costs more
 * than the rest of making one); a reader sums the threads' counts, and an
 * exiting thread's net count moves to `retired`. Handles made on one thread
 * and freed on another net out in the sum. */
static long long retired[DEFT_HANDLE_KIND_COUNT]; /* guarded by shell_lock */

/*
 * Each thread also keeps a ring of its recently freed shells, so creating
 * and freeing handles takes no lock. A shell is reused only once QUARANTINE
 * newer ones have been freed after it, which keeps a stale handle
 * detectable for a while even in a tight create/free loop.
 */
#define RING       64
#define QUARANTINE 32

typedef struct shell_ring {
    shell_t *shells[RING];
    unsigned head, count;
    atomic_llong live[DEFT_HANDLE_KIND_COUNT]; /* written by its thread only */
    struct shell_ring *next, *prev;            /* all rings, under shell_lock */
} shell_ring_t;

static shell_ring_t *rings;

static DEFT_TLS_FAST shell_ring_t *tl_ring;
static pthread_once_t ring_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t ring_key;

static uint32_t magic_of(deft_handle_kind_t kind) {
    return MAGIC_BASE | (uint32_t)kind;
}

/* Called with shell_lock held. Slabs are deliberately never freed (see handle.h). */
static int grow_free_list(void) {
    shell_t *slab = calloc(SHELLS_PER_SLAB, sizeof *slab);
    if (!slab) return -1;
    for (int i = 0; i < SHELLS_PER_SLAB; i++) {
        atomic_init(&slab[i].magic, MAGIC_FREED);
        slab[i].next_free = i + 1 < SHELLS_PER_SLAB ? &slab[i + 1] : NULL;
    }
    free_head = slab;
    free_tail = &slab[SHELLS_PER_SLAB - 1];
    return 0;
}

static void push_global(shell_t *shell) {
    pthread_mutex_lock(&shell_lock);
    if (free_tail)
        free_tail->next_free = shell;
    else
        free_head = shell;
    free_tail = shell;
    pthread_mutex_unlock(&shell_lock);
}

static void flush_ring(void *arg) {
    shell_ring_t *ring = arg;
    for (; ring->count; ring->count--, ring->head = (ring->head + 1) % RING)
        push_global(ring->shells[ring->head]);
    pthread_mutex_lock(&shell_lock);
    for (int k = 0; k < DEFT_HANDLE_KIND_COUNT; k++) retired[k] += atomic_load(&ring->live[k]);
    if (ring->prev)
        ring->prev->next = ring->next;
    else
        rings = ring->next;
    if (ring->next) ring->next->prev = ring->prev;
    pthread_mutex_unlock(&shell_lock);
    free(ring);
}

/* This thread's count of live handles of a kind changes by delta (one writer:
 * a relaxed load and store, no locked instruction). Without a ring (out of
 * memory) the exited threads' total takes it. */
static void count_live(shell_ring_t *r, deft_handle_kind_t kind, long long delta) {
    if (!r) {
        pthread_mutex_lock(&shell_lock);
        retired[kind] += delta;
        pthread_mutex_unlock(&shell_lock);
        return;
    }
    atomic_store_explicit(&r->live[kind],
                          atomic_load_explicit(&r->live[kind], memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

static void make_ring_key(void) {
    pthread_key_create(&ring_key, flush_ring);
}

static shell_ring_t *new_ring(void) {
    pthread_once(&ring_key_once, make_ring_key);
    shell_ring_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_lock(&shell_lock);
    r->next = rings;
    if (rings) rings->prev = r;
    rings = r;
    pthread_mutex_unlock(&shell_lock);
    pthread_setspecific(ring_key, r);
    return tl_ring = r;
}

/* This thread's ring; NULL when out of memory. */
static shell_ring_t *ring(void) {
    return tl_ring ? tl_ring : new_ring();
}

static shell_t *take_from_ring(shell_ring_t *r) {
    if (!r || r->count <= QUARANTINE) return NULL;
    shell_t *shell = r->shells[r->head];
    r->head = (r->head + 1) % RING;
    r->count--;
    return shell;
}

/* Returns false when the ring is full (or missing): the caller uses the global list. */
static bool put_in_ring(shell_ring_t *r, shell_t *shell) {
    if (!r || r->count == RING) return false;
    r->shells[(r->head + r->count) % RING] = shell;
    r->count++;
    return true;
}

static shell_t *take_from_global(void) {
    pthread_mutex_lock(&shell_lock);
    if (!free_head && grow_free_list()) {
        pthread_mutex_unlock(&shell_lock);
        return NULL;
    }
    shell_t *shell = free_head;
    free_head = shell->next_free;
    if (!free_head) free_tail = NULL;
    pthread_mutex_unlock(&shell_lock);
    return shell;
}

void *deft_handle_new(deft_handle_kind_t kind, void *object) {
    shell_ring_t *r = ring();
    shell_t *shell = take_from_ring(r);
    if (!shell) shell = take_from_global();
    if (!shell) {
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate handles");
        return NULL;
    }
    shell->object = object;
    shell->next_free = NULL;
    atomic_store_explicit(&shell->magic, magic_of(kind), memory_order_release);
    count_live(r, kind, 1);
    return shell;
}

static int bad_handle(const void *handle, uint32_t magic, deft_handle_kind_t kind,
                      const char *what) {
    if (magic == MAGIC_FREED)
        return deft_error(DEFT_ERR_VALUE, "%s (%p) is %s handle that was already freed", what,
                          handle, kind_names[kind]);
    uint32_t other = magic - MAGIC_BASE;
    if ((magic & 0xFFFF0000u) == MAGIC_BASE && other < DEFT_HANDLE_KIND_COUNT)
        return deft_error(DEFT_ERR_TYPE, "%s (%p) is %s handle, expected %s handle", what, handle,
                          kind_names[other], kind_names[kind]);
    return deft_error(DEFT_ERR_VALUE, "%s (%p) is not %s handle from deft", what, handle,
                      kind_names[kind]);
}

int deft_handle_get(const void *handle, deft_handle_kind_t kind, const char *what, void **object) {
    if (!handle)
        return deft_error(DEFT_ERR_VALUE, "%s is NULL, expected %s handle", what, kind_names[kind]);
    const shell_t *shell = handle;
    uint32_t magic = atomic_load_explicit(&shell->magic, memory_order_acquire);
    if (magic != magic_of(kind)) return bad_handle(handle, magic, kind, what);
    *object = shell->object;
    return 0;
}

int deft_handle_retire(void *handle, deft_handle_kind_t kind, const char *what, void **object) {
    if (!handle)
        return deft_error(DEFT_ERR_VALUE, "%s is NULL, expected %s handle", what, kind_names[kind]);
    shell_t *shell = handle;
    uint32_t expected = magic_of(kind);
    if (!atomic_compare_exchange_strong(&shell->magic, &expected, MAGIC_FREED))
        return bad_handle(handle, expected, kind, what);
    *object = shell->object;
    shell->object = NULL;
    shell_ring_t *r = ring();
    count_live(r, kind, -1);
    if (!put_in_ring(r, shell)) push_global(shell);
    return 0;
}

bool deft_handle_valid(const void *handle, deft_handle_kind_t kind) {
    return handle && atomic_load_explicit(&((const shell_t *)handle)->magic,
                                          memory_order_acquire) == magic_of(kind);
}

void *deft_handle_object(const void *handle) {
    return ((const shell_t *)handle)->object;
}

int64_t deft_handle_live_count(deft_handle_kind_t kind) {
    pthread_mutex_lock(&shell_lock);
    long long total = retired[kind];
    for (const shell_ring_t *r = rings; r; r = r->next) total += atomic_load(&r->live[kind]);
    pthread_mutex_unlock(&shell_lock);
    return (int64_t)total;
}
