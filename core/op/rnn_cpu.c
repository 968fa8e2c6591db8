/*
 * RNN's CPU kernels: a time step's gates (forward), the dropout between
 * layers, and the whole backward (_backward_RNN).
 *
 * A step's gate kernel runs row by row (a batch element), each row a loop
 * over the state that the compiler vectorises (the float exp and tanh of
 * scalar_math.h are polynomials, not libm calls). Backward walks each
 * layer-direction's steps in reverse: per step one fused kernel for the
 * gate gradients and one GEMM for the hidden state's gradient; the weight
 * gradients are then one GEMM over every step, and the input gradient one
 * more, as the forward's input projection was.
 */
#include <stdlib.h>
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

/* One backward step of layer-direction ld at time t, over the batch. */
typedef struct back_step {
    const deft_rnn_geom_t *g;
    int64_t t;
    const void *gates, *h, *c, *h_prev, *c_prev; /* the forward's, at t */
    const void *dy;                              /* row b at dy + b * dy_stride */
    int64_t dy_stride;
    void *dh, *dc;   /* N x H: in, the state's gradient after t; out, before it (dh: direct part) */
    void *dgx, *dgh; /* N x G H: the gradient of the gates' pre-activations (i2h, h2h) */
    const void *lengths;
    deft_dtype_t length_dtype;
} back_step_t;

static bool back_valid(const back_step_t *s, int64_t b) {
    return !s->lengths || s->t < deft_index_at(s->lengths, s->length_dtype, b);
}

/*
 * Row b. dh leaves holding the part of d h_prev that does not go through
 * W_h2h (GRU's z dh; a finished row's whole dh), the GEMM adds the rest.
 */
#define BACKWARD_ROWS(T, sfx)                                                                      \
    static void back_hold_##sfx(const back_step_t *s, int64_t b) {                                 \
        int64_t H = s->g->H, GH = s->g->G * H;                                                     \
        memset((T *)s->dgx + b * GH, 0, (size_t)GH * sizeof(T));                                   \
        if (s->dgh != s->dgx) memset((T *)s->dgh + b * GH, 0, (size_t)GH * sizeof(T));             \
    }                                                                                              \
    /* The loops' pointers are restrict parameters, as the forward's (lstm_cells). */              \
    static inline __attribute__((always_inline)) void back_lstm_cells_##sfx(                       \
        int64_t H, const T *restrict gt, const T *restrict c, const T *restrict cp,                \
        const T *restrict dy, T *restrict dh, T *restrict dc, T *restrict dg, bool clip, T lo,     \
        T hi) {                                                                                    \
        for (int64_t k = 0; k < H; k++) {                                                          \
            T i = gt[k], f = gt[H + k], gg = gt[2 * H + k], o = gt[3 * H + k];                     \
            T tc = deft_tanh(c[k]), dhk = dh[k] + dy[k];                                           \
            T dct = dc[k] + dhk * o * ((T)1 - tc * tc);                                            \
            T raw = f * cp[k] + i * gg; /* a clipped cell passes no gradient to what made it */    \
            dct = !clip || (raw >= lo && raw <= hi) ? dct : (T)0;                                  \
            dg[k] = dct * gg * i * ((T)1 - i);                                                     \
            dg[H + k] = dct * cp[k] * f * ((T)1 - f);                                              \
            dg[2 * H + k] = dct * i * ((T)1 - gg * gg);                                            \
            dg[3 * H + k] = dhk * tc * o * ((T)1 - o);                                             \
            dc[k] = dct * f;                                                                       \
            dh[k] = 0;                                                                             \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void back_lstm_##sfx(const back_step_t *s, int64_t b) {                     \
        const deft_rnn_geom_t *g = s->g;                                                           \
        int64_t H = g->H;                                                                          \
        back_lstm_cells_##sfx(H, (const T *)s->gates + b * 4 * H, (const T *)s->c + b * H,         \
                              (const T *)s->c_prev + b * H, (const T *)s->dy + b * s->dy_stride,   \
                              (T *)s->dh + b * H, (T *)s->dc + b * H, (T *)s->dgx + b * 4 * H,     \
                              g->clip, (T)g->clip_min, (T)g->clip_max);                            \
    }                                                                                              \
    static inline __attribute__((always_inline)) void back_gru_cells_##sfx(                        \
        int64_t H, const T *restrict gt, const T *restrict hp, const T *restrict dy,               \
        T *restrict dh, T *restrict dx, T *restrict dhh) {                                         \
        for (int64_t k = 0; k < H; k++) {                                                          \
            T r = gt[k], z = gt[H + k], n = gt[2 * H + k], hn = gt[3 * H + k];                     \
            T dhk = dh[k] + dy[k];                                                                 \
            T dn = dhk * ((T)1 - z) * ((T)1 - n * n);                                              \
            T dr = dn * hn * r * ((T)1 - r), dz = dhk * (hp[k] - n) * z * ((T)1 - z);              \
            dx[k] = dr, dx[H + k] = dz, dx[2 * H + k] = dn;                                        \
            dhh[k] = dr, dhh[H + k] = dz, dhh[2 * H + k] = dn * r;                                 \
            dh[k] = dhk * z;                                                                       \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void back_gru_##sfx(const back_step_t *s, int64_t b) {                      \
        int64_t H = s->g->H;                                                                       \
        back_gru_cells_##sfx(H, (const T *)s->gates + b * 4 * H, (const T *)s->h_prev + b * H,     \
                             (const T *)s->dy + b * s->dy_stride, (T *)s->dh + b * H,              \
                             (T *)s->dgx + b * 3 * H, (T *)s->dgh + b * 3 * H);                    \
    }                                                                                              \
    static inline __attribute__((always_inline)) void back_vanilla_cells_##sfx(                    \
        int64_t H, const T *restrict h, const T *restrict dy, T *restrict dh, T *restrict dg,      \
        bool relu) {                                                                               \
        for (int64_t k = 0; k < H; k++) {                                                          \
            T dhk = dh[k] + dy[k];                                                                 \
            dg[k] = relu ? (h[k] > 0 ? dhk : (T)0) : dhk * ((T)1 - h[k] * h[k]);                   \
            dh[k] = 0;                                                                             \
        }                                                                                          \
    }                                                                                              \
    DEFT_CLONES static void back_vanilla_##sfx(const back_step_t *s, int64_t b) {                  \
        int64_t H = s->g->H;                                                                       \
        back_vanilla_cells_##sfx(H, (const T *)s->h + b * H, (const T *)s->dy + b * s->dy_stride,  \
                                 (T *)s->dh + b * H, (T *)s->dgx + b * H,                          \
                                 s->g->mode == DEFT_RNN_RELU);                                     \
    }                                                                                              \
    static void back_rows_##sfx(const back_step_t *s, int64_t begin, int64_t end) {                \
        for (int64_t b = begin; b < end; b++) {                                                    \
            if (!back_valid(s, b))                                                                 \
                back_hold_##sfx(s, b);                                                             \
            else if (s->g->mode == DEFT_RNN_LSTM)                                                  \
                back_lstm_##sfx(s, b);                                                             \
            else if (s->g->mode == DEFT_RNN_GRU)                                                   \
                back_gru_##sfx(s, b);                                                              \
            else                                                                                   \
                back_vanilla_##sfx(s, b);                                                          \
        }                                                                                          \
    }                                                                                              \
    /* sum[j] = the sum over rows of m (rows x cols) */                                            \
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

/* The backward's working memory. */
typedef struct back_space {
    char *dgx, *dgh; /* T N G H each (dgh is dgx but for GRU) */
    char *dh, *dc;   /* N H each */
    char *dlayer[2]; /* T N D H: a layer's input gradient, the output gradient of the one below */
} back_space_t;

typedef struct back_run {
    const deft_rnn_backward_t *b;
    const deft_rnn_geom_t *g;
    size_t es;
    back_space_t w;
    bool f32;
} back_run_t;

static char *at(const void *base, int64_t elems, size_t elem) {
    return base ? (char *)base + (size_t)elems * elem : NULL;
}

typedef struct backward_chunks {
    const back_run_t *r;
    int64_t l, d;
    const char *dy, *w_h2h;
} backward_chunks_t;

/* Batch rows [begin, end) of layer-direction (l, d) through its steps backwards: per step the
 * gate gradients into w.dgx/dgh, then the state's through W_h2h. */
static void backward_rows(void *arg, int64_t begin, int64_t end) {
    const backward_chunks_t *k = arg;
    const back_run_t *r = k->r;
    const deft_rnn_backward_t *b = r->b;
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = k->l * g->D + k->d, NH = g->N * g->H, GH = g->G * g->H;
    size_t es = r->es;
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, k->l, k->d, &slot);
    const char *hs = at(b->reserve, slot.h, es), *cs = slot.c >= 0 ? at(b->reserve, slot.c, es) : 0;
    back_step_t s = {.g = g,
                     .dy_stride = g->D * g->H,
                     .dh = r->w.dh,
                     .dc = r->w.dc,
                     .lengths = b->lengths,
                     .length_dtype = b->length_dtype};
    for (int64_t i = g->T - 1; i >= 0; i--) {
        int64_t t = k->d ? g->T - 1 - i : i, prev = k->d ? t + 1 : t - 1;
        s.t = t;
        s.gates = slot.gates >= 0 ? at(b->reserve, slot.gates + t * 4 * NH, es) : NULL;
        s.h = at(hs, t * NH, es);
        s.c = cs ? at(cs, t * NH, es) : NULL;
        s.h_prev = i ? at(hs, prev * NH, es) : at(b->hx, ld * NH, es);
        s.c_prev = cs ? (i ? at(cs, prev * NH, es) : at(b->cx, ld * NH, es)) : NULL;
        s.dy = at(k->dy, t * g->N * g->D * g->H + k->d * g->H, es);
        s.dgx = at(r->w.dgx, t * g->N * GH, es);
        s.dgh = at(r->w.dgh, t * g->N * GH, es);
        (r->f32 ? back_rows_f : back_rows_d)(&s, begin, end);
        cpu_gemm(b->dtype, false, false, end - begin, g->H, GH, at(s.dgh, begin * GH, es), k->w_h2h,
                 1.0, at(r->w.dh, begin * g->H, es));
    }
}

/* Walk layer-direction (l, d)'s steps backwards: gate gradients into w.dgx/dgh, the initial
 * state's gradient into dhx, dcx. dy: the layer output's gradient (T N x D H). */
static void back_steps(back_run_t *r, int64_t l, int64_t d, const char *dy) {
    const deft_rnn_backward_t *b = r->b;
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = l * g->D + d, NH = g->N * g->H, GH = g->G * g->H, in = l ? g->D * g->H : g->In;
    size_t es = r->es, state_bytes = (size_t)NH * es;
    if (state_bytes) {
        if (b->dhy)
            memcpy(r->w.dh, at(b->dhy, ld * NH, es), state_bytes);
        else
            memset(r->w.dh, 0, state_bytes);
        if (b->dcy)
            memcpy(r->w.dc, at(b->dcy, ld * NH, es), state_bytes);
        else if (g->mode == DEFT_RNN_LSTM)
            memset(r->w.dc, 0, state_bytes);
    }
    backward_chunks_t k = {r, l, d, dy, at(b->w, deft_rnn_w_offset(g, ld) + GH * in, es)};
    deft_parallel_for(g->N, batch_chunk(g), backward_rows, &k);
    if (state_bytes) {
        memcpy(at(b->dhx, ld * NH, es), r->w.dh, state_bytes);
        if (b->dcx) memcpy(at(b->dcx, ld * NH, es), r->w.dc, state_bytes);
    }
}

/* Layer-direction (l, d)'s weight and bias gradients from the gate gradients, and its part of
 * the layer input's gradient dx (added to the other direction's). x: the layer's input. */
static void back_weights(back_run_t *r, int64_t l, int64_t d, const char *x, char *dx) {
    const deft_rnn_backward_t *b = r->b;
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = l * g->D + d, NH = g->N * g->H, GH = g->G * g->H, in = l ? g->D * g->H : g->In;
    int64_t TN = g->T * g->N, steps = g->T > 0 ? g->T - 1 : 0;
    size_t es = r->es;
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, l, d, &slot);
    const char *w_i2h = at(b->w, deft_rnn_w_offset(g, ld), es);
    char *dw_i2h = at(b->dw, deft_rnn_w_offset(g, ld), es), *dw_h2h = at(dw_i2h, GH * in, es);
    char *db = at(b->dw, deft_rnn_b_offset(g, ld), es);
    const char *hs = at(b->reserve, slot.h, es);
    deft_dtype_t dt = b->dtype;
    cpu_gemm(dt, true, false, GH, in, TN, r->w.dgx, x, 0.0, dw_i2h);
    /* W_h2h saw h_prev: the states of the steps before (in time order for direction 0, the
     * states after for direction 1), and the initial state at the first step */
    const char *dg_later = at(r->w.dgh, d ? 0 : g->N * GH, es), *h_earlier = at(hs, d ? NH : 0, es);
    cpu_gemm(dt, true, false, GH, g->H, steps * g->N, dg_later, h_earlier, 0.0, dw_h2h);
    if (g->T > 0)
        cpu_gemm(dt, true, false, GH, g->H, g->N, at(r->w.dgh, (d ? g->T - 1 : 0) * g->N * GH, es),
                 at(b->hx, ld * NH, es), 1.0, dw_h2h);
    void (*sums)(const void *, int64_t, int64_t, void *) = r->f32 ? column_sums_f : column_sums_d;
    sums(r->w.dgx, TN, GH, db);
    sums(r->w.dgh, TN, GH, at(db, GH, es));
    cpu_gemm(dt, false, false, TN, in, GH, r->w.dgx, w_i2h, d ? 1.0 : 0.0, dx);
}

static void free_space(back_space_t *w) {
    free(w->dgx);
    if (w->dgh != w->dgx) free(w->dgh);
    free(w->dh), free(w->dc), free(w->dlayer[0]), free(w->dlayer[1]);
}

static int alloc_space(const deft_rnn_geom_t *g, size_t es, back_space_t *w) {
    size_t gates = (size_t)(g->T * g->N * g->G * g->H) * es + 1,
           state = (size_t)(g->N * g->H) * es + 1;
    size_t layer = (size_t)(g->T * g->N * g->D * g->H) * es + 1;
    memset(w, 0, sizeof *w);
    w->dgx = malloc(gates);
    w->dgh = g->mode == DEFT_RNN_GRU ? malloc(gates) : w->dgx;
    w->dh = malloc(state), w->dc = malloc(state);
    if (g->L > 1) w->dlayer[0] = malloc(layer), w->dlayer[1] = malloc(layer);
    if (w->dgx && w->dgh && w->dh && w->dc && (g->L == 1 || (w->dlayer[0] && w->dlayer[1])))
        return 0;
    free_space(w);
    return -1;
}

int deft_rnn_backward_cpu(const deft_rnn_backward_t *b) {
    const deft_rnn_geom_t *g = b->g;
    back_run_t r = {
        .b = b, .g = g, .es = deft_dtype_size(b->dtype), .f32 = b->dtype == DEFT_DT_FLOAT32};
    if (alloc_space(g, r.es, &r.w)) return -1;
    const char *dy = b->dy;
    for (int64_t l = g->L - 1; l >= 0; l--) {
        deft_rnn_slots_t below;
        if (l) deft_rnn_slots(g, l - 1, 0, &below);
        const char *x = !l ? b->x : at(b->reserve, g->p > 0 ? below.drop : below.y, r.es);
        char *dx = l ? r.w.dlayer[l % 2] : b->dx;
        for (int64_t d = 0; d < g->D; d++) {
            back_steps(&r, l, d, dy);
            back_weights(&r, l, d, x, dx);
        }
        /* through the dropout to the output of the layer below */
        if (l && g->p > 0)
            (r.f32 ? multiply_f : multiply_d)(dx, at(b->reserve, below.mask, r.es),
                                              g->T * g->N * g->D * g->H);
        dy = dx;
    }
    free_space(&r.w);
    return 0;
}
