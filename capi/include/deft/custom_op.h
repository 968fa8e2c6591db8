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
 *
 * A callback may also queue its own GPU work (CUDA kernels, cuBLAS calls,
 * copies) on the arrays' device memory: on the CUDA stream that
 * DeftCustomOpGetStream() gives, which deft orders after the work that
 * produced the inputs and before the work that reads the output, without
 * the host waiting for the device.
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

/**
 * @brief The CUDA stream on which a forward or backward callback queues its
 *        own GPU work for gpu(@p device_id) (call it on the callback's thread,
 *        during the callback).
 *
 * Before the callback runs, deft makes this stream wait for the work that
 * wrote the callback's inputs and for the earlier work on its outputs; after
 * it returns, the work that reads the outputs waits for everything queued on
 * this stream. Neither is a wait of the host. The arrays' device addresses
 * come from DeftCustomOpGetData(), which does not wait either. An array that
 * deft operators called by the callback have written may still be in the
 * making on another stream: call DeftNDArrayWaitToRead() on it before a
 * kernel of your own reads it. What the callback queues on other streams is
 * not ordered by deft.
 *
 * The language bindings do not expose this function yet.
 *
 * @param device_id the GPU: one that holds an array of the callback.
 * @param out receives the stream, a @c cudaStream_t (valid for the process's life).
 * @return 0 on success; -1 outside a forward or backward callback, or when
 *         none of the callback's arrays is on gpu(@p device_id).
 */
DEFT_API int DeftCustomOpGetStream(int device_id, void **out);

/**
 * @brief The address of the first element of an array that the running
 *        forward or backward callback was called with (an input, the output,
 *        a gradient), without waiting for its data (call it on the
 *        callback's thread, during the callback).
 *
 * Device memory for an array on a GPU: only work queued on the stream of
 * DeftCustomOpGetStream() is ordered with the array's other users. The
 * elements are contiguous, in row-major order. DeftNDArrayToDLPack() gives
 * the address too, after the host waited for the array.
 *
 * The language bindings do not expose this function yet.
 *
 * @param handle an array the callback was called with.
 * @param out receives the address, valid during the callback.
 * @return 0 on success; -1 outside a forward or backward callback, or for an
 *         array the callback was not called with.
 */
DEFT_API int DeftCustomOpGetData(DeftNDArrayHandle handle, void **out);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_CUSTOM_OP_H */
