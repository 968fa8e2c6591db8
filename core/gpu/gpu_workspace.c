/*
 * Working memory of the GPU kernels that need some (a split reduction's
 * partial results): one buffer per device and stream number, held under a
 * lock while kernels using it are queued. Kernels on one stream run in
 * order, so the next holder's kernels start only after the last holder's
 * finished with the buffer; threads sharing a stream number take turns.
 * A buffer grows by doubling, and cudaFree waits for the device, so the old
 * one is no longer in use when it goes.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "core/base/error.h"
#include "core/gpu/gpu.h"

typedef struct workspace {
    pthread_mutex_t lock;
    void *data;
    size_t size;
} workspace_t;

static workspace_t spaces[DEFT_MAX_GPUS][DEFT_GPU_STREAMS];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_locks(void) {
    for (int d = 0; d < DEFT_MAX_GPUS; d++)
        for (int s = 0; s < DEFT_GPU_STREAMS; s++) pthread_mutex_init(&spaces[d][s].lock, NULL);
}

int deft_gpu_workspace_hold(int dev, size_t bytes, void **out) {
    deft_gpu_stream_t stream;
    pthread_once(&init_once, init_locks);
    if (deft_gpu_enter(dev, &stream)) return -1;
    workspace_t *w = &spaces[dev][deft_gpu_thread_slot()];
    pthread_mutex_lock(&w->lock);
    if (w->size < bytes) {
        size_t size = w->size ? w->size : (size_t)1 << 20;
        while (size < bytes) size *= 2;
        if (w->data) cudaFree(w->data);
        w->data = NULL, w->size = 0;
        cudaError_t e = cudaMalloc(&w->data, size);
        if (e != cudaSuccess) {
            w->data = NULL;
            cudaGetLastError();
            pthread_mutex_unlock(&w->lock);
            return deft_error(DEFT_ERR_OUT_OF_MEMORY,
                              "cannot allocate %zu bytes of GPU working memory on gpu(%d): %s",
                              size, dev, cudaGetErrorString(e));
        }
        w->size = size;
    }
    *out = w->data;
    return 0;
}

void deft_gpu_workspace_release(int dev) {
    pthread_mutex_unlock(&spaces[dev][deft_gpu_thread_slot()].lock);
}
