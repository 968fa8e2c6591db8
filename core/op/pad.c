/*
 * Pad and Crop (MXNet's legacy image operators) and their gradients.
 *
 * Pad widens the spatial axes of 4-D or 5-D data with a constant, the edge
 * values or a reflection (NumPy's "reflect": the edge is not repeated).
 * Crop cuts a (h, w) window out of 4-D data, sized by h_w or by a second
 * input crop_like, at an offset or in the centre. Crop is a strided copy,
 * so it runs on any device the copy does.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/base/parallel.h"
#include "core/math/pad_math.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/strided.h"

/* ---- Pad ---- */

/* In the order of DEFT_PAD_CONSTANT, DEFT_PAD_EDGE, DEFT_PAD_REFLECT (pad_math.h). */
static const char *const pad_modes[] = {"constant", "edge", "reflect", NULL};

/* pad_width has 2 entries per axis, 10 for 5-D data: more than a tuple
 * parameter holds, so it is read here from its text. */
static const deft_param_def_t pad_params[] = {
    {"mode", DEFT_PARAM_ENUM, NULL, "constant, edge or reflect", pad_modes, false},
    {"pad_width", DEFT_PARAM_STRING, NULL,
     "(before_1, after_1, ..., before_N, after_N); the first four must be 0", NULL, false},
    {"constant_value", DEFT_PARAM_FLOAT, "0", "the value of constant padding", NULL, false},
    {0}};

#define PAD_MAX_WIDTHS 10

/* "(0,0,0,0,1,1,2,2)" or "[...]" into widths; the count in *n. */
static int parse_widths(const deft_op_t *op, const char *text, int64_t *widths, int *n) {
    const char *s = text;
    while (*s == ' ') s++;
    char close = *s == '(' ? ')' : *s == '[' ? ']' : '\0';
    if (close) s++;
    *n = 0;
    for (;;) {
        while (*s == ' ') s++;
        if (*s == close) break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || *n == PAD_MAX_WIDTHS) goto bad;
        widths[(*n)++] = v;
        for (s = end; *s == ' '; s++) continue;
        if (*s == ',')
            s++;
        else if (*s != close)
            goto bad;
    }
    if (close) s++;
    while (*s == ' ') s++;
    if (*s == '\0' && *n > 0) return 0;
bad:
    return deft_op_error(op, DEFT_ERR_PARSE,
                         "parameter 'pad_width' is '%s', expected a tuple of at most %d integers",
                         text, PAD_MAX_WIDTHS);
}

static int pad_plan(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *x,
                    deft_pad_plan_t *plan) {
    char s[DEFT_SHAPE_STR_MAX];
    int64_t w[PAD_MAX_WIDTHS];
    int n;
    if (parse_widths(op, p[1].s, w, &n)) return -1;
    if (x->ndim != 4 && x->ndim != 5)
        return deft_op_error(op, DEFT_ERR_VALUE, "data has shape %s; Pad supports 4-D or 5-D data",
                             deft_shape_format(x, s, sizeof s));
    if (n != 2 * x->ndim)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "pad_width has %d entries, expected %d (two per axis of data %s)", n,
                             2 * x->ndim, deft_shape_format(x, s, sizeof s));
    if (w[0] || w[1] || w[2] || w[3])
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "pad_width must not pad the first two axes (its first four entries "
                             "must be 0)");
    plan->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        int64_t before = w[2 * d], after = w[2 * d + 1], size = x->dims[d];
        if (before < 0 || after < 0 || before > INT32_MAX || after > INT32_MAX)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "pad_width has an entry for axis %d outside [0, 2^31 - 1]", d);
        if (p[0].i == DEFT_PAD_REFLECT && (before >= size || after >= size))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "reflect padding of axis %d by (%lld, %lld) needs the axis to be "
                                 "longer than either, but it has size %lld",
                                 d, (long long)before, (long long)after, (long long)size);
        if (p[0].i == DEFT_PAD_EDGE && size == 0 && before + after > 0)
            return deft_op_error(op, DEFT_ERR_VALUE, "edge padding of axis %d, which is empty", d);
        plan->before[d] = before, plan->in[d] = size, plan->out[d] = size + before + after;
    }
    return 0;
}

static int pad_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    deft_pad_plan_t plan = {0};
    if (deft_op_check_dtype_arith(op, 0, in[0].dtype) || pad_plan(op, p, &in[0].shape, &plan))
        return -1;
    out[0].dtype = in[0].dtype;
    out[0].shape = (deft_shape_t){.ndim = plan.ndim};
    for (int d = 0; d < plan.ndim; d++) out[0].shape.dims[d] = plan.out[d];
    *nout = 1;
    return 0;
}

static void pad_range(void *arg, int64_t begin, int64_t end) {
    const deft_pad_job_t *j = arg;
    size_t elem = deft_dtype_size(j->dtype);
    for (int64_t o = begin; o < end; o++) deft_pad_element(j, o, elem);
}

/* Pad's call: data into the output; -1 on bad parameters. */
static int pad_call(const deft_op_t *op, const deft_param_value_t *p, const deft_tensor_t *in,
                    const deft_tensor_t *out, deft_pad_job_t *j) {
    *j = (deft_pad_job_t){.mode = (int)p[0].i,
                          .dtype = in[0].dtype,
                          .constant = p[2].f,
                          .x = deft_tensor_data(&in[0]),
                          .y = deft_tensor_data(&out[0])};
    return pad_plan(op, p, &in[0].shape, &j->plan);
}

static int pad_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pad_job_t j;
    if (pad_call(op, p, in, out, &j)) return -1;
    deft_parallel_for(deft_shape_size(&out[0].shape), DEFT_PARALLEL_GRAIN / 4, pad_range, &j);
    return 0;
}

/* _backward_Pad: (out_grad, data) -> d data; every output adds into its source. */
static void unpad_planes(void *arg, int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; plane++) deft_unpad_plane(arg, plane);
}

static int unpad_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    return deft_infer_backward(op, pad_infer, p, nin, in, nout, out);
}

/* _backward_Pad's call: (out_grad, data) into d data; -1 on bad parameters. */
static int unpad_call(const deft_op_t *op, const deft_param_value_t *p, const deft_tensor_t *in,
                      const deft_tensor_t *out, deft_pad_job_t *j) {
    *j = (deft_pad_job_t){.mode = (int)p[0].i,
                          .dtype = in[0].dtype,
                          .x = deft_tensor_data(&in[0]),
                          .y = deft_tensor_data(&out[0])};
    return pad_plan(op, p, &in[1].shape, &j->plan);
}

static int unpad_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pad_job_t j;
    if (unpad_call(op, p, in, out, &j)) return -1;
    int64_t planes = j.plan.in[0] * j.plan.in[1];
    int64_t plane_work = deft_shape_size(&in[0].shape) / (planes ? planes : 1) + 1;
    if (deft_shape_size(&in[1].shape) > 0)
        deft_parallel_for(planes, DEFT_PARALLEL_GRAIN / plane_work + 1, unpad_planes, &j);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int pad_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pad_job_t j;
    if (pad_call(op, p, in, out, &j)) return -1;
    return deft_gpu_pad(in[0].device.id, &j, false);
}

static int unpad_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pad_job_t j;
    if (unpad_call(op, p, in, out, &j)) return -1;
    if (deft_shape_size(&in[1].shape) == 0) return 0;
    return deft_gpu_pad(in[1].device.id, &j, true);
}
#endif

static int grad_pad(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                    deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const char *params[2 * 3 + 1];
    in_grads[0] = g_op2(b, "_backward_Pad", b->out_grad(b, 0), b->input(b, 0),
                        g_forward_params(b, pad_params, params));
    return 0;
}

/* ---- Crop ---- */

static const deft_param_def_t crop_params[] = {
    {"num_args", DEFT_PARAM_INT, NULL, "1: crop to h_w; 2: crop to crop_like's height and width",
     NULL, false},
    {"offset", DEFT_PARAM_TUPLE, "(0,0)", "crop offset (y, x)", NULL, false},
    {"h_w", DEFT_PARAM_TUPLE, "(0,0)", "crop height and width (with num_args 1)", NULL, false},
    {"center_crop", DEFT_PARAM_BOOL, "false", "crop the centre (offset ignored)", NULL, false},
    {0}};

typedef struct crop_plan {
    int64_t h, w, y0, x0;
} crop_plan_t;

static int crop_plan(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_shape_t *in, crop_plan_t *c) {
    char s[DEFT_SHAPE_STR_MAX];
    int64_t args = p[0].i;
    if (args < 1 || args > 3)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_args is %lld, expected 1 to 3",
                             (long long)args);
    if (args == 3)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "num_args is 3; Crop crops to h_w (1 input) or to crop_like (2)");
    if (nin != args)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_args is %lld but %d inputs were given",
                             (long long)args, nin);
    if (in[0].ndim != 4)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has shape %s, expected 4-D (batch, channel, y, x)",
                             deft_shape_format(&in[0], s, sizeof s));
    const deft_tuple_t *hw = &p[2].t, *off = &p[1].t;
    if (hw->n != 2 || off->n != 2)
        return deft_op_error(op, DEFT_ERR_VALUE, "h_w and offset need 2 entries, got %d and %d",
                             hw->n, off->n);
    int64_t H = in[0].dims[2], W = in[0].dims[3];
    if (args == 1) {
        if (hw->v[0] < 1 || hw->v[0] > H || hw->v[1] < 1 || hw->v[1] > W)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "h_w is (%lld,%lld), expected a height in [1, %lld] and a width "
                                 "in [1, %lld] for data %s",
                                 (long long)hw->v[0], (long long)hw->v[1], (long long)H,
                                 (long long)W, deft_shape_format(&in[0], s, sizeof s));
        c->h = hw->v[0], c->w = hw->v[1];
    } else {
        if (in[1].ndim != 4)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input 1 (crop_like) has shape %s, expected 4-D",
                                 deft_shape_format(&in[1], s, sizeof s));
        c->h = in[1].dims[2], c->w = in[1].dims[3];
        if (c->h > H || c->w > W)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "crop_like's height and width (%lld, %lld) exceed data's (%lld, "
                                 "%lld)",
                                 (long long)c->h, (long long)c->w, (long long)H, (long long)W);
    }
    if (p[3].i) {
        c->y0 = (H - c->h) / 2, c->x0 = (W - c->w) / 2;
    } else {
        c->y0 = off->v[0], c->x0 = off->v[1];
        if (c->y0 < 0 || c->x0 < 0 || c->y0 > H - c->h || c->x0 > W - c->w)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "offset (%lld,%lld) puts the %lldx%lld crop outside the %lldx%lld "
                                 "data",
                                 (long long)c->y0, (long long)c->x0, (long long)c->h,
                                 (long long)c->w, (long long)H, (long long)W);
    }
    return 0;
}

static int crop_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_shape_t shapes[2] = {in[0].shape, nin > 1 ? in[1].shape : in[0].shape};
    crop_plan_t c = {0}; /* set by crop_plan; initialised for -O3 flow analysis */
    if (crop_plan(op, p, nin, shapes, &c)) return -1;
    out[0] = in[0];
    out[0].shape.dims[2] = c.h, out[0].shape.dims[3] = c.w;
    *nout = 1;
    return 0;
}

/* The window of `big` (4-D, dense) that the crop covers: its first element and strides. */
static char *crop_window(const deft_tensor_t *big, const crop_plan_t *c, int64_t *strides) {
    deft_contiguous_strides(&big->shape, strides);
    size_t at = (size_t)(c->y0 * strides[2] + c->x0) * deft_dtype_size(big->dtype);
    return (char *)deft_tensor_data(big) + at;
}

static int crop_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    deft_shape_t shapes[2] = {in[0].shape, nin > 1 ? in[1].shape : in[0].shape};
    crop_plan_t c = {0}; /* set by crop_plan; initialised for -O3 flow analysis */
    if (crop_plan(op, p, nin, shapes, &c)) return -1;
    if (deft_shape_size(&out[0].shape) == 0) return 0; /* data may be NULL: no offsets */
    int64_t strides[4];
    const char *src = crop_window(&in[0], &c, strides);
    return deft_copy_strided(in[0].device, &out[0].shape, deft_tensor_data(&out[0]), NULL, src,
                             strides, deft_dtype_size(in[0].dtype));
}

/* _backward_Crop: (out_grad, data[, crop_like]) -> d data (zero outside the crop)[, 0]. */
static int uncrop_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    return deft_infer_backward(op, crop_infer, p, nin, in, nout, out);
}

static int uncrop_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    deft_shape_t shapes[2] = {in[1].shape, nin > 2 ? in[2].shape : in[1].shape};
    crop_plan_t c = {0}; /* set by crop_plan; initialised for -O3 flow analysis */
    if (crop_plan(op, p, nin - 1, shapes, &c)) return -1;
    for (int k = 0; k < nout; k++)
        if (deft_tensor_nbytes(&out[k]) &&
            deft_device_zero(deft_tensor_data(&out[k]), out[k].device, deft_tensor_nbytes(&out[k])))
            return -1;
    if (deft_shape_size(&in[0].shape) == 0) return 0;
    int64_t strides[4];
    char *dst = crop_window(&out[0], &c, strides);
    return deft_copy_strided(out[0].device, &in[0].shape, dst, strides, deft_tensor_data(&in[0]),
                             NULL, deft_dtype_size(in[0].dtype));
}

static int crop_num_inputs(const deft_param_value_t *p) {
    return p[0].i == 2 ? 2 : 1;
}

static int uncrop_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p;
    return num_inputs > 2 ? 2 : 1;
}

static int grad_crop(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p;
    const char *params[2 * 4 + 1];
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), {NULL, 0}};
    if (nin > 1) in[2] = b->input(b, 1);
    deft_gref_t r =
        b->apply(b, "_backward_Crop", nin + 1, in, g_forward_params(b, crop_params, params), 0);
    in_grads[0] = r;
    if (nin > 1) in_grads[1] = (deft_gref_t){r.node, 1}; /* zeros: only its shape is used */
    return 0;
}

static const char *const crop_inputs[] = {"data", "crop_like", NULL};
static const char *const grad_data[] = {"out_grad", "data", NULL};
static const char *const grad_crop_inputs[] = {"out_grad", "data", "crop_like", NULL};

static const deft_op_t pad_ops[] = {
    {.name = "Pad",
     .description = "Pads the spatial axes of 4-D or 5-D data with a constant, the edge values or "
                    "a reflection; pad_width gives (before, after) for every axis.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = pad_params,
     .infer = pad_infer,
     .forward = pad_forward,
     .forward_gpu = DEFT_GPU(pad_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_pad},
    {.name = "_backward_Pad",
     .description = "Gradient of Pad: each output gradient added into the element it came from.",
     .input_names = grad_data,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = pad_params,
     .infer = unpad_infer,
     .forward = unpad_forward,
     .forward_gpu = DEFT_GPU(unpad_forward_gpu),
     .inplace_input = -1,
     .shape_inputs = 1u << 1},
    {.name = "Crop",
     .description = "Crops 4-D data to h_w, or to the height and width of crop_like, at offset "
                    "(y, x) or in the centre.",
     .input_names = crop_inputs,
     .min_inputs = 1,
     .max_inputs = 2,
     .params = crop_params,
     .infer = crop_infer,
     .forward = crop_forward,
     .forward_gpu = DEFT_GPU(crop_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 1,
     .num_inputs = crop_num_inputs,
     .gradient = grad_crop},
    {.name = "_backward_Crop",
     .description = "Gradient of Crop: the output gradient in the cropped window, zero elsewhere; "
                    "zero for crop_like.",
     .input_names = grad_crop_inputs,
     .min_inputs = 2,
     .max_inputs = 3,
     .params = crop_params,
     .infer = uncrop_infer,
     .forward = uncrop_forward,
     .forward_gpu = DEFT_GPU(uncrop_forward),
     .inplace_input = -1,
     .shape_inputs = (1u << 1) | (1u << 2),
     .num_outputs = uncrop_num_outputs},
};

DEFT_OP_FAMILY(deft_family_pad, pad_ops);
