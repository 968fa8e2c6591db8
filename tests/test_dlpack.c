/* DLPack: exports share memory and keep the array alive; imports borrow the
 * producer's memory and give it back through its deleter exactly once. */
#include <stdint.h>

#include "check_helpers.h"

static int deleter_calls;

static void count_deleter(DLManagedTensor *managed) {
    deleter_calls++;
    (void)managed;
}

/* A producer's 2x3 float32 tensor over `data` (row-major, strides optional). */
static DLManagedTensor producer(float *data, int64_t *shape, int64_t *strides) {
    shape[0] = 2, shape[1] = 3;
    return (DLManagedTensor){
        .dl_tensor = {.data = data,
                      .device = {kDLCPU, 0},
                      .ndim = 2,
                      .dtype = {kDLFloat, 32, 1},
                      .shape = shape,
                      .strides = strides},
        .deleter = count_deleter,
    };
}

START_TEST(test_export_shares_memory_and_outlives_the_handle) {
    const int64_t shape[2] = {2, 3};
    const float values[6] = {1, 2, 3, 4, 5, 6};
    DeftNDArrayHandle arr;
    ck_assert_ok(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, values,
                                           sizeof values, &arr));
    DLManagedTensor *t = NULL;
    ck_assert_ok(DeftNDArrayToDLPack(arr, &t));
    ck_assert_int_eq(t->dl_tensor.ndim, 2);
    ck_assert_int_eq(t->dl_tensor.shape[0], 2);
    ck_assert_int_eq(t->dl_tensor.shape[1], 3);
    ck_assert_int_eq(t->dl_tensor.strides[0], 3);
    ck_assert_int_eq(t->dl_tensor.strides[1], 1);
    ck_assert_int_eq(t->dl_tensor.dtype.code, kDLFloat);
    ck_assert_int_eq(t->dl_tensor.dtype.bits, 32);
    ck_assert_int_eq(t->dl_tensor.device.device_type, kDLCPU);
    float *data = (float *)((char *)t->dl_tensor.data + t->dl_tensor.byte_offset);
    ck_assert_float_eq(data[4], 5);
    data[4] = 50; /* writes through the tensor are the array's */
    float back[6];
    ck_assert_ok(DeftNDArrayCopyToHost(arr, back, sizeof back));
    ck_assert_float_eq(back[4], 50);
    ck_assert_ok(DeftNDArrayFree(arr));
    ck_assert_float_eq(data[5], 6); /* still valid: the tensor holds the array */
    t->deleter(t);
}
END_TEST

START_TEST(test_export_computes_a_lazy_array) {
    DeftOpHandle ones;
    ck_assert_ok(DeftGetOperator("_ones", &ones));
    const char *keys[1] = {"shape"}, *vals[1] = {"(4,)"};
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle lazy = NULL;
    int n = 1;
    ck_assert_ok(DeftImperativeInvoke(ones, 0, NULL, &n, &lazy, 1, keys, vals));
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    DLManagedTensor *t = NULL;
    ck_assert_ok(DeftNDArrayToDLPack(lazy, &t));
    const float *data = t->dl_tensor.data;
    for (int i = 0; i < 4; i++) ck_assert_float_eq(data[i], 1);
    t->deleter(t);
    ck_assert_ok(DeftNDArrayFree(lazy));
}
END_TEST

START_TEST(test_import_borrows_and_calls_the_deleter_once) {
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2], strides[2] = {3, 1};
    DLManagedTensor t = producer(data, shape, strides);
    deleter_calls = 0;
    int64_t live_before;
    ck_assert_ok(DeftGetMemoryStat(DEFT_CPU, 0, DEFT_MEM_LIVE_BYTES, &live_before));
    DeftNDArrayHandle arr;
    ck_assert_ok(DeftNDArrayFromDLPack(&t, &arr));
    int64_t live;
    ck_assert_ok(DeftGetMemoryStat(DEFT_CPU, 0, DEFT_MEM_LIVE_BYTES, &live));
    ck_assert_int_eq(live, live_before); /* lent memory is not deft's */
    DeftOpHandle mul;
    ck_assert_ok(DeftGetOperator("_mul_scalar", &mul));
    const char *keys[1] = {"scalar"}, *vals[1] = {"10"};
    DeftNDArrayHandle y = NULL;
    int n = 1;
    ck_assert_ok(DeftImperativeInvoke(mul, 1, &arr, &n, &y, 1, keys, vals));
    float out[6];
    ck_assert_ok(DeftNDArrayCopyToHost(y, out, sizeof out));
    ck_assert_float_eq(out[5], 60);
    data[0] = 7; /* no copy was made */
    ck_assert_ok(DeftNDArrayCopyToHost(arr, out, sizeof out));
    ck_assert_float_eq(out[0], 7);
    ck_assert_ok(DeftNDArrayFree(y));
    ck_assert_int_eq(deleter_calls, 0);
    ck_assert_ok(DeftNDArrayFree(arr));
    ck_assert_ok(DeftWaitAll());
    ck_assert_int_eq(deleter_calls, 1);
}
END_TEST

START_TEST(test_round_trip_through_dlpack) {
    const int64_t shape[1] = {3};
    const int64_t values[3] = {-1, 0, 1LL << 40};
    DeftNDArrayHandle arr, back;
    ck_assert_ok(
        DeftNDArrayCreateFromData(shape, 1, DEFT_INT64, DEFT_CPU, 0, values, sizeof values, &arr));
    DLManagedTensor *t;
    ck_assert_ok(DeftNDArrayToDLPack(arr, &t));
    ck_assert_ok(DeftNDArrayFromDLPack(t, &back)); /* back owns t now */
    ck_assert_ok(DeftNDArrayFree(arr));
    int dtype;
    int64_t got[3];
    ck_assert_ok(DeftNDArrayGetDType(back, &dtype));
    ck_assert_int_eq(dtype, DEFT_INT64);
    ck_assert_ok(DeftNDArrayCopyToHost(back, got, sizeof got));
    ck_assert_int_eq(got[2], 1LL << 40);
    ck_assert_ok(DeftNDArrayFree(back));
}
END_TEST

START_TEST(test_bad_imports_leave_the_tensor_with_the_caller) {
    float data[6] = {0};
    int64_t shape[2], strides[2] = {1, 2}; /* column-major */
    DeftNDArrayHandle arr = NULL;
    deleter_calls = 0;
    DLManagedTensor t = producer(data, shape, strides);
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_NOT_IMPLEMENTED, "not compact");
    t = producer(data, shape, NULL);
    t.dl_tensor.device.device_type = kDLOpenCL;
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_NOT_IMPLEMENTED,
                    "deft imports CPU (1) and CUDA (2) tensors");
    int gpus;
    ck_assert_ok(DeftGetGPUCount(&gpus));
    t = producer(data, shape, NULL);
    t.dl_tensor.device = (DLDevice){kDLCUDA, gpus}; /* one past the last GPU */
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr),
                    gpus ? DEFT_ERROR_INDEX : DEFT_ERROR_NOT_IMPLEMENTED,
                    "the tensor's device is gpu(");
    t = producer(data, shape, NULL);
    t.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 4};
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_NOT_IMPLEMENTED, "4 lanes");
    t = producer(data, shape, NULL);
    shape[1] = -3;
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_VALUE, "shape[1] is -3");
    ck_assert_fails(DeftNDArrayFromDLPack(NULL, &arr), DEFT_ERROR_VALUE, "tensor is NULL");
    t = producer(data, shape, NULL);
    ck_assert_fails(DeftNDArrayFromDLPack(&t, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_ptr_null(arr);
    ck_assert_int_eq(deleter_calls, 0);
    DLManagedTensor *out = NULL;
    ck_assert_fails(DeftNDArrayToDLPack(NULL, &out), DEFT_ERROR_VALUE, "handle is NULL");
    ck_assert_ptr_null(out);
}
END_TEST

/* A shape whose element count overflows int64 is refused before anything
 * multiplies it out (UBSan: signed overflow in the size and the strides). */
START_TEST(test_import_refuses_a_shape_whose_size_overflows) {
    float data[6] = {0};
    int64_t shape[3] = {INT64_C(1) << 32, INT64_C(1) << 32, 4};
    int64_t strides[3] = {INT64_C(1) << 34, 4, 1};
    DeftNDArrayHandle arr = NULL;
    deleter_calls = 0;
    DLManagedTensor t = producer(data, shape, strides);
    shape[0] = INT64_C(1) << 32, shape[1] = INT64_C(1) << 32; /* producer set (2,3) */
    t.dl_tensor.ndim = 3;
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_VALUE,
                    "has more elements than fit in int64");
    t.dl_tensor.strides = NULL;
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_VALUE,
                    "has more elements than fit in int64");
    /* a zero dimension after the overflowing ones: no elements, nothing to multiply out */
    shape[2] = 0;
    t.dl_tensor.strides = strides;
    ck_assert_ok(DeftNDArrayFromDLPack(&t, &arr));
    int64_t size;
    ck_assert_ok(DeftNDArrayGetSize(arr, &size));
    ck_assert_int_eq(size, 0);
    ck_assert_ok(DeftNDArrayFree(arr));
    ck_assert_ok(DeftWaitAll());
    ck_assert_int_eq(deleter_calls, 1);
}
END_TEST

/* data + byte_offset must be aligned for the dtype: deft's kernels load whole elements. */
START_TEST(test_import_refuses_a_misaligned_byte_offset) {
    double storage[7] = {0, 1, 2, 3, 4, 5, 6};
    int64_t shape[2], strides[2] = {3, 1};
    DeftNDArrayHandle arr = NULL;
    deleter_calls = 0;
    DLManagedTensor t = producer((float *)storage, shape, strides);
    t.dl_tensor.dtype = (DLDataType){kDLFloat, 64, 1};
    t.dl_tensor.byte_offset = 4; /* half a double */
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_VALUE,
                    "byte_offset 4 leaves the data misaligned for float64");
    t.dl_tensor.data = (char *)storage + 2; /* misaligned base, offset makes up for nothing */
    t.dl_tensor.byte_offset = 8;
    ck_assert_fails(DeftNDArrayFromDLPack(&t, &arr), DEFT_ERROR_VALUE,
                    "misaligned for float64 (8-byte elements)");
    ck_assert_ptr_null(arr);
    ck_assert_int_eq(deleter_calls, 0);
    /* an aligned offset is a view on the producer's buffer */
    t.dl_tensor.data = storage;
    t.dl_tensor.byte_offset = 8;
    ck_assert_ok(DeftNDArrayFromDLPack(&t, &arr));
    double got[6];
    ck_assert_ok(DeftNDArrayCopyToHost(arr, got, sizeof got));
    ck_assert_double_eq(got[0], 1);
    ck_assert_double_eq(got[5], 6);
    ck_assert_ok(DeftNDArrayFree(arr));
    ck_assert_ok(DeftWaitAll());
    ck_assert_int_eq(deleter_calls, 1);
}
END_TEST

static Suite *dlpack_suite(void) {
    Suite *suite = suite_create("dlpack");
    TCase *tc = tcase_create("dlpack");
    tcase_add_test(tc, test_export_shares_memory_and_outlives_the_handle);
    tcase_add_test(tc, test_export_computes_a_lazy_array);
    tcase_add_test(tc, test_import_borrows_and_calls_the_deleter_once);
    tcase_add_test(tc, test_round_trip_through_dlpack);
    tcase_add_test(tc, test_bad_imports_leave_the_tensor_with_the_caller);
    tcase_add_test(tc, test_import_refuses_a_shape_whose_size_overflows);
    tcase_add_test(tc, test_import_refuses_a_misaligned_byte_offset);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(dlpack_suite());
}
