/*
 * Pooling (MXNet's operator): max, average, sum and Lp pooling over 1, 2 or
 * 3 spatial axes of NCW / NCHW / NCDHW data, and its gradient
 * _backward_Pooling. The window arithmetic lives in core/math/pool_math.h,
 * shared with the GPU kernel; this file checks parameters, computes output
 * shapes exactly as MXNet (valid, full = ceil mode, same) and builds the
 * gradient; the CPU loops are in pool_cpu.c, the GPU's in pool.cu.
 */

#include "core/math/pool_math.h"
#include "core/op/grad.h"
#include "core/op/op.h"
#include "core/op/pool_cpu.h"

enum {
    P_KERNEL,
    P_TYPE,
    P_GLOBAL,
    P_CUDNN_OFF,
    P_CONVENTION,
    P_STRIDE,
    P_PAD,
    P_P_VALUE,
    P_COUNT_PAD,
    P_LAYOUT,
    P_COUNT
};
enum { CONV_VALID, CONV_FULL, CONV_SAME };

static const char *const pool_types[] = {"max", "avg", "sum", "lp", NULL};
static const char *const conventions[] = {"valid", "full", "same", NULL};
/* MXNet's layouts; the channel-last ones parse but are refused by inference. */
static const char *const layouts[] = {"NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC", NULL};

static const deft_param_def_t pool_params[] = {
    {"kernel", DEFT_PARAM_TUPLE, "()", "window size: (x,), (y, x) or (d, y, x)", NULL, false},
    {"pool_type", DEFT_PARAM_ENUM, "max", "max, avg, sum or lp", pool_types, false},
    {"global_pool", DEFT_PARAM_BOOL, "false", "pool over the whole spatial extent", NULL, false},
    {"cudnn_off", DEFT_PARAM_BOOL, "false", "accepted for MXNet compatibility", NULL, false},
    {"pooling_convention", DEFT_PARAM_ENUM, "valid",
     "valid (floor), full (ceil) or same (1-D only)", conventions, false},
    {"stride", DEFT_PARAM_TUPLE, "()", "step per spatial axis (default 1)", NULL, false},
    {"pad", DEFT_PARAM_TUPLE, "()", "zero padding per spatial axis (default 0)", NULL, false},
    {"p_value", DEFT_PARAM_INT, "None", "power of Lp pooling: 1, 2 or 3", NULL, true},
    {"count_include_pad", DEFT_PARAM_BOOL, "None",
     "average pooling counts padded elements (default true)", NULL, true},
    {"layout", DEFT_PARAM_ENUM, "None", "NCW, NCHW or NCDHW (default from the rank)", layouts,
     true},
    {0}};

/* The spatial rank of a layout, by its index in `layouts`. */
static int layout_rank(int64_t layout) {
    return (int)(layout % 3) + 1;
}

static int check_layout(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *x) {
    if (p[P_LAYOUT].none) return 0;
    const char *name = layouts[p[P_LAYOUT].i];
    if (p[P_LAYOUT].i >= 3)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "layout %s is not supported; only NCW, NCHW and NCDHW are", name);
    char s[DEFT_SHAPE_STR_MAX];
    if (layout_rank(p[P_LAYOUT].i) + 2 != x->ndim)
        return deft_op_error(op, DEFT_ERR_VALUE, "layout %s needs %d-D data, got shape %s", name,
                             layout_rank(p[P_LAYOUT].i) + 2, deft_shape_format(x, s, sizeof s));
    return 0;
}

/* kernel, stride and pad of a non-global pooling over n spatial axes. */
static int check_window_params(const deft_op_t *op, const deft_param_value_t *p, int n,
                               const deft_shape_t *x) {
    char s[DEFT_SHAPE_STR_MAX];
    const deft_tuple_t *k = &p[P_KERNEL].t, *st = &p[P_STRIDE].t, *pd = &p[P_PAD].t;
    if (k->n == 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "kernel is required unless global_pool is true");
    if (k->n != n)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "kernel has %d entries but data has shape %s, expected %d-D data",
                             k->n, deft_shape_format(x, s, sizeof s), k->n + 2);
    if ((st->n && st->n != n) || (pd->n && pd->n != n))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "stride has %d and pad %d entries, expected %d like kernel (or none)",
                             st->n, pd->n, n);
    for (int i = 0; i < n; i++) {
        int64_t kernel = k->v[i], stride = st->n ? st->v[i] : 1, pad = pd->n ? pd->v[i] : 0;
        if (kernel < 1 || stride < 1 || pad < 0 || kernel > INT32_MAX || stride > INT32_MAX ||
            pad > INT32_MAX) /* MXNet holds them as int; so the sums below cannot overflow */
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "kernel %lld, stride %lld and pad %lld on axis %d; expected "
                                 "kernel and stride >= 1 and pad >= 0 (at most 2^31 - 1)",
                                 (long long)kernel, (long long)stride, (long long)pad, i);
        /* A window that could lie wholly in the padding has nothing to pool. */
        if (pad >= kernel)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "pad (%lld) must be smaller than kernel (%lld) on axis %d",
                                 (long long)pad, (long long)kernel, i);
        int64_t size = x->dims[2 + i];
        if (kernel > size + 2 * pad)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "kernel size (%lld) exceeds input (%lld padded to %lld) on axis "
                                 "%d",
                                 (long long)kernel, (long long)size, (long long)(size + 2 * pad),
                                 i);
    }
    return 0;
}

/* The output length of one axis under the convention (the window fits: checked). */
static int64_t out_length(int convention, int64_t size, int64_t kernel, int64_t stride,
                          int64_t pad) {
    int64_t span = size + 2 * pad;
    if (convention == CONV_SAME) return (span + stride - 1) / stride;
    if (convention == CONV_FULL) return 1 + (span - kernel + stride - 1) / stride;
    return 1 + (span - kernel) / stride;
}

/* Check everything and describe the pooling of data shape x; out gets the result's shape. */
static int pool_geometry(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *x,
                         deft_pool_geom_t *g, deft_shape_t *out) {
    char s[DEFT_SHAPE_STR_MAX];
    int type = (int)p[P_TYPE].i, convention = (int)p[P_CONVENTION].i;
    if (type == DEFT_POOL_LP && p[P_P_VALUE].none)
        return deft_op_error(op, DEFT_ERR_VALUE, "pool_type 'lp' needs p_value");
    if (type == DEFT_POOL_LP && (p[P_P_VALUE].i < 1 || p[P_P_VALUE].i > 3))
        return deft_op_error(op, DEFT_ERR_VALUE, "p_value is %lld, expected 1, 2 or 3",
                             (long long)p[P_P_VALUE].i);
    if (x->ndim < 3 || x->ndim > 5)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "data has shape %s, expected 3-D (batch, channel, x), 4-D (batch, "
                             "channel, y, x) or 5-D (batch, channel, d, y, x)",
                             deft_shape_format(x, s, sizeof s));
    if (check_layout(op, p, x)) return -1;
    int n = x->ndim - 2;
    bool global = p[P_GLOBAL].i;
    if (convention == CONV_SAME) {
        bool padded = false;
        for (int i = 0; i < p[P_PAD].t.n; i++) padded |= p[P_PAD].t.v[i] != 0;
        if (n != 1)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "pooling_convention 'same' supports 1-D pooling only (3-D data), "
                                 "got shape %s",
                                 deft_shape_format(x, s, sizeof s));
        if (padded)
            return deft_op_error(op, DEFT_ERR_VALUE, "pooling_convention 'same' does not take pad");
    }
    if (!global && check_window_params(op, p, n, x)) return -1;
    *g = (deft_pool_geom_t){.planes = x->dims[0] * x->dims[1],
                            .type = type,
                            .p = type == DEFT_POOL_LP ? (int)p[P_P_VALUE].i : 1,
                            .count_include_pad = p[P_COUNT_PAD].none || p[P_COUNT_PAD].i};
    *out = *x;
    for (int a = 0; a < 3; a++) {
        int i = a - (3 - n); /* the spatial axis of data behind axis a, if any */
        int64_t size = i >= 0 ? x->dims[2 + i] : 1;
        g->in[a] = size;
        g->kernel[a] = i < 0 ? 1 : global ? size : p[P_KERNEL].t.v[i];
        g->stride[a] = i < 0 || global || !p[P_STRIDE].t.n ? 1 : p[P_STRIDE].t.v[i];
        g->pad[a] = i < 0 || global || !p[P_PAD].t.n ? 0 : p[P_PAD].t.v[i];
        g->out[a] =
            global ? 1 : out_length(convention, size, g->kernel[a], g->stride[a], g->pad[a]);
        if (i >= 0) out->dims[2 + i] = g->out[a];
    }
    return 0;
}

static int pool_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    deft_pool_geom_t g;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) ||
        pool_geometry(op, p, &in[0].shape, &g, &out[0].shape))
        return -1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static int pool_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pool_geom_t g;
    deft_shape_t shape;
    if (pool_geometry(op, p, &in[0].shape, &g, &shape)) return -1;
    deft_pool_cpu_forward(&g, in[0].dtype, deft_tensor_data(&in[0]), deft_tensor_data(&out[0]));
    return 0;
}

/* ---- backward: (out_grad, data, output) -> d data ---- */

static int unpool_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    deft_desc_t y;
    int n;
    if (pool_infer(op, p, 1, &in[1], &n, &y)) return -1;
    for (int k = 0; k < 3; k += 2)
        if (!deft_shape_equal(&in[k].shape, &y.shape) || in[k].dtype != y.dtype) {
            char s[DEFT_SHAPE_STR_MAX], want[DEFT_SHAPE_STR_MAX];
            return deft_op_error(
                op, DEFT_ERR_VALUE,
                "input %d (%s) has shape %s, expected %s like the pooling's output", k,
                k ? "output" : "out_grad", deft_shape_format(&in[k].shape, s, sizeof s),
                deft_shape_format(&y.shape, want, sizeof want));
        }
    out[0] = in[1];
    *nout = 1;
    return 0;
}

/* A gradient call on (out_grad, data, output) into d data; -1 on bad parameters. */
static int unpool_call(const deft_op_t *op, const deft_param_value_t *p, const deft_tensor_t *in,
                       const deft_tensor_t *out, deft_pool_grad_t *j) {
    *j = (deft_pool_grad_t){.dtype = in[1].dtype,
                            .dy = deft_tensor_data(&in[0]),
                            .x = deft_tensor_data(&in[1]),
                            .y = deft_tensor_data(&in[2]),
                            .dx = deft_tensor_data(&out[0])};
    deft_shape_t shape;
    return pool_geometry(op, p, &in[1].shape, &j->g, &shape);
}

/* _backward_Pooling, and _backward_Pooling_relu (op->data non-NULL): the
 * Fuse pass's node for relu's gradient at the pooling's data (relu's
 * output) taken of the pooling's gradient, _backward_relu(_backward_Pooling(
 * g, y, p), y), applied to each run of planes while it is in cache, or in
 * the vector rows' registers (LeNet's first layer: its relu gradient took
 * 13 us over 0.4 MB in a pass of its own). */
static int unpool_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pool_grad_t j;
    if (unpool_call(op, p, in, out, &j)) return -1;
    j.relu = op->data != NULL;
    deft_pool_cpu_backward(&j);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int pool_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pool_geom_t g;
    deft_shape_t shape;
    if (pool_geometry(op, p, &in[0].shape, &g, &shape)) return -1;
    return deft_gpu_pooling(in[0].device.id, &g, in[0].dtype, deft_tensor_data(&in[0]),
                            deft_tensor_data(&out[0]));
}

static int unpool_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pool_grad_t j;
    if (unpool_call(op, p, in, out, &j)) return -1;
    j.relu = op->data != NULL;
    if (deft_shape_size(&in[1].shape) == 0) return 0;
    return deft_gpu_unpooling(in[1].device.id, &j);
}
#endif

/* d data through _backward_Pooling, which reads the output gradient, the data and the output. */
static int grad_pooling(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const char *params[2 * P_COUNT + 1];
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), b->output(b, 0)};
    in_grads[0] =
        b->apply(b, "_backward_Pooling", 3, in, g_forward_params(b, pool_params, params), 0);
    return 0;
}

static const char *const unpool_inputs[] = {"out_grad", "data", "output", NULL};

static const deft_op_t pool_ops[] = {
    {.name = "Pooling",
     .description = "Max, average, sum or Lp pooling over the spatial axes of NCW, NCHW or NCDHW "
                    "data; pooling_convention valid floors the output length, full ceils it.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = pool_params,
     .infer = pool_infer,
     .forward = pool_forward,
     .forward_gpu = DEFT_GPU(pool_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_pooling},
    {.name = "_backward_Pooling",
     .description = "Gradient of Pooling with respect to data, from the output gradient, the data "
                    "and the output; max pooling routes each gradient to the first maximum.",
     .input_names = unpool_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = pool_params,
     .infer = unpool_infer,
     .forward = unpool_forward,
     .forward_gpu = DEFT_GPU(unpool_forward_gpu),
     .inplace_input = -1},
    {.name = "_backward_Pooling_relu",
     .description = "relu's gradient at the pooling's data (relu's output) of _backward_Pooling's "
                    "result, as one node (made by the Fuse pass).",
     .input_names = unpool_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = pool_params,
     .infer = unpool_infer,
     .forward = unpool_forward,
     .forward_gpu = DEFT_GPU(unpool_forward_gpu),
     .inplace_input = -1,
     .data = "relu",
     .graph_only = true},
};

DEFT_OP_FAMILY(deft_family_pool, pool_ops);
