#include "core/base/records.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/base/tls.h"

#define DEPTH 64

typedef struct record_list {
    int count;
    void *records[DEPTH];
} record_list_t;

static DEFT_TLS_FAST record_list_t *tl_records;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;

static void free_list(void *arg) {
    record_list_t *list = arg;
    while (list->count > 0) free(list->records[--list->count]);
    free(list);
}

static void make_key(void) {
    pthread_key_create(&key, free_list);
}

static record_list_t *list(void) {
    if (tl_records) return tl_records;
    pthread_once(&key_once, make_key);
    if ((tl_records = calloc(1, sizeof *tl_records)) != NULL) pthread_setspecific(key, tl_records);
    return tl_records;
}

void *deft_record_alloc(void) {
    record_list_t *l = list();
    if (l && l->count > 0) return l->records[--l->count];
    return malloc(DEFT_RECORD_SIZE);
}

void deft_record_free(void *record) {
    if (!record) return;
    record_list_t *l = list();
    if (l && l->count < DEPTH) {
        l->records[l->count++] = record;
        return;
    }
    free(record);
}
