/*
 * Optimizer updates as operators, with MXNet's semantics, so every binding
 * trains the same way: sgd_update, sgd_mom_update, adam_update. Optimizer
 * state (momentum, Adam's mean and var) is updated in place; the new weight
 * is the output, which may be the weight array itself.
 */
#include <math.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/op/gpu_ops.h"
#include "core/op/op.h"
#include "core/op/simd.h"
#include "core/math/optimizer_math.h"

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

/* Same numbers as deft_gpu_update_t's kind. */
typedef enum update_kind { SGD, SGD_MOM, ADAM } update_kind_t;

typedef struct update_ctx {
    update_kind_t kind;
    const deft_param_value_t *p;
    deft_dtype_t dtype;
    void *out;
    void *in[4]; /* weight, grad, and state */
    bool avx512;
} update_ctx_t;

/* The hyper-parameters as locals: read through `p`, the compiler would reload
 * them after every store (out may alias anything), and no loop would vectorise. */
static deft_hyper_t read_hyper(const deft_param_value_t *p, update_kind_t kind) {
    deft_hyper_t h = {p[P_LR].f, p[P_WD].f, p[P_RESCALE].f, p[P_CLIP].f, 0, 0, 0, 0};
    if (kind == SGD_MOM) h.momentum = p[P_MOMENTUM].f;
    if (kind == ADAM) h.beta1 = p[P_BETA1].f, h.beta2 = p[P_BETA2].f, h.epsilon = p[P_EPSILON].f;
    return h;
}

/* float64: one loop per kind (no branch inside), each element read before it
 * is written, in double as the GPU computes it. */
static void update_f64(const update_ctx_t *c, int64_t begin, int64_t end) {
    const deft_hyper_t h = read_hyper(c->p, c->kind);
    double *out = c->out, *w = c->in[0], *g = c->in[1], *s1 = c->in[2], *s2 = c->in[3];
    switch (c->kind) {
    case SGD:
        for (int64_t i = begin; i < end; i++) out[i] = deft_sgd_step(&h, w[i], g[i]);
        break;
    case SGD_MOM:
        for (int64_t i = begin; i < end; i++) out[i] = deft_sgd_mom_step(&h, w[i], g[i], &s1[i]);
        break;
    case ADAM:
        for (int64_t i = begin; i < end; i++)
            out[i] = deft_adam_step(&h, w[i], g[i], &s1[i], &s2[i]);
        break;
    }
}

/*
 * float32 in float, as MXNet computes it: a double per element (converted in
 * and out) kept the loops scalar, 5x slower. The loops update the weight in
 * place (out, after a copy when it is another array), so that the compiler,
 * which checks at run time that the arrays do not overlap, vectorises them.
 * Compiled twice: for AVX-512 and for the baseline, chosen at run time.
 */
typedef struct hyper_f32 {
    float lr, wd, rescale, clip, momentum, beta1, beta2, epsilon;
    float one_minus_beta1, one_minus_beta2; /* from double: 1 - 0.999f keeps 4 digits only */
} hyper_f32_t;

/* The rescaled, clipped gradient plus weight decay (deft_effective_grad). */
#define EFFECTIVE_GRAD(h, w, g)                                                                    \
    ((h)->clip >= 0 ? clip_f32((g) * (h)->rescale, (h)->clip) + (h)->wd * (w)                      \
                    : (g) * (h)->rescale + (h)->wd * (w))

static inline float clip_f32(float g, float c) {
    return g > c ? c : g < -c ? -c : g;
}

/* Adam's loop is cut in blocks: the square roots get a loop of their own,
 * because sqrtf sets errno and so never vectorises; sqrt_* use the SIMD
 * instruction. */
enum { ADAM_BLOCK = 256 };

#if DEFT_SIMD_X86
#include <immintrin.h>
__attribute__((target("avx512f"))) static void sqrt_avx512(float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_sqrt_ps(_mm512_loadu_ps(x + i)));
    for (; i < n; i++) _mm_store_ss(x + i, _mm_sqrt_ss(_mm_load_ss(x + i)));
}
static void sqrt_sse(float *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
    for (; i < n; i++) _mm_store_ss(x + i, _mm_sqrt_ss(_mm_load_ss(x + i)));
}
#else
static void sqrt_plain(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = sqrtf(x[i]);
}
#endif

#define UPDATE_F32(S, TARGET, SQRT)                                                                \
    TARGET static void sgd_f32_##S(hyper_f32_t hyper, float *w, const float *g, int64_t n) {       \
        const hyper_f32_t *h = &hyper; /* a local: no store in the loop can change it */           \
        for (int64_t i = 0; i < n; i++) w[i] = w[i] - h->lr * EFFECTIVE_GRAD(h, w[i], g[i]);       \
    }                                                                                              \
    TARGET static void sgd_mom_f32_##S(hyper_f32_t hyper, float *w, const float *g, float *mom,    \
                                       int64_t n) {                                                \
        const hyper_f32_t *h = &hyper;                                                             \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float m = h->momentum * mom[i] - h->lr * EFFECTIVE_GRAD(h, w[i], g[i]);                \
            mom[i] = m;                                                                            \
            w[i] = w[i] + m;                                                                       \
        }                                                                                          \
    }                                                                                              \
    TARGET static void adam_f32_##S(hyper_f32_t hyper, float *w, const float *g, float *mean,      \
                                    float *var, int64_t n) {                                       \
        const hyper_f32_t *h = &hyper;                                                             \
        float root[ADAM_BLOCK];                                                                    \
        for (int64_t at = 0; at < n; at += ADAM_BLOCK) {                                           \
            int b = n - at < ADAM_BLOCK ? (int)(n - at) : ADAM_BLOCK;                              \
            float *wb = w + at, *mb = mean + at, *vb = var + at;                                   \
            const float *gb = g + at;                                                              \
            for (int i = 0; i < b; i++) {                                                          \
                float grad = EFFECTIVE_GRAD(h, wb[i], gb[i]);                                      \
                mb[i] = h->beta1 * mb[i] + h->one_minus_beta1 * grad;                              \
                root[i] = vb[i] = h->beta2 * vb[i] + h->one_minus_beta2 * grad * grad;             \
            }                                                                                      \
            SQRT(root, b);                                                                         \
            for (int i = 0; i < b; i++) wb[i] = wb[i] - h->lr * mb[i] / (root[i] + h->epsilon);    \
        }                                                                                          \
    }

#if DEFT_SIMD_X86
UPDATE_F32(avx512, __attribute__((target("avx512f"))), sqrt_avx512)
UPDATE_F32(base, , sqrt_sse)
#else
UPDATE_F32(base, , sqrt_plain)
#endif

static void update_f32(const update_ctx_t *c, int64_t begin, int64_t end) {
    const deft_hyper_t d = read_hyper(c->p, c->kind);
    const hyper_f32_t h = {(float)d.lr,         (float)d.wd,       (float)d.rescale,
                           (float)d.clip,       (float)d.momentum, (float)d.beta1,
                           (float)d.beta2,      (float)d.epsilon,  (float)(1 - d.beta1),
                           (float)(1 - d.beta2)};
    float *w = (float *)c->out + begin, *s1 = c->in[2], *s2 = c->in[3];
    const float *g = (const float *)c->in[1] + begin;
    int64_t n = end - begin;
    if (c->out != c->in[0]) memcpy(w, (const float *)c->in[0] + begin, (size_t)n * sizeof *w);
#if DEFT_SIMD_X86
    if (c->avx512) {
        if (c->kind == SGD) sgd_f32_avx512(h, w, g, n);
        if (c->kind == SGD_MOM) sgd_mom_f32_avx512(h, w, g, s1 + begin, n);
        if (c->kind == ADAM) adam_f32_avx512(h, w, g, s1 + begin, s2 + begin, n);
        return;
    }
#endif
    if (c->kind == SGD) sgd_f32_base(h, w, g, n);
    if (c->kind == SGD_MOM) sgd_mom_f32_base(h, w, g, s1 + begin, n);
    if (c->kind == ADAM) adam_f32_base(h, w, g, s1 + begin, s2 + begin, n);
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
    update_ctx_t c = {.kind = (update_kind_t)(intptr_t)op->data,
                      .p = p,
                      .dtype = in[0].dtype,
                      .out = deft_tensor_data(&out[0])};
    c.avx512 = deft_simd_avx512();
    for (int i = 0; i < nin; i++) c.in[i] = deft_tensor_data(&in[i]);
    deft_parallel_for(deft_shape_size(&in[0].shape), 16384, update_range, &c);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int update_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    update_kind_t kind = (update_kind_t)(intptr_t)op->data;
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
     .data = (void *)SGD},
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
     .data = (void *)SGD_MOM},
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
     .data = (void *)ADAM},
};

DEFT_OP_FAMILY(deft_family_optimizer, optimizer_ops);
