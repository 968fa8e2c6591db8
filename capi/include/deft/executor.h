/**
 * @file executor.h
 * @brief The executor (CachedOp): run a symbol's graph again and again with
 *        planned memory.
 *
 * For each distinct set of input shapes and dtypes the executor infers every
 * entry of the graph, plans memory once (reusing buffers whose last reader
 * has run, writing in place where an operator allows) and allocates one
 * arena; later runs with the same shapes reuse all of it. A run is one
 * asynchronous engine operation: it waits for its inputs and its outputs are
 * ready to read like any operator's.
 *
 * The plans kept are bounded. Each executor keeps at most
 * DEFT_PLAN_CACHE_SIZE plans (environment variable, default 64) and
 * DEFT_PLAN_CACHE_BYTES bytes of arenas (default 536870912, 512 MiB),
 * dropping the least recently used plan first; the plan of the current run
 * is kept whatever its size. Autograd's cache of backward executors has the
 * same bounds in all. Both variables are read once, when the first executor
 * is made. DeftMemoryReleaseCached() drops every executor's arenas; a
 * dropped plan is made again when its shapes come back.
 */
#ifndef DEFT_EXECUTOR_H
#define DEFT_EXECUTOR_H

#include "deft/symbol.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle on an executor. */
typedef struct DeftCachedOp *DeftCachedOpHandle;

/** Flags of DeftCachedOpCreate(). */
typedef enum DeftCachedOpFlag {
    DEFT_CACHED_OP_NO_MEMORY_PLAN = 1, /**< one buffer per entry (for comparison and debugging) */
    /** Forward and backward in one run: the executor runs the graph of
     *  DeftSymbolGradient() with respect to every argument. Inputs are the
     *  arguments, a head gradient for each output whose gradient reads one
     *  (none for loss heads such as SoftmaxOutput and MakeLoss, whose gradient
     *  is their own), then the auxiliary states: DeftSymbolListArguments() of
     *  the gradient symbol lists them in order. Outputs are the symbol's
     *  outputs, then the gradient of each argument in that order. */
    DEFT_CACHED_OP_BACKWARD = 2,
    /** Apply the "Fuse" pass (DeftSymbolApplyPasses()) before planning. */
    DEFT_CACHED_OP_FUSE = 4
} DeftCachedOpFlag;

/** Figures of a memory plan, read with DeftCachedOpGetPlanStat(). */
typedef enum DeftPlanStat {
    DEFT_PLAN_ARENA_BYTES = 0,        /**< the arena this executor allocated */
    DEFT_PLAN_NAIVE_BYTES = 1,        /**< one buffer per intermediate entry */
    DEFT_PLAN_INPLACE_ONLY_BYTES = 2, /**< with in-place writes but no sharing */
    DEFT_PLAN_SHARING_ONLY_BYTES = 3  /**< with sharing but no in-place writes */
} DeftPlanStat;

/**
 * @brief Make an executor for a symbol's graph.
 * @param sym the symbol (its graph is captured; the handle may be freed after).
 * @param flags a combination of ::DeftCachedOpFlag values, or 0.
 * @param[out] out receives a new handle, owned by the caller (DeftCachedOpFree()).
 * @return 0 on success; -1 on a bad handle, an uncomposed symbol, unknown flags, NULL
 *         @p out, or (with ::DEFT_CACHED_OP_BACKWARD) an operator without a gradient.
 */
DEFT_API int DeftCachedOpCreate(DeftSymbolHandle sym, int flags, DeftCachedOpHandle *out);

/**
 * @brief Run the graph.
 * @param op the executor.
 * @param num_inputs number of inputs: the symbol's arguments (DeftSymbolListArguments()
 *        order), then its auxiliary states. Any number: a graph with 100,000
 *        arguments runs like one with two.
 * @param inputs the input arrays (CPU).
 * @param[in,out] num_outputs on entry the room in @p outputs, on success the number of outputs.
 * @param[in,out] outputs NULL entries receive new arrays (owned by the caller); others
 *        must have the inferred shape and dtype and are written.
 * @return 0 on success; -1 on a wrong number of inputs, shapes the graph rejects
 *         (the message names the node), given outputs of the wrong shape, or too
 *         little room. Failures while running are reported by the outputs, as for
 *         DeftImperativeInvoke().
 */
DEFT_API int DeftCachedOpInvoke(DeftCachedOpHandle op, int num_inputs,
                                const DeftNDArrayHandle *inputs, int *num_outputs,
                                DeftNDArrayHandle *outputs);

/**
 * @brief A figure of the memory plan used by the last run.
 * @param op the executor.
 * @param stat a ::DeftPlanStat value.
 * @param[out] out receives the number of bytes.
 * @return 0 on success; -1 if the executor has not run, on an unknown stat or NULL @p out.
 */
DEFT_API int DeftCachedOpGetPlanStat(DeftCachedOpHandle op, int stat, int64_t *out);

/**
 * @brief Release an executor. NULL is a no-op; runs still pending finish first.
 * @param op the executor, or NULL.
 * @return 0 on success; -1 if @p op is not a live executor handle.
 */
DEFT_API int DeftCachedOpFree(DeftCachedOpHandle op);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_EXECUTOR_H */
