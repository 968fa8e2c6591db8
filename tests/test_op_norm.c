/*
 * LayerNorm, InstanceNorm, GroupNorm, L2Normalization and LRN against
 * plain-C references (each a naive loop over MXNet's formula), their hidden
 * and visible statistics, shape inference of gamma and beta, bad
 * parameters, and empty inputs.
 */
#include "symbol_helpers.h"

static double *wavy(int64_t n) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = 2 * sin(0.9 * (double)i) + 0.03 * (double)i;
    return v;
}

/* Normalise each group of `count` elements at base + k * stride (k < count) of x into y:
 * (x - mean) / sqrt(var + eps) * gamma[k or g] + beta[...]; *mean and *var out. */
static void normalise(const double *x, double *y, int64_t base, int64_t count, int64_t stride,
                      const double *gamma, const double *beta, int64_t param, bool per_element,
                      double eps, double *mean, double *var) {
    double m = 0, v = 0;
    for (int64_t k = 0; k < count; k++) m += x[base + k * stride];
    m /= (double)count;
    for (int64_t k = 0; k < count; k++) v += pow(x[base + k * stride] - m, 2);
    v /= (double)count;
    for (int64_t k = 0; k < count; k++) {
        int64_t e = per_element ? k : param;
        y[base + k * stride] = (x[base + k * stride] - m) / sqrt(v + eps) * gamma[e] + beta[e];
    }
    *mean = m, *var = v;
}

/* Invoke with three outputs' room; returns how many came. */
static int invoke(const char *op, int nin, DeftNDArrayHandle *in, DeftNDArrayHandle *out,
                  const char *const *params) {
    int nout = 3;
    out[0] = out[1] = out[2] = NULL;
    ck_assert_msg(call(op, nin, in, &nout, out, params) == 0, "%s: %s", op, DeftGetLastError());
    return nout;
}

START_TEST(test_layer_norm_last_and_middle_axis) {
    /* (2, 3, 4) along axis -1 (lines of 4) and axis 1 (lines of 3, stride 4) */
    double *x = wavy(24), y[24], mean[8], std[8], gamma[4] = {1, 2, -1, 0.5},
           beta[4] = {0, 0.5, 1, -1};
    for (int o = 0; o < 6; o++) {
        double var;
        normalise(x, y, o * 4, 4, 1, gamma, beta, 0, true, 1e-5, &mean[o], &var);
        std[o] = sqrt(var + 1e-5);
    }
    for (int dtype = DEFT_FLOAT32; dtype <= DEFT_FLOAT64; dtype++) {
        DeftNDArrayHandle in[3] = {make(dtype, 3, SHAPE(2, 3, 4), x),
                                   make(dtype, 1, SHAPE(4), gamma), make(dtype, 1, SHAPE(4), beta)};
        DeftNDArrayHandle out[3];
        ck_assert_int_eq(invoke("LayerNorm", 3, in, out, P("output_mean_var", "true")), 3);
        double tol = dtype == DEFT_FLOAT32 ? 1e-5 : 1e-12;
        assert_values(out[0], 24, y, tol);
        assert_shape(out[1], 3, SHAPE(2, 3, 1));
        assert_values(out[1], 6, mean, tol);
        assert_values(out[2], 6, std, tol);
        free_all(3, out);
        ck_assert_int_eq(invoke("LayerNorm", 3, in, out, NO_PARAMS), 1);
        free_all(1, out);
        free_all(3, in);
    }
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 4; i++) {
            double var;
            normalise(x, y, o * 12 + i, 3, 4, gamma, beta, 0, true, 0.01, &mean[o * 4 + i], &var);
            std[o * 4 + i] = sqrt(var + 0.01);
        }
    DeftNDArrayHandle in[3] = {make(DEFT_FLOAT64, 3, SHAPE(2, 3, 4), x),
                               make(DEFT_FLOAT64, 1, SHAPE(3), gamma),
                               make(DEFT_FLOAT64, 1, SHAPE(3), beta)};
    DeftNDArrayHandle out[3];
    ck_assert_int_eq(
        invoke("LayerNorm", 3, in, out, P("axis", "1", "eps", "0.01", "output_mean_var", "true")),
        3);
    assert_values(out[0], 24, y, 1e-12);
    assert_shape(out[2], 3, SHAPE(2, 1, 4));
    assert_values(out[1], 8, mean, 1e-12);
    assert_values(out[2], 8, std, 1e-12);
    free_all(3, out);
    free_all(3, in);
    free(x);
}
END_TEST

START_TEST(test_instance_norm_per_sample_and_channel) {
    double *x = wavy(24), y[24], mean[6], var[6], gamma[3] = {1, 2, -1}, beta[3] = {0, 0.5, 1};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 3; c++)
            normalise(x, y, (s * 3 + c) * 4, 4, 1, gamma, beta, c, false, 1e-3, &mean[s * 3 + c],
                      &var[s * 3 + c]);
    DeftNDArrayHandle in[3] = {make(DEFT_FLOAT32, 4, SHAPE(2, 3, 2, 2), x),
                               make(DEFT_FLOAT32, 1, SHAPE(3), gamma),
                               make(DEFT_FLOAT32, 1, SHAPE(3), beta)};
    DeftNDArrayHandle out[3];
    ck_assert_int_eq(invoke("InstanceNorm", 3, in, out, NO_PARAMS), 1); /* stats always hidden */
    assert_values(out[0], 24, y, 1e-5);
    free_all(1, out);
    free_all(3, in);
    free(x);
}
END_TEST

/* GroupNorm in 1.9.1: gamma and beta per group, mean and std (N, num_groups). */
START_TEST(test_group_norm_per_sample_and_group) {
    double *x = wavy(32), y[32], mean[4], std[4], gamma[2] = {1.5, -0.5}, beta[2] = {0.25, 1};
    for (int s = 0; s < 2; s++)
        for (int g = 0; g < 2; g++) { /* a group: 2 channels of 4 */
            double var;
            normalise(x, y, (s * 2 + g) * 8, 8, 1, gamma, beta, g, false, 1e-5, &mean[s * 2 + g],
                      &var);
            std[s * 2 + g] = sqrt(var + 1e-5);
        }
    DeftNDArrayHandle in[3] = {make(DEFT_FLOAT64, 3, SHAPE(2, 4, 4), x),
                               make(DEFT_FLOAT64, 1, SHAPE(2), gamma),
                               make(DEFT_FLOAT64, 1, SHAPE(2), beta)};
    DeftNDArrayHandle out[3];
    ck_assert_int_eq(
        invoke("GroupNorm", 3, in, out, P("num_groups", "2", "output_mean_var", "true")), 3);
    assert_values(out[0], 32, y, 1e-12);
    assert_shape(out[1], 2, SHAPE(2, 2));
    assert_values(out[1], 4, mean, 1e-12);
    assert_values(out[2], 4, std, 1e-12);
    free_all(3, out);
    free_all(3, in);
    free(x);
}
END_TEST

/* One of InstanceNorm and GroupNorm on x, forward and backward, in `dtype`: the output,
 * then the gradients of data, gamma and beta. */
typedef struct slices_case {
    const char *op;
    int64_t shape[4], slices, size, params; /* `slices` blocks of `size`, gamma (params,) */
    int64_t stats[2];                       /* the statistics' shape: (N, slices / N) */
    bool std;                               /* the statistic: std (else var) */
    const char *const *params_text;
} slices_case_t;

static void slices_both_ways(const slices_case_t *c, int dtype, double **results) {
    int64_t n = c->slices * c->size;
    double *x = wavy(n), *dy = wavy(n), gamma[4] = {1.5, -0.5, 2, 0.75}, beta[4] = {0.25, 1, 0, -2};
    double mean[8], stat[8], y[512];
    for (int64_t i = 0; i < n; i++) dy[i] = x[n - 1 - i] - 0.5;
    for (int64_t j = 0; j < c->slices; j++) { /* the statistics, as the forward makes them */
        normalise(x, y, j * c->size, c->size, 1, gamma, beta, j % c->params, false, 1e-3, &mean[j],
                  &stat[j]);
        if (c->std) stat[j] = sqrt(stat[j] + 1e-3);
    }
    DeftNDArrayHandle in[3] = {make(dtype, 4, c->shape, x), make(dtype, 1, SHAPE(c->params), gamma),
                               make(dtype, 1, SHAPE(c->params), beta)};
    DeftNDArrayHandle out[3], grads[3];
    invoke(c->op, 3, in, out, c->params_text);
    char backward[64];
    snprintf(backward, sizeof backward, "_backward_%s", c->op);
    DeftNDArrayHandle back_in[5] = {make(dtype, 4, c->shape, dy), in[0], in[1],
                                    make(dtype, 2, c->stats, mean), make(dtype, 2, c->stats, stat)};
    ck_assert_int_eq(invoke(backward, 5, back_in, grads, c->params_text), 3);
    int64_t got;
    results[0] = read_all(out[0], &got);
    for (int k = 0; k < 3; k++) results[1 + k] = read_all(grads[k], &got);
    free_all(1, out), free_all(3, grads), free_all(3, in);
    free_all(1, back_in), free_all(2, back_in + 3);
    free(x), free(dy);
}

/* float32 takes typed loops over each block (vector bodies and tails); float64 the
 * general loops: both agree, forward and backward. */
START_TEST(test_float32_blocks_match_float64) {
    const slices_case_t cases[2] = {
        {"InstanceNorm", {2, 3, 5, 7}, 6, 35, 3, {2, 3}, false, P("eps", "1e-3")},
        {"GroupNorm", {2, 4, 37, 1}, 4, 74, 2, {2, 2}, true, P("num_groups", "2", "eps", "1e-3")}};
    for (int c = 0; c < 2; c++) {
        double *f32[4], *f64[4];
        int64_t counts[4] = {cases[c].slices * cases[c].size, cases[c].slices * cases[c].size,
                             cases[c].params, cases[c].params};
        slices_both_ways(&cases[c], DEFT_FLOAT32, f32);
        slices_both_ways(&cases[c], DEFT_FLOAT64, f64);
        for (int k = 0; k < 4; k++) {
            for (int64_t i = 0; i < counts[k]; i++)
                ck_assert_msg(close_enough(f32[k][i], f64[k][i], 1e-5),
                              "%s result %d, element %lld: %.9g, expected %.9g", cases[c].op, k,
                              (long long)i, f32[k][i], f64[k][i]);
            free(f32[k]), free(f64[k]);
        }
    }
}
END_TEST

/* x / sqrt(sum(x^2) + eps) over each instance, channel vector or spatial map of (2, 3, 2). */
START_TEST(test_l2_normalization_modes) {
    double *x = wavy(12), y[12];
    static const struct {
        const char *mode;
        int64_t slices, count, stride, norm_ndim, norm_shape[3];
    } modes[] = {{"instance", 2, 6, 1, 1, {2}},
                 {"channel", 4, 3, 2, 3, {2, 1, 2}},
                 {"spatial", 6, 2, 1, 2, {2, 3}}};
    for (int m = 0; m < 3; m++) {
        double norms[6];
        for (int64_t j = 0; j < modes[m].slices; j++) {
            /* channel slices: sample j / 2, position j % 2; the others are contiguous */
            int64_t base = m == 1 ? (j / 2) * 6 + j % 2 : j * modes[m].count, s = modes[m].stride;
            double sum = 0;
            for (int64_t k = 0; k < modes[m].count; k++) sum += x[base + k * s] * x[base + k * s];
            norms[j] = sqrt(sum + 1e-10);
            for (int64_t k = 0; k < modes[m].count; k++)
                y[base + k * s] = x[base + k * s] / norms[j];
        }
        DeftNDArrayHandle data = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 2), x), out[3];
        ck_assert_int_eq(invoke("L2Normalization", 1, &data, out, P("mode", modes[m].mode)), 1);
        assert_values(out[0], 12, y, 1e-12);
        free_all(1, out);
        free_all(1, &data);
    }
    free(x);
}
END_TEST

/* knorm + alpha / nsize * sum of squares over the clipped channel window, to the -beta. */
START_TEST(test_lrn_windows) {
    const int64_t n = 2, c = 5, hw = 3;
    double *x = wavy(n * c * hw), y[30];
    const double alpha = 0.5, beta = 0.75, k = 1.5;
    for (int64_t s = 0; s < n; s++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < hw; p++) {
                double sum = 0;
                for (int64_t w = ch - 1; w <= ch + 1; w++)
                    if (w >= 0 && w < c) sum += pow(x[(s * c + w) * hw + p], 2);
                int64_t i = (s * c + ch) * hw + p;
                y[i] = x[i] * pow(k + alpha / 3 * sum, -beta);
            }
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 4, SHAPE(2, 5, 3, 1), x), out[3];
    ck_assert_int_eq(invoke("LRN", 1, &data, out, P("nsize", "3", "alpha", "0.5", "knorm", "1.5")),
                     1);
    assert_values(out[0], 30, y, 1e-5);
    free_all(1, out);
    free_all(1, &data);
    free(x);
}
END_TEST

/* gamma and beta follow from data alone: LayerNorm's axis, InstanceNorm's C, GroupNorm's groups. */
START_TEST(test_gamma_and_beta_shapes_inferred) {
    const struct {
        const char *op;
        const char *const *params;
        int64_t want;
    } cases[] = {{"LayerNorm", (const char *const[]){"axis", "-2", NULL}, 5},
                 {"InstanceNorm", (const char *const[]){NULL}, 3},
                 {"GroupNorm", (const char *const[]){"num_groups", "3", NULL}, 3}};
    DeftSymbolHandle data = var("data");
    for (int i = 0; i < 3; i++) {
        DeftSymbolHandle s = apply(cases[i].op, "n", 1, &data, cases[i].params);
        int complete, ndim, dtype;
        int64_t dims[DEFT_MAX_NDIM];
        ck_assert_ok(DeftSymbolInferShape(s, 1, (const char *const[]){"data"}, (const int[]){4},
                                          SHAPE(2, 3, 5, 4), NULL, &complete));
        ck_assert_msg(complete == 1, "%s", cases[i].op);
        for (int k = 1; k < 3; k++) {
            ck_assert_ok(DeftSymbolGetInferredShape(s, DEFT_ARGUMENTS, k, dims, DEFT_MAX_NDIM,
                                                    &ndim, &dtype));
            ck_assert_int_eq(ndim, 1);
            ck_assert_msg(dims[0] == cases[i].want, "%s: %lld", cases[i].op, (long long)dims[0]);
        }
        ck_assert_ok(DeftSymbolFree(s));
    }
    ck_assert_ok(DeftSymbolFree(data));
}
END_TEST

START_TEST(test_bad_inputs_and_parameters) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 3, SHAPE(2, 4, 3), NULL);
    DeftNDArrayHandle x2 = make(DEFT_FLOAT32, 2, SHAPE(2, 4), NULL);
    DeftNDArrayHandle c3 = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 1, 1));
    DeftNDArrayHandle c4 = make(DEFT_FLOAT32, 1, SHAPE(4), VALUES(1, 1, 1, 1));
    DeftNDArrayHandle ln[3] = {x, c4, c4}, in[3] = {x, c4, c3}, flat[3] = {x2, c4, c4};
    ck_assert_call_fails("LayerNorm", 3, ln, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'LayerNorm': input 1 (gamma) has shape (4,), expected (3,)");
    ck_assert_call_fails("LayerNorm", 3, ln, P("axis", "3"), DEFT_ERROR_INDEX,
                         "operator 'LayerNorm': axis is 3, expected an axis in [-3, 3)");
    ck_assert_call_fails("LayerNorm", 3, ln, P("axis", "1", "eps", "-0.5"), DEFT_ERROR_VALUE,
                         "operator 'LayerNorm': eps is -0.5, expected >= 0");
    ck_assert_call_fails("InstanceNorm", 3, in, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'InstanceNorm': input 2 (beta) has shape (3,), expected (4,)");
    ck_assert_call_fails("InstanceNorm", 3, flat, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'InstanceNorm': input 0 (data) has shape (2,4), expected 3 or "
                         "more dimensions (N, C, ...)");
    ck_assert_call_fails("GroupNorm", 3, ln, P("num_groups", "3"), DEFT_ERROR_VALUE,
                         "operator 'GroupNorm': num_groups is 3, expected a divisor of the 4 "
                         "channels");
    ck_assert_call_fails("GroupNorm", 3, ln, P("num_groups", "0"), DEFT_ERROR_VALUE,
                         "num_groups is 0");
    ck_assert_call_fails("GroupNorm", 3, ln, P("num_groups", "2"), DEFT_ERROR_VALUE,
                         "operator 'GroupNorm': input 1 (gamma) has shape (4,), expected (2,)");
    ck_assert_call_fails("L2Normalization", 1, &x2, P("mode", "channel"), DEFT_ERROR_VALUE,
                         "operator 'L2Normalization': input 0 (data) has shape (2,4), expected 3 "
                         "or more dimensions in channel mode");
    ck_assert_call_fails("L2Normalization", 1, &x, P("mode", "pixel"), DEFT_ERROR_PARSE,
                         "expected one of: instance, spatial, channel");
    ck_assert_call_fails("LRN", 1, &x, P("nsize", "3"), DEFT_ERROR_VALUE,
                         "operator 'LRN': input 0 (data) has shape (2,4,3), expected (N, C, H, W)");
    DeftNDArrayHandle x4 = make(DEFT_FLOAT32, 4, SHAPE(1, 4, 2, 2), NULL);
    ck_assert_call_fails("LRN", 1, &x4, P("nsize", "4"), DEFT_ERROR_VALUE,
                         "operator 'LRN': nsize is 4, expected an odd window size");
    ck_assert_call_fails("LRN", 1, &x4, NO_PARAMS, DEFT_ERROR_VALUE, "nsize");
    free_all(5, (DeftNDArrayHandle[]){x, x2, c3, c4, x4});
}
END_TEST

/* Empty data: empty results (and statistics) without touching any element. */
START_TEST(test_empty_inputs) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 3, SHAPE(0, 4, 3), NULL);
    DeftNDArrayHandle c3 = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 1, 1));
    DeftNDArrayHandle c4 = make(DEFT_FLOAT32, 1, SHAPE(4), VALUES(1, 1, 1, 1));
    DeftNDArrayHandle ln[3] = {x, c3, c3}, in[3] = {x, c4, c4}, out[3];
    ck_assert_int_eq(invoke("LayerNorm", 3, ln, out, P("output_mean_var", "true")), 3);
    assert_shape(out[1], 3, SHAPE(0, 4, 1));
    free_all(3, out);
    ck_assert_int_eq(invoke("InstanceNorm", 3, in, out, NO_PARAMS), 1);
    assert_shape(out[0], 3, SHAPE(0, 4, 3));
    free_all(1, out);
    ck_assert_int_eq(
        invoke("GroupNorm", 3, (DeftNDArrayHandle[]){x, c4, c4}, out, P("num_groups", "4")), 1);
    free_all(1, out);
    ck_assert_int_eq(invoke("L2Normalization", 1, &x, out, P("mode", "spatial")), 1);
    free_all(1, out);
    DeftNDArrayHandle x4 = make(DEFT_FLOAT32, 4, SHAPE(2, 0, 2, 2), NULL);
    ck_assert_int_eq(invoke("LRN", 1, &x4, out, P("nsize", "1")), 1);
    assert_shape(out[0], 4, SHAPE(2, 0, 2, 2));
    free_all(1, out);
    free_all(4, (DeftNDArrayHandle[]){x, c3, c4, x4});
}
END_TEST

static Suite *norm_suite(void) {
    Suite *suite = suite_create("norm");
    TCase *tc = tcase_create("norm");
    tcase_add_test(tc, test_layer_norm_last_and_middle_axis);
    tcase_add_test(tc, test_instance_norm_per_sample_and_channel);
    tcase_add_test(tc, test_group_norm_per_sample_and_group);
    tcase_add_test(tc, test_float32_blocks_match_float64);
    tcase_add_test(tc, test_l2_normalization_modes);
    tcase_add_test(tc, test_lrn_windows);
    tcase_add_test(tc, test_gamma_and_beta_shapes_inferred);
    tcase_add_test(tc, test_bad_inputs_and_parameters);
    tcase_add_test(tc, test_empty_inputs);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(norm_suite());
}
