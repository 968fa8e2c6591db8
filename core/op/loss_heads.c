/*
 * Loss heads, MXNet 1.9.1's: SoftmaxOutput (alias Softmax), the
 * Linear/Logistic/MAE regression outputs, MakeLoss and make_loss, and the
 * helpers that sit beside them in loss graphs, smooth_l1 and stop_gradient.
 *
 * A head's forward is a plain function (softmax, sigmoid, identity); its
 * gradient is not that function's derivative but the loss's gradient with
 * respect to the head's input, and it ignores the gradient arriving at the
 * head (MXNet's rule: a head ends the graph, backward() starts there). So
 * each head's gradient is a backward operator of its own
 * (_backward_SoftmaxOutput ...) fed with the head's output and label, and
 * the head gradient is used only where a parameter asks (out_grad).
 *
 * The normalisations copy MXNet exactly, oddities included, because trained
 * models and their learning rates were tuned against them: SoftmaxOutput
 * with multi_output divides by the spatial size even for 'null';
 * MakeLoss's 'batch' divides by the rows of the input flattened to 2-D (1
 * for a 1-D loss); the regression outputs divide by the label's elements
 * per sample. The arithmetic is in core/math/loss_math.h, shared with the
 * GPU kernels (loss_heads.cu).
 */
#include <string.h>

#include "core/base/parallel.h"
#include "core/math/loss_math.h"
#include "core/math/scalar_math.h"
#include "core/math/softmax_math.h"
#include "core/op/grad.h"
#include "core/op/op.h"

#ifdef DEFT_HAVE_CUDA
#include "core/op/gpu_ops.h"

/* Launchers defined in loss_heads.cu: the gradient lines of SoftmaxOutput,
 * an elementwise map, and a count (waited for: the normaliser is needed on
 * the host before the gradient is queued, as in MXNet). */
int deft_gpu_softmax_output_grad(int dev, const deft_softmax_output_plan_t *plan);
int deft_gpu_loss_map(int dev, const deft_loss_map_t *map);
int deft_gpu_loss_count(int dev, const deft_loss_count_t *count, int64_t *out);

static bool on_gpu(const deft_tensor_t *t) {
    return t->device.type == DEFT_DEV_GPU;
}
#endif

typedef struct map_ctx {
    const deft_loss_map_t *m;
} map_ctx_t;

static void loss_map_range(void *arg, int64_t begin, int64_t end) {
    const deft_loss_map_t *m = ((const map_ctx_t *)arg)->m;
    for (int64_t i = begin; i < end; i++) deft_loss_map_one(m, i);
}

/* Run an elementwise map where tensor t lives. */
static int loss_map(const deft_tensor_t *t, const deft_loss_map_t *m) {
    (void)t; /* its device, with CUDA */
#ifdef DEFT_HAVE_CUDA
    if (on_gpu(t)) return deft_gpu_loss_map(deft_gpu_of(t), m);
#endif
    map_ctx_t c = {m};
    deft_parallel_for(m->n, DEFT_PARALLEL_GRAIN / 8, loss_map_range, &c);
    return 0;
}

/* The elements of t that a normalisation counts (see deft_loss_count_t). */
static int loss_count(const deft_tensor_t *t, bool labels, double value, int64_t *out) {
    deft_loss_count_t c = {deft_tensor_data(t), t->dtype, deft_shape_size(&t->shape), labels,
                           value};
#ifdef DEFT_HAVE_CUDA
    if (on_gpu(t)) return deft_gpu_loss_count(deft_gpu_of(t), &c, out);
#endif
    *out = 0;
    for (int64_t i = 0; i < c.n; i++) *out += deft_loss_counted(&c, i);
    return 0;
}

static int64_t dims_product(const deft_shape_t *s, int from, int to) {
    int64_t n = 1;
    for (int d = from; d < to; d++) n *= s->dims[d];
    return n;
}

/* The forward node's parameters as they were given, for its backward node
 * (which reads the same table): kv has room for 2 DEFT_OP_MAX_PARAMS + 1. */
static const char *const *given_params(deft_grad_builder_t *b, const char **kv) {
    int n = 0;
    for (const deft_param_def_t *d = b->op->params; d && d->name; d++) {
        const char *v = b->attr(b, d->name);
        if (v) kv[n++] = d->name, kv[n++] = v;
    }
    kv[n] = NULL;
    return kv;
}

static int label_dtype_check(const deft_op_t *op, const deft_desc_t *in) {
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    if (in[1].dtype != in[0].dtype)
        return deft_op_error(op, DEFT_ERR_TYPE,
                             "input 1 (label) has dtype %s, expected %s like the data",
                             deft_dtype_name(in[1].dtype), deft_dtype_name(in[0].dtype));
    return 0;
}

static const char *const data_label[] = {"data", "label", NULL};
static const char *const normalizations[] = {"null", "batch", "valid", NULL};
enum { NORM_NULL, NORM_BATCH, NORM_VALID };

/* ---- SoftmaxOutput ---- */

enum {
    SO_GRAD_SCALE,
    SO_IGNORE_LABEL,
    SO_MULTI_OUTPUT,
    SO_USE_IGNORE,
    SO_PRESERVE_SHAPE,
    SO_NORMALIZATION,
    SO_OUT_GRAD,
    SO_SMOOTH_ALPHA
};

static const deft_param_def_t softmax_output_params[] = {
    {"grad_scale", DEFT_PARAM_FLOAT, "1", "scales the gradient", NULL, false},
    {"ignore_label", DEFT_PARAM_FLOAT, "-1",
     "label whose instances get no gradient when use_ignore is true", NULL, false},
    {"multi_output", DEFT_PARAM_BOOL, "false",
     "softmax along axis 1, with a label per position of the axes after it", NULL, false},
    {"use_ignore", DEFT_PARAM_BOOL, "false", "instances labelled ignore_label get no gradient",
     NULL, false},
    {"preserve_shape", DEFT_PARAM_BOOL, "false", "softmax along the last axis", NULL, false},
    {"normalization", DEFT_PARAM_ENUM, "null",
     "divide the gradient by nothing, the batch size, or the number of labels not ignored",
     normalizations, false},
    {"out_grad", DEFT_PARAM_BOOL, "false", "multiply the gradient by the head gradient", NULL,
     false},
    {"smooth_alpha", DEFT_PARAM_FLOAT, "0",
     "label smoothing: taken from the label's class and spread over the others", NULL, false},
    {0}};

/* The label shape inferred from the data: (batch, positions) with
 * multi_output, else the data's shape without its last axis. */
static deft_shape_t softmax_output_label_shape(const deft_param_value_t *p, const deft_shape_t *s) {
    deft_shape_t l = {.ndim = s->ndim - 1};
    if (p[SO_MULTI_OUTPUT].i) {
        l.ndim = 2;
        l.dims[0] = s->dims[0], l.dims[1] = dims_product(s, 2, s->ndim);
        return l;
    }
    for (int d = 0; d < l.ndim; d++) l.dims[d] = s->dims[d];
    return l;
}

/* Whether a multi_output label fits: (n, positions), (n, d2, d3, ...) or (n, 1, d2, ...). */
static bool multi_output_label_fits(const deft_shape_t *data, const deft_shape_t *label) {
    deft_shape_t flat = {.ndim = 2, .dims = {data->dims[0], dims_product(data, 2, data->ndim)}};
    deft_shape_t squeezed = {.ndim = data->ndim - 1}, kept = *data;
    squeezed.dims[0] = data->dims[0];
    for (int d = 2; d < data->ndim; d++) squeezed.dims[d - 1] = data->dims[d];
    kept.dims[1] = 1;
    return deft_shape_equal(label, &flat) || deft_shape_equal(label, &squeezed) ||
           deft_shape_equal(label, &kept);
}

static int softmax_output_check(const deft_op_t *op, const deft_param_value_t *p,
                                const deft_desc_t *in) {
    char sd[DEFT_SHAPE_STR_MAX], sl[DEFT_SHAPE_STR_MAX], se[DEFT_SHAPE_STR_MAX];
    double alpha = p[SO_SMOOTH_ALPHA].f;
    if (!(alpha >= 0 && alpha <= 1))
        return deft_op_error(op, DEFT_ERR_VALUE, "smooth_alpha is %g, expected a value in [0, 1]",
                             alpha);
    if (label_dtype_check(op, in)) return -1;
    const deft_shape_t *data = &in[0].shape, *label = &in[1].shape;
    if (data->ndim < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (data) is a scalar, expected an array");
    if (deft_shape_equal(data, label)) return 0; /* probabilities as labels */
    if (data->ndim < 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has shape %s: class labels need (batch, classes, "
                             "...), or a label of the data's shape",
                             deft_shape_format(data, sd, sizeof sd));
    deft_shape_t want = softmax_output_label_shape(p, data);
    bool fits = p[SO_MULTI_OUTPUT].i ? multi_output_label_fits(data, label)
                                     : deft_shape_equal(label, &want);
    if (!fits)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 1 (label) has shape %s, expected %s%s (or %s, the data's "
                             "shape, for probabilities)",
                             deft_shape_format(label, sl, sizeof sl),
                             deft_shape_format(&want, se, sizeof se),
                             p[SO_MULTI_OUTPUT].i ? " or the data's shape without axis 1" : "",
                             deft_shape_format(data, sd, sizeof sd));
    return 0;
}

static int softmax_output_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (softmax_output_check(op, p, in)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

static int softmax_output_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                       deft_desc_t *in, bool *known, const deft_desc_t *out,
                                       const bool *out_known) {
    (void)op, (void)nin;
    if (!known[0] && out_known[0]) in[0] = out[0], known[0] = true;
    if (known[0] && !known[1] && in[0].shape.ndim >= 2) {
        in[1] = (deft_desc_t){softmax_output_label_shape(p, &in[0].shape), in[0].dtype};
        known[1] = true;
    }
    return 0;
}

/* The softmax family's plan for SoftmaxOutput's forward: whole lines, no temperature. */
static deft_softmax_plan_t softmax_plan_of(const deft_softmax_output_plan_t *c) {
    return (deft_softmax_plan_t){.x = c->x,
                                 .y = c->y,
                                 .x_dtype = c->dtype,
                                 .y_dtype = c->dtype,
                                 .outer = c->outer,
                                 .n = c->n,
                                 .inner = c->inner,
                                 .scale = 1};
}

static void softmax_lines(void *arg, int64_t begin, int64_t end) {
    deft_softmax_plan_t s = softmax_plan_of(arg);
    for (int64_t line = begin; line < end; line++) deft_softmax_plan_line(&s, line);
}

static void softmax_output_grad_lines(void *arg, int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; line++) deft_softmax_output_grad_line(arg, line);
}

static void run_lines(deft_softmax_output_plan_t *c, deft_range_fn fn) {
    int64_t lines = c->outer * c->inner;
    int64_t grain = DEFT_PARALLEL_GRAIN / (c->n ? 4 * c->n : 1);
    deft_parallel_for(c->n ? lines : 0, grain < 1 ? 1 : grain, fn, c);
}

/* The plan of SoftmaxOutput's lines over data (or its softmax) x into y. */
static deft_softmax_output_plan_t
softmax_output_plan(const deft_param_value_t *p, const deft_tensor_t *x, const deft_tensor_t *y) {
    deft_softmax_output_plan_t plan = {
        .x = deft_tensor_data(x), .y = deft_tensor_data(y), .dtype = x->dtype};
    const deft_shape_t *s = &x->shape;
    int nd = s->ndim;
    if (p[SO_MULTI_OUTPUT].i)
        plan.outer = s->dims[0], plan.n = s->dims[1], plan.inner = dims_product(s, 2, nd);
    else if (p[SO_PRESERVE_SHAPE].i)
        plan.outer = dims_product(s, 0, nd - 1), plan.n = s->dims[nd - 1], plan.inner = 1;
    else
        plan.outer = s->dims[0], plan.n = dims_product(s, 1, nd), plan.inner = 1;
    return plan;
}

static int softmax_output_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_softmax_output_plan_t plan = softmax_output_plan(p, &in[0], &out[0]);
    run_lines(&plan, softmax_lines);
    return 0;
}

/* How the gradient of class labels is formed: MXNet's normaliser over
 * `labels` label values of which `valid` are not ignore_label. */
static deft_softmax_output_rule_t softmax_output_rule(const deft_param_value_t *p,
                                                      const deft_softmax_output_plan_t *v,
                                                      int64_t labels, int64_t valid) {
    bool multi = p[SO_MULTI_OUTPUT].i;
    double scale = p[SO_GRAD_SCALE].f, positions = (double)(v->inner ? v->inner : 1);
    switch (p[SO_NORMALIZATION].i) {
    case NORM_BATCH: /* the label's first axis: the batch with multi_output, else all labels */
        scale /=
            multi ? positions * (double)(v->outer ? v->outer : 1) : (double)(labels ? labels : 1);
        break;
    case NORM_VALID: /* labels other than ignore_label, whether or not use_ignore is set */
        scale /= (double)(valid > 0 ? valid : 1);
        break;
    default:
        if (multi) scale /= positions;
    }
    return (deft_softmax_output_rule_t){
        .scale = scale,
        .smooth_alpha = multi ? 0 : p[SO_SMOOTH_ALPHA].f, /* MXNet smooths only without it */
        .use_ignore = p[SO_USE_IGNORE].i != 0,
        .ignore = deft_loss_label(p[SO_IGNORE_LABEL].f)};
}

/* _backward_SoftmaxOutput(out, label): the gradient with respect to the data. */
static int softmax_output_backward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                   const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    if (deft_shape_equal(&in[0].shape, &in[1].shape)) { /* probabilities: no normaliser */
        deft_loss_map_t m = {.kind = DEFT_LOSS_DIFF,
                             .dtype = in[0].dtype,
                             .n = deft_shape_size(&in[0].shape),
                             .a = deft_tensor_data(&in[0]),
                             .b = deft_tensor_data(&in[1]),
                             .y = deft_tensor_data(&out[0]),
                             .s = p[SO_GRAD_SCALE].f};
        return loss_map(&in[0], &m);
    }
    deft_softmax_output_plan_t plan = softmax_output_plan(p, &in[0], &out[0]);
    int64_t valid = 0;
    if (p[SO_NORMALIZATION].i == NORM_VALID &&
        loss_count(&in[1], true, p[SO_IGNORE_LABEL].f, &valid))
        return -1;
    plan.label = deft_tensor_data(&in[1]);
    plan.rule = softmax_output_rule(p, &plan, deft_shape_size(&in[1].shape), valid);
#ifdef DEFT_HAVE_CUDA
    if (on_gpu(&in[0])) return deft_gpu_softmax_output_grad(deft_gpu_of(&in[0]), &plan);
#endif
    run_lines(&plan, softmax_output_grad_lines);
    return 0;
}

static int grad_softmax_output(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                               deft_gref_t *in_grads) {
    (void)nin;
    const char *kv[2 * DEFT_OP_MAX_PARAMS + 1];
    deft_gref_t in[2] = {b->output(b, 0), b->input(b, 1)};
    deft_gref_t g = b->apply(b, "_backward_SoftmaxOutput", 2, in, given_params(b, kv), 0);
    in_grads[0] = p[SO_OUT_GRAD].i ? g_mul(b, g, b->out_grad(b, 0)) : g;
    return 0; /* the label gets none */
}

/* ---- LinearRegressionOutput, LogisticRegressionOutput, MAERegressionOutput ---- */

typedef struct regression {
    const char *backward; /* its gradient operator */
    bool sigmoid;         /* forward: sigmoid (else identity) */
    bool sign;            /* gradient: sign(out - label) (else out - label) */
} regression_t;

static const regression_t linear_reg = {"_backward_linear_reg_out", false, false};
static const regression_t logistic_reg = {"_backward_logistic_reg_out", true, false};
static const regression_t mae_reg = {"_backward_mae_reg_out", false, true};

static const deft_param_def_t regression_params[] = {
    {"grad_scale", DEFT_PARAM_FLOAT, "1", "scales the gradient", NULL, false}, {0}};

/* data (n, ...) and a label with the same first dimension and element count. */
static int regression_check(const deft_op_t *op, const deft_desc_t *data,
                            const deft_desc_t *label) {
    char sd[DEFT_SHAPE_STR_MAX], sl[DEFT_SHAPE_STR_MAX];
    deft_desc_t pair[2] = {*data, *label};
    if (label_dtype_check(op, pair)) return -1;
    if (data->shape.ndim < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (data) is a scalar, expected an array");
    if (label->shape.ndim < 1 || label->shape.dims[0] != data->shape.dims[0] ||
        deft_shape_size(&label->shape) != deft_shape_size(&data->shape))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 1 (label) has shape %s, expected the first dimension and "
                             "element count of the data's %s",
                             deft_shape_format(&label->shape, sl, sizeof sl),
                             deft_shape_format(&data->shape, sd, sizeof sd));
    return 0;
}

static int regression_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (regression_check(op, &in[0], &in[1])) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* The label is the data's shape, except (n,) for data (n, 1). */
static int regression_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                   deft_desc_t *in, bool *known, const deft_desc_t *out,
                                   const bool *out_known) {
    (void)op, (void)p, (void)nin;
    if (!known[0] && out_known[0]) in[0] = out[0], known[0] = true;
    if (known[0] && !known[1]) {
        in[1] = in[0];
        if (in[0].shape.ndim == 2 && in[0].shape.dims[1] == 1) in[1].shape.ndim = 1;
        known[1] = true;
    }
    return 0;
}

static int regression_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    const regression_t *r = op->data;
    if (!r->sigmoid) return deft_forward_copy(op, p, 1, in, 1, out);
    deft_loss_map_t m = {.kind = DEFT_LOSS_SIGMOID,
                         .dtype = in[0].dtype,
                         .n = deft_shape_size(&in[0].shape),
                         .a = deft_tensor_data(&in[0]),
                         .y = deft_tensor_data(&out[0])};
    return loss_map(&in[0], &m);
}

static int regression_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin; /* inputs (label, out) as MXNet's */
    if (regression_check(op, &in[1], &in[0])) return -1;
    out[0] = in[1];
    *nout = 1;
    return 0;
}

/* grad_scale (out - label), or its sign, over the label's elements per sample. */
static int regression_backward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int64_t n = deft_shape_size(&in[0].shape), rows = in[0].shape.dims[0];
    int64_t per_sample = rows ? n / rows : 0;
    deft_loss_map_t m = {.kind = ((const regression_t *)op->data)->sign ? DEFT_LOSS_SIGN_DIFF
                                                                        : DEFT_LOSS_DIFF,
                         .dtype = in[1].dtype,
                         .n = n,
                         .a = deft_tensor_data(&in[1]),
                         .b = deft_tensor_data(&in[0]),
                         .y = deft_tensor_data(&out[0]),
                         .s = p[0].f / (double)(per_sample ? per_sample : 1)};
    return loss_map(&in[1], &m);
}

static int grad_regression(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                           deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const char *kv[2 * DEFT_OP_MAX_PARAMS + 1];
    deft_gref_t in[2] = {b->input(b, 1), b->output(b, 0)};
    in_grads[0] =
        b->apply(b, ((const regression_t *)b->op->data)->backward, 2, in, given_params(b, kv), 0);
    return 0;
}

/* ---- MakeLoss, make_loss ---- */

enum { ML_GRAD_SCALE, ML_VALID_THRESH, ML_NORMALIZATION };

static const deft_param_def_t make_loss_params[] = {
    {"grad_scale", DEFT_PARAM_FLOAT, "1", "the gradient's value", NULL, false},
    {"valid_thresh", DEFT_PARAM_FLOAT, "0",
     "with normalization 'valid', the elements above it are the ones counted", NULL, false},
    {"normalization", DEFT_PARAM_ENUM, "null",
     "divide the gradient by nothing, the rows of the input flattened to 2-D, or the number of "
     "elements above valid_thresh",
     normalizations, false},
    {0}};

static int make_loss_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* _backward_MakeLoss(data): grad_scale over the normaliser, everywhere. */
static int make_loss_backward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    const deft_shape_t *s = &in[0].shape;
    deft_loss_map_t m = {.kind = DEFT_LOSS_FILL,
                         .dtype = in[0].dtype,
                         .n = deft_shape_size(s),
                         .y = deft_tensor_data(&out[0]),
                         .s = p[ML_GRAD_SCALE].f};
    int64_t norm = 1;
    if (p[ML_NORMALIZATION].i == NORM_BATCH) /* rows of the 2-D flattening: all but the last axis */
        norm = dims_product(s, 0, s->ndim - 1);
    if (p[ML_NORMALIZATION].i == NORM_VALID &&
        loss_count(&in[0], false, p[ML_VALID_THRESH].f, &norm))
        return -1;
    m.s /= (double)(norm > 0 ? norm : 1);
    return loss_map(&in[0], &m);
}

static int grad_make_loss(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                          deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const char *kv[2 * DEFT_OP_MAX_PARAMS + 1];
    deft_gref_t data = b->input(b, 0);
    in_grads[0] = b->apply(b, "_backward_MakeLoss", 1, &data, given_params(b, kv), 0);
    return 0;
}

static int grad_ones(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) { /* make_loss: ones, whatever arrives */
    (void)p, (void)nin;
    in_grads[0] = g_op1(b, "ones_like", b->input(b, 0), GRAD_NONE);
    return 0;
}

/* ---- smooth_l1 ---- */

static const deft_param_def_t smooth_l1_params[] = {
    {"scalar", DEFT_PARAM_FLOAT, "1", "sigma", NULL, false},
    {"is_int", DEFT_PARAM_BOOL, "true", "accepted as MXNet does; no effect here", NULL, false},
    {0}};

static int smooth_l1_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    if (deft_op_check_dtype_arith(op, 0, in[0].dtype) || deft_op_check_same_dtype(op, nin, in))
        return -1;
    for (int i = 1; i < nin; i++)
        if (!deft_shape_equal(&in[i].shape, &in[0].shape)) {
            char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d has shape %s, expected %s", i,
                                 deft_shape_format(&in[i].shape, a, sizeof a),
                                 deft_shape_format(&in[0].shape, b, sizeof b));
        }
    out[0] = in[nin - 1];
    *nout = 1;
    return 0;
}

/* smooth_l1(data), and _backward_smooth_l1(grad, data): grad times its derivative. */
static int smooth_l1_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nout;
    deft_loss_map_t m = {.kind = nin == 1 ? DEFT_LOSS_SMOOTH_L1 : DEFT_LOSS_SMOOTH_L1_GRAD,
                         .dtype = in[0].dtype,
                         .n = deft_shape_size(&in[0].shape),
                         .a = deft_tensor_data(&in[nin - 1]),
                         .b = nin == 1 ? NULL : deft_tensor_data(&in[0]),
                         .y = deft_tensor_data(&out[0]),
                         .s = p[0].f};
    return loss_map(&in[0], &m);
}

static int grad_smooth_l1(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                          deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const char *kv[2 * DEFT_OP_MAX_PARAMS + 1];
    deft_gref_t in[2] = {b->out_grad(b, 0), b->input(b, 0)};
    in_grads[0] = b->apply(b, "_backward_smooth_l1", 2, in, given_params(b, kv), 0);
    return 0;
}

/* ---- SoftmaxOutput's forward on a GPU: the softmax launcher ---- */

#ifdef DEFT_HAVE_CUDA
static int softmax_output_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_softmax_output_plan_t v = softmax_output_plan(p, &in[0], &out[0]);
    deft_gpu_softmax_t s = softmax_plan_of(&v);
    return deft_gpu_softmax(deft_gpu_of(&in[0]), &s);
}

#endif

/* ---- the table ---- */

static const char *const label_out[] = {"label", "out", NULL};
static const char *const out_label[] = {"out", "label", NULL};
static const char *const grad_data[] = {"grad", "data", NULL};

#define SOFTMAX_OUTPUT(name_)                                                                      \
    {                                                                                              \
        .name = name_,                                                                             \
        .description = "Softmax of the data (per row, along axis 1 with multi_output, along the "  \
                       "last axis with preserve_shape); its gradient is that of the "              \
                       "cross-entropy with the label, ignoring the head gradient.",                \
        .input_names = data_label, .min_inputs = 2, .max_inputs = 2,                               \
        .params = softmax_output_params, .infer = softmax_output_infer,                            \
        .forward = softmax_output_forward, .forward_gpu = DEFT_GPU(softmax_output_forward_gpu),    \
        .inplace_input = 0, .infer_inputs = softmax_output_infer_inputs,                           \
        .gradient = grad_softmax_output                                                            \
    }

#define REGRESSION(name_, doc, kind)                                                               \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = data_label, .min_inputs = 2,             \
        .max_inputs = 2, .params = regression_params, .infer = regression_infer,                   \
        .forward = regression_forward, .forward_gpu = DEFT_GPU(regression_forward),                \
        .inplace_input = 0, .data = &kind, .infer_inputs = regression_infer_inputs,                \
        .gradient = grad_regression                                                                \
    }

#define REGRESSION_BACKWARD(name_, kind)                                                           \
    {                                                                                              \
        .name = name_, .description = "Gradient of a regression output with respect to its data.", \
        .input_names = label_out, .min_inputs = 2, .max_inputs = 2, .params = regression_params,   \
        .infer = regression_backward_infer, .forward = regression_backward,                        \
        .forward_gpu = DEFT_GPU(regression_backward), .inplace_input = 1, .data = &kind            \
    }

static const deft_op_t loss_head_ops[] = {
    SOFTMAX_OUTPUT("SoftmaxOutput"),
    {.name = "_backward_SoftmaxOutput",
     .description = "Gradient of SoftmaxOutput with respect to its data, from its output and "
                    "label.",
     .input_names = out_label,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = softmax_output_params,
     .infer = softmax_output_infer,
     .forward = softmax_output_backward,
     .forward_gpu = DEFT_GPU(softmax_output_backward),
     .inplace_input = 0},
    REGRESSION("LinearRegressionOutput",
               "The data unchanged; its gradient is that of the squared error with the label, "
               "grad_scale (out - label) / (label elements per sample).",
               linear_reg),
    REGRESSION("LogisticRegressionOutput",
               "Sigmoid of the data; its gradient is that of the binary cross-entropy with the "
               "label, grad_scale (out - label) / (label elements per sample).",
               logistic_reg),
    REGRESSION("MAERegressionOutput",
               "The data unchanged; its gradient is that of the absolute error with the label, "
               "grad_scale sign(out - label) / (label elements per sample).",
               mae_reg),
    REGRESSION_BACKWARD("_backward_linear_reg_out", linear_reg),
    REGRESSION_BACKWARD("_backward_logistic_reg_out", logistic_reg),
    REGRESSION_BACKWARD("_backward_mae_reg_out", mae_reg),
    {.name = "MakeLoss",
     .description = "The data unchanged, as a loss: its gradient is grad_scale (normalised), "
                    "ignoring the head gradient.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = make_loss_params,
     .infer = make_loss_infer,
     .forward = deft_forward_copy,
     .forward_gpu = DEFT_GPU(deft_forward_copy),
     .inplace_input = 0,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_make_loss},
    {.name = "_backward_MakeLoss",
     .description = "Gradient of MakeLoss: grad_scale over the normaliser, in the data's shape.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = make_loss_params,
     .infer = make_loss_infer,
     .forward = make_loss_backward,
     .forward_gpu = DEFT_GPU(make_loss_backward),
     .inplace_input = -1},
    {.name = "make_loss",
     .description = "The data unchanged, as a loss: its gradient is ones, ignoring the head "
                    "gradient.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .infer = deft_infer_same,
     .forward = deft_forward_copy,
     .forward_gpu = DEFT_GPU(deft_forward_copy),
     .inplace_input = 0,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_ones},
    {.name = "smooth_l1",
     .description = "Smooth L1 with sigma = scalar: 0.5 (sigma x)^2 where |x| <= 1/sigma^2, "
                    "else |x| - 0.5/sigma^2.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = smooth_l1_params,
     .infer = smooth_l1_infer,
     .forward = smooth_l1_forward,
     .forward_gpu = DEFT_GPU(smooth_l1_forward),
     .inplace_input = 0,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_smooth_l1},
    {.name = "_backward_smooth_l1",
     .description = "Gradient of smooth_l1: grad times its derivative at data.",
     .input_names = grad_data,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = smooth_l1_params,
     .infer = smooth_l1_infer,
     .forward = smooth_l1_forward,
     .forward_gpu = DEFT_GPU(smooth_l1_forward),
     .inplace_input = 0},
};

DEFT_OP_FAMILY(deft_family_loss_heads, loss_head_ops);
