/*
 * Tensor: what a kernel sees of an array, a typed, shaped window on storage.
 * Kernels in core/op take tensors; NDArray (core/imperative) adds the
 * reference count, engine variable and graph entry around one.
 */
#ifndef DEFT_CORE_TENSOR_H
#define DEFT_CORE_TENSOR_H

#include "core/base/device.h"
#include "core/base/dtype.h"
#include "core/base/shape.h"
#include "core/base/storage.h"

typedef struct deft_tensor {
    deft_shape_t shape;
    deft_dtype_t dtype;
    deft_device_t device;
    deft_storage_t *storage; /* one reference held by whoever owns the tensor */
    size_t offset;           /* bytes from storage->data to element 0 */
} deft_tensor_t;

static inline void *deft_tensor_data(const deft_tensor_t *t) {
    return t->storage->data ? (char *)t->storage->data + t->offset : NULL;
}

/* Byte size of a tensor whose shape was validated when it was made. */
static inline size_t deft_tensor_nbytes(const deft_tensor_t *t) {
    return (size_t)deft_shape_size(&t->shape) * deft_dtype_size(t->dtype);
}

#endif
