/* Shared by the benchmarks: fail loudly, read the clock, find operators. */
#ifndef DEFT_BENCH_UTIL_H
#define DEFT_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The 1-minute load average (every benchmark prints it), or -1 when unknown. */
static inline double load_average(void) {
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = -1;
        fclose(f);
    }
    return load;
}

/* A peer's milliseconds for a case, from the file DEFT_GPU_PEERS names
 * (lines "name<TAB>ms", as bench/python/bench_gpu_peers.py prints them),
 * or 0 when it has none. */
static inline double peer_ms(const char *name) {
    const char *path = getenv("DEFT_GPU_PEERS");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return 0;
    char line[256], key[128];
    double ms = 0, value;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %lf", key, &value) == 2 && strcmp(key, name) == 0) ms = value;
    fclose(f);
    return ms;
}

static inline DeftOpHandle op(const char *name) {
    DeftOpHandle h;
    CHECK(DeftGetOperator(name, &h));
    return h;
}

/* n calls of _plus_scalar, each on the previous result (a new array each
 * time, the previous freed): the last, not waited for. */
static inline DeftNDArrayHandle plus_scalar_calls(DeftNDArrayHandle x, int n) {
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
    return cur;
}

/* The calls, then wait: the imperative dispatch workload. */
static inline void plus_scalar_chain(DeftNDArrayHandle x, int n) {
    DeftNDArrayHandle y = plus_scalar_calls(x, n);
    CHECK(DeftNDArrayWaitToRead(y));
    if (y != x) CHECK(DeftNDArrayFree(y));
}

/* The calls recorded in deferred mode: the last result, lazy (bench_graph
 * times the recording, call_loop counts its instructions). */
static inline DeftNDArrayHandle record_plus_scalar_chain(DeftNDArrayHandle x, int n) {
    CHECK(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle y = plus_scalar_calls(x, n);
    CHECK(DeftSetIsDeferredCompute(0, NULL));
    return y;
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

typedef enum { CALL_PLAIN, CALL_DEFERRED, CALL_RECORDING } call_mode_t;

/* ns per sum call on x in a mode, each result freed (deferred ones never computed). */
static inline double sum_call_ns(DeftNDArrayHandle x, call_mode_t mode, int n) {
    DeftOpHandle sum = op("sum");
    if (mode == CALL_DEFERRED) CHECK(DeftSetIsDeferredCompute(1, NULL));
    if (mode == CALL_RECORDING) CHECK(DeftAutogradSetIsRecording(1, NULL));
    double t0 = now();
    sum_calls(sum, x, n);
    double t = (now() - t0) / n * 1e9;
    CHECK(DeftSetIsDeferredCompute(0, NULL));
    CHECK(DeftAutogradSetIsRecording(0, NULL));
    return t;
}

static inline DeftSymbolHandle apply(const char *name, const char *node, int nin,
                                     DeftSymbolHandle *in, int np, const char *const *keys,
                                     const char *const *vals) {
    DeftSymbolHandle s;
    CHECK(DeftSymbolCreateAtomic(op(name), np, keys, vals, &s));
    CHECK(DeftSymbolCompose(s, node, nin, NULL, in));
    return s;
}

/* (x+5)*(x+5)*0.5 - x over variable "x", as the CSE pass leaves it and as
 * the Fuse pass makes it one node: four passes over memory against one. */
static inline void fusion_graphs(DeftSymbolHandle *unfused, DeftSymbolHandle *fused) {
    const char *sk[1] = {"scalar"}, *five[1] = {"5"}, *half[1] = {"0.5"};
    DeftSymbolHandle x, a, b, c, d;
    CHECK(DeftSymbolCreateVariable("x", &x));
    a = apply("_plus_scalar", NULL, 1, (DeftSymbolHandle[]){x}, 1, sk, five);
    b = apply("elemwise_mul", NULL, 2, (DeftSymbolHandle[]){a, a}, 0, NULL, NULL);
    c = apply("_mul_scalar", NULL, 1, (DeftSymbolHandle[]){b}, 1, sk, half);
    d = apply("elemwise_sub", NULL, 2, (DeftSymbolHandle[]){c, x}, 0, NULL, NULL);
    CHECK(DeftSymbolApplyPasses(d, "CSE", unfused));
    CHECK(DeftSymbolApplyPasses(d, "CSE,Fuse", fused));
    DeftSymbolHandle made[] = {x, a, b, c, d};
    for (int i = 0; i < 5; i++) CHECK(DeftSymbolFree(made[i]));
}

#endif
