/*
 * BatchNorm, as MXNet 1.9.1's: each channel (the `axis` of data) is
 * normalised by a mean and variance, then scaled by gamma and shifted by
 * beta.
 *
 * In training mode (and without use_global_stats) those are the batch's
 * mean and biased variance, which are also folded into the moving
 * statistics, inputs 3 and 4, updated in place (auxiliary states):
 *   moving = moving * momentum + batch * (1 - momentum).
 * MXNet's CPU kernel folds them in during backward and its GPU kernel
 * during forward; deft does it in forward on both, so a forward pass in
 * training mode alone (no backward) keeps them current, as on MXNet's GPU.
 * A batch with no elements leaves them as they were.
 * In predict mode, or with use_global_stats, the moving statistics
 * normalise and nothing is updated.
 *
 * Outputs: the result, and the mean and inverse standard deviation that
 * normalised it (hidden unless output_mean_var, as MXNet's). The gradient
 * reads those two, and uses the batch-statistics formula when it runs in
 * training mode without use_global_stats, the affine one otherwise.
 * fix_gamma (the default) treats gamma as 1, and its gradient as 0.
 */
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/norm_slices.h"
#include "core/op/op.h"

static const deft_param_def_t bn_params[] = {
    {"eps", DEFT_PARAM_FLOAT, "0.001", "added to the variance before its square root", NULL, false},
    {"momentum", DEFT_PARAM_FLOAT, "0.9", "momentum of the moving averages", NULL, false},
    {"fix_gamma", DEFT_PARAM_BOOL, "true", "treat gamma as 1 (and its gradient as 0)", NULL, false},
    {"use_global_stats", DEFT_PARAM_BOOL, "false",
     "normalise with the moving statistics in training mode too", NULL, false},
    {"output_mean_var", DEFT_PARAM_BOOL, "false",
     "also output the mean and the inverse standard deviation", NULL, false},
    {"axis", DEFT_PARAM_INT, "1", "the channel axis", NULL, false},
    {"cudnn_off", DEFT_PARAM_BOOL, "false", "accepted for MXNet compatibility; no effect", NULL,
     false},
    {"min_calib_range", DEFT_PARAM_FLOAT, "None",
     "accepted for MXNet compatibility (quantisation); no effect", NULL, true},
    {"max_calib_range", DEFT_PARAM_FLOAT, "None",
     "accepted for MXNet compatibility (quantisation); no effect", NULL, true},
    {0}};

enum { P_EPS, P_MOMENTUM, P_FIX_GAMMA, P_GLOBAL, P_OUTPUT_MEAN_VAR, P_AXIS };

static int bn_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                    const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int axis;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) ||
        deft_op_axis(op, "axis", p[P_AXIS].i, in[0].shape.ndim, &axis))
        return -1;
    if (!(p[P_EPS].f >= 0))
        return deft_op_error(op, DEFT_ERR_VALUE, "eps is %g, expected >= 0", p[P_EPS].f);
    int64_t channels = in[0].shape.dims[axis];
    for (int k = 1; k < 5; k++)
        if (deft_norm_check_param(op, in, k, channels)) return -1;
    if (deft_op_check_same_dtype(op, 5, in)) return -1;
    out[0] = in[0];
    out[1] = out[2] = (deft_desc_t){{1, {channels}}, in[0].dtype};
    *nout = 3;
    return 0;
}

/* gamma, beta and the moving statistics are (channels,), once data is known. */
static int bn_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           deft_desc_t *in, bool *known, const deft_desc_t *out,
                           const bool *out_known) {
    (void)op, (void)out, (void)out_known;
    int axis = deft_norm_axis(p[P_AXIS].i, in[0].shape.ndim);
    if (known[0] && axis >= 0) deft_norm_infer_params(nin, in, known, in[0].shape.dims[axis]);
    return 0; /* a bad axis: infer names it */
}

static int visible_outputs(const deft_param_value_t *p) {
    return p[P_OUTPUT_MEAN_VAR].i ? 3 : 1;
}

static deft_norm_plan_t bn_plan(const deft_param_value_t *p, const deft_shape_t *data) {
    int64_t outer, channels, inner;
    deft_norm_split(data, deft_norm_axis(p[P_AXIS].i, data->ndim), &outer, &channels, &inner);
    return deft_norm_plan_channels(outer, channels, inner);
}

/* Whether this call normalises with the batch's statistics. */
static bool batch_stats(const deft_param_value_t *p) {
    return deft_op_training() && !p[P_GLOBAL].i;
}

static deft_norm_forward_t bn_call(const deft_param_value_t *p, const deft_tensor_t *in,
                                   const deft_tensor_t *out) {
    deft_norm_forward_t f = {.plan = bn_plan(p, &in[0].shape),
                             .dtype = in[0].dtype,
                             .x = deft_tensor_data(&in[0]),
                             .y = deft_tensor_data(&out[0]),
                             .gamma = p[P_FIX_GAMMA].i ? NULL : deft_tensor_data(&in[1]),
                             .beta = deft_tensor_data(&in[2]),
                             .mean = deft_tensor_data(&out[1]),
                             .stat = deft_tensor_data(&out[2]),
                             .stat_kind = DEFT_NORM_INVSTD,
                             .eps = p[P_EPS].f,
                             .moving_mean = deft_tensor_data(&in[3]),
                             .moving_var = deft_tensor_data(&in[4]),
                             .use_moving = !batch_stats(p),
                             .momentum = p[P_MOMENTUM].f};
    f.update_moving = !f.use_moving && deft_norm_count(&f.plan) > 0;
    return f;
}

static int bn_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_norm_forward_t f = bn_call(p, in, out);
    return deft_norm_forward_cpu(&f);
}

#ifdef DEFT_HAVE_CUDA
static int bn_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_norm_forward_t f = bn_call(p, in, out);
    return deft_gpu_norm_forward(deft_gpu_of(&in[0]), &f);
}
#endif

/* _backward_BatchNorm: (out_grad, data, gamma, mean, invstd) -> d data, d gamma, d beta. */
static deft_norm_backward_t bn_backward_call(const deft_param_value_t *p, const deft_tensor_t *in,
                                             const deft_tensor_t *out) {
    return (deft_norm_backward_t){.plan = bn_plan(p, &in[1].shape),
                                  .dtype = in[1].dtype,
                                  .g = deft_tensor_data(&in[0]),
                                  .x = deft_tensor_data(&in[1]),
                                  .gamma = p[P_FIX_GAMMA].i ? NULL : deft_tensor_data(&in[2]),
                                  .nparams = deft_shape_size(&in[2].shape),
                                  .mean = deft_tensor_data(&in[3]),
                                  .stat = deft_tensor_data(&in[4]),
                                  .stat_kind = DEFT_NORM_INVSTD,
                                  .eps = p[P_EPS].f,
                                  .batch_stats = batch_stats(p),
                                  .dx = deft_tensor_data(&out[0]),
                                  .dgamma = deft_tensor_data(&out[1]),
                                  .dbeta = deft_tensor_data(&out[2])};
}

static int bn_backward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_norm_backward_t b = bn_backward_call(p, in, out);
    return deft_norm_backward_cpu(&b);
}

#ifdef DEFT_HAVE_CUDA
static int bn_backward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_norm_backward_t b = bn_backward_call(p, in, out);
    return deft_gpu_norm_backward(deft_gpu_of(&in[1]), &b);
}
#endif

static int bn_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)p, (void)nin; /* the moving statistics have none */
    static const char *const keys[] = {"eps", "fix_gamma", "use_global_stats", "axis", NULL};
    return deft_norm_gradient(b, "_backward_BatchNorm", keys, in_grads);
}

static const char *const bn_inputs[] = {"data", "gamma", "beta", "moving_mean", "moving_var", NULL};
static const char *const bn_backward_inputs[] = {"out_grad", "data",   "gamma",
                                                 "mean",     "invstd", NULL};

static const deft_op_t bn_ops[] = {
    {.name = "BatchNorm",
     .description = "Batch normalisation over the channel axis, with moving statistics (inputs "
                    "3, 4) updated in place in training mode.",
     .input_names = bn_inputs,
     .min_inputs = 5,
     .max_inputs = 5,
     .params = bn_params,
     .infer = bn_infer,
     .forward = bn_forward,
     .forward_gpu = DEFT_GPU(bn_forward_gpu),
     .inplace_input = 0, /* each slice's statistics are read before it is written */
     .mutate_inputs = (1u << 3) | (1u << 4),
     .num_outputs = deft_norm_three_outputs,
     .num_visible_outputs = visible_outputs,
     .infer_inputs = bn_infer_inputs,
     .gradient = bn_gradient},
    {.name = "_backward_BatchNorm",
     .description = "Gradient of BatchNorm with respect to data, gamma and beta.",
     .input_names = bn_backward_inputs,
     .min_inputs = 5,
     .max_inputs = 5,
     .params = bn_params,
     .infer = deft_norm_backward_infer,
     .forward = bn_backward,
     .forward_gpu = DEFT_GPU(bn_backward_gpu),
     .inplace_input = -1,
     .num_outputs = deft_norm_three_outputs,
     .data = &bn_ops[0]},
};

DEFT_OP_FAMILY(deft_family_batch_norm, bn_ops);
