/*
 * The arithmetic of LRN and its gradient (core/op/lrn.c), shared by the CPU
 * kernel and the GPU one (core/op/lrn.cu) like softmax_math.h: each output
 * element is a sum over its channel's window, computed on its own.
 */
#ifndef DEFT_CORE_LRN_MATH_H
#define DEFT_CORE_LRN_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"
#include "core/math/norm_math.h"

typedef struct deft_lrn_call {
    deft_norm_plan_t lines; /* one per (sample, position), across the channels */
    deft_dtype_t dtype;
    int64_t half;               /* nsize / 2 */
    double salpha, beta, knorm; /* salpha = alpha / nsize */
    const void *x, *g;          /* g: backward's output gradient, else NULL */
    void *y, *norm;             /* backward: y is d data, norm is read */
} deft_lrn_call_t;

/* Channel ch's window [*lo, *hi] among n. */
DEFT_DEVICE_FN void deft_lrn_window(int64_t ch, int64_t n, int64_t half, int64_t *lo, int64_t *hi) {
    *lo = ch - half > 0 ? ch - half : 0;
    *hi = ch + half < n - 1 ? ch + half : n - 1;
}

/* Channel ch of line j: tmp_norm and the output. */
DEFT_DEVICE_FN void deft_lrn_forward_at(const deft_lrn_call_t *c, deft_dtype_t dtype, int64_t j,
                                        int64_t ch) {
    int64_t start = deft_norm_start(&c->lines, j), step = c->lines.stride, lo, hi;
    double squares = 0;
    deft_lrn_window(ch, c->lines.na, c->half, &lo, &hi);
    for (int64_t k = lo; k <= hi; k++) {
        double v = deft_load_double(c->x, dtype, start + k * step);
        squares += v * v;
    }
    double norm = c->knorm + c->salpha * squares;
    int64_t i = start + ch * step;
    deft_store_double(c->norm, dtype, i, norm);
    deft_store_double(c->y, dtype, i, deft_load_double(c->x, dtype, i) * pow(norm, -c->beta));
}

/* Channel ch of line j: the gradient of data. */
DEFT_DEVICE_FN void deft_lrn_backward_at(const deft_lrn_call_t *c, deft_dtype_t dtype, int64_t j,
                                         int64_t ch) {
    int64_t start = deft_norm_start(&c->lines, j), step = c->lines.stride, lo, hi;
    double terms = 0; /* sum of g x tmp_norm^(-beta - 1) over the window */
    deft_lrn_window(ch, c->lines.na, c->half, &lo, &hi);
    for (int64_t k = lo; k <= hi; k++) {
        int64_t i = start + k * step;
        terms += deft_load_double(c->g, dtype, i) * deft_load_double(c->x, dtype, i) *
                 pow(deft_load_double(c->norm, dtype, i), -c->beta - 1);
    }
    int64_t i = start + ch * step;
    double x = deft_load_double(c->x, dtype, i), g = deft_load_double(c->g, dtype, i);
    double norm = deft_load_double(c->norm, dtype, i);
    deft_store_double(c->y, dtype, i,
                      g * pow(norm, -c->beta) - 2 * c->beta * c->salpha * x * terms);
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* LRN (c->g NULL) or its gradient on GPU `dev`: a thread per element. */
int deft_gpu_lrn(int dev, const deft_lrn_call_t *c);
#ifdef __cplusplus
}
#endif
#endif

#endif
