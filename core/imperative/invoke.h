/* Imperative invoke: run one operator now on arrays, creating its outputs. */
#ifndef DEFT_CORE_INVOKE_H
#define DEFT_CORE_INVOKE_H

#include "core/imperative/ndarray.h"
#include "core/op/registry.h"

/*
 * Run `entry` on inputs. On entry *nout is the room in out[]; each out[k]
 * is NULL (a new array is made, with one reference for the caller) or an
 * existing array of the inferred shape and dtype to write into. On return
 * *nout is the operator's output count. -1 naming the operator otherwise;
 * nothing is written and no array is created then.
 *
 * In deferred-compute mode the call is recorded instead and out[] receives
 * lazy arrays (deferred.h). Otherwise lazy inputs are computed first, and a
 * lazy array as a given output or an updated input is an error.
 */
int deft_invoke(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int *nout,
                deft_ndarray_t **out, int nparams, const char *const *keys,
                const char *const *vals);

#endif
