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
 * (momentum, or Adam's mean) and s2 (Adam's var) updated in place too. */
void deft_update_f32(deft_step_kind_t kind, const deft_hyper_t *h, float *w, const float *g,
                     float *s1, float *s2, int64_t n);

#endif
