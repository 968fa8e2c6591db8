/*
 * The parallel-for pool and the time-bounded spin (core/base/parallel.c,
 * core/base/spin.h): every index runs exactly once whatever the split,
 * jobs back to back, nested and concurrent calls, fork-join of two tasks.
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "check_helpers.h"
#include "core/base/parallel.h"
#include "core/base/spin.h"

/* A deadline already past ends polling at the first look at the clock,
 * however fast a pause is on this CPU. */
START_TEST(test_spin_ends_at_its_deadline) {
    deft_spin_t spin = deft_spin_start(-1);
    unsigned rounds = 1;
    while (deft_spin_again(&spin)) rounds++;
    ck_assert_uint_eq(rounds, DEFT_SPIN_CHECK);
    /* A deadline in the future: polls at least until the next look. */
    spin = deft_spin_start(1000000000);
    for (unsigned i = 1; i < DEFT_SPIN_CHECK; i++) ck_assert(deft_spin_again(&spin));
}
END_TEST

typedef struct marks {
    int64_t n;
    atomic_int *hits;
} marks_t;

static void mark(void *arg, int64_t begin, int64_t end) {
    const marks_t *m = arg;
    ck_assert(begin >= 0 && begin < end && end <= m->n);
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&m->hits[i], 1);
}

static void check_once(int64_t n, int64_t grain) {
    atomic_int *hits = calloc((size_t)n + 1, sizeof *hits);
    marks_t m = {n, hits};
    deft_parallel_for(n, grain, mark, &m);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(atomic_load(&hits[i]) == 1, "n %lld grain %lld: index %lld ran %d times",
                      (long long)n, (long long)grain, (long long)i, atomic_load(&hits[i]));
    free(hits);
}

/* Many jobs back to back: a helper late for one job must not run a chunk of
 * the next with the old job's function, nor count into its progress. */
START_TEST(test_every_index_runs_once) {
    const int64_t sizes[] = {1, 2, 3, 7, 64, 1000, 4097, 20000};
    for (int round = 0; round < 60; round++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            check_once(sizes[k], 1 + round % 5);
}
END_TEST

static void nested(void *arg, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) check_once(50, 1);
    (void)arg;
}

START_TEST(test_nested_calls_run) {
    deft_parallel_for(8, 1, nested, NULL);
}
END_TEST

static void *jobs_from_a_thread(void *arg) {
    (void)arg;
    for (int round = 0; round < 100; round++) check_once(3000, 7);
    return NULL;
}

/* Two threads' jobs at once: one gets the pool, the other runs serially. */
START_TEST(test_concurrent_callers) {
    pthread_t other;
    pthread_create(&other, NULL, jobs_from_a_thread, NULL);
    jobs_from_a_thread(NULL);
    pthread_join(other, NULL);
}
END_TEST

typedef struct task {
    atomic_int ran;
    pthread_t thread;
    atomic_int *arrived, *both_arrived;
} task_t;

static void task(void *arg) {
    task_t *t = arg;
    t->thread = pthread_self();
    atomic_fetch_add(&t->ran, 1);
    /* Each waits (up to 0.2 s) for the other: on two threads, both arrive. */
    atomic_fetch_add(t->arrived, 1);
    deft_spin_t spin = deft_spin_start(200000000);
    while (atomic_load(t->arrived) < 2 && deft_spin_again(&spin)) {
    }
    if (atomic_load(t->arrived) == 2) atomic_store(t->both_arrived, 1);
}

START_TEST(test_pair_runs_both_tasks_once) {
    atomic_int arrived = 0, both = 0;
    task_t a = {.arrived = &arrived, .both_arrived = &both};
    task_t b = {.arrived = &arrived, .both_arrived = &both};
    deft_parallel_pair(task, &a, task, &b);
    ck_assert_int_eq(atomic_load(&a.ran), 1);
    ck_assert_int_eq(atomic_load(&b.ran), 1);
    /* A helper too late for its task leaves both to the caller; on two threads they met. */
    if (!pthread_equal(a.thread, b.thread)) ck_assert_int_eq(atomic_load(&both), 1);
}
END_TEST

/* The state letter of thread `tid` of this process ('R' running, 'S' asleep), or 0. */
static char thread_state(const char *tid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char *rest = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    return rest && rest[1] == ' ' ? rest[2] : 0;
}

/* Whether every other thread of this process is off the CPU within `seconds`. */
static bool others_sleep_within(double seconds) {
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)gettid());
    for (double waited = 0; waited < seconds; waited += 0.005) {
        DIR *dir = opendir("/proc/self/task");
        if (!dir) return true; /* no /proc: nothing to look at */
        bool running = false;
        for (struct dirent *d; (d = readdir(dir));)
            if (d->d_name[0] != '.' && strcmp(d->d_name, self) && thread_state(d->d_name) == 'R')
                running = true;
        closedir(dir);
        if (!running) return true;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    return false;
}

/* While a graph runs, idle helpers poll between its jobs, but only for a
 * while: a graph that stops handing out work (a long serial kernel) gets
 * the other cores back, and its next job still finds helpers. */
START_TEST(test_helpers_poll_while_a_graph_runs_then_sleep) {
    deft_parallel_hot_begin();
    deft_parallel_hot_begin(); /* nested runs count */
    check_once(1 << 16, 1);
    deft_parallel_hot_end();
    ck_assert_msg(others_sleep_within(2.0), "a helper still polls 2 s after its last job");
    check_once(1 << 16, 1);
    deft_parallel_hot_end();
    check_once(1 << 16, 1);
    ck_assert(others_sleep_within(2.0));
}
END_TEST

static Suite *parallel_suite(void) {
    Suite *suite = suite_create("parallel");
    TCase *tc = tcase_create("parallel");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_spin_ends_at_its_deadline);
    tcase_add_test(tc, test_every_index_runs_once);
    tcase_add_test(tc, test_nested_calls_run);
    tcase_add_test(tc, test_concurrent_callers);
    tcase_add_test(tc, test_pair_runs_both_tasks_once);
    tcase_add_test(tc, test_helpers_poll_while_a_graph_runs_then_sleep);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(parallel_suite());
}
