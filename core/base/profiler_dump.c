/*
 * Profiler output: the Chrome trace file and the aggregate statistics.
 *
 * A dump takes each thread's events out of its buffer, folds the spans into
 * the statistics, and writes the events as trace JSON. The file always ends
 * with "\n]}": a continuous dump seeks back over that tail and appends, so
 * the file is valid JSON after every dump, not only the last.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/device.h"
#include "core/base/error.h"
#include "core/base/profiler.h"
#include "core/base/profiler_buffer.h"

static const char TAIL[] = "\n]}\n";

/* ---- statistics: one row per (domain, name), both kept by pointer ---- */

typedef struct stat_row {
    const char *domain, *name;
    long count;
    double total, min, max;
} stat_row_t;

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the table and the text */
static stat_row_t *rows;
static size_t num_rows, rows_capacity;
static char *stats_text;

static stat_row_t *row_of(const char *domain, const char *name) {
    for (size_t i = 0; i < num_rows; i++)
        if (rows[i].name == name && rows[i].domain == domain) return &rows[i];
    if (num_rows == rows_capacity) {
        size_t cap = rows_capacity ? 2 * rows_capacity : 64;
        stat_row_t *grown = realloc(rows, cap * sizeof *grown);
        if (!grown) return NULL;
        rows = grown, rows_capacity = cap;
    }
    rows[num_rows] = (stat_row_t){domain, name, 0, 0, 1e300, 0};
    return &rows[num_rows++];
}

/* Fold the spans among events [from, to) into the table (stats_lock held). */
static void fold(const prof_event_t *events, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) {
        const prof_event_t *e = &events[i];
        if (e->phase != 'X') continue;
        stat_row_t *r = row_of(e->domain, e->name);
        if (!r) return;
        r->count++;
        r->total += e->dur;
        if (e->dur < r->min) r->min = e->dur;
        if (e->dur > r->max) r->max = e->dur;
    }
}

/* Bring the statistics up to date with every buffer (buffers lock held). */
static void fold_all(void) {
    for (prof_buffer_t *b = deft_prof_buffers; b; b = b->next) {
        pthread_mutex_lock(&b->lock);
        if (deft_prof_options.aggregate) fold(b->events, b->aggregated, b->count);
        b->aggregated = b->count;
        pthread_mutex_unlock(&b->lock);
    }
}

/* ---- JSON ---- */

static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_event(FILE *f, const prof_event_t *e, long pid, long tid) {
    fputs("{\"name\":", f);
    put_string(f, e->name);
    fputs(",\"cat\":", f);
    put_string(f, e->domain);
    fprintf(f, ",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%ld,\"tid\":%ld", e->phase, e->ts, pid, tid);
    if (e->phase == 'X') fprintf(f, ",\"dur\":%.3f", e->dur);
    if (e->phase == 'X' && e->device) {
        fputs(",\"args\":{\"device\":", f);
        put_string(f, e->device);
        fputc('}', f);
    }
    if (e->phase == 'i') fprintf(f, ",\"s\":\"%c\"", e->scope);
    if (e->phase == 'b' || e->phase == 'e') fprintf(f, ",\"id\":%llu", (unsigned long long)e->id);
    if (e->phase == 'C') fprintf(f, ",\"args\":{\"value\":%lld}", (long long)e->value);
    if (e->phase == 'i' && e->arg) {
        fputs(",\"args\":{", f);
        put_string(f, e->arg);
        fprintf(f, ":%lld}", (long long)e->value);
    }
    fputc('}', f);
}

static void put_thread_name(FILE *f, const prof_buffer_t *b, long pid) {
    char fallback[32];
    snprintf(fallback, sizeof fallback, "thread %ld", b->tid);
    fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%ld,\"args\":{\"name\":",
            pid, b->tid);
    put_string(f, b->thread_name[0] ? b->thread_name : fallback);
    fputs("}}", f);
}

/* The file being written: whether it is open for appending, and how many events it has. */
static bool file_continues;

/* Open the trace for this dump: a new file, or the continued one positioned before its tail. */
static FILE *open_trace(void) {
    const char *path = deft_prof_options.filename;
    FILE *f = NULL;
    if (file_continues && deft_prof_options.continuous && (f = fopen(path, "r+")) &&
        fseek(f, -(long)(sizeof TAIL - 1), SEEK_END) == 0)
        return f;
    if (f) fclose(f);
    if (!(f = fopen(path, "w"))) return NULL;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    fprintf(f,
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,"
            "\"args\":{\"name\":\"deft\"}}",
            (long)getpid());
    return f; /* every event after the metadata one starts with ",\n" */
}

int deft_profiler_dump(bool finished) {
    deft_device_flush_timings(); /* kernels' device times, into the buffers first */
    pthread_mutex_lock(&deft_prof_buffers_lock);
    pthread_mutex_lock(&stats_lock);
    fold_all();
    pthread_mutex_unlock(&stats_lock);
    FILE *f = open_trace();
    if (!f) {
        pthread_mutex_unlock(&deft_prof_buffers_lock);
        return deft_error(DEFT_ERR_VALUE, "cannot write the trace file '%s'",
                          deft_prof_options.filename);
    }
    long pid = (long)getpid();
    for (prof_buffer_t *b = deft_prof_buffers; b; b = b->next) {
        pthread_mutex_lock(&b->lock);
        prof_event_t *events = b->events;
        size_t count = b->count;
        b->events = NULL, b->count = b->capacity = b->aggregated = 0;
        pthread_mutex_unlock(&b->lock);
        if (count == 0) continue;
        fputs(",\n", f);
        put_thread_name(f, b, pid); /* again in each dump: a reader may see only the newest */
        for (size_t i = 0; i < count; i++) {
            fputs(",\n", f);
            put_event(f, &events[i], pid, b->tid);
        }
        free(events);
    }
    fputs(TAIL, f);
    bool ok = fflush(f) == 0;
    long end = ftell(f);
    ok = fclose(f) == 0 && ok;
    if (ok && end > 0 && truncate(deft_prof_options.filename, end) != 0) ok = false;
    file_continues = ok && !finished;
    pthread_mutex_unlock(&deft_prof_buffers_lock);
    if (!ok)
        return deft_error(DEFT_ERR_VALUE, "cannot write the trace file '%s'",
                          deft_prof_options.filename);
    return 0;
}

/* ---- statistics as text ---- */

static int by_domain_then_total(const void *a, const void *b) {
    const stat_row_t *x = a, *y = b;
    int d = strcmp(x->domain, y->domain);
    if (d) return d;
    return (x->total < y->total) - (x->total > y->total);
}

static void put_table(FILE *f) {
    fprintf(f, "Profile statistics (microseconds)\n");
    const char *domain = NULL;
    for (size_t i = 0; i < num_rows; i++) {
        const stat_row_t *r = &rows[i];
        if (!domain || strcmp(domain, r->domain) != 0) {
            domain = r->domain;
            fprintf(f, "\nDomain: %s\n%-40s %10s %14s %12s %12s %12s\n", domain, "Name", "Count",
                    "Total", "Min", "Max", "Mean");
        }
        fprintf(f, "%-40s %10ld %14.3f %12.3f %12.3f %12.3f\n", r->name, r->count, r->total, r->min,
                r->max, r->total / (double)r->count);
    }
}

static void put_json(FILE *f) {
    fputc('{', f);
    const char *domain = NULL;
    for (size_t i = 0; i < num_rows; i++) {
        const stat_row_t *r = &rows[i];
        if (!domain || strcmp(domain, r->domain) != 0) {
            if (domain) fputs("},", f);
            domain = r->domain;
            put_string(f, domain);
            fputs(":{", f);
        } else {
            fputc(',', f);
        }
        put_string(f, r->name);
        fprintf(f, ":{\"count\":%ld,\"total\":%.3f,\"min\":%.3f,\"max\":%.3f,\"mean\":%.3f}",
                r->count, r->total, r->min, r->max, r->total / (double)r->count);
    }
    if (domain) fputc('}', f);
    fputc('}', f);
}

int deft_profiler_stats(bool reset, bool json, const char **out) {
    deft_device_flush_timings();
    pthread_mutex_lock(&deft_prof_buffers_lock);
    pthread_mutex_lock(&stats_lock);
    fold_all();
    if (num_rows) qsort(rows, num_rows, sizeof *rows, by_domain_then_total); /* else rows is NULL */
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (f) {
        json ? put_json(f) : put_table(f);
        fclose(f);
    }
    if (text) {
        free(stats_text);
        stats_text = text;
        *out = text;
    }
    if (reset) num_rows = 0;
    pthread_mutex_unlock(&stats_lock);
    pthread_mutex_unlock(&deft_prof_buffers_lock);
    return text ? 0 : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot format the statistics");
}

void deft_profiler_reset(void) {
    pthread_mutex_lock(&deft_prof_buffers_lock);
    for (prof_buffer_t *b = deft_prof_buffers; b; b = b->next) {
        pthread_mutex_lock(&b->lock);
        b->count = b->aggregated = 0;
        pthread_mutex_unlock(&b->lock);
    }
    pthread_mutex_lock(&stats_lock);
    num_rows = 0;
    pthread_mutex_unlock(&stats_lock);
    file_continues = false;
    pthread_mutex_unlock(&deft_prof_buffers_lock);
}
