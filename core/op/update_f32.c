/*
 * float32 optimizer steps in float, as MXNet computes them: a double per
 * element (converted in and out) kept the loops scalar, 5x slower. The loops
 * update the weight in place, so that the compiler, which checks at run time
 * that the arrays do not overlap, vectorises them. Compiled twice: for
 * AVX-512 and for the baseline, chosen at run time.
 */
#include "core/op/update_f32.h"

#include <math.h>

#include "core/op/simd.h"

typedef struct hyper_f32 {
    float lr, wd, rescale, clip, momentum, beta1, beta2, epsilon;
    float one_minus_beta1, one_minus_beta2; /* from double: 1 - 0.999f keeps 4 digits only */
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

#if DEFT_SIMD_X86
UPDATE_F32(avx512, __attribute__((target("avx512f"))), sqrt_avx512)
UPDATE_F32(base, , sqrt_sse)
#else
UPDATE_F32(base, , sqrt_plain)
#endif

void deft_update_f32(deft_step_kind_t kind, const deft_hyper_t *d, float *w, const float *g,
                     float *s1, float *s2, int64_t n) {
    const hyper_f32_t h = {(float)d->lr,         (float)d->wd,       (float)d->rescale,
                           (float)d->clip,       (float)d->momentum, (float)d->beta1,
                           (float)d->beta2,      (float)d->epsilon,  (float)(1 - d->beta1),
                           (float)(1 - d->beta2)};
    float adam_wd = kind == DEFT_STEP_ADAM ? h.wd : 0,
          adamw_wd = kind == DEFT_STEP_ADAMW ? h.wd : 0;
#if DEFT_SIMD_X86
    if (deft_simd_avx512()) {
        if (kind == DEFT_STEP_SGD) sgd_f32_avx512(h, w, g, n);
        if (kind == DEFT_STEP_SGD_MOM) sgd_mom_f32_avx512(h, w, g, s1, n);
        if (kind >= DEFT_STEP_ADAM) adam_f32_avx512(h, adam_wd, adamw_wd, w, g, s1, s2, n);
        return;
    }
#endif
    if (kind == DEFT_STEP_SGD) sgd_f32_base(h, w, g, n);
    if (kind == DEFT_STEP_SGD_MOM) sgd_mom_f32_base(h, w, g, s1, n);
    if (kind >= DEFT_STEP_ADAM) adam_f32_base(h, adam_wd, adamw_wd, w, g, s1, s2, n);
}
