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

/* Whether the float32 plane kernels take this pooling (else the general loops);
 * `enable` false sends every call to the general loops (the tests compare both). */
bool deft_pool_fast_fits(const deft_pool_geom_t *g, deft_dtype_t dtype);
void deft_pool_fast_enable(bool enable);

#endif
