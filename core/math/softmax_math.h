/*
 * The per-line arithmetic of softmax, log_softmax and the softmax
 * cross-entropy, shared by the CPU and GPU kernels like scalar_math.h:
 * subtract the maximum (NaN wins) before exponentiating, accumulate in
 * double.
 */
#ifndef DEFT_CORE_SOFTMAX_MATH_H
#define DEFT_CORE_SOFTMAX_MATH_H

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"

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

/* One softmax (or log_softmax) over n elements spaced `stride` apart from `start`. */
DEFT_DEVICE_FN void deft_softmax_line(const void *x, void *y, deft_dtype_t dtype, int64_t start,
                                      int64_t n, int64_t stride, bool log_form) {
    double max, sum;
    deft_max_and_sum(x, dtype, start, n, stride, &max, &sum);
    double log_sum = log(sum);
    for (int64_t k = 0; k < n; k++) {
        int64_t i = start + k * stride;
        double shifted = deft_load_double(x, dtype, i) - max;
        deft_store_double(y, dtype, i, log_form ? shifted - log_sum : exp(shifted) / sum);
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

#endif
