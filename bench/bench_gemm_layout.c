/*
 * FullyConnected's product, y (batch x hidden) = x (batch x features) . W^T
 * with W (hidden x features), in every layout OpenBLAS offers, for the
 * shapes of the demo MLP and of LeNet's dense layers (batch 32). Each
 * layout is the same product on the same numbers; what differs is which of
 * OpenBLAS's kernels runs and which operands must be transposed first:
 *   NT       sgemm(N, T) on x and W as stored (FullyConnected's call)
 *   NN       sgemm(N, N) on x and W^T (W transposed beforehand: the time excludes it)
 *   NN+tr    the same, W transposed on every call (the time includes it)
 *   TT       sgemm(T, T) on x^T and W (x transposed beforehand)
 *   TT+tr    the same, x transposed on every call (plain loops)
 *   TT+tr4   the same, x transposed on every call in SSE 4x4 tiles
 *   TN       sgemm(T, N) on x^T and W^T, both transposed beforehand
 *   y^T+tr   y^T = W . x^T, sgemm(N, T) with the operands swapped, then y transposed
 * GFLOP/s per layout (2 batch hidden features per product), best of rounds
 * that alternate the layouts, one OpenBLAS thread. Run: bench_gemm_layout [batch].
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>

#include "bench_util.h"

typedef struct problem {
    int m, n, k; /* batch, hidden, features */
    float *x, *w, *xt, *wt, *y, *yt;
} problem_t;

static void transpose(const float *a, int rows, int cols, float *t) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) t[(size_t)c * rows + r] = a[(size_t)r * cols + c];
}

/* The same with SSE 4x4 tiles (rows and cols multiples of 4, else plain). */
static void transpose4(const float *a, int rows, int cols, float *t) {
    if (rows % 4 || cols % 4) {
        transpose(a, rows, cols, t);
        return;
    }
    for (int r = 0; r < rows; r += 4)
        for (int c = 0; c < cols; c += 4) {
            __m128 r0 = _mm_loadu_ps(a + (size_t)r * cols + c);
            __m128 r1 = _mm_loadu_ps(a + (size_t)(r + 1) * cols + c);
            __m128 r2 = _mm_loadu_ps(a + (size_t)(r + 2) * cols + c);
            __m128 r3 = _mm_loadu_ps(a + (size_t)(r + 3) * cols + c);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(t + (size_t)c * rows + r, r0);
            _mm_storeu_ps(t + (size_t)(c + 1) * rows + r, r1);
            _mm_storeu_ps(t + (size_t)(c + 2) * rows + r, r2);
            _mm_storeu_ps(t + (size_t)(c + 3) * rows + r, r3);
        }
}

static void nt(problem_t *p) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->m, p->n, p->k, 1, p->x, p->k, p->w,
                p->k, 0, p->y, p->n);
}
static void nn(problem_t *p) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, p->n, p->k, 1, p->x, p->k, p->wt,
                p->n, 0, p->y, p->n);
}
static void nn_tr(problem_t *p) {
    transpose(p->w, p->n, p->k, p->wt);
    nn(p);
}
static void tt(problem_t *p) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, p->m, p->n, p->k, 1, p->xt, p->m, p->w, p->k,
                0, p->y, p->n);
}
static void tt_tr(problem_t *p) {
    transpose(p->x, p->m, p->k, p->xt);
    tt(p);
}
static void tt_tr4(problem_t *p) {
    transpose4(p->x, p->m, p->k, p->xt);
    tt(p);
}
static void tn(problem_t *p) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p->m, p->n, p->k, 1, p->xt, p->m, p->wt,
                p->n, 0, p->y, p->n);
}
static void yt_tr(problem_t *p) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->n, p->m, p->k, 1, p->w, p->k, p->x,
                p->k, 0, p->yt, p->m);
    transpose(p->yt, p->n, p->m, p->y);
}

typedef struct layout {
    const char *name;
    void (*run)(problem_t *);
} layout_t;

static const layout_t layouts[] = {{"NT", nt}, {"NN", nn},       {"NN+tr", nn_tr},
                                   {"TT", tt}, {"TT+tr", tt_tr}, {"TT+tr4", tt_tr4},
                                   {"TN", tn}, {"y^T+tr", yt_tr}};
enum { LAYOUTS = sizeof layouts / sizeof layouts[0] };

static float *filled(size_t n, float scale) {
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = scale * (float)((i * 37) % 101) - 0.5f;
    return a;
}

static void bench(int m, int n, int k, int reps) {
    problem_t p = {.m = m, .n = n, .k = k};
    p.x = filled((size_t)m * k, 0.01f), p.w = filled((size_t)n * k, 0.02f);
    p.xt = malloc((size_t)m * k * sizeof(float)), p.wt = malloc((size_t)n * k * sizeof(float));
    p.y = malloc((size_t)m * n * sizeof(float)), p.yt = malloc((size_t)m * n * sizeof(float));
    transpose(p.x, m, k, p.xt);
    transpose(p.w, n, k, p.wt);
    /* every layout computes the same y */
    float *want = malloc((size_t)m * n * sizeof(float));
    memset(p.y, 0, (size_t)m * n * sizeof(float));
    nt(&p);
    memcpy(want, p.y, (size_t)m * n * sizeof(float));
    double best[LAYOUTS];
    for (int l = 0; l < LAYOUTS; l++) {
        best[l] = 1e30;
        memset(p.y, 0, (size_t)m * n * sizeof(float));
        layouts[l].run(&p);
        for (int i = 0; i < m * n; i++) {
            float d = p.y[i] - want[i];
            if (d > 1e-3f || d < -1e-3f) {
                fprintf(stderr, "%s differs at %d\n", layouts[l].name, i);
                exit(1);
            }
        }
    }
    for (int round = 0; round < 5; round++)
        for (int l = 0; l < LAYOUTS; l++) {
            double t0 = now();
            for (int r = 0; r < reps; r++) layouts[l].run(&p);
            double t = (now() - t0) / reps;
            if (t < best[l]) best[l] = t;
        }
    printf("%4d x %4d x %4d ", m, n, k);
    double flop = 2.0 * m * n * k;
    for (int l = 0; l < LAYOUTS; l++) printf(" %8.1f", flop / best[l] * 1e-9);
    printf("   (NT %.2f us)\n", best[0] * 1e6);
    free(p.x), free(p.w), free(p.xt), free(p.wt), free(p.y), free(p.yt), free(want);
}

int main(int argc, char **argv) {
    int batch = argc > 1 ? atoi(argv[1]) : 32;
    if (batch < 1) batch = 32;
    openblas_set_num_threads(1);
    printf("FullyConnected layouts, GFLOP/s (best of 5 rounds), 1 OpenBLAS thread, load %.2f\n",
           load_average());
    printf("batch x hidden x features");
    for (int l = 0; l < LAYOUTS; l++) printf(" %8s", layouts[l].name);
    printf("\n");
    const int shapes[][2] = {{128, 64}, {64, 128}, {10, 64}, {120, 256}, {84, 120}, {10, 84}};
    for (int s = 0; s < 6; s++) bench(batch, shapes[s][0], shapes[s][1], 64000 / batch);
    bench(batch, 1024, 1024, 640 / batch > 0 ? 640 / batch : 1);
    return 0;
}
