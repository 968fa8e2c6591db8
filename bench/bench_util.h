/* Shared by the benchmarks: fail loudly, read the clock, find operators. */
#ifndef DEFT_BENCH_UTIL_H
#define DEFT_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h> /* clock_gettime: define _POSIX_C_SOURCE before any include */

#include <deft/c_api.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "%s failed: %s\n", #call, DeftGetLastError());                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline DeftOpHandle op(const char *name) {
    DeftOpHandle h;
    CHECK(DeftGetOperator(name, &h));
    return h;
}

/* n calls of _plus_scalar, each on the previous result (a new array each
 * time, freed once read), then wait: the imperative dispatch workload. */
static inline void plus_scalar_chain(DeftNDArrayHandle x, int n) {
    DeftOpHandle plus = op("_plus_scalar");
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    DeftNDArrayHandle cur = x;
    for (int i = 0; i < n; i++) {
        DeftNDArrayHandle out[1] = {NULL};
        int nout = 1;
        CHECK(DeftImperativeInvoke(plus, 1, &cur, &nout, out, 1, keys, vals));
        if (cur != x) CHECK(DeftNDArrayFree(cur));
        cur = out[0];
    }
    CHECK(DeftNDArrayWaitToRead(cur));
    if (cur != x) CHECK(DeftNDArrayFree(cur));
}

/* n calls of sum on x, each result freed at once, then wait: the recording
 * workload (bench_autograd times it, call_loop counts its instructions). */
static inline void sum_calls(DeftOpHandle sum, DeftNDArrayHandle x, int n) {
    for (int i = 0; i < n; i++) {
        DeftNDArrayHandle y = NULL;
        int nout = 1;
        CHECK(DeftImperativeInvoke(sum, 1, &x, &nout, &y, 0, NULL, NULL));
        CHECK(DeftNDArrayFree(y));
    }
    CHECK(DeftWaitAll());
}

#endif
