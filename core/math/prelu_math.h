/*
 * The gradient of LeakyReLU's prelu (_backward_LeakyReLU, core/op/activation.c),
 * shared by the CPU kernel and the GPU one (core/op/activation.cu) like
 * softmax_math.h: d data element by element, and d gamma element by element
 * of gamma, each summing the data elements it slopes in increasing order.
 */
#ifndef DEFT_CORE_PRELU_MATH_H
#define DEFT_CORE_PRELU_MATH_H

#include "core/base/shape.h"
#include "core/math/device_fn.h"
#include "core/math/dtype_math.h"

typedef struct deft_prelu_grad {
    deft_dtype_t dtype;
    int ndim;
    int64_t dims[DEFT_SHAPE_MAX_NDIM];  /* the data's */
    int64_t gdims[DEFT_SHAPE_MAX_NDIM]; /* gamma's, aligned with the data's (1: broadcast) */
    int64_t n, ng;                      /* elements of data and of gamma */
    const void *g, *x, *gamma;
    void *dx, *dgamma;
} deft_prelu_grad_t;

/* The gamma element that data element i takes. */
DEFT_DEVICE_FN int64_t deft_prelu_gamma_of(const deft_prelu_grad_t *p, int64_t i) {
    int64_t e = 0, stride = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        int64_t index = i % p->dims[d];
        i /= p->dims[d];
        if (p->gdims[d] > 1) e += index * stride;
        stride *= p->gdims[d];
    }
    return e;
}

/* The j-th (in increasing order) of the data elements that take gamma element e. */
DEFT_DEVICE_FN int64_t deft_prelu_data_of(const deft_prelu_grad_t *p, int64_t e, int64_t j) {
    int64_t i = 0, stride = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        int64_t index;
        if (p->gdims[d] > 1) {
            index = e % p->gdims[d], e /= p->gdims[d];
        } else {
            index = j % p->dims[d], j /= p->dims[d];
        }
        i += index * stride;
        stride *= p->dims[d];
    }
    return i;
}

/* d data at i = g (x > 0 ? 1 : gamma). */
DEFT_DEVICE_FN void deft_prelu_dx_at(const deft_prelu_grad_t *p, int64_t i) {
    double g = deft_load_double(p->g, p->dtype, i), x = deft_load_double(p->x, p->dtype, i);
    double gamma = deft_load_double(p->gamma, p->dtype, deft_prelu_gamma_of(p, i));
    deft_store_double(p->dx, p->dtype, i, x > 0 ? g : g * gamma);
}

/* d gamma at e = the sum of g x over its data elements where x is not above 0,
 * added into d gamma (rounded to its dtype) one by one, in increasing order. */
DEFT_DEVICE_FN void deft_prelu_dgamma_at(const deft_prelu_grad_t *p, int64_t e) {
    deft_store_double(p->dgamma, p->dtype, e, 0);
    for (int64_t j = 0; j < p->n / p->ng; j++) {
        int64_t i = deft_prelu_data_of(p, e, j);
        double x = deft_load_double(p->x, p->dtype, i);
        if (x > 0) continue;
        double sum = deft_load_double(p->dgamma, p->dtype, e);
        deft_store_double(p->dgamma, p->dtype, e, sum + deft_load_double(p->g, p->dtype, i) * x);
    }
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* _backward_LeakyReLU on GPU `dev`: a thread per data element, then one per gamma element. */
int deft_gpu_prelu_backward(int dev, const deft_prelu_grad_t *p);
#ifdef __cplusplus
}
#endif
#endif

#endif
