/*
 * Convolution cases and the loops they are checked against, shared by the
 * convolution suites (test_op_conv.c, test_op_conv_half.c).
 */
#ifndef DEFT_TESTS_CONV_REFERENCE_H
#define DEFT_TESTS_CONV_REFERENCE_H

#include "op_helpers.h"

/* A case in up to three spatial dimensions (nd of them used). */
typedef struct conv_case {
    int nd;
    int64_t batch, chan, filt, groups; /* filt: num_filter */
    int64_t in[3], k[3], s[3], p[3], d[3], adj[3];
    bool bias;
    int64_t target[3]; /* Deconvolution's target_shape, when target[0] > 0 */
} conv_case_t;

static inline void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = (double)(((i + 3) * (seed * 29 + 13)) % 23) / 8.0 - 1.4;
}

static inline REFERENCE_LOOP int64_t prod(int nd, const int64_t *v) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= v[i];
    return n;
}

/* Position `flat` of a row-major box `dims` as coordinates. */
static inline REFERENCE_LOOP void unflatten(int nd, const int64_t *dims, int64_t flat,
                                            int64_t *at) {
    for (int i = nd - 1; i >= 0; i--) at[i] = flat % dims[i], flat /= dims[i];
}

static inline REFERENCE_LOOP int64_t flatten(int nd, const int64_t *dims, const int64_t *at) {
    int64_t f = 0;
    for (int i = 0; i < nd; i++) f = f * dims[i] + at[i];
    return f;
}

/* Convolution's output size: (in + 2p - (k - 1) d - 1) / s + 1. */
static inline REFERENCE_LOOP void conv_out(const conv_case_t *c, int64_t *out) {
    for (int i = 0; i < c->nd; i++)
        out[i] = (c->in[i] + 2 * c->p[i] - (c->k[i] - 1) * c->d[i] - 1) / c->s[i] + 1;
}

/* Tap ki of output position o: the input position it reads (at), and
 * whether that lies inside the input. */
static inline REFERENCE_LOOP bool tap_inside(const conv_case_t *c, const int64_t *o, int64_t ki,
                                             int64_t *at) {
    int64_t kk[3];
    unflatten(c->nd, c->k, ki, kk);
    bool inside = true;
    for (int i = 0; i < c->nd; i++) {
        at[i] = o[i] * c->s[i] - c->p[i] + kk[i] * c->d[i];
        inside = inside && at[i] >= 0 && at[i] < c->in[i];
    }
    return inside;
}

/* y[n, f, o] = bias[f] + sum over the group's channels and taps of x[n, c, o s - p + k d] w. */
static inline REFERENCE_LOOP void ref_conv(const conv_case_t *c, const double *x, const double *w,
                                           const double *b, double *y) {
    int64_t out[3], o[3], at[3];
    conv_out(c, out);
    const int64_t cg = c->chan / c->groups, fg = c->filt / c->groups;
    const int64_t osz = prod(c->nd, out), isz = prod(c->nd, c->in), ksz = prod(c->nd, c->k);
    for (int64_t n = 0; n < c->batch; n++)
        for (int64_t f = 0; f < c->filt; f++)
            for (int64_t oi = 0; oi < osz; oi++) {
                unflatten(c->nd, out, oi, o);
                double sum = c->bias ? b[f] : 0;
                for (int64_t ci = 0; ci < cg; ci++)
                    for (int64_t ki = 0; ki < ksz; ki++) {
                        if (!tap_inside(c, o, ki, at)) continue;
                        int64_t ch = f / fg * cg + ci;
                        sum += x[(n * c->chan + ch) * isz + flatten(c->nd, c->in, at)] *
                               w[(f * cg + ci) * ksz + ki];
                    }
                y[(n * c->filt + f) * osz + oi] = sum;
            }
}

/* Deconvolution's padding and adjustment (from target_shape as MXNet computes them). */
static inline REFERENCE_LOOP void deconv_pad(const conv_case_t *c, int64_t *pad, int64_t *adj,
                                             int64_t *out) {
    for (int i = 0; i < c->nd; i++) {
        int64_t full = c->s[i] * (c->in[i] - 1) + (c->k[i] - 1) * c->d[i] + 1;
        pad[i] = c->p[i], adj[i] = c->adj[i];
        if (c->target[0] > 0)
            adj[i] = (full - c->target[i]) % 2, pad[i] = (full - c->target[i] + 1) / 2;
        out[i] = full - 2 * pad[i] + adj[i];
    }
}

/* Each input element scatters x w into y[n, f, i s - p + k d], inside the output. */
static inline REFERENCE_LOOP void ref_deconv(const conv_case_t *c, const double *x, const double *w,
                                             const double *b, double *y) {
    int64_t pad[3], adj[3], out[3], ii[3], kk[3], at[3];
    deconv_pad(c, pad, adj, out);
    const int64_t cg = c->chan / c->groups, fg = c->filt / c->groups;
    const int64_t osz = prod(c->nd, out), isz = prod(c->nd, c->in), ksz = prod(c->nd, c->k);
    for (int64_t n = 0; n < c->batch; n++)
        for (int64_t f = 0; f < c->filt; f++)
            for (int64_t oi = 0; oi < osz; oi++)
                y[(n * c->filt + f) * osz + oi] = c->bias ? b[f] : 0;
    for (int64_t n = 0; n < c->batch; n++)
        for (int64_t ch = 0; ch < c->chan; ch++)
            for (int64_t xi = 0; xi < isz; xi++) {
                unflatten(c->nd, c->in, xi, ii);
                double xv = x[(n * c->chan + ch) * isz + xi];
                for (int64_t fi = 0; fi < fg; fi++)
                    for (int64_t ki = 0; ki < ksz; ki++) {
                        unflatten(c->nd, c->k, ki, kk);
                        bool inside = true;
                        for (int i = 0; i < c->nd; i++) {
                            at[i] = ii[i] * c->s[i] - pad[i] + kk[i] * c->d[i];
                            inside = inside && at[i] >= 0 && at[i] < out[i];
                        }
                        if (!inside) continue;
                        int64_t f = ch / cg * fg + fi;
                        y[(n * c->filt + f) * osz + flatten(c->nd, out, at)] +=
                            xv * w[(ch * fg + fi) * ksz + ki];
                    }
            }
}

static inline void tuple_text(int nd, const int64_t *v, char *buf, size_t len) {
    snprintf(buf, len,
             nd == 1   ? "(%lld,)"
             : nd == 2 ? "(%lld,%lld)"
                       : "(%lld,%lld,%lld)",
             (long long)v[0], (long long)v[1], (long long)v[2]);
}

/* A case's parameters as operator parameter texts. */
typedef struct conv_texts {
    char kernel[64], stride[64], dilate[64], pad[64], adj[64], target[64], nf[16], ng[16];
    const char *no_bias;
} conv_texts_t;

static inline void conv_texts(const conv_case_t *c, conv_texts_t *t) {
    tuple_text(c->nd, c->k, t->kernel, sizeof t->kernel);
    tuple_text(c->nd, c->s, t->stride, sizeof t->stride);
    tuple_text(c->nd, c->d, t->dilate, sizeof t->dilate);
    tuple_text(c->nd, c->p, t->pad, sizeof t->pad);
    tuple_text(c->nd, c->adj, t->adj, sizeof t->adj);
    tuple_text(c->nd, c->target, t->target, sizeof t->target);
    snprintf(t->nf, sizeof t->nf, "%lld", (long long)c->filt);
    snprintf(t->ng, sizeof t->ng, "%lld", (long long)c->groups);
    t->no_bias = c->bias ? "false" : "true";
}

/* Quarters in [-2, 2.5] in no short period: exact in float16 and bfloat16,
 * and their products' sums over a few thousand terms exact in float32. */
static inline void fill_quarters(double *v, int64_t n, uint32_t seed) {
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((((uint32_t)i * 2654435761u + seed * 40503u) >> 9 & 0xffff) % 19) / 4.0 - 2;
}

/* The operands of a case: quarters for the 16-bit dtypes, else fill's. */
static inline void fill_for(int dtype, double *v, int64_t n, int seed) {
    if (dtype == DEFT_FLOAT16 || dtype == DEFT_BFLOAT16)
        fill_quarters(v, n, (uint32_t)seed);
    else
        fill(v, n, seed);
}

/* The result of a case against the reference: to within tol (relative, plus
 * as much absolute), or, for float16 and bfloat16, the exact value rounded
 * once (their sums in float32 are exact: fill_for). */
static inline void assert_result(DeftNDArrayHandle h, int dtype, int64_t n, const double *want,
                                 double tol) {
    if (dtype == DEFT_FLOAT16 || dtype == DEFT_BFLOAT16)
        assert_half_rounded(h, dtype, n, want);
    else
        assert_values(h, n, want, tol);
}

/* Run the case through the operator in dtype and compare with the reference. */
static inline void check_case_within(const conv_case_t *c, bool deconv, int dtype, double tol) {
    conv_texts_t t;
    conv_texts(c, &t);
    int64_t xshape[5] = {c->batch, c->chan}, wshape[5], yshape[5] = {c->batch, c->filt}, out[3];
    int64_t pads[3], adjs[3];
    wshape[0] = deconv ? c->chan : c->filt;
    wshape[1] = (deconv ? c->filt : c->chan) / c->groups;
    if (deconv)
        deconv_pad(c, pads, adjs, out);
    else
        conv_out(c, out);
    for (int i = 0; i < c->nd; i++)
        xshape[2 + i] = c->in[i], wshape[2 + i] = c->k[i], yshape[2 + i] = out[i];
    const int nd = c->nd + 2;
    int64_t nx = count_of(nd, xshape), nw = count_of(nd, wshape), ny = count_of(nd, yshape);
    double *x = malloc(sizeof(double) * (size_t)(nx + 1)), *w = malloc(sizeof(double) * (size_t)nw);
    double *b = malloc(sizeof(double) * (size_t)c->filt),
           *want = malloc(sizeof(double) * (size_t)(ny + 1));
    fill_for(dtype, x, nx, 1);
    fill_for(dtype, w, nw, 2);
    fill_for(dtype, b, c->filt, 3);
    (deconv ? ref_deconv : ref_conv)(c, x, w, b, want);
    DeftNDArrayHandle in[3] = {make(dtype, nd, xshape, x), make(dtype, nd, wshape, w),
                               make(dtype, 1, (int64_t[]){c->filt}, b)};
    DeftNDArrayHandle y =
        deconv ? call1("Deconvolution", c->bias ? 3 : 2, in,
                       c->target[0] > 0 ? P("kernel", t.kernel, "stride", t.stride, "dilate",
                                            t.dilate, "target_shape", t.target, "num_filter", t.nf,
                                            "num_group", t.ng, "no_bias", t.no_bias)
                                        : P("kernel", t.kernel, "stride", t.stride, "dilate",
                                            t.dilate, "pad", t.pad, "adj", t.adj, "num_filter",
                                            t.nf, "num_group", t.ng, "no_bias", t.no_bias))
               : call1("Convolution", c->bias ? 3 : 2, in,
                       P("kernel", t.kernel, "stride", t.stride, "dilate", t.dilate, "pad", t.pad,
                         "num_filter", t.nf, "num_group", t.ng, "no_bias", t.no_bias));
    assert_shape(y, nd, yshape);
    assert_result(y, dtype, ny, want, tol);
    free_all(3, in);
    free_all(1, &y);
    free(x), free(w), free(b), free(want);
}

static inline void check_case(const conv_case_t *c, bool deconv, int dtype) {
    check_case_within(c, deconv, dtype, dtype == DEFT_FLOAT32 ? 2e-5 : 1e-12);
}

/* Shorthand for the cases: 1 in unused dimensions keeps tuple_text's output valid. */
#define DIMS(...)                                                                                  \
    { __VA_ARGS__ }

static const conv_case_t conv_cases[] = {
    /* 1-D: plain, then stride, padding and dilation together */
    {1, 2, 3, 4, 1, DIMS(9), DIMS(3), DIMS(1), DIMS(0), DIMS(1), DIMS(0), true, DIMS(0)},
    {1, 2, 3, 4, 1, DIMS(11), DIMS(3), DIMS(2), DIMS(1), DIMS(2), DIMS(0), true, DIMS(0)},
    /* 2-D: 3x3 same padding, stride 2, dilation, a rectangular kernel */
    {2, 2, 3, 5, 1, DIMS(7, 6), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 3, 2, 4, 1, DIMS(9, 8), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 2, 3, 1, DIMS(9, 10), DIMS(3, 2), DIMS(1, 1), DIMS(2, 0), DIMS(2, 3), DIMS(0), false,
     DIMS(0)},
    {2, 2, 3, 2, 1, DIMS(6, 9), DIMS(2, 3), DIMS(1, 2), DIMS(0, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* groups, depthwise, depthwise with a multiplier, 1x1 */
    {2, 2, 4, 6, 2, DIMS(5, 6), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 3, 3, 3, DIMS(7, 8), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 3, 3, 3, DIMS(9, 8), DIMS(3, 3), DIMS(2, 2), DIMS(1, 0), DIMS(2, 1), DIMS(0), false,
     DIMS(0)},
    {2, 2, 2, 4, 2, DIMS(6, 6), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 3, 4, 5, 1, DIMS(5, 7), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    {2, 2, 4, 6, 2, DIMS(5, 7), DIMS(1, 1), DIMS(2, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* many channels: the im2col matrix spans several tiles */
    {2, 2, 64, 8, 1, DIMS(14, 40), DIMS(3, 3), DIMS(1, 1), DIMS(1, 1), DIMS(1, 1), DIMS(0), true,
     DIMS(0)},
    /* 3-D */
    {3, 2, 2, 3, 1, DIMS(4, 5, 6), DIMS(2, 3, 2), DIMS(1, 2, 1), DIMS(1, 0, 1), DIMS(1, 1, 2),
     DIMS(0), true, DIMS(0)},
    {3, 1, 4, 4, 2, DIMS(3, 4, 4), DIMS(3, 3, 3), DIMS(1, 1, 1), DIMS(1, 1, 1), DIMS(1, 1, 1),
     DIMS(0), false, DIMS(0)},
};

static const conv_case_t deconv_cases[] = {
    /* 1-D with stride, padding and adj */
    {1, 2, 3, 2, 1, DIMS(5), DIMS(3), DIMS(2), DIMS(1), DIMS(1), DIMS(1), true, DIMS(0)},
    {1, 2, 2, 3, 1, DIMS(6), DIMS(4), DIMS(1), DIMS(0), DIMS(2), DIMS(0), false, DIMS(0)},
    /* 2-D: stride 2 with adj, groups, dilation, depthwise, 1x1 */
    {2, 2, 3, 4, 1, DIMS(4, 5), DIMS(3, 3), DIMS(2, 2), DIMS(1, 1), DIMS(1, 1), DIMS(1, 0), true,
     DIMS(0)},
    {2, 2, 4, 6, 2, DIMS(4, 3), DIMS(3, 2), DIMS(2, 3), DIMS(1, 0), DIMS(1, 1), DIMS(0, 2), true,
     DIMS(0)},
    {2, 1, 2, 3, 1, DIMS(5, 5), DIMS(3, 3), DIMS(1, 1), DIMS(2, 1), DIMS(2, 2), DIMS(0, 0), false,
     DIMS(0)},
    {2, 2, 3, 3, 3, DIMS(5, 4), DIMS(3, 3), DIMS(2, 1), DIMS(1, 1), DIMS(1, 1), DIMS(1, 0), true,
     DIMS(0)},
    {2, 2, 3, 5, 1, DIMS(4, 6), DIMS(1, 1), DIMS(1, 1), DIMS(0, 0), DIMS(1, 1), DIMS(0, 0), true,
     DIMS(0)},
    /* target_shape: pad and adj follow from it (one even and one odd difference) */
    {2, 2, 2, 3, 1, DIMS(4, 4), DIMS(3, 3), DIMS(2, 2), DIMS(0, 0), DIMS(1, 1), DIMS(0, 0), true,
     DIMS(8, 7)},
    /* 3-D */
    {3, 2, 2, 3, 1, DIMS(2, 3, 3), DIMS(2, 3, 2), DIMS(2, 1, 2), DIMS(0, 1, 1), DIMS(1, 1, 1),
     DIMS(1, 0, 1), true, DIMS(0)},
};

/* The three gradients of a convolution by one scatter loop: each product
 * dy[n, f, o] w[f, c, k] x[n, c, at] feeds dx, dW and db. */
static inline REFERENCE_LOOP void ref_conv_grads(const conv_case_t *c, const double *x,
                                                 const double *w, const double *dy, double *dx,
                                                 double *dw, double *db) {
    int64_t out[3], o[3], at[3];
    conv_out(c, out);
    const int64_t cg = c->chan / c->groups, fg = c->filt / c->groups;
    const int64_t osz = prod(c->nd, out), isz = prod(c->nd, c->in), ksz = prod(c->nd, c->k);
    memset(dx, 0, sizeof(double) * (size_t)(c->batch * c->chan * isz));
    memset(dw, 0, sizeof(double) * (size_t)(c->filt * cg * ksz));
    memset(db, 0, sizeof(double) * (size_t)c->filt);
    for (int64_t n = 0; n < c->batch; n++)
        for (int64_t f = 0; f < c->filt; f++)
            for (int64_t oi = 0; oi < osz; oi++) {
                unflatten(c->nd, out, oi, o);
                double g = dy[(n * c->filt + f) * osz + oi];
                db[f] += g;
                for (int64_t ci = 0; ci < cg; ci++)
                    for (int64_t ki = 0; ki < ksz; ki++) {
                        if (!tap_inside(c, o, ki, at)) continue;
                        int64_t xi =
                            (n * c->chan + f / fg * cg + ci) * isz + flatten(c->nd, c->in, at);
                        int64_t wi = (f * cg + ci) * ksz + ki;
                        dx[xi] += g * w[wi];
                        dw[wi] += g * x[xi];
                    }
            }
}

#endif
