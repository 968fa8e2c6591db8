/*
 * Convolution benchmark (`bench_conv lenet`: the few-channel layers, below).
 * By default a ResNet layer, 3x3 with padding 1, 64 -> 64
 * channels on 56x56, batch 32, float32, through the C API (imperative
 * invoke): the forward, and the forward plus _backward_Convolution (data,
 * weight and bias gradients). The reference, timed in the same rounds, is
 * OpenBLAS's sgemm of the im2col GEMM that the forward amounts to
 * (64 x 576 times 576 x 3136, once per image), at the same thread count:
 * a ratio above 1 is faster than that GEMM alone.
 *
 * The peers' figures (MXNet 1.9.1 with oneDNN, PyTorch) are quoted from
 * issue 25, not measured here. They were measured on another machine,
 * where sgemm ran at the issue's figure; besides the plain ratio, each is
 * compared "normalised": deft's rate over this run's sgemm against the
 * peer's over the issue's sgemm. The FMA peak of one core (a register-only
 * AVX-512 loop) shows how close to the machine's limit the figures are.
 *
 * Threads: DEFT_NUM_THREADS (deft) and OPENBLAS_NUM_THREADS (the reference),
 * e.g. both 1, then both 2. Prints min and median over alternating rounds
 * (DEFT_BENCH_ROUNDS, 7 by default), and the load average, since a shared
 * machine's figures need it.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deft/c_api.h>

#include "bench_util.h"

enum { BATCH = 32, CHANNELS = 64, FILTERS = 64, SIZE = 56, K = 3, MAX_ROUNDS = 64 };
enum { LENET_MAX_ROUNDS = 2000 };

/* Issue 25's figures at 1 and 2 threads (GFLOP/s): the best peer (MXNet,
 * oneDNN) forward and forward+backward, and OpenBLAS's im2col GEMM on the
 * machine they were measured on. fwd+bwd: 176 and 97.7 ms for 3 x 7.40 GFLOP. */
static const double peer_fwd[2] = {145, 271},
                    peer_both[2] = {3 * 7.398 / 0.176, 3 * 7.398 / 0.0977};
static const double issue_sgemm[2] = {129, 223};

static int rounds = 7;

typedef struct conv_bench {
    DeftNDArrayHandle x, w, b, y, dx, dw, db;
    float *a, *cols, *c; /* the reference GEMM's operands */
} conv_bench_t;

static const char *const keys[] = {"kernel", "pad", "num_filter"};
static const char *const vals[] = {"(3,3)", "(1,1)", "64"};

static DeftNDArrayHandle filled(int ndim, const int64_t *shape, float scale) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = scale * (float)((i * 7919) % 17 - 8);
    DeftNDArrayHandle h;
    CHECK(DeftNDArrayCreateFromData(shape, ndim, DEFT_FLOAT32, DEFT_CPU, 0, v,
                                    (size_t)n * sizeof(float), &h));
    free(v);
    return h;
}

static void forward(conv_bench_t *c) {
    DeftNDArrayHandle in[3] = {c->x, c->w, c->b}, out[1] = {c->y};
    int nout = 1;
    CHECK(DeftImperativeInvoke(op("Convolution"), 3, in, &nout, out, 3, keys, vals));
    CHECK(DeftNDArrayWaitToRead(c->y));
}

/* The forward, then every gradient from y as the head gradient. */
static void forward_backward(conv_bench_t *c) {
    forward(c);
    DeftNDArrayHandle in[4] = {c->y, c->x, c->w, c->b}, out[3] = {c->dx, c->dw, c->db};
    int nout = 3;
    CHECK(DeftImperativeInvoke(op("_backward_Convolution"), 4, in, &nout, out, 3, keys, vals));
    CHECK(DeftWaitAll());
}

/* The im2col GEMM of every image: (64 x 576) (576 x 3136). */
static void reference(conv_bench_t *c) {
    const int m = FILTERS, n = SIZE * SIZE, k = CHANNELS * K * K;
    for (int i = 0; i < BATCH; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, c->a, k, c->cols, n,
                    0.0f, c->c, n);
}

static double timed(void (*fn)(conv_bench_t *), conv_bench_t *c) {
    double t0 = now();
    fn(c);
    return now() - t0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times t of `what` (sorted here), the reference's seconds per flop (sorted),
 * and the issue's peer rate at this thread count (0: none quoted). */
static void report(const char *what, double *t, double flops, const double *ref, int slot,
                   const double *peer) {
    qsort(t, (size_t)rounds, sizeof *t, by_value);
    double rate = flops / t[0] * 1e-9, vs_sgemm = ref[0] / t[0] * flops;
    printf("%-18s min %8.2f ms  median %8.2f ms  %6.1f GFLOP/s (min, median %.1f)  "
           "vs sgemm: %.3f (min) %.3f (median)\n",
           what, t[0] * 1e3, t[rounds / 2] * 1e3, rate, flops / t[rounds / 2] * 1e-9, vs_sgemm,
           ref[rounds / 2] / t[rounds / 2] * flops);
    if (slot < 0) return;
    printf("%-18s   vs MXNet/oneDNN (issue 25's figure, %.0f GFLOP/s, not measured here): %.3f; "
           "normalised by sgemm (%.3f / %.3f): %.3f\n",
           "", peer[slot], rate / peer[slot], vs_sgemm, peer[slot] / issue_sgemm[slot],
           vs_sgemm / (peer[slot] / issue_sgemm[slot]));
}

/* One core's float32 FMA rate (GFLOP/s): 24 independent zmm accumulators
 * (in assembly, so no compiler keeps them in memory), best of many short
 * runs (~30 ms in all); 0 without AVX-512. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f"))) static double fma_peak_avx512(void) {
    const long iters = 20000;
    double best = 1e9;
    for (int r = 0; r < 200; r++) {
        long n = iters;
        double t0 = now();
        __asm__ volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
                         "vpxord %%zmm1, %%zmm1, %%zmm1\n\t"
                         "vpxord %%zmm2, %%zmm2, %%zmm2\n\t"
                         "vpxord %%zmm3, %%zmm3, %%zmm3\n\t"
                         "vpxord %%zmm4, %%zmm4, %%zmm4\n\t"
                         "vpxord %%zmm5, %%zmm5, %%zmm5\n\t"
                         "vpxord %%zmm6, %%zmm6, %%zmm6\n\t"
                         "vpxord %%zmm7, %%zmm7, %%zmm7\n\t"
                         "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"
                         "vpxord %%zmm9, %%zmm9, %%zmm9\n\t"
                         "vpxord %%zmm10, %%zmm10, %%zmm10\n\t"
                         "vpxord %%zmm11, %%zmm11, %%zmm11\n\t"
                         "vpxord %%zmm12, %%zmm12, %%zmm12\n\t"
                         "vpxord %%zmm13, %%zmm13, %%zmm13\n\t"
                         "vpxord %%zmm14, %%zmm14, %%zmm14\n\t"
                         "vpxord %%zmm15, %%zmm15, %%zmm15\n\t"
                         "vpxord %%zmm16, %%zmm16, %%zmm16\n\t"
                         "vpxord %%zmm17, %%zmm17, %%zmm17\n\t"
                         "vpxord %%zmm18, %%zmm18, %%zmm18\n\t"
                         "vpxord %%zmm19, %%zmm19, %%zmm19\n\t"
                         "vpxord %%zmm20, %%zmm20, %%zmm20\n\t"
                         "vpxord %%zmm21, %%zmm21, %%zmm21\n\t"
                         "vpxord %%zmm22, %%zmm22, %%zmm22\n\t"
                         "vpxord %%zmm23, %%zmm23, %%zmm23\n\t"
                         "vpxord %%zmm24, %%zmm24, %%zmm24\n\t"
                         "vpxord %%zmm25, %%zmm25, %%zmm25\n\t"
                         "1:\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm0\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm1\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm2\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm3\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm4\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm5\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm6\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm7\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm8\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm9\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm10\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm11\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm12\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm13\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm14\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm15\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm16\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm17\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm18\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm19\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm20\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm21\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm22\n\t"
                         "vfmadd231ps %%zmm24, %%zmm25, %%zmm23\n\t"
                         "dec %0\n\t"
                         "jnz 1b"
                         : "+r"(n)
                         :
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",
                           "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",
                           "xmm25", "cc");
        double t = now() - t0;
        if (t < best) best = t;
    }
    return 24.0 * 32 * (double)iters / best * 1e-9;
}
static double fma_peak(void) {
    return __builtin_cpu_supports("avx512f") ? fma_peak_avx512() : 0;
}
#else
static double fma_peak(void) {
    return 0;
}
#endif

static int env_threads(const char *name) {
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : 0;
}

/* ---- `bench_conv lenet`: the few-channel layers, pass by pass ----
 *
 * LeNet's two convolutions (batch 32, 5x5, no padding) and the CNN demo's
 * first (examples/python/cnn_digits.py: 8x8 images, 1 -> 32 at 3x3, pad 1,
 * no bias), each pass on its own: the forward, the data gradient, and the
 * weight and bias gradients without the data gradient (as in a training
 * step's first layer). The gradients are executors of _backward_Convolution
 * whose graph returns only the outputs timed, so the kernel skips the
 * others (deft_op_output_wanted), as a compiled step's does. Every case is
 * timed once per round, rounds alternating, and min and median printed in
 * microseconds per call (the call's dispatch included). */

typedef struct lenet_case {
    const char *name, *kernel, *pad, *filters;
    int64_t xs[4], ws[4];
    bool bias;
} lenet_case_t;

static const lenet_case_t lenet_cases[] = {
    {"conv1", "(5,5)", "(0,0)", "6", {32, 1, 28, 28}, {6, 1, 5, 5}, true},
    {"conv2", "(5,5)", "(0,0)", "16", {32, 6, 12, 12}, {16, 6, 5, 5}, true},
    {"demo1", "(3,3)", "(1,1)", "32", {32, 1, 8, 8}, {32, 1, 3, 3}, false},
};
enum { LENET_CASES = 3, LENET_PASSES = 4 };
static const char *const pass_names[LENET_PASSES] = {"forward", "data grad", "weight+bias grad",
                                                     "all grads"};

typedef struct lenet_run {
    DeftCachedOpHandle exec[LENET_PASSES];
    DeftNDArrayHandle in[4]; /* dy, x, w, b */
    DeftNDArrayHandle out[LENET_PASSES][3];
    int nin;
    double flops[LENET_PASSES];
} lenet_run_t;

/* An executor of op(inputs) returning outputs `which` (a bit per output). */
static DeftCachedOpHandle lenet_exec(const lenet_case_t *lc, const char *name, int nin,
                                     unsigned which) {
    const char *k[4] = {"kernel", "pad", "num_filter", "no_bias"};
    const char *v[4] = {lc->kernel, lc->pad, lc->filters, lc->bias ? "False" : "True"};
    DeftSymbolHandle vars[4], atom, outs[3], group;
    static const char *const var_names[4] = {"dy", "x", "w", "b"};
    const bool fwd = strcmp(name, "Convolution") == 0;
    for (int i = 0; i < nin; i++) CHECK(DeftSymbolCreateVariable(var_names[i + fwd], &vars[i]));
    CHECK(DeftSymbolCreateAtomic(op(name), 4, k, v, &atom));
    CHECK(DeftSymbolCompose(atom, "conv", nin, NULL, vars));
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (which >> i & 1u) CHECK(DeftSymbolGetOutput(atom, i, &outs[n++]));
    CHECK(DeftSymbolCreateGroup(n, outs, &group));
    DeftCachedOpHandle exec;
    CHECK(DeftCachedOpCreate(group, 0, &exec));
    for (int i = 0; i < n; i++) CHECK(DeftSymbolFree(outs[i]));
    for (int i = 0; i < nin; i++) CHECK(DeftSymbolFree(vars[i]));
    CHECK(DeftSymbolFree(atom));
    CHECK(DeftSymbolFree(group));
    return exec;
}

static void lenet_setup(const lenet_case_t *lc, lenet_run_t *r) {
    memset(r, 0, sizeof *r);
    const int64_t oh = lc->xs[2] - lc->ws[2] + 1 + 2 * (lc->pad[1] - '0');
    const int64_t ys[4] = {lc->xs[0], lc->ws[0], oh, oh}, bs[1] = {lc->ws[0]};
    r->in[0] = filled(4, ys, 0.01f);
    r->in[1] = filled(4, lc->xs, 0.01f);
    r->in[2] = filled(4, lc->ws, 0.02f);
    r->nin = lc->bias ? 4 : 3;
    if (lc->bias) r->in[3] = filled(1, bs, 0.1f);
    r->exec[0] = lenet_exec(lc, "Convolution", r->nin - 1, 1u);
    r->exec[1] = lenet_exec(lc, "_backward_Convolution", r->nin, 1u);
    r->exec[2] = lenet_exec(lc, "_backward_Convolution", r->nin, lc->bias ? 6u : 2u);
    r->exec[3] = lenet_exec(lc, "_backward_Convolution", r->nin, lc->bias ? 7u : 3u);
    const double macs =
        (double)(ys[0] * ys[1] * oh * oh) * (double)(lc->ws[1] * lc->ws[2] * lc->ws[3]);
    r->flops[0] = r->flops[1] = r->flops[2] = 2 * macs;
    r->flops[3] = 4 * macs;
}

static double lenet_time(lenet_run_t *r, int pass) {
    int nout = 3;
    const bool fwd = pass == 0;
    double t0 = now();
    CHECK(DeftCachedOpInvoke(r->exec[pass], r->nin - fwd, r->in + fwd, &nout, r->out[pass]));
    CHECK(DeftWaitAll());
    return now() - t0;
}

static int lenet_main(void) {
    if (!env_threads("DEFT_BENCH_ROUNDS")) rounds = 200;
    static lenet_run_t runs[LENET_CASES];
    static double t[LENET_CASES][LENET_PASSES][LENET_MAX_ROUNDS];
    if (rounds > LENET_MAX_ROUNDS) rounds = LENET_MAX_ROUNDS;
    for (int c = 0; c < LENET_CASES; c++) {
        lenet_setup(&lenet_cases[c], &runs[c]);
        for (int p = 0; p < LENET_PASSES; p++) lenet_time(&runs[c], p); /* warm */
    }
    for (int i = 0; i < rounds; i++)
        for (int c = 0; c < LENET_CASES; c++)
            for (int p = 0; p < LENET_PASSES; p++) t[c][p][i] = lenet_time(&runs[c], p);
    printf("LeNet-shape convolutions, float32; DEFT_NUM_THREADS=%d; %d rounds; load average "
           "%.2f\n",
           env_threads("DEFT_NUM_THREADS"), rounds, load_average());
    for (int c = 0; c < LENET_CASES; c++)
        for (int p = 0; p < LENET_PASSES; p++) {
            qsort(t[c][p], (size_t)rounds, sizeof(double), by_value);
            printf("%-6s %-17s min %8.1f us  median %8.1f us  %6.1f GFLOP/s (min)\n",
                   lenet_cases[c].name, pass_names[p], t[c][p][0] * 1e6, t[c][p][rounds / 2] * 1e6,
                   runs[c].flops[p] / t[c][p][0] * 1e-9);
        }
    for (int c = 0; c < LENET_CASES; c++)
        for (int p = 0; p < LENET_PASSES; p++) {
            CHECK(DeftCachedOpFree(runs[c].exec[p]));
            for (int o = 0; o < 3; o++) CHECK(DeftNDArrayFree(runs[c].out[p][o]));
        }
    for (int c = 0; c < LENET_CASES; c++)
        for (int i = 0; i < runs[c].nin; i++) CHECK(DeftNDArrayFree(runs[c].in[i]));
    return 0;
}

int main(int argc, char **argv) {
    if (env_threads("DEFT_BENCH_ROUNDS")) rounds = env_threads("DEFT_BENCH_ROUNDS");
    if (argc > 1 && strcmp(argv[1], "lenet") == 0) return lenet_main();
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    conv_bench_t c;
    const int64_t xs[4] = {BATCH, CHANNELS, SIZE, SIZE}, ws[4] = {FILTERS, CHANNELS, K, K};
    const int64_t bs[1] = {FILTERS}, ys[4] = {BATCH, FILTERS, SIZE, SIZE};
    c.x = filled(4, xs, 0.01f);
    c.w = filled(4, ws, 0.02f);
    c.b = filled(1, bs, 0.1f);
    CHECK(DeftNDArrayCreate(ys, 4, DEFT_FLOAT32, DEFT_CPU, 0, &c.y));
    CHECK(DeftNDArrayCreate(xs, 4, DEFT_FLOAT32, DEFT_CPU, 0, &c.dx));
    CHECK(DeftNDArrayCreate(ws, 4, DEFT_FLOAT32, DEFT_CPU, 0, &c.dw));
    CHECK(DeftNDArrayCreate(bs, 1, DEFT_FLOAT32, DEFT_CPU, 0, &c.db));
    const size_t an = FILTERS * CHANNELS * K * K, bn = (size_t)CHANNELS * K * K * SIZE * SIZE;
    c.a = calloc(an, sizeof(float));
    c.cols = calloc(bn, sizeof(float));
    c.c = calloc((size_t)FILTERS * SIZE * SIZE, sizeof(float));
    int ref_threads = env_threads("OPENBLAS_NUM_THREADS");
    int threads = env_threads("DEFT_NUM_THREADS");
    if (threads == 0) threads = ref_threads ? ref_threads : 1;
    /* a ratio is a ratio of rates: the reference's time per flop of the forward */
    const double fwd_flops = 2.0 * BATCH * FILTERS * SIZE * SIZE * (double)(CHANNELS * K * K);
    double t_ref[MAX_ROUNDS], t_fwd[MAX_ROUNDS], t_both[MAX_ROUNDS];
    forward_backward(&c); /* warm: buffers allocated, pages touched */
    double peak = 0;
    for (int r = 0; r < rounds; r++) {
        double p = fma_peak(); /* in every round: the best of them is the least disturbed */
        if (p > peak) peak = p;
        openblas_set_num_threads(ref_threads ? ref_threads : 1);
        t_ref[r] = timed(reference, &c);
        t_fwd[r] = timed(forward, &c);
        t_both[r] = timed(forward_backward, &c);
    }
    double per_flop[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) per_flop[r] = t_ref[r] / fwd_flops;
    qsort(per_flop, (size_t)rounds, sizeof *per_flop, by_value);
    printf("Conv2D 3x3 pad 1, %dx%d, %d -> %d channels, batch %d, float32; DEFT_NUM_THREADS=%d "
           "OPENBLAS_NUM_THREADS=%d; %d rounds; load average %.2f\n",
           SIZE, SIZE, CHANNELS, FILTERS, BATCH, env_threads("DEFT_NUM_THREADS"), ref_threads,
           rounds, load_average());
    qsort(t_ref, (size_t)rounds, sizeof *t_ref, by_value);
    printf("FMA peak of one core (AVX-512, measured): %.1f GFLOP/s; x %d threads: %.1f\n", peak,
           threads, peak * threads);
    printf("%-18s min %8.2f ms  median %8.2f ms  %6.1f GFLOP/s (min, median %.1f)\n",
           "sgemm (im2col GEMM)", t_ref[0] * 1e3, t_ref[rounds / 2] * 1e3,
           fwd_flops / t_ref[0] * 1e-9, fwd_flops / t_ref[rounds / 2] * 1e-9);
    int slot = threads == 1 || threads == 2 ? threads - 1 : -1;
    report("forward", t_fwd, fwd_flops, per_flop, slot, peer_fwd);
    report("forward+backward", t_both, 3 * fwd_flops, per_flop, slot, peer_both);
    free(c.a), free(c.cols), free(c.c);
    DeftNDArrayHandle all[7] = {c.x, c.w, c.b, c.y, c.dx, c.dw, c.db};
    for (int i = 0; i < 7; i++) CHECK(DeftNDArrayFree(all[i]));
    return 0;
}
