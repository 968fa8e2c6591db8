/* pick, gather_nd, scatter_nd and their gradients on a GPU: a thread per element. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/gather_math.h"

#include <cuda_runtime_api.h>

#include "core/base/error.h"

namespace {

__global__ void pick_kernel(deft_pick_plan_t p, bool backward, size_t elem) {
    GRID_STRIDE(at, p.outer * p.inner) {
        int64_t from = deft_pick_source(&p, at);
        if (backward)
            deft_copy_element(p.dst, from, p.src, at, elem);
        else
            deft_copy_element(p.dst, at, p.src, from, elem);
    }
}

/* Element k of slice i: gathered, scattered, or (T float32 or float64) added with atomics. */
template <typename T> __global__ void nd_kernel(deft_nd_plan_t p, int mode, size_t elem) {
    GRID_STRIDE(e, p.n * p.slice) {
        int64_t i = e / p.slice, k = e % p.slice, at = deft_nd_offset(&p, i), big = at + k;
        if (at < 0) continue; /* an empty axis: the deferred check reports it */
        if (mode == DEFT_ND_GATHER)
            deft_copy_element(p.dst, e, p.src, big, elem);
        else if (mode == DEFT_ND_SCATTER)
            deft_copy_element(p.dst, big, p.src, e, elem);
        else
            atomicAdd(&static_cast<T *>(p.dst)[big], static_cast<const T *>(p.src)[e]);
    }
}

} // namespace

extern "C" int deft_gpu_pick(int dev, const deft_pick_plan_t *p, bool backward) {
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    pick_kernel<<<blocks_for(p->outer * p->inner), kThreads, 0, stream>>>(
        *p, backward, deft_dtype_size(p->dtype));
    return deft_gpu_check(cudaGetLastError(), "launching pick");
}

extern "C" int deft_gpu_nd(int dev, const deft_nd_plan_t *p, int mode) {
    bool is_double = p->dtype == DEFT_DT_FLOAT64;
    if (mode == DEFT_ND_SCATTER_ADD && !is_double && p->dtype != DEFT_DT_FLOAT32)
        return deft_error(DEFT_ERR_TYPE,
                          "gather_nd's gradient on a GPU needs float32 or float64, got %s",
                          deft_dtype_name(p->dtype));
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    int grid = blocks_for(p->n * p->slice);
    size_t elem = deft_dtype_size(p->dtype);
    if (is_double)
        nd_kernel<double><<<grid, kThreads, 0, stream>>>(*p, mode, elem);
    else
        nd_kernel<float><<<grid, kThreads, 0, stream>>>(*p, mode, elem);
    return deft_gpu_check(cudaGetLastError(), "launching gather_nd or scatter_nd");
}
