/* LeakyReLU in each act_type against formulas written here. */
#include "op_helpers.h"

static const double inputs[6] = {-2, -0.5, 0, 0.25, 1.5, -1e-3};
#define SELU_ALPHA  1.6732632423543772848170429916717
#define SELU_LAMBDA 1.0507009873554804934193349852946

static double ref_act(const char *type, double x, double slope) {
    if (!strcmp(type, "elu")) return x > 0 ? x : slope * expm1(x);
    if (!strcmp(type, "selu")) return SELU_LAMBDA * (x > 0 ? x : SELU_ALPHA * expm1(x));
    if (!strcmp(type, "gelu")) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    return x > 0 ? x : slope * x; /* leaky, rrelu */
}

START_TEST(test_leaky_relu_types_match_formulas) {
    static const struct {
        const char *type, *slope;
        double used_slope;
    } cases[] = {{"leaky", "0.1", 0.1}, {"leaky", NULL, 0.25},
                 {"elu", "0.7", 0.7},   {"selu", NULL, 0},
                 {"gelu", NULL, 0},     {"rrelu", NULL, (0.125f + 0.334f) / 2.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int d = 0; d < 2; d++) {
            int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
            DeftNDArrayHandle x = make(dtype, 2, SHAPE(2, 3), inputs);
            const char *params[] = {"act_type", cases[c].type, cases[c].slope ? "slope" : NULL,
                                    cases[c].slope, NULL};
            DeftNDArrayHandle out[2] = {NULL, NULL};
            int nout = 2;
            ck_assert_msg(call("LeakyReLU", 1, &x, &nout, out, params) == 0, "%s",
                          DeftGetLastError());
            ck_assert_int_eq(nout, strcmp(cases[c].type, "rrelu") ? 1 : 2);
            double want[6];
            for (int i = 0; i < 6; i++) {
                double in = d ? inputs[i] : (float)inputs[i];
                want[i] = ref_act(cases[c].type, in, cases[c].used_slope);
            }
            assert_values(out[0], 6, want, d ? 1e-15 : 1e-6);
            if (nout == 2) { /* prediction mode: the mask holds the mean slope */
                double mask[6];
                for (int i = 0; i < 6; i++) mask[i] = (float)cases[c].used_slope;
                assert_values(out[1], 6, mask, 0);
                ck_assert_ok(DeftNDArrayFree(out[1]));
            }
            free_all(2, (DeftNDArrayHandle[]){x, out[0]});
        }
    }
}
END_TEST

START_TEST(test_prelu_gamma_per_channel_or_scalar) {
    const double x[12] = {-1, 2, -3, 4, -5, 6, 7, -8, 9, -10, 11, -12};
    DeftNDArrayHandle data = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 2), x);
    DeftNDArrayHandle gamma = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(0.5, 2, -1));
    DeftNDArrayHandle in[2] = {data, gamma};
    DeftNDArrayHandle y = call1("LeakyReLU", 2, in, P("act_type", "prelu"));
    double want[12];
    for (int i = 0; i < 12; i++) {
        double g = (double[]){0.5, 2, -1}[(i / 2) % 3];
        want[i] = x[i] > 0 ? x[i] : g * x[i];
    }
    assert_values(y, 12, want, 0);
    DeftNDArrayHandle one = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(0.1));
    DeftNDArrayHandle in1[2] = {data, one};
    DeftNDArrayHandle y1 = call1("LeakyReLU", 2, in1, P("act_type", "prelu"));
    for (int i = 0; i < 12; i++) want[i] = x[i] > 0 ? x[i] : 0.1 * x[i];
    assert_values(y1, 12, want, 1e-15);
    /* (2,) would match axis 0, as in MXNet; (4,) matches neither */
    DeftNDArrayHandle wrong = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(1, 1, 1, 1));
    DeftNDArrayHandle bad[2] = {data, wrong};
    ck_assert_call_fails("LeakyReLU", 2, bad, P("act_type", "prelu"), DEFT_ERROR_VALUE,
                         "operator 'LeakyReLU': input 1 (gamma) has shape (4,), which does not "
                         "match axis 1 (or 0 and 1) of the data's (2,3,2)");
    ck_assert_call_fails("LeakyReLU", 1, &data, P("act_type", "prelu"), DEFT_ERROR_VALUE,
                         "got 1 inputs, expected 2 for act_type=prelu");
    ck_assert_call_fails("LeakyReLU", 1, &data, P("act_type", "swish"), DEFT_ERROR_PARSE,
                         "parameter 'act_type' is 'swish', expected one of: rrelu, leaky, elu, "
                         "selu, gelu, prelu");
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(2), VALUES(1, -1));
    ck_assert_call_fails("LeakyReLU", 1, &i, NO_PARAMS, DEFT_ERROR_TYPE, "input 0 has dtype int32");
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle eg = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 1, 1));
    DeftNDArrayHandle ein[2] = {e, eg};
    DeftNDArrayHandle ey = call1("LeakyReLU", 2, ein, P("act_type", "prelu"));
    assert_shape(ey, 2, SHAPE(0, 3));
    free_all(10, (DeftNDArrayHandle[]){data, gamma, y, one, y1, wrong, i, e, eg, ey});
}
END_TEST

/* d gamma sums g x over the elements below 0 of each channel. */
START_TEST(test_prelu_backward_sums_over_channels) {
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(-1, 5, -2, -3));
    DeftNDArrayHandle gamma = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0.5, 0.25));
    DeftNDArrayHandle in[3] = {g, x, gamma};
    DeftNDArrayHandle out[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("_backward_LeakyReLU", 3, in, &nout, out, P("act_type", "prelu")));
    assert_values(out[0], 4, VALUES(0.5, 2, 1.5, 1), 0);
    assert_values(out[1], 2, VALUES(-1 - 6, -12), 0);
    free_all(5, (DeftNDArrayHandle[]){g, x, gamma, out[0], out[1]});
}
END_TEST

static Suite *activation_suite(void) {
    Suite *suite = suite_create("activations");
    TCase *tc = tcase_create("LeakyReLU");
    tcase_add_test(tc, test_leaky_relu_types_match_formulas);
    tcase_add_test(tc, test_prelu_gamma_per_channel_or_scalar);
    tcase_add_test(tc, test_prelu_backward_sums_over_channels);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(activation_suite());
}
