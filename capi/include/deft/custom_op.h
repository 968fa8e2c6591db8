/**
 * @file custom_op.h
 * @brief Operators written in a host language: shape inference, forward and
 *        backward as callbacks.
 *
 * A registered custom operator is an operator like any other: found with
 * DeftGetOperator(), called imperatively or in deferred compute, exported in
 * symbols and JSON (within this process), differentiated by autograd. Its
 * forward and backward callbacks run on dedicated callback threads, never on
 * an engine thread or on a thread that called the API, so a host lock such
 * as Python's GIL can never block the engine. Operators a callback invokes
 * run at once on its thread and appear in the profiler as
 * NAME\::OPERATOR in the "Custom Operators" domain.
 */
#ifndef DEFT_CUSTOM_OP_H
#define DEFT_CUSTOM_OP_H

#include "deft/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief A custom operator's callbacks. Each returns 0 on success and
 *        nonzero on failure (after DeftCustomOpSetError(), ideally).
 */
typedef struct DeftCustomOpCallbacks {
    /** Inputs (at least 1); custom operators have one output. */
    int num_inputs;
    /**
     * Output shape and dtype from the inputs': in_shapes holds
     * DEFT_MAX_NDIM dimensions per input; write out_ndim, out_shape (room
     * for DEFT_MAX_NDIM) and out_dtype. Runs on the calling thread.
     */
    int (*infer_shape)(void *user, int num_inputs, const int *in_ndims, const int64_t *in_shapes,
                       const int *in_dtypes, int *out_ndim, int64_t *out_shape, int *out_dtype);
    /** Fill @p output from @p inputs (borrowed handles, valid during the call). */
    int (*forward)(void *user, int num_inputs, const DeftNDArrayHandle *inputs,
                   DeftNDArrayHandle output, int is_train);
    /**
     * Fill @p in_grads (one per input) from the output's gradient, the
     * inputs and the output. NULL: the operator has no gradient.
     */
    int (*backward)(void *user, DeftNDArrayHandle out_grad, int num_inputs,
                    const DeftNDArrayHandle *inputs, DeftNDArrayHandle output,
                    const DeftNDArrayHandle *in_grads);
    /** Passed to every callback. */
    void *user;
    /**
     * Releases @p user when deft no longer needs it (may be NULL): after a
     * failed registration. A registered operator lives as long as the
     * process, since graphs and handles may refer to it, so its user data
     * is never released.
     */
    void (*release)(void *user);
} DeftCustomOpCallbacks;

/**
 * @brief Register a custom operator.
 * @param name its name: unique, without "\::" (the profiler's separator).
 * @param callbacks its callbacks (copied).
 * @return 0 on success; -1 on a NULL argument, a name taken or containing
 *         "\::", fewer than one or too many inputs, or NULL infer_shape/forward.
 */
DEFT_API int DeftCustomOpRegister(const char *name, const DeftCustomOpCallbacks *callbacks);

/**
 * @brief Set the message of a failing callback (on the callback's thread).
 * @param message the text (copied); the operator's error names the operator.
 * @return 0.
 */
DEFT_API int DeftCustomOpSetError(const char *message);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_CUSTOM_OP_H */
