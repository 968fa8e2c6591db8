/* Arrays for the fuzz targets: small shapes decoded from the fuzzer's bytes,
 * and contents in a few patterns (zeros, small integers, a ramp, special
 * values, raw bytes), for every dtype deft has. */
#ifndef DEFT_TESTS_FUZZ_ARRAYS_H
#define DEFT_TESTS_FUZZ_ARRAYS_H

#include <math.h>
#include <stdbool.h>

#include "fuzz_common.h"

/* The most elements a harness gives one array, so that runs stay fast. */
#define FUZZ_MAX_ELEMENTS 4096

static const int fuzz_dtypes[] = {DEFT_FLOAT32, DEFT_FLOAT64, DEFT_FLOAT16, DEFT_BFLOAT16,
                                  DEFT_INT32,   DEFT_INT64,   DEFT_UINT8,   DEFT_INT8,
                                  DEFT_BOOL};
#define FUZZ_NUM_DTYPES ((int)(sizeof fuzz_dtypes / sizeof fuzz_dtypes[0]))

enum { FUZZ_FILL_ZEROS, FUZZ_FILL_SMALL_INTS, FUZZ_FILL_RAMP, FUZZ_FILL_SPECIAL, FUZZ_FILL_BYTES,
       FUZZ_FILL_ONES, FUZZ_NUM_FILLS };

/* A shape: ndim in [0, 9] (9 is one more than deft holds), each dimension
 * usually small; dimensions shrink until the product is at most
 * FUZZ_MAX_ELEMENTS. A byte of 255 makes a dimension -1 (a bad shape). */
static inline int fuzz_shape(fuzz_reader_t *r, int64_t *shape) {
    int ndim = fuzz_u8(r) % 10;
    for (int i = 0; i < ndim; i++) {
        uint8_t b = fuzz_u8(r);
        shape[i] = b < 200 ? b % 6 : b < 250 ? b % 50 : b == 250 ? 64 : b == 251 ? 256
                 : b == 252 ? 4096 : b == 253 ? 0 : b == 254 ? 1 : -1;
    }
    for (;;) {
        int64_t n = 1;
        int largest = 0;
        for (int i = 0; i < ndim; i++) {
            if (shape[i] > 0 && n <= FUZZ_MAX_ELEMENTS) n *= shape[i]; /* at most 4096 * 4096 */
            if (shape[i] > shape[largest]) largest = i;
        }
        if (n <= FUZZ_MAX_ELEMENTS) break;
        shape[largest] /= 2;
    }
    return ndim;
}

static inline uint16_t fuzz_half_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return sign | (mag > 0x7f800000u ? 0x7e00 : 0x7c00);
    int e = (int)(mag >> 23) - 127 + 15;
    if (e >= 31) return sign | 0x7c00;
    if (e <= 0) return sign; /* flushes subnormals: the values only need variety */
    return sign | (uint16_t)(e << 10) | (uint16_t)((mag >> 13) & 0x3ff);
}

/* One element of `dtype` from a double that the caller keeps in range for
 * integer types (converting NaN or out-of-range doubles is undefined). */
static inline void fuzz_store(int dtype, void *p, double v) {
    float f = (float)v;
    uint32_t fb;
    memcpy(&fb, &f, 4);
    switch (dtype) {
    case DEFT_FLOAT32: memcpy(p, &f, 4); break;
    case DEFT_FLOAT64: memcpy(p, &v, 8); break;
    case DEFT_FLOAT16: { uint16_t h = fuzz_half_bits(f); memcpy(p, &h, 2); break; }
    case DEFT_BFLOAT16: { uint16_t h = (uint16_t)(fb >> 16); memcpy(p, &h, 2); break; }
    case DEFT_INT32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    case DEFT_INT64: { int64_t i = (int64_t)v; memcpy(p, &i, 8); break; }
    case DEFT_UINT8: *(uint8_t *)p = (uint8_t)(int)v; break;
    case DEFT_INT8: *(int8_t *)p = (int8_t)(int)v; break;
    case DEFT_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
    }
}

static inline bool fuzz_is_float(int dtype) {
    return dtype == DEFT_FLOAT32 || dtype == DEFT_FLOAT64 || dtype == DEFT_FLOAT16 ||
           dtype == DEFT_BFLOAT16;
}

/* Fill `n` elements of `dtype` at `buf` in pattern `fill`; FUZZ_FILL_BYTES
 * takes the reader's next bytes (cyclically, zeros when none are left). */
static inline void fuzz_fill(int dtype, void *buf, int64_t n, int fill, fuzz_reader_t *r) {
    size_t esize = 0;
    DeftDTypeGetSize(dtype, &esize);
    static const double float_specials[] = {NAN, INFINITY, -INFINITY, -0.0, 1e30, -1e30,
                                            1e-40, 3, 65504, 3.4e38};
    static const double int_specials[] = {0, -1, 1, 127, -128, 255, 2147483647.0,
                                          -2147483648.0, 3, 100};
    if (fill == FUZZ_FILL_BYTES) {
        size_t left = fuzz_left(r), take = left < 256 ? left : 256;
        const uint8_t *src = r->data + r->pos;
        r->pos += take;
        for (size_t i = 0; i < (size_t)n * esize; i++)
            ((uint8_t *)buf)[i] = take ? src[i % take] : 0;
        if (dtype == DEFT_BOOL)
            for (int64_t i = 0; i < n; i++) ((uint8_t *)buf)[i] &= 1;
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        switch (fill) {
        case FUZZ_FILL_SMALL_INTS: v = (double)(i % 5) - 2; break;
        case FUZZ_FILL_RAMP: v = fuzz_is_float(dtype) ? (double)(i % 17) * 0.25 - 2 : (double)(i % 17); break;
        case FUZZ_FILL_SPECIAL:
            v = fuzz_is_float(dtype) ? float_specials[i % 10] : int_specials[i % 10];
            if (dtype == DEFT_UINT8 || dtype == DEFT_INT8) v = fmod(fabs(v), 128);
            if ((dtype == DEFT_INT32) && (v > 2147483647.0 || v < -2147483648.0)) v = 0;
            break;
        case FUZZ_FILL_ONES: v = 1; break;
        default: v = 0; break;
        }
        fuzz_store(dtype, (uint8_t *)buf + (size_t)i * esize, v);
    }
}

/* A new CPU array of `shape` and `dtype` filled in pattern `fill`; NULL when
 * deft refuses the shape (the failure is checked against the contract). */
static inline DeftNDArrayHandle fuzz_array(const int64_t *shape, int ndim, int dtype, int fill,
                                           fuzz_reader_t *r) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i] > 0 ? shape[i] : 0;
    if (ndim == 0) n = 1;
    size_t esize = 8;
    DeftDTypeGetSize(dtype, &esize);
    void *buf = calloc((size_t)(n > 0 ? n : 1), esize);
    if (!buf) return NULL;
    fuzz_fill(dtype, buf, n, fill, r);
    DeftNDArrayHandle h = FUZZ_SENTINEL;
    int status = FUZZ_CALL(DeftNDArrayCreateFromData(shape, ndim, dtype, DEFT_CPU, 0, buf,
                                                     (size_t)n * esize, &h));
    FUZZ_UNTOUCHED(status, h, FUZZ_SENTINEL);
    free(buf);
    return status == 0 ? h : NULL;
}

/* Read an array back (shape, dtype, values) the way a user would, checking
 * each call; returns the status of the read (a kept asynchronous failure
 * makes it -1). */
static inline int fuzz_read_back(DeftNDArrayHandle h) {
    int64_t shape[DEFT_MAX_NDIM];
    int ndim = FUZZ_SENTINEL_INT, dtype = FUZZ_SENTINEL_INT;
    int st = FUZZ_CALL(DeftNDArrayGetShape(h, shape, DEFT_MAX_NDIM, &ndim));
    FUZZ_UNTOUCHED(st, ndim, FUZZ_SENTINEL_INT);
    st = FUZZ_CALL(DeftNDArrayGetDType(h, &dtype));
    FUZZ_UNTOUCHED(st, dtype, FUZZ_SENTINEL_INT);
    size_t nbytes = (size_t)-1;
    st = FUZZ_CALL(DeftNDArrayGetNBytes(h, &nbytes));
    FUZZ_UNTOUCHED(st, nbytes, (size_t)-1);
    if (st != 0) return -1;
    if (FUZZ_CALL(DeftNDArrayWaitToRead(h)) != 0) return -1;
    if (nbytes > (size_t)64 << 20) return 0; /* large results: their values are not read */
    void *buf = malloc(nbytes ? nbytes : 1);
    if (!buf) return 0;
    st = FUZZ_CALL(DeftNDArrayCopyToHost(h, buf, nbytes));
    free(buf);
    return st;
}

#endif
