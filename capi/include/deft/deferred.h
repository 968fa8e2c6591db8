/**
 * @file deferred.h
 * @brief Deferred compute: record operator calls as a graph, compute lazily,
 *        export the graph as a symbol.
 *
 * In deferred-compute mode (per thread) operator calls are recorded and
 * return lazy arrays: their shape and dtype are known at once, but no
 * memory is allocated and nothing runs until a value is needed, by
 * DeftNDArrayTriggerDeferredCompute(), by reading (DeftNDArrayCopyToHost(),
 * DeftNDArrayWaitToRead()), or by passing the array to an operator outside
 * deferred mode. Then only the recorded calls the requested arrays depend
 * on run, each once, as one memory-planned graph run. The recorded graph
 * stays (until the arrays are freed or cleared), so it can be exported with
 * DeftNDArrayGetDeferredComputeSymbol() and run again by an executor.
 *
 * Arrays made outside deferred mode may be inputs of recorded calls; the
 * recording keeps them until the calls are computed. A lazy array cannot be
 * written: not as a given output, not by an operator that updates its input,
 * not by DeftNDArrayCopyFromHost().
 */
#ifndef DEFT_DEFERRED_H
#define DEFT_DEFERRED_H

#include "deft/op.h"
#include "deft/symbol.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Turn deferred-compute mode on or off for the calling thread.
 * @param on nonzero to record, 0 to run operators at once.
 * @param[out] prev receives the previous mode (may be NULL).
 * @return 0.
 */
DEFT_API int DeftSetIsDeferredCompute(int on, int *prev);

/**
 * @brief Whether the calling thread is in deferred-compute mode.
 * @param[out] out receives 1 or 0.
 * @return 0 on success; -1 when @p out is NULL.
 */
DEFT_API int DeftIsDeferredCompute(int *out);

/**
 * @brief Record an operator call, whatever the mode, returning lazy arrays.
 *
 * Arguments as for DeftImperativeInvoke(), except that every entry of
 * @p outputs must be NULL: a recorded call makes new (lazy) arrays.
 * @param op the operator.
 * @param num_inputs number of input arrays.
 * @param inputs the input arrays, normal or lazy.
 * @param[in,out] num_outputs on entry, the room in @p outputs; on success, the
 *        number of outputs recorded.
 * @param[out] outputs receive new lazy arrays, owned by the caller (each
 *        entry must be NULL on entry).
 * @param num_params number of parameters.
 * @param keys parameter names.
 * @param vals parameter values, as strings.
 * @return 0 on success; -1 on the errors of DeftImperativeInvoke(), a given
 *         output, or a lazy array as an input the operator updates in place (an
 *         array with a value is fine: it becomes an auxiliary state of the exported
 *         graph, and computing the call updates it).
 */
DEFT_API int DeftImperativeDeferredInvoke(DeftOpHandle op, int num_inputs,
                                          const DeftNDArrayHandle *inputs, int *num_outputs,
                                          DeftNDArrayHandle *outputs, int num_params,
                                          const char *const *keys, const char *const *vals);

/**
 * @brief Which arrays are lazy: recorded and not computed yet.
 * @param handles the arrays.
 * @param n their number.
 * @param[out] status receives, per array, 1 when it is lazy, else 0.
 * @return 0 on success; -1 on an invalid handle or a NULL @p status.
 */
DEFT_API int DeftNDArrayGetIsDeferredCompute(const DeftNDArrayHandle *handles, int n, int *status);

/**
 * @brief Compute the lazy arrays among @p handles (others are ignored).
 *
 * The computation is pushed to the engine; reading the arrays waits for it.
 * @param handles the arrays.
 * @param n their number.
 * @return 0 on success; -1 on an invalid handle.
 */
DEFT_API int DeftNDArrayTriggerDeferredCompute(const DeftNDArrayHandle *handles, int n);

/**
 * @brief The recorded graph from @p inputs to @p outputs, as a symbol.
 *
 * The symbol's arguments (DeftSymbolListArguments()) are exactly
 * @p input_names in order, standing for @p inputs, and its outputs are
 * @p outputs in order, their nodes named @p output_names (so an output
 * lists as "<name>_output"). Arrays made outside deferred compute and used
 * inside (parameters) are listed as inputs to become arguments. With no
 * inputs, every array the outputs depend on must be bound to a variable
 * (DeftNDArraySetDeferredComputeVariable()); those variables are the
 * arguments. Works before and after the outputs are computed.
 *
 * A graph recorded in predict mode (DeftAutogradSetIsTraining() off) exports
 * as an inference graph: its Dropout calls of mode "training", the identity
 * in predict mode, are left out, each standing for its input (an output one
 * made becomes a _copy of that input, keeping its name).
 * @param inputs the input arrays (may be NULL when @p num_inputs is 0).
 * @param outputs the output arrays: results of recorded calls.
 * @param input_names a distinct name per input.
 * @param output_names a distinct name per output, or NULL for default names.
 * @param num_inputs number of inputs.
 * @param num_outputs number of outputs (at least 1).
 * @param[out] out receives a new symbol handle, owned by the caller.
 * @return 0 on success; -1 when an output was not recorded, an output
 *         depends on an array neither computed from the inputs nor listed,
 *         an input is connected to no output, an array is listed twice, or
 *         a name is missing or duplicated.
 */
DEFT_API int DeftNDArrayGetDeferredComputeSymbol(const DeftNDArrayHandle *inputs,
                                                 const DeftNDArrayHandle *outputs,
                                                 const char *const *input_names,
                                                 const char *const *output_names, int num_inputs,
                                                 int num_outputs, DeftSymbolHandle *out);

/**
 * @brief Bind arrays made outside deferred compute to graph variables.
 *
 * Recorded calls that use a bound array refer to its variable, so a graph
 * exported with outputs alone has these variables as its arguments.
 * @param arrays the arrays.
 * @param variables a variable symbol (DeftSymbolCreateVariable()) per array.
 * @param n their number.
 * @return 0 on success; -1 when a symbol is not a variable, an array is the
 *         result of a recorded call, or an array is already bound to a
 *         variable of another name.
 */
DEFT_API int DeftNDArraySetDeferredComputeVariable(const DeftNDArrayHandle *arrays,
                                                   const DeftSymbolHandle *variables, int n);

/**
 * @brief Compute the arrays if they are lazy, then drop their recorded history.
 *
 * Recorded nodes that no other array reaches are freed.
 * @param arrays the arrays.
 * @param n their number.
 * @return 0 on success; -1 on an invalid handle.
 */
DEFT_API int DeftNDArrayClearDeferredCompute(const DeftNDArrayHandle *arrays, int n);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_DEFERRED_H */
