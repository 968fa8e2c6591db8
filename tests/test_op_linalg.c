/* dot, batch_dot and FullyConnected against triple loops. */
#include "op_helpers.h"

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = (double)(((i + 1) * (seed * 37 + 11)) % 19) / 4.0 - 2;
}

/* C = op(A) op(B) with A stored (ta ? k x m : m x k) and B (tb ? n x k : k x n). */
static void ref_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
                     const double *b, double *c) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
            c[i * n + j] = s;
        }
}

START_TEST(test_dot_with_transposes_both_dtypes) {
    const int64_t m = 5, n = 7, k = 3;
    double a[35], b[35], want[35];
    fill(a, m * k, 1);
    fill(b, k * n, 2);
    for (int d = 0; d < 2; d++) {
        int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                DeftNDArrayHandle A = make(dtype, 2, ta ? SHAPE(k, m) : SHAPE(m, k), a);
                DeftNDArrayHandle B = make(dtype, 2, tb ? SHAPE(n, k) : SHAPE(k, n), b);
                DeftNDArrayHandle C = call1(
                    "dot", 2, (DeftNDArrayHandle[]){A, B},
                    P("transpose_a", ta ? "true" : "false", "transpose_b", tb ? "true" : "false"));
                ref_gemm(ta, tb, m, n, k, a, b, want);
                assert_shape(C, 2, SHAPE(m, n));
                assert_values(C, m * n, want, d ? 1e-14 : 1e-6);
                free_all(3, (DeftNDArrayHandle[]){A, B, C});
            }
    }
}
END_TEST

START_TEST(test_dot_vectors_and_higher_rank) {
    DeftNDArrayHandle u = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle v = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(4, -5, 6));
    DeftNDArrayHandle s = call1("dot", 2, (DeftNDArrayHandle[]){u, v}, NO_PARAMS);
    assert_shape(s, 0, NULL);
    assert_values(s, 1, VALUES(12), 0);
    double a[24], b[12], want[24];
    fill(a, 24, 3);
    fill(b, 12, 4);
    DeftNDArrayHandle A = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 4), a);
    DeftNDArrayHandle B = make(DEFT_FLOAT64, 2, SHAPE(4, 3), b);
    DeftNDArrayHandle C = call1("dot", 2, (DeftNDArrayHandle[]){A, B}, NO_PARAMS);
    ref_gemm(false, false, 6, 3, 4, a, b, want);
    assert_shape(C, 3, SHAPE(2, 3, 3));
    assert_values(C, 18, want, 1e-14);
    DeftNDArrayHandle E = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle F = make(DEFT_FLOAT32, 2, SHAPE(3, 2), NULL);
    DeftNDArrayHandle EF = call1("dot", 2, (DeftNDArrayHandle[]){E, F}, NO_PARAMS);
    assert_shape(EF, 2, SHAPE(0, 2));
    DeftNDArrayHandle K0a = make(DEFT_FLOAT32, 2, SHAPE(2, 0), NULL);
    DeftNDArrayHandle K0b = make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL);
    DeftNDArrayHandle K0 = call1("dot", 2, (DeftNDArrayHandle[]){K0a, K0b}, NO_PARAMS);
    assert_values(K0, 4, VALUES(0, 0, 0, 0), 0);
    DeftNDArrayHandle I = make(DEFT_INT32, 2, SHAPE(2, 2), NULL);
    ck_assert_call_fails("dot", 2, ((DeftNDArrayHandle[]){I, I}), NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype int32, expected float32 or float64");
    ck_assert_call_fails("dot", 2, ((DeftNDArrayHandle[]){A, B}), P("transpose_a", "1"),
                         DEFT_ERROR_NOT_IMPLEMENTED, "need 2-D inputs");
    free_all(13, (DeftNDArrayHandle[]){u, v, s, A, B, C, E, F, EF, K0a, K0b, K0, I});
}
END_TEST

/* A result of more than 8 dimensions is refused before any is written
 * (dot wrote past the shape's 8, found by fuzz_invoke under UBSan). */
START_TEST(test_dot_result_rank_is_checked_first) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 8, SHAPE(1, 1, 1, 1, 1, 1, 1, 2), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 8, SHAPE(2, 1, 1, 1, 1, 1, 1, 1), NULL);
    ck_assert_call_fails("dot", 2, ((DeftNDArrayHandle[]){a, b}), NO_PARAMS, DEFT_ERROR_VALUE,
                         "the result would have 14 dimensions, more than 8");
    DeftNDArrayHandle g = make(DEFT_FLOAT32, 1, SHAPE(1), NULL);
    ck_assert_call_fails("_backward_dot_lhs", 3, ((DeftNDArrayHandle[]){g, a, b}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "the result would have 14 dimensions");
    free_all(3, (DeftNDArrayHandle[]){a, b, g});
}
END_TEST

START_TEST(test_batch_dot) {
    const int64_t batch = 3, m = 2, n = 4, k = 5;
    double a[40], b[60], want[24];
    fill(a, 30, 5);
    fill(b, 60, 6);
    for (int d = 0; d < 2; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
                DeftNDArrayHandle A =
                    make(dtype, 3, ta ? SHAPE(batch, k, m) : SHAPE(batch, m, k), a);
                DeftNDArrayHandle B =
                    make(dtype, 3, tb ? SHAPE(batch, n, k) : SHAPE(batch, k, n), b);
                DeftNDArrayHandle C =
                    call1("batch_dot", 2, (DeftNDArrayHandle[]){A, B},
                          P("transpose_a", ta ? "1" : "0", "transpose_b", tb ? "1" : "0"));
                for (int64_t i = 0; i < batch; i++)
                    ref_gemm(ta, tb, m, n, k, a + i * m * k, b + i * k * n, want + i * m * n);
                assert_shape(C, 3, SHAPE(batch, m, n));
                assert_values(C, batch * m * n, want, d ? 1e-14 : 1e-6);
                free_all(3, (DeftNDArrayHandle[]){A, B, C});
            }
    DeftNDArrayHandle A = make(DEFT_FLOAT32, 3, SHAPE(2, 2, 3), NULL);
    DeftNDArrayHandle B = make(DEFT_FLOAT32, 3, SHAPE(3, 3, 2), NULL);
    ck_assert_call_fails("batch_dot", 2, ((DeftNDArrayHandle[]){A, B}), NO_PARAMS, DEFT_ERROR_VALUE,
                         "inputs have shapes (2,2,3) and (3,3,2), expected (batch, m, k)");
    free_all(2, (DeftNDArrayHandle[]){A, B});
}
END_TEST

START_TEST(test_fully_connected_with_and_without_bias_and_flatten) {
    double x[24], w[12], bias[2], want[16];
    fill(x, 24, 7);
    fill(w, 12, 8);
    bias[0] = 0.5, bias[1] = -1.5;
    int dtype = _i ? DEFT_FLOAT32 : DEFT_FLOAT64;
    double tol = _i ? 1e-6 : 1e-14;
    DeftNDArrayHandle X = make(dtype, 3, SHAPE(4, 2, 3), x);
    DeftNDArrayHandle W = make(dtype, 2, SHAPE(2, 6), w);
    DeftNDArrayHandle Bv = make(dtype, 1, SHAPE(2), bias);
    DeftNDArrayHandle Y =
        call1("FullyConnected", 3, (DeftNDArrayHandle[]){X, W, Bv}, P("num_hidden", "2"));
    ref_gemm(false, true, 4, 2, 6, x, w, want);
    for (int i = 0; i < 8; i++) want[i] += bias[i % 2];
    assert_shape(Y, 2, SHAPE(4, 2));
    assert_values(Y, 8, want, tol);
    DeftNDArrayHandle Yn = call1("FullyConnected", 2, (DeftNDArrayHandle[]){X, W},
                                 P("num_hidden", "2", "no_bias", "true"));
    ref_gemm(false, true, 4, 2, 6, x, w, want);
    assert_values(Yn, 8, want, tol);
    DeftNDArrayHandle W3 = make(dtype, 2, SHAPE(2, 3), w);
    DeftNDArrayHandle Yf = call1("FullyConnected", 3, (DeftNDArrayHandle[]){X, W3, Bv},
                                 P("num_hidden", "2", "flatten", "false"));
    ref_gemm(false, true, 8, 2, 3, x, w, want);
    for (int i = 0; i < 16; i++) want[i] += bias[i % 2];
    assert_shape(Yf, 3, SHAPE(4, 2, 2));
    assert_values(Yf, 16, want, tol);
    ck_assert_call_fails("FullyConnected", 3, ((DeftNDArrayHandle[]){X, W3, Bv}),
                         P("num_hidden", "2"), DEFT_ERROR_VALUE,
                         "input 1 (weight) has shape (2,3), expected (2,6)");
    ck_assert_call_fails("FullyConnected", 3, ((DeftNDArrayHandle[]){X, W, W}),
                         P("num_hidden", "2"), DEFT_ERROR_VALUE,
                         "input 2 (bias) has shape (2,6), expected (2,)");
    ck_assert_call_fails("FullyConnected", 3, ((DeftNDArrayHandle[]){X, W, Bv}),
                         P("num_hidden", "0"), DEFT_ERROR_VALUE, "num_hidden is 0, expected >= 1");
    free_all(7, (DeftNDArrayHandle[]){X, W, Bv, Y, Yn, W3, Yf});
}
END_TEST

static Suite *linalg_suite(void) {
    Suite *suite = suite_create("linear algebra");
    TCase *tc = tcase_create("linalg");
    tcase_add_test(tc, test_dot_with_transposes_both_dtypes);
    tcase_add_test(tc, test_dot_vectors_and_higher_rank);
    tcase_add_test(tc, test_batch_dot);
    tcase_add_test(tc, test_dot_result_rank_is_checked_first);
    tcase_add_loop_test(tc, test_fully_connected_with_and_without_bias_and_flatten, 0, 2);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(linalg_suite());
}
