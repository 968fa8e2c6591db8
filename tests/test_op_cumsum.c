/* _np_cumsum (and its legacy name cumsum) and _backward_np_cumsum against plain loops. */
#include "op_helpers.h"

/* The running sums of x (shape dims, ndim) along `axis` (-1: flattened), in `dtype`'s
 * arithmetic: float32 rounds every sum, integers wrap, as the result's dtype does. */
static void ref_cumsum(const double *x, int ndim, const int64_t *dims, int axis, int dtype,
                       bool reverse, double *y) {
    int64_t outer = 1, middle = count_of(ndim, dims), trailing = 1;
    if (axis >= 0) {
        middle = dims[axis];
        for (int d = 0; d < axis; d++) outer *= dims[d];
        for (int d = axis + 1; d < ndim; d++) trailing *= dims[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t t = 0; t < trailing; t++) {
            double acc = 0;
            for (int64_t s = 0; s < middle; s++) {
                int64_t j = reverse ? middle - 1 - s : s, at = (o * middle + j) * trailing + t;
                acc = s == 0 ? x[at] : acc + x[at];
                if (dtype == DEFT_FLOAT32) acc = (float)acc;
                if (dtype == DEFT_INT32) acc = (int32_t)(uint32_t)(int64_t)acc;
                if (dtype == DEFT_UINT8) acc = (uint8_t)(int64_t)acc;
                if (dtype == DEFT_INT8) acc = (int8_t)(uint8_t)(int64_t)acc;
                y[at] = acc;
            }
        }
}

static double *values_for(int dtype, int64_t n, unsigned seed) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        double u = (double)(seed >> 8) / (1u << 24);
        v[i] = dtype == DEFT_FLOAT32 || dtype == DEFT_FLOAT64 ? 4 * u - 2
               : dtype == DEFT_UINT8                          ? floor(60 * u)
               : dtype == DEFT_BOOL                           ? u < 0.5
                                                              : floor(60 * u) - 30;
    }
    return v;
}

static void check_cumsum(const char *op, int dtype, int ndim, const int64_t *dims,
                         const char *axis_text, int axis) {
    int64_t n = count_of(ndim, dims);
    double *x = values_for(dtype, n, (unsigned)(n * 31 + axis + 7)),
           *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    /* the sums run in the result's dtype: bool becomes int64 */
    int out_dtype = dtype == DEFT_BOOL ? DEFT_INT64 : dtype;
    ref_cumsum(x, ndim, dims, axis, out_dtype, false, want);
    DeftNDArrayHandle a = make(dtype, ndim, dims, x);
    DeftNDArrayHandle y = call1(op, 1, &a, axis_text ? P("axis", axis_text) : NO_PARAMS);
    if (axis >= 0)
        assert_shape(y, ndim, dims);
    else
        assert_shape(y, 1, SHAPE(n));
    int got;
    ck_assert_ok(DeftNDArrayGetDType(y, &got));
    ck_assert_int_eq(got, out_dtype);
    assert_values(y, n, want, 0);
    free(x), free(want);
    free_all(2, (DeftNDArrayHandle[]){a, y});
}

static const int cumsum_dtypes[] = {DEFT_FLOAT32, DEFT_FLOAT64, DEFT_INT32, DEFT_INT64,
                                    DEFT_UINT8,   DEFT_INT8,    DEFT_BOOL};

/* Every axis (as given and negative) and the flattened sums, in every input dtype; the
 * wide shapes take the CPU kernel's column chunks and its threads. */
START_TEST(test_cumsum_matches_loops) {
    int dtype = cumsum_dtypes[_i / 2];
    const char *op = _i % 2 ? "cumsum" : "_np_cumsum"; /* the legacy name is the same operator */
    check_cumsum(op, dtype, 3, SHAPE(2, 3, 4), NULL, -1);
    check_cumsum(op, dtype, 3, SHAPE(2, 3, 4), "0", 0);
    check_cumsum(op, dtype, 3, SHAPE(2, 3, 4), "1", 1);
    check_cumsum(op, dtype, 3, SHAPE(2, 3, 4), "-1", 2);
    check_cumsum(op, dtype, 3, SHAPE(2, 3, 4), "-3", 0);
    check_cumsum(op, dtype, 1, SHAPE(7), "0", 0);
    check_cumsum(op, dtype, 3, SHAPE(3, 5, 2500), "1", 1);
    check_cumsum(op, dtype, 2, SHAPE(40000, 3), "0", 0);
    check_cumsum(op, dtype, 2, SHAPE(9, 5000), "-1", 1);
}
END_TEST

/* dtype: the result's and the accumulator's (float input truncated into int32; int32 summed
 * in float64; float16 rounds each sum, exact on small whole numbers). */
START_TEST(test_cumsum_dtype_parameter) {
    DeftNDArrayHandle f = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1.5, -2.7, 3.9, 0.5, 0.5, 0.5));
    DeftNDArrayHandle i = call1("_np_cumsum", 1, &f, P("axis", "1", "dtype", "int32"));
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(i, &dtype));
    ck_assert_int_eq(dtype, DEFT_INT32);
    assert_values(i, 6, VALUES(1, -1, 2, 0, 0, 0), 0);
    DeftNDArrayHandle big = make(DEFT_INT32, 1, SHAPE(3), VALUES(2147483647, 2147483647, 5));
    DeftNDArrayHandle d = call1("_np_cumsum", 1, &big, P("dtype", "float64"));
    assert_values(d, 3, VALUES(2147483647.0, 4294967294.0, 4294967299.0), 0);
    DeftNDArrayHandle wrapped = call1("_np_cumsum", 1, &big, NO_PARAMS);
    assert_values(wrapped, 3, VALUES(2147483647, -2, 3), 0);
    DeftNDArrayHandle small = make(DEFT_INT8, 1, SHAPE(4), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle h = call1("_np_cumsum", 1, &small, P("dtype", "float16"));
    ck_assert_ok(DeftNDArrayGetDType(h, &dtype));
    ck_assert_int_eq(dtype, DEFT_FLOAT16);
    DeftNDArrayHandle h32 = call1("Cast", 1, &h, P("dtype", "float32"));
    assert_values(h32, 4, VALUES(1, 3, 6, 10), 0);
    DeftNDArrayHandle i8 = call1("_np_cumsum", 1, &f, P("dtype", "int8", "axis", "None"));
    ck_assert_ok(DeftNDArrayGetDType(i8, &dtype));
    ck_assert_int_eq(dtype, DEFT_INT8);
    assert_shape(i8, 1, SHAPE(6));
    free_all(9, (DeftNDArrayHandle[]){f, i, big, d, wrapped, small, h, h32, i8});
}
END_TEST

START_TEST(test_cumsum_rejects_bad_parameters) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 3), NULL);
    ck_assert_call_fails("_np_cumsum", 1, &x, P("axis", "2"), DEFT_ERROR_INDEX,
                         "operator '_np_cumsum': axis is 2, expected an axis in [-2, 2)");
    ck_assert_call_fails("_np_cumsum", 1, &x, P("axis", "-3"), DEFT_ERROR_INDEX, "axis is -3");
    ck_assert_call_fails("cumsum", 1, &x, P("dtype", "uint8"), DEFT_ERROR_PARSE, "dtype");
    ck_assert_call_fails("_np_cumsum", 1, &x, P("axis", "1.5"), DEFT_ERROR_PARSE, "axis");
    DeftNDArrayHandle bf = make(DEFT_BFLOAT16, 1, SHAPE(3), NULL);
    ck_assert_call_fails("_np_cumsum", 1, &bf, NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator '_np_cumsum': input 0 (a) has dtype bfloat16");
    DeftNDArrayHandle scalar = make(DEFT_FLOAT32, 0, NULL, VALUES(4));
    ck_assert_call_fails("_np_cumsum", 1, &scalar, P("axis", "0"), DEFT_ERROR_INDEX,
                         "axis is 0, expected an axis in [0, 0)");
    /* the backward operator checks that its out_grad fits the forward's result */
    DeftNDArrayHandle g = make(DEFT_FLOAT32, 1, SHAPE(5), NULL);
    ck_assert_call_fails("_backward_np_cumsum", 2, ((DeftNDArrayHandle[]){g, x}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "operator '_backward_np_cumsum'");
    free_all(4, (DeftNDArrayHandle[]){x, bf, scalar, g});
}
END_TEST

START_TEST(test_cumsum_of_zero_size_and_scalar_arrays) {
    DeftNDArrayHandle rows = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle r0 = call1("_np_cumsum", 1, &rows, P("axis", "0"));
    DeftNDArrayHandle r1 = call1("_np_cumsum", 1, &rows, P("axis", "1"));
    DeftNDArrayHandle flat = call1("_np_cumsum", 1, &rows, NO_PARAMS);
    assert_shape(r0, 2, SHAPE(0, 3));
    assert_shape(r1, 2, SHAPE(0, 3));
    assert_shape(flat, 1, SHAPE(0));
    DeftNDArrayHandle scalar = make(DEFT_FLOAT64, 0, NULL, VALUES(4.5));
    DeftNDArrayHandle s = call1("_np_cumsum", 1, &scalar, NO_PARAMS);
    assert_shape(s, 1, SHAPE(1));
    assert_values(s, 1, VALUES(4.5), 0);
    DeftNDArrayHandle g =
        call1("_backward_np_cumsum", 2, (DeftNDArrayHandle[]){flat, rows}, NO_PARAMS);
    assert_shape(g, 2, SHAPE(0, 3));
    free_all(7, (DeftNDArrayHandle[]){rows, r0, r1, flat, scalar, s, g});
}
END_TEST

/* The gradient sums the head from the axis' end, in the input's shape and dtype. */
START_TEST(test_cumsum_gradient_sums_from_the_end) {
    const int64_t dims[3] = {2, 3, 2};
    double head[12], want[12];
    for (int i = 0; i < 12; i++) head[i] = i * 0.5 - 2;
    ref_cumsum(head, 3, dims, 1, DEFT_FLOAT32, true, want);
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 3, dims, head);
    DeftNDArrayHandle gx = make(DEFT_FLOAT32, 3, dims, NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &gx));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("_np_cumsum", 1, &x, P("axis", "1", "dtype", "float64"));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    DeftNDArrayHandle h = make(DEFT_FLOAT64, 3, dims, head);
    ck_assert_ok(DeftAutogradBackward(1, &y, &h, 0, 0));
    assert_values(gx, 12, want, 0);
    /* flattened: the head has the result's shape (12,), the gradient x's */
    ref_cumsum(head, 1, SHAPE(12), 0, DEFT_FLOAT32, true, want);
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle flat = call1("_np_cumsum", 1, &x, NO_PARAMS);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    DeftNDArrayHandle hf = make(DEFT_FLOAT32, 1, SHAPE(12), head);
    ck_assert_ok(DeftAutogradBackward(1, &flat, &hf, 0, 0));
    assert_shape(gx, 3, dims);
    assert_values(gx, 12, want, 0);
    free_all(6, (DeftNDArrayHandle[]){x, gx, y, h, flat, hf});
}
END_TEST

static Suite *cumsum_suite(void) {
    Suite *suite = suite_create("cumsum");
    TCase *tc = tcase_create("cumsum");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_cumsum_matches_loops, 0, 2 * 7);
    tcase_add_test(tc, test_cumsum_dtype_parameter);
    tcase_add_test(tc, test_cumsum_rejects_bad_parameters);
    tcase_add_test(tc, test_cumsum_of_zero_size_and_scalar_arrays);
    tcase_add_test(tc, test_cumsum_gradient_sums_from_the_end);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(cumsum_suite());
}
