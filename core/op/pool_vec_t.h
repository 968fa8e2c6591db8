/*
 * Rows of 2x2 stride-2 pooling, the pooling of most CNNs, the 3-wide
 * stride-2 fold of the 3x3/2 stem pool and global reductions, written once
 * for a vector of VEC_LANES floats (simd_vec.h): pool_avx512.c includes
 * this file with 16 lanes, pool_avx2.c with 8; pool_cpu.c chooses the width
 * by the SIMD level (pool_vec.h).
 *
 * VL outputs at a time from two input rows of 2 VL, whose even and odd
 * columns a deinterleave pulls apart, so no per-element index work (the max
 * gradient keeps them in place, VL / 2 outputs at a time); row tails are
 * masked. They compute exactly what the plane kernels of pool_cpu.c compute
 * (the same taps in the same order), which the tests check by running both.
 */
#include "core/op/pool_vec.h"
#include "core/op/simd_vec.h"

#define VL VEC_LANES

/* The first n lanes, at most VL. */
static inline int64_t first(int64_t n) {
    return n < VL ? n : VL;
}

/* The first n (<= VL) floats at p, the lanes past them 0, and their store.
 * AVX2's masked stores are slow on Zen 3 (the 2x2 max gradient of LeNet's
 * first pool, one thread: 112 us all masked, against 51 us for the plane
 * kernels), so at 8 lanes whole vectors go plain; AVX-512's masks cost
 * nothing, and these compile to them alone. */
static VEC_ALWAYS VEC_TARGET vf_t load_n(const float *p, int64_t n) {
    if (VL == 8 && n == VL) return vf_loadu(p);
    if (VL == 8 && n == 0) return vf_zero();
    return vf_load_first(p, n);
}

static VEC_ALWAYS VEC_TARGET void store_n(float *p, int64_t n, vf_t v) {
    if (VL == 8 && n == VL)
        vf_storeu(p, v);
    else
        vf_store_first(p, n, v);
}

/* The even and odd elements of the n (<= 2 VL) floats at p; lanes past them read as 0. */
static VEC_ALWAYS VEC_TARGET void deinterleave(const float *p, int64_t n, vf_t *even, vf_t *odd) {
    vf_t a = load_n(p, first(n)), b = load_n(p + VL, n > VL ? n - VL : 0);
    vf_deinterleave(a, b, even, odd);
}

/*
 * y[o] from the window x0[2o], x0[2o + 1], x1[2o], x1[2o + 1], o < n: max
 * folds the taps in that order into float's lowest value (max(v, acc) is
 * v > acc ? v : acc, so NaN never wins), the others sum them in that order
 * and scale the sum.
 */
static VEC_ALWAYS VEC_TARGET void pool2x2_row(const float *x0, const float *x1, float *y, int64_t n,
                                              bool max, float scale) {
    const vf_t lowest = vf_set1(-3.40282347e38f), factor = vf_set1(scale);
    for (int64_t o = 0; o < n; o += VL) {
        int64_t m = first(n - o);
        vf_t e0, d0, e1, d1, r;
        deinterleave(x0 + 2 * o, 2 * m, &e0, &d0);
        deinterleave(x1 + 2 * o, 2 * m, &e1, &d1);
        if (max)
            r = vf_max(d1, vf_max(e1, vf_max(d0, vf_max(e0, lowest))));
        else
            r = vf_mul(vf_add(vf_add(vf_add(e0, d0), e1), d1), factor);
        store_n(y + o, m, r);
    }
}

/*
 * Fold one input row into n outputs of 3-wide stride-2 windows (3x3/2, the
 * ResNet stem's pooling, row by row): acc[o] takes row[2o], row[2o + 1],
 * row[2o + 2] in that order, as pool_cpu.c's fold_row. The third tap is
 * the even elements one pair on, read no further than row[2n].
 */
static VEC_TARGET void pool3x2_fold(float *acc, const float *row, int64_t n, bool max) {
    for (int64_t o = 0; o < n; o += VL) {
        int64_t m = first(n - o);
        vf_t e, d, next, unused, a = load_n(acc + o, m);
        deinterleave(row + 2 * o, 2 * m, &e, &d);
        deinterleave(row + 2 * o + 2, 2 * m - 1, &next, &unused);
        if (max)
            a = vf_max(next, vf_max(d, vf_max(e, a)));
        else
            a = vf_add(vf_add(vf_add(a, e), d), next);
        store_n(acc + o, m, a);
    }
}

/* relu_grad's factor at relu's output x, per lane (pool_math.h's
 * deft_pool_relu_grad): 1 where x > 0, x itself where it is NaN, else 0. */
static VEC_ALWAYS VEC_TARGET vf_t relu_factor(vf_t x) {
    const vf_t f = vf_keep(vf_gt_bits(x, vf_zero()), vf_set1(1.0f));
    return vf_blend(vf_nan_bits(x), f, x);
}

/* Max pooling's gradient of VL / 2 windows: bits of the lanes of x0 and x1
 * (a, b: where they equal the output) that take it, the first tap of each
 * window in the order x0[2o], x0[2o + 1], x1[2o], x1[2o + 1]. Bit 2k of a
 * mask is a window's left tap, bit 2k + 1 its right one. */
static inline void first_taps(unsigned a, unsigned b, unsigned *first0, unsigned *first1) {
    /* the right tap only where the left missed; row 1 only where row 0 missed */
    unsigned taken = (a | a >> 1) & 0x5555u;
    taken |= taken << 1;
    const unsigned rest = b & ~taken;
    *first0 = a & ~((a & 0x5555u) << 1);
    *first1 = rest & ~((rest & 0x5555u) << 1);
}

/*
 * The gradient of such a row into the two input rows, each of whose 2n
 * inputs belongs to one window: max pooling's goes to the first tap equal
 * to the output, the others' is dy * scale on every tap. The inputs stay
 * where they are: VL / 2 outputs at a time, each output and its gradient
 * copied to the two lanes of its window's columns. With relu
 * (_backward_Pooling_relu, x relu's output), each input's gradient is then
 * multiplied by relu_grad's factor at x, in the registers that hold both:
 * the same product as a pass of relu's gradient over dx after it, without
 * that pass's loads and stores (LeNet's first pooling, batch 32, one
 * thread, AVX-512: 32 -> 26 us).
 */
static VEC_ALWAYS VEC_TARGET void unpool2x2_row(const float *x0, const float *x1, const float *y,
                                                const float *dy, float *d0, float *d1, int64_t n,
                                                bool max, float scale, bool relu) {
    const vf_t factor = vf_set1(scale);
    for (int64_t o = 0; o < n; o += VL / 2) {
        const int64_t m = n - o < VL / 2 ? n - o : VL / 2;
        const unsigned in = (1u << 2 * m) - 1u;
        const vf_t g = vf_pairs(load_n(dy + o, m));
        const bool read = max || relu; /* average pooling's gradient reads no x */
        const vf_t v0 = read ? load_n(x0 + 2 * o, 2 * m) : vf_zero();
        const vf_t v1 = read ? load_n(x1 + 2 * o, 2 * m) : vf_zero();
        vf_t g0, g1;
        if (!max) {
            g0 = g1 = vf_mul(g, factor);
        } else {
            const vf_t t = vf_pairs(load_n(y + o, m));
            unsigned first0, first1;
            first_taps(vf_eq_bits(v0, t) & in, vf_eq_bits(v1, t) & in, &first0, &first1);
            g0 = vf_keep(first0, g);
            g1 = vf_keep(first1, g);
        }
        if (relu) g0 = vf_mul(g0, relu_factor(v0)), g1 = vf_mul(g1, relu_factor(v1));
        store_n(d0 + 2 * o, 2 * m, g0);
        store_n(d1 + 2 * o, 2 * m, g1);
    }
}

/* Whole planes, so that a plane of short rows (LeNet's 4 outputs) costs one call. */
static VEC_TARGET void pool2x2_plane(const float *x, float *y, int64_t width, int64_t oh_n,
                                     int64_t ow_n, bool max, float scale) {
    for (int64_t oh = 0; oh < oh_n; oh++) {
        const float *x0 = x + 2 * oh * width;
        pool2x2_row(x0, x0 + width, y + oh * ow_n, ow_n, max, scale);
    }
}

static VEC_TARGET void unpool2x2_plane(const float *x, const float *y, const float *dy, float *dx,
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
 * pooling) in 16 lanes, as pool_cpu.c's reduce_plane: 16 / VL vectors side
 * by side, folded as its tree (upper half into lower), so that sums round
 * alike at every width. max(v, acc) keeps float's lowest value over NaN,
 * and lanes past the end read as the start.
 */
static VEC_TARGET float pool_reduce(const float *x, int64_t n, bool max) {
    enum { VECS = 16 / VL };
    const vf_t start = vf_set1(max ? -3.40282347e38f : 0);
    vf_t acc[VECS];
    for (int v = 0; v < VECS; v++) acc[v] = start;
    for (int64_t i = 0; i < n; i += 16)
        for (int v = 0; v < VECS; v++) {
            const int64_t left = n - i - v * VL;
            const float *at = x + i + v * VL;
            const vf_t x_v = VL == 8 && left >= VL
                                 ? vf_loadu(at) /* as load_n */
                                 : vf_load_first_else(at, left < 0 ? 0 : first(left), start);
            acc[v] = max ? vf_max(x_v, acc[v]) : vf_add(acc[v], x_v);
        }
    for (int half = VECS / 2; half > 0; half /= 2)
        for (int v = 0; v < half; v++)
            acc[v] = max ? vf_max(acc[v + half], acc[v]) : vf_add(acc[v], acc[v + half]);
    return max ? vf_hmax(acc[0]) : vf_sum(acc[0]);
}

/* Add dy[l] at each lane's tap (tap[l] = 3 (row - hlo) + column in the
 * window, -1 none) of the outputs whose windows start at column col0 + 2l,
 * lanes in order, as neighbouring windows share a column. */
static inline void scatter_taps(const float *tap, const float *dy, float *dx, int64_t width,
                                int64_t hlo, int64_t col0, int64_t m) {
    for (int64_t l = 0; l < m; l++) {
        if (tap[l] < 0) continue;
        const int64_t t = (int64_t)tap[l];
        dx[(hlo + t / 3) * width + col0 + 2 * l + t % 3] += dy[l];
    }
}

/*
 * Max pooling's gradient over n interior outputs of 3-wide stride-2 windows
 * (the 3x3/2 stem pool) whose windows cover input rows [hlo, hhi) of plane
 * x and start at column col0 + 2o: each output's gradient is added at its
 * window's first maximum in row-major order. The first maxima of VL outputs
 * are found at once (a tap counts where it equals the output and no earlier
 * tap did), as tap numbers in a vector (exact in float below 2^24 rows),
 * then the gradients are added one by one.
 */
static VEC_TARGET void unpool3x2_max(const float *x, int64_t width, int64_t hlo, int64_t hhi,
                                     int64_t col0, const float *y, const float *dy, float *dx,
                                     int64_t n) {
    for (int64_t o = 0; o < n; o += VL) {
        int64_t m = first(n - o);
        vf_t t = load_n(y + o, m), at = vf_set1(-1);
        unsigned open = (1u << m) - 1u; /* outputs whose maximum is not found yet */
        for (int64_t h = hlo; h < hhi; h++) {
            const float *row = x + h * width + col0 + 2 * o;
            vf_t taps[3], unused;
            deinterleave(row, 2 * m, &taps[0], &taps[1]);
            deinterleave(row + 2, 2 * m - 1, &taps[2], &unused);
            for (int k = 0; k < 3; k++) {
                unsigned hit = vf_eq_bits(taps[k], t) & open;
                at = vf_blend(hit, at, vf_set1((float)(3 * (h - hlo) + k)));
                open &= ~hit;
            }
        }
        _Alignas(64) float tap[VL];
        vf_store(tap, at);
        scatter_taps(tap, dy + o, dx, width, hlo, col0 + 2 * o, m);
    }
}

const deft_pool_vec_t VEC_FN(deft_pool_vec) = {
    .lanes = VL,
    .pool2x2_plane = pool2x2_plane,
    .unpool2x2_plane = unpool2x2_plane,
    .pool3x2_fold = pool3x2_fold,
    .unpool3x2_max = unpool3x2_max,
    .reduce = pool_reduce,
};
