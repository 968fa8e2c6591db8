/*
 * Small fixed-size records (array and storage headers) from per-thread free
 * lists. Every operator call makes an array and usually frees one; malloc
 * and free cost about a hundred instructions each, a list pop or push a
 * few. Records freed on another thread (a finalizer, a worker) join that
 * thread's list; lists are bounded, and the excess goes to a shared list
 * that other threads refill from (records are never returned to malloc).
 */
#ifndef DEFT_CORE_RECORDS_H
#define DEFT_CORE_RECORDS_H

#include <stddef.h>

#include "core/base/tls.h"

#define DEFT_RECORD_SIZE 512

#define DEFT_RECORD_DEPTH 64

typedef struct deft_record_list {
    int count;
    void *records[DEFT_RECORD_DEPTH];
} deft_record_list_t;

/* This thread's list; NULL until its first slow-path call. */
extern DEFT_TLS_FAST deft_record_list_t *deft_tl_records;

void *deft_record_alloc_slow(void);
void deft_record_free_slow(void *record);

/* A record of at most DEFT_RECORD_SIZE bytes, 16-byte aligned; NULL when out
 * of memory. The list pop is inline: a call makes and frees several records,
 * and the pop is cheaper than the call to a function doing it. */
static inline void *deft_record_alloc(void) {
    deft_record_list_t *l = deft_tl_records;
    if (l && l->count > 0) return l->records[--l->count];
    return deft_record_alloc_slow();
}

static inline void deft_record_free(void *record) {
    deft_record_list_t *l = deft_tl_records;
    if (l && record && l->count < DEFT_RECORD_DEPTH) {
        l->records[l->count++] = record;
        return;
    }
    deft_record_free_slow(record);
}

#endif
