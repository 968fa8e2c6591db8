/*
 * Resizing NCHW images: UpSampling (nearest neighbour, of one or several
 * inputs, or bilinear through a learned depthwise kernel as MXNet's
 * deconvolution does it) and BilinearResize2D (MXNet's
 * _contrib_BilinearResize2D), with their gradients. All run per image plane
 * (one batch item's channel), in parallel over planes.
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"

static int64_t plane_size(const deft_shape_t *s) {
    return s->dims[2] * s->dims[3];
}

static int check_4d(const deft_op_t *op, int k, const char *name, const deft_shape_t *s) {
    if (s->ndim == 4) return 0;
    char text[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE,
                         "input %d (%s) has shape %s, expected 4-D (batch, channel, y, x)", k, name,
                         deft_shape_format(s, text, sizeof text));
}

/* ---- UpSampling ---- */

enum { UP_SCALE, UP_NUM_FILTER, UP_TYPE, UP_MODE, UP_NUM_ARGS, UP_WORKSPACE };
enum { UP_NEAREST, UP_BILINEAR };
static const char *const sample_types[] = {"nearest", "bilinear", NULL};
static const char *const input_modes[] = {"concat", "sum", NULL};

static const deft_param_def_t up_params[] = {
    {"scale", DEFT_PARAM_INT, NULL, "upsampling factor", NULL, false},
    {"num_filter", DEFT_PARAM_INT, "0", "channels (bilinear only)", NULL, false},
    {"sample_type", DEFT_PARAM_ENUM, NULL, "nearest or bilinear", sample_types, false},
    {"multi_input_mode", DEFT_PARAM_ENUM, "concat",
     "several inputs: concat along channels or sum (nearest only)", input_modes, false},
    {"num_args", DEFT_PARAM_INT, NULL, "inputs (bilinear: 2, data and weight)", NULL, false},
    {"workspace", DEFT_PARAM_INT, "512", "accepted for MXNet compatibility (MB)", NULL, false},
    {0}};

static int up_num_inputs(const deft_param_value_t *p) {
    if (p[UP_TYPE].i == UP_BILINEAR) return 2;
    int64_t n = p[UP_NUM_ARGS].i;
    return n < 1 ? 1 : n > DEFT_OP_MAX_INPUTS - 1 ? DEFT_OP_MAX_INPUTS - 1 : (int)n;
}

/* The bilinear kernel's size, stride and padding, as MXNet's deconvolution. */
static int64_t bilinear_kernel(int64_t scale) {
    return 2 * scale - scale % 2;
}

static int64_t bilinear_pad(int64_t scale) {
    return scale / 2; /* ceil((scale - 1) / 2) */
}

static int up_check_bilinear(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in) {
    char s[DEFT_SHAPE_STR_MAX];
    if (nin != 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "bilinear sampling takes 2 inputs (data, weight), got %d", nin);
    if (check_4d(op, 0, "data", &in[0].shape)) return -1;
    int64_t c = in[0].shape.dims[1], k = bilinear_kernel(p[UP_SCALE].i);
    if (p[UP_NUM_FILTER].i != c)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "num_filter is %lld, expected the data's %lld channels",
                             (long long)p[UP_NUM_FILTER].i, (long long)c);
    deft_shape_t want = {4, {c, 1, k, k}};
    if (!deft_shape_equal(&in[1].shape, &want))
        return deft_op_error(
            op, DEFT_ERR_VALUE, "input 1 (weight) has shape %s, expected (%lld,1,%lld,%lld)",
            deft_shape_format(&in[1].shape, s, sizeof s), (long long)c, (long long)k, (long long)k);
    return 0;
}

/* Every input of a nearest upsampling is scaled to input 0's size times scale. */
static int up_check_nearest(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int64_t *channels) {
    char s[DEFT_SHAPE_STR_MAX];
    if (nin != p[UP_NUM_ARGS].i)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_args is %lld but %d inputs were given",
                             (long long)p[UP_NUM_ARGS].i, nin);
    bool sum = p[UP_MODE].i == 1;
    int64_t oh = 0, ow = 0;
    *channels = 0;
    for (int i = 0; i < nin; i++) {
        const deft_shape_t *x = &in[i].shape;
        if (check_4d(op, i, "data", x)) return -1;
        if (i == 0) oh = x->dims[2] * p[UP_SCALE].i, ow = x->dims[3] * p[UP_SCALE].i;
        if (nin > 1 && (x->dims[2] == 0 || x->dims[3] == 0 || oh % x->dims[2] || ow % x->dims[3] ||
                        oh / x->dims[2] != ow / x->dims[3]))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input %d has shape %s; its height and width must divide the "
                                 "output's (%lld, %lld) by the same factor",
                                 i, deft_shape_format(x, s, sizeof s), (long long)oh,
                                 (long long)ow);
        if (x->dims[0] != in[0].shape.dims[0])
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d has batch %lld, input 0 has %lld", i,
                                 (long long)x->dims[0], (long long)in[0].shape.dims[0]);
        if (sum && i > 0 && x->dims[1] != *channels)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input %d has %lld channels, expected %lld: multi_input_mode sum "
                                 "needs equal channels",
                                 i, (long long)x->dims[1], (long long)*channels);
        *channels = sum ? x->dims[1] : *channels + x->dims[1];
    }
    return 0;
}

static int up_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                    const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int64_t scale = p[UP_SCALE].i, channels = 0;
    if (scale < 1 || scale > INT32_MAX)
        return deft_op_error(op, DEFT_ERR_VALUE, "scale is %lld, expected 1 to 2^31 - 1",
                             (long long)scale);
    if (in[0].shape.ndim == 4 &&
        (in[0].shape.dims[2] > INT32_MAX || in[0].shape.dims[3] > INT32_MAX))
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 is too large to upsample");
    if (p[UP_NUM_ARGS].i < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_args is %lld, expected >= 1",
                             (long long)p[UP_NUM_ARGS].i);
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) || deft_op_check_same_dtype(op, nin, in))
        return -1;
    if (p[UP_TYPE].i == UP_BILINEAR ? up_check_bilinear(op, p, nin, in)
                                    : up_check_nearest(op, p, nin, in, &channels))
        return -1;
    out[0] = in[0];
    if (p[UP_TYPE].i == UP_NEAREST) out[0].shape.dims[1] = channels;
    out[0].shape.dims[2] *= scale, out[0].shape.dims[3] *= scale;
    *nout = 1;
    return 0;
}

/* Nearest: plane `plane` of the output, from whichever input feeds it. */
typedef struct up_job {
    int nin;
    const deft_tensor_t *in;
    const deft_tensor_t *out;
    bool sum;
} up_job_t;

/* Output plane (n, c) as the sum (or copy) of each input's contribution. */
static void up_nearest_planes(void *arg, int64_t begin, int64_t end) {
    const up_job_t *j = arg;
    const deft_shape_t *os = &j->out->shape;
    deft_dtype_t dt = j->out->dtype;
    int64_t OH = os->dims[2], OW = os->dims[3], C = os->dims[1];
    for (int64_t plane = begin; plane < end; plane++) {
        int64_t n = plane / C, c = plane % C, first = 0;
        int64_t out_base = plane * OH * OW;
        for (int i = 0; i < j->nin; i++) {
            const deft_shape_t *xs = &j->in[i].shape;
            int64_t ch = xs->dims[1], ic = j->sum ? c : c - first;
            first += ch;
            if (ic < 0 || ic >= ch) continue;
            int64_t H = xs->dims[2], W = xs->dims[3], scale = OH / H;
            int64_t in_base = (n * ch + ic) * H * W;
            const void *x = deft_tensor_data(&j->in[i]);
            for (int64_t y = 0; y < OH; y++)
                for (int64_t xo = 0; xo < OW; xo++) {
                    double v = deft_load_double(x, dt, in_base + y / scale * W + xo / scale);
                    int64_t at = out_base + y * OW + xo;
                    if (j->sum && i > 0) v += deft_load_double(deft_tensor_data(j->out), dt, at);
                    deft_store_double(deft_tensor_data(j->out), dt, at, v);
                }
        }
    }
}

/*
 * Bilinear: MXNet runs a depthwise deconvolution, kernel 2 scale - scale % 2,
 * stride scale, padding ceil((scale - 1) / 2): input pixel (iy, ix) of
 * channel c adds x * w[c][ky][kx] to output (iy s - pad + ky, ix s - pad + kx).
 */
typedef struct deconv_job {
    deft_dtype_t dtype;
    int64_t batch, C, H, W, OH, OW, k, stride, pad;
    const void *x, *w, *dy; /* dy: the backward's output gradient */
    void *y, *dx, *dw;      /* y: the forward's output; dx, dw: the backward's */
} deconv_job_t;

static double load(const void *buf, deft_dtype_t dtype, int64_t i) {
    return deft_load_double(buf, dtype, i);
}

static void add_to(void *buf, deft_dtype_t dtype, int64_t i, double v) {
    deft_store_double(buf, dtype, i, deft_load_double(buf, dtype, i) + v);
}

/* One plane (n, c), forward (y += x w) or backward (dx = dy w, dw[c] += x dy). */
static void deconv_plane(const deconv_job_t *j, int64_t plane, bool backward) {
    const int64_t c = plane % j->C, in_base = plane * j->H * j->W;
    const int64_t out_base = plane * j->OH * j->OW, w_base = c * j->k * j->k;
    for (int64_t iy = 0; iy < j->H; iy++)
        for (int64_t ix = 0; ix < j->W; ix++) {
            int64_t i = in_base + iy * j->W + ix;
            double x = load(j->x, j->dtype, i), dx = 0;
            for (int64_t ky = 0; ky < j->k; ky++) {
                int64_t oy = iy * j->stride - j->pad + ky;
                if (oy < 0 || oy >= j->OH) continue;
                for (int64_t kx = 0; kx < j->k; kx++) {
                    int64_t ox = ix * j->stride - j->pad + kx;
                    if (ox < 0 || ox >= j->OW) continue;
                    int64_t o = out_base + oy * j->OW + ox, t = w_base + ky * j->k + kx;
                    double w = load(j->w, j->dtype, t);
                    if (!backward) {
                        add_to(j->y, j->dtype, o, x * w);
                        continue;
                    }
                    double g = load(j->dy, j->dtype, o);
                    dx += g * w;
                    add_to(j->dw, j->dtype, t, x * g);
                }
            }
            if (backward) deft_store_double(j->dx, j->dtype, i, dx);
        }
}

static void deconv_planes(void *arg, int64_t begin, int64_t end) {
    const deconv_job_t *j = arg;
    size_t elem = deft_dtype_size(j->dtype);
    memset((char *)j->y + (size_t)(begin * j->OH * j->OW) * elem, 0,
           (size_t)((end - begin) * j->OH * j->OW) * elem);
    for (int64_t plane = begin; plane < end; plane++) deconv_plane(j, plane, false);
}

/* The backward by channel: a channel's kernel gradient sums over the whole batch. */
static void deconv_grad_channels(void *arg, int64_t begin, int64_t end) {
    const deconv_job_t *j = arg;
    size_t kernel_bytes = (size_t)(j->k * j->k) * deft_dtype_size(j->dtype);
    memset((char *)j->dw + (size_t)begin * kernel_bytes, 0, (size_t)(end - begin) * kernel_bytes);
    for (int64_t c = begin; c < end; c++)
        for (int64_t n = 0; n < j->batch; n++) deconv_plane(j, n * j->C + c, true);
}

static deconv_job_t deconv_job(const deft_tensor_t *x, const deft_tensor_t *w, int64_t scale) {
    const deft_shape_t *s = &x->shape;
    return (deconv_job_t){.dtype = x->dtype,
                          .batch = s->dims[0],
                          .C = s->dims[1],
                          .H = s->dims[2],
                          .W = s->dims[3],
                          .OH = s->dims[2] * scale,
                          .OW = s->dims[3] * scale,
                          .k = bilinear_kernel(scale),
                          .stride = scale,
                          .pad = bilinear_pad(scale),
                          .x = deft_tensor_data(x),
                          .w = deft_tensor_data(w)};
}

static int64_t grain_for(int64_t work_per_item) {
    return DEFT_PARALLEL_GRAIN / (work_per_item + 1) + 1;
}

static int up_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nout;
    const deft_shape_t *os = &out[0].shape;
    int64_t planes = os->dims[0] * os->dims[1];
    if (deft_shape_size(os) == 0) return 0;
    if (p[UP_TYPE].i == UP_NEAREST) {
        up_job_t j = {nin, in, &out[0], p[UP_MODE].i == 1};
        deft_parallel_for(planes, grain_for(plane_size(os) * nin), up_nearest_planes, &j);
        return 0;
    }
    deconv_job_t j = deconv_job(&in[0], &in[1], p[UP_SCALE].i);
    j.y = deft_tensor_data(&out[0]);
    deft_parallel_for(planes, grain_for(plane_size(&in[0].shape) * j.k * j.k), deconv_planes, &j);
    return 0;
}

/*
 * _backward_UpSampling: (out_grad, the forward's inputs...) -> their
 * gradients. Nearest sums each scale x scale block of the output gradient
 * (reading only the inputs' shapes); bilinear correlates it with the kernel.
 */
static int up_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_desc_t y;
    int n;
    if (nin < 2) return deft_op_input_count_error(op, nin);
    if (up_infer(op, p, nin - 1, in + 1, &n, &y)) return -1;
    if (!deft_shape_equal(&y.shape, &in[0].shape) || y.dtype != in[0].dtype) {
        char s[DEFT_SHAPE_STR_MAX], want[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (out_grad) has shape %s, expected %s",
                             deft_shape_format(&in[0].shape, s, sizeof s),
                             deft_shape_format(&y.shape, want, sizeof want));
    }
    for (int k = 1; k < nin; k++) out[k - 1] = in[k];
    *nout = nin - 1;
    return 0;
}

typedef struct up_grad_job {
    const deft_tensor_t *dy, *dx;
    int64_t first; /* dx's first channel in dy (concat), or 0 (sum) */
} up_grad_job_t;

static void up_nearest_grad_planes(void *arg, int64_t begin, int64_t end) {
    const up_grad_job_t *j = arg;
    const deft_shape_t *gs = &j->dy->shape, *xs = &j->dx->shape;
    deft_dtype_t dt = j->dx->dtype;
    int64_t OH = gs->dims[2], OW = gs->dims[3], H = xs->dims[2], W = xs->dims[3];
    int64_t C = xs->dims[1], scale = OH / H;
    for (int64_t plane = begin; plane < end; plane++) {
        int64_t g_base = ((plane / C) * gs->dims[1] + j->first + plane % C) * OH * OW;
        for (int64_t y = 0; y < H; y++)
            for (int64_t x = 0; x < W; x++) {
                double sum = 0;
                for (int64_t a = 0; a < scale; a++)
                    for (int64_t b = 0; b < scale; b++)
                        sum += load(deft_tensor_data(j->dy), dt,
                                    g_base + (y * scale + a) * OW + x * scale + b);
                deft_store_double(deft_tensor_data(j->dx), dt, plane * H * W + y * W + x, sum);
            }
    }
}

static int up_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin;
    if (p[UP_TYPE].i == UP_BILINEAR) {
        deconv_job_t j = deconv_job(&in[1], &in[2], p[UP_SCALE].i);
        j.dy = deft_tensor_data(&in[0]);
        j.dx = deft_tensor_data(&out[0]), j.dw = deft_tensor_data(&out[1]);
        int64_t work = j.batch * plane_size(&in[1].shape) * j.k * j.k;
        deft_parallel_for(j.C, grain_for(work), deconv_grad_channels, &j);
        return 0;
    }
    for (int i = 0, first = 0; i < nout; i++) {
        const deft_shape_t *xs = &out[i].shape;
        up_grad_job_t j = {&in[0], &out[i], p[UP_MODE].i == 1 ? 0 : first};
        first += (int)xs->dims[1];
        if (deft_shape_size(xs) == 0) continue;
        int64_t work = deft_shape_size(&in[0].shape) / (in[0].shape.dims[0] * in[0].shape.dims[1]);
        deft_parallel_for(xs->dims[0] * xs->dims[1], grain_for(work), up_nearest_grad_planes, &j);
    }
    return 0;
}

static int up_backward_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p;
    return num_inputs > 1 ? num_inputs - 1 : 1;
}

static int grad_upsampling(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                           deft_gref_t *in_grads) {
    (void)p;
    const char *params[2 * 6 + 1];
    deft_gref_t in[DEFT_OP_MAX_INPUTS];
    in[0] = b->out_grad(b, 0);
    for (int i = 0; i < nin && i + 1 < DEFT_OP_MAX_INPUTS; i++) in[i + 1] = b->input(b, i);
    deft_gref_t r =
        b->apply(b, "_backward_UpSampling", nin + 1, in, g_forward_params(b, up_params, params), 0);
    for (int i = 0; i < nin; i++) in_grads[i] = (deft_gref_t){r.node, i};
    return 0;
}

/* ---- BilinearResize2D ---- */

enum { BR_HEIGHT, BR_WIDTH, BR_SCALE_H, BR_SCALE_W, BR_MODE, BR_ALIGN };
enum { BR_SIZE, BR_ODD_SCALE, BR_LIKE, BR_EVEN_DOWN, BR_EVEN_UP, BR_ODD_DOWN, BR_ODD_UP };
static const char *const resize_modes[] = {"size",       "odd_scale",   "like",      "to_even_down",
                                           "to_even_up", "to_odd_down", "to_odd_up", NULL};

static const deft_param_def_t resize_params[] = {
    {"height", DEFT_PARAM_INT, "1", "output height (mode size, without scale_height)", NULL, false},
    {"width", DEFT_PARAM_INT, "1", "output width (mode size, without scale_height)", NULL, false},
    {"scale_height", DEFT_PARAM_FLOAT, "None", "height factor (modes size and odd_scale)", NULL,
     true},
    {"scale_width", DEFT_PARAM_FLOAT, "None", "width factor (modes size and odd_scale)", NULL,
     true},
    {"mode", DEFT_PARAM_ENUM, "size",
     "size, odd_scale, like (input 1's size), to_even_down, to_even_up, to_odd_down, to_odd_up",
     resize_modes, false},
    {"align_corners", DEFT_PARAM_BOOL, "true", "corner pixels of input and output align", NULL,
     false},
    {0}};

static int resize_num_inputs(const deft_param_value_t *p) {
    return p[BR_MODE].i == BR_LIKE ? 2 : 1;
}

/* MXNet scales in float32 and truncates; -1 (refused) when the result is out of int range. */
static int64_t scaled(int64_t size, double scale) {
    float v = (float)scale * (float)size;
    return v >= 0 && v < 2147483648.0f ? (int64_t)v : -1;
}

/* An axis of `size` resized by mode (not size or like): odd_scale or the parities. */
static int64_t resize_axis(int mode, int64_t size, double scale) {
    bool odd = size % 2 == 1;
    switch (mode) {
    case BR_ODD_SCALE:
        if (!odd) return scaled(size, scale);
        return scaled(size - 1, scale) < 0 ? -1 : scaled(size - 1, scale) + 1;
    case BR_EVEN_DOWN:
        return odd ? size - 1 : size;
    case BR_EVEN_UP:
        return odd ? size + 1 : size;
    case BR_ODD_DOWN:
        return odd ? size : size - 1;
    default: /* BR_ODD_UP */
        return odd ? size : size + 1;
    }
}

static int resize_out_size(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int64_t *oh, int64_t *ow) {
    int mode = (int)p[BR_MODE].i;
    const deft_shape_t *x = &in[0].shape;
    bool sh = !p[BR_SCALE_H].none, sw = !p[BR_SCALE_W].none;
    if (nin != resize_num_inputs(p))
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d for mode %s", nin,
                             resize_num_inputs(p), resize_modes[mode]);
    if (p[BR_HEIGHT].i < 1 || p[BR_WIDTH].i < 1 || p[BR_HEIGHT].i > INT32_MAX ||
        p[BR_WIDTH].i > INT32_MAX)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "height and width are %lld and %lld, expected 1 to 2^31 - 1",
                             (long long)p[BR_HEIGHT].i, (long long)p[BR_WIDTH].i);
    if ((mode == BR_SIZE && sh && !sw) || (mode == BR_ODD_SCALE && !(sh && sw)))
        return deft_op_error(op, DEFT_ERR_VALUE, "mode %s with scale_height needs scale_width too",
                             resize_modes[mode]);
    if (mode == BR_SIZE) { /* scale_width alone is ignored, as in MXNet */
        *oh = sh ? scaled(x->dims[2], p[BR_SCALE_H].f) : p[BR_HEIGHT].i;
        *ow = sh ? scaled(x->dims[3], p[BR_SCALE_W].f) : p[BR_WIDTH].i;
    } else if (mode == BR_LIKE) {
        if (check_4d(op, 1, "like", &in[1].shape)) return -1;
        *oh = in[1].shape.dims[2], *ow = in[1].shape.dims[3];
    } else {
        *oh = resize_axis(mode, x->dims[2], p[BR_SCALE_H].f);
        *ow = resize_axis(mode, x->dims[3], p[BR_SCALE_W].f);
    }
    if (*oh < 0 || *ow < 0 || ((*oh > 0 && *ow > 0) && (x->dims[2] == 0 || x->dims[3] == 0)))
        return deft_op_error(op, DEFT_ERR_VALUE, "cannot resize a %lldx%lld image to %lldx%lld",
                             (long long)x->dims[2], (long long)x->dims[3], (long long)*oh,
                             (long long)*ow);
    return 0;
}

static int resize_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int64_t oh = 0, ow = 0; /* set by resize_out_size; initialised for -O3 flow analysis */
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) || check_4d(op, 0, "data", &in[0].shape) ||
        resize_out_size(op, p, nin, in, &oh, &ow))
        return -1;
    out[0] = in[0];
    out[0].shape.dims[2] = oh, out[0].shape.dims[3] = ow;
    *nout = 1;
    return 0;
}

/* Where output coordinate o reads along one axis: i0 and i0 + step, weighted l0 and l1.
 * In float32 as MXNet, so results match its rounding of the source position. */
typedef struct lerp {
    int64_t i0, step;
    double l0, l1;
} lerp_t;

static lerp_t lerp_at(int64_t in, int64_t out, bool align, int64_t o) {
    float scale =
        out > 1 ? (align ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out) : 0.0f;
    float src = align ? scale * (float)o : (float)((double)scale * ((double)o + 0.5) - 0.5);
    if (src < 0) src = 0;
    lerp_t l = {(int64_t)src, 0, 0, 0};
    l.step = l.i0 < in - 1 ? 1 : 0;
    l.l1 = (double)(src - (float)l.i0);
    l.l0 = 1 - l.l1;
    return l;
}

typedef struct resize_job {
    deft_dtype_t dtype;
    int64_t H, W, OH, OW;
    const lerp_t *rows, *cols;
    const void *src; /* forward: x; backward: dy */
    void *dst;       /* forward: y; backward: dx */
} resize_job_t;

static void resize_planes(void *arg, int64_t begin, int64_t end) {
    const resize_job_t *j = arg;
    for (int64_t plane = begin; plane < end; plane++) {
        int64_t in = plane * j->H * j->W, out = plane * j->OH * j->OW;
        for (int64_t y = 0; y < j->OH; y++) {
            lerp_t r = j->rows[y];
            int64_t top = in + r.i0 * j->W, bottom = top + r.step * j->W;
            for (int64_t x = 0; x < j->OW; x++) {
                lerp_t c = j->cols[x];
                double v = r.l0 * (c.l0 * load(j->src, j->dtype, top + c.i0) +
                                   c.l1 * load(j->src, j->dtype, top + c.i0 + c.step)) +
                           r.l1 * (c.l0 * load(j->src, j->dtype, bottom + c.i0) +
                                   c.l1 * load(j->src, j->dtype, bottom + c.i0 + c.step));
                deft_store_double(j->dst, j->dtype, out + y * j->OW + x, v);
            }
        }
    }
}

/* The backward scatters each output gradient to its four sources, plane by plane. */
static void unresize_planes(void *arg, int64_t begin, int64_t end) {
    const resize_job_t *j = arg;
    size_t elem = deft_dtype_size(j->dtype);
    memset((char *)j->dst + (size_t)(begin * j->H * j->W) * elem, 0,
           (size_t)((end - begin) * j->H * j->W) * elem);
    for (int64_t plane = begin; plane < end; plane++) {
        int64_t in = plane * j->H * j->W, out = plane * j->OH * j->OW;
        for (int64_t y = 0; y < j->OH; y++) {
            lerp_t r = j->rows[y];
            int64_t top = in + r.i0 * j->W, bottom = top + r.step * j->W;
            for (int64_t x = 0; x < j->OW; x++) {
                lerp_t c = j->cols[x];
                double g = load(j->src, j->dtype, out + y * j->OW + x);
                add_to(j->dst, j->dtype, top + c.i0, r.l0 * c.l0 * g);
                add_to(j->dst, j->dtype, top + c.i0 + c.step, r.l0 * c.l1 * g);
                add_to(j->dst, j->dtype, bottom + c.i0, r.l1 * c.l0 * g);
                add_to(j->dst, j->dtype, bottom + c.i0 + c.step, r.l1 * c.l1 * g);
            }
        }
    }
}

/* Run the forward (small = x, big = y) or the backward (big = dy, small = dx). */
static int run_resize(const deft_op_t *op, const deft_tensor_t *small, const deft_tensor_t *big,
                      bool align, bool backward) {
    const deft_shape_t *s = &small->shape, *b = &big->shape;
    if (deft_shape_size(b) == 0 && !backward) return 0;
    if (deft_shape_size(s) == 0) return 0;
    resize_job_t j = {.dtype = small->dtype,
                      .H = s->dims[2],
                      .W = s->dims[3],
                      .OH = b->dims[2],
                      .OW = b->dims[3]};
    lerp_t *table = malloc(sizeof *table * (size_t)(j.OH + j.OW + 1));
    if (!table) return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "no memory for the row tables");
    for (int64_t y = 0; y < j.OH; y++) table[y] = lerp_at(j.H, j.OH, align, y);
    for (int64_t x = 0; x < j.OW; x++) table[j.OH + x] = lerp_at(j.W, j.OW, align, x);
    j.rows = table, j.cols = table + j.OH;
    j.src = deft_tensor_data(backward ? big : small);
    j.dst = deft_tensor_data(backward ? small : big);
    deft_parallel_for(s->dims[0] * s->dims[1], grain_for(4 * plane_size(b)),
                      backward ? unresize_planes : resize_planes, &j);
    free(table);
    return 0;
}

static int resize_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    return run_resize(op, &in[0], &out[0], p[BR_ALIGN].i, false);
}

/* _backward_contrib_BilinearResize2D: (out_grad, data[, like]) -> d data[, zeros for like]. */
static int unresize_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_desc_t y;
    int n;
    if (nin < 2) return deft_op_input_count_error(op, nin);
    if (resize_infer(op, p, nin - 1, in + 1, &n, &y)) return -1;
    if (!deft_shape_equal(&y.shape, &in[0].shape) || y.dtype != in[0].dtype) {
        char s[DEFT_SHAPE_STR_MAX], want[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (out_grad) has shape %s, expected %s",
                             deft_shape_format(&in[0].shape, s, sizeof s),
                             deft_shape_format(&y.shape, want, sizeof want));
    }
    for (int k = 1; k < nin; k++) out[k - 1] = in[k];
    *nout = nin - 1;
    return 0;
}

static int unresize_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    if (nout > 1 && deft_tensor_nbytes(&out[1]) &&
        deft_device_zero(deft_tensor_data(&out[1]), out[1].device, deft_tensor_nbytes(&out[1])))
        return -1;
    return run_resize(op, &out[0], &in[0], p[BR_ALIGN].i, true);
}

static int unresize_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return p[BR_MODE].i == BR_LIKE ? 2 : 1;
}

static int grad_resize(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)p;
    const char *params[2 * 6 + 1];
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), {NULL, 0}};
    if (nin > 1) in[2] = b->input(b, 1);
    deft_gref_t r = b->apply(b, "_backward_contrib_BilinearResize2D", nin + 1, in,
                             g_forward_params(b, resize_params, params), 0);
    for (int i = 0; i < nin; i++) in_grads[i] = (deft_gref_t){r.node, i};
    return 0;
}

static const char *const up_inputs[] = {"data", "weight", NULL};
static const char *const up_grad_inputs[] = {"out_grad", "data", NULL};
static const char *const resize_inputs[] = {"data", "like", NULL};
static const char *const resize_grad_inputs[] = {"out_grad", "data", "like", NULL};

#define RESIZE_OP(name_)                                                                           \
    {                                                                                              \
        .name = name_,                                                                             \
        .description = "Bilinear resizing of NCHW data to a size, a scale or input 1's size "      \
                       "(mode like); align_corners maps corner pixels onto each other.",           \
        .input_names = resize_inputs, .min_inputs = 1, .max_inputs = 2, .params = resize_params,   \
        .infer = resize_infer, .forward = resize_forward, .inplace_input = -1,                     \
        .shape_inputs = 1u << 1, .num_inputs = resize_num_inputs, .gradient = grad_resize          \
    }

static const deft_op_t resize_ops[] = {
    {.name = "UpSampling",
     .description = "Upsamples NCHW data by an integer scale: nearest neighbour (several inputs "
                    "joined along channels or summed) or bilinear through a (C,1,k,k) kernel.",
     .input_names = up_inputs,
     .min_inputs = 1,
     .max_inputs = DEFT_OP_MAX_INPUTS - 1,
     .params = up_params,
     .infer = up_infer,
     .forward = up_forward,
     .inplace_input = -1,
     .num_inputs = up_num_inputs,
     .gradient = grad_upsampling},
    {.name = "_backward_UpSampling",
     .description = "Gradient of UpSampling from the output gradient and the forward's inputs.",
     .input_names = up_grad_inputs,
     .min_inputs = 2,
     .max_inputs = DEFT_OP_MAX_INPUTS,
     .params = up_params,
     .infer = up_backward_infer,
     .forward = up_backward_forward,
     .inplace_input = -1,
     .num_outputs = up_backward_num_outputs},
    RESIZE_OP("_contrib_BilinearResize2D"),
    {.name = "_backward_contrib_BilinearResize2D",
     .description = "Gradient of BilinearResize2D: each output gradient split over its four "
                    "sources; zero for like.",
     .input_names = resize_grad_inputs,
     .min_inputs = 2,
     .max_inputs = 3,
     .params = resize_params,
     .infer = unresize_infer,
     .forward = unresize_forward,
     .inplace_input = -1,
     .shape_inputs = (1u << 1) | (1u << 2),
     .num_outputs = unresize_num_outputs},
};

DEFT_OP_FAMILY(deft_family_resize, resize_ops);
