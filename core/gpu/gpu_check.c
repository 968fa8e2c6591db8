/* The check slots (gpu_check.h): made 64 at a time, kept per device and
 * stream, reused oldest first once their last verdict has landed. */
#include "core/gpu/gpu_check.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/gpu/gpu.h"

#define SLOTS_PER_CHUNK 64

/* A stream's free slots, oldest given back first. */
typedef struct slot_list {
    deft_gpu_check_slot_t *head, *tail;
} slot_list_t;

static struct {
    pthread_mutex_t lock;
    slot_list_t free[DEFT_GPU_STREAMS];
} pools[DEFT_MAX_GPUS];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;
static atomic_long slots_out;

static void init_pools(void) {
    for (int d = 0; d < DEFT_MAX_GPUS; d++) pthread_mutex_init(&pools[d].lock, NULL);
}

/* Add a chunk of slots to the free list of `stream` (the pool's lock held).
 * The memory lives as long as the process, as the slots do. */
static int grow(int dev, int stream) {
    deft_gpu_check_slot_t *slots = calloc(SLOTS_PER_CHUNK, sizeof *slots);
    deft_check_verdict_t *device = NULL, *host = NULL;
    size_t bytes = SLOTS_PER_CHUNK * sizeof(deft_check_verdict_t);
    if (!slots) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate device-side checks");
    if (deft_gpu_use(dev) ||
        deft_gpu_check(cudaMalloc((void **)&device, bytes), "cudaMalloc (device-side checks)") ||
        deft_gpu_check(cudaHostAlloc((void **)&host, bytes, cudaHostAllocPortable),
                       "cudaHostAlloc (device-side checks)")) {
        if (device) cudaFree(device);
        free(slots);
        return -1;
    }
    slot_list_t *list = &pools[dev].free[stream];
    for (int i = 0; i < SLOTS_PER_CHUNK; i++) {
        host[i].first = DEFT_CHECK_PASSED; /* landed: free to use */
        slots[i] = (deft_gpu_check_slot_t){&device[i], &host[i], dev, stream, list->head};
        if (!list->head) list->tail = &slots[i];
        list->head = &slots[i];
    }
    return 0;
}

/* The first slot whose last verdict has landed in host memory, unlinked;
 * NULL when none has. A slot given back early (its check dropped before
 * the device answered) may still have a copy to its host memory in flight:
 * the host must not mark it pending again until that copy has landed. */
static deft_gpu_check_slot_t *take_landed(slot_list_t *list) {
    deft_gpu_check_slot_t **link = &list->head, *prev = NULL;
    for (int tries = 0; *link && tries < 8; tries++, prev = *link, link = &(*link)->next) {
        deft_gpu_check_slot_t *s = *link;
        if (s->host->first == DEFT_CHECK_PENDING) continue;
        *link = s->next;
        if (list->tail == s) list->tail = prev;
        return s;
    }
    return NULL;
}

int deft_gpu_check_slot_take(int dev, deft_gpu_check_slot_t **out) {
    pthread_once(&pools_once, init_pools);
    int stream = deft_gpu_thread_slot();
    slot_list_t *list = &pools[dev].free[stream];
    pthread_mutex_lock(&pools[dev].lock);
    *out = take_landed(list);
    int status = *out ? 0 : grow(dev, stream);
    if (!*out && status == 0) *out = take_landed(list);
    pthread_mutex_unlock(&pools[dev].lock);
    if (status == 0) atomic_fetch_add_explicit(&slots_out, 1, memory_order_relaxed);
    return status;
}

void deft_gpu_check_slot_give(void *slot) {
    deft_gpu_check_slot_t *s = slot;
    slot_list_t *list = &pools[s->dev].free[s->stream];
    s->next = NULL;
    pthread_mutex_lock(&pools[s->dev].lock);
    if (list->tail)
        list->tail->next = s;
    else
        list->head = s;
    list->tail = s;
    pthread_mutex_unlock(&pools[s->dev].lock);
    atomic_fetch_sub_explicit(&slots_out, 1, memory_order_relaxed);
}

long deft_gpu_check_slots_out(void) {
    return atomic_load_explicit(&slots_out, memory_order_relaxed);
}
