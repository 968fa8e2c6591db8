/*
 * Validation of index arrays (gather_nd and scatter_nd indices, pick's
 * index, sequence lengths, topk's indices): every element must be a whole
 * number within a range, and the range may differ between groups of
 * consecutive elements (row m of gather_nd's indices addresses axis m).
 * Written once for the CPU scan and the GPU check kernel, like scalar_math.h.
 */
#ifndef DEFT_CORE_INDEX_CHECK_H
#define DEFT_CORE_INDEX_CHECK_H

#include "core/base/device_check.h"
#include "core/base/shape.h"
#include "core/math/device_fn.h"
#include "core/math/dtype_math.h"

/* A bound that lets any whole number a double holds exactly through. */
#define DEFT_INDEX_UNBOUNDED 9007199254740992LL /* 2^53 */

typedef struct deft_index_check {
    const void *indices;
    deft_dtype_t dtype;
    int64_t count; /* elements */
    int64_t group; /* consecutive elements that share a range (>= 1) */
    /* the range of group g, both ends included: [lo[g], hi[g]] */
    int64_t lo[DEFT_SHAPE_MAX_NDIM], hi[DEFT_SHAPE_MAX_NDIM];
} deft_index_check_t;

/* Whether element j is a whole number in its group's range (NaN and infinities are not). */
DEFT_DEVICE_FN bool deft_index_ok(const deft_index_check_t *c, int64_t j) {
    double v = deft_load_double(c->indices, c->dtype, j);
    int64_t g = j / c->group;
    return v == floor(v) && v >= (double)c->lo[g] && v <= (double)c->hi[g];
}

/* dtypes an index input may have: MXNet passes float32; integers are welcome too. */
DEFT_DEVICE_FN bool deft_index_dtype_ok(deft_dtype_t dtype) {
    return dtype == DEFT_DT_FLOAT32 || dtype == DEFT_DT_FLOAT64 || dtype == DEFT_DT_INT32 ||
           dtype == DEFT_DT_INT64;
}

#ifdef __cplusplus
extern "C" {
#endif
/* The GPU scan (core/op/index_check.cu), a check on the device (flag.cuh):
 * 0 when it passed or is deferred, -1 with report's message when it failed. */
int deft_gpu_check_indices(int dev, const deft_index_check_t *c, const deft_check_report_t *report);
#ifdef __cplusplus
}
#endif

#endif
