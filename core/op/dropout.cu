/* Dropout's mask on a GPU: the same numbers as the CPU's (dropout.c). */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/dtype_math.h"
#include "core/math/philox.h"

#include <cuda_runtime_api.h>

namespace {

/* Element i: word i % 4 of block first + i / 4. */
__global__ void mask_kernel(void *mask, deft_dtype_t dtype, int64_t n, uint64_t seed,
                            uint64_t first, double keep) {
    GRID_STRIDE(i, n) {
        deft_philox_block_t block = deft_philox(seed, first + (uint64_t)(i / 4));
        deft_store_double(mask, dtype, i, deft_dropout_mask(block.v[i % 4], keep));
    }
}

} // namespace

extern "C" int deft_gpu_dropout_mask(int dev, void *mask, deft_dtype_t dtype, int64_t n,
                                     uint64_t seed, uint64_t first, double keep) {
    if (n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    mask_kernel<<<blocks_for(n), kThreads, 0, stream>>>(mask, dtype, n, seed, first, keep);
    return deft_gpu_check(cudaGetLastError(), "launching the dropout mask");
}
