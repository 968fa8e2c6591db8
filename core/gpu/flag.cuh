/*
 * Checks that must fail a call (bad labels, indices out of range) run on
 * the device: a kernel notes the first offending position in a flag with
 * atomicMin, and the host waits for it. Each device has one flag per file
 * including this, allocated once; calls take turns on it.
 */
#ifndef DEFT_CORE_GPU_FLAG_CUH
#define DEFT_CORE_GPU_FLAG_CUH

#include <cuda_runtime_api.h>
#include <pthread.h>

#include "core/gpu/gpu.h"

namespace {

unsigned long long *first_flags[DEFT_MAX_GPUS];
pthread_mutex_t first_flag_lock = PTHREAD_MUTEX_INITIALIZER;

/* Note position `at` as offending (the smallest noted wins). */
__device__ inline void flag_first(unsigned long long *flag, int64_t at) {
    atomicMin(flag, (unsigned long long)at);
}

/* Run launch(stream, flag), wait, and set *first to the smallest position a
 * kernel flagged, or -1. */
template <typename Launch> int run_flagged(int dev, Launch launch, int64_t *first) {
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    pthread_mutex_lock(&first_flag_lock);
    unsigned long long none = ~0ull, seen = none;
    int status = first_flags[dev] ? 0
                                  : deft_gpu_check(cudaMalloc(&first_flags[dev], sizeof none),
                                                   "cudaMalloc (a check's flag)");
    unsigned long long *flag = first_flags[dev];
    if (status == 0)
        status = deft_gpu_check(
            cudaMemcpyAsync(flag, &none, sizeof none, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync");
    if (status == 0) {
        launch(stream, flag);
        status = deft_gpu_check(cudaGetLastError(), "launching a checked kernel");
    }
    if (status == 0)
        status = deft_gpu_check(
            cudaMemcpyAsync(&seen, flag, sizeof seen, cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync");
    if (status == 0)
        status = deft_gpu_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    pthread_mutex_unlock(&first_flag_lock);
    *first = seen == none ? -1 : (int64_t)seen;
    return status;
}

} // namespace

#endif
