/*
 * The dependency engine: ordering against a sequential reference, errors,
 * freeing while pending, waiting from several threads, back-pressure,
 * shutdown and fork.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/engine/engine.h"
#include "op_helpers.h"

/* ---- randomised ordering stress test ---- */

#define VARS   32
#define OPS    4000
#define MAX_IO 4
#define WIDE   40 /* variables an operation lists at most in the wide variant */

typedef struct stress_op {
    int reads[WIDE], num_reads;
    int writes[WIDE], num_writes;
    uint64_t salt;
    bool small;
} stress_op_t;

typedef struct stress_ctx {
    const stress_op_t *op;
    uint64_t *values;
} stress_ctx_t;

/* Each write becomes a hash of everything read (and of the written value),
 * so any reordering of conflicting operations changes the final values. */
static void apply(const stress_op_t *op, uint64_t *values) {
    uint64_t h = op->salt;
    for (int i = 0; i < op->num_reads; i++) h = (h ^ values[op->reads[i]]) * 0x100000001B3ull;
    for (int i = 0; i < op->num_writes; i++) {
        uint64_t *v = &values[op->writes[i]];
        *v = (*v ^ h) * 0x9E3779B97F4A7C15ull + (uint64_t)i;
        h ^= *v;
    }
}

static int run_stress_op(void *arg) {
    stress_ctx_t *c = arg;
    /* A little work, so operations overlap on the workers. */
    volatile uint64_t spin = 0;
    for (int i = 0; i < (c->op->small ? 10 : 2000); i++) spin += (uint64_t)i;
    (void)spin; /* only written: clang's -Wunused-but-set-variable */
    apply(c->op, c->values);
    return 0;
}

static uint64_t next_random(uint64_t *state) {
    *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
    return *state;
}

static void make_ops(stress_op_t *ops, uint64_t seed, int max_io) {
    uint64_t r = seed;
    for (int k = 0; k < OPS; k++) {
        stress_op_t *op = &ops[k];
        op->num_reads = (int)(next_random(&r) % (uint64_t)(max_io + 1));
        op->num_writes = (int)(next_random(&r) % (uint64_t)max_io) + 1;
        for (int i = 0; i < op->num_reads; i++) op->reads[i] = (int)(next_random(&r) % VARS);
        for (int i = 0; i < op->num_writes; i++) op->writes[i] = (int)(next_random(&r) % VARS);
        op->salt = next_random(&r);
        op->small = next_random(&r) % 3 == 0;
    }
}

/* Whether a variable is listed twice among an operation's reads and writes. */
static bool lists_a_variable_twice(const stress_op_t *op) {
    int all[2 * WIDE], n = 0;
    for (int i = 0; i < op->num_reads; i++) all[n++] = op->reads[i];
    for (int i = 0; i < op->num_writes; i++) all[n++] = op->writes[i];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (all[i] == all[j]) return true;
    return false;
}

/* Small operations first try to run at once on this thread, as imperative calls do. */
/* _i: 0, operations of up to MAX_IO variables; 1, of up to WIDE, which the
 * engine deduplicates by sorting rather than pairwise. */
START_TEST(test_random_operations_match_sequential_order_bit_for_bit) {
    static stress_op_t ops[OPS];
    static stress_ctx_t ctxs[OPS];
    uint64_t engine_values[VARS], reference[VARS];
    int ran_now = 0, ran_now_listing_twice = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        make_ops(ops, seed * 7919, _i ? WIDE : MAX_IO);
        for (int v = 0; v < VARS; v++) engine_values[v] = reference[v] = (uint64_t)v * 31 + seed;
        deft_var_t *vars[VARS];
        for (int v = 0; v < VARS; v++) vars[v] = deft_var_new();
        for (int k = 0; k < OPS; k++) {
            deft_var_t *reads[WIDE], *writes[WIDE];
            for (int i = 0; i < ops[k].num_reads; i++) reads[i] = vars[ops[k].reads[i]];
            for (int i = 0; i < ops[k].num_writes; i++) writes[i] = vars[ops[k].writes[i]];
            ctxs[k] = (stress_ctx_t){&ops[k], engine_values};
            deft_engine_op_desc_t d = {.fn = run_stress_op,
                                       .ctx = &ctxs[k],
                                       .reads = reads,
                                       .num_reads = ops[k].num_reads,
                                       .writes = writes,
                                       .num_writes = ops[k].num_writes,
                                       .name = "stress",
                                       .origin = "test",
                                       .small = ops[k].small,
                                       .priority = (int)(k % 5 == 0)};
            bool at_once = ops[k].small && deft_engine_run_now(&d) == 0;
            if (!at_once) ck_assert_int_eq(deft_engine_push(&d), 0);
            ran_now += at_once;
            ran_now_listing_twice += at_once && lists_a_variable_twice(&ops[k]);
            /* The same variable twice, or read and written, counts once. */
            apply(&ops[k], reference);
        }
        for (int v = 0; v < VARS; v++) deft_var_release(vars[v]); /* while work is pending */
        ck_assert_int_eq(deft_engine_wait_all(), 0);
        for (int v = 0; v < VARS; v++)
            ck_assert_msg(engine_values[v] == reference[v], "seed %llu var %d differs",
                          (unsigned long long)seed, v);
    }
    if (_i == 0) { /* wide operations listing a variable twice are always queued */
        ck_assert_int_gt(ran_now_listing_twice, 0);
        ck_assert_int_gt(ran_now - ran_now_listing_twice, 0);
    }
}
END_TEST

/* ---- a read run at once holds its variable against writers on other threads ---- */

#define HOLD_ROUNDS 20

/* Round r: the read starts, the other thread pushes a write of x while the
 * read still runs, and the read looks for that write landing under it. */
typedef struct hold_race {
    deft_var_t *x;
    volatile int64_t value; /* x's contents: the number of writes done */
    atomic_int writes_done; /* the same, for the threads' hand-over */
    atomic_int reading, pushing, overlaps;
} hold_race_t;

typedef struct hold_read {
    hold_race_t *h;
    int round;
} hold_read_t;

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Spin until *flag reaches want or `limit` seconds pass; whether it did. */
static bool await(atomic_int *flag, int want, double limit) {
    double end = seconds() + limit;
    while (atomic_load(flag) != want)
        if (seconds() > end) return false;
    return true;
}

static int increment(void *arg) {
    hold_race_t *h = arg;
    h->value++;
    atomic_fetch_add(&h->writes_done, 1);
    return 0;
}

static int read_while_a_write_is_pushed(void *arg) {
    hold_race_t *h = ((hold_read_t *)arg)->h;
    int round = ((hold_read_t *)arg)->round;
    int64_t before = h->value;
    atomic_store(&h->reading, round);
    if (!await(&h->pushing, round, 5)) return deft_error(DEFT_ERR_INTERNAL, "no writer came");
    /* Long enough for the write to run, were it let through. */
    double end = seconds() + 0.002;
    while (h->value == before && seconds() < end) {
    }
    if (h->value != before) atomic_fetch_add(&h->overlaps, 1);
    return 0;
}

static void *push_a_write_per_read(void *arg) {
    hold_race_t *h = arg;
    for (int round = 1; round <= HOLD_ROUNDS; round++) {
        if (!await(&h->reading, round, 5)) return NULL;
        atomic_store(&h->pushing, round);
        deft_engine_op_desc_t d = {.fn = increment,
                                   .ctx = h,
                                   .writes = &h->x,
                                   .num_writes = 1,
                                   .name = "write",
                                   .origin = "test",
                                   .small = true};
        ck_assert_int_eq(deft_engine_push(&d), 0);
    }
    return NULL;
}

START_TEST(test_read_run_at_once_excludes_writers_on_other_threads) {
    hold_race_t h = {.x = deft_var_new()};
    pthread_t writer;
    pthread_create(&writer, NULL, push_a_write_per_read, &h);
    for (int round = 1; round <= HOLD_ROUNDS; round++) {
        /* The last round's write pushed and done: x is idle. */
        ck_assert(await(&h.writes_done, round - 1, 5));
        ck_assert_int_eq(deft_engine_wait_to_write(h.x), 0);
        deft_var_t *fresh = deft_var_new(); /* what the read makes: private to this thread */
        hold_read_t read = {&h, round};
        deft_engine_op_desc_t d = {.fn = read_while_a_write_is_pushed,
                                   .ctx = &read,
                                   .reads = &h.x,
                                   .num_reads = 1,
                                   .writes = &fresh,
                                   .num_writes = 1,
                                   .num_fresh_writes = 1,
                                   .name = "read",
                                   .origin = "test",
                                   .small = true};
        ck_assert_int_eq(deft_engine_run_now(&d), 0);
        ck_assert_int_eq(deft_engine_wait_to_read(fresh), 0);
        deft_var_release(fresh);
    }
    pthread_join(writer, NULL);
    ck_assert_int_eq(deft_engine_wait_all(), 0);
    int overlaps = atomic_load(&h.overlaps);
    ck_assert_msg(overlaps == 0, "%d of %d writes ran under a read", overlaps, HOLD_ROUNDS);
    ck_assert_int_eq(h.value, HOLD_ROUNDS);
    deft_var_release(h.x);
}
END_TEST

/* ---- errors ---- */

static int fail_with_index_error(void *arg) {
    (void)arg;
    return deft_error(DEFT_ERR_INDEX, "boom %d", 7);
}

/* A failure stays on its array, and on everything computed from it, until
 * the array is overwritten; reading it never gives its contents. */
START_TEST(test_failure_is_sticky_until_overwritten) {
    ck_assert_ok(DeftWaitAll());
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(5, 6));
    DeftNDArrayHandle bad_index = make(DEFT_INT32, 1, SHAPE(2), VALUES(0, 9));
    DeftNDArrayHandle ok = call1("_plus_scalar", 1, &a, P("scalar", "1"));
    DeftNDArrayHandle failed =
        call1("take", 2, (DeftNDArrayHandle[]){a, bad_index}, P("mode", "raise"));
    DeftNDArrayHandle derived = call1("exp", 1, &failed, NO_PARAMS);
    DeftNDArrayHandle derived2 = call1("_mul_scalar", 1, &derived, P("scalar", "2"));
    for (int read = 0; read < 3; read++) /* every read, not once */
        ck_assert_fails(DeftNDArrayWaitToRead(derived2), DEFT_ERROR_INDEX,
                        "operator 'take': index 9 (position 1) is out of range");
    float out[2] = {-1, -1};
    ck_assert_fails(DeftNDArrayCopyToHost(failed, out, 8), DEFT_ERROR_INDEX, "index 9");
    ck_assert_fails(DeftNDArrayCopyToHost(failed, out, 8), DEFT_ERROR_INDEX, "index 9");
    ck_assert(out[0] == -1 && out[1] == -1); /* nothing copied */
    assert_values(ok, 2, VALUES(6, 7), 0);
    /* WaitAll reports the failure (the skipped dependents are not failures
     * of their own) and clears no array's. */
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, "index 9");
    ck_assert_ok(DeftWaitAll());
    ck_assert_fails(DeftNDArrayWaitToRead(derived), DEFT_ERROR_INDEX, "index 9");
    /* Updating a failed array in place keeps it failed. */
    DeftNDArrayHandle inplace[1] = {failed};
    int nout = 1;
    ck_assert_ok(call("_plus_scalar", 1, &failed, &nout, inplace, P("scalar", "1")));
    ck_assert_fails(DeftNDArrayWaitToRead(failed), DEFT_ERROR_INDEX, "index 9");
    /* Overwritten from the host, or as an operator's output: failure gone. */
    ck_assert_ok(DeftNDArrayCopyFromHost(failed, (float[]){1, 2}, 8));
    assert_values(failed, 2, VALUES(1, 2), 0);
    ck_assert_fails(DeftNDArrayWaitToRead(derived), DEFT_ERROR_INDEX, "index 9");
    DeftNDArrayHandle given[1] = {derived};
    ck_assert_ok(call("exp", 1, &ok, &nout, given, NO_PARAMS));
    assert_values(derived, 2, VALUES(exp(6), exp(7)), 1e-5);
    free_all(6, (DeftNDArrayHandle[]){a, bad_index, ok, failed, derived, derived2});
}
END_TEST

/* A failed write into a given output does not leave the old value readable. */
START_TEST(test_failed_write_into_given_output_fails_its_reads) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(5, 6));
    DeftNDArrayHandle bad_index = make(DEFT_INT32, 1, SHAPE(2), VALUES(0, 9));
    DeftNDArrayHandle given[1] = {make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 1))};
    int nout = 1;
    ck_assert_ok(
        call("take", 2, (DeftNDArrayHandle[]){a, bad_index}, &nout, given, P("mode", "raise")));
    for (int read = 0; read < 2; read++)
        ck_assert_fails(DeftNDArrayWaitToRead(given[0]), DEFT_ERROR_INDEX, "index 9");
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, "index 9");
    free_all(3, (DeftNDArrayHandle[]){a, bad_index, given[0]});
}
END_TEST

/* WaitAll reports every failure of this thread's work: the first, and how many more. */
START_TEST(test_wait_all_counts_every_failure) {
    ck_assert_ok(DeftWaitAll());
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(5, 6));
    DeftNDArrayHandle bad[2] = {make(DEFT_INT32, 1, SHAPE(1), VALUES(9)),
                                make(DEFT_INT32, 1, SHAPE(1), VALUES(-7))};
    DeftNDArrayHandle r[3];
    for (int i = 0; i < 3; i++)
        r[i] = call1("take", 2, (DeftNDArrayHandle[]){a, bad[i % 2]}, P("mode", "raise"));
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, "index 9");
    ck_assert_msg(strstr(DeftGetLastError(), "(and 2 more failures since the last wait"), "%s",
                  DeftGetLastError());
    ck_assert_ok(DeftWaitAll());
    free_all(3, r);
    free_all(3, (DeftNDArrayHandle[]){a, bad[0], bad[1]});
}
END_TEST

typedef struct failing_thread {
    DeftNDArrayHandle a, bad, result;
    atomic_int stage; /* 1: failed work pushed; 2: the main thread waited; 3: done */
    int wait_all_status;
    char message[256];
} failing_thread_t;

static void *push_a_failure_then_wait_all(void *arg) {
    failing_thread_t *t = arg;
    t->result = call1("take", 2, (DeftNDArrayHandle[]){t->a, t->bad}, P("mode", "raise"));
    ck_assert_fails(DeftNDArrayWaitToRead(t->result), DEFT_ERROR_INDEX, "index 9");
    atomic_store(&t->stage, 1);
    while (atomic_load(&t->stage) != 2) sched_yield();
    t->wait_all_status = DeftWaitAll();
    snprintf(t->message, sizeof t->message, "%s", DeftGetLastError());
    atomic_store(&t->stage, 3);
    return NULL;
}

/* One thread's WaitAll never takes another thread's failures. */
START_TEST(test_wait_all_reports_only_its_own_threads_failures) {
    ck_assert_ok(DeftWaitAll());
    failing_thread_t t = {.a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(5, 6)),
                          .bad = make(DEFT_INT32, 1, SHAPE(1), VALUES(9))};
    pthread_t other;
    pthread_create(&other, NULL, push_a_failure_then_wait_all, &t);
    while (atomic_load(&t.stage) != 1) sched_yield();
    ck_assert_ok(DeftWaitAll()); /* not this thread's failure */
    atomic_store(&t.stage, 2);
    pthread_join(other, NULL);
    ck_assert_int_eq(t.wait_all_status, -1);
    ck_assert_msg(strstr(t.message, "index 9"), "%s", t.message);
    free_all(3, (DeftNDArrayHandle[]){t.a, t.bad, t.result});
}
END_TEST

START_TEST(test_engine_errors_on_queued_operations) {
    deft_var_t *x = deft_var_new(), *y = deft_var_new(), *z = deft_var_new();
    /* A slow writer keeps x busy so the failure and its dependents queue up. */
    stress_op_t slow = {.num_writes = 1, .writes = {0}, .salt = 1};
    uint64_t values[VARS] = {0};
    stress_ctx_t ctx = {&slow, values};
    deft_engine_op_desc_t first = {.fn = run_stress_op,
                                   .ctx = &ctx,
                                   .writes = &x,
                                   .num_writes = 1,
                                   .name = "slow",
                                   .origin = "test"};
    deft_engine_op_desc_t fail = {.fn = fail_with_index_error,
                                  .reads = &x,
                                  .num_reads = 1,
                                  .writes = &y,
                                  .num_writes = 1,
                                  .name = "fail",
                                  .origin = "DeftTestOrigin"};
    deft_engine_op_desc_t after = {.fn = fail_with_index_error,
                                   .reads = &y,
                                   .num_reads = 1,
                                   .writes = &z,
                                   .num_writes = 1,
                                   .name = "never runs",
                                   .origin = "test"};
    ck_assert_int_eq(deft_engine_push(&first), 0);
    ck_assert_int_eq(deft_engine_push(&fail), 0);
    deft_error_enter("DeftSomethingElse");
    ck_assert_int_eq(deft_engine_push(&after), 0);
    ck_assert_int_eq(deft_engine_wait_to_read(z), -1);
    ck_assert_str_eq(deft_error_message(), "DeftTestOrigin: boom 7");
    ck_assert_int_eq(deft_error_kind(), DEFT_ERR_INDEX);
    ck_assert_int_eq(deft_engine_wait_to_read(x), 0);
    ck_assert_int_eq(deft_engine_wait_to_write(y), -1);
    ck_assert_int_eq(deft_engine_wait_to_write(y), -1); /* sticky */
    ck_assert_int_eq(deft_engine_wait_to_overwrite(y), 0);
    ck_assert_int_eq(deft_engine_wait_all(), -1); /* one failure: "after" never ran */
    ck_assert_str_eq(deft_error_message(), "DeftTestOrigin: boom 7");
    deft_var_release(x), deft_var_release(y), deft_var_release(z);
}
END_TEST

/* ---- freeing while pending ---- */

START_TEST(test_free_while_pending_releases_everything) {
    int64_t arrays_before, bytes_before, arrays_after, bytes_after;
    ck_assert_ok(DeftWaitAll());
    ck_assert_ok(DeftGetLiveNDArrayCount(&arrays_before));
    ck_assert_ok(DeftGetMemoryStat(DEFT_CPU, 0, DEFT_MEM_LIVE_BYTES, &bytes_before));
    DeftNDArrayHandle x = call1("_random_uniform", 0, NULL, P("shape", "(1000000,)"));
    for (int i = 0; i < 20; i++) {
        DeftNDArrayHandle y = call1("exp", 1, &x, NO_PARAMS); /* large: queued for workers */
        DeftNDArrayHandle z = call1("broadcast_add", 2, (DeftNDArrayHandle[]){x, y}, NO_PARAMS);
        ck_assert_ok(DeftNDArrayFree(x)); /* freed while operations read it */
        ck_assert_ok(DeftNDArrayFree(y));
        x = z;
    }
    ck_assert_ok(DeftNDArrayFree(x));
    ck_assert_ok(DeftWaitAll());
    ck_assert_ok(DeftGetLiveNDArrayCount(&arrays_after));
    ck_assert_ok(DeftGetMemoryStat(DEFT_CPU, 0, DEFT_MEM_LIVE_BYTES, &bytes_after));
    ck_assert_int_eq(arrays_after, arrays_before);
    ck_assert_int_eq(bytes_after, bytes_before);
}
END_TEST

/* ---- several host threads ---- */

typedef struct pusher {
    int id;
    DeftNDArrayHandle result;
    int failures;
} pusher_t;

static void *push_chain(void *arg) {
    pusher_t *p = arg;
    const int64_t shape[1] = {50000};
    DeftNDArrayHandle x;
    if (DeftNDArrayCreate(shape, 1, DEFT_FLOAT64, DEFT_CPU, 0, &x)) return NULL;
    DeftOpHandle plus;
    DeftGetOperator("_plus_scalar", &plus);
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    for (int i = 0; i < 200; i++) {
        DeftNDArrayHandle out[1] = {NULL};
        int nout = 1;
        if (DeftImperativeInvoke(plus, 1, &x, &nout, out, 1, keys, vals)) p->failures++;
        DeftNDArrayFree(x);
        x = out[0];
        if (i % 50 == 0 && DeftWaitAll()) p->failures++;
    }
    p->result = x;
    return NULL;
}

START_TEST(test_wait_all_with_concurrent_pushes_from_host_threads) {
    pthread_t threads[4];
    pusher_t pushers[4] = {{0}};
    for (int t = 0; t < 4; t++) {
        pushers[t].id = t;
        pthread_create(&threads[t], NULL, push_chain, &pushers[t]);
    }
    for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
    ck_assert_ok(DeftWaitAll());
    for (int t = 0; t < 4; t++) {
        ck_assert_int_eq(pushers[t].failures, 0);
        int64_t n;
        double *v = read_all(pushers[t].result, &n);
        for (int64_t i = 0; i < n; i++) ck_assert_double_eq(v[i], 200);
        free(v);
        ck_assert_ok(DeftNDArrayFree(pushers[t].result));
    }
}
END_TEST

/* ---- back-pressure, shutdown, fork ---- */

static atomic_int running_now, most_at_once;

static int count_concurrency(void *arg) {
    (void)arg;
    int now = atomic_fetch_add(&running_now, 1) + 1;
    int seen = atomic_load(&most_at_once);
    while (now > seen && !atomic_compare_exchange_weak(&most_at_once, &seen, now)) {
    }
    usleep(50);
    atomic_fetch_sub(&running_now, 1);
    return 0;
}

START_TEST(test_independent_operations_run_in_parallel) {
    if (deft_engine_num_workers() < 2) return; /* the naive engine runs one at a time */
    deft_var_t *vars[64];
    for (int i = 0; i < 64; i++) {
        vars[i] = deft_var_new();
        deft_engine_op_desc_t d = {.fn = count_concurrency,
                                   .writes = &vars[i],
                                   .num_writes = 1,
                                   .name = "sleepy",
                                   .origin = "test"};
        ck_assert_int_eq(deft_engine_push(&d), 0);
    }
    ck_assert_int_eq(deft_engine_wait_all(), 0);
    for (int i = 0; i < 64; i++) deft_var_release(vars[i]);
    ck_assert_int_ge(atomic_load(&most_at_once), 2);
}
END_TEST

/* One core is left to the calling thread, unless DEFT_ENGINE_WORKERS says. */
START_TEST(test_worker_count_follows_the_settings) {
    if (deft_engine_is_naive()) {
        ck_assert_int_eq(deft_engine_num_workers(), 0);
        return;
    }
    const char *workers = getenv("DEFT_ENGINE_WORKERS");
    int threads = deft_parallel_threads();
    int want = workers ? atoi(workers) : threads > 1 ? threads - 1 : 1;
    ck_assert_int_eq(deft_engine_num_workers(), want);
}
END_TEST

START_TEST(test_pending_operations_stay_bounded) {
    deft_var_t *vars[200];
    long bound = deft_engine_max_pending(), most = 0;
    for (int i = 0; i < 200; i++) {
        vars[i] = deft_var_new();
        deft_engine_op_desc_t d = {.fn = count_concurrency,
                                   .writes = &vars[i],
                                   .num_writes = 1,
                                   .name = "sleepy",
                                   .origin = "test"};
        ck_assert_int_eq(deft_engine_push(&d), 0);
        long now = deft_engine_pending();
        most = now > most ? now : most;
    }
    ck_assert_int_eq(deft_engine_wait_all(), 0);
    for (int i = 0; i < 200; i++) deft_var_release(vars[i]);
    ck_assert_int_le(most, bound);
    ck_assert_int_eq(deft_engine_pending(), 0);
}
END_TEST

static atomic_int bytes_ops_ran;

static int count_and_sleep(void *arg) {
    (void)arg;
    usleep(100);
    atomic_fetch_add(&bytes_ops_ran, 1);
    return 0;
}

/* Each operation declares an eighth of the bound in bytes (accounting only:
 * nothing that large is allocated), so 64 of them would hold 8 bounds'
 * worth if nothing waited. A push is let in while the total is under the
 * bound, so the total never reaches the bound plus one operation. */
START_TEST(test_pending_bytes_stay_bounded) {
    const long long bound = deft_engine_max_pending_bytes(), each = bound / 8 + 1;
    long long most = 0;
    deft_var_t *vars[64];
    atomic_store(&bytes_ops_ran, 0);
    for (int i = 0; i < 64; i++) {
        vars[i] = deft_var_new();
        deft_engine_op_desc_t d = {.fn = count_and_sleep,
                                   .writes = &vars[i],
                                   .num_writes = 1,
                                   .name = "heavy",
                                   .origin = "test",
                                   .bytes = (size_t)each};
        ck_assert_int_eq(deft_engine_push(&d), 0);
        long long now = deft_engine_pending_bytes();
        most = now > most ? now : most;
    }
    ck_assert_int_eq(deft_engine_wait_all(), 0);
    for (int i = 0; i < 64; i++) deft_var_release(vars[i]);
    ck_assert_int_lt(most, bound + each);
    if (!deft_engine_is_naive()) ck_assert_int_ge(most, each); /* the host did run ahead */
    ck_assert_int_eq(atomic_load(&bytes_ops_ran), 64);
    ck_assert_int_eq(deft_engine_pending_bytes(), 0);
}
END_TEST

/* Operator calls count their arrays' bytes: a chain of calls on 1 MiB arrays
 * (8 MiB per call with its output) keeps under the bound plus one call, and
 * computes the right thing (the ctest variant test_engine_bounded_bytes sets
 * a bound of 4 MiB, which makes every call wait for the one before). */
START_TEST(test_operator_calls_count_their_bytes) {
    const long long bound = deft_engine_max_pending_bytes(), each = 2 * (4 << 20);
    long long most = 0;
    DeftNDArrayHandle x = call1("_zeros", 0, NULL, P("shape", "(1048576,)"));
    for (int i = 0; i < 40; i++) {
        DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", "1"));
        long long now = deft_engine_pending_bytes();
        most = now > most ? now : most;
        ck_assert_ok(DeftNDArrayFree(x));
        x = y;
    }
    DeftNDArrayHandle total = call1("sum", 1, &x, NO_PARAMS);
    assert_values(total, 1, VALUES(40.0 * 1048576), 0);
    ck_assert_int_lt(most, bound + each);
    free_all(2, (DeftNDArrayHandle[]){x, total});
    ck_assert_ok(DeftWaitAll());
    ck_assert_int_eq(deft_engine_pending_bytes(), 0);
}
END_TEST

static atomic_int second_ran, first_saw_second;

static int wait_for_second(void *arg) {
    (void)arg;
    for (int i = 0; i < 100000 && !atomic_load(&second_ran); i++) usleep(100);
    atomic_store(&first_saw_second, atomic_load(&second_ran));
    return 0;
}

static int mark_second(void *arg) {
    (void)arg;
    atomic_store(&second_ran, 1);
    return 0;
}

/* Two independent operations, the first waiting (up to 10 s) for the second:
 * with one worker, they run at once only if the thread waiting for all work
 * runs the queued one itself. */
START_TEST(test_waiting_for_all_work_runs_queued_work) {
    if (deft_engine_is_naive()) return;
    atomic_store(&second_ran, 0), atomic_store(&first_saw_second, 0);
    deft_var_t *a = deft_var_new(), *b = deft_var_new();
    deft_engine_op_desc_t first = {.fn = wait_for_second, .writes = &a, .num_writes = 1};
    deft_engine_op_desc_t second = {.fn = mark_second, .writes = &b, .num_writes = 1};
    long helped = deft_engine_helped();
    ck_assert_int_eq(deft_engine_push(&first), 0);
    ck_assert_int_eq(deft_engine_push(&second), 0);
    ck_assert_int_eq(deft_engine_wait_all(), 0);
    deft_var_release(a), deft_var_release(b);
    ck_assert_int_eq(atomic_load(&first_saw_second), 1);
    if (deft_engine_num_workers() == 1) ck_assert_int_gt(deft_engine_helped(), helped);
}
END_TEST

/* ---- waiting with a binding's hooks ---- */

static _Thread_local int hook_depth;
static atomic_int hook_releases, hook_reacquires, hook_mismatches;
static int hook_token;

static void *test_release(void) {
    atomic_fetch_add(&hook_releases, 1);
    hook_depth++;
    return &hook_token;
}

static void test_reacquire(void *state) {
    if (state != &hook_token || hook_depth != 1) atomic_fetch_add(&hook_mismatches, 1);
    hook_depth--;
    atomic_fetch_add(&hook_reacquires, 1);
}

static atomic_bool gate_open;

static int wait_for_gate(void *arg) {
    (void)arg;
    while (!atomic_load(&gate_open)) usleep(100);
    return 0;
}

static void *open_gate_later(void *arg) {
    (void)arg;
    usleep(20000);
    atomic_store(&gate_open, true);
    return NULL;
}

/* Every sleep of the host (a wait for a variable, back-pressure, a wait for
 * all work) is bracketed by the hooks, in pairs, on the sleeping thread. */
START_TEST(test_block_hooks_bracket_every_wait) {
    if (deft_engine_is_naive()) return; /* nothing ever waits there */
    ck_assert_int_eq(DeftSetBlockingHooks(test_release, NULL), -1);
    ck_assert_int_eq(DeftGetLastErrorKind(), DEFT_ERROR_VALUE);
    ck_assert_ok(DeftSetBlockingHooks(test_release, test_reacquire));
    atomic_store(&gate_open, false);
    deft_var_t *v = deft_var_new();
    deft_engine_op_desc_t d = {.fn = wait_for_gate, .writes = &v, .num_writes = 1, .name = "gate"};
    ck_assert_int_eq(deft_engine_push(&d), 0);
    pthread_t opener;
    pthread_create(&opener, NULL, open_gate_later, NULL);
    ck_assert_int_eq(deft_engine_wait_to_read(v), 0);
    pthread_join(opener, NULL);
    int after_wait = atomic_load(&hook_releases);
    atomic_store(&gate_open, false);
    ck_assert_int_eq(deft_engine_push(&d), 0);
    pthread_create(&opener, NULL, open_gate_later, NULL);
    ck_assert_int_eq(deft_engine_wait_all(), 0);
    pthread_join(opener, NULL);
    ck_assert_ok(DeftSetBlockingHooks(NULL, NULL));
    deft_var_release(v);
    ck_assert_int_ge(after_wait, 1);
    ck_assert_int_gt(atomic_load(&hook_releases), after_wait);
    ck_assert_int_eq(atomic_load(&hook_releases), atomic_load(&hook_reacquires));
    ck_assert_int_eq(atomic_load(&hook_mismatches), 0);
}
END_TEST

/* With the queue full of operations waiting at a gate, one more push waits
 * for room: the hooks bracket that wait too (the ctest variant
 * test_engine_bounded_queue bounds the queue at 4 operations). */
START_TEST(test_block_hooks_bracket_back_pressure) {
    long bound = deft_engine_max_pending();
    if (deft_engine_is_naive() || bound > 16) return;
    atomic_store(&hook_releases, 0), atomic_store(&hook_reacquires, 0);
    ck_assert_ok(DeftSetBlockingHooks(test_release, test_reacquire));
    atomic_store(&gate_open, false);
    deft_var_t *vars[17];
    for (long i = 0; i < bound; i++) {
        vars[i] = deft_var_new();
        deft_engine_op_desc_t d = {.fn = wait_for_gate, .writes = &vars[i], .num_writes = 1};
        ck_assert_int_eq(deft_engine_push(&d), 0);
    }
    ck_assert_int_eq(atomic_load(&hook_releases), 0);
    pthread_t opener;
    pthread_create(&opener, NULL, open_gate_later, NULL);
    vars[bound] = deft_var_new();
    deft_engine_op_desc_t d = {.fn = wait_for_gate, .writes = &vars[bound], .num_writes = 1};
    ck_assert_int_eq(deft_engine_push(&d), 0); /* waits for room until the gate opens */
    int during_push = atomic_load(&hook_releases);
    pthread_join(opener, NULL);
    ck_assert_int_eq(deft_engine_wait_all(), 0);
    ck_assert_ok(DeftSetBlockingHooks(NULL, NULL));
    for (long i = 0; i <= bound; i++) deft_var_release(vars[i]);
    ck_assert_int_eq(during_push, 1);
    ck_assert_int_eq(atomic_load(&hook_releases), atomic_load(&hook_reacquires));
}
END_TEST

START_TEST(test_shutdown_then_keep_using_the_library) {
    DeftNDArrayHandle x = call1("_ones", 0, NULL, P("shape", "(100000,)"));
    DeftNDArrayHandle y = call1("_mul_scalar", 1, &x, P("scalar", "3"));
    ck_assert_ok(DeftShutdown());
    DeftNDArrayHandle z = call1("sum", 1, &y, NO_PARAMS);
    assert_values(z, 1, VALUES(300000), 0);
    free_all(3, (DeftNDArrayHandle[]){x, y, z});
}
END_TEST

/* TSan cannot start threads in a forked child, so under TSan the child's work
 * stays small enough to run inline; the other builds make it start workers. */
#ifdef __SANITIZE_THREAD__
#define FORK_ELEMENTS "(2000,)"
#define FORK_TOTAL    2000.0f
#else
#define FORK_ELEMENTS "(200000,)"
#define FORK_TOTAL    200000.0f
#endif

START_TEST(test_forked_child_can_use_the_library) {
    DeftNDArrayHandle x = call1("_ones", 0, NULL, P("shape", FORK_ELEMENTS));
    ck_assert_ok(DeftWaitAll());
    pid_t child = fork();
    if (child == 0) {
        DeftNDArrayHandle y = NULL, in[1] = {x};
        DeftOpHandle sum;
        int nout = 1;
        float total = 0;
        int bad = DeftGetOperator("sum", &sum) ||
                  DeftImperativeInvoke(sum, 1, in, &nout, &y, 0, NULL, NULL) ||
                  DeftNDArrayCopyToHost(y, &total, sizeof total) || total != FORK_TOTAL;
        _exit(bad);
    }
    int status = -1;
    waitpid(child, &status, 0);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

/* The stream seeded with 5: its first two draws of 4 numbers, and a draw into an array a slow
 * call (queued for a worker) still writes, pushed first (*first). */
static void seed_behind_slow_call(DeftNDArrayHandle want[2], DeftNDArrayHandle *first) {
    const char *const *shape = P("shape", "(4,)");
    ck_assert_ok(DeftRandomSeed(5));
    want[0] = call1("_random_uniform", 0, NULL, shape);
    want[1] = call1("_random_uniform", 0, NULL, shape);
    DeftNDArrayHandle ones = call1("_ones", 0, NULL, P("shape", "(4,2000000)"));
    ck_assert_ok(DeftNDArrayWaitToRead(ones));
    *first = call1("sum", 1, &ones, P("axis", "1"));
    ck_assert_ok(DeftNDArrayFree(ones));
    ck_assert_ok(DeftRandomSeed(5));
    int n = 1;
    ck_assert_ok(call("_random_uniform", 0, NULL, &n, first, shape)); /* after the sum */
}

static void assert_draws(DeftNDArrayHandle want[2], DeftNDArrayHandle got[2]) {
    for (int k = 0; k < 2; k++) {
        int64_t count;
        double *w = read_all(want[k], &count), *g = read_all(got[k], &count);
        for (int i = 0; i < 4; i++) ck_assert_double_eq(g[i], w[i]);
        free(w), free(g);
    }
    DeftNDArrayHandle all[] = {want[0], want[1], got[0], got[1]};
    for (int k = 0; k < 4; k++) ck_assert_ok(DeftNDArrayFree(all[k]));
}

/* Two draws get the numbers of their push order, and a seed comes after the draws before it,
 * however they run: the second draw (small: it could run at once on this thread) waits for
 * the first. Kernels take their blocks of the stream when they run, so before draws were
 * ordered the second took the first's numbers, and the first was drawn after the next seed. */
START_TEST(test_draws_keep_their_push_order) {
    DeftNDArrayHandle want[2], got[2];
    seed_behind_slow_call(want, &got[0]);
    got[1] = call1("_random_uniform", 0, NULL, P("shape", "(4,)"));
    ck_assert_ok(DeftRandomSeed(9));
    assert_draws(want, got);
}
END_TEST

/* x + a draw, recorded by deferred compute (lazy: nothing drawn yet). */
static DeftNDArrayHandle record_draw(DeftNDArrayHandle x) {
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle r = call1("_random_uniform", 0, NULL, P("shape", "(4,)"));
    DeftNDArrayHandle y = call1("elemwise_add", 2, (DeftNDArrayHandle[]){x, r}, NO_PARAMS);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    ck_assert_ok(DeftNDArrayFree(r));
    return y;
}

/* So do the draws of a deferred compute run and of a graph's run. */
START_TEST(test_graph_draws_keep_their_push_order) {
    DeftNDArrayHandle want[2], got[2], x = call1("_zeros", 0, NULL, P("shape", "(4,)"));
    seed_behind_slow_call(want, &got[0]);
    DeftNDArrayHandle lazy = record_draw(x);
    got[1] = call1("_copy", 1, &lazy, NO_PARAMS); /* computes the lazy array, waiting for none */
    ck_assert_ok(DeftNDArrayFree(lazy));
    assert_draws(want, got);
    DeftNDArrayHandle y = record_draw(x);
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, &y, (const char *[]){"x"},
                                                     (const char *[]){"y"}, 1, 1, &sym));
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &exec));
    seed_behind_slow_call(want, &got[0]);
    int n = 1;
    got[1] = NULL;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &n, &got[1]));
    assert_draws(want, got);
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
    ck_assert_ok(DeftNDArrayFree(y));
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

START_TEST(test_waiting_rejects_bad_handles) {
    ck_assert_fails(DeftNDArrayWaitToWrite(NULL), DEFT_ERROR_VALUE,
                    "DeftNDArrayWaitToWrite: handle is NULL");
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(1), NULL);
    ck_assert_ok(DeftNDArrayFree(x));
    ck_assert_fails(DeftNDArrayWaitToWrite(x), DEFT_ERROR_VALUE, "already freed");
}
END_TEST

static Suite *engine_suite(void) {
    Suite *suite = suite_create(deft_engine_is_naive() ? "engine (naive)" : "engine (threaded)");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_random_operations_match_sequential_order_bit_for_bit, 0, 2);
    tcase_add_test(tc, test_read_run_at_once_excludes_writers_on_other_threads);
    tcase_add_test(tc, test_failure_is_sticky_until_overwritten);
    tcase_add_test(tc, test_failed_write_into_given_output_fails_its_reads);
    tcase_add_test(tc, test_wait_all_counts_every_failure);
    tcase_add_test(tc, test_wait_all_reports_only_its_own_threads_failures);
    tcase_add_test(tc, test_engine_errors_on_queued_operations);
    tcase_add_test(tc, test_free_while_pending_releases_everything);
    tcase_add_test(tc, test_wait_all_with_concurrent_pushes_from_host_threads);
    tcase_add_test(tc, test_independent_operations_run_in_parallel);
    tcase_add_test(tc, test_worker_count_follows_the_settings);
    tcase_add_test(tc, test_pending_operations_stay_bounded);
    tcase_add_test(tc, test_pending_bytes_stay_bounded);
    tcase_add_test(tc, test_operator_calls_count_their_bytes);
    tcase_add_test(tc, test_waiting_for_all_work_runs_queued_work);
    tcase_add_test(tc, test_block_hooks_bracket_every_wait);
    tcase_add_test(tc, test_block_hooks_bracket_back_pressure);
    tcase_add_test(tc, test_shutdown_then_keep_using_the_library);
    tcase_add_test(tc, test_forked_child_can_use_the_library);
    tcase_add_test(tc, test_waiting_rejects_bad_handles);
    tcase_add_test(tc, test_draws_keep_their_push_order);
    tcase_add_test(tc, test_graph_draws_keep_their_push_order);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(engine_suite());
}
