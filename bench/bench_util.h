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

#endif
