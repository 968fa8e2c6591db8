#define _POSIX_C_SOURCE 200809L
/*
 * The operator call that bench_autograd times, in a loop and nothing else,
 * for counting its instructions (bench/instructions.sh): a sum over a 1x1
 * array marked for autograd, each result freed, N times, in one mode.
 * In trigger mode each call is recorded in deferred mode and its result read,
 * which computes it. Counts do not move with the machine's load, as times on
 * shared machines do.
 *
 *   call_loop plain|deferred|autograd|trigger N
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

int main(int argc, char **argv) {
    const char *mode = argc == 3 ? argv[1] : "";
    int n = argc == 3 ? atoi(argv[2]) : 0;
    bool deferred = strcmp(mode, "deferred") == 0, autograd = strcmp(mode, "autograd") == 0;
    bool trigger = strcmp(mode, "trigger") == 0;
    if (n <= 0 || !(deferred || autograd || trigger || strcmp(mode, "plain") == 0)) {
        fprintf(stderr, "usage: call_loop plain|deferred|autograd|trigger N\n");
        return 2;
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
