/*
 * Index and label checks on a GPU report asynchronously (issue 29): a bad
 * index no longer makes the call wait for the device; the call returns, its
 * kernels stay in bounds, and the wait for its outputs (or for anything
 * computed from them, or DeftWaitAll) reports the operator's message.
 * The bookkeeping runs everywhere in test_device_check; this suite needs a
 * GPU, and without one says so and checks only the CPU's contrast.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check_helpers.h"
#include "core/base/device_check.h"
#include "core/base/fence.h"
#include "core/math/gather_math.h"
#include "core/math/sequence_math.h"
#include "core/math/sort_math.h"
#include "op_helpers.h"
#ifdef DEFT_HAVE_CUDA
#include "core/gpu/gpu_check.h"
#endif

/* ---- everywhere ---- */

/* On the CPU the check runs before the kernel: the call's output fails at once. */
START_TEST(test_cpu_checks_before_the_kernel) {
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 2, SHAPE(3, 2), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle idx = make(DEFT_INT64, 1, SHAPE(2), VALUES(0, 3));
    DeftNDArrayHandle taken =
        call1("take", 2, (DeftNDArrayHandle[]){data, idx}, P("mode", "raise"));
    ck_assert_fails(DeftNDArrayWaitToRead(taken), DEFT_ERROR_INDEX,
                    "operator 'take': index 3 (position 1) is out of range for axis 0 of size 3");
    ck_assert_int_eq(deft_check_live(), 0); /* nothing pending on the CPU */
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, "index 3 (position 1)");
    DeftNDArrayHandle all[] = {data, idx, taken};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
}
END_TEST

/* The GPU kernels run before their check's verdict, on the arithmetic they
 * share with the CPU: whatever the indices, it stays in bounds. */
START_TEST(test_index_arithmetic_stays_in_bounds_for_bad_indices) {
    /* gather_nd over a (3, 4) array: rows of indices address axes 0 and 1 */
    const float nd_index[2 * 4] = {9, -9, 1, NAN, /* axis 0 */ 2, 7, -20, 1.5f};
    deft_nd_plan_t nd = {.index = nd_index,
                         .index_dtype = DEFT_DT_FLOAT32,
                         .m = 2,
                         .n = 4,
                         .slice = 1,
                         .dims = {3, 4},
                         .strides = {4, 1},
                         .big = 12};
    const int64_t nd_want[4] = {2 * 4 + 2, 0 * 4 + 3, 1 * 4 + 0, 0 * 4 + 1}; /* clipped */
    for (int64_t i = 0; i < 4; i++) ck_assert_int_eq(deft_nd_offset(&nd, i), nd_want[i]);
    nd.dims[1] = 0, nd.big = 0;
    ck_assert_int_eq(deft_nd_offset(&nd, 0), -1); /* an empty axis: no slice at all */

    /* SequenceLast and SequenceReverse over (steps 3, batch 4, rest 1), axis 0 */
    const double lengths[4] = {0, -2, 99, NAN};
    deft_seq_plan_t seq = {.lengths = lengths,
                           .length_dtype = DEFT_DT_FLOAT64,
                           .d0 = 3,
                           .d1 = 4,
                           .rest = 1,
                           .axis = 0};
    const int64_t length_want[4] = {0, 0, 3, 0};
    for (int64_t b = 0; b < 4; b++) {
        ck_assert_int_eq(deft_seq_length(&seq, b), length_want[b]);
        int64_t last = deft_seq_last_source(&seq, b);
        ck_assert(last >= 0 && last < 12);
    }
    for (int64_t at = 0; at < 12; at++) {
        int64_t from = deft_seq_reverse_source(&seq, at);
        ck_assert(from >= 0 && from < 12);
    }

    /* _backward_topk: a row of n = 3, k = 2, whose indices 4 and -1 land nowhere */
    double dx[1 + 3 + 2] = {-7, 0, 0, 0, -7, -7}; /* guards on both sides of the row */
    const double g[2] = {1, 2};
    const int64_t topk_index[2] = {4, -1};
    deft_sort_call_t sort = {.outer = 1, .n = 3, .inner = 1, .k = 2, .elem = sizeof(double)};
    deft_topk_unsort_row(&sort, 0, g, topk_index, DEFT_DT_INT64, dx + 1);
    const double dx_want[6] = {-7, 0, 0, 0, -7, -7};
    for (int i = 0; i < 6; i++) ck_assert_double_eq(dx[i], dx_want[i]);

    /* take in raise mode gathers a clipped index until its check reports */
    ck_assert_int_eq(deft_take_resolve(7, 3, DEFT_TAKE_RAISE), 2);
    ck_assert_int_eq(deft_take_resolve(-1, 3, DEFT_TAKE_RAISE), 0);
}
END_TEST

/* ---- on a GPU ---- */

static DeftNDArrayHandle to_gpu(DeftNDArrayHandle cpu) {
    int64_t shape[DEFT_MAX_NDIM];
    int ndim, dtype;
    ck_assert_ok(DeftNDArrayGetShape(cpu, shape, DEFT_MAX_NDIM, &ndim));
    ck_assert_ok(DeftNDArrayGetDType(cpu, &dtype));
    DeftNDArrayHandle gpu;
    ck_assert_ok(DeftNDArrayCreate(shape, ndim, dtype, DEFT_GPU, 0, &gpu));
    ck_assert_ok(DeftNDArrayCopyTo(cpu, gpu));
    return gpu;
}

static DeftNDArrayHandle gpu_of(int dtype, int ndim, const int64_t *shape, const double *values) {
    DeftNDArrayHandle cpu = make(dtype, ndim, shape, values), gpu = to_gpu(cpu);
    ck_assert_ok(DeftNDArrayFree(cpu));
    return gpu;
}

static long slots_out(void) {
#ifdef DEFT_HAVE_CUDA
    return deft_gpu_check_slots_out();
#else
    return 0;
#endif
}

typedef struct bad_call {
    const char *op;
    const char *const *params;
    int index_dtype;
    int64_t index_ndim, index_shape[2];
    double index[3];
    int kind;
    const char *message;
} bad_call_t;

/* data (3, 4) of 0..11, and an index or label input with one bad element. */
static const bad_call_t bad_calls[] = {
    {"take",
     P("mode", "raise"),
     DEFT_INT64,
     1,
     {2},
     {0, 3},
     DEFT_ERROR_INDEX,
     "operator 'take': index 3 (position 1) is out of range for axis 0 of size 3"},
    {"gather_nd",
     NO_PARAMS,
     DEFT_FLOAT32,
     2,
     {2, 1},
     {1, 9},
     DEFT_ERROR_INDEX,
     "operator 'gather_nd': input 1 (indices) has 9 at position 1, expected a whole number in "
     "[-4, 3]"},
    {"pick",
     NO_PARAMS,
     DEFT_FLOAT32,
     1,
     {3},
     {0, 1.5, 2},
     DEFT_ERROR_VALUE,
     "operator 'pick': input 1 (index) has 1.5 at position 1, expected a whole number"},
    {"softmax_cross_entropy",
     NO_PARAMS,
     DEFT_INT32,
     1,
     {3},
     {1, 7, 2},
     DEFT_ERROR_VALUE,
     "operator 'softmax_cross_entropy': label[1] is 7, expected a class index in [0, 4)"},
};
#define NUM_BAD (int)(sizeof bad_calls / sizeof bad_calls[0])

static DeftNDArrayHandle data_3x4(void) {
    return gpu_of(DEFT_FLOAT32, 2, SHAPE(3, 4), VALUES(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
}

/* The call's output, its index input handed back in *index. */
static DeftNDArrayHandle call_bad(const bad_call_t *c, DeftNDArrayHandle data,
                                  DeftNDArrayHandle *index) {
    *index = gpu_of(c->index_dtype, (int)c->index_ndim, c->index_shape, c->index);
    return call1(c->op, 2, (DeftNDArrayHandle[]){data, *index}, c->params);
}

/* A copy of h to the CPU, by the engine (a copy that waits for the device there). */
static DeftNDArrayHandle copy_to_cpu(DeftNDArrayHandle h) {
    int64_t shape[DEFT_MAX_NDIM];
    int ndim, dtype;
    ck_assert_ok(DeftNDArrayGetShape(h, shape, DEFT_MAX_NDIM, &ndim));
    ck_assert_ok(DeftNDArrayGetDType(h, &dtype));
    DeftNDArrayHandle cpu;
    ck_assert_ok(DeftNDArrayCreate(shape, ndim, dtype, DEFT_CPU, 0, &cpu));
    DeftNDArrayCopyTo(h, cpu); /* its failure, if any, is kept on `cpu` */
    return cpu;
}

START_TEST(test_bad_index_fails_the_wait_not_the_call) {
    DeftNDArrayHandle data = data_3x4(), kept[3 * NUM_BAD];
    for (int i = 0; i < NUM_BAD; i++) {
        const bad_call_t *c = &bad_calls[i];
        DeftNDArrayHandle index, out = call_bad(c, data, &index); /* succeeds */
        ck_assert_fails(DeftNDArrayWaitToRead(out), c->kind, c->message);
        ck_assert_fails(DeftNDArrayWaitToRead(out), c->kind, c->message); /* sticky */
        /* what is computed from it fails with its message, on the GPU or copied off it */
        DeftNDArrayHandle twice = call1("_mul_scalar", 1, &out, P("scalar", "2"));
        ck_assert_fails(DeftNDArrayWaitToRead(twice), c->kind, c->message);
        double host[12];
        size_t nbytes;
        ck_assert_ok(DeftNDArrayGetNBytes(twice, &nbytes));
        ck_assert_fails(DeftNDArrayCopyToHost(twice, host, nbytes), c->kind, c->message);
        DeftNDArrayHandle cpu = copy_to_cpu(twice);
        ck_assert_fails(DeftNDArrayWaitToRead(cpu), c->kind, c->message);
        kept[3 * i] = out, kept[3 * i + 1] = twice, kept[3 * i + 2] = cpu;
        ck_assert_ok(DeftNDArrayFree(index));
    }
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, "index 3 (position 1)"); /* the first */
    ck_assert_ok(DeftWaitAll());                                              /* once */
    for (int i = 0; i < 3 * NUM_BAD; i++) ck_assert_ok(DeftNDArrayFree(kept[i]));
    ck_assert_int_eq(deft_check_live(), 0); /* the slots went back with their last carrier */
    ck_assert_int_eq(slots_out(), 0);
    ck_assert_ok(DeftNDArrayFree(data));
}
END_TEST

/* DeftWaitAll reports a failed check even when nobody waited for its output. */
START_TEST(test_wait_all_reports_unread_failures) {
    DeftNDArrayHandle data = data_3x4(), index[NUM_BAD], out[NUM_BAD];
    for (int i = 0; i < NUM_BAD; i++) out[i] = call_bad(&bad_calls[i], data, &index[i]);
    /* The calls may run on different workers: any of them may come first. */
    ck_assert_int_eq(DeftWaitAll(), -1);
    const char *error = DeftGetLastError(), *prefix = "DeftWaitAll: ";
    ck_assert_msg(strncmp(error, prefix, strlen(prefix)) == 0, "'%s' does not name DeftWaitAll",
                  error);
    error += strlen(prefix);
    int first = -1;
    for (int i = 0; i < NUM_BAD && first < 0; i++)
        if (strncmp(error, bad_calls[i].message, strlen(bad_calls[i].message)) == 0) first = i;
    ck_assert_msg(first >= 0, "DeftWaitAll: '%s' is none of the calls' messages", error);
    ck_assert_int_eq(DeftGetLastErrorKind(), bad_calls[first].kind);
    ck_assert_ptr_nonnull(strstr(error, " (and 3 more failures since the last wait for all work)"));
    ck_assert_ok(DeftWaitAll());
    for (int i = 0; i < NUM_BAD; i++) {
        ck_assert_ok(DeftNDArrayFree(out[i]));
        ck_assert_ok(DeftNDArrayFree(index[i]));
    }
    ck_assert_ok(DeftNDArrayFree(data));
}
END_TEST

static double first_of(DeftNDArrayHandle h) {
    int64_t n;
    double *v = read_all(h, &n), first = v[0];
    free(v);
    return first;
}

/* The check is deferred, not waited for: it is still alive on the output
 * after the call (a synchronous check gives its slot back before the call
 * returns). The synchronous mode (the naive engine's) gives the same
 * verdicts. A valid call after a failed one works: nothing sticks. */
START_TEST(test_call_defers_its_check_and_nothing_sticks) {
    DeftNDArrayHandle data = data_3x4();
    ck_assert_ok(DeftWaitAll());
    long live = deft_check_live(), slots = slots_out();
    DeftNDArrayHandle index, bad = call_bad(&bad_calls[0], data, &index);
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, bad_calls[0].message);
    ck_assert_int_eq(deft_check_live(), live + 1); /* carried by `bad` */
    ck_assert_int_eq(slots_out(), slots + 1);
    DeftNDArrayHandle good_index = gpu_of(DEFT_INT64, 1, SHAPE(2), VALUES(2, 1));
    DeftNDArrayHandle good =
        call1("take", 2, (DeftNDArrayHandle[]){data, good_index}, P("mode", "raise"));
    ck_assert_double_eq(first_of(good), 8); /* row 2 of 0..11 as (3, 4) */
    ck_assert_ok(DeftNDArrayFree(bad));
    ck_assert_ok(DeftNDArrayFree(good));
    ck_assert_ok(DeftWaitAll());
    ck_assert_int_eq(deft_check_live(), live);
    ck_assert_int_eq(slots_out(), slots);

    deft_fence_set_synchronous_checks(true);
    bad = call1("take", 2, (DeftNDArrayHandle[]){data, index}, P("mode", "raise"));
    ck_assert_fails(DeftNDArrayWaitToRead(bad), DEFT_ERROR_INDEX, bad_calls[0].message);
    ck_assert_int_eq(deft_check_live(), live); /* waited for: nothing pending */
    ck_assert_int_eq(slots_out(), slots);
    deft_fence_set_synchronous_checks(false);
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, bad_calls[0].message);
    DeftNDArrayHandle all[] = {bad, index, good_index, data};
    for (int i = 0; i < 4; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
}
END_TEST

/* ---- two threads, many checked calls each: each sees its own failures ---- */

#define CALLS_PER_THREAD 50

typedef struct checker {
    DeftNDArrayHandle data;
    int64_t bad_position; /* where this thread's indices go wrong */
} checker_t;

static void *check_many(void *arg) {
    const checker_t *c = arg;
    double values[3] = {0, 1, 2};
    values[c->bad_position] = 3 + (double)c->bad_position; /* out of [0, 3) */
    DeftNDArrayHandle index = gpu_of(DEFT_INT64, 1, SHAPE(3), values);
    DeftNDArrayHandle good_index = gpu_of(DEFT_INT64, 1, SHAPE(3), VALUES(2, 1, 0));
    char want[128];
    snprintf(want, sizeof want, "index %lld (position %lld) is out of range",
             (long long)(3 + c->bad_position), (long long)c->bad_position);
    DeftNDArrayHandle bad[CALLS_PER_THREAD];
    for (int i = 0; i < CALLS_PER_THREAD; i++) {
        bad[i] = call1("take", 2, (DeftNDArrayHandle[]){c->data, index}, P("mode", "raise"));
        DeftNDArrayHandle good =
            call1("take", 2, (DeftNDArrayHandle[]){c->data, good_index}, P("mode", "raise"));
        if (i % 2) ck_assert_fails(DeftNDArrayWaitToRead(bad[i]), DEFT_ERROR_INDEX, want);
        ck_assert_double_eq(first_of(good), 8);
        ck_assert_ok(DeftNDArrayFree(good));
    }
    char all[256];
    snprintf(all, sizeof all, "%s for axis 0 of size 3 (and %d more failures", want,
             CALLS_PER_THREAD - 1);
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, all); /* its own 50, not the other's */
    ck_assert_ok(DeftWaitAll());
    for (int i = 0; i < CALLS_PER_THREAD; i++) ck_assert_ok(DeftNDArrayFree(bad[i]));
    ck_assert_ok(DeftNDArrayFree(index));
    ck_assert_ok(DeftNDArrayFree(good_index));
    return NULL;
}

START_TEST(test_two_threads_each_report_their_own_failures) {
    DeftNDArrayHandle data = data_3x4();
    ck_assert_ok(DeftWaitAll());
    checker_t checkers[2] = {{data, 1}, {data, 2}};
    pthread_t threads[2];
    for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, check_many, &checkers[t]);
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    ck_assert_ok(DeftWaitAll()); /* not this thread's */
    ck_assert_int_eq(deft_check_live(), 0);
    ck_assert_int_eq(slots_out(), 0);
    ck_assert_ok(DeftNDArrayFree(data));
}
END_TEST

static Suite *gpu_checks_suite(int gpus) {
    Suite *suite = suite_create("gpu checks");
    TCase *everywhere = tcase_create("everywhere");
    tcase_add_test(everywhere, test_cpu_checks_before_the_kernel);
    tcase_add_test(everywhere, test_index_arithmetic_stays_in_bounds_for_bad_indices);
    suite_add_tcase(suite, everywhere);
    if (gpus > 0) {
        TCase *device = tcase_create("on gpu(0)");
        tcase_set_timeout(device, 120);
        tcase_add_test(device, test_bad_index_fails_the_wait_not_the_call);
        tcase_add_test(device, test_wait_all_reports_unread_failures);
        tcase_add_test(device, test_call_defers_its_check_and_nothing_sticks);
        tcase_add_test(device, test_two_threads_each_report_their_own_failures);
        suite_add_tcase(suite, device);
    }
    return suite;
}

int main(void) {
    int gpus = 0;
    DeftGetGPUCount(&gpus);
    if (gpus == 0)
        printf("test_gpu_checks: GPU cases skipped: no GPU (%s)\n",
#ifdef DEFT_HAVE_CUDA
               "no CUDA device or driver on this machine"
#else
               "deft was built without CUDA"
#endif
        );
    return run_suite(gpu_checks_suite(gpus));
}
