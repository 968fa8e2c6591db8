/* NDArray creation, host copies and metadata, on good input; reuse of freed arrays. */
#include <pthread.h>
#include <stdint.h>

#include "check_helpers.h"
#include "op_helpers.h"

START_TEST(test_create_is_zero_filled_with_metadata) {
    const int64_t shape[3] = {2, 3, 4};
    DeftNDArrayHandle arr;
    ck_assert_ok(DeftNDArrayCreate(shape, 3, DEFT_FLOAT64, DEFT_CPU, 0, &arr));
    int ndim = -1, dtype = -1, dev_type = -1, dev_id = -1;
    int64_t got[DEFT_MAX_NDIM], size = -1;
    size_t nbytes = 0;
    ck_assert_ok(DeftNDArrayGetNDim(arr, &ndim));
    ck_assert_int_eq(ndim, 3);
    ck_assert_ok(DeftNDArrayGetShape(arr, got, 3, &ndim));
    ck_assert_int_eq(got[0], 2);
    ck_assert_int_eq(got[1], 3);
    ck_assert_int_eq(got[2], 4);
    ck_assert_ok(DeftNDArrayGetSize(arr, &size));
    ck_assert_int_eq(size, 24);
    ck_assert_ok(DeftNDArrayGetNBytes(arr, &nbytes));
    ck_assert_uint_eq(nbytes, 24 * sizeof(double));
    ck_assert_ok(DeftNDArrayGetDType(arr, &dtype));
    ck_assert_int_eq(dtype, DEFT_FLOAT64);
    ck_assert_ok(DeftNDArrayGetDevice(arr, &dev_type, &dev_id));
    ck_assert_int_eq(dev_type, DEFT_CPU);
    ck_assert_int_eq(dev_id, 0);
    double values[24];
    memset(values, 0xFF, sizeof values);
    ck_assert_ok(DeftNDArrayWaitToRead(arr));
    ck_assert_ok(DeftNDArrayCopyToHost(arr, values, sizeof values));
    for (int i = 0; i < 24; i++) ck_assert_double_eq(values[i], 0.0);
    ck_assert_ok(DeftNDArrayFree(arr));
}
END_TEST

START_TEST(test_round_trip_every_dtype) {
    static const int dtypes[] = {DEFT_FLOAT32,  DEFT_FLOAT64, DEFT_FLOAT16,
                                 DEFT_BFLOAT16, DEFT_UINT8,   DEFT_INT8,
                                 DEFT_INT32,    DEFT_INT64,   DEFT_BOOL};
    const int64_t shape[2] = {5, 7};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        size_t elem;
        ck_assert_ok(DeftDTypeGetSize(dtypes[d], &elem));
        unsigned char in[35 * 8], out[35 * 8];
        for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 37 + d);
        memset(out, 0, sizeof out);
        DeftNDArrayHandle arr;
        ck_assert_ok(
            DeftNDArrayCreateFromData(shape, 2, dtypes[d], DEFT_CPU, 0, in, 35 * elem, &arr));
        ck_assert_ok(DeftNDArrayCopyToHost(arr, out, 35 * elem));
        ck_assert_mem_eq(in, out, 35 * elem);
        ck_assert_ok(DeftNDArrayFree(arr));
    }
}
END_TEST

START_TEST(test_copy_from_host_overwrites) {
    const int64_t shape[1] = {4};
    const int64_t first[4] = {1, 2, 3, 4}, second[4] = {-5, 0, INT64_MAX, INT64_MIN};
    int64_t out[4];
    DeftNDArrayHandle arr;
    ck_assert_ok(
        DeftNDArrayCreateFromData(shape, 1, DEFT_INT64, DEFT_CPU, 0, first, sizeof first, &arr));
    ck_assert_ok(DeftNDArrayCopyFromHost(arr, second, sizeof second));
    ck_assert_ok(DeftNDArrayCopyToHost(arr, out, sizeof out));
    ck_assert_mem_eq(out, second, sizeof second);
    ck_assert_ok(DeftNDArrayFree(arr));
}
END_TEST

START_TEST(test_scalar_and_zero_size_arrays) {
    DeftNDArrayHandle scalar, empty;
    const float value = 2.5f;
    float out = 0.0f;
    int ndim = -1;
    int64_t size = -1, shape_out[1] = {-7};
    ck_assert_ok(DeftNDArrayCreateFromData(NULL, 0, DEFT_FLOAT32, DEFT_CPU, 0, &value, sizeof value,
                                           &scalar));
    ck_assert_ok(DeftNDArrayGetShape(scalar, shape_out, 0, &ndim));
    ck_assert_int_eq(ndim, 0);
    ck_assert_int_eq(shape_out[0], -7);
    ck_assert_ok(DeftNDArrayGetSize(scalar, &size));
    ck_assert_int_eq(size, 1);
    ck_assert_ok(DeftNDArrayCopyToHost(scalar, &out, sizeof out));
    ck_assert_float_eq(out, 2.5f);

    const int64_t zero_shape[3] = {4, 0, 3};
    ck_assert_ok(DeftNDArrayCreate(zero_shape, 3, DEFT_INT32, DEFT_CPU, 0, &empty));
    ck_assert_ok(DeftNDArrayGetSize(empty, &size));
    ck_assert_int_eq(size, 0);
    ck_assert_ok(DeftNDArrayCopyToHost(empty, NULL, 0));
    ck_assert_ok(DeftNDArrayCopyFromHost(empty, NULL, 0));
    ck_assert_ok(DeftNDArrayFree(scalar));
    ck_assert_ok(DeftNDArrayFree(empty));
}
END_TEST

START_TEST(test_free_null_is_noop_and_counts_follow_handles) {
    int64_t before, during, after;
    ck_assert_ok(DeftNDArrayFree(NULL));
    ck_assert_ok(DeftGetLiveNDArrayCount(&before));
    DeftNDArrayHandle arrs[100];
    const int64_t shape[1] = {3};
    for (int i = 0; i < 100; i++)
        ck_assert_ok(DeftNDArrayCreate(shape, 1, DEFT_UINT8, DEFT_CPU, 0, &arrs[i]));
    ck_assert_ok(DeftGetLiveNDArrayCount(&during));
    ck_assert_int_eq(during, before + 100);
    for (int i = 0; i < 100; i++) ck_assert_ok(DeftNDArrayFree(arrs[i]));
    ck_assert_ok(DeftGetLiveNDArrayCount(&after));
    ck_assert_int_eq(after, before);
}
END_TEST

START_TEST(test_wait_all_succeeds) {
    ck_assert_ok(DeftWaitAll());
}
END_TEST

/* ---- a small array freed is kept for the next one: nothing of it may show ---- */

START_TEST(test_reused_array_keeps_no_failure) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(5, 6));
    DeftNDArrayHandle bad_index = make(DEFT_INT32, 1, SHAPE(1), VALUES(9));
    DeftNDArrayHandle failed =
        call1("take", 2, (DeftNDArrayHandle[]){a, bad_index}, P("mode", "raise"));
    ck_assert_ok(DeftNDArrayFree(failed)); /* unread: its variable still holds the failure */
    DeftNDArrayHandle next = call1("_plus_scalar", 1, &a, P("scalar", "1"));
    assert_values(next, 2, VALUES(6, 7), 0);
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, "index 9");
    free_all(3, (DeftNDArrayHandle[]){a, bad_index, next});
}
END_TEST

START_TEST(test_reused_array_takes_no_memory_still_in_use) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    DLManagedTensor *exported;
    ck_assert_ok(DeftNDArrayToDLPack(x, &exported));
    ck_assert_ok(DeftNDArrayFree(x)); /* its memory lives on in the export */
    DeftNDArrayHandle y = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(7, 8));
    const float *data = exported->dl_tensor.data;
    ck_assert(data[0] == 1 && data[1] == 2);
    exported->deleter(exported);
    ck_assert_ok(DeftNDArrayFree(y));
}
END_TEST

START_TEST(test_reused_array_counts_as_freed_and_new) {
    int64_t bytes = mem_stat(DEFT_MEM_LIVE_BYTES), buffers = mem_stat(DEFT_MEM_LIVE_BUFFERS);
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    ck_assert_ok(DeftNDArrayFree(x));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), bytes);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BUFFERS), buffers);
    DeftNDArrayHandle y = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(7, 8));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), bytes + 16);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BUFFERS), buffers + 1);
    assert_values(y, 2, VALUES(7, 8), 0);
    ck_assert_ok(DeftNDArrayFree(y));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), bytes);
}
END_TEST

static void *make_and_free_then_exit(void *arg) {
    (void)arg;
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle y = call1("exp", 1, &x, NO_PARAMS);
    free_all(2, (DeftNDArrayHandle[]){x, y});
    return NULL;
}

/* An exiting thread frees what it kept, among the other thread-exit
 * destructors, whichever order they run in (each leaves its thread-local
 * state empty, so a later one freeing a record or buffer makes it anew). */
/* A view shares memory and order with its array, outlives it, and must fit in it. */
START_TEST(test_views_share_memory_and_order) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(3, 2), VALUES(1, 2, 3, 4, 5, 6)), row;
    ck_assert_ok(DeftNDArrayView(x, 2, SHAPE(2), 1, &row)); /* x[1] */
    assert_values(row, 2, VALUES(3, 4), 0);
    DeftNDArrayHandle out[1] = {row};
    int nout = 1;
    ck_assert_ok(call("_plus_scalar", 1, &row, &nout, out, P("scalar", "10"))); /* in place */
    assert_values(x, 6, VALUES(1, 2, 13, 14, 5, 6), 0);
    out[0] = x;
    ck_assert_ok(call("_mul_scalar", 1, &x, &nout, out, P("scalar", "2"))); /* queued after */
    assert_values(row, 2, VALUES(26, 28), 0);
    int64_t before = mem_stat(0);
    ck_assert_ok(DeftNDArrayFree(x));
    ck_assert_int_eq(mem_stat(0), before); /* the view holds the memory */
    assert_values(row, 2, VALUES(26, 28), 0);
    DeftNDArrayHandle bad = NULL;
    ck_assert_fails(
        DeftNDArrayView(row, 1, SHAPE(2), 1, &bad), DEFT_ERROR_INDEX,
        "a view of 2 elements from element 1 does not fit in an array of 2 (shape (2,))");
    ck_assert_fails(DeftNDArrayView(row, -1, SHAPE(1), 1, &bad), DEFT_ERROR_INDEX,
                    "from element -1 does not fit");
    ck_assert_fails(DeftNDArrayView(row, 0, SHAPE(-1), 1, &bad), DEFT_ERROR_VALUE, "shape");
    ck_assert_ptr_null(bad);
    DeftNDArrayHandle empty = NULL;
    ck_assert_ok(
        DeftNDArrayView(row, 2, SHAPE(0, 5), 2, &empty)); /* zero elements fit at the end */
    free_all(2, (DeftNDArrayHandle[]){row, empty});
}
END_TEST

/* x[:, 1::2] of a 3x4 x: element (i, j) is x's element 1 + 4i + 2j. */
static DeftNDArrayHandle odd_columns(DeftNDArrayHandle x) {
    DeftNDArrayHandle v = NULL;
    ck_assert_ok(DeftNDArrayStridedView(x, 1, SHAPE(3, 2), SHAPE(4, 2), 2, &v));
    return v;
}

/* A strided view reads what its array holds when an operation reads it, and
 * what is written into it (by operators, in place, or from the host) lands
 * in the array, in the order the calls were made. */
START_TEST(test_strided_views_read_and_write_their_array) {
    DeftNDArrayHandle x =
        make(DEFT_FLOAT32, 2, SHAPE(3, 4), VALUES(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    DeftNDArrayHandle v = odd_columns(x), y = NULL;
    assert_values(v, 6, VALUES(1, 3, 5, 7, 9, 11), 0);
    int64_t strides[DEFT_MAX_NDIM], offset;
    int is_view;
    ck_assert_ok(DeftNDArrayGetLayout(v, strides, &offset, &is_view));
    ck_assert(is_view && offset == 1 && strides[0] == 4 && strides[1] == 2);
    ck_assert_ok(DeftNDArrayGetLayout(x, strides, &offset, &is_view));
    ck_assert(!is_view && offset == 0 && strides[0] == 4 && strides[1] == 1);
    DeftNDArrayHandle out[1] = {v};
    int nout = 1;
    ck_assert_ok(call("_plus_scalar", 1, &v, &nout, out, P("scalar", "100"))); /* in place */
    assert_values(x, 12, VALUES(0, 101, 2, 103, 4, 105, 6, 107, 8, 109, 10, 111), 0);
    out[0] = x;
    ck_assert_ok(call("_mul_scalar", 1, &x, &nout, out, P("scalar", "2"))); /* x, then v reads */
    out[0] = NULL;
    ck_assert_ok(call("_plus_scalar", 1, &v, &nout, out, P("scalar", "1")));
    y = out[0];
    assert_values(y, 6, VALUES(203, 207, 211, 215, 219, 223), 0);
    float host[6] = {-1, -2, -3, -4, -5, -6};
    ck_assert_ok(DeftNDArrayCopyFromHost(v, host, sizeof host));
    assert_values(x, 12, VALUES(0, -1, 4, -2, 8, -3, 12, -4, 16, -5, 20, -6), 0);
    DeftNDArrayHandle w = NULL; /* v[::-1, 1]: from v's layout, in x's elements */
    ck_assert_ok(DeftNDArrayStridedView(v, 1 + 8 + 2, SHAPE(3), SHAPE(-4), 1, &w));
    assert_values(w, 3, VALUES(-6, -4, -2), 0);
    int64_t before = mem_stat(0);
    ck_assert_ok(DeftNDArrayFree(x)); /* the views hold the memory */
    ck_assert_int_eq(mem_stat(0), before);
    assert_values(v, 6, VALUES(-1, -2, -3, -4, -5, -6), 0);
    free_all(3, (DeftNDArrayHandle[]){v, w, y});
}
END_TEST

START_TEST(test_strided_views_refuse_bad_windows_and_kept_uses) {
    DeftNDArrayHandle x =
        make(DEFT_FLOAT32, 2, SHAPE(3, 4), VALUES(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    DeftNDArrayHandle bad = NULL, v = odd_columns(x), dense = NULL, grad = NULL;
    ck_assert_fails(DeftNDArrayStridedView(x, 2, SHAPE(3, 2), SHAPE(4, 5), 2, &bad),
                    DEFT_ERROR_INDEX, "reaching elements 2 to 15 does not fit in an array of 12");
    ck_assert_fails(DeftNDArrayStridedView(x, 1, SHAPE(3), SHAPE(-1), 1, &bad), DEFT_ERROR_INDEX,
                    "reaching elements -1 to 1");
    ck_assert_fails(DeftNDArrayStridedView(x, 0, SHAPE(3), NULL, 1, &bad), DEFT_ERROR_VALUE,
                    "strides is NULL");
    ck_assert_fails(DeftNDArrayView(v, 0, SHAPE(2), 1, &bad), DEFT_ERROR_VALUE,
                    "the array is a strided view");
    ck_assert_ptr_null(bad);
    /* A window that is one dense run is a plain view. */
    ck_assert_ok(DeftNDArrayStridedView(x, 4, SHAPE(2, 4), SHAPE(4, 1), 2, &dense));
    int64_t strides[DEFT_MAX_NDIM], offset;
    int is_view = -1;
    ck_assert_ok(DeftNDArrayGetLayout(dense, strides, &offset, &is_view));
    ck_assert_int_eq(is_view, 0);
    assert_values(dense, 8, VALUES(4, 5, 6, 7, 8, 9, 10, 11), 0);
    /* A variable's gradient would not reach the array: refused. */
    ck_assert_ok(DeftNDArrayCreate(SHAPE(3, 2), 2, DEFT_FLOAT32, DEFT_CPU, 0, &grad));
    ck_assert_fails(DeftAutogradMarkVariables(1, &v, (int[]){1}, &grad), DEFT_ERROR_VALUE,
                    "arrays[0] is a strided view");
    free_all(4, (DeftNDArrayHandle[]){x, v, dense, grad});
}
END_TEST

/* Large enough to run on the engine's threads: views order with their array. */
START_TEST(test_strided_views_order_with_queued_work) {
    enum { N = 256 };
    DeftNDArrayHandle x = NULL, v = NULL, out[1];
    ck_assert_ok(DeftNDArrayCreate(SHAPE(N, N), 2, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    ck_assert_ok(DeftNDArrayStridedView(x, 0, SHAPE(N, N / 2), SHAPE(N, 2), 2, &v)); /* x[:, ::2] */
    int nout = 1;
    for (int round = 0; round < 8; round++) {
        out[0] = x;
        ck_assert_ok(call("_plus_scalar", 1, &x, &nout, out, P("scalar", "1")));
        out[0] = v;
        ck_assert_ok(call("_mul_scalar", 1, &v, &nout, out, P("scalar", "2")));
    }
    static float host[N * N];
    ck_assert_ok(DeftNDArrayCopyToHost(x, host, sizeof host));
    /* even columns: ((((0+1)*2+1)*2 ...) = 2^9 - 2 = 510; odd ones: 8 */
    for (int i = 0; i < N * N; i++) ck_assert_float_eq(host[i], i % 2 ? 8.0f : 510.0f);
    free_all(2, (DeftNDArrayHandle[]){x, v});
}
END_TEST

START_TEST(test_threads_exit_keeping_nothing) {
    int64_t bytes = mem_stat(DEFT_MEM_LIVE_BYTES);
    for (int round = 0; round < 4; round++) {
        pthread_t t;
        pthread_create(&t, NULL, make_and_free_then_exit, NULL);
        pthread_join(t, NULL);
    }
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), bytes);
}
END_TEST

static Suite *ndarray_suite(void) {
    Suite *suite = suite_create("ndarray");
    TCase *tc = tcase_create("ndarray");
    tcase_add_test(tc, test_create_is_zero_filled_with_metadata);
    tcase_add_test(tc, test_views_share_memory_and_order);
    tcase_add_test(tc, test_strided_views_read_and_write_their_array);
    tcase_add_test(tc, test_strided_views_refuse_bad_windows_and_kept_uses);
    tcase_add_test(tc, test_strided_views_order_with_queued_work);
    tcase_add_test(tc, test_round_trip_every_dtype);
    tcase_add_test(tc, test_copy_from_host_overwrites);
    tcase_add_test(tc, test_scalar_and_zero_size_arrays);
    tcase_add_test(tc, test_free_null_is_noop_and_counts_follow_handles);
    tcase_add_test(tc, test_wait_all_succeeds);
    tcase_add_test(tc, test_reused_array_keeps_no_failure);
    tcase_add_test(tc, test_reused_array_takes_no_memory_still_in_use);
    tcase_add_test(tc, test_reused_array_counts_as_freed_and_new);
    tcase_add_test(tc, test_threads_exit_keeping_nothing);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(ndarray_suite());
}
