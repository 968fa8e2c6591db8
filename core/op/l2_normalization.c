/*
 * L2Normalization, as MXNet 1.9.1's: data divided by the L2 norm
 * sqrt(sum(x^2) + eps) of the slice it belongs to:
 *   instance  each sample (everything but axis 0); the norm is (N,);
 *   channel   each (sample, position) across the channels of (N, C, ...);
 *             the norm is data's shape with C = 1;
 *   spatial   each (sample, channel) of (N, C, ...); the norm is (N, C).
 * The norm is a second, hidden output; the gradient reads it and the
 * result: d data = (g - y * sum(g * y)) / norm over each slice.
 * The slices are norm_math.h's plans, as the mean-variance normalisations';
 * the per-element arithmetic is core/math/l2_norm_math.h, shared with the
 * GPU kernel (norm_slices.cu).
 */
#include <math.h>

#include "core/base/parallel.h"
#include "core/math/l2_norm_math.h"
#include "core/op/grad.h"
#include "core/op/norm_slices.h"
#include "core/op/op.h"

static const char *const l2_modes[] = {"instance", "spatial", "channel", NULL};
enum { MODE_INSTANCE, MODE_SPATIAL, MODE_CHANNEL };

static const deft_param_def_t l2_params[] = {
    {"eps", DEFT_PARAM_FLOAT, "1e-10", "added to the sum of squares before its square root", NULL,
     false},
    {"mode", DEFT_PARAM_ENUM, "instance", "the slices normalised: instance, spatial or channel",
     l2_modes, false},
    {0}};

enum { P_EPS, P_MODE };

static int l2_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                    const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_shape_t *shape = &in[0].shape;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    if (!(p[P_EPS].f >= 0))
        return deft_op_error(op, DEFT_ERR_VALUE, "eps is %g, expected >= 0", p[P_EPS].f);
    int need = p[P_MODE].i == MODE_INSTANCE ? 1 : 3;
    if (shape->ndim < need) {
        char s[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has shape %s, expected %d or more dimensions in %s "
                             "mode",
                             deft_shape_format(shape, s, sizeof s), need, l2_modes[p[P_MODE].i]);
    }
    out[0] = out[1] = in[0];
    if (p[P_MODE].i == MODE_INSTANCE)
        out[1].shape = (deft_shape_t){1, {shape->dims[0]}};
    else if (p[P_MODE].i == MODE_SPATIAL)
        out[1].shape = (deft_shape_t){2, {shape->dims[0], shape->dims[1]}};
    else
        out[1].shape.dims[1] = 1;
    *nout = 2;
    return 0;
}

static deft_norm_plan_t l2_plan(const deft_param_value_t *p, const deft_shape_t *data) {
    int64_t outer, channels, inner;
    if (p[P_MODE].i == MODE_INSTANCE) {
        deft_norm_split(data, 0, &outer, &channels, &inner);
        return deft_norm_plan_blocks(channels, inner, 1);
    }
    deft_norm_split(data, 1, &outer, &channels, &inner);
    return p[P_MODE].i == MODE_SPATIAL ? deft_norm_plan_blocks(outer * channels, inner, 1)
                                       : deft_norm_plan_lines(outer, channels, inner);
}

/* Slice j: its sum (of x^2, or of g * y backward), then each element. */
static inline void l2_slice(const deft_l2_call_t *c, deft_dtype_t dtype, int64_t j) {
    const deft_norm_plan_t *p = &c->plan;
    int64_t start = deft_norm_start(p, j), n = deft_norm_count(p);
    double sum = 0;
    for (int64_t k = 0; k < n; k++) sum += deft_l2_term(c, dtype, deft_norm_at(p, start, k));
    double norm = c->g ? deft_load_double(c->norm, dtype, j) : deft_l2_norm(c, dtype, j, sum);
    for (int64_t k = 0; k < n; k++) deft_l2_finish(c, dtype, deft_norm_at(p, start, k), norm, sum);
}

/* Slices [begin, end), forward or backward (g set), each dtype its own typed loop. */
static void l2_range(void *arg, int64_t begin, int64_t end) {
    const deft_l2_call_t *c = arg;
    for (int64_t j = begin; j < end; j++) {
        if (c->dtype == DEFT_DT_FLOAT32)
            l2_slice(c, DEFT_DT_FLOAT32, j);
        else
            l2_slice(c, DEFT_DT_FLOAT64, j);
    }
}

static void l2_run(const deft_l2_call_t *c) {
    int64_t n = deft_norm_count(&c->plan);
    int64_t grain = n >= DEFT_PARALLEL_GRAIN ? 1 : DEFT_PARALLEL_GRAIN / (n ? n : 1);
    deft_parallel_for(c->plan.slices, grain, l2_range, (void *)c);
}

static deft_l2_call_t l2_call(const deft_param_value_t *p, const deft_tensor_t *in,
                              const deft_tensor_t *out) {
    return (deft_l2_call_t){.plan = l2_plan(p, &in[0].shape),
                            .dtype = in[0].dtype,
                            .eps = p[P_EPS].f,
                            .x = deft_tensor_data(&in[0]),
                            .y = deft_tensor_data(&out[0]),
                            .norm = deft_tensor_data(&out[1])};
}

static int l2_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_l2_call_t c = l2_call(p, in, out);
    l2_run(&c);
    return 0;
}

/* (out_grad, output, norm) -> d data. */
static int l2_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    deft_desc_t forward[2];
    if (l2_infer(op, p, 1, &in[1], nout, forward) || deft_op_check_same_dtype(op, 3, in)) return -1;
    char have[DEFT_SHAPE_STR_MAX], want[DEFT_SHAPE_STR_MAX];
    for (int k = 0; k < 3; k += 2) {
        const deft_shape_t *expected = k ? &forward[1].shape : &in[1].shape;
        if (!deft_shape_equal(&in[k].shape, expected))
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d (%s) has shape %s, expected %s", k,
                                 op->input_names[k],
                                 deft_shape_format(&in[k].shape, have, sizeof have),
                                 deft_shape_format(expected, want, sizeof want));
    }
    out[0] = in[1];
    *nout = 1;
    return 0;
}

/* The gradient's call: (out_grad, output, norm) in, d data out. */
static deft_l2_call_t l2_backward_call(const deft_param_value_t *p, const deft_tensor_t *in,
                                       const deft_tensor_t *out) {
    return (deft_l2_call_t){.plan = l2_plan(p, &in[1].shape),
                            .dtype = in[1].dtype,
                            .g = deft_tensor_data(&in[0]),
                            .x = deft_tensor_data(&in[1]),
                            .norm = deft_tensor_data(&in[2]),
                            .y = deft_tensor_data(&out[0])};
}

static int l2_backward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_l2_call_t c = l2_backward_call(p, in, out);
    l2_run(&c);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int l2_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_l2_call_t c = l2_call(p, in, out);
    return deft_gpu_l2_normalization(in[0].device.id, &c);
}

static int l2_backward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_l2_call_t c = l2_backward_call(p, in, out);
    return deft_gpu_l2_normalization(in[1].device.id, &c);
}
#endif

static int l2_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->output(b, 0), b->output(b, 1)};
    in_grads[0] = b->apply(
        b, "_backward_L2Normalization", 3, in,
        GRAD_PARAMS("eps", g_attr(b, "eps", "1e-10"), "mode", g_attr(b, "mode", "instance")), 0);
    return 0;
}

static const char *const l2_backward_inputs[] = {"out_grad", "output", "norm", NULL};

static const deft_op_t l2_ops[] = {
    {.name = "L2Normalization",
     .description = "Divides each instance, channel vector or spatial map by its L2 norm.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = l2_params,
     .infer = l2_infer,
     .forward = l2_forward,
     .forward_gpu = DEFT_GPU(l2_forward_gpu),
     .inplace_input = -1,
     .num_outputs = deft_op_two_outputs,
     .num_visible_outputs = deft_op_one_visible,
     .gradient = l2_gradient},
    {.name = "_backward_L2Normalization",
     .description = "Gradient of L2Normalization from its result and norm.",
     .input_names = l2_backward_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = l2_params,
     .infer = l2_backward_infer,
     .forward = l2_backward,
     .forward_gpu = DEFT_GPU(l2_backward_gpu),
     .inplace_input = 0},
};

DEFT_OP_FAMILY(deft_family_l2_normalization, l2_ops);
