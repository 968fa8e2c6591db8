/*
 * The arithmetic of _linalg_gemm and _linalg_gemm2 (core/op/linalg_gemm.c),
 * shared by the CPU kernel and the GPU one (core/op/linalg_gemm.cu) like
 * softmax_math.h: each output element a dot product accumulated in double.
 * The matrices' rows lie along `axis`, their columns along the last axis,
 * every other axis is a batch axis; all operands are contiguous.
 */
#ifndef DEFT_CORE_GEMM_MATH_H
#define DEFT_CORE_GEMM_MATH_H

#include "core/base/shape.h"
#include "core/math/device_fn.h"
#include "core/math/dtype_math.h"

/* An operand's dims, and the distance between its matrices' rows. */
typedef struct deft_gemm_layout {
    int64_t dims[DEFT_SHAPE_MAX_NDIM];
    int64_t row_stride;
} deft_gemm_layout_t;

/* y = alpha op(a) op(b) (+ beta c, c laid out as y, when c is not NULL). */
typedef struct deft_gemm_plan {
    deft_dtype_t dtype;
    int ndim, axis;
    bool ta, tb;
    double alpha, beta;
    int64_t m, n, k; /* y's matrices are m x n, summed over k */
    deft_gemm_layout_t la, lb, ly;
    const void *a, *b, *c;
    void *y;
} deft_gemm_plan_t;

/* The offset of batch `index` (over the axes other than axis and the last). */
DEFT_DEVICE_FN int64_t deft_gemm_batch_offset(const deft_gemm_plan_t *g,
                                              const deft_gemm_layout_t *l, int64_t index) {
    int64_t stride = l->dims[g->ndim - 1], offset = 0;
    for (int d = g->ndim - 2; d >= 0; d--) {
        if (d != g->axis) {
            offset += index % l->dims[d] * stride;
            index /= l->dims[d];
        }
        stride *= l->dims[d];
    }
    return offset;
}

/* Element (i, j) of op(X) for X laid out as l, at batch offset `base`. */
DEFT_DEVICE_FN double deft_gemm_matrix_at(const void *x, deft_dtype_t dtype,
                                          const deft_gemm_layout_t *l, int64_t base, bool t,
                                          int64_t i, int64_t j) {
    int64_t r = t ? j : i, c = t ? i : j;
    return deft_load_double(x, dtype, base + r * l->row_stride + c);
}

/* y's element (i, j) in the batch at offsets ba, bb and by of a, b and y. */
DEFT_DEVICE_FN void deft_gemm_element(const deft_gemm_plan_t *g, int64_t ba, int64_t bb, int64_t by,
                                      int64_t i, int64_t j) {
    double sum = 0;
    for (int64_t k = 0; k < g->k; k++)
        sum += deft_gemm_matrix_at(g->a, g->dtype, &g->la, ba, g->ta, i, k) *
               deft_gemm_matrix_at(g->b, g->dtype, &g->lb, bb, g->tb, k, j);
    double v = g->alpha * sum;
    int64_t at = by + i * g->ly.row_stride + j;
    if (g->c) v += g->beta * deft_load_double(g->c, g->dtype, at);
    deft_store_double(g->y, g->dtype, at, v);
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* The product on GPU `dev`, a thread per element of y's `count` elements. */
int deft_gpu_linalg_gemm(int dev, const deft_gemm_plan_t *g, int64_t count);
#ifdef __cplusplus
}
#endif
#endif

#endif
