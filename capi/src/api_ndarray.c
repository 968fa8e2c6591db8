/* NDArray handles: creation, host copies, metadata, waiting and release. */
#include <stdio.h>
#include <stdlib.h>

#include "capi/src/api.h"
#include "core/imperative/view.h"
#include "core/imperative/dlpack.h"
#include "core/imperative/invoke.h"
#include "core/op/registry.h"

int api_ndarray_wrap(deft_ndarray_t *arr, DeftNDArrayHandle *out) {
    DeftNDArrayHandle handle = deft_handle_new(DEFT_HANDLE_NDARRAY, arr);
    if (!handle) {
        deft_ndarray_release(arr);
        return -1;
    }
    *out = handle;
    return 0;
}

/* Validate the creation arguments shared by both Create functions. */
static int new_array(const int64_t *shape, int ndim, int dtype, int dev_type, int dev_id, bool zero,
                     deft_ndarray_t **out) {
    deft_shape_t s;
    deft_device_t dev;
    if (deft_shape_init(&s, shape, ndim, "shape") || deft_dtype_check(dtype, "dtype") ||
        deft_device_check(dev_type, dev_id, "device", &dev))
        return -1;
    return deft_ndarray_new(&s, (deft_dtype_t)dtype, dev, zero, out);
}

int DeftNDArrayCreate(const int64_t *shape, int ndim, int dtype, int dev_type, int dev_id,
                      DeftNDArrayHandle *out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_check_out(out, "out") || new_array(shape, ndim, dtype, dev_type, dev_id, true, &arr))
        return -1;
    return api_ndarray_wrap(arr, out);
}

int DeftNDArrayCreateFromData(const int64_t *shape, int ndim, int dtype, int dev_type, int dev_id,
                              const void *data, size_t nbytes, DeftNDArrayHandle *out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_check_out(out, "out") || new_array(shape, ndim, dtype, dev_type, dev_id, false, &arr))
        return -1;
    if (deft_ndarray_copy_from_host(arr, data, nbytes)) {
        deft_ndarray_release(arr);
        return -1;
    }
    return api_ndarray_wrap(arr, out);
}

int DeftNDArrayView(DeftNDArrayHandle handle, int64_t offset, const int64_t *shape, int ndim,
                    DeftNDArrayHandle *out) {
    API_BEGIN();
    deft_ndarray_t *arr, *view;
    deft_shape_t s;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out") ||
        deft_shape_init(&s, shape, ndim, "shape") || deft_ndarray_view(arr, offset, &s, &view))
        return -1;
    return api_ndarray_wrap(view, out);
}

int DeftNDArrayStridedView(DeftNDArrayHandle handle, int64_t offset, const int64_t *shape,
                           const int64_t *strides, int ndim, DeftNDArrayHandle *out) {
    API_BEGIN();
    deft_ndarray_t *arr, *view;
    deft_shape_t s;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out") ||
        deft_shape_init(&s, shape, ndim, "shape"))
        return -1;
    if (ndim > 0 && !strides)
        return deft_error(DEFT_ERR_VALUE, "strides is NULL, expected %d element steps", ndim);
    if (deft_ndarray_strided_view(arr, offset, &s, strides, &view)) return -1;
    return api_ndarray_wrap(view, out);
}

int DeftNDArrayGetLayout(DeftNDArrayHandle handle, int64_t *strides, int64_t *offset,
                         int *is_view) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(strides, "strides") ||
        api_check_out(offset, "offset"))
        return -1;
    deft_ndarray_layout(arr, strides, offset);
    if (is_view) *is_view = deft_ndarray_is_strided(arr);
    return 0;
}

int DeftNDArrayPinMemory(DeftNDArrayHandle handle, DeftNDArrayHandle *out) {
    API_BEGIN();
    deft_ndarray_t *arr, *pinned;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out") ||
        deft_ndarray_pinned_copy(arr, &pinned))
        return -1;
    return api_ndarray_wrap(pinned, out);
}

int DeftNDArrayIsPinned(DeftNDArrayHandle handle, int *out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out")) return -1;
    *out = deft_ndarray_is_pinned(arr);
    return 0;
}

int DeftNDArrayToDLPack(DeftNDArrayHandle handle, DLManagedTensor **out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out")) return -1;
    return deft_dlpack_export(arr, out);
}

int DeftNDArrayFromDLPack(DLManagedTensor *tensor, DeftNDArrayHandle *out) {
    API_BEGIN();
    if (!tensor) return deft_error(DEFT_ERR_VALUE, "tensor is NULL, expected a DLPack tensor");
    deft_ndarray_t *arr;
    if (api_check_out(out, "out") || deft_dlpack_import(tensor, &arr)) return -1;
    DeftNDArrayHandle handle = deft_handle_new(DEFT_HANDLE_NDARRAY, arr);
    if (!handle) {
        deft_dlpack_abandon(arr); /* failed: the caller keeps the tensor */
        return -1;
    }
    *out = handle;
    return 0;
}

int DeftNDArrayCopyToHost(DeftNDArrayHandle handle, void *data, size_t nbytes) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr)) return -1;
    return deft_ndarray_copy_to_host(arr, data, nbytes);
}

int DeftNDArrayCopyFromHost(DeftNDArrayHandle handle, const void *data, size_t nbytes) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr)) return -1;
    return deft_ndarray_copy_from_host(arr, data, nbytes);
}

int DeftNDArrayCopyTo(DeftNDArrayHandle src, DeftNDArrayHandle dst) {
    API_BEGIN();
    deft_ndarray_t *from, *to;
    if (api_ndarray(src, "src", &from) || api_ndarray(dst, "dst", &to)) return -1;
    int nout = 1;
    return deft_invoke(deft_registry_find("_copyto"), 1, &from, &nout, &to, 0, NULL, NULL);
}

int DeftNDArrayGetNDim(DeftNDArrayHandle handle, int *out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out")) return -1;
    *out = arr->tensor.shape.ndim;
    return 0;
}

int DeftNDArrayGetShape(DeftNDArrayHandle handle, int64_t *out_shape, int capacity, int *out_ndim) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out_shape, "out_shape") ||
        api_check_out(out_ndim, "out_ndim"))
        return -1;
    const deft_shape_t *shape = &arr->tensor.shape;
    if (capacity < shape->ndim)
        return deft_error(DEFT_ERR_VALUE, "capacity is %d, but the array has %d dimensions",
                          capacity, shape->ndim);
    for (int i = 0; i < shape->ndim; i++) out_shape[i] = shape->dims[i];
    *out_ndim = shape->ndim;
    return 0;
}

int DeftNDArrayGetSize(DeftNDArrayHandle handle, int64_t *out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out")) return -1;
    *out = deft_shape_size(&arr->tensor.shape);
    return 0;
}

int DeftNDArrayGetNBytes(DeftNDArrayHandle handle, size_t *out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out")) return -1;
    *out = deft_tensor_nbytes(&arr->tensor);
    return 0;
}

int DeftNDArrayGetDType(DeftNDArrayHandle handle, int *out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out")) return -1;
    *out = (int)arr->tensor.dtype;
    return 0;
}

int DeftNDArrayGetDevice(DeftNDArrayHandle handle, int *out_type, int *out_id) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out_type, "out_type") ||
        api_check_out(out_id, "out_id"))
        return -1;
    *out_type = (int)arr->tensor.device.type;
    *out_id = arr->tensor.device.id;
    return 0;
}

int DeftNDArrayWaitToRead(DeftNDArrayHandle handle) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr)) return -1;
    return deft_ndarray_wait_to_read(arr);
}

int DeftNDArrayWaitToWrite(DeftNDArrayHandle handle) {
    API_BEGIN();
    deft_ndarray_t *arr;
    if (api_ndarray(handle, "handle", &arr)) return -1;
    return deft_ndarray_wait_to_write(arr);
}

int DeftWaitAll(void) {
    API_BEGIN();
    return deft_engine_wait_all(); /* which also waits for the devices */
}

int DeftShutdown(void) {
    API_BEGIN();
    if (deft_engine_inside_work())
        return deft_error(DEFT_ERR_VALUE,
                          "cannot shut down from inside an engine operation or an operator's "
                          "callback: shutting down waits for that operation");
    deft_engine_shutdown();
    return 0;
}

int DeftSetBlockingHooks(DeftBlockingReleaseFn release, DeftBlockingReacquireFn reacquire) {
    API_BEGIN();
    if (!release != !reacquire)
        return deft_error(DEFT_ERR_VALUE, "release is %s but reacquire is %s: give both or neither",
                          release ? "set" : "NULL", reacquire ? "set" : "NULL");
    deft_engine_set_block_hooks(release, reacquire);
    return 0;
}

int DeftNDArrayFree(DeftNDArrayHandle handle) {
    API_BEGIN();
    if (!handle) return 0;
    void *object;
    if (deft_handle_retire(handle, DEFT_HANDLE_NDARRAY, "handle", &object)) return -1;
    deft_ndarray_release(object);
    return 0;
}

/* Apart, so that the loop on the dispatch path keeps no buffer for the name. */
__attribute__((cold, noinline)) int api_bad_ndarray(const DeftNDArrayHandle *handles, int i,
                                                    const char *what, deft_ndarray_t **out) {
    char name[48];
    snprintf(name, sizeof name, "%s[%d]", what, i);
    return api_ndarray(handles[i], name, out);
}

int api_ndarray_list(const DeftNDArrayHandle *handles, int n, const char *what, bool allow_null,
                     deft_ndarray_t ***out) {
    *out = NULL;
    if (n < 0 || (n > 0 && !handles))
        return deft_error(DEFT_ERR_VALUE, "%s is %p with count %d, expected an array of handles",
                          what, (const void *)handles, n);
    deft_ndarray_t **arrays = calloc((size_t)n + 1, sizeof *arrays);
    if (!arrays) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate %s", what);
    *out = arrays;
    return api_ndarrays(handles, n, what, allow_null, arrays);
}

int api_with_arrays(const DeftNDArrayHandle *handles, int n, const char *what,
                    int (*fn)(int n, deft_ndarray_t *const *arrays)) {
    deft_ndarray_t **arrays = NULL;
    int status = api_ndarray_list(handles, n, what, false, &arrays) || fn(n, arrays);
    free(arrays);
    return status ? -1 : 0;
}
