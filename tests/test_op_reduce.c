/* Reductions, softmax and the cross-entropy loss against plain-loop references. */
#include "op_helpers.h"

/* Reference reduction of a (2,3,4) array over a mask of axes, row-major output. */
static void ref_reduce(const char *op, const double *x, const int64_t *shape, const bool *reduce,
                       double *out, int64_t *nout) {
    int64_t out_dims[3], out_n = 1;
    for (int d = 0; d < 3; d++) out_dims[d] = reduce[d] ? 1 : shape[d], out_n *= out_dims[d];
    for (int64_t o = 0; o < out_n; o++) {
        int64_t oc[3] = {o / (out_dims[1] * out_dims[2]), o / out_dims[2] % out_dims[1],
                         o % out_dims[2]};
        double acc = !strcmp(op, "prod") ? 1 : 0, best = 0;
        int64_t count = 0, best_i = -1;
        for (int64_t i = 0; i < shape[0]; i++)
            for (int64_t j = 0; j < shape[1]; j++)
                for (int64_t k = 0; k < shape[2]; k++) {
                    int64_t c[3] = {i, j, k};
                    bool match = true;
                    for (int d = 0; d < 3; d++) match = match && (reduce[d] || c[d] == oc[d]);
                    if (!match) continue;
                    double v = x[(i * shape[1] + j) * shape[2] + k];
                    if (!strcmp(op, "sum") || !strcmp(op, "mean"))
                        acc += v;
                    else if (!strcmp(op, "prod"))
                        acc *= v;
                    else if (!strcmp(op, "norm"))
                        acc += v * v;
                    else if (count == 0 || (!strcmp(op, "max") ? v > best : v < best))
                        best = v, best_i = count;
                    count++;
                }
        if (!strcmp(op, "mean")) acc /= (double)count;
        if (!strcmp(op, "norm")) acc = sqrt(acc);
        if (!strcmp(op, "max") || !strcmp(op, "min")) acc = best;
        (void)best_i;
        out[o] = acc;
    }
    *nout = out_n;
}

START_TEST(test_reductions_over_every_axis_set) {
    const int64_t shape[3] = {2, 3, 4};
    double x[24];
    for (int i = 0; i < 24; i++) x[i] = (double)((i * 7) % 11) - 4; /* distinct-ish, mixed sign */
    const char *ops[] = {"sum", "mean", "prod", "max", "min", "norm"};
    const char *axes[] = {"(0,)", "(1,)", "(2,)", "(0,1)", "(1,2)", "(0,2)", "(0,1,2)", "None"};
    const bool masks[8][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0},
                              {0, 1, 1}, {1, 0, 1}, {1, 1, 1}, {1, 1, 1}};
    for (int o = 0; o < 6; o++) {
        for (int d = 0; d < NUM_ARITH_DTYPES; d++) {
            int dtype = arith_dtypes[d];
            bool float_only = !strcmp(ops[o], "mean") || !strcmp(ops[o], "norm");
            if (float_only && dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64) continue;
            double xv[24];
            for (int i = 0; i < 24; i++) xv[i] = dtype == DEFT_UINT8 ? fabs(x[i]) : x[i];
            if (!strcmp(ops[o], "prod"))
                for (int i = 0; i < 24; i++) xv[i] = xv[i] == 0 ? 1 : (xv[i] > 0 ? 1.5 : -1.25);
            if (!strcmp(ops[o], "prod") && dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64)
                for (int i = 0; i < 24; i++) xv[i] = i % 5 == 0 ? -1 : 1;
            if (!strcmp(ops[o], "prod") && dtype == DEFT_UINT8)
                for (int i = 0; i < 24; i++) xv[i] = 1 + (i % 7 == 0);
            DeftNDArrayHandle a = make(dtype, 3, shape, xv);
            for (int ax = 0; ax < 8; ax++) {
                for (int keep = 0; keep < 2; keep++) {
                    double want[24];
                    int64_t n;
                    double in_typed[24];
                    for (int i = 0; i < 24; i++)
                        in_typed[i] = dtype == DEFT_FLOAT32 ? (float)xv[i] : xv[i];
                    ref_reduce(ops[o], in_typed, shape, masks[ax], want, &n);
                    DeftNDArrayHandle y =
                        call1(ops[o], 1, &a, P("axis", axes[ax], "keepdims", keep ? "1" : "0"));
                    int ndim;
                    ck_assert_ok(DeftNDArrayGetNDim(y, &ndim));
                    int kept = 0;
                    for (int dd = 0; dd < 3; dd++) kept += !masks[ax][dd];
                    /* MXNet 1.x: reducing every axis leaves (1,), not a rank-0 array */
                    ck_assert_int_eq(ndim, keep ? 3 : kept ? kept : 1);
                    assert_values(y, n, want, dtype == DEFT_FLOAT32 ? 1e-6 : 1e-12);
                    ck_assert_ok(DeftNDArrayFree(y));
                }
            }
            ck_assert_ok(DeftNDArrayFree(a));
        }
    }
}
END_TEST

/* Reference reduction of a 5-D array over the axes in `mask` (bit d: axis d). */
static void ref_reduce5(const char *op, const double *x, const int64_t *shape, unsigned mask,
                        double *out, int64_t *nout) {
    int64_t n = 1, out_n = 1, out_strides[5], count = 1;
    for (int d = 4; d >= 0; d--) {
        n *= shape[d];
        out_strides[d] = mask >> d & 1 ? 0 : out_n;
        if (mask >> d & 1)
            count *= shape[d];
        else
            out_n *= shape[d];
    }
    bool mul = !strcmp(op, "prod"), extreme = !strcmp(op, "max");
    for (int64_t o = 0; o < out_n; o++) out[o] = mul ? 1 : extreme ? -INFINITY : 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, o = 0;
        for (int d = 4; d >= 0; d--) o += rest % shape[d] * out_strides[d], rest /= shape[d];
        out[o] = mul ? out[o] * x[i] : extreme ? fmax(out[o], x[i]) : out[o] + x[i];
    }
    if (!strcmp(op, "mean"))
        for (int64_t o = 0; o < out_n; o++) out[o] /= (double)count;
    *nout = out_n;
}

/* Every axis set of 5-D arrays, so every layout of the kernel: reduced axes
 * innermost (rows), innermost reduced after kept ones (spans, as conv bias
 * gradients, with up to three reduced runs), innermost kept (columns, as FC
 * bias gradients, 600 wide: two blocks of accumulators), and the transposed
 * copy (max, prod, integers). */
START_TEST(test_reductions_read_layouts_in_place) {
    const int64_t shapes[3][5] = {{1, 2, 3, 5, 7}, {3, 2, 1, 1, 600}, {2, 3, 2, 5, 3}};
    const char *ops[] = {"sum", "mean", "max", "prod"};
    const int dtypes[] = {DEFT_FLOAT32, DEFT_FLOAT64, DEFT_INT32};
    static double x[3600], want[3600];
    for (int sh = 0; sh < 3; sh++) {
        const int64_t *shape = shapes[sh];
        int64_t n = shape[0] * shape[1] * shape[2] * shape[3] * shape[4];
        for (int o = 0; o < 4; o++) {
            for (int i = 0; i < n; i++)
                x[i] = !strcmp(ops[o], "prod") ? (i % 3 ? 1 : -1) : (double)((i * 37) % 23 - 11);
            for (int d = 0; d < 3; d++) {
                if (!strcmp(ops[o], "mean") && dtypes[d] == DEFT_INT32) continue;
                DeftNDArrayHandle a = make(dtypes[d], 5, shape, x);
                for (unsigned mask = 1; mask < 32; mask++) {
                    char axes[32] = "(";
                    for (int ax = 0; ax < 5; ax++)
                        if (mask >> ax & 1) snprintf(axes + strlen(axes), 8, "%d,", ax);
                    strcat(axes, ")");
                    int64_t nout;
                    ref_reduce5(ops[o], x, shape, mask, want, &nout);
                    DeftNDArrayHandle y = call1(ops[o], 1, &a, P("axis", axes));
                    assert_values(y, nout, want, dtypes[d] == DEFT_FLOAT32 ? 1e-6 : 1e-12);
                    ck_assert_ok(DeftNDArrayFree(y));
                }
                ck_assert_ok(DeftNDArrayFree(a));
            }
        }
    }
}
END_TEST

/* Arrays big enough to be split across threads, in both in-place layouts. */
START_TEST(test_large_in_place_reductions) {
    const int64_t shapes[2][5] = {{1, 1, 1, 300, 301}, {1, 1, 66, 31, 37}};
    const unsigned masks[2] = {1u << 3, (1u << 2) | (1u << 4)};
    static double x[300 * 301], want[300 * 301];
    for (int k = 0; k < 2; k++) {
        int64_t n = shapes[k][2] * shapes[k][3] * shapes[k][4], nout;
        for (int64_t i = 0; i < n; i++) x[i] = (double)((i * 13) % 29) - 14;
        const char *ops[2] = {"sum", "max"};
        for (int o = 0; o < 2; o++) {
            DeftNDArrayHandle a = make(k ? DEFT_FLOAT64 : DEFT_FLOAT32, 5, shapes[k], x);
            ref_reduce5(ops[o], x, shapes[k], masks[k], want, &nout);
            DeftNDArrayHandle y = call1(ops[o], 1, &a, P("axis", k ? "(2,4)" : "(3,)"));
            assert_values(y, nout, want, 1e-6);
            free_all(2, (DeftNDArrayHandle[]){a, y});
        }
    }
}
END_TEST

/* _reduce_to_like: a same-size "sum" is the data; real sums go through the
 * reduction kernel (leading, inner and middle axes). */
START_TEST(test_reduce_to_like) {
    double x[60];
    for (int i = 0; i < 60; i++) x[i] = i * 0.5 - 7;
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 3, SHAPE(3, 4, 5), x);
    const int64_t likes[][3] = {{3, 4, 5}, {1, 4, 5}, {3, 1, 5}, {3, 4, 1}, {1, 1, 5}, {1, 1, 1}};
    for (int k = 0; k < 6; k++) {
        DeftNDArrayHandle like = make(DEFT_FLOAT32, 3, likes[k], NULL);
        DeftNDArrayHandle y =
            call1("_reduce_to_like", 2, (DeftNDArrayHandle[]){a, like}, NO_PARAMS);
        double want[60] = {0};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 5; l++) {
                    int64_t o =
                        ((likes[k][0] > 1 ? i : 0) * likes[k][1] + (likes[k][1] > 1 ? j : 0)) *
                            likes[k][2] +
                        (likes[k][2] > 1 ? l : 0);
                    want[o] += x[(i * 4 + j) * 5 + l];
                }
        assert_shape(y, 3, likes[k]);
        assert_values(y, likes[k][0] * likes[k][1] * likes[k][2], want, 1e-5);
        free_all(2, (DeftNDArrayHandle[]){like, y});
    }
    DeftNDArrayHandle flat = make(DEFT_FLOAT64, 1, SHAPE(20), NULL); /* fewer dims, same size */
    DeftNDArrayHandle b = make(DEFT_FLOAT64, 2, SHAPE(1, 20), x);
    DeftNDArrayHandle y = call1("_reduce_to_like", 2, (DeftNDArrayHandle[]){b, flat}, NO_PARAMS);
    assert_shape(y, 1, SHAPE(20));
    assert_values(y, 20, x, 0);
    free_all(4, (DeftNDArrayHandle[]){a, flat, b, y});
}
END_TEST

START_TEST(test_exclude_negative_axes_and_norm_ord1) {
    DeftNDArrayHandle a = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(1, -2, 3, -4, 5, -6));
    DeftNDArrayHandle ex = call1("sum", 1, &a, P("axis", "(1,)", "exclude", "true"));
    assert_values(ex, 3, VALUES(-3, 3, -3), 0);
    DeftNDArrayHandle neg = call1("sum", 1, &a, P("axis", "-1"));
    assert_values(neg, 2, VALUES(2, -5), 0);
    DeftNDArrayHandle n1 = call1("norm", 1, &a, P("ord", "1"));
    assert_values(n1, 1, VALUES(21), 0);
    DeftNDArrayHandle n2 = call1("norm", 1, &a, P("axis", "(0,)"));
    assert_values(n2, 3, VALUES(sqrt(17), sqrt(29), sqrt(45)), 1e-15);
    ck_assert_call_fails("norm", 1, &a, P("ord", "3"), DEFT_ERROR_VALUE,
                         "ord is 3, expected 1 or 2");
    free_all(5, (DeftNDArrayHandle[]){a, ex, neg, n1, n2});
}
END_TEST

START_TEST(test_integer_sums_wrap_and_are_exact) {
    DeftNDArrayHandle a = make(DEFT_INT64, 1, SHAPE(3), VALUES(9007199254740993.0, 1, -1));
    /* 2^53 + 1 is not a double: build it exactly from int64 data */
    int64_t exact[3] = {INT64_C(9007199254740993), 1, -1};
    ck_assert_ok(DeftNDArrayCopyFromHost(a, exact, sizeof exact));
    DeftNDArrayHandle s = call1("sum", 1, &a, NO_PARAMS);
    int64_t got;
    ck_assert_ok(DeftNDArrayCopyToHost(s, &got, sizeof got));
    ck_assert_int_eq(got, INT64_C(9007199254740993));
    DeftNDArrayHandle u = make(DEFT_UINT8, 1, SHAPE(3), VALUES(200, 100, 1));
    DeftNDArrayHandle us = call1("sum", 1, &u, NO_PARAMS);
    assert_values(us, 1, VALUES(45), 0);
    free_all(4, (DeftNDArrayHandle[]){a, s, u, us});
}
END_TEST

START_TEST(test_argmax_argmin_first_occurrence_and_nan) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, 4), VALUES(1, 5, 5, 0, 2, NAN, 9, NAN));
    DeftNDArrayHandle mx = call1("argmax", 1, &a, P("axis", "1"));
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(mx, &dtype));
    ck_assert_int_eq(dtype, DEFT_FLOAT32); /* MXNet 1.x: indices in the input's dtype */
    assert_values(mx, 2, VALUES(1, 1), 0);
    DeftNDArrayHandle mn = call1("argmin", 1, &a, P("axis", "0", "keepdims", "true"));
    assert_shape(mn, 2, SHAPE(1, 4));
    assert_values(mn, 4, VALUES(0, 1, 0, 1), 0);
    DeftNDArrayHandle flat = call1("argmax", 1, &a, NO_PARAMS);
    assert_shape(flat, 1, SHAPE(1));
    assert_values(flat, 1, VALUES(5), 0);
    DeftNDArrayHandle m = call1("max", 1, &a, P("axis", "1"));
    assert_values(m, 2, VALUES(5, NAN), 0);
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(4), VALUES(3, -7, 8, 8));
    DeftNDArrayHandle ia = call1("argmax", 1, &i, NO_PARAMS);
    assert_values(ia, 1, VALUES(2), 0);
    free_all(7, (DeftNDArrayHandle[]){a, mx, mn, flat, m, i, ia});
}
END_TEST

START_TEST(test_zero_size_reductions) {
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle s = call1("sum", 1, &e, P("axis", "0"));
    assert_values(s, 3, VALUES(0, 0, 0), 0);
    DeftNDArrayHandle p = call1("prod", 1, &e, P("axis", "0"));
    assert_values(p, 3, VALUES(1, 1, 1), 0);
    DeftNDArrayHandle m = call1("mean", 1, &e, P("axis", "0"));
    assert_values(m, 3, VALUES(NAN, NAN, NAN), 0);
    DeftNDArrayHandle rows = call1("max", 1, &e, P("axis", "1"));
    assert_shape(rows, 1, SHAPE(0));
    ck_assert_call_fails("max", 1, &e, P("axis", "0"), DEFT_ERROR_VALUE,
                         "cannot reduce over a zero-size axis");
    free_all(5, (DeftNDArrayHandle[]){e, s, p, m, rows});
}
END_TEST

/* Zero-size arrays have no data pointer: reducing them must not offset it
 * (UBSan: "applying zero offset to null pointer"). */
START_TEST(test_zero_size_reductions_of_every_dtype_and_layout) {
    for (int d = 0; d < NUM_ARITH_DTYPES; d++) {
        int dtype = arith_dtypes[d];
        bool is_float = dtype == DEFT_FLOAT32 || dtype == DEFT_FLOAT64;
        DeftNDArrayHandle e = make(dtype, 2, SHAPE(3, 0), NULL);
        DeftNDArrayHandle all = call1("sum", 1, &e, NO_PARAMS); /* every axis: one row */
        assert_values(all, 1, VALUES(0), 0);
        DeftNDArrayHandle rows = call1("prod", 1, &e, P("axis", "1")); /* 3 empty rows */
        assert_values(rows, 3, VALUES(1, 1, 1), 0);
        DeftNDArrayHandle moved = call1("sum", 1, &e, P("axis", "0")); /* no rows */
        assert_shape(moved, 1, SHAPE(0));
        free_all(3, (DeftNDArrayHandle[]){all, rows, moved});
        if (is_float) {
            DeftNDArrayHandle m = call1("mean", 1, &e, NO_PARAMS);
            DeftNDArrayHandle n = call1("norm", 1, &e, NO_PARAMS);
            assert_values(m, 1, VALUES(NAN), 0);
            assert_values(n, 1, VALUES(0), 0);
            free_all(2, (DeftNDArrayHandle[]){m, n});
        }
        ck_assert_call_fails("max", 1, &e, NO_PARAMS, DEFT_ERROR_VALUE,
                             "cannot reduce over a zero-size axis");
        ck_assert_ok(DeftNDArrayFree(e));
    }
}
END_TEST

/* take (an index operator, here for its zero-size case): gathering rows of
 * no elements copies nothing, from and to no data (UBSan: memcpy(NULL, NULL, 0)). */
START_TEST(test_take_from_zero_size_rows) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, 0), NULL);
    DeftNDArrayHandle idx = make(DEFT_INT64, 1, SHAPE(3), VALUES(1, 0, 1));
    DeftNDArrayHandle taken =
        call1("take", 2, (DeftNDArrayHandle[]){a, idx}, P("axis", "0", "mode", "raise"));
    assert_shape(taken, 2, SHAPE(3, 0));
    DeftNDArrayHandle none = make(DEFT_INT64, 1, SHAPE(0), NULL);
    DeftNDArrayHandle empty = call1("take", 2, (DeftNDArrayHandle[]){a, none}, P("axis", "1"));
    assert_shape(empty, 2, SHAPE(2, 0));
    /* out-of-range indices are still refused, though nothing would be copied */
    DeftNDArrayHandle bad = make(DEFT_INT64, 1, SHAPE(1), VALUES(2));
    DeftNDArrayHandle refused =
        call1("take", 2, (DeftNDArrayHandle[]){a, bad}, P("axis", "0", "mode", "raise"));
    ck_assert_fails(DeftNDArrayWaitToRead(refused), DEFT_ERROR_INDEX,
                    "index 2 (position 0) is out of range for axis 0 of size 2");
    free_all(7, (DeftNDArrayHandle[]){a, idx, taken, none, empty, bad, refused});
}
END_TEST

START_TEST(test_large_reductions_split_across_threads) {
    const int64_t n = 3000017;
    double *x = malloc(sizeof(double) * n);
    double want = 0, want_max = -1;
    int64_t want_arg = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = (double)((i * 2654435761u) % 1000) / 8.0;
        want += (float)x[i];
        if (x[i] > want_max) want_max = x[i], want_arg = i;
    }
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, &n, x);
    DeftNDArrayHandle s = call1("sum", 1, &a, NO_PARAMS);
    assert_values(s, 1, (double[]){want}, 1e-6);
    DeftNDArrayHandle am = call1("argmax", 1, &a, P("axis", "0"));
    assert_values(am, 1, (double[]){(double)want_arg}, 0);
    const int64_t cols[2] = {n / 17, 17};
    DeftNDArrayHandle m = make(DEFT_FLOAT64, 2, cols, x);
    DeftNDArrayHandle cs = call1("sum", 1, &m, P("axis", "0"));
    double col_want[17] = {0};
    for (int64_t i = 0; i < cols[0] * 17; i++) col_want[i % 17] += x[i];
    assert_values(cs, 17, col_want, 1e-12);
    free(x);
    free_all(5, (DeftNDArrayHandle[]){a, s, am, m, cs});
}
END_TEST

START_TEST(test_softmax_and_log_softmax_are_stable) {
    const double x[6] = {1000, 1001, 1002, -5, 0, 5};
    for (int d = 0; d < 2; d++) {
        int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
        DeftNDArrayHandle a = make(dtype, 2, SHAPE(2, 3), x);
        DeftNDArrayHandle sm = call1("softmax", 1, &a, NO_PARAMS);
        DeftNDArrayHandle lsm = call1("log_softmax", 1, &a, P("axis", "1"));
        DeftNDArrayHandle col = call1("softmax", 1, &a, P("axis", "0"));
        double want[6], want_log[6], want_col[6];
        for (int r = 0; r < 2; r++) {
            double m = fmax(fmax(x[3 * r], x[3 * r + 1]), x[3 * r + 2]), z = 0;
            for (int c = 0; c < 3; c++) z += exp(x[3 * r + c] - m);
            for (int c = 0; c < 3; c++) {
                want[3 * r + c] = exp(x[3 * r + c] - m) / z;
                want_log[3 * r + c] = x[3 * r + c] - m - log(z);
            }
        }
        for (int c = 0; c < 3; c++) {
            double m = fmax(x[c], x[3 + c]), z = exp(x[c] - m) + exp(x[3 + c] - m);
            want_col[c] = exp(x[c] - m) / z;
            want_col[3 + c] = exp(x[3 + c] - m) / z;
        }
        assert_values(sm, 6, want, d ? 1e-14 : 1e-6);
        assert_values(lsm, 6, want_log, d ? 1e-14 : 1e-6);
        assert_values(col, 6, want_col, d ? 1e-14 : 1e-6);
        free_all(4, (DeftNDArrayHandle[]){a, sm, lsm, col});
    }
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(2), NULL);
    ck_assert_call_fails("softmax", 1, &i, NO_PARAMS, DEFT_ERROR_TYPE,
                         "expected float32, float64, float16 or bfloat16");
    ck_assert_call_fails("softmax", 1, &i, P("axis", "1"), DEFT_ERROR_TYPE, "dtype int32");
    ck_assert_ok(DeftNDArrayFree(i));
}
END_TEST

/* float16 and bfloat16 rows: computed in double from the half inputs, each
 * value rounded to the dtype (within half a unit in the last place, written
 * as a relative tolerance: 2^-11 for float16, 2^-8 for bfloat16). */
START_TEST(test_half_softmax_rows) {
    const int dtype = _i ? DEFT_BFLOAT16 : DEFT_FLOAT16;
    double tol = _i ? 0x1p-8 : 0x1p-11;
    const double x[6] = {-3, -1, 0.5, 2, 4, 8}; /* exact in both dtypes */
    double want[6], want_log[6], want_min[6];
    for (int r = 0; r < 2; r++) {
        const double *row = x + 3 * r;
        double m = fmax(fmax(row[0], row[1]), row[2]), z = 0;
        double mn = fmin(fmin(row[0], row[1]), row[2]), zmin = 0;
        for (int c = 0; c < 3; c++) z += exp(row[c] - m), zmin += exp(mn - row[c]);
        for (int c = 0; c < 3; c++) {
            want[3 * r + c] = exp(row[c] - m) / z;
            want_log[3 * r + c] = row[c] - m - log(z);
            want_min[3 * r + c] = exp(mn - row[c]) / zmin;
        }
    }
    DeftNDArrayHandle a = make(dtype, 2, SHAPE(2, 3), x);
    const char *names[3] = {"softmax", "log_softmax", "softmin"};
    const double *wants[3] = {want, want_log, want_min};
    for (int k = 0; k < 3; k++) {
        DeftNDArrayHandle y = call1(names[k], 1, &a, NO_PARAMS);
        ck_assert_int_eq(dtype_of(y), dtype);
        assert_values(y, 6, wants[k], tol);
        ck_assert_ok(DeftNDArrayFree(y));
    }
    ck_assert_ok(DeftNDArrayFree(a));
}
END_TEST

/* float32 rows of n take a vectorised path (short rows of log_softmax
 * share blocks of 256 floats): NaN and infinities, against the
 * double-precision formula. */
static void check_float32_softmax_rows(int rows, int n) {
    double *x = malloc(3 * sizeof(double) * (size_t)(rows * n));
    double *want = x + rows * n, *want_log = want + rows * n;
    uint64_t state = 99;
    for (int i = 0; i < rows * n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (double)(float)(-20 + 40 * (double)(state >> 11) / 9007199254740992.0);
    }
    if (rows >= 2) {
        x[(rows - 2) * n + n / 2] = -INFINITY; /* contributes exp(-inf) = 0 */
        x[(rows - 1) * n + n - 1] = NAN;       /* makes its whole row NaN */
    }
    for (int r = 0; r < rows; r++) {
        const double *row = x + r * n;
        double m = -INFINITY, z = 0;
        for (int c = 0; c < n; c++) m = row[c] > m || row[c] != row[c] ? row[c] : m;
        for (int c = 0; c < n; c++) z += exp(row[c] - m);
        for (int c = 0; c < n; c++) {
            want[r * n + c] = exp(row[c] - m) / z;
            want_log[r * n + c] = row[c] - m - log(z);
        }
    }
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(rows, n), x);
    DeftNDArrayHandle sm = call1("softmax", 1, &a, NO_PARAMS);
    DeftNDArrayHandle lsm = call1("log_softmax", 1, &a, NO_PARAMS);
    assert_values(sm, rows * n, want, 1e-6);
    assert_values(lsm, rows * n, want_log, 1e-6);
    free_all(3, (DeftNDArrayHandle[]){a, sm, lsm});
    free(x);
}

START_TEST(test_float32_softmax_rows) {
    /* long and ragged rows; a classifier's 10 classes over several blocks;
     * the longest rows that share a block, and one past them */
    const int shapes[][2] = {{4, 1037}, {70, 10}, {1, 10}, {9, 64}, {5, 65}, {300, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_float32_softmax_rows(shapes[i][0], shapes[i][1]);
}
END_TEST

/* Run in place (the planner may give the output the input's memory), the
 * float32 row path gave log_softmax wrong values: it kept the exponentials in
 * the output, over the input it read again afterwards. */
START_TEST(test_softmax_and_log_softmax_in_place) {
    enum { N = 300 }; /* over a block of the log form's buffer */
    double x[2 * N], want[2 * N], want_log[2 * N];
    for (int i = 0; i < 2 * N; i++) x[i] = sin(i * 0.37) * 4;
    for (int r = 0; r < 2; r++) {
        double m = -INFINITY, z = 0;
        for (int c = 0; c < N; c++) m = fmax(m, x[r * N + c]);
        for (int c = 0; c < N; c++) z += exp(x[r * N + c] - m);
        for (int c = 0; c < N; c++) {
            want[r * N + c] = exp(x[r * N + c] - m) / z;
            want_log[r * N + c] = x[r * N + c] - m - log(z);
        }
    }
    for (int log_form = 0; log_form < 2; log_form++) {
        DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, N), x);
        int nout = 1;
        ck_assert_ok(call(log_form ? "log_softmax" : "softmax", 1, &a, &nout, &a, NO_PARAMS));
        assert_values(a, 2 * N, log_form ? want_log : want, 1e-5);
        ck_assert_ok(DeftNDArrayFree(a));
    }
}
END_TEST

START_TEST(test_softmax_cross_entropy) {
    const double x[6] = {2, 1, 0.5, -1, 3, 100};
    DeftNDArrayHandle data = make(DEFT_FLOAT64, 2, SHAPE(2, 3), x);
    DeftNDArrayHandle label = make(DEFT_INT32, 1, SHAPE(2), VALUES(0, 2));
    DeftNDArrayHandle loss =
        call1("softmax_cross_entropy", 2, (DeftNDArrayHandle[]){data, label}, NO_PARAMS);
    double want = 0;
    const int labels[2] = {0, 2};
    for (int r = 0; r < 2; r++) {
        double m = fmax(fmax(x[3 * r], x[3 * r + 1]), x[3 * r + 2]), z = 0;
        for (int c = 0; c < 3; c++) z += exp(x[3 * r + c] - m);
        want += m + log(z) - x[3 * r + labels[r]];
    }
    assert_shape(loss, 1, SHAPE(1));
    assert_values(loss, 1, &want, 1e-14);
    DeftNDArrayHandle bad = make(DEFT_INT32, 1, SHAPE(2), VALUES(0, 3));
    DeftNDArrayHandle failed =
        call1("softmax_cross_entropy", 2, (DeftNDArrayHandle[]){data, bad}, NO_PARAMS);
    ck_assert_fails(DeftNDArrayWaitToRead(failed), DEFT_ERROR_VALUE,
                    "label[1] is 3, expected a class index in [0, 3)");
    ck_assert_ok(DeftNDArrayFree(failed));
    DeftNDArrayHandle wrong = make(DEFT_INT32, 1, SHAPE(3), NULL);
    ck_assert_call_fails("softmax_cross_entropy", 2, ((DeftNDArrayHandle[]){data, wrong}),
                         NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 1 (label) has shape (3,), expected (2,)");
    free_all(5, (DeftNDArrayHandle[]){data, label, loss, bad, wrong});
}
END_TEST

/* float32 losses and gradients (a vectorised path) against double
 * references: 10 classes (many rows a chunk), 1000 (one row a chunk) and
 * 3000 (the double path). */
START_TEST(test_softmax_cross_entropy_float32) {
    const int64_t shapes[3][2] = {{37, 10}, {3, 1000}, {2, 3000}};
    for (int k = 0; k < 3; k++) {
        int64_t rows = shapes[k][0], classes = shapes[k][1], n = rows * classes;
        double *x = malloc(sizeof(double) * (size_t)n),
               *want_dx = malloc(sizeof(double) * (size_t)n);
        double labels[37], want = 0, g = 0.25;
        for (int64_t i = 0; i < n; i++) x[i] = (float)(3 * sin((double)i * 0.7) + (i % 5));
        for (int64_t r = 0; r < rows; r++) {
            labels[r] = (double)((r * 7) % classes);
            double m = -INFINITY, z = 0;
            for (int64_t c = 0; c < classes; c++) m = fmax(m, x[r * classes + c]);
            for (int64_t c = 0; c < classes; c++) z += exp(x[r * classes + c] - m);
            want += m + log(z) - x[r * classes + (int64_t)labels[r]];
            for (int64_t c = 0; c < classes; c++)
                want_dx[r * classes + c] =
                    g * (exp(x[r * classes + c] - m) / z - (c == (int64_t)labels[r]));
        }
        DeftNDArrayHandle data = make(DEFT_FLOAT32, 2, shapes[k], x);
        DeftNDArrayHandle label = make(DEFT_FLOAT32, 1, SHAPE(rows), labels);
        DeftNDArrayHandle head = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(g));
        DeftNDArrayHandle loss =
            call1("softmax_cross_entropy", 2, (DeftNDArrayHandle[]){data, label}, NO_PARAMS);
        assert_values(loss, 1, &want, 1e-5 * fabs(want));
        DeftNDArrayHandle dx = call1("_backward_softmax_cross_entropy", 3,
                                     (DeftNDArrayHandle[]){head, data, label}, NO_PARAMS);
        assert_values(dx, n, want_dx, 1e-6);
        labels[rows - 1] = -1;
        DeftNDArrayHandle bad = make(DEFT_FLOAT32, 1, SHAPE(rows), labels);
        DeftNDArrayHandle failed = call1("_backward_softmax_cross_entropy", 3,
                                         (DeftNDArrayHandle[]){head, data, bad}, NO_PARAMS);
        ck_assert_fails(DeftNDArrayWaitToRead(failed), DEFT_ERROR_VALUE, "is -1, expected a class");
        free_all(7, (DeftNDArrayHandle[]){data, label, head, loss, dx, bad, failed});
        free(x), free(want_dx);
    }
}
END_TEST

START_TEST(test_nansum_nanprod_skip_nan) {
    const double x[6] = {1, NAN, 3, NAN, NAN, -2};
    for (int d = 0; d < 2; d++) {
        int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
        DeftNDArrayHandle a = make(dtype, 2, SHAPE(2, 3), x);
        DeftNDArrayHandle rows = call1("nansum", 1, &a, P("axis", "1"));
        assert_values(rows, 2, VALUES(4, -2), 0);
        DeftNDArrayHandle cols = call1("nanprod", 1, &a, P("axis", "0", "keepdims", "true"));
        assert_shape(cols, 2, SHAPE(1, 3));
        assert_values(cols, 3, VALUES(1, 1, -6), 0);
        DeftNDArrayHandle all = call1("nanprod", 1, &a, NO_PARAMS);
        assert_shape(all, 1, SHAPE(1));
        assert_values(all, 1, VALUES(-6), 0);
        DeftNDArrayHandle ex = call1("nansum", 1, &a, P("axis", "(1,)", "exclude", "true"));
        assert_values(ex, 3, VALUES(1, 0, 1), 0);
        free_all(5, (DeftNDArrayHandle[]){a, rows, cols, all, ex});
    }
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(3), VALUES(2, -3, 4)); /* no NaN: sum/prod */
    DeftNDArrayHandle is = call1("nansum", 1, &i, NO_PARAMS);
    assert_values(is, 1, VALUES(3), 0);
    DeftNDArrayHandle ip = call1("nanprod", 1, &i, NO_PARAMS);
    assert_values(ip, 1, VALUES(-24), 0);
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL);
    DeftNDArrayHandle es = call1("nansum", 1, &e, P("axis", "0"));
    assert_values(es, 2, VALUES(0, 0), 0);
    DeftNDArrayHandle ep = call1("nanprod", 1, &e, P("axis", "0"));
    assert_values(ep, 2, VALUES(1, 1), 0);
    ck_assert_call_fails("nansum", 1, &i, P("axis", "(0,0)"), DEFT_ERROR_VALUE,
                         "operator 'nansum': axis 0 is listed twice");
    free_all(6, (DeftNDArrayHandle[]){i, is, ip, e, es, ep});
}
END_TEST

START_TEST(test_empty_axis_tuple_reduces_every_axis) {
    DeftNDArrayHandle a = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle s = call1("sum", 1, &a, P("axis", "()"));
    assert_shape(s, 1, SHAPE(1));
    assert_values(s, 1, VALUES(10), 0);
    DeftNDArrayHandle k = call1("max", 1, &a, P("axis", "()", "keepdims", "true"));
    assert_shape(k, 2, SHAPE(1, 1));
    assert_values(k, 1, VALUES(4), 0);
    free_all(3, (DeftNDArrayHandle[]){a, s, k});
}
END_TEST

/* Reference: softmax of x * scale over lines of a (rows, n) array, masked to lengths. */
static void ref_softmax_rows(const double *x, int64_t rows, int64_t n, double scale,
                             const double *lengths, bool log_form, double *out) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t len = lengths ? (int64_t)lengths[r] : n;
        double max = -INFINITY, sum = 0;
        for (int64_t k = 0; k < len; k++) max = fmax(max, x[r * n + k] * scale);
        for (int64_t k = 0; k < len; k++) sum += exp(x[r * n + k] * scale - max);
        for (int64_t k = 0; k < n; k++) {
            double z = x[r * n + k] * scale - max;
            out[r * n + k] = k >= len ? 0 : log_form ? z - log(sum) : exp(z) / sum;
        }
    }
}

START_TEST(test_softmax_temperature_length_and_softmin) {
    const double x[8] = {0.5, -1, 2, 3, 1, 1, -2, 0.25};
    DeftNDArrayHandle a = make(DEFT_FLOAT64, 2, SHAPE(2, 4), x);
    double want[8];
    DeftNDArrayHandle t = call1("softmax", 1, &a, P("temperature", "2"));
    ref_softmax_rows(x, 2, 4, 0.5, NULL, false, want);
    assert_values(t, 8, want, 1e-14);
    DeftNDArrayHandle m = call1("softmin", 1, &a, P("temperature", "0.5"));
    ref_softmax_rows(x, 2, 4, -2, NULL, false, want);
    assert_values(m, 8, want, 1e-14);
    DeftNDArrayHandle len = make(DEFT_INT32, 1, SHAPE(2), VALUES(3, 0));
    DeftNDArrayHandle in[2] = {a, len};
    DeftNDArrayHandle l = call1("softmax", 2, in, P("use_length", "True"));
    ref_softmax_rows(x, 2, 4, 1, VALUES(3, 0), false, want);
    assert_values(l, 8, want, 1e-14);
    DeftNDArrayHandle ll = call1("log_softmax", 2, in, P("use_length", "1", "temperature", "4"));
    ref_softmax_rows(x, 2, 4, 0.25, VALUES(3, 0), true, want);
    assert_values(ll, 8, want, 1e-14);
    /* lengths along axis 0: one per column */
    DeftNDArrayHandle cl = make(DEFT_FLOAT32, 1, SHAPE(4), VALUES(1, 2, 2, 0));
    DeftNDArrayHandle c =
        call1("softmax", 2, (DeftNDArrayHandle[]){a, cl}, P("axis", "0", "use_length", "True"));
    assert_values(c, 8,
                  VALUES(1, 1 / (1 + exp(2.0)), 1 / (1 + exp(-4.0)), 0, 0, 1 / (1 + exp(-2.0)),
                         1 / (1 + exp(4.0)), 0),
                  1e-14);
    free_all(8, (DeftNDArrayHandle[]){a, t, m, len, l, ll, cl, c});
}
END_TEST

START_TEST(test_softmax_dtype_and_activation_modes) {
    DeftNDArrayHandle a =
        make(DEFT_FLOAT32, 3, SHAPE(2, 3, 2), VALUES(1, 2, 3, 4, 5, 6, -1, 0, 1, 0.5, 2, -3));
    DeftNDArrayHandle d = call1("softmax", 1, &a, P("dtype", "float64"));
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(d, &dtype));
    ck_assert_int_eq(dtype, DEFT_FLOAT64);
    DeftNDArrayHandle same = call1("softmax", 1, &a, NO_PARAMS);
    int64_t n;
    double *want = read_all(same, &n);
    assert_values(d, n, want, 1e-7);
    free(want);
    /* instance: the last axis (MXNet flattens to (rows, last)); channel: axis 1 */
    DeftNDArrayHandle inst = call1("SoftmaxActivation", 1, &a, NO_PARAMS);
    want = read_all(same, &n);
    assert_values(inst, n, want, 1e-7);
    free(want);
    DeftNDArrayHandle ch = call1("SoftmaxActivation", 1, &a, P("mode", "channel"));
    DeftNDArrayHandle ax1 = call1("softmax", 1, &a, P("axis", "1"));
    want = read_all(ax1, &n);
    assert_values(ch, n, want, 1e-7);
    free(want);
    DeftNDArrayHandle flat = make(DEFT_FLOAT32, 2, SHAPE(2, 3), NULL);
    ck_assert_call_fails("SoftmaxActivation", 1, &flat, P("mode", "channel"), DEFT_ERROR_VALUE,
                         "operator 'SoftmaxActivation': mode=channel needs an input of 3 or more "
                         "dimensions, got 2");
    ck_assert_call_fails("softmax", 1, &a, P("temperature", "0"), DEFT_ERROR_VALUE,
                         "operator 'softmax': temperature must not be 0");
    ck_assert_call_fails("softmax", 1, &a, P("dtype", "int32"), DEFT_ERROR_VALUE,
                         "dtype is int32, expected float16, float32 or float64");
    ck_assert_call_fails("softmax", 1, &a, P("use_length", "True"), DEFT_ERROR_VALUE,
                         "got 1 inputs, expected 2 (use_length=True)");
    DeftNDArrayHandle bad = make(DEFT_INT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle with_bad[2] = {a, bad};
    ck_assert_call_fails("softmax", 2, with_bad, P("use_length", "True"), DEFT_ERROR_VALUE,
                         "input 1 (length) has shape (3,), expected (2,3) (the data's shape "
                         "without axis 2)");
    DeftNDArrayHandle big = make(DEFT_INT32, 1, SHAPE(2), VALUES(1, 5));
    DeftNDArrayHandle rows = make(DEFT_FLOAT32, 2, SHAPE(2, 3), NULL);
    DeftNDArrayHandle with_big[2] = {rows, big};
    DeftNDArrayHandle failed = call1("softmax", 2, with_big, P("use_length", "True"));
    ck_assert_fails(DeftNDArrayWaitToRead(failed), DEFT_ERROR_VALUE,
                    "operator 'softmax': length[1] is 5, expected 0 to 3");
    DeftNDArrayHandle empty = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle ez = call1("softmin", 1, &empty, P("temperature", "2"));
    assert_shape(ez, 2, SHAPE(0, 3));
    free_all(13, (DeftNDArrayHandle[]){a, d, same, inst, ch, ax1, flat, bad, big, rows, failed,
                                       empty, ez});
}
END_TEST

/* bool arrays: sum and prod count in int64 (NumPy's), mean is float32 (deft's
 * mean of integers), max and min stay bool; every kernel path: rows, moved
 * axes, keepdims, one long span split across threads. */
START_TEST(test_bool_reductions_have_numpys_dtypes) {
    enum { R = 3, W = 50000 };
    static double x[R * W];
    int64_t rows[R] = {0}, cols[W] = {0}, total = 0;
    for (int i = 0; i < R * W; i++) {
        x[i] = i % 3 == 0 || i % 7 == 0;
        rows[i / W] += (int64_t)x[i], cols[i % W] += (int64_t)x[i], total += (int64_t)x[i];
    }
    DeftNDArrayHandle b = make(DEFT_BOOL, 2, SHAPE(R, W), x);
    const struct {
        const char *op, *axis;
        int dtype;
    } cases[] = {
        {"sum", "None", DEFT_INT64}, {"sum", "1", DEFT_INT64},       {"sum", "0", DEFT_INT64},
        {"nansum", "1", DEFT_INT64}, {"mean", "None", DEFT_FLOAT32}, {"mean", "0", DEFT_FLOAT32},
        {"prod", "0", DEFT_INT64},   {"nanprod", "1", DEFT_INT64},   {"max", "1", DEFT_BOOL}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        DeftNDArrayHandle y = call1(cases[c].op, 1, &b, P("axis", cases[c].axis));
        int dtype;
        ck_assert_ok(DeftNDArrayGetDType(y, &dtype));
        ck_assert_msg(dtype == cases[c].dtype, "%s: dtype %d", cases[c].op, dtype);
        int64_t n;
        double *got = read_all(y, &n);
        bool mean = !strcmp(cases[c].op, "mean"), mul = strstr(cases[c].op, "prod") != NULL;
        for (int64_t i = 0; i < n; i++) {
            double want = cases[c].axis[0] == 'N'   ? (double)total
                          : cases[c].axis[0] == '1' ? (double)rows[i]
                                                    : (double)cols[i];
            int64_t count = cases[c].axis[0] == 'N' ? R * W : cases[c].axis[0] == '1' ? W : R;
            if (mean) want /= (double)count;
            if (mul) want = want == (double)count;
            if (!strcmp(cases[c].op, "max")) want = want > 0;
            ck_assert_msg(close_enough(got[i], want, mean ? 1e-6 : 0),
                          "%s axis %s [%lld]: %g, want %g", cases[c].op, cases[c].axis,
                          (long long)i, got[i], want);
        }
        free(got);
        ck_assert_ok(DeftNDArrayFree(y));
    }
    DeftNDArrayHandle kept = call1("sum", 1, &b, P("axis", "0", "keepdims", "true"));
    assert_shape(kept, 2, SHAPE(1, W));
    ck_assert_call_fails("norm", 1, &b, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype bool, expected float32 or float64");
    free_all(2, (DeftNDArrayHandle[]){b, kept});
}
END_TEST

static Suite *reduce_suite(void) {
    Suite *suite = suite_create("reductions");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reductions_over_every_axis_set);
    tcase_add_test(tc, test_exclude_negative_axes_and_norm_ord1);
    tcase_add_test(tc, test_integer_sums_wrap_and_are_exact);
    tcase_add_test(tc, test_bool_reductions_have_numpys_dtypes);
    tcase_add_test(tc, test_argmax_argmin_first_occurrence_and_nan);
    tcase_add_test(tc, test_zero_size_reductions);
    tcase_add_test(tc, test_zero_size_reductions_of_every_dtype_and_layout);
    tcase_add_test(tc, test_take_from_zero_size_rows);
    tcase_add_test(tc, test_large_reductions_split_across_threads);
    tcase_add_test(tc, test_softmax_and_log_softmax_are_stable);
    tcase_add_test(tc, test_float32_softmax_rows);
    tcase_add_loop_test(tc, test_half_softmax_rows, 0, 2);
    tcase_add_test(tc, test_softmax_cross_entropy);
    tcase_add_test(tc, test_softmax_cross_entropy_float32);
    tcase_add_test(tc, test_reductions_read_layouts_in_place);
    tcase_add_test(tc, test_reduce_to_like);
    tcase_add_test(tc, test_large_in_place_reductions);
    tcase_add_test(tc, test_nansum_nanprod_skip_nan);
    tcase_add_test(tc, test_empty_axis_tuple_reduces_every_axis);
    tcase_add_test(tc, test_softmax_and_log_softmax_in_place);
    tcase_add_test(tc, test_softmax_temperature_length_and_softmin);
    tcase_add_test(tc, test_softmax_dtype_and_activation_modes);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(reduce_suite());
}
