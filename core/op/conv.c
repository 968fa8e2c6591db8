/*
 * Convolution and Deconvolution (MXNet's names, parameters and shapes), 1-D
 * to 3-D, channels first, with groups; their gradients through
 * _backward_Convolution and _backward_Deconvolution, which return the
 * gradients of data, weight and bias at once (as MXNet's do).
 *
 * Everything here is bookkeeping: parameters and shapes become one geometry
 * (conv.h), and the three products on it (conv_cpu.c, conv.cu) do the work.
 */
#include <string.h>

#include "core/op/conv.h"
#include "core/op/conv_op.h"
#include "core/op/grad.h"
#include "core/op/op.h"
#include "core/op/registry.h"

#ifdef DEFT_HAVE_CUDA
#include "core/base/fence.h"
#include "core/base/storage.h"
#endif

/* What tells the two operators (and their backward operators) apart. */
typedef struct conv_kind {
    bool deconv;
    const char *backward; /* the operator of the gradient */
} conv_kind_t;

static const conv_kind_t conv_kind = {false, "_backward_Convolution"};
static const conv_kind_t deconv_kind = {true, "_backward_Deconvolution"};

static const char *const cudnn_tunes[] = {"off", "limited_workspace", "fastest", NULL};
/* MXNet's layouts; deft computes the channels-first ones (the first three). */
static const char *const layouts[] = {"NCW", "NCHW", "NCDHW", "NHWC", "NDHWC", NULL};

#define SHAPE_PARAM(name, what)                                                                    \
    { name, DEFT_PARAM_TUPLE, "()", what ": (w,), (h, w) or (d, h, w)", NULL, false }

/* The same parameters as MXNet, in its order; Deconvolution adds adj and
 * target_shape, and its workspace and no_bias defaults differ. */
static const deft_param_def_t conv_params[] = {
    {"kernel", DEFT_PARAM_TUPLE, NULL, "kernel size: (w,), (h, w) or (d, h, w)", NULL, false},
    SHAPE_PARAM("stride", "stride, 1 in every dimension by default"),
    SHAPE_PARAM("dilate", "dilation, 1 in every dimension by default"),
    SHAPE_PARAM("pad", "zero padding on both sides, none by default"),
    {"num_filter", DEFT_PARAM_INT, NULL, "number of output channels", NULL, false},
    {"num_group", DEFT_PARAM_INT, "1", "groups the channels are split into", NULL, false},
    {"workspace", DEFT_PARAM_INT, "1024", "MB of scratch space (accepted, unused)", NULL, false},
    {"no_bias", DEFT_PARAM_BOOL, "false", "leave out the bias input", NULL, false},
    {"cudnn_tune", DEFT_PARAM_ENUM, "None", "cuDNN's search (accepted, unused)", cudnn_tunes, true},
    {"cudnn_off", DEFT_PARAM_BOOL, "false", "turn off cuDNN (accepted, unused)", NULL, false},
    {"layout", DEFT_PARAM_ENUM, "None", "None: NCW, NCHW or NCDHW by the rank", layouts, true},
    {0}};

static const deft_param_def_t deconv_params[] = {
    {"kernel", DEFT_PARAM_TUPLE, NULL, "kernel size: (w,), (h, w) or (d, h, w)", NULL, false},
    SHAPE_PARAM("stride", "stride of the corresponding convolution"),
    SHAPE_PARAM("dilate", "dilation, 1 in every dimension by default"),
    SHAPE_PARAM("pad", "padding of the corresponding convolution (ignored with target_shape)"),
    SHAPE_PARAM("adj", "extra output size at the end (ignored with target_shape)"),
    SHAPE_PARAM("target_shape", "output spatial shape; sets pad and adj"),
    {"num_filter", DEFT_PARAM_INT, NULL, "number of output channels", NULL, false},
    {"num_group", DEFT_PARAM_INT, "1", "groups the channels are split into", NULL, false},
    {"workspace", DEFT_PARAM_INT, "512", "MB of scratch space (accepted, unused)", NULL, false},
    {"no_bias", DEFT_PARAM_BOOL, "true", "leave out the bias input", NULL, false},
    {"cudnn_tune", DEFT_PARAM_ENUM, "None", "cuDNN's search (accepted, unused)", cudnn_tunes, true},
    {"cudnn_off", DEFT_PARAM_BOOL, "false", "turn off cuDNN (accepted, unused)", NULL, false},
    {"layout", DEFT_PARAM_ENUM, "None", "None: NCW, NCHW or NCDHW by the rank", layouts, true},
    {0}};

/* The parameters of either operator, defaults filled in. */
typedef struct conv_args {
    const conv_kind_t *kind;
    int nd; /* spatial dimensions */
    deft_tuple_t kernel, stride, dilate, pad, adj, target;
    int64_t num_filter, num_group;
    bool no_bias;
    int layout; /* index into layouts, -1 for None */
} conv_args_t;

static const char *tuple_str(const deft_tuple_t *t, char *buf, size_t len) {
    deft_shape_t s = {.ndim = t->n};
    memcpy(s.dims, t->v, sizeof s.dims);
    return deft_shape_format(&s, buf, len);
}

/* A tuple given as () takes `fill` in every dimension; otherwise it needs one
 * entry per kernel dimension, each at least `min`. */
static int tuple_arg(const deft_op_t *op, const char *name, const deft_tuple_t *given, int nd,
                     int64_t fill, int64_t min, deft_tuple_t *out) {
    char a[DEFT_SHAPE_STR_MAX];
    *out = *given;
    if (given->n == 0) {
        out->n = nd;
        for (int i = 0; i < nd; i++) out->v[i] = fill;
    }
    if (out->n != nd)
        return deft_op_error(op, DEFT_ERR_VALUE, "%s %s has %d dimensions, but kernel has %d", name,
                             tuple_str(given, a, sizeof a), given->n, nd);
    for (int i = 0; i < nd; i++)
        if (out->v[i] < min)
            return deft_op_error(op, DEFT_ERR_VALUE, "%s %s has an entry below %lld", name,
                                 tuple_str(given, a, sizeof a), (long long)min);
    return 0;
}

static int check_layout(const deft_op_t *op, const conv_args_t *a) {
    if (a->layout < 0 || a->layout == a->nd - 1) return 0;
    if (a->layout >= 3)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "layout %s is not supported: only channels-first data (NCW, NCHW, "
                             "NCDHW)",
                             layouts[a->layout]);
    return deft_op_error(op, DEFT_ERR_VALUE, "layout %s does not fit a %d-D kernel (expected %s)",
                         layouts[a->layout], a->nd, layouts[a->nd - 1]);
}

/* Read and check the parameters (no shapes involved). */
static int conv_args(const deft_op_t *op, const deft_param_value_t *p, conv_args_t *a) {
    char s[DEFT_SHAPE_STR_MAX];
    memset(a, 0, sizeof *a);
    a->kind = op->data;
    const bool dc = a->kind->deconv;
    const int tail = dc ? 6 : 4; /* index of num_filter */
    a->kernel = p[0].t;
    a->nd = a->kernel.n;
    if (a->nd < 1 || a->nd > 3)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "kernel %s has %d dimensions, expected 1, 2 or 3 ((w,), (h, w) or "
                             "(d, h, w))",
                             tuple_str(&a->kernel, s, sizeof s), a->nd);
    const deft_tuple_t none = {0};
    if (tuple_arg(op, "kernel", &a->kernel, a->nd, 1, 1, &a->kernel) ||
        tuple_arg(op, "stride", &p[1].t, a->nd, 1, 1, &a->stride) ||
        tuple_arg(op, "dilate", &p[2].t, a->nd, 1, 1, &a->dilate) ||
        tuple_arg(op, "pad", &p[3].t, a->nd, 0, 0, &a->pad) ||
        tuple_arg(op, "adj", dc ? &p[4].t : &none, a->nd, 0, 0, &a->adj))
        return -1;
    a->target = dc ? p[5].t : none;
    if (a->target.n && tuple_arg(op, "target_shape", &a->target, a->nd, 1, 1, &a->target))
        return -1;
    a->num_filter = p[tail].i;
    a->num_group = p[tail + 1].i;
    a->no_bias = p[tail + 3].i;
    a->layout = p[tail + 6].none ? -1 : (int)p[tail + 6].i;
    if (a->num_filter < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_filter is %lld, expected >= 1",
                             (long long)a->num_filter);
    if (a->num_group < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_group is %lld, expected >= 1",
                             (long long)a->num_group);
    if (a->num_filter % a->num_group)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "num_filter %lld is not divisible by num_group %lld",
                             (long long)a->num_filter, (long long)a->num_group);
    if (p[tail + 2].i < 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "workspace is %lld, expected >= 0",
                             (long long)p[tail + 2].i);
    if (dc && a->nd == 3)
        for (int i = 0; i < 3; i++)
            if (a->dilate.v[i] != 1)
                return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                                     "dilate %s: 3-D Deconvolution has no dilation (as in MXNet)",
                                     tuple_str(&a->dilate, s, sizeof s));
    return check_layout(op, a);
}

static int64_t dilated(const conv_args_t *a, int i) {
    return (a->kernel.v[i] - 1) * a->dilate.v[i] + 1;
}

/* Deconvolution's padding and adjustment in dimension i for input size `in`:
 * from target_shape when it is given (as MXNet's InferPad), else as given. */
static int deconv_pad(const deft_op_t *op, const conv_args_t *a, int i, int64_t in, int64_t *pad,
                      int64_t *adj) {
    *pad = a->pad.v[i];
    *adj = a->adj.v[i];
    if (a->target.n) {
        int64_t full = a->stride.v[i] * (in - 1) + dilated(a, i);
        if (full < a->target.v[i])
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "target_shape[%d] is %lld, more than the largest output %lld", i,
                                 (long long)a->target.v[i], (long long)full);
        *adj = (full - a->target.v[i]) % 2;
        *pad = (full - a->target.v[i] + 1) / 2;
    }
    if (*adj >= a->stride.v[i])
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "adj[%d] is %lld, expected less than stride[%d] (%lld)%s", i,
                             (long long)*adj, i, (long long)a->stride.v[i],
                             a->target.n ? " (adj computed from target_shape)" : "");
    return 0;
}

/* The geometry (conv.h) and output shape of the operator on data of shape x. */
static int conv_geometry(const deft_op_t *op, const conv_args_t *a, const deft_shape_t *x,
                         deft_conv_geom_t *g, deft_shape_t *out) {
    char s[DEFT_SHAPE_STR_MAX];
    static const char *const spatial[] = {"w", "h, w", "d, h, w"};
    if (x->ndim != a->nd + 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has shape %s, expected %d dimensions (batch, "
                             "channel, %s) for a %d-D kernel",
                             deft_shape_format(x, s, sizeof s), a->nd + 2, spatial[a->nd - 1],
                             a->nd);
    const int64_t channels = x->dims[1];
    if (channels % a->num_group)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has %lld channels, not divisible by num_group %lld",
                             (long long)channels, (long long)a->num_group);
    const int lead = 3 - a->nd;
    *g = (deft_conv_geom_t){.batch = x->dims[0], .groups = a->num_group};
    *out = *x;
    out->dims[1] = a->num_filter;
    for (int i = 0; i < 3; i++) {
        g->img[i] = g->col[i] = g->k[i] = g->s[i] = g->d[i] = 1;
        g->p[i] = 0;
    }
    for (int i = 0; i < a->nd; i++) {
        int64_t in = x->dims[2 + i], size, pad = a->pad.v[i], adj;
        if (!a->kind->deconv) {
            if (dilated(a, i) > in + 2 * pad)
                return deft_op_error(op, DEFT_ERR_VALUE,
                                     "kernel %s (dilated %lld) is larger than input 0 (data)'s "
                                     "spatial dimension %d padded (%lld + 2 x %lld)",
                                     tuple_str(&a->kernel, s, sizeof s), (long long)dilated(a, i),
                                     i, (long long)in, (long long)pad);
            size = (in + 2 * pad - dilated(a, i)) / a->stride.v[i] + 1;
        } else {
            if (deconv_pad(op, a, i, in, &pad, &adj)) return -1;
            size = a->stride.v[i] * (in - 1) + dilated(a, i) - 2 * pad + adj;
            if (size < 1)
                return deft_op_error(op, DEFT_ERR_VALUE,
                                     "the output's spatial dimension %d would be %lld (input %lld, "
                                     "pad %lld): expected >= 1",
                                     i, (long long)size, (long long)in, (long long)pad);
        }
        out->dims[2 + i] = size;
        g->k[lead + i] = a->kernel.v[i];
        g->s[lead + i] = a->stride.v[i];
        g->d[lead + i] = a->dilate.v[i];
        g->p[lead + i] = pad;
        /* the image is the convolution's input: Convolution's data, Deconvolution's output */
        g->img[lead + i] = a->kind->deconv ? size : in;
        g->col[lead + i] = a->kind->deconv ? in : size;
    }
    g->chan = a->kind->deconv ? a->num_filter : channels;
    g->filt = a->kind->deconv ? channels : a->num_filter;
    /* BLAS takes int sizes */
    const int64_t limit = INT32_MAX;
    if (deft_conv_col_rows(g) > limit || deft_conv_col_size(g) > limit ||
        deft_conv_img_size(g) > limit || g->filt > limit)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "data of shape %s gives matrices beyond BLAS's int range",
                             deft_shape_format(x, s, sizeof s));
    return 0;
}

/* The weight's shape: (num_filter, channels / groups, kernel...) for
 * Convolution, (channels, num_filter / groups, kernel...) for Deconvolution. */
static deft_shape_t weight_shape(const conv_args_t *a, int64_t channels) {
    deft_shape_t w = {.ndim = a->nd + 2};
    w.dims[0] = a->kind->deconv ? channels : a->num_filter;
    w.dims[1] = (a->kind->deconv ? a->num_filter : channels) / a->num_group;
    for (int i = 0; i < a->nd; i++) w.dims[2 + i] = a->kernel.v[i];
    return w;
}

/* Check data, weight and bias; the geometry and output shape. */
static int conv_check(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, conv_args_t *a, deft_conv_geom_t *g,
                      deft_shape_t *out) {
    char s1[DEFT_SHAPE_STR_MAX], s2[DEFT_SHAPE_STR_MAX];
    if (conv_args(op, p, a)) return -1;
    if (nin != (a->no_bias ? 2 : 3))
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d (%s)", nin,
                             a->no_bias ? 2 : 3,
                             a->no_bias ? "data, weight; no_bias is true" : "data, weight, bias");
    if (deft_op_check_dtype_float_or_half(op, 0, in[0].dtype) ||
        deft_op_check_same_dtype(op, nin, in) || conv_geometry(op, a, &in[0].shape, g, out))
        return -1;
    deft_shape_t w = weight_shape(a, in[0].shape.dims[1]);
    if (!deft_shape_equal(&in[1].shape, &w))
        return deft_op_error(op, DEFT_ERR_VALUE, "input 1 (weight) has shape %s, expected %s",
                             deft_shape_format(&in[1].shape, s1, sizeof s1),
                             deft_shape_format(&w, s2, sizeof s2));
    if (!a->no_bias && (in[2].shape.ndim != 1 || in[2].shape.dims[0] != a->num_filter))
        return deft_op_error(op, DEFT_ERR_VALUE, "input 2 (bias) has shape %s, expected (%lld,)",
                             deft_shape_format(&in[2].shape, s1, sizeof s1),
                             (long long)a->num_filter);
    return 0;
}

int deft_conv_forward_geometry(const deft_param_value_t *p, const deft_desc_t *in,
                               deft_conv_geom_t *g) {
    conv_args_t a;
    deft_shape_t out;
    return conv_check(deft_registry_find("Convolution")->op, p, 2, in, &a, g, &out);
}

static int conv_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    conv_args_t a;
    deft_conv_geom_t g;
    if (conv_check(op, p, nin, in, &a, &g, &out[0].shape)) return -1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

/* weight and bias follow from the data's shape (graphs given only the data's). */
static int conv_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             deft_desc_t *in, bool *known, const deft_desc_t *out,
                             const bool *out_known) {
    (void)out, (void)out_known;
    conv_args_t a; /* bad parameters: nothing to infer; conv_infer will say why */
    if (!known[0] || conv_args(op, p, &a) || in[0].shape.ndim != a.nd + 2) return 0;
    if (!known[1]) {
        in[1] = (deft_desc_t){weight_shape(&a, in[0].shape.dims[1]), in[0].dtype};
        known[1] = true;
    }
    if (nin > 2 && !known[2]) {
        in[2] = (deft_desc_t){{1, {a.num_filter}}, in[0].dtype};
        known[2] = true;
    }
    return 0;
}

/* ---- running the products ---- */

typedef enum conv_product { LOWER, RAISE, WGRAD } conv_product_t;

#ifdef DEFT_HAVE_CUDA
typedef struct gpu_product {
    conv_product_t what;
    const deft_tensor_t *on;
    const deft_conv_geom_t *g;
    const void *src, *w, *bias;
    void *dst, *cols;
} gpu_product_t;

static int queue_gpu_product(void *ctx) {
    const gpu_product_t *c = ctx;
    int dev = c->on->device.id;
    deft_dtype_t dt = c->on->dtype;
    if (c->what == LOWER)
        return deft_conv_lower_gpu(dev, c->g, dt, c->src, c->w, c->bias, c->dst, c->cols);
    if (c->what == RAISE)
        return deft_conv_raise_gpu(dev, c->g, dt, c->src, c->w, c->bias, c->dst, c->cols);
    return deft_conv_wgrad_gpu(dev, c->g, dt, c->src, c->w, c->dst, c->cols);
}
#endif

/*
 * One product on the device of `on`. lower and raise map src to dst with
 * weight w and bias (NULL for none); wgrad takes the image as src and the
 * column side as w, and writes dW to dst.
 */
static int run(conv_product_t what, const deft_tensor_t *on, const deft_conv_geom_t *g,
               const void *src, const void *w, const void *bias, void *dst,
               const deft_content_key_t *wkey) {
#ifdef DEFT_HAVE_CUDA
    if (on->device.type == DEFT_DEV_GPU) {
        if (deft_dtype_is_half(on->dtype))
            return deft_error(DEFT_ERR_TYPE,
                              "Convolution and Deconvolution of %s data run on the CPU only; on a "
                              "GPU they take float32 or float64",
                              deft_dtype_name(on->dtype));
        /* Room for one image's im2col matrix, fenced as every GPU buffer is:
         * the work on it waits for its block's last user, and its next waits for this. */
        int64_t n = g->chan * deft_conv_kernel_size(g) * deft_conv_col_size(g);
        deft_storage_t *cols;
        if (deft_storage_new(on->device, (size_t)n * deft_dtype_size(on->dtype), &cols)) return -1;
        gpu_product_t call = {what, on, g, src, w, bias, dst, cols->data};
        deft_access_t access = {cols, true, DEFT_VALUE_NEW};
        int status = deft_fence_run(&access, 1, queue_gpu_product, &call);
        deft_storage_release(cols);
        return status;
    }
#endif
    if (what == LOWER) return deft_conv_lower_cpu(g, on->dtype, src, w, bias, dst, wkey);
    if (what == RAISE) return deft_conv_raise_cpu(g, on->dtype, src, w, bias, dst);
    return deft_conv_wgrad_cpu(g, on->dtype, src, w, dst, NULL);
}

static int bias_grad(const deft_tensor_t *dy, void *db) {
    int64_t space = 1;
    for (int i = 2; i < dy->shape.ndim; i++) space *= dy->shape.dims[i];
    int64_t batch = dy->shape.dims[0], channels = dy->shape.dims[1];
#ifdef DEFT_HAVE_CUDA
    if (dy->device.type == DEFT_DEV_GPU)
        return deft_conv_bias_grad_gpu(dy->device.id, dy->dtype, batch, channels, space,
                                       deft_tensor_data(dy), db);
#endif
    deft_conv_bias_grad_cpu(dy->dtype, batch, channels, space, deft_tensor_data(dy), db);
    return 0;
}

static void descs_of(int nin, const deft_tensor_t *in, deft_desc_t *desc) {
    for (int k = 0; k < nin; k++) desc[k] = (deft_desc_t){in[k].shape, in[k].dtype};
}

/* Convolution lowers its data into its output, Deconvolution raises it. */
static int conv_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    conv_args_t a;
    deft_conv_geom_t g;
    deft_shape_t shape;
    deft_desc_t desc[3];
    descs_of(nin, in, desc);
    if (conv_check(op, p, nin, desc, &a, &g, &shape)) return -1;
    /* In predict mode the weights are likely the same next call: a kernel may
     * keep what it derives from them. In training they change every step. */
    deft_content_key_t wkey;
    bool keyed = !deft_op_training() && deft_op_content_key(&in[1], &wkey);
    return run(a.kind->deconv ? RAISE : LOWER, &out[0], &g, deft_tensor_data(&in[0]),
               deft_tensor_data(&in[1]), nin == 3 ? deft_tensor_data(&in[2]) : NULL,
               deft_tensor_data(&out[0]), keyed ? &wkey : NULL);
}

/* ---- _conv_relu: Convolution, then relu (Activation), as one node ----
 *
 * Made by the Fuse pass (fuse.c) where only the relu reads the
 * convolution's output, so that no pass over the output applies it: the
 * small-channel kernels take max(y, 0) in their register tiles (LeNet's
 * first layer: its relu took 8 us of a 60 us convolution). Elsewhere the
 * two kernels run one after the other, relu in place. */
static int conv_relu_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    conv_args_t a;
    deft_conv_geom_t g;
    deft_shape_t shape;
    deft_desc_t desc[3];
    descs_of(nin, in, desc);
    if (conv_check(op, p, nin, desc, &a, &g, &shape)) return -1;
    const float *x = deft_tensor_data(&in[0]), *w = deft_tensor_data(&in[1]);
    const float *bias = nin == 3 ? deft_tensor_data(&in[2]) : NULL;
    if (out[0].device.type == DEFT_DEV_CPU && deft_conv_small_fits(&g, out[0].dtype))
        return deft_conv_small_lower(&g, x, w, bias, true, deft_tensor_data(&out[0]));
    if (out[0].device.type == DEFT_DEV_CPU && deft_conv_lanes_fits(&g, out[0].dtype))
        return deft_conv_lanes_lower(&g, x, w, bias, true, deft_tensor_data(&out[0]));
    if (conv_forward(op, p, nin, in, nout, out)) return -1;
    return deft_registry_run_kernel("Activation", "act_type", "relu", out, out);
}

/* ---- _backward_Convolution, _backward_Deconvolution: (grad, data, weight[, bias]) ---- */

static int backward_check(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, deft_conv_geom_t *g) {
    char s1[DEFT_SHAPE_STR_MAX], s2[DEFT_SHAPE_STR_MAX];
    conv_args_t a;
    deft_shape_t y;
    if (conv_args(op, p, &a)) return -1;
    if (nin != (a.no_bias ? 3 : 4))
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d (%s)", nin,
                             a.no_bias ? 3 : 4,
                             a.no_bias ? "grad, data, weight" : "grad, data, weight, bias");
    if (conv_check(op, p, nin - 1, in + 1, &a, g, &y)) return -1;
    if (!deft_shape_equal(&in[0].shape, &y) || in[0].dtype != in[1].dtype)
        return deft_op_error(
            op, DEFT_ERR_VALUE, "input 0 (the output gradient) is %s %s, expected %s %s",
            deft_dtype_name(in[0].dtype), deft_shape_format(&in[0].shape, s1, sizeof s1),
            deft_dtype_name(in[1].dtype), deft_shape_format(&y, s2, sizeof s2));
    return 0;
}

static int backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_conv_geom_t g;
    if (backward_check(op, p, nin, in, &g)) return -1;
    for (int k = 1; k < nin; k++) out[k - 1] = in[k];
    *nout = nin - 1;
    return 0;
}

/*
 * Convolution: d data = raise(dy), dW from the image x and column side dy.
 * Deconvolution: d data = lower(dy), dW from the image dy and column side x.
 * The bias gradient sums dy over all but its channels.
 */
static int backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    deft_conv_geom_t g;
    deft_desc_t desc[4];
    descs_of(nin, in, desc);
    if (backward_check(op, p, nin, desc, &g)) return -1;
    const bool dc = ((const conv_kind_t *)op->data)->deconv;
    const void *dy = deft_tensor_data(&in[0]), *x = deft_tensor_data(&in[1]),
               *w = deft_tensor_data(&in[2]);
    void *dw = deft_tensor_data(&out[1]);
    void *db = nin == 4 && deft_op_output_wanted(2) ? deft_tensor_data(&out[2]) : NULL;
    /* The data gradient of a network's first layer is read by no one: skipped. */
    if (deft_op_output_wanted(0) &&
        run(dc ? LOWER : RAISE, &out[0], &g, dy, w, NULL, deft_tensor_data(&out[0]), NULL))
        return -1;
    /* Convolution's dW on the CPU reads dy, whose sums are db: one pass for both. */
    if (!dc && db && deft_op_output_wanted(1) && out[1].device.type == DEFT_DEV_CPU)
        return deft_conv_wgrad_cpu(&g, out[1].dtype, x, dy, dw, db);
    if (deft_op_output_wanted(1) &&
        run(WGRAD, &out[1], &g, dc ? dy : x, dc ? x : dy, NULL, dw, NULL))
        return -1;
    return db ? bias_grad(&in[0], db) : 0;
}

/* The gradients of data, weight and bias from dy, the output's gradient:
 * one backward node with the forward's parameters. */
static void conv_gradient_of(deft_grad_builder_t *b, deft_gref_t dy, int nin,
                             deft_gref_t *in_grads) {
    const conv_kind_t *kind = b->op->data;
    deft_gref_t in[4] = {dy};
    for (int k = 0; k < nin; k++) in[1 + k] = b->input(b, k);
    const char *params[2 * DEFT_OP_MAX_PARAMS + 1];
    int np = 0;
    for (const deft_param_def_t *d = b->op->params; d->name; d++) {
        const char *v = b->attr(b, d->name);
        if (v) params[np++] = d->name, params[np++] = v;
    }
    params[np] = NULL;
    deft_gref_t r = b->apply(b, kind->backward, nin + 1, in, params, 0);
    for (int k = 0; k < nin; k++) in_grads[k] = (deft_gref_t){r.node, k};
}

static int conv_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                         deft_gref_t *in_grads) {
    (void)p;
    conv_gradient_of(b, b->out_grad(b, 0), nin, in_grads);
    return 0;
}

/* _conv_relu's: relu's gradient at its output (_backward_relu), then the
 * convolution's, so that a fused graph differentiates as the pair did. */
static int conv_relu_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                              deft_gref_t *in_grads) {
    (void)p;
    deft_gref_t dy = g_op2(b, "_backward_relu", b->out_grad(b, 0), b->output(b, 0), GRAD_NONE);
    conv_gradient_of(b, dy, nin, in_grads);
    return 0;
}

/* Inputs and outputs by no_bias (parameter 7 of Convolution, 9 of Deconvolution). */
static int conv_num_inputs(const deft_param_value_t *p) {
    return p[7].i ? 2 : 3;
}
static int deconv_num_inputs(const deft_param_value_t *p) {
    return p[9].i ? 2 : 3;
}
static int conv_backward_num_inputs(const deft_param_value_t *p) {
    return conv_num_inputs(p) + 1;
}
static int deconv_backward_num_inputs(const deft_param_value_t *p) {
    return deconv_num_inputs(p) + 1;
}
static int conv_backward_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return conv_num_inputs(p);
}
static int deconv_backward_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return deconv_num_inputs(p);
}

static const char *const conv_inputs[] = {"data", "weight", "bias", NULL};
static const char *const backward_inputs[] = {"grad", "data", "weight", "bias", NULL};

#define CONV_OP(name_, doc, params_, kind_, num_inputs_)                                           \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = conv_inputs, .min_inputs = 2,            \
        .max_inputs = 3, .params = params_, .infer = conv_infer, .forward = conv_forward,          \
        .forward_gpu = DEFT_GPU(conv_forward), .inplace_input = -1, .data = kind_,                 \
        .num_inputs = num_inputs_, .infer_inputs = conv_infer_inputs, .gradient = conv_gradient,   \
        .keys_weights = true                                                                       \
    }
#define BACKWARD_OP(name_, doc, params_, kind_, num_inputs_, num_outputs_)                         \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = backward_inputs, .min_inputs = 3,        \
        .max_inputs = 4, .params = params_, .infer = backward_infer, .forward = backward_forward,  \
        .forward_gpu = DEFT_GPU(backward_forward), .inplace_input = -1, .shape_inputs = 1u << 3,   \
        .data = kind_, .num_inputs = num_inputs_, .num_outputs = num_outputs_                      \
    }

#define CONV_DOC                                                                                   \
    "N-D convolution (cross-correlation) of (batch, channel, spatial...) data with weight "        \
    "(num_filter, channel / num_group, kernel...), plus bias (num_filter,)."
#define DECONV_DOC                                                                                 \
    "Transposed convolution (the data gradient of Convolution) with weight (channel, "             \
    "num_filter / num_group, kernel...), plus bias (num_filter,) unless no_bias."

static const deft_op_t conv_ops[] = {
    CONV_OP("Convolution", CONV_DOC, conv_params, &conv_kind, conv_num_inputs),
    {.name = "_conv_relu",
     .description = "Convolution, then relu (max(y, 0)), as one node (made by the Fuse pass).",
     .input_names = conv_inputs,
     .min_inputs = 2,
     .max_inputs = 3,
     .params = conv_params,
     .infer = conv_infer,
     .forward = conv_relu_forward,
     .forward_gpu = DEFT_GPU(conv_relu_forward),
     .inplace_input = -1,
     .data = &conv_kind,
     .num_inputs = conv_num_inputs,
     .infer_inputs = conv_infer_inputs,
     .gradient = conv_relu_gradient,
     .graph_only = true},
    CONV_OP("Deconvolution", DECONV_DOC, deconv_params, &deconv_kind, deconv_num_inputs),
    BACKWARD_OP("_backward_Convolution",
                "Gradients of Convolution's data, weight and bias from its output's gradient.",
                conv_params, &conv_kind, conv_backward_num_inputs, conv_backward_num_outputs),
    BACKWARD_OP("_backward_Deconvolution",
                "Gradients of Deconvolution's data, weight and bias from its output's gradient.",
                deconv_params, &deconv_kind, deconv_backward_num_inputs,
                deconv_backward_num_outputs),
};

DEFT_OP_FAMILY(deft_family_conv, conv_ops);
