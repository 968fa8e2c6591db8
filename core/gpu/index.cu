/* take, its gradient (a scatter-add with atomics) and one_hot. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/flag.cuh"
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/gpu/kernels.h"
#include "core/math/index_math.h"

#include <cuda_runtime_api.h>

#include "core/base/error.h"

namespace {

__global__ void check_indices(deft_gpu_take_t t, deft_check_verdict_t *bad) {
    GRID_STRIDE(j, t.count) {
        int64_t i = deft_index_at(t.indices, t.index_dtype, j);
        if (i < 0 || i >= t.size) flag_first(bad, j);
    }
}

/* Elements move as unsigned integers of their size. */
template <typename E> __global__ void gather(deft_gpu_take_t t) {
    GRID_STRIDE(at, t.outer * t.count * t.inner) {
        int64_t k = at % t.inner, j = at / t.inner % t.count, o = at / t.inner / t.count;
        int64_t i = deft_take_resolve(deft_index_at(t.indices, t.index_dtype, j), t.size, t.mode);
        static_cast<E *>(t.dst)[at] = static_cast<const E *>(t.src)[(o * t.size + i) * t.inner + k];
    }
}

template <typename T> __global__ void scatter_add(deft_gpu_take_t t) {
    GRID_STRIDE(from, t.outer * t.count * t.inner) {
        int64_t k = from % t.inner, j = from / t.inner % t.count, o = from / t.inner / t.count;
        int64_t i = deft_index_at(t.indices, t.index_dtype, j);
        if ((i < 0 || i >= t.size) && t.mode == DEFT_TAKE_RAISE) continue;
        i = deft_take_resolve(i, t.size, t.mode);
        atomicAdd(&static_cast<T *>(t.dst)[(o * t.size + i) * t.inner + k],
                  static_cast<const T *>(t.src)[from]);
    }
}

__global__ void one_hot_kernel(deft_gpu_one_hot_t h) {
    GRID_STRIDE(at, h.count * h.depth) {
        int64_t j = at / h.depth, k = at % h.depth;
        double raw = deft_load_double(h.indices, h.index_dtype, j);
        deft_store_double(h.y, h.dtype, at, raw == (double)k ? h.on : h.off);
    }
}

void launch_gather(const deft_gpu_take_t &t, cudaStream_t stream) {
    int grid = blocks_for(t.outer * t.count * t.inner);
    switch (deft_dtype_size(t.dtype)) {
    case 1:
        gather<uint8_t><<<grid, kThreads, 0, stream>>>(t);
        break;
    case 2:
        gather<uint16_t><<<grid, kThreads, 0, stream>>>(t);
        break;
    case 4:
        gather<uint32_t><<<grid, kThreads, 0, stream>>>(t);
        break;
    default:
        gather<uint64_t><<<grid, kThreads, 0, stream>>>(t);
        break;
    }
}

} // namespace

extern "C" int deft_gpu_take(int dev, const deft_gpu_take_t *t, const deft_check_report_t *report) {
    if (t->mode == DEFT_TAKE_RAISE && t->count > 0 &&
        run_flagged(
            dev,
            [&](cudaStream_t stream, deft_check_verdict_t *flag) {
                check_indices<<<blocks_for(t->count), kThreads, 0, stream>>>(*t, flag);
            },
            t->indices, t->index_dtype, report))
        return -1;
    /* After a deferred check the gather runs whatever the indices: it clips
     * them (deft_take_resolve), and an empty axis has nothing to read. */
    if (t->size == 0 || t->outer * t->count * t->inner == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    launch_gather(*t, stream);
    return deft_gpu_check(cudaGetLastError(), "launching take");
}

extern "C" int deft_gpu_take_backward(int dev, const deft_gpu_take_t *t) {
    if (t->dtype != DEFT_DT_FLOAT32 && t->dtype != DEFT_DT_FLOAT64)
        return deft_error(DEFT_ERR_TYPE,
                          "take's gradient on a GPU needs float32 or float64, got %s",
                          deft_dtype_name(t->dtype));
    deft_gpu_stream_t stream;
    size_t nbytes = (size_t)(t->outer * t->size * t->inner) * deft_dtype_size(t->dtype);
    if (deft_gpu_enter(dev, &stream) ||
        deft_gpu_check(cudaMemsetAsync(t->dst, 0, nbytes, stream), "cudaMemsetAsync"))
        return -1;
    int64_t n = t->outer * t->count * t->inner;
    if (n == 0) return 0;
    if (t->dtype == DEFT_DT_FLOAT32)
        scatter_add<float><<<blocks_for(n), kThreads, 0, stream>>>(*t);
    else
        scatter_add<double><<<blocks_for(n), kThreads, 0, stream>>>(*t);
    return deft_gpu_check(cudaGetLastError(), "launching take's gradient");
}

extern "C" int deft_gpu_one_hot(int dev, const deft_gpu_one_hot_t *h) {
    if (h->count * h->depth == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    one_hot_kernel<<<blocks_for(h->count * h->depth), kThreads, 0, stream>>>(*h);
    return deft_gpu_check(cudaGetLastError(), "launching one_hot");
}
