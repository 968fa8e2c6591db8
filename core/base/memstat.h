/* Per-device memory counters behind DeftGetMemoryStat. */
#ifndef DEFT_CORE_MEMSTAT_H
#define DEFT_CORE_MEMSTAT_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/device.h"

/* Same numbers as the public DeftMemoryStat. */
typedef enum deft_memstat_kind {
    DEFT_MEMSTAT_LIVE_BYTES = 0,
    DEFT_MEMSTAT_LIVE_BUFFERS = 1,
    DEFT_MEMSTAT_PEAK_BYTES = 2,
    DEFT_MEMSTAT_CACHED_BYTES = 3,
    DEFT_MEMSTAT_SYSTEM_ALLOCS = 4,
    DEFT_MEMSTAT_COUNT
} deft_memstat_kind_t;

void deft_memstat_buffer_allocated(deft_device_t dev, size_t nbytes);
void deft_memstat_buffer_freed(deft_device_t dev, size_t nbytes);
void deft_memstat_cached_add(deft_device_t dev, int64_t delta);
/* Bytes held from the system changed (allocators' slow paths); tracks the peak. */
void deft_memstat_held_add(deft_device_t dev, int64_t delta);

int64_t deft_memstat_get(deft_device_t dev, deft_memstat_kind_t kind);

#endif
