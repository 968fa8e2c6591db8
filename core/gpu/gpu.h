/*
 * The CUDA runtime as the rest of deft sees it: devices, streams, error
 * translation, and the kernels' launchers (kernels.h).
 *
 * Each thread queues its GPU work on a stream of its own per device (one of
 * DEFT_GPU_STREAMS, taken in turn), so work pushed from different threads
 * or run by different engine workers overlaps on the device. An operation
 * ends, for the engine, once it is queued; what it touched carries fences
 * (core/base/fence.h) that work on other streams waits for, and the host
 * waits only where it reads device memory. Copies between two GPUs order
 * the calling thread's streams of the two devices with events.
 *
 * This header has no CUDA types, so C code of any layer above can include it.
 */
#ifndef DEFT_CORE_GPU_H
#define DEFT_CORE_GPU_H

#include <stddef.h>

#include "core/base/device.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st; /* cudaStream_t is a pointer to this */
typedef struct CUstream_st *deft_gpu_stream_t;

/* Make `dev` the calling thread's current device. */
int deft_gpu_use(int dev);
/* Make `dev` the calling thread's current device and give the thread's stream of it. */
int deft_gpu_enter(int dev, deft_gpu_stream_t *stream);
/* The calling thread's stream number (below DEFT_GPU_STREAMS), the same on every device. */
int deft_gpu_thread_slot(void);

/* 0 for cudaSuccess; otherwise -1 with an error naming `what` and CUDA's text. */
int deft_gpu_check(int cuda_status, const char *what);

/* Working memory of at least `bytes` for kernels queued on the calling
 * thread's stream of `dev` (gpu_workspace.c), held until released: take it,
 * queue the kernels that use it, release it. Out of memory is an error. */
int deft_gpu_workspace_hold(int dev, size_t bytes, void **out);
void deft_gpu_workspace_release(int dev);

/* Wait for everything queued on the device's streams. */
int deft_gpu_synchronize(int dev);

/* The device's name ("NVIDIA H100 80GB HBM3"), owned by the library. */
int deft_gpu_name(int dev, const char **out);
int deft_gpu_memory(int dev, size_t *free_bytes, size_t *total_bytes);

/* Registered by gpu_runtime.c when the library loads. */
extern const deft_gpu_backend_t deft_gpu_backend;
extern const struct deft_allocator deft_gpu_pool; /* gpu_pool.c */

#ifdef __cplusplus
}
#endif

#endif
