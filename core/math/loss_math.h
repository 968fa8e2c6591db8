/*
 * The per-element and per-line arithmetic of the loss heads (SoftmaxOutput,
 * the regression outputs, MakeLoss, smooth_l1), shared by the CPU and GPU
 * kernels like scalar_math.h. The rules are MXNet 1.9.1's, oddities included
 * (they are what trained models expect): see core/op/loss_heads.c.
 */
#ifndef DEFT_CORE_LOSS_MATH_H
#define DEFT_CORE_LOSS_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"

/* smooth_l1 with sigma: 0.5 (sigma x)^2 when |x| <= 1/sigma^2, else |x| - 0.5/sigma^2. */
DEFT_DEVICE_FN double deft_smooth_l1(double x, double sigma) {
    double s2 = sigma * sigma, bound = 1 / s2;
    if (x > bound) return x - 0.5 * bound;
    if (x < -bound) return -x - 0.5 * bound;
    return 0.5 * x * x * s2;
}

/* Its derivative: sigma^2 x inside the bound, the sign of x outside. */
DEFT_DEVICE_FN double deft_smooth_l1_grad(double x, double sigma) {
    double s2 = sigma * sigma, bound = 1 / s2;
    if (x > bound) return 1;
    if (x < -bound) return -1;
    return s2 * x;
}

/* A label as MXNet reads it, (int)label; a value no int holds (NaN, huge)
 * is INT64_MIN, which matches no class. */
DEFT_DEVICE_FN int64_t deft_loss_label(double label) {
    return label > -2147483649.0 && label < 2147483648.0 ? (int64_t)label : INT64_MIN;
}

/* How SoftmaxOutput turns a line's softmax into its gradient. */
typedef struct deft_softmax_output_rule {
    double scale;        /* grad_scale over the normaliser */
    double smooth_alpha; /* label smoothing (0: none) */
    bool use_ignore;
    int64_t ignore; /* deft_loss_label(ignore_label) */
} deft_softmax_output_rule_t;

/* The gradient of one line of n classes spaced `stride` apart from `start`:
 * scale (out - one_hot(label)), with alpha moved from the label's class to
 * the others when smoothing, and zeros for an ignored label. A label that is
 * no class index subtracts nothing (as MXNet's CPU kernel). */
DEFT_DEVICE_FN void deft_softmax_output_line(const void *out, void *grad, deft_dtype_t dtype,
                                             int64_t start, int64_t n, int64_t stride, double label,
                                             const deft_softmax_output_rule_t *r) {
    int64_t k = deft_loss_label(label);
    bool ignored = r->use_ignore && k == r->ignore;
    double spread = n > 1 ? r->smooth_alpha / (double)(n - 1) : 0;
    for (int64_t x = 0; x < n; x++) {
        int64_t i = start + x * stride;
        double v = deft_load_double(out, dtype, i);
        v = x == k ? v - 1 + r->smooth_alpha : v - spread;
        deft_store_double(grad, dtype, i, ignored ? 0 : v * r->scale);
    }
}

/* SoftmaxOutput's lines, forward or backward: `outer` blocks of n classes
 * spaced `inner` apart in x (the data, or the softmax for the gradient),
 * written to y; line l = (o, i) takes label l (one per row without
 * multi_output, where inner is 1). */
typedef struct deft_softmax_output_plan {
    const void *x, *label;
    void *y;
    deft_dtype_t dtype;
    int64_t outer, n, inner;
    deft_softmax_output_rule_t rule;
} deft_softmax_output_plan_t;

DEFT_DEVICE_FN void deft_softmax_output_grad_line(const deft_softmax_output_plan_t *p,
                                                  int64_t line) {
    int64_t o = line / p->inner, i = line % p->inner;
    double label = deft_load_double(p->label, p->dtype, line);
    deft_softmax_output_line(p->x, p->y, p->dtype, o * p->n * p->inner + i, p->n, p->inner, label,
                             &p->rule);
}

/* The elementwise maps of the heads: y[i] from a[i] (and b[i]) and s. */
typedef enum deft_loss_map_kind {
    DEFT_LOSS_SIGMOID,        /* sigmoid(a) */
    DEFT_LOSS_DIFF,           /* (a - b) s: the regression gradient */
    DEFT_LOSS_SIGN_DIFF,      /* sign(a - b) s, -1 where equal (MXNet's MAE) */
    DEFT_LOSS_FILL,           /* s */
    DEFT_LOSS_SMOOTH_L1,      /* smooth_l1(a) with sigma s */
    DEFT_LOSS_SMOOTH_L1_GRAD, /* b smooth_l1'(a) with sigma s */
} deft_loss_map_kind_t;

typedef struct deft_loss_map {
    deft_loss_map_kind_t kind;
    deft_dtype_t dtype;
    int64_t n;
    const void *a, *b;
    void *y;
    double s;
} deft_loss_map_t;

DEFT_DEVICE_FN void deft_loss_map_one(const deft_loss_map_t *m, int64_t i) {
    double a = m->kind == DEFT_LOSS_FILL ? 0 : deft_load_double(m->a, m->dtype, i);
    double v = m->s;
    switch (m->kind) {
    case DEFT_LOSS_SIGMOID:
        v = 1 / (1 + exp(-a));
        break;
    case DEFT_LOSS_DIFF:
        v = (a - deft_load_double(m->b, m->dtype, i)) * m->s;
        break;
    case DEFT_LOSS_SIGN_DIFF:
        v = (a - deft_load_double(m->b, m->dtype, i) > 0 ? 1.0 : -1.0) * m->s;
        break;
    case DEFT_LOSS_FILL:
        break;
    case DEFT_LOSS_SMOOTH_L1:
        v = deft_smooth_l1(a, m->s);
        break;
    case DEFT_LOSS_SMOOTH_L1_GRAD:
        v = deft_load_double(m->b, m->dtype, i) * deft_smooth_l1_grad(a, m->s);
        break;
    }
    deft_store_double(m->y, m->dtype, i, v);
}

/* What the normalisations count: labels other than `value` (as
 * deft_loss_label reads both), or elements above `value`. */
typedef struct deft_loss_count {
    const void *x;
    deft_dtype_t dtype;
    int64_t n;
    bool labels;
    double value;
} deft_loss_count_t;

DEFT_DEVICE_FN bool deft_loss_counted(const deft_loss_count_t *c, int64_t i) {
    double v = deft_load_double(c->x, c->dtype, i);
    return c->labels ? deft_loss_label(v) != deft_loss_label(c->value) : v > c->value;
}

#endif
