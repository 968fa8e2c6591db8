/*
 * The running sums of _np_cumsum and its gradient, shared by the CPU kernel
 * (core/op/cumsum.c) and the GPU kernel (core/op/cumsum.cu). The array is
 * seen as (outer, middle, trailing) with the summed axis in the middle; the
 * sums run in place over an array that already holds the input in the
 * result's dtype, so they accumulate in that dtype, as MXNet's do.
 */
#ifndef DEFT_CORE_CUMSUM_MATH_H
#define DEFT_CORE_CUMSUM_MATH_H

#include "core/math/dtype_math.h"

typedef struct deft_cumsum_plan {
    void *data; /* summed in place */
    deft_dtype_t dtype;
    int64_t outer, middle, trailing;
    bool reverse; /* sums from the end of the axis (the gradient) */
} deft_cumsum_plan_t;

/* Additions as the dtype does them: integers wrap (through unsigned),
 * float16 rounds each sum to half as MXNet's half_t does. */
#define DEFT_CUMSUM_ADD(a, b)      ((a) + (b))
#define DEFT_CUMSUM_ADD_HALF(a, b) deft_float_to_half(deft_half_to_float(a) + deft_half_to_float(b))
#define DEFT_CUMSUM_WRAP_U8(a, b)  ((uint8_t)((unsigned)(a) + (unsigned)(b)))
#define DEFT_CUMSUM_WRAP_U32(a, b) ((uint32_t)(a) + (uint32_t)(b))
#define DEFT_CUMSUM_WRAP_U64(a, b) ((uint64_t)(a) + (uint64_t)(b))

/* Each step adds the row before it (after it, reversed) to a row of columns [c0, c1). */
#define DEFT_CUMSUM_ROWS(T, ADD)                                                                   \
    do {                                                                                           \
        T *x = (T *)p->data + o * p->middle * p->trailing;                                         \
        for (int64_t step = 1; step < p->middle; step++) {                                         \
            int64_t j = p->reverse ? p->middle - 1 - step : step;                                  \
            T *row = x + j * p->trailing;                                                          \
            const T *prev = row + (p->reverse ? p->trailing : -p->trailing);                       \
            for (int64_t c = c0; c < c1; c++) row[c] = (T)ADD(prev[c], row[c]);                    \
        }                                                                                          \
    } while (0)

/* The running sums of block o (of outer) over columns [c0, c1) of trailing. */
DEFT_DEVICE_FN void deft_cumsum_rows(const deft_cumsum_plan_t *p, int64_t o, int64_t c0,
                                     int64_t c1) {
    switch (p->dtype) {
    case DEFT_DT_FLOAT32:
        DEFT_CUMSUM_ROWS(float, DEFT_CUMSUM_ADD);
        break;
    case DEFT_DT_FLOAT64:
        DEFT_CUMSUM_ROWS(double, DEFT_CUMSUM_ADD);
        break;
    case DEFT_DT_FLOAT16:
        DEFT_CUMSUM_ROWS(uint16_t, DEFT_CUMSUM_ADD_HALF);
        break;
    case DEFT_DT_INT8:
        DEFT_CUMSUM_ROWS(int8_t, DEFT_CUMSUM_WRAP_U8);
        break;
    case DEFT_DT_UINT8:
        DEFT_CUMSUM_ROWS(uint8_t, DEFT_CUMSUM_WRAP_U8);
        break;
    case DEFT_DT_INT32:
        DEFT_CUMSUM_ROWS(int32_t, DEFT_CUMSUM_WRAP_U32);
        break;
    default: /* int64: the operator accepts no other dtype */
        DEFT_CUMSUM_ROWS(int64_t, DEFT_CUMSUM_WRAP_U64);
        break;
    }
}

/* Queue a plan's sums on GPU `dev` (core/op/cumsum.cu): a thread per column. */
#ifdef __cplusplus
extern "C" {
#endif
int deft_gpu_cumsum(int dev, const deft_cumsum_plan_t *p);
#ifdef __cplusplus
}
#endif

#endif
