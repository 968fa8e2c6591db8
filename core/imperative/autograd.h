/*
 * Autograd through the recorded graph (no tape). While the calling thread
 * records, every operator call that reads an array requiring a gradient (a
 * marked variable, or an array computed from one while recording) becomes a
 * graph node, the same nodes deferred compute records; the node keeps only
 * the values its gradient definition reads. Backward builds the gradient of
 * the recorded graph with the gradient pass and runs it in an executor
 * whose plan is cached by graph shape.
 */
#ifndef DEFT_CORE_AUTOGRAD_H
#define DEFT_CORE_AUTOGRAD_H

#include "core/imperative/ndarray.h"
#include "core/op/registry.h"

enum { DEFT_GRAD_REQ_NULL = 0, DEFT_GRAD_REQ_WRITE = 1, DEFT_GRAD_REQ_ADD = 2 };

/* The calling thread's modes. */
bool deft_autograd_recording(void);
void deft_autograd_set_recording(bool on, bool *prev);
bool deft_autograd_training(void);
void deft_autograd_set_training(bool on, bool *prev);

/* Whether some array is a marked variable or computed from one while recording (no lock). */
bool deft_autograd_any_requires_grad(int n, deft_ndarray_t *const *arrays);

/* Make arrays variables that require gradients (a fresh leaf each: earlier
 * history is dropped), with grad_reqs[i] and grads[i] (retained; may be NULL
 * for DEFT_GRAD_REQ_NULL). */
int deft_autograd_mark(int n, deft_ndarray_t *const *arrays, const int *grad_reqs,
                       deft_ndarray_t *const *grads);

/* Whether an imperative call must be recorded, and what its gradient reads. */
typedef struct deft_autograd_call {
    bool record;
    uint64_t save_in, save_out;
} deft_autograd_call_t;

/*
 * Before an imperative call runs while recording: decide whether it is
 * recorded (some input requires a gradient), and refuse an in-place write
 * over an input whose value the gradient needs. out[k]: given outputs or NULL.
 */
int deft_autograd_plan(const deft_op_entry_t *entry, const deft_param_value_t *params, int nin,
                       deft_ndarray_t *const *in, int nout, deft_ndarray_t *const *out, int nparams,
                       const char *const *keys, const char *const *vals,
                       deft_autograd_call_t *call);

/* After it ran: record its node; the outputs' entries point at it.
 * fresh_outputs: every output was made by the call (none was given). */
int deft_autograd_record(const deft_autograd_call_t *call, const deft_op_entry_t *entry,
                         const deft_param_value_t *params, int nin, deft_ndarray_t *const *in,
                         int nout, const deft_desc_t *out_desc, int nparams,
                         const char *const *keys, const char *const *vals,
                         deft_ndarray_t *const *out, bool fresh_outputs);

/* A node deferred compute just recorded, under the record lock: whether it
 * requires a gradient (when recording) and what its gradient reads. */
int deft_autograd_prepare_node(deft_node_t *node);

/*
 * Gradients of heads (computed first if lazy; head_grads[i] NULL means
 * ones) with respect to variables. With out_grads NULL: every marked
 * variable the heads depend on, written to its gradient array by its
 * grad_req. Otherwise with respect to vars[0..nvars), as new arrays in
 * out_grads. create_graph records the computation, so the gradients can be
 * differentiated again; without retain_graph the values kept for backward
 * are released.
 */
int deft_autograd_backward(int nheads, deft_ndarray_t *const *heads,
                           deft_ndarray_t *const *head_grads, int nvars,
                           deft_ndarray_t *const *vars, bool retain_graph, bool create_graph,
                           deft_ndarray_t **out_grads);

/* Backward plans built so far (each new graph shape builds one), for tests and reports. */
long deft_autograd_plans_built(void);
/* Backwards that found their plan cached (nothing rebuilt). */
long deft_autograd_plan_hits(void);
/* Backwards whose forward cut matched a recent one's shape (cut.h): no walk, no key written. */
long deft_autograd_cuts_matched(void);

#endif
