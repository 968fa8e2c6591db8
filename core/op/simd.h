/*
 * Run-time choice of SIMD kernels. Kernels with AVX2 or AVX-512 variants
 * (compiled with target attributes, never -march) ask which level runs;
 * tests cap the level to cover every variant below the CPU's, the baseline
 * (x86-64's SSE2) included.
 */
#ifndef DEFT_CORE_OP_SIMD_H
#define DEFT_CORE_OP_SIMD_H

#include <stdbool.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DEFT_SIMD_X86 1
#else
#define DEFT_SIMD_X86 0
#endif

/* Ordered: a level includes those below it. */
typedef enum deft_simd_level {
    DEFT_SIMD_BASELINE, /* what the compiler's target gives every x86-64 (or any CPU) */
    DEFT_SIMD_AVX2,     /* AVX2, FMA and F16C (cpuid checks all three) */
    DEFT_SIMD_AVX512,   /* AVX-512 F, BW, VL and DQ */
} deft_simd_level_t;

/* The level the variants run at: the CPU's, capped by deft_simd_cap (one load). */
deft_simd_level_t deft_simd_level(void);

static inline bool deft_simd_avx512(void) {
    return deft_simd_level() >= DEFT_SIMD_AVX512;
}

static inline bool deft_simd_avx2(void) {
    return deft_simd_level() >= DEFT_SIMD_AVX2;
}

/* Tests: run the variants of at most `most` (the CPU's level when it is
 * lower); DEFT_SIMD_AVX512 restores the default. Returns the level now run. */
deft_simd_level_t deft_simd_cap(deft_simd_level_t most);

#endif
