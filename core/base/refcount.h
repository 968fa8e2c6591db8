/*
 * Dropping a reference. A locked read-modify-write costs 15-20 ns on these
 * machines, as much as the rest of an operator call's bookkeeping put
 * together, and most objects die with one owner. When the count is 1 the
 * caller holds the only reference, so nobody can take another, and the
 * object goes without the atomic decrement. Objects that can be retained
 * through a weak pointer (deft_ndarray_try_retain) must not use this.
 */
#ifndef DEFT_CORE_REFCOUNT_H
#define DEFT_CORE_REFCOUNT_H

#include <stdatomic.h>
#include <stdbool.h>

/* Drop one reference; true when it was the last (the caller frees the object). */
static inline bool deft_release_last(atomic_int *count) {
    if (atomic_load_explicit(count, memory_order_acquire) == 1) return true;
    return atomic_fetch_sub_explicit(count, 1, memory_order_acq_rel) == 1;
}

#endif
