/*
 * Reductions: one block per result, its threads striding over the span
 * and merging partials in shared memory (reduce_math.h, shared with the
 * CPU kernels); results of short spans take one thread each instead.
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/gpu/gpu_index.h"
#include "core/gpu/kernels.h"
#include "core/math/reduce_math.h"

#include <cuda_runtime_api.h>

#include <type_traits>

#include "core/base/error.h"

namespace {

constexpr int64_t kShortSpan = 32; /* spans this short: a thread per result */

template <typename T> __device__ deft_partial_t element(deft_reduce_kind_t kind, T v, int64_t j) {
    if constexpr (std::is_floating_point<T>::value)
        return deft_reduce_element(kind, (double)v, 0, j);
    else
        return deft_reduce_element(kind, (double)v, (uint64_t)(int64_t)v, j);
}

template <typename T> __global__ void reduce_blocks(deft_gpu_reduce_t r) {
    __shared__ deft_partial_t parts[kThreads];
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const bool is_float = std::is_floating_point<T>::value;
    const T *x = static_cast<const T *>(r.x);
    for (int64_t o = blockIdx.x; o < r.outer; o += gridDim.x) {
        deft_partial_t p = deft_reduce_identity(kind);
        for (int64_t j = threadIdx.x; j < r.span; j += blockDim.x) {
            deft_partial_t e = element<T>(kind, x[deft_gpu_reduce_offset(&r, o, j)], j);
            deft_reduce_combine(kind, is_float, &p, &e);
        }
        parts[threadIdx.x] = p;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (threadIdx.x < half)
                deft_reduce_combine(kind, is_float, &parts[threadIdx.x],
                                    &parts[threadIdx.x + half]);
            __syncthreads();
        }
        if (threadIdx.x == 0) deft_reduce_store(kind, &parts[0], r.span, r.y, o, r.dtype);
        __syncthreads();
    }
}

template <typename T> __global__ void reduce_threads(deft_gpu_reduce_t r) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const bool is_float = std::is_floating_point<T>::value;
    const T *x = static_cast<const T *>(r.x);
    GRID_STRIDE(o, r.outer) {
        deft_partial_t p = deft_reduce_identity(kind);
        for (int64_t j = 0; j < r.span; j++) {
            deft_partial_t e = element<T>(kind, x[deft_gpu_reduce_offset(&r, o, j)], j);
            deft_reduce_combine(kind, is_float, &p, &e);
        }
        deft_reduce_store(kind, &p, r.span, r.y, o, r.dtype);
    }
}

template <typename T> void launch(const deft_gpu_reduce_t &r, cudaStream_t stream) {
    if (r.span <= kShortSpan)
        reduce_threads<T><<<blocks_for(r.outer), kThreads, 0, stream>>>(r);
    else
        reduce_blocks<T><<<grid_of(r.outer), kThreads, 0, stream>>>(r);
}

} // namespace

extern "C" int deft_gpu_reduce(int dev, const deft_gpu_reduce_t *r) {
    if (r->outer == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    switch (r->dtype) {
    case DEFT_DT_FLOAT32:
        launch<float>(*r, stream);
        break;
    case DEFT_DT_FLOAT64:
        launch<double>(*r, stream);
        break;
    case DEFT_DT_INT32:
        launch<int32_t>(*r, stream);
        break;
    case DEFT_DT_INT64:
        launch<int64_t>(*r, stream);
        break;
    case DEFT_DT_UINT8:
        launch<uint8_t>(*r, stream);
        break;
    default:
        return deft_error(DEFT_ERR_TYPE, "no GPU reduction for %s", deft_dtype_name(r->dtype));
    }
    return deft_gpu_check(cudaGetLastError(), "launching a reduction kernel");
}
