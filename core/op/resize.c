/*
 * Resizing NCHW images: UpSampling (nearest neighbour, of one or several
 * inputs, or bilinear through a learned depthwise kernel as MXNet's
 * deconvolution does it) and BilinearResize2D (MXNet's
 * _contrib_BilinearResize2D), with their gradients. All run per image plane
 * (one batch item's channel), in parallel over planes. The arithmetic is
 * core/math/resize_math.h, shared with the GPU kernels (resize.cu).
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/math/resize_math.h"
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

_Static_assert(DEFT_UP_MAX_INPUTS == DEFT_OP_MAX_INPUTS - 1,
               "a nearest upsampling call holds every input UpSampling takes");

/* Nearest: the inputs and output of a call. */
static deft_up_nearest_t up_nearest(int nin, const deft_tensor_t *in, const deft_tensor_t *out,
                                    bool sum) {
    const deft_shape_t *os = &out->shape;
    deft_up_nearest_t u = {.nin = nin,
                           .sum = sum,
                           .dtype = out->dtype,
                           .C = os->dims[1],
                           .OH = os->dims[2],
                           .OW = os->dims[3],
                           .y = deft_tensor_data(out)};
    for (int i = 0; i < nin; i++) {
        u.x[i] = deft_tensor_data(&in[i]);
        u.channels[i] = in[i].shape.dims[1];
        u.H[i] = in[i].shape.dims[2], u.W[i] = in[i].shape.dims[3];
    }
    return u;
}

static void up_nearest_planes(void *arg, int64_t begin, int64_t end) {
    const deft_up_nearest_t *u = arg;
    for (int64_t plane = begin; plane < end; plane++)
        for (int64_t y = 0; y < u->OH; y++)
            for (int64_t x = 0; x < u->OW; x++) deft_up_nearest_at(u, plane, y, x);
}

static void deconv_planes(void *arg, int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; plane++) deft_deconv_forward_plane(arg, plane);
}

static void deconv_grad_channels(void *arg, int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; c++) deft_deconv_grad_channel(arg, c);
}

static deft_deconv_job_t deconv_job(const deft_tensor_t *x, const deft_tensor_t *w, int64_t scale) {
    const deft_shape_t *s = &x->shape;
    return (deft_deconv_job_t){.dtype = x->dtype,
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
        deft_up_nearest_t u = up_nearest(nin, in, &out[0], p[UP_MODE].i == 1);
        deft_parallel_for(planes, grain_for(plane_size(os) * nin), up_nearest_planes, &u);
        return 0;
    }
    deft_deconv_job_t j = deconv_job(&in[0], &in[1], p[UP_SCALE].i);
    j.y = deft_tensor_data(&out[0]);
    deft_parallel_for(planes, grain_for(plane_size(&in[0].shape) * j.k * j.k), deconv_planes, &j);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int up_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nout;
    const deft_shape_t *os = &out[0].shape;
    if (deft_shape_size(os) == 0) return 0;
    if (p[UP_TYPE].i == UP_NEAREST) {
        deft_up_nearest_t u = up_nearest(nin, in, &out[0], p[UP_MODE].i == 1);
        return deft_gpu_up_nearest(in[0].device.id, &u, os->dims[0] * os->dims[1]);
    }
    deft_deconv_job_t j = deconv_job(&in[0], &in[1], p[UP_SCALE].i);
    j.y = deft_tensor_data(&out[0]);
    return deft_gpu_deconv(in[0].device.id, &j, false);
}
#endif

/*
 * _backward_UpSampling: (out_grad, the forward's inputs...) -> their
 * gradients. Nearest sums each scale x scale block of the output gradient
 * (reading only the inputs' shapes); bilinear correlates it with the kernel.
 */
static int up_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    return deft_infer_backward(op, up_infer, p, nin, in, nout, out);
}

/* The gradient of input `i` of a nearest upsampling: dx (out) from dy, its
 * planes `first` channels on in dy (concat) or level with them (sum). */
static deft_up_nearest_grad_t up_nearest_grad(const deft_tensor_t *dy, const deft_tensor_t *dx,
                                              int64_t first) {
    return (deft_up_nearest_grad_t){.dtype = dx->dtype,
                                    .C = dx->shape.dims[1],
                                    .H = dx->shape.dims[2],
                                    .W = dx->shape.dims[3],
                                    .GC = dy->shape.dims[1],
                                    .OH = dy->shape.dims[2],
                                    .OW = dy->shape.dims[3],
                                    .first = first,
                                    .dy = deft_tensor_data(dy),
                                    .dx = deft_tensor_data(dx)};
}

static void up_nearest_grad_planes(void *arg, int64_t begin, int64_t end) {
    const deft_up_nearest_grad_t *u = arg;
    for (int64_t plane = begin; plane < end; plane++)
        for (int64_t y = 0; y < u->H; y++)
            for (int64_t x = 0; x < u->W; x++) deft_up_nearest_grad_at(u, plane, y, x);
}

static int up_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin;
    if (p[UP_TYPE].i == UP_BILINEAR) {
        deft_deconv_job_t j = deconv_job(&in[1], &in[2], p[UP_SCALE].i);
        j.dy = deft_tensor_data(&in[0]);
        j.dx = deft_tensor_data(&out[0]), j.dw = deft_tensor_data(&out[1]);
        int64_t work = j.batch * plane_size(&in[1].shape) * j.k * j.k;
        deft_parallel_for(j.C, grain_for(work), deconv_grad_channels, &j);
        return 0;
    }
    for (int i = 0, first = 0; i < nout; i++) {
        const deft_shape_t *xs = &out[i].shape;
        deft_up_nearest_grad_t u = up_nearest_grad(&in[0], &out[i], p[UP_MODE].i == 1 ? 0 : first);
        first += (int)xs->dims[1];
        if (deft_shape_size(xs) == 0) continue;
        int64_t work = deft_shape_size(&in[0].shape) / (in[0].shape.dims[0] * in[0].shape.dims[1]);
        deft_parallel_for(xs->dims[0] * xs->dims[1], grain_for(work), up_nearest_grad_planes, &u);
    }
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int up_backward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin;
    int dev = in[0].device.id;
    if (p[UP_TYPE].i == UP_BILINEAR) {
        deft_deconv_job_t j = deconv_job(&in[1], &in[2], p[UP_SCALE].i);
        j.dy = deft_tensor_data(&in[0]);
        j.dx = deft_tensor_data(&out[0]), j.dw = deft_tensor_data(&out[1]);
        return deft_gpu_deconv(dev, &j, true);
    }
    for (int i = 0, first = 0; i < nout; i++) {
        deft_up_nearest_grad_t u = up_nearest_grad(&in[0], &out[i], p[UP_MODE].i == 1 ? 0 : first);
        first += (int)out[i].shape.dims[1];
        int64_t planes = out[i].shape.dims[0] * out[i].shape.dims[1];
        if (deft_gpu_up_nearest_grad(dev, &u, planes)) return -1;
    }
    return 0;
}
#endif

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

/* A call on the CPU, with each output row's and column's lerps tabled. */
typedef struct resize_tables {
    deft_resize_job_t j;
    const deft_lerp_t *rows, *cols;
} resize_tables_t;

static void resize_planes(void *arg, int64_t begin, int64_t end) {
    const resize_tables_t *t = arg;
    for (int64_t plane = begin; plane < end; plane++)
        for (int64_t y = 0; y < t->j.OH; y++)
            for (int64_t x = 0; x < t->j.OW; x++)
                deft_resize_at(&t->j, plane, y, x, t->rows[y], t->cols[x]);
}

/* The backward scatters each output gradient to its four sources, plane by plane. */
static void unresize_planes(void *arg, int64_t begin, int64_t end) {
    const resize_tables_t *t = arg;
    size_t elem = deft_dtype_size(t->j.dtype);
    memset((char *)t->j.dst + (size_t)(begin * t->j.H * t->j.W) * elem, 0,
           (size_t)((end - begin) * t->j.H * t->j.W) * elem);
    for (int64_t plane = begin; plane < end; plane++)
        for (int64_t y = 0; y < t->j.OH; y++)
            for (int64_t x = 0; x < t->j.OW; x++)
                deft_unresize_at(&t->j, plane, y, x, t->rows[y], t->cols[x]);
}

/* The call of the forward (small = x, big = y) or the backward (big = dy, small = dx). */
static deft_resize_job_t resize_job(const deft_tensor_t *small, const deft_tensor_t *big,
                                    bool align, bool backward) {
    const deft_shape_t *s = &small->shape, *b = &big->shape;
    return (deft_resize_job_t){.dtype = small->dtype,
                               .H = s->dims[2],
                               .W = s->dims[3],
                               .OH = b->dims[2],
                               .OW = b->dims[3],
                               .align = align,
                               .src = deft_tensor_data(backward ? big : small),
                               .dst = deft_tensor_data(backward ? small : big)};
}

/* Whether a call has nothing to do: no input, or (forward) no output. */
static bool resize_empty(const deft_tensor_t *small, const deft_tensor_t *big, bool backward) {
    return (deft_shape_size(&big->shape) == 0 && !backward) || deft_shape_size(&small->shape) == 0;
}

static int run_resize(const deft_op_t *op, const deft_tensor_t *small, const deft_tensor_t *big,
                      bool align, bool backward) {
    if (resize_empty(small, big, backward)) return 0;
    resize_tables_t t = {.j = resize_job(small, big, align, backward)};
    int64_t OH = t.j.OH, OW = t.j.OW;
    deft_lerp_t *table = malloc(sizeof *table * (size_t)(OH + OW + 1));
    if (!table) return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "no memory for the row tables");
    for (int64_t y = 0; y < OH; y++) table[y] = deft_lerp_at(t.j.H, OH, align, y);
    for (int64_t x = 0; x < OW; x++) table[OH + x] = deft_lerp_at(t.j.W, OW, align, x);
    t.rows = table, t.cols = table + OH;
    const deft_shape_t *s = &small->shape;
    deft_parallel_for(s->dims[0] * s->dims[1], grain_for(4 * plane_size(&big->shape)),
                      backward ? unresize_planes : resize_planes, &t);
    free(table);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int run_resize_gpu(const deft_tensor_t *small, const deft_tensor_t *big, bool align,
                          bool backward) {
    if (resize_empty(small, big, backward)) return 0;
    deft_resize_job_t j = resize_job(small, big, align, backward);
    return deft_gpu_resize(small->device.id, &j, small->shape.dims[0] * small->shape.dims[1],
                           backward);
}
#endif

static int resize_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    return run_resize(op, &in[0], &out[0], p[BR_ALIGN].i, false);
}

#ifdef DEFT_HAVE_CUDA
static int resize_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    return run_resize_gpu(&in[0], &out[0], p[BR_ALIGN].i, false);
}
#endif

/* _backward_contrib_BilinearResize2D: (out_grad, data[, like]) -> d data[, zeros for like]. */
static int unresize_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    return deft_infer_backward(op, resize_infer, p, nin, in, nout, out);
}

/* The gradient of like (when given) is zero: only its shape is read. */
static int zero_like_grad(int nout, const deft_tensor_t *out) {
    if (nout < 2 || !deft_tensor_nbytes(&out[1])) return 0;
    return deft_device_zero(deft_tensor_data(&out[1]), out[1].device, deft_tensor_nbytes(&out[1]));
}

static int unresize_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    if (zero_like_grad(nout, out)) return -1;
    return run_resize(op, &out[0], &in[0], p[BR_ALIGN].i, true);
}

#ifdef DEFT_HAVE_CUDA
static int unresize_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin;
    if (zero_like_grad(nout, out)) return -1;
    return run_resize_gpu(&out[0], &in[0], p[BR_ALIGN].i, true);
}
#endif

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
        .infer = resize_infer, .forward = resize_forward,                                          \
        .forward_gpu = DEFT_GPU(resize_forward_gpu), .inplace_input = -1, .shape_inputs = 1u << 1, \
        .num_inputs = resize_num_inputs, .gradient = grad_resize                                   \
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
     .forward_gpu = DEFT_GPU(up_forward_gpu),
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
     .forward_gpu = DEFT_GPU(up_backward_gpu),
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
     .forward_gpu = DEFT_GPU(unresize_forward_gpu),
     .inplace_input = -1,
     .shape_inputs = (1u << 1) | (1u << 2),
     .num_outputs = unresize_num_outputs},
};

DEFT_OP_FAMILY(deft_family_resize, resize_ops);
