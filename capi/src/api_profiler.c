/* The profiler's control, its statistics, and user domains, spans and counters. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "capi/src/api.h"
#include "core/base/profiler.h"

int DeftProfilerSetConfig(int num_params, const char *const *keys, const char *const *vals) {
    API_BEGIN();
    if (num_params < 0 || (num_params > 0 && (!keys || !vals)))
        return deft_error(DEFT_ERR_VALUE, "num_params is %d with keys %p and vals %p", num_params,
                          (const void *)keys, (const void *)vals);
    for (int i = 0; i < num_params; i++)
        if (!keys[i] || !vals[i])
            return deft_error(DEFT_ERR_VALUE, "keys[%d] or vals[%d] is NULL", i, i);
    /* Check every option before changing any, so a bad call changes nothing. */
    for (int i = 0; i < num_params; i++)
        if (deft_profiler_check_option(keys[i], vals[i])) return -1;
    for (int i = 0; i < num_params; i++)
        if (deft_profiler_set_option(keys[i], vals[i])) return -1;
    return 0;
}

static int check_switch(int value, const char *what) {
    if (value == 0 || value == 1) return 0;
    return deft_error(DEFT_ERR_VALUE, "%s is %d, expected 0 or 1", what, value);
}

int DeftProfilerSetState(int running) {
    API_BEGIN();
    if (check_switch(running, "running")) return -1;
    deft_profiler_set_running(running);
    return 0;
}

int DeftProfilerPause(int paused) {
    API_BEGIN();
    if (check_switch(paused, "paused")) return -1;
    deft_profiler_set_paused(paused);
    return 0;
}

int DeftProfilerDump(int finished) {
    API_BEGIN();
    if (check_switch(finished, "finished")) return -1;
    return deft_profiler_dump(finished);
}

int DeftProfilerDumps(int reset, int format, const char **out) {
    API_BEGIN();
    if (check_switch(reset, "reset") || api_check_out(out, "out")) return -1;
    if (format != DEFT_PROFILER_TABLE && format != DEFT_PROFILER_JSON)
        return deft_error(DEFT_ERR_VALUE, "format is %d, expected DEFT_PROFILER_TABLE or _JSON",
                          format);
    return deft_profiler_stats(reset, format == DEFT_PROFILER_JSON, out);
}

int DeftProfilerReset(void) {
    API_BEGIN();
    deft_profiler_reset();
    return 0;
}

/* ---- user objects ---- */

typedef struct profile_domain {
    const char *name; /* interned: events keep it */
} profile_domain_t;

typedef struct profile_object {
    pthread_mutex_t lock;
    const char *domain, *name;
    int kind;
    bool started;
    double start;
    int64_t value;
    uint64_t id;
} profile_object_t;

static int get_domain(DeftProfileDomainHandle h, profile_domain_t **out) {
    void *object;
    if (deft_handle_get(h, DEFT_HANDLE_PROFILE_DOMAIN, "domain", &object)) return -1;
    *out = object;
    return 0;
}

static int get_object(DeftProfileObjectHandle h, profile_object_t **out) {
    void *object;
    if (deft_handle_get(h, DEFT_HANDLE_PROFILE_OBJECT, "obj", &object)) return -1;
    *out = object;
    return 0;
}

int DeftProfileCreateDomain(const char *name, DeftProfileDomainHandle *out) {
    API_BEGIN();
    if (!name) return deft_error(DEFT_ERR_VALUE, "name is NULL, expected a domain name");
    if (api_check_out(out, "out")) return -1;
    profile_domain_t *d = malloc(sizeof *d);
    if (!d || !(d->name = deft_profiler_intern(name))) {
        free(d);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a profile domain");
    }
    DeftProfileDomainHandle h = deft_handle_new(DEFT_HANDLE_PROFILE_DOMAIN, d);
    if (!h) {
        free(d);
        return -1;
    }
    *out = h;
    return 0;
}

int DeftProfileCreateObject(DeftProfileDomainHandle domain, int kind, const char *name,
                            DeftProfileObjectHandle *out) {
    API_BEGIN();
    static atomic_ullong next_id = 1;
    profile_domain_t *d;
    if (get_domain(domain, &d) || api_check_out(out, "out")) return -1;
    if (!name) return deft_error(DEFT_ERR_VALUE, "name is NULL, expected an object name");
    if (kind < DEFT_PROFILE_TASK || kind > DEFT_PROFILE_COUNTER)
        return deft_error(DEFT_ERR_VALUE, "kind is %d, expected a DeftProfileKind", kind);
    profile_object_t *o = calloc(1, sizeof *o);
    if (!o || !(o->name = deft_profiler_intern(name))) {
        free(o);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a profile object");
    }
    pthread_mutex_init(&o->lock, NULL);
    o->domain = d->name;
    o->kind = kind;
    o->id = atomic_fetch_add(&next_id, 1);
    DeftProfileObjectHandle h = deft_handle_new(DEFT_HANDLE_PROFILE_OBJECT, o);
    if (!h) {
        pthread_mutex_destroy(&o->lock);
        free(o);
        return -1;
    }
    *out = h;
    return 0;
}

static const char *const kind_names[] = {"task", "frame", "event", "counter"};

/* Start (start=true) or stop a task, frame or event. */
static int duration(DeftProfileObjectHandle h, bool start) {
    profile_object_t *o;
    if (get_object(h, &o)) return -1;
    if (o->kind == DEFT_PROFILE_COUNTER)
        return deft_error(DEFT_ERR_VALUE, "'%s' is a counter, which has no duration", o->name);
    pthread_mutex_lock(&o->lock);
    int status = 0;
    if (o->started == start) {
        status = deft_error(DEFT_ERR_VALUE, "%s '%s' is %s", kind_names[o->kind], o->name,
                            start ? "already started" : "not started");
    } else {
        double now = deft_profiler_now();
        bool on = deft_profiling(DEFT_PROF_USER);
        if (o->kind == DEFT_PROFILE_EVENT) {
            if (!start && on) deft_profiler_span(o->domain, o->name, o->start, now);
        } else if (on) {
            deft_profiler_async(start ? 'b' : 'e', o->domain, o->name, o->id, now);
        }
        o->started = start;
        o->start = now;
    }
    pthread_mutex_unlock(&o->lock);
    return status;
}

int DeftProfileDurationStart(DeftProfileObjectHandle obj) {
    API_BEGIN();
    return duration(obj, true);
}

int DeftProfileDurationStop(DeftProfileObjectHandle obj) {
    API_BEGIN();
    return duration(obj, false);
}

int DeftProfileSetCounter(DeftProfileObjectHandle obj, int64_t value, int add) {
    API_BEGIN();
    profile_object_t *o;
    if (get_object(obj, &o) || check_switch(add, "add")) return -1;
    if (o->kind != DEFT_PROFILE_COUNTER)
        return deft_error(DEFT_ERR_VALUE, "'%s' is a %s, not a counter", o->name,
                          kind_names[o->kind]);
    pthread_mutex_lock(&o->lock);
    int64_t sum = value;
    int overflow = add && __builtin_add_overflow(o->value, value, &sum);
    int64_t was = o->value;
    if (!overflow) o->value = sum;
    if (!overflow && deft_profiling(DEFT_PROF_USER))
        deft_profiler_counter(o->domain, o->name, o->value);
    pthread_mutex_unlock(&o->lock);
    if (overflow)
        return deft_error(DEFT_ERR_VALUE,
                          "counter '%s': adding %" PRId64 " to %" PRId64 " would overflow int64",
                          o->name, value, was);
    return 0;
}

int DeftProfileSetMarker(DeftProfileDomainHandle domain, const char *name, const char *scope) {
    API_BEGIN();
    profile_domain_t *d;
    if (get_domain(domain, &d)) return -1;
    if (!name || !scope) return deft_error(DEFT_ERR_VALUE, "name and scope must not be NULL");
    char s = !strcmp(scope, "global")    ? 'g'
             : !strcmp(scope, "process") ? 'p'
             : !strcmp(scope, "thread")  ? 't'
                                         : 0;
    if (!s)
        return deft_error(DEFT_ERR_VALUE, "scope is '%s', expected global, process or thread",
                          scope);
    if (!deft_profiling(DEFT_PROF_USER)) return 0;
    const char *interned = deft_profiler_intern(name);
    if (!interned) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot keep the marker's name");
    deft_profiler_instant(d->name, interned, s, NULL, 0);
    return 0;
}

int DeftProfileObjectFree(DeftProfileObjectHandle obj) {
    API_BEGIN();
    if (!obj) return 0;
    void *object;
    if (deft_handle_retire(obj, DEFT_HANDLE_PROFILE_OBJECT, "obj", &object)) return -1;
    profile_object_t *o = object;
    pthread_mutex_destroy(&o->lock);
    free(o);
    return 0;
}

int DeftProfileDomainFree(DeftProfileDomainHandle domain) {
    API_BEGIN();
    if (!domain) return 0;
    void *object;
    if (deft_handle_retire(domain, DEFT_HANDLE_PROFILE_DOMAIN, "domain", &object)) return -1;
    free(object);
    return 0;
}
