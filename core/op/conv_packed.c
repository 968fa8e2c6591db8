/*
 * Packed weights kept between calls: the direct convolution's forward
 * (conv_direct.c) packs its weights into blocks of output channels on
 * every call, which at one image of 512 -> 512 3x3 costs about as much as
 * the convolution itself. In inference the weights do not change from one
 * call to the next, so the packed copy is kept here, keyed by the weights'
 * contents (op.h's content key: the storage's id and version, vouched for by
 * the runner) and by their layout (the pointer and the packed shape).
 *
 * A write to the weights bumps their storage's version, so a later call
 * misses and packs anew; its entry replaces the stale one, which nothing can
 * match again. At most MAX_ENTRIES entries and MAX_BYTES bytes are kept, the
 * least recently used going first, and DeftMemoryReleaseCached on the CPU
 * drops them all. Entries are reference-counted: one that is evicted while a
 * call still reads it is freed when the call lets it go.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/op/conv_direct.h"

#if DEFT_CONV_DIRECT_X86

enum { MAX_ENTRIES = 128 };
#define MAX_BYTES ((size_t)256 << 20)

struct deft_conv_packed {
    deft_conv_pack_key_t key;
    atomic_int refs; /* the cache's, and each call's reading it */
    uint64_t used;   /* the tick of its last use */
    size_t bytes;
    float *data;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static deft_conv_packed_t *entries[MAX_ENTRIES];
static int count;
static size_t total_bytes;
static uint64_t tick;

static bool same_layout(const deft_conv_pack_key_t *a, const deft_conv_pack_key_t *b) {
    return a->w == b->w && memcmp(a->dims, b->dims, sizeof a->dims) == 0;
}

static bool same(const deft_conv_pack_key_t *a, const deft_conv_pack_key_t *b) {
    return same_layout(a, b) && a->content.id == b->content.id &&
           a->content.version == b->content.version;
}

void deft_conv_packed_release(deft_conv_packed_t *p) {
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) {
        free(p->data);
        free(p);
    }
}

/* Drop entry i from the cache (under the lock). */
static void evict(int i) {
    deft_conv_packed_t *p = entries[i];
    total_bytes -= p->bytes;
    entries[i] = entries[--count];
    deft_conv_packed_release(p);
}

/* The least recently used entry (under the lock; count > 0). */
static int oldest(void) {
    int at = 0;
    for (int i = 1; i < count; i++)
        if (entries[i]->used < entries[at]->used) at = i;
    return at;
}

/* Keep p (one reference is the cache's): in place of the entry of the same
 * layout, whose contents are older, and within the limits. */
static void keep(deft_conv_packed_t *p) {
    if (p->bytes > MAX_BYTES) return;
    atomic_fetch_add(&p->refs, 1);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < count; i++)
        if (same_layout(&entries[i]->key, &p->key)) {
            evict(i);
            break;
        }
    while (count > 0 && (count == MAX_ENTRIES || total_bytes + p->bytes > MAX_BYTES))
        evict(oldest());
    p->used = ++tick;
    entries[count++] = p;
    total_bytes += p->bytes;
    pthread_mutex_unlock(&lock);
}

const float *deft_conv_packed_get(const deft_conv_pack_key_t *key, size_t floats,
                                  void (*pack)(void *ctx, float *dst), void *ctx,
                                  deft_conv_packed_t **held) {
    *held = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < count; i++)
        if (same(&entries[i]->key, key)) {
            deft_conv_packed_t *p = entries[i];
            p->used = ++tick;
            atomic_fetch_add(&p->refs, 1);
            pthread_mutex_unlock(&lock);
            *held = p;
            return p->data;
        }
    pthread_mutex_unlock(&lock);
    /* Packed outside the lock: other calls go on meanwhile. */
    deft_conv_packed_t *p = malloc(sizeof *p);
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    float *data = p ? aligned_alloc(64, bytes) : NULL;
    if (!data) {
        free(p);
        return NULL;
    }
    *p = (deft_conv_packed_t){.key = *key, .bytes = bytes, .data = data};
    atomic_init(&p->refs, 1);
    pack(ctx, data);
    keep(p);
    *held = p;
    return data;
}

void deft_conv_packed_drop_all(void) {
    pthread_mutex_lock(&lock);
    while (count > 0) evict(count - 1);
    pthread_mutex_unlock(&lock);
}

size_t deft_conv_packed_bytes(void) {
    pthread_mutex_lock(&lock);
    size_t bytes = total_bytes;
    pthread_mutex_unlock(&lock);
    return bytes;
}

#else

void deft_conv_packed_drop_all(void) {}

size_t deft_conv_packed_bytes(void) {
    return 0;
}

#endif
