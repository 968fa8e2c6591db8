/*
 * The ordering of topk, sort and argsort, and how a sorted row is written
 * out (core/op/sort.c), shared by the CPU kernel (a stable merge sort) and
 * the GPU one (core/op/sort.cu, a bitonic sort that breaks ties by position,
 * which orders every row exactly as the stable sort does) like softmax_math.h.
 */
#ifndef DEFT_CORE_SORT_MATH_H
#define DEFT_CORE_SORT_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"
#include "core/math/gather_math.h"

/* A call: data seen as (outer, n, inner), the first k of each sorted row
 * (o, i) written as values, indices and a mask, whichever are not NULL. */
typedef struct deft_sort_call {
    int64_t outer, n, inner, k;
    bool ascend;
    deft_dtype_t dtype, index_dtype;
    size_t elem; /* bytes of an element of x */
    const void *x;
    void *values, *indices, *mask; /* the mask is zero where nothing is written */
} deft_sort_call_t;

/* -1, 0 or 1 as x[a] is below, equal to or above x[b]; NaN above every number. */
DEFT_DEVICE_FN int deft_sort_compare(const deft_sort_call_t *c, int64_t a, int64_t b) {
    if (c->dtype == DEFT_DT_INT64) { /* beyond double's exact integers */
        int64_t x = ((const int64_t *)c->x)[a], y = ((const int64_t *)c->x)[b];
        return (x > y) - (x < y);
    }
    double x = deft_load_double(c->x, c->dtype, a), y = deft_load_double(c->x, c->dtype, b);
    if (x != x || y != y) return (x != x) - (y != y);
    return (x > y) - (x < y);
}

/* The offset of element 0 of row `row` (rows ordered (o, i)). */
DEFT_DEVICE_FN int64_t deft_sort_row_base(const deft_sort_call_t *c, int64_t row) {
    return row / c->inner * c->n * c->inner + row % c->inner;
}

/* Rank r (< k) of row `row` is the element at offset pos: write its value,
 * its index along the axis and its mark in the mask. */
DEFT_DEVICE_FN void deft_sort_emit(const deft_sort_call_t *c, int64_t row, int64_t r, int64_t pos) {
    int64_t o = row / c->inner, i = row % c->inner, base = deft_sort_row_base(c, row);
    int64_t at = (o * c->k + r) * c->inner + i; /* in the selected shape */
    if (c->values) deft_copy_element(c->values, at, c->x, pos, c->elem);
    if (c->indices)
        deft_store_double(c->indices, c->index_dtype, at, (double)((pos - base) / c->inner));
    if (c->mask) deft_store_double(c->mask, c->dtype, pos, 1);
}

/* _backward_topk of row `row` (the call's shapes, dtype and elem): dx at the
 * places indices name gets the gradient g of the values, ranks in order
 * (so the last of repeated indices wins). */
DEFT_DEVICE_FN void deft_topk_unsort_row(const deft_sort_call_t *c, int64_t row, const void *g,
                                         const void *indices, deft_dtype_t index_dtype, void *dx) {
    int64_t o = row / c->inner, i = row % c->inner, base = deft_sort_row_base(c, row);
    for (int64_t r = 0; r < c->k; r++) {
        int64_t at = (o * c->k + r) * c->inner + i;
        int64_t j = deft_index_at(indices, index_dtype, at);
        if (j < 0 || j >= c->n) continue; /* only a GPU, checked afterwards, meets one */
        deft_copy_element(dx, base + j * c->inner, g, at, c->elem);
    }
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* The longest row the GPU sorts: a block sorts a row in shared memory. */
#define DEFT_GPU_SORT_MAX 2048
/* A sort on GPU `dev` (rows of at most DEFT_GPU_SORT_MAX; the mask already zeroed). */
int deft_gpu_sort(int dev, const deft_sort_call_t *c);
/* _backward_topk on GPU `dev`: dx (zeroed) gets g at the indices, a thread per row. */
int deft_gpu_topk_backward(int dev, const deft_sort_call_t *c, const void *g, const void *indices,
                           deft_dtype_t index_dtype, void *dx);
#ifdef __cplusplus
}
#endif
#endif

#endif
