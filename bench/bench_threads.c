/*
 * The thread policy: large elementwise operations with DEFT_NUM_THREADS=2
 * against DEFT_NUM_THREADS=1, in the same run.
 *
 * DEFT_NUM_THREADS is read once per process, so each round forks two
 * children, one per setting, alternating which goes first; each times a
 * few calls (the operator call and the wait for its result, the host's view)
 * after a warm-up and sends the times back. Printed: min and median per
 * setting over every call of every round, their ratio, and the load average.
 *
 * The parent makes no deft call, so each child starts the library afresh.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deft/c_api.h>

#include "bench_util.h"

#define ROUNDS 11
#define CALLS  10 /* timed per child */
#define WARMUP 3

typedef struct workload {
    const char *label;
    const char *op;
    int64_t n;
    int nin;
    bool given_output; /* write into one array made beforehand, not a new one */
} workload_t;

static const workload_t workloads[] = {
    {"4M-element float32 add, new output", "elemwise_add", 4 << 20, 2, false},
    {"4M-element float32 add into a given output", "elemwise_add", 4 << 20, 2, true},
    {"1M-element float32 add, new output", "elemwise_add", 1 << 20, 2, false},
    {"1M-element float32 exp, new output", "exp", 1 << 20, 1, false},
    {"256K-element float32 add, new output", "elemwise_add", 256 << 10, 2, false},
};

/* One call of w, waited for; seconds. */
static double timed_call(const workload_t *w, DeftNDArrayHandle *in, DeftNDArrayHandle given) {
    DeftNDArrayHandle out[1] = {given};
    int nout = 1;
    double t0 = now();
    CHECK(DeftImperativeInvoke(op(w->op), w->nin, in, &nout, out, 0, NULL, NULL));
    CHECK(DeftNDArrayWaitToRead(out[0]));
    double t = now() - t0;
    if (!given) CHECK(DeftNDArrayFree(out[0]));
    return t;
}

static void child(const workload_t *w, const char *threads, int fd) {
    setenv("DEFT_NUM_THREADS", threads, 1);
    const int64_t shape[1] = {w->n};
    DeftNDArrayHandle in[2], given = NULL;
    char dims[32];
    snprintf(dims, sizeof dims, "(%lld,)", (long long)w->n);
    for (int i = 0; i < w->nin; i++) {
        int nout = 1;
        const char *k[2] = {"shape", "value"}, *v[2] = {dims, "0.5"};
        in[i] = NULL;
        CHECK(DeftImperativeInvoke(op("_full"), 0, NULL, &nout, &in[i], 2, k, v));
    }
    if (w->given_output) CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &given));
    CHECK(DeftWaitAll());
    for (int i = 0; i < WARMUP; i++) timed_call(w, in, given);
    double t[CALLS];
    for (int i = 0; i < CALLS; i++) t[i] = timed_call(w, in, given);
    if (write(fd, t, sizeof t) != sizeof t) _exit(1);
    _exit(0);
}

/* CALLS times of w in a child with DEFT_NUM_THREADS=threads. */
static int run_child(const workload_t *w, const char *threads, double *t) {
    int fds[2];
    if (pipe(fds)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        child(w, threads, fds[1]);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], t, CALLS * sizeof *t);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return got == (ssize_t)(CALLS * sizeof *t) && WIFEXITED(status) && WEXITSTATUS(status) == 0
               ? 0
               : -1;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    printf("deft thread policy: DEFT_NUM_THREADS=2 against 1 (%d rounds x %d calls, alternating; "
           "us per call + wait)\n",
           ROUNDS, CALLS);
    for (size_t k = 0; k < sizeof workloads / sizeof *workloads; k++) {
        const workload_t *w = &workloads[k];
        double one[ROUNDS * CALLS], two[ROUNDS * CALLS];
        for (int r = 0; r < ROUNDS; r++) {
            const char *first = r % 2 ? "2" : "1", *second = r % 2 ? "1" : "2";
            double *a = r % 2 ? two : one, *b = r % 2 ? one : two;
            if (run_child(w, first, a + r * CALLS) || run_child(w, second, b + r * CALLS)) {
                fprintf(stderr, "a benchmark child failed\n");
                return 1;
            }
        }
        qsort(one, ROUNDS * CALLS, sizeof *one, compare);
        qsort(two, ROUNDS * CALLS, sizeof *two, compare);
        int mid = ROUNDS * CALLS / 2;
        printf("%-44s 1 thread min %7.1f median %7.1f | 2 threads min %7.1f median %7.1f | "
               "speed-up min %.2fx median %.2fx\n",
               w->label, one[0] * 1e6, one[mid] * 1e6, two[0] * 1e6, two[mid] * 1e6,
               one[0] / two[0], one[mid] / two[mid]);
    }
    printf("load average %.2f\n", load_average());
    return 0;
}
