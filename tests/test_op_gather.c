/* pick, gather_nd, scatter_nd and slice_like against index loops and MXNet's examples. */
#include "op_helpers.h"

static const double m32[6] = {1, 2, 3, 4, 5, 6}; /* MXNet's [[1, 2], [3, 4], [5, 6]] */

/* Every axis, keepdims or not, clip and wrap, with indices out of range both ways. */
START_TEST(test_pick_matches_index_loops) {
    const int64_t dims[3] = {3, 4, 5};
    double x[60], idx[20];
    for (int j = 0; j < 60; j++) x[j] = j * 7 % 23 - 11;
    int index_dtype = _i % 2 ? DEFT_INT64 : DEFT_FLOAT32,
        data_dtype = _i / 2 ? DEFT_INT32 : DEFT_FLOAT64;
    DeftNDArrayHandle data = make(data_dtype, 3, dims, x);
    for (int axis = 0; axis < 3; axis++)
        for (int wrap = 0; wrap < 2; wrap++)
            for (int keep = 0; keep < 2; keep++) {
                int64_t outer = 1, inner = 1, size = dims[axis], rshape[3];
                int rdim = 0;
                for (int d = 0; d < 3; d++) {
                    if (d < axis) outer *= dims[d];
                    if (d > axis) inner *= dims[d];
                    if (d != axis || keep) rshape[rdim++] = d == axis ? 1 : dims[d];
                }
                double want[20];
                for (int64_t at = 0; at < outer * inner; at++) {
                    idx[at] = (double)(at * 5 % 15) - 6; /* -6 .. 8 */
                    int64_t i = (int64_t)idx[at];
                    i = wrap ? ((i % size) + size) % size : (i < 0 ? 0 : i >= size ? size - 1 : i);
                    want[at] = x[(at / inner * size + i) * inner + at % inner];
                }
                DeftNDArrayHandle index = make(index_dtype, rdim, rshape, idx);
                char ax[12]; /* room for any int (gcc -O1 checks the range) */
                snprintf(ax, sizeof ax, "%d", axis - (keep ? 3 : 0)); /* negative axes too */
                DeftNDArrayHandle out = call1("pick", 2, ((DeftNDArrayHandle[]){data, index}),
                                              P("axis", ax, "keepdims", keep ? "true" : "false",
                                                "mode", wrap ? "wrap" : "clip"));
                assert_shape(out, rdim, rshape);
                assert_values(out, outer * inner, want, 0);
                ck_assert_ok(DeftNDArrayFree(out));
                ck_assert_ok(DeftNDArrayFree(index));
            }
    ck_assert_ok(DeftNDArrayFree(data));
}
END_TEST

START_TEST(test_pick_examples_and_errors) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(3, 2), m32);
    DeftNDArrayHandle y0 = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0, 1));
    DeftNDArrayHandle y1 = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(0, 1, 0));
    DeftNDArrayHandle yw = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(2, -1, -2));
    DeftNDArrayHandle yk = make(DEFT_FLOAT32, 2, SHAPE(3, 1), VALUES(1, 0, 2));
    DeftNDArrayHandle a = call1("pick", 2, ((DeftNDArrayHandle[]){x, y0}), P("axis", "0"));
    DeftNDArrayHandle b = call1("pick", 2, ((DeftNDArrayHandle[]){x, y1}), P("axis", "1"));
    DeftNDArrayHandle c =
        call1("pick", 2, ((DeftNDArrayHandle[]){x, yw}), P("axis", "1", "mode", "wrap"));
    DeftNDArrayHandle d = call1("choose_element_0index", 2, ((DeftNDArrayHandle[]){x, yk}),
                                P("axis", "1", "keepdims", "True"));
    assert_values(a, 2, VALUES(1, 4), 0);
    assert_values(b, 3, VALUES(1, 4, 5), 0);
    assert_values(c, 3, VALUES(1, 4, 5), 0);
    assert_shape(d, 2, SHAPE(3, 1));
    assert_values(d, 3, VALUES(2, 3, 6), 0);
    DeftNDArrayHandle half = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(0, 0.5, 1));
    DeftNDArrayHandle u8 = make(DEFT_UINT8, 1, SHAPE(3), VALUES(0, 1, 1));
    ck_assert_call_fails("pick", 2, ((DeftNDArrayHandle[]){x, y1}), P("axis", "None"),
                         DEFT_ERROR_VALUE, "operator 'pick': axis=None is not supported");
    ck_assert_call_fails("pick", 2, ((DeftNDArrayHandle[]){x, y0}), P("axis", "1"),
                         DEFT_ERROR_VALUE,
                         "operator 'pick': input 1 (index) has shape (2,), expected (3,)");
    ck_assert_call_fails("pick", 2, ((DeftNDArrayHandle[]){x, y1}), P("axis", "2"),
                         DEFT_ERROR_INDEX, "axis is 2, expected an axis in [-2, 2)");
    ck_assert_call_fails("pick", 2, ((DeftNDArrayHandle[]){x, u8}), P("axis", "1"), DEFT_ERROR_TYPE,
                         "input 1 holds indices and has dtype uint8");
    ck_assert_call_fails("pick", 2, ((DeftNDArrayHandle[]){x, y1}), P("mode", "raise"),
                         DEFT_ERROR_PARSE, "mode");
    ck_assert_run_fails("pick", 2, ((DeftNDArrayHandle[]){x, half}), P("axis", "1"),
                        DEFT_ERROR_VALUE,
                        "operator 'pick': input 1 (index) has 0.5 at position 1, expected a "
                        "whole number");
    /* zero-size */
    DeftNDArrayHandle none = make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL);
    DeftNDArrayHandle no_index = make(DEFT_FLOAT32, 1, SHAPE(0), NULL);
    DeftNDArrayHandle e = call1("pick", 2, ((DeftNDArrayHandle[]){none, no_index}), NO_PARAMS);
    assert_shape(e, 1, SHAPE(0));
    DeftNDArrayHandle empty_axis = make(DEFT_FLOAT32, 2, SHAPE(3, 0), NULL);
    ck_assert_call_fails("pick", 2, ((DeftNDArrayHandle[]){empty_axis, y1}), NO_PARAMS,
                         DEFT_ERROR_INDEX, "cannot pick from axis 1 of size 0");
    free_all(9, (DeftNDArrayHandle[]){x, y0, y1, yw, yk, a, b, c, d});
    free_all(6, (DeftNDArrayHandle[]){half, u8, none, no_index, e, empty_axis});
}
END_TEST

/* gather_nd against loops (negative indices count from the end), and scatter_nd undoing it. */
START_TEST(test_gather_nd_and_scatter_nd_match_loops) {
    double x[24], idx[10];
    for (int j = 0; j < 24; j++) x[j] = j * 5 % 13 + 0.5;
    const int64_t cols[5][2] = {{0, 1}, {-1, 3}, {2, -4}, {1, 0}, {-3, 2}}; /* all distinct */
    for (int c = 0; c < 5; c++) idx[c] = (double)cols[c][0], idx[5 + c] = (double)cols[c][1];
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 3, SHAPE(3, 4, 2), x);
    DeftNDArrayHandle indices = make(_i ? DEFT_INT32 : DEFT_FLOAT32, 2, SHAPE(2, 5), idx);
    double want[10], scattered[24] = {0};
    for (int c = 0; c < 5; c++) {
        int64_t i = (cols[c][0] + 3) % 3, j = (cols[c][1] + 4) % 4;
        for (int k = 0; k < 2; k++) {
            want[c * 2 + k] = x[(i * 4 + j) * 2 + k];
            scattered[(i * 4 + j) * 2 + k] = want[c * 2 + k];
        }
    }
    DeftNDArrayHandle g = call1("gather_nd", 2, ((DeftNDArrayHandle[]){data, indices}), NO_PARAMS);
    assert_shape(g, 2, SHAPE(5, 2));
    assert_values(g, 10, want, 0);
    DeftNDArrayHandle s =
        call1("scatter_nd", 2, ((DeftNDArrayHandle[]){g, indices}), P("shape", "(3,4,2)"));
    assert_values(s, 24, scattered, 0);
    free_all(4, (DeftNDArrayHandle[]){data, indices, g, s});
}
END_TEST

START_TEST(test_nd_examples_and_errors) {
    DeftNDArrayHandle d2 = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(0, 1, 2, 3));
    DeftNDArrayHandle i2 = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 1, 0, 0, 1, 0));
    DeftNDArrayHandle d3 = make(DEFT_FLOAT32, 3, SHAPE(2, 2, 2), VALUES(1, 2, 3, 4, 5, 6, 7, 8));
    DeftNDArrayHandle i3 = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(0, 1, 1, 0));
    DeftNDArrayHandle a = call1("gather_nd", 2, ((DeftNDArrayHandle[]){d2, i2}), NO_PARAMS);
    DeftNDArrayHandle b = call1("gather_nd", 2, ((DeftNDArrayHandle[]){d3, i3}), NO_PARAMS);
    assert_values(a, 3, VALUES(2, 3, 0), 0);
    assert_shape(b, 2, SHAPE(2, 2));
    assert_values(b, 4, VALUES(3, 4, 5, 6), 0);
    DeftNDArrayHandle v = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(2, 3, 0));
    DeftNDArrayHandle s =
        call1("scatter_nd", 2, ((DeftNDArrayHandle[]){v, i2}), P("shape", "(2,2)"));
    assert_values(s, 4, VALUES(0, 0, 2, 3), 0);
    DeftNDArrayHandle i4 = make(DEFT_INT64, 2, SHAPE(2, 2), VALUES(0, 1, 1, 1));
    DeftNDArrayHandle s4 =
        call1("scatter_nd", 2, ((DeftNDArrayHandle[]){d3, i4}), P("shape", "(2,2,2,2)"));
    assert_values(s4, 16, VALUES(0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8), 0);
    /* gather_nd's gradient adds where scatter_nd would overwrite */
    DeftNDArrayHandle dup = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 1, 0, 1, 1, 0));
    DeftNDArrayHandle acc =
        call1("_backward_gather_nd", 2, ((DeftNDArrayHandle[]){v, dup}), P("shape", "(2,2)"));
    assert_values(acc, 4, VALUES(0, 0, 0, 5), 0);
    free_all(11, (DeftNDArrayHandle[]){d2, i2, d3, i3, a, b, v, s, i4, s4, dup});
    free_all(1, &acc);

    DeftNDArrayHandle data = make(DEFT_FLOAT32, 2, SHAPE(3, 2), NULL);
    DeftNDArrayHandle flat = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0, 1));
    DeftNDArrayHandle deep = make(DEFT_FLOAT32, 2, SHAPE(3, 1), VALUES(0, 0, 0));
    DeftNDArrayHandle far = make(DEFT_FLOAT32, 2, SHAPE(1, 3), VALUES(0, -3, 3));
    DeftNDArrayHandle frac = make(DEFT_FLOAT64, 2, SHAPE(2, 1), VALUES(1, 1.25));
    ck_assert_call_fails("gather_nd", 2, ((DeftNDArrayHandle[]){data, flat}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "operator 'gather_nd': input 1 (indices) has 1 dimensions, expected at "
                         "least 2");
    ck_assert_call_fails("gather_nd", 2, ((DeftNDArrayHandle[]){data, deep}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "addresses 3 axes (its first dimension), expected 1 to 2");
    ck_assert_run_fails("gather_nd", 2, ((DeftNDArrayHandle[]){data, far}), NO_PARAMS,
                        DEFT_ERROR_INDEX,
                        "operator 'gather_nd': input 1 (indices) has 3 at position 2, expected "
                        "a whole number in [-3, 2]");
    ck_assert_run_fails("gather_nd", 2, ((DeftNDArrayHandle[]){data, frac}), NO_PARAMS,
                        DEFT_ERROR_VALUE, "has 1.25 at position 1, expected a whole number");
    ck_assert_call_fails("scatter_nd", 2, ((DeftNDArrayHandle[]){data, far}), P("shape", "(3,4)"),
                         DEFT_ERROR_VALUE,
                         "operator 'scatter_nd': input 0 (data) has shape (3,2), expected (3,4) "
                         "for indices of shape (1,3) and a result of shape (3,4)");
    ck_assert_call_fails("scatter_nd", 2, ((DeftNDArrayHandle[]){flat, flat}), P("shape", "(2,)"),
                         DEFT_ERROR_VALUE, "has 1 dimensions, expected at least 2");
    ck_assert_call_fails("scatter_nd", 2, ((DeftNDArrayHandle[]){data, far}), P("shape", "(3,-2)"),
                         DEFT_ERROR_VALUE, "shape[1] is -2, expected >= 0");
    ck_assert_call_fails("scatter_nd", 2, ((DeftNDArrayHandle[]){data, far}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "shape");
    DeftNDArrayHandle three = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    ck_assert_run_fails("scatter_nd", 2, ((DeftNDArrayHandle[]){three, far}), P("shape", "(3,)"),
                        DEFT_ERROR_INDEX,
                        "has 3 at position 2, expected a whole number in [-3, 2]");
    /* zero-size: no columns, or nothing to scatter */
    DeftNDArrayHandle none = make(DEFT_FLOAT32, 2, SHAPE(2, 0), NULL);
    DeftNDArrayHandle g0 = call1("gather_nd", 2, ((DeftNDArrayHandle[]){data, none}), NO_PARAMS);
    assert_shape(g0, 1, SHAPE(0));
    DeftNDArrayHandle empty = make(DEFT_FLOAT32, 1, SHAPE(0), NULL);
    DeftNDArrayHandle s0 =
        call1("scatter_nd", 2, ((DeftNDArrayHandle[]){empty, none}), P("shape", "(3,2)"));
    assert_values(s0, 6, VALUES(0, 0, 0, 0, 0, 0), 0);
    free_all(10, (DeftNDArrayHandle[]){data, flat, deep, far, frac, three, none, g0, empty, s0});
}
END_TEST

/* _scatter_set_nd: a new array or data itself written, and the value checked against indices. */
START_TEST(test_scatter_set_nd_writes_the_addressed_slices) {
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 2, SHAPE(3, 2), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle rows = make(DEFT_INT64, 2, SHAPE(1, 2), VALUES(-1, 0)); /* rows 2 and 0 */
    DeftNDArrayHandle value = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(7, 8, 9, 10));
    DeftNDArrayHandle fresh =
        call1("_scatter_set_nd", 3, ((DeftNDArrayHandle[]){data, value, rows}), NO_PARAMS);
    assert_values(fresh, 6, VALUES(9, 10, 3, 4, 7, 8), 0);
    assert_values(data, 6, VALUES(1, 2, 3, 4, 5, 6), 0); /* untouched: the result is new */
    DeftNDArrayHandle cells = make(DEFT_INT32, 2, SHAPE(2, 2), VALUES(1, 2, 1, 0));
    DeftNDArrayHandle two = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(-1, -2));
    int nout = 1;
    ck_assert_int_eq(call("_scatter_set_nd", 3, ((DeftNDArrayHandle[]){data, two, cells}), &nout,
                          &data, NO_PARAMS),
                     0);
    assert_values(data, 6, VALUES(1, 2, 3, -1, -2, 6), 0); /* in place: (1, 1) and (2, 0) */
    ck_assert_call_fails("_scatter_set_nd", 3, ((DeftNDArrayHandle[]){data, two, rows}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "operator '_scatter_set_nd': input 1 (value) has shape (2,), expected "
                         "(2,2): the slices the indices address");
    ck_assert_call_fails("_scatter_set_nd", 3, ((DeftNDArrayHandle[]){data, two, cells}),
                         P("shape", "(2,3)"), DEFT_ERROR_VALUE,
                         "shape is (2,3), but input 0 (data) has shape (3,2)");
    DeftNDArrayHandle named =
        call1("_scatter_set_nd", 3, ((DeftNDArrayHandle[]){data, two, cells}), P("shape", "(3,2)"));
    assert_values(named, 6, VALUES(1, 2, 3, -1, -2, 6), 0);
    free_all(1, &named);
    DeftNDArrayHandle doubles = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 2));
    ck_assert_call_fails("_scatter_set_nd", 3, ((DeftNDArrayHandle[]){data, doubles, cells}),
                         NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 1 (value) is float64, expected float32 like data");
    DeftNDArrayHandle far = make(DEFT_INT64, 2, SHAPE(1, 1), VALUES(3));
    DeftNDArrayHandle one = make(DEFT_FLOAT32, 2, SHAPE(1, 2), VALUES(0, 0));
    ck_assert_run_fails("_scatter_set_nd", 3, ((DeftNDArrayHandle[]){data, one, far}), NO_PARAMS,
                        DEFT_ERROR_INDEX,
                        "operator '_scatter_set_nd': input 2 (indices) has 3 at position 0, "
                        "expected a whole number in [-3, 2]");
    free_all(9, (DeftNDArrayHandle[]){data, rows, value, fresh, cells, two, doubles, far, one});
}
END_TEST

/* MXNet's slice_like examples, and its errors. */
START_TEST(test_slice_like_examples_and_errors) {
    double x[12];
    for (int j = 0; j < 12; j++) x[j] = j + 1;
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 2, SHAPE(3, 4), x);
    DeftNDArrayHandle like = make(DEFT_INT32, 2, SHAPE(2, 3), NULL);
    DeftNDArrayHandle in[2] = {data, like};
    DeftNDArrayHandle a = call1("slice_like", 2, in, NO_PARAMS);
    DeftNDArrayHandle b = call1("slice_like", 2, in, P("axes", "(0, 1)"));
    DeftNDArrayHandle c = call1("slice_like", 2, in, P("axes", "(0,)"));
    DeftNDArrayHandle d = call1("slice_like", 2, in, P("axes", "(-1,)"));
    assert_values(a, 6, VALUES(1, 2, 3, 5, 6, 7), 0);
    assert_values(b, 6, VALUES(1, 2, 3, 5, 6, 7), 0);
    assert_shape(c, 2, SHAPE(2, 4));
    assert_values(c, 8, VALUES(1, 2, 3, 4, 5, 6, 7, 8), 0);
    assert_shape(d, 2, SHAPE(3, 3));
    assert_values(d, 9, VALUES(1, 2, 3, 5, 6, 7, 9, 10, 11), 0);
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(a, &dtype));
    ck_assert_int_eq(dtype, DEFT_FLOAT32);
    DeftNDArrayHandle flat = make(DEFT_FLOAT32, 1, SHAPE(2), NULL);
    DeftNDArrayHandle wide = make(DEFT_FLOAT32, 2, SHAPE(2, 5), NULL);
    ck_assert_call_fails("slice_like", 2, ((DeftNDArrayHandle[]){data, flat}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "operator 'slice_like': axes is empty, so every axis is sliced, but data "
                         "has 2 dimensions and shape_like 1");
    ck_assert_call_fails("slice_like", 2, ((DeftNDArrayHandle[]){data, wide}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "axis 1: shape_like has size 5, more than data's 4");
    ck_assert_call_fails("slice_like", 2, ((DeftNDArrayHandle[]){data, flat}), P("axes", "(1,)"),
                         DEFT_ERROR_INDEX, "axes[0] is 1, but shape_like has 1 dimensions");
    ck_assert_call_fails("slice_like", 2, in, P("axes", "(2,)"), DEFT_ERROR_INDEX,
                         "axes is 2, expected an axis in [-2, 2)");
    /* zero-size */
    DeftNDArrayHandle none = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle e = call1("slice_like", 2, ((DeftNDArrayHandle[]){data, none}), NO_PARAMS);
    assert_shape(e, 2, SHAPE(0, 3));
    free_all(10, (DeftNDArrayHandle[]){data, like, a, b, c, d, flat, wide, none, e});
}
END_TEST

static Suite *gather_suite(void) {
    Suite *suite = suite_create("gather ops");
    TCase *tc = tcase_create("gather");
    tcase_add_loop_test(tc, test_pick_matches_index_loops, 0, 4);
    tcase_add_test(tc, test_pick_examples_and_errors);
    tcase_add_loop_test(tc, test_gather_nd_and_scatter_nd_match_loops, 0, 2);
    tcase_add_test(tc, test_nd_examples_and_errors);
    tcase_add_test(tc, test_scatter_set_nd_writes_the_addressed_slices);
    tcase_add_test(tc, test_slice_like_examples_and_errors);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(gather_suite());
}
