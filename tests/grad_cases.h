/*
 * The operator cases that the gradient suite checks against finite
 * differences and the export suite runs through a deferred-compute export
 * round trip: one call of an operator on float64 inputs of given shapes.
 *
 * The cases live in tests/gradients/<family>.inc, lists of grad_case_t
 * initialisers that CMake gathers into gradient_cases.inc (in the build
 * folder, on the suites' include path), which a suite includes inside its
 * table of grad_case_t. The shorthands below (UNARY, BINARY, BCAST,
 * SCALAR) are for the many cases of one shape.
 */
#ifndef DEFT_TESTS_GRAD_CASES_H
#define DEFT_TESTS_GRAD_CASES_H

#include "op_helpers.h"

#define GRAD_MAX_IN  6
#define GRAD_MAX_DIM 5

typedef struct grad_case {
    const char *op;
    const char *const *params;
    int nin;
    int ndim[GRAD_MAX_IN];
    int64_t shape[GRAD_MAX_IN][GRAD_MAX_DIM];
    double lo, hi;        /* inputs drawn from [lo, hi) */
    unsigned fixed;       /* bit k: input k is not differentiated (labels, indices, states) */
    const double *values; /* exact values for fixed inputs, if any (in order) */
    bool train;           /* run in training mode (DeftAutogradSetIsTraining) */
    /* every input's values, in order, differentiated ones too (NULL: drawn, or
     * `values`): for inputs that must be special, Cholesky's positive definite */
    const double *start;
} grad_case_t;

#define S(...)                                                                                     \
    { __VA_ARGS__ }
#define UNARY(name, lo, hi)                                                                        \
    { name, NO_PARAMS, 1, {2}, {{2, 3}}, lo, hi, 0, NULL }
#define BINARY(name, lo, hi)                                                                       \
    { name, NO_PARAMS, 2, {2, 2}, {{2, 3}, {2, 3}}, lo, hi, 0, NULL }
#define BCAST(name, lo, hi)                                                                        \
    { name, NO_PARAMS, 2, {2, 1}, {{2, 3}, {3}}, lo, hi, 0, NULL }
#define SCALAR(name, s, lo, hi)                                                                    \
    { name, P("scalar", s), 1, {2}, {{2, 3}}, lo, hi, 0, NULL }

/* The seed of a case's values: every suite draws the same inputs. */
#define GRAD_SEED 12345u

static inline double uniform(uint64_t *state, double lo, double hi) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(*state >> 11) / 9007199254740992.0;
}

/* Input i's values (count[i] of them, in a new buffer x[i]): the case's
 * `start` values when it has them; else its exact values for fixed inputs
 * that have them, else drawn from [lo, hi) with *rng, input after input. */
static inline void grad_case_values(const grad_case_t *c, uint64_t *rng, double **x,
                                    int64_t *count) {
    const double *fixed_values = c->values, *start = c->start;
    for (int i = 0; i < c->nin; i++) {
        count[i] = count_of(c->ndim[i], c->shape[i]);
        x[i] = malloc(sizeof(double) * (size_t)(count[i] ? count[i] : 1));
        for (int64_t j = 0; j < count[i]; j++)
            x[i][j] = c->start                                 ? *start++
                      : (c->fixed & (1u << i)) && fixed_values ? *fixed_values++
                                                               : uniform(rng, c->lo, c->hi);
    }
}

#endif
