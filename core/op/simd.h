/*
 * Run-time choice of SIMD kernels. Kernels with an AVX-512 variant (compiled
 * with a target attribute, never -march) ask deft_simd_avx512() which one to
 * run; tests turn the variants off to cover the baseline code as well.
 */
#ifndef DEFT_CORE_OP_SIMD_H
#define DEFT_CORE_OP_SIMD_H

#include <stdbool.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DEFT_SIMD_X86 1
#else
#define DEFT_SIMD_X86 0
#endif

/* Whether the CPU has AVX-512F and the variants are enabled (one load). */
bool deft_simd_avx512(void);

/* Tests: false runs every kernel's baseline variant, true restores the default. */
void deft_simd_enable(bool on);

#endif
