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
    DEFT_STEP_MOMENTUM, /* sgd_mom; beta1 for adam and adamw */
    DEFT_STEP_BETA2,
    DEFT_STEP_EPSILON,
    DEFT_STEP_HYPER_COUNT
};

/* The steps, as the operators' data. */
typedef enum deft_step_kind {
    DEFT_STEP_SGD,
    DEFT_STEP_SGD_MOM,
    DEFT_STEP_ADAM,
    DEFT_STEP_ADAMW
} deft_step_kind_t;

DEFT_DEVICE_FN deft_hyper_t deft_step_hyper(const void *hyper, deft_dtype_t dtype) {
    deft_hyper_t h;
    h.lr = deft_load_double(hyper, dtype, DEFT_STEP_LR);
    h.wd = deft_load_double(hyper, dtype, DEFT_STEP_WD);
    h.rescale = deft_load_double(hyper, dtype, DEFT_STEP_RESCALE);
    h.clip = deft_load_double(hyper, dtype, DEFT_STEP_CLIP);
    h.momentum = h.beta1 = deft_load_double(hyper, dtype, DEFT_STEP_MOMENTUM);
    h.beta2 = deft_load_double(hyper, dtype, DEFT_STEP_BETA2);
    h.epsilon = deft_load_double(hyper, dtype, DEFT_STEP_EPSILON);
    return h;
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

/* Element i of a step: the weight and the states are updated in place. */
#define DEFT_STEP_ELEMENT(T, kind, h, w, g, s1, s2, i)                                             \
    do {                                                                                           \
        if ((kind) == DEFT_STEP_SGD) {                                                             \
            (w)[i] = (T)deft_sgd_step(h, (w)[i], (g)[i]);                                          \
        } else if ((kind) == DEFT_STEP_SGD_MOM) {                                                  \
            double mom_ = (s1)[i], w_ = deft_sgd_mom_step(h, (w)[i], (g)[i], &mom_);               \
            (s1)[i] = (T)mom_, (w)[i] = (T)w_;                                                     \
        } else {                                                                                   \
            double mean_ = (s1)[i], var_ = (s2)[i];                                                \
            double w_ = (kind) == DEFT_STEP_ADAM                                                   \
                            ? deft_adam_step(h, (w)[i], (g)[i], &mean_, &var_)                     \
                            : deft_adamw_step(h, (w)[i], (g)[i], &mean_, &var_);                   \
            (s1)[i] = (T)mean_, (s2)[i] = (T)var_, (w)[i] = (T)w_;                                 \
        }                                                                                          \
    } while (0)

#endif
