/* Convolution and Deconvolution against direct loops written here. */
#include "conv_reference.h"
#include "symbol_helpers.h"

#include "core/op/conv.h"
#include "core/op/simd.h"

START_TEST(test_convolution_matches_direct_loops) {
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        for (int d = 0; d < 2; d++)
            check_case(&conv_cases[i], false, d ? DEFT_FLOAT64 : DEFT_FLOAT32);
}
END_TEST

START_TEST(test_deconvolution_matches_scatter_loops) {
    for (size_t i = 0; i < sizeof deconv_cases / sizeof deconv_cases[0]; i++)
        for (int d = 0; d < 2; d++)
            check_case(&deconv_cases[i], true, d ? DEFT_FLOAT64 : DEFT_FLOAT32);
}
END_TEST

/* A Deconvolution is Convolution's data gradient: with the same weight, it is
 * the adjoint, <conv(x), y> = <x, deconv(y)>. */
START_TEST(test_deconvolution_is_the_adjoint_of_convolution) {
    double x[2 * 3 * 7 * 6], w[4 * 3 * 9], y[2 * 4 * 4 * 3];
    fill(x, 252, 4);
    fill(w, 108, 5);
    fill(y, 96, 6);
    DeftNDArrayHandle X = make(DEFT_FLOAT64, 4, SHAPE(2, 3, 7, 6), x);
    DeftNDArrayHandle W = make(DEFT_FLOAT64, 4, SHAPE(4, 3, 3, 3), w);
    DeftNDArrayHandle Y = make(DEFT_FLOAT64, 4, SHAPE(2, 4, 4, 3), y);
    const char *const *geom = P("kernel", "(3,3)", "stride", "(2,2)", "pad", "(1,1)", "num_filter",
                                "4", "no_bias", "true");
    DeftNDArrayHandle CX = call1("Convolution", 2, (DeftNDArrayHandle[]){X, W}, geom);
    DeftNDArrayHandle DY = call1(
        "Deconvolution", 2, (DeftNDArrayHandle[]){Y, W},
        P("kernel", "(3,3)", "stride", "(2,2)", "pad", "(1,1)", "adj", "(0,1)", "num_filter", "3"));
    assert_shape(CX, 4, SHAPE(2, 4, 4, 3));
    assert_shape(DY, 4, SHAPE(2, 3, 7, 6));
    int64_t n1, n2;
    double *cx = read_all(CX, &n1), *dy = read_all(DY, &n2), lhs = 0, rhs = 0;
    for (int64_t i = 0; i < n1; i++) lhs += cx[i] * y[i];
    for (int64_t i = 0; i < n2; i++) rhs += x[i] * dy[i];
    ck_assert_msg(fabs(lhs - rhs) < 1e-9 * (1 + fabs(lhs)), "%.17g != %.17g", lhs, rhs);
    free(cx), free(dy);
    free_all(5, (DeftNDArrayHandle[]){X, W, Y, CX, DY});
}
END_TEST

/* Large enough that the work is split between threads (the weight gradient
 * into partial sums), in both dtypes. */
START_TEST(test_backward_convolution_matches_scatter_loops) {
    const conv_case_t c = {.nd = 2,
                           .batch = 4,
                           .chan = 32,
                           .filt = 16,
                           .groups = 2,
                           .in = DIMS(32, 33),
                           .k = DIMS(3, 3),
                           .s = DIMS(1, 2),
                           .p = DIMS(1, 1),
                           .d = DIMS(1, 1),
                           .bias = true};
    int64_t out[3];
    conv_out(&c, out);
    const int64_t xs[4] = {4, 32, 32, 33}, ws[4] = {16, 16, 3, 3}, ys[4] = {4, 16, out[0], out[1]};
    const int64_t nx = count_of(4, xs), nw = count_of(4, ws), ny = count_of(4, ys);
    double *x = malloc(sizeof(double) * (size_t)nx), *w = malloc(sizeof(double) * (size_t)nw);
    double *dy = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
    double *dw = malloc(sizeof(double) * (size_t)nw), db[16];
    fill(x, nx, 9);
    fill(w, nw, 10);
    fill(dy, ny, 11);
    ref_conv_grads(&c, x, w, dy, dx, dw, db);
    for (int d = 0; d < 2; d++) {
        int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
        DeftNDArrayHandle in[4] = {make(dtype, 4, ys, dy), make(dtype, 4, xs, x),
                                   make(dtype, 4, ws, w), make(dtype, 1, SHAPE(16), NULL)};
        DeftNDArrayHandle grads[3] = {NULL, NULL, NULL};
        int nout = 3;
        ck_assert_ok(call("_backward_Convolution", 4, in, &nout, grads,
                          P("kernel", "(3,3)", "stride", "(1,2)", "pad", "(1,1)", "num_filter",
                            "16", "num_group", "2")));
        double tol = d ? 1e-12 : 1e-4;
        assert_values(grads[0], nx, dx, tol);
        assert_values(grads[1], nw, dw, tol);
        assert_values(grads[2], 16, db, tol);
        free_all(4, in);
        free_all(3, grads);
    }
    free(x), free(w), free(dy), free(dx), free(dw);
}
END_TEST

/*
 * The direct AVX-512 kernels (conv_direct.c) take 2-D float32 convolutions
 * with groups 1, no dilation, width stride 1 or 2 and channels that round up
 * to blocks of 16 with little waste, but not 1x1 kernels. The cases cover
 * full and partial register tiles (widths 15, 29, 11), tiles of two rows
 * where the output is 7 wide (5 rows: two pairs and one row; 6 rows at
 * stride 2: three pairs), one and two output
 * blocks and a partial one (72 channels), input channels not a multiple of
 * 16 (70), stride 2 in either dimension, 2x2 and 7x7 kernels, padding,
 * bands of rows split between threads (60 rows, one image), and weights
 * packed by each work item (a large W at one image). The tiles skip the
 * taps that read padding: kernel rows above and below the image (the first
 * or second row of a pair alone), a 3x3 kernel's first tap at the left
 * column and last at the right (a tile at both edges, at either alone: the
 * first and last tiles of a wide row, or the left one only at stride 2).
 * Deconvolution
 * at stride 1 runs them as its data-gradient form (raise).
 */
static const conv_case_t direct_cases[] = {
    {2, 2, 32, 64, 1, DIMS(9, 15), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 70, 72, 1, DIMS(11, 30), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 1, 48, 16, 1, DIMS(5, 29), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 16, 32, 1, DIMS(8, 9), DIMS(2, 2), DIMS(2, 2), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 1, 16, 32, 1, DIMS(20, 21), DIMS(7, 7), DIMS(2, 2), DIMS(3, 3), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 32, 16, 1, DIMS(9, 17), DIMS(3, 5), DIMS(2, 1), DIMS(0, 2), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 1, 16, 16, 1, DIMS(60, 20), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* W over 512 KiB at one image: one band, each item packing its own block
     * pair's weights (and a partial pair: 136 channels) */
    {2, 1, 128, 136, 1, DIMS(5, 7), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* ... and at a batch: large bands, each reading all of W */
    {2, 3, 128, 136, 1, DIMS(5, 7), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},

    /* enough output pixels (>= 1024) for the direct weight gradient too */
    {2, 2, 70, 16, 1, DIMS(64, 33), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 16, 48, 1, DIMS(32, 33), DIMS(3, 3), DIMS(1, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 2, 32, 48, 1, DIMS(12, 13), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* 7 wide at stride 2 from 14: pairs of rows that skip the left padding's
     * taps only (the right column reads no padding); 70 output channels */
    {2, 1, 32, 70, 1, DIMS(14, 14), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* 6 rows of 7: the last pair's second row skips the bottom padding's kernel row */
    {2, 2, 32, 48, 1, DIMS(6, 7), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
};
/* W over 4 MiB at a batch of more than two bands: the bands packed first,
 * each block pair over them all (and a partial pair: 400 channels). Forward
 * only: its gradients' float32 sums of 3600 terms are further than
 * DIRECT_TOL from the reference. */
static const conv_case_t direct_large_case = {
    2,          3,          384,        400,     1,    DIMS(3, 5), DIMS(3, 3),
    DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true, DIMS(0)};
static const conv_case_t direct_deconv_cases[] = {
    {2, 2, 32, 16, 1, DIMS(9, 15), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), true,
     DIMS(0)},
    {2, 1, 16, 48, 1, DIMS(6, 11), DIMS(3, 2), DIMS(1, 1), DIMS(0, 1), DIMS(1, 1), DIMS(0, 0),
     false, DIMS(0)},
};

/* The kernels' geometry of a 2-D case (conv.h): a Deconvolution's image is its output. */
static deft_conv_geom_t geom_2d(const conv_case_t *c, bool deconv) {
    int64_t out[3], pads[3], adjs[3];
    if (deconv)
        deconv_pad(c, pads, adjs, out);
    else
        conv_out(c, out);
    deft_conv_geom_t g = {.batch = c->batch,
                          .groups = c->groups,
                          .chan = deconv ? c->filt : c->chan,
                          .filt = deconv ? c->chan : c->filt,
                          .img = {1, deconv ? out[0] : c->in[0], deconv ? out[1] : c->in[1]},
                          .col = {1, deconv ? c->in[0] : out[0], deconv ? c->in[1] : out[1]},
                          .k = {1, c->k[0], c->k[1]},
                          .s = {1, c->s[0], c->s[1]},
                          .p = {0, c->p[0], c->p[1]},
                          .d = {1, c->d[0], c->d[1]}};
    return g;
}

/* Sums of hundreds of float32 terms with cancellation (in either path). */
#define DIRECT_TOL 1e-4

/* Caps the SIMD level at `level` and says whether the CPU runs it. */
static bool run_at(deft_simd_level_t level) {
    return deft_simd_cap(level) == level;
}

/* Whether this machine runs the direct kernels (the AVX-512 level, which
 * is also the default cap this restores). */
static bool have_avx512(void) {
    return run_at(DEFT_SIMD_AVX512);
}

/* Each case through the direct kernels (where the CPU has them), then with
 * them turned off (im2col), both against the reference loops. */
START_TEST(test_direct_kernels_match_direct_loops) {
    for (int on = 1; on >= 0; on--) {
        deft_conv_direct_enable(on);
        for (size_t i = 0; i < sizeof direct_cases / sizeof direct_cases[0]; i++) {
            deft_conv_geom_t g = geom_2d(&direct_cases[i], false);
            ck_assert_msg(deft_conv_direct_fits(&g, DEFT_DT_FLOAT32) == (on && have_avx512()),
                          "case %zu: the direct kernel is %s", i, on ? "not taken" : "taken");
            ck_assert(!deft_conv_direct_fits(&g, DEFT_DT_FLOAT64));
            check_case_within(&direct_cases[i], false, DEFT_FLOAT32, DIRECT_TOL);
        }
        check_case_within(&direct_large_case, false, DEFT_FLOAT32, DIRECT_TOL);
        for (size_t i = 0; i < sizeof direct_deconv_cases / sizeof direct_deconv_cases[0]; i++) {
            deft_conv_geom_t g = geom_2d(&direct_deconv_cases[i], true);
            ck_assert_msg(deft_conv_direct_raise_fits(&g, DEFT_DT_FLOAT32) == (on && have_avx512()),
                          "deconvolution case %zu: the direct kernel is %s", i,
                          on ? "not taken" : "taken");
            check_case_within(&direct_deconv_cases[i], true, DEFT_FLOAT32, DIRECT_TOL);
        }
    }
    deft_conv_direct_enable(true);
}
END_TEST

/* What the dispatch leaves to im2col: groups, dilation, width stride 3,
 * few channels, 1x1 kernels, and (for the data gradient) stride 2. */
START_TEST(test_direct_kernels_leave_the_rest_to_im2col) {
    conv_case_t c = direct_cases[0];
    deft_conv_geom_t g = geom_2d(&c, false);
    ck_assert_int_eq(deft_conv_direct_fits(&g, DEFT_DT_FLOAT32), have_avx512());
    ck_assert_int_eq(deft_conv_direct_raise_fits(&g, DEFT_DT_FLOAT32), have_avx512());
    deft_conv_geom_t bad = g;
    bad.groups = 2;
    ck_assert(!deft_conv_direct_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.d[2] = 2;
    ck_assert(!deft_conv_direct_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.s[2] = 3;
    ck_assert(!deft_conv_direct_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.chan = 3;
    ck_assert(!deft_conv_direct_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.k[1] = bad.k[2] = 1, bad.p[1] = bad.p[2] = 0;
    ck_assert(!deft_conv_direct_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.s[1] = 2;
    ck_assert_int_eq(deft_conv_direct_fits(&bad, DEFT_DT_FLOAT32), have_avx512());
    ck_assert(!deft_conv_direct_raise_fits(&bad, DEFT_DT_FLOAT32));
    deft_simd_cap(DEFT_SIMD_AVX2); /* the kernels are AVX-512's: below it, im2col */
    ck_assert(!deft_conv_direct_fits(&g, DEFT_DT_FLOAT32));
    ck_assert(!deft_conv_direct_raise_fits(&g, DEFT_DT_FLOAT32));
    deft_simd_cap(DEFT_SIMD_AVX512);
}
END_TEST

/* A 2-D case's shapes (x, w, y: NCHW, OIHW) and their element counts. */
typedef struct case_shapes {
    int64_t xs[4], ws[4], ys[4], nx, nw, ny;
} case_shapes_t;

static case_shapes_t shapes_2d(const conv_case_t *c) {
    int64_t out[3];
    conv_out(c, out);
    case_shapes_t s = {.xs = {c->batch, c->chan, c->in[0], c->in[1]},
                       .ws = {c->filt, c->chan, c->k[0], c->k[1]},
                       .ys = {c->batch, c->filt, out[0], out[1]}};
    s.nx = count_of(4, s.xs), s.nw = count_of(4, s.ws), s.ny = count_of(4, s.ys);
    return s;
}

/* The backward of direct-path convolutions: the data gradient through the
 * direct kernel at stride 1 (im2col at stride 2), the weight gradient
 * through its own direct kernel where the batch has 1024 output pixels or
 * more, with them and without them. */
static void check_f32_backward_within(const conv_case_t *c, double tol) {
    char kernel[64], stride[64], pad[64], dilate[64], nf[16];
    tuple_text(2, c->k, kernel, sizeof kernel);
    tuple_text(2, c->s, stride, sizeof stride);
    tuple_text(2, c->p, pad, sizeof pad);
    tuple_text(2, c->d, dilate, sizeof dilate);
    snprintf(nf, sizeof nf, "%lld", (long long)c->filt);
    const case_shapes_t sh = shapes_2d(c);
    const int64_t *xs = sh.xs, *ws = sh.ws, *ys = sh.ys, nx = sh.nx, nw = sh.nw, ny = sh.ny;
    double *x = malloc(sizeof(double) * (size_t)nx), *w = malloc(sizeof(double) * (size_t)nw);
    double *dy = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
    double *dw = malloc(sizeof(double) * (size_t)nw),
           *db = malloc(sizeof(double) * (size_t)c->filt);
    fill(x, nx, 12);
    fill(w, nw, 13);
    fill(dy, ny, 14);
    ref_conv_grads(c, x, w, dy, dx, dw, db);
    for (int on = 1; on >= 0; on--) {
        deft_conv_direct_enable(on);
        DeftNDArrayHandle in[4] = {make(DEFT_FLOAT32, 4, ys, dy), make(DEFT_FLOAT32, 4, xs, x),
                                   make(DEFT_FLOAT32, 4, ws, w),
                                   make(DEFT_FLOAT32, 1, (int64_t[]){c->filt}, NULL)};
        DeftNDArrayHandle grads[3] = {NULL, NULL, NULL};
        int nout = 3;
        ck_assert_ok(call(
            "_backward_Convolution", 4, in, &nout, grads,
            P("kernel", kernel, "stride", stride, "pad", pad, "dilate", dilate, "num_filter", nf)));
        assert_values(grads[0], nx, dx, tol);
        assert_values(grads[1], nw, dw, tol);
        assert_values(grads[2], c->filt, db, tol);
        free_all(4, in);
        free_all(3, grads);
    }
    deft_conv_direct_enable(true);
    free(x), free(w), free(dy), free(dx), free(dw), free(db);
}

static void check_f32_backward(const conv_case_t *c) {
    check_f32_backward_within(c, DIRECT_TOL);
}

START_TEST(test_direct_backward_matches_scatter_loops) {
    for (size_t i = 0; i < sizeof direct_cases / sizeof direct_cases[0]; i++) {
        const conv_case_t *c = &direct_cases[i];
        int64_t out[3];
        conv_out(c, out);
        deft_conv_geom_t g = geom_2d(c, false);
        bool wgrad_direct = have_avx512() && c->batch * out[0] * out[1] >= 1024;
        ck_assert_int_eq(deft_conv_direct_wgrad_fits(&g, DEFT_DT_FLOAT32), wgrad_direct);
        check_f32_backward(c);
    }
}
END_TEST

/*
 * The kernels for few channels (conv_direct_small.c): 2-D float32, groups 1,
 * stride 1, fewer than 16 channels on one side. The cases: LeNet's two
 * layers; partial register tiles in every direction (7 and 13 output
 * channels: blocks of 6 and a rest; 1 to 3 input channels times 9 or 25
 * taps: pairs in fours and a rest; wide rows not a multiple of 16);
 * padding, dilation, rectangular kernels, one image (its rows split between
 * threads), wide rows of under 16 pixels, and a batch whose weight gradient
 * takes several runs of images per thread (its sums kept across runs); rows
 * of 17 to 32 (packed from two vectors a row: LeNet's first layer, 19, 17
 * with padding, and 32 with padding, where a lane left of the image would
 * read the row's last column).
 */
static const conv_case_t small_cases[] = {
    {2, 3, 1, 6, 1, DIMS(28, 28), DIMS(5, 5), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 3, 6, 16, 1, DIMS(12, 12), DIMS(5, 5), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 3, 7, 1, DIMS(11, 13), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 1, 2, 13, 1, DIMS(9, 19), DIMS(3, 2), DIMS(1, 1), DIMS(2, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 5, 3, 1, DIMS(10, 12), DIMS(3, 3), DIMS(1, 1), DIMS(2, 1), DIMS(2, 3), DIMS(0), true,
     DIMS(0)},
    {2, 1, 1, 1, 1, DIMS(7, 5), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 1, 12, 40, 1, DIMS(23, 17), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 20, 6, 16, 1, DIMS(12, 12), DIMS(5, 5), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 2, 5, 1, DIMS(6, 32), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
};
/* Deconvolution at stride 1 with few channels: the small kernels' raise. */
static const conv_case_t small_deconv_cases[] = {
    {2, 2, 6, 3, 1, DIMS(8, 9), DIMS(5, 5), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0, 0), true,
     DIMS(0)},
    {2, 1, 16, 6, 1, DIMS(6, 7), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(2, 1), DIMS(0, 0), false,
     DIMS(0)},
};

START_TEST(test_small_channel_kernels_match_direct_loops) {
    for (int on = 1; on >= 0; on--) {
        deft_conv_direct_enable(on);
        for (size_t i = 0; i < sizeof small_cases / sizeof small_cases[0]; i++) {
            deft_conv_geom_t g = geom_2d(&small_cases[i], false);
            ck_assert_msg(deft_conv_small_fits(&g, DEFT_DT_FLOAT32) == (on && have_avx512()),
                          "case %zu: the small kernel is %s", i, on ? "not taken" : "taken");
            ck_assert(!deft_conv_direct_fits(&g, DEFT_DT_FLOAT32));
            ck_assert(!deft_conv_small_fits(&g, DEFT_DT_FLOAT64));
            check_case_within(&small_cases[i], false, DEFT_FLOAT32, DIRECT_TOL);
        }
        for (size_t i = 0; i < sizeof small_deconv_cases / sizeof small_deconv_cases[0]; i++) {
            deft_conv_geom_t g = geom_2d(&small_deconv_cases[i], true);
            ck_assert_msg(deft_conv_small_raise_fits(&g, DEFT_DT_FLOAT32) == (on && have_avx512()),
                          "deconvolution case %zu: the small kernel is %s", i,
                          on ? "not taken" : "taken");
            check_case_within(&small_deconv_cases[i], true, DEFT_FLOAT32, DIRECT_TOL);
        }
    }
    deft_conv_direct_enable(true);
}
END_TEST

/* The data gradient through the small kernels where its padding allows
 * ((k - 1) d - p >= 0: all the cases), the weight gradient always; with
 * them and without them. */
START_TEST(test_small_channel_backward_matches_scatter_loops) {
    for (size_t i = 0; i < sizeof small_cases / sizeof small_cases[0]; i++) {
        deft_conv_geom_t g = geom_2d(&small_cases[i], false);
        ck_assert_int_eq(deft_conv_small_raise_fits(&g, DEFT_DT_FLOAT32), have_avx512());
        check_f32_backward(&small_cases[i]);
    }
}
END_TEST

/* What the small kernels leave to the others: stride 2, groups, 16 channels
 * on both sides, 1x1 kernels, wide rows mostly padding, and (for the data
 * gradient) padding beyond the kernel's reach. */
START_TEST(test_small_channel_kernels_leave_the_rest) {
    deft_conv_geom_t g = geom_2d(&small_cases[1], false), bad;
    ck_assert_int_eq(deft_conv_small_fits(&g, DEFT_DT_FLOAT32), have_avx512());
    bad = g, bad.s[2] = 2;
    ck_assert(!deft_conv_small_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.s[1] = 2;
    ck_assert(!deft_conv_small_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.groups = 2;
    ck_assert(!deft_conv_small_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.chan = 16;
    ck_assert(!deft_conv_small_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.k[1] = bad.k[2] = 1, bad.col[1] = bad.col[2] = 12;
    ck_assert(!deft_conv_small_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.img[2] = 2, bad.p[2] = 3, bad.col[2] = 4; /* wide rows of 8, 4 real: fits */
    ck_assert_int_eq(deft_conv_small_fits(&bad, DEFT_DT_FLOAT32), have_avx512());
    bad.img[2] = 1, bad.col[2] = 3; /* 3 of 7 */
    ck_assert(!deft_conv_small_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.img[2] = 1, bad.p[2] = 5, bad.col[2] = 7; /* 7 of 11, but its data */
    ck_assert_int_eq(deft_conv_small_fits(&bad, DEFT_DT_FLOAT32), have_avx512());
    /* gradient would pad by 4 - 5 */
    ck_assert(!deft_conv_small_raise_fits(&bad, DEFT_DT_FLOAT32));
}
END_TEST

/*
 * The few-channel kernels with the batch in the vector lanes
 * (conv_direct_lanes.c), at each SIMD level the CPU has: on AVX-512 the
 * gradients where the small kernels fit, with a batch of 32, 48, 64 ..., 4
 * input channels or more and 100 products per dy element; on AVX2 (8 lanes,
 * no small kernels) the forward too, with fewer products. The cases:
 * LeNet's second layer; three vectors of images at rows of 11 and 13 with
 * padding (odd rows: a pixel alone after the pairs); 7 input channels
 * (tiles of 6 and 1, four vectors in one tile), a 3x7 kernel (taps in fives
 * and a rest) and 5 output channels; 16 input channels (6, 6 and 4) into 6,
 * no bias; and, on AVX2 only, a 1-channel layer at 3x3 with padding (the
 * CNN demo's first) and a batch of 24 (three vectors of 8).
 */
static const conv_case_t lanes_cases[] = {
    {2, 32, 6, 16, 1, DIMS(12, 12), DIMS(5, 5), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 48, 4, 7, 1, DIMS(11, 13), DIMS(5, 5), DIMS(1, 1), DIMS(2, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 64, 7, 5, 1, DIMS(9, 19), DIMS(3, 7), DIMS(1, 1), DIMS(2, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 32, 16, 6, 1, DIMS(6, 7), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 32, 1, 8, 1, DIMS(14, 15), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 24, 3, 5, 1, DIMS(10, 9), DIMS(3, 5), DIMS(1, 1), DIMS(0, 2), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
};
enum { LANES_AVX512_CASES = 4 }; /* the first four fit at 16 lanes */
/* dW and db of a batch of 32 sum thousands of float32 terms with
 * cancellation (LeNet's first layer: 18432), in any order: the small
 * kernels' sums of them miss by up to 3e-4 too. */
#define LANES_TOL 1e-3

static const conv_case_t lanes_deconv_case = {
    2,          32,         6,          4,          1,    DIMS(8, 9), DIMS(5, 5),
    DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0, 0), true, DIMS(0)};

#define CONV_TEXT_PARAMS(t)                                                                        \
    P("kernel", (t).kernel, "stride", (t).stride, "pad", (t).pad, "num_filter", (t).nf, "no_bias", \
      (t).no_bias)

/* _conv_relu (the node the Fuse pass makes of a convolution and its relu),
 * run by an executor, against max(the reference loops, 0). */
static void check_conv_relu(const conv_case_t *c) {
    conv_texts_t t;
    conv_texts(c, &t);
    const case_shapes_t sh = shapes_2d(c);
    const int64_t *xs = sh.xs, *ws = sh.ws, nx = sh.nx, nw = sh.nw, ny = sh.ny;
    double *x = malloc(sizeof(double) * (size_t)nx), *w = malloc(sizeof(double) * (size_t)nw);
    double *b = malloc(sizeof(double) * (size_t)c->filt),
           *want = malloc(sizeof(double) * (size_t)ny);
    fill(x, nx, 4), fill(w, nw, 5), fill(b, c->filt, 6);
    ref_conv(c, x, w, b, want);
    for (int64_t i = 0; i < ny; i++) want[i] = want[i] < 0 ? 0 : want[i];
    const int nin = c->bias ? 3 : 2;
    DeftSymbolHandle v[3] = {var("data"), var("weight"), var("bias")}, fused;
    DeftSymbolHandle conv = apply("Convolution", "conv", nin, v, CONV_TEXT_PARAMS(t));
    DeftSymbolHandle relu = apply("Activation", "relu", 1, &conv, P("act_type", "relu"));
    ck_assert_ok(DeftSymbolApplyPasses(relu, "Fuse", &fused));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(fused, &json));
    ck_assert_msg(strstr(json, "\"_conv_relu\"") != NULL, "no _conv_relu node");
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(fused, 0, &exec));
    DeftNDArrayHandle in[3] = {make(DEFT_FLOAT32, 4, xs, x), make(DEFT_FLOAT32, 4, ws, w),
                               make(DEFT_FLOAT32, 1, (int64_t[]){c->filt}, b)},
                      y = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, nin, in, &nout, &y));
    assert_values(y, ny, want, DIRECT_TOL);
    ck_assert_ok(DeftCachedOpFree(exec));
    DeftSymbolHandle syms[6] = {v[0], v[1], v[2], conv, relu, fused};
    for (int k = 0; k < 6; k++) ck_assert_ok(DeftSymbolFree(syms[k]));
    free_all(3, in), free_all(1, &y);
    free(x), free(w), free(b), free(want);
}

/* Every case forward (and through _conv_relu) and backward against the
 * reference loops, with the kernels and without, at each level. */
START_TEST(test_batch_lane_kernels_match_reference_loops) {
    const deft_simd_level_t levels[] = {DEFT_SIMD_AVX512, DEFT_SIMD_AVX2};
    for (size_t l = 0; l < 2; l++) {
        if (!run_at(levels[l])) continue;
        const bool avx2 = levels[l] == DEFT_SIMD_AVX2;
        for (size_t i = 0; i < sizeof lanes_cases / sizeof lanes_cases[0]; i++) {
            deft_conv_geom_t g = geom_2d(&lanes_cases[i], false);
            const bool fits = avx2 || i < LANES_AVX512_CASES;
            ck_assert_msg(deft_conv_lanes_wgrad_fits(&g, DEFT_DT_FLOAT32) == fits &&
                              deft_conv_lanes_raise_fits(&g, DEFT_DT_FLOAT32) == fits &&
                              deft_conv_lanes_fits(&g, DEFT_DT_FLOAT32) == avx2,
                          "level %d, case %zu: the batch-lane kernels are %s", (int)levels[l], i,
                          fits ? "not taken" : "taken");
            check_f32_backward_within(&lanes_cases[i], LANES_TOL);
            for (int on = 1; on >= 0; on--) {
                deft_conv_direct_enable(on);
                check_case_within(&lanes_cases[i], false, DEFT_FLOAT32, DIRECT_TOL);
                check_conv_relu(&lanes_cases[i]);
            }
            deft_conv_direct_enable(true);
        }
        deft_conv_geom_t g = geom_2d(&lanes_deconv_case, true);
        ck_assert(deft_conv_lanes_raise_fits(&g, DEFT_DT_FLOAT32));
        check_case_within(&lanes_deconv_case, true, DEFT_FLOAT32, DIRECT_TOL);
    }
    deft_simd_cap(DEFT_SIMD_AVX512);
}
END_TEST

/* What they leave to the others: batches that are not whole vectors or
 * only one, stride 2, dilation, padding past the kernel, images over 256
 * pixels (1024 on AVX2), many channels on both sides; at 16 lanes LeNet's first layer and
 * the CNN demo's (one input channel), which the small kernels serve; and
 * the baseline level, which has no vectors. */
START_TEST(test_batch_lane_kernels_leave_the_rest) {
    const deft_conv_geom_t g = geom_2d(&lanes_cases[1], false);
    const deft_simd_level_t levels[] = {DEFT_SIMD_AVX512, DEFT_SIMD_AVX2};
    for (size_t l = 0; l < 2; l++) {
        if (!run_at(levels[l])) continue;
        deft_conv_geom_t bad = g;
        ck_assert(deft_conv_lanes_wgrad_fits(&g, DEFT_DT_FLOAT32));
        const int64_t batches[] = {1, 8, 16, 31, 33, 40};
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
            bad.batch = batches[i];
            bool whole = levels[l] == DEFT_SIMD_AVX2 && batches[i] % 8 == 0 && batches[i] >= 16;
            ck_assert_int_eq(deft_conv_lanes_wgrad_fits(&bad, DEFT_DT_FLOAT32), whole);
            ck_assert_int_eq(deft_conv_lanes_raise_fits(&bad, DEFT_DT_FLOAT32), whole);
        }
        bad = g, bad.d[2] = 2, bad.col[2] = 4;
        ck_assert(!deft_conv_lanes_wgrad_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_fits(&bad, DEFT_DT_FLOAT32));
        bad = g, bad.s[1] = 2, bad.col[1] = 4;
        ck_assert(!deft_conv_lanes_raise_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_fits(&bad, DEFT_DT_FLOAT32));
        bad = g, bad.p[1] = 5, bad.col[1] = 17;
        ck_assert(!deft_conv_lanes_raise_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_wgrad_fits(&g, DEFT_DT_FLOAT64));
        bad = g, bad.chan = bad.filt = 12, bad.img[1] = bad.img[2] = 32, bad.k[1] = bad.k[2] = 3;
        bad.p[1] = bad.p[2] = 1, bad.col[1] = bad.col[2] = 32; /* 32x32 images: AVX2's largest */
        const bool avx2 = levels[l] == DEFT_SIMD_AVX2;
        ck_assert_int_eq(deft_conv_lanes_wgrad_fits(&bad, DEFT_DT_FLOAT32), avx2);
        ck_assert_int_eq(deft_conv_lanes_raise_fits(&bad, DEFT_DT_FLOAT32), avx2);
        ck_assert_int_eq(deft_conv_lanes_fits(&bad, DEFT_DT_FLOAT32), avx2);
        bad.img[2] = bad.col[2] = 33;
        ck_assert(!deft_conv_lanes_wgrad_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_raise_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_fits(&bad, DEFT_DT_FLOAT32));
        bad = g, bad.chan = bad.filt = 16; /* GEMM rows enough */
        ck_assert(!deft_conv_lanes_fits(&bad, DEFT_DT_FLOAT32));
        if (levels[l] != DEFT_SIMD_AVX512) continue;
        bad = g, bad.chan = 1, bad.img[1] = bad.img[2] = 12, bad.col[1] = bad.col[2] = 8;
        bad.filt = 6;
        ck_assert(deft_conv_small_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_wgrad_fits(&bad, DEFT_DT_FLOAT32));
        ck_assert(!deft_conv_lanes_fits(&bad, DEFT_DT_FLOAT32));
        bad = g, bad.chan = 3, bad.k[1] = bad.k[2] = 3, bad.col[1] = bad.col[2] = 10;
        ck_assert(!deft_conv_lanes_wgrad_fits(&bad, DEFT_DT_FLOAT32));
    }
    deft_simd_cap(DEFT_SIMD_BASELINE);
    ck_assert(!deft_conv_lanes_wgrad_fits(&g, DEFT_DT_FLOAT32));
    ck_assert(!deft_conv_lanes_raise_fits(&g, DEFT_DT_FLOAT32));
    ck_assert(!deft_conv_lanes_fits(&g, DEFT_DT_FLOAT32));
    deft_simd_cap(DEFT_SIMD_AVX512);
}
END_TEST

/*
 * Small outputs with a large W take the batched im2col path: several images'
 * columns in one GEMM (conv_cpu.c: under 256 output pixels per image, at
 * least 512 KiB of W per group, at least two images). The blocks hold
 * ceil(256 / pixels) images, so batches of 6 at 8x8 (blocks of 4), 8 at 7x7
 * (6) and 13 at 5x5 (11) end in a short block; groups 1 and 2, stride 1 and
 * 2, a 1x1 kernel (its im2col is the image) and a rectangular output.
 */
static const conv_case_t batched_f32_cases[] = {
    {2, 6, 128, 128, 1, DIMS(8, 8), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 3, 256, 256, 2, DIMS(9, 10), DIMS(3, 3), DIMS(2, 2), DIMS(1, 0), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
};
static const conv_case_t batched_f64_cases[] = {
    {2, 8, 192, 192, 2, DIMS(13, 13), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 13, 96, 96, 1, DIMS(5, 5), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 5, 512, 160, 1, DIMS(7, 7), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
};

/* float32 with the direct kernels off, which would take groups 1 otherwise. */
START_TEST(test_batched_small_outputs_match_direct_loops) {
    deft_conv_direct_enable(false);
    for (size_t i = 0; i < sizeof batched_f32_cases / sizeof batched_f32_cases[0]; i++)
        check_case_within(&batched_f32_cases[i], false, DEFT_FLOAT32, DIRECT_TOL);
    deft_conv_direct_enable(true);
    for (size_t i = 0; i < sizeof batched_f64_cases / sizeof batched_f64_cases[0]; i++)
        check_case(&batched_f64_cases[i], false, DEFT_FLOAT64);
}
END_TEST

/* Images of at most 4 channels at a stride the small-channel kernels leave
 * (conv_direct_stem.c): ResNet's RGB stem (7x7 at stride 2, a tail of one
 * pixel after 14), a pair and a part-filled block of outputs at width
 * stride 2, one channel into one block. */
static const conv_case_t stem_cases[] = {
    {2, 2, 3, 64, 1, DIMS(23, 30), DIMS(7, 7), DIMS(2, 2), DIMS(3, 3), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 1, 4, 40, 1, DIMS(9, 33), DIMS(5, 5), DIMS(1, 2), DIMS(2, 2), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 3, 1, 16, 1, DIMS(8, 8), DIMS(3, 3), DIMS(2, 2), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
};

START_TEST(test_stem_kernel_matches_direct_loops) {
    for (int on = 1; on >= 0; on--) {
        deft_conv_direct_enable(on);
        for (size_t i = 0; i < sizeof stem_cases / sizeof stem_cases[0]; i++) {
            deft_conv_geom_t g = geom_2d(&stem_cases[i], false);
            ck_assert_msg(deft_conv_stem_fits(&g, DEFT_DT_FLOAT32) == (on && have_avx512()),
                          "case %zu: the stem kernel is %s", i, on ? "not taken" : "taken");
            ck_assert(!deft_conv_small_fits(&g, DEFT_DT_FLOAT32));
            ck_assert(!deft_conv_direct_fits(&g, DEFT_DT_FLOAT32));
            check_case_within(&stem_cases[i], false, DEFT_FLOAT32, DIRECT_TOL);
        }
    }
    deft_conv_direct_enable(true);
    deft_conv_geom_t g = geom_2d(&stem_cases[0], false), bad;
    bad = g, bad.chan = 5;
    ck_assert(!deft_conv_stem_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.s[2] = 3;
    ck_assert(!deft_conv_stem_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.d[1] = 2;
    ck_assert(!deft_conv_stem_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.groups = 3, bad.filt = 48;
    ck_assert(!deft_conv_stem_fits(&bad, DEFT_DT_FLOAT32));
    bad = g, bad.filt = 6; /* 16 computed for 6 */
    ck_assert(!deft_conv_stem_fits(&bad, DEFT_DT_FLOAT32));
    ck_assert(!deft_conv_stem_fits(&g, DEFT_DT_FLOAT64));
}
END_TEST

/*
 * Kept packed weights (conv_packed.c) follow every write to the weights. A
 * graph run keys its bound weights when it is pushed, and so does an
 * imperative call in predict mode (invoke.c); these runs are queued
 * without waiting, with writes queued between them (a copy from the host,
 * an in-place operator), so a run may start after a later write was queued.
 * A weight computed inside the graph (an arena value) is never keyed. The
 * second case's W (over 512 KiB) at one image packed per work item unkept.
 */
static const conv_case_t kept_cases[] = {
    {2, 1, 32, 64, 1, DIMS(9, 15), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 1, 128, 136, 1, DIMS(5, 7), DIMS(3, 3), DIMS(2, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
};

/* A case's parameters for Convolution, from conv_texts. */
/* Convolution of the case on variables data, weight (through _mul_scalar
 * by 1 inside the graph when `computed`) and bias. */
static DeftSymbolHandle kept_symbol(const conv_case_t *c, bool computed) {
    conv_texts_t t;
    conv_texts(c, &t);
    DeftSymbolHandle in[3] = {var("data"), var("weight"), var("bias")}, weight = in[1];
    if (computed) in[1] = apply("_mul_scalar", "scaled", 1, &weight, P("scalar", "1"));
    DeftSymbolHandle y = apply("Convolution", "conv", c->bias ? 3 : 2, in, CONV_TEXT_PARAMS(t));
    for (int k = 0; k < 3; k++) ck_assert_ok(DeftSymbolFree(in[k]));
    if (computed) ck_assert_ok(DeftSymbolFree(weight));
    return y;
}

static void check_kept(const conv_case_t *c, bool computed) {
    const case_shapes_t sh = shapes_2d(c);
    const int64_t *xs = sh.xs, *ws = sh.ws, nx = sh.nx, nw = sh.nw, ny = sh.ny;
    double *x = malloc(sizeof(double) * (size_t)nx), *b = malloc(sizeof(double) * (size_t)c->filt);
    double *w[3], *want[3];
    fill(x, nx, 1), fill(b, c->filt, 3);
    for (int v = 0; v < 3; v++) {
        w[v] = malloc(sizeof(double) * (size_t)nw);
        want[v] = malloc(sizeof(double) * (size_t)ny);
        fill(w[v], nw, 2 + 3 * (v % 2)); /* w2 = 2 w1 is made in place below */
        for (int64_t i = 0; v == 2 && i < nw; i++) w[v][i] = 2 * w[1][i];
        ref_conv(c, x, w[v], b, want[v]);
    }
    DeftNDArrayHandle in[3] = {make(DEFT_FLOAT32, 4, xs, x), make(DEFT_FLOAT32, 4, ws, w[0]),
                               make(DEFT_FLOAT32, 1, (int64_t[]){c->filt}, b)};
    DeftSymbolHandle sym = kept_symbol(c, computed);
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &exec));
    DeftNDArrayHandle y[4] = {NULL, NULL, NULL, NULL}, eager[3];
    const int nin = c->bias ? 3 : 2;
    int nout = 1;
    conv_texts_t t;
    conv_texts(c, &t);
    for (int run = 0; run < 3; run++) {
        nout = 1;
        ck_assert_ok(DeftCachedOpInvoke(exec, nin, in, &nout, &y[run]));
        eager[run] = call1("Convolution", nin, in, CONV_TEXT_PARAMS(t)); /* keyed the same way */
        if (run == 0) set_values(in[1], nw, w[1]);
        DeftNDArrayHandle doubled[1] = {in[1]};
        nout = 1;
        if (run == 1)
            ck_assert_ok(call("_mul_scalar", 1, in + 1, &nout, doubled, P("scalar", "2")));
    }
    y[3] = call1("Convolution", nin, in, CONV_TEXT_PARAMS(t));
    /* 1152 float32 terms of up to 5.6 (the doubled weights) round to about
     * 7e-4 here, imperative or not; a stale result would be off by O(1). */
    for (int run = 0; run < 4; run++) assert_values(y[run], ny, want[run < 3 ? run : 2], 2e-3);
    for (int run = 0; run < 3; run++) assert_values(eager[run], ny, want[run], 2e-3);
    free_all(3, eager);
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(4, y), free_all(3, in);
    for (int v = 0; v < 3; v++) free(w[v]), free(want[v]);
    free(x), free(b);
}

START_TEST(test_kept_weights_follow_writes) {
    for (size_t i = 0; i < sizeof kept_cases / sizeof kept_cases[0]; i++) {
        check_kept(&kept_cases[i], false);
        check_kept(&kept_cases[i], true);
    }
}
END_TEST

/* DeftMemoryReleaseCached on the CPU drops the weights kept packed between
 * predict-mode calls; later calls pack them again, with the same results. */
START_TEST(test_release_cached_drops_packed_weights) {
    check_kept(&kept_cases[0], false);
    if (deft_conv_packed_bytes() == 0) {
        printf("test_release_cached_drops_packed_weights: no direct kernel on this CPU keeps "
               "packed weights; only the results were checked\n");
        return;
    }
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    ck_assert_uint_eq(deft_conv_packed_bytes(), 0);
    check_kept(&kept_cases[0], false);
    ck_assert_uint_gt(deft_conv_packed_bytes(), 0);
}
END_TEST

/*
 * Executors fold a BatchNorm into the Convolution it alone reads, and the
 * relu that alone reads the BatchNorm (_conv_bn, _conv_bn_relu,
 * core/graph/fold_bn.c). Predict mode: the per-channel affine map against
 * the loops here (in the tiles of the direct kernel for 32 -> 64 and for a
 * ResNet's 1x1 stride-2 shortcut, of the stem kernel for the RGB stem's 3
 * channels; the kernels one after the other for 5 -> 16, which neither
 * takes). Training mode: the same values and moving statistics as the
 * operators invoked one by one.
 */
static const conv_case_t folded_cases[] = {
    {2, 2, 32, 64, 1, DIMS(9, 15), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 2, 3, 16, 1, DIMS(12, 13), DIMS(7, 7), DIMS(2, 2), DIMS(3, 3), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 3, 40, 48, 1, DIMS(10, 15), DIMS(1, 1), DIMS(2, 2), DIMS(0, 0), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {2, 2, 5, 16, 1, DIMS(8, 9), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
};

/* BatchNorm(Convolution(data, weight), gamma, beta, mean, var), then relu
 * with `relu`; conv_out: the convolution's output is a graph output too. */
static DeftSymbolHandle conv_bn_symbol(const conv_case_t *c, bool conv_out, bool relu) {
    conv_texts_t t;
    conv_texts(c, &t);
    const char *names[6] = {"data", "weight", "gamma", "beta", "mean", "var"};
    DeftSymbolHandle v[6];
    for (int k = 0; k < 6; k++) v[k] = var(names[k]);
    DeftSymbolHandle conv = apply("Convolution", "conv", 2, v, CONV_TEXT_PARAMS(t));
    DeftSymbolHandle bn_in[5] = {conv, v[2], v[3], v[4], v[5]};
    DeftSymbolHandle bn = apply("BatchNorm", "bn", 5, bn_in, P("fix_gamma", "false")), y = bn;
    if (relu) y = apply("Activation", "relu", 1, &bn, P("act_type", "relu"));
    DeftSymbolHandle both[2] = {y, conv}, out = y;
    if (conv_out) ck_assert_ok(DeftSymbolCreateGroup(2, both, &out));
    for (int k = 0; k < 6; k++) ck_assert_ok(DeftSymbolFree(v[k]));
    if (conv_out) ck_assert_ok(DeftSymbolFree(y));
    if (relu) ck_assert_ok(DeftSymbolFree(bn));
    ck_assert_ok(DeftSymbolFree(conv));
    return out;
}

/* Whether the executors' pass folds the symbol (its result names `op`). */
static bool folds(DeftSymbolHandle sym, const char *op) {
    DeftSymbolHandle folded;
    const char *json;
    ck_assert_ok(DeftSymbolApplyPasses(sym, "FoldBatchNorm", &folded));
    ck_assert_ok(DeftSymbolSaveToJSON(folded, &json));
    char quoted[32];
    snprintf(quoted, sizeof quoted, "\"%s\"", op);
    bool found = strstr(json, quoted) != NULL;
    ck_assert_ok(DeftSymbolFree(folded));
    return found;
}

static void check_folded(const conv_case_t *c, int dtype, bool relu) {
    conv_texts_t t;
    conv_texts(c, &t);
    const case_shapes_t sh = shapes_2d(c);
    const int64_t *xs = sh.xs, *ws = sh.ws, fs[1] = {c->filt}, nx = sh.nx, nw = sh.nw, ny = sh.ny;
    const int64_t space = sh.ys[2] * sh.ys[3];
    double *x = malloc(sizeof(double) * (size_t)nx), *w = malloc(sizeof(double) * (size_t)nw);
    double *want = malloc(sizeof(double) * (size_t)ny), stats[4][64];
    fill(x, nx, 1), fill(w, nw, 2);
    for (int64_t f = 0; f < c->filt; f++) /* gamma, beta, mean, var > 0 */
        stats[0][f] = 0.5 + 0.03 * (double)f, stats[1][f] = 0.1 * (double)(f % 7) - 0.3,
        stats[2][f] = 0.2 * (double)(f % 5) - 0.4, stats[3][f] = 0.5 + 0.1 * (double)(f % 9);
    ref_conv(c, x, w, NULL, want);
    for (int64_t i = 0; i < ny; i++) {
        int64_t f = i / space % c->filt;
        want[i] = (want[i] - stats[2][f]) / sqrt(stats[3][f] + 1e-3) * stats[0][f] + stats[1][f];
        want[i] = relu && want[i] < 0 ? 0 : want[i];
    }
    DeftNDArrayHandle in[6] = {make(dtype, 4, xs, x), make(dtype, 4, ws, w)};
    for (int k = 0; k < 4; k++) in[2 + k] = make(dtype, 1, fs, stats[k]);
    DeftSymbolHandle sym = conv_bn_symbol(c, false, relu);
    ck_assert(folds(sym, relu ? "_conv_bn_relu" : "_conv_bn"));
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &exec));
    DeftNDArrayHandle y[2] = {NULL, NULL};
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 6, in, &nout, &y[0]));
    assert_values(y[0], ny, want, dtype == DEFT_FLOAT32 ? DIRECT_TOL : 1e-10);
    /* training mode: batch statistics, moving ones updated, as the two operators do */
    DeftNDArrayHandle moving[2] = {make(dtype, 1, fs, stats[2]), make(dtype, 1, fs, stats[3])};
    int prev;
    ck_assert_ok(DeftAutogradSetIsTraining(1, &prev));
    nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 6, in, &nout, &y[1]));
    DeftNDArrayHandle conv = call1("Convolution", 2, in, CONV_TEXT_PARAMS(t));
    DeftNDArrayHandle bn_in[5] = {conv, in[2], in[3], moving[0], moving[1]};
    DeftNDArrayHandle bn = call1("BatchNorm", 5, bn_in, P("fix_gamma", "false")), act = NULL;
    if (relu) act = call1("Activation", 1, &bn, P("act_type", "relu"));
    ck_assert_ok(DeftAutogradSetIsTraining(prev, NULL));
    int64_t n;
    double *expect = read_all(relu ? act : bn, &n);
    assert_values(y[1], ny, expect, 1e-6);
    free(expect);
    for (int k = 0; k < 2; k++) {
        expect = read_all(moving[k], &n);
        assert_values(in[4 + k], c->filt, expect, 1e-6);
        free(expect);
    }
    /* the convolution's output read elsewhere too: left alone */
    DeftSymbolHandle both = conv_bn_symbol(c, true, relu);
    ck_assert(!folds(both, "_conv_bn") && !folds(both, "_conv_bn_relu"));
    ck_assert_ok(DeftSymbolFree(both));
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(6, in), free_all(2, y), free_all(2, moving), free_all(1, &conv), free_all(1, &bn);
    if (relu) free_all(1, &act);
    free(x), free(w), free(want);
}

START_TEST(test_batch_norm_folded_by_executors) {
    for (size_t i = 0; i < sizeof folded_cases / sizeof folded_cases[0]; i++) {
        /* the first three in the kernels' tiles (where the CPU has them), the last not */
        deft_conv_geom_t g = geom_2d(&folded_cases[i], false);
        ck_assert_msg(deft_conv_direct_scaled_fits(&g, DEFT_DT_FLOAT32) == (i < 3 && have_avx512()),
                      "folded case %zu", i);
        for (int relu = 0; relu < 2; relu++) {
            check_folded(&folded_cases[i], DEFT_FLOAT32, relu);
            check_folded(&folded_cases[i], DEFT_FLOAT64, relu);
        }
    }
}
END_TEST

START_TEST(test_zero_size_batch) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, SHAPE(0, 3, 5, 5), NULL);
    DeftNDArrayHandle w = make(DEFT_FLOAT32, 4, SHAPE(2, 3, 3, 3), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle y = call1("Convolution", 3, (DeftNDArrayHandle[]){x, w, b},
                                P("kernel", "(3,3)", "num_filter", "2"));
    assert_shape(y, 4, SHAPE(0, 2, 3, 3));
    DeftNDArrayHandle wd = make(DEFT_FLOAT32, 4, SHAPE(3, 2, 3, 3), NULL);
    DeftNDArrayHandle yd = call1("Deconvolution", 2, (DeftNDArrayHandle[]){x, wd},
                                 P("kernel", "(3,3)", "stride", "(2,2)", "num_filter", "2"));
    assert_shape(yd, 4, SHAPE(0, 2, 11, 11));
    free_all(6, (DeftNDArrayHandle[]){x, w, b, y, wd, yd});
}
END_TEST

/* The gradients through autograd, on a batch of zero, keep their shapes. */
START_TEST(test_zero_size_batch_gradient) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 3, SHAPE(0, 2, 6), NULL);
    DeftNDArrayHandle w = make(DEFT_FLOAT64, 3, SHAPE(3, 2, 3),
                               VALUES(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    DeftNDArrayHandle b = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 3, SHAPE(0, 3, 4), NULL);
    DeftNDArrayHandle out[3] = {NULL, NULL, NULL};
    int nout = 3;
    ck_assert_ok(call("_backward_Convolution", 4, (DeftNDArrayHandle[]){g, x, w, b}, &nout, out,
                      P("kernel", "(3,)", "num_filter", "3")));
    ck_assert_int_eq(nout, 3);
    assert_shape(out[0], 3, SHAPE(0, 2, 6));
    assert_shape(out[1], 3, SHAPE(3, 2, 3));
    assert_values(out[1], 18, (double[18]){0}, 0);
    assert_values(out[2], 3, VALUES(0, 0, 0), 0);
    free_all(7, (DeftNDArrayHandle[]){x, w, b, g, out[0], out[1], out[2]});
}
END_TEST

static void assert_inferred(DeftSymbolHandle s, int group, int index, int ndim,
                            const int64_t *dims) {
    int64_t got[DEFT_MAX_NDIM];
    int got_ndim, got_dtype;
    ck_assert_ok(
        DeftSymbolGetInferredShape(s, group, index, got, DEFT_MAX_NDIM, &got_ndim, &got_dtype));
    ck_assert_int_eq(got_ndim, ndim);
    ck_assert_int_eq(got_dtype, DEFT_FLOAT32);
    for (int d = 0; d < ndim; d++) ck_assert_int_eq(got[d], dims[d]);
}

/* From the data's shape alone, as MXNet infers them: weight, bias and output. */
START_TEST(test_infer_weight_and_bias_from_data) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle conv = apply("Convolution", "conv", 1, &x,
                                  P("kernel", "(3,3)", "stride", "(2,2)", "pad", "(1,1)",
                                    "num_filter", "8", "num_group", "2"));
    DeftSymbolHandle deconv = apply("Deconvolution", "deconv", 1, &conv,
                                    P("kernel", "(4,4)", "stride", "(2,2)", "pad", "(1,1)",
                                      "num_filter", "6", "num_group", "2", "no_bias", "false"));
    int complete = -1;
    ck_assert_ok(DeftSymbolInferShape(deconv, 1, (const char *const[]){"x"}, (const int[]){4},
                                      (const int64_t[]){5, 4, 9, 10}, NULL, &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(deconv, DEFT_ARGUMENTS, 1, 4, SHAPE(8, 2, 3, 3)); /* conv_weight */
    assert_inferred(deconv, DEFT_ARGUMENTS, 2, 1, SHAPE(8));          /* conv_bias */
    assert_inferred(deconv, DEFT_ARGUMENTS, 3, 4, SHAPE(8, 3, 4, 4)); /* deconv_weight */
    assert_inferred(deconv, DEFT_ARGUMENTS, 4, 1, SHAPE(6));          /* deconv_bias */
    ck_assert_ok(DeftSymbolInferShape(conv, 1, (const char *const[]){"x"}, (const int[]){4},
                                      (const int64_t[]){5, 4, 9, 10}, NULL, &complete));
    assert_inferred(conv, DEFT_OUTPUTS, 0, 4, SHAPE(5, 8, 5, 5));
    assert_inferred(deconv, DEFT_OUTPUTS, 0, 4, SHAPE(5, 6, 10, 10));
    /* no_bias (Deconvolution's default): two arguments */
    DeftSymbolHandle y = var("y");
    DeftSymbolHandle d1 =
        apply("Deconvolution", "d1", 1, &y, P("kernel", "(3,)", "num_filter", "2"));
    ck_assert_ok(DeftSymbolInferShape(d1, 1, (const char *const[]){"y"}, (const int[]){3},
                                      (const int64_t[]){1, 5, 7}, NULL, &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(d1, DEFT_ARGUMENTS, 1, 3, SHAPE(5, 2, 3));
    assert_inferred(d1, DEFT_OUTPUTS, 0, 3, SHAPE(1, 2, 9));
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(d1, &nargs, &names));
    ck_assert_int_eq(nargs, 2);
    ck_assert_ok(DeftSymbolFree(x));
    ck_assert_ok(DeftSymbolFree(conv));
    ck_assert_ok(DeftSymbolFree(deconv));
    ck_assert_ok(DeftSymbolFree(y));
    ck_assert_ok(DeftSymbolFree(d1));
}
END_TEST

#define CONV_FAILS(op, nin, in, params, kind, text)                                                \
    ck_assert_call_fails(op, nin, in, params, kind, text)

START_TEST(test_bad_parameters_are_named) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, SHAPE(2, 4, 5, 5), NULL);
    DeftNDArrayHandle w = make(DEFT_FLOAT32, 4, SHAPE(6, 4, 3, 3), NULL);
    DeftNDArrayHandle in[2] = {x, w};
    const int V = DEFT_ERROR_VALUE;
    CONV_FAILS("Convolution", 2, in, P("kernel", "(3,)", "num_filter", "6", "no_bias", "true"), V,
               "operator 'Convolution': input 0 (data) has shape (2,4,5,5), expected 3 "
               "dimensions (batch, channel, w) for a 1-D kernel");
    CONV_FAILS("Convolution", 2, in, P("kernel", "(3,3,3,3)", "num_filter", "6", "no_bias", "true"),
               V, "kernel (3,3,3,3) has 4 dimensions, expected 1, 2 or 3");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "num_filter", "6", "num_group", "4", "no_bias", "true"), V,
               "num_filter 6 is not divisible by num_group 4");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "num_filter", "6", "num_group", "3", "no_bias", "true"), V,
               "input 0 (data) has 4 channels, not divisible by num_group 3");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "stride", "(1,0)", "num_filter", "6", "no_bias", "true"), V,
               "stride (1,0) has an entry below 1");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "stride", "(1,1,1)", "num_filter", "6", "no_bias", "true"), V,
               "stride (1,1,1) has 3 dimensions, but kernel has 2");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "pad", "(-1,0)", "num_filter", "6", "no_bias", "true"), V,
               "pad (-1,0) has an entry below 0");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "dilate", "(3,1)", "num_filter", "6", "no_bias", "true"), V,
               "kernel (3,3) (dilated 7) is larger than input 0 (data)'s spatial dimension 0 "
               "padded (5 + 2 x 0)");
    CONV_FAILS("Convolution", 2, in, P("kernel", "(3,3)", "num_filter", "0", "no_bias", "true"), V,
               "num_filter is 0, expected >= 1");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "num_filter", "6", "no_bias", "true", "layout", "NHWC"),
               DEFT_ERROR_NOT_IMPLEMENTED,
               "layout NHWC is not supported: only channels-first data (NCW, NCHW, NCDHW)");
    CONV_FAILS("Convolution", 2, in,
               P("kernel", "(3,3)", "num_filter", "6", "no_bias", "true", "layout", "NCW"), V,
               "layout NCW does not fit a 2-D kernel (expected NCHW)");
    CONV_FAILS("Convolution", 2, in, P("kernel", "(3,3)", "num_filter", "6", "layout", "NWHC"),
               DEFT_ERROR_PARSE, "parameter 'layout' is 'NWHC', expected one of: NCW, NCHW");
    CONV_FAILS("Convolution", 2, in, P("kernel", "(3,3)", "num_filter", "6"), V,
               "got 2 inputs, expected 3 (data, weight, bias)");
    CONV_FAILS("Convolution", 2, in, P("kernel", "(2,2)", "num_filter", "6", "no_bias", "true"), V,
               "input 1 (weight) has shape (6,4,3,3), expected (6,4,2,2)");
    /* Deconvolution: weight (channels, num_filter / groups, kernel...) */
    DeftNDArrayHandle wd = make(DEFT_FLOAT32, 4, SHAPE(4, 3, 3, 3), NULL);
    DeftNDArrayHandle ind[2] = {x, wd};
    CONV_FAILS("Deconvolution", 2, ind, P("kernel", "(3,3)", "pad", "(4,1)", "num_filter", "3"), V,
               "operator 'Deconvolution': the output's spatial dimension 0 would be -1 (input 5, "
               "pad 4): expected >= 1");
    CONV_FAILS("Deconvolution", 2, ind,
               P("kernel", "(3,3)", "stride", "(2,2)", "adj", "(2,0)", "num_filter", "3"), V,
               "adj[0] is 2, expected less than stride[0] (2)");
    CONV_FAILS(
        "Deconvolution", 2, ind,
        P("kernel", "(3,3)", "stride", "(2,2)", "target_shape", "(12,11)", "num_filter", "3"), V,
        "target_shape[0] is 12, more than the largest output 11");
    CONV_FAILS("Deconvolution", 2, ind,
               P("kernel", "(3,3)", "target_shape", "(6,)", "num_filter", "3"), V,
               "target_shape (6,) has 1 dimensions, but kernel has 2");
    CONV_FAILS("Deconvolution", 2, ind, P("kernel", "(3,3)", "num_filter", "6"), V,
               "input 1 (weight) has shape (4,3,3,3), expected (4,6,3,3)");
    DeftNDArrayHandle x3 = make(DEFT_FLOAT32, 5, SHAPE(1, 4, 2, 2, 2), NULL);
    DeftNDArrayHandle w3 = make(DEFT_FLOAT32, 5, SHAPE(4, 3, 1, 1, 1), NULL);
    CONV_FAILS("Deconvolution", 2, ((DeftNDArrayHandle[]){x3, w3}),
               P("kernel", "(1,1,1)", "dilate", "(1,2,1)", "num_filter", "3"),
               DEFT_ERROR_NOT_IMPLEMENTED, "3-D Deconvolution has no dilation");
    /* dtypes */
    DeftNDArrayHandle xi = make(DEFT_INT32, 4, SHAPE(2, 4, 5, 5), NULL);
    CONV_FAILS("Convolution", 2, ((DeftNDArrayHandle[]){xi, w}),
               P("kernel", "(3,3)", "num_filter", "6", "no_bias", "true"), DEFT_ERROR_TYPE,
               "input 0 has dtype int32, expected float32, float64, float16 or bfloat16");
    free_all(6, (DeftNDArrayHandle[]){x, w, wd, x3, w3, xi});
}
END_TEST

/* MXNet's accepted-but-unused parameters and its alias names work. */
START_TEST(test_mxnet_parameters_and_aliases) {
    double x[1 * 2 * 4], w[3 * 2 * 2], want[1 * 3 * 3];
    fill(x, 8, 7);
    fill(w, 12, 8);
    conv_case_t c = {1,       1,       2,       3,       1,     DIMS(4), DIMS(2),
                     DIMS(1), DIMS(0), DIMS(1), DIMS(0), false, DIMS(0)};
    ref_conv(&c, x, w, NULL, want);
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT64, 3, SHAPE(1, 2, 4), x),
                               make(DEFT_FLOAT64, 3, SHAPE(3, 2, 2), w)};
    DeftNDArrayHandle y =
        call1("_npx_convolution", 2, in,
              P("kernel", "2", "num_filter", "3", "no_bias", "1", "workspace", "256", "cudnn_tune",
                "fastest", "cudnn_off", "true", "layout", "NCW"));
    assert_values(y, 9, want, 1e-14);
    DeftNDArrayHandle wd = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 2), w);
    DeftNDArrayHandle yd = call1("_npx_deconvolution", 2, (DeftNDArrayHandle[]){in[0], wd},
                                 P("kernel", "(2,)", "num_filter", "3", "cudnn_tune", "None"));
    assert_shape(yd, 3, SHAPE(1, 3, 5));
    free_all(5, (DeftNDArrayHandle[]){in[0], in[1], y, wd, yd});
}
END_TEST

int main(void) {
    Suite *s = suite_create("op_conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_convolution_matches_direct_loops);
    tcase_add_test(tc, test_deconvolution_matches_scatter_loops);
    tcase_add_test(tc, test_deconvolution_is_the_adjoint_of_convolution);
    tcase_add_test(tc, test_backward_convolution_matches_scatter_loops);
    tcase_add_test(tc, test_direct_kernels_match_direct_loops);
    tcase_add_test(tc, test_direct_kernels_leave_the_rest_to_im2col);
    tcase_add_test(tc, test_direct_backward_matches_scatter_loops);
    tcase_add_test(tc, test_small_channel_kernels_match_direct_loops);
    tcase_add_test(tc, test_small_channel_backward_matches_scatter_loops);
    tcase_add_test(tc, test_small_channel_kernels_leave_the_rest);
    tcase_add_test(tc, test_batch_lane_kernels_match_reference_loops);
    tcase_add_test(tc, test_batch_lane_kernels_leave_the_rest);
    tcase_add_test(tc, test_batched_small_outputs_match_direct_loops);
    tcase_add_test(tc, test_stem_kernel_matches_direct_loops);
    tcase_add_test(tc, test_kept_weights_follow_writes);
    tcase_add_test(tc, test_release_cached_drops_packed_weights);
    tcase_add_test(tc, test_batch_norm_folded_by_executors);
    tcase_add_test(tc, test_zero_size_batch);
    tcase_add_test(tc, test_zero_size_batch_gradient);
    tcase_add_test(tc, test_infer_weight_and_bias_from_data);
    tcase_add_test(tc, test_bad_parameters_are_named);
    tcase_add_test(tc, test_mxnet_parameters_and_aliases);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
