/*
 * LayerNorm, InstanceNorm and GroupNorm, as MXNet 1.9.1's: normalise slices
 * of the data by their own mean and biased variance, then scale by gamma
 * and shift by beta (one kernel for all three, norm_slices.h):
 *   LayerNorm     each line along `axis`; gamma and beta (channels,) along it;
 *   InstanceNorm  each (sample, channel) of (N, C, ...); gamma, beta (C,);
 *   GroupNorm     each (sample, group) of (N, C, ...), C split into
 *                 num_groups groups; gamma, beta (num_groups,), one value per
 *                 group as in 1.9.1 (later MXNet has one per channel).
 * Each also outputs the mean and a second statistic (hidden unless
 * output_mean_var): LayerNorm's and GroupNorm's the standard deviation
 * sqrt(var + eps), InstanceNorm's the variance, always hidden. The gradients
 * read them.
 */
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/norm_slices.h"
#include "core/op/op.h"

/* What tells the three apart, in each forward operator's `data`. */
typedef struct norm_kind {
    deft_norm_stat_t stat;
    int eps_param; /* the index of eps among the parameters */
    /* The plan, for data whose shape inference accepted. */
    deft_norm_plan_t (*plan)(const deft_param_value_t *p, const deft_shape_t *data);
    const char *backward;         /* the gradient's operator */
    const char *const *grad_keys; /* the parameters it needs */
} norm_kind_t;

static const deft_param_def_t layer_norm_params[] = {
    {"axis", DEFT_PARAM_INT, "-1", "the axis normalised along", NULL, false},
    {"eps", DEFT_PARAM_FLOAT, "1e-05", "added to the variance before its square root", NULL, false},
    {"output_mean_var", DEFT_PARAM_BOOL, "false", "also output the mean and standard deviation",
     NULL, false},
    {0}};

static const deft_param_def_t instance_norm_params[] = {
    {"eps", DEFT_PARAM_FLOAT, "0.001", "added to the variance before its square root", NULL, false},
    {0}};

static const deft_param_def_t group_norm_params[] = {
    {"num_groups", DEFT_PARAM_INT, "1", "groups the channels are split into", NULL, false},
    {"eps", DEFT_PARAM_FLOAT, "1e-05", "added to the variance before its square root", NULL, false},
    {"output_mean_var", DEFT_PARAM_BOOL, "false", "also output the mean and standard deviation",
     NULL, false},
    {0}};

static int check_eps(const deft_op_t *op, double eps) {
    if (eps >= 0) return 0;
    return deft_op_error(op, DEFT_ERR_VALUE, "eps is %g, expected >= 0", eps);
}

/* data float, gamma and beta (n,) of its dtype; out[0] like data, the
 * statistics `stats` of its dtype. */
static int finish_infer(const deft_op_t *op, const deft_desc_t *in, int64_t n,
                        const deft_shape_t *stats, int *nout, deft_desc_t *out) {
    if (deft_norm_check_param(op, in, 1, n) || deft_norm_check_param(op, in, 2, n) ||
        deft_op_check_same_dtype(op, 3, in))
        return -1;
    out[0] = in[0];
    out[1] = out[2] = (deft_desc_t){*stats, in[0].dtype};
    *nout = 3;
    return 0;
}

/* InstanceNorm and GroupNorm take (N, C, ...). */
static int check_batch_channels(const deft_op_t *op, const deft_desc_t *data) {
    if (deft_op_check_dtype_float(op, 0, data->dtype)) return -1;
    if (data->shape.ndim >= 3) return 0;
    char s[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE,
                         "input 0 (data) has shape %s, expected 3 or more dimensions (N, C, ...)",
                         deft_shape_format(&data->shape, s, sizeof s));
}

/* ---- LayerNorm ---- */

enum { LN_AXIS, LN_EPS, LN_MEAN_VAR };

static int layer_norm_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int axis;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) ||
        deft_op_axis(op, "axis", p[LN_AXIS].i, in[0].shape.ndim, &axis) ||
        check_eps(op, p[LN_EPS].f))
        return -1;
    deft_shape_t stats = in[0].shape;
    stats.dims[axis] = 1;
    return finish_infer(op, in, in[0].shape.dims[axis], &stats, nout, out);
}

static deft_norm_plan_t layer_norm_plan(const deft_param_value_t *p, const deft_shape_t *data) {
    int64_t outer, channels, inner;
    deft_norm_split(data, deft_norm_axis(p[LN_AXIS].i, data->ndim), &outer, &channels, &inner);
    return deft_norm_plan_lines(outer, channels, inner);
}

static int layer_norm_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                   deft_desc_t *in, bool *known, const deft_desc_t *out,
                                   const bool *out_known) {
    (void)op, (void)out, (void)out_known;
    int axis = deft_norm_axis(p[LN_AXIS].i, in[0].shape.ndim);
    if (known[0] && axis >= 0) deft_norm_infer_params(nin, in, known, in[0].shape.dims[axis]);
    return 0; /* a bad axis: infer names it */
}

/* ---- InstanceNorm ---- */

static int instance_norm_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (check_batch_channels(op, &in[0]) || check_eps(op, p[0].f)) return -1;
    const int64_t *dims = in[0].shape.dims;
    deft_shape_t stats = {2, {dims[0], dims[1]}};
    return finish_infer(op, in, dims[1], &stats, nout, out);
}

static deft_norm_plan_t instance_norm_plan(const deft_param_value_t *p, const deft_shape_t *data) {
    (void)p;
    int64_t outer, channels, inner;
    deft_norm_split(data, 1, &outer, &channels, &inner);
    return deft_norm_plan_blocks(outer * channels, inner, channels);
}

/* ---- GroupNorm ---- */

enum { GN_GROUPS, GN_EPS, GN_MEAN_VAR };

static int group_norm_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (check_batch_channels(op, &in[0]) || check_eps(op, p[GN_EPS].f)) return -1;
    int64_t groups = p[GN_GROUPS].i, channels = in[0].shape.dims[1];
    if (groups < 1 || channels % groups != 0)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "num_groups is %lld, expected a divisor of the %lld channels",
                             (long long)groups, (long long)channels);
    deft_shape_t stats = {2, {in[0].shape.dims[0], groups}};
    return finish_infer(op, in, groups, &stats, nout, out);
}

static deft_norm_plan_t group_norm_plan(const deft_param_value_t *p, const deft_shape_t *data) {
    int64_t outer, channels, inner, groups = p[GN_GROUPS].i;
    deft_norm_split(data, 1, &outer, &channels, &inner);
    return deft_norm_plan_blocks(outer * groups, channels / groups * inner, groups);
}

/* gamma and beta (num_groups,), once data is known. */
static int group_norm_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                   deft_desc_t *in, bool *known, const deft_desc_t *out,
                                   const bool *out_known) {
    (void)op, (void)out, (void)out_known;
    deft_norm_infer_params(nin, in, known, p[GN_GROUPS].i);
    return 0;
}

/* InstanceNorm's gamma and beta are (C,). */
static int instance_norm_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                      deft_desc_t *in, bool *known, const deft_desc_t *out,
                                      const bool *out_known) {
    (void)op, (void)p, (void)out, (void)out_known;
    if (known[0] && in[0].shape.ndim >= 2)
        deft_norm_infer_params(nin, in, known, in[0].shape.dims[1]);
    return 0;
}

/* ---- what the three share ---- */

static deft_norm_forward_t norm_call(const norm_kind_t *kind, const deft_param_value_t *p,
                                     const deft_tensor_t *in, const deft_tensor_t *out) {
    return (deft_norm_forward_t){.plan = kind->plan(p, &in[0].shape),
                                 .dtype = in[0].dtype,
                                 .x = deft_tensor_data(&in[0]),
                                 .y = deft_tensor_data(&out[0]),
                                 .gamma = deft_tensor_data(&in[1]),
                                 .beta = deft_tensor_data(&in[2]),
                                 .mean = deft_tensor_data(&out[1]),
                                 .stat = deft_tensor_data(&out[2]),
                                 .stat_kind = kind->stat,
                                 .eps = p[kind->eps_param].f};
}

static int norm_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_norm_forward_t f = norm_call(op->data, p, in, out);
    return deft_norm_forward_cpu(&f);
}

#ifdef DEFT_HAVE_CUDA
static int norm_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_norm_forward_t f = norm_call(op->data, p, in, out);
    return deft_gpu_norm_forward(deft_gpu_of(&in[0]), &f);
}
#endif

/* The backward operators: (out_grad, data, gamma, mean, stat) -> d data, d gamma, d beta;
 * `data` is the forward operator. */
static deft_norm_backward_t norm_backward_call(const deft_op_t *op, const deft_param_value_t *p,
                                               const deft_tensor_t *in, const deft_tensor_t *out) {
    const norm_kind_t *kind = ((const deft_op_t *)op->data)->data;
    return (deft_norm_backward_t){.plan = kind->plan(p, &in[1].shape),
                                  .dtype = in[1].dtype,
                                  .g = deft_tensor_data(&in[0]),
                                  .x = deft_tensor_data(&in[1]),
                                  .gamma = deft_tensor_data(&in[2]),
                                  .nparams = deft_shape_size(&in[2].shape),
                                  .mean = deft_tensor_data(&in[3]),
                                  .stat = deft_tensor_data(&in[4]),
                                  .stat_kind = kind->stat,
                                  .eps = p[kind->eps_param].f,
                                  .batch_stats = true,
                                  .dx = deft_tensor_data(&out[0]),
                                  .dgamma = deft_tensor_data(&out[1]),
                                  .dbeta = deft_tensor_data(&out[2])};
}

static int norm_backward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_norm_backward_t b = norm_backward_call(op, p, in, out);
    return deft_norm_backward_cpu(&b);
}

#ifdef DEFT_HAVE_CUDA
static int norm_backward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_norm_backward_t b = norm_backward_call(op, p, in, out);
    return deft_gpu_norm_backward(deft_gpu_of(&in[1]), &b);
}
#endif

static int norm_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                         deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const norm_kind_t *kind = b->op->data;
    return deft_norm_gradient(b, kind->backward, kind->grad_keys, in_grads);
}

static int ln_visible(const deft_param_value_t *p) {
    return p[LN_MEAN_VAR].i ? 3 : 1;
}

static int gn_visible(const deft_param_value_t *p) {
    return p[GN_MEAN_VAR].i ? 3 : 1;
}

static const norm_kind_t layer_norm = {DEFT_NORM_STD, LN_EPS, layer_norm_plan,
                                       "_backward_LayerNorm",
                                       (const char *const[]){"axis", "eps", NULL}};
static const norm_kind_t instance_norm = {DEFT_NORM_VAR, 0, instance_norm_plan,
                                          "_backward_InstanceNorm",
                                          (const char *const[]){"eps", NULL}};
static const norm_kind_t group_norm = {DEFT_NORM_STD, GN_EPS, group_norm_plan,
                                       "_backward_GroupNorm",
                                       (const char *const[]){"num_groups", "eps", NULL}};

static const char *const norm_inputs[] = {"data", "gamma", "beta", NULL};
static const char *const std_backward_inputs[] = {"out_grad", "data", "gamma", "mean", "std", NULL};
static const char *const var_backward_inputs[] = {"out_grad", "data", "gamma", "mean", "var", NULL};

#define NORM_OP(name_, doc, params_, infer_, infer_inputs_, visible, kind)                         \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = norm_inputs, .min_inputs = 3,            \
        .max_inputs = 3, .params = params_, .infer = infer_, .forward = norm_forward,              \
        .forward_gpu = DEFT_GPU(norm_forward_gpu), .inplace_input = -1,                            \
        .num_outputs = deft_norm_three_outputs, .num_visible_outputs = visible,                    \
        .infer_inputs = infer_inputs_, .data = kind, .gradient = norm_gradient                     \
    }

#define BACKWARD_OP(name_, forward_name, inputs, params_, forward_op)                              \
    {                                                                                              \
        .name = name_,                                                                             \
        .description = "Gradient of " forward_name " with respect to data, gamma and beta.",       \
        .input_names = inputs, .min_inputs = 5, .max_inputs = 5, .params = params_,                \
        .infer = deft_norm_backward_infer, .forward = norm_backward,                               \
        .forward_gpu = DEFT_GPU(norm_backward_gpu), .inplace_input = -1,                           \
        .num_outputs = deft_norm_three_outputs, .data = forward_op                                 \
    }

enum { LAYER_NORM, INSTANCE_NORM, GROUP_NORM };

static const deft_op_t norm_ops[] = {
    [LAYER_NORM] = NORM_OP("LayerNorm",
                           "Layer normalisation: each line along axis by its mean and variance, "
                           "then gamma and beta (channels,).",
                           layer_norm_params, layer_norm_infer, layer_norm_infer_inputs, ln_visible,
                           &layer_norm),
    [INSTANCE_NORM] = NORM_OP("InstanceNorm",
                              "Instance normalisation of (N, C, ...): each sample's channel by "
                              "its mean and variance, then gamma and beta (C,).",
                              instance_norm_params, instance_norm_infer, instance_norm_infer_inputs,
                              deft_op_one_visible, &instance_norm),
    [GROUP_NORM] = NORM_OP("GroupNorm",
                           "Group normalisation of (N, C, ...): each sample's group of channels "
                           "by its mean and variance, then gamma and beta (num_groups,).",
                           group_norm_params, group_norm_infer, group_norm_infer_inputs, gn_visible,
                           &group_norm),
    BACKWARD_OP("_backward_LayerNorm", "LayerNorm", std_backward_inputs, layer_norm_params,
                &norm_ops[LAYER_NORM]),
    BACKWARD_OP("_backward_InstanceNorm", "InstanceNorm", var_backward_inputs, instance_norm_params,
                &norm_ops[INSTANCE_NORM]),
    BACKWARD_OP("_backward_GroupNorm", "GroupNorm", std_backward_inputs, group_norm_params,
                &norm_ops[GROUP_NORM]),
};

DEFT_OP_FAMILY(deft_family_norm, norm_ops);
