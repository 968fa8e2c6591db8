/*
 * Normalisation over slices on a GPU (BatchNorm, LayerNorm, InstanceNorm,
 * GroupNorm forward): a block per slice sums its elements and their squared
 * deviations with a tree in shared memory, one thread finishes the
 * statistics (norm_math.h, as the CPU does), and the block writes the slice.
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/norm_math.h"

#include <cuda_runtime_api.h>

namespace {

/* The sum of every thread's v, returned to all of them. */
__device__ double block_sum(double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    double total = shared[0];
    __syncthreads(); /* before the next call writes shared */
    return total;
}

__global__ void forward_slices(deft_norm_forward_t f) {
    __shared__ double shared[kThreads];
    __shared__ double stats[2];
    const deft_norm_plan_t *p = &f.plan;
    const int64_t n = deft_norm_count(p);
    for (int64_t j = blockIdx.x; j < p->slices; j += gridDim.x) {
        int64_t start = deft_norm_start(p, j);
        double mean = 0, var = 0;
        if (!f.use_moving && n > 0) { /* the same for every thread of the block */
            double sum = 0, squares = 0;
            for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
                sum += deft_load_double(f.x, f.dtype, deft_norm_at(p, start, k));
            mean = block_sum(sum, shared) / (double)n;
            for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
                double d = deft_load_double(f.x, f.dtype, deft_norm_at(p, start, k)) - mean;
                squares += d * d;
            }
            var = block_sum(squares, shared) / (double)n;
        }
        if (threadIdx.x == 0) {
            stats[1] = deft_norm_finish(&f, f.dtype, j, &mean, var);
            stats[0] = mean;
        }
        __syncthreads();
        mean = stats[0];
        double invstd = stats[1];
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            deft_norm_apply(&f, f.dtype, deft_norm_at(p, start, k), deft_norm_param_at(p, j, k),
                            mean, invstd);
        __syncthreads(); /* before thread 0 writes the next slice's stats */
    }
}

} // namespace

extern "C" int deft_gpu_norm_forward(int dev, const deft_norm_forward_t *f) {
    if (f->plan.slices == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    forward_slices<<<grid_of(f->plan.slices), kThreads, 0, stream>>>(*f);
    return deft_gpu_check(cudaGetLastError(), "launching a normalisation");
}
