/*
 * The loss heads' GPU kernels (loss_heads.c): one thread per element or per
 * line, each running the arithmetic the CPU runs (core/math/loss_math.h).
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline

#include <cuda_runtime_api.h>

#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/loss_math.h"

namespace {

__global__ void softmax_output_grad(deft_softmax_output_plan_t plan) {
    GRID_STRIDE(line, plan.outer * plan.inner) deft_softmax_output_grad_line(&plan, line);
}

__global__ void loss_map(deft_loss_map_t map) {
    GRID_STRIDE(i, map.n) deft_loss_map_one(&map, i);
}

__global__ void loss_count(deft_loss_count_t count, unsigned long long *total) {
    unsigned long long mine = 0;
    GRID_STRIDE(i, count.n) mine += deft_loss_counted(&count, i);
    if (mine) atomicAdd(total, mine);
}

} // namespace

extern "C" int deft_gpu_softmax_output_grad(int dev, const deft_softmax_output_plan_t *plan) {
    int64_t lines = plan->outer * plan->inner;
    if (lines == 0 || plan->n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    softmax_output_grad<<<blocks_for(lines), kThreads, 0, stream>>>(*plan);
    return deft_gpu_check(cudaGetLastError(), "launching SoftmaxOutput's gradient");
}

extern "C" int deft_gpu_loss_map(int dev, const deft_loss_map_t *map) {
    if (map->n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    loss_map<<<blocks_for(map->n), kThreads, 0, stream>>>(*map);
    return deft_gpu_check(cudaGetLastError(), "launching a loss map");
}

/* The count in a counter of its own, waited for and freed (a normaliser is
 * needed once per backward, so the allocation is not worth pooling). */
extern "C" int deft_gpu_loss_count(int dev, const deft_loss_count_t *count, int64_t *out) {
    *out = 0;
    if (count->n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    unsigned long long *total = NULL, host = 0;
    int status = deft_gpu_check(cudaMallocAsync((void **)&total, sizeof host, stream),
                                "cudaMallocAsync (a loss count)");
    if (status) return status;
    status = deft_gpu_check(cudaMemsetAsync(total, 0, sizeof host, stream), "cudaMemsetAsync");
    if (status == 0) {
        loss_count<<<blocks_for(count->n), kThreads, 0, stream>>>(*count, total);
        status = deft_gpu_check(cudaGetLastError(), "launching a loss count");
    }
    if (status == 0)
        status = deft_gpu_check(
            cudaMemcpyAsync(&host, total, sizeof host, cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync");
    int freed = deft_gpu_check(cudaFreeAsync(total, stream), "cudaFreeAsync");
    if (status == 0) status = freed;
    if (status == 0)
        status = deft_gpu_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    *out = (int64_t)host;
    return status;
}
