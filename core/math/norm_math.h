/*
 * The arithmetic of the mean-and-variance normalisations (BatchNorm,
 * LayerNorm, InstanceNorm, GroupNorm), shared by the CPU kernels
 * (core/op/norm_slices.c) and the GPU ones (core/op/norm_slices.cu) like
 * softmax_math.h.
 *
 * All four normalise "slices" of their data: each slice's mean and biased
 * variance are taken over its elements, which are then scaled and shifted
 * by gamma and beta. What differs is which elements form a slice, and
 * which gamma element each one takes; a plan says both with a few numbers,
 * so one kernel serves every operator:
 *
 *   slice j holds start(j) + a * stride + b for a < na, b < nb, with
 *   start(j) = (j / q) * hi + (j % q) * lo;
 *   element (a, b) of slice j takes gamma and beta element
 *   (j % gq) + a * ga + b * gb.
 *
 * BatchNorm's slice is a channel, LayerNorm's a line along its axis,
 * InstanceNorm's one (sample, channel), GroupNorm's one (sample, group).
 */
#ifndef DEFT_CORE_NORM_MATH_H
#define DEFT_CORE_NORM_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"

typedef struct deft_norm_plan {
    int64_t slices, q, hi, lo; /* the slices, and where each starts */
    int64_t na, stride, nb;    /* the elements of one */
    int64_t gq, ga, gb;        /* the gamma and beta element of each */
} deft_norm_plan_t;

/* What the second statistic an operator outputs is: BatchNorm's is the inverse
 * standard deviation, LayerNorm's and GroupNorm's the standard deviation,
 * InstanceNorm's the variance. */
typedef enum deft_norm_stat {
    DEFT_NORM_INVSTD,
    DEFT_NORM_STD,
    DEFT_NORM_VAR,
} deft_norm_stat_t;

/* A forward call: x normalised into y, the statistics into mean and stat (one
 * of each per slice). BatchNorm also reads or updates its moving statistics. */
typedef struct deft_norm_forward {
    deft_norm_plan_t plan;
    deft_dtype_t dtype;
    const void *x;
    void *y;
    const void *gamma; /* NULL: gamma is 1 (BatchNorm's fix_gamma) */
    const void *beta;
    void *mean, *stat;
    deft_norm_stat_t stat_kind;
    double eps;
    void *moving_mean, *moving_var; /* BatchNorm's, else NULL */
    bool use_moving;                /* normalise with the moving statistics */
    bool update_moving;             /* fold the batch's into the moving ones */
    double momentum;
} deft_norm_forward_t;

/* A backward call: the gradients of x, gamma and beta from the output's (g)
 * and the statistics the forward call output. */
typedef struct deft_norm_backward {
    deft_norm_plan_t plan;
    deft_dtype_t dtype;
    const void *g, *x;
    const void *gamma; /* NULL: gamma is 1 and fixed, so its gradient is 0 */
    int64_t nparams;   /* elements of gamma (and beta) */
    const void *mean, *stat;
    deft_norm_stat_t stat_kind;
    double eps;
    /* The statistics are the slice's own, so they depend on x (training);
     * else they are constants (BatchNorm's moving statistics). */
    bool batch_stats;
    void *dx, *dgamma, *dbeta; /* dgamma and dbeta: NULL when not wanted */
} deft_norm_backward_t;

DEFT_DEVICE_FN int64_t deft_norm_count(const deft_norm_plan_t *p) {
    return p->na * p->nb;
}

DEFT_DEVICE_FN int64_t deft_norm_start(const deft_norm_plan_t *p, int64_t j) {
    return (j / p->q) * p->hi + (j % p->q) * p->lo;
}

/* The offset of the slice's k-th element (k = a * nb + b), and its gamma element. */
DEFT_DEVICE_FN int64_t deft_norm_at(const deft_norm_plan_t *p, int64_t start, int64_t k) {
    return start + (k / p->nb) * p->stride + k % p->nb;
}

DEFT_DEVICE_FN int64_t deft_norm_param_at(const deft_norm_plan_t *p, int64_t j, int64_t k) {
    return j % p->gq + (k / p->nb) * p->ga + (k % p->nb) * p->gb;
}

/* 1 / sqrt(var + eps); 0 for a constant slice with eps 0 (as MXNet's BatchNorm),
 * so it is scaled to beta rather than to NaN. */
DEFT_DEVICE_FN double deft_norm_invstd(double var, double eps) {
    return var + eps == 0 ? 0 : 1 / sqrt(var + eps);
}

/* The statistic an operator outputs for a slice of variance var. */
DEFT_DEVICE_FN double deft_norm_stat_of(deft_norm_stat_t kind, double var, double eps) {
    switch (kind) {
    case DEFT_NORM_INVSTD:
        return deft_norm_invstd(var, eps);
    case DEFT_NORM_STD:
        return sqrt(var + eps);
    case DEFT_NORM_VAR:
        break;
    }
    return var;
}

/* The inverse standard deviation back from an output statistic. */
DEFT_DEVICE_FN double deft_norm_invstd_of(deft_norm_stat_t kind, double stat, double eps) {
    switch (kind) {
    case DEFT_NORM_INVSTD:
        return stat;
    case DEFT_NORM_STD:
        return stat == 0 ? 0 : 1 / stat;
    case DEFT_NORM_VAR:
        break;
    }
    return deft_norm_invstd(stat, eps);
}

/* The statistics slice j normalises with: the moving ones, or the batch's
 * (mean, var) given, which are then written out and folded into the moving
 * ones (moving = moving * momentum + batch * (1 - momentum)). Returns invstd. */
DEFT_DEVICE_FN double deft_norm_finish(const deft_norm_forward_t *f, deft_dtype_t dtype, int64_t j,
                                       double *mean, double var) {
    if (f->use_moving) {
        *mean = deft_load_double(f->moving_mean, dtype, j);
        var = deft_load_double(f->moving_var, dtype, j);
    } else if (f->update_moving) {
        double m = f->momentum;
        deft_store_double(f->moving_mean, dtype, j,
                          deft_load_double(f->moving_mean, dtype, j) * m + *mean * (1 - m));
        deft_store_double(f->moving_var, dtype, j,
                          deft_load_double(f->moving_var, dtype, j) * m + var * (1 - m));
    }
    deft_store_double(f->mean, dtype, j, *mean);
    deft_store_double(f->stat, dtype, j, deft_norm_stat_of(f->stat_kind, var, f->eps));
    return deft_norm_invstd(var, f->eps);
}

/* y[i] = (x[i] - mean) * invstd * gamma[e] + beta[e]. */
DEFT_DEVICE_FN void deft_norm_apply(const deft_norm_forward_t *f, deft_dtype_t dtype, int64_t i,
                                    int64_t e, double mean, double invstd) {
    double scale = f->gamma ? deft_load_double(f->gamma, dtype, e) : 1;
    double v = (deft_load_double(f->x, dtype, i) - mean) * invstd * scale +
               deft_load_double(f->beta, dtype, e);
    deft_store_double(f->y, dtype, i, v);
}

/*
 * The gradient of x at element i of a slice of n elements, from the sums
 * over the slice of dy = g * gamma and of dy * xhat (xhat = (x - mean) * invstd):
 * with batch statistics, (dy - sum(dy) / n - xhat * sum(dy xhat) / n) * invstd;
 * with constant ones, dy * invstd.
 */
DEFT_DEVICE_FN double deft_norm_dx(const deft_norm_backward_t *b, deft_dtype_t dtype, int64_t i,
                                   int64_t e, double mean, double invstd, double n, double sum_dy,
                                   double sum_dy_xhat) {
    double scale = b->gamma ? deft_load_double(b->gamma, dtype, e) : 1;
    double dy = deft_load_double(b->g, dtype, i) * scale;
    if (!b->batch_stats) return dy * invstd;
    double xhat = (deft_load_double(b->x, dtype, i) - mean) * invstd;
    return (dy - sum_dy / n - xhat * sum_dy_xhat / n) * invstd;
}

/* The statistics slice j was normalised with, as the backward reads them. */
DEFT_DEVICE_FN void deft_norm_slice_stats(const deft_norm_backward_t *b, deft_dtype_t dtype,
                                          int64_t j, double *mean, double *invstd) {
    *mean = deft_load_double(b->mean, dtype, j);
    *invstd = deft_norm_invstd_of(b->stat_kind, deft_load_double(b->stat, dtype, j), b->eps);
}

/* What the backward sums over a slice: dy = g * gamma and dy * xhat for the
 * gradient of x, g and g * xhat for those of beta and gamma. */
typedef struct deft_norm_sums {
    double dy, dy_xhat, g, g_xhat;
} deft_norm_sums_t;

/* Add element i (gamma element e) of a slice to its sums. */
DEFT_DEVICE_FN void deft_norm_add_sums(const deft_norm_backward_t *b, deft_dtype_t dtype, int64_t i,
                                       int64_t e, double mean, double invstd, deft_norm_sums_t *s) {
    double g = deft_load_double(b->g, dtype, i);
    double xhat = (deft_load_double(b->x, dtype, i) - mean) * invstd;
    double scale = b->gamma ? deft_load_double(b->gamma, dtype, e) : 1;
    s->dy += g * scale, s->dy_xhat += g * scale * xhat;
    s->g += g, s->g_xhat += g * xhat;
}

/* Whether each gamma element belongs to one slice (BatchNorm's channels), so
 * slices in parallel can write its gradient. */
DEFT_DEVICE_FN bool deft_norm_slices_own_params(const deft_norm_plan_t *p) {
    return p->gq == p->slices && p->ga == 0 && p->gb == 0;
}

/* Whether a whole slice takes one gamma element, j % gq (InstanceNorm, GroupNorm). */
DEFT_DEVICE_FN bool deft_norm_params_by_slice(const deft_norm_plan_t *p) {
    return p->ga == 0 && p->gb == 0;
}

/* Whether element k of every slice takes gamma element k (LayerNorm's lines). */
DEFT_DEVICE_FN bool deft_norm_params_by_element(const deft_norm_plan_t *p) {
    return p->gq == 1 && (p->na == 1 || p->ga == p->nb) && (p->nb == 1 || p->gb == 1);
}

#endif
