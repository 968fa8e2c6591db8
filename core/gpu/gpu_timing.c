/*
 * Kernel times for the profiler, from CUDA events: a timer records an event
 * on the calling thread's stream before and after an operator's kernels; the pair
 * becomes a "device" span on the GPU's track once both have happened
 * (checked without waiting as later timers stop, and with waiting when the
 * profiler writes). Device times map to the profiler's clock through a base
 * event whose host time is known, taken again every ten seconds so the
 * float milliseconds of cudaEventElapsedTime stay precise.
 */
#include "core/gpu/gpu_timing.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/base/profiler.h"

struct deft_gpu_timer {
    int dev;
    cudaEvent_t start, end;
    const char *name;
    struct deft_gpu_timer *next;
};

typedef struct clock_base {
    cudaEvent_t event;
    double host_us; /* the profiler's clock when the event happened */
} clock_base_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static deft_gpu_timer_t *pending, **pending_tail = &pending;
static clock_base_t bases[DEFT_MAX_GPUS];

/* A base event for dev, recent enough (called with the lock held). */
static bool ensure_base(int dev, deft_gpu_stream_t stream) {
    clock_base_t *b = &bases[dev];
    if (b->event && deft_profiler_now() - b->host_us < 10e6) return true;
    if (!b->event && cudaEventCreate(&b->event) != cudaSuccess) return false;
    if (cudaEventRecord(b->event, stream) != cudaSuccess ||
        cudaEventSynchronize(b->event) != cudaSuccess)
        return false;
    b->host_us = deft_profiler_now();
    return true;
}

deft_gpu_timer_t *deft_gpu_timer_start(int dev, const char *name) {
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return NULL;
    deft_gpu_timer_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dev = dev, t->name = name;
    pthread_mutex_lock(&lock);
    bool ok = ensure_base(dev, stream);
    pthread_mutex_unlock(&lock);
    if (!ok || cudaEventCreate(&t->start) != cudaSuccess ||
        cudaEventCreate(&t->end) != cudaSuccess ||
        cudaEventRecord(t->start, stream) != cudaSuccess) {
        cudaGetLastError();
        if (t->start) cudaEventDestroy(t->start);
        if (t->end) cudaEventDestroy(t->end);
        free(t);
        return NULL;
    }
    return t;
}

/* Its span, if both events happened (or `wait`); frees it. Lock held. */
static bool resolve(deft_gpu_timer_t *t, bool wait) {
    if (!wait && cudaEventQuery(t->end) == cudaErrorNotReady) return false;
    float from_base = 0, length = 0;
    if (cudaEventSynchronize(t->end) == cudaSuccess &&
        cudaEventElapsedTime(&from_base, bases[t->dev].event, t->start) == cudaSuccess &&
        cudaEventElapsedTime(&length, t->start, t->end) == cudaSuccess) {
        char device[DEFT_DEVICE_STR_MAX];
        double start = bases[t->dev].host_us + 1e3 * (double)from_base;
        deft_profiler_device_span(
            deft_device_format((deft_device_t){DEFT_DEV_GPU, t->dev}, device, sizeof device),
            t->name, start, start + 1e3 * (double)length);
    }
    cudaGetLastError();
    cudaEventDestroy(t->start);
    cudaEventDestroy(t->end);
    free(t);
    return true;
}

/* Resolve from the oldest while they are done (all, waiting, with `wait`). Lock held. */
static void drain(bool wait) {
    while (pending) {
        deft_gpu_timer_t *next = pending->next;
        if (!resolve(pending, wait)) break;
        pending = next;
    }
    if (!pending) pending_tail = &pending;
}

void deft_gpu_timer_stop(deft_gpu_timer_t *t) {
    if (!t) return;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(t->dev, &stream) || cudaEventRecord(t->end, stream) != cudaSuccess) {
        cudaGetLastError();
        cudaEventDestroy(t->start);
        cudaEventDestroy(t->end);
        free(t);
        return;
    }
    pthread_mutex_lock(&lock);
    *pending_tail = t;
    pending_tail = &t->next;
    drain(false);
    pthread_mutex_unlock(&lock);
}

void deft_gpu_flush_timings(void) {
    pthread_mutex_lock(&lock);
    drain(true);
    pthread_mutex_unlock(&lock);
}
