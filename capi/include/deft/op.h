/**
 * @file op.h
 * @brief Operators: listing and introspection, the random seed, and
 *        imperative invocation.
 *
 * Operators are named as in MXNet (`FullyConnected`, `broadcast_add`,
 * `_plus_scalar`, `sum`, ...). Their parameters are strings
 * (`num_hidden="128"`, `axis="(0,1)"`, `keepdims="true"`), so every language
 * and every saved graph passes them the same way. Bindings generate their
 * operator wrappers from the information here.
 */
#ifndef DEFT_OP_H
#define DEFT_OP_H

#include "deft/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle on a registered operator; valid for the life of the process, never freed. */
typedef struct DeftOp *DeftOpHandle;

/**
 * @brief Names of all registered operators, in alphabetical order.
 * @param[out] out_count receives the number of operators.
 * @param[out] out_names receives an array of @p out_count names, owned by the
 *             library and valid for the life of the process.
 * @return 0 on success; -1 if an out-pointer is NULL.
 */
DEFT_API int DeftListOperators(int *out_count, const char *const **out_names);

/**
 * @brief Find an operator by name.
 * @param name the operator's name, e.g. "dot".
 * @param[out] out receives the operator's handle.
 * @return 0 on success; -1 if @p name is NULL or unknown (the message suggests
 *         near names), or @p out is NULL.
 */
DEFT_API int DeftGetOperator(const char *name, DeftOpHandle *out);

/**
 * @brief Name and description of an operator.
 * @param op the operator.
 * @param[out] out_name receives its name (owned by the library).
 * @param[out] out_description receives one or two sentences (owned by the library).
 * @return 0 on success; -1 on a bad handle or NULL out-pointers.
 */
DEFT_API int DeftOpGetInfo(DeftOpHandle op, const char **out_name, const char **out_description);

/**
 * @brief Inputs an operator takes.
 * @param op the operator.
 * @param[out] out_min receives the fewest inputs it accepts.
 * @param[out] out_max receives the most (larger than the count of names for
 *             operators such as Concat that take any number).
 * @param[out] out_num_names receives how many input names there are.
 * @param[out] out_names receives the input names (owned by the library).
 * @return 0 on success; -1 on a bad handle or NULL out-pointers.
 */
DEFT_API int DeftOpGetInputs(DeftOpHandle op, int *out_min, int *out_max, int *out_num_names,
                             const char *const **out_names);

/**
 * @brief Number of parameters an operator takes.
 * @param op the operator.
 * @param[out] out receives the count.
 * @return 0 on success; -1 on a bad handle or a NULL @p out.
 */
DEFT_API int DeftOpGetNumParams(DeftOpHandle op, int *out);

/**
 * @brief One parameter of an operator.
 * @param op the operator.
 * @param index the parameter's position, in [0, DeftOpGetNumParams()).
 * @param[out] out_name receives its name.
 * @param[out] out_type receives its type: "int", "float", "boolean", "tuple of
 *             int", "dtype", "device", "string" or "enum" (with " or None" where
 *             None is allowed).
 * @param[out] out_default receives its default as a string, or NULL when the
 *             parameter is required.
 * @param[out] out_doc receives a short description.
 * @return 0 on success; -1 on a bad handle, an index out of range
 *         (DEFT_ERROR_INDEX) or NULL out-pointers. Strings are owned by the library.
 */
DEFT_API int DeftOpGetParam(DeftOpHandle op, int index, const char **out_name,
                            const char **out_type, const char **out_default, const char **out_doc);

/**
 * @brief The words an "enum" parameter accepts.
 * @param op the operator.
 * @param index the parameter's position.
 * @param[out] out_count receives the number of words (0 for other types).
 * @param[out] out_words receives the words (owned by the library).
 * @return 0 on success; -1 on a bad handle, an index out of range or NULL out-pointers.
 */
DEFT_API int DeftOpGetParamChoices(DeftOpHandle op, int index, int *out_count,
                                   const char *const **out_words);

/**
 * @brief Restart the random stream used by the random operators.
 *
 * The same seed followed by the same calls gives the same numbers on every
 * run, whatever the thread count: the calls that draw (and graph runs with
 * such a node) are ordered as the thread made them, and the seed comes after
 * the draws queued before it (it waits for them).
 * @param seed any value.
 * @return 0, or -1 when out of memory (DeftGetLastError).
 */
DEFT_API int DeftRandomSeed(uint64_t seed);

/**
 * @brief Turn memoisation of operator calls on (capacity > 0) or off (0).
 *
 * While on, an imperative call of a deterministic operator, with no given
 * outputs and not recorded for autograd, on the same input arrays (unchanged
 * since) with the same parameters as a call still in the cache returns that
 * call's results (the same arrays) instead of computing again. Any write to
 * an input or to a cached result makes the entry stale. Arrays whose memory
 * is shared through DLPack (exported or imported) can be written where deft
 * does not see it: calls reading them are not memoised, and a cached result
 * exported since is computed again. The cache holds the
 * last @p capacity distinct calls, least recently used first out, and keeps
 * their results allocated while they are cached. Off by default; turning it
 * off empties the cache. Process-wide.
 * @param capacity the most calls to remember; 0 turns memoisation off.
 * @param[out] prev receives the previous capacity (may be NULL).
 * @return 0 on success; -1 on a negative capacity or when the cache cannot be
 *         allocated.
 */
DEFT_API int DeftSetMemoization(int capacity, int *prev);

/**
 * @brief Calls answered from the memoisation cache, and calls looked up and not found.
 * @param[out] hits receives the hits since the process started.
 * @param[out] misses receives the misses.
 * @return 0 on success; -1 when an out-parameter is NULL.
 */
DEFT_API int DeftGetMemoizationStats(int64_t *hits, int64_t *misses);

/**
 * @brief Run an operator now.
 *
 * The kernel runs asynchronously on the engine; reading an output waits for
 * it. Lazy inputs (deferred compute) are computed first. While the calling
 * thread is in deferred-compute mode (DeftSetIsDeferredCompute()) the call
 * is recorded instead, as by DeftImperativeDeferredInvoke().
 *
 * @param op the operator.
 * @param num_inputs number of input arrays.
 * @param inputs the input arrays (all on one device).
 * @param[in,out] num_outputs on entry, the room in @p outputs; on success,
 *        the number of outputs the operator produced; on failure because
 *        the room is too small, the number it needs (call again with that
 *        room); on any other failure, unchanged.
 * @param[in,out] outputs for each output, NULL to have a new array created
 *        (a handle owned by the caller) or an existing array of the right shape
 *        and dtype to write the result into.
 * @param num_params number of parameters.
 * @param keys parameter names.
 * @param vals parameter values, as strings.
 * @return 0 on success; -1 on an unknown, duplicate or unparsable parameter, a
 *         missing required one, a wrong number of inputs, or incompatible shapes
 *         or dtypes, with a message naming the operator, the parameter or input,
 *         what was given and what was expected; a lazy array given as an
 *         output or as an input the operator updates in place. On failure no
 *         output is created or changed.
 */
DEFT_API int DeftImperativeInvoke(DeftOpHandle op, int num_inputs, const DeftNDArrayHandle *inputs,
                                  int *num_outputs, DeftNDArrayHandle *outputs, int num_params,
                                  const char *const *keys, const char *const *vals);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_OP_H */
