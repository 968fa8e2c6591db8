/* The profiler: a well-formed Chrome trace, exact counts, statistics, user objects. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "check_helpers.h"
#include "op_helpers.h"

static char trace_path[64];

static void configure(const char *const *pairs, int n) {
    const char *keys[16], *vals[16];
    for (int i = 0; i < n; i++) keys[i] = pairs[2 * i], vals[i] = pairs[2 * i + 1];
    ck_assert_ok(DeftProfilerSetConfig(n, keys, vals));
}

static void setup(void) {
    snprintf(trace_path, sizeof trace_path, "/tmp/deft_trace_%d.json", (int)getpid());
    ck_assert_ok(DeftProfilerReset());
    configure((const char *[]){"filename", trace_path, "profile_all", "true", "aggregate_stats",
                               "true", "continuous_dump", "false"},
              4);
}

static void teardown(void) {
    DeftProfilerSetState(0);
    unlink(trace_path);
}

static cJSON *read_trace(void) {
    FILE *f = fopen(trace_path, "r");
    ck_assert_ptr_nonnull(f);
    static char text[1 << 24];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *root = cJSON_Parse(text);
    ck_assert_msg(root != NULL, "the trace is not valid JSON");
    return root;
}

static int count_events(const cJSON *root, const char *name, const char *cat, const char *ph) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        const cJSON *nm = cJSON_GetObjectItem(e, "name"), *c = cJSON_GetObjectItem(e, "cat"),
                    *p = cJSON_GetObjectItem(e, "ph");
        if (p && !strcmp(p->valuestring, ph) && nm && !strcmp(nm->valuestring, name) &&
            (!cat || (c && !strcmp(c->valuestring, cat))))
            n++;
    }
    return n;
}

static DeftNDArrayHandle plus_one(DeftNDArrayHandle x) {
    return call1("_plus_scalar", 1, &x, P("scalar", "1"));
}

#define CALLS 500

static void *worker(void *arg) {
    DeftNDArrayHandle x = arg;
    for (int i = 0; i < CALLS; i++) {
        DeftNDArrayHandle y = plus_one(x);
        DeftNDArrayFree(y);
    }
    return NULL;
}

typedef struct span {
    double ts, end;
} span_t;

static int by_start(const void *a, const void *b) {
    const span_t *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end; /* the outer span first */
}

/* Spans of each thread nest: sorted by start, each ends within the one enclosing it. */
static void assert_nested(const cJSON *root) {
    static span_t spans[1 << 16];
    const cJSON *meta, *e;
    long tids[64];
    int num_tids = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        const cJSON *tid = cJSON_GetObjectItem(e, "tid");
        const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
        ck_assert_int_eq((long)cJSON_GetObjectItem(e, "pid")->valuedouble, (long)getpid());
        if (strcmp(ph, "X") != 0) continue;
        bool seen = false;
        for (int t = 0; t < num_tids; t++) seen |= tids[t] == (long)tid->valuedouble;
        if (!seen && num_tids < 64) tids[num_tids++] = (long)tid->valuedouble;
    }
    for (int t = 0; t < num_tids; t++) {
        int n = 0, named = 0;
        cJSON_ArrayForEach(meta, cJSON_GetObjectItem(root, "traceEvents")) {
            const char *ph = cJSON_GetObjectItem(meta, "ph")->valuestring;
            if ((long)cJSON_GetObjectItem(meta, "tid")->valuedouble != tids[t]) continue;
            if (!strcmp(ph, "M")) named++;
            if (strcmp(ph, "X") != 0 || n == (1 << 16)) continue;
            double ts = cJSON_GetObjectItem(meta, "ts")->valuedouble;
            double dur = cJSON_GetObjectItem(meta, "dur")->valuedouble;
            ck_assert(dur >= 0);
            const char *cat = cJSON_GetObjectItem(meta, "cat")->valuestring;
            if (!strcmp(cat, "operator") || !strcmp(cat, "graph")) {
                const cJSON *args = cJSON_GetObjectItem(meta, "args");
                const cJSON *device = args ? cJSON_GetObjectItem(args, "device") : NULL;
                ck_assert_msg(device && cJSON_IsString(device),
                              "an operator span without its device");
                ck_assert_str_eq(device->valuestring, "cpu(0)");
            }
            spans[n++] = (span_t){ts, ts + dur};
        }
        ck_assert_msg(named > 0, "thread %ld has no thread_name metadata", tids[t]);
        qsort(spans, (size_t)n, sizeof *spans, by_start);
        span_t stack[64];
        int depth = 0;
        for (int i = 0; i < n; i++) {
            while (depth > 0 && spans[i].ts >= stack[depth - 1].end - 1e-3) depth--;
            if (depth > 0)
                ck_assert_msg(spans[i].end <= stack[depth - 1].end + 1e-3,
                              "spans overlap without nesting on thread %ld", tids[t]);
            if (depth < 64) stack[depth++] = spans[i];
        }
    }
}

START_TEST(trace_is_valid_nested_and_counts_are_exact) {
    const char *empty; /* first in the process: no statistics were ever kept */
    ck_assert_ok(DeftProfilerDumps(0, DEFT_PROFILER_TABLE, &empty));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(4), NULL);
    ck_assert_ok(DeftProfilerSetState(1));
    pthread_t threads[2];
    for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, worker, x);
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    /* a deferred-compute run: its nodes are symbolic events inside the run's span */
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle a = plus_one(x);
    DeftNDArrayHandle b = call1("exp", 1, &a, NO_PARAMS);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    ck_assert_ok(DeftNDArrayWaitToRead(b));
    ck_assert_ok(DeftWaitAll());
    ck_assert_ok(DeftProfilerSetState(0));
    ck_assert_ok(DeftProfilerDump(1));
    cJSON *root = read_trace();
    ck_assert_int_eq(count_events(root, "_plus_scalar", "operator", "X"), 2 * CALLS);
    ck_assert_int_eq(count_events(root, "exp", "graph", "X"), 1);
    ck_assert_int_eq(count_events(root, "_plus_scalar", "graph", "X"), 1);
    ck_assert_int_ge(count_events(root, "WaitAll", "engine", "X"), 1);
    ck_assert_int_ge(count_events(root, "alloc", "memory", "i"), 2 * CALLS);
    ck_assert_int_eq(count_events(root, "process_name", NULL, "M"), 1);
    assert_nested(root);
    cJSON_Delete(root);
    const char *json;
    ck_assert_ok(DeftProfilerDumps(0, DEFT_PROFILER_JSON, &json));
    cJSON *stats = cJSON_Parse(json);
    ck_assert_ptr_nonnull(stats);
    const cJSON *row = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "operator"), "_plus_scalar");
    ck_assert_ptr_nonnull(row);
    ck_assert_int_eq((int)cJSON_GetObjectItem(row, "count")->valuedouble, 2 * CALLS);
    double mean = cJSON_GetObjectItem(row, "mean")->valuedouble;
    ck_assert(mean >= cJSON_GetObjectItem(row, "min")->valuedouble);
    ck_assert(mean <= cJSON_GetObjectItem(row, "max")->valuedouble);
    cJSON_Delete(stats);
    const char *table;
    ck_assert_ok(DeftProfilerDumps(1, DEFT_PROFILER_TABLE, &table));
    ck_assert_ptr_nonnull(strstr(table, "Domain: operator"));
    ck_assert_ptr_nonnull(strstr(table, "_plus_scalar"));
    ck_assert_ok(DeftProfilerDumps(0, DEFT_PROFILER_JSON, &json));
    ck_assert_str_eq(json, "{}"); /* reset cleared them */
    DeftNDArrayHandle all[] = {x, a, b};
    free_all(3, all);
}
END_TEST

START_TEST(continuous_dumps_keep_the_file_valid) {
    configure((const char *[]){"continuous_dump", "1"}, 1);
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(4), NULL);
    ck_assert_ok(DeftProfilerSetState(1));
    int total = 0;
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 10 * round; i++) DeftNDArrayFree(plus_one(x));
        total += 10 * round;
        ck_assert_ok(DeftWaitAll());
        ck_assert_ok(DeftProfilerDump(0));
        cJSON *root = read_trace(); /* valid after every dump */
        ck_assert_int_eq(count_events(root, "_plus_scalar", "operator", "X"), total);
        cJSON_Delete(root);
    }
    ck_assert_ok(DeftProfilerDump(1));
    DeftNDArrayFree(plus_one(x));
    ck_assert_ok(DeftProfilerDump(0)); /* after finished: a new file */
    cJSON *root = read_trace();
    ck_assert_int_eq(count_events(root, "_plus_scalar", "operator", "X"), 1);
    cJSON_Delete(root);
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

START_TEST(user_objects) {
    DeftProfileDomainHandle d;
    DeftProfileObjectHandle task, event, counter;
    ck_assert_ok(DeftProfileCreateDomain("my \"domain\"", &d));
    ck_assert_ok(DeftProfileCreateObject(d, DEFT_PROFILE_TASK, "load", &task));
    ck_assert_ok(DeftProfileCreateObject(d, DEFT_PROFILE_EVENT, "step", &event));
    ck_assert_ok(DeftProfileCreateObject(d, DEFT_PROFILE_COUNTER, "items", &counter));
    ck_assert_ok(DeftProfilerSetState(1));
    ck_assert_ok(DeftProfileDurationStart(task));
    ck_assert_ok(DeftProfileDurationStart(event));
    ck_assert_fails(DeftProfileDurationStart(event), DEFT_ERROR_VALUE, "already started");
    ck_assert_ok(DeftProfileSetCounter(counter, 5, 0));
    ck_assert_ok(DeftProfileSetCounter(counter, 2, 1));
    ck_assert_ok(DeftProfileSetMarker(d, "here", "process"));
    ck_assert_ok(DeftProfileDurationStop(event));
    ck_assert_ok(DeftProfileDurationStop(task));
    ck_assert_fails(DeftProfileDurationStop(task), DEFT_ERROR_VALUE, "not started");
    ck_assert_fails(DeftProfileDurationStart(counter), DEFT_ERROR_VALUE, "is a counter");
    ck_assert_fails(DeftProfileSetCounter(task, 1, 0), DEFT_ERROR_VALUE, "not a counter");
    ck_assert_ok(DeftProfileSetCounter(counter, INT64_MAX - 1, 0));
    ck_assert_fails(DeftProfileSetCounter(counter, 2, 1), DEFT_ERROR_VALUE, "would overflow int64");
    ck_assert_ok(DeftProfileSetCounter(counter, -INT64_MAX, 1)); /* the value kept: now -1 */
    ck_assert_fails(DeftProfileSetCounter(counter, INT64_MIN, 1), DEFT_ERROR_VALUE,
                    "would overflow");
    ck_assert_fails(DeftProfileSetMarker(d, "x", "galaxy"), DEFT_ERROR_VALUE, "scope is 'galaxy'");
    ck_assert_fails(DeftProfileCreateObject(d, 9, "x", &task), DEFT_ERROR_VALUE, "kind is 9");
    ck_assert_ok(DeftProfilerSetState(0));
    ck_assert_ok(DeftProfilerDump(1));
    cJSON *root = read_trace();
    ck_assert_int_eq(count_events(root, "step", "my \"domain\"", "X"), 1);
    ck_assert_int_eq(count_events(root, "load", "my \"domain\"", "b"), 1);
    ck_assert_int_eq(count_events(root, "load", "my \"domain\"", "e"), 1);
    ck_assert_int_eq(count_events(root, "items", "my \"domain\"", "C"), 4);
    ck_assert_int_eq(count_events(root, "here", "my \"domain\"", "i"), 1);
    cJSON_Delete(root);
    ck_assert_ok(DeftProfileObjectFree(task));
    ck_assert_ok(DeftProfileObjectFree(event));
    ck_assert_ok(DeftProfileObjectFree(counter));
    ck_assert_ok(DeftProfileDomainFree(d));
    ck_assert_fails(DeftProfileDomainFree(d), DEFT_ERROR_VALUE, "already freed");
}
END_TEST

START_TEST(off_paused_and_bad_options_record_nothing) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(4), NULL);
    DeftNDArrayFree(plus_one(x)); /* not running */
    ck_assert_ok(DeftProfilerSetState(1));
    ck_assert_ok(DeftProfilerPause(1));
    DeftNDArrayFree(plus_one(x)); /* paused */
    ck_assert_ok(DeftProfilerPause(0));
    DeftNDArrayFree(plus_one(x)); /* the one that counts */
    configure((const char *[]){"profile_imperative", "false"}, 1);
    DeftNDArrayFree(plus_one(x)); /* not asked for */
    ck_assert_ok(DeftWaitAll());
    ck_assert_ok(DeftProfilerSetState(0));
    ck_assert_fails(DeftProfilerSetConfig(2, (const char *[]){"profile_api", "colour"},
                                          (const char *[]){"true", "red"}),
                    DEFT_ERROR_VALUE, "unknown option 'colour'");
    ck_assert_fails(
        DeftProfilerSetConfig(1, (const char *[]){"profile_api"}, (const char *[]){"maybe"}),
        DEFT_ERROR_PARSE, "profile_api is 'maybe'");
    ck_assert_fails(DeftProfilerSetState(2), DEFT_ERROR_VALUE, "running is 2");
    ck_assert_fails(DeftProfilerDumps(0, 7, &(const char *){NULL}), DEFT_ERROR_VALUE,
                    "format is 7");
    ck_assert_ok(DeftProfilerDump(1));
    cJSON *root = read_trace();
    ck_assert_int_eq(count_events(root, "_plus_scalar", "operator", "X"), 1);
    cJSON_Delete(root);
    configure((const char *[]){"filename", "/nonexistent-dir/trace.json"}, 1);
    ck_assert_fails(DeftProfilerDump(1), DEFT_ERROR_VALUE, "cannot write the trace file");
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

static Suite *profiler_suite(void) {
    Suite *suite = suite_create("profiler");
    TCase *tc = tcase_create("profiler");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, trace_is_valid_nested_and_counts_are_exact);
    tcase_add_test(tc, continuous_dumps_keep_the_file_valid);
    tcase_add_test(tc, user_objects);
    tcase_add_test(tc, off_paused_and_bad_options_record_nothing);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(profiler_suite());
}
