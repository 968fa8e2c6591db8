/*
 * A float32 vector of VEC_LANES lanes, for kernels written once and compiled
 * for AVX2 (8 lanes) and AVX-512 (16): a kernel file includes this header
 * after defining VEC_LANES, in a translation unit of its own per width, and
 * names its entry points with VEC_FN. Every function here is inline and
 * carries VEC_TARGET, so nothing runs an instruction the CPU lacks unless the
 * kernel that calls it was chosen at run time (simd.h).
 *
 * The operations are the ones the kernels need, no more: aligned and
 * unaligned loads and stores, loads and stores of the first n lanes (the
 * rest read as zero, and left alone), multiply-add, a lane sum and a square
 * transpose of VEC_LANES vectors.
 */
#ifndef DEFT_CORE_OP_SIMD_VEC_H
#define DEFT_CORE_OP_SIMD_VEC_H

#include <stdint.h>

#include "core/op/simd.h"

#if DEFT_SIMD_X86
#include <immintrin.h>

#define VEC_ALWAYS     __attribute__((always_inline)) inline
#define VEC_CAT_(a, b) a##_##b
#define VEC_CAT(a, b)  VEC_CAT_(a, b)
#define VEC_FN(name)   VEC_CAT(name, VEC_NAME)

#if VEC_LANES == 16
#define VEC_NAME   avx512
#define VEC_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
typedef __m512 vf_t;

static VEC_ALWAYS VEC_TARGET vf_t vf_zero(void) {
    return _mm512_setzero_ps();
}
static VEC_ALWAYS VEC_TARGET vf_t vf_set1(float x) {
    return _mm512_set1_ps(x);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_load(const float *p) {
    return _mm512_load_ps(p);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_loadu(const float *p) {
    return _mm512_loadu_ps(p);
}
static VEC_ALWAYS VEC_TARGET void vf_store(float *p, vf_t v) {
    _mm512_store_ps(p, v);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_add(vf_t a, vf_t b) {
    return _mm512_add_ps(a, b);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_max(vf_t a, vf_t b) {
    return _mm512_max_ps(a, b);
}
/* a b + c */
static VEC_ALWAYS VEC_TARGET vf_t vf_fmadd(vf_t a, vf_t b, vf_t c) {
    return _mm512_fmadd_ps(a, b, c);
}
/* p[0 .. n - 1], zero in the lanes from n (0 <= n <= 16); reads nothing past n. */
static VEC_ALWAYS VEC_TARGET vf_t vf_load_first(const float *p, int64_t n) {
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p);
}
/* p[0 .. n - 1] = the first n lanes of v; writes nothing past them. */
static VEC_ALWAYS VEC_TARGET void vf_store_first(float *p, int64_t n, vf_t v) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), v);
}
static VEC_ALWAYS VEC_TARGET float vf_sum(vf_t v) {
    return _mm512_reduce_add_ps(v);
}

/* out[c] = lane c of r[0..15]: unpacks within 128-bit lanes, then lane shuffles. */
static VEC_ALWAYS VEC_TARGET void vf_transpose(const vf_t r[16], vf_t out[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) { /* u[g + j]: column j of each lane, rows g .. g + 3 */
        u[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        __m512 ab_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44);
        __m512 ab_hi = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
        __m512 cd_lo = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
        __m512 cd_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
        out[j] = _mm512_shuffle_f32x4(ab_lo, cd_lo, 0x88);
        out[4 + j] = _mm512_shuffle_f32x4(ab_lo, cd_lo, 0xDD);
        out[8 + j] = _mm512_shuffle_f32x4(ab_hi, cd_hi, 0x88);
        out[12 + j] = _mm512_shuffle_f32x4(ab_hi, cd_hi, 0xDD);
    }
}

/* Pooling's (pool_vec_t.h). Masks travel as the bits of an unsigned, bit l
 * for lane l, so that kernels can do arithmetic on them. */
static VEC_ALWAYS VEC_TARGET vf_t vf_mul(vf_t a, vf_t b) {
    return _mm512_mul_ps(a, b);
}
static VEC_ALWAYS VEC_TARGET void vf_storeu(float *p, vf_t v) {
    _mm512_storeu_ps(p, v);
}
/* p[0 .. n - 1], fill in the lanes from n (0 <= n <= 16); reads nothing past n. */
static VEC_ALWAYS VEC_TARGET vf_t vf_load_first_else(const float *p, int64_t n, vf_t fill) {
    return _mm512_mask_loadu_ps(fill, (__mmask16)((1u << n) - 1u), p);
}
/* The largest lane: the halves' maxima folded as max(upper, lower), down to one. */
static VEC_ALWAYS VEC_TARGET float vf_hmax(vf_t v) {
    return _mm512_reduce_max_ps(v);
}
/* The even and the odd elements of the 32 floats a then b. */
static VEC_ALWAYS VEC_TARGET void vf_deinterleave(vf_t a, vf_t b, vf_t *even, vf_t *odd) {
    const __m512i evens =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odds =
        _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    *even = _mm512_permutex2var_ps(a, evens, b);
    *odd = _mm512_permutex2var_ps(a, odds, b);
}
/* Lanes 0 .. 7 of v, each twice: v0 v0 v1 v1 ... v7 v7. */
static VEC_ALWAYS VEC_TARGET vf_t vf_pairs(vf_t v) {
    return _mm512_permutexvar_ps(_mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
                                 v);
}
/* Lanes where a == b (ordered: NaN equals nothing). */
static VEC_ALWAYS VEC_TARGET unsigned vf_eq_bits(vf_t a, vf_t b) {
    return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ);
}
/* Lanes where a > b (ordered). */
static VEC_ALWAYS VEC_TARGET unsigned vf_gt_bits(vf_t a, vf_t b) {
    return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ);
}
/* Lanes where v is NaN. */
static VEC_ALWAYS VEC_TARGET unsigned vf_nan_bits(vf_t v) {
    return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}
/* v in the lanes of bits, 0 in the others. */
static VEC_ALWAYS VEC_TARGET vf_t vf_keep(unsigned bits, vf_t v) {
    return _mm512_maskz_mov_ps((__mmask16)bits, v);
}
/* b in the lanes of bits, a in the others. */
static VEC_ALWAYS VEC_TARGET vf_t vf_blend(unsigned bits, vf_t a, vf_t b) {
    return _mm512_mask_mov_ps(a, (__mmask16)bits, b);
}

#elif VEC_LANES == 8
#define VEC_NAME   avx2
#define VEC_TARGET __attribute__((target("avx2,fma")))
typedef __m256 vf_t;

static VEC_ALWAYS VEC_TARGET vf_t vf_zero(void) {
    return _mm256_setzero_ps();
}
static VEC_ALWAYS VEC_TARGET vf_t vf_set1(float x) {
    return _mm256_set1_ps(x);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_load(const float *p) {
    return _mm256_load_ps(p);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_loadu(const float *p) {
    return _mm256_loadu_ps(p);
}
static VEC_ALWAYS VEC_TARGET void vf_store(float *p, vf_t v) {
    _mm256_store_ps(p, v);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_add(vf_t a, vf_t b) {
    return _mm256_add_ps(a, b);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_max(vf_t a, vf_t b) {
    return _mm256_max_ps(a, b);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_fmadd(vf_t a, vf_t b, vf_t c) {
    return _mm256_fmadd_ps(a, b, c);
}
/* All ones in the lanes below n: maskload and maskstore touch only those
 * (masked-off lanes neither fault nor write). */
static VEC_ALWAYS VEC_TARGET __m256i vf_first_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static VEC_ALWAYS VEC_TARGET vf_t vf_load_first(const float *p, int64_t n) {
    return _mm256_maskload_ps(p, vf_first_mask(n));
}
static VEC_ALWAYS VEC_TARGET void vf_store_first(float *p, int64_t n, vf_t v) {
    _mm256_maskstore_ps(p, vf_first_mask(n), v);
}
static VEC_ALWAYS VEC_TARGET float vf_sum(vf_t v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* out[c] = lane c of r[0..7]: unpacks and shuffles within 128-bit lanes,
 * then the halves swapped across. */
static VEC_ALWAYS VEC_TARGET void vf_transpose(const vf_t r[8], vf_t out[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) {
        u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        out[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        out[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}

/* Pooling's (pool_vec_t.h). Masks travel as the bits of an unsigned, bit l
 * for lane l, so that kernels can do arithmetic on them. */
static VEC_ALWAYS VEC_TARGET vf_t vf_mul(vf_t a, vf_t b) {
    return _mm256_mul_ps(a, b);
}
static VEC_ALWAYS VEC_TARGET void vf_storeu(float *p, vf_t v) {
    _mm256_storeu_ps(p, v);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_load_first_else(const float *p, int64_t n, vf_t fill) {
    const __m256i m = vf_first_mask(n);
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
/* max(upper half, lower half) down to one lane, as AVX-512's reduce_max. */
static VEC_ALWAYS VEC_TARGET float vf_hmax(vf_t v) {
    __m128 s = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_max_ps(_mm_movehl_ps(s, s), s);
    return _mm_cvtss_f32(_mm_max_ss(_mm_movehdup_ps(s), s));
}
/* In-lane shuffles give a0 a2 b0 b2 | a4 a6 b4 b6; the 64-bit permute orders them. */
static VEC_ALWAYS VEC_TARGET void vf_deinterleave(vf_t a, vf_t b, vf_t *even, vf_t *odd) {
    *even = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *odd = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}
static VEC_ALWAYS VEC_TARGET vf_t vf_pairs(vf_t v) {
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
}
static VEC_ALWAYS VEC_TARGET unsigned vf_eq_bits(vf_t a, vf_t b) {
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ));
}
static VEC_ALWAYS VEC_TARGET unsigned vf_gt_bits(vf_t a, vf_t b) {
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ));
}
static VEC_ALWAYS VEC_TARGET unsigned vf_nan_bits(vf_t v) {
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}
/* All ones in the lanes of bits. */
static VEC_ALWAYS VEC_TARGET __m256 vf_bits_mask(unsigned bits) {
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i set = _mm256_and_si256(_mm256_set1_epi32((int)bits), lane);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(set, lane));
}
static VEC_ALWAYS VEC_TARGET vf_t vf_keep(unsigned bits, vf_t v) {
    return _mm256_and_ps(vf_bits_mask(bits), v);
}
static VEC_ALWAYS VEC_TARGET vf_t vf_blend(unsigned bits, vf_t a, vf_t b) {
    return _mm256_blendv_ps(a, b, vf_bits_mask(bits));
}

#else
#error "simd_vec.h: define VEC_LANES as 8 or 16"
#endif
#endif
#endif
