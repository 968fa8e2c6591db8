/*
 * The CPU pool and the memory counters. Runs twice under ctest: with the
 * pool caching, and with DEFT_POOL=off, where every free goes to the system.
 */
#include <stdint.h>
#include <string.h>

#include "check_helpers.h"
#include "core/base/allocator.h"
#include "core/base/device_pool.h"
#include "core/base/memstat.h"
#include "core/base/scratch.h"
#include "core/base/storage.h"

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
        deft_fences_t *fences = NULL;
        ck_assert_int_eq(
            deft_cpu_pool.alloc(deft_device_cpu(), cases[i].ask, &ptr, &capacity, &fences), 0);
        ck_assert_ptr_null(fences);
        ck_assert_uint_eq((uintptr_t)ptr % 64, 0);
        ck_assert_uint_eq(capacity,
                          pool_caches() ? cases[i].capacity_cached : cases[i].capacity_bypassed);
        memset(ptr, 0xAB, cases[i].ask);
        deft_cpu_pool.free(deft_device_cpu(), ptr, capacity, NULL);
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

/* Kernel workspaces come from the pool: a second of the same size is the
 * first block again, with no system allocation (no fresh pages to fault in). */
START_TEST(test_scratch_blocks_are_pooled) {
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    int64_t allocs_before = stat(DEFT_MEM_SYSTEM_ALLOCS);
    char *a = deft_scratch_alloc(300000);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq((uintptr_t)a % DEFT_CPU_ALIGN, 0);
    memset(a, 1, 300000);
    deft_scratch_free(a);
    char *b = deft_scratch_alloc(290000);
    ck_assert_int_eq(stat(DEFT_MEM_SYSTEM_ALLOCS), allocs_before + (pool_caches() ? 1 : 2));
    if (pool_caches()) ck_assert_ptr_eq(a, b);
    deft_scratch_free(b);
    deft_scratch_free(NULL);
    char *empty = deft_scratch_alloc(0);
    ck_assert_ptr_nonnull(empty);
    deft_scratch_free(empty);
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
}
END_TEST

static void forget(void *ctx) {
    (void)ctx;
}

/* What an array may keep whole for the next one (ndarray.c's spare): only a
 * small CPU buffer of deft's own that nothing else references. */
START_TEST(test_only_private_small_storage_is_kept_for_reuse) {
    deft_storage_t *s, *big, *empty, *lent;
    ck_assert_int_eq(deft_storage_new(deft_device_cpu(), 16, &s), 0);
    ck_assert_int_eq(deft_storage_parkable(s), pool_caches());
    deft_storage_retain(s); /* another user: a view, an export */
    ck_assert(!deft_storage_parkable(s));
    deft_storage_release(s);
    atomic_store(&s->shared, true); /* written outside deft */
    ck_assert(!deft_storage_parkable(s));
    deft_storage_release(s);
    ck_assert_int_eq(deft_storage_new(deft_device_cpu(), 4096, &big), 0);
    ck_assert(!deft_storage_parkable(big));
    deft_storage_release(big);
    ck_assert_int_eq(deft_storage_new(deft_device_cpu(), 0, &empty), 0);
    ck_assert(!deft_storage_parkable(empty));
    deft_storage_release(empty);
    float borrowed[4];
    ck_assert_int_eq(
        deft_storage_wrap(deft_device_cpu(), borrowed, sizeof borrowed, forget, NULL, &lent), 0);
    ck_assert(!deft_storage_parkable(lent));
    deft_storage_release(lent);
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
    int gpus = 0;
    ck_assert_ok(DeftGetGPUCount(&gpus));
    ck_assert_fails(DeftGetMemoryStat(DEFT_GPU, gpus, 0, &value),
                    gpus ? DEFT_ERROR_INDEX : DEFT_ERROR_NOT_IMPLEMENTED, "gpu(");
    ck_assert_fails(DeftGetMemoryStat(DEFT_CPU, 0, 0, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_int_eq(value, 7);
    ck_assert_fails(DeftGetLiveNDArrayCount(NULL), DEFT_ERROR_VALUE,
                    "DeftGetLiveNDArrayCount: out is NULL");
    ck_assert_fails(DeftMemoryReleaseCached(0, 0), DEFT_ERROR_VALUE,
                    "DeftMemoryReleaseCached: device has device type 0");
}
END_TEST

/* ---- the device pool, over a fake device of 1000 bytes ---- */

static struct {
    size_t limit, used;
    int allocs, frees;
} fake;

static size_t *fake_header(void *ptr) {
    return (size_t *)ptr - 1;
}

static int fake_alloc(deft_device_t dev, size_t nbytes, void **out) {
    (void)dev;
    if (fake.used + nbytes > fake.limit) return DEFT_DEVICE_OUT_OF_MEMORY;
    size_t *block = malloc(sizeof(size_t) + nbytes);
    ck_assert_ptr_nonnull(block);
    *block = nbytes;
    fake.used += nbytes, fake.allocs++;
    *out = block + 1;
    return 0;
}

static void fake_free(deft_device_t dev, void *ptr) {
    (void)dev;
    fake.used -= *fake_header(ptr), fake.frees++;
    free(fake_header(ptr));
}

static int fake_info(deft_device_t dev, size_t *free_bytes, size_t *total_bytes) {
    (void)dev;
    *free_bytes = fake.limit - fake.used, *total_bytes = fake.limit;
    return 0;
}

static const deft_device_memory_t fake_memory = {fake_alloc, fake_free, fake_info};
static const deft_device_t fake_gpu = {DEFT_DEV_GPU, 3};

START_TEST(test_device_pool_caches_and_gives_back_before_failing) {
    fake.limit = 1000, fake.used = 0, fake.allocs = fake.frees = 0;
    int64_t cached_before = deft_memstat_get(fake_gpu, DEFT_MEMSTAT_CACHED_BYTES);
    deft_device_pool_t *pool = deft_device_pool_new(fake_gpu, &fake_memory);
    void *a, *again, *b, *c;
    size_t cap_a, cap_again, cap_b, cap_c;
    deft_fences_t *fences;
    ck_assert_ok(deft_device_pool_alloc(pool, 500, &a, &cap_a, &fences));
    ck_assert_uint_eq(cap_a, 512);
    deft_device_pool_free(pool, a, cap_a, NULL);
    ck_assert_int_eq(deft_memstat_get(fake_gpu, DEFT_MEMSTAT_CACHED_BYTES), cached_before + 512);
    ck_assert_ok(
        deft_device_pool_alloc(pool, 450, &again, &cap_again, &fences)); /* same class: reused */
    ck_assert_ptr_eq(again, a);
    ck_assert_int_eq(fake.allocs, 1);
    deft_device_pool_free(pool, again, cap_again, NULL);

    /* 512 cached + 640 exceed the device: the cache goes back, then it fits. */
    ck_assert_ok(deft_device_pool_alloc(pool, 600, &b, &cap_b, &fences));
    ck_assert_uint_eq(cap_b, 640);
    ck_assert_int_eq(fake.frees, 1);
    ck_assert_int_eq(deft_memstat_get(fake_gpu, DEFT_MEMSTAT_CACHED_BYTES), cached_before);

    /* Nothing cached is left to give back: a clear error, and nothing lost. */
    ck_assert_fails(deft_device_pool_alloc(pool, 600, &c, &cap_c, &fences),
                    DEFT_ERROR_OUT_OF_MEMORY, "out of memory on gpu(3): cannot allocate 600 bytes");
    ck_assert_fails(deft_device_pool_alloc(pool, 600, &c, &cap_c, &fences),
                    DEFT_ERROR_OUT_OF_MEMORY, "360 bytes free of 1000 bytes on the device");
    ck_assert_uint_eq(fake.used, 640);
    deft_device_pool_free(pool, b, cap_b, NULL);
    deft_device_pool_destroy(pool);
    ck_assert_uint_eq(fake.used, 0);
    ck_assert_int_eq(fake.allocs, fake.frees);
    ck_assert_int_eq(deft_memstat_get(fake_gpu, DEFT_MEMSTAT_CACHED_BYTES), cached_before);
}
END_TEST

static Suite *pool_suite(void) {
    Suite *suite = suite_create(pool_caches() ? "pool" : "pool (DEFT_POOL=off)");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, test_blocks_are_aligned_and_rounded_to_classes);
    tcase_add_test(tc, test_freed_storage_is_reused_or_returned);
    tcase_add_test(tc, test_scratch_blocks_are_pooled);
    tcase_add_test(tc, test_reused_block_is_zeroed_by_create);
    tcase_add_test(tc, test_only_private_small_storage_is_kept_for_reuse);
    tcase_add_test(tc, test_live_and_peak_bytes_follow_arrays);
    tcase_add_test(tc, test_memory_stat_rejects_bad_arguments);
    tcase_add_test(tc, test_device_pool_caches_and_gives_back_before_failing);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(pool_suite());
}
