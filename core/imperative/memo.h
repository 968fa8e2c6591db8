/*
 * Memoisation (libccv NNC's "function memorisation"), opt in: an imperative
 * call of a deterministic operator on the same arrays, unchanged since, with
 * the same parameters, returns the results of the first call instead of
 * computing again. Arrays are told apart by an id given when first seen
 * and a version bumped on every write, so a freed and reused address or an
 * in-place update never hits. The cache holds at most `capacity` calls and
 * drops the least recently used; its results stay allocated while cached.
 */
#ifndef DEFT_CORE_MEMO_H
#define DEFT_CORE_MEMO_H

#include "core/imperative/ndarray.h"
#include "core/op/registry.h"

/* 0 turns memoisation off and empties the cache. */
int deft_memo_set_capacity(int capacity, int *prev);
bool deft_memo_enabled(void);
void deft_memo_stats(long *hits, long *misses);

/* The cached results of this call into out[0..nout) (new references): 1 on a
 * hit, 0 on a miss. */
int deft_memo_lookup(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int nparams,
                     const char *const *keys, const char *const *vals, int nout,
                     deft_ndarray_t **out);

/* Remember a computed call (its results are retained). Failures only skip caching. */
void deft_memo_insert(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int nparams,
                      const char *const *keys, const char *const *vals, int nout,
                      deft_ndarray_t *const *out);

#endif
