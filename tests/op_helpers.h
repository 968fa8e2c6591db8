/*
 * Helpers for operator tests: arrays from double values in any dtype,
 * reading them back, and invoking an operator by name with parameters given
 * as a NULL-terminated list P("key", "value", ...).
 */
#ifndef DEFT_TESTS_OP_HELPERS_H
#define DEFT_TESTS_OP_HELPERS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "check_helpers.h"
/* Half conversions come from the library's own header; a test that must see
 * only the public headers (test_extension) defines DEFT_TESTS_PUBLIC_ONLY
 * and gets no float16 or bfloat16 helpers. */
#ifndef DEFT_TESTS_PUBLIC_ONLY
#include "core/math/dtype_math.h"
#endif

/* A reference loop, and the helpers it calls: plain arithmetic on the test's
 * own buffers, on its own thread, where ThreadSanitizer (races, not indices)
 * has nothing to find. Left uninstrumented: the convolution suite's loops
 * were 80% of its 160 s under TSan. */
#define REFERENCE_LOOP __attribute__((no_sanitize("thread")))

#define P(...)      ((const char *[]){__VA_ARGS__, NULL})
#define NO_PARAMS   ((const char *[]){NULL})
#define SHAPE(...)  ((const int64_t[]){__VA_ARGS__})
#define VALUES(...) ((const double[]){__VA_ARGS__})

static const int arith_dtypes[] = {DEFT_FLOAT32, DEFT_FLOAT64, DEFT_INT32, DEFT_INT64, DEFT_UINT8};
#define NUM_ARITH_DTYPES 5

static inline int64_t count_of(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Write v into element i of a buffer of `dtype`, as a C cast would (tests use in-range values). */
static inline void put(void *buf, int dtype, int64_t i, double v) {
    switch (dtype) {
    case DEFT_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case DEFT_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    case DEFT_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DEFT_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case DEFT_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case DEFT_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case DEFT_BOOL:
        ((uint8_t *)buf)[i] = v != 0;
        break;
#ifndef DEFT_TESTS_PUBLIC_ONLY
    case DEFT_FLOAT16: /* through float32, as Cast rounds: exact for values exact in float32 */
        ((uint16_t *)buf)[i] = deft_float_to_half((float)v);
        break;
    case DEFT_BFLOAT16:
        ((uint16_t *)buf)[i] = deft_float_to_bf16((float)v);
        break;
#endif
    default:
        ck_abort_msg("put: dtype %d not handled by the test helper", dtype);
    }
}

static inline double get(const void *buf, int dtype, int64_t i) {
    switch (dtype) {
    case DEFT_FLOAT32:
        return ((const float *)buf)[i];
    case DEFT_FLOAT64:
        return ((const double *)buf)[i];
    case DEFT_INT32:
        return ((const int32_t *)buf)[i];
    case DEFT_INT64:
        return (double)((const int64_t *)buf)[i];
    case DEFT_UINT8:
        return ((const uint8_t *)buf)[i];
    case DEFT_INT8:
        return ((const int8_t *)buf)[i];
    case DEFT_BOOL:
        return ((const uint8_t *)buf)[i];
#ifndef DEFT_TESTS_PUBLIC_ONLY
    case DEFT_FLOAT16:
        return deft_half_to_float(((const uint16_t *)buf)[i]);
    case DEFT_BFLOAT16:
        return deft_bf16_to_float(((const uint16_t *)buf)[i]);
#endif
    default:
        ck_abort_msg("get: dtype %d not handled by the test helper", dtype);
    }
    return 0;
}

static inline DeftNDArrayHandle make(int dtype, int ndim, const int64_t *shape,
                                     const double *values) {
    int64_t n = count_of(ndim, shape);
    size_t elem;
    ck_assert_ok(DeftDTypeGetSize(dtype, &elem));
    void *buf = calloc((size_t)(n ? n : 1), elem);
    for (int64_t i = 0; values && i < n; i++) put(buf, dtype, i, values[i]);
    DeftNDArrayHandle h;
    ck_assert_ok(
        DeftNDArrayCreateFromData(shape, ndim, dtype, DEFT_CPU, 0, buf, (size_t)n * elem, &h));
    free(buf);
    return h;
}

/* Overwrite an array's n elements with values converted to its dtype. */
static inline void set_values(DeftNDArrayHandle h, int64_t n, const double *values) {
    int dtype;
    size_t elem;
    ck_assert_ok(DeftNDArrayGetDType(h, &dtype));
    ck_assert_ok(DeftDTypeGetSize(dtype, &elem));
    void *buf = calloc((size_t)(n ? n : 1), elem);
    for (int64_t i = 0; i < n; i++) put(buf, dtype, i, values[i]);
    ck_assert_ok(DeftNDArrayCopyFromHost(h, buf, (size_t)n * elem));
    free(buf);
}

/* Read an array as doubles into a new buffer; *n receives the count. */
static inline double *read_all(DeftNDArrayHandle h, int64_t *n) {
    int dtype;
    size_t nbytes, elem;
    ck_assert_ok(DeftNDArrayGetDType(h, &dtype));
    ck_assert_ok(DeftNDArrayGetNBytes(h, &nbytes));
    ck_assert_ok(DeftDTypeGetSize(dtype, &elem));
    void *raw = malloc(nbytes ? nbytes : 1);
    ck_assert_ok(DeftNDArrayCopyToHost(h, raw, nbytes));
    *n = (int64_t)(nbytes / elem);
    double *out = malloc(sizeof(double) * (size_t)(*n ? *n : 1));
    for (int64_t i = 0; i < *n; i++) out[i] = get(raw, dtype, i);
    free(raw);
    return out;
}

static inline DeftOpHandle op_named(const char *name) {
    DeftOpHandle op;
    ck_assert_msg(DeftGetOperator(name, &op) == 0, "%s", DeftGetLastError());
    return op;
}

/* Occurrences of `needle` in `text` (counting operators in saved JSON). */
static inline int count_text(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static inline int count_params(const char *const *params) {
    int n = 0;
    while (params[2 * n]) n++;
    return n;
}

/* Invoke; returns the status. outputs must have room for *nout handles (NULL: create). */
static inline int call(const char *name, int nin, const DeftNDArrayHandle *in, int *nout,
                       DeftNDArrayHandle *out, const char *const *params) {
    int np = count_params(params);
    const char *keys[16], *vals[16];
    for (int i = 0; i < np; i++) keys[i] = params[2 * i], vals[i] = params[2 * i + 1];
    return DeftImperativeInvoke(op_named(name), nin, in, nout, out, np, keys, vals);
}

/* Invoke an operator with one output and return it (fails the test on error). */
static inline DeftNDArrayHandle call1(const char *name, int nin, const DeftNDArrayHandle *in,
                                      const char *const *params) {
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    int status = call(name, nin, in, &nout, out, params);
    ck_assert_msg(status == 0, "%s failed: %s", name, DeftGetLastError());
    ck_assert_int_eq(nout, 1);
    return out[0];
}

/* Assert that invoking fails with the given kind and message text. */
#define ck_assert_call_fails(name, nin, in, params, kind, text)                                    \
    do {                                                                                           \
        DeftNDArrayHandle out_[4] = {NULL, NULL, NULL, NULL};                                      \
        int nout_ = 4;                                                                             \
        ck_assert_fails(call(name, nin, in, &nout_, out_, params), kind, text);                    \
        ck_assert_ptr_null(out_[0]);                                                               \
    } while (0)

/* Assert that invoking fails when it runs, with the given kind and message text: a
 * kernel's error (a bad index) is reported by the call, or, when the operation ran
 * asynchronously, by the first read of its output. */
#define ck_assert_run_fails(name, nin, in, params, kind, text)                                     \
    do {                                                                                           \
        DeftNDArrayHandle out_[4] = {NULL, NULL, NULL, NULL};                                      \
        int nout_ = 4;                                                                             \
        if (call(name, nin, in, &nout_, out_, params) == 0) {                                      \
            ck_assert_fails(DeftNDArrayWaitToRead(out_[0]), kind, text);                           \
            for (int k_ = 0; k_ < nout_; k_++) DeftNDArrayFree(out_[k_]);                          \
        } else {                                                                                   \
            ck_assert_fails(-1, kind, text);                                                       \
        }                                                                                          \
    } while (0)

static inline void assert_shape(DeftNDArrayHandle h, int ndim, const int64_t *shape) {
    int64_t got[DEFT_MAX_NDIM];
    int got_ndim;
    ck_assert_ok(DeftNDArrayGetShape(h, got, DEFT_MAX_NDIM, &got_ndim));
    ck_assert_int_eq(got_ndim, ndim);
    for (int d = 0; d < ndim; d++)
        ck_assert_msg(got[d] == shape[d], "dimension %d is %lld, expected %lld", d,
                      (long long)got[d], (long long)shape[d]);
}

static inline bool close_enough(double got, double want, double tol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol * (1 + fabs(want));
}

/* Compare an array's values with expected ones (NaN equals NaN, inf exactly). */
static inline void assert_values(DeftNDArrayHandle h, int64_t n, const double *want, double tol) {
    int64_t got_n;
    double *got = read_all(h, &got_n);
    ck_assert_int_eq(got_n, n);
    for (int64_t i = 0; i < n; i++) /* per element: only a difference reaches Check */
        if (!close_enough(got[i], want[i], tol))
            ck_abort_msg("element %lld is %.17g, expected %.17g", (long long)i, got[i], want[i]);
    free(got);
}

static inline double tol_for(int dtype) {
    return dtype == DEFT_FLOAT32 ? 2e-6 : dtype == DEFT_FLOAT64 ? 1e-13 : 0;
}

/* A CPU memory statistic (DEFT_MEM_*) once every pending operation is done. */
static inline int64_t mem_stat(int stat) {
    int64_t v;
    ck_assert_ok(DeftWaitAll());
    ck_assert_ok(DeftGetMemoryStat(DEFT_CPU, 0, stat, &v));
    return v;
}

static inline void free_all(int n, DeftNDArrayHandle *h) {
    for (int i = 0; i < n; i++) ck_assert_ok(DeftNDArrayFree(h[i]));
}

static inline int dtype_of(DeftNDArrayHandle h) {
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(h, &dtype));
    return dtype;
}

/* A half array holds `want` rounded once to its dtype (float16 or bfloat16). */
static inline void assert_half_rounded(DeftNDArrayHandle h, int dtype, int64_t n,
                                       const double *want) {
    double *rounded = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double bits; /* room for an element of any dtype */
    for (int64_t i = 0; i < n; i++)
        put(&bits, dtype, 0, want[i]), rounded[i] = get(&bits, dtype, 0);
    assert_values(h, n, rounded, 0);
    free(rounded);
}

#endif
