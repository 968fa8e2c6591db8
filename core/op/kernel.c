/* Conversions and copy loops shared by the CPU kernels. */
#include "core/op/kernel.h"

#include <string.h>

#include "core/op/strided.h"

#define COPY_LOOP(T)                                                                               \
    static void copy_##T(const void *ctx, char *const *p, const int64_t *s, int64_t n) {           \
        (void)ctx;                                                                                 \
        T *y = (T *)p[0];                                                                          \
        const T *x = (const T *)p[1];                                                              \
        if (s[0] == 1 && s[1] == 1) {                                                              \
            memcpy(y, x, (size_t)n * sizeof(T));                                                   \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) y[i * s[0]] = x[i * s[1]];                             \
        }                                                                                          \
    }
COPY_LOOP(uint8_t)
COPY_LOOP(uint16_t)
COPY_LOOP(uint32_t)
COPY_LOOP(uint64_t)

deft_copy_fn deft_copy_loop(size_t elem) {
    switch (elem) {
    case 1:
        return copy_uint8_t;
    case 2:
        return copy_uint16_t;
    case 4:
        return copy_uint32_t;
    default:
        return copy_uint64_t;
    }
}

int deft_copy_strided(deft_device_t dev, const deft_shape_t *shape, void *dst,
                      const int64_t *dst_strides, const void *src, const int64_t *src_strides,
                      size_t elem) {
    deft_strided_t it;
    int64_t dense[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(shape, dense);
    deft_strided_init(&it, shape, 2);
    deft_strided_set(&it, 0, dst, elem, dst_strides ? dst_strides : dense);
    deft_strided_set(&it, 1, (void *)src, elem, src_strides ? src_strides : dense);
#ifdef DEFT_HAVE_CUDA
    if (dev.type == DEFT_DEV_GPU) { /* a copy reads only element sizes: any dtype of that size */
        deft_dtype_t of_size = elem == 1   ? DEFT_DT_UINT8
                               : elem == 2 ? DEFT_DT_FLOAT16
                               : elem == 4 ? DEFT_DT_FLOAT32
                                           : DEFT_DT_FLOAT64;
        const deft_dtype_t dtypes[2] = {of_size, of_size};
        deft_gpu_map_t map;
        deft_strided_to_gpu_map(&it, DEFT_GPU_FN_COPY, dtypes, NULL, &map);
        return deft_gpu_map(dev.id, &map);
    }
#else
    (void)dev;
#endif
    deft_strided_run(&it, deft_copy_loop(elem), NULL);
    return 0;
}

int deft_copy_unless_same(const deft_tensor_t *dst, const deft_tensor_t *src) {
    void *to = deft_tensor_data(dst);
    const void *from = deft_tensor_data(src);
    return to == from
               ? 0
               : deft_device_copy(to, dst->device, from, src->device, deft_tensor_nbytes(src));
}
