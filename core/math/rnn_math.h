/*
 * One time step of the RNN operator, element by element, shared by the CPU
 * kernels (core/op/rnn_cpu.c) and the GPU kernels (core/op/rnn.cu), so the
 * CPU tests check the formulas the GPU runs.
 *
 * A step of layer l, direction d at time t works on the batch (N rows) and
 * the state (H columns). The input projection x W_i2h^T and the hidden one
 * h_prev W_h2h^T come from GEMMs; the step adds the biases, applies the gates
 * and writes the new state, the output and what the gradient needs (the
 * activated gates). Gates are laid out as MXNet's (rnn_impl.h): LSTM i, f, g,
 * o; GRU r, z, n, each H wide. A row whose sequence has ended (t at or past
 * its length) keeps its state and outputs zeros, as cuDNN's variable-length
 * sequences do.
 */
#ifndef DEFT_CORE_RNN_MATH_H
#define DEFT_CORE_RNN_MATH_H

#include "core/math/device_fn.h"
#include "core/math/index_math.h"
#include "core/math/scalar_math.h"

/* The modes, in the order of MXNet's `mode` parameter. */
enum { DEFT_RNN_RELU, DEFT_RNN_TANH, DEFT_RNN_LSTM, DEFT_RNN_GRU };

typedef struct deft_rnn_step {
    int mode;
    int64_t N, H, t;
    const void *xproj, *hproj; /* N x G H each: the two projections, without biases; hproj
                                  NULL: xproj holds their sum (not GRU, whose r scales one) */
    const void *bx, *bh;       /* G H each: b_i2h, b_h2h */
    const void *h_prev, *c_prev;
    void *h, *c; /* N x H: the state after the step (c: LSTM) */
    void *gates; /* N x 4 H (LSTM: i f g o; GRU: r z n and W_hn h_prev + b_hn); NULL: not
                    kept (predict mode, or the mode has none) */
    void *y;     /* row b at y + b * y_stride: the layer's output at time t */
    int64_t y_stride;
    const void *lengths; /* NULL: every sequence has all T steps */
    deft_dtype_t length_dtype;
    bool clip, clip_nan; /* LSTM: clip the cell state to [clip_min, clip_max] */
    double clip_min, clip_max;
} deft_rnn_step_t;

/*
 * One backward step of a layer-direction at time t, over the batch: from the
 * state's gradient after the step to the gates' pre-activation gradients and
 * the part of the state's gradient before it that does not go through W_h2h
 * (a GEMM adds that part).
 */
typedef struct deft_rnn_back_step {
    int mode;
    int64_t N, H, t;
    const void *gates, *h, *c, *h_prev, *c_prev; /* the forward's, at t */
    const void *dy;                              /* row b at dy + b * dy_stride */
    int64_t dy_stride;
    void *dh, *dc;   /* N x H: in, the state's gradient after t; out, before it (dh: direct part) */
    void *dgx, *dgh; /* N x G H: the gates' pre-activation gradients (i2h, h2h: one but for GRU) */
    const void *lengths;
    deft_dtype_t length_dtype;
    bool clip;
    double clip_min, clip_max;
} deft_rnn_back_step_t;

/* Gate columns per unit of state: G. */
DEFT_DEVICE_FN int deft_rnn_gates(int mode) {
    return mode == DEFT_RNN_LSTM ? 4 : mode == DEFT_RNN_GRU ? 3 : 1;
}

/* Whether batch row b is still inside its sequence at time t. */
DEFT_DEVICE_FN bool deft_rnn_row_valid(const deft_rnn_step_t *s, int64_t b) {
    return !s->lengths || s->t < deft_index_at(s->lengths, s->length_dtype, b);
}
DEFT_DEVICE_FN bool deft_rnn_back_row_valid(const deft_rnn_back_step_t *s, int64_t b) {
    return !s->lengths || s->t < deft_index_at(s->lengths, s->length_dtype, b);
}

/*
 * The cell of each mode for element type T (suffix _f, _d). pre_* include
 * both biases; GRU's hn is W_hn h_prev + b_hn, which r scales.
 */
#define DEFT_RNN_CELLS(T, sfx)                                                                     \
    DEFT_DEVICE_FN T deft_rnn_sigmoid_##sfx(T x) {                                                 \
        return (T)1 / ((T)1 + deft_exp(-x));                                                       \
    }                                                                                              \
    /* clip_nan: NaN becomes clip_min (fmax takes the number); else NaN stays */                   \
    DEFT_DEVICE_FN T deft_rnn_clip_##sfx(T c, const deft_rnn_step_t *s) {                          \
        T lo = (T)s->clip_min, hi = (T)s->clip_max;                                                \
        if (s->clip_nan) return fmin(fmax(c, lo), hi);                                             \
        return c < lo ? lo : c > hi ? hi : c;                                                      \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_rnn_lstm_##sfx(T pi, T pf, T pg, T po, T c_prev, T *gates, T *c) {       \
        T i = deft_rnn_sigmoid_##sfx(pi), f = deft_rnn_sigmoid_##sfx(pf);                          \
        T g = deft_tanh(pg), o = deft_rnn_sigmoid_##sfx(po);                                       \
        gates[0] = i, gates[1] = f, gates[2] = g, gates[3] = o;                                    \
        *c = f * c_prev + i * g;                                                                   \
        return o;                                                                                  \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_rnn_gru_##sfx(T xr, T xz, T xn, T hr, T hz, T hn, T h_prev, T *gates) {  \
        T r = deft_rnn_sigmoid_##sfx(xr + hr), z = deft_rnn_sigmoid_##sfx(xz + hz);                \
        T n = deft_tanh(xn + r * hn);                                                              \
        gates[0] = r, gates[1] = z, gates[2] = n, gates[3] = hn;                                   \
        return ((T)1 - z) * n + z * h_prev;                                                        \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_rnn_act_##sfx(T pre, int mode) {                                         \
        return mode == DEFT_RNN_RELU ? (pre > 0 ? pre : (T)0) : deft_tanh(pre);                    \
    }                                                                                              \
    /* The cells' backward. dh: the whole gradient of the state after the step (output's           \
     * included). LSTM: dg (4) and the cell's gradient before the step, returned; a clipped        \
     * cell passes no gradient to what made it. */                                                 \
    DEFT_DEVICE_FN T deft_rnn_lstm_back_##sfx(T i, T f, T g, T o, T c, T c_prev, T dh, T dc,       \
                                              bool clip, T lo, T hi, T *dg) {                      \
        T tc = deft_tanh(c), dct = dc + dh * o * ((T)1 - tc * tc), raw = f * c_prev + i * g;       \
        dct = !clip || (raw >= lo && raw <= hi) ? dct : (T)0;                                      \
        dg[0] = dct * g * i * ((T)1 - i);                                                          \
        dg[1] = dct * c_prev * f * ((T)1 - f);                                                     \
        dg[2] = dct * i * ((T)1 - g * g);                                                          \
        dg[3] = dh * tc * o * ((T)1 - o);                                                          \
        return dct * f;                                                                            \
    }                                                                                              \
    /* GRU: dgx, dgh (3 each; r scaled the h2h part of n) and the direct part of d h_prev. */      \
    DEFT_DEVICE_FN T deft_rnn_gru_back_##sfx(T r, T z, T n, T hn, T h_prev, T dh, T *dgx,          \
                                             T *dgh) {                                             \
        T dn = dh * ((T)1 - z) * ((T)1 - n * n);                                                   \
        T dr = dn * hn * r * ((T)1 - r), dz = dh * (h_prev - n) * z * ((T)1 - z);                  \
        dgx[0] = dr, dgx[1] = dz, dgx[2] = dn;                                                     \
        dgh[0] = dr, dgh[1] = dz, dgh[2] = dn * r;                                                 \
        return dh * z;                                                                             \
    }                                                                                              \
    /* rnn_relu, rnn_tanh: the pre-activation's gradient from the output h. */                     \
    DEFT_DEVICE_FN T deft_rnn_act_back_##sfx(T h, T dh, int mode) {                                \
        return mode == DEFT_RNN_RELU ? (h > 0 ? dh : (T)0) : dh * ((T)1 - h * h);                  \
    }                                                                                              \
    /* Element (b, k) of a backward step (the GPU's). A row past its sequence's end passes its     \
     * state's gradient through and gives its gates none. */                                       \
    DEFT_DEVICE_FN void deft_rnn_back_elem_##sfx(const deft_rnn_back_step_t *s, int64_t b,         \
                                                 int64_t k) {                                      \
        int64_t H = s->H, G = deft_rnn_gates(s->mode), at = b * H + k;                             \
        T *dgx = (T *)s->dgx + b * G * H + k, *dgh = (T *)s->dgh + b * G * H + k;                  \
        T *dh = (T *)s->dh + at;                                                                   \
        if (!deft_rnn_back_row_valid(s, b)) {                                                      \
            for (int g = 0; g < G; g++) dgx[g * H] = 0, dgh[g * H] = 0;                            \
            return;                                                                                \
        }                                                                                          \
        T dhk = *dh + ((const T *)s->dy)[b * s->dy_stride + k];                                    \
        const T *gt = (const T *)s->gates + b * 4 * H + k;                                         \
        if (s->mode == DEFT_RNN_LSTM) {                                                            \
            T dg[4], *dc = (T *)s->dc + at;                                                        \
            *dc = deft_rnn_lstm_back_##sfx(gt[0], gt[H], gt[2 * H], gt[3 * H],                     \
                                           ((const T *)s->c)[at], ((const T *)s->c_prev)[at], dhk, \
                                           *dc, s->clip, (T)s->clip_min, (T)s->clip_max, dg);      \
            for (int g = 0; g < 4; g++) dgx[g * H] = dg[g];                                        \
            *dh = 0;                                                                               \
        } else if (s->mode == DEFT_RNN_GRU) {                                                      \
            T dx[3], dhh[3];                                                                       \
            *dh = deft_rnn_gru_back_##sfx(gt[0], gt[H], gt[2 * H], gt[3 * H],                      \
                                          ((const T *)s->h_prev)[at], dhk, dx, dhh);               \
            for (int g = 0; g < 3; g++) dgx[g * H] = dx[g], dgh[g * H] = dhh[g];                   \
        } else {                                                                                   \
            *dgx = deft_rnn_act_back_##sfx(((const T *)s->h)[at], dhk, s->mode);                   \
            *dh = 0;                                                                               \
        }                                                                                          \
    }                                                                                              \
    /* Element (b, k) of a step (used where a loop per element is natural: the GPU). */            \
    DEFT_DEVICE_FN void deft_rnn_step_elem_##sfx(const deft_rnn_step_t *s, int64_t b, int64_t k) { \
        int64_t H = s->H, G = deft_rnn_gates(s->mode), row = b * G * H;                            \
        const T *x = (const T *)s->xproj + row;                                                    \
        const T *hp = s->hproj ? (const T *)s->hproj + row : NULL;                                 \
        const T *bx = (const T *)s->bx, *bh = (const T *)s->bh;                                    \
        T h_prev = ((const T *)s->h_prev)[b * H + k], h;                                           \
        T *y = (T *)s->y + b * s->y_stride + k;                                                    \
        if (!deft_rnn_row_valid(s, b)) {                                                           \
            ((T *)s->h)[b * H + k] = h_prev;                                                       \
            if (s->mode == DEFT_RNN_LSTM)                                                          \
                ((T *)s->c)[b * H + k] = ((const T *)s->c_prev)[b * H + k];                        \
            *y = 0;                                                                                \
            return;                                                                                \
        }                                                                                          \
        T pre[4];                                                                                  \
        for (int g = 0; g < G; g++) {                                                              \
            int64_t j = g * H + k;                                                                 \
            pre[g] = x[j] + bx[j] + (hp ? hp[j] : (T)0) + bh[j];                                   \
        }                                                                                          \
        if (s->mode == DEFT_RNN_LSTM) {                                                            \
            T gates[4], c;                                                                         \
            T o = deft_rnn_lstm_##sfx(pre[0], pre[1], pre[2], pre[3],                              \
                                      ((const T *)s->c_prev)[b * H + k], gates, &c);               \
            if (s->clip) c = deft_rnn_clip_##sfx(c, s);                                            \
            ((T *)s->c)[b * H + k] = c;                                                            \
            h = o * deft_tanh(c);                                                                  \
            if (s->gates)                                                                          \
                for (int g = 0; g < 4; g++) ((T *)s->gates)[b * 4 * H + g * H + k] = gates[g];     \
        } else if (s->mode == DEFT_RNN_GRU) {                                                      \
            T gates[4];                                                                            \
            h = deft_rnn_gru_##sfx(                                                                \
                x[k] + bx[k], x[H + k] + bx[H + k], x[2 * H + k] + bx[2 * H + k], hp[k] + bh[k],   \
                hp[H + k] + bh[H + k], hp[2 * H + k] + bh[2 * H + k], h_prev, gates);              \
            if (s->gates)                                                                          \
                for (int g = 0; g < 4; g++) ((T *)s->gates)[b * 4 * H + g * H + k] = gates[g];     \
        } else {                                                                                   \
            h = deft_rnn_act_##sfx(pre[0], s->mode);                                               \
        }                                                                                          \
        ((T *)s->h)[b * H + k] = h;                                                                \
        *y = h;                                                                                    \
    }

DEFT_RNN_CELLS(float, f)
DEFT_RNN_CELLS(double, d)

#endif
