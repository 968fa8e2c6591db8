/*
 * The weight gradient of the direct convolution (conv_direct.h):
 *   dW[o, i, r, c] = sum over images and output pixels q of
 *                    dy[o, q] x[i, q s + (r, c) - p].
 * The register tile is 32 output channels (two zmm of dy at one pixel) by
 * 8 input channels (broadcasts from the packed band) at one tap: 16 FMAs
 * for 2 vector loads and 8 broadcasts per pixel, summed over a band of
 * rows. Each part of the work (a range of (image, band) items) sums into
 * its own packed dW, laid out as the forward's packed weights; the parts
 * are added and unpacked at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/op/conv.h"
#include "core/op/conv_direct.h"

#if DEFT_CONV_DIRECT_X86

enum { WG_IC = 8 }; /* input channels per register tile */

/* dw (WG_IC x NB CB, packed) += the products of `rows` output rows of dy
 * (packed (row, column, NB CB)) with the taps x points at (one tap, WG_IC
 * channels of the band), pixels SW columns apart. */
static ALWAYS AVX512 void wtile(const direct_job_t *j, const float *x, const float *dy,
                                int64_t rows, float *dw, int NB, int SW) {
    __m512 acc[MAX_BLOCKS][WG_IC];
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < WG_IC; i++) acc[b][i] = _mm512_load_ps(dw + i * NB * CB + b * CB);
    const int64_t xrow = j->sh * j->icb * j->wp * CB;
    for (int64_t r = 0; r < rows; r++, x += xrow) {
        const float *xq = x;
        for (int64_t q = 0; q < j->ow; q++, xq += SW * CB, dy += NB * CB) {
            __m512 d0 = _mm512_load_ps(dy), d1 = d0;
            if (NB == 2) d1 = _mm512_load_ps(dy + CB);
#pragma GCC unroll 8
            for (int i = 0; i < WG_IC; i++) {
                __m512 v = _mm512_set1_ps(xq[i]);
                acc[0][i] = _mm512_fmadd_ps(v, d0, acc[0][i]);
                if (NB == 2) acc[1][i] = _mm512_fmadd_ps(v, d1, acc[1][i]);
            }
        }
    }
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < WG_IC; i++) _mm512_store_ps(dw + i * NB * CB + b * CB, acc[b][i]);
}

/* Every tap and input channel of one block pair: band (from output row 0
 * of the band), dyb its packed output gradient, dw the pair's packed dW. */
#define PAIR_KERNEL(NB, SW)                                                                        \
    static AVX512 void pair_##NB##_##SW(const direct_job_t *j, const float *band,                  \
                                        const float *dyb, int64_t rows, float *dw) {               \
        const int64_t blk = j->wp * CB, row = j->icb * blk;                                        \
        for (int64_t r = 0; r < j->kh; r++)                                                        \
            for (int64_t c = 0; c < j->kw; c++)                                                    \
                for (int64_t i = 0; i < j->icp; i += WG_IC, dw += WG_IC * NB * CB) {               \
                    const float *x = band + r * row + i / CB * blk + c * CB + i % CB;              \
                    wtile(j, x, dyb, rows, dw, NB, SW);                                            \
                }                                                                                  \
    }
PAIR_KERNEL(1, 1)
PAIR_KERNEL(2, 1)
PAIR_KERNEL(1, 2)
PAIR_KERNEL(2, 2)

typedef void (*pair_fn)(const direct_job_t *, const float *, const float *, int64_t, float *);

/* dyb (rows, ow, width) = dy's channels o0 .. o0 + width of rows r0 .., zero past oc. */
static AVX512 void pack_dy(const direct_job_t *j, const float *dy, int64_t r0, int64_t rows,
                           int64_t o0, int64_t width, float *dyb) {
    const int64_t plane = j->oh * j->ow, n = rows * j->ow;
    for (int64_t b = 0; b < width; b += CB) {
        int64_t left = j->oc - o0 - b;
        int nch = left <= 0 ? 0 : left < CB ? (int)left : CB;
        const float *src = dy + (nch ? (o0 + b) * plane + r0 * j->ow : 0);
        for (int64_t q = 0; q < n; q += CB)
            transpose_block(src + q, plane, nch, n - q < CB ? (int)(n - q) : CB,
                            dyb + q * width + b, width);
    }
}

/* Part p: items [p items / parts, (p + 1) items / parts) into its own packed dW. */
static void wgrad_parts(void *ctx, int64_t begin, int64_t end) {
    direct_job_t *j = ctx;
    const int64_t wsize = j->ocp * j->kh * j->kw * j->icp, items = j->batch * j->nbands;
    const int64_t band_floats = deft_direct_band_rows(j, 0, j->band) * j->icb * j->wp * CB;
    float *band = aligned_alloc(64, (size_t)round_up(band_floats * 4, 64));
    float *dyb = aligned_alloc(64, (size_t)round_up(j->band * j->ow * MAX_BLOCKS * CB * 4, 64));
    if (!band || !dyb) {
        atomic_store(&j->failed, true);
        free(band), free(dyb);
        return;
    }
    pair_fn two = j->sw == 1 ? pair_2_1 : pair_2_2, one = j->sw == 1 ? pair_1_1 : pair_1_2;
    for (int64_t part = begin; part < end; part++) {
        float *dw = j->dwp + part * wsize;
        memset(dw, 0, (size_t)wsize * sizeof(float));
        for (int64_t item = part * items / j->parts; item < (part + 1) * items / j->parts; item++) {
            int64_t n = item / j->nbands, r0 = item % j->nbands * j->band;
            int64_t r1 = r0 + j->band < j->oh ? r0 + j->band : j->oh;
            deft_direct_pack_band(j, j->image + n * j->ic * j->ih * j->iw, r0 * j->sh - j->ph,
                                  deft_direct_band_rows(j, r0, r1), band);
            const float *dy = j->dy + n * j->oc * j->oh * j->ow;
            for (int64_t o0 = 0; o0 < j->ocp; o0 += MAX_BLOCKS * CB) {
                int64_t width = j->ocp - o0 < MAX_BLOCKS * CB ? j->ocp - o0 : MAX_BLOCKS * CB;
                pack_dy(j, dy, r0, r1 - r0, o0, width, dyb);
                float *dwo = dw + o0 * j->kh * j->kw * j->icp;
                (width == MAX_BLOCKS * CB ? two : one)(j, band, dyb, r1 - r0, dwo);
            }
        }
    }
    free(band), free(dyb);
}

/* dw (oc, ic, kh, kw) = the sum of the parts' packed dW. */
static void unpack_sum(const direct_job_t *j, float *dw) {
    const int64_t taps = j->kh * j->kw, wsize = j->ocp * taps * j->icp;
    for (int64_t o = 0; o < j->oc; o++) {
        int64_t o0 = o / (MAX_BLOCKS * CB) * (MAX_BLOCKS * CB);
        int64_t width = j->ocp - o0 < MAX_BLOCKS * CB ? j->ocp - o0 : MAX_BLOCKS * CB;
        const float *src = j->dwp + o0 * taps * j->icp + (o - o0);
        for (int64_t i = 0; i < j->ic; i++)
            for (int64_t t = 0; t < taps; t++) {
                float sum = 0;
                for (int64_t p = 0; p < j->parts; p++)
                    sum += src[p * wsize + (t * j->icp + i) * width];
                dw[(o * j->ic + i) * taps + t] = sum;
            }
    }
}

/* Output pixels per weight below which packing and summing the per-thread
 * dW (scalar, once per weight) outweighs the faster tiles (measured: batch 1
 * at 7x7 loses, batch 32 at 7x7 wins). */
#define WGRAD_MIN_PIXELS 1024

bool deft_conv_direct_wgrad_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    return deft_conv_direct_fits(g, dtype) && g->batch * g->col[1] * g->col[2] >= WGRAD_MIN_PIXELS;
}

int deft_conv_direct_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                           float *dw) {
    direct_job_t j;
    /* long bands: each tile sums a band's pixels between loading and storing dW */
    deft_direct_job_init(&j, g, deft_parallel_budget());
    j.image = image, j.dy = colside;
    const int64_t items = g->batch * j.nbands;
    j.parts = deft_parallel_budget();
    if (j.parts > items) j.parts = items;
    const int64_t wsize = j.ocp * j.kh * j.kw * j.icp;
    j.dwp = aligned_alloc(64, (size_t)round_up(j.parts * wsize * 4, 64));
    if (!j.dwp) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for dW parts");
    deft_parallel_for(j.parts, 1, wgrad_parts, &j);
    if (!atomic_load(&j.failed)) unpack_sum(&j, dw);
    free(j.dwp);
    if (atomic_load(&j.failed))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for an input band");
    return 0;
}

#else /* no AVX-512 kernels on this compiler or architecture */

bool deft_conv_direct_wgrad_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    (void)g, (void)dtype;
    return false;
}

int deft_conv_direct_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                           float *dw) {
    (void)g, (void)image, (void)colside, (void)dw;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}

#endif
