#include "core/imperative/memo.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/hash.h"

typedef struct memo_entry {
    uint64_t hash;
    size_t key_len;
    unsigned char *key;
    int nout;
    deft_ndarray_t *out[DEFT_OP_MAX_OUTPUTS];
    uint32_t out_version[DEFT_OP_MAX_OUTPUTS];
    struct memo_entry *prev, *next; /* most recently used first */
    struct memo_entry *chain;       /* the next entry in its hash bucket */
} memo_entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int capacity;
static int count;
static memo_entry_t *head, *tail;
static memo_entry_t **buckets; /* 2 * capacity rounded up to a power of two */
static size_t num_buckets;
static long hits, misses;
static atomic_uint_fast64_t next_id = 1;

static memo_entry_t **bucket_of(uint64_t hash) {
    return &buckets[hash & (num_buckets - 1)];
}

static void unlink_entry(memo_entry_t *e) {
    memo_entry_t **at = bucket_of(e->hash);
    while (*at != e) at = &(*at)->chain;
    *at = e->chain;
    if (e->prev)
        e->prev->next = e->next;
    else
        head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(memo_entry_t *e) {
    memo_entry_t **bucket = bucket_of(e->hash);
    e->chain = *bucket;
    *bucket = e;
    e->next = head;
    if (head) head->prev = e;
    head = e;
    if (!tail) tail = e;
}

static void free_entry(memo_entry_t *e) {
    for (int k = 0; k < e->nout; k++) deft_ndarray_release(e->out[k]);
    free(e->key);
    free(e);
}

static void trim(int limit) {
    while (count > limit && tail) {
        memo_entry_t *e = tail;
        unlink_entry(e);
        free_entry(e);
        count--;
    }
}

/* Buckets for a new capacity; the entries are re-filed. -1 when out of memory. */
static int rehash(int cap) {
    size_t n = 16;
    while (n < 2 * (size_t)cap) n *= 2;
    memo_entry_t **fresh = calloc(n, sizeof *fresh);
    if (!fresh) return -1;
    free(buckets);
    buckets = fresh, num_buckets = n;
    for (memo_entry_t *e = head; e; e = e->next) {
        memo_entry_t **bucket = bucket_of(e->hash);
        e->chain = *bucket;
        *bucket = e;
    }
    return 0;
}

int deft_memo_set_capacity(int cap, int *prev) {
    pthread_mutex_lock(&lock);
    if (prev) *prev = atomic_load(&capacity);
    if (cap < 0) cap = 0;
    trim(cap);
    int status = cap > 0 && rehash(cap) ? -1 : 0;
    if (status == 0) atomic_store(&capacity, cap);
    pthread_mutex_unlock(&lock);
    return status ? deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the memoisation cache") : 0;
}

bool deft_memo_enabled(void) {
    return atomic_load_explicit(&capacity, memory_order_relaxed) > 0;
}

void deft_memo_stats(long *h, long *m) {
    pthread_mutex_lock(&lock);
    *h = hits, *m = misses;
    pthread_mutex_unlock(&lock);
}

/* ---- keys: operator, parameters as given, each input's id and version ---- */

typedef struct key {
    unsigned char buf[1024];
    size_t len;
    bool overflow;
} key_t;

static void put(key_t *k, const void *data, size_t n) {
    if (k->len + n > sizeof k->buf) {
        k->overflow = true;
        return;
    }
    memcpy(k->buf + k->len, data, n);
    k->len += n;
}

static uint64_t array_id(deft_ndarray_t *arr) {
    uint64_t id = atomic_load(&arr->memo_id);
    if (id) return id;
    uint64_t fresh = atomic_fetch_add(&next_id, 1), none = 0;
    return atomic_compare_exchange_strong(&arr->memo_id, &none, fresh) ? fresh : none;
}

/* Memory writable outside deft changes without a version: never trusted. */
static bool shared(const deft_ndarray_t *arr) {
    return atomic_load_explicit(&arr->tensor.storage->shared, memory_order_relaxed);
}

/* False when the call cannot be keyed: too long a key, or an input shared. */
static bool make_key(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int np,
                     const char *const *keys, const char *const *vals, key_t *k) {
    k->len = 0, k->overflow = false;
    put(k, &entry, sizeof entry);
    for (int i = 0; i < np; i++) {
        put(k, keys[i], strlen(keys[i]) + 1);
        put(k, vals[i], strlen(vals[i]) + 1);
    }
    put(k, &nin, sizeof nin);
    for (int i = 0; i < nin; i++) {
        if (shared(in[i])) return false;
        uint64_t id = array_id(in[i]);
        uint32_t version = deft_ndarray_version(in[i]);
        put(k, &id, sizeof id);
        put(k, &version, sizeof version);
    }
    return !k->overflow;
}

static memo_entry_t *find(uint64_t hash, const key_t *k) {
    for (memo_entry_t *e = *bucket_of(hash); e; e = e->chain)
        if (e->hash == hash && e->key_len == k->len && memcmp(e->key, k->buf, k->len) == 0)
            return e;
    return NULL;
}

static bool unchanged(const memo_entry_t *e) {
    for (int i = 0; i < e->nout; i++)
        if (deft_ndarray_version(e->out[i]) != e->out_version[i] || shared(e->out[i])) return false;
    return true;
}

int deft_memo_lookup(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int nparams,
                     const char *const *keys, const char *const *vals, int nout,
                     deft_ndarray_t **out) {
    key_t k;
    if (!make_key(entry, nin, in, nparams, keys, vals, &k)) return 0;
    uint64_t hash = deft_hash_bytes(k.buf, k.len);
    pthread_mutex_lock(&lock);
    memo_entry_t *e = num_buckets ? find(hash, &k) : NULL;
    if (e && (e->nout != nout || !unchanged(e))) { /* a result was written to since */
        unlink_entry(e);
        free_entry(e);
        count--;
        e = NULL;
    }
    if (e) {
        unlink_entry(e);
        push_front(e);
        for (int i = 0; i < nout; i++) out[i] = deft_ndarray_retain(e->out[i]);
        hits++;
    } else {
        misses++;
    }
    pthread_mutex_unlock(&lock);
    return e != NULL;
}

void deft_memo_insert(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int nparams,
                      const char *const *keys, const char *const *vals, int nout,
                      deft_ndarray_t *const *out) {
    key_t k;
    if (!make_key(entry, nin, in, nparams, keys, vals, &k)) return;
    memo_entry_t *e = calloc(1, sizeof *e);
    if (!e || !(e->key = malloc(k.len ? k.len : 1))) {
        free(e);
        return;
    }
    memcpy(e->key, k.buf, k.len);
    e->key_len = k.len, e->hash = deft_hash_bytes(k.buf, k.len), e->nout = nout;
    for (int i = 0; i < nout; i++) {
        e->out[i] = deft_ndarray_retain(out[i]);
        e->out_version[i] = deft_ndarray_version(out[i]);
    }
    pthread_mutex_lock(&lock);
    int cap = atomic_load(&capacity);
    if (cap == 0) { /* turned off meanwhile */
        pthread_mutex_unlock(&lock);
        free_entry(e);
        return;
    }
    memo_entry_t *old = find(e->hash, &k);
    if (old) {
        unlink_entry(old);
        free_entry(old);
        count--;
    }
    push_front(e);
    count++;
    trim(cap);
    pthread_mutex_unlock(&lock);
}
