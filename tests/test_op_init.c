/* Creation, random numbers, copies and optimizer updates. */
#include "core/math/philox.h"
#include "core/op/random.h"
#include "core/op/simd.h"
#include "op_helpers.h"

START_TEST(test_zeros_ones_full_in_every_dtype) {
    for (int d = 0; d < NUM_ARITH_DTYPES; d++) {
        const char *name;
        ck_assert_ok(DeftDTypeGetName(arith_dtypes[d], &name));
        DeftNDArrayHandle z = call1("_zeros", 0, NULL, P("shape", "(2,3)", "dtype", name));
        DeftNDArrayHandle o = call1("_ones", 0, NULL, P("shape", "(2,3)", "dtype", name));
        DeftNDArrayHandle f =
            call1("_full", 0, NULL, P("shape", "(70000,)", "dtype", name, "value", "7"));
        int dtype;
        ck_assert_ok(DeftNDArrayGetDType(f, &dtype));
        ck_assert_int_eq(dtype, arith_dtypes[d]);
        assert_values(z, 6, VALUES(0, 0, 0, 0, 0, 0), 0);
        assert_values(o, 6, VALUES(1, 1, 1, 1, 1, 1), 0);
        int64_t n;
        double *v = read_all(f, &n);
        ck_assert_int_eq(n, 70000);
        for (int64_t i = 0; i < n; i++) ck_assert_double_eq(v[i], 7);
        free(v);
        free_all(3, (DeftNDArrayHandle[]){z, o, f});
    }
    DeftNDArrayHandle s = call1("_full", 0, NULL, P("value", "-0.5"));
    assert_shape(s, 0, NULL);
    assert_values(s, 1, VALUES(-0.5), 0);
    ck_assert_call_fails("_zeros", 0, NULL, P("shape", "(2,-1)"), DEFT_ERROR_VALUE,
                         "shape[1] is -1, expected >= 0");
    ck_assert_call_fails("_full", 0, NULL, P("shape", "(2,)"), DEFT_ERROR_VALUE,
                         "required parameter 'value' is missing");
    ck_assert_call_fails("_zeros", 0, NULL, P("shape", "(4294967296,4294967296)"), DEFT_ERROR_VALUE,
                         "has more elements than fit in int64");
    ck_assert_ok(DeftNDArrayFree(s));
}
END_TEST

START_TEST(test_arange_forms) {
    DeftNDArrayHandle a = call1("_arange", 0, NULL, P("start", "5"));
    assert_values(a, 5, VALUES(0, 1, 2, 3, 4), 0);
    DeftNDArrayHandle b = call1("_arange", 0, NULL, P("start", "1", "stop", "2", "step", "0.25"));
    assert_values(b, 4, VALUES(1, 1.25, 1.5, 1.75), 0);
    DeftNDArrayHandle c =
        call1("_arange", 0, NULL,
              P("start", "3", "stop", "0", "step", "-1", "repeat", "2", "dtype", "int64"));
    assert_values(c, 6, VALUES(3, 3, 2, 2, 1, 1), 0);
    DeftNDArrayHandle e = call1("_arange", 0, NULL, P("start", "3", "stop", "1"));
    assert_shape(e, 1, SHAPE(0));
    ck_assert_call_fails("_arange", 0, NULL, P("start", "0", "stop", "1", "step", "0"),
                         DEFT_ERROR_VALUE, "step non-zero");
    free_all(4, (DeftNDArrayHandle[]){a, b, c, e});
}
END_TEST

START_TEST(test_philox_matches_random123_known_answer) {
    deft_philox_block_t b = deft_philox(0, 0);
    ck_assert_uint_eq(b.v[0], 0x6627e8d5u);
    ck_assert_uint_eq(b.v[1], 0xe169c58du);
    ck_assert_uint_eq(b.v[2], 0xbc57ac4cu);
    ck_assert_uint_eq(b.v[3], 0x9b00dbd8u);
}
END_TEST

/* The vectorised generator gives deft_philox's words exactly: across the
 * 2^32 carry of the counter, for pairs of vector groups, a group alone and
 * tails, at every SIMD level this CPU has (AVX-512, AVX2, none). */
START_TEST(test_philox_words_match_the_scalar_generator) {
    const uint64_t seeds[] = {0, 7, 0x123456789abcdefull};
    const uint64_t firsts[] = {0, 5, 0xfffffff9ull};
    const int64_t counts[] = {0, 1, 15, 16, 17, 31, 32, 33, 48, 100};
    uint32_t words[400];
    for (int level = DEFT_SIMD_BASELINE; level <= DEFT_SIMD_AVX512; level++) {
        deft_simd_cap(level);
        for (int s = 0; s < 3; s++)
            for (int f = 0; f < 3; f++)
                for (int c = 0; c < 10; c++) {
                    deft_philox_words(seeds[s], firsts[f], counts[c], words);
                    for (int64_t b = 0; b < counts[c]; b++) {
                        deft_philox_block_t want = deft_philox(seeds[s], firsts[f] + (uint64_t)b);
                        for (int w = 0; w < 4; w++) ck_assert_uint_eq(words[4 * b + w], want.v[w]);
                    }
                }
    }
    deft_simd_cap(DEFT_SIMD_AVX512);
}
END_TEST

/* float32 uniforms are word i % 4 of block i / 4 of the seeded stream, bit
 * for bit (odd sizes: a last partial block; large ones: split across threads). */
START_TEST(test_uniform_float32_is_the_philox_stream) {
    const char *shapes[] = {"(1,)", "(1001,)", "(100003,)"};
    const int64_t sizes[] = {1, 1001, 100003};
    for (int k = 0; k < 3; k++) {
        ck_assert_ok(DeftRandomSeed(11));
        DeftNDArrayHandle h =
            call1("_random_uniform", 0, NULL,
                  P("shape", shapes[k], "dtype", "float32", "low", "-2", "high", "3"));
        int64_t n;
        double *v = read_all(h, &n);
        ck_assert_int_eq(n, sizes[k]);
        for (int64_t i = 0; i < n; i++) {
            uint32_t word = deft_philox(11, (uint64_t)i / 4).v[i % 4];
            float want = deft_random_uniform_f(word, -2.0f, 5.0f);
            if (v[i] != want)
                ck_abort_msg("element %lld: %.9g, expected %.9g", (long long)i, v[i], (double)want);
        }
        free(v);
        ck_assert_ok(DeftNDArrayFree(h));
    }
}
END_TEST

static double *draw(const char *op, const char *dtype, const char *const *extra, int64_t *n) {
    const char *params[12] = {"shape", "(100000,)", "dtype", dtype};
    int k = 4;
    for (int i = 0; extra[i]; i++) params[k++] = extra[i];
    params[k] = NULL;
    DeftNDArrayHandle h = call1(op, 0, NULL, params);
    double *v = read_all(h, n);
    ck_assert_ok(DeftNDArrayFree(h));
    return v;
}

START_TEST(test_random_is_seeded_and_has_the_right_distribution) {
    int64_t n;
    ck_assert_ok(DeftRandomSeed(42));
    double *u1 = draw("_random_uniform", "float32", P("low", "-2", "high", "3"), &n);
    double *g1 = draw("_random_normal", "float64", P("loc", "1", "scale", "2"), &n);
    ck_assert_ok(DeftRandomSeed(42));
    double *u2 = draw("_random_uniform", "float32", P("low", "-2", "high", "3"), &n);
    double *g2 = draw("_random_normal", "float64", P("loc", "1", "scale", "2"), &n);
    ck_assert_ok(DeftRandomSeed(43));
    double *u3 = draw("_random_uniform", "float32", P("low", "-2", "high", "3"), &n);
    double sum = 0, sq = 0, gsum = 0, gsq = 0;
    int differ = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_double_eq(u1[i], u2[i]);
        ck_assert_double_eq(g1[i], g2[i]);
        differ += u1[i] != u3[i];
        ck_assert(u1[i] >= -2 && u1[i] < 3);
        sum += u1[i], sq += u1[i] * u1[i], gsum += g1[i], gsq += g1[i] * g1[i];
    }
    double mean = sum / n, var = sq / n - mean * mean;
    double gmean = gsum / n, gvar = gsq / n - gmean * gmean;
    ck_assert_msg(fabs(mean - 0.5) < 0.03, "uniform mean %g", mean);
    ck_assert_msg(fabs(var - 25.0 / 12) < 0.05, "uniform variance %g", var);
    ck_assert_msg(fabs(gmean - 1) < 0.03, "normal mean %g", gmean);
    ck_assert_msg(fabs(gvar - 4) < 0.1, "normal variance %g", gvar);
    ck_assert_int_gt(differ, 99000);
    free(u1), free(u2), free(u3), free(g1), free(g2);
    ck_assert_call_fails("_random_uniform", 0, NULL, P("low", "2", "high", "1"), DEFT_ERROR_VALUE,
                         "low (2) is greater than high (1)");
    ck_assert_call_fails("_random_normal", 0, NULL, P("dtype", "int32"), DEFT_ERROR_TYPE,
                         "dtype is int32, expected float32 or float64");
}
END_TEST

START_TEST(test_copyto_writes_into_given_array) {
    DeftNDArrayHandle src = make(DEFT_INT8, 1, SHAPE(3), VALUES(-1, 2, -3));
    DeftNDArrayHandle dst = make(DEFT_INT8, 1, SHAPE(3), NULL);
    DeftNDArrayHandle out[1] = {dst};
    int nout = 1;
    ck_assert_ok(call("_copyto", 1, &src, &nout, out, NO_PARAMS));
    assert_values(dst, 3, VALUES(-1, 2, -3), 0);
    DeftNDArrayHandle wrong = make(DEFT_UINT8, 1, SHAPE(3), NULL);
    out[0] = wrong;
    ck_assert_fails(call("_copyto", 1, &src, &nout, out, NO_PARAMS), DEFT_ERROR_VALUE,
                    "output 0 has shape (3,) and dtype uint8, expected (3,) int8");
    free_all(3, (DeftNDArrayHandle[]){src, dst, wrong});
}
END_TEST

START_TEST(test_copy_is_a_new_array_with_the_same_values) {
    DeftNDArrayHandle src = make(DEFT_INT8, 1, SHAPE(3), VALUES(-1, 2, -3));
    DeftNDArrayHandle copy = call1("_copy", 1, &src, NO_PARAMS);
    assert_values(copy, 3, VALUES(-1, 2, -3), 0);
    ck_assert_ok(DeftNDArrayCopyFromHost(src, (int8_t[]){7, 7, 7}, 3));
    assert_values(copy, 3, VALUES(-1, 2, -3), 0); /* its own storage */
    free_all(2, (DeftNDArrayHandle[]){src, copy});
}
END_TEST

START_TEST(test_optimizer_updates_match_formulas) {
    const double w[4] = {1, -2, 3, -4}, g[4] = {0.5, -10, 2, 0};
    const double lr = 0.1, wd = 0.01, rescale = 0.5, clip = 1, mom = 0.9;
    double m0[4] = {0.1, 0.2, -0.3, 0}, v0[4] = {0.01, 0.02, 0.03, 0.04};
    for (int d = 0; d < 2; d++) {
        int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
        double tol = d ? 1e-14 : 1e-6;
        DeftNDArrayHandle W = make(dtype, 1, SHAPE(4), w), G = make(dtype, 1, SHAPE(4), g);
        DeftNDArrayHandle M = make(dtype, 1, SHAPE(4), m0), V = make(dtype, 1, SHAPE(4), v0);
        double want_w[4], want_m[4], want_v[4], eff[4];
        for (int i = 0; i < 4; i++) {
            double gi = g[i] * rescale;
            gi = gi > clip ? clip : gi < -clip ? -clip : gi;
            eff[i] = gi + wd * w[i];
            want_w[i] = w[i] - lr * eff[i];
        }
        DeftNDArrayHandle sgd =
            call1("sgd_update", 2, (DeftNDArrayHandle[]){W, G},
                  P("lr", "0.1", "wd", "0.01", "rescale_grad", "0.5", "clip_gradient", "1"));
        assert_values(sgd, 4, want_w, tol);
        for (int i = 0; i < 4; i++) {
            want_m[i] = mom * m0[i] - lr * eff[i];
            want_w[i] = w[i] + want_m[i];
        }
        DeftNDArrayHandle out[1] = {W};
        int nout = 1;
        ck_assert_ok(call("sgd_mom_update", 3, (DeftNDArrayHandle[]){W, G, M}, &nout, out,
                          P("lr", "0.1", "wd", "0.01", "rescale_grad", "0.5", "clip_gradient", "1",
                            "momentum", "0.9")));
        assert_values(W, 4, want_w, tol);
        assert_values(M, 4, want_m, tol);
        set_values(W, 4, w);
        for (int i = 0; i < 4; i++) {
            double gi = g[i] + 0.0 * w[i];
            want_m[i] = 0.9 * m0[i] + 0.1 * gi;
            want_v[i] = 0.999 * v0[i] + 0.001 * gi * gi;
            want_w[i] = w[i] - 0.01 * want_m[i] / (sqrt(want_v[i]) + 1e-8);
        }
        set_values(M, 4, m0);
        DeftNDArrayHandle adam =
            call1("adam_update", 4, (DeftNDArrayHandle[]){W, G, M, V}, P("lr", "0.01"));
        assert_values(adam, 4, want_w, d ? 1e-13 : 1e-5);
        assert_values(M, 4, want_m, tol);
        assert_values(V, 4, want_v, d ? 1e-14 : 1e-6);
        free_all(6, (DeftNDArrayHandle[]){W, G, M, V, sgd, adam});
    }
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(4), NULL),
                      b = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    ck_assert_call_fails("sgd_update", 2, ((DeftNDArrayHandle[]){a, b}), P("lr", "0.1"),
                         DEFT_ERROR_VALUE, "input 1 (grad) has shape (3,), expected (4,)");
    ck_assert_call_fails("sgd_update", 2, ((DeftNDArrayHandle[]){a, a}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "required parameter 'lr' is missing");
    free_all(2, (DeftNDArrayHandle[]){a, b});
}
END_TEST

/* Long arrays (vector loops and an odd tail) at every SIMD level, the
 * weight updated in place or into another array, against the formulas in
 * double: float32 computes in float, within float rounding. */
START_TEST(test_optimizer_vector_loops_match_formulas) {
    enum { N = 1037 };
    static double w[N], g[N], m0[N], v0[N], want_w[N], want_m[N], want_v[N];
    for (int i = 0; i < N; i++) {
        w[i] = sin(i * 0.37), g[i] = 3 * cos(i * 0.11), m0[i] = 0.1 * sin(i * 0.05);
        v0[i] = 0.01 + 0.001 * (i % 17);
    }
    const double lr = 0.05, wd = 0.001, rescale = 0.5, clip = 1.2, mom = 0.9;
    const char *const common[] = {"lr",  "0.05",          "wd", "0.001", "rescale_grad",
                                  "0.5", "clip_gradient", "1.2"};
    for (int level = DEFT_SIMD_BASELINE; level <= DEFT_SIMD_AVX512; level++) {
        deft_simd_cap(level);
        for (int d = 0; d < 2; d++) {
            int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
            double tol = d ? 1e-13 : 1e-5;
            DeftNDArrayHandle W = make(dtype, 1, SHAPE(N), w), G = make(dtype, 1, SHAPE(N), g);
            DeftNDArrayHandle M = make(dtype, 1, SHAPE(N), m0), V = make(dtype, 1, SHAPE(N), v0);
            for (int i = 0; i < N; i++) {
                double gi = g[i] * rescale;
                gi = (gi > clip ? clip : gi < -clip ? -clip : gi) + wd * w[i];
                want_w[i] = w[i] - lr * gi;
            }
            DeftNDArrayHandle sgd = call1("sgd_update", 2, (DeftNDArrayHandle[]){W, G},
                                          P(common[0], common[1], common[2], common[3], common[4],
                                            common[5], common[6], common[7]));
            assert_values(sgd, N, want_w, tol);
            assert_values(W, N, w, d ? 0 : 1e-7); /* into another array: the weight is left alone */
            for (int i = 0; i < N; i++) {
                double gi = g[i] * rescale;
                gi = (gi > clip ? clip : gi < -clip ? -clip : gi) + wd * w[i];
                want_m[i] = mom * m0[i] - lr * gi;
                want_w[i] = w[i] + want_m[i];
            }
            DeftNDArrayHandle out[1] = {W};
            int nout = 1;
            ck_assert_ok(call("sgd_mom_update", 3, (DeftNDArrayHandle[]){W, G, M}, &nout, out,
                              P(common[0], common[1], common[2], common[3], common[4], common[5],
                                common[6], common[7], "momentum", "0.9")));
            assert_values(W, N, want_w, tol);
            assert_values(M, N, want_m, tol);
            set_values(W, N, w);
            set_values(M, N, m0);
            for (int i = 0; i < N; i++) {
                double gi = g[i] * rescale;
                gi = (gi > clip ? clip : gi < -clip ? -clip : gi) + wd * w[i];
                want_m[i] = 0.8 * m0[i] + 0.2 * gi;
                want_v[i] = 0.99 * v0[i] + 0.01 * gi * gi;
                want_w[i] = w[i] - lr * want_m[i] / (sqrt(want_v[i]) + 1e-6);
            }
            ck_assert_ok(
                call("adam_update", 4, (DeftNDArrayHandle[]){W, G, M, V}, &nout, out,
                     P(common[0], common[1], common[2], common[3], common[4], common[5], common[6],
                       common[7], "beta1", "0.8", "beta2", "0.99", "epsilon", "1e-6")));
            assert_values(W, N, want_w, tol);
            assert_values(M, N, want_m, tol);
            assert_values(V, N, want_v, tol);
            free_all(5, (DeftNDArrayHandle[]){W, G, M, V, sgd});
        }
    }
    deft_simd_cap(DEFT_SIMD_AVX512);
}
END_TEST

/* An update big enough to be split across threads, into another array and in place. */
START_TEST(test_large_optimizer_update_split_across_threads) {
    enum { N = 50001 };
    static double w[N], g[N], m0[N], want_w[N], want_m[N];
    for (int i = 0; i < N; i++) w[i] = cos(i * 0.01), g[i] = sin(i * 0.03), m0[i] = 0.01 * (i % 5);
    for (int i = 0; i < N; i++) want_m[i] = 0.5 * m0[i] - 0.1 * g[i], want_w[i] = w[i] + want_m[i];
    DeftNDArrayHandle W = make(DEFT_FLOAT32, 1, SHAPE(N), w),
                      G = make(DEFT_FLOAT32, 1, SHAPE(N), g);
    DeftNDArrayHandle M = make(DEFT_FLOAT32, 1, SHAPE(N), m0);
    DeftNDArrayHandle y = call1("sgd_mom_update", 3, (DeftNDArrayHandle[]){W, G, M},
                                P("lr", "0.1", "momentum", "0.5"));
    assert_values(y, N, want_w, 1e-6);
    assert_values(M, N, want_m, 1e-6);
    DeftNDArrayHandle out[1] = {W};
    int nout = 1;
    ck_assert_ok(call("sgd_update", 2, (DeftNDArrayHandle[]){W, G}, &nout, out, P("lr", "0.1")));
    for (int i = 0; i < N; i++) want_w[i] = w[i] - 0.1 * g[i];
    assert_values(W, N, want_w, 1e-6);
    free_all(4, (DeftNDArrayHandle[]){W, G, M, y});
}
END_TEST

/* A momentum decaying below FLT_MIN is flushed to zero (FTZ/DAZ: see
 * core/base/fpmode.h) rather than kept as a denormal, which would slow every
 * later step tenfold; the caller's own floating-point mode is left as it was. */
START_TEST(test_optimizer_flushes_denormals_and_restores_the_callers_mode) {
    enum { N = 100 };
    double w[N], zero[N], tiny[N];
    for (int i = 0; i < N; i++) w[i] = 1, zero[i] = 0, tiny[i] = 2e-38; /* 0.5 of it: denormal */
    DeftNDArrayHandle W = make(DEFT_FLOAT32, 1, SHAPE(N), w);
    DeftNDArrayHandle G = make(DEFT_FLOAT32, 1, SHAPE(N), zero);
    DeftNDArrayHandle M = make(DEFT_FLOAT32, 1, SHAPE(N), tiny);
    DeftNDArrayHandle out[1] = {W};
    int nout = 1;
    ck_assert_ok(call("sgd_mom_update", 3, (DeftNDArrayHandle[]){W, G, M}, &nout, out,
                      P("lr", "0.1", "momentum", "0.5")));
    assert_values(M, N, zero, 0);
    volatile float small = 2e-38f, half = 0.5f;
    ck_assert_msg(small * half > 0, "the caller's thread now flushes denormals");
    free_all(3, (DeftNDArrayHandle[]){W, G, M});
}
END_TEST

static Suite *init_suite(void) {
    Suite *suite = suite_create("creation, random, copy, optimizers");
    TCase *tc = tcase_create("init");
    tcase_add_test(tc, test_zeros_ones_full_in_every_dtype);
    tcase_add_test(tc, test_arange_forms);
    tcase_add_test(tc, test_philox_matches_random123_known_answer);
    tcase_add_test(tc, test_philox_words_match_the_scalar_generator);
    tcase_add_test(tc, test_uniform_float32_is_the_philox_stream);
    tcase_add_test(tc, test_random_is_seeded_and_has_the_right_distribution);
    tcase_add_test(tc, test_copyto_writes_into_given_array);
    tcase_add_test(tc, test_copy_is_a_new_array_with_the_same_values);
    tcase_add_test(tc, test_optimizer_updates_match_formulas);
    tcase_add_test(tc, test_optimizer_vector_loops_match_formulas);
    tcase_add_test(tc, test_large_optimizer_update_split_across_threads);
    tcase_add_test(tc, test_optimizer_flushes_denormals_and_restores_the_callers_mode);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(init_suite());
}
