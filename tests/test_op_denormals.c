/*
 * Denormals are flushed to zero on every thread that runs kernels (see
 * core/base/fpmode.h): engine workers, parallel-for helpers, and the
 * caller's thread while a kernel runs inline, whose own mode is restored.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "core/base/fpmode.h"
#include "core/base/parallel.h"
#include "core/engine/engine.h"
#include "op_helpers.h"

/* What a thread computes for half the smallest normal float: 0 when it flushes. */
static float denormal_product(void) {
    volatile float small = 2e-38f, half = 0.5f;
    return small * half;
}

typedef struct seen {
    atomic_int flushing, ran;
    float product;
} seen_t;

static int record_mode(void *arg) {
    seen_t *s = arg;
    atomic_store(&s->flushing, deft_fpmode_flushing());
    s->product = denormal_product();
    atomic_store(&s->ran, 1);
    return 0;
}

/* Work that is not small goes to an engine worker. */
START_TEST(test_engine_workers_flush_denormals) {
#if defined(__SSE2__) || defined(__x86_64__)
    deft_var_t *var = deft_var_new();
    seen_t s = {0};
    deft_engine_op_desc_t d = {
        .fn = record_mode, .ctx = &s, .writes = &var, .num_writes = 1, .name = "mode"};
    ck_assert_int_eq(deft_engine_push(&d), 0);
    ck_assert_int_eq(deft_engine_wait_to_read(var), 0);
    ck_assert_int_eq(atomic_load(&s.ran), 1);
    ck_assert_int_eq(atomic_load(&s.flushing), 1);
    ck_assert(s.product == 0);
    ck_assert(denormal_product() > 0); /* the test's own thread is untouched */
    deft_var_release(var);
#endif
}
END_TEST

/* Small work pushed from here runs inline: flushing during it, not after. */
START_TEST(test_inline_work_flushes_and_restores_the_callers_mode) {
#if defined(__SSE2__) || defined(__x86_64__)
    deft_var_t *var = deft_var_new();
    seen_t s = {0};
    deft_engine_op_desc_t d = {.fn = record_mode,
                               .ctx = &s,
                               .writes = &var,
                               .num_writes = 1,
                               .name = "mode",
                               .small = true};
    ck_assert_int_eq(deft_engine_push(&d), 0);
    ck_assert_int_eq(deft_engine_wait_to_read(var), 0);
    ck_assert_int_eq(atomic_load(&s.flushing), 1);
    ck_assert(s.product == 0);
    ck_assert_int_eq(deft_fpmode_flushing(), 0);
    ck_assert(denormal_product() > 0);
    deft_var_release(var);
#endif
}
END_TEST

typedef struct chunks {
    pthread_t caller;
    atomic_int helper_chunks, helper_not_flushing;
} chunks_t;

/* The caller's chunks wait (up to 5 s on a loaded machine) until a helper
 * has taken one. */
static void note_chunk(void *arg, int64_t begin, int64_t end) {
    chunks_t *c = arg;
    if (pthread_equal(pthread_self(), c->caller)) {
        for (int ms = 0; ms < 5000 && atomic_load(&c->helper_chunks) == 0; ms++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        return;
    }
    atomic_fetch_add(&c->helper_chunks, (int)(end - begin));
    if (!deft_fpmode_flushing() || denormal_product() != 0)
        atomic_fetch_add(&c->helper_not_flushing, 1);
}

START_TEST(test_parallel_for_helpers_flush_denormals) {
#if defined(__SSE2__) || defined(__x86_64__)
    if (deft_parallel_threads() < 2) return; /* no helpers to check */
    chunks_t c = {.caller = pthread_self()};
    deft_parallel_for(64, 1, note_chunk, &c);
    ck_assert_int_eq(atomic_load(&c.helper_not_flushing), 0);
    ck_assert_msg(atomic_load(&c.helper_chunks) > 0, "no helper ran a chunk");
#endif
}
END_TEST

static Suite *fpmode_suite(void) {
    Suite *suite = suite_create("floating-point mode");
    TCase *tc = tcase_create("fpmode");
    tcase_add_test(tc, test_engine_workers_flush_denormals);
    tcase_add_test(tc, test_inline_work_flushes_and_restores_the_callers_mode);
    tcase_add_test(tc, test_parallel_for_helpers_flush_denormals);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(fpmode_suite());
}
