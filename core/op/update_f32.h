/*
 * The optimizers' float32 steps, in float as MXNet computes them, and
 * vectorised: shared by the update operators (optimizer.c) and the steps of
 * training-step graphs (step_update.c). Float64 runs the double math of
 * core/math/optimizer_math.h and step_math.h instead.
 */
#ifndef DEFT_CORE_OP_UPDATE_F32_H
#define DEFT_CORE_OP_UPDATE_F32_H

#include <stdint.h>

#include "core/math/step_math.h"

/* Update w[0, n) in place from gradient g, with the kind's states s1
 * (momentum, Adam's mean, ...), s2 (Adam's var, ...) and s3 (centered
 * RMSProp's delta) updated in place too. Any kind but LAMB. */
void deft_update_f32(deft_step_kind_t kind, const deft_hyper_t *h, float *w, const float *g,
                     float *s1, float *s2, float *s3, int64_t n);

/* LAMB's first pass over w[0, n): the moments, and the squared norms of the
 * weight and of the direction added to norms[0] and norms[1]. */
void deft_lamb_moments_f32(const deft_hyper_t *h, const float *w, const float *g, float *mean,
                           float *var, int64_t n, double norms[2]);

/* LAMB's second pass: w -= lr * ratio * direction (from the new moments). */
void deft_lamb_apply_f32(const deft_hyper_t *h, double ratio, float *w, const float *mean,
                         const float *var, int64_t n);

#endif
