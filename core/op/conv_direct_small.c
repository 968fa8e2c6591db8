/*
 * Direct 2-D float32 convolution on AVX-512 for few channels (LeNet's 1 -> 6
 * and 6 -> 16 at 5x5): where blocks of 16 channels (conv_direct.c) would be
 * mostly padding and im2col's GEMM has 6 or 16 rows.
 *
 * The vectors run along the pixels instead, on "shifted rows": for each
 * kernel column s the input is packed once per channel as rows of ow
 * floats, row Y holding the padded image's columns [s dw, s dw + ow). Output
 * pixel q = y ow + x then reads tap (r, s) at q + r dh ow in channel c's
 * copy for s, the same offset for every pixel. So a vector of 16 output
 * pixels is 16 consecutive floats of one packed copy, whatever rows they
 * span, and every lane is a real output pixel (but in the last vector):
 * the kw copies of the input cost a little packing and nothing in the
 * products.
 *
 * Stride 1 only (any dilation), groups 1. Three products:
 *  - lower: a register tile of OB output channels by NV vectors of pixels,
 *    per (input channel, tap) NV loads, OB broadcast weights, OB NV FMAs;
 *  - raise (the data gradient): the same kernel as a (kh x 1) convolution
 *    of dy into a plane per (input channel, kernel column), whose shifted
 *    rows add up to the image (column planes, below);
 *  - wgrad: a tile of OB output channels by TB (input channel, tap) pairs,
 *    summing dy (zero past its pixels) times the shifted input over the
 *    pixels of a run of images, then across the vector's lanes; and, when
 *    asked, the bias gradient: dy's sums per channel, taken from each run
 *    while it is in cache (a pass of its own over LeNet's first layer's
 *    dy cost about as much as reading it from memory again).
 * Work is split over images (lower, raise: and over runs of output rows
 * when there are fewer images than threads; wgrad: into per-thread sums).
 * Tiles skip the kernel rows that would read only the padding above or
 * below the image (most of the data gradient's padding at small images).
 * The measured figures in comments are LeNet's at batch 32, one thread
 * (AMD EPYC, Zen 4).
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/base/scratch.h"
#include "core/op/conv.h"
#include "core/op/conv_direct.h"

#if DEFT_CONV_DIRECT_X86

enum {
    VL = 16,    /* floats per vector */
    MAX_OB = 6, /* output channels per register tile */
    MAX_NV = 8, /* pixel vectors per forward tile (fewer for more channels) */
    MAX_TB = 4, /* (channel, tap) pairs per weight-gradient tile */
};

/* The weight gradient's runs of packed images and dy: enough pixel vectors
 * that a tile's products outweigh loading and storing its sums (kept in
 * lanes between runs), and at most RUN_BYTES. Runs of 512 KiB, summed
 * across the lanes at the end of each, read LeNet's first layer from the
 * level-2 cache: its weight gradient 64 -> 52 us on one thread (Sapphire
 * Rapids; its second layer's, 4 vectors an image, stays at 102). */
#define RUN_VECTORS 32
#define RUN_BYTES   (512 << 10)

/* The shape of one call on wide rows. */
typedef struct small_job {
    int64_t batch, ic, oc, ih, iw, oh, ow, ph, pw;
    int64_t kh, kw, dh;          /* kernel, height dilation */
    int64_t dw, taps;            /* width dilation; kernel positions */
    int64_t hp;                  /* padded height: rows per packed copy */
    int64_t nq;                  /* output pixels, oh ow rounded up to VL */
    int64_t plane;               /* floats per packed (channel, kernel column), a multiple of VL */
    int64_t *off;                /* ic taps offsets: channel c, tap t at off[c taps + t] */
    const float *x, *wpk;        /* input; weights (oc, ic, taps), packed */
    const float *bias;           /* NULL or oc entries */
    float *y;                    /* lower, raise: output */
    bool relu;                   /* lower: max(y, 0) as the tiles are stored */
    const deft_conv_geom_t *fwd; /* raise: the forward's geometry (items add up planes), */
    __mmask16 *lanes;            /* per (16 image columns, kernel column): the lanes and */
    int64_t *from;               /* the plane offset that add_planes reads */
    const float *dy;             /* wgrad: output gradient, */
    float *dwp;                  /* its per-part sums (parts, oc, ic taps, VL lanes), */
    float *dbp;                  /* NULL, or dy's per-part sums (parts, oc, VL lanes): db */
    int64_t splits;              /* lower: runs of output rows per image */
    int64_t parts, per_run;
    atomic_bool failed;
} small_job_t;

/* Whether g's shape suits the kernels (before the dtype and CPU checks). */
static bool small_shape(const deft_conv_geom_t *g) {
    if (g->groups != 1 || g->img[0] != 1 || g->k[0] != 1 || g->p[0] != 0 || g->s[0] != 1)
        return false;
    if (g->s[1] != 1 || g->s[2] != 1 || g->k[1] * g->k[2] == 1) return false;
    if (g->batch == 0 || g->chan == 0 || g->filt == 0 || g->col[1] == 0 || g->col[2] == 0)
        return false;
    /* few channels on one side (else blocks of 16 or im2col's GEMM serve), and
     * padded rows at most twice the output's (else most taps read zeros) */
    const int64_t few = g->chan < g->filt ? g->chan : g->filt;
    const int64_t wp = g->img[2] + 2 * g->p[2];
    return few < 16 && g->chan <= 64 && g->filt <= 64 && 2 * g->col[2] >= wp;
}

static void small_init(small_job_t *j, const deft_conv_geom_t *g) {
    memset(j, 0, sizeof *j);
    j->batch = g->batch, j->ic = g->chan, j->oc = g->filt;
    j->ih = g->img[1], j->iw = g->img[2], j->oh = g->col[1], j->ow = g->col[2];
    j->ph = g->p[1], j->pw = g->p[2];
    j->kh = g->k[1], j->kw = g->k[2], j->dh = g->d[1], j->dw = g->d[2];
    j->taps = j->kh * j->kw;
    j->hp = j->ih + 2 * j->ph;
    j->nq = round_up(j->oh * j->ow, VL);
    /* the last vector's reads reach (kh - 1) dh rows below it */
    j->plane = round_up(j->nq + (j->kh - 1) * j->dh * j->ow, VL);
    atomic_init(&j->failed, false);
}

/* The tap offsets of every (channel, tap) pair; false when out of memory. */
static bool small_offsets(small_job_t *j) {
    j->off = malloc((size_t)(j->ic * j->taps) * sizeof *j->off);
    if (!j->off) return false;
    for (int64_t c = 0; c < j->ic; c++)
        for (int64_t r = 0; r < j->kh; r++)
            for (int64_t s = 0; s < j->kw; s++)
                j->off[c * j->taps + r * j->kw + s] =
                    (c * j->kw + s) * j->plane + r * j->dh * j->ow;
    return true;
}

/* Floats of one packed image: a copy per (channel, kernel column). */
static int64_t packed_size(const small_job_t *j) {
    return j->ic * j->kw * j->plane;
}

/* The columns [*x0, *x1) of a row packed for kernel column s that read the
 * image (at column x + s dw - pw), of ow. */
static int64_t live_columns(const small_job_t *j, int64_t s, int64_t *x0, int64_t *x1) {
    const int64_t shift = s * j->dw - j->pw;
    *x0 = shift < 0 ? (-shift < j->ow ? -shift : j->ow) : 0;
    *x1 = j->iw - shift < j->ow ? j->iw - shift : j->ow;
    if (*x1 < *x0) *x1 = *x0;
    return shift;
}

/* dst[0, n) = src[0, n): rows are short (8 floats for LeNet's second layer),
 * too short for a memcpy call each. */
static ALWAYS AVX512 void copy_row(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
    if (i < n) {
        const __mmask16 m = first_lanes(n - i);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
    }
}

/* p[0, n) = 0, inline: the padding rows are a few floats, too few for a
 * memset call each. */
static ALWAYS AVX512 void zero_floats(float *p, int64_t n) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) _mm512_storeu_ps(p + i, _mm512_setzero_ps());
    if (i < n) _mm512_mask_storeu_ps(p + i, first_lanes(n - i), _mm512_setzero_ps());
}

/* The padding rows above (top floats) and below the image's body of each
 * of a channel's kw shifted planes = 0 (the packs write the body whole). */
static ALWAYS AVX512 void zero_pad_rows(const small_job_t *j, float *planes, int64_t top,
                                        int64_t body) {
    for (int64_t s = 0; s < j->kw; s++) {
        zero_floats(planes + s * j->plane, top);
        zero_floats(planes + s * j->plane + top + body, j->plane - top - body);
    }
}

/* Rows of at most 16 columns, in and out: each image row is loaded once and
 * permuted into its kw shifted rows, padding columns masked to zero, whole
 * rows stored (so only the padding rows above and below are zeroed first):
 * LeNet's second layer forward 109 -> 100 us against a masked copy per row
 * into a zeroed buffer. (Rows of 32 in two vectors gained 2 us of 74 in its
 * first layer, and cost its second the 9 us back.) */
static AVX512 void pack_narrow(const small_job_t *j, const float *img, float *xp) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int64_t top = j->ph * j->ow, body = j->ih * j->ow;
    const __mmask16 row_lanes = first_lanes(j->ow), image_lanes = first_lanes(j->iw);
    __mmask16 live[VL]; /* per kernel column: the lanes that read the image, */
    __m512i from[VL];   /* and the image column each lane reads */
    for (int64_t s = 0; s < j->kw; s++) {
        int64_t x0, x1;
        const int64_t shift = live_columns(j, s, &x0, &x1);
        live[s] = (__mmask16)(first_lanes(x1 - x0) << x0);
        from[s] = _mm512_add_epi32(iota, _mm512_set1_epi32((int)shift));
    }
    for (int64_t c = 0; c < j->ic; c++) {
        float *planes = xp + c * j->kw * j->plane;
        zero_pad_rows(j, planes, top, body);
        for (int64_t y = 0; y < j->ih; y++) {
            const __m512 row = _mm512_maskz_loadu_ps(image_lanes, img + (c * j->ih + y) * j->iw);
            float *dst = planes + top + y * j->ow;
            for (int64_t s = 0; s < j->kw; s++)
                _mm512_mask_storeu_ps(dst + s * j->plane, row_lanes,
                                      _mm512_maskz_permutexvar_ps(live[s], from[s], row));
        }
    }
}

/* Rows of 17 to 32 columns, in and out (LeNet's first layer: 28 in, 24
 * out): as pack_narrow, each image row loaded once (two vectors) and
 * permuted from the pair into its kw shifted rows, written whole, instead
 * of a masked copy per shifted row into a zeroed buffer: that layer's
 * weight gradient 59.5 -> 56.6 us at one thread (Sapphire Rapids; its
 * packing, skipped, saved 15 us: the rest is not in the instructions). */
static AVX512 void pack_wide(const small_job_t *j, const float *img, float *xp) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int64_t top = j->ph * j->ow, body = j->ih * j->ow;
    const __mmask16 tail_lanes = first_lanes(j->ow - VL);
    const __mmask16 lo_lanes = first_lanes(j->iw < VL ? j->iw : VL);
    const __mmask16 hi_lanes = j->iw > VL ? first_lanes(j->iw - VL) : 0;
    __mmask16 live[2][VL]; /* per half row and kernel column: the lanes that read the image, */
    __m512i from[2][VL];   /* and the column of the pair (lo, hi) each reads */
    for (int64_t s = 0; s < j->kw; s++) {
        const int64_t shift = s * j->dw - j->pw;
        for (int h = 0; h < 2; h++) {
            __mmask16 m = 0;
            for (int64_t x = h * VL; x < h * VL + VL; x++)
                if (x + shift >= 0 && x + shift < j->iw) m |= (__mmask16)(1u << (x - h * VL));
            live[h][s] = m;
            from[h][s] = _mm512_add_epi32(iota, _mm512_set1_epi32((int)(h * VL + shift)));
        }
    }
    for (int64_t c = 0; c < j->ic; c++) {
        float *planes = xp + c * j->kw * j->plane;
        zero_pad_rows(j, planes, top, body);
        for (int64_t y = 0; y < j->ih; y++) {
            const float *src = img + (c * j->ih + y) * j->iw;
            const __m512 lo = _mm512_maskz_loadu_ps(lo_lanes, src);
            const __m512 hi = _mm512_maskz_loadu_ps(hi_lanes, src + VL);
            float *dst = planes + top + y * j->ow;
            for (int64_t s = 0; s < j->kw; s++) {
                _mm512_storeu_ps(dst + s * j->plane,
                                 _mm512_maskz_permutex2var_ps(live[0][s], lo, from[0][s], hi));
                _mm512_mask_storeu_ps(dst + s * j->plane + VL, tail_lanes,
                                      _mm512_maskz_permutex2var_ps(live[1][s], lo, from[1][s], hi));
            }
        }
    }
}

/* xp (ic, kw, plane): copy (c, s) row Y, column x = the image padded by
 * (ph, pw) at row Y, column x + s dw; zero elsewhere. */
static AVX512 void pack_image(const small_job_t *j, const float *img, float *xp) {
    if (j->iw <= VL && j->ow <= VL && j->kw <= VL) {
        pack_narrow(j, img, xp);
        return;
    }
    if (j->iw <= 2 * VL && j->ow > VL && j->ow <= 2 * VL && j->kw <= VL) {
        pack_wide(j, img, xp);
        return;
    }
    memset(xp, 0, (size_t)packed_size(j) * sizeof(float));
    for (int64_t s = 0; s < j->kw; s++) {
        int64_t x0, x1;
        const int64_t shift = live_columns(j, s, &x0, &x1);
        if (x1 == x0) continue;
        for (int64_t c = 0; c < j->ic; c++) {
            float *dst = xp + (c * j->kw + s) * j->plane + j->ph * j->ow + x0;
            const float *src = img + c * j->ih * j->iw + x0 + shift;
            for (int64_t y = 0; y < j->ih; y++) copy_row(dst + y * j->ow, src + y * j->iw, x1 - x0);
        }
    }
}

/* ---- lower: the forward tile ---- */

/* What output channel o's tiles start from: its bias in the forward, zero
 * in the raise's planes (add_planes adds the bias to their sum). */
static inline float tile_bias(const small_job_t *j, int64_t o) {
    return j->bias && !j->fwd ? j->bias[o] : 0.0f;
}

/* yw (OB rows of nq) at pixel q0 = the taps of OB output channels from o0 on,
 * NV vectors of pixels; only kernel rows [r0, r1) (the others read padding). */
static ALWAYS AVX512 void lower_tile(const small_job_t *j, const float *xp, int64_t o0, int64_t q0,
                                     int64_t r0, int64_t r1, float *yw, int OB, int NV) {
    __m512 acc[MAX_OB][MAX_NV];
    for (int o = 0; o < OB; o++)
        for (int v = 0; v < NV; v++) acc[o][v] = _mm512_set1_ps(tile_bias(j, o0 + o));
    const int64_t pairs = j->ic * j->taps;
    const float *w = j->wpk + o0 * pairs;
    /* every kernel row live: one loop over the pairs (a loop per channel
     * around a short one spilled accumulators at each channel) */
    const int64_t runs = r0 == 0 && r1 == j->kh ? 1 : j->ic;
    const int64_t run = runs == 1 ? pairs : (r1 - r0) * j->kw;
    for (int64_t c = 0; c < runs; c++)
        for (int64_t k = c * j->taps + r0 * j->kw; k < c * j->taps + r0 * j->kw + run; k++) {
            const float *xk = xp + j->off[k] + q0;
            __m512 wv[MAX_OB];
            for (int o = 0; o < OB; o++) wv[o] = _mm512_set1_ps(w[o * pairs + k]);
            for (int v = 0; v < NV; v++) {
                __m512 xv = _mm512_loadu_ps(xk + v * VL);
                for (int o = 0; o < OB; o++) acc[o][v] = _mm512_fmadd_ps(wv[o], xv, acc[o][v]);
            }
        }
    /* max(0, y): NaN stays (max_ps gives its second operand), -0 too, as relu's x < 0 ? 0 : x */
    if (j->relu)
        for (int o = 0; o < OB; o++)
            for (int v = 0; v < NV; v++) acc[o][v] = _mm512_max_ps(_mm512_setzero_ps(), acc[o][v]);
    for (int o = 0; o < OB; o++)
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(yw + o * j->nq + q0 + v * VL, acc[o][v]);
}

typedef void (*lower_fn)(const small_job_t *, const float *, int64_t, int64_t, int64_t, int64_t,
                         float *);

#define LOWER_FN(OB, NV)                                                                           \
    static AVX512 void lower_##OB##_##NV(const small_job_t *j, const float *xp, int64_t o0,        \
                                         int64_t q0, int64_t r0, int64_t r1, float *yw) {          \
        lower_tile(j, xp, o0, q0, r0, r1, yw, OB, NV);                                             \
    }
#define LOWER_ROW(OB)                                                                              \
    LOWER_FN(OB, 1)                                                                                \
    LOWER_FN(OB, 2)                                                                                \
    LOWER_FN(OB, 3)                                                                                \
    LOWER_FN(OB, 4) LOWER_FN(OB, 5) LOWER_FN(OB, 6) LOWER_FN(OB, 7) LOWER_FN(OB, 8)
LOWER_ROW(1)
LOWER_ROW(2)
LOWER_ROW(3)
LOWER_ROW(4)
LOWER_ROW(5)
LOWER_ROW(6)
#define LOWER_ENTRY(OB)                                                                            \
    {                                                                                              \
        lower_##OB##_1, lower_##OB##_2, lower_##OB##_3, lower_##OB##_4, lower_##OB##_5,            \
            lower_##OB##_6, lower_##OB##_7, lower_##OB##_8                                         \
    }
static const lower_fn lower_fns[MAX_OB][MAX_NV] = {LOWER_ENTRY(1), LOWER_ENTRY(2), LOWER_ENTRY(3),
                                                   LOWER_ENTRY(4), LOWER_ENTRY(5), LOWER_ENTRY(6)};
/* Pixel vectors per tile of OB channels: OB NV accumulators, OB weights and
 * one input vector within the 32 registers, and at least 8 accumulators
 * (chains of FMAs: two units of 4 cycles' latency). */
static const int nv_cap[MAX_OB] = {8, 8, 8, 6, 4, 4};

/* Pixel vectors per tile of OB channels in job j. With padding above and
 * below, tiles of about one row skip more kernel rows that read only
 * padding (LeNet's second data gradient by column planes: 27% of its taps
 * with one vector, two rows, per tile; 13% with two). There, at least 16
 * accumulators: at 4 (one FMA unit's latency on Zen 4, whose 512-bit FMAs
 * issue one a cycle) Sapphire Rapids, which issues two, ran it in 136 us,
 * at 8 in 123, at 16 (three vectors of six channels) in 117; at 24, 118. */
static int64_t tile_vectors(const small_job_t *j, int64_t ob) {
    if (j->ph == 0) return nv_cap[ob - 1];
    int64_t nv = (j->ow + VL - 1) / VL, least = (16 + ob - 1) / ob;
    if (nv < least) nv = least;
    return nv < nv_cap[ob - 1] ? nv : nv_cap[ob - 1];
}

/* The kernel rows [*r0, *r1) that reach the image (not only its padding)
 * from output rows [y0, y1]. */
static void live_rows(const small_job_t *j, int64_t y0, int64_t y1, int64_t *r0, int64_t *r1) {
    /* row y reads padded row y + r dh; the image's rows are [ph, ph + ih) */
    int64_t lo = j->ph - y1 > 0 ? (j->ph - y1 + j->dh - 1) / j->dh : 0;
    int64_t hi = (j->ph + j->ih - 1 - y0) / j->dh + 1;
    *r0 = lo < j->kh ? lo : j->kh;
    *r1 = hi < j->kh ? hi : j->kh;
    if (*r1 < *r0) *r1 = *r0;
}

/* Output channels o0 .. by blocks of MAX_OB (the last block the rest). */
static int64_t block_of(int64_t oc, int64_t o0) {
    return oc - o0 < MAX_OB ? oc - o0 : MAX_OB;
}

/* Floats of room around the raise's planes, for add_planes' loads. */
static int64_t plane_margin(const small_job_t *j) {
    if (!j->fwd) return 0;
    const deft_conv_geom_t *g = j->fwd;
    return round_up(g->img[2] + g->p[2] + (g->k[2] - 1) * g->d[2] + VL, VL);
}

/* The raise's image n, rows [y0, y1) (plus bias) from the planes yw
 * (chan, kw, nq) of its rows: image column x takes column x - shift of
 * kernel column s's plane, shift as the forward's packing. Each 16 columns
 * of a row are summed in a register (adding each plane into memory in turn
 * would load what the last masked store just wrote, at another alignment,
 * which the store buffer cannot forward), from loads at the columns' own
 * lanes (plane_reads): those outside the plane's reach are masked off, and
 * the margin around yw keeps their addresses inside its buffer. */
static AVX512 void add_planes(const small_job_t *j, int64_t n, int64_t y0, int64_t y1,
                              const float *yw) {
    const deft_conv_geom_t *g = j->fwd;
    const int64_t chan = g->chan, kw = g->k[2], ih = g->img[1], iw = g->img[2];
    for (int64_t c = 0; c < chan; c++)
        for (int64_t y = y0; y < y1; y++) {
            float *row = j->y + ((n * chan + c) * ih + y) * iw;
            const float *planes = yw + c * kw * j->nq + y * j->ow;
            for (int64_t cx = 0, i = 0; cx < iw; cx += VL, i += kw) {
                __m512 acc = _mm512_set1_ps(j->bias ? j->bias[c] : 0.0f);
                for (int64_t s = 0; s < kw; s++)
                    acc = _mm512_add_ps(
                        acc, _mm512_maskz_loadu_ps(j->lanes[i + s], planes + j->from[i + s]));
                if (iw - cx >= VL)
                    _mm512_storeu_ps(row + cx, acc);
                else
                    _mm512_mask_storeu_ps(row + cx, first_lanes(iw - cx), acc);
            }
        }
}

/* Items (image, run of output rows): pack the image, run the tiles over the
 * run's pixel vectors into a buffer, copy its rows out (or add up the
 * raise's planes). Neighbouring runs may both compute a vector that spans
 * their boundary, each into its own buffer; an image in one item whose
 * pixels fill whole vectors is written in place. */
static void lower_items(void *ctx, int64_t begin, int64_t end) {
    small_job_t *j = ctx;
    const int64_t margin = plane_margin(j);
    float *xp =
        deft_scratch_alloc((size_t)(packed_size(j) + j->oc * j->nq + 2 * margin) * sizeof(float));
    if (!xp) {
        atomic_store(&j->failed, true);
        return;
    }
    float *yw = xp + packed_size(j) + margin;
    int64_t packed = -1;
    for (int64_t item = begin; item < end; item++) {
        const int64_t n = item / j->splits, s = item % j->splits;
        const int64_t y0 = j->oh * s / j->splits, y1 = j->oh * (s + 1) / j->splits;
        const int64_t v0 = y0 * j->ow / VL, v1 = (y1 * j->ow + VL - 1) / VL;
        float *out = j->y + n * j->oc * j->oh * j->ow;
        if (packed != n) pack_image(j, j->x + n * j->ic * j->ih * j->iw, xp), packed = n;
        /* whole images of whole vectors go straight to the output */
        float *dst = !j->fwd && j->splits == 1 && j->nq == j->oh * j->ow ? out : yw;
        for (int64_t o0 = 0; o0 < j->oc; o0 += MAX_OB) {
            const int64_t ob = block_of(j->oc, o0);
            const int64_t cap = tile_vectors(j, ob);
            for (int64_t v = v0; v < v1; v += cap) {
                const int64_t nv = v1 - v < cap ? v1 - v : cap;
                /* the tile's real rows: those past oh are the tail's */
                int64_t ya = v * VL / j->ow, yb = ((v + nv) * VL - 1) / j->ow, r0, r1;
                live_rows(j, ya, yb < j->oh ? yb : j->oh - 1, &r0, &r1);
                lower_fns[ob - 1][nv - 1](j, xp, o0, v * VL, r0, r1, dst + o0 * j->nq);
            }
        }
        if (j->fwd)
            add_planes(j, n, y0, y1, yw);
        else if (dst == yw)
            for (int64_t o = 0; o < j->oc; o++)
                memcpy(out + (o * j->oh + y0) * j->ow, yw + o * j->nq + y0 * j->ow,
                       (size_t)((y1 - y0) * j->ow) * sizeof(float));
    }
    deft_scratch_free(xp);
}

/* Run lower on weights wpk (oc, ic, taps). */
static int lower_run(small_job_t *j) {
    if (!small_offsets(j))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for tap offsets");
    /* runs of rows: an item for every thread when the batch is short */
    const int64_t threads = deft_parallel_budget();
    j->splits = j->batch < threads ? (threads + j->batch - 1) / j->batch : 1;
    if (j->splits > j->oh) j->splits = j->oh;
    const int64_t macs = j->oc * j->ic * j->taps * j->nq / j->splits;
    const int64_t grain = macs >= ITEM_MACS ? 1 : ITEM_MACS / (macs > 0 ? macs : 1);
    deft_parallel_for(j->batch * j->splits, grain, lower_items, j);
    free(j->off);
    if (atomic_load(&j->failed))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for a packed image");
    return 0;
}

bool deft_conv_small_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    if (dtype != DEFT_DT_FLOAT32 || !deft_conv_direct_on() || !small_shape(g)) return false;
    return !deft_conv_direct_fits(g, dtype) && deft_simd_avx512();
}

int deft_conv_small_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                          const float *bias, bool relu, float *colside) {
    small_job_t j;
    small_init(&j, g);
    j.x = image, j.wpk = w, j.bias = bias, j.y = colside, j.relu = relu;
    return lower_run(&j);
}

/* ---- raise: the data gradient by column planes ----
 *
 * dx[c][y][x + shift(s)] sums, over kernel columns s, planes
 * P[c, s][y][x] = sum over o, r of w[o][c][r][s] dy[o][y + ph - r dh][x]:
 * a convolution of dy by (kh x 1) kernels into ic kw output channels, padded
 * above and below only. Every multiply-add is a real one but for the rows of
 * padding (skipped where a tile reads only them), where the transposed
 * convolution on dy padded all round would spend most of them on zero
 * columns (LeNet's second layer: 8 of 16). */

/* The planes' convolution: dy (filt, oh, ow) by (kh x 1) kernels into
 * (chan kw, ih, ow), padded by (kh - 1) dh - ph above. */
static bool small_raise_geometry(const deft_conv_geom_t *g, deft_conv_geom_t *t) {
    const int64_t pad = (g->k[1] - 1) * g->d[1] - g->p[1];
    *t = *g;
    t->chan = g->filt, t->filt = g->chan * g->k[2];
    t->img[1] = g->col[1], t->img[2] = g->col[2];
    t->col[1] = g->img[1], t->col[2] = g->col[2];
    t->k[2] = 1, t->p[1] = pad, t->p[2] = 0, t->d[2] = 1;
    return pad >= 0 && (g->k[2] - 1) * g->d[2] >= g->p[2];
}

bool deft_conv_small_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    deft_conv_geom_t t;
    if (dtype != DEFT_DT_FLOAT32 || !deft_conv_direct_on() || !small_raise_geometry(g, &t))
        return false;
    return small_shape(g) && !deft_conv_direct_raise_fits(g, dtype) && deft_simd_avx512();
}

/* add_planes' reads: for 16 image columns from cx and kernel column s, the
 * lanes whose columns x read plane s (at x - shift, within [x0, x1)), and
 * the offset of lane 0's read, cx - shift + s nq; false when out of memory. */
static bool plane_reads(small_job_t *j) {
    small_job_t f; /* the forward's packing */
    small_init(&f, j->fwd);
    const int64_t chunks = (f.iw + VL - 1) / VL;
    j->lanes = malloc((size_t)(chunks * f.kw) * sizeof *j->lanes);
    j->from = malloc((size_t)(chunks * f.kw) * sizeof *j->from);
    if (!j->lanes || !j->from) return false;
    for (int64_t i = 0; i < chunks; i++)
        for (int64_t s = 0; s < f.kw; s++) {
            int64_t x0, x1;
            const int64_t shift = live_columns(&f, s, &x0, &x1), cx = i * VL;
            const int64_t a = x0 + shift > cx ? x0 + shift : cx;
            const int64_t b = x1 + shift < cx + VL ? x1 + shift : cx + VL;
            j->lanes[i * f.kw + s] = a < b ? (__mmask16)(first_lanes(b - a) << (a - cx)) : 0;
            j->from[i * f.kw + s] = s * j->nq + cx - shift;
        }
    return true;
}

int deft_conv_small_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                          const float *bias, float *image) {
    deft_conv_geom_t t;
    if (!small_raise_geometry(g, &t))
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct data gradient here");
    /* wt (chan, kw, filt, kh) = w (filt, chan, kh, kw), kernel rows reversed */
    const int64_t kh = g->k[1], kw = g->k[2];
    float *wt = malloc((size_t)(g->chan * g->filt * kh * kw) * sizeof(float));
    if (!wt) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for weights");
    for (int64_t o = 0; o < g->filt; o++)
        for (int64_t c = 0; c < g->chan; c++)
            for (int64_t r = 0; r < kh; r++)
                for (int64_t s = 0; s < kw; s++)
                    wt[((c * kw + s) * g->filt + o) * kh + kh - 1 - r] =
                        w[((o * g->chan + c) * kh + r) * kw + s];
    small_job_t j;
    small_init(&j, &t);
    j.x = colside, j.wpk = wt, j.bias = bias, j.y = image, j.fwd = g;
    int status = plane_reads(&j) ? lower_run(&j)
                                 : deft_error(DEFT_ERR_OUT_OF_MEMORY,
                                              "convolution: no memory for the plane reads");
    free(wt), free(j.lanes), free(j.from);
    return status;
}

/* ---- wgrad ---- */

/* The lanes' sums of dw[o][k] (OB output channels from o0, TB pairs from
 * k0; dwv holds VL floats per pair) += dy times the shifted input over
 * `images` packed images. The sums stay in lanes until the call's end, so
 * that runs can be short: a horizontal sum per pair and run would cost
 * more than a short run's products. */
static ALWAYS AVX512 void wgrad_tile(const small_job_t *j, const float *xp, const float *dyw,
                                     int64_t images, int64_t o0, int64_t k0, float *dwv, int OB,
                                     int TB) {
    __m512 acc[MAX_OB][MAX_TB];
    const int64_t nvec = j->nq / VL, pairs = j->ic * j->taps;
    for (int o = 0; o < OB; o++)
        for (int t = 0; t < TB; t++)
            acc[o][t] = _mm512_load_ps(dwv + ((o0 + o) * pairs + k0 + t) * VL);
    int64_t off[MAX_TB];
    for (int t = 0; t < TB; t++) off[t] = j->off[k0 + t];
    for (int64_t n = 0; n < images; n++) {
        const float *x = xp + n * packed_size(j), *d = dyw + (n * j->oc + o0) * j->nq;
        for (int64_t v = 0; v < nvec; v++, x += VL, d += VL) {
            __m512 dv[MAX_OB];
            for (int o = 0; o < OB; o++) dv[o] = _mm512_loadu_ps(d + o * j->nq);
            for (int t = 0; t < TB; t++) {
                __m512 xv = _mm512_loadu_ps(x + off[t]);
                for (int o = 0; o < OB; o++) acc[o][t] = _mm512_fmadd_ps(dv[o], xv, acc[o][t]);
            }
        }
    }
    for (int o = 0; o < OB; o++)
        for (int t = 0; t < TB; t++)
            _mm512_store_ps(dwv + ((o0 + o) * pairs + k0 + t) * VL, acc[o][t]);
}

typedef void (*wgrad_fn)(const small_job_t *, const float *, const float *, int64_t, int64_t,
                         int64_t, float *);

#define WGRAD_FN(OB, TB)                                                                           \
    static AVX512 void wgrad_##OB##_##TB(const small_job_t *j, const float *xp, const float *dyw,  \
                                         int64_t images, int64_t o0, int64_t k0, float *dw) {      \
        wgrad_tile(j, xp, dyw, images, o0, k0, dw, OB, TB);                                        \
    }
#define WGRAD_ROW(OB) WGRAD_FN(OB, 1) WGRAD_FN(OB, 2) WGRAD_FN(OB, 3) WGRAD_FN(OB, 4)
WGRAD_ROW(1)
WGRAD_ROW(2)
WGRAD_ROW(3)
WGRAD_ROW(4)
WGRAD_ROW(5)
WGRAD_ROW(6)
#define WGRAD_ENTRY(OB)                                                                            \
    { wgrad_##OB##_1, wgrad_##OB##_2, wgrad_##OB##_3, wgrad_##OB##_4 }
static const wgrad_fn wgrad_fns[MAX_OB][MAX_TB] = {WGRAD_ENTRY(1), WGRAD_ENTRY(2), WGRAD_ENTRY(3),
                                                   WGRAD_ENTRY(4), WGRAD_ENTRY(5), WGRAD_ENTRY(6)};

/* dyw (oc, nq) = dy's channels, each zero past its oh ow pixels. */
static AVX512 void pack_dy(const small_job_t *j, const float *dy, float *dyw) {
    const int64_t space = j->oh * j->ow;
    for (int64_t o = 0; o < j->oc; o++) {
        copy_row(dyw + o * j->nq, dy + o * space, space);
        memset(dyw + o * j->nq + space, 0, (size_t)(j->nq - space) * sizeof(float));
    }
}

/* db's lanes (oc, VL) += the pixels of each channel of `images` images of
 * dyw (images, oc, nq), zero past each channel's pixels. Four chains of
 * adds, so that a channel's 36 vectors (LeNet's first layer) wait on each
 * other's latency a quarter as long. */
static AVX512 void add_dy_sums(const small_job_t *j, const float *dyw, int64_t images, float *db) {
    for (int64_t n = 0; n < images; n++)
        for (int64_t o = 0; o < j->oc; o++) {
            const float *d = dyw + (n * j->oc + o) * j->nq;
            __m512 a[4] = {_mm512_load_ps(db + o * VL), _mm512_setzero_ps(), _mm512_setzero_ps(),
                           _mm512_setzero_ps()};
            int64_t v = 0;
            for (; v + 4 * VL <= j->nq; v += 4 * VL)
                for (int k = 0; k < 4; k++)
                    a[k] = _mm512_add_ps(a[k], _mm512_loadu_ps(d + v + k * VL));
            for (int k = 0; v < j->nq; v += VL, k++)
                a[k] = _mm512_add_ps(a[k], _mm512_loadu_ps(d + v));
            a[0] = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
            _mm512_store_ps(db + o * VL, a[0]);
        }
}

/* Part p: images [p batch / parts, (p + 1) batch / parts) into its own sums,
 * packed per_run images at a time. */
static void wgrad_parts(void *ctx, int64_t begin, int64_t end) {
    small_job_t *j = ctx;
    const int64_t xsize = packed_size(j), dsize = j->oc * j->nq, pairs = j->ic * j->taps;
    float *xp = deft_scratch_alloc((size_t)(j->per_run * (xsize + dsize)) * sizeof(float));
    if (!xp) {
        atomic_store(&j->failed, true);
        return;
    }
    /* dy whose channels fill whole vectors is read in place */
    const bool in_place = j->nq == j->oh * j->ow;
    float *dyp = xp + j->per_run * xsize;
    for (int64_t p = begin; p < end; p++) {
        float *dw = j->dwp + p * j->oc * pairs * VL, *db = j->dbp ? j->dbp + p * j->oc * VL : NULL;
        memset(dw, 0, (size_t)(j->oc * pairs * VL) * sizeof(float));
        if (db) memset(db, 0, (size_t)(j->oc * VL) * sizeof(float));
        const int64_t n1 = (p + 1) * j->batch / j->parts;
        for (int64_t n0 = p * j->batch / j->parts; n0 < n1; n0 += j->per_run) {
            const int64_t images = n1 - n0 < j->per_run ? n1 - n0 : j->per_run;
            const float *dy = j->dy + n0 * j->oc * j->oh * j->ow, *dyw = in_place ? dy : dyp;
            for (int64_t i = 0; i < images; i++) {
                pack_image(j, j->x + (n0 + i) * j->ic * j->ih * j->iw, xp + i * xsize);
                if (!in_place) pack_dy(j, dy + i * j->oc * j->oh * j->ow, dyp + i * dsize);
            }
            if (db) add_dy_sums(j, dyw, images, db);
            for (int64_t o0 = 0; o0 < j->oc; o0 += MAX_OB)
                for (int64_t k0 = 0; k0 < pairs; k0 += MAX_TB) {
                    const int64_t tb = pairs - k0 < MAX_TB ? pairs - k0 : MAX_TB;
                    wgrad_fns[block_of(j->oc, o0) - 1][tb - 1](j, xp, dyw, images, o0, k0, dw);
                }
        }
    }
    deft_scratch_free(xp);
}

/* out[i] = the sum over parts and lanes of the per-part sums in part (parts, n, VL). */
static AVX512 void sum_parts(const small_job_t *j, const float *part, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) {
        __m512 sum = _mm512_load_ps(part + i * VL);
        for (int64_t p = 1; p < j->parts; p++)
            sum = _mm512_add_ps(sum, _mm512_load_ps(part + (p * n + i) * VL));
        out[i] = _mm512_reduce_add_ps(sum);
    }
}

int deft_conv_small_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                          float *dw, float *db) {
    small_job_t j;
    small_init(&j, g);
    if (!small_offsets(&j))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for tap offsets");
    j.x = image, j.dy = colside;
    const int64_t pairs = j.ic * j.taps, wsize = j.oc * pairs;
    /* per-thread sums where each thread gets a few images' worth of work */
    const int64_t macs = wsize * j.nq * j.batch;
    j.parts = macs >= 2 * ITEM_MACS ? deft_parallel_budget() : 1;
    if (j.parts > j.batch) j.parts = j.batch;
    j.per_run = (RUN_VECTORS + j.nq / VL - 1) / (j.nq / VL);
    const int64_t most = RUN_BYTES / ((packed_size(&j) + j.oc * j.nq) * (int64_t)sizeof(float));
    if (j.per_run > most) j.per_run = most > 1 ? most : 1;
    int status = 0;
    const int64_t bsize = db ? j.oc : 0;
    j.dwp = deft_scratch_alloc((size_t)(j.parts * (wsize + bsize) * VL) * sizeof(float));
    if (j.dwp) {
        j.dbp = db ? j.dwp + j.parts * wsize * VL : NULL;
        deft_parallel_for(j.parts, 1, wgrad_parts, &j);
        if (!atomic_load(&j.failed)) sum_parts(&j, j.dwp, wsize, dw);
        if (!atomic_load(&j.failed) && db) sum_parts(&j, j.dbp, bsize, db);
    }
    if (!j.dwp || atomic_load(&j.failed))
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for dW sums");
    deft_scratch_free(j.dwp), free(j.off);
    return status;
}

#else /* no AVX-512 kernels on this compiler or architecture */

bool deft_conv_small_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    (void)g, (void)dtype;
    return false;
}
bool deft_conv_small_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    (void)g, (void)dtype;
    return false;
}
int deft_conv_small_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                          const float *bias, bool relu, float *colside) {
    (void)g, (void)image, (void)w, (void)bias, (void)relu, (void)colside;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}
int deft_conv_small_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                          const float *bias, float *image) {
    (void)g, (void)colside, (void)w, (void)bias, (void)image;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}
int deft_conv_small_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                          float *dw, float *db) {
    (void)g, (void)image, (void)colside, (void)dw, (void)db;
    return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no direct kernel here");
}

#endif
