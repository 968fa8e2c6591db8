/*
 * Checking index inputs before a kernel uses them: on the CPU a scan, on a
 * GPU a check kernel (core/op/index_check.cu); either way a bad element is
 * reported with the operator, the input, its position and its value.
 */
#ifndef DEFT_CORE_OP_INDEX_CHECK_H
#define DEFT_CORE_OP_INDEX_CHECK_H

#include "core/math/index_check.h"
#include "core/op/op.h"

/* A check of `t` (on any device) where every element has the range [lo, hi]. */
void deft_index_check_init(deft_index_check_t *c, const deft_tensor_t *t, int64_t lo, int64_t hi);

/* 0 when every element of c->indices (the tensor t) passes; else -1 with
 * "operator 'op': input `input` (`name`) has v at position j, expected a
 * whole number in [lo, hi]" (IndexError when only the range is wrong). */
int deft_check_indices(const deft_op_t *op, int input, const deft_tensor_t *t,
                       const deft_index_check_t *c);

/* -1 naming the operator and input when `dtype` cannot hold indices. */
int deft_op_check_index_dtype(const deft_op_t *op, int input, deft_dtype_t dtype);

#endif
