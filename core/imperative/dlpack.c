/*
 * DLPack exchange. deft arrays are dense row-major buffers at an offset in
 * their storage, so an export is always compact, and an import accepts only
 * compact tensors (strides NULL or row-major) whose data is aligned for their
 * dtype: anything else would need a copy, which the caller can make more
 * cheaply on its own side. CUDA
 * tensors cross too: an export waits for deft's stream, an import for the
 * whole device, since the producer works on streams deft does not know.
 */
#include "core/imperative/dlpack.h"
#include "core/imperative/view.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/op/strided.h"

typedef struct export_ctx {
    DLManagedTensor managed;
    deft_ndarray_t *arr; /* the reference the consumer holds */
    int64_t shape[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM];
} export_ctx_t;

/* deft dtype code <-> DLPack (code, bits); lanes are always 1. */
static const struct {
    deft_dtype_t dtype;
    uint8_t code, bits;
} dtype_map[] = {
    {DEFT_DT_FLOAT32, kDLFloat, 32}, {DEFT_DT_FLOAT64, kDLFloat, 64},
    {DEFT_DT_FLOAT16, kDLFloat, 16}, {DEFT_DT_BFLOAT16, kDLBfloat, 16},
    {DEFT_DT_UINT8, kDLUInt, 8},     {DEFT_DT_INT8, kDLInt, 8},
    {DEFT_DT_INT32, kDLInt, 32},     {DEFT_DT_INT64, kDLInt, 64},
    {DEFT_DT_BOOL, kDLUInt, 8},
};
enum { DTYPE_COUNT = sizeof dtype_map / sizeof dtype_map[0] };

static void export_deleter(DLManagedTensor *managed) {
    export_ctx_t *ctx = managed->manager_ctx;
    deft_ndarray_release(ctx->arr);
    free(ctx);
}

int deft_dlpack_export(deft_ndarray_t *arr, DLManagedTensor **out) {
    /* the consumer reads on streams of its own: the data must be there already */
    if (deft_ndarray_wait_to_read(arr)) return -1;
    const deft_tensor_t *t = &arr->tensor;
    int m = 0;
    while (m < DTYPE_COUNT && dtype_map[m].dtype != t->dtype) m++;
    if (m == DTYPE_COUNT)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "dtype %s has no DLPack equivalent",
                          deft_dtype_name(t->dtype));
    export_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a DLPack tensor");
    /* A strided view lends the root's elements, with its strides (view.h). */
    int64_t first;
    deft_ndarray_layout(arr, ctx->strides, &first);
    const deft_tensor_t *lent = arr->link ? &arr->link->root->tensor : t;
    for (int d = 0; d < t->shape.ndim; d++) ctx->shape[d] = t->shape.dims[d];
    ctx->arr = deft_ndarray_retain(arr);
    atomic_store_explicit(&lent->storage->shared, true, memory_order_relaxed);
    ctx->managed.manager_ctx = ctx;
    ctx->managed.deleter = export_deleter;
    ctx->managed.dl_tensor = (DLTensor){
        .data = lent->storage->data,
        .device = {(DLDeviceType)t->device.type, t->device.id},
        .ndim = t->shape.ndim,
        .dtype = {dtype_map[m].code, dtype_map[m].bits, 1},
        .shape = ctx->shape,
        .strides = ctx->strides,
        .byte_offset = lent->offset + (uint64_t)first * deft_dtype_size(t->dtype),
    };
    *out = &ctx->managed;
    return 0;
}

static void import_deleter(void *arg) {
    DLManagedTensor *managed = arg;
    if (managed->deleter) managed->deleter(managed);
}

static void keep_lent(void *arg) {
    (void)arg;
}

static int import_dtype(DLDataType dt, deft_dtype_t *out) {
    for (int m = 0; m < DTYPE_COUNT; m++) {
        /* uint8 maps to deft uint8, not bool: the first match wins */
        if (dtype_map[m].code == dt.code && dtype_map[m].bits == dt.bits && dt.lanes == 1) {
            *out = dtype_map[m].dtype;
            return 0;
        }
    }
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                      "DLPack dtype (code %u, %u bits, %u lanes) has no deft equivalent",
                      (unsigned)dt.code, (unsigned)dt.bits, (unsigned)dt.lanes);
}

/* Shape checked (its element count too, before anything multiplies it out)
 * and copied; strides must describe a compact row-major layout. */
static int import_shape(const DLTensor *dl, deft_shape_t *shape) {
    int64_t count;
    if (deft_shape_init(shape, dl->shape, dl->ndim, "shape") || deft_shape_count(shape, &count))
        return -1;
    if (!dl->strides || count == 0) return 0;
    int64_t compact[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(shape, compact);
    for (int d = 0; d < dl->ndim; d++)
        if (dl->strides[d] != compact[d] && shape->dims[d] != 1)
            return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                              "the tensor is not compact row-major (dimension %d has stride %lld, "
                              "expected %lld); make a contiguous copy first",
                              d, (long long)dl->strides[d], (long long)compact[d]);
    return 0;
}

/* data + byte_offset must address whole elements: deft's kernels (CPU and
 * GPU) load elements of their dtype's size, which a misaligned address
 * makes undefined or slow. Such a tensor is refused rather than copied,
 * as a strided one is: the producer can make an aligned copy. */
static int check_aligned(const DLTensor *dl, deft_dtype_t dtype) {
    uintptr_t at = (uintptr_t)dl->data;
    size_t elem = deft_dtype_size(dtype);
    if (dl->byte_offset > UINTPTR_MAX - at)
        return deft_error(DEFT_ERR_VALUE, "data %p + byte_offset %llu is past the address space",
                          dl->data, (unsigned long long)dl->byte_offset);
    if ((at + dl->byte_offset) % elem != 0)
        return deft_error(DEFT_ERR_VALUE,
                          "data %p + byte_offset %llu leaves the data misaligned for %s (%zu-byte "
                          "elements); deft imports only aligned tensors: make an aligned copy "
                          "first",
                          dl->data, (unsigned long long)dl->byte_offset, deft_dtype_name(dtype),
                          elem);
    return 0;
}

int deft_dlpack_import(DLManagedTensor *managed, deft_ndarray_t **out) {
    const DLTensor *dl = &managed->dl_tensor;
    if (dl->device.device_type != kDLCPU && dl->device.device_type != kDLCUDA)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "the tensor is on DLPack device type %d; deft imports CPU (1) and CUDA "
                          "(2) tensors",
                          (int)dl->device.device_type);
    deft_tensor_t t = {.offset = 0};
    size_t nbytes;
    if (deft_device_check((int)dl->device.device_type, dl->device.device_id, "the tensor's device",
                          &t.device) ||
        deft_device_synchronize(t.device, true) || /* the producer's writes, on its streams */
        import_dtype(dl->dtype, &t.dtype) || import_shape(dl, &t.shape) ||
        deft_shape_nbytes(&t.shape, deft_dtype_size(t.dtype), &nbytes))
        return -1;
    if (nbytes && !dl->data) return deft_error(DEFT_ERR_VALUE, "the tensor's data is NULL");
    if (nbytes && check_aligned(dl, t.dtype)) return -1;
    char *data = nbytes ? (char *)dl->data + dl->byte_offset : NULL;
    if (deft_storage_wrap(t.device, data, nbytes, import_deleter, managed, &t.storage)) return -1;
    if (deft_ndarray_from_tensor(&t, out) == 0) return 0;
    t.storage->external_free = keep_lent; /* failed: the caller still owns the tensor */
    deft_storage_release(t.storage);
    return -1;
}

void deft_dlpack_abandon(deft_ndarray_t *arr) {
    arr->tensor.storage->external_free = keep_lent;
    deft_ndarray_release(arr);
}
