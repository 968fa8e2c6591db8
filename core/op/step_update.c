/*
 * Optimizer steps for training-step graphs (core/graph/train_step.c):
 * _step_sgd, _step_sgd_mom, _step_adam and _step_adamw update the weight and
 * the optimizer states in place, reading the hyper-parameters from a tensor
 * (step_math.h) so that a learning-rate schedule does not change the graph.
 *
 * Each step's output is an empty array: its only use is an optional last
 * input ("after") that chains the steps of one graph, which orders them after
 * every gradient (train_step.c) and gives the graph one output for all.
 */
#include "core/base/parallel.h"
#include "core/math/step_math.h"
#include "core/op/gpu_ops.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/update_f32.h"

/* Inputs: weight, grad, the kind's states, hyper, then optionally "after". */
static int num_states(deft_step_kind_t kind) {
    return kind == DEFT_STEP_SGD ? 0 : kind == DEFT_STEP_SGD_MOM ? 1 : 2;
}

static deft_step_kind_t kind_of(const deft_op_t *op) {
    return (deft_step_kind_t)(intptr_t)op->data;
}

static int check_hyper(const deft_op_t *op, int input, const deft_desc_t *hyper) {
    if (deft_op_check_dtype_float(op, input, hyper->dtype)) return -1;
    if (hyper->shape.ndim != 1 || hyper->shape.dims[0] < DEFT_STEP_HYPER_COUNT) {
        char have[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d (hyper) has shape %s, expected (%d,): lr, wd, rescale_grad, "
                             "clip_gradient, momentum or beta1, beta2, epsilon",
                             input, deft_shape_format(&hyper->shape, have, sizeof have),
                             DEFT_STEP_HYPER_COUNT);
    }
    return 0;
}

static int step_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    int hyper = 2 + num_states(kind_of(op));
    if (nin < hyper + 1) return deft_op_input_count_error(op, nin);
    if (deft_op_check_optimizer_inputs(op, hyper, in) || check_hyper(op, hyper, &in[hyper]))
        return -1;
    out[0] = (deft_desc_t){{1, {0}}, DEFT_DT_FLOAT32};
    *nout = 1;
    return 0;
}

typedef struct step_ctx {
    deft_step_kind_t kind;
    deft_hyper_t h;
    void *w, *g, *s1, *s2;
} step_ctx_t;

/* float32: the update operators' vectorised loops (update_f32.c). */
static void step_f32_range(void *arg, int64_t begin, int64_t end) {
    const step_ctx_t *c = arg;
    float *s1 = c->s1, *s2 = c->s2;
    deft_update_f32(c->kind, &c->h, (float *)c->w + begin, (const float *)c->g + begin,
                    s1 ? s1 + begin : NULL, s2 ? s2 + begin : NULL, end - begin);
}

/* float64: in double, as the GPU computes it; one loop per kind, the kind a
 * constant in each, no branch inside. */
static void step_f64_range(void *arg, int64_t begin, int64_t end) {
    const step_ctx_t *c = arg;
    const deft_hyper_t h = c->h;
    double *w = c->w, *g = c->g, *s1 = c->s1, *s2 = c->s2;
    switch (c->kind) {
    case DEFT_STEP_SGD:
        for (int64_t i = begin; i < end; i++)
            DEFT_STEP_ELEMENT(double, DEFT_STEP_SGD, &h, w, g, s1, s2, i);
        break;
    case DEFT_STEP_SGD_MOM:
        for (int64_t i = begin; i < end; i++)
            DEFT_STEP_ELEMENT(double, DEFT_STEP_SGD_MOM, &h, w, g, s1, s2, i);
        break;
    case DEFT_STEP_ADAM:
        for (int64_t i = begin; i < end; i++)
            DEFT_STEP_ELEMENT(double, DEFT_STEP_ADAM, &h, w, g, s1, s2, i);
        break;
    case DEFT_STEP_ADAMW:
        for (int64_t i = begin; i < end; i++)
            DEFT_STEP_ELEMENT(double, DEFT_STEP_ADAMW, &h, w, g, s1, s2, i);
        break;
    }
}

static step_ctx_t step_context(const deft_op_t *op, const deft_tensor_t *in, deft_hyper_t h) {
    deft_step_kind_t kind = kind_of(op);
    int states = num_states(kind);
    return (step_ctx_t){kind,
                        h,
                        deft_tensor_data(&in[0]),
                        deft_tensor_data(&in[1]),
                        states > 0 ? deft_tensor_data(&in[2]) : NULL,
                        states > 1 ? deft_tensor_data(&in[3]) : NULL};
}

static int step_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout, (void)out;
    const deft_tensor_t *hyper = &in[2 + num_states(kind_of(op))];
    step_ctx_t c = step_context(op, in, deft_step_hyper(deft_tensor_data(hyper), hyper->dtype));
    int64_t n = deft_shape_size(&in[0].shape);
    deft_parallel_for(n, 16384, in[0].dtype == DEFT_DT_FLOAT32 ? step_f32_range : step_f64_range,
                      &c);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
/* step_update.cu: the step on GPU dev, reading the hyper-parameters there. */
int deft_gpu_step(int dev, int kind, deft_dtype_t dtype, int64_t n, void *w, const void *g,
                  void *s1, void *s2, const void *hyper, deft_dtype_t hyper_dtype);

static int step_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout, (void)out;
    int states = num_states(kind_of(op));
    const deft_tensor_t *hyper = &in[2 + states];
    return deft_gpu_step(deft_gpu_of(&in[0]), (int)kind_of(op), in[0].dtype,
                         deft_shape_size(&in[0].shape), deft_tensor_data(&in[0]),
                         deft_tensor_data(&in[1]), states > 0 ? deft_tensor_data(&in[2]) : NULL,
                         states > 1 ? deft_tensor_data(&in[3]) : NULL, deft_tensor_data(hyper),
                         hyper->dtype);
}
#endif

#define STEP_OP(op_name, text, kind, inputs, mutated)                                              \
    {                                                                                              \
        .name = op_name, .description = text, .input_names = inputs,                               \
        .min_inputs = 3 + (kind == DEFT_STEP_SGD       ? 0                                         \
                           : kind == DEFT_STEP_SGD_MOM ? 1                                         \
                                                       : 2),                                       \
        .max_inputs = 4 + (kind == DEFT_STEP_SGD       ? 0                                         \
                           : kind == DEFT_STEP_SGD_MOM ? 1                                         \
                                                       : 2),                                       \
        .infer = step_infer, .forward = step_forward, .forward_gpu = DEFT_GPU(step_forward_gpu),   \
        .inplace_input = -1, .mutate_inputs = mutated, .data = (void *)kind                        \
    }

static const deft_op_t step_ops[] = {
    STEP_OP("_step_sgd", "A training step's SGD update of weight, in place.", DEFT_STEP_SGD,
            ((const char *const[]){"weight", "grad", "hyper", "after", NULL}), 1u),
    STEP_OP("_step_sgd_mom",
            "A training step's SGD update with momentum of weight and mom, in place.",
            DEFT_STEP_SGD_MOM,
            ((const char *const[]){"weight", "grad", "mom", "hyper", "after", NULL}), 1u | 1u << 2),
    STEP_OP("_step_adam", "A training step's Adam update of weight, mean and var, in place.",
            DEFT_STEP_ADAM,
            ((const char *const[]){"weight", "grad", "mean", "var", "hyper", "after", NULL}),
            1u | 1u << 2 | 1u << 3),
    STEP_OP("_step_adamw",
            "A training step's AdamW update (decoupled weight decay) of weight, mean and var, in "
            "place.",
            DEFT_STEP_ADAMW,
            ((const char *const[]){"weight", "grad", "mean", "var", "hyper", "after", NULL}),
            1u | 1u << 2 | 1u << 3),
};

DEFT_OP_FAMILY(deft_family_step_update, step_ops);
