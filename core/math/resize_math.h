/*
 * The arithmetic of UpSampling and BilinearResize2D and their gradients
 * (core/op/resize.c), shared by the CPU kernels and the GPU ones
 * (core/op/resize.cu) like softmax_math.h. Images are NCHW; a plane is one
 * sample's channel.
 */
#ifndef DEFT_CORE_RESIZE_MATH_H
#define DEFT_CORE_RESIZE_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"

DEFT_DEVICE_FN void deft_resize_add(void *buf, deft_dtype_t dtype, int64_t i, double v) {
    deft_store_double(buf, dtype, i, deft_load_double(buf, dtype, i) + v);
}

/* ---- UpSampling, nearest: each input scaled to the output's size ---- */

#define DEFT_UP_MAX_INPUTS 63 /* DEFT_OP_MAX_INPUTS - 1 */

typedef struct deft_up_nearest {
    int nin;
    bool sum; /* multi_input_mode sum (else concat along channels) */
    deft_dtype_t dtype;
    int64_t C, OH, OW; /* the output's channels and size */
    const void *x[DEFT_UP_MAX_INPUTS];
    int64_t channels[DEFT_UP_MAX_INPUTS], H[DEFT_UP_MAX_INPUTS], W[DEFT_UP_MAX_INPUTS];
    void *y;
} deft_up_nearest_t;

/* Output element (plane, oy, ox): each input feeding the plane, in order (summed
 * through the output's dtype, as written one input after another). */
DEFT_DEVICE_FN void deft_up_nearest_at(const deft_up_nearest_t *u, int64_t plane, int64_t oy,
                                       int64_t ox) {
    int64_t n = plane / u->C, c = plane % u->C, first = 0;
    int64_t at = (plane * u->OH + oy) * u->OW + ox;
    for (int i = 0; i < u->nin; i++) {
        int64_t ch = u->channels[i], ic = u->sum ? c : c - first;
        first += ch;
        if (ic < 0 || ic >= ch) continue;
        int64_t H = u->H[i], W = u->W[i], scale = u->OH / H;
        double v =
            deft_load_double(u->x[i], u->dtype, ((n * ch + ic) * H + oy / scale) * W + ox / scale);
        if (u->sum && i > 0) v += deft_load_double(u->y, u->dtype, at);
        deft_store_double(u->y, u->dtype, at, v);
    }
}

/* The gradient of one input's element (plane, y, x) (its plane of C channels):
 * the sum of its scale x scale block of dy, whose plane is `first` channels on. */
typedef struct deft_up_nearest_grad {
    deft_dtype_t dtype;
    int64_t C, H, W;    /* the input's */
    int64_t GC, OH, OW; /* dy's channels and size */
    int64_t first;      /* the input's first channel in dy (concat), or 0 (sum) */
    const void *dy;
    void *dx;
} deft_up_nearest_grad_t;

DEFT_DEVICE_FN void deft_up_nearest_grad_at(const deft_up_nearest_grad_t *u, int64_t plane,
                                            int64_t y, int64_t x) {
    int64_t scale = u->OH / u->H;
    int64_t g_base = ((plane / u->C) * u->GC + u->first + plane % u->C) * u->OH * u->OW;
    double sum = 0;
    for (int64_t a = 0; a < scale; a++)
        for (int64_t b = 0; b < scale; b++)
            sum +=
                deft_load_double(u->dy, u->dtype, g_base + (y * scale + a) * u->OW + x * scale + b);
    deft_store_double(u->dx, u->dtype, (plane * u->H + y) * u->W + x, sum);
}

/*
 * ---- UpSampling, bilinear ----
 * MXNet runs a depthwise deconvolution, kernel 2 scale - scale % 2, stride
 * scale, padding ceil((scale - 1) / 2): input pixel (iy, ix) of channel c
 * adds x * w[c][ky][kx] to output (iy s - pad + ky, ix s - pad + kx).
 */
typedef struct deft_deconv_job {
    deft_dtype_t dtype;
    int64_t batch, C, H, W, OH, OW, k, stride, pad;
    const void *x, *w, *dy; /* dy: the backward's output gradient */
    void *y, *dx, *dw;      /* y: the forward's output; dx, dw: the backward's */
} deft_deconv_job_t;

/* One plane (n, c), forward (y += x w) or backward (dx = dy w, dw[c] += x dy). */
DEFT_DEVICE_FN void deft_deconv_plane(const deft_deconv_job_t *j, int64_t plane, bool backward) {
    const int64_t c = plane % j->C, in_base = plane * j->H * j->W;
    const int64_t out_base = plane * j->OH * j->OW, w_base = c * j->k * j->k;
    for (int64_t iy = 0; iy < j->H; iy++)
        for (int64_t ix = 0; ix < j->W; ix++) {
            int64_t i = in_base + iy * j->W + ix;
            double x = deft_load_double(j->x, j->dtype, i), dx = 0;
            for (int64_t ky = 0; ky < j->k; ky++) {
                int64_t oy = iy * j->stride - j->pad + ky;
                if (oy < 0 || oy >= j->OH) continue;
                for (int64_t kx = 0; kx < j->k; kx++) {
                    int64_t ox = ix * j->stride - j->pad + kx;
                    if (ox < 0 || ox >= j->OW) continue;
                    int64_t o = out_base + oy * j->OW + ox, t = w_base + ky * j->k + kx;
                    double w = deft_load_double(j->w, j->dtype, t);
                    if (!backward) {
                        deft_resize_add(j->y, j->dtype, o, x * w);
                        continue;
                    }
                    double g = deft_load_double(j->dy, j->dtype, o);
                    dx += g * w;
                    deft_resize_add(j->dw, j->dtype, t, x * g);
                }
            }
            if (backward) deft_store_double(j->dx, j->dtype, i, dx);
        }
}

/* The forward of one plane: zeroed, then every input pixel's kernel added. */
DEFT_DEVICE_FN void deft_deconv_forward_plane(const deft_deconv_job_t *j, int64_t plane) {
    for (int64_t o = plane * j->OH * j->OW; o < (plane + 1) * j->OH * j->OW; o++)
        deft_store_double(j->y, j->dtype, o, 0);
    deft_deconv_plane(j, plane, false);
}

/* The backward of one channel, whose kernel's gradient sums over the whole batch. */
DEFT_DEVICE_FN void deft_deconv_grad_channel(const deft_deconv_job_t *j, int64_t c) {
    for (int64_t t = c * j->k * j->k; t < (c + 1) * j->k * j->k; t++)
        deft_store_double(j->dw, j->dtype, t, 0);
    for (int64_t n = 0; n < j->batch; n++) deft_deconv_plane(j, n * j->C + c, true);
}

/*
 * ---- BilinearResize2D ----
 * Where output coordinate o reads along one axis: i0 and i0 + step, weighted
 * l0 and l1. In float32 as MXNet, so results match its rounding of the
 * source position.
 */
typedef struct deft_lerp {
    int64_t i0, step;
    double l0, l1;
} deft_lerp_t;

DEFT_DEVICE_FN deft_lerp_t deft_lerp_at(int64_t in, int64_t out, bool align, int64_t o) {
    float scale =
        out > 1 ? (align ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out) : 0.0f;
    float src = align ? scale * (float)o : (float)((double)scale * ((double)o + 0.5) - 0.5);
    if (src < 0) src = 0;
    deft_lerp_t l = {(int64_t)src, 0, 0, 0};
    l.step = l.i0 < in - 1 ? 1 : 0;
    l.l1 = (double)(src - (float)l.i0);
    l.l0 = 1 - l.l1;
    return l;
}

typedef struct deft_resize_job {
    deft_dtype_t dtype;
    int64_t H, W, OH, OW;
    bool align;
    const void *src; /* forward: x; backward: dy */
    void *dst;       /* forward: y; backward: dx */
} deft_resize_job_t;

/* Output element (plane, y, x) of the forward, from its row's and column's lerps. */
DEFT_DEVICE_FN void deft_resize_at(const deft_resize_job_t *j, int64_t plane, int64_t y, int64_t x,
                                   deft_lerp_t r, deft_lerp_t c) {
    int64_t top = plane * j->H * j->W + r.i0 * j->W, bottom = top + r.step * j->W;
    double v = r.l0 * (c.l0 * deft_load_double(j->src, j->dtype, top + c.i0) +
                       c.l1 * deft_load_double(j->src, j->dtype, top + c.i0 + c.step)) +
               r.l1 * (c.l0 * deft_load_double(j->src, j->dtype, bottom + c.i0) +
                       c.l1 * deft_load_double(j->src, j->dtype, bottom + c.i0 + c.step));
    deft_store_double(j->dst, j->dtype, (plane * j->OH + y) * j->OW + x, v);
}

/* The backward's output gradient at (plane, y, x) split over its four sources. */
DEFT_DEVICE_FN void deft_unresize_at(const deft_resize_job_t *j, int64_t plane, int64_t y,
                                     int64_t x, deft_lerp_t r, deft_lerp_t c) {
    int64_t top = plane * j->H * j->W + r.i0 * j->W, bottom = top + r.step * j->W;
    double g = deft_load_double(j->src, j->dtype, (plane * j->OH + y) * j->OW + x);
    deft_resize_add(j->dst, j->dtype, top + c.i0, r.l0 * c.l0 * g);
    deft_resize_add(j->dst, j->dtype, top + c.i0 + c.step, r.l0 * c.l1 * g);
    deft_resize_add(j->dst, j->dtype, bottom + c.i0, r.l1 * c.l0 * g);
    deft_resize_add(j->dst, j->dtype, bottom + c.i0 + c.step, r.l1 * c.l1 * g);
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* On GPU `dev` (resize.cu): nearest upsampling and its gradient a thread per
 * element; the bilinear deconvolution a thread per plane (forward) or
 * channel (backward); BilinearResize2D a thread per output element, its
 * gradient a thread per plane (the four sources of outputs overlap). */
int deft_gpu_up_nearest(int dev, const deft_up_nearest_t *u, int64_t planes);
int deft_gpu_up_nearest_grad(int dev, const deft_up_nearest_grad_t *u, int64_t planes);
int deft_gpu_deconv(int dev, const deft_deconv_job_t *j, bool backward);
int deft_gpu_resize(int dev, const deft_resize_job_t *j, int64_t planes, bool backward);
#ifdef __cplusplus
}
#endif
#endif

#endif
