/*
 * Pooling forward on a GPU: one thread per output element, each running the
 * window arithmetic shared with the CPU kernel (core/math/pool_math.h).
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/pool_math.h"

#include <cuda_runtime_api.h>

namespace {

__global__ void pool_outputs(deft_pool_geom_t g, deft_dtype_t dtype, const void *x, void *y,
                             int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t in_base, out_base;
        deft_pool_window_t w = deft_pool_locate(&g, i, &in_base, &out_base);
        deft_store_double(y, dtype, i, deft_pool_value(&g, x, dtype, in_base, &w));
    }
}

} // namespace

extern "C" int deft_gpu_pooling(int dev, const deft_pool_geom_t *g, deft_dtype_t dtype,
                                const void *x, void *y) {
    int64_t n = g->planes * g->out[0] * g->out[1] * g->out[2];
    if (n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    pool_outputs<<<blocks_for(n), kThreads, 0, stream>>>(*g, dtype, x, y, n);
    return deft_gpu_check(cudaGetLastError(), "launching Pooling");
}
