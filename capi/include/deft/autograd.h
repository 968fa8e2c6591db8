/**
 * @file autograd.h
 * @brief Automatic differentiation through the recorded graph.
 *
 * Mark arrays as variables, turn recording on, compute, then call
 * DeftAutogradBackward() on a result. While recording (per thread), every
 * operator call that reads an array requiring a gradient is recorded as a
 * graph node, the same graph deferred compute records (there is no tape);
 * a node keeps only the values its gradient reads. Backward runs the
 * gradient of that graph in an executor whose memory plan is reused for
 * graphs of the same shape. Freeing the results frees the recorded nodes,
 * so memory stays bounded without any "clear" call. With recording off
 * (the "no grad" mode) nothing is recorded and nothing is kept. Recording
 * and deferred compute work together: a call recorded lazily is
 * differentiated once it is computed.
 */
#ifndef DEFT_AUTOGRAD_H
#define DEFT_AUTOGRAD_H

#include "deft/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How backward stores a variable's gradient (DeftAutogradMarkVariables()). */
typedef enum DeftGradReq {
    DEFT_GRAD_NULL = 0,  /**< no gradient */
    DEFT_GRAD_WRITE = 1, /**< overwrite the gradient array */
    DEFT_GRAD_ADD = 2    /**< add to the gradient array (accumulate over calls) */
} DeftGradReq;

/**
 * @brief Turn recording on or off for the calling thread (off is "no grad").
 * @param on nonzero to record.
 * @param[out] prev receives the previous setting (may be NULL).
 * @return 0.
 */
DEFT_API int DeftAutogradSetIsRecording(int on, int *prev);

/**
 * @brief Whether the calling thread records.
 * @param[out] out receives 1 or 0.
 * @return 0 on success; -1 when @p out is NULL.
 */
DEFT_API int DeftAutogradIsRecording(int *out);

/**
 * @brief Set the calling thread's training flag (read by layers that behave
 *        differently when training).
 *
 * Operators such as Dropout and BatchNorm compute in training mode when the
 * thread that makes the call (an imperative call, a cached op's run, a
 * deferred compute trigger) has the flag set at that moment, wherever and
 * whenever their kernels run later.
 * @param on nonzero for training.
 * @param[out] prev receives the previous setting (may be NULL).
 * @return 0.
 */
DEFT_API int DeftAutogradSetIsTraining(int on, int *prev);

/**
 * @brief The calling thread's training flag.
 * @param[out] out receives 1 or 0.
 * @return 0 on success; -1 when @p out is NULL.
 */
DEFT_API int DeftAutogradIsTraining(int *out);

/**
 * @brief Make arrays variables whose gradients backward computes.
 *
 * Each array becomes a fresh leaf of the recorded graph (its earlier
 * history, if any, is dropped).
 * @param num number of arrays.
 * @param variables the arrays (computed, not lazy).
 * @param grad_reqs a DeftGradReq per array, or NULL for all DEFT_GRAD_WRITE.
 * @param grads per array, the array receiving its gradient (same shape and
 *        dtype; may be NULL for DEFT_GRAD_NULL). Held until the variable is
 *        marked again or freed.
 * @return 0 on success; -1 on an invalid handle, a bad grad_req, a missing
 *         or mismatched gradient array, a lazy array, or a gradient array
 *         sharing memory with a variable or with another gradient array
 *         (disjoint parts of one buffer are fine).
 */
DEFT_API int DeftAutogradMarkVariables(int num, const DeftNDArrayHandle *variables,
                                       const int *grad_reqs, const DeftNDArrayHandle *grads);

/**
 * @brief Compute the gradients of heads with respect to every marked
 *        variable they depend on, stored by each variable's grad_req.
 * @param num_heads number of heads (at least 1).
 * @param heads results of recorded calls (computed first if lazy).
 * @param head_grads per head, its gradient (same shape and dtype), or NULL
 *        for ones; the whole list may be NULL.
 * @param retain_graph nonzero to keep the recorded values so the graph can be
 *        differentiated again; otherwise they are released.
 * @param create_graph nonzero to record the gradient computation itself, so
 *        the gradients can be differentiated again (implies retain_graph).
 *
 * The gradient kernels run in training mode whatever the calling thread's
 * flag, as MXNet's backward(train_mode=True): BatchNorm's gradient goes
 * through the batch's statistics unless use_global_stats is set.
 * @return 0 on success; -1 when a head does not depend on a marked variable,
 *         a head gradient does not match, an operator on the way has no
 *         gradient, or the graph's values were released by an earlier
 *         backward.
 */
DEFT_API int DeftAutogradBackward(int num_heads, const DeftNDArrayHandle *heads,
                                  const DeftNDArrayHandle *head_grads, int retain_graph,
                                  int create_graph);

/**
 * @brief Gradients of heads with respect to the given variables, returned as
 *        new arrays (like torch.autograd.grad); the variables' gradient
 *        arrays are not touched.
 * @param num_heads number of heads (at least 1).
 * @param heads results of recorded calls.
 * @param head_grads per head, its gradient or NULL for ones; may be NULL.
 * @param num_variables number of variables.
 * @param variables marked variables; a variable the heads do not depend on
 *        gets zeros.
 * @param retain_graph as for DeftAutogradBackward().
 * @param create_graph as for DeftAutogradBackward(): with it, the returned
 *        gradients can be differentiated again (second derivatives).
 * @param[out] out_grads receive a new array per variable, owned by the caller.
 * @return 0 on success; -1 on the errors of DeftAutogradBackward() or a
 *         variable that is not marked.
 */
DEFT_API int DeftAutogradComputeGradient(int num_heads, const DeftNDArrayHandle *heads,
                                         const DeftNDArrayHandle *head_grads, int num_variables,
                                         const DeftNDArrayHandle *variables, int retain_graph,
                                         int create_graph, DeftNDArrayHandle *out_grads);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_AUTOGRAD_H */
