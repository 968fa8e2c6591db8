/* The run-time SIMD choice (simd.h). */
#include "core/op/simd.h"

#include <stdatomic.h>

/* -1: not asked yet; else whether AVX-512 variants run. */
static atomic_int avx512 = -1;

static bool cpu_has_avx512(void) {
#if DEFT_SIMD_X86
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

bool deft_simd_avx512(void) {
    int on = atomic_load_explicit(&avx512, memory_order_relaxed);
    if (on < 0) atomic_store_explicit(&avx512, on = cpu_has_avx512(), memory_order_relaxed);
    return on;
}

void deft_simd_enable(bool on) {
    atomic_store(&avx512, on && cpu_has_avx512());
}
