/*
 * Per-thread lists of records, backed by a shared list. Operations are
 * often created on the host thread and freed on a worker: the worker's list
 * fills, the host's empties. Rather than pass the surplus through malloc
 * (whose cross-thread frees are slow), full lists hand half their records
 * to the shared list in one locked step, and empty ones take a batch back.
 */
#include "core/base/records.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/base/tls.h"

#define DEPTH DEFT_RECORD_DEPTH
#define BATCH (DEPTH / 2)

typedef deft_record_list_t record_list_t;

typedef struct shared_record {
    struct shared_record *next;
} shared_record_t;

DEFT_TLS_FAST record_list_t *deft_tl_records;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
/* Changed under shared_lock; peeked at without it to skip an empty list. */
static shared_record_t *_Atomic shared;

static void give_to_shared(record_list_t *list, int count) {
    pthread_mutex_lock(&shared_lock);
    while (count-- > 0) {
        shared_record_t *r = list->records[--list->count];
        r->next = atomic_load_explicit(&shared, memory_order_relaxed);
        atomic_store_explicit(&shared, r, memory_order_relaxed);
    }
    pthread_mutex_unlock(&shared_lock);
}

static void take_from_shared(record_list_t *list) {
    pthread_mutex_lock(&shared_lock);
    shared_record_t *r;
    while ((r = atomic_load_explicit(&shared, memory_order_relaxed)) && list->count < BATCH) {
        list->records[list->count++] = r;
        atomic_store_explicit(&shared, r->next, memory_order_relaxed);
    }
    pthread_mutex_unlock(&shared_lock);
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
