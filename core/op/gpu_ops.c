#include "core/op/gpu_ops.h"

#include "core/base/error.h"

int deft_gpu_run_strided(deft_strided_t *it, deft_gpu_fn_t fn, const deft_dtype_t *dtypes,
                         const double *scalars, int dev) {
    deft_gpu_map_t map;
    deft_strided_to_gpu_map(it, fn, dtypes, scalars, &map);
    return deft_gpu_map(dev, &map);
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
