/*
 * Operator benchmarks. Every figure is a ratio against a reference measured
 * in the same run on the same buffers, because absolute times on shared
 * machines are noise:
 *   - dot vs cblas_sgemm called directly (same thread count),
 *   - broadcast_add on 16M floats vs a plain STREAM-add loop (1 and 2 threads),
 *   - imperative dispatch of _plus_scalar on 1 element vs calling the kernel loop,
 *   - exp and tanh on float32 vs a loop calling libm's expf and tanhf,
 *   - the small kernels of an MLP training step (batch 32: optimizer update,
 *     bias-gradient sums, Dropout, softmax cross-entropy, FullyConnected) vs
 *     plain C loops (or cblas_sgemm) doing the same math on the same buffers.
 *     `bench_ops small` runs only these, `bench_ops dispatch` only the dispatch figures.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <deft/autograd.h>
#include <deft/c_api.h>

#include "bench_util.h"

/* Best of `reps` timings of fn(arg): the least disturbed run. */
static double best_time(int reps, void (*fn)(void *), void *arg) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        fn(arg);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* ---- GEMM ---- */

typedef struct gemm_case {
    int n;
    float *a, *b, *c;
    DeftNDArrayHandle A, B, C;
} gemm_case_t;

static void run_sgemm(void *arg) {
    gemm_case_t *g = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b,
                g->n, 0.0f, g->c, g->n);
}

static void run_dot(void *arg) {
    gemm_case_t *g = arg;
    DeftNDArrayHandle in[2] = {g->A, g->B}, out[1] = {g->C};
    int nout = 1;
    CHECK(DeftImperativeInvoke(op("dot"), 2, in, &nout, out, 0, NULL, NULL));
    CHECK(DeftNDArrayWaitToRead(g->C));
}

static void bench_gemm(int n, int threads) {
    gemm_case_t g = {.n = n};
    size_t count = (size_t)n * n;
    g.a = malloc(count * sizeof(float));
    g.b = malloc(count * sizeof(float));
    g.c = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) g.a[i] = (float)(i % 7) * 0.1f, g.b[i] = (float)(i % 5);
    const int64_t shape[2] = {n, n};
    CHECK(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, g.a, count * 4, &g.A));
    CHECK(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, g.b, count * 4, &g.B));
    CHECK(DeftNDArrayCreate(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &g.C));
    int reps = n <= 256 ? 200 : n <= 1024 ? 10 : 4;
    /* Alternate the two so drifts in machine load affect both alike. OpenBLAS's
     * own helper threads spin for about 0.1 s after a call: pause before
     * measuring deft, which keeps OpenBLAS single-threaded and uses its own. */
    double t_ref = 1e30, t_deft = 1e30;
    for (int round = 0; round < 3; round++) {
        nanosleep(&(struct timespec){0, 200000000}, NULL);
        double d = best_time(reps, run_dot, &g);
        openblas_set_num_threads(threads);
        double r = best_time(reps, run_sgemm, &g);
        t_ref = r < t_ref ? r : t_ref;
        t_deft = d < t_deft ? d : t_deft;
    }
    double flops = 2.0 * n * n * (double)n;
    printf("dot %4dx%-4d  %d thread%s  deft %7.1f GFLOP/s  OpenBLAS %7.1f GFLOP/s  ratio %.3f\n", n,
           n, threads, threads > 1 ? "s" : " ", flops / t_deft * 1e-9, flops / t_ref * 1e-9,
           t_ref / t_deft);
    free(g.a), free(g.b), free(g.c);
    CHECK(DeftNDArrayFree(g.A));
    CHECK(DeftNDArrayFree(g.B));
    CHECK(DeftNDArrayFree(g.C));
}

/* ---- elementwise add ---- */

typedef struct add_case {
    int64_t n;
    float *a, *b, *c;
    DeftNDArrayHandle A, B, C;
} add_case_t;

typedef struct add_span {
    const float *a, *b;
    float *c;
    int64_t begin, end;
} add_span_t;

static void *stream_add_span(void *arg) {
    add_span_t *s = arg;
    const float *restrict a = s->a, *restrict b = s->b;
    float *restrict c = s->c;
    for (int64_t i = s->begin; i < s->end; i++) c[i] = a[i] + b[i];
    return NULL;
}

static void stream_add_1(void *arg) {
    add_case_t *x = arg;
    add_span_t s = {x->a, x->b, x->c, 0, x->n};
    stream_add_span(&s);
}

static void stream_add_2(void *arg) {
    add_case_t *x = arg;
    add_span_t s[2] = {{x->a, x->b, x->c, 0, x->n / 2}, {x->a, x->b, x->c, x->n / 2, x->n}};
    pthread_t t;
    pthread_create(&t, NULL, stream_add_span, &s[1]);
    stream_add_span(&s[0]);
    pthread_join(t, NULL);
}

static void deft_add(void *arg) {
    add_case_t *x = arg;
    DeftNDArrayHandle in[2] = {x->A, x->B}, out[1] = {x->C};
    int nout = 1;
    CHECK(DeftImperativeInvoke(op("broadcast_add"), 2, in, &nout, out, 0, NULL, NULL));
    CHECK(DeftNDArrayWaitToRead(x->C));
}

static void bench_add(void) {
    add_case_t x = {.n = 16 << 20};
    size_t bytes = (size_t)x.n * sizeof(float);
    x.a = aligned_alloc(64, bytes), x.b = aligned_alloc(64, bytes), x.c = aligned_alloc(64, bytes);
    for (int64_t i = 0; i < x.n; i++) x.a[i] = (float)i, x.b[i] = 1.0f, x.c[i] = 0.0f;
    const int64_t shape[1] = {x.n};
    CHECK(DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, x.a, bytes, &x.A));
    CHECK(DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, x.b, bytes, &x.B));
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x.C));
    double t1 = 1e30, t2 = 1e30, td = 1e30;
    for (int round = 0; round < 3; round++) {
        double a = best_time(5, stream_add_1, &x), b = best_time(5, stream_add_2, &x),
               d = best_time(5, deft_add, &x);
        t1 = a < t1 ? a : t1, t2 = b < t2 ? b : t2, td = d < td ? d : td;
    }
    double gb = 3.0 * (double)bytes * 1e-9;
    printf("add 16M float32  deft %5.1f GB/s  STREAM loop 1 thread %5.1f GB/s (ratio %.3f)  "
           "2 threads %5.1f GB/s (ratio %.3f)\n",
           gb / td, gb / t1, t1 / td, gb / t2, t2 / td);
    free(x.a), free(x.b), free(x.c);
    CHECK(DeftNDArrayFree(x.A));
    CHECK(DeftNDArrayFree(x.B));
    CHECK(DeftNDArrayFree(x.C));
}

/* ---- transcendental functions ---- */

#define MATH_N 16384 /* in cache, and below the size deft splits across threads */

typedef struct math_case {
    const char *op;
    float (*libm)(float);
    float *x, *y;
    DeftNDArrayHandle X, Y;
} math_case_t;

static void libm_loop(void *arg) {
    math_case_t *m = arg;
    for (int i = 0; i < MATH_N; i++) m->y[i] = m->libm(m->x[i]);
}

static void deft_math(void *arg) {
    math_case_t *m = arg;
    DeftNDArrayHandle out[1] = {m->Y};
    int nout = 1;
    CHECK(DeftImperativeInvoke(op(m->op), 1, &m->X, &nout, out, 0, NULL, NULL));
    CHECK(DeftNDArrayWaitToRead(m->Y));
}

static void bench_math(void) {
    static float x[MATH_N], y[MATH_N];
    for (int i = 0; i < MATH_N; i++) x[i] = -5.0f + 10.0f * (float)i / MATH_N;
    const int64_t shape[1] = {MATH_N};
    math_case_t cases[2] = {{"exp", expf, x, y, NULL, NULL}, {"tanh", tanhf, x, y, NULL, NULL}};
    for (int c = 0; c < 2; c++) {
        math_case_t *m = &cases[c];
        CHECK(DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, x, sizeof x, &m->X));
        CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &m->Y));
        double tl = best_time(300, libm_loop, m), td = best_time(300, deft_math, m);
        printf("%-4s 16K float32, 1 thread  deft %5.2f ns/element  libm loop %5.2f ns/element "
               "(ratio %.1f)\n",
               m->op, td / MATH_N * 1e9, tl / MATH_N * 1e9, tl / td);
        CHECK(DeftNDArrayFree(m->X));
        CHECK(DeftNDArrayFree(m->Y));
    }
}

/* ---- dispatch ---- */

#define CHAIN 100000

static volatile float sink;

static void bare_kernel_chain(void *arg) {
    (void)arg;
    float x = 0;
    for (int i = 0; i < CHAIN; i++) {
        float y;
        add_span_t s = {&x, &(float){1.0f}, &y, 0, 1};
        stream_add_span(&s);
        x = y;
    }
    sink = x;
}

static void dispatch_chain_new_arrays(void *arg) {
    plus_scalar_chain(*(DeftNDArrayHandle *)arg, CHAIN);
}

static void dispatch_chain_in_place(void *arg) {
    DeftNDArrayHandle x = *(DeftNDArrayHandle *)arg;
    DeftOpHandle plus = op("_plus_scalar");
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    for (int i = 0; i < CHAIN; i++) {
        DeftNDArrayHandle out[1] = {x};
        int nout = 1;
        CHECK(DeftImperativeInvoke(plus, 1, &x, &nout, out, 1, keys, vals));
    }
    CHECK(DeftNDArrayWaitToRead(x));
}

static void bench_dispatch(const char *when) {
    const int64_t shape[1] = {1};
    DeftNDArrayHandle x;
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    /* Keep the core busy for a moment first: after a sleep, a core runs slower
     * until its clock ramps up again (seen here as a slower bare loop). */
    for (double t0 = now(); now() - t0 < 0.3;) dispatch_chain_in_place(&x);
    double bare = best_time(15, bare_kernel_chain, NULL);
    double fresh = best_time(15, dispatch_chain_new_arrays, &x);
    double in_place = best_time(15, dispatch_chain_in_place, &x);
    printf("dispatch _plus_scalar, 1 element, chain of %d, %s:\n    new output each call %.0f "
           "ns/call, written in place %.0f ns/call, bare kernel loop %.1f ns/call\n",
           CHAIN, when, fresh / CHAIN * 1e9, in_place / CHAIN * 1e9, bare / CHAIN * 1e9);
    CHECK(DeftNDArrayFree(x));
}

/* ---- small kernels of an MLP step ---- */

typedef struct small_case {
    const char *name;
    const char *op;
    int nin;
    DeftNDArrayHandle in[4], out[2];
    int nout;
    const char *const *keys, *const *vals;
    int nparams;
    void (*ref)(struct small_case *); /* the same math in plain C, or NULL */
    float *buf[4];                    /* the reference's buffers */
    int64_t n, m;                     /* sizes the reference needs */
} small_case_t;

enum { SMALL_CALLS = 200 };

static void small_deft(void *arg) {
    small_case_t *c = arg;
    DeftOpHandle h = op(c->op);
    for (int i = 0; i < SMALL_CALLS; i++) {
        int nout = c->nout;
        DeftNDArrayHandle out[2] = {c->out[0], c->out[1]};
        CHECK(DeftImperativeInvoke(h, c->nin, c->in, &nout, out, c->nparams, c->keys, c->vals));
    }
    CHECK(DeftNDArrayWaitToRead(c->out[0]));
}

static void small_ref(void *arg) {
    small_case_t *c = arg;
    for (int i = 0; i < SMALL_CALLS; i++) c->ref(c);
}

static DeftNDArrayHandle small_array(int ndim, const int64_t *shape, double value) {
    DeftNDArrayHandle h;
    CHECK(DeftNDArrayCreate(shape, ndim, DEFT_FLOAT32, DEFT_CPU, 0, &h));
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(value * (double)(1 + i % 7) / 7.0);
    CHECK(DeftNDArrayCopyFromHost(h, v, (size_t)n * sizeof *v));
    free(v);
    return h;
}

static float *small_buffer(int64_t n, double value) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(value * (double)(1 + i % 7) / 7.0);
    return v;
}

static void ref_sgd_mom(small_case_t *c) { /* w, g, mom; lr 0.01, momentum 0.9 */
    float *w = c->buf[0], *g = c->buf[1], *m = c->buf[2];
    for (int64_t i = 0; i < c->n; i++) {
        m[i] = 0.9f * m[i] - 0.01f * g[i];
        w[i] += m[i];
    }
}

static void ref_copy(small_case_t *c) {
    memcpy(c->buf[1], c->buf[0], (size_t)c->n * sizeof(float));
}

static void ref_sum_rows(small_case_t *c) { /* (m, n) over axis 0 */
    float *x = c->buf[0], *y = c->buf[1];
    memset(y, 0, (size_t)c->n * sizeof *y);
    for (int64_t r = 0; r < c->m; r++)
        for (int64_t k = 0; k < c->n; k++) y[k] += x[r * c->n + k];
}

static void ref_xent(small_case_t *c) { /* (m, n) logits: loss and gradient */
    float *x = c->buf[0], *dx = c->buf[1];
    double loss = 0;
    for (int64_t r = 0; r < c->m; r++) {
        float max = x[r * c->n], sum = 0;
        for (int64_t k = 1; k < c->n; k++) max = x[r * c->n + k] > max ? x[r * c->n + k] : max;
        for (int64_t k = 0; k < c->n; k++) sum += dx[r * c->n + k] = expf(x[r * c->n + k] - max);
        loss += max + logf(sum) - x[r * c->n + r % c->n];
        for (int64_t k = 0; k < c->n; k++) dx[r * c->n + k] /= sum;
        dx[r * c->n + r % c->n] -= 1;
    }
    sink = (float)loss;
}

static void ref_fc(small_case_t *c) { /* (32, m) x (n, m)^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 32, (int)c->n, (int)c->m, 1.0f, c->buf[0],
                (int)c->m, c->buf[1], (int)c->m, 0.0f, c->buf[2], (int)c->n);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report_small(small_case_t *c, double *deft_t, double *ref_t, int rounds) {
    qsort(deft_t, (size_t)rounds, sizeof *deft_t, compare_doubles);
    printf("  %-34s %7.2f us (median %7.2f)", c->name, deft_t[0] * 1e6 / SMALL_CALLS,
           deft_t[rounds / 2] * 1e6 / SMALL_CALLS);
    if (c->ref) {
        qsort(ref_t, (size_t)rounds, sizeof *ref_t, compare_doubles);
        printf("   plain C %6.2f us  ratio %5.2f", ref_t[0] * 1e6 / SMALL_CALLS,
               ref_t[0] / deft_t[0]);
    }
    printf("\n");
}

static void bench_small(void) {
    printf("small kernels of an MLP step, us per call (min of 15 rounds of %d calls, "
           "alternated with the plain C loop), load %.2f:\n",
           SMALL_CALLS, load_average());
    CHECK(DeftAutogradSetIsTraining(1, NULL));
    static const char *lr_keys[] = {"lr", "momentum"}, *lr_vals[] = {"0.01", "0.9"};
    static const char *axis0_keys[] = {"axis"}, *axis0_vals[] = {"0"};
    static const char *bias_keys[] = {"axis"}, *bias_vals[] = {"(0,2,3)"};
    static const char *drop_keys[] = {"p"}, *drop_vals[] = {"0.1"};
    static const char *unif_keys[] = {"shape"}, *unif_vals[] = {"(32,128)"};
    static const char *fc_keys[] = {"num_hidden", "no_bias"};
    static const char *fc_vals[3][2] = {{"128", "true"}, {"64", "true"}, {"10", "true"}};
    small_case_t cases[16];
    int n = 0;
    const int64_t w_shape[2] = {128, 64}, act[2] = {32, 128}, logits[2] = {32, 10};
    const int64_t conv[4] = {32, 16, 8, 8}, labels_shape[1] = {32}, one[1] = {1};
    /* sgd_mom_update on a (128, 64) weight, in place; then with a denormal momentum */
    for (int denormal = 0; denormal < 2; denormal++) {
        small_case_t *c = &cases[n++];
        *c = (small_case_t){.name = denormal ? "sgd_mom_update (128,64) denormal mom"
                                             : "sgd_mom_update (128,64)",
                            .op = "sgd_mom_update",
                            .nin = 3,
                            .nout = 1,
                            .keys = lr_keys,
                            .vals = lr_vals,
                            .nparams = 2,
                            .ref = ref_sgd_mom,
                            .n = 128 * 64};
        c->in[0] = small_array(2, w_shape, 1.0);
        /* a gradient of ~1e-38 keeps the momentum at a steady ~1e-39, a denormal */
        c->in[1] = small_array(2, w_shape, denormal ? 2e-38 : 0.5);
        c->in[2] = small_array(2, w_shape, denormal ? 1e-39 : 0.1);
        c->out[0] = c->in[0];
        c->buf[0] = small_buffer(c->n, 1.0), c->buf[1] = small_buffer(c->n, denormal ? 2e-38 : 0.5);
        c->buf[2] = small_buffer(c->n, denormal ? 1e-39 : 0.1);
    }
    { /* _reduce_to_like of one shape: Dropout's x * mask gradient */
        small_case_t *c = &cases[n++];
        *c = (small_case_t){.name = "_reduce_to_like (32,128) same shape",
                            .op = "_reduce_to_like",
                            .nin = 2,
                            .nout = 1,
                            .ref = ref_copy,
                            .n = 32 * 128};
        c->in[0] = small_array(2, act, 1.0), c->in[1] = small_array(2, act, 0.0);
        c->out[0] = small_array(2, act, 0.0);
        c->buf[0] = small_buffer(c->n, 1.0), c->buf[1] = small_buffer(c->n, 0);
    }
    { /* the bias gradient of a dense layer */
        small_case_t *c = &cases[n++];
        const int64_t bias[1] = {128};
        *c = (small_case_t){.name = "sum axis 0 of (32,128)",
                            .op = "sum",
                            .nin = 1,
                            .nout = 1,
                            .keys = axis0_keys,
                            .vals = axis0_vals,
                            .nparams = 1,
                            .ref = ref_sum_rows,
                            .n = 128,
                            .m = 32};
        c->in[0] = small_array(2, act, 1.0), c->out[0] = small_array(1, bias, 0);
        c->buf[0] = small_buffer(32 * 128, 1.0), c->buf[1] = small_buffer(128, 0);
    }
    { /* the bias gradient of a convolution */
        small_case_t *c = &cases[n++];
        const int64_t bias[1] = {16};
        *c = (small_case_t){.name = "sum axes (0,2,3) of (32,16,8,8)",
                            .op = "sum",
                            .nin = 1,
                            .nout = 1,
                            .keys = bias_keys,
                            .vals = bias_vals,
                            .nparams = 1};
        c->in[0] = small_array(4, conv, 1.0), c->out[0] = small_array(1, bias, 0);
    }
    { /* Dropout's mask and product, training mode */
        small_case_t *c = &cases[n++];
        *c = (small_case_t){.name = "Dropout p=0.1 (32,128)",
                            .op = "Dropout",
                            .nin = 1,
                            .nout = 1,
                            .keys = drop_keys,
                            .vals = drop_vals,
                            .nparams = 1};
        c->in[0] = small_array(2, act, 1.0), c->out[0] = small_array(2, act, 0);
    }
    { /* the eager mask's random numbers */
        small_case_t *c = &cases[n++];
        *c = (small_case_t){.name = "_random_uniform (32,128)",
                            .op = "_random_uniform",
                            .nin = 0,
                            .nout = 1,
                            .keys = unif_keys,
                            .vals = unif_vals,
                            .nparams = 1};
        c->out[0] = small_array(2, act, 0);
    }
    DeftNDArrayHandle logit_arr = small_array(2, logits, 3.0), labels, head;
    CHECK(DeftNDArrayCreate(labels_shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &labels));
    float label_values[32];
    for (int i = 0; i < 32; i++) label_values[i] = (float)(i % 10);
    CHECK(DeftNDArrayCopyFromHost(labels, label_values, sizeof label_values));
    head = small_array(1, one, 7.0);
    { /* the loss, forward */
        small_case_t *c = &cases[n++];
        *c = (small_case_t){.name = "softmax_cross_entropy (32,10)",
                            .op = "softmax_cross_entropy",
                            .nin = 2,
                            .nout = 1,
                            .in = {logit_arr, labels},
                            .ref = ref_xent,
                            .n = 10,
                            .m = 32};
        c->out[0] = small_array(1, one, 0);
        c->buf[0] = small_buffer(320, 3.0), c->buf[1] = small_buffer(320, 0);
    }
    { /* and backward */
        small_case_t *c = &cases[n++];
        *c = (small_case_t){.name = "_backward_softmax_cross_entropy",
                            .op = "_backward_softmax_cross_entropy",
                            .nin = 3,
                            .nout = 1,
                            .in = {head, logit_arr, labels}};
        c->out[0] = small_array(2, logits, 0);
    }
    const int64_t fc_shapes[3][2] = {{64, 128}, {128, 64}, {64, 10}}; /* features, hidden */
    static char fc_names[3][48];
    for (int k = 0; k < 3; k++) { /* FullyConnected forward, no bias: the GEMM */
        small_case_t *c = &cases[n++];
        snprintf(fc_names[k], sizeof fc_names[k], "FullyConnected 32x%lld -> %lld, no bias",
                 (long long)fc_shapes[k][0], (long long)fc_shapes[k][1]);
        *c = (small_case_t){.name = fc_names[k],
                            .op = "FullyConnected",
                            .nin = 2,
                            .nout = 1,
                            .keys = fc_keys,
                            .vals = fc_vals[k],
                            .nparams = 2,
                            .ref = ref_fc,
                            .n = fc_shapes[k][1],
                            .m = fc_shapes[k][0]};
        const int64_t x_shape[2] = {32, fc_shapes[k][0]}, w[2] = {fc_shapes[k][1], fc_shapes[k][0]},
                      y[2] = {32, fc_shapes[k][1]};
        c->in[0] = small_array(2, x_shape, 1.0), c->in[1] = small_array(2, w, 0.1);
        c->out[0] = small_array(2, y, 0);
        c->buf[0] = small_buffer(32 * fc_shapes[k][0], 1.0);
        c->buf[1] = small_buffer(fc_shapes[k][0] * fc_shapes[k][1], 0.1);
        c->buf[2] = small_buffer(32 * fc_shapes[k][1], 0);
    }
    enum { ROUNDS = 15 };
    for (int k = 0; k < n; k++) {
        small_case_t *c = &cases[k];
        double deft_t[ROUNDS], ref_t[ROUNDS];
        small_deft(c); /* warm */
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = now();
            small_deft(c);
            deft_t[r] = now() - t0;
            if (c->ref) {
                t0 = now();
                small_ref(c);
                ref_t[r] = now() - t0;
            }
        }
        report_small(c, deft_t, ref_t, ROUNDS);
    }
    CHECK(DeftAutogradSetIsTraining(0, NULL));
}

/* The 1-thread GEMM runs in a child started before deft reads DEFT_NUM_THREADS. */
static void bench_gemm_one_thread_child(void) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        setenv("DEFT_NUM_THREADS", "1", 1);
        bench_gemm(1024, 1);
        fflush(stdout);
        _exit(0);
    }
    waitpid(child, NULL, 0);
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    printf("deft operator benchmarks (ratios > 1: deft is faster than the reference)\n");
    if (argc > 1 && strcmp(argv[1], "small") == 0) {
        bench_small();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "dispatch") == 0) {
        bench_dispatch("OpenBLAS threads asleep");
        return 0;
    }
    bench_gemm_one_thread_child();
    /* OpenBLAS's helper threads spin (sched_yield) for a while after the
     * library loads and after every BLAS call, taking a core from the
     * caller. Measure dispatch once they sleep, and once right after a GEMM. */
    nanosleep(&(struct timespec){0, 300000000}, NULL);
    bench_dispatch("OpenBLAS threads asleep");
    bench_gemm(256, 2);
    bench_dispatch("right after a GEMM (OpenBLAS threads spinning)");
    bench_add();
    bench_math();
    bench_small();
    const int sizes[] = {64, 256, 1024, 2048};
    for (int i = 0; i < (quick ? 3 : 4); i++) bench_gemm(sizes[i], 2);
    return 0;
}
