/*
 * The per-line arithmetic of softmax, log_softmax, softmin and the softmax
 * cross-entropy, shared by the CPU and GPU kernels like scalar_math.h:
 * subtract the maximum (NaN wins) before exponentiating, accumulate in
 * double.
 */
#ifndef DEFT_CORE_SOFTMAX_MATH_H
#define DEFT_CORE_SOFTMAX_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"
#include "core/math/gather_math.h"
#include "core/math/index_math.h"

/* The maximum of n elements spaced `stride` apart from `start`, and the sum
 * of exp(x - max) over them. */
DEFT_DEVICE_FN void deft_max_and_sum(const void *x, deft_dtype_t dtype, int64_t start, int64_t n,
                                     int64_t stride, double *max_out, double *sum_out) {
    double max = -INFINITY, sum = 0;
    for (int64_t k = 0; k < n; k++) {
        double v = deft_load_double(x, dtype, start + k * stride);
        if (v > max || v != v) max = v;
    }
    for (int64_t k = 0; k < n; k++)
        sum += exp(deft_load_double(x, dtype, start + k * stride) - max);
    *max_out = max, *sum_out = sum;
}

/*
 * A softmax-family call (softmax, log_softmax, softmin, SoftmaxActivation):
 * outer * inner lines of n elements, each spaced `inner` apart. Each
 * element is first multiplied by `scale` (1 / temperature, negated for
 * softmin). With a `length` array (one value per line, the data's shape
 * without the axis), only a line's first length elements take part; the
 * rest of the line is 0, as in MXNet.
 */
typedef struct deft_softmax_plan {
    const void *x, *length; /* length NULL: whole lines */
    void *y;
    deft_dtype_t x_dtype, y_dtype, length_dtype;
    int64_t outer, n, inner;
    double scale;
    bool log_form;
} deft_softmax_plan_t;

/* The length of a line, read as MXNet does (truncated), clamped into [0, n]
 * (the CPU operator refuses lengths outside it before it gets here). */
DEFT_DEVICE_FN int64_t deft_softmax_line_length(const deft_softmax_plan_t *s, int64_t line) {
    if (!s->length) return s->n;
    double len = deft_load_double(s->length, s->length_dtype, line);
    return len != len || len < 0 ? 0 : len > (double)s->n ? s->n : (int64_t)len;
}

/* One line of the plan. */
DEFT_DEVICE_FN void deft_softmax_plan_line(const deft_softmax_plan_t *s, int64_t line) {
    int64_t start = line / s->inner * s->n * s->inner + line % s->inner;
    int64_t len = deft_softmax_line_length(s, line);
    double max = -INFINITY, sum = 0;
    for (int64_t k = 0; k < len; k++) {
        double v = deft_load_double(s->x, s->x_dtype, start + k * s->inner) * s->scale;
        if (v > max || v != v) max = v;
    }
    for (int64_t k = 0; k < len; k++)
        sum += exp(deft_load_double(s->x, s->x_dtype, start + k * s->inner) * s->scale - max);
    double log_sum = log(sum);
    for (int64_t k = 0; k < s->n; k++) {
        int64_t i = start + k * s->inner;
        double shifted = deft_load_double(s->x, s->x_dtype, i) * s->scale - max;
        double v = k >= len ? 0 : s->log_form ? shifted - log_sum : exp(shifted) / sum;
        deft_store_double(s->y, s->y_dtype, i, v);
    }
}

/* Whether a label is a class index in [0, classes). */
DEFT_DEVICE_FN bool deft_xent_label_ok(double label, int64_t classes) {
    return label >= 0 && label < (double)classes && label == floor(label);
}

/* -log(softmax(row b)[label]) of data (batch, classes). */
DEFT_DEVICE_FN double deft_xent_row_loss(const void *x, deft_dtype_t dtype, int64_t b,
                                         int64_t classes, int64_t label) {
    double max, sum;
    deft_max_and_sum(x, dtype, b * classes, classes, 1, &max, &sum);
    return max + log(sum) - deft_load_double(x, dtype, b * classes + label);
}

/* Row b of the loss gradient: g (softmax(row) - one_hot(label)). */
DEFT_DEVICE_FN void deft_xent_row_grad(const void *x, void *dx, deft_dtype_t dtype, int64_t b,
                                       int64_t classes, int64_t label, double g) {
    double max, sum;
    deft_max_and_sum(x, dtype, b * classes, classes, 1, &max, &sum);
    for (int64_t k = 0; k < classes; k++) {
        double prob = exp(deft_load_double(x, dtype, b * classes + k) - max) / sum;
        deft_store_double(dx, dtype, b * classes + k, g * (prob - (k == label)));
    }
}

/*
 * _backward_pick_log_softmax: the gradient of -pick(y, index) with y =
 * log_softmax(x) along pick's axis, taken through both: h (exp(y) -
 * one_hot(index)) for h the loss's gradient. Element e of data (outer,
 * size, inner) is written as the unfused nodes compute it, a - exp(y) a',
 * where a = -h at the picked place (else 0) and a' = -h, the line's sum of a.
 */
typedef struct deft_pick_softmax_plan {
    deft_pick_plan_t pick; /* src: h, dst: the data's gradient */
    const void *y;         /* log_softmax's output, pick.dtype */
} deft_pick_softmax_plan_t;

DEFT_DEVICE_FN void deft_pick_log_softmax_grad_at(const deft_pick_softmax_plan_t *s, int64_t e) {
    const deft_pick_plan_t *p = &s->pick;
    int64_t k = e % p->inner, j = e / p->inner % p->size,
            line = e / (p->inner * p->size) * p->inner + k;
    double g = -deft_load_double(p->src, p->dtype, line);
    int64_t i = deft_take_resolve(deft_index_at(p->index, p->index_dtype, line), p->size, p->mode);
    double v = (j == i ? g : 0) - exp(deft_load_double(s->y, p->dtype, e)) * g;
    deft_store_double(p->dst, p->dtype, e, v);
}

#ifdef __cplusplus
extern "C" {
#endif
int deft_gpu_pick_log_softmax_grad(int dev, const deft_pick_softmax_plan_t *s);
#ifdef __cplusplus
}
#endif

#endif
