/*
 * Dropout: training and predict mode (the caller's training flag at the
 * time of the call, wherever the kernel runs), its hidden mask output
 * through invoke, autograd, symbols, executors and deferred compute, the
 * seed, and shared axes.
 */
#include "symbol_helpers.h"

#include "core/math/philox.h"

#include "deft/autograd.h"
#include "deft/deferred.h"
#include "deft/executor.h"

static void set_training(bool on) {
    ck_assert_ok(DeftAutogradSetIsTraining(on, NULL));
}

static DeftNDArrayHandle ramp(int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = 1 + (double)(i % 97);
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(rows, cols), v);
    free(v);
    return x;
}

/* Each y[i] is 0 or x[i] / (1 - p); returns how many were kept. */
static int64_t check_dropped(DeftNDArrayHandle x, DeftNDArrayHandle y, double p) {
    int64_t n, m, kept = 0;
    double *xv = read_all(x, &n), *yv = read_all(y, &m);
    ck_assert_int_eq(n, m);
    for (int64_t i = 0; i < n; i++) {
        if (yv[i] == 0) continue;
        kept++;
        if (!close_enough(yv[i], xv[i] / (1 - p), 1e-6))
            ck_abort_msg("y[%lld] is %g, expected 0 or %g", (long long)i, yv[i], xv[i] / (1 - p));
    }
    free(xv), free(yv);
    return kept;
}

START_TEST(test_predict_mode_is_the_identity) {
    set_training(false);
    DeftNDArrayHandle x = ramp(3, 50);
    DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "0.5"));
    int64_t n;
    double *want = read_all(x, &n);
    assert_values(y, n, want, 0);
    free(want);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

START_TEST(test_training_mode_drops_a_fraction_p) {
    set_training(true);
    DeftNDArrayHandle x = ramp(100, 100);
    DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "0.3"));
    int64_t kept = check_dropped(x, y, 0.3);
    /* 10,000 Bernoulli(0.7) draws: 7000 +- 46 (one deviation); allow 6 */
    ck_assert_msg(kept > 6700 && kept < 7300, "kept %lld of 10000", (long long)kept);
    free_all(2, (DeftNDArrayHandle[]){x, y});
    set_training(false);
}
END_TEST

START_TEST(test_mode_always_drops_in_predict_mode) {
    set_training(false);
    DeftNDArrayHandle x = ramp(10, 100);
    DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "0.5", "mode", "always"));
    int64_t kept = check_dropped(x, y, 0.5);
    ck_assert_msg(kept > 350 && kept < 650, "kept %lld of 1000", (long long)kept);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

START_TEST(test_seed_repeats_the_mask) {
    set_training(true);
    DeftNDArrayHandle x = ramp(8, 33);
    ck_assert_ok(DeftRandomSeed(7));
    DeftNDArrayHandle a = call1("Dropout", 1, &x, NO_PARAMS);
    DeftNDArrayHandle b = call1("Dropout", 1, &x, NO_PARAMS);
    ck_assert_ok(DeftRandomSeed(7));
    DeftNDArrayHandle c = call1("Dropout", 1, &x, NO_PARAMS);
    int64_t n;
    double *av = read_all(a, &n), *bv = read_all(b, &n);
    assert_values(c, n, av, 0);
    int same = 0;
    for (int64_t i = 0; i < n; i++) same += av[i] == bv[i];
    ck_assert_msg(same < n, "two calls drew the same mask");
    free(av), free(bv);
    free_all(4, (DeftNDArrayHandle[]){x, a, b, c});
    set_training(false);
}
END_TEST

/* Mask element i is deft_dropout_mask of word i % 4 of block i / 4 of the
 * seeded stream, bit for bit, in both dtypes (odd sizes: a partial last
 * block; the large one is split across threads). */
START_TEST(test_mask_is_the_philox_stream) {
    set_training(true);
    const int64_t rows[] = {1, 37, 3001}, cols = 37;
    for (int d = 0; d < 2; d++) {
        int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
        for (int k = 0; k < 3; k++) {
            int64_t n = rows[k] * cols;
            double *ones = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++) ones[i] = 1;
            DeftNDArrayHandle x = make(dtype, 2, SHAPE(rows[k], cols), ones);
            ck_assert_ok(DeftRandomSeed(5));
            DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "0.3"));
            double *got = read_all(y, &n);
            for (int64_t i = 0; i < n; i++) {
                double want = deft_dropout_mask(deft_philox(5, (uint64_t)i / 4).v[i % 4], 1 - 0.3);
                if (d == 0) want = (float)want;
                if (got[i] != want)
                    ck_abort_msg("element %lld: %.17g, expected %.17g", (long long)i, got[i], want);
            }
            free(got), free(ones);
            free_all(2, (DeftNDArrayHandle[]){x, y});
        }
    }
    set_training(false);
}
END_TEST

START_TEST(test_axes_share_one_mask_value) {
    set_training(true);
    DeftNDArrayHandle x = ramp(64, 20);
    DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "0.5", "axes", "(1,)"));
    int64_t n;
    double *yv = read_all(y, &n);
    int rows_kept = 0;
    for (int r = 0; r < 64; r++) {
        bool kept = yv[r * 20] != 0;
        rows_kept += kept;
        for (int c = 1; c < 20; c++)
            ck_assert_msg((yv[r * 20 + c] != 0) == kept, "row %d is partly dropped", r);
    }
    ck_assert_msg(rows_kept > 10 && rows_kept < 54, "kept %d of 64 rows", rows_kept);
    check_dropped(x, y, 0.5);
    free(yv);
    free_all(2, (DeftNDArrayHandle[]){x, y});
    set_training(false);
}
END_TEST

/* The mask is hidden: a call returns one output, and room for one is enough. */
START_TEST(test_the_mask_is_not_returned) {
    DeftNDArrayHandle x = ramp(2, 3), out[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("Dropout", 1, &x, &nout, out, NO_PARAMS));
    ck_assert_int_eq(nout, 1);
    ck_assert_ptr_null(out[1]);
    free_all(2, (DeftNDArrayHandle[]){x, out[0]});
}
END_TEST

START_TEST(test_bad_parameters) {
    DeftNDArrayHandle x = ramp(2, 3);
    ck_assert_call_fails("Dropout", 1, &x, P("p", "1.5"), DEFT_ERROR_VALUE,
                         "operator 'Dropout': p is 1.5, expected a probability in [0, 1]");
    ck_assert_call_fails("Dropout", 1, &x, P("mode", "sometimes"), DEFT_ERROR_PARSE,
                         "parameter 'mode' is 'sometimes', expected one of: training, always");
    ck_assert_call_fails("Dropout", 1, &x, P("axes", "(2,)"), DEFT_ERROR_INDEX, "axes");
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(3), VALUES(1, 2, 3));
    ck_assert_call_fails("Dropout", 1, &i, NO_PARAMS, DEFT_ERROR_TYPE, "int32");
    free_all(2, (DeftNDArrayHandle[]){x, i});
}
END_TEST

START_TEST(test_p_one_drops_everything_and_zero_size_works) {
    set_training(true);
    DeftNDArrayHandle x = ramp(2, 3);
    DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "1"));
    assert_values(y, 6, VALUES(0, 0, 0, 0, 0, 0), 0);
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle ey = call1("Dropout", 1, &e, NO_PARAMS);
    assert_shape(ey, 2, SHAPE(0, 3));
    free_all(4, (DeftNDArrayHandle[]){x, y, e, ey});
    set_training(false);
}
END_TEST

/* backward reads the hidden mask: the gradient is 1 / (1 - p) where kept, 0 where dropped. */
START_TEST(test_gradient_is_the_mask) {
    set_training(true);
    DeftNDArrayHandle x = ramp(20, 30);
    DeftNDArrayHandle g = make(DEFT_FLOAT32, 2, SHAPE(20, 30), NULL);
    int req = DEFT_GRAD_WRITE;
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, &req, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "0.25"));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    set_training(false); /* backward runs in training mode whatever the flag */
    ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
    int64_t n;
    double *xv = read_all(x, &n), *yv = read_all(y, &n), *gv = read_all(g, &n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(close_enough(gv[i], yv[i] / xv[i], 1e-6), "grad[%lld] is %g, y/x %g",
                      (long long)i, gv[i], yv[i] / xv[i]);
    free(xv), free(yv), free(gv);
    free_all(3, (DeftNDArrayHandle[]){x, g, y});
}
END_TEST

/* A symbol lists the visible output only; an executor run takes the caller's
 * mode when it is asked for, not when it was made. */
START_TEST(test_symbol_and_executor) {
    DeftSymbolHandle data = var("data"), drop = apply("Dropout", "drop", 1, &data, P("p", "0.5"));
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListOutputs(drop, &n, &names));
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(names[0], "drop_output");
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(drop, 1, &exec));
    DeftNDArrayHandle x = ramp(10, 100), y[1] = {NULL};
    int nout = 1;
    set_training(false);
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, y));
    int64_t count;
    double *want = read_all(x, &count);
    assert_values(y[0], count, want, 0);
    free(want);
    ck_assert_ok(DeftNDArrayFree(y[0]));
    y[0] = NULL;
    set_training(true);
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, y));
    set_training(false);
    int64_t kept = check_dropped(x, y[0], 0.5);
    ck_assert_msg(kept > 350 && kept < 650, "kept %lld of 1000", (long long)kept);
    ck_assert_ok(DeftCachedOpFree(exec));
    free_all(2, (DeftNDArrayHandle[]){x, y[0]});
    ck_assert_ok(DeftSymbolFree(drop));
    ck_assert_ok(DeftSymbolFree(data));
}
END_TEST

/* Deferred compute records the node with its mask; a trigger computes in the
 * mode of the thread that triggers. */
START_TEST(test_deferred_compute) {
    DeftNDArrayHandle x = ramp(10, 100);
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle y = call1("Dropout", 1, &x, P("p", "0.5"));
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    set_training(true);
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(&y, 1));
    set_training(false);
    int64_t kept = check_dropped(x, y, 0.5);
    ck_assert_msg(kept > 350 && kept < 650, "kept %lld of 1000", (long long)kept);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

static Suite *dropout_suite(void) {
    Suite *suite = suite_create("Dropout");
    TCase *tc = tcase_create("dropout");
    tcase_add_test(tc, test_predict_mode_is_the_identity);
    tcase_add_test(tc, test_training_mode_drops_a_fraction_p);
    tcase_add_test(tc, test_mode_always_drops_in_predict_mode);
    tcase_add_test(tc, test_seed_repeats_the_mask);
    tcase_add_test(tc, test_mask_is_the_philox_stream);
    tcase_add_test(tc, test_axes_share_one_mask_value);
    tcase_add_test(tc, test_the_mask_is_not_returned);
    tcase_add_test(tc, test_bad_parameters);
    tcase_add_test(tc, test_p_one_drops_everything_and_zero_size_works);
    tcase_add_test(tc, test_gradient_is_the_mask);
    tcase_add_test(tc, test_symbol_and_executor);
    tcase_add_test(tc, test_deferred_compute);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(dropout_suite());
}
