/*
 * softmax and log_softmax along an axis, and the fused softmax
 * cross-entropy loss. All subtract the maximum before exponentiating, so
 * large inputs neither overflow nor lose the answer; accumulation is in
 * double. float32 rows take a vectorised path.
 */
#include <math.h>

#include "core/base/parallel.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/math/softmax_math.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/math/scalar_math.h"

typedef struct softmax_ctx {
    const void *x;
    void *y;
    deft_dtype_t dtype;
    int64_t n, inner;
    bool log;
} softmax_ctx_t;

/* A float32 row (softmax over the last axis, the common case): deft's
 * vectorised expf, and the sum in double over eight independent partial sums. */
DEFT_CLONES static void softmax_row_f32(const float *x, float *y, int64_t n, bool log_form) {
    float max = -INFINITY;
    for (int64_t k = 0; k < n; k++)
        if (x[k] > max || x[k] != x[k]) max = x[k];
    for (int64_t k = 0; k < n; k++) y[k] = deft_expf(x[k] - max);
    double part[8] = {0}, sum = 0;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) part[j] += y[k + j];
    for (; k < n; k++) sum += y[k];
    for (int j = 0; j < 8; j++) sum += part[j];
    if (log_form) {
        float log_sum = (float)log(sum);
        for (k = 0; k < n; k++) y[k] = (x[k] - max) - log_sum;
    } else {
        float scale = (float)(1 / sum);
        for (k = 0; k < n; k++) y[k] *= scale;
    }
}

static void softmax_range(void *arg, int64_t begin, int64_t end) {
    const softmax_ctx_t *c = arg;
    if (c->dtype == DEFT_DT_FLOAT32 && c->inner == 1) {
        for (int64_t line = begin; line < end; line++)
            softmax_row_f32((const float *)c->x + line * c->n, (float *)c->y + line * c->n, c->n,
                            c->log);
        return;
    }
    for (int64_t line = begin; line < end; line++) {
        int64_t o = line / c->inner, i = line % c->inner;
        deft_softmax_line(c->x, c->y, c->dtype, o * c->n * c->inner + i, c->n, c->inner, c->log);
    }
}

static const deft_param_def_t softmax_params[] = {
    {"axis", DEFT_PARAM_INT, "-1", "axis to normalise over", NULL, false}, {0}};

static int softmax_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int axis;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) ||
        deft_op_axis(op, "axis", p[0].i, in[0].shape.ndim, &axis))
        return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

static int softmax_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int axis;
    if (deft_op_axis(op, "axis", p[0].i, in[0].shape.ndim, &axis)) return -1;
    softmax_ctx_t c = {
        deft_tensor_data(&in[0]), deft_tensor_data(&out[0]), in[0].dtype, in[0].shape.dims[axis], 1,
        op->data != NULL};
    int64_t outer = 1;
    for (int d = 0; d < axis; d++) outer *= in[0].shape.dims[d];
    for (int d = axis + 1; d < in[0].shape.ndim; d++) c.inner *= in[0].shape.dims[d];
    int64_t lines = outer * c.inner;
    int64_t grain = DEFT_PARALLEL_GRAIN / (c.n ? 4 * c.n : 1);
    deft_parallel_for(c.n ? lines : 0, grain < 1 ? 1 : grain, softmax_range, &c);
    return 0;
}

/* ---- softmax_cross_entropy ---- */

static int bad_label(const deft_op_t *op, int64_t b, double label, int64_t classes) {
    return deft_op_error(op, DEFT_ERR_VALUE,
                         "label[%lld] is %g, expected a class index in [0, %lld)", (long long)b,
                         label, (long long)classes);
}

static int xent_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    char sd[DEFT_SHAPE_STR_MAX], sl[DEFT_SHAPE_STR_MAX];
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) ||
        deft_op_check_dtype_arith(op, 1, in[1].dtype))
        return -1;
    if (in[0].shape.ndim != 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has shape %s, expected (batch, classes)",
                             deft_shape_format(&in[0].shape, sd, sizeof sd));
    if (in[1].shape.ndim != 1 || in[1].shape.dims[0] != in[0].shape.dims[0])
        return deft_op_error(op, DEFT_ERR_VALUE, "input 1 (label) has shape %s, expected (%lld,)",
                             deft_shape_format(&in[1].shape, sl, sizeof sl),
                             (long long)in[0].shape.dims[0]);
    out[0].shape.ndim = 1;
    out[0].shape.dims[0] = 1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

/* Row b's label, which must be a class index. */
static int xent_label(const deft_op_t *op, const deft_tensor_t *labels, int64_t b, int64_t classes,
                      int64_t *out) {
    double label = deft_load_double(deft_tensor_data(labels), labels->dtype, b);
    if (!deft_xent_label_ok(label, classes)) return bad_label(op, b, label, classes);
    *out = (int64_t)label;
    return 0;
}

static int xent_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    int64_t batch = in[0].shape.dims[0], classes = in[0].shape.dims[1];
    double total = 0;
    for (int64_t b = 0; b < batch; b++) {
        int64_t label = 0;
        if (xent_label(op, &in[1], b, classes, &label)) return -1;
        total += deft_xent_row_loss(deft_tensor_data(&in[0]), in[0].dtype, b, classes, label);
    }
    deft_store_double(deft_tensor_data(&out[0]), out[0].dtype, 0, total);
    return 0;
}

/* d data of the summed cross-entropy: g (softmax(data) - one_hot(label)). */
static int xent_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_desc_t loss;
    int n;
    if (xent_infer(op, p, nin - 1, in + 1, &n, &loss)) return -1;
    if (deft_shape_size(&in[0].shape) != 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (the loss gradient) must have 1 element");
    out[0] = in[1];
    *nout = 1;
    return 0;
}

static int xent_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    int64_t batch = in[1].shape.dims[0], classes = in[1].shape.dims[1];
    double g = deft_load_double(deft_tensor_data(&in[0]), in[0].dtype, 0);
    for (int64_t b = 0; b < batch; b++) {
        int64_t label = 0;
        if (xent_label(op, &in[2], b, classes, &label)) return -1;
        deft_xent_row_grad(deft_tensor_data(&in[1]), deft_tensor_data(&out[0]), in[1].dtype, b,
                           classes, label, g);
    }
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int softmax_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int axis;
    if (deft_op_axis(op, "axis", p[0].i, in[0].shape.ndim, &axis)) return -1;
    deft_gpu_softmax_t s = {.dtype = in[0].dtype,
                            .x = deft_tensor_data(&in[0]),
                            .y = deft_tensor_data(&out[0]),
                            .n = in[0].shape.dims[axis],
                            .outer = 1,
                            .inner = 1,
                            .log_form = op->data != NULL};
    for (int d = 0; d < axis; d++) s.outer *= in[0].shape.dims[d];
    for (int d = axis + 1; d < in[0].shape.ndim; d++) s.inner *= in[0].shape.dims[d];
    return deft_gpu_softmax(deft_gpu_of(&in[0]), &s);
}

/* Both directions of the loss: the kernels check the labels and report the
 * first bad row, whose label is then read back for the message. */
static int xent_gpu(const deft_op_t *op, const deft_tensor_t *grad, const deft_tensor_t *data,
                    const deft_tensor_t *labels, const deft_tensor_t *out) {
    deft_gpu_xent_t x = {.dtype = data->dtype,
                         .x = deft_tensor_data(data),
                         .labels = deft_tensor_data(labels),
                         .label_dtype = labels->dtype,
                         .batch = data->shape.dims[0],
                         .classes = data->shape.dims[1],
                         .g = grad ? deft_tensor_data(grad) : NULL,
                         .g_dtype = grad ? grad->dtype : data->dtype,
                         .out = deft_tensor_data(out)};
    int64_t bad = -1;
    if (deft_gpu_xent(deft_gpu_of(data), &x, &bad)) return -1;
    if (bad < 0) return 0;
    double label = 0;
    char element[8];
    if (deft_gpu_read_element(labels, bad, element) == 0)
        label = deft_load_double(element, labels->dtype, 0);
    return bad_label(op, bad, label, x.classes);
}

static int xent_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    return xent_gpu(op, NULL, &in[0], &in[1], &out[0]);
}

static int xent_backward_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                     const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    return xent_gpu(op, &in[0], &in[1], &in[2], &out[0]);
}
#endif

/* ---- gradients ---- */

static int grad_softmax(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) { /* y (g - sum(g y, axis)) */
    (void)p, (void)nin;
    deft_gref_t y = b->output(b, 0), g = b->out_grad(b, 0);
    const char *axis = g_attr(b, "axis", "-1");
    deft_gref_t dot =
        g_op1(b, "sum", g_mul(b, g, y), GRAD_PARAMS("axis", axis, "keepdims", "true"));
    in_grads[0] = g_mul(b, y, g_op2(b, "broadcast_sub", g, dot, GRAD_NONE));
    return 0;
}

static int grad_log_softmax(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                            deft_gref_t *in_grads) { /* g - exp(y) sum(g, axis) */
    (void)p, (void)nin;
    deft_gref_t y = b->output(b, 0), g = b->out_grad(b, 0);
    const char *axis = g_attr(b, "axis", "-1");
    deft_gref_t total = g_op1(b, "sum", g, GRAD_PARAMS("axis", axis, "keepdims", "true"));
    deft_gref_t spread = g_op2(b, "broadcast_mul", g_op1(b, "exp", y, GRAD_NONE), total, GRAD_NONE);
    in_grads[0] = g_op2(b, "elemwise_sub", g, spread, GRAD_NONE);
    return 0;
}

static int grad_xent(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), b->input(b, 1)};
    in_grads[0] = b->apply(b, "_backward_softmax_cross_entropy", 3, in, GRAD_NONE, 0);
    return 0; /* labels are not differentiable */
}

static const char *const data_label[] = {"data", "label", NULL};
static const char *const grad_data_label[] = {"grad", "data", "label", NULL};

static const deft_op_t softmax_ops[] = {
    {.name = "softmax",
     .description = "Softmax along an axis: exp(x) / sum(exp(x)), stably.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = softmax_params,
     .infer = softmax_infer,
     .forward = softmax_forward,
     .forward_gpu = DEFT_GPU(softmax_forward_gpu),
     .inplace_input = 0,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_softmax},
    {.name = "log_softmax",
     .description = "Log of softmax along an axis, computed stably.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = softmax_params,
     .infer = softmax_infer,
     .forward = softmax_forward,
     .forward_gpu = DEFT_GPU(softmax_forward_gpu),
     .inplace_input = 0,
     .data = "log",
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_log_softmax},
    {.name = "softmax_cross_entropy",
     .description = "Sum over the batch of -log(softmax(data)[label]), for data (batch, classes) "
                    "and integer class labels (batch,); the result has shape (1,).",
     .input_names = data_label,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = xent_infer,
     .forward = xent_forward,
     .forward_gpu = DEFT_GPU(xent_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_xent},
    {.name = "_backward_softmax_cross_entropy",
     .description = "Gradient of softmax_cross_entropy with respect to data.",
     .input_names = grad_data_label,
     .min_inputs = 3,
     .max_inputs = 3,
     .infer = xent_backward_infer,
     .forward = xent_backward_forward,
     .forward_gpu = DEFT_GPU(xent_backward_forward_gpu),
     .inplace_input = -1},
};

DEFT_OP_FAMILY(deft_family_softmax, softmax_ops);
