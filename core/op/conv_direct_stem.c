/*
 * Direct 2-D float32 convolution on AVX-512 for images of at most four
 * channels: a network's first layer on RGB (ResNet's 3 -> 64 7x7 at stride
 * 2), forward only. Blocks of 16 input channels (conv_direct.c) would be
 * mostly padding here, and im2col's GEMM, K = 147 deep, ran at half the
 * FMA rate; the small-channel kernels (conv_direct_small.c) take stride 1.
 *
 * The register tile is conv_direct.c's: up to 14 output pixels of one row
 * times 32 output channels, 28 accumulators. The input band is packed as
 * (row, column, 4 channels), zero-padded, so a tile's pixels sit at
 * constant offsets from one pointer; the weights as (block pair, tap,
 * channel, 32 outputs). Per tap and input channel: two weight vectors, 14
 * broadcasts, 28 FMAs. Work items are (image, band of output rows); each
 * packs its band and runs every output channel over it. The weights are
 * packed per call: at most 4 x 16 x taps per output channel, a few
 * microseconds.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/op/conv.h"
#include "core/op/conv_direct.h"

#if DEFT_CONV_DIRECT_X86

enum { CI = 4 }; /* floats per packed input column: the most channels taken */

typedef struct stem_job {
    int64_t batch, ic, oc, ocp; /* ocp: oc rounded up to CB */
    int64_t ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
    int64_t wp;                      /* packed columns: those the row's taps read */
    int64_t band, nbands;            /* output rows per work item */
    const float *image, *wpk, *bias; /* bias: NULL, or ocp entries */
    const float *scale;              /* NULL, or ocp entries: out = sum scale + bias */
    bool relu;                       /* then out = max(out, 0) */
    float *out;
    atomic_bool failed;
} stem_job_t;

bool deft_conv_stem_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    if (!deft_conv_direct_on() || dtype != DEFT_DT_FLOAT32 || g->groups != 1) return false;
    if (g->img[0] != 1 || g->k[0] != 1 || g->p[0] != 0 || g->s[0] != 1) return false;
    if (g->d[1] != 1 || g->d[2] != 1 || (g->s[2] != 1 && g->s[2] != 2)) return false;
    if (g->chan < 1 || g->chan > CI || g->k[1] * g->k[2] == 1) return false;
    /* output channels rounded up to blocks of 16: at most a quarter more work */
    if (g->filt == 0 || round_up(g->filt, CB) * 4 > g->filt * 5) return false;
    if (g->batch == 0 || g->col[1] == 0 || g->col[2] == 0) return false;
    return deft_simd_avx512();
}

/* Shape and bands: an L2 share of input per band, at least 4 bands per thread. */
static void stem_init(stem_job_t *j, const deft_conv_geom_t *g) {
    memset(j, 0, sizeof *j);
    j->batch = g->batch, j->ic = g->chan, j->oc = g->filt, j->ocp = round_up(g->filt, CB);
    j->ih = g->img[1], j->iw = g->img[2], j->oh = g->col[1], j->ow = g->col[2];
    j->kh = g->k[1], j->kw = g->k[2], j->sh = g->s[1], j->sw = g->s[2];
    j->ph = g->p[1], j->pw = g->p[2];
    j->wp = (j->ow - 1) * j->sw + j->kw;
    int64_t row_bytes = j->sh * j->wp * CI * 4;
    j->band = BAND_BYTES / (row_bytes > 0 ? row_bytes : 1);
    int64_t items = 4 * deft_parallel_budget(), per_image = (items + g->batch - 1) / g->batch;
    if (j->band > (j->oh + per_image - 1) / per_image)
        j->band = (j->oh + per_image - 1) / per_image;
    if (j->band < 1) j->band = 1;
    j->nbands = (j->oh + j->band - 1) / j->band;
    j->band = (j->oh + j->nbands - 1) / j->nbands;
    atomic_init(&j->failed, false);
}

/* wpk[pair][tap][i][o]: output channel pair CB .. + o (o < the pair's
 * width, 32 or a last 16), input channel i; zero past oc. */
static void pack_weights(const stem_job_t *j, const float *w, float *wpk) {
    const int64_t taps = j->kh * j->kw, step = MAX_BLOCKS * CB;
    for (int64_t o0 = 0; o0 < j->ocp; o0 += step) {
        const int64_t width = j->ocp - o0 < step ? j->ocp - o0 : step;
        float *dst = wpk + o0 * taps * j->ic;
        for (int64_t t = 0; t < taps; t++)
            for (int64_t i = 0; i < j->ic; i++, dst += width)
                for (int64_t o = 0; o < width; o++)
                    dst[o] = o0 + o < j->oc ? w[((o0 + o) * j->ic + i) * taps + t] : 0.0f;
    }
}

/* buf (rows, wp, CI) = image rows from `first` on, zero outside the image. */
static void pack_band(const stem_job_t *j, const float *img, int64_t first, int64_t rows,
                      float *buf) {
    const int64_t plane = j->ih * j->iw;
    const int64_t lo = j->pw, hi = j->pw + j->iw < j->wp ? j->pw + j->iw : j->wp;
    memset(buf, 0, (size_t)(rows * j->wp * CI) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        int64_t y = first + r;
        if (y < 0 || y >= j->ih) continue;
        float *dst = buf + r * j->wp * CI;
        for (int64_t c = 0; c < j->ic; c++) {
            const float *src = img + c * plane + y * j->iw;
            for (int64_t x = lo; x < hi; x++) dst[x * CI + c] = src[x - j->pw];
        }
    }
}

/* One tile: P pixels of output row y from column x0, NB blocks of output
 * channels from o0; the band's rows start at input row y0 sh - ph. */
static ALWAYS AVX512 void stem_tile(const stem_job_t *j, const float *band, const float *w,
                                    int64_t y0, int64_t y, int64_t x0, int64_t o0, float *out,
                                    int P, int NB, int SW) {
    __m512 acc[MAX_BLOCKS][MAX_PIX];
    for (int b = 0; b < NB; b++) {
        __m512 init =
            j->bias && !j->scale ? _mm512_loadu_ps(j->bias + o0 + b * CB) : _mm512_setzero_ps();
#pragma GCC unroll 14
        for (int p = 0; p < P; p++) acc[b][p] = init;
    }
    float *dst = out + o0 * j->oh * j->ow + y * j->ow + x0;
    deft_direct_prefetch_tile(P, NB, j->oc - o0, j->oh * j->ow, dst);
    const int64_t row = j->wp * CI;
    const float *x = band + (y - y0) * j->sh * row + x0 * SW * CI;
    for (int64_t r = 0; r < j->kh; r++)
        for (int64_t c = 0; c < j->kw; c++) {
            const float *xc = x + r * row + c * CI;
            for (int64_t i = 0; i < j->ic; i++, w += NB * CB) {
                __m512 w0 = _mm512_load_ps(w), w1 = w0;
                if (NB == 2) w1 = _mm512_load_ps(w + CB);
#pragma GCC unroll 14
                for (int p = 0; p < P; p++) {
                    __m512 v = _mm512_set1_ps(xc[p * SW * CI + i]);
                    acc[0][p] = _mm512_fmadd_ps(v, w0, acc[0][p]);
                    if (NB == 2) acc[1][p] = _mm512_fmadd_ps(v, w1, acc[1][p]);
                }
            }
        }
    deft_direct_epilogue(acc, P, NB, j->scale, j->bias, j->relu, o0);
    deft_direct_store_tile(acc, P, NB, j->oc - o0, j->oh * j->ow, dst);
}

#define STEM_ROW(NB, SW) DEFT_DIRECT_ROW_KERNEL(stem_row_##NB##_##SW, stem_job_t, stem_tile, NB, SW)
STEM_ROW(1, 1)
STEM_ROW(2, 1)
STEM_ROW(1, 2)
STEM_ROW(2, 2)

typedef void (*stem_row_fn)(const stem_job_t *, const float *, const float *, int64_t, int64_t,
                            int64_t, float *);

static void stem_items(void *ctx, int64_t begin, int64_t end) {
    stem_job_t *j = ctx;
    const int64_t rows = (j->band - 1) * j->sh + j->kh;
    float *band = aligned_alloc(64, (size_t)round_up(rows * j->wp * CI, 16) * sizeof(float));
    if (!band) {
        atomic_store(&j->failed, true);
        return;
    }
    const bool s1 = j->sw == 1;
    const stem_row_fn two = s1 ? stem_row_2_1 : stem_row_2_2,
                      one = s1 ? stem_row_1_1 : stem_row_1_2;
    const int64_t step = MAX_BLOCKS * CB, taps = j->kh * j->kw;
    for (int64_t item = begin; item < end; item++) {
        int64_t n = item / j->nbands, r0 = item % j->nbands * j->band;
        int64_t r1 = r0 + j->band < j->oh ? r0 + j->band : j->oh;
        pack_band(j, j->image + n * j->ic * j->ih * j->iw, r0 * j->sh - j->ph,
                  (r1 - r0 - 1) * j->sh + j->kh, band);
        float *out = j->out + n * j->oc * j->oh * j->ow;
        for (int64_t o0 = 0; o0 < j->ocp; o0 += step) {
            const float *wo = j->wpk + o0 * taps * j->ic;
            for (int64_t y = r0; y < r1; y++)
                (j->ocp - o0 >= step ? two : one)(j, band, wo, r0, y, o0, out);
        }
    }
    free(band);
}

/* Pack the weights, the bias and the scales (to ocp entries each) and run. */
static int stem_run(const deft_conv_geom_t *g, const float *image, const float *w,
                    const float *bias, const float *scale, bool relu, float *colside) {
    stem_job_t j;
    stem_init(&j, g);
    size_t wbytes = (size_t)round_up(j.ocp * j.kh * j.kw * j.ic * 4, 64);
    float *wpk = aligned_alloc(64, wbytes), *bpk = calloc((size_t)(2 * j.ocp), sizeof(float));
    if (!wpk || !bpk) {
        free(wpk), free(bpk);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for packed weights");
    }
    pack_weights(&j, w, wpk);
    if (bias) memcpy(bpk, bias, (size_t)j.oc * sizeof(float));
    if (scale) memcpy(bpk + j.ocp, scale, (size_t)j.oc * sizeof(float));
    j.image = image, j.wpk = wpk, j.out = colside, j.relu = relu;
    j.bias = bias ? bpk : NULL, j.scale = scale ? bpk + j.ocp : NULL;
    int64_t macs = j.band * j.ow * j.ocp * j.ic * j.kh * j.kw;
    int64_t grain = macs >= ITEM_MACS ? 1 : ITEM_MACS / (macs > 0 ? macs : 1);
    deft_parallel_for(j.batch * j.nbands, grain, stem_items, &j);
    free(wpk), free(bpk);
    if (atomic_load(&j.failed))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for an input band");
    return 0;
}

int deft_conv_stem_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                         const float *bias, float *colside) {
    return stem_run(g, image, w, bias, NULL, false, colside);
}

int deft_conv_stem_lower_scaled(const deft_conv_geom_t *g, const float *image, const float *w,
                                const float *scale, const float *shift, bool relu, float *colside) {
    return stem_run(g, image, w, shift, scale, relu, colside);
}

#else /* no AVX-512 kernels on this compiler or architecture */

bool deft_conv_stem_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    (void)g, (void)dtype;
    return false;
}
int deft_conv_stem_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                         const float *bias, float *colside) {
    (void)g, (void)image, (void)w, (void)bias, (void)colside;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}
int deft_conv_stem_lower_scaled(const deft_conv_geom_t *g, const float *image, const float *w,
                                const float *scale, const float *shift, bool relu, float *colside) {
    (void)g, (void)image, (void)w, (void)scale, (void)shift, (void)relu, (void)colside;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}

#endif
