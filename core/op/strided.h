/*
 * Strided iteration: the one loop nest behind every elementwise, broadcast,
 * copy, transpose and slice kernel.
 *
 * Up to four operands share one iteration shape; each has its own base
 * pointer and strides (in elements, 0 where it is broadcast). Before
 * running, dimensions that are contiguous for every operand are merged, so
 * same-shape elementwise work becomes one flat loop and a broadcast row
 * becomes one inner call. The inner function sees only the last dimension:
 * it specialises on strides 1 and 0, which is where vectorisation happens.
 * Large iterations are split across threads (deft_parallel_for).
 */
#ifndef DEFT_CORE_STRIDED_H
#define DEFT_CORE_STRIDED_H

#include "core/base/tensor.h"
#include "core/gpu/kernels.h"

#define DEFT_STRIDED_MAX_OPS 4

typedef struct deft_strided {
    int ndim, nops;
    int64_t dims[DEFT_SHAPE_MAX_NDIM];
    int64_t strides[DEFT_STRIDED_MAX_OPS][DEFT_SHAPE_MAX_NDIM];
    char *base[DEFT_STRIDED_MAX_OPS];
    size_t elem[DEFT_STRIDED_MAX_OPS];
} deft_strided_t;

/* ptrs[k] points at operand k's first element of the row; strides[k] its step. */
typedef void (*deft_inner_fn)(const void *ctx, char *const *ptrs, const int64_t *strides,
                              int64_t n);

void deft_strided_init(deft_strided_t *it, const deft_shape_t *shape, int nops);
/* Operand with explicit per-dimension strides (elements). */
void deft_strided_set(deft_strided_t *it, int k, void *base, size_t elem, const int64_t *strides);
/* Operand laid out contiguously with the iteration shape. */
void deft_strided_set_dense(deft_strided_t *it, int k, const deft_tensor_t *t);
/* Operand broadcast to the iteration shape (NumPy rules, right-aligned). */
void deft_strided_set_broadcast(deft_strided_t *it, int k, const deft_tensor_t *t);

/* Row-major strides (elements) of a contiguous shape. */
void deft_contiguous_strides(const deft_shape_t *shape, int64_t *strides);

void deft_strided_run(deft_strided_t *it, deft_inner_fn fn, const void *ctx);

/* Drop size-1 dimensions and merge neighbours that are contiguous for every operand. */
void deft_strided_collapse(deft_strided_t *it);

/* The same iteration as a GPU map of fn (collapsed here); operand k has
 * dtypes[k], and is the value scalars[k] where its base is NULL; scalars, when
 * not NULL, holds DEFT_GPU_MAX_OPS values (clip reads its bounds there too). */
void deft_strided_to_gpu_map(deft_strided_t *it, deft_gpu_fn_t fn, const deft_dtype_t *dtypes,
                             const double *scalars, deft_gpu_map_t *m);

/*
 * The flat case without the planning: n elements, each operand dense
 * (stride 1) or a single value (stride 0). Tiny arrays take this path on
 * every operator call, so it is worth skipping the general machinery.
 */
void deft_flat_run(deft_inner_fn fn, const void *ctx, int nops, char *const *ptrs,
                   const int64_t *strides, size_t elem, int64_t n);

#endif
