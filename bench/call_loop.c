#define _POSIX_C_SOURCE 200809L
/*
 * The operator call that bench_autograd times, in a loop and nothing else,
 * for counting its instructions (bench/instructions.sh): a sum over a 1x1
 * array marked for autograd, each result freed, N times, in one mode.
 * In trigger mode each call is recorded in deferred mode and its result read,
 * which computes it. In chain and one-off mode the calls are bench_graph's
 * 100-node chains of _plus_scalar, each recorded in deferred mode (chain:
 * then freed uncomputed; one-off: then exported, made an executor and run
 * once), so the count per call is per node. Counts do not move with the
 * machine's load, as times on shared machines do.
 *
 *   call_loop plain|deferred|autograd|trigger|chain|one-off N
 */
#include <stdbool.h>
#include <string.h>

#include "bench_util.h"

/* n sums recorded in deferred mode, each read (which computes it) and freed. */
static void triggered_sum_calls(DeftOpHandle sum, DeftNDArrayHandle x, int n) {
    for (int i = 0; i < n; i++) {
        DeftNDArrayHandle y = NULL;
        int nout = 1;
        CHECK(DeftSetIsDeferredCompute(1, NULL));
        CHECK(DeftImperativeInvoke(sum, 1, &x, &nout, &y, 0, NULL, NULL));
        CHECK(DeftSetIsDeferredCompute(0, NULL));
        CHECK(DeftNDArrayWaitToRead(y));
        CHECK(DeftNDArrayFree(y));
    }
}

#define CHAIN 100

/* The chain exported, made an executor and run once (bench_graph's one-off graph). */
static void run_once(DeftNDArrayHandle x, DeftNDArrayHandle y) {
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    CHECK(DeftNDArrayGetDeferredComputeSymbol(&x, &y, (const char *[]){"x"}, (const char *[]){"y"},
                                              1, 1, &sym));
    CHECK(DeftCachedOpCreate(sym, 0, &exec));
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    CHECK(DeftCachedOpInvoke(exec, 1, &x, &nout, &out));
    CHECK(DeftNDArrayWaitToRead(out));
    CHECK(DeftNDArrayFree(out));
    CHECK(DeftCachedOpFree(exec));
    CHECK(DeftSymbolFree(sym));
}

/* n nodes in chains of CHAIN, each freed uncomputed or (one_off) run once. */
static void chains(int n, bool one_off) {
    const int64_t shape[1] = {1};
    DeftNDArrayHandle x;
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    for (int i = 0; i < n / CHAIN; i++) {
        DeftNDArrayHandle y = record_plus_scalar_chain(x, CHAIN);
        if (one_off) run_once(x, y);
        CHECK(DeftNDArrayFree(y));
    }
    CHECK(DeftWaitAll());
    CHECK(DeftNDArrayFree(x));
}

int main(int argc, char **argv) {
    const char *mode = argc == 3 ? argv[1] : "";
    int n = argc == 3 ? atoi(argv[2]) : 0;
    bool deferred = strcmp(mode, "deferred") == 0, autograd = strcmp(mode, "autograd") == 0;
    bool trigger = strcmp(mode, "trigger") == 0;
    bool chain = strcmp(mode, "chain") == 0, one_off = strcmp(mode, "one-off") == 0;
    if (n <= 0 ||
        !(deferred || autograd || trigger || chain || one_off || strcmp(mode, "plain") == 0)) {
        fprintf(stderr, "usage: call_loop plain|deferred|autograd|trigger|chain|one-off N\n");
        return 2;
    }
    if (chain || one_off) {
        chains(n, one_off);
        return 0;
    }
    const int64_t shape[2] = {1, 1};
    const float one = 1, zero = 0;
    DeftNDArrayHandle x, grad;
    CHECK(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &one, sizeof one, &x));
    CHECK(
        DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &zero, sizeof zero, &grad));
    CHECK(DeftAutogradMarkVariables(1, &x, NULL, &grad));
    DeftOpHandle sum = op("sum");
    if (deferred) CHECK(DeftSetIsDeferredCompute(1, NULL));
    if (autograd) CHECK(DeftAutogradSetIsRecording(1, NULL));
    if (trigger)
        triggered_sum_calls(sum, x, n);
    else
        sum_calls(sum, x, n);
    CHECK(DeftSetIsDeferredCompute(0, NULL));
    CHECK(DeftAutogradSetIsRecording(0, NULL));
    CHECK(DeftNDArrayFree(x));
    CHECK(DeftNDArrayFree(grad));
    return 0;
}
