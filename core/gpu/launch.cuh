/* How the kernels in core/gpu launch: blocks of kThreads threads, each
 * thread striding over the elements, the grid capped at CUDA's limit. */
#ifndef DEFT_CORE_GPU_LAUNCH_CUH
#define DEFT_CORE_GPU_LAUNCH_CUH

#include <stdint.h>

namespace {

constexpr int kThreads = 256;

/* A grid of `blocks` blocks, at least one and at most CUDA's limit. */
inline int grid_of(int64_t blocks) {
    return (int)(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

/* Blocks for n elements, a thread each. */
inline int blocks_for(int64_t n) {
    return grid_of((n + kThreads - 1) / kThreads);
}

} // namespace

#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
