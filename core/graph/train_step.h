/*
 * Training-step graphs (train_step.c): loss, gradient and optimizer updates
 * as one graph, run by one executor call per step.
 */
#ifndef DEFT_CORE_TRAIN_STEP_H
#define DEFT_CORE_TRAIN_STEP_H

#include "core/graph/symbol.h"

/*
 * The step of `loss` (output 0 is differentiated; the others are passed on)
 * training `params` (arguments of loss, by name) with `optimizer`: "sgd",
 * "sgd_mom", "adam" or "adamw". The step's arguments are loss's, then
 * "step_hyper" (step_math.h's DEFT_STEP_HYPER_COUNT values); its auxiliary
 * states are loss's, then each parameter's optimizer states
 * "<param>_mom", or "<param>_mean" and "<param>_var". Its outputs are loss's,
 * then one empty array. A parameter the loss does not depend on is not updated.
 */
int deft_symbol_train_step(const deft_symbol_t *loss, int num_params, const char *const *params,
                           const char *optimizer, deft_symbol_t **out);

#endif
