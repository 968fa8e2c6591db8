/*
 * RNN's CPU kernels: the time steps forward and backward, and the dropout
 * between layers (rnn_backward.c drives the backward, rnn.c the forward).
 *
 * Per time step of a layer-direction: a GEMM of the whole batch for the hidden
 * projection (forward) or the state gradient (backward), split by gemm_cpu
 * (columns, since it is wider than tall: each thread packs its share of
 * W_h2h), and the cells, blocks of batch rows on the threads (batch_chunk),
 * each row a loop over the state that the compiler vectorises (the
 * float exp and tanh of scalar_math.h are polynomials, not libm calls; the
 * cells' formulas are rnn_math.h's, which the GPU's kernels run too).
 */
#include <string.h>

#include "core/base/parallel.h"
#include "core/math/philox.h"
#include "core/op/gemm.h"
#include "core/op/kernel.h"
#include "core/op/random.h"
#include "core/op/rnn.h"

/*
 * Batch rows per chunk of a step's cells. Threads join twice per step (the
 * GEMM, the cells). That was once dearer than taking blocks of rows through
 * every step on their own, but then each thread's GEMM packed all of W_h2h
 * again at every step, while a join costs about a microsecond now that
 * helpers poll (parallel.h): the 2-layer LSTM of bench_rnn (hidden 256,
 * batch 32), 2 threads, forward 15.7 -> 13.4 ms, with backward 38.0 -> 34.3.
 * A recurrence too small to pay for a join stays whole.
 */
static int64_t batch_chunk(const deft_rnn_geom_t *g) {
    int threads = deft_parallel_budget();
    double macs = (double)g->T * (double)g->N * (double)(g->G * g->H) * (double)g->H;
    if (threads < 2 || macs < (double)(1 << 19) || g->N < 2) return g->N > 0 ? g->N : 1;
    return (g->N + threads - 1) / threads;
}

/* The CPU's GEMMs cannot fail (only a GPU's report errors). */
static void cpu_gemm(deft_dtype_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     const void *a, const void *b, double beta, void *c) {
    (void)deft_gemm(deft_device_cpu(), dtype, ta, tb, m, n, k, a, b, beta, c);
}

/* ---- forward step ---- */

#define FORWARD_ROWS(T, sfx)                                                                       \
    /* A row past its sequence's end: the state stays, the output is zero. */                      \
    static void hold_row_##sfx(const deft_rnn_step_t *s, int64_t b) {                              \
        int64_t H = s->H;                                                                          \
        memcpy((T *)s->h + b * H, (const T *)s->h_prev + b * H, (size_t)H * sizeof(T));            \
        if (s->c) memcpy((T *)s->c + b * H, (const T *)s->c_prev + b * H, (size_t)H * sizeof(T));  \
        memset((T *)s->y + b * s->y_stride, 0, (size_t)H * sizeof(T));                             \
    }                                                                                              \
    /* One pass over the row, every branch a select or constant in each inlined copy (keep),       \
     * every pointer a restrict parameter (GCC drops restrict on locals, and the alias checks of   \
     * a dozen streams stop it), so it vectorises. x holds both projections. */                    \
    static inline __attribute__((always_inline)) void lstm_cells_##sfx(                            \
        int64_t H, const T *restrict x, const T *restrict bx, const T *restrict bh,                \
        const T *restrict cp, T *restrict c, T *restrict h, T *restrict y, T *restrict gt,         \
        bool keep, T lo, T hi, bool nan_to_lo) {                                                   \
        for (int64_t k = 0; k < H; k++) {                                                          \
            T i = deft_rnn_sigmoid_##sfx(x[k] + bx[k] + bh[k]);                                    \
            T f = deft_rnn_sigmoid_##sfx(x[H + k] + bx[H + k] + bh[H + k]);                        \
            T g = deft_tanh(x[2 * H + k] + bx[2 * H + k] + bh[2 * H + k]);                         \
            T o = deft_rnn_sigmoid_##sfx(x[3 * H + k] + bx[3 * H + k] + bh[3 * H + k]);            \
            T cell = f * cp[k] + i * g;                                                            \
            cell = nan_to_lo && !(cell > lo) ? lo : cell; /* NaN fails cell > lo */                \
            cell = cell < lo ? lo : cell > hi ? hi : cell;                                         \
            T out = o * deft_tanh(cell);                                                           \
            c[k] = cell, h[k] = out, y[k] = out;                                                   \
            if (keep) gt[k] = i, gt[H + k] = f, gt[2 * H + k] = g, gt[3 * H + k] = o;              \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void lstm_row_##sfx(const deft_rnn_step_t *s, int64_t b) {                  \
        int64_t H = s->H;                                                                          \
        const T *x = (const T *)s->xproj + b * 4 * H, *cp = (const T *)s->c_prev + b * H;          \
        T *c = (T *)s->c + b * H, *h = (T *)s->h + b * H, *y = (T *)s->y + b * s->y_stride;        \
        /* no clipping is clipping to [-inf, inf], so the loop has no branch */                    \
        T lo = s->clip ? (T)s->clip_min : -(T)INFINITY,                                            \
          hi = s->clip ? (T)s->clip_max : (T)INFINITY;                                             \
        bool nan_to_lo = s->clip && s->clip_nan;                                                   \
        if (s->gates)                                                                              \
            lstm_cells_##sfx(H, x, s->bx, s->bh, cp, c, h, y, (T *)s->gates + b * 4 * H, true, lo, \
                             hi, nan_to_lo);                                                       \
        else                                                                                       \
            lstm_cells_##sfx(H, x, s->bx, s->bh, cp, c, h, y, NULL, false, lo, hi, nan_to_lo);     \
    }                                                                                              \
    /* GRU: hproj apart (r scales W_hn h_prev + b_hn), the gates always kept. */                   \
    static inline __attribute__((always_inline)) void gru_cells_##sfx(                             \
        int64_t H, const T *restrict x, const T *restrict hp, const T *restrict bx,                \
        const T *restrict bh, const T *restrict h_prev, T *restrict h, T *restrict y,              \
        T *restrict gt) {                                                                          \
        for (int64_t k = 0; k < H; k++) {                                                          \
            T r = deft_rnn_sigmoid_##sfx(x[k] + bx[k] + hp[k] + bh[k]);                            \
            T z = deft_rnn_sigmoid_##sfx(x[H + k] + bx[H + k] + hp[H + k] + bh[H + k]);            \
            T hn = hp[2 * H + k] + bh[2 * H + k];                                                  \
            T n = deft_tanh(x[2 * H + k] + bx[2 * H + k] + r * hn);                                \
            T out = ((T)1 - z) * n + z * h_prev[k];                                                \
            gt[k] = r, gt[H + k] = z, gt[2 * H + k] = n, gt[3 * H + k] = hn;                       \
            h[k] = out, y[k] = out;                                                                \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void gru_row_##sfx(const deft_rnn_step_t *s, int64_t b) {                   \
        int64_t H = s->H;                                                                          \
        gru_cells_##sfx(H, (const T *)s->xproj + b * 3 * H, (const T *)s->hproj + b * 3 * H,       \
                        s->bx, s->bh, (const T *)s->h_prev + b * H, (T *)s->h + b * H,             \
                        (T *)s->y + b * s->y_stride, (T *)s->gates + b * 4 * H);                   \
    }                                                                                              \
    DEFT_CLONES static void vanilla_row_##sfx(const deft_rnn_step_t *s, int64_t b) {               \
        int64_t H = s->H;                                                                          \
        const T *restrict x = (const T *)s->xproj + b * H, *restrict bx = s->bx,                   \
                          *restrict bh = s->bh;                                                    \
        T *restrict h = (T *)s->h + b * H, *restrict y = (T *)s->y + b * s->y_stride;              \
        if (s->mode == DEFT_RNN_RELU) {                                                            \
            for (int64_t k = 0; k < H; k++) {                                                      \
                T pre = x[k] + bx[k] + bh[k], out = pre > 0 ? pre : (T)0;                          \
                h[k] = out, y[k] = out;                                                            \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t k = 0; k < H; k++) {                                                      \
                T out = deft_tanh(x[k] + bx[k] + bh[k]);                                           \
                h[k] = out, y[k] = out;                                                            \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void step_rows_##sfx(const deft_rnn_step_t *s, int64_t begin, int64_t end) {            \
        for (int64_t b = begin; b < end; b++) {                                                    \
            if (!deft_rnn_row_valid(s, b))                                                         \
                hold_row_##sfx(s, b);                                                              \
            else if (s->mode == DEFT_RNN_LSTM)                                                     \
                lstm_row_##sfx(s, b);                                                              \
            else if (s->mode == DEFT_RNN_GRU)                                                      \
                gru_row_##sfx(s, b);                                                               \
            else                                                                                   \
                vanilla_row_##sfx(s, b);                                                           \
        }                                                                                          \
    }

FORWARD_ROWS(float, f)
FORWARD_ROWS(double, d)

typedef struct step_cells {
    const deft_rnn_step_t *s;
    deft_dtype_t dtype;
} step_cells_t;

static void cells_rows(void *arg, int64_t begin, int64_t end) {
    const step_cells_t *c = arg;
    (c->dtype == DEFT_DT_FLOAT32 ? step_rows_f : step_rows_d)(c->s, begin, end);
}

void deft_rnn_steps_cpu(const deft_rnn_run_t *r, int64_t l, int64_t d, char *y) {
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = l * g->D + d, in = l ? g->D * g->H : g->In;
    const char *w_h2h = r->w + (size_t)(deft_rnn_w_offset(g, ld) + g->G * g->H * in) * r->elem;
    bool gru = g->mode == DEFT_RNN_GRU;
    int64_t chunk = batch_chunk(g);
    for (int64_t i = 0; i < g->T; i++) {
        deft_rnn_step_t s;
        deft_rnn_step_at(r, l, d, i, y, &s);
        if (!gru) s.hproj = NULL;
        /* the hidden projection, added to the input one but for GRU */
        cpu_gemm(r->dtype, false, true, g->N, g->G * g->H, g->H, s.h_prev, w_h2h, gru ? 0.0 : 1.0,
                 (char *)(gru ? s.hproj : s.xproj));
        step_cells_t c = {&s, r->dtype};
        deft_parallel_for(g->N, chunk, cells_rows, &c);
    }
}

/* ---- dropout between layers ---- */

void deft_rnn_dropout_cpu(deft_dtype_t dtype, const void *y, void *mask, void *drop, int64_t n,
                          double keep, bool drawing) {
    uint64_t seed = 0, first = drawing ? deft_random_reserve(((uint64_t)n + 3) / 4, &seed) : 0;
    for (int64_t i = 0; i < n; i++) {
        double m = 1.0;
        if (drawing)
            m = deft_dropout_mask(deft_philox(seed, first + (uint64_t)i / 4).v[i % 4], keep);
        deft_store_double(mask, dtype, i, m);
        deft_store_double(drop, dtype, i, m * deft_load_double(y, dtype, i));
    }
}

/* ---- backward ---- */

/*
 * Row b of a backward step, the cells of rnn_math.h (the GPU's) in loops whose pointers are
 * restrict parameters, as the forward's. dh leaves holding the part of d h_prev that does not go
 * through W_h2h (GRU's z dh; a finished row's whole dh), the GEMM adds the rest.
 */
#define BACKWARD_ROWS(T, sfx)                                                                      \
    static void back_hold_##sfx(const deft_rnn_back_step_t *s, int64_t b) {                        \
        int64_t GH = deft_rnn_gates(s->mode) * s->H;                                               \
        memset((T *)s->dgx + b * GH, 0, (size_t)GH * sizeof(T));                                   \
        if (s->dgh != s->dgx) memset((T *)s->dgh + b * GH, 0, (size_t)GH * sizeof(T));             \
    }                                                                                              \
    static inline __attribute__((always_inline)) void back_lstm_cells_##sfx(                       \
        int64_t H, const T *restrict gt, const T *restrict c, const T *restrict cp,                \
        const T *restrict dy, T *restrict dh, T *restrict dc, T *restrict dg, bool clip, T lo,     \
        T hi) {                                                                                    \
        for (int64_t k = 0; k < H; k++) {                                                          \
            T d[4];                                                                                \
            dc[k] = deft_rnn_lstm_back_##sfx(gt[k], gt[H + k], gt[2 * H + k], gt[3 * H + k], c[k], \
                                             cp[k], dh[k] + dy[k], dc[k], clip, lo, hi, d);        \
            dg[k] = d[0], dg[H + k] = d[1], dg[2 * H + k] = d[2], dg[3 * H + k] = d[3];            \
            dh[k] = 0;                                                                             \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void back_lstm_##sfx(const deft_rnn_back_step_t *s, int64_t b) {            \
        int64_t H = s->H;                                                                          \
        back_lstm_cells_##sfx(H, (const T *)s->gates + b * 4 * H, (const T *)s->c + b * H,         \
                              (const T *)s->c_prev + b * H, (const T *)s->dy + b * s->dy_stride,   \
                              (T *)s->dh + b * H, (T *)s->dc + b * H, (T *)s->dgx + b * 4 * H,     \
                              s->clip, (T)s->clip_min, (T)s->clip_max);                            \
    }                                                                                              \
    static inline __attribute__((always_inline)) void back_gru_cells_##sfx(                        \
        int64_t H, const T *restrict gt, const T *restrict hp, const T *restrict dy,               \
        T *restrict dh, T *restrict dx, T *restrict dhh) {                                         \
        for (int64_t k = 0; k < H; k++) {                                                          \
            T a[3], h2h[3];                                                                        \
            dh[k] = deft_rnn_gru_back_##sfx(gt[k], gt[H + k], gt[2 * H + k], gt[3 * H + k], hp[k], \
                                            dh[k] + dy[k], a, h2h);                                \
            dx[k] = a[0], dx[H + k] = a[1], dx[2 * H + k] = a[2];                                  \
            dhh[k] = h2h[0], dhh[H + k] = h2h[1], dhh[2 * H + k] = h2h[2];                         \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void back_gru_##sfx(const deft_rnn_back_step_t *s, int64_t b) {             \
        int64_t H = s->H;                                                                          \
        back_gru_cells_##sfx(H, (const T *)s->gates + b * 4 * H, (const T *)s->h_prev + b * H,     \
                             (const T *)s->dy + b * s->dy_stride, (T *)s->dh + b * H,              \
                             (T *)s->dgx + b * 3 * H, (T *)s->dgh + b * 3 * H);                    \
    }                                                                                              \
    static inline __attribute__((always_inline)) void back_vanilla_cells_##sfx(                    \
        int64_t H, const T *restrict h, const T *restrict dy, T *restrict dh, T *restrict dg,      \
        int mode) {                                                                                \
        for (int64_t k = 0; k < H; k++) {                                                          \
            dg[k] = deft_rnn_act_back_##sfx(h[k], dh[k] + dy[k], mode);                            \
            dh[k] = 0;                                                                             \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void back_vanilla_##sfx(const deft_rnn_back_step_t *s, int64_t b) {         \
        int64_t H = s->H;                                                                          \
        back_vanilla_cells_##sfx(H, (const T *)s->h + b * H, (const T *)s->dy + b * s->dy_stride,  \
                                 (T *)s->dh + b * H, (T *)s->dgx + b * H, s->mode);                \
    }                                                                                              \
    static void back_rows_##sfx(const deft_rnn_back_step_t *s, int64_t begin, int64_t end) {       \
        for (int64_t b = begin; b < end; b++) {                                                    \
            if (!deft_rnn_back_row_valid(s, b))                                                    \
                back_hold_##sfx(s, b);                                                             \
            else if (s->mode == DEFT_RNN_LSTM)                                                     \
                back_lstm_##sfx(s, b);                                                             \
            else if (s->mode == DEFT_RNN_GRU)                                                      \
                back_gru_##sfx(s, b);                                                              \
            else                                                                                   \
                back_vanilla_##sfx(s, b);                                                          \
        }                                                                                          \
    }                                                                                              \
    static void column_sums_##sfx(const void *m, int64_t rows, int64_t cols, void *sum) {          \
        T *out = sum;                                                                              \
        for (int64_t j = 0; j < cols; j++) out[j] = 0;                                             \
        for (int64_t r = 0; r < rows; r++)                                                         \
            for (int64_t j = 0; j < cols; j++) out[j] += ((const T *)m)[r * cols + j];             \
    }                                                                                              \
    static void multiply_##sfx(void *x, const void *m, int64_t n) {                                \
        for (int64_t i = 0; i < n; i++) ((T *)x)[i] *= ((const T *)m)[i];                          \
    }

BACKWARD_ROWS(float, f)
BACKWARD_ROWS(double, d)

void deft_rnn_column_sums_cpu(deft_dtype_t dtype, const void *m, int64_t rows, int64_t cols,
                              void *sum) {
    (dtype == DEFT_DT_FLOAT32 ? column_sums_f : column_sums_d)(m, rows, cols, sum);
}

void deft_rnn_multiply_cpu(deft_dtype_t dtype, void *x, const void *m, int64_t n) {
    (dtype == DEFT_DT_FLOAT32 ? multiply_f : multiply_d)(x, m, n);
}

typedef struct back_cells {
    const deft_rnn_back_step_t *s;
    deft_dtype_t dtype;
} back_cells_t;

static void back_cells_rows(void *arg, int64_t begin, int64_t end) {
    const back_cells_t *c = arg;
    (c->dtype == DEFT_DT_FLOAT32 ? back_rows_f : back_rows_d)(c->s, begin, end);
}

void deft_rnn_back_steps_cpu(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w,
                             int64_t l, int64_t d, const char *dy, const void *w_h2h) {
    const deft_rnn_geom_t *g = b->g;
    int64_t chunk = batch_chunk(g);
    for (int64_t i = g->T - 1; i >= 0; i--) {
        deft_rnn_back_step_t s;
        deft_rnn_back_step_at(b, w, l, d, i, dy, &s);
        back_cells_t c = {&s, b->dtype};
        deft_parallel_for(g->N, chunk, back_cells_rows, &c);
        /* the state's gradient through W_h2h */
        cpu_gemm(b->dtype, false, false, g->N, g->H, g->G * g->H, s.dgh, w_h2h, 1.0, s.dh);
    }
}
