/*
 * The element loops of the CPU convolution, written once for an element type:
 * conv_cpu.c includes this file with T float and SFX f, then with T double
 * and SFX d. Everything here works on one group of one image; the drivers in
 * conv_cpu.c split the work and call BLAS. im2col only moves elements, so
 * with CONV_IM2COL_ONLY defined (and T uint16_t) it alone serves both
 * 16-bit float types (conv_half.c).
 *
 * An im2col tile covers "outer rows" [r0, r1) of the column side: each is
 * one (depth, height) position, col[2] columns wide, so a tile's columns are
 * contiguous in the column-side array.
 */
#define CONV_CAT_(a, b) a##_##b
#define CONV_CAT(a, b)  CONV_CAT_(a, b)
#define CONV_FN(name)   CONV_CAT(name, SFX)

/* The image row that output row r of tap (kd, kh) reads, or -1 in the padding. */
static inline int64_t CONV_FN(tap_row)(const deft_conv_geom_t *g, int64_t r, int64_t kd,
                                       int64_t kh) {
    int64_t od = r / g->col[1], oh = r % g->col[1];
    int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
    int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
    if (id < 0 || id >= g->img[0] || ih < 0 || ih >= g->img[1]) return -1;
    return id * g->img[1] + ih;
}

/* col (rows (c, kd, kh, kw) of one group, (r1 - r0) col[2] columns, leading
 * dimension ld) = the image's taps. */
static void CONV_FN(im2col)(const deft_conv_geom_t *g, const T *img, int64_t r0, int64_t r1, T *col,
                            int64_t ld) {
    const int64_t cg = g->chan / g->groups, ow_n = g->col[2], iw_n = g->img[2];
    const int64_t plane = deft_conv_img_size(g), sw = g->s[2];
    T *row_start = col;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++, row_start += ld) {
                    int64_t off = kw * g->d[2] - g->p[2], lo, hi;
                    deft_conv_tap_range(off, sw, iw_n, ow_n, &lo, &hi);
                    T *dst = row_start;
                    for (int64_t r = r0; r < r1; r++, dst += ow_n) {
                        int64_t row = CONV_FN(tap_row)(g, r, kd, kh);
                        if (row < 0) {
                            for (int64_t x = 0; x < ow_n; x++) dst[x] = 0;
                            continue;
                        }
                        const T *src = img + c * plane + row * iw_n;
                        for (int64_t x = 0; x < lo; x++) dst[x] = 0;
                        if (sw == 1)
                            for (int64_t x = lo; x < hi; x++) dst[x] = src[x + off];
                        else
                            for (int64_t x = lo; x < hi; x++) dst[x] = src[x * sw + off];
                        for (int64_t x = hi; x < ow_n; x++) dst[x] = 0;
                    }
                }
}

#ifndef CONV_IM2COL_ONLY
/* The image (one group) += col's taps put back where im2col took them. */
static void CONV_FN(col2im)(const deft_conv_geom_t *g, const T *col, int64_t r0, int64_t r1,
                            T *img) {
    const int64_t cg = g->chan / g->groups, ow_n = g->col[2], iw_n = g->img[2];
    const int64_t plane = deft_conv_img_size(g), sw = g->s[2];
    const T *src = col;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t off = kw * g->d[2] - g->p[2], lo, hi;
                    deft_conv_tap_range(off, sw, iw_n, ow_n, &lo, &hi);
                    for (int64_t r = r0; r < r1; r++, src += ow_n) {
                        int64_t row = CONV_FN(tap_row)(g, r, kd, kh);
                        if (row < 0) continue;
                        T *dst = img + c * plane + row * iw_n;
                        for (int64_t x = lo; x < hi; x++) dst[x * sw + off] += src[x];
                    }
                }
}

/* Row i of c (rows x cols, leading dimension ld) = bias[i], or 0 without a bias. */
static void CONV_FN(fill_rows)(T *c, int64_t rows, int64_t cols, int64_t ld, const T *bias) {
    for (int64_t i = 0; i < rows; i++) {
        T v = bias ? bias[i] : 0;
        for (int64_t x = 0; x < cols; x++) c[i * ld + x] = v;
    }
}

/* Image i's rows of out (at out + i stride, rows x space) = columns
 * [i space, (i + 1) space) of c (rows x images space) + bias (or 0 without). */
static void CONV_FN(scatter_images)(const T *c, int64_t rows, int64_t images, int64_t space,
                                    const T *bias, T *out, int64_t stride) {
    for (int64_t i = 0; i < images; i++)
        for (int64_t f = 0; f < rows; f++) {
            const T *src = c + (f * images + i) * space;
            T *dst = out + i * stride + f * space;
            T v = bias ? bias[f] : 0;
            for (int64_t x = 0; x < space; x++) dst[x] = src[x] + v;
        }
}

/* One channel of a depthwise convolution (a group of one channel and one
 * filter): y (col spatial) = bias + x (img spatial) correlated with w (k). */
static void CONV_FN(depthwise)(const deft_conv_geom_t *g, const T *x, const T *w, T bias, T *y) {
    const int64_t ow_n = g->col[2], iw_n = g->img[2], sw = g->s[2];
    const int64_t rows = g->col[0] * g->col[1];
    for (int64_t r = 0; r < rows; r++) {
        T *yrow = y + r * ow_n;
        for (int64_t o = 0; o < ow_n; o++) yrow[o] = bias;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                int64_t row = CONV_FN(tap_row)(g, r, kd, kh);
                if (row < 0) continue;
                const T *xrow = x + row * iw_n;
                const T *wk = w + (kd * g->k[1] + kh) * g->k[2];
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t off = kw * g->d[2] - g->p[2], lo, hi;
                    deft_conv_tap_range(off, sw, iw_n, ow_n, &lo, &hi);
                    const T wv = wk[kw];
                    if (sw == 1)
                        for (int64_t o = lo; o < hi; o++) yrow[o] += wv * xrow[o + off];
                    else
                        for (int64_t o = lo; o < hi; o++) yrow[o] += wv * xrow[o * sw + off];
                }
            }
    }
}

/* out[i] = the sum of parts[p n + i] over the parts, in order. */
static void CONV_FN(sum_parts)(const T *parts, int64_t count, int64_t n, T *out) {
    for (int64_t i = 0; i < n; i++) {
        T s = 0;
        for (int64_t p = 0; p < count; p++) s += parts[p * n + i];
        out[i] = s;
    }
}

/* db[c] = sum of y[n, c, :] over n, in double: in 32 partial sums, which
 * need not wait for each other's adds (one sum was latency-bound: 0.15 ms
 * of LeNet's 32 x 6 x 24 x 24 output gradient; 8 sums, one AVX-512 chain,
 * still took 20 us of its step at 2 threads). */
DEFT_CLONES static void CONV_FN(bias_grad)(int64_t batch, int64_t channels, int64_t space,
                                           const T *y, T *db) {
    enum { LANES = 32 };
    for (int64_t c = 0; c < channels; c++) {
        double part[LANES] = {0};
        for (int64_t n = 0; n < batch; n++) {
            const T *plane = y + (n * channels + c) * space;
            int64_t i = 0;
            for (; i + LANES <= space; i += LANES)
                for (int k = 0; k < LANES; k++) part[k] += plane[i + k];
            for (; i < space; i++) part[i % LANES] += plane[i];
        }
        double sum = 0;
        for (int k = 0; k < LANES; k++) sum += part[k];
        db[c] = (T)sum;
    }
}

#endif /* CONV_IM2COL_ONLY */

#undef CONV_FN
#undef CONV_CAT
#undef CONV_CAT_
