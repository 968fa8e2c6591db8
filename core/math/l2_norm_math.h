/*
 * The arithmetic of L2Normalization and its gradient (core/op/l2_normalization.c),
 * shared by the CPU kernel and the GPU one (core/op/norm_slices.cu) like
 * softmax_math.h. Slices are norm_math.h's plans; each slice's sum (of x^2,
 * or of g * y for the gradient) is taken by the caller, then every element
 * is finished on its own.
 */
#ifndef DEFT_CORE_L2_NORM_MATH_H
#define DEFT_CORE_L2_NORM_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"
#include "core/math/norm_math.h"

typedef struct deft_l2_call {
    deft_norm_plan_t plan;
    deft_dtype_t dtype;
    double eps;
    const void *x, *g; /* g: the backward's output gradient, else NULL; backward: x is the result */
    void *y, *norm;    /* backward: y is d data (it may be g itself), norm is read */
} deft_l2_call_t;

/* The term of element i in its slice's sum: x^2 forward, g * y backward. */
DEFT_DEVICE_FN double deft_l2_term(const deft_l2_call_t *c, deft_dtype_t dtype, int64_t i) {
    double x = deft_load_double(c->x, dtype, i);
    return x * (c->g ? deft_load_double(c->g, dtype, i) : x);
}

/* The forward's norm of a slice whose sum of squares is `squares`, written out as slice j's. */
DEFT_DEVICE_FN double deft_l2_norm(const deft_l2_call_t *c, deft_dtype_t dtype, int64_t j,
                                   double squares) {
    double norm = sqrt(squares + c->eps);
    deft_store_double(c->norm, dtype, j, norm);
    return norm;
}

/* Element i of a slice with that norm (and, backward, that sum of g * y):
 * y = x / norm forward; d data = (g - y * dot) / norm backward. */
DEFT_DEVICE_FN void deft_l2_finish(const deft_l2_call_t *c, deft_dtype_t dtype, int64_t i,
                                   double norm, double dot) {
    double x = deft_load_double(c->x, dtype, i);
    double v = c->g ? (deft_load_double(c->g, dtype, i) - x * dot) / norm : x / norm;
    deft_store_double(c->y, dtype, i, v);
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* L2Normalization (c->g NULL) or its gradient on GPU `dev`: a block per slice. */
int deft_gpu_l2_normalization(int dev, const deft_l2_call_t *c);
#ifdef __cplusplus
}
#endif
#endif

#endif
