/* Conversions and copy loops shared by the CPU kernels. */
#include "core/op/kernel.h"

#include <string.h>

#include "core/op/strided.h"

/* IEEE half <-> float, by bit manipulation (round to nearest even). */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int shift = 0;
        while (!(man & 0x400)) man <<= 1, shift++;
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((man & 0x3FF) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Round to nearest even, after Fabian Giesen's float_to_half_fast3_rtne. */
static uint16_t float_to_half(float f) {
    const uint32_t infinity = 255u << 23, half_max = (127u + 16) << 23;
    const uint32_t denorm_magic = ((127u - 15) + (23 - 10) + 1) << 23;
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = x & 0x80000000u;
    x ^= sign;
    uint16_t h;
    if (x >= half_max) {
        h = x > infinity ? 0x7E00 : 0x7C00;
    } else if (x < (113u << 23)) { /* subnormal or zero: let the FPU round */
        float fx, magic;
        memcpy(&fx, &x, sizeof fx);
        memcpy(&magic, &denorm_magic, sizeof magic);
        fx += magic;
        uint32_t r;
        memcpy(&r, &fx, sizeof r);
        h = (uint16_t)(r - denorm_magic);
    } else {
        uint32_t odd = (x >> 13) & 1;
        x += ((uint32_t)(15 - 127) << 23) + 0xFFF + odd;
        h = (uint16_t)(x >> 13);
    }
    return (uint16_t)(h | (sign >> 16));
}

static float bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint16_t float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7FFF + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double deft_load_double(const void *base, deft_dtype_t dtype, int64_t i) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        return ((const float *)base)[i];
    case DEFT_DT_FLOAT64:
        return ((const double *)base)[i];
    case DEFT_DT_FLOAT16:
        return half_to_float(((const uint16_t *)base)[i]);
    case DEFT_DT_BFLOAT16:
        return bf16_to_float(((const uint16_t *)base)[i]);
    case DEFT_DT_UINT8:
        return ((const uint8_t *)base)[i];
    case DEFT_DT_INT8:
        return ((const int8_t *)base)[i];
    case DEFT_DT_INT32:
        return ((const int32_t *)base)[i];
    case DEFT_DT_INT64:
        return (double)((const int64_t *)base)[i];
    case DEFT_DT_BOOL:
        return ((const uint8_t *)base)[i] != 0;
    }
    return 0;
}

void deft_store_double(void *base, deft_dtype_t dtype, int64_t i, double v) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        ((float *)base)[i] = (float)v;
        break;
    case DEFT_DT_FLOAT64:
        ((double *)base)[i] = v;
        break;
    case DEFT_DT_FLOAT16:
        ((uint16_t *)base)[i] = float_to_half((float)v);
        break;
    case DEFT_DT_BFLOAT16:
        ((uint16_t *)base)[i] = float_to_bf16((float)v);
        break;
    case DEFT_DT_UINT8:
        ((uint8_t *)base)[i] = deft_to_u8(v);
        break;
    case DEFT_DT_INT8:
        ((int8_t *)base)[i] = deft_to_i8(v);
        break;
    case DEFT_DT_INT32:
        ((int32_t *)base)[i] = deft_to_i32(v);
        break;
    case DEFT_DT_INT64:
        ((int64_t *)base)[i] = deft_to_i64(v);
        break;
    case DEFT_DT_BOOL:
        ((uint8_t *)base)[i] = v != 0;
        break;
    }
}

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

void deft_copy_strided(const deft_shape_t *shape, void *dst, const int64_t *dst_strides,
                       const void *src, const int64_t *src_strides, size_t elem) {
    deft_strided_t it;
    int64_t dense[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(shape, dense);
    deft_strided_init(&it, shape, 2);
    deft_strided_set(&it, 0, dst, elem, dst_strides ? dst_strides : dense);
    deft_strided_set(&it, 1, (void *)src, elem, src_strides ? src_strides : dense);
    deft_strided_run(&it, deft_copy_loop(elem), NULL);
}
