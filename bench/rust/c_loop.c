/* The reference: n calls of _plus_scalar on x from C, each result freed at
 * once, in the same process and run as the Rust variants (bench/rust). */
#include <deft/c_api.h>
#include <stddef.h>

int c_plus_scalar_calls(DeftNDArrayHandle x, int n) {
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
