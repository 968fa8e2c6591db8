#include "core/base/memstat.h"

#include <stdatomic.h>

typedef struct device_counters {
    atomic_llong value[DEFT_MEMSTAT_COUNT];
} device_counters_t;

static device_counters_t counters[DEFT_DEVICE_SLOTS];

static atomic_llong *counter(deft_device_t dev, deft_memstat_kind_t kind) {
    return &counters[deft_device_slot(dev)].value[kind];
}

void deft_memstat_buffer_allocated(deft_device_t dev, size_t nbytes) {
    long long live = atomic_fetch_add(counter(dev, DEFT_MEMSTAT_LIVE_BYTES), (long long)nbytes);
    live += (long long)nbytes;
    atomic_fetch_add(counter(dev, DEFT_MEMSTAT_LIVE_BUFFERS), 1);
    atomic_llong *peak = counter(dev, DEFT_MEMSTAT_PEAK_BYTES);
    long long seen = atomic_load(peak);
    while (live > seen && !atomic_compare_exchange_weak(peak, &seen, live)) {
    }
}

void deft_memstat_buffer_freed(deft_device_t dev, size_t nbytes) {
    atomic_fetch_sub(counter(dev, DEFT_MEMSTAT_LIVE_BYTES), (long long)nbytes);
    atomic_fetch_sub(counter(dev, DEFT_MEMSTAT_LIVE_BUFFERS), 1);
}

void deft_memstat_cached_add(deft_device_t dev, int64_t delta) {
    atomic_fetch_add(counter(dev, DEFT_MEMSTAT_CACHED_BYTES), (long long)delta);
}

void deft_memstat_system_alloc(deft_device_t dev) {
    atomic_fetch_add(counter(dev, DEFT_MEMSTAT_SYSTEM_ALLOCS), 1);
}

int64_t deft_memstat_get(deft_device_t dev, deft_memstat_kind_t kind) {
    return (int64_t)atomic_load(counter(dev, kind));
}
