/* The C reference of bench/java/CallCost.java, in the same process and one
 * JNI crossing: bench/plus_scalar_loop.c on a 1-element float32 array, timed.
 * Returns ns per call (-1 on a failure). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <jni.h>
#include <time.h>

#include <deft/c_api.h>

int deft_bench_plus_scalar_calls(DeftNDArrayHandle x, int n); /* ../plus_scalar_loop.c */

JNIEXPORT jdouble JNICALL Java_CallCost_cPlusScalar(JNIEnv *env, jclass cls, jint n) {
    (void)env, (void)cls;
    DeftNDArrayHandle x = NULL;
    const int64_t shape[1] = {1};
    const float one = 1;
    if (DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &one, sizeof one, &x))
        return -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = deft_bench_plus_scalar_calls(x, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    DeftNDArrayFree(x);
    if (status) return -1;
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
}
