/*
 * The CUDA runtime as the rest of deft sees it: devices, one stream per
 * device, error translation, and the kernels' launchers (kernels.h).
 *
 * Every GPU operation of a device goes to that device's stream, in the
 * order the engine dispatches it. The engine has already ordered writers
 * and readers of each array, so stream order keeps that order on the
 * device: an operation ends, for the engine, once it is queued, and the
 * host waits only where it reads device memory (copies to the host).
 * Memory freed while queued work may still use it is safe to reuse, since
 * whatever reuses it is queued later on the same stream. Copies between
 * two GPUs order the two streams with events.
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

/* Make `dev` the calling thread's current device and give its stream. */
int deft_gpu_enter(int dev, deft_gpu_stream_t *stream);

/* 0 for cudaSuccess; otherwise -1 with an error naming `what` and CUDA's text. */
int deft_gpu_check(int cuda_status, const char *what);

/* Wait for everything queued on the device's stream. */
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
