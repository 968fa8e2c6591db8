/*
 * Per-thread lists of records, backed by a shared list. Operations are
 * often created on the host thread and freed on a worker: the worker's list
 * fills, the host's empties. Rather than pass the surplus through malloc
 * (whose cross-thread frees are slow), full lists hand half their records
 * to the shared list in one locked step, and empty ones take a batch back.
 *
 * The shared list holds batches, not records: one record of each batch
 * carries the addresses of the others. Chaining every record instead made
 * a refill walk the chain, one cache miss after another on records that
 * another thread freed long ago (a binding's finalizers free thousands at
 * once): that walk was half the cost of a call. Now a refill reads one
 * record, and each of the others is first touched when it is used.
 */
#include "core/base/records.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/base/tls.h"

#define DEPTH DEFT_RECORD_DEPTH
#define BATCH (DEPTH / 2)

typedef deft_record_list_t record_list_t;

/* A batch on the shared list, written over its first record. */
typedef struct shared_batch {
    struct shared_batch *next;
    int count; /* records in others */
    void *others[BATCH - 1];
} shared_batch_t;

_Static_assert(sizeof(shared_batch_t) <= DEFT_RECORD_SIZE, "a batch fits in its first record");

DEFT_TLS_FAST record_list_t *deft_tl_records;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
/* Changed under shared_lock; peeked at without it to skip an empty list. */
static shared_batch_t *_Atomic shared;

/* Moves up to BATCH records from the top of list to the shared list. */
static void give_batch(record_list_t *list, int count) {
    shared_batch_t *batch = list->records[--list->count];
    batch->count = 0;
    while (--count > 0 && list->count > 0)
        batch->others[batch->count++] = list->records[--list->count];
    pthread_mutex_lock(&shared_lock);
    batch->next = atomic_load_explicit(&shared, memory_order_relaxed);
    atomic_store_explicit(&shared, batch, memory_order_relaxed);
    pthread_mutex_unlock(&shared_lock);
}

static void give_to_shared(record_list_t *list, int count) {
    while (count > 0 && list->count > 0) {
        give_batch(list, count < BATCH ? count : BATCH);
        count -= BATCH;
    }
}

/* Refills an empty list with one batch. */
static void take_from_shared(record_list_t *list) {
    pthread_mutex_lock(&shared_lock);
    shared_batch_t *batch = atomic_load_explicit(&shared, memory_order_relaxed);
    if (batch) atomic_store_explicit(&shared, batch->next, memory_order_relaxed);
    pthread_mutex_unlock(&shared_lock);
    if (!batch) return;
    for (int i = 0; i < batch->count; i++) list->records[list->count++] = batch->others[i];
    list->records[list->count++] = batch; /* used first: it is in cache now */
}

/* At thread exit. A later key destructor that frees a record makes a new
 * list, which the next round of destructors retires in turn. */
static void retire_list(void *arg) {
    record_list_t *list = arg;
    give_to_shared(list, list->count);
    free(list);
    deft_tl_records = NULL;
}

static void make_key(void) {
    pthread_key_create(&key, retire_list);
}

static record_list_t *list(void) {
    if (deft_tl_records) return deft_tl_records;
    pthread_once(&key_once, make_key);
    if ((deft_tl_records = calloc(1, sizeof *deft_tl_records)) != NULL)
        pthread_setspecific(key, deft_tl_records);
    return deft_tl_records;
}

void *deft_record_alloc_slow(void) {
    record_list_t *l = list();
    if (l && l->count == 0 && atomic_load_explicit(&shared, memory_order_relaxed))
        take_from_shared(l);
    if (l && l->count > 0) return l->records[--l->count];
    return malloc(DEFT_RECORD_SIZE);
}

void deft_record_free_slow(void *record) {
    if (!record) return;
    record_list_t *l = list();
    if (!l) {
        free(record);
        return;
    }
    if (l->count == DEPTH) give_to_shared(l, BATCH);
    l->records[l->count++] = record;
}
