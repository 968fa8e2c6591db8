/* The CPU reduction kernel, for operators other than the reductions. */
#ifndef DEFT_CORE_OP_REDUCE_H
#define DEFT_CORE_OP_REDUCE_H

#include <stdint.h>

#include "core/op/op.h"

/* y = the sum of x over the axes whose bits are set in `reduced`; y holds
 * x's other axes in order. Errors (out of memory) name `op`. */
int deft_reduce_sum_axes(const deft_op_t *op, const deft_tensor_t *x, uint32_t reduced,
                         const deft_tensor_t *y);

#endif
