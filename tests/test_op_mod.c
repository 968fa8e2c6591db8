/* MXNet's mod (_mod, broadcast_mod, _mod_scalar, _rmod_scalar) against Python's %, written
 * here as fmod moved into the divisor's sign, with x mod 0 = 0. */
#include "op_helpers.h"

/* Python's a % b, as MXNet computes it for every dtype: in double. */
static double ref_mod(double a, double b) {
    if (b == 0) return 0;
    double r = fmod(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

/* The result of an operation in `dtype` (float32 rounds; integers are exact here). */
static double in_dtype(int dtype, double v) {
    return dtype == DEFT_FLOAT32 ? (double)(float)v : v;
}

static const double lhs_values[] = {7, -7, 7.5, -7.5, 0, 3, -3, 1, 6, -6, 2.25, -0.5};
static const double rhs_values[] = {3, 3, -3, -3, 2, 0, 0, 4, -4, 5, 0.75, -0.25};
#define NUM_PAIRS 12

START_TEST(test_mod_matches_the_python_remainder) {
    int dtype = arith_dtypes[_i];
    bool is_unsigned = dtype == DEFT_UINT8,
         integer = dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64;
    double a[NUM_PAIRS], b[NUM_PAIRS], want[NUM_PAIRS];
    for (int i = 0; i < NUM_PAIRS; i++) {
        a[i] = integer ? trunc(lhs_values[i]) : lhs_values[i];
        b[i] = integer ? trunc(rhs_values[i]) : rhs_values[i];
        if (is_unsigned) a[i] = fabs(a[i]), b[i] = fabs(b[i]);
        want[i] = in_dtype(dtype, ref_mod(a[i], b[i]));
    }
    DeftNDArrayHandle x = make(dtype, 2, SHAPE(3, 4), a), y = make(dtype, 2, SHAPE(3, 4), b);
    DeftNDArrayHandle same = call1("_mod", 2, (DeftNDArrayHandle[]){x, y}, NO_PARAMS);
    DeftNDArrayHandle bc = call1("broadcast_mod", 2, (DeftNDArrayHandle[]){x, y}, NO_PARAMS);
    DeftNDArrayHandle legacy = call1("_Mod", 2, (DeftNDArrayHandle[]){x, y}, NO_PARAMS);
    assert_values(same, NUM_PAIRS, want, 0);
    assert_values(bc, NUM_PAIRS, want, 0);
    assert_values(legacy, NUM_PAIRS, want, 0);
    int got_dtype;
    ck_assert_ok(DeftNDArrayGetDType(same, &got_dtype));
    ck_assert_int_eq(got_dtype, dtype);
    free_all(5, (DeftNDArrayHandle[]){x, y, same, bc, legacy});
}
END_TEST

/* Scalars: data mod s and s mod data, in every dtype (the scalar converted to it). */
START_TEST(test_mod_scalar_forms) {
    int dtype = arith_dtypes[_i];
    bool is_unsigned = dtype == DEFT_UINT8;
    const double s = is_unsigned ? 4 : -4;
    double a[NUM_PAIRS], fwd[NUM_PAIRS], rev[NUM_PAIRS];
    for (int i = 0; i < NUM_PAIRS; i++) {
        a[i] = is_unsigned ? fabs(trunc(lhs_values[i])) : trunc(lhs_values[i]);
        fwd[i] = ref_mod(a[i], s), rev[i] = ref_mod(s, a[i]);
    }
    DeftNDArrayHandle x = make(dtype, 1, SHAPE(NUM_PAIRS), a);
    const char *text = is_unsigned ? "4" : "-4";
    DeftNDArrayHandle m = call1("_mod_scalar", 1, &x, P("scalar", text));
    DeftNDArrayHandle r = call1("_rmod_scalar", 1, &x, P("scalar", text));
    DeftNDArrayHandle m2 = call1("_ModScalar", 1, &x, P("scalar", text));
    DeftNDArrayHandle r2 = call1("_RModScalar", 1, &x, P("scalar", text));
    assert_values(m, NUM_PAIRS, fwd, 0);
    assert_values(r, NUM_PAIRS, rev, 0);
    assert_values(m2, NUM_PAIRS, fwd, 0);
    assert_values(r2, NUM_PAIRS, rev, 0);
    free_all(5, (DeftNDArrayHandle[]){x, m, r, m2, r2});
}
END_TEST

/* What MXNet 1.9.1 printed for the same calls. */
START_TEST(test_mod_mxnet_examples) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(5), VALUES(-7, 7, -7.5, 0, 3));
    DeftNDArrayHandle m = call1("_mod_scalar", 1, &x, P("scalar", "-3"));
    assert_values(m, 5, VALUES(-1, -2, -1.5, 0, 0), 0);
    DeftNDArrayHandle d = make(DEFT_FLOAT32, 1, SHAPE(4), VALUES(-3, 3, 0, 2));
    DeftNDArrayHandle r = call1("_rmod_scalar", 1, &d, P("scalar", "7"));
    assert_values(r, 4, VALUES(-2, 1, 0, 1), 0);
    DeftNDArrayHandle a = make(DEFT_INT32, 1, SHAPE(5), VALUES(5, -5, 5, -5, 3));
    DeftNDArrayHandle b = make(DEFT_INT32, 1, SHAPE(5), VALUES(3, 3, -3, -3, 0));
    DeftNDArrayHandle ab = call1("_mod", 2, (DeftNDArrayHandle[]){a, b}, NO_PARAMS);
    assert_values(ab, 5, VALUES(2, 1, -1, -2, 0), 0);
    /* broadcast_mod's documented example */
    DeftNDArrayHandle eights = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(8, 8, 8, 8, 8, 8));
    DeftNDArrayHandle col = make(DEFT_FLOAT32, 2, SHAPE(2, 1), VALUES(2, 3));
    DeftNDArrayHandle bm = call1("broadcast_mod", 2, (DeftNDArrayHandle[]){eights, col}, NO_PARAMS);
    assert_shape(bm, 2, SHAPE(2, 3));
    assert_values(bm, 6, VALUES(0, 0, 0, 2, 2, 2), 0);
    free_all(10, (DeftNDArrayHandle[]){x, m, d, r, a, b, ab, eights, col, bm});
}
END_TEST

/* NaN and infinities as Python's % has them (NaN for inf mod b, a mod inf keeps a's side). */
START_TEST(test_mod_of_special_values) {
    DeftNDArrayHandle a = make(DEFT_FLOAT64, 1, SHAPE(6), VALUES(NAN, 1, INFINITY, -1, 1, 2));
    DeftNDArrayHandle b =
        make(DEFT_FLOAT64, 1, SHAPE(6), VALUES(2, NAN, 3, INFINITY, -INFINITY, -0.0));
    DeftNDArrayHandle y = call1("_mod", 2, (DeftNDArrayHandle[]){a, b}, NO_PARAMS);
    assert_values(y, 6, VALUES(NAN, NAN, NAN, INFINITY, -INFINITY, 0), 0);
    free_all(3, (DeftNDArrayHandle[]){a, b, y});
}
END_TEST

START_TEST(test_broadcast_mod_against_loops) {
    double a[24], b[4], want[24];
    for (int i = 0; i < 24; i++) a[i] = (i * 7 % 19) - 9.5;
    for (int j = 0; j < 4; j++) b[j] = j % 2 ? -(j + 1.5) : j + 1.25;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                want[(i * 3 + j) * 4 + k] = ref_mod(a[(i * 3 + j) * 4 + k], b[k]);
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 4), a);
    DeftNDArrayHandle y = make(DEFT_FLOAT64, 1, SHAPE(4), b);
    DeftNDArrayHandle z = call1("broadcast_mod", 2, (DeftNDArrayHandle[]){x, y}, NO_PARAMS);
    assert_shape(z, 3, SHAPE(2, 3, 4));
    assert_values(z, 24, want, 0);
    /* and the divisor broadcast on the left: b mod a */
    double back[24];
    for (int n = 0; n < 24; n++) back[n] = ref_mod(b[n % 4], a[n]);
    DeftNDArrayHandle w = call1("broadcast_mod", 2, (DeftNDArrayHandle[]){y, x}, NO_PARAMS);
    assert_values(w, 24, back, 0);
    free_all(4, (DeftNDArrayHandle[]){x, y, z, w});
}
END_TEST

START_TEST(test_mod_rejects_bad_inputs) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, 3), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 2, SHAPE(3, 2), NULL);
    DeftNDArrayHandle i = make(DEFT_INT32, 2, SHAPE(2, 3), NULL);
    DeftNDArrayHandle h = make(DEFT_INT8, 2, SHAPE(2, 3), NULL); /* no int8 kernels */
    ck_assert_call_fails("_mod", 2, ((DeftNDArrayHandle[]){a, b}), NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator '_mod': input 1 has shape (3,2), expected (2,3)");
    ck_assert_call_fails("broadcast_mod", 2, ((DeftNDArrayHandle[]){a, b}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "operator 'broadcast_mod': input shapes (2,3) and (3,2)");
    ck_assert_call_fails("_mod", 2, ((DeftNDArrayHandle[]){a, i}), NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator '_mod'");
    ck_assert_call_fails("_mod_scalar", 1, &h, P("scalar", "2"), DEFT_ERROR_TYPE,
                         "operator '_mod_scalar'");
    ck_assert_call_fails("_rmod_scalar", 1, &a, P("scalar", "two"), DEFT_ERROR_PARSE, "scalar");
    ck_assert_call_fails("_mod", 1, &a, NO_PARAMS, DEFT_ERROR_VALUE, "operator '_mod'");
    free_all(4, (DeftNDArrayHandle[]){a, b, i, h});
}
END_TEST

START_TEST(test_mod_of_zero_size_arrays) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    DeftNDArrayHandle same = call1("_mod", 2, (DeftNDArrayHandle[]){a, a}, NO_PARAMS);
    DeftNDArrayHandle bc = call1("broadcast_mod", 2, (DeftNDArrayHandle[]){a, b}, NO_PARAMS);
    DeftNDArrayHandle s = call1("_rmod_scalar", 1, &a, P("scalar", "3"));
    assert_shape(same, 2, SHAPE(0, 3));
    assert_shape(bc, 2, SHAPE(0, 3));
    assert_shape(s, 2, SHAPE(0, 3));
    free_all(5, (DeftNDArrayHandle[]){a, b, same, bc, s});
}
END_TEST

/* The gradients MXNet gives: 1 for the dividend, -floor(a / b) for the divisor. */
START_TEST(test_mod_gradients_by_hand) {
    DeftNDArrayHandle a = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(5.5, -5.5, 7, -1));
    DeftNDArrayHandle b = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(2, 2, -3, 4));
    DeftNDArrayHandle ga = make(DEFT_FLOAT64, 1, SHAPE(4), NULL);
    DeftNDArrayHandle gb = make(DEFT_FLOAT64, 1, SHAPE(4), NULL);
    ck_assert_ok(DeftAutogradMarkVariables(2, (DeftNDArrayHandle[]){a, b}, NULL,
                                           (DeftNDArrayHandle[]){ga, gb}));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("_mod", 2, (DeftNDArrayHandle[]){a, b}, NO_PARAMS);
    DeftNDArrayHandle r = call1("_rmod_scalar", 1, &b, P("scalar", "9"));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    DeftNDArrayHandle head = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(1, 2, 3, 4));
    ck_assert_ok(DeftAutogradBackward(1, &y, &head, 0, 0));
    assert_values(ga, 4, VALUES(1, 2, 3, 4), 0);
    /* -floor(a / b): -2, 3, 3, 1, times the head */
    assert_values(gb, 4, VALUES(-2, 6, 9, 4), 0);
    ck_assert_ok(DeftAutogradBackward(1, &r, NULL, 0, 0));
    /* 9 mod b: -floor(9 / b) = -4, -4, 3, -2 */
    assert_values(gb, 4, VALUES(-4, -4, 3, -2), 0);
    free_all(7, (DeftNDArrayHandle[]){a, b, ga, gb, y, r, head});
}
END_TEST

static Suite *mod_suite(void) {
    Suite *suite = suite_create("mod ops");
    TCase *tc = tcase_create("mod");
    tcase_add_loop_test(tc, test_mod_matches_the_python_remainder, 0, NUM_ARITH_DTYPES);
    tcase_add_loop_test(tc, test_mod_scalar_forms, 0, NUM_ARITH_DTYPES);
    tcase_add_test(tc, test_mod_mxnet_examples);
    tcase_add_test(tc, test_mod_of_special_values);
    tcase_add_test(tc, test_broadcast_mod_against_loops);
    tcase_add_test(tc, test_mod_rejects_bad_inputs);
    tcase_add_test(tc, test_mod_of_zero_size_arrays);
    tcase_add_test(tc, test_mod_gradients_by_hand);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(mod_suite());
}
