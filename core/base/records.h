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

/* A record of at most DEFT_RECORD_SIZE bytes, 16-byte aligned; NULL when out of memory. */
void *deft_record_alloc(void);
void deft_record_free(void *record);

#define DEFT_RECORD_SIZE 512

#endif
