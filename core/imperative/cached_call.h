/*
 * An executor called from the imperative API. Outside any recording it just
 * runs. In deferred-compute mode the call is recorded as one lazy _CachedOp
 * node; while recording for autograd it runs and is recorded as one node,
 * whose gradient is its graph's gradient (so a hybridized block costs one
 * recorded call, however many operators its graph has).
 */
#ifndef DEFT_CORE_CACHED_CALL_H
#define DEFT_CORE_CACHED_CALL_H

#include "core/graph/executor.h"
#include "core/imperative/ndarray.h"

/* Run the executor on arrays (cached_invoke.c): one engine operation.
 * Inputs: the arguments in DeftSymbolListArguments order, then the auxiliary
 * states. Outputs as in deft_invoke: NULL entries are created. */
int deft_cached_op_invoke(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                          deft_ndarray_t **out);

/* As deft_cached_op_invoke; lazy inputs are computed first when it runs. */
int deft_cached_call(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                     deft_ndarray_t **out);

#endif
