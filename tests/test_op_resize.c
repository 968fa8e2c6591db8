/*
 * UpSampling, BilinearResize2D, Pad and Crop against naive loops and small
 * hand-computed arrays. The backward operators are checked by the adjoint
 * identity: for a linear f, sum(dy * f(x)) equals sum(f^T(dy) * x).
 */
#include "op_helpers.h"

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = (double)(((i + 1) * (seed * 31 + 17)) % 23) / 4.0 - 2;
}

static double dot_arrays(DeftNDArrayHandle a, DeftNDArrayHandle b) {
    int64_t na, nb;
    double *x = read_all(a, &na), *y = read_all(b, &nb), sum = 0;
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) sum += x[i] * y[i];
    free(x), free(y);
    return sum;
}

/* <dy, f(x)> == <f^T(dy), x> for the op's output y = f(x) and its backward's dx. */
static void assert_adjoint(DeftNDArrayHandle x, DeftNDArrayHandle y, DeftNDArrayHandle dy,
                           DeftNDArrayHandle dx) {
    double lhs = dot_arrays(dy, y), rhs = dot_arrays(dx, x);
    ck_assert_msg(fabs(lhs - rhs) <= 1e-9 * (1 + fabs(lhs)), "<dy, f(x)> %.17g, <f'(dy), x> %.17g",
                  lhs, rhs);
}

static DeftNDArrayHandle filled(int dtype, int ndim, const int64_t *shape, int seed) {
    int64_t n = count_of(ndim, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    fill(v, n, seed);
    DeftNDArrayHandle h = make(dtype, ndim, shape, v);
    free(v);
    return h;
}

/* ---- UpSampling ---- */

START_TEST(test_upsampling_nearest_single_input) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle y =
        call1("UpSampling", 1, &x, P("scale", "2", "sample_type", "nearest", "num_args", "1"));
    assert_shape(y, 4, SHAPE(1, 1, 4, 4));
    assert_values(y, 16, VALUES(1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4), 0);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

/* Input i is scaled to input 0's size times scale, then joined along channels or summed. */
START_TEST(test_upsampling_nearest_several_inputs) {
    for (int sum = 0; sum < 2; sum++) {
        DeftNDArrayHandle a = filled(DEFT_FLOAT64, 4, SHAPE(2, 2, 2, 3), 1);
        DeftNDArrayHandle b3 = filled(DEFT_FLOAT64, 4, SHAPE(2, 1, 4, 6), 3);
        DeftNDArrayHandle second = sum ? filled(DEFT_FLOAT64, 4, SHAPE(2, 2, 4, 6), 4) : b3;
        const char *const *params = P("scale", "2", "sample_type", "nearest", "num_args", "2",
                                      "multi_input_mode", sum ? "sum" : "concat");
        DeftNDArrayHandle y = call1("UpSampling", 2, (DeftNDArrayHandle[]){a, second}, params);
        int64_t c = sum ? 2 : 3, na, nb;
        assert_shape(y, 4, (int64_t[]){2, c, 4, 6});
        double *va = read_all(a, &na), *vb = read_all(second, &nb), want[2 * 3 * 24];
        for (int64_t n = 0; n < 2; n++)
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t i = 0; i < 4; i++)
                    for (int64_t j = 0; j < 6; j++) {
                        double from_a = ch < 2 ? va[((n * 2 + ch) * 2 + i / 2) * 3 + j / 2] : 0;
                        int64_t bc = sum ? ch : ch - 2, bch = sum ? 2 : 1;
                        double from_b = bc >= 0 ? vb[((n * bch + bc) * 4 + i) * 6 + j] : 0;
                        want[((n * c + ch) * 4 + i) * 6 + j] =
                            sum ? from_a + from_b : (ch < 2 ? from_a : from_b);
                    }
        assert_values(y, 2 * c * 24, want, 1e-14);
        DeftNDArrayHandle dy = filled(DEFT_FLOAT64, 4, (int64_t[]){2, c, 4, 6}, 5);
        DeftNDArrayHandle dx[2] = {NULL, NULL};
        int nout = 2;
        ck_assert_ok(call("_backward_UpSampling", 3, (DeftNDArrayHandle[]){dy, a, second}, &nout,
                          dx, params));
        ck_assert_int_eq(nout, 2);
        /* the backward of a sum of two linear maps: each part's adjoint */
        double lhs = dot_arrays(dy, y), rhs = dot_arrays(dx[0], a) + dot_arrays(dx[1], second);
        ck_assert_msg(fabs(lhs - rhs) <= 1e-9 * (1 + fabs(lhs)), "%.17g vs %.17g", lhs, rhs);
        free(va), free(vb);
        if (sum) ck_assert_ok(DeftNDArrayFree(second));
        free_all(6, (DeftNDArrayHandle[]){a, b3, y, dy, dx[0], dx[1]});
    }
}
END_TEST

/* MXNet's documented example: ones through a 4x4 kernel of ones at scale 2. */
START_TEST(test_upsampling_bilinear_is_a_depthwise_deconvolution) {
    double ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 3, 3), ones);
    DeftNDArrayHandle w = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 4, 4), ones);
    const char *const *params =
        P("scale", "2", "sample_type", "bilinear", "num_filter", "1", "num_args", "2");
    DeftNDArrayHandle y = call1("UpSampling", 2, (DeftNDArrayHandle[]){x, w}, params);
    assert_shape(y, 4, SHAPE(1, 1, 6, 6));
    double want[36];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
            want[i * 6 + j] = (i == 0 || i == 5 ? 1 : 2) * (j == 0 || j == 5 ? 1 : 2);
    assert_values(y, 36, want, 0);
    /* the adjoint in data and in weight (the map is bilinear: linear in each) */
    DeftNDArrayHandle x2 = filled(DEFT_FLOAT64, 4, SHAPE(2, 3, 3, 4), 1);
    DeftNDArrayHandle w2 = filled(DEFT_FLOAT64, 4, SHAPE(3, 1, 5, 5), 2);
    const char *const *p3 =
        P("scale", "3", "sample_type", "bilinear", "num_filter", "3", "num_args", "2");
    DeftNDArrayHandle y2 = call1("UpSampling", 2, (DeftNDArrayHandle[]){x2, w2}, p3);
    assert_shape(y2, 4, SHAPE(2, 3, 9, 12));
    DeftNDArrayHandle dy = filled(DEFT_FLOAT64, 4, SHAPE(2, 3, 9, 12), 3);
    DeftNDArrayHandle g[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("_backward_UpSampling", 3, (DeftNDArrayHandle[]){dy, x2, w2}, &nout, g, p3));
    assert_adjoint(x2, y2, dy, g[0]);
    assert_adjoint(w2, y2, dy, g[1]);
    ck_assert_call_fails("UpSampling", 2, ((DeftNDArrayHandle[]){x, w}),
                         P("scale", "2", "sample_type", "bilinear", "num_args", "2"),
                         DEFT_ERROR_VALUE, "num_filter is 0, expected the data's 1 channels");
    ck_assert_call_fails(
        "UpSampling", 2, ((DeftNDArrayHandle[]){x2, w2}),
        P("scale", "2", "sample_type", "bilinear", "num_filter", "3", "num_args", "2"),
        DEFT_ERROR_VALUE, "input 1 (weight) has shape (3,1,5,5), expected (3,1,4,4)");
    free_all(8, (DeftNDArrayHandle[]){x, w, y, x2, w2, y2, dy, g[0]});
    ck_assert_ok(DeftNDArrayFree(g[1]));
}
END_TEST

START_TEST(test_upsampling_rejects_bad_inputs) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 2, 2), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 4, SHAPE(1, 2, 3, 3), NULL);
    DeftNDArrayHandle v = make(DEFT_FLOAT32, 3, SHAPE(1, 2, 2), NULL);
    ck_assert_call_fails("UpSampling", 1, &a,
                         P("scale", "0", "sample_type", "nearest", "num_args", "1"),
                         DEFT_ERROR_VALUE, "scale is 0, expected 1 to 2^31 - 1");
    ck_assert_call_fails("UpSampling", 1, &v,
                         P("scale", "2", "sample_type", "nearest", "num_args", "1"),
                         DEFT_ERROR_VALUE, "input 0 (data) has shape (1,2,2), expected 4-D");
    ck_assert_call_fails("UpSampling", 2, ((DeftNDArrayHandle[]){a, b}),
                         P("scale", "2", "sample_type", "nearest", "num_args", "2"),
                         DEFT_ERROR_VALUE, "must divide the output's (4, 4)");
    ck_assert_call_fails("UpSampling", 1, &a, P("scale", "2", "sample_type", "nearest"),
                         DEFT_ERROR_VALUE, "required parameter 'num_args' is missing");
    ck_assert_call_fails("UpSampling", 1, &a,
                         P("scale", "2", "sample_type", "nearest", "num_args", "2"),
                         DEFT_ERROR_VALUE, "num_args is 2 but 1 inputs were given");
    DeftNDArrayHandle c = make(DEFT_FLOAT32, 4, SHAPE(1, 2, 1, 1), NULL);
    ck_assert_call_fails(
        "UpSampling", 2, ((DeftNDArrayHandle[]){a, c}),
        P("scale", "2", "sample_type", "nearest", "num_args", "2", "multi_input_mode", "sum"),
        DEFT_ERROR_VALUE, "input 1 has 2 channels, expected 1");
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 4, SHAPE(0, 3, 2, 2), NULL);
    DeftNDArrayHandle ye =
        call1("UpSampling", 1, &e, P("scale", "3", "sample_type", "nearest", "num_args", "1"));
    assert_shape(ye, 4, SHAPE(0, 3, 6, 6));
    free_all(6, (DeftNDArrayHandle[]){a, b, v, c, e, ye});
}
END_TEST

/* ---- BilinearResize2D ---- */

/* The interpolation from its definition: source position, two neighbours per axis. */
static void ref_axis(int64_t in, int64_t out, bool align, int64_t o, int64_t *i0, int64_t *i1,
                     double *frac) {
    double scale = out > 1 ? (align ? (double)(in - 1) / (double)(out - 1) : (double)in / out) : 0;
    double src = align ? scale * o : fmax(scale * (o + 0.5) - 0.5, 0);
    *i0 = (int64_t)floor(src);
    *i1 = *i0 + 1 < in ? *i0 + 1 : *i0;
    *frac = src - (double)*i0;
}

static void ref_resize(const double *x, int64_t planes, int64_t H, int64_t W, int64_t OH,
                       int64_t OW, bool align, double *y) {
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {
                int64_t r0, r1, c0, c1;
                double fr, fc;
                ref_axis(H, OH, align, i, &r0, &r1, &fr);
                ref_axis(W, OW, align, j, &c0, &c1, &fc);
                const double *s = x + p * H * W;
                y[(p * OH + i) * OW + j] =
                    (1 - fr) * ((1 - fc) * s[r0 * W + c0] + fc * s[r0 * W + c1]) +
                    fr * ((1 - fc) * s[r1 * W + c0] + fc * s[r1 * W + c1]);
            }
}

START_TEST(test_bilinear_resize_matches_reference) {
    const int64_t sizes[][2] = {{7, 9}, {2, 3}, {4, 4}, {1, 1}, {10, 2}};
    for (int align = 0; align < 2; align++)
        for (int s = 0; s < 5; s++) {
            int64_t OH = sizes[s][0], OW = sizes[s][1];
            double x[2 * 3 * 4 * 5], y[2 * 3 * 10 * 9];
            fill(x, 120, s);
            DeftNDArrayHandle X = make(DEFT_FLOAT64, 4, SHAPE(2, 3, 4, 5), x);
            char h[8], w[8];
            snprintf(h, sizeof h, "%lld", (long long)OH);
            snprintf(w, sizeof w, "%lld", (long long)OW);
            const char *const *params =
                P("height", h, "width", w, "align_corners", align ? "true" : "false");
            DeftNDArrayHandle Y = call1("_contrib_BilinearResize2D", 1, &X, params);
            assert_shape(Y, 4, (int64_t[]){2, 3, OH, OW});
            ref_resize(x, 6, 4, 5, OH, OW, align, y);
            assert_values(Y, 6 * OH * OW, y, 1e-6); /* positions are computed in float32 */
            DeftNDArrayHandle dY = filled(DEFT_FLOAT64, 4, (int64_t[]){2, 3, OH, OW}, 7);
            DeftNDArrayHandle dX = call1("_backward_contrib_BilinearResize2D", 2,
                                         (DeftNDArrayHandle[]){dY, X}, params);
            assert_shape(dX, 4, SHAPE(2, 3, 4, 5));
            assert_adjoint(X, Y, dY, dX);
            free_all(4, (DeftNDArrayHandle[]){X, Y, dY, dX});
        }
}
END_TEST

static void assert_resized(DeftNDArrayHandle x, const char *const *params, int64_t oh, int64_t ow) {
    DeftNDArrayHandle y = call1("BilinearResize2D", 1, &x, params);
    int64_t shape[4];
    int ndim;
    ck_assert_ok(DeftNDArrayGetShape(x, shape, 4, &ndim));
    assert_shape(y, 4, (int64_t[]){shape[0], shape[1], oh, ow});
    ck_assert_ok(DeftNDArrayFree(y));
}

START_TEST(test_bilinear_resize_modes) {
    DeftNDArrayHandle x = filled(DEFT_FLOAT32, 4, SHAPE(1, 2, 5, 6), 1);
    assert_resized(x, P("height", "3", "width", "8"), 3, 8);
    assert_resized(x, P("scale_height", "1.5", "scale_width", "0.5"), 7, 3);
    assert_resized(x, P("scale_width", "3", "height", "2", "width", "2"), 2, 2);
    assert_resized(x, P("mode", "odd_scale", "scale_height", "2", "scale_width", "2"), 9, 12);
    assert_resized(x, P("mode", "to_even_down"), 4, 6);
    assert_resized(x, P("mode", "to_even_up"), 6, 6);
    assert_resized(x, P("mode", "to_odd_down"), 5, 5);
    assert_resized(x, P("mode", "to_odd_up"), 5, 7);
    DeftNDArrayHandle like = make(DEFT_FLOAT32, 4, SHAPE(3, 1, 2, 9), NULL);
    DeftNDArrayHandle y =
        call1("BilinearResize2D", 2, (DeftNDArrayHandle[]){x, like}, P("mode", "like"));
    assert_shape(y, 4, SHAPE(1, 2, 2, 9));
    ck_assert_call_fails("BilinearResize2D", 1, &x, P("mode", "like"), DEFT_ERROR_VALUE,
                         "got 1 inputs, expected 2 for mode like");
    ck_assert_call_fails("BilinearResize2D", 1, &x, P("scale_height", "2"), DEFT_ERROR_VALUE,
                         "mode size with scale_height needs scale_width too");
    ck_assert_call_fails("BilinearResize2D", 1, &x, P("height", "0"), DEFT_ERROR_VALUE,
                         "height and width are 0 and 1, expected 1 to 2^31 - 1");
    ck_assert_call_fails("BilinearResize2D", 1, &x, P("mode", "stretch"), DEFT_ERROR_PARSE,
                         "expected one of: size, odd_scale, like");
    DeftNDArrayHandle v = make(DEFT_FLOAT32, 3, SHAPE(2, 5, 6), NULL);
    ck_assert_call_fails("_contrib_BilinearResize2D", 1, &v, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 0 (data) has shape (2,5,6), expected 4-D");
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 4, SHAPE(0, 2, 5, 6), NULL);
    assert_resized(e, P("height", "3", "width", "4"), 3, 4);
    free_all(5, (DeftNDArrayHandle[]){x, like, y, v, e});
}
END_TEST

/* ---- Pad ---- */

/* NumPy's pad: constant, edge (clamp) and reflect (mirror without the edge). */
static int64_t ref_pad_index(const char *mode, int64_t i, int64_t size) {
    if (i >= 0 && i < size) return i;
    if (!strcmp(mode, "constant")) return -1;
    if (!strcmp(mode, "edge")) return i < 0 ? 0 : size - 1;
    return i < 0 ? -i : 2 * size - 2 - i;
}

START_TEST(test_pad_modes_match_numpy) {
    const char *modes[] = {"constant", "edge", "reflect"};
    double x[2 * 2 * 3 * 4];
    fill(x, 48, 1);
    for (int m = 0; m < 3; m++) {
        DeftNDArrayHandle X = make(DEFT_FLOAT64, 4, SHAPE(2, 2, 3, 4), x);
        const char *const *params =
            P("mode", modes[m], "pad_width", "(0,0,0,0,2,1,1,3)", "constant_value", "7.5");
        DeftNDArrayHandle Y = call1("Pad", 1, &X, params);
        assert_shape(Y, 4, SHAPE(2, 2, 6, 8));
        double want[2 * 2 * 6 * 8];
        for (int p = 0; p < 4; p++)
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 8; j++) {
                    int64_t r = ref_pad_index(modes[m], i - 2, 3),
                            c = ref_pad_index(modes[m], j - 1, 4);
                    want[(p * 6 + i) * 8 + j] = r < 0 || c < 0 ? 7.5 : x[(p * 3 + r) * 4 + c];
                }
        assert_values(Y, 192, want, 0);
        DeftNDArrayHandle dY = filled(DEFT_FLOAT64, 4, SHAPE(2, 2, 6, 8), 2);
        DeftNDArrayHandle dX = call1("_backward_Pad", 2, (DeftNDArrayHandle[]){dY, X}, params);
        if (m > 0) assert_adjoint(X, Y, dY, dX); /* constant padding is affine, not linear */
        free_all(4, (DeftNDArrayHandle[]){X, Y, dY, dX});
    }
    DeftNDArrayHandle five = filled(DEFT_INT32, 5, SHAPE(1, 1, 2, 2, 2), 3);
    DeftNDArrayHandle y5 =
        call1("Pad", 1, &five, P("mode", "edge", "pad_width", "[0, 0, 0, 0, 1, 0, 0, 1, 2, 2]"));
    assert_shape(y5, 5, SHAPE(1, 1, 3, 3, 6));
    free_all(2, (DeftNDArrayHandle[]){five, y5});
}
END_TEST

START_TEST(test_pad_rejects_bad_widths) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 2, 3), NULL);
    DeftNDArrayHandle v = make(DEFT_FLOAT32, 3, SHAPE(1, 2, 3), NULL);
    ck_assert_call_fails("Pad", 1, &v, P("mode", "edge", "pad_width", "(0,0,0,0,1,1)"),
                         DEFT_ERROR_VALUE, "Pad supports 4-D or 5-D data");
    ck_assert_call_fails("Pad", 1, &x, P("mode", "edge", "pad_width", "(0,0,0,0,1,1)"),
                         DEFT_ERROR_VALUE, "pad_width has 6 entries, expected 8");
    ck_assert_call_fails("Pad", 1, &x, P("mode", "edge", "pad_width", "(0,1,0,0,1,1,1,1)"),
                         DEFT_ERROR_VALUE, "must not pad the first two axes");
    ck_assert_call_fails("Pad", 1, &x, P("mode", "reflect", "pad_width", "(0,0,0,0,2,0,1,1)"),
                         DEFT_ERROR_VALUE, "reflect padding of axis 2 by (2, 0)");
    ck_assert_call_fails("Pad", 1, &x, P("mode", "edge", "pad_width", "(0,0,0,0,1,x,1,1)"),
                         DEFT_ERROR_PARSE, "parameter 'pad_width' is '(0,0,0,0,1,x,1,1)'");
    ck_assert_call_fails("Pad", 1, &x, P("mode", "edge", "pad_width", "(0,0,0,0,-1,0,1,1)"),
                         DEFT_ERROR_VALUE, "an entry for axis 2 outside [0, 2^31 - 1]");
    ck_assert_call_fails("Pad", 1, &x, P("pad_width", "(0,0,0,0,1,0,1,1)"), DEFT_ERROR_VALUE,
                         "required parameter 'mode' is missing");
    free_all(2, (DeftNDArrayHandle[]){x, v});
}
END_TEST

/* ---- Crop ---- */

START_TEST(test_crop_by_size_offset_centre_and_like) {
    double x[2 * 1 * 4 * 5];
    for (int i = 0; i < 40; i++) x[i] = i;
    DeftNDArrayHandle X = make(DEFT_FLOAT32, 4, SHAPE(2, 1, 4, 5), x);
    DeftNDArrayHandle a =
        call1("Crop", 1, &X, P("num_args", "1", "h_w", "(2,3)", "offset", "(1,2)"));
    assert_shape(a, 4, SHAPE(2, 1, 2, 3));
    assert_values(a, 12, VALUES(7, 8, 9, 12, 13, 14, 27, 28, 29, 32, 33, 34), 0);
    DeftNDArrayHandle like = make(DEFT_FLOAT32, 4, SHAPE(7, 7, 2, 2), NULL);
    const char *const *centre = P("num_args", "2", "center_crop", "true");
    DeftNDArrayHandle b = call1("Crop", 2, (DeftNDArrayHandle[]){X, like}, centre);
    assert_values(b, 8, VALUES(6, 7, 11, 12, 26, 27, 31, 32), 0);
    DeftNDArrayHandle dy = filled(DEFT_FLOAT32, 4, SHAPE(2, 1, 2, 2), 1);
    DeftNDArrayHandle g[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("_backward_Crop", 3, (DeftNDArrayHandle[]){dy, X, like}, &nout, g, centre));
    ck_assert_int_eq(nout, 2);
    int64_t n;
    double *d = read_all(dy, &n), want[40] = {0};
    for (int k = 0; k < 8; k++) want[(k / 4) * 20 + 5 + (k % 4) / 2 * 5 + 1 + k % 2] = d[k];
    assert_values(g[0], 40, want, 0);
    double zeros[7 * 7 * 4] = {0};
    assert_values(g[1], 196, zeros, 0);
    free(d);
    free_all(7, (DeftNDArrayHandle[]){X, a, like, b, dy, g[0], g[1]});
}
END_TEST

START_TEST(test_crop_rejects_bad_parameters) {
    DeftNDArrayHandle X = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 4, 5), NULL);
    DeftNDArrayHandle big = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 6, 2), NULL);
    ck_assert_call_fails("Crop", 1, &X, P("num_args", "1"), DEFT_ERROR_VALUE,
                         "h_w is (0,0), expected a height in [1, 4] and a width in [1, 5]");
    ck_assert_call_fails("Crop", 1, &X, P("num_args", "1", "h_w", "(2,2)", "offset", "(3,0)"),
                         DEFT_ERROR_VALUE, "offset (3,0) puts the 2x2 crop outside the 4x5 data");
    ck_assert_call_fails("Crop", 2, ((DeftNDArrayHandle[]){X, big}), P("num_args", "2"),
                         DEFT_ERROR_VALUE, "crop_like's height and width (6, 2) exceed data's");
    ck_assert_call_fails("Crop", 1, &X, P("num_args", "3"), DEFT_ERROR_VALUE,
                         "num_args is 3; Crop crops to h_w (1 input) or to crop_like (2)");
    ck_assert_call_fails("Crop", 1, &X, P("num_args", "2"), DEFT_ERROR_VALUE,
                         "num_args is 2 but 1 inputs were given");
    free_all(2, (DeftNDArrayHandle[]){X, big});
}
END_TEST

static Suite *resize_suite(void) {
    Suite *suite = suite_create("resize, pad and crop");
    TCase *tc = tcase_create("resize");
    tcase_add_test(tc, test_upsampling_nearest_single_input);
    tcase_add_test(tc, test_upsampling_nearest_several_inputs);
    tcase_add_test(tc, test_upsampling_bilinear_is_a_depthwise_deconvolution);
    tcase_add_test(tc, test_upsampling_rejects_bad_inputs);
    tcase_add_test(tc, test_bilinear_resize_matches_reference);
    tcase_add_test(tc, test_bilinear_resize_modes);
    tcase_add_test(tc, test_pad_modes_match_numpy);
    tcase_add_test(tc, test_pad_rejects_bad_widths);
    tcase_add_test(tc, test_crop_by_size_offset_centre_and_like);
    tcase_add_test(tc, test_crop_rejects_bad_parameters);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(resize_suite());
}
