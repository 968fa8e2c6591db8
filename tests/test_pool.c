/*
 * The CPU pool and the memory counters. Runs twice under ctest: with the
 * pool caching, and with DEFT_POOL=off, where every free goes to the system.
 */
#include <stdint.h>

#include "check_helpers.h"
#include "core/base/allocator.h"

static int pool_caches(void) {
    const char *env = getenv("DEFT_POOL");
    return !(env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0));
}

static int64_t stat(int which) {
    int64_t value = -1;
    ck_assert_ok(DeftGetMemoryStat(DEFT_CPU, 0, which, &value));
    return value;
}

START_TEST(test_blocks_are_aligned_and_rounded_to_classes) {
    static const struct {
        size_t ask, capacity_cached, capacity_bypassed;
    } cases[] = {{1, 64, 64},
                 {64, 64, 64},
                 {65, 80, 128},
                 {100, 112, 128},
                 {1000, 1024, 1024},
                 {1025, 1280, 1088},
                 {3 << 20, 3 << 20, 3 << 20},
                 {(3 << 20) + 1, 3670016, (3 << 20) + 64}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *ptr = NULL;
        size_t capacity = 0;
        ck_assert_int_eq(deft_cpu_pool.alloc(deft_device_cpu(), cases[i].ask, &ptr, &capacity), 0);
        ck_assert_uint_eq((uintptr_t)ptr % 64, 0);
        ck_assert_uint_eq(capacity,
                          pool_caches() ? cases[i].capacity_cached : cases[i].capacity_bypassed);
        memset(ptr, 0xAB, cases[i].ask);
        deft_cpu_pool.free(deft_device_cpu(), ptr, capacity);
    }
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
}
END_TEST

START_TEST(test_freed_storage_is_reused_or_returned) {
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    const int64_t shape[1] = {1000};
    DeftNDArrayHandle a, b;
    int64_t allocs_before = stat(DEFT_MEM_SYSTEM_ALLOCS);
    ck_assert_ok(DeftNDArrayCreate(shape, 1, DEFT_FLOAT64, DEFT_CPU, 0, &a));
    ck_assert_int_eq(stat(DEFT_MEM_SYSTEM_ALLOCS), allocs_before + 1);
    ck_assert_ok(DeftNDArrayFree(a));
    ck_assert_int_eq(stat(DEFT_MEM_CACHED_BYTES), pool_caches() ? 8192 : 0);
    ck_assert_ok(DeftNDArrayCreate(shape, 1, DEFT_FLOAT64, DEFT_CPU, 0, &b));
    ck_assert_int_eq(stat(DEFT_MEM_SYSTEM_ALLOCS), allocs_before + (pool_caches() ? 1 : 2));
    ck_assert_int_eq(stat(DEFT_MEM_CACHED_BYTES), 0);
    ck_assert_ok(DeftNDArrayFree(b));
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    ck_assert_int_eq(stat(DEFT_MEM_CACHED_BYTES), 0);
}
END_TEST

START_TEST(test_reused_block_is_zeroed_by_create) {
    const int64_t shape[1] = {16};
    float ones[16], out[16];
    for (int i = 0; i < 16; i++) ones[i] = 1.0f;
    DeftNDArrayHandle a, b;
    ck_assert_ok(
        DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, ones, sizeof ones, &a));
    ck_assert_ok(DeftNDArrayFree(a));
    ck_assert_ok(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &b));
    ck_assert_ok(DeftNDArrayCopyToHost(b, out, sizeof out));
    for (int i = 0; i < 16; i++) ck_assert_float_eq(out[i], 0.0f);
    ck_assert_ok(DeftNDArrayFree(b));
}
END_TEST

START_TEST(test_live_and_peak_bytes_follow_arrays) {
    int64_t live = stat(DEFT_MEM_LIVE_BYTES), buffers = stat(DEFT_MEM_LIVE_BUFFERS);
    const int64_t shape[2] = {10, 10};
    DeftNDArrayHandle a;
    ck_assert_ok(DeftNDArrayCreate(shape, 2, DEFT_INT32, DEFT_CPU, 0, &a));
    ck_assert_int_eq(stat(DEFT_MEM_LIVE_BYTES), live + 400);
    ck_assert_int_eq(stat(DEFT_MEM_LIVE_BUFFERS), buffers + 1);
    ck_assert_int_ge(stat(DEFT_MEM_PEAK_BYTES), live + 400);
    ck_assert_ok(DeftNDArrayFree(a));
    ck_assert_int_eq(stat(DEFT_MEM_LIVE_BYTES), live);
    ck_assert_int_eq(stat(DEFT_MEM_LIVE_BUFFERS), buffers);
}
END_TEST

START_TEST(test_memory_stat_rejects_bad_arguments) {
    int64_t value = 7;
    ck_assert_fails(DeftGetMemoryStat(DEFT_CPU, 0, 5, &value), DEFT_ERROR_VALUE,
                    "DeftGetMemoryStat: stat is 5");
    ck_assert_fails(DeftGetMemoryStat(DEFT_CPU, 0, -1, &value), DEFT_ERROR_VALUE, "stat is -1");
    ck_assert_fails(DeftGetMemoryStat(9, 0, 0, &value), DEFT_ERROR_VALUE, "device type 9");
    ck_assert_fails(DeftGetMemoryStat(DEFT_CPU, 3, 0, &value), DEFT_ERROR_VALUE,
                    "device is cpu(3), expected cpu(0)");
    ck_assert_fails(DeftGetMemoryStat(DEFT_GPU, 0, 0, &value), DEFT_ERROR_NOT_IMPLEMENTED,
                    "gpu(0)");
    ck_assert_fails(DeftGetMemoryStat(DEFT_CPU, 0, 0, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_int_eq(value, 7);
    ck_assert_fails(DeftGetLiveNDArrayCount(NULL), DEFT_ERROR_VALUE,
                    "DeftGetLiveNDArrayCount: out is NULL");
    ck_assert_fails(DeftMemoryReleaseCached(0, 0), DEFT_ERROR_VALUE,
                    "DeftMemoryReleaseCached: device has device type 0");
}
END_TEST

static Suite *pool_suite(void) {
    Suite *suite = suite_create(pool_caches() ? "pool" : "pool (DEFT_POOL=off)");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, test_blocks_are_aligned_and_rounded_to_classes);
    tcase_add_test(tc, test_freed_storage_is_reused_or_returned);
    tcase_add_test(tc, test_reused_block_is_zeroed_by_create);
    tcase_add_test(tc, test_live_and_peak_bytes_follow_arrays);
    tcase_add_test(tc, test_memory_stat_rejects_bad_arguments);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(pool_suite());
}
