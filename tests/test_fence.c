/*
 * The fences that order GPU work across streams (core/base/fence.h), over a
 * fake GPU layer that logs which stream waited for which event, and on which
 * stream each event was recorded: the rules are checked on any machine, GPU
 * or not. Events are recorded lazily, when a wait first needs one, so the
 * event numbers below count the waits that needed a new event.
 */
#include <pthread.h>
#include <stdint.h>

#include "check_helpers.h"
#include "core/base/device_pool.h"
#include "core/base/error.h"
#include "core/base/fence.h"

typedef struct fake_event {
    int id, slot, seq;
} fake_event_t;

#define MAX_WAITS 64

typedef struct fake_wait {
    int id, slot, seq; /* the device and stream that waited, the event waited for */
    int event_slot;    /* the stream the event was recorded on */
} fake_wait_t;

static struct {
    int next_seq, live_events, syncs, host_waits[MAX_WAITS], num_host_waits;
    bool fail_record;
    fake_wait_t waits[MAX_WAITS];
    int num_waits;
} fake;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local int current_slot; /* the calling thread's fake stream */

static int fake_slot(void) {
    return current_slot;
}

static int fake_record(int id, int slot, void **out) {
    if (fake.fail_record) return deft_error(DEFT_ERR_INTERNAL, "event record failed");
    fake_event_t *e = malloc(sizeof *e);
    ck_assert_ptr_nonnull(e);
    pthread_mutex_lock(&fake_lock);
    *e = (fake_event_t){id, slot, ++fake.next_seq};
    fake.live_events++;
    pthread_mutex_unlock(&fake_lock);
    *out = e;
    return 0;
}

static int fake_wait(int id, void *event) {
    pthread_mutex_lock(&fake_lock);
    if (fake.num_waits < MAX_WAITS)
        fake.waits[fake.num_waits++] = (fake_wait_t){id, current_slot, ((fake_event_t *)event)->seq,
                                                     ((fake_event_t *)event)->slot};
    pthread_mutex_unlock(&fake_lock);
    return 0;
}

static int fake_synchronize_event(void *event) {
    fake.host_waits[fake.num_host_waits++] = ((fake_event_t *)event)->seq;
    return 0;
}

static void fake_release(void *event) {
    pthread_mutex_lock(&fake_lock);
    fake.live_events--;
    pthread_mutex_unlock(&fake_lock);
    free(event);
}

static int fake_synchronize(int id, bool whole_device) {
    (void)id, (void)whole_device;
    fake.syncs++;
    return 0;
}

static const deft_gpu_backend_t fake_gpu = {
    .synchronize = fake_synchronize,
    .stream_slot = fake_slot,
    .event_record = fake_record,
    .event_wait = fake_wait,
    .event_synchronize = fake_synchronize_event,
    .event_release = fake_release,
};

static const deft_gpu_backend_t *real_gpu;

static void use_fake(void) {
    real_gpu = deft_device_gpu_backend();
    deft_device_register_gpu(&fake_gpu);
    memset(&fake, 0, sizeof fake);
    current_slot = 0;
}

static void use_real(void) {
    deft_device_register_gpu(real_gpu);
}

static deft_storage_t gpu_buffer(int id) {
    deft_storage_t s = {.device = {DEFT_DEV_GPU, id}, .data = (void *)(uintptr_t)0x1000};
    atomic_init(&s.fences, NULL);
    return s;
}

/* Queue one operation on stream `slot`: wait, then fence. */
static void touch(int slot, deft_storage_t *s, bool write) {
    current_slot = slot;
    deft_access_t a = {s, write, DEFT_VALUE_NEW};
    ck_assert_ok(deft_fence_begin(&a, 1));
    ck_assert_ok(deft_fence_end(&a, 1));
}

/* Wait number k: stream `slot` waited for event `seq`, recorded on stream `event_slot`. */
static void assert_wait(int k, int slot, int seq, int event_slot) {
    ck_assert_int_gt(fake.num_waits, k);
    ck_assert_int_eq(fake.waits[k].slot, slot);
    ck_assert_int_eq(fake.waits[k].seq, seq);
    ck_assert_int_eq(fake.waits[k].event_slot, event_slot);
}

static void drop(deft_storage_t *s) {
    deft_fences_free(atomic_load(&s->fences));
    atomic_store(&s->fences, NULL);
}

START_TEST(test_read_waits_for_the_write_of_another_stream) {
    deft_storage_t s = gpu_buffer(0);
    touch(0, &s, true);
    ck_assert_int_eq(fake.num_waits, 0);
    touch(0, &s, false); /* same stream: in order already */
    ck_assert_int_eq(fake.num_waits, 0);
    ck_assert_int_eq(fake.next_seq, 0); /* nobody waited: no event */
    touch(1, &s, false);                /* event 1, recorded on the writer's stream */
    ck_assert_int_eq(fake.num_waits, 1);
    assert_wait(0, 1, 1, 0);
    drop(&s);
    ck_assert_int_eq(fake.live_events, 0);
}
END_TEST

START_TEST(test_write_waits_for_every_read_since_the_last_write) {
    deft_storage_t s = gpu_buffer(0);
    touch(0, &s, true);  /* the write */
    touch(1, &s, false); /* waits for it: event 1 */
    touch(2, &s, false); /* waits for event 1 again */
    touch(1, &s, false); /* too; replaces the first as stream 1's read */
    ck_assert_int_eq(fake.live_events, 1);
    fake.num_waits = 0;
    touch(3, &s, true);
    ck_assert_int_eq(fake.num_waits, 3); /* the write, then the reads of streams 1 and 2 */
    assert_wait(0, 3, 1, 0);
    assert_wait(1, 3, 2, 1);
    assert_wait(2, 3, 3, 2);
    ck_assert_int_eq(fake.live_events, 0); /* the new write covers all of them */
    fake.num_waits = 0;
    touch(0, &s, true); /* only the last write: the reads were before it */
    ck_assert_int_eq(fake.num_waits, 1);
    assert_wait(0, 0, 4, 3);
    drop(&s);
}
END_TEST

START_TEST(test_one_fence_per_device_per_operation) {
    deft_storage_t a = gpu_buffer(0), b = gpu_buffer(0), c = gpu_buffer(1);
    deft_storage_t cpu = {.device = {DEFT_DEV_CPU, 0}, .data = (void *)(uintptr_t)0x2000};
    deft_storage_t empty = gpu_buffer(0);
    empty.data = NULL;
    atomic_init(&cpu.fences, NULL);
    deft_access_t access[] = {{&a, false, DEFT_VALUE_NEW},    {&b, true, DEFT_VALUE_NEW},
                              {&c, true, DEFT_VALUE_NEW},     {&cpu, true, DEFT_VALUE_NEW},
                              {&empty, true, DEFT_VALUE_NEW}, {NULL, true, DEFT_VALUE_NEW}};
    ck_assert(deft_fence_any_gpu(access, 6));
    ck_assert(!deft_fence_any_gpu(access + 3, 3));
    ck_assert_ok(deft_fence_begin(access, 6));
    ck_assert_ok(deft_fence_end(access, 6));
    ck_assert_int_eq(fake.next_seq, 0); /* no event until a wait needs one */
    ck_assert_ptr_null(atomic_load(&cpu.fences));
    ck_assert_ptr_null(atomic_load(&empty.fences));
    current_slot = 1;
    ck_assert_ok(deft_fence_begin(access, 3)); /* a read of a (never written); writes of b, c */
    ck_assert_int_eq(fake.num_waits, 2);
    ck_assert_int_eq(fake.next_seq, 2); /* gpu(0)'s fence and gpu(1)'s */
    ck_assert_int_eq(fake.waits[0].id, 0);
    ck_assert_int_eq(fake.waits[1].id, 1); /* c's wait is on gpu(1)'s stream */
    ck_assert_int_eq(fake.waits[1].seq, 2);
    deft_access_t write_a = {&a, true, DEFT_VALUE_NEW};
    ck_assert_ok(deft_fence_begin(&write_a, 1)); /* a's read is b's write: the same fence */
    ck_assert_int_eq(fake.num_waits, 3);
    ck_assert_int_eq(fake.waits[2].seq, 1);
    ck_assert_int_eq(fake.next_seq, 2);
    drop(&a), drop(&b), drop(&c);
    ck_assert_int_eq(fake.live_events, 0);
}
END_TEST

START_TEST(test_host_waits_for_what_it_needs) {
    deft_storage_t s = gpu_buffer(0);
    ck_assert_ok(deft_fence_host_wait(&s, true)); /* never touched: nothing to wait for */
    ck_assert_int_eq(fake.num_host_waits, 0);
    touch(0, &s, true);  /* the write */
    touch(1, &s, false); /* waits for it: event 1 */
    ck_assert_ok(deft_fence_host_wait(&s, false));
    ck_assert_int_eq(fake.num_host_waits, 1);
    ck_assert_int_eq(fake.host_waits[0], 1);
    ck_assert_ok(deft_fence_host_wait(&s, true)); /* the read's event is recorded now */
    ck_assert_int_eq(fake.num_host_waits, 3);
    ck_assert_int_eq(fake.host_waits[2], 2);
    ck_assert_int_eq(fake.next_seq, 2);
    drop(&s);
}
END_TEST

/* Work that stays on one stream needs no event: the stream orders it. */
START_TEST(test_chain_on_one_stream_records_no_event) {
    deft_storage_t a = gpu_buffer(0), b = gpu_buffer(0);
    long before = deft_fence_events_recorded();
    for (int i = 0; i < 100; i++) {
        current_slot = 2;
        deft_access_t access[2] = {{i % 2 ? &a : &b, false, DEFT_VALUE_NEW},
                                   {i % 2 ? &b : &a, true, DEFT_VALUE_NEW}};
        ck_assert_ok(deft_fence_begin(access, 2));
        ck_assert_ok(deft_fence_end(access, 2));
    }
    ck_assert_int_eq(fake.next_seq, 0);
    ck_assert_int_eq(fake.num_waits, 0);
    ck_assert_int_eq(deft_fence_events_recorded(), before);
    ck_assert_ok(deft_fence_host_wait(&a, true)); /* the host's read: one event, on stream 2 */
    ck_assert_int_eq(deft_fence_events_recorded(), before + 1);
    ck_assert_int_eq(fake.num_host_waits, 1);
    drop(&a), drop(&b);
    ck_assert_int_eq(fake.live_events, 0);
}
END_TEST

/* A wait that cannot get its event is made on the host instead, never skipped. */
START_TEST(test_failed_event_waits_for_the_work_instead) {
    deft_storage_t s = gpu_buffer(0);
    touch(0, &s, true);
    fake.fail_record = true;
    touch(1, &s, false);
    ck_assert_int_eq(fake.num_waits, 0);
    ck_assert_int_eq(fake.syncs, 1);
    ck_assert_ok(deft_fence_host_wait(&s, false));
    ck_assert_int_eq(fake.num_host_waits, 0);
    ck_assert_int_eq(fake.syncs, 2);
    fake.fail_record = false;
    drop(&s);
}
END_TEST

static int fake_raw_alloc(deft_device_t dev, size_t nbytes, void **out) {
    (void)dev;
    *out = malloc(nbytes);
    return *out ? 0 : DEFT_DEVICE_OUT_OF_MEMORY;
}

static void fake_raw_free(deft_device_t dev, void *ptr) {
    (void)dev;
    free(ptr);
}

START_TEST(test_reused_block_inherits_its_fences) {
    static const deft_device_memory_t memory = {fake_raw_alloc, fake_raw_free, NULL};
    deft_device_pool_t *pool = deft_device_pool_new((deft_device_t){DEFT_DEV_GPU, 0}, &memory);
    ck_assert_ptr_nonnull(pool);
    deft_storage_t s = gpu_buffer(0);
    size_t capacity;
    deft_fences_t *fences;
    ck_assert_ok(deft_device_pool_alloc(pool, 100, &s.data, &capacity, &fences));
    ck_assert_ptr_null(fences); /* fresh from the device */
    touch(1, &s, false);        /* a read still queued when the buffer is freed */
    void *old = s.data;
    deft_device_pool_free(pool, s.data, capacity, atomic_load(&s.fences));

    deft_storage_t reused = gpu_buffer(0);
    ck_assert_ok(deft_device_pool_alloc(pool, 100, &reused.data, &capacity, &fences));
    ck_assert_ptr_eq(reused.data, old);
    ck_assert_ptr_eq(fences, atomic_load(&s.fences));
    atomic_store(&reused.fences, fences);
    touch(2, &reused, true); /* the new buffer's first write waits for the old read */
    ck_assert_int_eq(fake.num_waits, 1);
    assert_wait(0, 2, 1, 1);
    deft_device_pool_free(pool, reused.data, capacity, atomic_load(&reused.fences));
    deft_device_pool_destroy(pool); /* the device's free: the fences go */
    ck_assert_int_eq(fake.live_events, 0);
}
END_TEST

typedef struct reader {
    deft_storage_t *s;
    int slot;
} reader_t;

static void *read_many(void *arg) {
    const reader_t *r = arg;
    for (int i = 0; i < 2000; i++) touch(r->slot, r->s, false);
    return NULL;
}

START_TEST(test_concurrent_readers_each_leave_their_last_read) {
    deft_storage_t s = gpu_buffer(0);
    touch(0, &s, true);
    pthread_t threads[2];
    reader_t readers[2] = {{&s, 1}, {&s, 2}};
    for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, read_many, &readers[t]);
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    ck_assert_int_eq(fake.live_events, 1); /* the write's, which both streams waited for */
    fake.num_waits = 0;
    touch(0, &s, true);
    ck_assert_int_eq(fake.num_waits, 2);
    ck_assert_int_eq(fake.waits[0].event_slot, 1); /* one read of each stream */
    ck_assert_int_eq(fake.waits[1].event_slot, 2);
    drop(&s);
    ck_assert_int_eq(fake.live_events, 0);
}
END_TEST

static Suite *fence_suite(void) {
    Suite *suite = suite_create("fence");
    TCase *tc = tcase_create("fence");
    tcase_add_checked_fixture(tc, use_fake, use_real);
    tcase_add_test(tc, test_read_waits_for_the_write_of_another_stream);
    tcase_add_test(tc, test_write_waits_for_every_read_since_the_last_write);
    tcase_add_test(tc, test_one_fence_per_device_per_operation);
    tcase_add_test(tc, test_host_waits_for_what_it_needs);
    tcase_add_test(tc, test_chain_on_one_stream_records_no_event);
    tcase_add_test(tc, test_failed_event_waits_for_the_work_instead);
    tcase_add_test(tc, test_reused_block_inherits_its_fences);
    tcase_add_test(tc, test_concurrent_readers_each_leave_their_last_read);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(fence_suite());
}
