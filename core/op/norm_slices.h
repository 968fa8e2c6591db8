/*
 * Normalisation over slices, on the CPU and the GPU: what BatchNorm
 * (batch_norm.c) and LayerNorm, InstanceNorm and GroupNorm (norm.c) share.
 * The plans and the arithmetic are described in core/math/norm_math.h.
 */
#ifndef DEFT_CORE_NORM_SLICES_H
#define DEFT_CORE_NORM_SLICES_H

#include "core/base/tensor.h"
#include "core/math/norm_math.h"
#include "core/op/op.h"

/* Data viewed as (outer, channels, inner) around `axis`. */
void deft_norm_split(const deft_shape_t *shape, int axis, int64_t *outer, int64_t *channels,
                     int64_t *inner);

/* BatchNorm: one slice per channel, gamma per channel. */
deft_norm_plan_t deft_norm_plan_channels(int64_t outer, int64_t channels, int64_t inner);
/* LayerNorm: one slice per line along the channel axis, gamma along the line. */
deft_norm_plan_t deft_norm_plan_lines(int64_t outer, int64_t channels, int64_t inner);
/* InstanceNorm, GroupNorm: `slices` contiguous blocks of `size`; block j takes
 * gamma element j % gq. */
deft_norm_plan_t deft_norm_plan_blocks(int64_t slices, int64_t size, int64_t gq);

/* Run a forward or backward call on the CPU, in parallel over slices. */
int deft_norm_forward_cpu(const deft_norm_forward_t *f);
int deft_norm_backward_cpu(const deft_norm_backward_t *b);

/* The same on GPU dev (norm_slices.cu): a block per slice. */
int deft_gpu_norm_forward(int dev, const deft_norm_forward_t *f);
int deft_gpu_norm_backward(int dev, const deft_norm_backward_t *b);

/* Inference of the backward operators: inputs (out_grad, data, gamma, mean,
 * stat), outputs the gradients of data, gamma and beta. The operator's
 * `data` is its forward operator, which shares its parameters. */
int deft_norm_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out);

/* The gradient call of an operator's backward node: the gradients of data,
 * gamma and beta from the output's and the hidden mean (output 1) and
 * statistic (output 2), given the parameters named in `keys` as they were. */
int deft_norm_gradient(deft_grad_builder_t *b, const char *backward_op, const char *const *keys,
                       deft_gref_t *in_grads);

/* Three outputs, as the normalisations have; the first one or all three visible. */
int deft_norm_three_outputs(const deft_param_value_t *p, int num_inputs);

/* A channel axis normalised against ndim, or -1 when out of range (infer names it). */
int deft_norm_axis(int64_t axis, int ndim);

/* infer_inputs of the normalisations: once data (input 0) is known, the unknown
 * inputs after it (gamma, beta, moving statistics) are (n,) of its dtype. */
void deft_norm_infer_params(int nin, deft_desc_t *in, bool *known, int64_t n);

/* Inputs (data, gamma, beta, ...): "input k (name) has shape s, expected (n,)". */
int deft_norm_check_param(const deft_op_t *op, const deft_desc_t *in, int k, int64_t n);

#endif
