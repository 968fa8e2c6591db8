/* The LAPACK operators on small matrices with known answers, batches, empty matrices and errors. */
#include "op_helpers.h"

static DeftNDArrayHandle out_k(const char *name, int nin, DeftNDArrayHandle *in, int k, int want,
                               const char *const *params, DeftNDArrayHandle *all) {
    int nout = want;
    for (int i = 0; i < want; i++) all[i] = NULL; /* no outputs given: the call makes them */
    ck_assert_msg(call(name, nin, in, &nout, all, params) == 0, "%s: %s", name, DeftGetLastError());
    ck_assert_int_eq(nout, want);
    return all[k];
}

START_TEST(test_inverse_determinant_and_solve) {
    /* a batch of two: [[4, 7], [2, 6]] (det 10) and [[0, 1], [1, 0]] (det -1, a row swap) */
    DeftNDArrayHandle a =
        make(_i ? DEFT_FLOAT64 : DEFT_FLOAT32, 3, SHAPE(2, 2, 2), VALUES(4, 7, 2, 6, 0, 1, 1, 0));
    DeftNDArrayHandle inv = call1("_linalg_inv", 1, &a, NO_PARAMS);
    assert_values(inv, 8, VALUES(0.6, -0.7, -0.2, 0.4, 0, 1, 1, 0), 1e-6);
    DeftNDArrayHandle det = call1("_linalg_det", 1, &a, NO_PARAMS);
    assert_shape(det, 1, SHAPE(2));
    assert_values(det, 2, VALUES(10, -1), 1e-5);
    DeftNDArrayHandle b =
        make(_i ? DEFT_FLOAT64 : DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle x = call1("_linalg_solve", 2, ((DeftNDArrayHandle[]){a, b}), NO_PARAMS);
    assert_values(x, 4, VALUES(-0.8, 0.6, 4, 3), 1e-6); /* [[4,7],[2,6]] x = (1,2); swap (3,4) */
    free_all(5, (DeftNDArrayHandle[]){a, inv, det, b, x});
}
END_TEST

START_TEST(test_factorisations) {
    DeftNDArrayHandle spd = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(4, 2, 2, 3));
    DeftNDArrayHandle l = call1("_linalg_cholesky", 1, &spd, NO_PARAMS);
    assert_values(l, 4, VALUES(2, 0, 1, 1.4142135623730951), 1e-12);
    DeftNDArrayHandle eig[2];
    out_k("_linalg_eigh", 1, &spd, 0, 2, NO_PARAMS, eig);
    assert_values(eig[0], 2, VALUES(1.4384471871911697, 5.561552812808830), 1e-12);
    assert_shape(eig[1], 2, SHAPE(2, 2));
    DeftNDArrayHandle tall = make(DEFT_FLOAT32, 2, SHAPE(3, 2), VALUES(3, 0, 0, 2, 0, 0));
    DeftNDArrayHandle qr[2], svd[3];
    out_k("_linalg_qr", 1, &tall, 0, 2, NO_PARAMS, qr);
    assert_shape(qr[0], 2, SHAPE(3, 2));
    assert_shape(qr[1], 2, SHAPE(2, 2));
    out_k("_linalg_svd", 1, &tall, 0, 3, P("full_matrices", "true"), svd);
    assert_shape(svd[0], 2, SHAPE(3, 3));
    assert_values(svd[1], 2, VALUES(3, 2), 1e-6);
    assert_shape(svd[2], 2, SHAPE(2, 2));
    free_all(3, svd);
    out_k("_linalg_svd", 1, &tall, 0, 3, NO_PARAMS, svd);
    assert_shape(svd[0], 2, SHAPE(3, 2));
    /* empty matrices: nothing to factor, shapes still right */
    DeftNDArrayHandle none = make(DEFT_FLOAT32, 3, SHAPE(2, 0, 0), NULL);
    DeftNDArrayHandle d0 = call1("_linalg_det", 1, &none, NO_PARAMS);
    assert_values(d0, 2, VALUES(1, 1), 0);
    DeftNDArrayHandle wide0 = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL), svd0[3];
    out_k("_linalg_svd", 1, &wide0, 0, 3, P("full_matrices", "true"), svd0);
    assert_shape(svd0[2], 2, SHAPE(3, 3));
    assert_values(svd0[2], 9, VALUES(1, 0, 0, 0, 1, 0, 0, 0, 1), 0);
    free_all(8, (DeftNDArrayHandle[]){spd, l, eig[0], eig[1], tall, qr[0], qr[1], none});
    free_all(3, svd);
    free_all(5, (DeftNDArrayHandle[]){d0, wide0, svd0[0], svd0[1], svd0[2]});
}
END_TEST

START_TEST(test_errors_name_the_matrix_and_the_input) {
    DeftNDArrayHandle singular =
        make(DEFT_FLOAT32, 3, SHAPE(2, 2, 2), VALUES(1, 0, 0, 1, 1, 2, 2, 4));
    ck_assert_run_fails("_linalg_inv", 1, &singular, NO_PARAMS, DEFT_ERROR_VALUE,
                        "operator '_linalg_inv': matrix 1 of the batch is singular");
    DeftNDArrayHandle negative = make(DEFT_FLOAT32, 2, SHAPE(1, 1), VALUES(-1));
    ck_assert_run_fails("_linalg_cholesky", 1, &negative, NO_PARAMS, DEFT_ERROR_VALUE,
                        "matrix 0 of the batch is not positive definite");
    DeftNDArrayHandle wide = make(DEFT_FLOAT32, 2, SHAPE(2, 3), NULL);
    ck_assert_call_fails("_linalg_det", 1, &wide, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 0 has shape (2,3): its last two dimensions must be square");
    DeftNDArrayHandle ints = make(DEFT_INT32, 2, SHAPE(2, 2), NULL);
    ck_assert_call_fails("_linalg_inv", 1, &ints, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 is int32, expected float32 or float64");
    DeftNDArrayHandle flat = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    ck_assert_call_fails("_linalg_qr", 1, &flat, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 0 has 1 dimensions, expected at least 2 (a matrix)");
    ck_assert_call_fails("_linalg_solve", 2, ((DeftNDArrayHandle[]){singular, flat}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "input 1 (b) is (3,) float32, expected float32 with a's batch and rows");
    /* NaN: LAPACK's dgesdd calls it a bad argument (found by fuzz_invoke) */
    DeftNDArrayHandle nan = make(DEFT_FLOAT64, 3, SHAPE(2, 2, 2), VALUES(1, 0, 0, 1, 1, NAN, 0, 1));
    ck_assert_run_fails("_linalg_svd", 1, &nan, NO_PARAMS, DEFT_ERROR_VALUE,
                        "matrix 1 of the batch holds NaN or infinity: its SVD did not converge");
    free_all(6, (DeftNDArrayHandle[]){singular, negative, wide, ints, flat, nan});
}
END_TEST

/* The backward operators' own errors (their values: test_gradient's finite differences). */
START_TEST(test_gradients_that_do_not_exist_are_errors) {
    DeftNDArrayHandle wide = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(1, 2, 0, 0, 1, 3)), qr[2];
    out_k("_linalg_qr", 1, &wide, 0, 2, NO_PARAMS, qr);
    ck_assert_call_fails("_backward_linalg_qr", 4,
                         ((DeftNDArrayHandle[]){qr[0], qr[1], qr[0], qr[1]}), NO_PARAMS,
                         DEFT_ERROR_NOT_IMPLEMENTED, "qr's gradient needs m >= n");
    DeftNDArrayHandle singular = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(1, 2, 2, 4));
    DeftNDArrayHandle one = make(DEFT_FLOAT64, 0, SHAPE(1), VALUES(1));
    ck_assert_run_fails("_backward_linalg_det", 3, ((DeftNDArrayHandle[]){one, singular, one}),
                        NO_PARAMS, DEFT_ERROR_VALUE,
                        "matrix 0 of the batch: is singular, and det's gradient needs its inverse");
    DeftNDArrayHandle small = make(DEFT_FLOAT64, 2, SHAPE(3, 3), NULL);
    ck_assert_call_fails("_backward_linalg_inv", 2, ((DeftNDArrayHandle[]){singular, small}),
                         NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 0 (y_grad) has shape (2,2), expected (3,3)");
    /* full_matrices: a gradient through s alone is the reduced SVD's; one reaching
     * vh's third row (arbitrary for a 2 x 3 matrix) is refused */
    DeftNDArrayHandle full[3], reduced[3];
    out_k("_linalg_svd", 1, &wide, 0, 3, P("full_matrices", "true"), full);
    out_k("_linalg_svd", 1, &wide, 0, 3, NO_PARAMS, reduced);
    DeftNDArrayHandle gu = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(0, 0, 0, 0));
    DeftNDArrayHandle gs = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0.5, -2));
    DeftNDArrayHandle gvh_full = make(DEFT_FLOAT64, 2, SHAPE(3, 3), NULL);
    DeftNDArrayHandle gvh = make(DEFT_FLOAT64, 2, SHAPE(2, 3), NULL);
    DeftNDArrayHandle a =
        call1("_backward_linalg_svd", 6,
              ((DeftNDArrayHandle[]){gu, gs, gvh_full, full[0], full[1], full[2]}), NO_PARAMS);
    DeftNDArrayHandle b =
        call1("_backward_linalg_svd", 6,
              ((DeftNDArrayHandle[]){gu, gs, gvh, reduced[0], reduced[1], reduced[2]}), NO_PARAMS);
    int64_t n;
    double *want = read_all(b, &n);
    assert_values(a, n, want, 1e-12);
    free(want);
    set_values(gvh_full, 9, VALUES(0, 0, 0, 0, 0, 0, 0, 1, 0));
    ck_assert_run_fails("_backward_linalg_svd", 6,
                        ((DeftNDArrayHandle[]){gu, gs, gvh_full, full[0], full[1], full[2]}),
                        NO_PARAMS, DEFT_ERROR_NOT_IMPLEMENTED, "use full_matrices=false");
    free_all(3, full);
    free_all(3, reduced);
    free_all(8, (DeftNDArrayHandle[]){wide, qr[0], qr[1], singular, one, small, gu, gs});
    free_all(4, (DeftNDArrayHandle[]){gvh_full, gvh, a, b});
}
END_TEST

int main(void) {
    Suite *s = suite_create("linalg (LAPACK) ops");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_inverse_determinant_and_solve, 0, 2);
    tcase_add_test(tc, test_factorisations);
    tcase_add_test(tc, test_errors_name_the_matrix_and_the_input);
    tcase_add_test(tc, test_gradients_that_do_not_exist_are_errors);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
