/*
 * RNN's CPU kernels: the time steps forward and backward, and the dropout
 * between layers (rnn_backward.c drives the backward, rnn.c the forward).
 *
 * Each thread takes a block of batch rows through every time step of a
 * layer-direction (batch_chunk): per step a GEMM for the rows' hidden
 * projection (forward) or state gradient (backward), and the cells, row by
 * row, each row a loop over the state that the compiler vectorises (the
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
 * Batch rows per chunk of a recurrence. Rows never meet within a layer, so
 * each chunk runs every time step on its own and threads join once per
 * layer-direction, not twice per step (tiny parallel loops, each a wake-up
 * and a barrier). A recurrence too small to pay for that stays whole.
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

typedef struct forward_chunks {
    const deft_rnn_run_t *r;
    int64_t l, d;
    char *y;
    const char *w_h2h;
} forward_chunks_t;

/* Batch rows [begin, end) of a layer-direction through every step: the hidden projection (added
 * to the input one but for GRU), then the cells. */
static void forward_rows(void *arg, int64_t begin, int64_t end) {
    const forward_chunks_t *f = arg;
    const deft_rnn_geom_t *g = f->r->g;
    int64_t GH = g->G * g->H;
    size_t es = f->r->elem;
    bool gru = g->mode == DEFT_RNN_GRU;
    for (int64_t i = 0; i < g->T; i++) {
        deft_rnn_step_t s;
        deft_rnn_step_at(f->r, f->l, f->d, i, f->y, &s);
        if (!gru) s.hproj = NULL;
        char *proj = (char *)(gru ? s.hproj : s.xproj) + (size_t)(begin * GH) * es;
        cpu_gemm(f->r->dtype, false, true, end - begin, GH, g->H,
                 (const char *)s.h_prev + (size_t)(begin * g->H) * es, f->w_h2h, gru ? 0.0 : 1.0,
                 proj);
        (f->r->dtype == DEFT_DT_FLOAT32 ? step_rows_f : step_rows_d)(&s, begin, end);
    }
}

void deft_rnn_steps_cpu(const deft_rnn_run_t *r, int64_t l, int64_t d, char *y) {
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = l * g->D + d, in = l ? g->D * g->H : g->In;
    forward_chunks_t f = {r, l, d, y,
                          r->w + (size_t)(deft_rnn_w_offset(g, ld) + g->G * g->H * in) * r->elem};
    deft_parallel_for(g->N, batch_chunk(g), forward_rows, &f);
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

typedef struct backward_chunks {
    const deft_rnn_backward_t *b;
    const deft_rnn_back_space_t *w;
    int64_t l, d;
    const char *dy, *w_h2h;
} backward_chunks_t;

/* Batch rows [begin, end) of layer-direction (l, d) through its steps backwards: per step the
 * gate gradients, then the state's through W_h2h. */
static void backward_rows(void *arg, int64_t begin, int64_t end) {
    const backward_chunks_t *k = arg;
    const deft_rnn_geom_t *g = k->b->g;
    int64_t GH = g->G * g->H;
    size_t es = deft_dtype_size(k->b->dtype);
    for (int64_t i = g->T - 1; i >= 0; i--) {
        deft_rnn_back_step_t s;
        deft_rnn_back_step_at(k->b, k->w, k->l, k->d, i, k->dy, &s);
        (k->b->dtype == DEFT_DT_FLOAT32 ? back_rows_f : back_rows_d)(&s, begin, end);
        cpu_gemm(k->b->dtype, false, false, end - begin, g->H, GH,
                 (const char *)s.dgh + (size_t)(begin * GH) * es, k->w_h2h, 1.0,
                 (char *)s.dh + (size_t)(begin * g->H) * es);
    }
}

void deft_rnn_back_steps_cpu(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w,
                             int64_t l, int64_t d, const char *dy, const void *w_h2h) {
    backward_chunks_t k = {b, w, l, d, dy, w_h2h};
    deft_parallel_for(b->g->N, batch_chunk(b->g), backward_rows, &k);
}
