/*
 * LRN (local response normalisation), as MXNet 1.9.1's, over the channels
 * of (N, C, H, W) data, with a window of nsize channels (odd) centred on
 * each one and cut at the edges:
 *   tmp_norm = knorm + alpha / nsize * sum over the window of x^2
 *   out = x * tmp_norm^(-beta)
 * tmp_norm is a second, hidden output; the gradient reads it and data:
 *   d x = g * tmp_norm^(-beta)
 *         - 2 beta alpha / nsize * x * sum over the window of g x tmp_norm^(-beta - 1)
 * (the window is symmetric, so the channels whose windows hold c are c's own).
 * The per-element arithmetic is core/math/lrn_math.h, shared with lrn.cu.
 */
#include <math.h>

#include "core/base/parallel.h"
#include "core/math/lrn_math.h"
#include "core/op/grad.h"
#include "core/op/norm_slices.h"
#include "core/op/op.h"

static const deft_param_def_t lrn_params[] = {
    {"alpha", DEFT_PARAM_FLOAT, "0.0001", "the variance scaling parameter", NULL, false},
    {"beta", DEFT_PARAM_FLOAT, "0.75", "the power parameter", NULL, false},
    {"knorm", DEFT_PARAM_FLOAT, "2", "the constant added to the scaled sum", NULL, false},
    {"nsize", DEFT_PARAM_INT, NULL, "the window width in channels (odd)", NULL, false},
    {0}};

enum { P_ALPHA, P_BETA, P_KNORM, P_NSIZE };

static int check_data(const deft_op_t *op, const deft_desc_t *data) {
    if (deft_op_check_dtype_float(op, 0, data->dtype)) return -1;
    if (data->shape.ndim == 4) return 0;
    char s[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (data) has shape %s, expected (N, C, H, W)",
                         deft_shape_format(&data->shape, s, sizeof s));
}

static int lrn_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (check_data(op, &in[0])) return -1;
    int64_t nsize = p[P_NSIZE].i;
    if (nsize < 1 || nsize % 2 == 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "nsize is %lld, expected an odd window size",
                             (long long)nsize);
    out[0] = out[1] = in[0];
    *nout = 2;
    return 0;
}

static inline void forward_line(const deft_lrn_call_t *c, deft_dtype_t dtype, int64_t j) {
    for (int64_t ch = 0; ch < c->lines.na; ch++) deft_lrn_forward_at(c, dtype, j, ch);
}

static inline void backward_line(const deft_lrn_call_t *c, deft_dtype_t dtype, int64_t j) {
    for (int64_t ch = 0; ch < c->lines.na; ch++) deft_lrn_backward_at(c, dtype, j, ch);
}

static void lrn_range(void *arg, int64_t begin, int64_t end) {
    const deft_lrn_call_t *c = arg;
    bool f32 = c->dtype == DEFT_DT_FLOAT32;
    for (int64_t j = begin; j < end; j++) {
        if (c->g && f32)
            backward_line(c, DEFT_DT_FLOAT32, j);
        else if (c->g)
            backward_line(c, DEFT_DT_FLOAT64, j);
        else if (f32)
            forward_line(c, DEFT_DT_FLOAT32, j);
        else
            forward_line(c, DEFT_DT_FLOAT64, j);
    }
}

/* Set up a call on data of `shape`: lines across the channels. */
static void lrn_plan(deft_lrn_call_t *c, const deft_param_value_t *p, const deft_shape_t *shape) {
    int64_t outer, channels, inner;
    deft_norm_split(shape, 1, &outer, &channels, &inner);
    /* lines strided by inner: never the contiguous form, which needs inner == 1 */
    c->lines = (deft_norm_plan_t){.slices = outer * inner,
                                  .q = inner ? inner : 1,
                                  .hi = channels * inner,
                                  .lo = 1,
                                  .na = channels,
                                  .stride = inner,
                                  .nb = 1,
                                  .gq = 1};
    c->half = p[P_NSIZE].i / 2;
    c->salpha = p[P_ALPHA].f / (double)p[P_NSIZE].i;
    c->beta = p[P_BETA].f;
    c->knorm = p[P_KNORM].f;
}

/* Run a planned call on the CPU, lines in parallel. */
static void lrn_run(const deft_lrn_call_t *c) {
    int64_t channels = c->lines.na;
    int64_t grain = DEFT_PARALLEL_GRAIN / (4 * (channels ? channels : 1)) + 1;
    deft_parallel_for(c->lines.slices, grain, lrn_range, (void *)c);
}

/* LRN's call: data in, the output and tmp_norm out. */
static deft_lrn_call_t lrn_call(const deft_param_value_t *p, const deft_tensor_t *in,
                                const deft_tensor_t *out) {
    deft_lrn_call_t c = {.dtype = in[0].dtype,
                         .x = deft_tensor_data(&in[0]),
                         .y = deft_tensor_data(&out[0]),
                         .norm = deft_tensor_data(&out[1])};
    lrn_plan(&c, p, &in[0].shape);
    return c;
}

/* _backward_LRN's call: (out_grad, data, tmp_norm) in, d data out. */
static deft_lrn_call_t lrn_backward_call(const deft_param_value_t *p, const deft_tensor_t *in,
                                         const deft_tensor_t *out) {
    deft_lrn_call_t c = {.dtype = in[1].dtype,
                         .g = deft_tensor_data(&in[0]),
                         .x = deft_tensor_data(&in[1]),
                         .norm = deft_tensor_data(&in[2]),
                         .y = deft_tensor_data(&out[0])};
    lrn_plan(&c, p, &in[1].shape);
    return c;
}

static int lrn_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_lrn_call_t c = lrn_call(p, in, out);
    lrn_run(&c);
    return 0;
}

/* (out_grad, data, tmp_norm) -> d data, all of data's shape and dtype. */
static int lrn_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_desc_t forward[2];
    if (lrn_infer(op, p, 1, &in[1], nout, forward) || deft_op_check_same_dtype(op, nin, in))
        return -1;
    for (int k = 0; k < 3; k += 2)
        if (!deft_shape_equal(&in[k].shape, &in[1].shape)) {
            char have[DEFT_SHAPE_STR_MAX], want[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d (%s) has shape %s, expected %s", k,
                                 op->input_names[k],
                                 deft_shape_format(&in[k].shape, have, sizeof have),
                                 deft_shape_format(&in[1].shape, want, sizeof want));
        }
    out[0] = in[1];
    *nout = 1;
    return 0;
}

static int lrn_backward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_lrn_call_t c = lrn_backward_call(p, in, out);
    lrn_run(&c);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int lrn_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_lrn_call_t c = lrn_call(p, in, out);
    return deft_gpu_lrn(in[0].device.id, &c);
}

static int lrn_backward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_lrn_call_t c = lrn_backward_call(p, in, out);
    return deft_gpu_lrn(in[1].device.id, &c);
}
#endif

static int lrn_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), b->output(b, 1)};
    in_grads[0] = b->apply(b, "_backward_LRN", 3, in,
                           GRAD_PARAMS("alpha", g_attr(b, "alpha", "0.0001"), "beta",
                                       g_attr(b, "beta", "0.75"), "knorm", g_attr(b, "knorm", "2"),
                                       "nsize", g_attr(b, "nsize", "1")),
                           0);
    return 0;
}

static const char *const lrn_backward_inputs[] = {"out_grad", "data", "tmp_norm", NULL};

static const deft_op_t lrn_ops[] = {
    {.name = "LRN",
     .description = "Local response normalisation across the channels of (N, C, H, W).",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = lrn_params,
     .infer = lrn_infer,
     .forward = lrn_forward,
     .forward_gpu = DEFT_GPU(lrn_forward_gpu),
     .inplace_input = -1,
     .num_outputs = deft_op_two_outputs,
     .num_visible_outputs = deft_op_one_visible,
     .gradient = lrn_gradient},
    {.name = "_backward_LRN",
     .description = "Gradient of LRN from data and its hidden tmp_norm.",
     .input_names = lrn_backward_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = lrn_params,
     .infer = lrn_backward_infer,
     .forward = lrn_backward,
     .forward_gpu = DEFT_GPU(lrn_backward_gpu),
     .inplace_input = -1},
};

DEFT_OP_FAMILY(deft_family_lrn, lrn_ops);
