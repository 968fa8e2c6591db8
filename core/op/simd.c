/* The run-time SIMD choice (simd.h). */
#include "core/op/simd.h"

#include <stdatomic.h>

#if DEFT_SIMD_X86
#include <cpuid.h>
#endif

/* -1: not asked yet; else the level the variants run at. */
static atomic_int level = -1;

static deft_simd_level_t cpu_level(void) {
#if DEFT_SIMD_X86
    /* the kernels' target (simd_vec.h) lets the compiler use BW, VL and DQ
     * instructions too (mask moves: kmovb is DQ's); every AVX-512 CPU but
     * Xeon Phi has all four */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return DEFT_SIMD_AVX512;
    unsigned a, b, c, d; /* clang's __builtin_cpu_supports does not know "f16c" */
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        return DEFT_SIMD_AVX2;
#endif
    return DEFT_SIMD_BASELINE;
}

deft_simd_level_t deft_simd_level(void) {
    int on = atomic_load_explicit(&level, memory_order_relaxed);
    if (on < 0) atomic_store_explicit(&level, on = (int)cpu_level(), memory_order_relaxed);
    return (deft_simd_level_t)on;
}

deft_simd_level_t deft_simd_cap(deft_simd_level_t most) {
    deft_simd_level_t cpu = cpu_level(), now = most < cpu ? most : cpu;
    atomic_store(&level, (int)now);
    return now;
}
