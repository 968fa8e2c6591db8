/*
 * Optimizer steps for training-step graphs (core/graph/train_step.c) and the
 * Python optimizers: _step_sgd, _step_sgd_mom, _step_nag (Nesterov),
 * _step_adam, _step_adamw, _step_rmsprop, _step_rmsprop_centered,
 * _step_adagrad, _step_adadelta and _step_lamb update the weight and the
 * optimizer states in place, reading the hyper-parameters from a tensor
 * (step_math.h) so that a learning-rate schedule does not change the graph.
 *
 * One step updates many parameters, a multi-tensor kernel: its inputs are
 * groups of weight, grad and the kind's states, one group per parameter,
 * then hyper, then optionally "after". One parallel loop runs over the
 * elements of every group, so a model's many small tensors cost one call
 * and split across threads as one large one.
 *
 * LAMB scales each parameter's step by a trust ratio, the norm of its weight
 * over the norm of its direction: its loop runs twice, the first pass
 * summing each block's squares, the second stepping.
 *
 * Each step's output is an empty array: its only use is the optional last
 * input ("after") that chains the steps of one graph, which orders them after
 * every gradient (train_step.c) and gives the graph one output for all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/math/step_math.h"
#include "core/op/gpu_ops.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/update_f32.h"

/* The most parameters one step updates: its groups and hyper fit in a node. */
#define MAX_GROUPS ((DEFT_OP_MAX_INPUTS - 1) / 2)

static int num_states(deft_step_kind_t kind) {
    return deft_step_num_states(kind);
}

/* The hyper tensor's elements a kind reads. */
static int hyper_count(deft_step_kind_t kind) {
    return kind == DEFT_STEP_LAMB ? DEFT_STEP_LAMB_HYPER_COUNT : DEFT_STEP_HYPER_COUNT;
}

static deft_step_kind_t kind_of(const deft_op_t *op) {
    return (deft_step_kind_t)(intptr_t)op->data;
}

/* Inputs per group: weight, grad, the states. */
static int group_size(deft_step_kind_t kind) {
    return 2 + num_states(kind);
}

/* The groups of a call with nin inputs: nin is k groups + hyper, or that and
 * "after" (a group has at least 2 inputs, so the two never meet); 0 if neither. */
static int groups_of(deft_step_kind_t kind, int nin) {
    int k = group_size(kind);
    return nin > k && (nin - 1) % k == 0       ? (nin - 1) / k
           : nin > k + 1 && (nin - 2) % k == 0 ? (nin - 2) / k
                                               : 0;
}

/* Updated in place: every group's weight and states, not its grad. */
#define STEP_MUTATES(kind, fn)                                                                     \
    static bool fn(int nin, int i) {                                                               \
        return i < groups_of(kind, nin) * group_size(kind) && i % group_size(kind) != 1;           \
    }
STEP_MUTATES(DEFT_STEP_SGD, sgd_mutates)
STEP_MUTATES(DEFT_STEP_SGD_MOM, sgd_mom_mutates)
STEP_MUTATES(DEFT_STEP_ADAM, adam_mutates)
STEP_MUTATES(DEFT_STEP_ADAMW, adamw_mutates)
STEP_MUTATES(DEFT_STEP_NAG, nag_mutates)
STEP_MUTATES(DEFT_STEP_RMSPROP, rmsprop_mutates)
STEP_MUTATES(DEFT_STEP_RMSPROP_CENTERED, rmsprop_centered_mutates)
STEP_MUTATES(DEFT_STEP_ADAGRAD, adagrad_mutates)
STEP_MUTATES(DEFT_STEP_ADADELTA, adadelta_mutates)
STEP_MUTATES(DEFT_STEP_LAMB, lamb_mutates)

static int check_hyper(const deft_op_t *op, int input, const deft_desc_t *hyper) {
    int want = hyper_count(kind_of(op));
    if (deft_op_check_dtype_float(op, input, hyper->dtype)) return -1;
    if (hyper->shape.ndim != 1 || hyper->shape.dims[0] < want) {
        char have[DEFT_SHAPE_STR_MAX];
        return deft_op_error(
            op, DEFT_ERR_VALUE,
            "input %d (hyper) has shape %s, expected (%d,): lr, wd, rescale_grad, "
            "clip_gradient, momentum or beta1, beta2, epsilon%s",
            input, deft_shape_format(&hyper->shape, have, sizeof have), want,
            want > DEFT_STEP_HYPER_COUNT ? ", bias correction 1 and 2, lower and upper bound" : "");
    }
    return 0;
}

/* Group j's inputs from `first`: a float weight, the rest of its shape and dtype. */
static int check_group(const deft_op_t *op, int j, int first, int k, const deft_desc_t *in) {
    static const char *const roles[] = {"weight", "grad", "first state", "second state",
                                        "third state"};
    if (deft_op_check_dtype_float(op, first, in[0].dtype)) return -1;
    for (int i = 1; i < k; i++)
        if (in[i].dtype != in[0].dtype || !deft_shape_equal(&in[i].shape, &in[0].shape)) {
            char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input %d (the %s of parameter %d) is %s %s, expected %s %s (its "
                                 "weight's)",
                                 first + i, roles[i], j, deft_dtype_name(in[i].dtype),
                                 deft_shape_format(&in[i].shape, b, sizeof b),
                                 deft_dtype_name(in[0].dtype),
                                 deft_shape_format(&in[0].shape, a, sizeof a));
        }
    return 0;
}

static int step_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    int k = group_size(kind_of(op)), groups = groups_of(kind_of(op), nin);
    if (groups == 0) {
        char names[64] = "";
        for (int i = 0; i < k; i++) /* the group's inputs: "weight, grad, mom" */
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     op->input_names[i]);
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "got %d inputs, expected groups of %d (%s) for 1 to %d parameters, "
                             "then hyper, then optionally after",
                             nin, k, names, (DEFT_OP_MAX_INPUTS - 1) / k);
    }
    for (int j = 0; j < groups; j++)
        if (check_group(op, j, j * k, k, in + j * k)) return -1;
    if (check_hyper(op, groups * k, &in[groups * k])) return -1;
    out[0] = (deft_desc_t){{1, {0}}, DEFT_DT_FLOAT32};
    *nout = 1;
    return 0;
}

/* One group's arrays, with the step's kind and hyper-parameters. */
typedef struct step_ctx {
    deft_step_kind_t kind;
    deft_hyper_t h;
    void *w, *g, *s1, *s2, *s3;
} step_ctx_t;

/* float32: the update operators' vectorised loops (update_f32.c). */
static void step_f32_range(const step_ctx_t *c, int64_t begin, int64_t end) {
    float *s1 = c->s1, *s2 = c->s2, *s3 = c->s3;
    deft_update_f32(c->kind, &c->h, (float *)c->w + begin, (const float *)c->g + begin,
                    s1 ? s1 + begin : NULL, s2 ? s2 + begin : NULL, s3 ? s3 + begin : NULL,
                    end - begin);
}

/* float64: in double, as the GPU computes it; one loop per kind, the kind a
 * constant in each, so DEFT_STEP_ELEMENT's switch folds away. */
#define F64_LOOP(KIND)                                                                             \
    case KIND:                                                                                     \
        for (int64_t i = begin; i < end; i++)                                                      \
            DEFT_STEP_ELEMENT(double, KIND, &h, w, g, s1, s2, s3, i);                              \
        break
static void step_f64_range(const step_ctx_t *c, int64_t begin, int64_t end) {
    const deft_hyper_t h = c->h;
    double *w = c->w, *g = c->g, *s1 = c->s1, *s2 = c->s2, *s3 = c->s3;
    switch (c->kind) {
        F64_LOOP(DEFT_STEP_SGD);
        F64_LOOP(DEFT_STEP_SGD_MOM);
        F64_LOOP(DEFT_STEP_ADAM);
        F64_LOOP(DEFT_STEP_ADAMW);
        F64_LOOP(DEFT_STEP_NAG);
        F64_LOOP(DEFT_STEP_RMSPROP);
        F64_LOOP(DEFT_STEP_RMSPROP_CENTERED);
        F64_LOOP(DEFT_STEP_ADAGRAD);
        F64_LOOP(DEFT_STEP_ADADELTA);
    case DEFT_STEP_LAMB: /* two passes: lamb_forward */
        break;
    }
}

/* Every group's elements as one range: group j holds [start[j], start[j+1]). */
typedef struct steps {
    int groups;
    int64_t start[MAX_GROUPS + 1];
    step_ctx_t group[MAX_GROUPS];
    bool f64[MAX_GROUPS];
} steps_t;

static void steps_range(void *arg, int64_t begin, int64_t end) {
    const steps_t *s = arg;
    for (int j = 0; j < s->groups && begin < end; j++) {
        if (s->start[j + 1] <= begin) continue;
        int64_t lo = begin - s->start[j],
                hi = (end < s->start[j + 1] ? end : s->start[j + 1]) - s->start[j];
        (s->f64[j] ? step_f64_range : step_f32_range)(&s->group[j], lo, hi);
        begin = s->start[j] + hi;
    }
}

/* LAMB's passes run over blocks of a parameter: a block's squared norms are
 * its own (no two threads add into one sum), summed per parameter in order,
 * so the result does not depend on the threads. */
enum { LAMB_BLOCK = 16384 };

typedef struct lamb_block {
    int group;
    int64_t lo, hi;
    double norms[2]; /* |w|^2 and |direction|^2 over [lo, hi) */
} lamb_block_t;

typedef struct lamb {
    const steps_t *s;
    lamb_block_t *blocks;
    double ratio[MAX_GROUPS];
} lamb_t;

static void lamb_moments_range(void *arg, int64_t begin, int64_t end) {
    lamb_t *l = arg;
    for (int64_t k = begin; k < end; k++) {
        lamb_block_t *b = &l->blocks[k];
        const step_ctx_t *c = &l->s->group[b->group];
        if (!l->s->f64[b->group]) {
            deft_lamb_moments_f32(&c->h, (const float *)c->w + b->lo, (const float *)c->g + b->lo,
                                  (float *)c->s1 + b->lo, (float *)c->s2 + b->lo, b->hi - b->lo,
                                  b->norms);
            continue;
        }
        double *w = c->w, *g = c->g, *mean = c->s1, *var = c->s2;
        for (int64_t i = b->lo; i < b->hi; i++) {
            deft_lamb_moments(&c->h, g[i], &mean[i], &var[i]);
            double u = deft_lamb_direction(&c->h, w[i], mean[i], var[i]);
            b->norms[0] += w[i] * w[i], b->norms[1] += u * u;
        }
    }
}

static void lamb_apply_range(void *arg, int64_t begin, int64_t end) {
    const lamb_t *l = arg;
    for (int64_t k = begin; k < end; k++) {
        const lamb_block_t *b = &l->blocks[k];
        const step_ctx_t *c = &l->s->group[b->group];
        double ratio = l->ratio[b->group];
        if (!l->s->f64[b->group]) {
            deft_lamb_apply_f32(&c->h, ratio, (float *)c->w + b->lo, (const float *)c->s1 + b->lo,
                                (const float *)c->s2 + b->lo, b->hi - b->lo);
            continue;
        }
        double *w = c->w, *mean = c->s1, *var = c->s2;
        for (int64_t i = b->lo; i < b->hi; i++)
            w[i] -= c->h.lr * ratio * deft_lamb_direction(&c->h, w[i], mean[i], var[i]);
    }
}

static int lamb_forward(const deft_op_t *op, const steps_t *s) {
    int64_t count = 0;
    for (int j = 0; j < s->groups; j++)
        count += (s->start[j + 1] - s->start[j] + LAMB_BLOCK - 1) / LAMB_BLOCK;
    lamb_t l = {.s = s, .blocks = calloc((size_t)count + 1, sizeof(lamb_block_t))};
    if (!l.blocks)
        return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "no memory for %lld blocks",
                             (long long)count);
    int64_t k = 0;
    for (int j = 0; j < s->groups; j++)
        for (int64_t lo = 0; lo < s->start[j + 1] - s->start[j]; lo += LAMB_BLOCK) {
            int64_t n = s->start[j + 1] - s->start[j];
            l.blocks[k++] =
                (lamb_block_t){j, lo, lo + LAMB_BLOCK < n ? lo + LAMB_BLOCK : n, {0, 0}};
        }
    deft_parallel_for(count, 1, lamb_moments_range, &l);
    for (int j = 0, at = 0; j < s->groups; j++) {
        double norms[2] = {0, 0};
        for (; at < count && l.blocks[at].group == j; at++)
            norms[0] += l.blocks[at].norms[0], norms[1] += l.blocks[at].norms[1];
        l.ratio[j] = deft_lamb_ratio(&s->group[j].h, norms[0], norms[1]);
    }
    deft_parallel_for(count, 1, lamb_apply_range, &l);
    free(l.blocks);
    return 0;
}

static int step_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nout, (void)out;
    deft_step_kind_t kind = kind_of(op);
    int k = group_size(kind), states = num_states(kind);
    steps_t s = {.groups = groups_of(kind, nin)};
    const deft_tensor_t *hyper = &in[s.groups * k];
    deft_hyper_t h = deft_step_hyper(deft_tensor_data(hyper), hyper->dtype);
    if (kind == DEFT_STEP_LAMB) deft_step_hyper_lamb(&h, deft_tensor_data(hyper), hyper->dtype);
    for (int j = 0; j < s.groups; j++) {
        const deft_tensor_t *t = in + j * k;
        s.group[j] = (step_ctx_t){kind,
                                  h,
                                  deft_tensor_data(&t[0]),
                                  deft_tensor_data(&t[1]),
                                  states > 0 ? deft_tensor_data(&t[2]) : NULL,
                                  states > 1 ? deft_tensor_data(&t[3]) : NULL,
                                  states > 2 ? deft_tensor_data(&t[4]) : NULL};
        s.f64[j] = t[0].dtype == DEFT_DT_FLOAT64;
        s.start[j + 1] = s.start[j] + deft_shape_size(&t[0].shape);
    }
    if (kind == DEFT_STEP_LAMB) return lamb_forward(op, &s);
    deft_parallel_for(s.start[s.groups], 16384, steps_range, &s);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
/* step_update.cu: the step on GPU dev, reading the hyper-parameters there. */
int deft_gpu_step(int dev, int kind, deft_dtype_t dtype, int64_t n, void *w, const void *g,
                  void *s1, void *s2, void *s3, const void *hyper, deft_dtype_t hyper_dtype);

static int step_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nout, (void)out;
    deft_step_kind_t kind = kind_of(op);
    int k = group_size(kind), states = num_states(kind), groups = groups_of(kind, nin);
    const deft_tensor_t *hyper = &in[groups * k];
    for (int j = 0; j < groups; j++) { /* a launch per parameter */
        const deft_tensor_t *t = in + j * k;
        if (deft_gpu_step(deft_gpu_of(&t[0]), (int)kind, t[0].dtype, deft_shape_size(&t[0].shape),
                          deft_tensor_data(&t[0]), deft_tensor_data(&t[1]),
                          states > 0 ? deft_tensor_data(&t[2]) : NULL,
                          states > 1 ? deft_tensor_data(&t[3]) : NULL,
                          states > 2 ? deft_tensor_data(&t[4]) : NULL, deft_tensor_data(hyper),
                          hyper->dtype))
            return -1;
    }
    return 0;
}
#endif

#define STEP_OP_ON(op_name, text, kind, states, inputs, mutated, gpu)                              \
    {                                                                                              \
        .name = op_name, .description = text, .input_names = inputs, .min_inputs = 3 + (states),   \
        .max_inputs = DEFT_OP_MAX_INPUTS, .infer = step_infer, .forward = step_forward,            \
        .forward_gpu = gpu, .inplace_input = -1, .mutates = mutated, .data = (void *)kind          \
    }
#define STEP_OP(op_name, text, kind, states, inputs, mutated)                                      \
    STEP_OP_ON(op_name, text, kind, states, inputs, mutated, DEFT_GPU(step_forward_gpu))
#define NAMES(...) ((const char *const[]){"weight", "grad", __VA_ARGS__, "hyper", "after", NULL})

static const deft_op_t step_ops[] = {
    STEP_OP("_step_sgd", "A training step's SGD update of weights, in place.", DEFT_STEP_SGD, 0,
            ((const char *const[]){"weight", "grad", "hyper", "after", NULL}), sgd_mutates),
    STEP_OP("_step_sgd_mom",
            "A training step's SGD update with momentum of weights and moms, in place.",
            DEFT_STEP_SGD_MOM, 1, NAMES("mom"), sgd_mom_mutates),
    STEP_OP("_step_nag",
            "A training step's SGD update with Nesterov momentum of weights and moms, in place.",
            DEFT_STEP_NAG, 1, NAMES("mom"), nag_mutates),
    STEP_OP("_step_adam", "A training step's Adam update of weights, means and vars, in place.",
            DEFT_STEP_ADAM, 2, NAMES("mean", "var"), adam_mutates),
    STEP_OP("_step_adamw",
            "A training step's AdamW update (decoupled weight decay) of weights, means and vars, "
            "in place.",
            DEFT_STEP_ADAMW, 2, NAMES("mean", "var"), adamw_mutates),
    STEP_OP("_step_rmsprop",
            "A training step's RMSProp update of weights and mean squares, in place.",
            DEFT_STEP_RMSPROP, 1, NAMES("n"), rmsprop_mutates),
    STEP_OP("_step_rmsprop_centered",
            "A training step's centered RMSProp update (Graves) of weights, mean squares, mean "
            "gradients and deltas, in place.",
            DEFT_STEP_RMSPROP_CENTERED, 3, NAMES("n", "g", "delta"), rmsprop_centered_mutates),
    STEP_OP("_step_adagrad", "A training step's AdaGrad update of weights and histories, in place.",
            DEFT_STEP_ADAGRAD, 1, NAMES("history"), adagrad_mutates),
    STEP_OP("_step_adadelta",
            "A training step's AdaDelta update of weights and accumulated squares of gradients "
            "and deltas, in place.",
            DEFT_STEP_ADADELTA, 2, NAMES("accg", "accdelta"), adadelta_mutates),
    /* no GPU kernel yet: its trust ratio needs a reduction per parameter */
    STEP_OP_ON("_step_lamb",
               "A training step's LAMB update (Adam's direction scaled by a trust ratio per "
               "parameter) of weights, means and vars, in place; CPU only.",
               DEFT_STEP_LAMB, 2, NAMES("mean", "var"), lamb_mutates, NULL),
};

DEFT_OP_FAMILY(deft_family_step_update, step_ops);
