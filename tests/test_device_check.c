/*
 * Device-side checks that report later (core/base/device_check.h), over a
 * fake GPU layer: a verdict is host memory that the test writes as the
 * device would, so the bookkeeping (which buffers carry which check, where
 * it is resolved, that nothing leaks, whose wait-all reports it) is
 * checked on any machine, GPU or not.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "check_helpers.h"
#include "core/base/allocator.h"
#include "core/base/device_check.h"
#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/base/storage.h"

/* ---- a fake GPU: streams and events that do nothing, a device that answers on sync ---- */

typedef struct fake_slot {
    deft_check_verdict_t verdict;
    deft_check_verdict_t answer; /* what the device writes when it is synchronised */
    atomic_int released;
} fake_slot_t;

#define MAX_SLOTS 128
static fake_slot_t *answering[MAX_SLOTS]; /* verdicts a synchronize answers */
static int num_answering, syncs;
static pthread_mutex_t answering_lock = PTHREAD_MUTEX_INITIALIZER;

static int fake_slot_of_stream(void) {
    return 0;
}

static int fake_record(int id, int slot, void **out) {
    (void)id, (void)slot;
    *out = malloc(1);
    return 0;
}

static int fake_wait(int id, void *event) {
    (void)id, (void)event;
    return 0;
}

static int fake_event_synchronize(void *event) {
    (void)event;
    return 0;
}

static void fake_release(void *event) {
    free(event);
}

/* The device finishes its work: every verdict queued gets its answer. */
static int fake_synchronize(int id, bool whole_device) {
    (void)id, (void)whole_device;
    pthread_mutex_lock(&answering_lock);
    syncs++;
    for (int i = 0; i < num_answering; i++) answering[i]->verdict = answering[i]->answer;
    num_answering = 0;
    pthread_mutex_unlock(&answering_lock);
    return 0;
}

static const deft_gpu_backend_t fake_gpu = {
    .synchronize = fake_synchronize,
    .stream_slot = fake_slot_of_stream,
    .event_record = fake_record,
    .event_wait = fake_wait,
    .event_synchronize = fake_event_synchronize,
    .event_release = fake_release,
};

static const deft_gpu_backend_t *real_gpu;
static long live_before;

static void use_fake(void) {
    real_gpu = deft_device_gpu_backend();
    deft_device_register_gpu(&fake_gpu);
    num_answering = syncs = 0;
    live_before = deft_check_live();
}

static void use_real(void) {
    deft_device_register_gpu(real_gpu);
    deft_fence_set_synchronous_checks(false);
}

static deft_storage_t gpu_buffer(void) {
    deft_storage_t s = {.device = {DEFT_DEV_GPU, 0}, .data = (void *)(uintptr_t)0x1000};
    atomic_init(&s.fences, NULL);
    return s;
}

static void drop(deft_storage_t *s) {
    deft_fences_free(atomic_load(&s->fences));
    atomic_store(&s->fences, NULL);
}

/* ---- a checked "kernel": defers one check whose verdict is a fake slot ---- */

static int report_bad(const void *ctx, int64_t first, double value) {
    const char *what = *(const char *const *)ctx;
    return deft_error(DEFT_ERR_INDEX, "%s: %g at position %lld", what, value, (long long)first);
}

static void slot_released(void *arg) {
    atomic_fetch_add(&((fake_slot_t *)arg)->released, 1);
}

typedef struct work {
    fake_slot_t *slot; /* NULL: no check */
    const char *what;
    bool deferring; /* what the kernel saw */
} work_t;

/* Queue a check as flag.cuh does: pending until the device answers. */
static int defer_check(fake_slot_t *slot, const char *what) {
    slot->verdict.first = DEFT_CHECK_PENDING;
    pthread_mutex_lock(&answering_lock);
    if (num_answering < MAX_SLOTS) answering[num_answering++] = slot;
    pthread_mutex_unlock(&answering_lock);
    deft_check_report_t how = {report_bad, &what, sizeof what};
    deft_check_t *check = deft_check_new(0, 0, &slot->verdict, &how, slot_released, slot);
    ck_assert_ptr_nonnull(check);
    return deft_check_defer(check);
}

static int checked_kernel(void *arg) {
    work_t *w = arg;
    w->deferring = deft_check_deferring();
    return w->slot && w->deferring ? defer_check(w->slot, w->what) : 0;
}

/* One operation: reads `in` (may be NULL), writes `out`, checks on `slot` (may be NULL). */
static int run_op(deft_storage_t *in, deft_storage_t *out, fake_slot_t *slot, const char *what) {
    deft_access_t access[2] = {{in, false, DEFT_VALUE_NEW}, {out, true, DEFT_VALUE_NEW}};
    work_t w = {slot, what, false};
    return in ? deft_fence_run(access, 2, checked_kernel, &w)
              : deft_fence_run(&access[1], 1, checked_kernel, &w);
}

static fake_slot_t failing(uint64_t first, double value) {
    return (fake_slot_t){.answer = {first, value}};
}

/* ---- the cases ---- */

START_TEST(test_failed_check_fails_the_wait_for_what_the_op_wrote) {
    deft_storage_t in = gpu_buffer(), out = gpu_buffer();
    fake_slot_t slot = failing(3, 7);
    ck_assert_ok(run_op(&in, &out, &slot, "operator 'take'")); /* the call does not wait */
    ck_assert_int_eq(syncs, 0);
    ck_assert_ok(fake_synchronize(0, false)); /* the host's wait for `out` */
    ck_assert_int_eq(deft_fence_host_check(&out), -1);
    ck_assert_int_eq(deft_error_kind(), DEFT_ERR_INDEX);
    ck_assert_str_eq(deft_error_message(), "operator 'take': 7 at position 3");
    ck_assert_int_eq(deft_fence_host_check(&out), -1); /* sticky */
    ck_assert_ok(deft_fence_host_check(&in));          /* what it read is fine */
    drop(&out);
    ck_assert_int_eq(atomic_load(&slot.released), 1); /* the slot goes back with the last carrier */
    ck_assert_int_eq(deft_check_live(), live_before);
    drop(&in);
}
END_TEST

START_TEST(test_check_not_answered_yet_is_not_reported) {
    deft_storage_t out = gpu_buffer();
    fake_slot_t slot = failing(0, -1);
    ck_assert_ok(run_op(NULL, &out, &slot, "x"));
    ck_assert_ok(deft_fence_host_check(&out)); /* a write that raced past the wait: its waiter's */
    drop(&out);
    ck_assert_int_eq(atomic_load(&slot.released), 1);
}
END_TEST

START_TEST(test_later_reads_carry_the_failure_until_overwritten) {
    deft_storage_t in = gpu_buffer(), out = gpu_buffer(), next = gpu_buffer();
    fake_slot_t slot = failing(1, 9);
    ck_assert_ok(run_op(&in, &out, &slot, "gather_nd"));
    ck_assert_ok(run_op(&out, &next, NULL, NULL)); /* reads the bad value */
    ck_assert_ok(fake_synchronize(0, false));
    ck_assert_int_eq(deft_fence_host_check(&next), -1);
    ck_assert_str_eq(deft_error_message(), "gather_nd: 9 at position 1");
    ck_assert_ok(run_op(NULL, &out, NULL, NULL)); /* a new value: its failure is gone */
    ck_assert_ok(deft_fence_host_check(&out));
    ck_assert_int_eq(deft_fence_host_check(&next), -1); /* what was computed from it is not */
    ck_assert_int_eq(atomic_load(&slot.released), 0);
    drop(&next);
    ck_assert_int_eq(atomic_load(&slot.released), 1);
    ck_assert_int_eq(deft_check_live(), live_before);
    drop(&in), drop(&out);
}
END_TEST

START_TEST(test_in_place_update_carries_the_old_values_failure) {
    deft_storage_t x = gpu_buffer();
    fake_slot_t bad = failing(2, 8), fine = failing(DEFT_CHECK_PASSED, 0);
    ck_assert_ok(run_op(NULL, &x, &bad, "take"));
    deft_access_t update = {&x, true, DEFT_VALUE_UPDATE}; /* x += ..., reads the bad value */
    work_t w = {&fine, "add", false};
    ck_assert_ok(deft_fence_run(&update, 1, checked_kernel, &w));
    ck_assert_ok(fake_synchronize(0, false));
    ck_assert_int_eq(deft_fence_host_check(&x), -1);
    ck_assert_str_eq(deft_error_message(), "take: 8 at position 2");
    drop(&x);
    ck_assert_int_eq(deft_check_live(), live_before);
}
END_TEST

/* A deferred-compute run fences its leaves as written, unchanged: each keeps its own. */
START_TEST(test_unchanged_buffers_keep_their_own_checks) {
    deft_storage_t a = gpu_buffer(), b = gpu_buffer(), dest = gpu_buffer();
    fake_slot_t bad = failing(0, 4);
    ck_assert_ok(run_op(NULL, &a, &bad, "pick"));
    ck_assert_ok(run_op(NULL, &b, NULL, NULL));
    deft_access_t access[3] = {
        {&a, true, DEFT_VALUE_SAME}, {&b, true, DEFT_VALUE_SAME}, {&dest, true, DEFT_VALUE_NEW}};
    work_t w = {NULL, NULL, false};
    ck_assert_ok(deft_fence_run(access, 3, checked_kernel, &w));
    ck_assert_ok(fake_synchronize(0, false));
    ck_assert_int_eq(deft_fence_host_check(&a), -1);
    ck_assert_int_eq(deft_fence_host_check(&dest), -1); /* computed from a */
    ck_assert_str_eq(deft_error_message(), "pick: 4 at position 0");
    ck_assert_ok(deft_fence_host_check(&b)); /* not a's failure */
    drop(&a), drop(&b), drop(&dest);
    ck_assert_int_eq(deft_check_live(), live_before);
}
END_TEST

START_TEST(test_passed_check_is_not_carried_on) {
    deft_storage_t out = gpu_buffer(), next = gpu_buffer();
    fake_slot_t slot = failing(DEFT_CHECK_PASSED, 0);
    ck_assert_ok(run_op(NULL, &out, &slot, "x"));
    ck_assert_ok(fake_synchronize(0, false));
    ck_assert_ok(run_op(&out, &next, NULL, NULL)); /* the verdict is in: nothing to carry */
    ck_assert_ok(deft_fence_host_check(&next));
    drop(&out);
    ck_assert_int_eq(atomic_load(&slot.released), 1); /* `next` did not keep it */
    drop(&next);
}
END_TEST

START_TEST(test_naive_mode_checks_synchronously) {
    deft_storage_t out = gpu_buffer();
    work_t w = {NULL, NULL, true};
    deft_access_t access = {&out, true, DEFT_VALUE_NEW};
    deft_fence_set_synchronous_checks(true);
    ck_assert_ok(deft_fence_run(&access, 1, checked_kernel, &w));
    ck_assert(!w.deferring);
    deft_fence_set_synchronous_checks(false);
    ck_assert_ok(deft_fence_run(&access, 1, checked_kernel, &w));
    ck_assert(w.deferring);
    ck_assert(!deft_check_deferring()); /* only inside a run */
    drop(&out);
}
END_TEST

/* A copy to host memory has waited for its inputs: it reports there. */
START_TEST(test_copy_to_the_host_reports_at_once) {
    deft_storage_t in = gpu_buffer(), out = gpu_buffer();
    deft_storage_t host = {.device = {DEFT_DEV_CPU, 0}, .data = (void *)(uintptr_t)0x2000};
    fake_slot_t slot = failing(2, 5);
    ck_assert_ok(run_op(&in, &out, &slot, "pick"));
    ck_assert_int_eq(run_op(&out, &host, NULL, NULL), -1);
    ck_assert_int_eq(syncs, 1);
    ck_assert_str_eq(deft_error_message(), "pick: 5 at position 2");
    drop(&in), drop(&out);
    ck_assert_int_eq(atomic_load(&slot.released), 1);
}
END_TEST

static int defer_many(void *arg) {
    fake_slot_t *slots = arg;
    for (int i = 0; i < 65; i++)
        if (defer_check(&slots[i], "many")) return -1;
    return 0;
}

/* Far ahead of the device, a run waits rather than carry more and more. */
START_TEST(test_too_many_checks_are_resolved_at_once) {
    deft_storage_t out = gpu_buffer();
    fake_slot_t *slots = calloc(65, sizeof *slots);
    for (int i = 0; i < 65; i++) slots[i].answer.first = DEFT_CHECK_PASSED;
    deft_access_t access = {&out, true, DEFT_VALUE_NEW};
    ck_assert_ok(deft_fence_run(&access, 1, defer_many, slots));
    ck_assert_int_eq(syncs, 1);
    for (int i = 0; i < 65; i++) ck_assert_int_eq(atomic_load(&slots[i].released), 1);
    ck_assert_int_eq(deft_check_live(), live_before);
    slots[7].answer.first = 7; /* one of them fails: the run fails */
    ck_assert_int_eq(deft_fence_run(&access, 1, defer_many, slots), -1);
    ck_assert_str_eq(deft_error_message(), "many: 0 at position 7");
    ck_assert_int_eq(deft_fence_host_check(&out), -1); /* and its output keeps it */
    drop(&out);
    ck_assert_int_eq(deft_check_live(), live_before);
    free(slots);
}
END_TEST

typedef struct nested {
    deft_storage_t *tmp;
    fake_slot_t *slot;
} nested_t;

static int run_inner(void *arg) {
    nested_t *n = arg;
    return run_op(NULL, n->tmp, n->slot, "inner");
}

START_TEST(test_nested_run_hands_its_checks_to_the_outer) {
    deft_storage_t tmp = gpu_buffer(), out = gpu_buffer();
    fake_slot_t slot = failing(4, 1);
    nested_t n = {&tmp, &slot};
    deft_access_t access = {&out, true, DEFT_VALUE_NEW};
    ck_assert_ok(deft_fence_run(&access, 1, run_inner, &n));
    drop(&tmp);
    ck_assert_ok(fake_synchronize(0, false));
    ck_assert_int_eq(deft_fence_host_check(&out), -1);
    ck_assert_str_eq(deft_error_message(), "inner: 1 at position 4");
    drop(&out);
    ck_assert_int_eq(atomic_load(&slot.released), 1);
}
END_TEST

/* An allocator that keeps one freed block and hands it, fences and all, to the next storage. */
static struct {
    void *block;
    deft_fences_t *fences;
} kept;

static int keep_alloc(deft_device_t dev, size_t nbytes, void **out, size_t *capacity,
                      deft_fences_t **fences) {
    (void)dev;
    *out = kept.block ? kept.block : malloc(nbytes);
    *capacity = nbytes, *fences = kept.fences;
    kept.block = NULL, kept.fences = NULL;
    return 0;
}

static void keep_free(deft_device_t dev, void *ptr, size_t capacity, deft_fences_t *fences) {
    (void)dev, (void)capacity;
    kept.block = ptr, kept.fences = fences;
}

START_TEST(test_freed_buffer_leaves_no_failure_to_the_next_user_of_its_block) {
    static const deft_allocator_t keeper = {keep_alloc, keep_free, NULL};
    const deft_device_t gpu = {DEFT_DEV_GPU, 0};
    deft_storage_t *s, *next;
    ck_assert_ok(deft_storage_new_from(&keeper, gpu, 64, &s));
    fake_slot_t slot = failing(0, 0);
    ck_assert_ok(run_op(NULL, s, &slot, "x"));
    ck_assert_ok(fake_synchronize(0, false));
    ck_assert_int_eq(deft_fence_host_check(s), -1);
    deft_storage_release(s);
    ck_assert_int_eq(atomic_load(&slot.released), 1);
    ck_assert_ok(deft_storage_new_from(&keeper, gpu, 64, &next));
    ck_assert_ptr_nonnull(atomic_load(&next->fences)); /* the block's fences, inherited */
    ck_assert_ok(deft_fence_host_check(next));         /* but not the old value's failure */
    deft_storage_release(next);
    deft_fences_free(kept.fences);
    free(kept.block);
}
END_TEST

/* ---- wait-all: each thread takes its own failures, once ---- */

static _Thread_local uint32_t owner_id;

static uint32_t test_owner(void) {
    return owner_id;
}

#define PER_THREAD 200

typedef struct worker {
    uint32_t id;
    long failed, again;
    char first[128];
} worker_t;

static atomic_int arrived;

static void *fail_many(void *arg) {
    worker_t *w = arg;
    owner_id = w->id;
    deft_storage_t *outs = calloc(PER_THREAD, sizeof *outs);
    fake_slot_t *slots = calloc(PER_THREAD, sizeof *slots);
    char what[32];
    snprintf(what, sizeof what, "thread %u", w->id);
    for (int i = 0; i < PER_THREAD; i++) {
        outs[i] = gpu_buffer();
        /* the verdict as the device writes it, once the run's work is queued */
        work_t work = {&slots[i], what, false};
        deft_access_t access = {&outs[i], true, DEFT_VALUE_NEW};
        ck_assert_ok(deft_fence_run(&access, 1, checked_kernel, &work));
        slots[i].verdict = (deft_check_verdict_t){i % 2 ? DEFT_CHECK_PASSED : (uint64_t)i, i};
    }
    /* both threads' failures are live before either takes its own */
    atomic_fetch_add(&arrived, 1);
    while (atomic_load(&arrived) < 2) continue;
    deft_check_t *first = deft_checks_take_failed(w->id, &w->failed);
    ck_assert_ptr_nonnull(first);
    ck_assert_int_eq(deft_check_resolve(first), -1);
    snprintf(w->first, sizeof w->first, "%s", deft_error_message());
    deft_check_release(first);
    deft_check_release(deft_checks_take_failed(w->id, &w->again));
    for (int i = 0; i < PER_THREAD; i++) drop(&outs[i]);
    for (int i = 0; i < PER_THREAD; i++) ck_assert_int_eq(atomic_load(&slots[i].released), 1);
    free(outs), free(slots);
    return NULL;
}

START_TEST(test_wait_all_takes_each_threads_own_failures_once) {
    deft_check_set_owner_fn(test_owner);
    worker_t workers[2] = {{.id = 1001}, {.id = 1002}};
    pthread_t threads[2];
    atomic_store(&arrived, 0);
    for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, fail_many, &workers[t]);
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(workers[t].failed, PER_THREAD / 2); /* its own, the even ones */
        ck_assert_int_eq(workers[t].again, 0);
        char want[64];
        snprintf(want, sizeof want, "thread %u: 0 at position 0", workers[t].id);
        ck_assert_str_eq(workers[t].first, want);
    }
    ck_assert_int_eq(deft_check_live(), live_before);
    deft_check_set_owner_fn(NULL);
}
END_TEST

static Suite *device_check_suite(void) {
    Suite *suite = suite_create("device checks");
    TCase *tc = tcase_create("device checks");
    tcase_add_checked_fixture(tc, use_fake, use_real);
    tcase_add_test(tc, test_failed_check_fails_the_wait_for_what_the_op_wrote);
    tcase_add_test(tc, test_check_not_answered_yet_is_not_reported);
    tcase_add_test(tc, test_later_reads_carry_the_failure_until_overwritten);
    tcase_add_test(tc, test_in_place_update_carries_the_old_values_failure);
    tcase_add_test(tc, test_unchanged_buffers_keep_their_own_checks);
    tcase_add_test(tc, test_passed_check_is_not_carried_on);
    tcase_add_test(tc, test_naive_mode_checks_synchronously);
    tcase_add_test(tc, test_copy_to_the_host_reports_at_once);
    tcase_add_test(tc, test_too_many_checks_are_resolved_at_once);
    tcase_add_test(tc, test_nested_run_hands_its_checks_to_the_outer);
    tcase_add_test(tc, test_freed_buffer_leaves_no_failure_to_the_next_user_of_its_block);
    tcase_add_test(tc, test_wait_all_takes_each_threads_own_failures_once);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(device_check_suite());
}
