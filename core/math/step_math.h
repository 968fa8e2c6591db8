/*
 * The optimizer steps of a training-step graph (core/op/step_update.c), on
 * the CPU and the GPU alike. Their hyper-parameters are a tensor read when
 * the step runs, so a learning-rate schedule changes numbers, not the graph.
 */
#ifndef DEFT_CORE_STEP_MATH_H
#define DEFT_CORE_STEP_MATH_H

#include "core/math/dtype_math.h"
#include "core/math/optimizer_math.h"

/* The hyper tensor's elements, in this order. */
enum {
    DEFT_STEP_LR,
    DEFT_STEP_WD,
    DEFT_STEP_RESCALE,
    DEFT_STEP_CLIP,
    DEFT_STEP_MOMENTUM, /* sgd_mom, nag; beta1 (adam, adamw, lamb); rho (rmsprop, adadelta) */
    DEFT_STEP_BETA2,    /* adam, adamw, lamb; rmsprop_centered: its momentum (gamma2) */
    DEFT_STEP_EPSILON,
    DEFT_STEP_HYPER_COUNT, /* the elements every kind reads; lamb reads four more: */
    DEFT_STEP_BIAS1 = DEFT_STEP_HYPER_COUNT, /* 1 - beta1^t, or 1: no bias correction */
    DEFT_STEP_BIAS2,                         /* 1 - beta2^t, or 1 */
    DEFT_STEP_LOWER, /* the trust ratio's bounds on the weight's norm; negative: none */
    DEFT_STEP_UPPER,
    DEFT_STEP_LAMB_HYPER_COUNT
};

/* The steps, as the operators' data. */
typedef enum deft_step_kind {
    DEFT_STEP_SGD,
    DEFT_STEP_SGD_MOM,
    DEFT_STEP_ADAM,
    DEFT_STEP_ADAMW,
    DEFT_STEP_NAG,              /* SGD with Nesterov momentum */
    DEFT_STEP_RMSPROP,          /* Tieleman & Hinton */
    DEFT_STEP_RMSPROP_CENTERED, /* Graves (MXNet's rmspropalex) */
    DEFT_STEP_ADAGRAD,
    DEFT_STEP_ADADELTA,
    DEFT_STEP_LAMB /* two passes over a parameter: its trust ratio needs norms */
} deft_step_kind_t;

/* The optimizer states per parameter of a kind. */
DEFT_DEVICE_FN int deft_step_num_states(deft_step_kind_t kind) {
    switch (kind) {
    case DEFT_STEP_SGD:
        return 0;
    case DEFT_STEP_SGD_MOM:
    case DEFT_STEP_NAG:
    case DEFT_STEP_RMSPROP:
    case DEFT_STEP_ADAGRAD:
        return 1;
    case DEFT_STEP_RMSPROP_CENTERED:
        return 3;
    default:
        return 2;
    }
}

DEFT_DEVICE_FN deft_hyper_t deft_step_hyper(const void *hyper, deft_dtype_t dtype) {
    deft_hyper_t h;
    h.lr = deft_load_double(hyper, dtype, DEFT_STEP_LR);
    h.wd = deft_load_double(hyper, dtype, DEFT_STEP_WD);
    h.rescale = deft_load_double(hyper, dtype, DEFT_STEP_RESCALE);
    h.clip = deft_load_double(hyper, dtype, DEFT_STEP_CLIP);
    h.momentum = h.beta1 = deft_load_double(hyper, dtype, DEFT_STEP_MOMENTUM);
    h.beta2 = deft_load_double(hyper, dtype, DEFT_STEP_BETA2);
    h.epsilon = deft_load_double(hyper, dtype, DEFT_STEP_EPSILON);
    h.bias1 = h.bias2 = 1, h.lower = h.upper = -1;
    return h;
}

/* LAMB's extra hyper-parameters (its hyper tensor has DEFT_STEP_LAMB_HYPER_COUNT). */
DEFT_DEVICE_FN void deft_step_hyper_lamb(deft_hyper_t *h, const void *hyper, deft_dtype_t dtype) {
    h->bias1 = deft_load_double(hyper, dtype, DEFT_STEP_BIAS1);
    h->bias2 = deft_load_double(hyper, dtype, DEFT_STEP_BIAS2);
    h->lower = deft_load_double(hyper, dtype, DEFT_STEP_LOWER);
    h->upper = deft_load_double(hyper, dtype, DEFT_STEP_UPPER);
}

/* The rescaled, clipped gradient without weight decay: the kinds that apply
 * the decay to the step, not to the gradient their states accumulate. */
DEFT_DEVICE_FN double deft_plain_grad(const deft_hyper_t *h, double g) {
    g *= h->rescale;
    return h->clip >= 0 ? (g > h->clip ? h->clip : g < -h->clip ? -h->clip : g) : g;
}

/* Nesterov momentum, as MXNet's nag_mom_update and PyTorch's nesterov=True:
 * mom = momentum * mom + g; w -= lr * (g + momentum * mom). */
DEFT_DEVICE_FN double deft_nag_step(const deft_hyper_t *h, double w, double g, double *mom) {
    double grad = deft_effective_grad(h, w, g);
    *mom = h->momentum * *mom + grad;
    return w - h->lr * (grad + h->momentum * *mom);
}

/* RMSProp as MXNet's rmsprop_update: n = rho n + (1 - rho) g^2;
 * w -= lr g / sqrt(n + epsilon). */
DEFT_DEVICE_FN double deft_rmsprop_step(const deft_hyper_t *h, double w, double g, double *n) {
    double grad = deft_effective_grad(h, w, g);
    *n = h->beta1 * *n + (1 - h->beta1) * grad * grad;
    return w - h->lr * grad / sqrt(*n + h->epsilon);
}

/* Centered RMSProp (Graves 2013) as MXNet's rmspropalex_update: the mean
 * gradient mg too; delta = gamma2 delta - lr g / sqrt(n - mg^2 + epsilon). */
DEFT_DEVICE_FN double deft_rmsprop_centered_step(const deft_hyper_t *h, double w, double g,
                                                 double *n, double *mg, double *delta) {
    double grad = deft_effective_grad(h, w, g);
    *n = h->beta1 * *n + (1 - h->beta1) * grad * grad;
    *mg = h->beta1 * *mg + (1 - h->beta1) * grad;
    *delta = h->beta2 * *delta - h->lr * grad / sqrt(*n - *mg * *mg + h->epsilon);
    return w + *delta;
}

/* AdaGrad as MXNet's: history += g^2; w -= lr (g / sqrt(history + epsilon) + wd w). */
DEFT_DEVICE_FN double deft_adagrad_step(const deft_hyper_t *h, double w, double g,
                                        double *history) {
    double grad = deft_plain_grad(h, g);
    *history += grad * grad;
    return w - h->lr * (grad / sqrt(*history + h->epsilon) + h->wd * w);
}

/* AdaDelta (Zeiler) as MXNet 1.x's, times lr (MXNet 1.x's is lr = 1):
 * acc_g = rho acc_g + (1 - rho) g^2; d = sqrt(acc_d + eps) / sqrt(acc_g + eps) g;
 * acc_d = rho acc_d + (1 - rho) d^2; w -= lr (d + wd w). */
DEFT_DEVICE_FN double deft_adadelta_step(const deft_hyper_t *h, double w, double g, double *acc_g,
                                         double *acc_d) {
    double grad = deft_plain_grad(h, g);
    *acc_g = h->beta1 * *acc_g + (1 - h->beta1) * grad * grad;
    double d = sqrt(*acc_d + h->epsilon) / sqrt(*acc_g + h->epsilon) * grad;
    *acc_d = h->beta1 * *acc_d + (1 - h->beta1) * d * d;
    return w - h->lr * (d + h->wd * w);
}

/* LAMB (You et al.), MXNet's lamb_update_phase1: the moments are updated ... */
DEFT_DEVICE_FN void deft_lamb_moments(const deft_hyper_t *h, double g, double *mean, double *var) {
    double grad = deft_plain_grad(h, g);
    *mean = h->beta1 * *mean + (1 - h->beta1) * grad;
    *var = h->beta2 * *var + (1 - h->beta2) * grad * grad;
}

/* ... and give the direction u = mean^ / (sqrt(var^) + epsilon) + wd w; phase 2
 * takes w -= lr * ratio * u, ratio = |w| / |u| over the whole parameter. */
DEFT_DEVICE_FN double deft_lamb_direction(const deft_hyper_t *h, double w, double mean,
                                          double var) {
    return mean / h->bias1 / (sqrt(var / h->bias2) + h->epsilon) + h->wd * w;
}

/* The trust ratio from the squared norms of a parameter's weight and direction. */
DEFT_DEVICE_FN double deft_lamb_ratio(const deft_hyper_t *h, double w_sq, double u_sq) {
    double r1 = sqrt(w_sq), r2 = sqrt(u_sq);
    if (h->lower >= 0 && r1 < h->lower) r1 = h->lower;
    if (h->upper >= 0 && r1 > h->upper) r1 = h->upper;
    return r1 != 0 && r2 != 0 ? r1 / r2 : 1;
}

/* AdamW (Loshchilov & Hutter): Adam on the rescaled, clipped gradient, with
 * the weight decay applied to the weight, not added to the gradient. */
DEFT_DEVICE_FN double deft_adamw_step(const deft_hyper_t *h, double w, double g, double *mean,
                                      double *var) {
    deft_hyper_t no_decay = *h;
    no_decay.wd = 0;
    double grad = deft_effective_grad(&no_decay, w, g);
    *mean = h->beta1 * *mean + (1 - h->beta1) * grad;
    *var = h->beta2 * *var + (1 - h->beta2) * grad * grad;
    return w - h->lr * (*mean / (sqrt(*var) + h->epsilon) + h->wd * w);
}

/* Element i of a step of any kind but LAMB: the weight and the states (s1,
 * s2, s3 as the kind has them) are updated in place. */
#define DEFT_STEP_ELEMENT(T, kind, h, w, g, s1, s2, s3, i)                                         \
    do {                                                                                           \
        double a_ = (s1) ? (double)(s1)[i] : 0, b_ = (s2) ? (double)(s2)[i] : 0;                   \
        double c_ = (s3) ? (double)(s3)[i] : 0, w_ = (w)[i], g_ = (g)[i];                          \
        switch (kind) {                                                                            \
        case DEFT_STEP_SGD:                                                                        \
            w_ = deft_sgd_step(h, w_, g_);                                                         \
            break;                                                                                 \
        case DEFT_STEP_SGD_MOM:                                                                    \
            w_ = deft_sgd_mom_step(h, w_, g_, &a_);                                                \
            break;                                                                                 \
        case DEFT_STEP_ADAM:                                                                       \
            w_ = deft_adam_step(h, w_, g_, &a_, &b_);                                              \
            break;                                                                                 \
        case DEFT_STEP_ADAMW:                                                                      \
            w_ = deft_adamw_step(h, w_, g_, &a_, &b_);                                             \
            break;                                                                                 \
        case DEFT_STEP_NAG:                                                                        \
            w_ = deft_nag_step(h, w_, g_, &a_);                                                    \
            break;                                                                                 \
        case DEFT_STEP_RMSPROP:                                                                    \
            w_ = deft_rmsprop_step(h, w_, g_, &a_);                                                \
            break;                                                                                 \
        case DEFT_STEP_RMSPROP_CENTERED:                                                           \
            w_ = deft_rmsprop_centered_step(h, w_, g_, &a_, &b_, &c_);                             \
            break;                                                                                 \
        case DEFT_STEP_ADAGRAD:                                                                    \
            w_ = deft_adagrad_step(h, w_, g_, &a_);                                                \
            break;                                                                                 \
        case DEFT_STEP_ADADELTA:                                                                   \
            w_ = deft_adadelta_step(h, w_, g_, &a_, &b_);                                          \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
        if (s1) (s1)[i] = (T)a_;                                                                   \
        if (s2) (s2)[i] = (T)b_;                                                                   \
        if (s3) (s3)[i] = (T)c_;                                                                   \
        (w)[i] = (T)w_;                                                                            \
    } while (0)

#endif
