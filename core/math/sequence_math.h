/*
 * Index arithmetic of SequenceMask, SequenceLast and SequenceReverse,
 * shared by the CPU kernels (core/op/sequence.c) and the GPU kernels
 * (core/op/sequence.cu). Data is seen as (d0, d1, rest): the sequence axis
 * is d0 (axis 0) or d1 (axis 1) and the other of the two is the batch.
 * Lengths are checked (whole, in range), on the CPU before any kernel
 * runs, on a GPU after (core/base/device_check.h): so a length is clipped
 * into [0, steps] here, which changes nothing for a valid one and keeps a
 * GPU kernel in bounds for a bad one.
 */
#ifndef DEFT_CORE_SEQUENCE_MATH_H
#define DEFT_CORE_SEQUENCE_MATH_H

#include "core/math/gather_math.h"

typedef struct deft_seq_plan {
    const void *src; /* data, or the gradient of SequenceLast's result */
    void *dst;
    deft_dtype_t dtype;
    const void *lengths; /* NULL: every sequence fills the axis */
    deft_dtype_t length_dtype;
    int64_t d0, d1, rest;
    int axis;
    double value; /* SequenceMask's fill */
} deft_seq_plan_t;

DEFT_DEVICE_FN int64_t deft_seq_length(const deft_seq_plan_t *p, int64_t batch) {
    int64_t steps = p->axis ? p->d1 : p->d0;
    if (!p->lengths) return steps;
    int64_t n = deft_index_at(p->lengths, p->length_dtype, batch);
    return n < 0 ? 0 : n > steps ? steps : n;
}

/* SequenceMask: whether data element `at` lies past the end of its sequence. */
DEFT_DEVICE_FN bool deft_seq_masked(const deft_seq_plan_t *p, int64_t at) {
    int64_t i0 = at / (p->d1 * p->rest), i1 = at / p->rest % p->d1;
    return p->axis == 0 ? i0 >= deft_seq_length(p, i1) : i1 >= deft_seq_length(p, i0);
}

/* SequenceLast: the data offset of result element `at` (batch at / rest). */
DEFT_DEVICE_FN int64_t deft_seq_last_source(const deft_seq_plan_t *p, int64_t at) {
    int64_t b = at / p->rest, r = at % p->rest, n = deft_seq_length(p, b), t = n > 0 ? n - 1 : 0;
    return (p->axis == 0 ? t * p->d1 + b : b * p->d1 + t) * p->rest + r;
}

/* SequenceReverse (axis 0): the data offset that result element `at` comes from;
 * the first `length` steps reversed, the padding after them in place. */
DEFT_DEVICE_FN int64_t deft_seq_reverse_source(const deft_seq_plan_t *p, int64_t at) {
    int64_t t = at / (p->d1 * p->rest), b = at / p->rest % p->d1, r = at % p->rest;
    int64_t n = deft_seq_length(p, b);
    return ((t < n ? n - 1 - t : t) * p->d1 + b) * p->rest + r;
}

/* Which kernel a plan runs. */
enum { DEFT_SEQ_MASK, DEFT_SEQ_LAST, DEFT_SEQ_LAST_BACKWARD, DEFT_SEQ_REVERSE };

/* The elements a kernel visits: the data's (mask, reverse) or the result's (last). */
DEFT_DEVICE_FN int64_t deft_seq_count(const deft_seq_plan_t *p, int kind) {
    if (kind == DEFT_SEQ_LAST || kind == DEFT_SEQ_LAST_BACKWARD)
        return (p->axis ? p->d0 : p->d1) * p->rest;
    return p->d0 * p->d1 * p->rest;
}

/* Element `at` of a kernel (elements of `elem` bytes). SequenceLast's gradient
 * writes into zeros, each result element to its own place. */
DEFT_DEVICE_FN void deft_seq_apply(const deft_seq_plan_t *p, int kind, int64_t at, size_t elem) {
    switch (kind) {
    case DEFT_SEQ_MASK:
        if (deft_seq_masked(p, at))
            deft_store_double(p->dst, p->dtype, at, p->value);
        else
            deft_copy_element(p->dst, at, p->src, at, elem);
        break;
    case DEFT_SEQ_LAST:
        deft_copy_element(p->dst, at, p->src, deft_seq_last_source(p, at), elem);
        break;
    case DEFT_SEQ_LAST_BACKWARD:
        deft_copy_element(p->dst, deft_seq_last_source(p, at), p->src, at, elem);
        break;
    default:
        deft_copy_element(p->dst, at, p->src, deft_seq_reverse_source(p, at), elem);
        break;
    }
}

#ifdef __cplusplus
extern "C" {
#endif
/* The GPU launcher (core/op/sequence.cu); the last gradient's zeros are written before. */
int deft_gpu_sequence(int dev, const deft_seq_plan_t *p, int kind);
#ifdef __cplusplus
}
#endif

#endif
