/*
 * The rearranging operators (SwapAxis, tile, repeat, reverse, broadcast_axis,
 * depth_to_space, space_to_depth) against naive index arithmetic written
 * here, MXNet's documented examples, and their error messages; plus
 * _contrib_arange_like and _contrib_div_sqrt_dim.
 */
#include "op_helpers.h"

#define MAXD 8

static void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *idx) {
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx) {
    int64_t i = 0;
    for (int d = 0; d < ndim; d++) i = i * shape[d] + idx[d];
    return i;
}

/* Distinct values that every arithmetic dtype holds exactly. */
static double *sample_values(int64_t n) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 7 + 3) % 250);
    return v;
}

/* An input of `shape` with sample values, for one of the arithmetic dtypes. */
static DeftNDArrayHandle sample(int dtype, int ndim, const int64_t *shape, double **values) {
    *values = sample_values(count_of(ndim, shape));
    return make(dtype, ndim, shape, *values);
}

/* ---- SwapAxis ---- */

static void check_swap(int dtype, const char *name, int d1, int d2) {
    const int64_t shape[4] = {2, 3, 4, 5};
    double *x;
    DeftNDArrayHandle h = sample(dtype, 4, shape, &x);
    char a[16], b[16];
    snprintf(a, sizeof a, "%d", d1), snprintf(b, sizeof b, "%d", d2);
    DeftNDArrayHandle y = call1(name, 1, &h, P("dim1", a, "dim2", b));
    int p = d1 < 0 ? d1 + 4 : d1, q = d2 < 0 ? d2 + 4 : d2;
    int64_t out_shape[4] = {2, 3, 4, 5}, idx[4];
    out_shape[p] = shape[q], out_shape[q] = shape[p];
    assert_shape(y, 4, out_shape);
    double want[120];
    for (int64_t i = 0; i < 120; i++) {
        unravel(i, 4, out_shape, idx);
        int64_t t = idx[p];
        idx[p] = idx[q], idx[q] = t;
        want[i] = x[ravel(4, shape, idx)];
    }
    assert_values(y, 120, want, 0);
    free(x);
    free_all(2, (DeftNDArrayHandle[]){h, y});
}

START_TEST(test_swapaxis_matches_index_arithmetic) {
    int dtype = arith_dtypes[_i];
    check_swap(dtype, "SwapAxis", 1, 3);
    check_swap(dtype, "swapaxes", -1, 0);
    check_swap(dtype, "SwapAxis", 2, 2);
}
END_TEST

START_TEST(test_swapaxis_defaults_errors_and_zero_size) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle same = call1("SwapAxis", 1, &x, NO_PARAMS); /* dim1 = dim2 = 0 */
    assert_shape(same, 2, SHAPE(2, 3));
    assert_values(same, 6, VALUES(1, 2, 3, 4, 5, 6), 0);
    DeftNDArrayHandle t = call1("SwapAxis", 1, &x, P("dim2", "1"));
    assert_values(t, 6, VALUES(1, 4, 2, 5, 3, 6), 0);
    ck_assert_call_fails("SwapAxis", 1, &x, P("dim1", "2"), DEFT_ERROR_INDEX,
                         "operator 'SwapAxis': dim1 is 2, expected an axis in [-2, 2)");
    ck_assert_call_fails("swapaxes", 1, &x, P("dim2", "-3"), DEFT_ERROR_INDEX,
                         "operator 'SwapAxis': dim2 is -3");
    ck_assert_call_fails("SwapAxis", 1, &x, P("axis", "1"), DEFT_ERROR_VALUE,
                         "unknown parameter 'axis' (parameters: dim1, dim2)");
    DeftNDArrayHandle z = make(DEFT_FLOAT64, 3, SHAPE(2, 0, 3), NULL);
    DeftNDArrayHandle zt = call1("SwapAxis", 1, &z, P("dim1", "0", "dim2", "2"));
    assert_shape(zt, 3, SHAPE(3, 0, 2));
    free_all(5, (DeftNDArrayHandle[]){x, same, t, z, zt});
}
END_TEST

/* ---- tile ---- */

/* tile(x, reps) by its definition: out[i] = x[i mod shape] with both padded to one rank. */
static void check_tile(int dtype, int ndim, const int64_t *shape, int nreps, const int64_t *reps) {
    double *x;
    DeftNDArrayHandle h = sample(dtype, ndim, shape, &x);
    char text[128] = "(";
    for (int k = 0; k < nreps; k++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%lld,", (long long)reps[k]);
    strcat(text, ")");
    DeftNDArrayHandle y = call1("tile", 1, &h, P("reps", text));
    int n = ndim > nreps ? ndim : nreps;
    int64_t in_shape[MAXD], out_shape[MAXD], idx[MAXD];
    for (int d = 0; d < n; d++) {
        int a = d - (n - ndim), r = d - (n - nreps);
        in_shape[d] = a >= 0 ? shape[a] : 1;
        out_shape[d] = in_shape[d] * (r >= 0 ? reps[r] : 1);
    }
    assert_shape(y, n, out_shape);
    int64_t count = count_of(n, out_shape);
    double *want = malloc(sizeof(double) * (size_t)(count ? count : 1));
    for (int64_t i = 0; i < count; i++) {
        unravel(i, n, out_shape, idx);
        for (int d = 0; d < n; d++) idx[d] %= in_shape[d];
        want[i] = x[ravel(n, in_shape, idx)];
    }
    assert_values(y, count, want, 0);
    free(want);
    free(x);
    free_all(2, (DeftNDArrayHandle[]){h, y});
}

START_TEST(test_tile_matches_index_arithmetic) {
    int dtype = arith_dtypes[_i];
    check_tile(dtype, 2, SHAPE(2, 3), 2, SHAPE(2, 3));             /* reps as long as the shape */
    check_tile(dtype, 3, SHAPE(2, 3, 2), 1, SHAPE(5));             /* shorter: 1s in front */
    check_tile(dtype, 1, SHAPE(3), 3, SHAPE(2, 1, 3));             /* longer: new leading axes */
    check_tile(dtype, 4, SHAPE(1, 2, 1, 3), 4, SHAPE(3, 1, 7, 2)); /* sizes 1 and odd copies */
    check_tile(dtype, 2, SHAPE(2, 3), 0, NULL);                    /* () is a copy */
    check_tile(dtype, 5, SHAPE(2, 1, 2, 1, 2), 5, SHAPE(2, 2, 3, 2, 2));
}
END_TEST

/* MXNet's documented example, and reps of 0 (NumPy: an empty result). */
START_TEST(test_tile_example_zero_reps_and_errors) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle y = call1("tile", 1, &x, P("reps", "(2,3)"));
    assert_shape(y, 2, SHAPE(4, 6));
    assert_values(
        y, 24, VALUES(1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4), 0);
    DeftNDArrayHandle e = call1("tile", 1, &x, P("reps", "(3,0)"));
    assert_shape(e, 2, SHAPE(6, 0));
    DeftNDArrayHandle z = make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL);
    DeftNDArrayHandle zt = call1("tile", 1, &z, P("reps", "(4,2)"));
    assert_shape(zt, 2, SHAPE(0, 4));
    ck_assert_call_fails("tile", 1, &x, P("reps", "(2,-1)"), DEFT_ERROR_VALUE,
                         "operator 'tile': reps[1] is -1, expected >= 0");
    ck_assert_call_fails("tile", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "required parameter 'reps' is missing");
    ck_assert_call_fails("tile", 1, &x, P("reps", "(4611686018427387904,4)"), DEFT_ERROR_VALUE,
                         "operator 'tile': the result's axis 0 would overflow");
    ck_assert_call_fails("tile", 1, &x, P("reps", "(1,1,1,1,1,1,1,1,1)"), DEFT_ERROR_PARSE, "reps");
    free_all(5, (DeftNDArrayHandle[]){x, y, e, z, zt});
}
END_TEST

/* ---- repeat ---- */

static void check_repeat(int dtype, int ndim, const int64_t *shape, int repeats, int axis) {
    double *x;
    DeftNDArrayHandle h = sample(dtype, ndim, shape, &x);
    char r[16], a[16];
    snprintf(r, sizeof r, "%d", repeats), snprintf(a, sizeof a, "%d", axis);
    DeftNDArrayHandle y =
        call1("repeat", 1, &h, axis == INT32_MIN ? P("repeats", r) : P("repeats", r, "axis", a));
    int64_t n = count_of(ndim, shape), idx[MAXD];
    double *want = malloc(sizeof(double) * (size_t)(n * repeats + 1));
    if (axis == INT32_MIN) { /* the flattened array, each element repeats times */
        assert_shape(y, 1, SHAPE(n * repeats));
        for (int64_t i = 0; i < n * repeats; i++) want[i] = x[i / repeats];
    } else {
        int ax = axis < 0 ? axis + ndim : axis;
        int64_t out_shape[MAXD];
        memcpy(out_shape, shape, sizeof(int64_t) * (size_t)ndim);
        out_shape[ax] *= repeats;
        assert_shape(y, ndim, out_shape);
        for (int64_t i = 0; i < n * repeats; i++) {
            unravel(i, ndim, out_shape, idx);
            idx[ax] /= repeats;
            want[i] = x[ravel(ndim, shape, idx)];
        }
    }
    assert_values(y, n * repeats, want, 0);
    free(want);
    free(x);
    free_all(2, (DeftNDArrayHandle[]){h, y});
}

START_TEST(test_repeat_matches_index_arithmetic) {
    int dtype = arith_dtypes[_i];
    check_repeat(dtype, 2, SHAPE(2, 3), 2, INT32_MIN);
    check_repeat(dtype, 3, SHAPE(2, 3, 4), 3, 0);
    check_repeat(dtype, 3, SHAPE(2, 3, 4), 2, 1);
    check_repeat(dtype, 3, SHAPE(2, 3, 4), 4, -1);
    check_repeat(dtype, 1, SHAPE(5), 1, 0);
}
END_TEST

START_TEST(test_repeat_example_zero_and_errors) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle y = call1("repeat", 1, &x, P("repeats", "2", "axis", "0"));
    assert_values(y, 8, VALUES(1, 2, 1, 2, 3, 4, 3, 4), 0);
    /* repeats=0 gives an empty 1-D array whatever the axis, as in MXNet */
    DeftNDArrayHandle e = call1("repeat", 1, &x, P("repeats", "0", "axis", "1"));
    assert_shape(e, 1, SHAPE(0));
    DeftNDArrayHandle z = make(DEFT_INT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle zr = call1("repeat", 1, &z, P("repeats", "3", "axis", "1"));
    assert_shape(zr, 2, SHAPE(0, 9));
    ck_assert_call_fails("repeat", 1, &x, P("repeats", "-1"), DEFT_ERROR_VALUE,
                         "operator 'repeat': repeats is -1, expected >= 0");
    ck_assert_call_fails("repeat", 1, &x, P("repeats", "2", "axis", "2"), DEFT_ERROR_INDEX,
                         "operator 'repeat': axis is 2, expected an axis in [-2, 2)");
    ck_assert_call_fails("repeat", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "required parameter 'repeats' is missing");
    free_all(5, (DeftNDArrayHandle[]){x, y, e, z, zr});
}
END_TEST

/* ---- reverse ---- */

START_TEST(test_reverse_matches_index_arithmetic) {
    int dtype = arith_dtypes[_i];
    const int64_t shape[3] = {3, 4, 5};
    double *x;
    DeftNDArrayHandle h = sample(dtype, 3, shape, &x);
    /* axes (0, -1); flip is the same operator */
    const char *names[2] = {"reverse", "flip"};
    for (int k = 0; k < 2; k++) {
        DeftNDArrayHandle y = call1(names[k], 1, &h, P("axis", "(0,-1)"));
        double want[60];
        int64_t idx[3];
        for (int64_t i = 0; i < 60; i++) {
            unravel(i, 3, shape, idx);
            idx[0] = 2 - idx[0], idx[2] = 4 - idx[2];
            want[i] = x[ravel(3, shape, idx)];
        }
        assert_shape(y, 3, shape);
        assert_values(y, 60, want, 0);
        free_all(1, &y);
    }
    /* an axis listed twice is reversed twice, as in MXNet */
    DeftNDArrayHandle twice = call1("reverse", 1, &h, P("axis", "(1,1)"));
    assert_values(twice, 60, x, 0);
    free(x);
    free_all(2, (DeftNDArrayHandle[]){h, twice});
}
END_TEST

START_TEST(test_reverse_example_errors_and_zero_size) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 5), VALUES(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    DeftNDArrayHandle a0 = call1("reverse", 1, &x, P("axis", "0"));
    assert_values(a0, 10, VALUES(5, 6, 7, 8, 9, 0, 1, 2, 3, 4), 0);
    DeftNDArrayHandle a1 = call1("reverse", 1, &x, P("axis", "1"));
    assert_values(a1, 10, VALUES(4, 3, 2, 1, 0, 9, 8, 7, 6, 5), 0);
    ck_assert_call_fails("reverse", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "required parameter 'axis' is missing");
    ck_assert_call_fails("flip", 1, &x, P("axis", "(0,2)"), DEFT_ERROR_INDEX,
                         "operator 'reverse': axis is 2, expected an axis in [-2, 2)");
    DeftNDArrayHandle z = make(DEFT_FLOAT32, 2, SHAPE(3, 0), NULL);
    DeftNDArrayHandle zr = call1("reverse", 1, &z, P("axis", "(0,1)"));
    assert_shape(zr, 2, SHAPE(3, 0));
    free_all(5, (DeftNDArrayHandle[]){x, a0, a1, z, zr});
}
END_TEST

/* ---- broadcast_axis ---- */

START_TEST(test_broadcast_axis) {
    int dtype = arith_dtypes[_i];
    DeftNDArrayHandle x = make(dtype, 3, SHAPE(1, 2, 1), VALUES(1, 2));
    DeftNDArrayHandle a = call1("broadcast_axis", 1, &x, P("axis", "2", "size", "3"));
    assert_shape(a, 3, SHAPE(1, 2, 3));
    assert_values(a, 6, VALUES(1, 1, 1, 2, 2, 2), 0);
    DeftNDArrayHandle b = call1("broadcast_axes", 1, &x, P("axis", "(0,-1)", "size", "(2,3)"));
    assert_shape(b, 3, SHAPE(2, 2, 3));
    assert_values(b, 12, VALUES(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2), 0);
    DeftNDArrayHandle same = call1("broadcast_axis", 1, &x, NO_PARAMS);
    assert_shape(same, 3, SHAPE(1, 2, 1));
    DeftNDArrayHandle empty = call1("broadcast_axis", 1, &x, P("axis", "0", "size", "0"));
    assert_shape(empty, 3, SHAPE(0, 2, 1));
    ck_assert_call_fails("broadcast_axis", 1, &x, P("axis", "1", "size", "4"), DEFT_ERROR_VALUE,
                         "operator 'broadcast_axis': axis 1 has size 2, expected 1");
    ck_assert_call_fails("broadcast_axis", 1, &x, P("axis", "(0,2)", "size", "4"), DEFT_ERROR_VALUE,
                         "axis has 2 entries but size has 1");
    ck_assert_call_fails("broadcast_axis", 1, &x, P("axis", "3", "size", "4"), DEFT_ERROR_INDEX,
                         "axis is 3, expected an axis in [-3, 3)");
    ck_assert_call_fails("broadcast_axis", 1, &x, P("axis", "0", "size", "-2"), DEFT_ERROR_VALUE,
                         "size[0] is -2, expected >= 0");
    free_all(5, (DeftNDArrayHandle[]){x, a, b, same, empty});
}
END_TEST

/* ---- depth_to_space, space_to_depth ---- */

START_TEST(test_depth_to_space_example_and_inverse) {
    double x24[24];
    for (int i = 0; i < 24; i++) x24[i] = i;
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, SHAPE(1, 4, 2, 3), x24);
    DeftNDArrayHandle y = call1("depth_to_space", 1, &x, P("block_size", "2"));
    assert_shape(y, 4, SHAPE(1, 1, 4, 6));
    const double want[24] = {0, 6, 1, 7,  2, 8,  12, 18, 13, 19, 14, 20,
                             3, 9, 4, 10, 5, 11, 15, 21, 16, 22, 17, 23};
    assert_values(y, 24, want, 0);
    DeftNDArrayHandle back = call1("space_to_depth", 1, &y, P("block_size", "2"));
    assert_shape(back, 4, SHAPE(1, 4, 2, 3));
    assert_values(back, 24, x24, 0);
    free_all(3, (DeftNDArrayHandle[]){x, y, back});
}
END_TEST

/* depth_to_space by its definition (reshape, transpose, reshape), for several sizes and dtypes. */
START_TEST(test_depth_to_space_matches_index_arithmetic) {
    int dtype = arith_dtypes[_i];
    const int64_t bs = 3, n = 2, c = 2, h = 2, w = 3;
    const int64_t shape[4] = {n, c * bs * bs, h, w};
    double *x;
    DeftNDArrayHandle in = sample(dtype, 4, shape, &x);
    DeftNDArrayHandle y = call1("depth_to_space", 1, &in, P("block_size", "3"));
    int64_t out_shape[4] = {n, c, h * bs, w * bs}, o[4], count = count_of(4, shape);
    assert_shape(y, 4, out_shape);
    double *want = malloc(sizeof(double) * (size_t)count);
    for (int64_t i = 0; i < count; i++) {
        unravel(i, 4, out_shape, o);
        int64_t b1 = o[2] % bs, b2 = o[3] % bs;
        int64_t src[4] = {o[0], (b1 * bs + b2) * c + o[1], o[2] / bs, o[3] / bs};
        want[i] = x[ravel(4, shape, src)];
    }
    assert_values(y, count, want, 0);
    DeftNDArrayHandle back = call1("space_to_depth", 1, &y, P("block_size", "3"));
    assert_values(back, count, x, 0);
    free(want);
    free(x);
    free_all(3, (DeftNDArrayHandle[]){in, y, back});
}
END_TEST

START_TEST(test_depth_to_space_errors) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, SHAPE(1, 4, 2, 3), NULL);
    ck_assert_call_fails("depth_to_space", 1, &x, P("block_size", "3"), DEFT_ERROR_VALUE,
                         "operator 'depth_to_space': input (1,4,2,3): the depth (axis 1) is not a "
                         "multiple of 9");
    ck_assert_call_fails("space_to_depth", 1, &x, P("block_size", "2"), DEFT_ERROR_VALUE,
                         "operator 'space_to_depth': input (1,4,2,3): the height and width are "
                         "not a multiple of 2");
    ck_assert_call_fails("depth_to_space", 1, &x, P("block_size", "0"), DEFT_ERROR_VALUE,
                         "block_size is 0, expected 1 to 65536");
    ck_assert_call_fails("depth_to_space", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "required parameter 'block_size' is missing");
    DeftNDArrayHandle flat = make(DEFT_FLOAT32, 3, SHAPE(4, 2, 2), NULL);
    ck_assert_call_fails("space_to_depth", 1, &flat, P("block_size", "2"), DEFT_ERROR_VALUE,
                         "input (4,2,2) is not 4-D (N, C, H, W)");
    /* MXNet refuses zero-size inputs to both */
    DeftNDArrayHandle z = make(DEFT_FLOAT32, 4, SHAPE(0, 4, 2, 2), NULL);
    ck_assert_call_fails("depth_to_space", 1, &z, P("block_size", "2"), DEFT_ERROR_VALUE,
                         "input (0,4,2,2) has size 0 on axis 0");
    free_all(3, (DeftNDArrayHandle[]){x, flat, z});
}
END_TEST

/* ---- _contrib_arange_like, _contrib_div_sqrt_dim ---- */

START_TEST(test_arange_like) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(3, 4), NULL);
    DeftNDArrayHandle a = call1("_contrib_arange_like", 1, &x, NO_PARAMS);
    assert_shape(a, 2, SHAPE(3, 4));
    assert_values(a, 12, VALUES(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), 0);
    DeftNDArrayHandle b = call1("_npx_arange_like", 1, &x, P("start", "0", "axis", "-1"));
    assert_shape(b, 1, SHAPE(4));
    assert_values(b, 4, VALUES(0, 1, 2, 3), 0);
    DeftNDArrayHandle c = call1("_contrib_arange_like", 1, &x,
                                P("start", "2", "step", "-0.5", "repeat", "2", "axis", "0"));
    assert_values(c, 3, VALUES(2, 2, 1.5), 0);
    DeftNDArrayHandle i = make(DEFT_INT64, 1, SHAPE(3), NULL);
    DeftNDArrayHandle ci = call1("_contrib_arange_like", 1, &i, P("start", "5", "ctx", "cpu(0)"));
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(ci, &dtype));
    ck_assert_int_eq(dtype, DEFT_INT64);
    assert_values(ci, 3, VALUES(5, 6, 7), 0);
    DeftNDArrayHandle z = make(DEFT_FLOAT64, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle cz = call1("_contrib_arange_like", 1, &z, NO_PARAMS);
    assert_shape(cz, 2, SHAPE(0, 3));
    ck_assert_call_fails("_contrib_arange_like", 1, &x, P("repeat", "0"), DEFT_ERROR_VALUE,
                         "operator '_contrib_arange_like': repeat is 0, expected >= 1");
    ck_assert_call_fails("_contrib_arange_like", 1, &x, P("axis", "2"), DEFT_ERROR_INDEX,
                         "axis is 2, expected an axis in [-2, 2)");
    free_all(8, (DeftNDArrayHandle[]){x, a, b, c, i, ci, z, cz});
}
END_TEST

START_TEST(test_div_sqrt_dim) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 4), VALUES(2, 4, -6, 8, 1, 0, 3, 10));
    DeftNDArrayHandle y = call1("_contrib_div_sqrt_dim", 1, &x, NO_PARAMS);
    assert_values(y, 8, VALUES(1, 2, -3, 4, 0.5, 0, 1.5, 5), 1e-15);
    DeftNDArrayHandle f = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(3, 6, 9));
    DeftNDArrayHandle fy = call1("_contrib_div_sqrt_dim", 1, &f, NO_PARAMS);
    assert_values(fy, 3, VALUES(3 / sqrt(3), 6 / sqrt(3), 9 / sqrt(3)), 2e-7);
    /* integers divide by the truncated root, as MXNet's DType(sqrt(dim)): sqrt(5) -> 2 */
    DeftNDArrayHandle n = make(DEFT_INT32, 1, SHAPE(5), VALUES(4, 5, -7, 9, 0));
    DeftNDArrayHandle ny = call1("_contrib_div_sqrt_dim", 1, &n, NO_PARAMS);
    assert_values(ny, 5, VALUES(2, 2, -3, 4, 0), 0);
    DeftNDArrayHandle z = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle zy = call1("_contrib_div_sqrt_dim", 1, &z, NO_PARAMS);
    assert_shape(zy, 2, SHAPE(0, 3));
    DeftNDArrayHandle s = make(DEFT_FLOAT32, 0, NULL, VALUES(4));
    ck_assert_call_fails("_contrib_div_sqrt_dim", 1, &s, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator '_contrib_div_sqrt_dim': input 0 is a scalar, expected >= 1-D");
    free_all(9, (DeftNDArrayHandle[]){x, y, f, fy, n, ny, z, zy, s});
}
END_TEST

/* ---- gradients beyond the finite-difference cases ---- */

/* d/dx sum(w * tile(x)) is w summed over the copies; eight tiled axes take three passes. */
START_TEST(test_tile_gradient_over_many_axes) {
    const int64_t shape[8] = {2, 1, 2, 1, 2, 1, 2, 1};
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 8, shape, NULL);
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 8, shape, NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("tile", 1, &x, P("reps", "(2,3,2,2,2,3,2,2)"));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    const int64_t out_shape[8] = {4, 3, 4, 2, 4, 3, 4, 2};
    int64_t count = count_of(8, out_shape), idx[8];
    double *w = malloc(sizeof(double) * (size_t)count), want[16] = {0};
    for (int64_t i = 0; i < count; i++) {
        w[i] = (double)(i % 11) - 5;
        unravel(i, 8, out_shape, idx);
        for (int d = 0; d < 8; d++) idx[d] %= shape[d];
        want[ravel(8, shape, idx)] += w[i];
    }
    DeftNDArrayHandle head = make(DEFT_FLOAT64, 8, out_shape, w);
    ck_assert_ok(DeftAutogradBackward(1, &y, &head, 0, 0));
    assert_values(g, 16, want, 1e-12);
    /* the backward operator itself refuses what does not fit one pass */
    ck_assert_call_fails("_backward_tile", 1, &head, P("reps", "(2,3,2,2,2,3,2,2)"),
                         DEFT_ERROR_NOT_IMPLEMENTED, "too many tiled axes for one pass");
    free(w);
    free_all(4, (DeftNDArrayHandle[]){x, g, y, head});
}
END_TEST

/* Reps of 1 sum nothing: the gradient is the head itself. It used to be
 * summed over every axis (sum's empty axis tuple) into the first element,
 * and an empty head wrote through a NULL buffer (found by fuzz_invoke). */
START_TEST(test_backward_tile_with_unit_reps_copies) {
    DeftNDArrayHandle head = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle got = call1("_backward_tile", 1, &head, P("reps", "(1,1)"));
    assert_shape(got, 2, SHAPE(2, 3));
    assert_values(got, 6, VALUES(1, 2, 3, 4, 5, 6), 0);
    DeftNDArrayHandle empty = make(DEFT_FLOAT32, 5, SHAPE(2, 2, 1, 0, 2), NULL);
    DeftNDArrayHandle none = call1("_backward_tile", 1, &empty, P("reps", "(1,)"));
    assert_shape(none, 5, SHAPE(2, 2, 1, 0, 2));
    free_all(4, (DeftNDArrayHandle[]){head, got, empty, none});
}
END_TEST

/* No copies (a 0 in reps, repeats=0): the result is empty and the gradient is zeros. */
START_TEST(test_gradient_of_no_copies_is_zero) {
    const char *const *params[2] = {P("reps", "(2,0)"), P("repeats", "0", "axis", "1")};
    const char *names[2] = {"tile", "repeat"};
    for (int k = 0; k < 2; k++) {
        DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
        DeftNDArrayHandle g = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(9, 9, 9, 9, 9, 9));
        ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
        ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
        DeftNDArrayHandle y = call1(names[k], 1, &x, params[k]);
        ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
        ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
        assert_values(g, 6, VALUES(0, 0, 0, 0, 0, 0), 0);
        free_all(3, (DeftNDArrayHandle[]){x, g, y});
    }
}
END_TEST

static Suite *rearrange_suite(void) {
    Suite *suite = suite_create("rearrange ops");
    TCase *tc = tcase_create("rearrange");
    tcase_add_loop_test(tc, test_swapaxis_matches_index_arithmetic, 0, NUM_ARITH_DTYPES);
    tcase_add_test(tc, test_swapaxis_defaults_errors_and_zero_size);
    tcase_add_loop_test(tc, test_tile_matches_index_arithmetic, 0, NUM_ARITH_DTYPES);
    tcase_add_test(tc, test_tile_example_zero_reps_and_errors);
    tcase_add_loop_test(tc, test_repeat_matches_index_arithmetic, 0, NUM_ARITH_DTYPES);
    tcase_add_test(tc, test_repeat_example_zero_and_errors);
    tcase_add_loop_test(tc, test_reverse_matches_index_arithmetic, 0, NUM_ARITH_DTYPES);
    tcase_add_test(tc, test_reverse_example_errors_and_zero_size);
    tcase_add_loop_test(tc, test_broadcast_axis, 0, NUM_ARITH_DTYPES);
    tcase_add_test(tc, test_depth_to_space_example_and_inverse);
    tcase_add_loop_test(tc, test_depth_to_space_matches_index_arithmetic, 0, NUM_ARITH_DTYPES);
    tcase_add_test(tc, test_depth_to_space_errors);
    tcase_add_test(tc, test_arange_like);
    tcase_add_test(tc, test_div_sqrt_dim);
    tcase_add_test(tc, test_tile_gradient_over_many_axes);
    tcase_add_test(tc, test_backward_tile_with_unit_reps_copies);
    tcase_add_test(tc, test_gradient_of_no_copies_is_zero);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(rearrange_suite());
}
