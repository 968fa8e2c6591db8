#define _POSIX_C_SOURCE 200809L
/*
 * bench_autograd's recording workload as a library, for
 * bench/python/bench_recording.py: Python loads it with ctypes and times
 * batches of these calls (timed here, in C) alternately with batches of
 * np.add, so that both see the same machine load.
 */
#include "bench_util.h"

/* ns per call of a 1-element sum on a variable marked for autograd, each
 * result freed, in mode 0 (plain), 1 (deferred) or 2 (recording). */
double deft_bench_sum_ns(int mode, int n) {
    static DeftNDArrayHandle x, grad;
    if (!x) {
        const int64_t shape[2] = {1, 1};
        const float one = 1, zero = 0;
        CHECK(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &one, sizeof one, &x));
        CHECK(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &zero, sizeof zero,
                                        &grad));
        CHECK(DeftAutogradMarkVariables(1, &x, NULL, &grad));
    }
    if (mode < CALL_PLAIN || mode > CALL_RECORDING || n <= 0) return -1;
    return sum_call_ns(x, (call_mode_t)mode, n);
}
