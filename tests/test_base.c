/* Version, error text, dtypes, devices and shape arithmetic. */
#include <pthread.h>
#include <stdint.h>

#include "check_helpers.h"
#include "core/base/device.h"
#include "core/base/error.h"
#include "core/base/records.h"
#include "core/base/shape.h"

START_TEST(test_version_matches_header) {
    int version = -1;
    ck_assert_ok(DeftGetVersion(&version));
    ck_assert_int_eq(version,
                     DEFT_VERSION_MAJOR * 10000 + DEFT_VERSION_MINOR * 100 + DEFT_VERSION_PATCH);
}
END_TEST

START_TEST(test_version_rejects_null_out) {
    ck_assert_fails(DeftGetVersion(NULL), DEFT_ERROR_VALUE, "DeftGetVersion: out is NULL");
}
END_TEST

START_TEST(test_dtype_names_and_sizes) {
    static const struct {
        int code;
        const char *name;
        size_t size;
    } expected[] = {
        {DEFT_FLOAT32, "float32", 4},   {DEFT_FLOAT64, "float64", 8}, {DEFT_FLOAT16, "float16", 2},
        {DEFT_BFLOAT16, "bfloat16", 2}, {DEFT_UINT8, "uint8", 1},     {DEFT_INT8, "int8", 1},
        {DEFT_INT32, "int32", 4},       {DEFT_INT64, "int64", 8},     {DEFT_BOOL, "bool", 1}};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        const char *name;
        size_t size;
        int code;
        ck_assert_ok(DeftDTypeGetName(expected[i].code, &name));
        ck_assert_str_eq(name, expected[i].name);
        ck_assert_ok(DeftDTypeGetSize(expected[i].code, &size));
        ck_assert_uint_eq(size, expected[i].size);
        ck_assert_ok(DeftDTypeFromName(expected[i].name, &code));
        ck_assert_int_eq(code, expected[i].code);
    }
}
END_TEST

START_TEST(test_dtype_rejects_unknown_codes_and_names) {
    const char *name = "untouched";
    size_t size = 99;
    int code = 42;
    ck_assert_fails(DeftDTypeGetName(9, &name), DEFT_ERROR_TYPE, "DeftDTypeGetName: dtype is 9");
    ck_assert_fails(DeftDTypeGetName(-1, &name), DEFT_ERROR_TYPE, "dtype is -1");
    ck_assert_str_eq(name, "untouched");
    ck_assert_fails(DeftDTypeGetName(DEFT_FLOAT32, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_fails(DeftDTypeGetSize(13, &size), DEFT_ERROR_TYPE, "DeftDTypeGetSize: dtype is 13");
    ck_assert_uint_eq(size, 99);
    ck_assert_fails(DeftDTypeGetSize(DEFT_INT8, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_fails(DeftDTypeFromName("float128", &code), DEFT_ERROR_TYPE,
                    "unknown dtype name 'float128'");
    ck_assert_fails(DeftDTypeFromName(NULL, &code), DEFT_ERROR_VALUE, "name is NULL");
    ck_assert_fails(DeftDTypeFromName("int32", NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_int_eq(code, 42);
}
END_TEST

static void *fail_on_other_thread(void *arg) {
    (void)arg;
    DeftDTypeGetName(77, NULL);
    return NULL;
}

START_TEST(test_errors_are_thread_local) {
    ck_assert_int_eq(DeftGetVersion(NULL), -1);
    pthread_t thread;
    pthread_create(&thread, NULL, fail_on_other_thread, NULL);
    pthread_join(thread, NULL);
    ck_assert_msg(strstr(DeftGetLastError(), "DeftGetVersion") != NULL,
                  "another thread's failure replaced this thread's error: %s", DeftGetLastError());
}
END_TEST

START_TEST(test_error_message_is_truncated_not_overflowed) {
    char long_name[3000];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    int code;
    ck_assert_int_eq(DeftDTypeFromName(long_name, &code), -1);
    ck_assert_uint_eq(strlen(DeftGetLastError()), DEFT_ERROR_MAX - 1);
}
END_TEST

/* cpu(n) for n > 0 is not a second CPU: an error that says which devices exist. */
START_TEST(test_device_check_refuses_cpu_n_and_names_the_devices) {
    deft_device_t dev = {DEFT_DEV_GPU, 5};
    ck_assert_int_eq(deft_device_check(DEFT_DEV_CPU, 1, "the copy's device", &dev), -1);
    ck_assert_int_eq(DeftGetLastErrorKind(), DEFT_ERROR_VALUE);
    const char *text = DeftGetLastError();
    ck_assert_msg(strstr(text, "the copy's device is cpu(1), expected cpu(0)") != NULL, "%s", text);
    int gpus = deft_device_gpu_count();
    const char *rest = gpus == 0   ? "the devices are cpu(0) and no GPU"
                       : gpus == 1 ? "the devices are cpu(0) and gpu(0)"
                                   : "the devices are cpu(0) and gpu(0) to gpu(";
    ck_assert_msg(strstr(text, rest) != NULL, "'%s' does not say '%s'", text, rest);
    ck_assert_int_eq(dev.type, DEFT_DEV_GPU); /* untouched on failure */
    ck_assert_int_eq(dev.id, 5);
    ck_assert_int_eq(deft_device_check(DEFT_DEV_CPU, 0, "device", &dev), 0);
    ck_assert(deft_device_equal(dev, deft_device_cpu()));
}
END_TEST

START_TEST(test_shape_rejects_bad_dims) {
    deft_shape_t shape;
    int64_t dims[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ck_assert_int_eq(deft_shape_init(&shape, dims, 9, "shape"), -1);
    ck_assert_ptr_nonnull(strstr(deft_error_message(), "shape has 9 dimensions, expected 0 to 8"));
    dims[2] = -3;
    ck_assert_int_eq(deft_shape_init(&shape, dims, 3, "shape"), -1);
    ck_assert_ptr_nonnull(strstr(deft_error_message(), "shape[2] is -3"));
    ck_assert_int_eq(deft_shape_init(&shape, NULL, 2, "shape"), -1);
    ck_assert_int_eq(deft_shape_init(&shape, NULL, 0, "shape"), 0);
    ck_assert_int_eq(shape.ndim, 0);
}
END_TEST

START_TEST(test_shape_sizes_and_overflow) {
    deft_shape_t shape;
    int64_t dims[3] = {2, 3, 4};
    int64_t count;
    size_t nbytes;
    ck_assert_int_eq(deft_shape_init(&shape, dims, 3, "shape"), 0);
    ck_assert_int_eq(deft_shape_count(&shape, &count), 0);
    ck_assert_int_eq(count, 24);
    ck_assert_int_eq(deft_shape_nbytes(&shape, 8, &nbytes), 0);
    ck_assert_uint_eq(nbytes, 192);

    int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 30, 0};
    ck_assert_int_eq(deft_shape_init(&shape, huge, 3, "shape"), 0);
    ck_assert_int_eq(deft_shape_count(&shape, &count), 0);
    ck_assert_int_eq(count, 0); /* a zero dimension wins over any product */
    ck_assert_int_eq(deft_shape_init(&shape, huge, 2, "shape"), 0);
    ck_assert_int_eq(deft_shape_count(&shape, &count), -1);
    ck_assert_ptr_nonnull(strstr(deft_error_message(), "more elements than fit in int64"));

    int64_t big[2] = {INT64_C(1) << 31, INT64_C(1) << 31}; /* 2^62 elements */
    ck_assert_int_eq(deft_shape_init(&shape, big, 2, "shape"), 0);
    ck_assert_int_eq(deft_shape_nbytes(&shape, 4, &nbytes), -1);
    ck_assert_ptr_nonnull(strstr(deft_error_message(), "needs more than"));
}
END_TEST

START_TEST(test_shape_format) {
    deft_shape_t shape;
    char buf[DEFT_SHAPE_STR_MAX];
    int64_t dims[2] = {3, 4};
    deft_shape_init(&shape, dims, 2, "shape");
    ck_assert_str_eq(deft_shape_format(&shape, buf, sizeof buf), "(3,4)");
    deft_shape_init(&shape, NULL, 0, "shape");
    ck_assert_str_eq(deft_shape_format(&shape, buf, sizeof buf), "()");
    int64_t widest[8];
    for (int i = 0; i < 8; i++) widest[i] = INT64_MAX;
    deft_shape_init(&shape, widest, 8, "shape");
    deft_shape_format(&shape, buf, sizeof buf);
    ck_assert_uint_eq(strlen(buf), 2 + 8 * 19 + 7);
    char small[5];
    ck_assert_str_eq(deft_shape_format(&shape, small, sizeof small), "(922");
}
END_TEST

/* Records freed on another thread reach the allocating thread again through
 * the shared list, which moves them in batches: every one comes back once,
 * none is lost or handed out twice. */
#define MOVED_RECORDS 1000

static void *free_records(void *arg) {
    void **records = arg;
    for (int i = 0; i < MOVED_RECORDS; i++) deft_record_free(records[i]);
    return NULL; /* the thread's exit gives what its list kept to the shared list */
}

static int compare_addresses(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return (x > y) - (x < y);
}

START_TEST(test_records_freed_elsewhere_come_back_once) {
    enum { AGAIN = MOVED_RECORDS + 2 * DEFT_RECORD_DEPTH };
    static void *first[MOVED_RECORDS], *again[AGAIN];
    for (int i = 0; i < MOVED_RECORDS; i++) {
        ck_assert_ptr_nonnull(first[i] = deft_record_alloc());
        memset(first[i], 0xab, DEFT_RECORD_SIZE); /* batches are written over records */
    }
    pthread_t thread;
    pthread_create(&thread, NULL, free_records, first);
    pthread_join(thread, NULL);
    for (int i = 0; i < AGAIN; i++) ck_assert_ptr_nonnull(again[i] = deft_record_alloc());
    qsort(again, AGAIN, sizeof *again, compare_addresses);
    for (int i = 1; i < AGAIN; i++)
        ck_assert_msg(again[i] != again[i - 1], "record %p handed out twice", again[i]);
    for (int i = 0; i < MOVED_RECORDS; i++)
        ck_assert_msg(bsearch(&first[i], again, AGAIN, sizeof *again, compare_addresses),
                      "record %d, freed on another thread, never came back", i);
    for (int i = 0; i < AGAIN; i++) deft_record_free(again[i]);
}
END_TEST

static Suite *base_suite(void) {
    Suite *suite = suite_create("base");
    TCase *tc = tcase_create("base");
    tcase_add_test(tc, test_version_matches_header);
    tcase_add_test(tc, test_version_rejects_null_out);
    tcase_add_test(tc, test_dtype_names_and_sizes);
    tcase_add_test(tc, test_dtype_rejects_unknown_codes_and_names);
    tcase_add_test(tc, test_errors_are_thread_local);
    tcase_add_test(tc, test_error_message_is_truncated_not_overflowed);
    tcase_add_test(tc, test_device_check_refuses_cpu_n_and_names_the_devices);
    tcase_add_test(tc, test_shape_rejects_bad_dims);
    tcase_add_test(tc, test_shape_sizes_and_overflow);
    tcase_add_test(tc, test_shape_format);
    tcase_add_test(tc, test_records_freed_elsewhere_come_back_once);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(base_suite());
}
