/*
 * The optimizers' per-element steps with MXNet's semantics, shared by the
 * CPU and GPU kernels like scalar_math.h. Everything is computed in double.
 */
#ifndef DEFT_CORE_OPTIMIZER_MATH_H
#define DEFT_CORE_OPTIMIZER_MATH_H

#include "core/math/device_fn.h"

typedef struct deft_hyper {
    double lr, wd, rescale, clip, momentum, beta1, beta2, epsilon;
    /* LAMB's: the bias corrections 1 - beta^t (1: none), the trust ratio's
     * bounds on the weight's norm (negative: none) */
    double bias1, bias2, lower, upper;
} deft_hyper_t;

/* The rescaled, clipped gradient plus weight decay, as MXNet computes it. */
DEFT_DEVICE_FN double deft_effective_grad(const deft_hyper_t *h, double w, double g) {
    g *= h->rescale;
    if (h->clip >= 0) g = g > h->clip ? h->clip : g < -h->clip ? -h->clip : g;
    return g + h->wd * w;
}

/* The new weight; the momentum (mom) or moments (mean, var) are updated. */
DEFT_DEVICE_FN double deft_sgd_step(const deft_hyper_t *h, double w, double g) {
    return w - h->lr * deft_effective_grad(h, w, g);
}

DEFT_DEVICE_FN double deft_sgd_mom_step(const deft_hyper_t *h, double w, double g, double *mom) {
    *mom = h->momentum * *mom - h->lr * deft_effective_grad(h, w, g);
    return w + *mom;
}

DEFT_DEVICE_FN double deft_adam_step(const deft_hyper_t *h, double w, double g, double *mean,
                                     double *var) {
    double grad = deft_effective_grad(h, w, g);
    *mean = h->beta1 * *mean + (1 - h->beta1) * grad;
    *var = h->beta2 * *var + (1 - h->beta2) * grad * grad;
    return w - h->lr * *mean / (sqrt(*var) + h->epsilon);
}

#endif
