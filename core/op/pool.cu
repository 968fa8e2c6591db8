/*
 * Pooling on a GPU, with the window arithmetic shared with the CPU kernel
 * (core/math/pool_math.h): the forward one thread per output element; the
 * gradient one thread per plane, which adds the plane's outputs into its
 * inputs in the CPU's order (windows overlap, so no two threads share a
 * plane and none needs atomics).
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

__global__ void unpool_planes(deft_pool_grad_t j) {
    GRID_STRIDE(plane, j.g.planes) deft_pool_unpool_plane(&j, plane);
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

extern "C" int deft_gpu_unpooling(int dev, const deft_pool_grad_t *j) {
    if (j->g.planes == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    unpool_planes<<<blocks_for(j->g.planes), kThreads, 0, stream>>>(*j);
    return deft_gpu_check(cudaGetLastError(), "launching _backward_Pooling");
}
