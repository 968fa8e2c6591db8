#include "core/base/fence.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/base/error.h"

/*
 * A point on one stream, shared by every buffer one operation touched. Its
 * event is recorded lazily, the first time another stream or the host must
 * wait for it: work that stays on one stream records none. Recorded later,
 * on the same stream, the event marks the fenced work and whatever was
 * queued after it: a wait for it waits a little more than needed, never
 * less (the fence is published, under a buffer's lock, only after its work
 * was queued, so whoever records the event records it after that work).
 */
typedef struct fence {
    atomic_int refcount;
    int id, slot;          /* the device and stream its work was queued on */
    _Atomic(void *) event; /* the GPU layer's, once someone waited; else NULL */
} fence_t;

/* Events the fences recorded, over the process's life (for tests). */
static atomic_long events_recorded;

struct deft_fences {
    pthread_mutex_t lock;
    fence_t *write;
    fence_t *reads[DEFT_GPU_STREAMS]; /* by stream */
};

static fence_t *fence_retain(fence_t *f) {
    atomic_fetch_add_explicit(&f->refcount, 1, memory_order_relaxed);
    return f;
}

static void fence_release(fence_t *f) {
    if (!f || atomic_fetch_sub_explicit(&f->refcount, 1, memory_order_acq_rel) != 1) return;
    void *event = atomic_load_explicit(&f->event, memory_order_acquire);
    if (event) deft_device_gpu_backend()->event_release(event);
    free(f);
}

static void fence_set(fence_t **slot, fence_t *f) {
    fence_release(*slot);
    *slot = f ? fence_retain(f) : NULL;
}

static bool on_gpu(const deft_storage_t *s) {
    return s && s->device.type == DEFT_DEV_GPU && s->data;
}

/* The storage's fences, made on first use (two threads may race to make them). */
static deft_fences_t *fences_of(deft_storage_t *s) {
    deft_fences_t *f = atomic_load_explicit(&s->fences, memory_order_acquire);
    if (f) return f;
    deft_fences_t *made = calloc(1, sizeof *made);
    if (!made) {
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the fences of a GPU buffer");
        return NULL;
    }
    pthread_mutex_init(&made->lock, NULL);
    if (atomic_compare_exchange_strong(&s->fences, &f, made)) return made;
    pthread_mutex_destroy(&made->lock);
    free(made);
    return f;
}

/* f's event, recorded now on f's stream if nobody waited for f before; NULL
 * (error set) when it cannot be. Two threads may race to record it: one
 * event wins, the other goes back unused. */
static void *fence_event(const deft_gpu_backend_t *gpu, fence_t *f) {
    void *event = atomic_load_explicit(&f->event, memory_order_acquire);
    if (event) return event;
    void *made;
    if (gpu->event_record(f->id, f->slot, &made)) return NULL;
    atomic_fetch_add_explicit(&events_recorded, 1, memory_order_relaxed);
    if (atomic_compare_exchange_strong_explicit(&f->event, &event, made, memory_order_acq_rel,
                                                memory_order_acquire))
        return made;
    gpu->event_release(made);
    return event;
}

/* The calling thread's stream of GPU `id` waits for f, unless f is on that
 * stream. Without an event, the host waits for f's device instead: a wait
 * is never skipped. */
static int wait_other(const deft_gpu_backend_t *gpu, int id, fence_t *f, int slot) {
    if (!f || f->slot == slot) return 0;
    void *event = fence_event(gpu, f);
    return event ? gpu->event_wait(id, event) : gpu->synchronize(f->id, false);
}

/* The last write, for an access (write: also the reads since), unless the
 * read of the write's own stream is waited for too: that read was marked
 * after the write was (marking a write drops the reads), so its event,
 * recorded later still on the same stream, covers the write. */
static fence_t *write_to_wait(const deft_fences_t *f, bool write) {
    return write && f->write && f->reads[f->write->slot] ? NULL : f->write;
}

int deft_fence_begin(const deft_access_t *access, int n) {
    const deft_gpu_backend_t *gpu = deft_device_gpu_backend();
    int slot = -1;
    for (int i = 0; i < n; i++) {
        deft_storage_t *s = access[i].storage;
        deft_fences_t *f =
            on_gpu(s) ? atomic_load_explicit(&s->fences, memory_order_acquire) : NULL;
        if (!f) continue; /* no GPU work on it yet: nothing to wait for */
        if (slot < 0) slot = gpu->stream_slot();
        pthread_mutex_lock(&f->lock);
        int status = wait_other(gpu, s->device.id, write_to_wait(f, access[i].write), slot);
        for (int k = 0; access[i].write && status == 0 && k < DEFT_GPU_STREAMS; k++)
            status = wait_other(gpu, s->device.id, f->reads[k], slot);
        pthread_mutex_unlock(&f->lock);
        if (status) return -1;
    }
    return 0;
}

/* A fence for the work just queued on stream `slot` of GPU `id` (no event yet). */
static int fence_new(int id, int slot, fence_t **out) {
    fence_t *f = malloc(sizeof *f);
    if (!f) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a GPU fence");
    atomic_init(&f->refcount, 1);
    f->id = id, f->slot = slot;
    atomic_init(&f->event, NULL);
    *out = f;
    return 0;
}

static int mark(deft_storage_t *s, bool write, fence_t *f) {
    deft_fences_t *fences = fences_of(s);
    if (!fences) return -1;
    pthread_mutex_lock(&fences->lock);
    if (write) {
        fence_set(&fences->write, f);
        for (int k = 0; k < DEFT_GPU_STREAMS; k++) fence_set(&fences->reads[k], NULL);
    } else {
        fence_set(&fences->reads[f->slot], f);
    }
    pthread_mutex_unlock(&fences->lock);
    return 0;
}

/* When a fence cannot be made (out of memory), the work is waited for
 * instead: then nothing later needs to wait for it. */
static int wait_instead(const deft_gpu_backend_t *gpu, const deft_access_t *access, int n) {
    for (int i = 0; i < n; i++)
        if (on_gpu(access[i].storage) && gpu->synchronize(access[i].storage->device.id, false))
            return -1;
    return 0;
}

int deft_fence_end(const deft_access_t *access, int n) {
    const deft_gpu_backend_t *gpu = deft_device_gpu_backend();
    fence_t *made[DEFT_MAX_GPUS] = {0}; /* one per device touched */
    int slot = -1, status = 0;
    for (int i = 0; i < n && status == 0; i++) {
        deft_storage_t *s = access[i].storage;
        if (!on_gpu(s)) continue;
        if (slot < 0) slot = gpu->stream_slot();
        int id = s->device.id;
        if (!made[id]) status = fence_new(id, slot, &made[id]);
        if (status == 0) status = mark(s, access[i].write, made[id]);
    }
    for (int d = 0; d < DEFT_MAX_GPUS; d++) fence_release(made[d]);
    return status == 0 ? 0 : wait_instead(gpu, access, n);
}

int deft_fence_host_wait(deft_storage_t *storage, bool write) {
    deft_fences_t *f =
        on_gpu(storage) ? atomic_load_explicit(&storage->fences, memory_order_acquire) : NULL;
    if (!f) return 0;
    fence_t *pending[1 + DEFT_GPU_STREAMS];
    int n = 0;
    pthread_mutex_lock(&f->lock);
    fence_t *last = write_to_wait(f, write);
    if (last) pending[n++] = fence_retain(last);
    for (int k = 0; write && k < DEFT_GPU_STREAMS; k++)
        if (f->reads[k]) pending[n++] = fence_retain(f->reads[k]);
    pthread_mutex_unlock(&f->lock);
    const deft_gpu_backend_t *gpu = deft_device_gpu_backend();
    int status = 0;
    for (int k = 0; k < n; k++) {
        void *event = status == 0 ? fence_event(gpu, pending[k]) : NULL;
        if (status == 0)
            status =
                event ? gpu->event_synchronize(event) : gpu->synchronize(pending[k]->id, false);
        fence_release(pending[k]);
    }
    return status;
}

int deft_fence_run(const deft_access_t *access, int n, int (*fn)(void *ctx), void *ctx) {
    if (deft_fence_begin(access, n)) return -1;
    int status = fn(ctx);
    if (deft_fence_end(access, n)) return -1;
    return status;
}

int deft_fence_join(int id, int slot) {
    const deft_gpu_backend_t *gpu = deft_device_gpu_backend();
    if (slot == gpu->stream_slot()) return 0;
    void *event;
    if (gpu->event_record(id, slot, &event)) return gpu->synchronize(id, false);
    atomic_fetch_add_explicit(&events_recorded, 1, memory_order_relaxed);
    int status = gpu->event_wait(id, event);
    gpu->event_release(event); /* the wait queued keeps what it marked */
    return status;
}

bool deft_fence_any_gpu(const deft_access_t *access, int n) {
    for (int i = 0; i < n; i++)
        if (on_gpu(access[i].storage)) return true;
    return false;
}

void deft_fence_tensors(const deft_tensor_t *t, int n, bool write, deft_access_t *access) {
    for (int i = 0; i < n; i++) access[i] = (deft_access_t){t[i].storage, write};
}

long deft_fence_events_recorded(void) {
    return atomic_load_explicit(&events_recorded, memory_order_relaxed);
}

void deft_fences_free(deft_fences_t *fences) {
    if (!fences) return;
    fence_release(fences->write);
    for (int k = 0; k < DEFT_GPU_STREAMS; k++) fence_release(fences->reads[k]);
    pthread_mutex_destroy(&fences->lock);
    free(fences);
}
