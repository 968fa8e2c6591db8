/*
 * Profiler recording. Each thread appends events to its own buffer under
 * the buffer's own lock, which only a dump or a statistics read ever
 * contends; nothing is locked or allocated while the profiler is off.
 */
#define _GNU_SOURCE
#include "core/base/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/base/device.h"
#include "core/base/error.h"
#include "core/base/profiler_buffer.h"
#include "core/base/tls.h"

atomic_int deft_profiler_active;
pthread_mutex_t deft_prof_buffers_lock = PTHREAD_MUTEX_INITIALIZER;
prof_buffer_t *deft_prof_buffers;
prof_options_t deft_prof_options = {"profile.json", 0, 0};

/* What the options ask for, and whether the profiler runs and is not paused. */
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the three below */
static int wanted = DEFT_PROF_IMPERATIVE | DEFT_PROF_SYMBOLIC | DEFT_PROF_USER;
static bool running, paused;
static DEFT_TLS_FAST prof_buffer_t *tl_buffer;
static DEFT_TLS_FAST const char *tl_prefix; /* the custom operator whose callback runs here */

/* Called with control_lock held. */
static void publish(void) {
    atomic_store_explicit(&deft_profiler_active, running && !paused ? wanted : 0,
                          memory_order_relaxed);
}

double deft_profiler_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static prof_buffer_t *buffer(void) {
    if (tl_buffer) return tl_buffer;
    prof_buffer_t *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->lock, NULL);
    b->tid = (long)syscall(SYS_gettid);
    if (pthread_getname_np(pthread_self(), b->thread_name, sizeof b->thread_name) != 0)
        b->thread_name[0] = '\0';
    pthread_mutex_lock(&deft_prof_buffers_lock);
    b->next = deft_prof_buffers;
    deft_prof_buffers = b;
    pthread_mutex_unlock(&deft_prof_buffers_lock);
    return tl_buffer = b;
}

/* Append; an event that finds no memory is dropped (profiling never fails a call). */
static void append(prof_buffer_t *b, const prof_event_t *e) {
    pthread_mutex_lock(&b->lock);
    if (b->count == b->capacity) {
        size_t cap = b->capacity ? 2 * b->capacity : 1024;
        prof_event_t *grown = realloc(b->events, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&b->lock);
            return;
        }
        b->events = grown, b->capacity = cap;
    }
    b->events[b->count++] = *e;
    pthread_mutex_unlock(&b->lock);
}

static void record(const prof_event_t *e) {
    prof_buffer_t *b = buffer();
    if (b) append(b, e);
}

const char *deft_profiler_set_prefix(const char *prefix) {
    const char *previous = tl_prefix;
    tl_prefix = prefix;
    return previous;
}

/* Operators a custom operator calls: "Custom Operators" / "custom::operator". */
static void rename_for_prefix(const char **domain, const char **name) {
    if (!tl_prefix || strcmp(*domain, "operator") != 0) return;
    char text[256];
    snprintf(text, sizeof text, "%s::%s", tl_prefix, *name);
    const char *interned = deft_profiler_intern(text);
    if (!interned) return;
    *domain = "Custom Operators";
    *name = interned;
}

void deft_profiler_span(const char *domain, const char *name, double start, double end) {
    deft_profiler_op_span(domain, name, NULL, start, end);
}

void deft_profiler_op_span(const char *domain, const char *name, const char *device, double start,
                           double end) {
    rename_for_prefix(&domain, &name);
    record(&(prof_event_t){.domain = domain,
                           .name = name,
                           .ts = start,
                           .dur = end - start,
                           .phase = 'X',
                           .device = device});
}

/* The buffer of a device's track: one per device, made on first use, with
 * a made-up thread id past any real one so trace viewers show it apart. */
static prof_buffer_t *device_buffer(const char *device) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static prof_buffer_t *tracks[DEFT_DEVICE_SLOTS];
    static int count;
    pthread_mutex_lock(&lock);
    prof_buffer_t *b = NULL;
    for (int k = 0; k < count && !b; k++)
        if (strcmp(tracks[k]->thread_name, device) == 0) b = tracks[k];
    if (!b && count < DEFT_DEVICE_SLOTS && (b = calloc(1, sizeof *b))) {
        pthread_mutex_init(&b->lock, NULL);
        b->tid = 0x40000000L + count;
        snprintf(b->thread_name, sizeof b->thread_name, "%s", device);
        pthread_mutex_lock(&deft_prof_buffers_lock);
        b->next = deft_prof_buffers;
        deft_prof_buffers = b;
        pthread_mutex_unlock(&deft_prof_buffers_lock);
        tracks[count++] = b;
    }
    pthread_mutex_unlock(&lock);
    return b;
}

const char *deft_profiler_device_name(deft_device_t dev) {
    if (dev.type != DEFT_DEV_GPU) return "cpu(0)";
    char text[DEFT_DEVICE_STR_MAX];
    return deft_profiler_intern(deft_device_format(dev, text, sizeof text));
}

void deft_profiler_device_span(const char *device, const char *name, double start, double end) {
    const char *track = deft_profiler_intern(device);
    prof_buffer_t *b = track ? device_buffer(track) : NULL;
    if (b)
        append(b, &(prof_event_t){.domain = "device",
                                  .name = name,
                                  .ts = start,
                                  .dur = end - start,
                                  .phase = 'X',
                                  .device = track});
}

void deft_profiler_instant(const char *domain, const char *name, char scope, const char *arg_key,
                           int64_t arg) {
    record(&(prof_event_t){.domain = domain,
                           .name = name,
                           .ts = deft_profiler_now(),
                           .phase = 'i',
                           .scope = scope,
                           .arg = arg_key,
                           .value = arg});
}

void deft_profiler_counter(const char *domain, const char *name, int64_t value) {
    record(&(prof_event_t){
        .domain = domain, .name = name, .ts = deft_profiler_now(), .phase = 'C', .value = value});
}

void deft_profiler_async(char phase, const char *domain, const char *name, uint64_t id, double ts) {
    record(&(prof_event_t){.domain = domain, .name = name, .ts = ts, .phase = phase, .id = id});
}

/* ---- interned names: events keep pointers, so user names live forever ---- */

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static char **interned;
static size_t interned_count, interned_capacity;

const char *deft_profiler_intern(const char *text) {
    pthread_mutex_lock(&intern_lock);
    const char *found = NULL;
    for (size_t i = 0; i < interned_count && !found; i++)
        if (strcmp(interned[i], text) == 0) found = interned[i];
    if (!found && interned_count == interned_capacity) {
        size_t cap = interned_capacity ? 2 * interned_capacity : 64;
        char **grown = realloc(interned, cap * sizeof *grown);
        if (grown) interned = grown, interned_capacity = cap;
    }
    if (!found && interned_count < interned_capacity && (found = strdup(text)))
        interned[interned_count++] = (char *)found;
    pthread_mutex_unlock(&intern_lock);
    return found;
}

/* ---- control ---- */

static int apply_option(const char *key, const char *value, bool apply);

static int parse_flag(const char *key, const char *value, bool *out) {
    if (!strcmp(value, "1") || !strcasecmp(value, "true")) return *out = true, 0;
    if (!strcmp(value, "0") || !strcasecmp(value, "false")) return *out = false, 0;
    return deft_error(DEFT_ERR_PARSE, "%s is '%s', expected true, false, 1 or 0", key, value);
}

int deft_profiler_check_option(const char *key, const char *value) {
    return apply_option(key, value, false);
}

int deft_profiler_set_option(const char *key, const char *value) {
    return apply_option(key, value, true);
}

/* Validate an option, and set it when `apply`. */
static int apply_option(const char *key, const char *value, bool apply) {
    static const struct {
        const char *key;
        int bits;
    } flags[] = {{"profile_all", DEFT_PROF_IMPERATIVE | DEFT_PROF_SYMBOLIC | DEFT_PROF_MEMORY |
                                     DEFT_PROF_API | DEFT_PROF_USER},
                 {"profile_imperative", DEFT_PROF_IMPERATIVE},
                 {"profile_symbolic", DEFT_PROF_SYMBOLIC},
                 {"profile_memory", DEFT_PROF_MEMORY},
                 {"profile_api", DEFT_PROF_API}};
    bool on = false;
    if (!strcmp(key, "filename")) {
        if (!value[0] || strlen(value) >= sizeof deft_prof_options.filename)
            return deft_error(DEFT_ERR_VALUE, "filename is empty or longer than %zu bytes",
                              sizeof deft_prof_options.filename - 1);
        if (!apply) return 0;
        pthread_mutex_lock(&deft_prof_buffers_lock);
        strcpy(deft_prof_options.filename, value);
        pthread_mutex_unlock(&deft_prof_buffers_lock);
        return 0;
    }
    if (!strcmp(key, "aggregate_stats") || !strcmp(key, "continuous_dump")) {
        if (parse_flag(key, value, &on)) return -1;
        if (!apply) return 0;
        pthread_mutex_lock(&deft_prof_buffers_lock);
        *(key[0] == 'a' ? &deft_prof_options.aggregate : &deft_prof_options.continuous) = on;
        pthread_mutex_unlock(&deft_prof_buffers_lock);
        return 0;
    }
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (strcmp(key, flags[i].key) != 0) continue;
        if (parse_flag(key, value, &on)) return -1;
        if (!apply) return 0;
        pthread_mutex_lock(&control_lock);
        wanted = on ? wanted | flags[i].bits : wanted & ~flags[i].bits;
        publish();
        pthread_mutex_unlock(&control_lock);
        return 0;
    }
    return deft_error(DEFT_ERR_VALUE,
                      "unknown option '%s' (expected profile_all, profile_imperative, "
                      "profile_symbolic, profile_memory, profile_api, aggregate_stats, "
                      "continuous_dump or filename)",
                      key);
}

void deft_profiler_set_running(bool on) {
    pthread_mutex_lock(&control_lock);
    running = on;
    publish();
    pthread_mutex_unlock(&control_lock);
}

void deft_profiler_set_paused(bool on) {
    pthread_mutex_lock(&control_lock);
    paused = on;
    publish();
    pthread_mutex_unlock(&control_lock);
}
