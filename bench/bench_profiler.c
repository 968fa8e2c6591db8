/*
 * The profiler's cost, against the same dispatch workload in the same run:
 * the 1-element _plus_scalar chain with the profiler stopped, then running
 * (one "operator" span per call, plus two memory instants with
 * profile_memory). Rounds alternate, each kind keeps its best.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"

#define CALLS 50000

static double per_call(DeftNDArrayHandle x, int running) {
    CHECK(DeftProfilerSetState(running));
    double t0 = now();
    plus_scalar_chain(x, CALLS);
    double t = (now() - t0) / CALLS * 1e9;
    CHECK(DeftProfilerSetState(0));
    CHECK(DeftProfilerReset()); /* drop the events: memory stays flat */
    return t;
}

int main(void) {
    const char *keys[] = {"profile_imperative", "profile_memory", "profile_symbolic"};
    const char *vals[] = {"true", "false", "false"};
    CHECK(DeftProfilerSetConfig(3, keys, vals));
    const int64_t shape[1] = {1};
    DeftNDArrayHandle x;
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    double off = 1e30, on = 1e30, mem = 1e30;
    per_call(x, 0); /* warm up */
    for (int rep = 0; rep < 7; rep++) {
        double t = per_call(x, 0);
        off = t < off ? t : off;
        t = per_call(x, 1);
        on = t < on ? t : on;
        vals[1] = "true";
        CHECK(DeftProfilerSetConfig(3, keys, vals));
        t = per_call(x, 1);
        mem = t < mem ? t : mem;
        vals[1] = "false";
        CHECK(DeftProfilerSetConfig(3, keys, vals));
    }
    printf("profiler, 1-element _plus_scalar chain (ns per call)\n");
    printf("  profiler stopped                %8.0f ns\n", off);
    printf("  running, operator spans         %8.0f ns  %.2fx, %+.0f ns per event\n", on, on / off,
           on - off);
    printf("  running, spans + memory events  %8.0f ns  %.2fx, %+.0f ns per event (3 a call)\n",
           mem, mem / off, (mem - off) / 3);
    CHECK(DeftNDArrayFree(x));
    return 0;
}
