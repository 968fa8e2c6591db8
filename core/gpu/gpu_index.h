/*
 * Where element i of a strided iteration lives in each operand, and element
 * j of a reduction's result o: the index arithmetic of the GPU kernels, as
 * __host__ __device__ functions so the CPU tests check them against the CPU
 * kernels' iteration.
 */
#ifndef DEFT_CORE_GPU_INDEX_H
#define DEFT_CORE_GPU_INDEX_H

#include "core/gpu/kernels.h"
#include "core/math/device_fn.h"

/*
 * off[k] = element offset of operand k < nops for linear index i (row-major
 * over dims). Kernels pass nops as a constant: the loops over k then unroll
 * and off[] lives in registers, where an array indexed at run time would sit
 * in local memory and halve an elementwise kernel's bandwidth.
 */
DEFT_DEVICE_FN void deft_gpu_offsets(const deft_gpu_map_t *m, int nops, int64_t i, int64_t *off) {
    if (m->ndim == 1) { /* merged to one dimension (dense work): no 64-bit division */
        for (int k = 0; k < nops; k++) off[k] = i * m->strides[k][0];
        return;
    }
    for (int k = 0; k < nops; k++) off[k] = 0;
    for (int d = m->ndim - 1; d >= 0; d--) {
        int64_t dim = m->dims[d], at = i % dim;
        i /= dim;
        for (int k = 0; k < nops; k++) off[k] += at * m->strides[k][d];
    }
}

/* Offset in the input of element j of result o of a reduction. */
DEFT_DEVICE_FN int64_t deft_gpu_reduce_offset(const deft_gpu_reduce_t *r, int64_t o, int64_t j) {
    int64_t off = 0;
    for (int d = r->ndim - 1; d >= r->nkept; d--) {
        off += (j % r->dims[d]) * r->strides[d];
        j /= r->dims[d];
    }
    for (int d = r->nkept - 1; d >= 0; d--) {
        off += (o % r->dims[d]) * r->strides[d];
        o /= r->dims[d];
    }
    return off;
}

#endif
