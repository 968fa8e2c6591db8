/*
 * Convolution benchmark: a ResNet layer, 3x3 with padding 1, 64 -> 64
 * channels on 56x56, batch 32, float32, through the C API (imperative
 * invoke): the forward, and the forward plus _backward_Convolution (data,
 * weight and bias gradients). The reference, timed in the same rounds, is
 * OpenBLAS's sgemm of the im2col GEMM that the forward amounts to
 * (64 x 576 times 576 x 3136, once per image), at the same thread count:
 * a ratio above 1 is faster than that GEMM alone.
 *
 * Threads: DEFT_NUM_THREADS (deft) and OPENBLAS_NUM_THREADS (the reference),
 * e.g. both 1, then both 2. Prints min and median over alternating rounds,
 * and the load average, since a shared machine's figures need it.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deft/c_api.h>

#include "bench_util.h"

enum { BATCH = 32, CHANNELS = 64, FILTERS = 64, SIZE = 56, K = 3, ROUNDS = 7 };

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

static void report(const char *what, double *t, double flops, const double *ref) {
    qsort(t, ROUNDS, sizeof *t, by_value);
    printf("%-18s min %8.2f ms  median %8.2f ms  %6.1f GFLOP/s (min)  vs sgemm: %.3f (min) "
           "%.3f (median)\n",
           what, t[0] * 1e3, t[ROUNDS / 2] * 1e3, flops / t[0] * 1e-9, ref[0] / t[0] * flops,
           ref[ROUNDS / 2] / t[ROUNDS / 2] * flops);
}

static int env_threads(const char *name) {
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : 0;
}

int main(void) {
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
    /* a ratio is a ratio of rates: the reference's time per flop of the forward */
    const double fwd_flops = 2.0 * BATCH * FILTERS * SIZE * SIZE * (double)(CHANNELS * K * K);
    double t_ref[ROUNDS], t_fwd[ROUNDS], t_both[ROUNDS];
    forward_backward(&c); /* warm: buffers allocated, pages touched */
    for (int r = 0; r < ROUNDS; r++) {
        openblas_set_num_threads(ref_threads ? ref_threads : 1);
        t_ref[r] = timed(reference, &c);
        t_fwd[r] = timed(forward, &c);
        t_both[r] = timed(forward_backward, &c);
    }
    double per_flop[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) per_flop[r] = t_ref[r] / fwd_flops;
    qsort(per_flop, ROUNDS, sizeof *per_flop, by_value);
    char load[64] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(load, sizeof load, f)) strcpy(load, "?");
        load[strcspn(load, "\n")] = 0;
        fclose(f);
    }
    printf("Conv2D 3x3 pad 1, %dx%d, %d -> %d channels, batch %d, float32; DEFT_NUM_THREADS=%d "
           "OPENBLAS_NUM_THREADS=%d; load average %s\n",
           SIZE, SIZE, CHANNELS, FILTERS, BATCH, env_threads("DEFT_NUM_THREADS"), ref_threads,
           load);
    double ref_copy[ROUNDS];
    memcpy(ref_copy, t_ref, sizeof ref_copy);
    qsort(ref_copy, ROUNDS, sizeof *ref_copy, by_value);
    printf("%-18s min %8.2f ms  median %8.2f ms  %6.1f GFLOP/s (min)\n", "sgemm (im2col GEMM)",
           ref_copy[0] * 1e3, ref_copy[ROUNDS / 2] * 1e3, fwd_flops / ref_copy[0] * 1e-9);
    report("forward", t_fwd, fwd_flops, per_flop);
    report("forward+backward", t_both, 3 * fwd_flops, per_flop);
    free(c.a), free(c.cols), free(c.c);
    DeftNDArrayHandle all[7] = {c.x, c.w, c.b, c.y, c.dx, c.dw, c.db};
    for (int i = 0; i < 7; i++) CHECK(DeftNDArrayFree(all[i]));
    return 0;
}
