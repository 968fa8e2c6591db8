/*
 * BatchNorm against a plain-C reference: training mode (batch statistics,
 * moving statistics updated in place after one and two calls), predict mode
 * and use_global_stats (moving statistics, nothing updated), fix_gamma,
 * output_mean_var, channel axes first, middle and last, float32 and float64;
 * the moving statistics as auxiliary states of a symbol, shape inference
 * from data alone, bad parameters, and an empty batch.
 */
#include "symbol_helpers.h"

#include "deft/autograd.h"
#include "deft/executor.h"

static void set_training(bool on) {
    ck_assert_ok(DeftAutogradSetIsTraining(on, NULL));
}

/* Data values with no pattern across channels. */
static double *wavy(int64_t n) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = 2 * sin(0.7 * (double)i) + 0.05 * (double)i;
    return v;
}

typedef struct bn_case {
    int ndim;
    int64_t shape[4];
    int axis; /* normalised: 0 <= axis < ndim */
    bool fix_gamma, batch;
    double eps;
} bn_case_t;

/* The reference: y, the mean and inverse std used, per channel. */
static void reference(const bn_case_t *c, const double *x, const double *gamma, const double *beta,
                      const double *moving_mean, const double *moving_var, double *y, double *mean,
                      double *invstd) {
    int64_t outer = 1, inner = 1, channels = c->shape[c->axis];
    for (int d = 0; d < c->axis; d++) outer *= c->shape[d];
    for (int d = c->axis + 1; d < c->ndim; d++) inner *= c->shape[d];
    double count = (double)(outer * inner);
    for (int64_t ch = 0; ch < channels; ch++) {
        double m = 0, v = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) m += x[(o * channels + ch) * inner + i];
        m /= count;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                double d = x[(o * channels + ch) * inner + i] - m;
                v += d * d;
            }
        v /= count;
        if (!c->batch) m = moving_mean[ch], v = moving_var[ch];
        mean[ch] = m, invstd[ch] = 1 / sqrt(v + c->eps);
        double g = c->fix_gamma ? 1 : gamma[ch];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t k = (o * channels + ch) * inner + i;
                y[k] = (x[k] - m) * invstd[ch] * g + beta[ch];
            }
    }
}

/* Run one case with output_mean_var and compare everything, twice (the moving statistics
 * after one and two calls). */
static void check_case(const bn_case_t *c, int dtype, const char *const *params) {
    int64_t n = count_of(c->ndim, c->shape), channels = c->shape[c->axis];
    double *x = wavy(n), *y = malloc(sizeof(double) * (size_t)n);
    double gamma[8], beta[8], mm[8], mv[8], mean[8], invstd[8];
    for (int64_t ch = 0; ch < channels; ch++)
        gamma[ch] = 0.5 + 0.25 * (double)ch, beta[ch] = 0.1 * (double)ch - 0.2,
        mm[ch] = 0.3 * (double)ch, mv[ch] = 1 + 0.5 * (double)ch;
    reference(c, x, gamma, beta, mm, mv, y, mean, invstd);
    DeftNDArrayHandle in[5] = {
        make(dtype, c->ndim, c->shape, x), make(dtype, 1, SHAPE(channels), gamma),
        make(dtype, 1, SHAPE(channels), beta), make(dtype, 1, SHAPE(channels), mm),
        make(dtype, 1, SHAPE(channels), mv)};
    set_training(true);
    double tol = dtype == DEFT_FLOAT32 ? 1e-5 : 1e-12;
    for (int round = 0; round < 2; round++) {
        DeftNDArrayHandle out[3] = {NULL, NULL, NULL};
        int nout = 3;
        ck_assert_msg(call("BatchNorm", 5, in, &nout, out, params) == 0, "%s", DeftGetLastError());
        ck_assert_int_eq(nout, 3);
        assert_values(out[0], n, y, tol);
        assert_values(out[1], channels, mean, tol);
        assert_values(out[2], channels, invstd, tol);
        for (int64_t ch = 0; c->batch && ch < channels; ch++) { /* what they become */
            mm[ch] = mm[ch] * 0.9 + mean[ch] * 0.1;
            mv[ch] = mv[ch] * 0.9 + pow(invstd[ch], -2) * 0.1 - c->eps * 0.1;
        }
        assert_values(in[3], channels, mm, tol);
        assert_values(in[4], channels, mv, tol);
        free_all(3, out);
    }
    set_training(false);
    free(x), free(y);
    free_all(5, in);
}

START_TEST(test_training_normalises_with_the_batch_and_updates_moving_stats) {
    bn_case_t c = {4, {2, 3, 2, 2}, 1, false, true, 1e-3};
    check_case(&c, DEFT_FLOAT32, P("fix_gamma", "false", "output_mean_var", "true"));
    check_case(&c, DEFT_FLOAT64, P("fix_gamma", "false", "output_mean_var", "true"));
}
END_TEST

/* BatchNorm and _backward_BatchNorm on (3, 4, 5, 7) data of `dtype`, all six results. */
static void bn_both_ways(int dtype, const double *x, const double *dy, double **results) {
    double gamma[4] = {0.5, -1.5, 2, 0.25}, beta[4] = {0.1, -0.2, 0.3, 0}, mm[4] = {0.2, -1, 3, 0};
    double mv[4] = {1, 0.5, 2, 4};
    const int64_t *shape = SHAPE(3, 4, 5, 7);
    DeftNDArrayHandle in[5] = {make(dtype, 4, shape, x), make(dtype, 1, SHAPE(4), gamma),
                               make(dtype, 1, SHAPE(4), beta), make(dtype, 1, SHAPE(4), mm),
                               make(dtype, 1, SHAPE(4), mv)};
    const char *const *params = P("fix_gamma", "false", "output_mean_var", "true");
    DeftNDArrayHandle out[3] = {NULL, NULL, NULL}, grads[3] = {NULL, NULL, NULL};
    int nout = 3;
    ck_assert_msg(call("BatchNorm", 5, in, &nout, out, params) == 0, "%s", DeftGetLastError());
    DeftNDArrayHandle back_in[5] = {make(dtype, 4, shape, dy), in[0], in[1], out[1], out[2]};
    ck_assert_msg(call("_backward_BatchNorm", 5, back_in, &nout, grads, params) == 0, "%s",
                  DeftGetLastError());
    int64_t n;
    for (int k = 0; k < 3; k++)
        results[k] = read_all(out[k], &n), results[3 + k] = read_all(grads[k], &n);
    free_all(3, out), free_all(3, grads), free_all(5, in), free_all(1, back_in);
}

/* float32 takes typed loops over runs of a channel (vector bodies and tails of
 * 35 elements); float64 the general loops: both agree, forward and backward,
 * with batch statistics (training) and moving ones (predict mode). */
START_TEST(test_float32_runs_match_float64) {
    int64_t n = 3 * 4 * 5 * 7, counts[6] = {n, 4, 4, n, 4, 4};
    double *x = wavy(n), *dy = wavy(n);
    for (int64_t i = 0; i < n; i++) dy[i] = dy[n - 1 - i] * 0.5 + 1;
    for (int training = 0; training < 2; training++) {
        double *f32[6], *f64[6];
        set_training(training);
        bn_both_ways(DEFT_FLOAT32, x, dy, f32);
        bn_both_ways(DEFT_FLOAT64, x, dy, f64);
        for (int k = 0; k < 6; k++) {
            for (int64_t i = 0; i < counts[k]; i++)
                ck_assert_msg(close_enough(f32[k][i], f64[k][i], 1e-5),
                              "training %d, result %d, element %lld: %.9g, expected %.9g", training,
                              k, (long long)i, f32[k][i], f64[k][i]);
            free(f32[k]), free(f64[k]);
        }
    }
    set_training(false);
    free(x), free(dy);
}
END_TEST

START_TEST(test_fix_gamma_treats_gamma_as_one) {
    bn_case_t c = {3, {3, 2, 4}, 1, true, true, 1e-3};
    check_case(&c, DEFT_FLOAT64, P("output_mean_var", "true"));
}
END_TEST

START_TEST(test_channel_axis_last_first_and_middle) {
    bn_case_t last = {4, {2, 2, 2, 3}, 3, false, true, 1e-5};
    check_case(&last, DEFT_FLOAT32,
               P("axis", "-1", "fix_gamma", "false", "eps", "1e-5", "output_mean_var", "true"));
    bn_case_t first = {2, {3, 5}, 0, false, true, 1e-3};
    check_case(&first, DEFT_FLOAT64, P("axis", "0", "fix_gamma", "0", "output_mean_var", "1"));
    bn_case_t middle = {3, {2, 4, 3}, 1, false, true, 0.1};
    check_case(&middle, DEFT_FLOAT64,
               P("axis", "-2", "fix_gamma", "false", "eps", "0.1", "output_mean_var", "true"));
}
END_TEST

/* use_global_stats in training mode: the moving statistics normalise, and stay. */
START_TEST(test_use_global_stats_keeps_moving_stats) {
    bn_case_t c = {3, {2, 3, 2}, 1, false, false, 1e-3};
    check_case(&c, DEFT_FLOAT64,
               P("fix_gamma", "false", "use_global_stats", "true", "output_mean_var", "true"));
}
END_TEST

/* Predict mode: the moving statistics normalise, and stay; one output by default. */
START_TEST(test_predict_mode_uses_moving_stats) {
    bn_case_t c = {4, {2, 3, 2, 1}, 1, false, false, 1e-3};
    int64_t n = 12;
    double *x = wavy(n), y[12], mean[3], invstd[3];
    double gamma[3] = {1.5, -1, 2}, beta[3] = {0, 1, -1}, mm[3] = {0.5, -0.5, 1},
           mv[3] = {2, 0.5, 1};
    reference(&c, x, gamma, beta, mm, mv, y, mean, invstd);
    DeftNDArrayHandle in[5] = {
        make(DEFT_FLOAT32, 4, c.shape, x), make(DEFT_FLOAT32, 1, SHAPE(3), gamma),
        make(DEFT_FLOAT32, 1, SHAPE(3), beta), make(DEFT_FLOAT32, 1, SHAPE(3), mm),
        make(DEFT_FLOAT32, 1, SHAPE(3), mv)};
    set_training(false);
    DeftNDArrayHandle out[3] = {NULL, NULL, NULL};
    int nout = 3;
    ck_assert_ok(call("BatchNorm", 5, in, &nout, out, P("fix_gamma", "false")));
    ck_assert_int_eq(nout, 1);
    ck_assert_ptr_null(out[1]);
    assert_values(out[0], n, y, 1e-5);
    assert_values(in[3], 3, mm, 0);
    assert_values(in[4], 3, mv, 0);
    free(x);
    free_all(1, out);
    free_all(5, in);
}
END_TEST

/* An empty batch: an empty result, and the moving statistics untouched (no 0 / 0). */
START_TEST(test_empty_batch_leaves_moving_stats) {
    DeftNDArrayHandle in[5] = {make(DEFT_FLOAT32, 3, SHAPE(0, 2, 3), NULL),
                               make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 1)),
                               make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0, 0)),
                               make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0.5, 0.25)),
                               make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(2, 3))};
    set_training(true);
    DeftNDArrayHandle y = call1("BatchNorm", 5, in, NO_PARAMS);
    set_training(false);
    assert_shape(y, 3, SHAPE(0, 2, 3));
    assert_values(in[3], 2, VALUES(0.5, 0.25), 0);
    assert_values(in[4], 2, VALUES(2, 3), 0);
    free_all(1, &y);
    free_all(5, in);
}
END_TEST

/* In a graph, BatchNorm writes over its data when nothing else reads it: exp(x) ->
 * BatchNorm -> negative, as imperative calls give, in predict and training mode. */
START_TEST(test_batch_norm_in_place_in_a_graph) {
    DeftSymbolHandle data = var("data");
    DeftSymbolHandle a = apply("exp", "a", 1, &data, NO_PARAMS);
    DeftSymbolHandle bn = apply("BatchNorm", "bn", 1, &a, P("fix_gamma", "false"));
    DeftSymbolHandle y = apply("negative", "y", 1, &bn, NO_PARAMS);
    int64_t n = 2 * 3 * 4 * 5;
    double *x = wavy(n), gamma[3] = {0.5, 2, -1}, beta[3] = {0, 1, -0.5}, mm[3] = {1, 2, 3};
    double mv[3] = {1, 4, 0.25};
    DeftNDArrayHandle in[5] = {
        make(DEFT_FLOAT32, 4, SHAPE(2, 3, 4, 5), x), make(DEFT_FLOAT32, 1, SHAPE(3), gamma),
        make(DEFT_FLOAT32, 1, SHAPE(3), beta), make(DEFT_FLOAT32, 1, SHAPE(3), mm),
        make(DEFT_FLOAT32, 1, SHAPE(3), mv)};
    for (int training = 0; training < 2; training++) {
        set_training(training);
        DeftCachedOpHandle op;
        ck_assert_ok(DeftCachedOpCreate(y, 0, &op));
        DeftNDArrayHandle got[1] = {NULL};
        int nout = 1;
        ck_assert_msg(DeftCachedOpInvoke(op, 5, in, &nout, got) == 0, "%s", DeftGetLastError());
        int64_t naive, inplace; /* the plan wrote BatchNorm's output over exp's */
        ck_assert_ok(DeftCachedOpGetPlanStat(op, DEFT_PLAN_NAIVE_BYTES, &naive));
        ck_assert_ok(DeftCachedOpGetPlanStat(op, DEFT_PLAN_INPLACE_ONLY_BYTES, &inplace));
        ck_assert_int_ge(naive - inplace, n * (int64_t)sizeof(float)); /* rounded to blocks */
        DeftNDArrayHandle e = call1("exp", 1, &in[0], NO_PARAMS);
        DeftNDArrayHandle bn_in[5] = {e, in[1], in[2], in[3], in[4]};
        DeftNDArrayHandle b = call1("BatchNorm", 5, bn_in, P("fix_gamma", "false"));
        DeftNDArrayHandle want = call1("negative", 1, &b, NO_PARAMS);
        int64_t count;
        double *expected = read_all(want, &count);
        assert_values(got[0], n, expected, 0);
        free(expected);
        free_all(4, (DeftNDArrayHandle[]){got[0], e, b, want});
        ck_assert_ok(DeftCachedOpFree(op));
    }
    set_training(false);
    free_all(5, in);
    free(x);
    DeftSymbolHandle made[4] = {data, a, bn, y};
    for (int i = 0; i < 4; i++) ck_assert_ok(DeftSymbolFree(made[i]));
}
END_TEST

START_TEST(test_moving_stats_are_auxiliary_states) {
    DeftSymbolHandle data = var("data");
    DeftSymbolHandle bn = apply("BatchNorm", "bn", 1, &data, NO_PARAMS);
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(bn, &n, &names));
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(names[0], "data");
    ck_assert_str_eq(names[1], "bn_gamma");
    ck_assert_str_eq(names[2], "bn_beta");
    ck_assert_ok(DeftSymbolListAuxiliaryStates(bn, &n, &names));
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(names[0], "bn_moving_mean");
    ck_assert_str_eq(names[1], "bn_moving_var");
    ck_assert_ok(DeftSymbolListOutputs(bn, &n, &names));
    ck_assert_int_eq(n, 1);
    DeftSymbolHandle three = apply("BatchNorm", "bn3", 1, &data, P("output_mean_var", "true"));
    ck_assert_ok(DeftSymbolListOutputs(three, &n, &names));
    ck_assert_int_eq(n, 3);
    ck_assert_ok(DeftSymbolFree(three));

    /* shapes of gamma, beta and the moving statistics from data alone (NHWC here) */
    DeftSymbolHandle nhwc = apply("BatchNorm", "nhwc", 1, &data, P("axis", "-1"));
    int complete;
    ck_assert_ok(DeftSymbolInferShape(nhwc, 1, (const char *const[]){"data"}, (const int[]){4},
                                      SHAPE(2, 5, 5, 7), (const int[]){DEFT_FLOAT64}, &complete));
    ck_assert_int_eq(complete, 1);
    int64_t dims[DEFT_MAX_NDIM];
    int ndim, dtype;
    static const int entries[4][2] = {{DEFT_ARGUMENTS, 1}, /* gamma */
                                      {DEFT_ARGUMENTS, 2}, /* beta */
                                      {DEFT_AUXILIARY_STATES, 0},
                                      {DEFT_AUXILIARY_STATES, 1}};
    for (int e = 0; e < 4; e++) {
        ck_assert_ok(DeftSymbolGetInferredShape(nhwc, entries[e][0], entries[e][1], dims,
                                                DEFT_MAX_NDIM, &ndim, &dtype));
        ck_assert_int_eq(ndim, 1);
        ck_assert_int_eq(dims[0], 7);
        ck_assert_int_eq(dtype, DEFT_FLOAT64);
    }
    ck_assert_ok(DeftSymbolFree(nhwc));
    ck_assert_ok(DeftSymbolFree(bn));
    ck_assert_ok(DeftSymbolFree(data));
}
END_TEST

START_TEST(test_bad_inputs_and_parameters) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 3, SHAPE(2, 3, 4), NULL);
    DeftNDArrayHandle c3 = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 1, 1));
    DeftNDArrayHandle c4 = make(DEFT_FLOAT32, 1, SHAPE(4), VALUES(1, 1, 1, 1));
    DeftNDArrayHandle c3d = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, 1, 1));
    DeftNDArrayHandle xi = make(DEFT_INT32, 3, SHAPE(2, 3, 4), NULL);
    DeftNDArrayHandle good[5] = {x, c3, c3, c3, c3}, bad_gamma[5] = {x, c4, c3, c3, c3},
                      bad_var[5] = {x, c3, c3, c3, c4}, bad_dtype[5] = {x, c3, c3d, c3, c3},
                      int_data[5] = {xi, c3, c3, c3, c3}, bad_mean[5] = {x, x, c3, c4, c3};
    ck_assert_call_fails("BatchNorm", 5, good, P("axis", "3"), DEFT_ERROR_INDEX,
                         "operator 'BatchNorm': axis is 3, expected an axis in [-3, 3)");
    ck_assert_call_fails("BatchNorm", 5, good, P("eps", "-1"), DEFT_ERROR_VALUE,
                         "operator 'BatchNorm': eps is -1, expected >= 0");
    ck_assert_call_fails("BatchNorm", 5, good, P("momentum", "fast"), DEFT_ERROR_PARSE, "momentum");
    ck_assert_call_fails("BatchNorm", 5, bad_gamma, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'BatchNorm': input 1 (gamma) has shape (4,), expected (3,)");
    ck_assert_call_fails(
        "BatchNorm", 5, bad_var, NO_PARAMS, DEFT_ERROR_VALUE,
        "operator 'BatchNorm': input 4 (moving_var) has shape (4,), expected (3,)");
    ck_assert_call_fails("BatchNorm", 5, bad_dtype, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 2 has dtype float64, expected float32");
    ck_assert_call_fails("BatchNorm", 5, int_data, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype int32, expected float32 or float64");
    ck_assert_call_fails("BatchNorm", 3, good, NO_PARAMS, DEFT_ERROR_VALUE, "BatchNorm");
    /* the backward operator checks its statistics against data */
    ck_assert_call_fails("_backward_BatchNorm", 5, bad_mean, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator '_backward_BatchNorm': input 3 (mean) has shape (4,), "
                         "expected (3,)");
    free_all(5, (DeftNDArrayHandle[]){x, c3, c4, c3d, xi});
}
END_TEST

/* Autograd in training mode: the gradient of sum(y) with respect to data is zero (the
 * batch mean absorbs a shift), and beta's is the element count per channel. */
START_TEST(test_autograd_training_gradient) {
    DeftNDArrayHandle in[5] = {make(DEFT_FLOAT64, 2, SHAPE(4, 2), VALUES(1, 2, 3, 5, 2, 0, 7, 1)),
                               make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(2, 3)),
                               make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0, 0)),
                               make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0, 0)),
                               make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 1))};
    DeftNDArrayHandle grads[3] = {make(DEFT_FLOAT64, 2, SHAPE(4, 2), NULL),
                                  make(DEFT_FLOAT64, 1, SHAPE(2), NULL),
                                  make(DEFT_FLOAT64, 1, SHAPE(2), NULL)};
    int req[3] = {DEFT_GRAD_WRITE, DEFT_GRAD_WRITE, DEFT_GRAD_WRITE};
    ck_assert_ok(DeftAutogradMarkVariables(3, in, req, grads));
    set_training(true);
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("BatchNorm", 5, in, P("fix_gamma", "false"));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    set_training(false);
    ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
    assert_values(grads[0], 8, VALUES(0, 0, 0, 0, 0, 0, 0, 0), 1e-12);
    assert_values(grads[1], 2, VALUES(0, 0), 1e-12); /* sum of xhat is 0 */
    assert_values(grads[2], 2, VALUES(4, 4), 1e-12);
    free_all(1, &y);
    free_all(3, grads);
    free_all(5, in);
}
END_TEST

/* Training mode on a GPU (where there is one): the same result, statistics and moving
 * statistics as on the CPU, for a batch larger than a block. */
START_TEST(test_gpu_training_matches_cpu) {
    int gpus;
    ck_assert_ok(DeftGetGPUCount(&gpus));
    if (gpus == 0) {
        printf("test_gpu_training_matches_cpu: skipped: no GPU\n");
        return;
    }
    int64_t n = 8 * 3 * 17 * 5;
    double *x = wavy(n);
    DeftNDArrayHandle cpu[5] = {make(DEFT_FLOAT32, 4, SHAPE(8, 3, 17, 5), x),
                                make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3)),
                                make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(0, 1, -1)),
                                make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(0.5, 0, 1)),
                                make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3))};
    DeftNDArrayHandle gpu[5], out[2][3] = {{NULL}};
    for (int i = 0; i < 5; i++) {
        int64_t shape[DEFT_MAX_NDIM];
        int ndim;
        ck_assert_ok(DeftNDArrayGetShape(cpu[i], shape, DEFT_MAX_NDIM, &ndim));
        ck_assert_ok(DeftNDArrayCreate(shape, ndim, DEFT_FLOAT32, DEFT_GPU, 0, &gpu[i]));
        ck_assert_ok(DeftNDArrayCopyTo(cpu[i], gpu[i]));
    }
    set_training(true);
    for (int d = 0; d < 2; d++) {
        int nout = 3;
        ck_assert_msg(call("BatchNorm", 5, d ? gpu : cpu, &nout, out[d],
                           P("fix_gamma", "false", "output_mean_var", "true")) == 0,
                      "%s", DeftGetLastError());
    }
    set_training(false);
    for (int k = 0; k < 5; k++) {
        int64_t count;
        double *want = read_all(k < 3 ? out[0][k] : cpu[k], &count);
        assert_values(k < 3 ? out[1][k] : gpu[k], count, want, 1e-5);
        free(want);
    }
    free(x);
    free_all(3, out[0]), free_all(3, out[1]), free_all(5, cpu), free_all(5, gpu);
}
END_TEST

static Suite *batch_norm_suite(void) {
    Suite *suite = suite_create("BatchNorm");
    TCase *tc = tcase_create("batch_norm");
    tcase_add_test(tc, test_training_normalises_with_the_batch_and_updates_moving_stats);
    tcase_add_test(tc, test_float32_runs_match_float64);
    tcase_add_test(tc, test_fix_gamma_treats_gamma_as_one);
    tcase_add_test(tc, test_channel_axis_last_first_and_middle);
    tcase_add_test(tc, test_use_global_stats_keeps_moving_stats);
    tcase_add_test(tc, test_predict_mode_uses_moving_stats);
    tcase_add_test(tc, test_empty_batch_leaves_moving_stats);
    tcase_add_test(tc, test_batch_norm_in_place_in_a_graph);
    tcase_add_test(tc, test_moving_stats_are_auxiliary_states);
    tcase_add_test(tc, test_bad_inputs_and_parameters);
    tcase_add_test(tc, test_autograd_training_gradient);
    tcase_add_test(tc, test_gpu_training_matches_cpu);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(batch_norm_suite());
}
