/* dot, batch_dot, FullyConnected and the _linalg_gemm products against triple loops. */
#include "op_helpers.h"

#include <inttypes.h>

#include "core/math/dtype_math.h"
#include "core/op/gemm_bf16.h"

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = (double)(((i + 1) * (seed * 37 + 11)) % 19) / 4.0 - 2;
}

/* C = op(A) op(B) with A stored (ta ? k x m : m x k) and B (tb ? n x k : k x n). */
static void ref_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
                     const double *b, double *c) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
            c[i * n + j] = s;
        }
}

/* A small product, and a short, wide one that threads split by columns (over
 * a million multiply-adds; ragged blocks). Quarters: float32 sums are exact. */
START_TEST(test_dot_with_transposes_both_dtypes) {
    const int64_t sizes[2][3] = {{5, 7, 3}, {20, 1000, 64}};
    for (int z = 0; z < 2; z++) {
        const int64_t m = sizes[z][0], n = sizes[z][1], k = sizes[z][2];
        double *a = malloc(sizeof(double) * (size_t)(m * k));
        double *b = malloc(sizeof(double) * (size_t)(k * n));
        double *want = malloc(sizeof(double) * (size_t)(m * n));
        fill(a, m * k, 1);
        fill(b, k * n, 2);
        for (int d = 0; d < 2; d++) {
            int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    DeftNDArrayHandle A = make(dtype, 2, ta ? SHAPE(k, m) : SHAPE(m, k), a);
                    DeftNDArrayHandle B = make(dtype, 2, tb ? SHAPE(n, k) : SHAPE(k, n), b);
                    DeftNDArrayHandle C = call1("dot", 2, (DeftNDArrayHandle[]){A, B},
                                                P("transpose_a", ta ? "true" : "false",
                                                  "transpose_b", tb ? "true" : "false"));
                    ref_gemm(ta, tb, m, n, k, a, b, want);
                    assert_shape(C, 2, SHAPE(m, n));
                    assert_values(C, m * n, want, d ? 1e-14 : 1e-6);
                    free_all(3, (DeftNDArrayHandle[]){A, B, C});
                }
        }
        free(a), free(b), free(want);
    }
}
END_TEST

START_TEST(test_dot_vectors_and_higher_rank) {
    DeftNDArrayHandle u = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle v = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(4, -5, 6));
    DeftNDArrayHandle s = call1("dot", 2, (DeftNDArrayHandle[]){u, v}, NO_PARAMS);
    assert_shape(s, 0, NULL);
    assert_values(s, 1, VALUES(12), 0);
    double a[24], b[12], want[24];
    fill(a, 24, 3);
    fill(b, 12, 4);
    DeftNDArrayHandle A = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 4), a);
    DeftNDArrayHandle B = make(DEFT_FLOAT64, 2, SHAPE(4, 3), b);
    DeftNDArrayHandle C = call1("dot", 2, (DeftNDArrayHandle[]){A, B}, NO_PARAMS);
    ref_gemm(false, false, 6, 3, 4, a, b, want);
    assert_shape(C, 3, SHAPE(2, 3, 3));
    assert_values(C, 18, want, 1e-14);
    DeftNDArrayHandle E = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle F = make(DEFT_FLOAT32, 2, SHAPE(3, 2), NULL);
    DeftNDArrayHandle EF = call1("dot", 2, (DeftNDArrayHandle[]){E, F}, NO_PARAMS);
    assert_shape(EF, 2, SHAPE(0, 2));
    DeftNDArrayHandle K0a = make(DEFT_FLOAT32, 2, SHAPE(2, 0), NULL);
    DeftNDArrayHandle K0b = make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL);
    DeftNDArrayHandle K0 = call1("dot", 2, (DeftNDArrayHandle[]){K0a, K0b}, NO_PARAMS);
    assert_values(K0, 4, VALUES(0, 0, 0, 0), 0);
    DeftNDArrayHandle I = make(DEFT_INT32, 2, SHAPE(2, 2), NULL);
    ck_assert_call_fails("dot", 2, ((DeftNDArrayHandle[]){I, I}), NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype int32, expected float32, float64, float16 or bfloat16");
    ck_assert_call_fails("dot", 2, ((DeftNDArrayHandle[]){A, B}), P("transpose_a", "1"),
                         DEFT_ERROR_NOT_IMPLEMENTED, "need 2-D inputs");
    free_all(13, (DeftNDArrayHandle[]){u, v, s, A, B, C, E, F, EF, K0a, K0b, K0, I});
}
END_TEST

/* A result of more than 8 dimensions is refused before any is written
 * (dot wrote past the shape's 8, found by fuzz_invoke under UBSan). */
START_TEST(test_dot_result_rank_is_checked_first) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 8, SHAPE(1, 1, 1, 1, 1, 1, 1, 2), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 8, SHAPE(2, 1, 1, 1, 1, 1, 1, 1), NULL);
    ck_assert_call_fails("dot", 2, ((DeftNDArrayHandle[]){a, b}), NO_PARAMS, DEFT_ERROR_VALUE,
                         "the result would have 14 dimensions, more than 8");
    DeftNDArrayHandle g = make(DEFT_FLOAT32, 1, SHAPE(1), NULL);
    ck_assert_call_fails("_backward_dot_lhs", 3, ((DeftNDArrayHandle[]){g, a, b}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "the result would have 14 dimensions");
    free_all(3, (DeftNDArrayHandle[]){a, b, g});
}
END_TEST

START_TEST(test_batch_dot) {
    const int64_t batch = 3, m = 2, n = 4, k = 5;
    double a[40], b[60], want[24];
    fill(a, 30, 5);
    fill(b, 60, 6);
    for (int d = 0; d < 2; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
                DeftNDArrayHandle A =
                    make(dtype, 3, ta ? SHAPE(batch, k, m) : SHAPE(batch, m, k), a);
                DeftNDArrayHandle B =
                    make(dtype, 3, tb ? SHAPE(batch, n, k) : SHAPE(batch, k, n), b);
                DeftNDArrayHandle C =
                    call1("batch_dot", 2, (DeftNDArrayHandle[]){A, B},
                          P("transpose_a", ta ? "1" : "0", "transpose_b", tb ? "1" : "0"));
                for (int64_t i = 0; i < batch; i++)
                    ref_gemm(ta, tb, m, n, k, a + i * m * k, b + i * k * n, want + i * m * n);
                assert_shape(C, 3, SHAPE(batch, m, n));
                assert_values(C, batch * m * n, want, d ? 1e-14 : 1e-6);
                free_all(3, (DeftNDArrayHandle[]){A, B, C});
            }
    DeftNDArrayHandle A = make(DEFT_FLOAT32, 3, SHAPE(2, 2, 3), NULL);
    DeftNDArrayHandle B = make(DEFT_FLOAT32, 3, SHAPE(3, 3, 2), NULL);
    ck_assert_call_fails("batch_dot", 2, ((DeftNDArrayHandle[]){A, B}), NO_PARAMS, DEFT_ERROR_VALUE,
                         "inputs have shapes (2,2,3) and (3,3,2), expected (batch, m, k)");
    free_all(2, (DeftNDArrayHandle[]){A, B});
}
END_TEST

START_TEST(test_fully_connected_with_and_without_bias_and_flatten) {
    double x[24], w[12], bias[2], want[16];
    fill(x, 24, 7);
    fill(w, 12, 8);
    bias[0] = 0.5, bias[1] = -1.5;
    int dtype = _i ? DEFT_FLOAT32 : DEFT_FLOAT64;
    double tol = _i ? 1e-6 : 1e-14;
    DeftNDArrayHandle X = make(dtype, 3, SHAPE(4, 2, 3), x);
    DeftNDArrayHandle W = make(dtype, 2, SHAPE(2, 6), w);
    DeftNDArrayHandle Bv = make(dtype, 1, SHAPE(2), bias);
    DeftNDArrayHandle Y =
        call1("FullyConnected", 3, (DeftNDArrayHandle[]){X, W, Bv}, P("num_hidden", "2"));
    ref_gemm(false, true, 4, 2, 6, x, w, want);
    for (int i = 0; i < 8; i++) want[i] += bias[i % 2];
    assert_shape(Y, 2, SHAPE(4, 2));
    assert_values(Y, 8, want, tol);
    DeftNDArrayHandle Yn = call1("FullyConnected", 2, (DeftNDArrayHandle[]){X, W},
                                 P("num_hidden", "2", "no_bias", "true"));
    ref_gemm(false, true, 4, 2, 6, x, w, want);
    assert_values(Yn, 8, want, tol);
    DeftNDArrayHandle W3 = make(dtype, 2, SHAPE(2, 3), w);
    DeftNDArrayHandle Yf = call1("FullyConnected", 3, (DeftNDArrayHandle[]){X, W3, Bv},
                                 P("num_hidden", "2", "flatten", "false"));
    ref_gemm(false, true, 8, 2, 3, x, w, want);
    for (int i = 0; i < 16; i++) want[i] += bias[i % 2];
    assert_shape(Yf, 3, SHAPE(4, 2, 2));
    assert_values(Yf, 16, want, tol);
    ck_assert_call_fails("FullyConnected", 3, ((DeftNDArrayHandle[]){X, W3, Bv}),
                         P("num_hidden", "2"), DEFT_ERROR_VALUE,
                         "input 1 (weight) has shape (2,3), expected (2,6)");
    ck_assert_call_fails("FullyConnected", 3, ((DeftNDArrayHandle[]){X, W, W}),
                         P("num_hidden", "2"), DEFT_ERROR_VALUE,
                         "input 2 (bias) has shape (2,6), expected (2,)");
    ck_assert_call_fails("FullyConnected", 3, ((DeftNDArrayHandle[]){X, W, Bv}),
                         P("num_hidden", "0"), DEFT_ERROR_VALUE, "num_hidden is 0, expected >= 1");
    free_all(7, (DeftNDArrayHandle[]){X, W, Bv, Y, Yn, W3, Yf});
}
END_TEST

/* float16 and bfloat16 products run in float32 and round once: dot (every
 * transpose pair), batch_dot and FullyConnected with a bias. The operands
 * are quarters in [-2, 2.5], exact in both dtypes, and the float32 sums are
 * exact, so the result is the exact product rounded to the dtype. */
START_TEST(test_half_products_round_the_float32_result_once) {
    const int dtype = _i ? DEFT_BFLOAT16 : DEFT_FLOAT16;
    const int64_t m = 5, n = 7, k = 6, batch = 2;
    double a[60], b[84], bias[7], want[70];
    fill(a, 60, 11);
    fill(b, 84, 12);
    fill(bias, 7, 13);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            DeftNDArrayHandle A = make(dtype, 2, ta ? SHAPE(k, m) : SHAPE(m, k), a);
            DeftNDArrayHandle B = make(dtype, 2, tb ? SHAPE(n, k) : SHAPE(k, n), b);
            DeftNDArrayHandle C =
                call1("dot", 2, (DeftNDArrayHandle[]){A, B},
                      P("transpose_a", ta ? "1" : "0", "transpose_b", tb ? "1" : "0"));
            ref_gemm(ta, tb, m, n, k, a, b, want);
            assert_half_rounded(C, dtype, m * n, want);
            free_all(3, (DeftNDArrayHandle[]){A, B, C});
        }
    DeftNDArrayHandle A = make(dtype, 3, SHAPE(batch, m, k), a);
    DeftNDArrayHandle B = make(dtype, 3, SHAPE(batch, k, n), b);
    DeftNDArrayHandle C = call1("batch_dot", 2, (DeftNDArrayHandle[]){A, B}, NO_PARAMS);
    for (int64_t i = 0; i < batch; i++)
        ref_gemm(false, false, m, n, k, a + i * m * k, b + i * k * n, want + i * m * n);
    assert_half_rounded(C, dtype, batch * m * n, want);
    DeftNDArrayHandle X = make(dtype, 2, SHAPE(m, k), a);
    DeftNDArrayHandle W = make(dtype, 2, SHAPE(n, k), b);
    DeftNDArrayHandle Bv = make(dtype, 1, SHAPE(n), bias);
    DeftNDArrayHandle Y =
        call1("FullyConnected", 3, (DeftNDArrayHandle[]){X, W, Bv}, P("num_hidden", "7"));
    ref_gemm(false, true, m, n, k, a, b, want);
    for (int64_t i = 0; i < m * n; i++) want[i] += bias[i % n];
    assert_half_rounded(Y, dtype, m * n, want);
    ck_assert_call_fails("dot", 2, ((DeftNDArrayHandle[]){X, B}), NO_PARAMS, DEFT_ERROR_VALUE,
                         "expected (6, ...)");
    free_all(7, (DeftNDArrayHandle[]){A, B, C, X, W, Bv, Y});
}
END_TEST

/* Quarters in [-2, 2.5] in no short period: exact in bfloat16, and their
 * products' sums over a few thousand terms exact in float32. */
static void fill_scattered(double *v, int64_t n, uint32_t seed) {
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((((uint32_t)i * 2654435761u + seed * 40503u) >> 9 & 0xffff) % 19) / 4.0 - 2;
}

/* The AVX512-BF16 and AMX kernels (gemm_bf16.c) past their tiles and
 * blocks: ragged row and column panels, odd and even k over one or three k
 * blocks (ragged AMX tiles of pairs), rows split between threads, every
 * transpose pair, beta 0, 1 and 0.5, against the exact product rounded once
 * (and not rounded, for a float32 C). */
START_TEST(test_bf16_kernel_past_its_tiles_and_blocks) {
    if (!deft_gemm_bf16_available()) {
        printf("test_bf16_kernel_past_its_tiles_and_blocks: this CPU has no AVX512-BF16; "
               "the kernel was not run\n");
        return;
    }
    /* one k block; three; three with the packing's 16-pair chunks ragged (even k) */
    const int64_t k = (const int64_t[]){301, 775, 770, 301, 775, 770}[_i];
    /* AVX512-BF16 first, then AMX (on 70 rows: two panels and a ragged third) */
    bool amx = _i >= 3;
    if (amx) {
        deft_gemm_bf16_use_amx(true);
        if (!deft_gemm_bf16_amx()) {
            printf("test_bf16_kernel_past_its_tiles_and_blocks: no AMX here; its kernel was "
                   "not run\n");
            return;
        }
    } else {
        deft_gemm_bf16_use_amx(false);
    }
    const int64_t m = amx ? 70 : 30, n = 70;
    double *a = malloc(sizeof(double) * m * k), *b = malloc(sizeof(double) * k * n);
    double *c0 = malloc(sizeof(double) * m * n), *want = malloc(sizeof(double) * m * n);
    uint16_t *ha = malloc(2 * m * k), *hb = malloc(2 * k * n), *hc = malloc(2 * m * n);
    float *fc = malloc(sizeof(float) * m * n);
    fill_scattered(a, m * k, 1), fill_scattered(b, k * n, 2), fill_scattered(c0, m * n, 3);
    for (int64_t i = 0; i < m * k; i++) ha[i] = deft_float_to_bf16((float)a[i]);
    for (int64_t i = 0; i < k * n; i++) hb[i] = deft_float_to_bf16((float)b[i]);
    const double betas[3] = {0, 1, 0.5};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int j = 0; j < 3; j++) {
                for (int64_t i = 0; i < m * n; i++) hc[i] = deft_float_to_bf16((float)c0[i]);
                ck_assert_int_eq(deft_gemm_bf16(ta, tb, m, n, k, ha, hb, betas[j], hc), 0);
                ref_gemm(ta, tb, m, n, k, a, b, want);
                for (int64_t i = 0; i < m * n; i++) {
                    uint16_t expect = deft_float_to_bf16((float)(want[i] + betas[j] * c0[i]));
                    ck_assert_msg(hc[i] == expect,
                                  "amx %d k %" PRId64 " ta %d tb %d beta %g: C[%" PRId64
                                  "][%" PRId64 "] is %g, want %g",
                                  amx, k, ta, tb, betas[j], i / n, i % n, deft_bf16_to_float(hc[i]),
                                  deft_bf16_to_float(expect));
                }
                /* the float32 result: the exact sums themselves */
                for (int64_t i = 0; i < m * n; i++) fc[i] = (float)c0[i];
                ck_assert_int_eq(deft_gemm_bf16_f32(ta, tb, m, n, k, ha, hb, betas[j], fc), 0);
                for (int64_t i = 0; i < m * n; i++)
                    ck_assert_msg(fc[i] == (float)(want[i] + betas[j] * c0[i]),
                                  "float32 C, amx %d k %" PRId64 " ta %d tb %d beta %g: C[%" PRId64
                                  "] is %g, want %g",
                                  amx, k, ta, tb, betas[j], i, fc[i], want[i] + betas[j] * c0[i]);
            }
    free(a), free(b), free(c0), free(want), free(ha), free(hb), free(hc), free(fc);
    deft_gemm_bf16_use_amx(true);
}
END_TEST

/* Small batches with many outputs transpose the data for a faster GEMM
 * layout: every shape around that band (odd sizes: the transpose's tails),
 * with and without bias, against triple loops. */
START_TEST(test_fully_connected_layouts) {
    const int64_t shapes[][3] = {{32, 64, 128}, {16, 67, 64}, {33, 5, 65}, {64, 128, 10},
                                 {15, 8, 64},   {65, 9, 64},  {17, 1, 70}, {64, 256, 128}};
    for (int k = 0; k < 8; k++) { /* the last one splits the GEMM's rows across threads */
        int64_t rows = shapes[k][0], features = shapes[k][1], hidden = shapes[k][2];
        double *x = malloc(sizeof(double) * (size_t)(rows * features));
        double *w = malloc(sizeof(double) * (size_t)(hidden * features));
        double *b = malloc(sizeof(double) * (size_t)hidden);
        double *want = malloc(sizeof(double) * (size_t)(rows * hidden));
        for (int64_t i = 0; i < rows * features; i++) x[i] = (double)((i * 7) % 13) - 6;
        for (int64_t i = 0; i < hidden * features; i++) w[i] = (double)((i * 5) % 11) * 0.25 - 1;
        for (int64_t i = 0; i < hidden; i++) b[i] = (double)i * 0.5;
        char num_hidden[16];
        snprintf(num_hidden, sizeof num_hidden, "%lld", (long long)hidden);
        DeftNDArrayHandle X = make(DEFT_FLOAT32, 2, SHAPE(rows, features), x);
        DeftNDArrayHandle W = make(DEFT_FLOAT32, 2, SHAPE(hidden, features), w);
        DeftNDArrayHandle B = make(DEFT_FLOAT32, 1, SHAPE(hidden), b);
        for (int bias = 0; bias < 2; bias++) {
            for (int64_t r = 0; r < rows; r++)
                for (int64_t h = 0; h < hidden; h++) {
                    double acc = bias ? b[h] : 0;
                    for (int64_t f = 0; f < features; f++)
                        acc += x[r * features + f] * w[h * features + f];
                    want[r * hidden + h] = acc;
                }
            DeftNDArrayHandle Y = bias ? call1("FullyConnected", 3, (DeftNDArrayHandle[]){X, W, B},
                                               P("num_hidden", num_hidden))
                                       : call1("FullyConnected", 2, (DeftNDArrayHandle[]){X, W},
                                               P("num_hidden", num_hidden, "no_bias", "true"));
            assert_values(Y, rows * hidden, want, 1e-5);
            ck_assert_ok(DeftNDArrayFree(Y));
        }
        free_all(3, (DeftNDArrayHandle[]){X, W, B});
        free(x), free(w), free(b), free(want);
    }
}
END_TEST

/* _linalg_gemm over a batch of 2 (the leading axis), every transpose pair, both dtypes. */
START_TEST(test_linalg_gemm_and_gemm2_batched) {
    const int64_t m = 3, n = 2, k = 4;
    for (int t = 0; t < 8; t++) {
        bool ta = t & 1, tb = t & 2, f64 = t & 4;
        int dtype = f64 ? DEFT_FLOAT64 : DEFT_FLOAT32;
        double a[24], b[16], c[12], want[12];
        fill(a, 24, 1), fill(b, 16, 2), fill(c, 12, 3);
        int64_t ashape[3] = {2, ta ? k : m, ta ? m : k}, bshape[3] = {2, tb ? n : k, tb ? k : n};
        DeftNDArrayHandle in[3] = {make(dtype, 3, ashape, a), make(dtype, 3, bshape, b),
                                   make(dtype, 3, SHAPE(2, m, n), c)};
        const char *params[] = {"transpose_a", ta ? "True" : "False",
                                "transpose_b", tb ? "1" : "0",
                                "alpha",       "0.5",
                                "beta",        "-2",
                                NULL};
        DeftNDArrayHandle y = call1("_linalg_gemm", 3, in, params);
        params[6] = NULL; /* gemm2: no beta */
        DeftNDArrayHandle y2 = call1("_linalg_gemm2", 2, in, params);
        assert_shape(y, 3, SHAPE(2, m, n));
        double want2[12];
        for (int bt = 0; bt < 2; bt++) {
            ref_gemm(ta, tb, m, n, k, a + bt * 12, b + bt * 8, want2 + bt * 6);
            for (int i = 0; i < 6; i++) {
                want2[bt * 6 + i] *= 0.5;
                want[bt * 6 + i] = want2[bt * 6 + i] - 2 * c[bt * 6 + i];
            }
        }
        assert_values(y, 12, want, f64 ? 1e-14 : 1e-6);
        assert_values(y2, 12, want2, f64 ? 1e-14 : 1e-6);
        free_all(5, (DeftNDArrayHandle[]){in[0], in[1], in[2], y, y2});
    }
}
END_TEST

/* axis=0: rows along axis 0, columns along the last, the batch in between. */
START_TEST(test_linalg_gemm2_row_axis_and_errors) {
    double a[12], b[12];
    fill(a, 12, 4), fill(b, 12, 5);
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT64, 3, SHAPE(2, 2, 3), a),
                               make(DEFT_FLOAT64, 3, SHAPE(3, 2, 2), b)};
    DeftNDArrayHandle y = call1("_linalg_gemm2", 2, in, P("axis", "0"));
    assert_shape(y, 3, SHAPE(2, 2, 2));
    double want[8];
    for (int bt = 0; bt < 2; bt++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double s = 0;
                for (int p = 0; p < 3; p++) s += a[i * 6 + bt * 3 + p] * b[p * 4 + bt * 2 + j];
                want[i * 4 + bt * 2 + j] = s;
            }
    assert_values(y, 8, want, 1e-14);
    ck_assert_call_fails("_linalg_gemm2", 2, in, P("axis", "2"), DEFT_ERROR_VALUE,
                         "operator '_linalg_gemm2': axis is 2, expected a row axis in [-3, 2) for "
                         "inputs of rank 3");
    ck_assert_call_fails("_linalg_gemm2", 2, in, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 1 has shape (3,2,2), expected (2,3,2) (A's batch axes, and B's "
                         "rows A's columns)");
    DeftNDArrayHandle c = make(DEFT_FLOAT64, 3, SHAPE(2, 2, 3), NULL);
    DeftNDArrayHandle abc[3] = {in[0], in[1], c};
    ck_assert_call_fails("_linalg_gemm", 3, abc, P("axis", "0"), DEFT_ERROR_VALUE,
                         "input 2 has shape (2,2,3), expected (2,2,2) (the product's shape)");
    DeftNDArrayHandle v = make(DEFT_FLOAT64, 1, SHAPE(3), NULL);
    DeftNDArrayHandle vv[2] = {v, v};
    ck_assert_call_fails("_linalg_gemm2", 2, vv, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 0 has rank 1, expected 2 or more");
    DeftNDArrayHandle e[2] = {make(DEFT_FLOAT32, 3, SHAPE(0, 2, 3), NULL),
                              make(DEFT_FLOAT32, 3, SHAPE(0, 3, 4), NULL)};
    DeftNDArrayHandle ey = call1("_linalg_gemm2", 2, e, NO_PARAMS);
    assert_shape(ey, 3, SHAPE(0, 2, 4));
    DeftNDArrayHandle k0[2] = {make(DEFT_FLOAT32, 2, SHAPE(2, 0), NULL),
                               make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL)};
    DeftNDArrayHandle kz = call1("_linalg_gemm2", 2, k0, NO_PARAMS);
    assert_values(kz, 4, VALUES(0, 0, 0, 0), 0);
    free_all(11, (DeftNDArrayHandle[]){in[0], in[1], y, c, v, e[0], e[1], ey, k0[0], k0[1], kz});
}
END_TEST

static Suite *linalg_suite(void) {
    Suite *suite = suite_create("linear algebra");
    TCase *tc = tcase_create("linalg");
    tcase_add_test(tc, test_dot_with_transposes_both_dtypes);
    tcase_add_test(tc, test_dot_vectors_and_higher_rank);
    tcase_add_test(tc, test_batch_dot);
    tcase_add_loop_test(tc, test_half_products_round_the_float32_result_once, 0, 2);
    tcase_add_loop_test(tc, test_bf16_kernel_past_its_tiles_and_blocks, 0, 6);
    tcase_add_test(tc, test_dot_result_rank_is_checked_first);
    tcase_add_test(tc, test_fully_connected_layouts);
    tcase_add_test(tc, test_linalg_gemm_and_gemm2_batched);
    tcase_add_test(tc, test_linalg_gemm2_row_axis_and_errors);
    tcase_add_loop_test(tc, test_fully_connected_with_and_without_bias_and_flatten, 0, 2);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(linalg_suite());
}
