/*
 * LeakyReLU, MXNet's family of rectifiers in one operator: leaky (slope x
 * below 0), prelu (a learnt slope `gamma`, per channel or one for all),
 * elu, selu, gelu, and rrelu.
 *
 * rrelu draws its slope at random from [lower_bound, upper_bound) in
 * training, and uses their mean in prediction. deft runs it in prediction
 * mode always, training included (a known difference from MXNet until
 * operators can draw random numbers in training mode); its second output,
 * the mask of slopes, is then that mean everywhere.
 *
 * The per-element formulas are scalar_math.h's (xelu, elu, selu, gelu),
 * shared with the GPU's maps.
 */
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/registry.h"
#include "core/op/strided.h"
#include "core/math/prelu_math.h"
#include "core/math/scalar_math.h"

/* prelu, the one type with a second input, is listed last (tools that try
 * each operator with its last choice then exercise the gamma input). */
enum { ACT_RRELU, ACT_LEAKY, ACT_ELU, ACT_SELU, ACT_GELU, ACT_PRELU };
static const char *const act_types[] = {"rrelu", "leaky", "elu", "selu", "gelu", "prelu", NULL};

/* p[0] act_type, p[1] slope, p[2] lower_bound, p[3] upper_bound. */
static const deft_param_def_t leaky_params[] = {
    {"act_type", DEFT_PARAM_ENUM, "leaky", "the activation function", act_types, false},
    {"slope", DEFT_PARAM_FLOAT, "0.25", "slope below 0 (leaky), or the scale of elu", NULL, false},
    {"lower_bound", DEFT_PARAM_FLOAT, "0.125", "lowest random slope (rrelu)", NULL, false},
    {"upper_bound", DEFT_PARAM_FLOAT, "0.334", "highest random slope (rrelu)", NULL, false},
    {0}};

static const char *const data_gamma[] = {"data", "gamma", NULL};

static int leaky_num_inputs(const deft_param_value_t *p) {
    return p[0].i == ACT_PRELU ? 2 : 1;
}

static int leaky_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return p[0].i == ACT_RRELU ? 2 : 1;
}

/* The slope of leaky, and of rrelu in prediction: MXNet computes the mean in float. */
static double fixed_slope(const deft_param_value_t *p) {
    return p[0].i == ACT_RRELU ? (double)(((float)p[2].f + (float)p[3].f) / 2.0f) : p[1].f;
}

/*
 * gamma's shape aligned with the data's as MXNet aligns it: gamma's axes,
 * from its last, match the data's axes 1 and 0 (only those), where equal
 * or 1; every other axis is 1. So (C,) is per channel and (1,) one slope.
 */
static int gamma_shape(const deft_op_t *op, const deft_shape_t *data, const deft_shape_t *gamma,
                       deft_shape_t *out) {
    int s = gamma->ndim - 1;
    out->ndim = data->ndim;
    for (int i = data->ndim - 1; i >= 0; i--) {
        out->dims[i] = 1;
        if (s >= 0 && i <= 1 && (data->dims[i] == gamma->dims[s] || gamma->dims[s] == 1))
            out->dims[i] = gamma->dims[s--];
    }
    if (s == -1) return 0;
    char sg[DEFT_SHAPE_STR_MAX], sd[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE,
                         "input 1 (gamma) has shape %s, which does not match axis 1 (or 0 and 1) "
                         "of the data's %s",
                         deft_shape_format(gamma, sg, sizeof sg),
                         deft_shape_format(data, sd, sizeof sd));
}

static int leaky_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int want = leaky_num_inputs(p);
    if (nin != want)
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d for act_type=%s", nin,
                             want, act_types[p[0].i]);
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    if (nin == 2) {
        deft_shape_t aligned;
        if (deft_op_check_same_dtype(op, nin, in) ||
            gamma_shape(op, &in[0].shape, &in[1].shape, &aligned))
            return -1;
    }
    *nout = leaky_num_outputs(p, nin);
    for (int k = 0; k < *nout; k++) out[k] = in[0];
    return 0;
}

/* Graphs: gamma of a data (N, C, ...) defaults to (C,), as MXNet infers it. */
static int leaky_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              deft_desc_t *in, bool *known, const deft_desc_t *out,
                              const bool *out_known) {
    (void)op, (void)p;
    if (!known[0] && out_known[0]) in[0] = out[0], known[0] = true;
    if (nin == 2 && known[0] && !known[1] && in[0].shape.ndim >= 2) {
        in[1] = (deft_desc_t){.shape = {.ndim = 1, .dims = {in[0].shape.dims[1]}},
                              .dtype = in[0].dtype};
        known[1] = true;
    }
    return 0;
}

/* ---- the kernel: y = f(x, b), b the slope (a scalar or gamma, broadcast) ---- */

DEFT_DEVICE_FN float selu2_f(float a, float b) {
    (void)b;
    return deft_selu_f(a);
}
DEFT_DEVICE_FN double selu2_d(double a, double b) {
    (void)b;
    return deft_selu_d(a);
}
DEFT_DEVICE_FN float gelu2_f(float a, float b) {
    (void)b;
    return deft_gelu_f(a);
}
DEFT_DEVICE_FN double gelu2_d(double a, double b) {
    (void)b;
    return deft_gelu_d(a);
}

#define ACT_LOOP(fn, T)                                                                            \
    DEFT_CLONES static void loop_##fn(const void *ctx, char *const *p, const int64_t *s,           \
                                      int64_t n) {                                                 \
        (void)ctx;                                                                                 \
        T *y = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        for (int64_t i = 0; i < n; i++) y[i * s[0]] = fn(a[i * s[1]], b[i * s[2]]);                \
    }
#define ACT_LOOPS(f, d) ACT_LOOP(f, float) ACT_LOOP(d, double)
ACT_LOOPS(deft_xelu_f, deft_xelu_d)
ACT_LOOPS(deft_elu_f, deft_elu_d)
ACT_LOOPS(selu2_f, selu2_d)
ACT_LOOPS(gelu2_f, gelu2_d)

typedef struct act_fn {
    deft_inner_fn cpu[2]; /* float32, float64 */
    deft_gpu_fn_t gpu;
    int gpu_inputs; /* 1: unary on the GPU (selu, gelu) */
} act_fn_t;

static const act_fn_t *act_fn(int type) {
    static const act_fn_t xelu = {{loop_deft_xelu_f, loop_deft_xelu_d}, DEFT_GPU_FN_xelu, 2},
                          elu = {{loop_deft_elu_f, loop_deft_elu_d}, DEFT_GPU_FN_elu, 2},
                          selu = {{loop_selu2_f, loop_selu2_d}, DEFT_GPU_FN_selu, 1},
                          gelu = {{loop_gelu2_f, loop_gelu2_d}, DEFT_GPU_FN_gelu, 1};
    switch (type) {
    case ACT_ELU:
        return &elu;
    case ACT_SELU:
        return &selu;
    case ACT_GELU:
        return &gelu;
    default:
        return &xelu;
    }
}

/* gamma viewed with the data's rank (its aligned shape), for broadcasting. */
static int aligned_gamma(const deft_op_t *op, const deft_tensor_t *in, deft_tensor_t *view) {
    *view = in[1];
    return gamma_shape(op, &in[0].shape, &in[1].shape, &view->shape);
}

static void fill_slope(const deft_tensor_t *mask, double slope) {
    int64_t n = deft_shape_size(&mask->shape);
    for (int64_t i = 0; i < n; i++)
        deft_store_double(deft_tensor_data(mask), mask->dtype, i, slope);
}

static int leaky_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    const act_fn_t *f = act_fn((int)p[0].i);
    deft_strided_t it;
    deft_strided_init(&it, &out[0].shape, 3);
    deft_strided_set_dense(&it, 0, &out[0]);
    deft_strided_set_dense(&it, 1, &in[0]);
    _Alignas(8) char slope[8];
    static const int64_t none[DEFT_SHAPE_MAX_NDIM] = {0};
    if (p[0].i == ACT_PRELU) {
        deft_tensor_t gamma;
        if (aligned_gamma(op, in, &gamma)) return -1;
        deft_strided_set_broadcast(&it, 2, &gamma);
    } else {
        deft_store_double(slope, in[0].dtype, 0, fixed_slope(p));
        deft_strided_set(&it, 2, slope, deft_dtype_size(in[0].dtype), none);
    }
    deft_strided_run(&it, f->cpu[in[0].dtype == DEFT_DT_FLOAT64], NULL);
    if (nout > 1) fill_slope(&out[1], fixed_slope(p));
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int leaky_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    const act_fn_t *f = act_fn((int)p[0].i);
    deft_tensor_t gamma;
    const deft_tensor_t *operands[2] = {&in[0], NULL};
    double scalars[DEFT_GPU_MAX_OPS] = {[1] = fixed_slope(p), [2] = fixed_slope(p)};
    if (p[0].i == ACT_PRELU) {
        if (aligned_gamma(op, in, &gamma)) return -1;
        operands[1] = &gamma;
    }
    if (deft_gpu_elementwise(f->gpu, &out[0], f->gpu_inputs, operands, scalars)) return -1;
    return nout > 1 ? deft_gpu_elementwise(DEFT_GPU_FN_FILL, &out[1], 0, NULL, scalars) : 0;
}
#endif

/* ---- _backward_LeakyReLU (prelu): d data and d gamma ---- */

static const char *const grad_data_gamma[] = {"grad", "data", "gamma", NULL};

static int prelu_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    deft_shape_t aligned;
    if (deft_op_check_dtype_float(op, 1, in[1].dtype) || deft_op_check_same_dtype(op, 3, in) ||
        gamma_shape(op, &in[1].shape, &in[2].shape, &aligned))
        return -1;
    if (!deft_shape_equal(&in[0].shape, &in[1].shape)) {
        char sg[DEFT_SHAPE_STR_MAX], sd[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (grad) has shape %s, expected %s",
                             deft_shape_format(&in[0].shape, sg, sizeof sg),
                             deft_shape_format(&in[1].shape, sd, sizeof sd));
    }
    out[0] = in[1], out[1] = in[2];
    *nout = 2;
    return 0;
}

static int prelu_backward_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p, (void)num_inputs;
    return 2;
}

/* d data = g (x > 0 ? 1 : gamma); d gamma = the sum, over the axes gamma is
 * broadcast along, of g (x > 0 ? 0 : x). In double, element by element
 * (prelu_math.h). The call of (grad, data, gamma) into d data and d gamma. */
static int prelu_backward_call(const deft_op_t *op, const deft_tensor_t *in,
                               const deft_tensor_t *out, deft_prelu_grad_t *p) {
    deft_shape_t gshape;
    if (gamma_shape(op, &in[1].shape, &in[2].shape, &gshape)) return -1;
    const deft_shape_t *xs = &in[1].shape;
    *p = (deft_prelu_grad_t){.dtype = in[1].dtype,
                             .ndim = xs->ndim,
                             .n = deft_shape_size(xs),
                             .ng = deft_shape_size(&gshape),
                             .g = deft_tensor_data(&in[0]),
                             .x = deft_tensor_data(&in[1]),
                             .gamma = deft_tensor_data(&in[2]),
                             .dx = deft_tensor_data(&out[0]),
                             .dgamma = deft_tensor_data(&out[1])};
    for (int d = 0; d < xs->ndim; d++) p->dims[d] = xs->dims[d], p->gdims[d] = gshape.dims[d];
    return 0;
}

static int prelu_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    deft_prelu_grad_t call;
    if (prelu_backward_call(op, in, out, &call)) return -1;
    for (int64_t i = 0; i < call.n; i++) deft_prelu_dx_at(&call, i);
    for (int64_t e = 0; e < call.ng; e++) deft_prelu_dgamma_at(&call, e);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int prelu_backward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    deft_prelu_grad_t call;
    if (prelu_backward_call(op, in, out, &call)) return -1;
    return deft_gpu_prelu_backward(in[1].device.id, &call);
}
#endif

/* ---- gradients (y: output, g: its gradient) ---- */

static deft_gref_t scalar_op(deft_grad_builder_t *b, const char *op, deft_gref_t x, double s) {
    char text[32];
    snprintf(text, sizeof text, "%.17g", s);
    return g_op1(b, op, x, GRAD_PARAMS("scalar", text));
}

/* where(y > 0, above, below) */
static deft_gref_t by_sign(deft_grad_builder_t *b, deft_gref_t y, deft_gref_t above,
                           deft_gref_t below) {
    deft_gref_t in[3] = {scalar_op(b, "_greater_scalar", y, 0), above, below};
    return b->apply(b, "where", 3, in, GRAD_NONE, 0);
}

static int grad_leaky(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    deft_gref_t y = b->output(b, 0), g = b->out_grad(b, 0), d;
    switch (p[0].i) {
    case ACT_PRELU: {
        deft_gref_t in[3] = {g, b->input(b, 0), b->input(b, 1)};
        deft_gref_t r = b->apply(b, "_backward_LeakyReLU", 3, in, GRAD_NONE, 0);
        in_grads[0] = r;
        in_grads[1] = (deft_gref_t){r.node, 1};
        return 0;
    }
    case ACT_GELU: /* the gelu operator's own gradient: same input, output and head */
        return deft_registry_find("gelu")->op->gradient(b, p, nin, in_grads);
    case ACT_ELU: /* y > 0 ? 1 : y + slope */
        d = by_sign(b, y, g_op1(b, "ones_like", y, GRAD_NONE),
                    scalar_op(b, "_plus_scalar", y, p[1].f));
        break;
    case ACT_SELU: /* lambda for y > 0, else y + lambda alpha (the derivative of lambda alpha (e^x -
                      1)) */
        d = by_sign(b, y, g_scale(b, g_op1(b, "ones_like", y, GRAD_NONE), DEFT_SELU_LAMBDA),
                    scalar_op(b, "_plus_scalar", y, DEFT_SELU_LAMBDA * DEFT_SELU_ALPHA));
        break;
    default: { /* leaky, rrelu: y > 0 ? 1 : slope, as slope + (1 - slope) [y > 0] */
        double slope = fixed_slope(p);
        d = scalar_op(b, "_plus_scalar",
                      g_scale(b, scalar_op(b, "_greater_scalar", y, 0), 1 - slope), slope);
    }
    }
    in_grads[0] = g_mul(b, g, d);
    return 0;
}

static const deft_op_t activation_ops[] = {
    {.name = "LeakyReLU",
     .description = "Leaky rectifiers: leaky (x > 0 ? x : slope x), prelu (slope gamma, per "
                    "channel), elu (slope (e^x - 1) below 0), selu, gelu, rrelu (in prediction "
                    "mode: the slope (lower_bound + upper_bound) / 2).",
     .input_names = data_gamma,
     .min_inputs = 1,
     .max_inputs = 2,
     .params = leaky_params,
     .infer = leaky_infer,
     .forward = leaky_forward,
     .forward_gpu = DEFT_GPU(leaky_forward_gpu),
     .inplace_input = -1,
     .num_inputs = leaky_num_inputs,
     .num_outputs = leaky_num_outputs,
     .infer_inputs = leaky_infer_inputs,
     .gradient = grad_leaky},
    {.name = "_backward_LeakyReLU",
     .description = "Gradient of LeakyReLU with act_type=prelu: d data and d gamma.",
     .input_names = grad_data_gamma,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = leaky_params,
     .infer = prelu_backward_infer,
     .forward = prelu_backward_forward,
     .forward_gpu = DEFT_GPU(prelu_backward_gpu),
     .inplace_input = -1,
     .num_outputs = prelu_backward_num_outputs},
};

DEFT_OP_FAMILY(deft_family_activation, activation_ops);
