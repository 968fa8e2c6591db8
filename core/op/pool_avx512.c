/*
 * Rows of 2x2 stride-2 pooling, the pooling of most CNNs, in AVX-512
 * (pool_cpu.h): 16 outputs at a time from two input rows of 32, whose even
 * and odd columns two permutes pull apart, so no per-element index work
 * (the max gradient keeps them in place, 8 outputs at a time); row tails
 * are masked. They compute exactly what the plane kernels of
 * pool_cpu.c compute (the same taps in the same order), which the tests
 * check by running both. Selected at run time when the CPU has AVX-512F
 * (deft_simd_avx512), as core/op/conv_direct.c's kernels.
 */
#include "core/op/pool_cpu.h"

#include "core/op/simd.h"

#if DEFT_POOL_X86

#include <immintrin.h>

bool deft_pool_avx512(void) {
    return deft_simd_avx512();
}

#define AVX512 __attribute__((target("avx512f")))

/* The first n (<= 16) lanes. */
static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* The even and odd elements of the n (<= 32) floats at p; lanes past them read as 0. */
AVX512 static inline void deinterleave(const float *p, int64_t n, __m512 *even, __m512 *odd) {
    const __m512i evens =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odds =
        _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512 a = _mm512_maskz_loadu_ps(lanes(n), p);
    __m512 b = _mm512_maskz_loadu_ps(lanes(n > 16 ? n - 16 : 0), p + 16);
    *even = _mm512_permutex2var_ps(a, evens, b);
    *odd = _mm512_permutex2var_ps(a, odds, b);
}

/*
 * y[o] from the window x0[2o], x0[2o + 1], x1[2o], x1[2o + 1], o < n: max
 * folds the taps in that order into float's lowest value (max_ps(v, acc)
 * is v > acc ? v : acc, so NaN never wins), the others sum them in that
 * order and scale the sum.
 */
AVX512 static inline void pool2x2_row(const float *x0, const float *x1, float *y, int64_t n,
                                      bool max, float scale) {
    const __m512 lowest = _mm512_set1_ps(-3.40282347e38f), factor = _mm512_set1_ps(scale);
    for (int64_t o = 0; o < n; o += 16) {
        int64_t m = n - o < 16 ? n - o : 16;
        __m512 e0, d0, e1, d1, r;
        deinterleave(x0 + 2 * o, 2 * m, &e0, &d0);
        deinterleave(x1 + 2 * o, 2 * m, &e1, &d1);
        if (max)
            r = _mm512_max_ps(d1, _mm512_max_ps(e1, _mm512_max_ps(d0, _mm512_max_ps(e0, lowest))));
        else
            r = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(e0, d0), e1), d1), factor);
        _mm512_mask_storeu_ps(y + o, lanes(m), r);
    }
}

/*
 * Fold one input row into n outputs of 3-wide stride-2 windows (3x3/2, the
 * ResNet stem's pooling, row by row): acc[o] takes row[2o], row[2o + 1],
 * row[2o + 2] in that order, as pool_cpu.c's fold_row. The third tap is
 * the even elements one pair on, read no further than row[2n].
 */
AVX512 void deft_pool3x2_fold_avx512(float *acc, const float *row, int64_t n, bool max) {
    for (int64_t o = 0; o < n; o += 16) {
        int64_t m = n - o < 16 ? n - o : 16;
        __m512 e, d, next, unused, a = _mm512_maskz_loadu_ps(lanes(m), acc + o);
        deinterleave(row + 2 * o, 2 * m, &e, &d);
        deinterleave(row + 2 * o + 2, 2 * m - 1, &next, &unused);
        if (max)
            a = _mm512_max_ps(next, _mm512_max_ps(d, _mm512_max_ps(e, a)));
        else
            a = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a, e), d), next);
        _mm512_mask_storeu_ps(acc + o, lanes(m), a);
    }
}

/* relu_grad's factor at relu's output x, per lane (pool_math.h's
 * deft_pool_relu_grad): 1 where x > 0, x itself where it is NaN, else 0. */
AVX512 static inline __m512 relu_factor(__m512 x) {
    const __m512 f = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ),
                                          _mm512_setzero_ps(), _mm512_set1_ps(1.0f));
    return _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/*
 * The gradient of such a row into the two input rows, each of whose 2n
 * inputs belongs to one window: max pooling's goes to the first tap equal
 * to the output (in the order x0[2o], x0[2o + 1], x1[2o], x1[2o + 1]), the
 * others' is dy * scale on every tap. The inputs stay where they are: 8
 * outputs at a time, each output and its gradient copied to the two lanes
 * of its window's columns, and the first tap found on the compare masks
 * (bit 2k of a mask is a window's left tap, bit 2k + 1 its right one).
 * With relu (_backward_Pooling_relu, x relu's output), each input's
 * gradient is then multiplied by relu_grad's factor at x, in the registers
 * that hold both: the same product as a pass of relu's gradient over dx
 * after it, without that pass's loads and stores (LeNet's first pooling,
 * batch 32, one thread: 32 -> 26 us).
 */
AVX512 static inline void unpool2x2_row(const float *x0, const float *x1, const float *y,
                                        const float *dy, float *d0, float *d1, int64_t n, bool max,
                                        float scale, bool relu) {
    const __m512i pairs = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512 factor = _mm512_set1_ps(scale);
    for (int64_t o = 0; o < n; o += 8) {
        const int64_t m = n - o < 8 ? n - o : 8;
        const __mmask16 in = lanes(2 * m);
        const __m512 g = _mm512_permutexvar_ps(pairs, _mm512_maskz_loadu_ps(lanes(m), dy + o));
        const bool read = max || relu; /* average pooling's gradient reads no x */
        const __m512 v0 = read ? _mm512_maskz_loadu_ps(in, x0 + 2 * o) : _mm512_setzero_ps();
        const __m512 v1 = read ? _mm512_maskz_loadu_ps(in, x1 + 2 * o) : _mm512_setzero_ps();
        __m512 g0, g1;
        if (!max) {
            g0 = g1 = _mm512_mul_ps(g, factor);
        } else {
            const __m512 t = _mm512_permutexvar_ps(pairs, _mm512_maskz_loadu_ps(lanes(m), y + o));
            const unsigned a = _mm512_mask_cmp_ps_mask(in, v0, t, _CMP_EQ_OQ);
            const unsigned b = _mm512_mask_cmp_ps_mask(in, v1, t, _CMP_EQ_OQ);
            /* the right tap only where the left missed; row 1 only where row 0 missed */
            const unsigned first0 = a & ~((a & 0x5555u) << 1);
            unsigned taken = (a | a >> 1) & 0x5555u;
            taken |= taken << 1;
            const unsigned rest = b & ~taken, first1 = rest & ~((rest & 0x5555u) << 1);
            g0 = _mm512_maskz_mov_ps((__mmask16)first0, g);
            g1 = _mm512_maskz_mov_ps((__mmask16)first1, g);
        }
        if (relu) g0 = _mm512_mul_ps(g0, relu_factor(v0)), g1 = _mm512_mul_ps(g1, relu_factor(v1));
        _mm512_mask_storeu_ps(d0 + 2 * o, in, g0);
        _mm512_mask_storeu_ps(d1 + 2 * o, in, g1);
    }
}

/* Whole planes, so that a plane of short rows (LeNet's 4 outputs) costs one call. */
AVX512 void deft_pool2x2_plane_avx512(const float *x, float *y, int64_t width, int64_t oh_n,
                                      int64_t ow_n, bool max, float scale) {
    for (int64_t oh = 0; oh < oh_n; oh++) {
        const float *x0 = x + 2 * oh * width;
        pool2x2_row(x0, x0 + width, y + oh * ow_n, ow_n, max, scale);
    }
}

AVX512 void deft_unpool2x2_plane_avx512(const float *x, const float *y, const float *dy, float *dx,
                                        int64_t width, int64_t oh_n, int64_t ow_n, bool max,
                                        float scale, bool relu) {
    for (int64_t oh = 0; oh < oh_n; oh++) {
        const float *x0 = x + 2 * oh * width;
        float *d0 = dx + 2 * oh * width;
        unpool2x2_row(x0, x0 + width, y + oh * ow_n, dy + oh * ow_n, d0, d0 + width, ow_n, max,
                      scale, relu);
    }
}

/*
 * The max or the sum of n floats (a window that covers the plane: global
 * pooling), in 16 lanes: max_ps(v, acc) keeps float's lowest value over NaN
 * as pool_cpu.c's reduce_plane, and lanes past the end read as the start.
 */
AVX512 float deft_pool_reduce_avx512(const float *x, int64_t n, bool max) {
    const __m512 start = _mm512_set1_ps(max ? -3.40282347e38f : 0);
    __m512 acc = start;
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_mask_loadu_ps(start, lanes(n - i), x + i);
        acc = max ? _mm512_max_ps(v, acc) : _mm512_add_ps(acc, v);
    }
    return max ? _mm512_reduce_max_ps(acc) : _mm512_reduce_add_ps(acc);
}

/*
 * Max pooling's gradient over n interior outputs of 3-wide stride-2 windows
 * (the 3x3/2 stem pool) whose windows cover input rows [hlo, hhi) of plane
 * x and start at column col0 + 2o: each output's gradient is added at its
 * window's first maximum in row-major order. The first maxima of 16 outputs
 * are found at once (a tap counts where it equals the output and no earlier
 * tap did), then the gradients are added one by one, outputs in order, as
 * neighbouring windows share a column. Plane offsets fit 32 bits (checked).
 */
AVX512 void deft_unpool3x2_max_avx512(const float *x, int64_t width, int64_t hlo, int64_t hhi,
                                      int64_t col0, const float *y, const float *dy, float *dx,
                                      int64_t n) {
    const __m512i pairs =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    for (int64_t o = 0; o < n; o += 16) {
        int64_t m = n - o < 16 ? n - o : 16;
        __m512 t = _mm512_maskz_loadu_ps(lanes(m), y + o);
        __m512i at = _mm512_set1_epi32(-1);
        __mmask16 open = lanes(m); /* outputs whose maximum is not found yet */
        for (int64_t h = hlo; h < hhi; h++) {
            const float *row = x + h * width + col0 + 2 * o;
            __m512 taps[3], unused;
            deinterleave(row, 2 * m, &taps[0], &taps[1]);
            deinterleave(row + 2, 2 * m - 1, &taps[2], &unused);
            for (int k = 0; k < 3; k++) {
                __mmask16 hit = _mm512_mask_cmp_ps_mask(open, taps[k], t, _CMP_EQ_OQ);
                __m512i first = _mm512_set1_epi32((int32_t)(h * width + col0 + 2 * o + k));
                at = _mm512_mask_add_epi32(at, hit, pairs, first);
                open = (__mmask16)(open & ~hit);
            }
        }
        int32_t where[16];
        _mm512_storeu_si512(where, at);
        for (int64_t l = 0; l < m; l++)
            if (where[l] >= 0) dx[where[l]] += dy[o + l];
    }
}

#endif
