/*
 * pick's parameters, inference and plan, shared with the operators that
 * fuse a pick's gradient (pick_log_softmax.c).
 */
#ifndef DEFT_CORE_OP_PICK_H
#define DEFT_CORE_OP_PICK_H

#include "core/math/gather_math.h"
#include "core/op/op.h"

/* axis, keepdims, mode (clip or wrap): p[0], p[1], p[2]. */
extern const deft_param_def_t deft_pick_params[];

/* _backward_pick(grad, index, data): the result is shaped like data; grad
 * must be shaped like pick(data, index). */
int deft_pick_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out);

/* The plan of pick over data's shape, the index checked (whole numbers;
 * clip and wrap take any); src, dst and dtype are the caller's to set. */
int deft_pick_plan(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *data,
                   const deft_tensor_t *index, deft_pick_plan_t *plan);

#endif
