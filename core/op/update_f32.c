/*
 * float32 optimizer steps in float, as MXNet computes them: a double per
 * element (converted in and out) kept the loops scalar, 5x slower. The loops
 * update the weight in place, so that the compiler, which checks at run time
 * that the arrays do not overlap, vectorises them. Compiled three times:
 * for AVX-512, AVX2 and the baseline, chosen at run time.
 */
#include "core/op/update_f32.h"

#include <math.h>

#include "core/op/simd.h"

typedef struct hyper_f32 {
    float lr, wd, rescale, clip, momentum, beta1, beta2, epsilon;
    float one_minus_beta1, one_minus_beta2; /* from double: 1 - 0.999f keeps 4 digits only */
    float bias1, bias2;                     /* LAMB's bias corrections */
} hyper_f32_t;

/* The rescaled, clipped gradient plus weight decay wd (deft_effective_grad). */
#define EFFECTIVE_GRAD(h, wd, w, g)                                                                \
    ((h)->clip >= 0 ? clip_f32((g) * (h)->rescale, (h)->clip) + (wd) * (w)                         \
                    : (g) * (h)->rescale + (wd) * (w))

static inline float clip_f32(float g, float c) {
    return g > c ? c : g < -c ? -c : g;
}

/* Adam's loops are cut in blocks: the square roots get a loop of their own,
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
__attribute__((target("avx2"))) static void sqrt_avx2(float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
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

/* Adam and AdamW differ in where the weight decay goes: Adam adds it to the
 * gradient (wd_grad), AdamW (Loshchilov & Hutter) to the step (wd_step). */
#define UPDATE_F32(S, TARGET, SQRT)                                                                \
    TARGET static void sgd_f32_##S(hyper_f32_t hyper, float *w, const float *g, int64_t n) {       \
        const hyper_f32_t *h = &hyper; /* a local: no store in the loop can change it */           \
        for (int64_t i = 0; i < n; i++)                                                            \
            w[i] = w[i] - h->lr * EFFECTIVE_GRAD(h, h->wd, w[i], g[i]);                            \
    }                                                                                              \
    TARGET static void sgd_mom_f32_##S(hyper_f32_t hyper, float *w, const float *g, float *mom,    \
                                       int64_t n) {                                                \
        const hyper_f32_t *h = &hyper;                                                             \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float m = h->momentum * mom[i] - h->lr * EFFECTIVE_GRAD(h, h->wd, w[i], g[i]);         \
            mom[i] = m;                                                                            \
            w[i] = w[i] + m;                                                                       \
        }                                                                                          \
    }                                                                                              \
    TARGET static void adam_f32_##S(hyper_f32_t hyper, float wd_grad, float wd_step, float *w,     \
                                    const float *g, float *mean, float *var, int64_t n) {          \
        const hyper_f32_t *h = &hyper;                                                             \
        float root[ADAM_BLOCK];                                                                    \
        for (int64_t at = 0; at < n; at += ADAM_BLOCK) {                                           \
            int b = n - at < ADAM_BLOCK ? (int)(n - at) : ADAM_BLOCK;                              \
            float *wb = w + at, *mb = mean + at, *vb = var + at;                                   \
            const float *gb = g + at;                                                              \
            for (int i = 0; i < b; i++) {                                                          \
                float grad = EFFECTIVE_GRAD(h, wd_grad, wb[i], gb[i]);                             \
                mb[i] = h->beta1 * mb[i] + h->one_minus_beta1 * grad;                              \
                root[i] = vb[i] = h->beta2 * vb[i] + h->one_minus_beta2 * grad * grad;             \
            }                                                                                      \
            SQRT(root, b);                                                                         \
            for (int i = 0; i < b; i++)                                                            \
                wb[i] = wb[i] - h->lr * (mb[i] / (root[i] + h->epsilon) + wd_step * wb[i]);        \
        }                                                                                          \
    }

/* The kinds with a square root, cut in blocks as Adam: `grad` keeps a block's
 * gradients for the loop after the roots. RMSProp, AdaGrad and AdaDelta;
 * LAMB's two passes (lamb_moments_*: the moments, and the squared norms of
 * the weight and the direction; lamb_apply_*: the step along the direction
 * scaled by the trust ratio), which compute the direction alike. */
#define FOR_BLOCKS(n)                                                                              \
    for (int64_t at = 0, b = 0; at < (n) && (b = (n)-at < ADAM_BLOCK ? (n)-at : ADAM_BLOCK, 1);    \
         at += ADAM_BLOCK)
#define LAMB_DIRECTION(h, i) (mb[i] / (h)->bias1 / (root[i] + (h)->epsilon) + (h)->wd * wb[i])

#define UPDATE_F32_ROOTS(S, TARGET, SQRT)                                                          \
    TARGET static void nag_f32_##S(hyper_f32_t hyper, float *w, const float *g, float *mom,        \
                                   int64_t n) {                                                    \
        const hyper_f32_t *h = &hyper;                                                             \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float grad = EFFECTIVE_GRAD(h, h->wd, w[i], g[i]);                                     \
            float m = h->momentum * mom[i] + grad;                                                 \
            mom[i] = m;                                                                            \
            w[i] = w[i] - h->lr * (grad + h->momentum * m);                                        \
        }                                                                                          \
    }                                                                                              \
    TARGET static void rmsprop_f32_##S(hyper_f32_t hyper, float *w, const float *g, float *sq,     \
                                       float *mg, float *delta, int64_t n) {                       \
        const hyper_f32_t *h = &hyper;                                                             \
        float root[ADAM_BLOCK], grad[ADAM_BLOCK];                                                  \
        FOR_BLOCKS(n) {                                                                            \
            float *wb = w + at, *nb = sq + at;                                                     \
            for (int i = 0; i < b; i++) {                                                          \
                grad[i] = EFFECTIVE_GRAD(h, h->wd, wb[i], g[at + i]);                              \
                root[i] = nb[i] = h->beta1 * nb[i] + h->one_minus_beta1 * grad[i] * grad[i];       \
            }                                                                                      \
            if (mg) { /* centered */                                                               \
                float *mb = mg + at, *db = delta + at;                                             \
                for (int i = 0; i < b; i++) {                                                      \
                    mb[i] = h->beta1 * mb[i] + h->one_minus_beta1 * grad[i];                       \
                    root[i] = root[i] - mb[i] * mb[i] + h->epsilon;                                \
                }                                                                                  \
                SQRT(root, b);                                                                     \
                for (int i = 0; i < b; i++) {                                                      \
                    db[i] = h->beta2 * db[i] - h->lr * grad[i] / root[i];                          \
                    wb[i] = wb[i] + db[i];                                                         \
                }                                                                                  \
            } else {                                                                               \
                for (int i = 0; i < b; i++) root[i] = root[i] + h->epsilon;                        \
                SQRT(root, b);                                                                     \
                for (int i = 0; i < b; i++) wb[i] = wb[i] - h->lr * grad[i] / root[i];             \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    TARGET static void adagrad_f32_##S(hyper_f32_t hyper, float *w, const float *g, float *hist,   \
                                       int64_t n) {                                                \
        const hyper_f32_t *h = &hyper;                                                             \
        float root[ADAM_BLOCK], grad[ADAM_BLOCK];                                                  \
        FOR_BLOCKS(n) {                                                                            \
            float *wb = w + at, *hb = hist + at;                                                   \
            for (int i = 0; i < b; i++) {                                                          \
                grad[i] = EFFECTIVE_GRAD(h, 0.0f, 0.0f, g[at + i]);                                \
                hb[i] = hb[i] + grad[i] * grad[i];                                                 \
                root[i] = hb[i] + h->epsilon;                                                      \
            }                                                                                      \
            SQRT(root, b);                                                                         \
            for (int i = 0; i < b; i++)                                                            \
                wb[i] = wb[i] - h->lr * (grad[i] / root[i] + h->wd * wb[i]);                       \
        }                                                                                          \
    }                                                                                              \
    TARGET static void adadelta_f32_##S(hyper_f32_t hyper, float *w, const float *g, float *acc_g, \
                                        float *acc_d, int64_t n) {                                 \
        const hyper_f32_t *h = &hyper;                                                             \
        float root_d[ADAM_BLOCK], root_g[ADAM_BLOCK], grad[ADAM_BLOCK];                            \
        FOR_BLOCKS(n) {                                                                            \
            float *wb = w + at, *ab = acc_g + at, *db = acc_d + at;                                \
            for (int i = 0; i < b; i++) {                                                          \
                grad[i] = EFFECTIVE_GRAD(h, 0.0f, 0.0f, g[at + i]);                                \
                ab[i] = h->beta1 * ab[i] + h->one_minus_beta1 * grad[i] * grad[i];                 \
                root_g[i] = ab[i] + h->epsilon;                                                    \
                root_d[i] = db[i] + h->epsilon;                                                    \
            }                                                                                      \
            SQRT(root_g, b);                                                                       \
            SQRT(root_d, b);                                                                       \
            for (int i = 0; i < b; i++) {                                                          \
                float d = root_d[i] / root_g[i] * grad[i];                                         \
                db[i] = h->beta1 * db[i] + h->one_minus_beta1 * d * d;                             \
                wb[i] = wb[i] - h->lr * (d + h->wd * wb[i]);                                       \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    TARGET static void lamb_moments_f32_##S(hyper_f32_t hyper, const float *w, const float *g,     \
                                            float *mean, float *var, int64_t n, double *norms) {   \
        const hyper_f32_t *h = &hyper;                                                             \
        float root[ADAM_BLOCK];                                                                    \
        FOR_BLOCKS(n) {                                                                            \
            const float *wb = w + at;                                                              \
            float *mb = mean + at, *vb = var + at, w_sq = 0, u_sq = 0;                             \
            for (int i = 0; i < b; i++) {                                                          \
                float grad = EFFECTIVE_GRAD(h, 0.0f, 0.0f, g[at + i]);                             \
                mb[i] = h->beta1 * mb[i] + h->one_minus_beta1 * grad;                              \
                vb[i] = h->beta2 * vb[i] + h->one_minus_beta2 * grad * grad;                       \
                root[i] = vb[i] / h->bias2;                                                        \
            }                                                                                      \
            SQRT(root, b);                                                                         \
            for (int i = 0; i < b; i++) {                                                          \
                float u = LAMB_DIRECTION(h, i);                                                    \
                w_sq += wb[i] * wb[i];                                                             \
                u_sq += u * u;                                                                     \
            }                                                                                      \
            norms[0] += w_sq, norms[1] += u_sq;                                                    \
        }                                                                                          \
    }                                                                                              \
    TARGET static void lamb_apply_f32_##S(hyper_f32_t hyper, float ratio, float *w,                \
                                          const float *mean, const float *var, int64_t n) {        \
        const hyper_f32_t *h = &hyper;                                                             \
        float root[ADAM_BLOCK];                                                                    \
        FOR_BLOCKS(n) {                                                                            \
            float *wb = w + at;                                                                    \
            const float *mb = mean + at, *vb = var + at;                                           \
            for (int i = 0; i < b; i++) root[i] = vb[i] / h->bias2;                                \
            SQRT(root, b);                                                                         \
            for (int i = 0; i < b; i++) wb[i] = wb[i] - h->lr * ratio * LAMB_DIRECTION(h, i);      \
        }                                                                                          \
    }

#if DEFT_SIMD_X86
UPDATE_F32(avx512, __attribute__((target("avx512f"))), sqrt_avx512)
UPDATE_F32(avx2, __attribute__((target("avx2"))), sqrt_avx2)
UPDATE_F32(base, , sqrt_sse)
UPDATE_F32_ROOTS(avx512, __attribute__((target("avx512f"))), sqrt_avx512)
UPDATE_F32_ROOTS(avx2, __attribute__((target("avx2"))), sqrt_avx2)
UPDATE_F32_ROOTS(base, , sqrt_sse)
#define PICK(name)                                                                                 \
    (deft_simd_avx512() ? name##_avx512 : deft_simd_avx2() ? name##_avx2 : name##_base)
#else
UPDATE_F32(base, , sqrt_plain)
UPDATE_F32_ROOTS(base, , sqrt_plain)
#define PICK(name) name##_base
#endif

static hyper_f32_t hyper_f32(const deft_hyper_t *d) {
    return (hyper_f32_t){(float)d->lr,          (float)d->wd,       (float)d->rescale,
                         (float)d->clip,        (float)d->momentum, (float)d->beta1,
                         (float)d->beta2,       (float)d->epsilon,  (float)(1 - d->beta1),
                         (float)(1 - d->beta2), (float)d->bias1,    (float)d->bias2};
}

void deft_lamb_moments_f32(const deft_hyper_t *h, const float *w, const float *g, float *mean,
                           float *var, int64_t n, double norms[2]) {
    PICK(lamb_moments_f32)(hyper_f32(h), w, g, mean, var, n, norms);
}

void deft_lamb_apply_f32(const deft_hyper_t *h, double ratio, float *w, const float *mean,
                         const float *var, int64_t n) {
    PICK(lamb_apply_f32)(hyper_f32(h), (float)ratio, w, mean, var, n);
}

void deft_update_f32(deft_step_kind_t kind, const deft_hyper_t *d, float *w, const float *g,
                     float *s1, float *s2, float *s3, int64_t n) {
    const hyper_f32_t h = hyper_f32(d);
    float adam_wd = kind == DEFT_STEP_ADAM ? h.wd : 0,
          adamw_wd = kind == DEFT_STEP_ADAMW ? h.wd : 0;
    switch (kind) {
    case DEFT_STEP_SGD:
        PICK(sgd_f32)(h, w, g, n);
        break;
    case DEFT_STEP_SGD_MOM:
        PICK(sgd_mom_f32)(h, w, g, s1, n);
        break;
    case DEFT_STEP_ADAM:
    case DEFT_STEP_ADAMW:
        PICK(adam_f32)(h, adam_wd, adamw_wd, w, g, s1, s2, n);
        break;
    case DEFT_STEP_NAG:
        PICK(nag_f32)(h, w, g, s1, n);
        break;
    case DEFT_STEP_RMSPROP:
        PICK(rmsprop_f32)(h, w, g, s1, NULL, NULL, n);
        break;
    case DEFT_STEP_RMSPROP_CENTERED:
        PICK(rmsprop_f32)(h, w, g, s1, s2, s3, n);
        break;
    case DEFT_STEP_ADAGRAD:
        PICK(adagrad_f32)(h, w, g, s1, n);
        break;
    case DEFT_STEP_ADADELTA:
        PICK(adadelta_f32)(h, w, g, s1, s2, n);
        break;
    case DEFT_STEP_LAMB:
        break; /* two passes: deft_lamb_moments_f32, deft_lamb_apply_f32 */
    }
}
