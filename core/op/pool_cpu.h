/*
 * Pooling and its gradient on the CPU (pool_cpu.c): the general loops over
 * core/math/pool_math.h's windows for every dtype, type and rank, and
 * float32 plane kernels for the 1-D and 2-D max, average and sum pooling of
 * CNNs. pool.c checks the parameters and calls these.
 */
#ifndef DEFT_CORE_POOL_CPU_H
#define DEFT_CORE_POOL_CPU_H

#include "core/math/pool_math.h"

/* y (planes, out...) from x (planes, in...), both of dtype, in parallel over planes. */
void deft_pool_cpu_forward(const deft_pool_geom_t *g, deft_dtype_t dtype, const void *x, void *y);

/* _backward_Pooling: j->dx from j->dy, j->x and j->y, in parallel over planes. */
void deft_pool_cpu_backward(const deft_pool_grad_t *j);

/* The kernels pooling may use, for the tests to run each: the general loops alone,
 * also the float32 plane kernels, or also their vector rows (pool_vec.h) at the
 * SIMD level (simd.h; the default). */
typedef enum { DEFT_POOL_GENERAL, DEFT_POOL_PLANES, DEFT_POOL_VECTOR } deft_pool_kernels_t;
void deft_pool_kernels_set(deft_pool_kernels_t kernels);

#endif
