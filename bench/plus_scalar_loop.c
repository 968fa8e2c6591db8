/* The C reference of the bindings' per-call benchmarks (bench/go, bench/java,
 * bench/rust): n calls of _plus_scalar (scalar=1) on x, each result freed at
 * once, in the same process and run as the binding's variants, which time it
 * as they time themselves. 0, or -1 on a failure. */
#include <deft/c_api.h>

int deft_bench_plus_scalar_calls(DeftNDArrayHandle x, int n) {
    DeftOpHandle plus;
    if (DeftGetOperator("_plus_scalar", &plus)) return -1;
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    for (int i = 0; i < n; i++) {
        DeftNDArrayHandle y = NULL;
        int nout = 1;
        if (DeftImperativeInvoke(plus, 1, &x, &nout, &y, 1, keys, vals) || DeftNDArrayFree(y))
            return -1;
    }
    return DeftWaitAll();
}
