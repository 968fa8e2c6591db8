#include "capi/src/handle.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/tls.h"

/*
 * A handle is not a pointer: it is a number with the top bit set (never a
 * user-space address on the 64-bit targets deft supports) that names a
 * shell by its index, with the kind of its object and the shell's
 * generation when the handle was made:
 *
 *   bit 63: 1 | bits 60..62: kind | bits 27..59: generation | bits 0..26: index
 *
 * A live shell's state is its handle's value; freeing clears the top bit,
 * and the shell's next handle has the next generation. So checking a handle
 * is one comparison, a stale handle never matches a reused shell (that
 * would take 2^33 reuses of one shell, each after QUARANTINE others, while
 * the stale handle is kept), and a foreign pointer is refused by its top
 * bit, or by naming no shell, without reading memory it points to.
 */
#define HANDLE_TAG      (UINT64_C(1) << 63)
#define KIND_SHIFT      60
#define INDEX_BITS      27
#define INDEX_MASK      ((UINT64_C(1) << INDEX_BITS) - 1)
#define GENERATION_MASK ((UINT64_C(1) << (KIND_SHIFT - INDEX_BITS)) - 1)
#define SHELLS_PER_SLAB 1024
#define MAX_SLABS       ((1u << INDEX_BITS) / SHELLS_PER_SLAB)

_Static_assert(sizeof(void *) == 8, "handles encode 64 bits");
_Static_assert(DEFT_HANDLE_KIND_COUNT <= 8, "a kind takes 3 bits");

typedef struct shell {
    _Atomic uint64_t state; /* live: the handle's value; free: the same, top bit clear */
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
/* Slabs by number; one is published (release) before any of its handles exist. */
static _Atomic(shell_t *) slabs[MAX_SLABS];
static unsigned num_slabs; /* guarded by shell_lock */
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

/* The shell a handle names; NULL when it names none (not made by deft). */
static inline shell_t *shell_of(uint64_t handle) {
    if (!(handle & HANDLE_TAG)) return NULL;
    uint64_t index = handle & INDEX_MASK;
    shell_t *slab = atomic_load_explicit(&slabs[index / SHELLS_PER_SLAB], memory_order_acquire);
    return slab ? &slab[index % SHELLS_PER_SLAB] : NULL;
}

static inline uint64_t value_of(const void *handle) {
    return (uint64_t)(uintptr_t)handle;
}

/* Called with shell_lock held. Slabs are deliberately never freed: a stale
 * handle's shell stays readable. */
static int grow_free_list(void) {
    if (num_slabs == MAX_SLABS) return -1;
    shell_t *slab = calloc(SHELLS_PER_SLAB, sizeof *slab);
    if (!slab) return -1;
    for (unsigned i = 0; i < SHELLS_PER_SLAB; i++) {
        atomic_init(&slab[i].state, num_slabs * SHELLS_PER_SLAB + i); /* generation 0, free */
        slab[i].next_free = i + 1 < SHELLS_PER_SLAB ? &slab[i + 1] : NULL;
    }
    atomic_store_explicit(&slabs[num_slabs++], slab, memory_order_release);
    free_head = slab;
    free_tail = &slab[SHELLS_PER_SLAB - 1];
    return 0;
}

/* The rare paths stay out of line: the hot ones then keep no registers to save. */
#define COLD __attribute__((noinline, cold))

COLD static void push_global(shell_t *shell) {
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
COLD static void count_retired(deft_handle_kind_t kind, long long delta) {
    pthread_mutex_lock(&shell_lock);
    retired[kind] += delta;
    pthread_mutex_unlock(&shell_lock);
}

static void count_live(shell_ring_t *r, deft_handle_kind_t kind, long long delta) {
    if (!r) {
        count_retired(kind, delta);
        return;
    }
    atomic_store_explicit(&r->live[kind],
                          atomic_load_explicit(&r->live[kind], memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

static void make_ring_key(void) {
    pthread_key_create(&ring_key, flush_ring);
}

COLD static shell_ring_t *new_ring(void) {
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

COLD static shell_t *take_from_global(void) {
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
    /* A free shell is this thread's alone: its state changes only here and in retire. */
    uint64_t old = atomic_load_explicit(&shell->state, memory_order_relaxed);
    uint64_t generation = ((old >> INDEX_BITS) + 1) & GENERATION_MASK;
    uint64_t handle =
        HANDLE_TAG | (uint64_t)kind << KIND_SHIFT | generation << INDEX_BITS | (old & INDEX_MASK);
    atomic_store_explicit(&shell->state, handle, memory_order_release);
    count_live(r, kind, 1);
    return (void *)(uintptr_t)handle;
}

/* Why a handle that is not a live one of `kind` was refused. */
COLD static int bad_handle(const void *handle, const shell_t *shell, deft_handle_kind_t kind,
                           const char *what) {
    if (!shell)
        return deft_error(DEFT_ERR_VALUE, "%s (%p) is not %s handle from deft", what, handle,
                          kind_names[kind]);
    uint64_t v = value_of(handle);
    if (atomic_load_explicit(&shell->state, memory_order_acquire) != v)
        return deft_error(DEFT_ERR_VALUE, "%s (%p) is %s handle that was already freed", what,
                          handle, kind_names[kind]);
    return deft_error(DEFT_ERR_TYPE, "%s (%p) is %s handle, expected %s handle", what, handle,
                      kind_names[(v >> KIND_SHIFT) & 7], kind_names[kind]);
}

/* The live shell of a handle of `kind`, or NULL. */
static inline shell_t *live_shell(const void *handle, deft_handle_kind_t kind) {
    uint64_t v = value_of(handle);
    shell_t *shell = shell_of(v);
    if (!shell || ((v >> KIND_SHIFT) & 7) != (uint64_t)kind ||
        atomic_load_explicit(&shell->state, memory_order_acquire) != v)
        return NULL;
    return shell;
}

int deft_handle_get(const void *handle, deft_handle_kind_t kind, const char *what, void **object) {
    if (!handle)
        return deft_error(DEFT_ERR_VALUE, "%s is NULL, expected %s handle", what, kind_names[kind]);
    const shell_t *shell = live_shell(handle, kind);
    if (!shell) return bad_handle(handle, shell_of(value_of(handle)), kind, what);
    *object = shell->object;
    return 0;
}

int deft_handle_retire(void *handle, deft_handle_kind_t kind, const char *what, void **object) {
    if (!handle)
        return deft_error(DEFT_ERR_VALUE, "%s is NULL, expected %s handle", what, kind_names[kind]);
    uint64_t v = value_of(handle), expected = v;
    shell_t *shell = shell_of(v);
    /* Exactly one of two racing frees clears the top bit. */
    if (!shell || ((v >> KIND_SHIFT) & 7) != (uint64_t)kind ||
        !atomic_compare_exchange_strong(&shell->state, &expected, v & ~HANDLE_TAG))
        return bad_handle(handle, shell, kind, what);
    *object = shell->object;
    shell->object = NULL;
    shell_ring_t *r = ring();
    count_live(r, kind, -1);
    if (!put_in_ring(r, shell)) push_global(shell);
    return 0;
}

void *deft_handle_lookup(const void *handle, deft_handle_kind_t kind) {
    const shell_t *shell = live_shell(handle, kind);
    return shell ? shell->object : NULL;
}

int64_t deft_handle_live_count(deft_handle_kind_t kind) {
    pthread_mutex_lock(&shell_lock);
    long long total = retired[kind];
    for (const shell_ring_t *r = rings; r; r = r->next) total += atomic_load(&r->live[kind]);
    pthread_mutex_unlock(&shell_lock);
    return (int64_t)total;
}
