/*
 * What the operator families share to run on a GPU: plans built by the
 * CPU code (strided.h) handed to the GPU launchers (core/gpu/kernels.h).
 * Compiled only with CUDA; families refer to these inside their
 * DEFT_HAVE_CUDA sections and name their GPU kernels with DEFT_GPU.
 */
#ifndef DEFT_CORE_GPU_OPS_H
#define DEFT_CORE_GPU_OPS_H

#include "core/base/tensor.h"
#include "core/gpu/kernels.h"
#include "core/op/op.h"
#include "core/op/strided.h"

/* out = fn(in[0], ...) (nin < DEFT_STRIDED_MAX_OPS) with each input broadcast to out's shape; a
 * NULL input is the value scalars[1 + i]; scalars is NULL or DEFT_GPU_MAX_OPS values. */
int deft_gpu_elementwise(deft_gpu_fn_t fn, const deft_tensor_t *out, int nin,
                         const deft_tensor_t *const *in, const double *scalars);

/* 0 when fn has a GPU kernel for dtype; else -1 with an error naming the
 * operator and the dtype, before anything is launched. */
int deft_gpu_check_map(const deft_op_t *op, deft_gpu_fn_t fn, deft_dtype_t dtype);

/* Run a planned iteration (operand 0 written) as fn on operand 0's GPU. */
int deft_gpu_run_strided(deft_strided_t *it, deft_gpu_fn_t fn, const deft_dtype_t *dtypes,
                         const double *scalars, int dev);

/* Element i of a tensor on a GPU, copied into `out` (8 bytes of room), to
 * name a bad value in an error the kernel found. */
int deft_gpu_read_element(const deft_tensor_t *t, int64_t i, void *out);

/* The layout of a reduction of x over the axes in `reduced` (bit d: axis d): kept
 * axes first, then reduced ones, with x's strides; outer and span counted. */
void deft_gpu_reduce_layout(const deft_shape_t *x, uint32_t reduced, deft_gpu_reduce_t *r);

/* The GPU a tensor lives on (its device id). */
static inline int deft_gpu_of(const deft_tensor_t *t) {
    return t->device.id;
}

#endif
