/*
 * The bare-C floor of the demo MLP's training step (issue 26's reference):
 * the same math as examples/python/mlp_digits.py's step, written plainly
 * with sgemm for the products and loops for the rest, no framework at all.
 *
 *   Dense 64->128 relu, Dropout 0.1, Dense 128->64 relu, Dense 64->10,
 *   softmax cross-entropy (per-sample, gradient scaled by 1/batch),
 *   SGD with momentum 0.9 (MXNet's rule: mom = 0.9 mom - lr grad; w += mom).
 *
 * Loaded by bench/python/bench_mlp_step.py, which times it beside deft's
 * eager, hybridized and compiled steps in alternating rounds. The forward
 * products transpose x first and call sgemm as (T, T), the layout that
 * bench_gemm_layout finds fastest for these shapes (row-major NoTrans x Trans
 * runs at about two thirds of it), so the floor is as low as plain code
 * gets. Flush-to-zero is on, as in deft's kernels, so momentum never goes
 * denormal.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xmmintrin.h>

#include <cblas.h>

enum { B = 32, IN = 64, H1 = 128, H2 = 64, OUT = 10 };

typedef struct layer {
    int in, out;
    float *w, *b, *dw, *db, *mw, *mb; /* weights (out x in), bias, gradients, momenta */
} layer_t;

static struct {
    layer_t l[3];
    float x[B * IN];
    int label[B];
    float h1[B * H1], keep[B * H1], d1[B * H1], h2[B * H2], z[B * OUT];
    float dz[B * OUT], dh2[B * H2], dd1[B * H1];
    uint64_t rng;   /* for the initial weights and data */
    uint32_t steps; /* steps taken: the dropout counter */
    int ready;
} net;

static float uniform(void) { /* xorshift64*: a plain, fast generator */
    net.rng ^= net.rng >> 12, net.rng ^= net.rng << 25, net.rng ^= net.rng >> 27;
    return (float)((net.rng * 0x2545F4914F6CDD1DULL) >> 40) * (1.0f / 16777216.0f);
}

static void init_layer(layer_t *l, int in, int out) {
    size_t n = (size_t)in * out;
    l->in = in, l->out = out;
    l->w = malloc(n * sizeof(float)), l->dw = malloc(n * sizeof(float));
    l->mw = calloc(n, sizeof(float));
    l->b = calloc(out, sizeof(float)), l->db = malloc(out * sizeof(float));
    l->mb = calloc(out, sizeof(float));
    float scale = sqrtf(6.0f / (float)(in + out));
    for (size_t i = 0; i < n; i++) l->w[i] = (2 * uniform() - 1) * scale;
}

static void setup(void) {
    net.rng = 0x9E3779B97F4A7C15ULL;
    init_layer(&net.l[0], IN, H1), init_layer(&net.l[1], H1, H2), init_layer(&net.l[2], H2, OUT);
    for (int i = 0; i < B * IN; i++) net.x[i] = uniform();
    for (int i = 0; i < B; i++) net.label[i] = i % OUT;
    net.ready = 1;
}

/* y (B x out) = x (B x in) w^T + b, as (x^T)^T w^T */
static void dense(const layer_t *l, const float *x, float *y) {
    static float xt[H1 * B];
    for (int r = 0; r < B; r++)
        for (int i = 0; i < l->in; i++) xt[i * B + r] = x[r * l->in + i];
    for (int r = 0; r < B; r++) memcpy(y + (size_t)r * l->out, l->b, l->out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, B, l->out, l->in, 1.0f, xt, B, l->w, l->in,
                1.0f, y, l->out);
}

/* dw = dy^T x, db = column sums of dy, and dx = dy w when dx is wanted */
static void dense_backward(layer_t *l, const float *x, const float *dy, float *dx) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l->out, l->in, B, 1.0f, dy, l->out, x,
                l->in, 0.0f, l->dw, l->in);
    for (int o = 0; o < l->out; o++) l->db[o] = 0;
    for (int r = 0; r < B; r++)
        for (int o = 0; o < l->out; o++) l->db[o] += dy[r * l->out + o];
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, l->in, l->out, 1.0f, dy, l->out,
                    l->w, l->in, 0.0f, dx, l->in);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void relu(float *v, int n) {
    for (int i = 0; i < n; i++) v[i] = v[i] > 0 ? v[i] : 0;
}

/* dv *= (v > 0): the gradient through a relu whose output is v */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
relu_backward(const float *v, float *dv, int n) {
    for (int i = 0; i < n; i++) dv[i] = v[i] > 0 ? dv[i] : 0;
}

/* Mean loss; dz = (softmax(z) - onehot) / B */
static float softmax_xent(void) {
    float loss = 0;
    for (int r = 0; r < B; r++) {
        float *z = net.z + r * OUT, *dz = net.dz + r * OUT, top = z[0], sum = 0;
        for (int k = 1; k < OUT; k++) top = z[k] > top ? z[k] : top;
        for (int k = 0; k < OUT; k++) sum += dz[k] = expf(z[k] - top);
        for (int k = 0; k < OUT; k++) dz[k] /= sum;
        loss -= logf(dz[net.label[r]]);
        dz[net.label[r]] -= 1;
        for (int k = 0; k < OUT; k++) dz[k] *= 1.0f / B;
    }
    return loss / B;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
sgd_momentum(float *w, float *m, const float *g, int n, float lr) {
    for (int i = 0; i < n; i++) {
        m[i] = 0.9f * m[i] - lr * g[i];
        w[i] += m[i];
    }
}

/* Dropout 0.1 of h1 into d1, keeping the scaled mask: a counter-based hash
 * of (step, element) as the random source, so the loop vectorises (a serial
 * generator would be a 4,096-long dependency chain, slower than the rest of
 * the step's loops together). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
dropout(uint32_t step, const float *h1, float *keep, float *d1) {
    for (uint32_t i = 0; i < B * H1; i++) {
        uint32_t h = (i + step * (uint32_t)(B * H1)) * 0x9E3779B1u;
        h ^= h >> 15, h *= 0x85EBCA6Bu, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
        float u = (float)(h >> 8) * (1.0f / 16777216.0f);
        keep[i] = u >= 0.1f ? 1.0f / 0.9f : 0.0f;
        d1[i] = h1[i] * keep[i];
    }
}

static float step(float lr) {
    layer_t *l = net.l;
    dense(&l[0], net.x, net.h1);
    relu(net.h1, B * H1);
    dropout(net.steps++, net.h1, net.keep, net.d1);
    dense(&l[1], net.d1, net.h2);
    relu(net.h2, B * H2);
    dense(&l[2], net.h2, net.z);
    float loss = softmax_xent();
    dense_backward(&l[2], net.h2, net.dz, net.dh2);
    relu_backward(net.h2, net.dh2, B * H2);
    dense_backward(&l[1], net.d1, net.dh2, net.dd1);
    for (int i = 0; i < B * H1; i++) net.dd1[i] *= net.h1[i] > 0 ? net.keep[i] : 0;
    dense_backward(&l[0], net.x, net.dd1, NULL);
    for (int k = 0; k < 3; k++) {
        sgd_momentum(l[k].w, l[k].mw, l[k].dw, l[k].in * l[k].out, lr);
        sgd_momentum(l[k].b, l[k].mb, l[k].db, l[k].out, lr);
    }
    return loss;
}

/* Run `steps` training steps; returns the seconds they took (the last
 * loss in *loss, so a caller can see the floor trains). */
double deft_mlp_floor_run(int steps, float *loss) {
    _mm_setcsr(_mm_getcsr() | 0x8040); /* flush-to-zero and denormals-are-zero */
    if (!net.ready) setup();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    float last = 0;
    for (int s = 0; s < steps; s++) last = step(0.01f);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (loss) *loss = last;
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
}
