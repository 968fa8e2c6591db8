/* Shorthands for operators' gradient functions (see deft_grad_builder_t in op.h). */
#ifndef DEFT_CORE_GRAD_H
#define DEFT_CORE_GRAD_H

#include <stdio.h>

#include "core/op/op.h"

#define GRAD_PARAMS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define GRAD_NONE        ((const char *const[]){NULL})

static inline deft_gref_t g_op1(deft_grad_builder_t *b, const char *op, deft_gref_t x,
                                const char *const *params) {
    return b->apply(b, op, 1, &x, params, 0);
}

static inline deft_gref_t g_op2(deft_grad_builder_t *b, const char *op, deft_gref_t x,
                                deft_gref_t y, const char *const *params) {
    deft_gref_t in[2] = {x, y};
    return b->apply(b, op, 2, in, params, 0);
}

static inline deft_gref_t g_mul(deft_grad_builder_t *b, deft_gref_t x, deft_gref_t y) {
    return g_op2(b, "elemwise_mul", x, y, GRAD_NONE);
}

static inline deft_gref_t g_scale(deft_grad_builder_t *b, deft_gref_t x, double s) {
    char text[32];
    snprintf(text, sizeof text, "%.17g", s);
    return g_op1(b, "_mul_scalar", x, GRAD_PARAMS("scalar", text));
}

/* A parameter of the forward node as it was given, or its default. */
static inline const char *g_attr(deft_grad_builder_t *b, const char *key, const char *fallback) {
    const char *v = b->attr(b, key);
    return v ? v : fallback;
}

/* The forward node's parameters named in `defs`, as given, into `params` (room for
 * 2 * len(defs) + 1), NULL-terminated: for a backward operator that takes them all. */
static inline const char *const *
g_forward_params(deft_grad_builder_t *b, const deft_param_def_t *defs, const char **params) {
    int n = 0;
    for (int k = 0; defs[k].name; k++) {
        const char *v = b->attr(b, defs[k].name);
        if (v) params[n++] = defs[k].name, params[n++] = v;
    }
    params[n] = NULL;
    return params;
}

#endif
