/* Device-side timing of GPU operators for the profiler (gpu_timing.c). */
#ifndef DEFT_CORE_GPU_TIMING_H
#define DEFT_CORE_GPU_TIMING_H

#include "core/gpu/gpu.h"

typedef struct deft_gpu_timer deft_gpu_timer_t;

/* Start timing what is queued next on dev's stream, as operator `name` (a
 * string that lives on: the operator's); NULL when it cannot (nothing is
 * recorded then, and stop accepts NULL). */
deft_gpu_timer_t *deft_gpu_timer_start(int dev, const char *name);
void deft_gpu_timer_stop(deft_gpu_timer_t *timer);
/* Wait for every pending timing and record its span. */
void deft_gpu_flush_timings(void);

#endif
