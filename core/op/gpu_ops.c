#include "core/op/gpu_ops.h"

#include "core/base/error.h"

int deft_gpu_run_strided(deft_strided_t *it, deft_gpu_fn_t fn, const deft_dtype_t *dtypes,
                         const double *scalars, int dev) {
    deft_gpu_map_t map;
    deft_strided_to_gpu_map(it, fn, dtypes, scalars, &map);
    return deft_gpu_map(dev, &map);
}

int deft_gpu_check_map(const deft_op_t *op, deft_gpu_fn_t fn, deft_dtype_t dtype) {
    if (deft_gpu_map_supports(fn, dtype)) return 0;
    return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                         "has no GPU kernel for %s (its function %s); copy the input to the CPU "
                         "first",
                         deft_dtype_name(dtype), deft_gpu_fn_name(fn));
}

int deft_gpu_elementwise(deft_gpu_fn_t fn, const deft_tensor_t *out, int nin,
                         const deft_tensor_t *const *in, const double *scalars) {
    if (nin + 1 > DEFT_STRIDED_MAX_OPS)
        return deft_error(DEFT_ERR_INTERNAL, "a GPU map of %d inputs (at most %d)", nin,
                          DEFT_STRIDED_MAX_OPS - 1);
    deft_strided_t it;
    deft_dtype_t dtypes[DEFT_STRIDED_MAX_OPS] = {out->dtype};
    static const int64_t broadcast_scalar[DEFT_SHAPE_MAX_NDIM] = {0};
    deft_strided_init(&it, &out->shape, 1 + nin);
    deft_strided_set_dense(&it, 0, out);
    for (int i = 0; i < nin; i++) {
        if (in[i]) {
            deft_strided_set_broadcast(&it, 1 + i, in[i]);
            dtypes[1 + i] = in[i]->dtype;
        } else {
            deft_strided_set(&it, 1 + i, NULL, deft_dtype_size(out->dtype), broadcast_scalar);
            dtypes[1 + i] = out->dtype;
        }
    }
    return deft_gpu_run_strided(&it, fn, dtypes, scalars, deft_gpu_of(out));
}

int deft_gpu_read_element(const deft_tensor_t *t, int64_t i, void *out) {
    size_t size = deft_dtype_size(t->dtype);
    return deft_device_copy(out, deft_device_cpu(),
                            (const char *)deft_tensor_data(t) + i * (int64_t)size, t->device, size);
}

void deft_gpu_reduce_layout(const deft_shape_t *x, uint32_t reduced, deft_gpu_reduce_t *r) {
    int64_t own[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(x, own);
    r->ndim = r->nkept = 0;
    r->outer = r->span = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < x->ndim; d++) {
            if (((reduced >> d) & 1u) != (pass == 1)) continue;
            r->dims[r->ndim] = x->dims[d];
            r->strides[r->ndim++] = own[d];
            if (pass == 0)
                r->nkept = r->ndim, r->outer *= x->dims[d];
            else
                r->span *= x->dims[d];
        }
}
