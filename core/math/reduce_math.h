/*
 * The arithmetic of reductions, shared by the CPU and GPU kernels like
 * scalar_math.h: partial results, how two merge, and how a finished one is
 * stored. Partials carry the index of the element they chose, and merging
 * prefers the lower index among equals (and among NaNs), so the result
 * does not depend on the order partials meet: the CPU merges spans in
 * order, the GPU in a tree, and both give NumPy's first maximum.
 */
#ifndef DEFT_CORE_REDUCE_MATH_H
#define DEFT_CORE_REDUCE_MATH_H

#include "core/math/device_fn.h"
#include "core/math/dtype_math.h"

typedef enum deft_reduce_kind {
    DEFT_R_SUM,
    DEFT_R_MEAN,
    DEFT_R_PROD,
    DEFT_R_MAX,
    DEFT_R_MIN,
    DEFT_R_NORM,
    DEFT_R_NORM1,
    DEFT_R_ARGMAX,
    DEFT_R_ARGMIN,
    DEFT_R_NANSUM, /* sum and prod that skip NaN (as if it were 0, or 1) */
    DEFT_R_NANPROD
} deft_reduce_kind_t;

/* Partial result of some elements: a float value (floats accumulate in
 * double), an integer value (integers wrap in 64 bits), and an index. */
typedef struct deft_partial {
    double f;
    uint64_t u;
    int64_t index;
    int64_t count;
} deft_partial_t;

DEFT_DEVICE_FN deft_partial_t deft_reduce_identity(deft_reduce_kind_t kind) {
    deft_partial_t p = {0, 0, -1, 0};
    if (kind == DEFT_R_PROD || kind == DEFT_R_NANPROD) p.f = 1, p.u = 1;
    return p;
}

/* The partial of the one element at `index` (value f for floats, u for integers). */
DEFT_DEVICE_FN deft_partial_t deft_reduce_element(deft_reduce_kind_t kind, double f, uint64_t u,
                                                  int64_t index) {
    deft_partial_t p = {f, u, index, 1};
    if (kind == DEFT_R_NORM) p.f = f * f;
    if (kind == DEFT_R_NORM1) p.f = f < 0 ? -f : f;
    if (f != f && kind == DEFT_R_NANSUM) p.f = 0;
    if (f != f && kind == DEFT_R_NANPROD) p.f = 1;
    return p;
}

/* Whether b's choice beats a's for max, min and their arg forms. */
DEFT_DEVICE_FN bool deft_reduce_takes(deft_reduce_kind_t kind, bool is_float,
                                      const deft_partial_t *a, const deft_partial_t *b) {
    bool big = kind == DEFT_R_MAX || kind == DEFT_R_ARGMAX, earlier = b->index < a->index;
    if (is_float) {
        bool a_nan = a->f != a->f, b_nan = b->f != b->f;
        if (a_nan || b_nan) return b_nan && (!a_nan || earlier); /* the first NaN wins */
        return big ? b->f > a->f || (b->f == a->f && earlier)
                   : b->f < a->f || (b->f == a->f && earlier);
    }
    int64_t x = (int64_t)a->u, y = (int64_t)b->u;
    return big ? y > x || (y == x && earlier) : y < x || (y == x && earlier);
}

/* Merge partial b into a. */
DEFT_DEVICE_FN void deft_reduce_combine(deft_reduce_kind_t kind, bool is_float, deft_partial_t *a,
                                        const deft_partial_t *b) {
    if (b->count == 0) return;
    if (a->count == 0) {
        *a = *b;
        return;
    }
    switch (kind) {
    case DEFT_R_SUM:
    case DEFT_R_MEAN:
    case DEFT_R_NORM:
    case DEFT_R_NORM1:
    case DEFT_R_NANSUM:
        a->f += b->f, a->u += b->u;
        break;
    case DEFT_R_PROD:
    case DEFT_R_NANPROD:
        a->f *= b->f, a->u *= b->u;
        break;
    default:
        if (deft_reduce_takes(kind, is_float, a, b)) a->f = b->f, a->u = b->u, a->index = b->index;
    }
    a->count += b->count;
}

/* Store the finished result of `span` elements as element o of `data`, in
 * the input's dtype: the arg forms too, whose indices MXNet 1.x gives as
 * values of the input's dtype (float32 for float32 data). */
DEFT_DEVICE_FN void deft_reduce_store(deft_reduce_kind_t kind, const deft_partial_t *p,
                                      int64_t span, void *data, int64_t o, deft_dtype_t in_dtype) {
    if (kind == DEFT_R_ARGMAX || kind == DEFT_R_ARGMIN) {
        deft_store_double(data, in_dtype, o, (double)p->index);
        return;
    }
    switch (in_dtype) { /* integers wrap into the dtype */
    case DEFT_DT_INT32:
        ((int32_t *)data)[o] = (int32_t)(uint32_t)p->u;
        return;
    case DEFT_DT_INT64:
        ((int64_t *)data)[o] = (int64_t)p->u;
        return;
    case DEFT_DT_UINT8:
        ((uint8_t *)data)[o] = (uint8_t)p->u;
        return;
    case DEFT_DT_BOOL:
        ((uint8_t *)data)[o] = p->u != 0;
        return;
    default:
        break;
    }
    double v = kind == DEFT_R_MEAN ? p->f / (double)span : kind == DEFT_R_NORM ? sqrt(p->f) : p->f;
    deft_store_double(data, in_dtype, o, v);
}

#endif
