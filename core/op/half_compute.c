/*
 * float16 / bfloat16 operators through float32 compute (half_compute.h).
 */
#include "core/op/half_compute.h"

#include "core/math/dtype_math.h"
#include "core/op/simd.h"

enum { BLOCK = 256 }; /* elements widened at a time: 1 KiB of float32 per operand */

typedef struct half_loop {
    deft_inner_fn f32;
    const void *ctx;
    bool bf16;
    int nops;
} half_loop_t;

#if DEFT_SIMD_X86
#include <immintrin.h>

/* Dense float16 in hardware (VCVTPH2PS, VCVTPS2PH: AVX-512F), 16 at a time:
 * round to nearest even and exact widening, as the bit versions, which take
 * the tails. NaNs stay NaNs (payloads may differ). Neither instruction
 * flushes denormals, whatever the thread's FTZ/DAZ (fpmode.h). */
__attribute__((target("avx512f"))) static void widen_f16_avx512(const uint16_t *src, float *dst,
                                                                int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = deft_half_to_float(src[i]);
}

__attribute__((target("avx512f"))) static void narrow_f16_avx512(const float *src, uint16_t *dst,
                                                                 int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = deft_float_to_half(src[i]);
}

/* The same 8 at a time (F16C, which every AVX2 CPU has). */
__attribute__((target("avx2,f16c"))) static void widen_f16_avx2(const uint16_t *src, float *dst,
                                                                int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = deft_half_to_float(src[i]);
}

__attribute__((target("avx2,f16c"))) static void narrow_f16_avx2(const float *src, uint16_t *dst,
                                                                 int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = deft_float_to_half(src[i]);
}
#endif

void deft_half_widen(const uint16_t *src, int64_t stride, bool bf16, float *dst, int64_t n) {
#if DEFT_SIMD_X86
    if (!bf16 && stride == 1 && deft_simd_avx2()) {
        (deft_simd_avx512() ? widen_f16_avx512 : widen_f16_avx2)(src, dst, n);
        return;
    }
#endif
    if (bf16)
        for (int64_t i = 0; i < n; i++) dst[i] = deft_bf16_to_float(src[i * stride]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = deft_half_to_float(src[i * stride]);
}

void deft_half_narrow(const float *src, bool bf16, uint16_t *dst, int64_t stride, int64_t n) {
#if DEFT_SIMD_X86
    if (!bf16 && stride == 1 && deft_simd_avx2()) {
        (deft_simd_avx512() ? narrow_f16_avx512 : narrow_f16_avx2)(src, dst, n);
        return;
    }
#endif
    if (bf16)
        for (int64_t i = 0; i < n; i++) dst[i * stride] = deft_float_to_bf16(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i * stride] = deft_float_to_half(src[i]);
}

/* The inner loop: operands read block by block (a stride-0 operand once, kept
 * at stride 0 so the float32 loop takes its scalar path); every input of a
 * block is read before the output is written, so in-place runs are safe. */
static void half_inner(const void *ctx, char *const *p, const int64_t *s, int64_t n) {
    const half_loop_t *h = ctx;
    float buf[DEFT_STRIDED_MAX_OPS][BLOCK];
    char *ptrs[DEFT_STRIDED_MAX_OPS];
    int64_t strides[DEFT_STRIDED_MAX_OPS];
    for (int k = 0; k < h->nops; k++) {
        ptrs[k] = (char *)buf[k];
        strides[k] = k > 0 && s[k] == 0 ? 0 : 1;
    }
    for (int k = 1; k < h->nops; k++)
        if (s[k] == 0) deft_half_widen((const uint16_t *)p[k], 0, h->bf16, buf[k], 1);
    for (int64_t start = 0; start < n; start += BLOCK) {
        int64_t m = n - start < BLOCK ? n - start : BLOCK;
        for (int k = 1; k < h->nops; k++)
            if (s[k] != 0)
                deft_half_widen((const uint16_t *)p[k] + start * s[k], s[k], h->bf16, buf[k], m);
        h->f32(h->ctx, ptrs, strides, m);
        deft_half_narrow(buf[0], h->bf16, (uint16_t *)p[0] + start * s[0], s[0], m);
    }
}

void deft_half_run(deft_strided_t *it, deft_inner_fn f32, const void *ctx, deft_dtype_t dtype) {
    half_loop_t h = {f32, ctx, dtype == DEFT_DT_BFLOAT16, it->nops};
    deft_strided_run(it, half_inner, &h);
}

void deft_half_run_flat(deft_inner_fn f32, const void *ctx, int nops, char *const *ptrs,
                        const int64_t *strides, deft_dtype_t dtype, int64_t n) {
    half_loop_t h = {f32, ctx, dtype == DEFT_DT_BFLOAT16, nops};
    deft_flat_run(half_inner, &h, nops, ptrs, strides, sizeof(uint16_t), n);
}
