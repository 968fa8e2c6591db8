/* pool_vec_t.h's kernels at 16 lanes (AVX-512). */
#include "core/op/simd.h"

#if DEFT_SIMD_X86
#define VEC_LANES 16
#include "core/op/pool_vec_t.h"
#endif
