/*
 * Index arithmetic of pick, gather_nd and scatter_nd (and their gradients),
 * written once for the CPU kernels (core/op/gather.c) and the GPU kernels
 * (core/op/gather.cu), like scalar_math.h. On the CPU indices are checked
 * before any kernel runs (index_check.h); on a GPU the check's verdict comes
 * later (core/base/device_check.h), so the arithmetic here clips what it
 * reads into range and the kernels stay in bounds whatever the indices.
 */
#ifndef DEFT_CORE_GATHER_MATH_H
#define DEFT_CORE_GATHER_MATH_H

#include <stddef.h>

#include "core/base/shape.h"
#include "core/math/device_fn.h"
#include "core/math/dtype_math.h"
#include "core/math/index_math.h"

/* Copy element j of src to element i of dst, elements of `elem` bytes (1, 2, 4 or 8). */
DEFT_DEVICE_FN void deft_copy_element(void *dst, int64_t i, const void *src, int64_t j,
                                      size_t elem) {
    switch (elem) {
    case 1:
        ((uint8_t *)dst)[i] = ((const uint8_t *)src)[j];
        break;
    case 2:
        ((uint16_t *)dst)[i] = ((const uint16_t *)src)[j];
        break;
    case 4:
        ((uint32_t *)dst)[i] = ((const uint32_t *)src)[j];
        break;
    default:
        ((uint64_t *)dst)[i] = ((const uint64_t *)src)[j];
        break;
    }
}

/*
 * pick: data seen as (outer, size, inner), the index and the result as
 * (outer, inner); result[o, k] = data[o, index[o, k], k], the index
 * clipped or wrapped into [0, size). Its gradient writes back to the same
 * places, which distinct (o, k) never share, so it needs no atomics.
 */
typedef struct deft_pick_plan {
    const void *src; /* data (forward) or the result's gradient (backward) */
    void *dst;       /* the result (forward) or data's gradient (backward) */
    deft_dtype_t dtype;
    const void *index;
    deft_dtype_t index_dtype;
    int64_t outer, size, inner;
    int mode; /* DEFT_TAKE_CLIP or DEFT_TAKE_WRAP */
} deft_pick_plan_t;

/* The offset in data of the element that result element `at` picks (size > 0). */
DEFT_DEVICE_FN int64_t deft_pick_source(const deft_pick_plan_t *p, int64_t at) {
    int64_t o = at / p->inner, k = at % p->inner;
    int64_t i = deft_take_resolve(deft_index_at(p->index, p->index_dtype, at), p->size, p->mode);
    return (o * p->size + i) * p->inner + k;
}

/*
 * gather_nd and scatter_nd: indices of shape (m, n) address the first m
 * axes of the big array (gathered from, or scattered into), whose other
 * axes make slices of `slice` elements; column i of the indices names
 * slice i of the small array. Negative indices count from the end.
 */
typedef struct deft_nd_plan {
    const void *src;
    void *dst;
    deft_dtype_t dtype;
    const void *index;
    deft_dtype_t index_dtype;
    int m;
    int64_t n, slice;
    int64_t dims[DEFT_SHAPE_MAX_NDIM];    /* the big array's first m axes */
    int64_t strides[DEFT_SHAPE_MAX_NDIM]; /* their strides, in elements */
    int64_t big;                          /* elements of the big array */
} deft_nd_plan_t;

/* The offset in the big array of the slice that index column i names, or
 * -1 when an addressed axis is empty. An index out of range (which only a
 * GPU kernel, checked afterwards, can see) is clipped into its axis. */
DEFT_DEVICE_FN int64_t deft_nd_offset(const deft_nd_plan_t *p, int64_t i) {
    int64_t offset = 0;
    for (int r = 0; r < p->m; r++) {
        if (p->dims[r] == 0) return -1;
        int64_t v = deft_index_at(p->index, p->index_dtype, r * p->n + i);
        if (v < 0) v += p->dims[r];
        v = v < 0 ? 0 : v >= p->dims[r] ? p->dims[r] - 1 : v;
        offset += v * p->strides[r];
    }
    return offset;
}

/* What a gather_nd-style kernel does with slice i. */
enum { DEFT_ND_GATHER, DEFT_ND_SCATTER, DEFT_ND_SCATTER_ADD };

#ifdef __cplusplus
extern "C" {
#endif
/* GPU launchers (core/op/gather.cu), queued on the device's stream; -1 with an error. */
int deft_gpu_pick(int dev, const deft_pick_plan_t *p, bool backward);
int deft_gpu_nd(int dev, const deft_nd_plan_t *p, int mode);
#ifdef __cplusplus
}
#endif

#endif
