#include "core/imperative/view.h"

#include <stdlib.h>

#include "core/base/error.h"
#include "core/imperative/autograd.h"
#include "core/imperative/deferred.h"
#include "core/imperative/invoke.h"
#include "core/op/kernel.h"
#include "core/op/registry.h"
#include "core/op/strided.h"

void deft_ndarray_layout(const deft_ndarray_t *arr, int64_t *strides, int64_t *offset) {
    const deft_view_link_t *link = arr->link;
    int ndim = arr->tensor.shape.ndim;
    if (link) {
        for (int d = 0; d < ndim; d++) strides[d] = link->strides[d];
        *offset = link->offset;
    } else {
        deft_contiguous_strides(&arr->tensor.shape, strides);
        *offset = 0;
    }
}

/* Whether the view's elements are one dense run (then a plain view does). */
static bool dense(const deft_shape_t *shape, const int64_t *strides) {
    int64_t want = 1;
    for (int d = shape->ndim - 1; d >= 0; d--) {
        if (shape->dims[d] != 1 && strides[d] != want) return false;
        want *= shape->dims[d];
    }
    return true;
}

/* The first and last root elements the view reaches (none when it is empty). */
static int check_window(const deft_ndarray_t *root, int64_t offset, const deft_shape_t *shape,
                        const int64_t *strides) {
    int64_t lo = offset, hi = offset, size = deft_shape_size(&root->tensor.shape);
    if (deft_shape_size(shape) == 0) return 0;
    for (int d = 0; d < shape->ndim; d++) {
        int64_t reach = (shape->dims[d] - 1) * strides[d];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    if (lo >= 0 && hi < size) return 0;
    char text[DEFT_SHAPE_STR_MAX];
    return deft_error(DEFT_ERR_INDEX,
                      "a strided view reaching elements %lld to %lld does not fit in an array of "
                      "%lld elements (shape %s)",
                      (long long)lo, (long long)hi, (long long)size,
                      deft_shape_format(&root->tensor.shape, text, sizeof text));
}

int deft_ndarray_strided_view(deft_ndarray_t *arr, int64_t offset, const deft_shape_t *shape,
                              const int64_t *strides, deft_ndarray_t **out) {
    if (deft_ndarray_is_lazy(arr))
        return deft_error(DEFT_ERR_VALUE, "the array is lazy (deferred compute): it has no "
                                          "storage to view until it is computed");
    if (arr->tensor.device.type != DEFT_DEV_CPU)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "strided views are CPU arrays; copy a window of a GPU array instead");
    deft_ndarray_t *root = arr->link ? arr->link->root : arr;
    if (check_window(root, offset, shape, strides)) return -1;
    if (dense(shape, strides)) return deft_ndarray_view(root, offset, shape, out);
    deft_view_link_t *link = malloc(sizeof *link);
    if (!link) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a view");
    *link = (deft_view_link_t){.offset = offset};
    for (int d = 0; d < shape->ndim; d++) link->strides[d] = strides[d];
    deft_ndarray_t *buffer;
    if (deft_ndarray_alias(root, &link->root)) {
        free(link);
        return -1;
    }
    if (deft_ndarray_new(shape, root->tensor.dtype, root->tensor.device, false, &buffer)) {
        deft_ndarray_release(link->root);
        free(link);
        return -1;
    }
    /* The view works on the root's variable: its own goes. */
    deft_var_release(buffer->var);
    buffer->var = deft_var_retain(root->var);
    buffer->link = link;
    *out = buffer;
    return 0;
}

static void *root_first(const deft_view_link_t *link) {
    const deft_tensor_t *t = &link->root->tensor;
    return (char *)deft_tensor_data(t) + link->offset * (int64_t)deft_dtype_size(t->dtype);
}

void deft_view_gather(const deft_ndarray_t *view) {
    const deft_tensor_t *t = &view->tensor;
    deft_copy_strided(t->device, &t->shape, deft_tensor_data(t), NULL, root_first(view->link),
                      view->link->strides, deft_dtype_size(t->dtype));
}

void deft_view_scatter(const deft_ndarray_t *view) {
    const deft_tensor_t *t = &view->tensor;
    deft_copy_strided(t->device, &t->shape, root_first(view->link), view->link->strides,
                      deft_tensor_data(t), NULL, deft_dtype_size(t->dtype));
    deft_ndarray_touch(view->link->root);
}

int deft_view_copy_to_host(deft_ndarray_t *view, void *data) {
    if (deft_ndarray_wait_to_read(view)) return -1;
    const deft_tensor_t *t = &view->tensor;
    return deft_copy_strided(t->device, &t->shape, data, NULL, root_first(view->link),
                             view->link->strides, deft_dtype_size(t->dtype));
}

int deft_view_copy_from_host(deft_ndarray_t *view, const void *data) {
    if (deft_ndarray_wait_to_write(view)) return -1;
    const deft_tensor_t *t = &view->tensor;
    deft_ndarray_touch(view->link->root);
    return deft_copy_strided(t->device, &t->shape, root_first(view->link), view->link->strides,
                             data, NULL, deft_dtype_size(t->dtype));
}

/* A dense copy of a view, made as an ordinary imperative call (which
 * gathers), neither recorded nor deferred: it is where a recording starts. */
static int dense_copy(deft_ndarray_t *view, deft_ndarray_t **out) {
    static const deft_op_entry_t *copy;
    if (!copy && !(copy = deft_registry_find("_copy")))
        return deft_error(DEFT_ERR_INTERNAL, "the _copy operator is not registered");
    bool was_deferred, was_recording;
    deft_deferred_set(false, &was_deferred);
    deft_autograd_set_recording(false, &was_recording);
    int nout = 1;
    *out = NULL;
    int status = deft_invoke(copy, 1, &view, &nout, out, 0, NULL, NULL);
    deft_autograd_set_recording(was_recording, NULL);
    deft_deferred_set(was_deferred, NULL);
    return status;
}

int deft_dense_inputs(int n, deft_ndarray_t *const *in, deft_ndarray_t **room) {
    for (int i = 0; i < n; i++) {
        room[i] = in[i];
        if (!in[i] || !in[i]->link) continue;
        if (dense_copy(in[i], &room[i])) {
            room[i] = in[i];
            deft_release_dense(i, in, room);
            return -1;
        }
    }
    return 0;
}

void deft_release_dense(int n, deft_ndarray_t *const *in, deft_ndarray_t **room) {
    for (int i = 0; i < n; i++)
        if (room[i] != in[i]) deft_ndarray_release(room[i]);
}

int deft_check_no_views(int n, deft_ndarray_t *const *arrays, const char *what, const char *why) {
    for (int i = 0; i < n; i++)
        if (arrays[i] && arrays[i]->link)
            return deft_error(DEFT_ERR_VALUE, "%s[%d] is a strided view: %s (copy it first)", what,
                              i, why);
    return 0;
}
