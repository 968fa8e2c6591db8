/*
 * bfloat16 matrix products with AVX512-BF16 (gemm_bf16.c): float32
 * accumulation, the result rounded to bfloat16 once.
 */
#ifndef DEFT_CORE_OP_GEMM_BF16_H
#define DEFT_CORE_OP_GEMM_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this CPU runs deft_gemm_bf16 (AVX512-BF16 and -BW, and the SIMD
 * variants not turned off by deft_simd_enable). */
bool deft_gemm_bf16_available(void);

/* C (m x n) = op(A) op(B) + beta C, row-major and dense, bfloat16, on the CPU;
 * only where deft_gemm_bf16_available(). -1 when scratch memory ran out. */
int deft_gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                   const uint16_t *b, double beta, uint16_t *c);

#endif
