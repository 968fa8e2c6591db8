/* How the kernels in core/gpu launch: blocks of kThreads threads, each
 * thread striding over the elements, the grid capped at CUDA's limit. */
#ifndef DEFT_CORE_GPU_LAUNCH_CUH
#define DEFT_CORE_GPU_LAUNCH_CUH

#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int64_t kBusyBlocks = 1024; /* blocks that keep every multiprocessor busy */

inline int64_t ceil_div(int64_t n, int64_t d) {
    return (n + d - 1) / d;
}

/* A grid of `blocks` blocks, at least one and at most CUDA's limit. */
inline int grid_of(int64_t blocks) {
    return (int)(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

/* Blocks for n elements, a thread each. */
inline int blocks_for(int64_t n) {
    return grid_of(ceil_div(n, kThreads));
}

/* Lanes of a warp (a power of two up to 32) for a line of n elements,
 * enough for `per` elements each: fewer lanes, fewer shuffles. */
inline int lanes_for(int64_t n, int per = 8) {
    int lanes = 1;
    while (lanes < kWarp && lanes * per < n) lanes *= 2;
    return lanes;
}

/* log2 of a power of two: teams of threads are, so a thread finds its
 * team by a shift (a 64-bit division costs a GPU about 70 instructions). */
__device__ inline int log2_of(int power_of_two) {
    return __ffs(power_of_two) - 1;
}

/* The mask of this thread's group of `lanes` lanes within its warp. */
__device__ inline unsigned group_mask(int lanes) {
    return lanes == kWarp ? ~0u : ((1u << lanes) - 1) << (threadIdx.x % kWarp / lanes * lanes);
}

} // namespace

#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
