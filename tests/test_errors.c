/*
 * Bad input to every NDArray function: each returns -1 with a message naming
 * the function and the argument, and leaves its out-parameters untouched.
 */
#include <pthread.h>
#include <stdint.h>

#include "check_helpers.h"
#include "core/base/error.h"
#include "core/base/shape.h"

static DeftNDArrayHandle sentinel(void) {
    return (DeftNDArrayHandle)(uintptr_t)0x5E5E;
}

static DeftNDArrayHandle make_2x3(void) {
    const int64_t shape[2] = {2, 3};
    DeftNDArrayHandle arr;
    ck_assert_ok(DeftNDArrayCreate(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &arr));
    return arr;
}

START_TEST(test_create_rejects_bad_shapes) {
    DeftNDArrayHandle out = sentinel();
    const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t negative[2] = {4, -3};
    ck_assert_fails(DeftNDArrayCreate(nine, 9, DEFT_FLOAT32, DEFT_CPU, 0, &out), DEFT_ERROR_VALUE,
                    "DeftNDArrayCreate: shape has 9 dimensions, expected 0 to 8");
    ck_assert_fails(DeftNDArrayCreate(nine, -1, DEFT_FLOAT32, DEFT_CPU, 0, &out), DEFT_ERROR_VALUE,
                    "shape has -1 dimensions");
    ck_assert_fails(DeftNDArrayCreate(negative, 2, DEFT_FLOAT32, DEFT_CPU, 0, &out),
                    DEFT_ERROR_VALUE, "shape[1] is -3, expected a dimension >= 0");
    ck_assert_fails(DeftNDArrayCreate(NULL, 2, DEFT_FLOAT32, DEFT_CPU, 0, &out), DEFT_ERROR_VALUE,
                    "shape is NULL but ndim is 2");
    ck_assert_ptr_eq(out, sentinel());
}
END_TEST

START_TEST(test_create_rejects_bad_dtype_device_and_out) {
    DeftNDArrayHandle out = sentinel();
    const int64_t shape[1] = {4};
    ck_assert_fails(DeftNDArrayCreate(shape, 1, 11, DEFT_CPU, 0, &out), DEFT_ERROR_TYPE,
                    "DeftNDArrayCreate: dtype is 11, which is not a dtype");
    ck_assert_fails(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, 7, 0, &out), DEFT_ERROR_VALUE,
                    "device has device type 7, expected cpu (1) or gpu (2)");
    ck_assert_fails(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 1, &out), DEFT_ERROR_VALUE,
                    "device is cpu(1), expected cpu(0)");
    int gpus = 0;
    ck_assert_ok(DeftGetGPUCount(&gpus));
    if (gpus == 0)
        ck_assert_fails(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_GPU, 0, &out),
                        DEFT_ERROR_NOT_IMPLEMENTED, "device is gpu(0), but no GPU is available");
    else
        ck_assert_fails(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_GPU, gpus, &out),
                        DEFT_ERROR_INDEX, "expected a GPU number in [0, ");
    ck_assert_fails(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, NULL), DEFT_ERROR_VALUE,
                    "DeftNDArrayCreate: out is NULL");
    ck_assert_ptr_eq(out, sentinel());
}
END_TEST

START_TEST(test_create_rejects_overflowing_and_unallocatable_shapes) {
    DeftNDArrayHandle out = sentinel();
    int64_t live_before, live_after;
    ck_assert_ok(DeftGetLiveNDArrayCount(&live_before));
    const int64_t overflow[3] = {INT64_C(1) << 40, INT64_C(1) << 30, 1 << 10};
    ck_assert_fails(DeftNDArrayCreate(overflow, 3, DEFT_FLOAT32, DEFT_CPU, 0, &out),
                    DEFT_ERROR_VALUE, "more elements than fit in int64");
    const int64_t too_many_bytes[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
    ck_assert_fails(DeftNDArrayCreate(too_many_bytes, 2, DEFT_FLOAT32, DEFT_CPU, 0, &out),
                    DEFT_ERROR_VALUE, "needs more than");
    /* 2^61 bytes fits in ptrdiff_t but in no machine's memory. */
    const int64_t huge[2] = {INT64_C(1) << 30, INT64_C(1) << 28};
    ck_assert_fails(DeftNDArrayCreate(huge, 2, DEFT_FLOAT64, DEFT_CPU, 0, &out),
                    DEFT_ERROR_OUT_OF_MEMORY,
                    "cannot allocate 2305843009213693952 bytes on cpu(0)");
    ck_assert_ptr_eq(out, sentinel());
    ck_assert_ok(DeftGetLiveNDArrayCount(&live_after));
    ck_assert_int_eq(live_after, live_before);
}
END_TEST

START_TEST(test_create_from_data_rejects_size_mismatch) {
    DeftNDArrayHandle out = sentinel();
    const int64_t shape[2] = {2, 3};
    float data[6] = {0};
    ck_assert_fails(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, data, 20, &out),
                    DEFT_ERROR_VALUE,
                    "DeftNDArrayCreateFromData: nbytes is 20, expected 24 for shape (2,3) of "
                    "float32");
    ck_assert_fails(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, NULL, 24, &out),
                    DEFT_ERROR_VALUE, "data is NULL but nbytes is 24");
    ck_assert_fails(DeftNDArrayCreateFromData(shape, 2, 99, DEFT_CPU, 0, data, 24, &out),
                    DEFT_ERROR_TYPE, "dtype is 99");
    ck_assert_fails(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, data, 24, NULL),
                    DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_ptr_eq(out, sentinel());
}
END_TEST

START_TEST(test_host_copies_reject_bad_buffers) {
    DeftNDArrayHandle arr = make_2x3();
    const float ones[6] = {1, 1, 1, 1, 1, 1};
    float out[8];
    for (int i = 0; i < 8; i++) out[i] = 9.0f;
    ck_assert_fails(DeftNDArrayCopyToHost(arr, out, sizeof out), DEFT_ERROR_VALUE,
                    "DeftNDArrayCopyToHost: nbytes is 32, expected 24 for shape (2,3) of float32");
    ck_assert_float_eq(out[0], 9.0f);
    ck_assert_fails(DeftNDArrayCopyToHost(arr, NULL, 24), DEFT_ERROR_VALUE, "data is NULL");
    ck_assert_fails(DeftNDArrayCopyToHost(NULL, out, 24), DEFT_ERROR_VALUE,
                    "DeftNDArrayCopyToHost: handle is NULL, expected an NDArray handle");
    ck_assert_fails(DeftNDArrayCopyFromHost(arr, ones, 4), DEFT_ERROR_VALUE,
                    "DeftNDArrayCopyFromHost: nbytes is 4, expected 24");
    ck_assert_fails(DeftNDArrayCopyFromHost(arr, NULL, 24), DEFT_ERROR_VALUE, "data is NULL");
    ck_assert_fails(DeftNDArrayCopyFromHost(NULL, ones, 24), DEFT_ERROR_VALUE, "handle is NULL");
    ck_assert_ok(DeftNDArrayCopyToHost(arr, out, 24));
    ck_assert_float_eq(out[0], 0.0f); /* the failed CopyFromHost changed nothing */
    ck_assert_ok(DeftNDArrayFree(arr));
}
END_TEST

START_TEST(test_getters_reject_null_handles_and_outs) {
    DeftNDArrayHandle arr = make_2x3();
    int value = -9, value2 = -9;
    int64_t size = -9, shape[DEFT_MAX_NDIM] = {-9};
    size_t nbytes = 99;
    ck_assert_fails(DeftNDArrayGetNDim(NULL, &value), DEFT_ERROR_VALUE,
                    "DeftNDArrayGetNDim: handle is NULL");
    ck_assert_fails(DeftNDArrayGetNDim(arr, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_fails(DeftNDArrayGetShape(NULL, shape, 8, &value), DEFT_ERROR_VALUE,
                    "DeftNDArrayGetShape: handle is NULL");
    ck_assert_fails(DeftNDArrayGetShape(arr, NULL, 8, &value), DEFT_ERROR_VALUE,
                    "out_shape is NULL");
    ck_assert_fails(DeftNDArrayGetShape(arr, shape, 8, NULL), DEFT_ERROR_VALUE, "out_ndim is NULL");
    ck_assert_fails(DeftNDArrayGetShape(arr, shape, 1, &value), DEFT_ERROR_VALUE,
                    "capacity is 1, but the array has 2 dimensions");
    ck_assert_fails(DeftNDArrayGetSize(NULL, &size), DEFT_ERROR_VALUE,
                    "DeftNDArrayGetSize: handle is NULL");
    ck_assert_fails(DeftNDArrayGetSize(arr, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_fails(DeftNDArrayGetNBytes(NULL, &nbytes), DEFT_ERROR_VALUE,
                    "DeftNDArrayGetNBytes: handle is NULL");
    ck_assert_fails(DeftNDArrayGetNBytes(arr, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_fails(DeftNDArrayGetDType(NULL, &value), DEFT_ERROR_VALUE,
                    "DeftNDArrayGetDType: handle is NULL");
    ck_assert_fails(DeftNDArrayGetDType(arr, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_fails(DeftNDArrayGetDevice(NULL, &value, &value2), DEFT_ERROR_VALUE,
                    "DeftNDArrayGetDevice: handle is NULL");
    ck_assert_fails(DeftNDArrayGetDevice(arr, NULL, &value2), DEFT_ERROR_VALUE, "out_type is NULL");
    ck_assert_fails(DeftNDArrayGetDevice(arr, &value, NULL), DEFT_ERROR_VALUE, "out_id is NULL");
    ck_assert_fails(DeftNDArrayWaitToRead(NULL), DEFT_ERROR_VALUE,
                    "DeftNDArrayWaitToRead: handle is NULL");
    ck_assert_int_eq(value, -9);
    ck_assert_int_eq(value2, -9);
    ck_assert_int_eq(size, -9);
    ck_assert_int_eq(shape[0], -9);
    ck_assert_uint_eq(nbytes, 99);
    ck_assert_ok(DeftNDArrayFree(arr));
}
END_TEST

START_TEST(test_stale_handle_is_reported_not_used) {
    DeftNDArrayHandle arr = make_2x3();
    ck_assert_ok(DeftNDArrayFree(arr));
    int ndim = -1;
    float out[6];
    ck_assert_fails(DeftNDArrayFree(arr), DEFT_ERROR_VALUE, "DeftNDArrayFree: handle (0x");
    ck_assert_fails(DeftNDArrayFree(arr), DEFT_ERROR_VALUE,
                    "is an NDArray handle that was already freed");
    ck_assert_fails(DeftNDArrayGetNDim(arr, &ndim), DEFT_ERROR_VALUE, "already freed");
    ck_assert_fails(DeftNDArrayCopyToHost(arr, out, sizeof out), DEFT_ERROR_VALUE, "already freed");
    ck_assert_fails(DeftNDArrayWaitToRead(arr), DEFT_ERROR_VALUE, "already freed");
    ck_assert_int_eq(ndim, -1);
}
END_TEST

/* A freed handle stays freed after its shell serves other arrays: it never
 * reads, nor frees, an array made since. */
START_TEST(test_stale_handle_never_aliases_a_new_array) {
    DeftNDArrayHandle stale = make_2x3();
    ck_assert_ok(DeftNDArrayFree(stale));
    enum { LIVE = 300 }; /* far more than the shells' quarantine */
    DeftNDArrayHandle live[LIVE];
    for (int i = 0; i < LIVE; i++) {
        const int64_t shape[1] = {i + 1};
        ck_assert_ok(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &live[i]));
        DeftNDArrayHandle churn; /* made and freed: shells go round */
        ck_assert_ok(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &churn));
        ck_assert_ok(DeftNDArrayFree(churn));
    }
    int64_t size = -1;
    ck_assert_fails(DeftNDArrayGetSize(stale, &size), DEFT_ERROR_VALUE, "already freed");
    ck_assert_fails(DeftNDArrayFree(stale), DEFT_ERROR_VALUE, "already freed");
    ck_assert_int_eq(size, -1);
    for (int i = 0; i < LIVE; i++) { /* every new array is intact, and its own */
        ck_assert_ok(DeftNDArrayGetSize(live[i], &size));
        ck_assert_int_eq(size, i + 1);
        ck_assert_ok(DeftNDArrayFree(live[i]));
    }
}
END_TEST

START_TEST(test_foreign_pointer_is_reported) {
    uint64_t not_a_handle[4] = {0x1234, 0, 0, 0};
    int ndim = -1;
    DeftNDArrayHandle fake = (DeftNDArrayHandle)(void *)not_a_handle;
    ck_assert_fails(DeftNDArrayGetNDim(fake, &ndim), DEFT_ERROR_VALUE,
                    "is not an NDArray handle from deft");
    ck_assert_fails(DeftNDArrayFree(fake), DEFT_ERROR_VALUE, "is not an NDArray handle from deft");
    /* Neither memory that cannot be read, nor a handle-like number naming no shell. */
    DeftNDArrayHandle unreadable = (DeftNDArrayHandle)(uintptr_t)0x10;
    DeftNDArrayHandle no_shell = (DeftNDArrayHandle)(uintptr_t)UINT64_C(0x800000000FFFFFFF);
    ck_assert_fails(DeftNDArrayGetNDim(unreadable, &ndim), DEFT_ERROR_VALUE, "is not an NDArray");
    ck_assert_fails(DeftNDArrayFree(no_shell), DEFT_ERROR_VALUE, "is not an NDArray");
    ck_assert_int_eq(ndim, -1);
}
END_TEST

#define THREADS 4
#define ROUNDS  500

static void *create_and_free(void *arg) {
    int seed = (int)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        const int64_t shape[1] = {1 + (seed * 31 + i) % 300};
        DeftNDArrayHandle arr;
        if (DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &arr)) return (void *)1;
        if (DeftNDArrayCopyFromHost(arr, NULL, 0) == 0) return (void *)1; /* must fail */
        if (DeftNDArrayFree(arr)) return (void *)1;
    }
    return NULL;
}

START_TEST(test_handles_from_many_threads) {
    int64_t before, after;
    ck_assert_ok(DeftGetLiveNDArrayCount(&before));
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, create_and_free, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) {
        void *result;
        pthread_join(threads[t], &result);
        ck_assert_ptr_null(result);
    }
    ck_assert_ok(DeftGetLiveNDArrayCount(&after));
    ck_assert_int_eq(after, before);
}
END_TEST

/* A shape made without deft_shape_init (by an operator, or a callback) with a
 * negative dimension: its size is refused for what is wrong with it, not as
 * "needs more than 9223372036854775807 bytes". */
START_TEST(test_negative_dimension_is_reported_as_negative) {
    deft_shape_t shape = {.ndim = 2, .dims = {2, -5}};
    int64_t count = 7;
    size_t nbytes = 7;
    deft_error_enter(NULL);
    ck_assert_int_eq(deft_shape_nbytes(&shape, 4, &nbytes), -1);
    ck_assert_str_eq(deft_error_message(),
                     "shape (2,-5): dimension 1 is -5, expected a dimension >= 0");
    ck_assert_int_eq(deft_error_kind(), DEFT_ERR_VALUE);
    ck_assert_int_eq(deft_shape_count(&shape, &count), -1);
    ck_assert_str_eq(deft_error_message(),
                     "shape (2,-5): dimension 1 is -5, expected a dimension >= 0");
    /* a zero dimension does not hide a negative one */
    shape.dims[0] = 0;
    ck_assert_int_eq(deft_shape_count(&shape, &count), -1);
    ck_assert_uint_eq(nbytes, 7);
    ck_assert_int_eq(count, 7);
}
END_TEST

static Suite *errors_suite(void) {
    Suite *suite = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_create_rejects_bad_shapes);
    tcase_add_test(tc, test_create_rejects_bad_dtype_device_and_out);
    tcase_add_test(tc, test_create_rejects_overflowing_and_unallocatable_shapes);
    tcase_add_test(tc, test_create_from_data_rejects_size_mismatch);
    tcase_add_test(tc, test_host_copies_reject_bad_buffers);
    tcase_add_test(tc, test_getters_reject_null_handles_and_outs);
    tcase_add_test(tc, test_stale_handle_is_reported_not_used);
    tcase_add_test(tc, test_stale_handle_never_aliases_a_new_array);
    tcase_add_test(tc, test_foreign_pointer_is_reported);
    tcase_add_test(tc, test_handles_from_many_threads);
    tcase_add_test(tc, test_negative_dimension_is_reported_as_negative);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(errors_suite());
}
