/*
 * topk, sort and argsort against a plain selection reference: repeatedly
 * take the best element not yet taken, the earliest of equals first (so
 * ties keep their order, which deft promises and MXNet leaves open).
 */
#include "op_helpers.h"

/* Whether a comes before b in the order asked (NaN above every number). */
static bool better(double a, double b, bool ascend) {
    if (isnan(a) || isnan(b)) return ascend ? isnan(b) && !isnan(a) : isnan(a) && !isnan(b);
    return ascend ? a < b : a > b;
}

/* The reference: x viewed as (outer, n, inner); idx[(o, r, i)] for r < k. */
static void select_reference(const double *x, int64_t outer, int64_t n, int64_t inner, int64_t k,
                             bool ascend, int64_t *idx) {
    bool *taken = calloc((size_t)n + 1, 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            memset(taken, 0, (size_t)n + 1);
            for (int64_t r = 0; r < k; r++) {
                int64_t best = -1;
                for (int64_t j = 0; j < n; j++) {
                    double v = x[(o * n + j) * inner + i];
                    if (!taken[j] && (best < 0 || better(v, x[(o * n + best) * inner + i], ascend)))
                        best = j;
                }
                taken[best] = true;
                idx[(o * k + r) * inner + i] = best;
            }
        }
    free(taken);
}

static const int64_t dims3[3] = {3, 4, 5};

/* Every axis (and None), both orders, k of 1, 3 and all, every ret_typ, on data with ties. */
START_TEST(test_topk_matches_the_selection_reference) {
    double x[60];
    uint64_t state = 7;
    for (int j = 0; j < 60; j++) { /* a few distinct values: plenty of ties */
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x[j] = (double)((state >> 33) % 4) - 1.5;
    }
    int dtype = _i % 2 ? DEFT_FLOAT64 : DEFT_FLOAT32;
    DeftNDArrayHandle a = make(dtype, 3, dims3, x);
    const char *axes[] = {"0", "1", "2", "-1", "None"};
    for (int ax = 0; ax < 5; ax++)
        for (int ascend = 0; ascend < 2; ascend++)
            for (int kk = 0; kk < 3; kk++) {
                int axis = ax == 4 ? -1 : (ax == 3 ? 2 : ax);
                int64_t outer = 1, inner = 1, n = ax == 4 ? 60 : dims3[axis];
                for (int d = 0; ax < 4 && d < axis; d++) outer *= dims3[d];
                for (int d = axis + 1; ax < 4 && d < 3; d++) inner *= dims3[d];
                int64_t k = kk == 0 ? 1 : kk == 1 ? 3 : n;
                char ktext[8];
                snprintf(ktext, sizeof ktext, "%d", kk == 2 ? 0 : (int)k);
                int64_t *idx = malloc(sizeof(int64_t) * (size_t)(outer * k * inner));
                select_reference(x, outer, n, inner, k, ascend, idx);
                int64_t count = outer * k * inner;
                double *want_v = malloc(sizeof(double) * (size_t)count),
                       *want_i = malloc(sizeof(double) * (size_t)count);
                double mask[60] = {0};
                for (int64_t at = 0; at < count; at++) {
                    int64_t o = at / (k * inner), i = at % inner, j = idx[at];
                    want_v[at] = x[(o * n + j) * inner + i];
                    want_i[at] = (double)j;
                    mask[(o * n + j) * inner + i] = 1;
                }
                const char *asc = ascend ? "true" : "false";
                DeftNDArrayHandle out[2] = {NULL, NULL};
                int nout = 2;
                ck_assert_ok(
                    call("topk", 1, &a, &nout, out,
                         P("axis", axes[ax], "k", ktext, "ret_typ", "both", "is_ascend", asc)));
                ck_assert_int_eq(nout, 2);
                assert_values(out[0], count, want_v, 0);
                assert_values(out[1], count, want_i, 0);
                DeftNDArrayHandle v =
                    call1("topk", 1, &a,
                          P("axis", axes[ax], "k", ktext, "ret_typ", "value", "is_ascend", asc));
                DeftNDArrayHandle ind =
                    call1("topk", 1, &a,
                          P("axis", axes[ax], "k", ktext, "is_ascend", asc, "dtype", "int32"));
                DeftNDArrayHandle m =
                    call1("topk", 1, &a,
                          P("axis", axes[ax], "k", ktext, "ret_typ", "mask", "is_ascend", asc));
                assert_values(v, count, want_v, 0);
                assert_values(ind, count, want_i, 0);
                assert_values(m, 60, mask, 0);
                assert_shape(m, 3, dims3);
                int got;
                ck_assert_ok(DeftNDArrayGetDType(ind, &got));
                ck_assert_int_eq(got, DEFT_INT32);
                ck_assert_ok(DeftNDArrayGetDType(out[1], &got));
                ck_assert_int_eq(got, DEFT_FLOAT32); /* MXNet's default index dtype */
                if (kk == 2) {                       /* k < 1 selects all: sort and argsort */
                    const char *sasc = ascend ? "1" : "0";
                    DeftNDArrayHandle s =
                        call1("sort", 1, &a, P("axis", axes[ax], "is_ascend", sasc));
                    DeftNDArrayHandle as =
                        call1("argsort", 1, &a, P("axis", axes[ax], "is_ascend", sasc));
                    assert_values(s, count, want_v, 0);
                    assert_values(as, count, want_i, 0);
                    free_all(2, (DeftNDArrayHandle[]){s, as});
                }
                free_all(5, (DeftNDArrayHandle[]){out[0], out[1], v, ind, m});
                free(idx), free(want_v), free(want_i);
            }
    ck_assert_ok(DeftNDArrayFree(a));
}
END_TEST

/* MXNet's examples, shapes and dtypes of the results. */
START_TEST(test_ordering_examples_and_shapes) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(0.3, 0.2, 0.4, 0.1, 0.3, 0.2));
    DeftNDArrayHandle t1 = call1("topk", 1, &x, NO_PARAMS);
    assert_shape(t1, 2, SHAPE(2, 1));
    assert_values(t1, 2, VALUES(2, 1), 0);
    DeftNDArrayHandle t2 = call1("topk", 1, &x, P("axis", "0", "ret_typ", "value", "k", "2"));
    assert_values(t2, 6, VALUES(0.3, 0.3, 0.4, 0.1, 0.2, 0.2), 1e-7);
    DeftNDArrayHandle t3 = call1("topk", 1, &x, P("axis", "None", "k", "2"));
    assert_shape(t3, 1, SHAPE(2));
    assert_values(t3, 2, VALUES(2, 0), 0);
    DeftNDArrayHandle as = call1("argsort", 1, &x, P("axis", "None"));
    assert_values(as, 6, VALUES(3, 1, 5, 0, 4, 2), 0);
    DeftNDArrayHandle as0 = call1("argsort", 1, &x, P("axis", "0", "dtype", "int64"));
    assert_values(as0, 6, VALUES(1, 0, 1, 0, 1, 0), 0);
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(as0, &dtype));
    ck_assert_int_eq(dtype, DEFT_INT64);
    /* integers sort exactly, beyond what a double holds */
    DeftNDArrayHandle big = make(DEFT_INT64, 1, SHAPE(3), NULL);
    int64_t raw[3] = {(1ll << 60) + 1, 1ll << 60, -5};
    ck_assert_ok(DeftNDArrayCopyFromHost(big, raw, sizeof raw));
    DeftNDArrayHandle bs = call1("argsort", 1, &big, NO_PARAMS);
    assert_values(bs, 3, VALUES(2, 1, 0), 0);
    /* NaN sorts above every number */
    DeftNDArrayHandle nan = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(3, NAN, -1, 2));
    DeftNDArrayHandle up = call1("sort", 1, &nan, NO_PARAMS);
    DeftNDArrayHandle down = call1("sort", 1, &nan, P("is_ascend", "false"));
    assert_values(up, 4, VALUES(-1, 2, 3, NAN), 0);
    assert_values(down, 4, VALUES(NAN, 3, 2, -1), 0);
    free_all(6, (DeftNDArrayHandle[]){x, t1, t2, t3, as, as0});
    free_all(5, (DeftNDArrayHandle[]){big, bs, nan, up, down});
}
END_TEST

START_TEST(test_ordering_rejects_bad_parameters) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 4), NULL);
    ck_assert_call_fails("topk", 1, &x, P("k", "5"), DEFT_ERROR_VALUE,
                         "operator 'topk': k is 5, more than the 4 elements along the axis");
    ck_assert_call_fails("topk", 1, &x, P("axis", "None", "k", "9"), DEFT_ERROR_VALUE,
                         "more than the 8 elements of the flattened array");
    ck_assert_call_fails("topk", 1, &x, P("axis", "2"), DEFT_ERROR_INDEX,
                         "axis is 2, expected an axis in [-2, 2)");
    ck_assert_call_fails("topk", 1, &x, P("ret_typ", "values"), DEFT_ERROR_PARSE, "ret_typ");
    ck_assert_call_fails("argsort", 1, &x, P("dtype", "int8"), DEFT_ERROR_TYPE,
                         "operator 'argsort': dtype is int8, expected uint8, int32, int64, "
                         "float16, float32 or float64");
    DeftNDArrayHandle wide = make(DEFT_FLOAT32, 1, SHAPE(300), NULL);
    ck_assert_call_fails("argsort", 1, &wide, P("dtype", "uint8"), DEFT_ERROR_VALUE,
                         "dtype uint8 cannot hold every index of 300 elements exactly");
    DeftNDArrayHandle mask = call1("topk", 1, &wide, P("ret_typ", "mask", "dtype", "uint8"));
    ck_assert_call_fails("sort", 1, &x, P("axis", "-3"), DEFT_ERROR_INDEX, "axis is -3");
    /* _backward_topk checks the indices it is given */
    DeftNDArrayHandle g = make(DEFT_FLOAT32, 2, SHAPE(2, 1), VALUES(1, 1));
    DeftNDArrayHandle bad = make(DEFT_FLOAT32, 2, SHAPE(2, 1), VALUES(1, 4));
    DeftNDArrayHandle half = make(DEFT_FLOAT32, 2, SHAPE(2, 1), VALUES(0.5, 1));
    ck_assert_run_fails("_backward_topk", 3, ((DeftNDArrayHandle[]){g, bad, x}), NO_PARAMS,
                        DEFT_ERROR_INDEX,
                        "operator '_backward_topk': input 1 (indices) has 4 at position 1, "
                        "expected a whole number in [0, 3]");
    ck_assert_run_fails("_backward_topk", 3, ((DeftNDArrayHandle[]){g, half, x}), NO_PARAMS,
                        DEFT_ERROR_VALUE, "has 0.5 at position 0, expected a whole number");
    free_all(6, (DeftNDArrayHandle[]){x, wide, mask, g, bad, half});
}
END_TEST

START_TEST(test_ordering_of_zero_size_arrays) {
    DeftNDArrayHandle empty_rows = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle t = call1("topk", 1, &empty_rows, P("k", "2", "ret_typ", "value"));
    assert_shape(t, 2, SHAPE(0, 2));
    DeftNDArrayHandle empty_axis = make(DEFT_FLOAT32, 2, SHAPE(3, 0), NULL);
    DeftNDArrayHandle s = call1("sort", 1, &empty_axis, NO_PARAMS);
    assert_shape(s, 2, SHAPE(3, 0));
    DeftNDArrayHandle m = call1("topk", 1, &empty_axis, P("k", "0", "ret_typ", "mask"));
    assert_shape(m, 2, SHAPE(3, 0));
    ck_assert_call_fails("topk", 1, &empty_axis, NO_PARAMS, DEFT_ERROR_VALUE,
                         "k is 1, more than the 0 elements along the axis");
    free_all(5, (DeftNDArrayHandle[]){empty_rows, t, empty_axis, s, m});
}
END_TEST

/* ret_typ=both: the values' gradient goes back to where they came from (its indices have none). */
START_TEST(test_topk_both_gradient_scatters_back) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(1, 5, 3, 9, 7, 8));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 2, SHAPE(2, 3), NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle out[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("topk", 1, &x, &nout, out, P("k", "2", "ret_typ", "both")));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    DeftNDArrayHandle head = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(10, 20, 30, 40));
    ck_assert_ok(DeftAutogradBackward(1, &out[0], &head, 0, 0));
    assert_values(g, 6, VALUES(0, 10, 20, 30, 0, 40), 0);
    free_all(5, (DeftNDArrayHandle[]){x, g, out[0], out[1], head});
}
END_TEST

static Suite *sort_suite(void) {
    Suite *suite = suite_create("ordering ops");
    TCase *tc = tcase_create("sort");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_topk_matches_the_selection_reference, 0, 2);
    tcase_add_test(tc, test_ordering_examples_and_shapes);
    tcase_add_test(tc, test_ordering_rejects_bad_parameters);
    tcase_add_test(tc, test_ordering_of_zero_size_arrays);
    tcase_add_test(tc, test_topk_both_gradient_scatters_back);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(sort_suite());
}
