#include "core/base/fence.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/tls.h"

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
    /* The device-side checks (device_check.h) whose verdict the value of
     * the last write depends on: that write's own, and those of what it read. */
    deft_check_t **checks;
    int num_checks;
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

/* ---- device-side checks that travel with the buffers (device_check.h) ---- */

/* Checks, each held once. */
typedef struct check_list {
    deft_check_t **items;
    int n, cap;
} check_list_t;

/* The checks of the deft_fence_run in progress on this thread: those of the
 * buffers it reads, and those its kernels deferred. Runs may nest (a kernel
 * that runs one inside): the inner run's checks go to the outer's too. */
typedef struct collector {
    check_list_t list;
    struct collector *outer;
} collector_t;

static DEFT_TLS_FAST collector_t *tl_collector;
static atomic_bool synchronous_checks;

/* A run that would carry more checks than this waits for its device and
 * resolves them instead: it bounds what a buffer carries when the device
 * runs far behind the host (the engine's back-pressure usually does first). */
#define MAX_CARRIED_CHECKS 64

/* Add c (retained) unless the list has it or it is known to have passed. */
static int list_add(check_list_t *l, deft_check_t *c) {
    if (deft_check_passed(c)) return 0;
    for (int i = 0; i < l->n; i++)
        if (l->items[i] == c) return 0;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        deft_check_t **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot carry a device-side check");
        l->items = items, l->cap = cap;
    }
    l->items[l->n++] = deft_check_retain(c);
    return 0;
}

static void list_clear(check_list_t *l) {
    for (int i = 0; i < l->n; i++) deft_check_release(l->items[i]);
    free(l->items);
    *l = (check_list_t){0};
}

/* Before a run's work: wait as deft_fence_begin does and, with `checks`,
 * gather the checks of the values it reads under the same lock (all but
 * those of buffers it overwrites with a new value). */
static int begin_run(const deft_access_t *access, int n, check_list_t *checks) {
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
        bool reads = !access[i].write || access[i].value != DEFT_VALUE_NEW;
        for (int k = 0; checks && reads && status == 0 && k < f->num_checks; k++)
            status = list_add(checks, f->checks[k]);
        pthread_mutex_unlock(&f->lock);
        if (status) return -1;
    }
    return 0;
}

int deft_fence_begin(const deft_access_t *access, int n) {
    return begin_run(access, n, NULL);
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

/* A copy of l's checks (each retained) into *out; NULL when there are none. */
static int copy_checks(const check_list_t *l, deft_check_t ***out) {
    *out = NULL;
    if (!l || l->n == 0) return 0;
    if (!(*out = malloc((size_t)l->n * sizeof **out)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot carry a device-side check");
    for (int i = 0; i < l->n; i++) (*out)[i] = deft_check_retain(l->items[i]);
    return 0;
}

/* Outside any buffer's lock: the last release returns a slot to the GPU layer's pool. */
static void release_checks(deft_check_t **checks, int n) {
    for (int i = 0; i < n; i++) deft_check_release(checks[i]);
    free(checks);
}

/* A written value depends on its run's checks alone (an update's run has
 * gathered the old value's), so they replace the buffer's; a write outside
 * a collecting run (deft_fence_end) drops them. An unchanged value keeps its own. */
static int mark(deft_storage_t *s, const deft_access_t *a, fence_t *f, const check_list_t *checks) {
    deft_fences_t *fences = fences_of(s);
    bool write = a->write, new_checks = write && a->value != DEFT_VALUE_SAME;
    deft_check_t **copy = NULL;
    if (!fences || (new_checks && copy_checks(checks, &copy))) return -1;
    deft_check_t **old = NULL;
    int old_n = 0;
    pthread_mutex_lock(&fences->lock);
    if (write) {
        fence_set(&fences->write, f);
        for (int k = 0; k < DEFT_GPU_STREAMS; k++) fence_set(&fences->reads[k], NULL);
        if (new_checks) {
            old = fences->checks, old_n = fences->num_checks;
            fences->checks = copy, fences->num_checks = copy ? checks->n : 0;
        }
    } else {
        fence_set(&fences->reads[f->slot], f);
    }
    pthread_mutex_unlock(&fences->lock);
    release_checks(old, old_n);
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

static int end_run(const deft_access_t *access, int n, const check_list_t *checks) {
    const deft_gpu_backend_t *gpu = deft_device_gpu_backend();
    fence_t *made[DEFT_MAX_GPUS] = {0}; /* one per device touched */
    int slot = -1, status = 0;
    for (int i = 0; i < n && status == 0; i++) {
        deft_storage_t *s = access[i].storage;
        if (!on_gpu(s)) continue;
        if (slot < 0) slot = gpu->stream_slot();
        int id = s->device.id;
        if (!made[id]) status = fence_new(id, slot, &made[id]);
        if (status == 0) status = mark(s, &access[i], made[id], checks);
    }
    for (int d = 0; d < DEFT_MAX_GPUS; d++) fence_release(made[d]);
    return status == 0 ? 0 : wait_instead(gpu, access, n);
}

int deft_fence_end(const deft_access_t *access, int n) {
    return end_run(access, n, NULL);
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

static bool writes_host(const deft_access_t *access, int n) {
    for (int i = 0; i < n; i++)
        if (access[i].write && access[i].storage && !on_gpu(access[i].storage)) return true;
    return false;
}

/* Wait for the checks' devices and resolve them: 0, or the first failure.
 * The passed ones leave the list; the failed ones stay, to stick to the
 * buffers the run wrote. */
static int resolve_now(check_list_t *l) {
    const deft_gpu_backend_t *gpu = deft_device_gpu_backend();
    bool synced[DEFT_MAX_GPUS] = {false};
    int status = 0, kept = 0;
    for (int i = 0; i < l->n; i++) {
        int id = deft_check_device(l->items[i]);
        if (status == 0 && !synced[id]) status = gpu->synchronize(id, false);
        synced[id] = true;
    }
    for (int i = 0; i < l->n; i++) {
        if (status == 0 && deft_check_resolve(l->items[i])) status = -1;
        if (deft_check_passed(l->items[i]))
            deft_check_release(l->items[i]);
        else
            l->items[kept++] = l->items[i];
    }
    l->n = kept;
    return status;
}

/* Where the host would wait anyway (a run that wrote host memory, a copy
 * from the device, has waited for its inputs), or the run carries too many,
 * its checks are resolved now rather than carried on. */
static int settle(check_list_t *l, const deft_access_t *access, int n) {
    if (l->n == 0 || (l->n <= MAX_CARRIED_CHECKS && !writes_host(access, n))) return 0;
    return resolve_now(l);
}

int deft_fence_run(const deft_access_t *access, int n, int (*fn)(void *ctx), void *ctx) {
    collector_t c = {.outer = tl_collector};
    bool defer = !atomic_load_explicit(&synchronous_checks, memory_order_relaxed);
    if (begin_run(access, n, defer ? &c.list : NULL)) {
        list_clear(&c.list);
        return -1;
    }
    if (defer) tl_collector = &c;
    int status = fn(ctx);
    tl_collector = c.outer;
    if (status == 0) status = settle(&c.list, access, n);
    if (end_run(access, n, &c.list)) status = -1;
    for (int i = 0; c.outer && i < c.list.n; i++)
        if (list_add(&c.outer->list, c.list.items[i])) status = -1;
    list_clear(&c.list);
    return status;
}

bool deft_check_deferring(void) {
    return tl_collector != NULL;
}

int deft_check_defer(deft_check_t *check) {
    int status = list_add(&tl_collector->list, check);
    deft_check_release(check);
    return status;
}

void deft_fence_set_synchronous_checks(bool on) {
    atomic_store_explicit(&synchronous_checks, on, memory_order_relaxed);
}

int deft_fence_host_check(deft_storage_t *storage) {
    deft_fences_t *f =
        on_gpu(storage) ? atomic_load_explicit(&storage->fences, memory_order_acquire) : NULL;
    if (!f) return 0;
    int status = 0;
    pthread_mutex_lock(&f->lock);
    /* Resolving only words a message: no lock, no wait. A check still
     * pending belongs to a write that raced past the caller's wait: the
     * waiter of that write resolves it. */
    for (int k = 0; k < f->num_checks && status == 0; k++) {
        deft_check_t *c = f->checks[k];
        if (!deft_check_pending(c)) status = deft_check_resolve(c);
    }
    pthread_mutex_unlock(&f->lock);
    return status;
}

void deft_fences_drop_checks(deft_fences_t *fences) {
    if (!fences) return;
    pthread_mutex_lock(&fences->lock);
    deft_check_t **old = fences->checks;
    int old_n = fences->num_checks;
    fences->checks = NULL, fences->num_checks = 0;
    pthread_mutex_unlock(&fences->lock);
    release_checks(old, old_n);
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
    for (int i = 0; i < n; i++) access[i] = (deft_access_t){t[i].storage, write, DEFT_VALUE_NEW};
}

long deft_fence_events_recorded(void) {
    return atomic_load_explicit(&events_recorded, memory_order_relaxed);
}

void deft_fences_free(deft_fences_t *fences) {
    if (!fences) return;
    deft_fences_drop_checks(fences);
    fence_release(fences->write);
    for (int k = 0; k < DEFT_GPU_STREAMS; k++) fence_release(fences->reads[k]);
    pthread_mutex_destroy(&fences->lock);
    free(fences);
}
