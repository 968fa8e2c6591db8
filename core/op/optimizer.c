/*
 * Optimizer updates as operators, with MXNet's semantics, so every binding
 * trains the same way: sgd_update, sgd_mom_update, adam_update. Optimizer
 * state (momentum, Adam's mean and var) is updated in place; the new weight
 * is the output, which may be the weight array itself.
 */
#include <string.h>

#include "core/base/parallel.h"
#include "core/op/gpu_ops.h"
#include "core/op/op.h"
#include "core/op/update_f32.h"

enum { P_LR, P_WD, P_RESCALE, P_CLIP, P_MOMENTUM, P_BETA1 = 4, P_BETA2, P_EPSILON };

#define COMMON_PARAMS                                                                              \
    {"lr", DEFT_PARAM_FLOAT, NULL, "learning rate", NULL, false},                                  \
        {"wd", DEFT_PARAM_FLOAT, "0", "weight decay (L2 penalty)", NULL, false},                   \
        {"rescale_grad", DEFT_PARAM_FLOAT, "1", "gradient scale factor", NULL, false}, {           \
        "clip_gradient", DEFT_PARAM_FLOAT, "-1",                                                   \
            "clip the rescaled gradient to [-c, c]; negative: no clipping", NULL, false            \
    }

static const deft_param_def_t sgd_params[] = {COMMON_PARAMS, {0}};
static const deft_param_def_t sgd_mom_params[] = {
    COMMON_PARAMS, {"momentum", DEFT_PARAM_FLOAT, "0", "momentum", NULL, false}, {0}};
static const deft_param_def_t adam_params[] = {
    COMMON_PARAMS,
    {"beta1", DEFT_PARAM_FLOAT, "0.9", "decay of the first moment", NULL, false},
    {"beta2", DEFT_PARAM_FLOAT, "0.999", "decay of the second moment", NULL, false},
    {"epsilon", DEFT_PARAM_FLOAT, "1e-8", "added to the denominator", NULL, false},
    {0}};

/* The kinds are the training-step graph's (step_math.h); deft_gpu_update_t's
 * kind has the same numbers. */

typedef struct update_ctx {
    deft_step_kind_t kind;
    const deft_param_value_t *p;
    deft_dtype_t dtype;
    void *out;
    void *in[4]; /* weight, grad, and state */
} update_ctx_t;

/* The hyper-parameters as locals: read through `p`, the compiler would reload
 * them after every store (out may alias anything), and no loop would vectorise. */
static deft_hyper_t read_hyper(const deft_param_value_t *p, deft_step_kind_t kind) {
    deft_hyper_t h = {
        .lr = p[P_LR].f, .wd = p[P_WD].f, .rescale = p[P_RESCALE].f, .clip = p[P_CLIP].f};
    if (kind == DEFT_STEP_SGD_MOM) h.momentum = p[P_MOMENTUM].f;
    if (kind == DEFT_STEP_ADAM)
        h.beta1 = p[P_BETA1].f, h.beta2 = p[P_BETA2].f, h.epsilon = p[P_EPSILON].f;
    return h;
}

/* float64: one loop per kind (no branch inside), each element read before it
 * is written, in double as the GPU computes it. */
static void update_f64(const update_ctx_t *c, int64_t begin, int64_t end) {
    const deft_hyper_t h = read_hyper(c->p, c->kind);
    double *out = c->out, *w = c->in[0], *g = c->in[1], *s1 = c->in[2], *s2 = c->in[3];
    switch (c->kind) {
    case DEFT_STEP_SGD:
        for (int64_t i = begin; i < end; i++) out[i] = deft_sgd_step(&h, w[i], g[i]);
        break;
    case DEFT_STEP_SGD_MOM:
        for (int64_t i = begin; i < end; i++) out[i] = deft_sgd_mom_step(&h, w[i], g[i], &s1[i]);
        break;
    case DEFT_STEP_ADAM:
        for (int64_t i = begin; i < end; i++)
            out[i] = deft_adam_step(&h, w[i], g[i], &s1[i], &s2[i]);
        break;
    default: /* the training-step graphs' kinds only */
        break;
    }
}

/* float32: in place in out (after a copy when it is another array). */
static void update_f32(const update_ctx_t *c, int64_t begin, int64_t end) {
    const deft_hyper_t h = read_hyper(c->p, c->kind);
    float *w = (float *)c->out + begin, *s1 = c->in[2], *s2 = c->in[3];
    int64_t n = end - begin;
    if (c->out != c->in[0]) memcpy(w, (const float *)c->in[0] + begin, (size_t)n * sizeof *w);
    deft_update_f32(c->kind, &h, w, (const float *)c->in[1] + begin, s1 ? s1 + begin : NULL,
                    s2 ? s2 + begin : NULL, NULL, n);
}

static void update_range(void *arg, int64_t begin, int64_t end) {
    const update_ctx_t *c = arg;
    if (c->dtype == DEFT_DT_FLOAT32)
        update_f32(c, begin, end);
    else
        update_f64(c, begin, end);
}

static int update_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    if (deft_op_check_optimizer_inputs(op, nin, in)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

static int update_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    update_ctx_t c = {.kind = (deft_step_kind_t)(intptr_t)op->data,
                      .p = p,
                      .dtype = in[0].dtype,
                      .out = deft_tensor_data(&out[0])};
    for (int i = 0; i < nin; i++) c.in[i] = deft_tensor_data(&in[i]);
    deft_parallel_for(deft_shape_size(&in[0].shape), 16384, update_range, &c);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int update_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    deft_step_kind_t kind = (deft_step_kind_t)(intptr_t)op->data;
    deft_gpu_update_t u = {.kind = (int)kind,
                           .hyper = read_hyper(p, kind),
                           .dtype = in[0].dtype,
                           .n = deft_shape_size(&in[0].shape),
                           .out = deft_tensor_data(&out[0])};
    for (int i = 0; i < nin; i++) u.in[i] = deft_tensor_data(&in[i]);
    return deft_gpu_update(deft_gpu_of(&in[0]), &u);
}
#endif

static const char *const sgd_inputs[] = {"weight", "grad", NULL};
static const char *const sgd_mom_inputs[] = {"weight", "grad", "mom", NULL};
static const char *const adam_inputs[] = {"weight", "grad", "mean", "var", NULL};

static const deft_op_t optimizer_ops[] = {
    {.name = "sgd_update",
     .description = "SGD step: weight - lr * (clip(rescale_grad * grad) + wd * weight).",
     .input_names = sgd_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = sgd_params,
     .infer = update_infer,
     .forward = update_forward,
     .forward_gpu = DEFT_GPU(update_forward_gpu),
     .inplace_input = 0,
     .data = (void *)DEFT_STEP_SGD},
    {.name = "sgd_mom_update",
     .description = "SGD with momentum: mom = momentum * mom - lr * g; weight + mom (mom is "
                    "updated in place).",
     .input_names = sgd_mom_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = sgd_mom_params,
     .infer = update_infer,
     .forward = update_forward,
     .forward_gpu = DEFT_GPU(update_forward_gpu),
     .inplace_input = 0,
     .mutate_inputs = 1u << 2,
     .data = (void *)DEFT_STEP_SGD_MOM},
    {.name = "adam_update",
     .description = "Adam step (MXNet's form, bias correction folded into lr); mean and var are "
                    "updated in place.",
     .input_names = adam_inputs,
     .min_inputs = 4,
     .max_inputs = 4,
     .params = adam_params,
     .infer = update_infer,
     .forward = update_forward,
     .forward_gpu = DEFT_GPU(update_forward_gpu),
     .inplace_input = 0,
     .mutate_inputs = (1u << 2) | (1u << 3),
     .data = (void *)DEFT_STEP_ADAM},
};

DEFT_OP_FAMILY(deft_family_optimizer, optimizer_ops);
