/*
 * bfloat16 matrix products with AVX512-BF16, or AMX where the CPU has it
 * (gemm_bf16.c): float32 accumulation, the result rounded to bfloat16 once.
 */
#ifndef DEFT_CORE_OP_GEMM_BF16_H
#define DEFT_CORE_OP_GEMM_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this CPU runs deft_gemm_bf16 (AVX512-BF16 and -BW, and the SIMD
 * variants not turned off by deft_simd_enable). */
bool deft_gemm_bf16_available(void);

/* Whether deft_gemm_bf16 multiplies with AMX tiles (products of 16 rows or
 * more): the CPU has AMX-BF16, Linux lent the tile registers, and
 * deft_gemm_bf16_use_amx has not turned them off. */
bool deft_gemm_bf16_amx(void);

/* Let deft_gemm_bf16 use AMX where it can (the default), or keep to
 * AVX512-BF16 (tests run both). */
void deft_gemm_bf16_use_amx(bool on);

/* C (m x n) = op(A) op(B) + beta C, row-major and dense, bfloat16, on the CPU;
 * only where deft_gemm_bf16_available(). -1 when scratch memory ran out. */
int deft_gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                   const uint16_t *b, double beta, uint16_t *c);

#endif
