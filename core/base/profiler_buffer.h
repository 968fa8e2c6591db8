/* Between the profiler's recording (profiler.c) and its output (profiler_dump.c). */
#ifndef DEFT_CORE_PROFILER_BUFFER_H
#define DEFT_CORE_PROFILER_BUFFER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct prof_event {
    const char *domain, *name;
    double ts, dur;     /* microseconds */
    int64_t value;      /* counter value, or the instant's argument */
    uint64_t id;        /* async spans */
    const char *arg;    /* the instant's argument name, or NULL */
    const char *device; /* spans of operators: where they ran */
    char phase;         /* 'X' span, 'i' instant, 'C' counter, 'b'/'e' async */
    char scope;         /* instants: 'g', 'p' or 't' */
} prof_event_t;

/* One per thread that recorded; they live as long as the process (a thread
 * that exits leaves its events to be dumped). */
typedef struct prof_buffer {
    pthread_mutex_t lock; /* the owner appends; dumps and statistics read */
    long tid;
    char thread_name[32];
    prof_event_t *events;
    size_t count, capacity;
    size_t aggregated; /* events [0, aggregated) are in the statistics already */
    struct prof_buffer *next;
} prof_buffer_t;

/* Every buffer, newest first; the list only grows (guarded by the lock). */
extern pthread_mutex_t deft_prof_buffers_lock;
extern prof_buffer_t *deft_prof_buffers;

/* Options the output reads (set under deft_prof_buffers_lock). */
typedef struct prof_options {
    char filename[4096];
    int continuous;
    int aggregate;
} prof_options_t;
extern prof_options_t deft_prof_options;

#endif
