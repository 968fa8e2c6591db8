/*
 * One-time initialisation for hot paths: pthread_once behind a flag, so
 * that every call after the first costs one load instead of a call into
 * libc (an operator call passes several such checks).
 */
#ifndef DEFT_CORE_ONCE_H
#define DEFT_CORE_ONCE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct deft_once {
    pthread_once_t once;
    atomic_bool done; /* set once pthread_once has returned: fn's effects are visible */
} deft_once_t;

#define DEFT_ONCE_INIT                                                                             \
    { PTHREAD_ONCE_INIT, false }

static inline void deft_once(deft_once_t *o, void (*fn)(void)) {
    if (atomic_load_explicit(&o->done, memory_order_acquire)) return;
    pthread_once(&o->once, fn);
    atomic_store_explicit(&o->done, true, memory_order_release);
}

#endif
