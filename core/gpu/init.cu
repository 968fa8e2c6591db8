/* Creation kernels: random numbers (the CPU's Philox stream) and arange. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/gpu/kernels.h"
#include "core/math/dtype_math.h"
#include "core/math/philox.h"

#include <cuda_runtime_api.h>

namespace {

/* Element i takes the same block and word as on the CPU (init.c). */
__global__ void random_kernel(deft_gpu_random_t r) {
    const bool packed = r.dtype == DEFT_DT_FLOAT32 && !r.normal;
    GRID_STRIDE(i, r.n) {
        deft_philox_block_t block = deft_philox(r.seed, r.first + (uint64_t)(packed ? i / 4 : i));
        if (packed)
            static_cast<float *>(r.data)[i] =
                deft_random_uniform_f(block.v[i % 4], (float)r.a, (float)(r.b - r.a));
        else if (r.dtype == DEFT_DT_FLOAT32)
            static_cast<float *>(r.data)[i] = deft_random_normal_f(block, r.a, r.b);
        else
            static_cast<double *>(r.data)[i] = deft_random_d(block, r.normal, r.a, r.b);
    }
}

__global__ void arange_kernel(void *y, deft_dtype_t dtype, int64_t n, double start, double step,
                              int64_t repeat) {
    GRID_STRIDE(i, n) deft_store_double(y, dtype, i, start + (double)(i / repeat) * step);
}

} // namespace

extern "C" int deft_gpu_random(int dev, const deft_gpu_random_t *r) {
    if (r->n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    random_kernel<<<blocks_for(r->n), kThreads, 0, stream>>>(*r);
    return deft_gpu_check(cudaGetLastError(), "launching a random kernel");
}

extern "C" int deft_gpu_arange(int dev, void *y, deft_dtype_t dtype, int64_t n, double start,
                               double step, int64_t repeat) {
    if (n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    arange_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, dtype, n, start, step, repeat);
    return deft_gpu_check(cudaGetLastError(), "launching arange");
}
