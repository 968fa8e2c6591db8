/*
 * The index arithmetic of Pad and its gradient (core/op/pad.c), shared by
 * the CPU kernels and the GPU ones (core/op/pad.cu) like softmax_math.h.
 */
#ifndef DEFT_CORE_PAD_MATH_H
#define DEFT_CORE_PAD_MATH_H

#include <stddef.h>

#include "core/math/device_fn.h"

#include "core/math/dtype_math.h"
#include "core/math/gather_math.h"

enum { DEFT_PAD_CONSTANT, DEFT_PAD_EDGE, DEFT_PAD_REFLECT };

typedef struct deft_pad_plan {
    int ndim;
    int64_t before[5], in[5], out[5];
} deft_pad_plan_t;

/* A call: forward, x (data) padded into y; backward, x (the output
 * gradient) summed into y (d data). */
typedef struct deft_pad_job {
    deft_pad_plan_t plan;
    int mode;
    deft_dtype_t dtype;
    double constant;
    const void *x;
    void *y;
} deft_pad_job_t;

/* The input coordinate of output coordinate o along axis d, or -1 in constant padding. */
DEFT_DEVICE_FN int64_t deft_pad_source(const deft_pad_plan_t *plan, int mode, int d, int64_t o) {
    int64_t i = o - plan->before[d], size = plan->in[d];
    if (i >= 0 && i < size) return i;
    if (mode == DEFT_PAD_CONSTANT) return -1;
    if (mode == DEFT_PAD_EDGE) return i < 0 ? 0 : size - 1;
    return i < 0 ? -i : 2 * (size - 1) - i; /* reflect: widths < size, checked */
}

/* The input element behind output element o (flat), or -1 in constant padding. */
DEFT_DEVICE_FN int64_t deft_pad_source_index(const deft_pad_plan_t *plan, int mode, int64_t o) {
    int64_t coord[5], index = 0;
    for (int d = plan->ndim - 1; d >= 0; d--) coord[d] = o % plan->out[d], o /= plan->out[d];
    for (int d = 0; d < plan->ndim; d++) {
        int64_t i = deft_pad_source(plan, mode, d, coord[d]);
        if (i < 0) return -1;
        index = index * plan->in[d] + i;
    }
    return index;
}

/* Output element o of the forward: its source copied, or the constant. */
DEFT_DEVICE_FN void deft_pad_element(const deft_pad_job_t *j, int64_t o, size_t elem) {
    int64_t i = deft_pad_source_index(&j->plan, j->mode, o);
    if (i < 0)
        deft_store_double(j->y, j->dtype, o, j->constant);
    else
        deft_copy_element(j->y, o, j->x, i, elem);
}

/* Elements of one plane (one sample's channel) of the input and of the output. */
DEFT_DEVICE_FN void deft_pad_plane_sizes(const deft_pad_plan_t *plan, int64_t *in_plane,
                                         int64_t *out_plane) {
    *in_plane = *out_plane = 1;
    for (int d = 2; d < plan->ndim; d++) *in_plane *= plan->in[d], *out_plane *= plan->out[d];
}

/* The gradient of one plane, which only that plane's outputs feed (the first
 * two axes are never padded): zeroed, then every output added into its source. */
DEFT_DEVICE_FN void deft_unpad_plane(const deft_pad_job_t *j, int64_t plane) {
    int64_t in_plane, out_plane;
    deft_pad_plane_sizes(&j->plan, &in_plane, &out_plane);
    for (int64_t i = plane * in_plane; i < (plane + 1) * in_plane; i++)
        deft_store_double(j->y, j->dtype, i, 0);
    for (int64_t o = plane * out_plane; o < (plane + 1) * out_plane; o++) {
        int64_t i = deft_pad_source_index(&j->plan, j->mode, o);
        if (i < 0) continue;
        double sum = deft_load_double(j->y, j->dtype, i) + deft_load_double(j->x, j->dtype, o);
        deft_store_double(j->y, j->dtype, i, sum);
    }
}

#ifdef DEFT_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* Pad on GPU `dev` (a thread per output element), or its gradient (a thread per plane). */
int deft_gpu_pad(int dev, const deft_pad_job_t *j, bool backward);
#ifdef __cplusplus
}
#endif
#endif

#endif
