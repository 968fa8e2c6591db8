/* Optimizer steps, element by element over the shared optimizer_math.h. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/gpu/kernels.h"
#include "core/math/optimizer_math.h"

#include <cuda_runtime_api.h>

namespace {

template <typename T> __global__ void update_kernel(deft_gpu_update_t u) {
    T *out = static_cast<T *>(u.out), *w = static_cast<T *>(u.in[0]),
      *g = static_cast<T *>(u.in[1]), *s1 = static_cast<T *>(u.in[2]),
      *s2 = static_cast<T *>(u.in[3]);
    GRID_STRIDE(i, u.n) {
        if (u.kind == 0) {
            out[i] = (T)deft_sgd_step(&u.hyper, w[i], g[i]);
        } else if (u.kind == 1) {
            double mom = s1[i], weight = deft_sgd_mom_step(&u.hyper, w[i], g[i], &mom);
            s1[i] = (T)mom;
            out[i] = (T)weight;
        } else {
            double mean = s1[i], var = s2[i];
            double weight = deft_adam_step(&u.hyper, w[i], g[i], &mean, &var);
            s1[i] = (T)mean;
            s2[i] = (T)var;
            out[i] = (T)weight;
        }
    }
}

} // namespace

extern "C" int deft_gpu_update(int dev, const deft_gpu_update_t *u) {
    if (u->n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    int grid = blocks_for(u->n);
    if (u->dtype == DEFT_DT_FLOAT32)
        update_kernel<float><<<grid, kThreads, 0, stream>>>(*u);
    else
        update_kernel<double><<<grid, kThreads, 0, stream>>>(*u);
    return deft_gpu_check(cudaGetLastError(), "launching an optimizer step");
}
