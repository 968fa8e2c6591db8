/*
 * softmax, log_softmax, softmin and the softmax cross-entropy: one thread per line
 * (or row), each running the shared per-line arithmetic (softmax_math.h).
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/flag.cuh"
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/gpu/kernels.h"
#include "core/math/softmax_math.h"

#include <cuda_runtime_api.h>

#include "core/base/error.h"

namespace {

__global__ void softmax_lines(deft_gpu_softmax_t s) {
    GRID_STRIDE(line, s.outer * s.inner) deft_softmax_plan_line(&s, line);
}

/* The label of row b, or -1 (and the row noted in *bad) when it is not a class index. */
__device__ int64_t row_label(const deft_gpu_xent_t &x, int64_t b, unsigned long long *bad) {
    double label = deft_load_double(x.labels, x.label_dtype, b);
    if (deft_xent_label_ok(label, x.classes)) return (int64_t)label;
    flag_first(bad, b);
    return -1;
}

/* The loss: one block, each thread summing rows, then a tree in shared memory. */
__global__ void xent_loss(deft_gpu_xent_t x, unsigned long long *bad) {
    __shared__ double sums[kThreads];
    double sum = 0;
    for (int64_t b = threadIdx.x; b < x.batch; b += blockDim.x) {
        int64_t label = row_label(x, b, bad);
        if (label >= 0) sum += deft_xent_row_loss(x.x, x.dtype, b, x.classes, label);
    }
    sums[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) deft_store_double(x.out, x.dtype, 0, sums[0]);
}

__global__ void xent_grad(deft_gpu_xent_t x, unsigned long long *bad) {
    double g = deft_load_double(x.g, x.g_dtype, 0);
    GRID_STRIDE(b, x.batch) {
        int64_t label = row_label(x, b, bad);
        if (label >= 0) deft_xent_row_grad(x.x, x.out, x.dtype, b, x.classes, label, g);
    }
}

} // namespace

extern "C" int deft_gpu_softmax(int dev, const deft_gpu_softmax_t *s) {
    if (s->outer * s->inner == 0 || s->n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    softmax_lines<<<blocks_for(s->outer * s->inner), kThreads, 0, stream>>>(*s);
    return deft_gpu_check(cudaGetLastError(), "launching softmax");
}

extern "C" int deft_gpu_xent(int dev, const deft_gpu_xent_t *x, int64_t *bad_row) {
    return run_flagged(
        dev,
        [&](cudaStream_t stream, unsigned long long *bad) {
            if (x->g)
                xent_grad<<<blocks_for(x->batch), kThreads, 0, stream>>>(*x, bad);
            else
                xent_loss<<<1, kThreads, 0, stream>>>(*x, bad);
        },
        bad_row);
}
