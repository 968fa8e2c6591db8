/* float16 and bfloat16 Convolution and Deconvolution (conv_half.c) against
 * the reference loops: the operands are quarters, whose float32 sums are
 * exact, so each result must be the exact value rounded once. */
#include "conv_reference.h"

#include "core/op/conv.h"
#include "core/op/gemm_bf16.h"
#include "core/op/simd.h"

/* The kernels a bfloat16 convolution may take here: widened to float32
 * (mode 0), bfloat16 products with AVX512-BF16 (1), with AMX (2). False
 * where this CPU lacks the mode's instructions. */
static bool use_mode(int mode) {
    deft_simd_cap(mode > 0 ? DEFT_SIMD_AVX512 : DEFT_SIMD_AVX2);
    deft_gemm_bf16_use_amx(mode == 2);
    if (mode == 0) return !deft_gemm_bf16_available();
    return deft_gemm_bf16_available() && (mode == 1 || deft_gemm_bf16_amx());
}

static void restore_modes(void) {
    deft_simd_cap(DEFT_SIMD_AVX512);
    deft_gemm_bf16_use_amx(true);
}

/* Groups of 16 filters or more: bfloat16 products (conv_half.c), through
 * both im2col and the image itself (1x1), several images a product (small
 * outputs), several threads, strides 1, 2 (whole runs of taps) and 3, and
 * AMX's ragged tiles (24 filters, 8 x 9 im2col rows). */
static const conv_case_t product_cases[] = {
    {2, 3, 8, 32, 1, DIMS(9, 10), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 6, 48, 2, DIMS(7, 9), DIMS(3, 2), DIMS(2, 1), DIMS(1, 0), DIMS(1, 2), DIMS(0), false,
     DIMS(0)},
    {2, 2, 20, 24, 1, DIMS(5, 7), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), false,
     DIMS(0)},
    {1, 2, 5, 16, 1, DIMS(13), DIMS(3), DIMS(2), DIMS(1), DIMS(1), DIMS(0), true, DIMS(0)},
    {3, 1, 3, 16, 1, DIMS(3, 4, 5), DIMS(2, 2, 2), DIMS(1, 1, 1), DIMS(1, 0, 1), DIMS(1, 1, 1),
     DIMS(0), true, DIMS(0)},
    {2, 4, 16, 32, 1, DIMS(16, 16), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* width stride 2: a stem's 7x7 kernel on an odd width, and with dilation */
    {2, 2, 3, 16, 1, DIMS(19, 23), DIMS(7, 7), DIMS(2, 2), DIMS(3, 3), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 1, 4, 16, 1, DIMS(9, 14), DIMS(3, 3), DIMS(2, 2), DIMS(2, 1), DIMS(2, 2), DIMS(0), false,
     DIMS(0)},
    /* ... on a row too long to split on the stack (2048 words): strided masked loads */
    {1, 1, 2, 16, 1, DIMS(4200), DIMS(3), DIMS(2), DIMS(1), DIMS(1), DIMS(0), true, DIMS(0)},
    /* stride 3 with dilation: im2col's taps one by one */
    {2, 2, 4, 16, 1, DIMS(11, 13), DIMS(3, 3), DIMS(3, 3), DIMS(2, 1), DIMS(2, 2), DIMS(0), true,
     DIMS(0)},
};
/* Deconvolution raises: its bfloat16 products take 16 channels a group or more. */
static const conv_case_t product_deconv_cases[] = {
    {2, 2, 16, 4, 1, DIMS(4, 5), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(1, 0), true,
     DIMS(0)},
    {2, 3, 32, 6, 2, DIMS(5, 4), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0, 0), true,
     DIMS(0)},
    {2, 2, 32, 8, 1, DIMS(9, 11), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), true,
     DIMS(0)},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(test_half_convolution_rounds_the_float32_result_once) {
    const int dtype = _i == 0 ? DEFT_FLOAT16 : DEFT_BFLOAT16;
    for (int mode = 0; mode < 3; mode++) {
        if (!use_mode(mode) && mode > 0) continue; /* widened runs everywhere (float16 always) */
        for (size_t i = 0; i < COUNT(conv_cases); i++) check_case(&conv_cases[i], false, dtype);
        for (size_t i = 0; i < COUNT(deconv_cases); i++) check_case(&deconv_cases[i], true, dtype);
        for (size_t i = 0; i < COUNT(product_cases); i++)
            check_case(&product_cases[i], false, dtype);
        for (size_t i = 0; i < COUNT(product_deconv_cases); i++)
            check_case(&product_deconv_cases[i], true, dtype);
    }
    restore_modes();
}
END_TEST

/* dx, dW and db of one case through _backward_Convolution, rounded once. */
static void check_gradients(const conv_case_t *c, int dtype) {
    conv_texts_t t;
    conv_texts(c, &t);
    int64_t out[3], xs[5] = {c->batch, c->chan}, ws[5] = {c->filt, c->chan / c->groups},
                    ys[5] = {c->batch, c->filt};
    conv_out(c, out);
    for (int i = 0; i < c->nd; i++) xs[2 + i] = c->in[i], ws[2 + i] = c->k[i], ys[2 + i] = out[i];
    const int nd = c->nd + 2;
    const int64_t nx = count_of(nd, xs), nw = count_of(nd, ws), ny = count_of(nd, ys);
    double *x = malloc(sizeof(double) * (size_t)nx), *w = malloc(sizeof(double) * (size_t)nw);
    double *dy = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
    double *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * c->filt);
    fill_quarters(x, nx, 9), fill_quarters(w, nw, 10), fill_quarters(dy, ny, 11);
    ref_conv_grads(c, x, w, dy, dx, dw, db);
    DeftNDArrayHandle in[4] = {make(dtype, nd, ys, dy), make(dtype, nd, xs, x),
                               make(dtype, nd, ws, w), make(dtype, 1, SHAPE(c->filt), NULL)};
    DeftNDArrayHandle grads[3] = {NULL, NULL, NULL};
    int nout = 3;
    ck_assert_ok(call("_backward_Convolution", 4, in, &nout, grads,
                      P("kernel", t.kernel, "stride", t.stride, "pad", t.pad, "dilate", t.dilate,
                        "num_filter", t.nf, "num_group", t.ng)));
    assert_half_rounded(grads[0], dtype, nx, dx);
    assert_half_rounded(grads[1], dtype, nw, dw);
    assert_half_rounded(grads[2], dtype, c->filt, db);
    free_all(4, in);
    free_all(3, grads);
    free(x), free(w), free(dy), free(dx), free(dw), free(db);
}

/* The gradients through each kernel mode: the weight gradient's sums split
 * between threads (4 images), 1x1, widened groups of 4 filters, and runs. */
START_TEST(test_half_gradients_round_the_float32_result_once) {
    const conv_case_t cases[] = {
        {2, 4, 32, 32, 2, DIMS(16, 17), DIMS(3, 3), DIMS(1, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0),
         true, DIMS(0)},
        {2, 3, 24, 16, 1, DIMS(6, 7), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
         DIMS(0)},
        {2, 2, 6, 8, 2, DIMS(7, 6), DIMS(3, 3), DIMS(2, 1), DIMS(1, 1), DIMS(1, 2), DIMS(0), true,
         DIMS(0)},
        /* stride 1, rows as wide as the image's: col2im's runs, over two tiles,
         * a 5-row kernel's first and last rows partly in the padding */
        {2, 2, 16, 32, 1, DIMS(21, 19), DIMS(5, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0),
         true, DIMS(0)},
    };
    const int dtype = _i == 0 ? DEFT_FLOAT16 : DEFT_BFLOAT16;
    for (int mode = 0; mode < 3; mode++) {
        if (!use_mode(mode) && mode > 0) continue;
        for (size_t i = 0; i < COUNT(cases); i++) check_gradients(&cases[i], dtype);
    }
    restore_modes();
}
END_TEST

/* In predict mode the bfloat16 forward keeps W packed between calls (under
 * its contents' key, as the float32 direct kernels do): a write to W is
 * seen by the next call, and DeftMemoryReleaseCached drops the copies. */
START_TEST(test_bf16_kept_weights_follow_writes_and_release) {
    if (!use_mode(2) && !use_mode(1)) {
        printf("test_bf16_kept_weights_follow_writes_and_release: no AVX512-BF16 here\n");
        restore_modes();
        return;
    }
    const conv_case_t c = {2,           2,          8,          32,         1,
                           DIMS(9, 10), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1),
                           DIMS(0),     true,       DIMS(0)};
    const int64_t xs[4] = {2, 8, 9, 10}, ws[4] = {32, 8, 3, 3}, nw = 32 * 72, ny = 2 * 32 * 90;
    /* weights w0, then w1 written from the host, then 2 w1 written in place */
    double x[2 * 8 * 90], w[3][32 * 72], b[32], want[3][2 * 32 * 90];
    fill_quarters(x, count_of(4, xs), 1), fill_quarters(b, 32, 3);
    fill_quarters(w[0], nw, 5), fill_quarters(w[1], nw, 6);
    for (int64_t i = 0; i < nw; i++) w[2][i] = 2 * w[1][i];
    for (int v = 0; v < 3; v++) ref_conv(&c, x, w[v], b, want[v]);
    DeftNDArrayHandle in[3] = {make(DEFT_BFLOAT16, 4, xs, x), make(DEFT_BFLOAT16, 4, ws, w[0]),
                               make(DEFT_BFLOAT16, 1, SHAPE(32), b)};
    conv_texts_t t;
    conv_texts(&c, &t);
    const char *const *params = P("kernel", t.kernel, "pad", t.pad, "num_filter", t.nf);
    for (int run = 0; run < 4; run++) {
        if (run == 1) set_values(in[1], nw, w[1]);
        if (run == 2) {
            DeftNDArrayHandle same[1] = {in[1]};
            int nout = 1;
            ck_assert_ok(call("_mul_scalar", 1, in + 1, &nout, same, P("scalar", "2")));
        }
        if (run == 3) {
            ck_assert_uint_gt(deft_conv_packed_bytes(), 0);
            ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
            ck_assert_uint_eq(deft_conv_packed_bytes(), 0);
        }
        DeftNDArrayHandle y = call1("Convolution", 3, in, params);
        assert_half_rounded(y, DEFT_BFLOAT16, ny, want[run < 2 ? run : 2]);
        free_all(1, &y);
    }
    ck_assert_uint_gt(deft_conv_packed_bytes(), 0);
    free_all(3, in);
    restore_modes();
}
END_TEST

/* Mixed dtypes and integer data are refused, by name. */
START_TEST(test_half_convolution_errors_name_the_dtypes) {
    double v[2 * 3 * 5 * 5] = {0};
    DeftNDArrayHandle X = make(DEFT_BFLOAT16, 4, SHAPE(2, 3, 5, 5), v);
    DeftNDArrayHandle W = make(DEFT_FLOAT32, 4, SHAPE(4, 3, 3, 3), v);
    DeftNDArrayHandle Xi = make(DEFT_INT32, 4, SHAPE(2, 3, 5, 5), v);
    DeftNDArrayHandle Wi = make(DEFT_INT32, 4, SHAPE(4, 3, 3, 3), v);
    const char *const *params = P("kernel", "(3,3)", "num_filter", "4", "no_bias", "true");
    ck_assert_call_fails("Convolution", 2, ((DeftNDArrayHandle[]){X, W}), params, DEFT_ERROR_TYPE,
                         "input 1 has dtype float32, expected bfloat16");
    ck_assert_call_fails("Convolution", 2, ((DeftNDArrayHandle[]){Xi, Wi}), params, DEFT_ERROR_TYPE,
                         "expected float32, float64, float16 or bfloat16");
    free_all(4, (DeftNDArrayHandle[]){X, W, Xi, Wi});
}
END_TEST

int main(void) {
    Suite *s = suite_create("op_conv_half");
    TCase *tc = tcase_create("half");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_half_convolution_rounds_the_float32_result_once, 0, 2);
    tcase_add_loop_test(tc, test_half_gradients_round_the_float32_result_once, 0, 2);
    tcase_add_test(tc, test_bf16_kept_weights_follow_writes_and_release);
    tcase_add_test(tc, test_half_convolution_errors_name_the_dtypes);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
