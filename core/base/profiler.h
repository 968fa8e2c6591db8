/*
 * The profiler's recording side, used by every layer: spans, instants,
 * counters and async spans go to a buffer of the calling thread. Whether
 * anything is recorded is one relaxed load of a flag word, so call sites
 * cost a predictable branch while the profiler is off.
 */
#ifndef DEFT_CORE_PROFILER_H
#define DEFT_CORE_PROFILER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/base/device.h"

/* What is being recorded now (0 while stopped or paused). */
enum {
    DEFT_PROF_IMPERATIVE = 1, /* operator calls run one by one */
    DEFT_PROF_SYMBOLIC = 2,   /* nodes of executor and deferred-compute runs */
    DEFT_PROF_MEMORY = 4,     /* storage allocations and frees */
    DEFT_PROF_API = 8,        /* engine waits */
    DEFT_PROF_USER = 16       /* user domains, tasks, counters, markers */
};

extern atomic_int deft_profiler_active;

static inline bool deft_profiling(int what) {
    return (atomic_load_explicit(&deft_profiler_active, memory_order_relaxed) & what) != 0;
}

/* Microseconds on a monotonic clock (the trace's time base). */
double deft_profiler_now(void);

/* Names and domains are kept by pointer: static strings, or deft_profiler_intern's. */
const char *deft_profiler_intern(const char *text);
/* A device's name as spans keep it ("cpu(0)", "gpu(1)"). */
const char *deft_profiler_device_name(deft_device_t dev);

/* Name the operators this thread runs after `prefix` (a custom operator's
 * callback); NULL ends it. Returns the previous prefix. */
const char *deft_profiler_set_prefix(const char *prefix);

/* A span on this thread, from start to end (microseconds). */
void deft_profiler_span(const char *domain, const char *name, double start, double end);
/* An operator's span, with the device it ran on ("cpu(0)"). */
void deft_profiler_op_span(const char *domain, const char *name, const char *device, double start,
                           double end);
/* A span measured on a device (a GPU kernel's time, from device events), on
 * that device's own track of the trace ("gpu(0)"), in domain "device". */
void deft_profiler_device_span(const char *device, const char *name, double start, double end);

/* An instant on this thread; scope 'g' (global), 'p' (process) or 't' (thread). */
void deft_profiler_instant(const char *domain, const char *name, char scope, const char *arg_key,
                           int64_t arg);
/* A counter's new value. */
void deft_profiler_counter(const char *domain, const char *name, int64_t value);
/* Begin ('b') or end ('e') of an async span with this id (may cross threads). */
void deft_profiler_async(char phase, const char *domain, const char *name, uint64_t id, double ts);

/* The control side (profiler_control.c's API); -1 with an error on bad input. */
int deft_profiler_check_option(const char *key, const char *value);
int deft_profiler_set_option(const char *key, const char *value);
void deft_profiler_set_running(bool running);
void deft_profiler_set_paused(bool paused);
int deft_profiler_dump(bool finished);
/* The statistics as text (table or JSON), owned by the profiler until the next call. */
int deft_profiler_stats(bool reset, bool json, const char **out);
void deft_profiler_reset(void);

#endif
