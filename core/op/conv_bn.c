/*
 * _conv_bn: a Convolution without bias and the BatchNorm over its output
 * channels as one node, made by the FoldBatchNorm pass (core/graph/fold_bn.c)
 * for executors; never exported (graphs keep the two MXNet operators).
 * _conv_bn_relu: the same, then Activation relu (max(y, 0)), as the kernel's
 * last step too.
 *
 * Where BatchNorm normalises with its moving statistics (predict mode, or
 * use_global_stats), it is an affine map per channel,
 *   y = (conv - mean) gamma / sqrt(var + eps) + beta = conv s + t,
 * which the direct kernels (conv_direct.c; conv_direct_stem.c for an RGB
 * image) apply to their register tiles before they store them: no pass
 * over the output, no buffer for the convolution's. Anywhere else
 * (training mode, other kernels, other dtypes, a GPU) the node runs the two
 * operators' own kernels one after the other, BatchNorm in place, so its
 * values, moving statistics and hidden outputs are theirs exactly.
 *
 * Inputs: data, weight, gamma, beta, moving_mean, moving_var (the last two
 * updated in training mode, as BatchNorm's). Outputs: BatchNorm's.
 * Parameters: Convolution's, in its order, then BatchNorm's eps, momentum,
 * fix_gamma, use_global_stats and axis.
 */
#include <math.h>
#include <stdlib.h>

#include "core/op/conv.h"
#include "core/op/conv_op.h"
#include "core/op/op.h"
#include "core/op/registry.h"

enum { CONV_PARAMS = 11, P_EPS = 11, P_MOMENTUM, P_FIX_GAMMA, P_GLOBAL, P_AXIS };

static const char *const cudnn_tunes[] = {"off", "limited_workspace", "fastest", NULL};
static const char *const layouts[] = {"NCW", "NCHW", "NCDHW", "NHWC", "NDHWC", NULL};

/* Convolution's parameters (conv.c), then BatchNorm's (batch_norm.c) that matter here. */
static const deft_param_def_t conv_bn_params[] = {
    {"kernel", DEFT_PARAM_TUPLE, NULL, "kernel size", NULL, false},
    {"stride", DEFT_PARAM_TUPLE, "()", "stride", NULL, false},
    {"dilate", DEFT_PARAM_TUPLE, "()", "dilation", NULL, false},
    {"pad", DEFT_PARAM_TUPLE, "()", "zero padding on both sides", NULL, false},
    {"num_filter", DEFT_PARAM_INT, NULL, "number of output channels", NULL, false},
    {"num_group", DEFT_PARAM_INT, "1", "groups the channels are split into", NULL, false},
    {"workspace", DEFT_PARAM_INT, "1024", "accepted, unused", NULL, false},
    {"no_bias", DEFT_PARAM_BOOL, "true", "the convolution has no bias (always)", NULL, false},
    {"cudnn_tune", DEFT_PARAM_ENUM, "None", "accepted, unused", cudnn_tunes, true},
    {"cudnn_off", DEFT_PARAM_BOOL, "false", "accepted, unused", NULL, false},
    {"layout", DEFT_PARAM_ENUM, "None", "None: NCW, NCHW or NCDHW by the rank", layouts, true},
    {"eps", DEFT_PARAM_FLOAT, "0.001", "BatchNorm's: added to the variance", NULL, false},
    {"momentum", DEFT_PARAM_FLOAT, "0.9", "BatchNorm's: of the moving averages", NULL, false},
    {"fix_gamma", DEFT_PARAM_BOOL, "true", "BatchNorm's: treat gamma as 1", NULL, false},
    {"use_global_stats", DEFT_PARAM_BOOL, "false", "BatchNorm's: moving statistics always", NULL,
     false},
    {"axis", DEFT_PARAM_INT, "1", "BatchNorm's channel axis (1 here)", NULL, false},
    {0}};

/* The two operators, and BatchNorm's parameters from ours. */
typedef struct parts {
    const deft_op_t *conv, *bn;
    deft_params_t bn_params;
    bool relu; /* _conv_bn_relu */
} parts_t;

static int parts_of(const deft_op_t *op, const deft_param_value_t *p, parts_t *pt) {
    const deft_op_entry_t *conv = deft_registry_find("Convolution");
    const deft_op_entry_t *bn = deft_registry_find("BatchNorm");
    const deft_params_t *defaults;
    if (!conv || !bn || deft_op_parse_params(bn, 0, NULL, NULL, &defaults))
        return deft_op_error(op, DEFT_ERR_INTERNAL, "needs Convolution and BatchNorm");
    if (!p[7].i) return deft_op_error(op, DEFT_ERR_VALUE, "no_bias must be true");
    pt->conv = conv->op, pt->bn = bn->op, pt->relu = op->data != NULL;
    pt->bn_params = *defaults;
    /* BatchNorm's order: eps, momentum, fix_gamma, use_global_stats, output_mean_var, axis */
    deft_param_value_t *bn_p = pt->bn_params.v;
    bn_p[0] = p[P_EPS], bn_p[1] = p[P_MOMENTUM], bn_p[2] = p[P_FIX_GAMMA];
    bn_p[3] = p[P_GLOBAL], bn_p[5] = p[P_AXIS];
    return 0;
}

static int conv_bn_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    parts_t pt;
    deft_desc_t y, bn_in[5];
    int n = 1;
    if (nin != 6) return deft_op_input_count_error(op, nin);
    if (parts_of(op, p, &pt) || pt.conv->infer(pt.conv, p, 2, in, &n, &y)) return -1;
    bn_in[0] = y;
    for (int k = 1; k < 5; k++) bn_in[k] = in[k + 1];
    return pt.bn->infer(pt.bn, pt.bn_params.v, 5, bn_in, nout, out);
}

/* The two kernels one after the other, BatchNorm in place on out[0]. */
static int run_both(const parts_t *pt, const deft_param_value_t *p, const deft_tensor_t *in,
                    int nout, const deft_tensor_t *out) {
    bool gpu = out[0].device.type == DEFT_DEV_GPU;
    deft_forward_fn conv = gpu ? pt->conv->forward_gpu : pt->conv->forward;
    deft_forward_fn bn = gpu ? pt->bn->forward_gpu : pt->bn->forward;
    deft_tensor_t bn_in[5] = {out[0], in[2], in[3], in[4], in[5]};
    if (conv(pt->conv, p, 2, in, 1, out) || bn(pt->bn, pt->bn_params.v, 5, bn_in, nout, out))
        return -1;
    return pt->relu ? deft_registry_run_kernel("Activation", "act_type", "relu", out, out) : 0;
}

/* s = gamma / sqrt(var + eps) (gamma 1 with fix_gamma), t = beta - mean s, as BatchNorm's
 * predict mode computes them; in float32, oc entries each. */
static void affine(const deft_param_value_t *p, const deft_tensor_t *in, int64_t oc, float *s,
                   float *t) {
    const float *gamma = deft_tensor_data(&in[2]), *beta = deft_tensor_data(&in[3]);
    const float *mean = deft_tensor_data(&in[4]), *var = deft_tensor_data(&in[5]);
    for (int64_t c = 0; c < oc; c++) {
        double invstd = 1.0 / sqrt((double)var[c] + p[P_EPS].f);
        double scale = (p[P_FIX_GAMMA].i ? 1.0 : (double)gamma[c]) * invstd;
        s[c] = (float)scale;
        t[c] = (float)((double)beta[c] - (double)mean[c] * scale);
    }
}

static int conv_bn_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    parts_t pt;
    deft_conv_geom_t g;
    deft_desc_t desc[2] = {{in[0].shape, in[0].dtype}, {in[1].shape, in[1].dtype}};
    if (parts_of(op, p, &pt) || deft_conv_forward_geometry(p, desc, &g)) return -1;
    /* The affine map: moving statistics, the direct kernel, and nobody reading
     * the batch statistics (BatchNorm's hidden outputs, left unwritten then). */
    bool moving = p[P_GLOBAL].i || !deft_op_training();
    if (!moving || out[0].device.type != DEFT_DEV_CPU || out[0].dtype != DEFT_DT_FLOAT32 ||
        p[P_AXIS].i != 1 || !deft_conv_direct_scaled_fits(&g, DEFT_DT_FLOAT32) ||
        deft_op_output_wanted(1) || deft_op_output_wanted(2))
        return run_both(&pt, p, in, nout, out);
    float *st = malloc((size_t)(2 * g.filt + 1) * sizeof(float));
    if (!st) return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "no memory for the channels' scales");
    affine(p, in, g.filt, st, st + g.filt);
    deft_content_key_t wkey;
    bool keyed = !deft_op_training() && deft_op_content_key(&in[1], &wkey);
    int status = deft_conv_direct_lower_scaled(&g, deft_tensor_data(&in[0]),
                                               deft_tensor_data(&in[1]), st, st + g.filt, pt.relu,
                                               deft_tensor_data(&out[0]), keyed ? &wkey : NULL);
    free(st);
    return status;
}

static const char *const conv_bn_inputs[] = {"data",        "weight",     "gamma", "beta",
                                             "moving_mean", "moving_var", NULL};

static int conv_bn_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p, (void)num_inputs;
    return 3;
}

static int conv_bn_visible(const deft_param_value_t *p) {
    (void)p;
    return 1;
}

/* The two operators differ in their name, description and the relu (data). */
#define CONV_BN_OP(op_name, text, relu)                                                            \
    {                                                                                              \
        .name = op_name, .description = text, .input_names = conv_bn_inputs, .min_inputs = 6,      \
        .max_inputs = 6, .params = conv_bn_params, .infer = conv_bn_infer,                         \
        .forward = conv_bn_forward, .forward_gpu = DEFT_GPU(conv_bn_forward), .inplace_input = -1, \
        .mutate_inputs = (1u << 4) | (1u << 5), .num_outputs = conv_bn_num_outputs,                \
        .num_visible_outputs = conv_bn_visible, .data = relu, .graph_only = true                   \
    }

static const deft_op_t conv_bn_ops[] = {
    CONV_BN_OP("_conv_bn",
               "Convolution without bias, then BatchNorm over its channels (made by the "
               "FoldBatchNorm pass).",
               NULL),
    CONV_BN_OP("_conv_bn_relu",
               "Convolution without bias, BatchNorm over its channels, then relu (made by the "
               "FoldBatchNorm pass).",
               "relu"),
};

DEFT_OP_FAMILY(deft_family_conv_bn, conv_bn_ops);
