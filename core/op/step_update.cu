/* A training step's optimizer update on a GPU (step_update.c), reading the
 * hyper-parameters from device memory: a schedule changes them, not the graph. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/step_math.h"

#include <cuda_runtime_api.h>

namespace {

template <typename T>
__global__ void step_kernel(int kind, int64_t n, T *w, const T *g, T *s1, T *s2, T *s3,
                            const void *hyper, deft_dtype_t hyper_dtype) {
    const deft_hyper_t h = deft_step_hyper(hyper, hyper_dtype);
    GRID_STRIDE(i, n) { DEFT_STEP_ELEMENT(T, (deft_step_kind_t)kind, &h, w, g, s1, s2, s3, i); }
}

} // namespace

extern "C" int deft_gpu_step(int dev, int kind, deft_dtype_t dtype, int64_t n, void *w,
                             const void *g, void *s1, void *s2, void *s3, const void *hyper,
                             deft_dtype_t hyper_dtype) {
    if (n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (dtype == DEFT_DT_FLOAT32)
        step_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(
            kind, n, static_cast<float *>(w), static_cast<const float *>(g),
            static_cast<float *>(s1), static_cast<float *>(s2), static_cast<float *>(s3), hyper, hyper_dtype);
    else
        step_kernel<double><<<blocks_for(n), kThreads, 0, stream>>>(
            kind, n, static_cast<double *>(w), static_cast<const double *>(g),
            static_cast<double *>(s1), static_cast<double *>(s2), static_cast<double *>(s3), hyper, hyper_dtype);
    return deft_gpu_check(cudaGetLastError(), "launching a training step's update");
}
