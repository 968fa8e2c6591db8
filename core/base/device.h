/* Devices: which ones exist, how they are named in messages, and stats slots. */
#ifndef DEFT_CORE_DEVICE_H
#define DEFT_CORE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same numbers as the public DeftDeviceType (DLPack's). */
typedef enum deft_device_type {
    DEFT_DEV_CPU = 1,
    DEFT_DEV_GPU = 2,
} deft_device_type_t;

#define DEFT_MAX_GPUS 16
/* Streams per GPU: each thread queues on one of them (fence.h). */
#define DEFT_GPU_STREAMS 8
/* Slot 0 is the CPU, slot 1 + n is gpu(n): used to index per-device tables. */
#define DEFT_DEVICE_SLOTS (1 + DEFT_MAX_GPUS)

typedef struct deft_device {
    deft_device_type_t type;
    int id;
} deft_device_t;

static inline deft_device_t deft_device_cpu(void) {
    return (deft_device_t){DEFT_DEV_CPU, 0};
}

static inline int deft_device_slot(deft_device_t dev) {
    return dev.type == DEFT_DEV_CPU ? 0 : 1 + dev.id;
}

static inline bool deft_device_equal(deft_device_t a, deft_device_t b) {
    return a.type == b.type && a.id == b.id;
}

/* "cpu(0)", "gpu(1)": a device as messages, graph attributes and traces write it. */
#define DEFT_DEVICE_STR_MAX 24
const char *deft_device_format(deft_device_t dev, char *buf, size_t len);

/* Validate a (type, id) pair from a caller; -1 with an error naming `what`. */
int deft_device_check(int type, int id, const char *what, deft_device_t *out);

/*
 * What the GPU layer (core/gpu) supplies. It registers this when the library
 * loads, before any call can run; a build without CUDA registers nothing and
 * has no GPUs. Base code reaches GPU memory only through these functions.
 */
typedef struct deft_gpu_backend {
    /* Usable GPUs (at most DEFT_MAX_GPUS); called once, when first needed. */
    int (*probe)(void);
    /* Copy nbytes between two devices, at least one a GPU, after the work
     * already queued on them; returns once a host destination holds the data. */
    int (*copy)(void *dst, deft_device_t dst_dev, const void *src, deft_device_t src_dev,
                size_t nbytes);
    /* Fill nbytes of GPU memory with zero bytes. */
    int (*zero)(void *dst, deft_device_t dev, size_t nbytes);
    /* Wait until what deft queued on GPU `id` is done; with whole_device,
     * what anyone queued (memory other libraries hand over). */
    int (*synchronize)(int id, bool whole_device);
    /* The same for every GPU deft has queued work on (none: no CUDA call). */
    int (*synchronize_used)(void);
    /* Time what is queued next on GPU `id` as operator `name`, for the
     * profiler: a timer (NULL if it cannot), stopped after the kernels. */
    void *(*timer_start)(int id, const char *name);
    void (*timer_stop)(void *timer);
    /* Turn the device timings still pending into profiler spans (waiting for them). */
    void (*flush_timings)(void);
    /* Name ("NVIDIA H100 80GB HBM3", owned by the layer) and memory of a GPU. */
    int (*name)(int id, const char **out);
    int (*memory)(int id, size_t *free_bytes, size_t *total_bytes);
    /* Streams and events, for the fences (fence.h). The calling thread's
     * stream number, below DEFT_GPU_STREAMS and the same on every GPU. */
    int (*stream_slot)(void);
    /* The calling thread's stream of GPU id (a cudaStream_t), made on first use. */
    int (*stream)(int id, void **stream);
    /* A new event after the work queued so far on stream `slot` of GPU id
     * (any thread's: the fences record when a waiter first needs it). */
    int (*event_record)(int id, int slot, void **event);
    /* The calling thread's stream of GPU id waits for an event (of any GPU). */
    int (*event_wait)(int id, void *event);
    /* The host waits for an event to happen. */
    int (*event_synchronize)(void *event);
    /* Done with an event: the layer may record it again. */
    void (*event_release)(void *event);
} deft_gpu_backend_t;

void deft_device_register_gpu(const deft_gpu_backend_t *backend);
/* The registered GPU layer; NULL in a build without CUDA. */
const deft_gpu_backend_t *deft_device_gpu_backend(void);
/* Number of usable GPUs: 0 without the GPU layer or without a GPU. */
int deft_device_gpu_count(void);

/* Name and memory of gpu(id); -1 naming `what` when there is no such GPU. */
int deft_device_gpu_name(int id, const char *what, const char **out);
int deft_device_gpu_memory(int id, const char *what, size_t *free_bytes, size_t *total_bytes);

/* Copy nbytes from src on src_dev to dst on dst_dev (any two devices). */
int deft_device_copy(void *dst, deft_device_t dst_dev, const void *src, deft_device_t src_dev,
                     size_t nbytes);
/* Fill nbytes at dst on dev with zero bytes. */
int deft_device_zero(void *dst, deft_device_t dev, size_t nbytes);
/* Wait for the work deft queued on a GPU (whole_device: anyone's work);
 * nothing to do for the CPU. */
int deft_device_synchronize(deft_device_t dev, bool whole_device);
/* Wait for the work queued on every GPU deft has used (DeftWaitAll). */
int deft_device_synchronize_used(void);
/* Device-side timing of an operator's kernels for the profiler: a timer on
 * a GPU (NULL on the CPU, where the host span says it all), then stop. */
void *deft_device_timer_start(deft_device_t dev, const char *name);
void deft_device_timer_stop(deft_device_t dev, void *timer);
/* Record the GPU kernel timings still pending (the profiler, before it writes). */
void deft_device_flush_timings(void);

#ifdef __cplusplus
}
#endif

#endif
