/* gamma and gammaln against the C library, and their gradients (digamma) against
 * known values, finite differences of lgamma and what MXNet 1.9.1 computed. */
#include <float.h>

#include "op_helpers.h"

static const double inputs[] = {0.5, 1, 2.5, 3, 7.25, 30, -0.5, -1.5, -2.75, 0, -1, NAN, INFINITY};
#define NUM_INPUTS 13

START_TEST(test_gamma_and_gammaln_match_libm) {
    int dtype = _i ? DEFT_FLOAT64 : DEFT_FLOAT32;
    const char *names[] = {"gamma", "gammaln", "_npx_gamma", "_npx_gammaln"};
    for (int k = 0; k < 4; k++) {
        bool ln = k % 2;
        double want[NUM_INPUTS];
        for (int i = 0; i < NUM_INPUTS; i++) {
            /* float32 is tgammaf / lgammaf of the float input, as MXNet's */
            want[i] = dtype == DEFT_FLOAT32
                          ? (double)(ln ? lgammaf((float)inputs[i]) : tgammaf((float)inputs[i]))
                          : (ln ? lgamma(inputs[i]) : tgamma(inputs[i]));
        }
        DeftNDArrayHandle x = make(dtype, 1, SHAPE(NUM_INPUTS), inputs);
        DeftNDArrayHandle y = call1(names[k], 1, &x, NO_PARAMS);
        assert_values(y, NUM_INPUTS, want, 0);
        free_all(2, (DeftNDArrayHandle[]){x, y});
    }
}
END_TEST

/* What MXNet 1.9.1 printed: gamma(-1) is NaN and gammaln(-1) inf, both poles. */
START_TEST(test_gamma_mxnet_examples) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(5), VALUES(0.5, -1.5, 0, -1, 3));
    DeftNDArrayHandle g = call1("gamma", 1, &x, NO_PARAMS);
    DeftNDArrayHandle l = call1("gammaln", 1, &x, NO_PARAMS);
    assert_values(g, 5, VALUES(1.772453784942627, 2.363271713256836, INFINITY, NAN, 2), 1e-6);
    assert_values(
        l, 5,
        VALUES(0.5723649263381958, 0.8600470423698425, INFINITY, INFINITY, 0.6931471824645996),
        1e-7);
    free_all(3, (DeftNDArrayHandle[]){x, g, l});
}
END_TEST

/* digamma through _backward_gammaln(1, x): the exact values at halves and integers, and
 * the derivative of lgamma by central differences elsewhere (within 1e-8, away from poles). */
START_TEST(test_digamma_values) {
    const double euler = 0.57721566490153286061, ln2 = 0.69314718055994530942;
    const double xs[] = {1, 2, 0.5, 1.5, -0.5, 11, 0.01, 3.7, 12.5, 250, 1e6, -3.3, -0.9, 9.99};
    const int n = 14;
    double want[14] = {-euler, 1 - euler, -euler - 2 * ln2, 2 - euler - 2 * ln2,
                       2 - euler - 2 * ln2}; /* psi(-0.5) = psi(1.5): cot(-pi/2) is 0 */
    want[5] = -euler;
    for (int k = 1; k <= 10; k++) want[5] += 1.0 / k;
    for (int i = 6; i < n; i++) {
        double h = 1e-6 * fmax(1, fabs(xs[i]));
        want[i] = (lgamma(xs[i] + h) - lgamma(xs[i] - h)) / (2 * h);
    }
    double ones[14];
    for (int i = 0; i < n; i++) ones[i] = 1;
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(14), xs);
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(14), ones);
    DeftNDArrayHandle psi = call1("_backward_gammaln", 2, (DeftNDArrayHandle[]){g, x}, NO_PARAMS);
    assert_values(psi, n, want, 1e-8);
    /* the poles give the largest double, as MXNet's cephes psi; float32 overflows to inf */
    DeftNDArrayHandle poles = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0, -3));
    DeftNDArrayHandle two = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 1));
    DeftNDArrayHandle at =
        call1("_backward_gammaln", 2, (DeftNDArrayHandle[]){two, poles}, NO_PARAMS);
    assert_values(at, 2, VALUES(DBL_MAX, DBL_MAX), 0);
    DeftNDArrayHandle poles32 = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(-2));
    DeftNDArrayHandle one32 = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(1));
    DeftNDArrayHandle at32 =
        call1("_backward_gammaln", 2, (DeftNDArrayHandle[]){one32, poles32}, NO_PARAMS);
    assert_values(at32, 1, VALUES(INFINITY), 0);
    free_all(9, (DeftNDArrayHandle[]){x, g, psi, poles, two, at, poles32, one32, at32});
}
END_TEST

/* Autograd through gamma and gammaln, against MXNet 1.9.1's gradients at the same points
 * (float32; 1.4616321 is near the minimum of gamma, where both gradients vanish). */
START_TEST(test_gamma_gradients_match_mxnet) {
    const double xs[] = {0.5, -1.5, 2.5, -0.3, 1.4616321};
    const double mx_gamma[] = {-3.480232000350952, 1.6617505550384521, 0.9347348213195801,
                               -9.143976211547852, 8.397138984150843e-09};
    const double mx_gammaln[] = {-1.9635107517242432, 0.7031567692756653, 0.7031567692756653,
                                 2.113309860229492, 9.4818304319233e-09};
    for (int k = 0; k < 2; k++) {
        DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(5), xs);
        DeftNDArrayHandle gx = make(DEFT_FLOAT32, 1, SHAPE(5), NULL);
        ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &gx));
        ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
        DeftNDArrayHandle y = call1(k ? "gammaln" : "gamma", 1, &x, NO_PARAMS);
        ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
        ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
        assert_values(gx, 5, k ? mx_gammaln : mx_gamma, 1e-6);
        free_all(3, (DeftNDArrayHandle[]){x, gx, y});
    }
}
END_TEST

/* _backward_gamma is g * gamma(x) * digamma(x), elementwise. */
START_TEST(test_backward_gamma_is_the_product) {
    const double xs[] = {0.75, 2, 4.5, -0.25};
    double g[4] = {1, -2, 0.5, 3}, want[4], psi[4];
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(4), xs);
    DeftNDArrayHandle ones = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(1, 1, 1, 1));
    DeftNDArrayHandle p = call1("_backward_gammaln", 2, (DeftNDArrayHandle[]){ones, x}, NO_PARAMS);
    int64_t n;
    double *got_psi = read_all(p, &n);
    for (int i = 0; i < 4; i++) psi[i] = got_psi[i], want[i] = g[i] * tgamma(xs[i]) * psi[i];
    DeftNDArrayHandle head = make(DEFT_FLOAT64, 1, SHAPE(4), g);
    DeftNDArrayHandle d = call1("_backward_gamma", 2, (DeftNDArrayHandle[]){head, x}, NO_PARAMS);
    assert_values(d, 4, want, 1e-15);
    free(got_psi);
    free_all(5, (DeftNDArrayHandle[]){x, ones, p, head, d});
}
END_TEST

START_TEST(test_gamma_rejects_bad_inputs) {
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle f = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    DeftNDArrayHandle d = make(DEFT_FLOAT64, 1, SHAPE(3), NULL);
    DeftNDArrayHandle f2 = make(DEFT_FLOAT32, 1, SHAPE(2), NULL);
    ck_assert_call_fails("gamma", 1, &i, NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator 'gamma': input 0 has dtype int32, expected float32 or float64");
    ck_assert_call_fails("gammaln", 1, &i, NO_PARAMS, DEFT_ERROR_TYPE, "operator 'gammaln'");
    ck_assert_call_fails("_backward_gamma", 2, ((DeftNDArrayHandle[]){i, i}), NO_PARAMS,
                         DEFT_ERROR_TYPE, "operator '_backward_gamma'");
    ck_assert_call_fails("_backward_gammaln", 2, ((DeftNDArrayHandle[]){f, d}), NO_PARAMS,
                         DEFT_ERROR_TYPE, "operator '_backward_gammaln'");
    ck_assert_call_fails("_backward_gamma", 2, ((DeftNDArrayHandle[]){f, f2}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "operator '_backward_gamma': input 1 has shape (2,)");
    free_all(4, (DeftNDArrayHandle[]){i, f, d, f2});
}
END_TEST

START_TEST(test_gamma_of_zero_size_arrays) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(3, 0), NULL);
    DeftNDArrayHandle g = call1("gamma", 1, &x, NO_PARAMS);
    DeftNDArrayHandle l = call1("gammaln", 1, &x, NO_PARAMS);
    DeftNDArrayHandle b = call1("_backward_gamma", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    assert_shape(g, 2, SHAPE(3, 0));
    assert_shape(l, 2, SHAPE(3, 0));
    assert_shape(b, 2, SHAPE(3, 0));
    free_all(4, (DeftNDArrayHandle[]){x, g, l, b});
}
END_TEST

static Suite *gamma_suite(void) {
    Suite *suite = suite_create("gamma ops");
    TCase *tc = tcase_create("gamma");
    tcase_add_loop_test(tc, test_gamma_and_gammaln_match_libm, 0, 2);
    tcase_add_test(tc, test_gamma_mxnet_examples);
    tcase_add_test(tc, test_digamma_values);
    tcase_add_test(tc, test_gamma_gradients_match_mxnet);
    tcase_add_test(tc, test_backward_gamma_is_the_product);
    tcase_add_test(tc, test_gamma_rejects_bad_inputs);
    tcase_add_test(tc, test_gamma_of_zero_size_arrays);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(gamma_suite());
}
