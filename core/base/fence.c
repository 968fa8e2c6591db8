#include "core/base/fence.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/base/error.h"

/* An event recorded on one stream, shared by every buffer one operation touched. */
typedef struct fence {
    atomic_int refcount;
    int slot;    /* the stream it was recorded on */
    void *event; /* the GPU layer's */
} fence_t;

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
    deft_device_gpu_backend()->event_release(f->event);
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

/* The calling thread's stream of GPU `id` waits for f, unless f is on that stream. */
static int wait_other(const deft_gpu_backend_t *gpu, int id, const fence_t *f, int slot) {
    return f && f->slot != slot ? gpu->event_wait(id, f->event) : 0;
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
        int status = wait_other(gpu, s->device.id, f->write, slot);
        for (int k = 0; access[i].write && status == 0 && k < DEFT_GPU_STREAMS; k++)
            status = wait_other(gpu, s->device.id, f->reads[k], slot);
        pthread_mutex_unlock(&f->lock);
        if (status) return -1;
    }
    return 0;
}

static int record(const deft_gpu_backend_t *gpu, int id, int slot, fence_t **out) {
    fence_t *f = malloc(sizeof *f);
    if (!f) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a GPU fence");
    if (gpu->event_record(id, &f->event)) {
        free(f);
        return -1;
    }
    atomic_init(&f->refcount, 1);
    f->slot = slot;
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

/* When a fence cannot be made, the work is waited for instead: then
 * nothing later needs to wait for it. */
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
        if (!made[id]) status = record(gpu, id, slot, &made[id]);
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
    if (f->write) pending[n++] = fence_retain(f->write);
    for (int k = 0; write && k < DEFT_GPU_STREAMS; k++)
        if (f->reads[k]) pending[n++] = fence_retain(f->reads[k]);
    pthread_mutex_unlock(&f->lock);
    const deft_gpu_backend_t *gpu = deft_device_gpu_backend();
    int status = 0;
    for (int k = 0; k < n; k++) {
        if (status == 0) status = gpu->event_synchronize(pending[k]->event);
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

bool deft_fence_any_gpu(const deft_access_t *access, int n) {
    for (int i = 0; i < n; i++)
        if (on_gpu(access[i].storage)) return true;
    return false;
}

void deft_fence_tensors(const deft_tensor_t *t, int n, bool write, deft_access_t *access) {
    for (int i = 0; i < n; i++) access[i] = (deft_access_t){t[i].storage, write};
}

void deft_fences_free(deft_fences_t *fences) {
    if (!fences) return;
    fence_release(fences->write);
    for (int k = 0; k < DEFT_GPU_STREAMS; k++) fence_release(fences->reads[k]);
    pthread_mutex_destroy(&fences->lock);
    free(fences);
}
