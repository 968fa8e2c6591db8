/* pool_vec_t.h's kernels at 8 lanes (AVX2). */
#include "core/op/simd.h"

#if DEFT_SIMD_X86
#define VEC_LANES 8
#include "core/op/pool_vec_t.h"
#endif
