/*
 * Where element i of a strided iteration lives in each operand: the index
 * arithmetic of every GPU map kernel, as a __host__ __device__ function so
 * the CPU tests check it against the CPU kernels' iteration.
 */
#ifndef DEFT_CORE_GPU_INDEX_H
#define DEFT_CORE_GPU_INDEX_H

#include "core/gpu/kernels.h"

#ifndef DEFT_DEVICE_FN
#define DEFT_DEVICE_FN static inline
#endif

/* off[k] = element offset of operand k for linear index i (row-major over dims). */
DEFT_DEVICE_FN void deft_gpu_offsets(const deft_gpu_map_t *m, int64_t i, int64_t *off) {
    for (int k = 0; k < m->nops; k++) off[k] = 0;
    for (int d = m->ndim - 1; d >= 0; d--) {
        int64_t dim = m->dims[d], at = i % dim;
        i /= dim;
        for (int k = 0; k < m->nops; k++) off[k] += at * m->strides[k][d];
    }
}

#endif
