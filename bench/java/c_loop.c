/* The C reference of bench/java/CallCost.java, in the same process: n calls
 * of _plus_scalar (scalar=1) on a 1-element float32 array, each result freed
 * at once, made from C in one JNI crossing. Returns ns per call (-1 on a
 * failure). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <jni.h>
#include <time.h>

#include <deft/c_api.h>

JNIEXPORT jdouble JNICALL Java_CallCost_cPlusScalar(JNIEnv *env, jclass cls, jint n) {
    (void)env, (void)cls;
    DeftOpHandle plus;
    DeftNDArrayHandle x = NULL;
    const int64_t shape[1] = {1};
    const float one = 1;
    if (DeftGetOperator("_plus_scalar", &plus) ||
        DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &one, sizeof one, &x))
        return -1;
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        DeftNDArrayHandle y = NULL;
        int nout = 1;
        if (DeftImperativeInvoke(plus, 1, &x, &nout, &y, 1, keys, vals) || DeftNDArrayFree(y))
            return DeftNDArrayFree(x), -1;
    }
    if (DeftWaitAll()) return DeftNDArrayFree(x), -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    DeftNDArrayFree(x);
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
}
