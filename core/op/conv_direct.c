/*
 * Direct 2-D float32 convolution on AVX-512, for the shapes where it beats
 * im2col + GEMM (conv_cpu.c): groups 1, dilation 1, width stride 1 or 2.
 *
 * Per call, the weights are packed into blocks of 16 output channels
 * (kh, input channel block, kw, 16 inputs, 16 outputs); per work item, a
 * band of input rows
 * is packed with zero padding into blocks of 16 input channels
 * (row, channel block, column, 16 channels). The register tile is up to 14
 * output pixels of one row times 32 output channels: 28 zmm accumulators,
 * two weight vectors and one broadcast input value per step, 28 FMAs for
 * 2 vector loads and 14 scalar broadcasts. The tile's pixels sit at fixed
 * offsets from one pointer (the stride is a compile-time constant), so the
 * loop keeps no per-pixel pointers. The tile is written back to the
 * channels-first output through a small transposing buffer.
 *
 * Work items are (image, band of output rows); each packs its own band
 * (which then stays in L2) and runs every output-channel block over it.
 * The kernels are compiled for AVX-512 alone (target attributes) and chosen
 * at run time; other machines keep the im2col path.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/op/conv.h"
#include "core/op/conv_direct.h"

static atomic_bool direct_off;

void deft_conv_direct_enable(bool on) {
    atomic_store(&direct_off, !on);
}

bool deft_conv_direct_on(void) {
    return !atomic_load(&direct_off);
}

#if DEFT_CONV_DIRECT_X86
/* Whether the blocked kernels take g, 1x1 kernels included. */
static bool blocked_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    if (atomic_load(&direct_off) || dtype != DEFT_DT_FLOAT32 || g->groups != 1) return false;
    /* 2-D: no depth, no dilation; the width stride is compiled in */
    if (g->img[0] != 1 || g->k[0] != 1 || g->p[0] != 0 || g->s[0] != 1) return false;
    if (g->d[1] != 1 || g->d[2] != 1 || (g->s[2] != 1 && g->s[2] != 2)) return false;
    /* Channels rounded up to blocks of 16: at most a quarter more work. */
    if (round_up(g->chan, CB) * 4 > g->chan * 5 || round_up(g->filt, CB) * 4 > g->filt * 5)
        return false;
    if (g->batch == 0 || g->chan == 0 || g->col[1] == 0 || g->col[2] == 0) return false;
    return deft_simd_avx512();
}

bool deft_conv_direct_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    /* 1x1: im2col's GEMM reads the image itself (or a strided copy), and
     * with one tap per channel the tiles are too short to win (measured). */
    return g->k[1] * g->k[2] != 1 && blocked_fits(g, dtype);
}

/*
 * Taps that read the zero padding add nothing, and at ResNet's last stages
 * they are many: a 3x3 kernel at 7x7 reads padding in 19% of its products,
 * at 14x14 in 9.5%. The tiles skip them: kernel rows above or below the
 * image per output row, and the first or last tap of a 3x3 kernel row for
 * pixels in the image's first or last column (EDGE_LEFT, EDGE_RIGHT: which
 * of those a tile has, a compile-time constant of its code).
 */
enum { EDGE_LEFT = 1, EDGE_RIGHT = 2 };

void deft_direct_job_init(direct_job_t *j, const deft_conv_geom_t *g, int64_t items) {
    memset(j, 0, sizeof *j);
    j->batch = g->batch, j->ic = g->chan, j->oc = g->filt;
    j->icp = round_up(j->ic, CB), j->icb = j->icp / CB, j->ocp = round_up(j->oc, CB);
    j->ih = g->img[1], j->iw = g->img[2], j->oh = g->col[1], j->ow = g->col[2];
    j->kh = g->k[1], j->kw = g->k[2], j->sh = g->s[1], j->sw = g->s[2];
    j->ph = g->p[1], j->pw = g->p[2];
    j->step = 1;
    if (j->kh * j->kw == 1 && j->ph == 0 && j->pw == 0 && j->sh == 2 && j->sw == 2)
        j->step = 2, j->sh = j->sw = 1; /* packing half the rows and columns, not all */
    j->wp = (j->ow - 1) * j->sw + j->kw;
    /* a 3x3 kernel's padding taps at the first and last columns (tile_macs) */
    if (j->kw == 3 && j->pw >= 1) j->edges |= EDGE_LEFT;
    if (j->kw == 3 && (j->ow - 1) * j->sw + 2 - j->pw >= j->iw) j->edges |= EDGE_RIGHT;
    /* bands: an L2 share of input, and at least `items` of them in all */
    int64_t row_bytes = j->sh * j->icp * j->wp * 4;
    j->band = BAND_BYTES / (row_bytes > 0 ? row_bytes : 1);
    if (j->band < 1) j->band = 1;
    int64_t per_image = (items + g->batch - 1) / g->batch;
    if (j->band > (j->oh + per_image - 1) / per_image)
        j->band = (j->oh + per_image - 1) / per_image;
    if (j->band > j->oh) j->band = j->oh;
    j->nbands = (j->oh + j->band - 1) / j->band;
    j->band = (j->oh + j->nbands - 1) / j->nbands; /* even bands: 7 and 7, not 12 and 2 */
    atomic_init(&j->failed, false);
}

/* ---- packing ---- */

typedef struct pack_job {
    const direct_job_t *j;
    const float *w;
    bool flip;
    float *wpk;
} pack_job_t;

/* dst = the packed weights of the block pair from output channel o0 (see
 * pack_weights below): per input channel, the pair's (output channel, tap)
 * weights gathered in registers' order on the stack, then stored as taps
 * runs of the pair's width. (Stored weight by
 * weight, 64 KiB apart, W's 9 MB at 512 -> 512 3x3 took 3 ms: longer than
 * the convolution of one 7x7 image. Vector gathers of 8 output channels
 * were slower there: 3.9 -> 4.7 ms for a call on one 7x7 image.) */
static void pack_pair(const direct_job_t *j, const float *w, bool flip, int64_t o0, float *dst) {
    const int64_t taps = j->kh * j->kw, step = MAX_BLOCKS * CB;
    float tmp[MAX_BLOCKS * CB * 64]; /* (tap, output channel), for up to 64 taps */
    const int64_t width = j->ocp - o0 < step ? j->ocp - o0 : step;
    for (int64_t i = 0; i < j->icp; i++)
        for (int64_t t0 = 0; t0 < taps; t0 += 64) {
            int64_t nt = taps - t0 < 64 ? taps - t0 : 64;
            for (int64_t o = 0; o < width; o++) {
                int64_t oc = o0 + o;
                if (oc >= j->oc || i >= j->ic) {
                    for (int64_t t = 0; t < nt; t++) tmp[t * width + o] = 0;
                } else if (!flip) {
                    const float *src = w + (oc * j->ic + i) * taps + t0;
                    for (int64_t t = 0; t < nt; t++) tmp[t * width + o] = src[t];
                } else {
                    const float *src = w + (i * j->oc + oc) * taps + taps - 1 - t0;
                    for (int64_t t = 0; t < nt; t++) tmp[t * width + o] = src[-t];
                }
            }
            for (int64_t t = t0; t < t0 + nt; t++) { /* to (kernel row, block, tap, channel) */
                const int64_t r = t / j->kw, c = t % j->kw;
                memcpy(dst + (((r * j->icb + i / CB) * j->kw + c) * CB + i % CB) * width,
                       tmp + (t - t0) * width, (size_t)width * sizeof(float));
            }
        }
}

static void pack_pairs(void *ctx, int64_t begin, int64_t end) {
    const pack_job_t *p = ctx;
    const int64_t step = MAX_BLOCKS * CB, per = step * p->j->kh * p->j->kw * p->j->icp;
    for (int64_t k = begin; k < end; k++)
        pack_pair(p->j, p->w, p->flip, k * step, p->wpk + k * per);
}

/*
 * wpk[ob][r][ib][c][i][o] = the weight of output channel ob CB + o, input
 * channel ib CB + i, tap (r, c); zero for the padding channels. The taps of
 * a kernel row are inside the input channel blocks: a tile reads one
 * block's input columns for its kw taps one after the other, while they are
 * in L1 (taps outside, at 256 channels and more, the weights streamed
 * between two taps had pushed them out). The blocks of a
 * register tile's MAX_BLOCKS blocks lie side by side: a tile of nb blocks
 * starting at block ob reads (nb CB) weights per tap and channel.
 * flip: the weights are (ic, oc, kh, kw), read transposed and rotated by
 * 180 degrees (the data gradient as a convolution).
 */
static void pack_weights(const direct_job_t *j, const float *w, bool flip, float *wpk) {
    pack_job_t p = {j, w, flip, wpk};
    const int64_t pairs = (j->ocp + MAX_BLOCKS * CB - 1) / (MAX_BLOCKS * CB);
    const int64_t per_pair = MAX_BLOCKS * CB * j->icp * j->kh * j->kw;
    deft_parallel_for(pairs, per_pair >= (1 << 16) ? 1 : pairs, pack_pairs, &p);
}

/* The input rows of output rows [r0, r1): from r0 sh - ph, (r1 - r0 - 1) sh + kh of them. */
int64_t deft_direct_band_rows(const direct_job_t *j, int64_t r0, int64_t r1) {
    return (r1 - r0 - 1) * j->sh + j->kh;
}

/* transpose_block of the even columns of src: dst row c = column 2 c. */
static ALWAYS AVX512 void transpose_even(const float *src, int64_t sld, int rows, int cols,
                                         float *dst, int64_t dld) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const int n = 2 * cols - 1,
              first = n < 16 ? n : 16; /* the floats read: to column 2 (cols - 1) */
    const __mmask16 m0 = (__mmask16)((1u << first) - 1), m1 = (__mmask16)((1u << (n - first)) - 1);
    __m512 r[16], out[16];
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, src + i * sld), even,
                                                 _mm512_maskz_loadu_ps(m1, src + i * sld + 16))
                        : _mm512_setzero_ps();
    vf_transpose(r, out);
    for (int c = 0; c < cols; c++) _mm512_storeu_ps(dst + c * dld, out[c]);
}

/* buf (rows, icb, wp, CB) = image rows from `first` on, zero outside the
 * image (with j->step 2, of the image's even rows and columns). */
AVX512 void deft_direct_pack_band(const direct_job_t *j, const float *img, int64_t first,
                                  int64_t rows, float *buf) {
    const int64_t plane = j->ih * j->iw, blk = j->wp * CB, st = j->step;
    const int64_t width = (j->iw + st - 1) / st, height = (j->ih + st - 1) / st;
    const int64_t hi = j->pw + width < j->wp ? j->pw + width : j->wp, lo = j->pw < hi ? j->pw : hi;
    for (int64_t r = 0; r < rows; r++) {
        int64_t y = first + r;
        for (int64_t b = 0; b < j->icb; b++) {
            float *dst = buf + (r * j->icb + b) * blk;
            if (y < 0 || y >= height || b * CB + CB > j->ic) {
                memset(dst, 0, (size_t)blk * sizeof(float));
            } else { /* only the padding columns: the others are written below */
                memset(dst, 0, (size_t)(lo * CB) * sizeof(float));
                memset(dst + hi * CB, 0, (size_t)((j->wp - hi) * CB) * sizeof(float));
            }
            if (y < 0 || y >= height) continue;
            const float *src = img + b * CB * plane + y * st * j->iw;
            int chans = j->ic - b * CB < CB ? (int)(j->ic - b * CB) : CB;
            if (r + 1 < rows && y + 1 < height) /* the next row's, from memory at a batch */
                for (int c = 0; c < chans; c++)
                    for (int64_t x = 0; x < j->iw; x += 16)
                        _mm_prefetch((const char *)(src + c * plane + st * j->iw + x), _MM_HINT_T0);
            for (int64_t x = lo; x < hi; x += CB) {
                const int cols = hi - x < CB ? (int)(hi - x) : CB;
                if (st == 1)
                    transpose_block(src + x - j->pw, plane, chans, cols, dst + x * CB, CB);
                else
                    transpose_even(src + 2 * (x - j->pw), plane, chans, cols, dst + x * CB, CB);
            }
        }
    }
}

/* ---- the register tile ---- */

/* acc[.][p] += the products of one tap, x (kernel row and column) for the
 * tile's pixels [PA, PB), all CB input channels of x's block; skip_first,
 * skip_last: without the first or last pixel of each output row. */
static ALWAYS AVX512 void tap_macs(const float *x, int64_t rs, const float *w, int PA, int PB,
                                   int PW, int NB, int SW, bool skip_first, bool skip_last,
                                   __m512 acc[MAX_BLOCKS][MAX_PIX]) {
#pragma GCC unroll 4
    for (int i = 0; i < CB; i++, w += NB * CB) {
        __m512 w0 = _mm512_load_ps(w), w1 = w0;
        if (NB == 2) w1 = _mm512_load_ps(w + CB);
#pragma GCC unroll 14
        for (int p = PA; p < PB; p++) {
            if ((skip_first && p % PW == 0) || (skip_last && p % PW == PW - 1)) continue;
            __m512 v = _mm512_set1_ps(x[p / PW * rs + p % PW * SW * CB + i]);
            acc[0][p] = _mm512_fmadd_ps(v, w0, acc[0][p]);
            if (NB == 2) acc[1][p] = _mm512_fmadd_ps(v, w1, acc[1][p]);
        }
    }
}

/* The products of one kernel row, x (its input row at the tile's first
 * column) and w (its weights), for pixels [PA, PB); with E (edges), kw is 3. */
static ALWAYS AVX512 void kernel_row_macs(const direct_job_t *j, const float *x, int64_t rs,
                                          const float *w, int PA, int PB, int PW, int NB, int SW,
                                          int E, __m512 acc[MAX_BLOCKS][MAX_PIX]) {
    const int64_t blk = j->wp * CB, tap = CB * NB * CB;
    for (int64_t b = 0; b < j->icb; b++, x += blk)
        if (E) {
            tap_macs(x, rs, w, PA, PB, PW, NB, SW, E & EDGE_LEFT, false, acc);
            tap_macs(x + CB, rs, w + tap, PA, PB, PW, NB, SW, false, false, acc);
            tap_macs(x + 2 * CB, rs, w + 2 * tap, PA, PB, PW, NB, SW, false, E & EDGE_RIGHT, acc);
            w += 3 * tap;
        } else {
            for (int64_t c = 0; c < j->kw; c++, w += tap)
                tap_macs(x + c * CB, rs, w, PA, PB, PW, NB, SW, false, false, acc);
        }
}

/* The kernel rows [*lo, *hi) whose input rows are in the image for output row y. */
static void rows_inside(const direct_job_t *j, int64_t y, int64_t *lo, int64_t *hi) {
    const int64_t height = (j->ih + j->step - 1) / j->step, top = y * j->sh - j->ph;
    *lo = top < 0 ? -top : 0;
    *hi = height - top < j->kh ? height - top : j->kh;
}

/*
 * acc[b][p] (output channels b CB .. of pixel p) = the taps of P pixels,
 * SW columns apart, NB blocks of output channels, output row y on. x: the
 * packed band at the tile's first input row and column; w: the packed
 * weights of the blocks. The pixels are PW to an output row: pixel p is at
 * column p % PW of row p / PW, whose input is rs floats on from the row
 * before's (PW < P: two rows, each with the kernel rows inside the image).
 */
static ALWAYS AVX512 void tile_macs(const direct_job_t *j, const float *x, int64_t rs,
                                    const float *w, int64_t y, int P, int PW, int NB, int SW, int E,
                                    __m512 acc[MAX_BLOCKS][MAX_PIX]) {
    const int64_t row = j->icb * j->wp * CB, wrow = j->icb * j->kw * CB * NB * CB;
    int64_t lo, hi, lo1 = 0, hi1 = 0;
    rows_inside(j, y, &lo, &hi);
    if (PW < P) rows_inside(j, y + 1, &lo1, &hi1);
    const int64_t first = PW < P && lo1 < lo ? lo1 : lo, last = PW < P && hi1 > hi ? hi1 : hi;
    for (int64_t r = first; r < last; r++) {
        const bool top = r >= lo && r < hi, bottom = PW < P && r >= lo1 && r < hi1;
        if (PW == P || (top && bottom))
            kernel_row_macs(j, x + r * row, rs, w + r * wrow, 0, P, PW, NB, SW, E, acc);
        else if (top)
            kernel_row_macs(j, x + r * row, rs, w + r * wrow, 0, PW, PW, NB, SW, E, acc);
        else
            kernel_row_macs(j, x + r * row, rs, w + r * wrow, PW, P, PW, NB, SW, E, acc);
    }
}

/* One tile of image out: P pixels from output row y, column x0 on, PW to a
 * row (PW < P: whole rows from x0 = 0, which lie one after the other in the
 * output), channels o0 .. o0 + NB CB; the band's rows start at input row
 * y0 sh - ph; E: the edges whose padding taps it skips. */
static ALWAYS AVX512 void tile(const direct_job_t *j, const float *band, const float *wo,
                               int64_t y0, int64_t y, int64_t x0, int64_t o0, float *out, int P,
                               int NB, int SW, int PW, int E) {
    __m512 acc[MAX_BLOCKS][MAX_PIX];
    for (int b = 0; b < NB; b++) {
        __m512 init =
            j->bias && !j->scale ? _mm512_loadu_ps(j->bias + o0 + b * CB) : _mm512_setzero_ps();
#pragma GCC unroll 14
        for (int p = 0; p < P; p++) acc[b][p] = init;
    }
    float *dst = out + o0 * j->oh * j->ow + y * j->ow + x0;
    deft_direct_prefetch_tile(P, NB, j->oc - o0, j->oh * j->ow, dst);
    const int64_t rs =
        j->sh * j->icb * j->wp * CB; /* floats from one output row's input to the next */
    tile_macs(j, band + (y - y0) * rs + x0 * SW * CB, rs, wo, y, P, PW, NB, SW, E, acc);
    deft_direct_epilogue(acc, P, NB, j->scale, j->bias, j->relu, o0);
    deft_direct_store_tile(acc, P, NB, j->oc - o0, j->oh * j->ow, dst);
}

/* tile() with the code for edges e (a run-time value here). */
static ALWAYS AVX512 void edged_tile(const direct_job_t *j, const float *band, const float *wo,
                                     int64_t y0, int64_t y, int64_t x0, int64_t o0, float *out,
                                     int P, int NB, int SW, int PW, int e) {
    if (e == (EDGE_LEFT | EDGE_RIGHT))
        tile(j, band, wo, y0, y, x0, o0, out, P, NB, SW, PW, EDGE_LEFT | EDGE_RIGHT);
    else if (e == EDGE_LEFT)
        tile(j, band, wo, y0, y, x0, o0, out, P, NB, SW, PW, EDGE_LEFT);
    else if (e == EDGE_RIGHT)
        tile(j, band, wo, y0, y, x0, o0, out, P, NB, SW, PW, EDGE_RIGHT);
    else
        tile(j, band, wo, y0, y, x0, o0, out, P, NB, SW, PW, 0);
}

/* A tile within one output row: the image edges are those it reaches. */
static ALWAYS AVX512 void row_tile(const direct_job_t *j, const float *band, const float *wo,
                                   int64_t y0, int64_t y, int64_t x0, int64_t o0, float *out, int P,
                                   int NB, int SW) {
    const int e = (x0 == 0 ? EDGE_LEFT : 0) | (x0 + P == j->ow ? EDGE_RIGHT : 0);
    edged_tile(j, band, wo, y0, y, x0, o0, out, P, NB, SW, P, e & j->edges);
}

/* The tiles of output row y for channels o0 .., in NB blocks, stride SW. */
#define ROW_KERNEL(NB, SW) DEFT_DIRECT_ROW_KERNEL(row_##NB##_##SW, direct_job_t, row_tile, NB, SW)
ROW_KERNEL(1, 1)
ROW_KERNEL(2, 1)
ROW_KERNEL(1, 2)
ROW_KERNEL(2, 2)

typedef void (*row_fn)(const direct_job_t *, const float *, const float *, int64_t, int64_t,
                       int64_t, float *);

/* Outputs PAIR_OW wide (7: the last stage of the ImageNet networks) take
 * their tiles two rows at a time: 14 pixels, as many as the widest tiles,
 * where one row's 7 fill half the accumulators and load the weights once
 * per 7 broadcasts (ResNet-18's 512 -> 512 at 7x7, one image: 2.14 -> 2.12 ms). */
enum { PAIR_OW = 7 };
#define PAIR_KERNEL(NB, SW)                                                                        \
    static AVX512 void pair_##NB##_##SW(const direct_job_t *j, const float *band, const float *wo, \
                                        int64_t y0, int64_t y, int64_t o0, float *out) {           \
        edged_tile(j, band, wo, y0, y, 0, o0, out, 2 * PAIR_OW, NB, SW, PAIR_OW, j->edges);        \
    }
PAIR_KERNEL(1, 1)
PAIR_KERNEL(2, 1)
PAIR_KERNEL(1, 2)
PAIR_KERNEL(2, 2)

/* ---- work items: (image, band of output rows) ---- */

/* Output rows [r0, r1) of image out, the block pair from o0 with weights
 * wo, from the packed band of those rows. */
static void pair_rows(const direct_job_t *j, const float *band, const float *wo, int64_t r0,
                      int64_t r1, int64_t o0, float *out) {
    const bool s1 = j->sw == 1, paired = j->ow == PAIR_OW, wide = j->ocp - o0 >= MAX_BLOCKS * CB;
    const row_fn row = wide ? (s1 ? row_2_1 : row_2_2) : (s1 ? row_1_1 : row_1_2);
    const row_fn pair = wide ? (s1 ? pair_2_1 : pair_2_2) : (s1 ? pair_1_1 : pair_1_2);
    for (int64_t y = r0; y < r1; y++)
        if (paired && y + 1 < r1)
            pair(j, band, wo, r0, y++, o0, out);
        else
            row(j, band, wo, r0, y, o0, out);
}

/* Floats of one packed band (rounded up to a whole vector). */
static int64_t band_floats_of(const direct_job_t *j) {
    return round_up(deft_direct_band_rows(j, 0, j->band) * j->icb * j->wp * CB, 16);
}

/* Band nb's image, output rows [*r0, *r1), and where its input starts. */
static int64_t band_of(const direct_job_t *j, int64_t nb, int64_t *r0, int64_t *r1,
                       const float **img) {
    const int64_t n = nb / j->nbands;
    *r0 = nb % j->nbands * j->band;
    *r1 = *r0 + j->band < j->oh ? *r0 + j->band : j->oh;
    *img = j->image + n * j->ic * j->ih * j->iw;
    return n;
}

static void band_items(void *ctx, int64_t begin, int64_t end) {
    direct_job_t *j = ctx;
    const int64_t band_floats = band_floats_of(j);
    const int64_t pair_floats = j->wpk ? 0 : MAX_BLOCKS * CB * j->kh * j->kw * j->icp;
    float *band = aligned_alloc(64, (size_t)(band_floats + pair_floats) * 4);
    if (!band) {
        atomic_store(&j->failed, true);
        return;
    }
    float *own = band + band_floats; /* the pair's weights, packed here without j->wpk */
    const int64_t step = MAX_BLOCKS * CB, pairs = (j->ocp + step - 1) / step;
    int64_t packed = -1; /* the band in the buffer, as item / osplits */
    for (int64_t item = begin; item < end; item++) {
        int64_t nb = item / j->osplits, s = item % j->osplits, r0, r1;
        const float *img;
        int64_t n = band_of(j, nb, &r0, &r1, &img);
        if (packed != nb)
            deft_direct_pack_band(j, img, r0 * j->sh - j->ph, deft_direct_band_rows(j, r0, r1),
                                  band);
        packed = nb;
        float *out = j->out + n * j->oc * j->oh * j->ow;
        const int64_t o1 = pairs * (s + 1) / j->osplits * step;
        for (int64_t o0 = pairs * s / j->osplits * step; o0 < o1 && o0 < j->ocp; o0 += step) {
            const float *wo = j->wpk ? j->wpk + o0 * j->kh * j->kw * j->icp : own;
            if (!j->wpk) pack_pair(j, j->w, j->flip, o0, own);
            pair_rows(j, band, wo, r0, r1, o0, out);
        }
    }
    free(band);
}

/* Where the packed weights have more bytes than this (an L2 share), each
 * band reads them all from L3 or memory again: bands are then as large as
 * BAND_BYTES allows and the threads share the output channels instead
 * (512 -> 512 at 7x7, one image: 7 bands of a row read 66 MB of weights, one
 * band 9.4 MB). */
#define BAND_MAX_W_BYTES (512 << 10)

/* ---- weights larger than L2, several bands: block pairs outside, bands inside ---- */

/* A run of bands [first, first + count) of the batch, packed side by side. */
typedef struct band_run {
    direct_job_t *j;
    float *bands;
    int64_t first, count, floats; /* floats: per band */
} band_run_t;

static void pack_run_items(void *ctx, int64_t begin, int64_t end) {
    const band_run_t *b = ctx;
    for (int64_t k = begin; k < end; k++) {
        int64_t r0, r1;
        const float *img;
        band_of(b->j, b->first + k, &r0, &r1, &img);
        deft_direct_pack_band(b->j, img, r0 * b->j->sh - b->j->ph,
                              deft_direct_band_rows(b->j, r0, r1), b->bands + k * b->floats);
    }
}

/* Items (block pair, band), the pair outer: one pair's weights serve the
 * run's bands one after the other from L2. */
static void pair_run_items(void *ctx, int64_t begin, int64_t end) {
    const band_run_t *b = ctx;
    const direct_job_t *j = b->j;
    for (int64_t item = begin; item < end; item++) {
        const int64_t k = item % b->count, o0 = item / b->count * MAX_BLOCKS * CB;
        int64_t r0, r1;
        const float *img;
        int64_t n = band_of(j, b->first + k, &r0, &r1, &img);
        pair_rows(j, b->bands + k * b->floats, j->wpk + o0 * j->kh * j->kw * j->icp, r0, r1, o0,
                  j->out + n * j->oc * j->oh * j->ow);
    }
}

/* The packed bands of a run take at most this many bytes (an L3 share). */
#define RUN_BYTES (8 << 20)

/* Weights over this many bytes (an L3 share) run block pairs outside: up to
 * it, band_items reading them again from L3 for each band is faster, as a
 * stream the prefetchers follow, than the tiles' broadcasts reading each
 * band from L3 (batch 16, 1 thread: 128 -> 128 at 28x28, 0.6 MB, 105 ->
 * 114 GFLOP/s; 128 -> 256 at stride 2, 1.2 MB, 90 -> 107; 256 -> 256 at
 * 14x14, 2.4 MB, 116 -> 121; 512 -> 512 at 7x7, 9.4 MB, no faster). */
#define PAIRS_OUTER_W_BYTES (4 << 20)

/*
 * Where the packed weights are larger than an L3 share and the batch has
 * several bands, band_items would read all of them from memory again for
 * each band (ResNet-18's 512 -> 512 at 7x7: 9.4 MB). Here the bands of a
 * run are packed first, then each item is one block pair over one band, in
 * pair-major order: the pair's weights are read once per run and from L2
 * for its other bands. false when out of memory for the run (the caller
 * then runs band_items).
 */
static bool run_pairs_outer(direct_job_t *j, int64_t bands) {
    band_run_t b = {j, NULL, 0, 0, band_floats_of(j)};
    int64_t per = RUN_BYTES / (b.floats * 4);
    per = per < 1 ? 1 : per > bands ? bands : per;
    if (!(b.bands = aligned_alloc(64, (size_t)(per * b.floats) * 4))) return false;
    const int64_t pairs = (j->ocp + MAX_BLOCKS * CB - 1) / (MAX_BLOCKS * CB);
    const int64_t macs = j->band * j->ow * MAX_BLOCKS * CB * j->icp * j->kh * j->kw;
    for (b.first = 0; b.first < bands; b.first += per) {
        b.count = bands - b.first < per ? bands - b.first : per;
        deft_parallel_for(b.count, 1, pack_run_items, &b);
        deft_parallel_for(pairs * b.count, macs >= ITEM_MACS ? 1 : ITEM_MACS / macs, pair_run_items,
                          &b);
    }
    free(b.bands);
    return true;
}

/* Convolve with packed weights j->wpk, or where that is NULL, with each
 * item packing its own (bias NULL or rounded up to ocp entries). Where the
 * batch's bands give the threads few items (one image at 7x7 gives 7), each
 * band's output channels are split too, in runs of block pairs, so that no
 * thread waits long for another's last item. */
static int run(direct_job_t *j, const deft_conv_geom_t *g) {
    const int64_t bands = g->batch * j->nbands, want = 8 * deft_parallel_budget();
    const int64_t pairs = (j->ocp + MAX_BLOCKS * CB - 1) / (MAX_BLOCKS * CB);
    const int64_t wbytes = j->ocp * j->icp * j->kh * j->kw * 4;
    if (j->wpk && wbytes > PAIRS_OUTER_W_BYTES && g->batch > 1 && run_pairs_outer(j, bands))
        return 0;
    j->osplits = bands < want ? (want + bands - 1) / bands : 1;
    if (j->osplits > pairs || !j->wpk) j->osplits = pairs;
    int64_t macs = j->band * j->ow * j->ocp * j->icp * j->kh * j->kw / j->osplits;
    int64_t grain = macs >= ITEM_MACS ? 1 : ITEM_MACS / (macs > 0 ? macs : 1);
    deft_parallel_for(bands * j->osplits, grain, band_items, j);
    if (atomic_load(&j->failed))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for an input band");
    return 0;
}

/* Bands at most this many in the batch: each item packs its block pair's
 * weights itself, rather than all of them being packed first. A large W's
 * packed copy then stays in the L2 cache of the core that uses it, and
 * none goes back to memory: at one image of 512 -> 512 3x3 at 7x7, packing
 * W (9.4 MB, read and written) had taken longer than the convolution. */
#define OWN_PACK_BANDS 2

static void pack_kept(void *ctx, float *dst) {
    const direct_job_t *j = ctx;
    pack_weights(j, j->w, false, dst);
}

/* The weights packed for the forward, kept for later calls with the same
 * contents (conv_packed.c); NULL when out of memory. */
static const float *kept_weights(direct_job_t *j, const float *w, const deft_content_key_t *wkey,
                                 deft_conv_packed_t **held) {
    deft_conv_pack_key_t key = {*wkey, w, {j->oc, j->ic, j->kh, j->kw}};
    j->w = w, j->flip = false;
    return deft_conv_packed_get(&key, (size_t)(j->ocp * j->kh * j->kw * j->icp), pack_kept, j,
                                held);
}

/* Pack weights (and bias, to ocp entries) and run; flip for the data gradient.
 * With wkey (the forward's weights' contents), the packed weights are kept. */
static int pack_and_run(direct_job_t *j, const deft_conv_geom_t *g, const float *w, bool flip,
                        const float *bias, const deft_content_key_t *wkey) {
    deft_conv_packed_t *held = NULL;
    const float *kept = wkey && !flip ? kept_weights(j, w, wkey, &held) : NULL;
    const bool own = !kept && g->batch * j->nbands <= OWN_PACK_BANDS;
    size_t wbytes = (size_t)round_up(j->ocp * j->kh * j->kw * j->icp * 4, 64);
    float *wpk = own || kept ? NULL : aligned_alloc(64, wbytes), *bpk = NULL;
    if ((!own && !kept && !wpk) || (bias && !(bpk = calloc((size_t)j->ocp, sizeof(float))))) {
        free(wpk);
        deft_conv_packed_release(held);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for packed weights");
    }
    j->w = w, j->flip = flip;
    if (wpk) pack_weights(j, w, flip, wpk);
    if (bias) memcpy(bpk, bias, (size_t)j->oc * sizeof(float));
    j->wpk = kept ? kept : wpk, j->bias = bpk;
    int status = run(j, g);
    free(wpk), free(bpk);
    deft_conv_packed_release(held);
    return status;
}

/* Bands for geometry g: at least 4 items per thread, unless W is large. */
static void job_for(direct_job_t *j, const deft_conv_geom_t *g) {
    int64_t wbytes = round_up(g->filt, CB) * round_up(g->chan, CB) * g->k[1] * g->k[2] * 4;
    deft_direct_job_init(j, g, wbytes > BAND_MAX_W_BYTES ? 1 : 4 * deft_parallel_budget());
}

int deft_conv_direct_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                           const float *bias, float *colside, const deft_content_key_t *wkey) {
    direct_job_t j;
    job_for(&j, g);
    j.image = image, j.out = colside;
    return pack_and_run(&j, g, w, false, bias, wkey);
}

bool deft_conv_direct_scaled_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    return blocked_fits(g, dtype) || deft_conv_stem_fits(g, dtype);
}

int deft_conv_direct_lower_scaled(const deft_conv_geom_t *g, const float *image, const float *w,
                                  const float *scale, const float *shift, bool relu, float *colside,
                                  const deft_content_key_t *wkey) {
    if (!blocked_fits(g, DEFT_DT_FLOAT32))
        return deft_conv_stem_lower_scaled(g, image, w, scale, shift, relu, colside);
    direct_job_t j;
    job_for(&j, g);
    float *spk = calloc((size_t)j.ocp, sizeof(float));
    if (!spk) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for scales");
    memcpy(spk, scale, (size_t)j.oc * sizeof(float));
    j.image = image, j.out = colside, j.scale = spk, j.relu = relu;
    int status = pack_and_run(&j, g, w, false, shift, wkey);
    free(spk);
    return status;
}

/* The data gradient at stride 1 is a convolution of the column side with the
 * weights transposed and flipped, padded by k - 1 - p. */
static bool raise_geometry(const deft_conv_geom_t *g, deft_conv_geom_t *t) {
    if (g->s[1] != 1 || g->s[2] != 1) return false;
    *t = *g;
    t->chan = g->filt, t->filt = g->chan;
    for (int i = 0; i < 3; i++) {
        t->img[i] = g->col[i], t->col[i] = g->img[i];
        t->p[i] = g->k[i] - 1 - g->p[i];
        if (t->p[i] < 0) return false;
    }
    return deft_conv_direct_fits(t, DEFT_DT_FLOAT32);
}

bool deft_conv_direct_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    deft_conv_geom_t t;
    return deft_conv_direct_fits(g, dtype) && raise_geometry(g, &t);
}

int deft_conv_direct_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                           const float *bias, float *image) {
    deft_conv_geom_t t;
    if (!raise_geometry(g, &t))
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct data gradient here");
    direct_job_t j;
    job_for(&j, &t);
    j.image = colside, j.out = image;
    return pack_and_run(&j, &t, w, true, bias, NULL);
}

#else /* no AVX-512 kernels on this compiler or architecture */

bool deft_conv_direct_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    (void)g, (void)dtype;
    return false;
}
bool deft_conv_direct_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    (void)g, (void)dtype;
    return false;
}
bool deft_conv_direct_scaled_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    (void)g, (void)dtype;
    return false;
}
int deft_conv_direct_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                           const float *bias, float *colside, const deft_content_key_t *wkey) {
    (void)g, (void)image, (void)w, (void)bias, (void)colside, (void)wkey;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}
int deft_conv_direct_lower_scaled(const deft_conv_geom_t *g, const float *image, const float *w,
                                  const float *scale, const float *shift, bool relu, float *colside,
                                  const deft_content_key_t *wkey) {
    (void)g, (void)image, (void)w, (void)scale, (void)shift, (void)relu, (void)colside, (void)wkey;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}
int deft_conv_direct_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                           const float *bias, float *image) {
    (void)g, (void)colside, (void)w, (void)bias, (void)image;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}

#endif
