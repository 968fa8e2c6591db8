/*
 * The window arithmetic of Pooling, shared by the CPU and GPU kernels like
 * softmax_math.h. Every pooling is seen as 3-D: a 1-D or 2-D pooling has
 * leading spatial axes of size 1 (kernel 1, stride 1, pad 0), so one set of
 * loops serves all ranks. Values are read and accumulated as double.
 *
 * The windows follow MXNet's pool.h: output o along an axis covers input
 * [o*stride - pad, o*stride - pad + kernel), clipped to the input. Average
 * pooling divides by the window clipped to the padded input (the padding
 * counts, count_include_pad) or to the input itself.
 */
#ifndef DEFT_CORE_POOL_MATH_H
#define DEFT_CORE_POOL_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"

enum { DEFT_POOL_MAX, DEFT_POOL_AVG, DEFT_POOL_SUM, DEFT_POOL_LP };

typedef struct deft_pool_geom {
    int64_t planes;                                      /* batch * channels */
    int64_t in[3], out[3], kernel[3], stride[3], pad[3]; /* (d, h, w) */
    int type;                                            /* DEFT_POOL_* */
    int p;                                               /* Lp pooling's power: 1, 2 or 3 */
    bool count_include_pad;
} deft_pool_geom_t;

/* The input range [*lo, *hi) that output o covers along axis a, and the
 * window's length clipped to the padded input (what an average counts). */
DEFT_DEVICE_FN int64_t deft_pool_span(const deft_pool_geom_t *g, int a, int64_t o, int64_t *lo,
                                      int64_t *hi) {
    int64_t start = o * g->stride[a] - g->pad[a];
    int64_t end = start + g->kernel[a];
    int64_t padded_end = end < g->in[a] + g->pad[a] ? end : g->in[a] + g->pad[a];
    *lo = start > 0 ? start : 0;
    *hi = end < g->in[a] ? end : g->in[a];
    return padded_end - start;
}

/* Where the window of output (od, oh, ow) lies, and the divisor of its sum. */
typedef struct deft_pool_window {
    int64_t lo[3], hi[3];
    double divisor;
} deft_pool_window_t;

DEFT_DEVICE_FN deft_pool_window_t deft_pool_window(const deft_pool_geom_t *g, const int64_t *o) {
    deft_pool_window_t w;
    double padded = 1, inside = 1;
    for (int a = 0; a < 3; a++) {
        padded *= (double)deft_pool_span(g, a, o[a], &w.lo[a], &w.hi[a]);
        inside *= (double)(w.hi[a] - w.lo[a]);
    }
    w.divisor = g->type != DEFT_POOL_AVG ? 1 : g->count_include_pad ? padded : inside;
    return w;
}

DEFT_DEVICE_FN double deft_pool_pow(double x, int p) {
    return p == 1 ? x : p == 2 ? x * x : x * x * x;
}

DEFT_DEVICE_FN double deft_pool_root(double x, int p) {
    return p == 1 ? x : p == 2 ? sqrt(x) : cbrt(x);
}

/* The lowest finite value of a float dtype: an empty max window's result, as MXNet. */
DEFT_DEVICE_FN double deft_pool_lowest(deft_dtype_t dtype) {
    return dtype == DEFT_DT_FLOAT32 ? -3.4028234663852886e38 : -1.7976931348623157e308;
}

/* The pooled value of one window of the plane starting at element `base`. */
DEFT_DEVICE_FN double deft_pool_value(const deft_pool_geom_t *g, const void *x, deft_dtype_t dtype,
                                      int64_t base, const deft_pool_window_t *w) {
    bool max = g->type == DEFT_POOL_MAX;
    int p = g->type == DEFT_POOL_LP ? g->p : 1;
    double acc = max ? deft_pool_lowest(dtype) : 0;
    for (int64_t d = w->lo[0]; d < w->hi[0]; d++)
        for (int64_t h = w->lo[1]; h < w->hi[1]; h++)
            for (int64_t c = w->lo[2]; c < w->hi[2]; c++) {
                double v = deft_load_double(x, dtype, base + (d * g->in[1] + h) * g->in[2] + c);
                if (max)
                    acc = v > acc ? v : acc; /* NaN never wins, as in MXNet */
                else
                    acc += deft_pool_pow(v, p);
            }
    /* An empty window (past the padded end in full mode) sums to 0, as in MXNet, which
     * divides each term rather than the sum. */
    return max ? acc : deft_pool_root(w->divisor != 0 ? acc / w->divisor : acc, p);
}

/* Output element i (over planes * out volume), its plane's base offsets and window. */
DEFT_DEVICE_FN deft_pool_window_t deft_pool_locate(const deft_pool_geom_t *g, int64_t i,
                                                   int64_t *in_base, int64_t *out_base) {
    int64_t o[3];
    o[2] = i % g->out[2];
    o[1] = i / g->out[2] % g->out[1];
    o[0] = i / (g->out[2] * g->out[1]) % g->out[0];
    int64_t plane = i / (g->out[0] * g->out[1] * g->out[2]);
    *in_base = plane * g->in[0] * g->in[1] * g->in[2];
    *out_base = plane * g->out[0] * g->out[1] * g->out[2];
    return deft_pool_window(g, o);
}

/* A gradient call: dx from the output gradient dy, the data x and the output
 * y; with relu, then relu's gradient (x relu's output): _backward_Pooling_relu. */
typedef struct deft_pool_grad {
    deft_pool_geom_t g;
    deft_dtype_t dtype;
    const void *dy, *x, *y;
    void *dx;
    bool relu;
} deft_pool_grad_t;

/* relu's gradient a at relu's output b: scalar_math.h's relu_grad (_backward_relu). */
DEFT_DEVICE_FN double deft_pool_relu_grad(double a, double b) {
    return a * (b > 0 ? 1.0 : b != b ? b : 0.0);
}

/* d output / d input of Lp pooling at input v, for output value out (MXNet's lp_grad). */
DEFT_DEVICE_FN double deft_pool_lp_factor(int p, double v, double out) {
    if (p == 1) return 1;
    if (out == 0) return 0; /* underflowed output: no inf or NaN */
    return p == 2 ? v / out : (v / out) * (v / out);
}

/* Max pooling sends the gradient to the first input equal to the output, as MXNet. */
DEFT_DEVICE_FN void deft_pool_unpool_max(const deft_pool_grad_t *j, const deft_pool_window_t *w,
                                         int64_t in_base, double out, double dy) {
    const deft_pool_geom_t *g = &j->g;
    for (int64_t d = w->lo[0]; d < w->hi[0]; d++)
        for (int64_t h = w->lo[1]; h < w->hi[1]; h++)
            for (int64_t c = w->lo[2]; c < w->hi[2]; c++) {
                int64_t i = in_base + (d * g->in[1] + h) * g->in[2] + c;
                if (deft_load_double(j->x, j->dtype, i) != out) continue;
                deft_store_double(j->dx, j->dtype, i, deft_load_double(j->dx, j->dtype, i) + dy);
                return;
            }
}

/* The other types spread the gradient over the window (Lp weighting each input). */
DEFT_DEVICE_FN void deft_pool_unpool_spread(const deft_pool_grad_t *j, const deft_pool_window_t *w,
                                            int64_t in_base, double out, double dy) {
    const deft_pool_geom_t *g = &j->g;
    int p = g->type == DEFT_POOL_LP ? g->p : 1;
    for (int64_t d = w->lo[0]; d < w->hi[0]; d++)
        for (int64_t h = w->lo[1]; h < w->hi[1]; h++)
            for (int64_t c = w->lo[2]; c < w->hi[2]; c++) {
                int64_t i = in_base + (d * g->in[1] + h) * g->in[2] + c;
                double v = deft_load_double(j->x, j->dtype, i);
                double add = dy * deft_pool_lp_factor(p, v, out) / w->divisor;
                deft_store_double(j->dx, j->dtype, i, deft_load_double(j->dx, j->dtype, i) + add);
            }
}

/* The gradient of one plane, which depends on that plane alone: its dx zeroed,
 * then each output's gradient added to its window's inputs, outputs in order. */
DEFT_DEVICE_FN void deft_pool_unpool_plane(const deft_pool_grad_t *j, int64_t plane) {
    const deft_pool_geom_t *g = &j->g;
    int64_t in_plane = g->in[0] * g->in[1] * g->in[2];
    int64_t out_plane = g->out[0] * g->out[1] * g->out[2];
    for (int64_t i = plane * in_plane; i < (plane + 1) * in_plane; i++)
        deft_store_double(j->dx, j->dtype, i, 0);
    for (int64_t i = plane * out_plane; i < (plane + 1) * out_plane; i++) {
        int64_t in_base, out_base;
        deft_pool_window_t w = deft_pool_locate(g, i, &in_base, &out_base);
        double out = deft_load_double(j->y, j->dtype, i);
        double dy = deft_load_double(j->dy, j->dtype, i);
        if (g->type == DEFT_POOL_MAX)
            deft_pool_unpool_max(j, &w, in_base, out, dy);
        else
            deft_pool_unpool_spread(j, &w, in_base, out, dy);
    }
    for (int64_t i = plane * in_plane; j->relu && i < (plane + 1) * in_plane; i++)
        deft_store_double(j->dx, j->dtype, i,
                          deft_pool_relu_grad(deft_load_double(j->dx, j->dtype, i),
                                              deft_load_double(j->x, j->dtype, i)));
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* Pooling forward on GPU `dev`: y (planes, out...) from x (planes, in...), both of dtype. */
int deft_gpu_pooling(int dev, const deft_pool_geom_t *g, deft_dtype_t dtype, const void *x,
                     void *y);
/* _backward_Pooling on GPU `dev`: a thread per plane. */
int deft_gpu_unpooling(int dev, const deft_pool_grad_t *j);
#ifdef __cplusplus
}
#endif
#endif

#endif
