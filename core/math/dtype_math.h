/*
 * Conversions between dtypes, written once for every backend like
 * scalar_math.h: the CPU kernels include this as plain C and the CUDA
 * kernels with DEFT_DEVICE_FN set to __host__ __device__, so a cast on the
 * GPU rounds and saturates exactly as on the CPU.
 */
#ifndef DEFT_CORE_DTYPE_MATH_H
#define DEFT_CORE_DTYPE_MATH_H

#include <stdint.h>
#include <string.h>

#include "core/base/dtype.h"
#include "core/math/device_fn.h"

/* double -> integer without undefined behaviour: NaN is 0, out of range saturates. */
#define DEFT_DEFINE_SATURATE(name, T, lo, hi)                                                      \
    DEFT_DEVICE_FN T name(double x) {                                                              \
        if (x != x) return 0;                                                                      \
        if (x <= (double)(lo)) return (lo);                                                        \
        if (x >= (double)(hi)) return (hi);                                                        \
        return (T)x;                                                                               \
    }
DEFT_DEFINE_SATURATE(deft_to_i32, int32_t, INT32_MIN, INT32_MAX)
DEFT_DEFINE_SATURATE(deft_to_i64, int64_t, INT64_MIN, INT64_MAX)
DEFT_DEFINE_SATURATE(deft_to_u8, uint8_t, 0, UINT8_MAX)
DEFT_DEFINE_SATURATE(deft_to_i8, int8_t, INT8_MIN, INT8_MAX)

/* Read element i of a buffer of any dtype as double, and write one back. */
/* IEEE half <-> float, by bit manipulation (round to nearest even). */
DEFT_DEVICE_FN float deft_half_to_float(uint16_t h) {
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
DEFT_DEVICE_FN uint16_t deft_float_to_half(float f) {
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

DEFT_DEVICE_FN float deft_bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

DEFT_DEVICE_FN uint16_t deft_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7FFF + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

DEFT_DEVICE_FN double deft_load_double(const void *base, deft_dtype_t dtype, int64_t i) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        return ((const float *)base)[i];
    case DEFT_DT_FLOAT64:
        return ((const double *)base)[i];
    case DEFT_DT_FLOAT16:
        return deft_half_to_float(((const uint16_t *)base)[i]);
    case DEFT_DT_BFLOAT16:
        return deft_bf16_to_float(((const uint16_t *)base)[i]);
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

DEFT_DEVICE_FN void deft_store_double(void *base, deft_dtype_t dtype, int64_t i, double v) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        ((float *)base)[i] = (float)v;
        break;
    case DEFT_DT_FLOAT64:
        ((double *)base)[i] = v;
        break;
    case DEFT_DT_FLOAT16:
        ((uint16_t *)base)[i] = deft_float_to_half((float)v);
        break;
    case DEFT_DT_BFLOAT16:
        ((uint16_t *)base)[i] = deft_float_to_bf16((float)v);
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

#endif
