/*
 * Helpers shared by the CPU kernels: dtype slots for kernel tables, safe
 * conversions, and the runtime-dispatch attribute.
 */
#ifndef DEFT_CORE_KERNEL_H
#define DEFT_CORE_KERNEL_H

#include <math.h>
#include <stdint.h>

#include "core/base/device.h"
#include "core/base/tensor.h"
#include "core/base/dtype.h"
#include "core/base/shape.h"
#include "core/math/dtype_math.h"

/* Kernel tables are indexed by slot: the dtypes with arithmetic kernels. */
enum { DEFT_SLOT_F32, DEFT_SLOT_F64, DEFT_SLOT_I32, DEFT_SLOT_I64, DEFT_SLOT_U8, DEFT_SLOTS };

static inline int deft_dtype_slot(deft_dtype_t dtype) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        return DEFT_SLOT_F32;
    case DEFT_DT_FLOAT64:
        return DEFT_SLOT_F64;
    case DEFT_DT_INT32:
        return DEFT_SLOT_I32;
    case DEFT_DT_INT64:
        return DEFT_SLOT_I64;
    case DEFT_DT_UINT8:
        return DEFT_SLOT_U8;
    default:
        return -1;
    }
}

/*
 * Hot loops are compiled for AVX-512, AVX2 and baseline x86-64, and the
 * loader picks the best the CPU has (GNU ifunc): a release build runs
 * everywhere and still vectorises. Sanitizer builds skip the clones.
 */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define DEFT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DEFT_CLONES
#endif

/* Inner loop copying elements of `elem` bytes (1, 2, 4 or 8), for deft_strided_run. */
struct deft_strided;
typedef void (*deft_copy_fn)(const void *ctx, char *const *ptrs, const int64_t *strides, int64_t n);
deft_copy_fn deft_copy_loop(size_t elem);

/* Copy elements between strided layouts over one iteration shape, both on
 * device `dev` (a GPU copies with a map kernel); NULL strides mean dense. */
int deft_copy_strided(deft_device_t dev, const deft_shape_t *shape, void *dst,
                      const int64_t *dst_strides, const void *src, const int64_t *src_strides,
                      size_t elem);

/* The first step of an operator that may run in place (inplace_input 0):
 * dst takes src's bytes unless it is src itself. -1 when the copy fails. */
int deft_copy_unless_same(const deft_tensor_t *dst, const deft_tensor_t *src);

#endif
