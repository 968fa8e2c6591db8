/*
 * Devices, streams and copies over the CUDA runtime API, which is plain C.
 */
#include "core/gpu/gpu.h"
#include "core/gpu/kernels.h"
#include "core/gpu/gpu_timing.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/base/allocator.h"
#include "core/base/error.h"

/* An event of the fences (fence.h), kept for reuse once released. */
typedef struct gpu_event {
    cudaEvent_t event;
    int dev;
    struct gpu_event *next;
} gpu_event_t;

typedef struct gpu_device {
    char name[256];
    cudaStream_t streams[DEFT_GPU_STREAMS]; /* created on first use */
    gpu_event_t *free_events;
} gpu_device_t;

static gpu_device_t devices[DEFT_MAX_GPUS];
static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;

/* Threads take stream numbers in turn, so the engine's workers and the
 * threads calling deft each queue on a stream of their own. */
static atomic_int next_slot;
static _Thread_local int thread_slot = -1;

int deft_gpu_thread_slot(void) {
    if (thread_slot < 0) thread_slot = atomic_fetch_add(&next_slot, 1) % DEFT_GPU_STREAMS;
    return thread_slot;
}

int deft_gpu_check(int cuda_status, const char *what) {
    cudaError_t e = (cudaError_t)cuda_status;
    if (e == cudaSuccess) return 0;
    cudaGetLastError(); /* clear it, so that later calls do not report it again */
    deft_error_kind_t kind =
        e == cudaErrorMemoryAllocation ? DEFT_ERR_OUT_OF_MEMORY : DEFT_ERR_INTERNAL;
    return deft_error(kind, "%s failed: %s (CUDA error %d)", what, cudaGetErrorString(e), (int)e);
}

/*
 * CUDA cannot be used in a child forked after the parent started it: every
 * call there fails with "initialization error". The child learns why from
 * the first deft call that needs a GPU instead, as PyTorch's users do.
 */
static bool started;            /* the driver answered in this process */
static bool forked_after_start; /* this process is such a child */

static void note_fork_in_child(void) {
    forked_after_start = started;
}

static int refuse_in_forked_child(int dev) {
    return deft_error(DEFT_ERR_VALUE,
                      "gpu(%d) cannot be used in a process forked after its parent used CUDA "
                      "(CUDA cannot start again in a forked child): start worker processes with "
                      "'spawn' rather than 'fork', or fork before the first GPU call",
                      dev);
}

/* Each kernel makes its device current twice (the launch, its fence); asking
 * which is current costs about half of setting it (0.07 against 0.13 us on an
 * H100), and the device rarely changes. */
int deft_gpu_use(int dev) {
    if (forked_after_start) return refuse_in_forked_child(dev);
    int current;
    if (cudaGetDevice(&current) == cudaSuccess && current == dev) return 0;
    return deft_gpu_check(cudaSetDevice(dev), "cudaSetDevice");
}

static int probe(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) { /* no driver or no device */
        cudaGetLastError();
        return 0;
    }
    if (count > DEFT_MAX_GPUS) count = DEFT_MAX_GPUS;
    started = true;
    pthread_atfork(NULL, NULL, note_fork_in_child);
    for (int d = 0; d < count; d++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, d) == cudaSuccess)
            snprintf(devices[d].name, sizeof devices[d].name, "%s", prop.name);
    }
    return count;
}

static int check_device(int dev) {
    int count = deft_device_gpu_count();
    if (dev < 0 || dev >= count)
        return deft_error(DEFT_ERR_INDEX, "gpu(%d) does not exist: %d GPU%s found", dev, count,
                          count == 1 ? "" : "s");
    return 0;
}

/* Every launch asks: a stream, once made, is read without the lock. */
static cudaStream_t made_stream(int dev, int slot) {
    return __atomic_load_n(&devices[dev].streams[slot], __ATOMIC_ACQUIRE);
}

/* ---- planning fused chains ---- */

static _Thread_local deft_gpu_capture_t *capture;

void deft_gpu_capture_start(deft_gpu_capture_t *c) {
    c->count = 0;
    capture = c;
}

void deft_gpu_capture_stop(void) {
    capture = NULL;
}

bool deft_gpu_capture_map(const deft_gpu_map_t *map) {
    if (!capture) return false;
    if (capture->count >= 0 && capture->count++ == 0) capture->map = *map;
    return true;
}

/* Stream `slot` of dev (the current device), made on first use. */
static int stream_of(int dev, int slot, cudaStream_t *stream) {
    if ((*stream = made_stream(dev, slot)) != NULL) return 0;
    pthread_mutex_lock(&stream_lock);
    cudaStream_t made = devices[dev].streams[slot];
    int status = made ? 0
                      : deft_gpu_check(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking),
                                       "cudaStreamCreate");
    if (status == 0) __atomic_store_n(&devices[dev].streams[slot], made, __ATOMIC_RELEASE);
    *stream = made;
    pthread_mutex_unlock(&stream_lock);
    return status;
}

int deft_gpu_enter(int dev, deft_gpu_stream_t *stream) {
    if (capture) { /* a kernel other than a map: the chain cannot take it */
        capture->count = -1;
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "a fused chain cannot hold this kernel");
    }
    if (check_device(dev) || deft_gpu_use(dev)) return -1;
    return stream_of(dev, deft_gpu_thread_slot(), stream);
}

int deft_gpu_synchronize(int dev) {
    if (check_device(dev) || deft_gpu_use(dev)) return -1;
    for (int slot = 0; slot < DEFT_GPU_STREAMS; slot++) {
        cudaStream_t stream = made_stream(dev, slot);
        if (stream && deft_gpu_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
            return -1;
    }
    return 0;
}

/* ---- events for the fences ---- */

/* On stream `slot` of dev, which may be another thread's: CUDA orders calls
 * on a stream from several threads as they happen, and the fence that asks
 * was published after its work was queued (fence.c). */
static int event_record(int dev, int slot, void **out) {
    cudaStream_t stream;
    if (check_device(dev) || deft_gpu_use(dev) || stream_of(dev, slot, &stream)) return -1;
    pthread_mutex_lock(&event_lock);
    gpu_event_t *e = devices[dev].free_events;
    if (e) devices[dev].free_events = e->next;
    pthread_mutex_unlock(&event_lock);
    if (!e) {
        if (!(e = malloc(sizeof *e)))
            return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a GPU event");
        e->dev = dev;
        if (deft_gpu_check(cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming),
                           "cudaEventCreate")) {
            free(e);
            return -1;
        }
    }
    if (deft_gpu_check(cudaEventRecord(e->event, stream), "cudaEventRecord")) {
        cudaEventDestroy(e->event);
        free(e);
        return -1;
    }
    *out = e;
    return 0;
}

static int event_wait(int dev, void *event) {
    cudaStream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    return deft_gpu_check(cudaStreamWaitEvent(stream, ((gpu_event_t *)event)->event, 0),
                          "cudaStreamWaitEvent");
}

static int event_synchronize(void *event) {
    return deft_gpu_check(cudaEventSynchronize(((gpu_event_t *)event)->event),
                          "cudaEventSynchronize");
}

/* Waits already queued on it keep what it marked when they were queued. */
static void event_release(void *event) {
    gpu_event_t *e = event;
    pthread_mutex_lock(&event_lock);
    e->next = devices[e->dev].free_events;
    devices[e->dev].free_events = e;
    pthread_mutex_unlock(&event_lock);
}

int deft_gpu_name(int dev, const char **out) {
    if (check_device(dev)) return -1;
    *out = devices[dev].name;
    return 0;
}

int deft_gpu_memory(int dev, size_t *free_bytes, size_t *total_bytes) {
    if (check_device(dev) || deft_gpu_use(dev)) return -1;
    return deft_gpu_check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

/* ---- copies ---- */

/* Make `later` wait for what is queued on `earlier` so far. */
static int order_streams(cudaStream_t earlier, int earlier_dev, cudaStream_t later) {
    cudaEvent_t event;
    if (deft_gpu_use(earlier_dev) ||
        deft_gpu_check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"))
        return -1;
    int status = deft_gpu_check(cudaEventRecord(event, earlier), "cudaEventRecord");
    if (status == 0)
        status = deft_gpu_check(cudaStreamWaitEvent(later, event, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(event); /* released once the stream is past it */
    return status;
}

static int copy_between_gpus(void *dst, int dst_id, const void *src, int src_id, size_t n) {
    cudaStream_t src_stream, dst_stream;
    if (deft_gpu_enter(dst_id, &dst_stream) || deft_gpu_enter(src_id, &src_stream)) return -1;
    if (src_id == dst_id)
        return deft_gpu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, src_stream),
                              "cudaMemcpyAsync (device to device)");
    if (order_streams(dst_stream, dst_id, src_stream) || deft_gpu_use(src_id) ||
        deft_gpu_check(cudaMemcpyPeerAsync(dst, dst_id, src, src_id, n, src_stream),
                       "cudaMemcpyPeerAsync"))
        return -1;
    return order_streams(src_stream, src_id, dst_stream);
}

static int copy(void *dst, deft_device_t dst_dev, const void *src, deft_device_t src_dev,
                size_t n) {
    cudaStream_t stream;
    if (dst_dev.type == DEFT_DEV_GPU && src_dev.type == DEFT_DEV_GPU)
        return copy_between_gpus(dst, dst_dev.id, src, src_dev.id, n);
    if (src_dev.type == DEFT_DEV_GPU) { /* to the host: wait for the data */
        if (deft_gpu_enter(src_dev.id, &stream) ||
            deft_gpu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream),
                           "cudaMemcpyAsync (device to host)"))
            return -1;
        return deft_gpu_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    /* From pageable host memory the call returns once it has staged the
     * source, so the caller may reuse its buffer at once. */
    if (deft_gpu_enter(dst_dev.id, &stream)) return -1;
    return deft_gpu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream),
                          "cudaMemcpyAsync (host to device)");
}

static int synchronize_device(int id, bool whole_device) {
    if (!whole_device) return deft_gpu_synchronize(id);
    if (check_device(id) || deft_gpu_use(id)) return -1;
    return deft_gpu_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

static int synchronize_used(void) {
    for (int d = 0; d < DEFT_MAX_GPUS; d++) {
        bool used = false;
        for (int slot = 0; slot < DEFT_GPU_STREAMS; slot++) used |= made_stream(d, slot) != NULL;
        if (used && deft_gpu_synchronize(d)) return -1;
    }
    return 0;
}

static int zero(void *dst, deft_device_t dev, size_t nbytes) {
    cudaStream_t stream;
    if (deft_gpu_enter(dev.id, &stream)) return -1;
    return deft_gpu_check(cudaMemsetAsync(dst, 0, nbytes, stream), "cudaMemsetAsync");
}

static int thread_stream(int id, void **out) {
    deft_gpu_stream_t stream = NULL;
    if (deft_gpu_enter(id, &stream)) return -1;
    *out = stream;
    return 0;
}

static void *timer_start(int id, const char *name) {
    return deft_gpu_timer_start(id, name);
}

static void timer_stop(void *timer) {
    deft_gpu_timer_stop(timer);
}

const deft_gpu_backend_t deft_gpu_backend = {
    .probe = probe,
    .copy = copy,
    .zero = zero,
    .synchronize = synchronize_device,
    .synchronize_used = synchronize_used,
    .timer_start = timer_start,
    .timer_stop = timer_stop,
    .flush_timings = deft_gpu_flush_timings,
    .name = deft_gpu_name,
    .memory = deft_gpu_memory,
    .stream_slot = deft_gpu_thread_slot,
    .stream = thread_stream,
    .event_record = event_record,
    .event_wait = event_wait,
    .event_synchronize = event_synchronize,
    .event_release = event_release,
};

/* Only pointers are stored here: CUDA itself starts on first use. */
__attribute__((constructor)) static void register_gpu_layer(void) {
    deft_device_register_gpu(&deft_gpu_backend);
    deft_allocator_register(DEFT_DEV_GPU, &deft_gpu_pool);
}
