/*
 * Index arithmetic of take and its gradient, shared by the CPU and GPU
 * kernels like scalar_math.h.
 */
#ifndef DEFT_CORE_INDEX_MATH_H
#define DEFT_CORE_INDEX_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"

/* take's modes for out-of-range indices (its `mode` parameter, in order). */
enum { DEFT_TAKE_CLIP, DEFT_TAKE_WRAP, DEFT_TAKE_RAISE };

/* Index j as an integer; float indices truncate, NaN reads as 0. */
DEFT_DEVICE_FN int64_t deft_index_at(const void *indices, deft_dtype_t dtype, int64_t j) {
    double raw = deft_load_double(indices, dtype, j);
    return raw != raw ? 0 : (int64_t)fmax(fmin(raw, 9e18), -9e18);
}

/* An index brought into [0, size) by clipping or wrapping (size > 0). */
DEFT_DEVICE_FN int64_t deft_take_resolve(int64_t i, int64_t size, int mode) {
    if (i >= 0 && i < size) return i;
    return mode == DEFT_TAKE_WRAP ? ((i % size) + size) % size : (i < 0 ? 0 : size - 1);
}

#endif
