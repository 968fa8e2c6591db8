/*
 * float16 and bfloat16 arithmetic through the float32 kernels: each row of
 * the iteration is widened to float32 in blocks, computed by the float32
 * inner loop, and rounded back (to nearest even), so a half operator gives
 * exactly the float32 result rounded once, as NumPy's float16 ufuncs do.
 */
#ifndef DEFT_CORE_HALF_COMPUTE_H
#define DEFT_CORE_HALF_COMPUTE_H

#include "core/op/strided.h"

/* n elements, `stride` apart in the half array, to and from dense float32
 * (bf16: bfloat16, else float16); narrowing rounds to nearest even. */
void deft_half_widen(const uint16_t *src, int64_t stride, bool bf16, float *dst, int64_t n);
void deft_half_narrow(const float *src, bool bf16, uint16_t *dst, int64_t stride, int64_t n);

/* Run `f32` (a float32 inner loop, given `ctx`) over a planned iteration whose
 * operands are all of `dtype` (float16 or bfloat16); operand 0 is written. */
void deft_half_run(deft_strided_t *it, deft_inner_fn f32, const void *ctx, deft_dtype_t dtype);

/* The same over n elements, each operand dense (stride 1) or one value (stride 0),
 * as deft_flat_run. */
void deft_half_run_flat(deft_inner_fn f32, const void *ctx, int nops, char *const *ptrs,
                        const int64_t *strides, deft_dtype_t dtype, int64_t n);

#endif
