/*
 * Few-channel float32 convolutions with the batch in the vector lanes,
 * written once for a vector of VEC_LANES floats (simd_vec.h):
 * conv_direct_lanes_avx512.c includes this file with 16 lanes,
 * conv_direct_lanes_avx2.c with 8. conv_direct_lanes.c chooses where they
 * apply and which width runs.
 *
 * Small kernels with 16 pixels in a vector (conv_direct_small.c) waste work
 * at LeNet's small images: their data gradient sums column planes, half
 * again as many products as the real ones, plus a pass to add them up;
 * their weight gradient loads a shifted copy of the image per tap. Here
 * dy, the image and dx are transposed to (channel, row, column, batch / VL,
 * VL images), so that every vector is one pixel of VL images. Then every
 * tap of every pixel is a whole vector of real products, whatever the
 * image's width:
 *  - data gradient ("raise"): a register tile of OB input channels by NB
 *    vectors of images at one or two pixels of dx sums, over the output
 *    channels and the taps that land inside dy (loop bounds, no padding),
 *    dy's vector times a broadcast weight. A forward is the same product:
 *    the data gradient of a convolution with the kernel flipped and the
 *    padding k - 1 - p (conv_direct_lanes.c sets it up);
 *  - weight gradient: a tile of OB output channels by TB taps of one kernel
 *    row sums dy times the image (zero-padded) over one row of dy, the
 *    vectors' lanes summed at the end; the bias gradient is dy's sums,
 *    taken as dy is transposed.
 * The transposes cost a pass over each array.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/base/scratch.h"
#include "core/op/conv.h"
#include "core/op/conv_lanes.h"
#include "core/op/simd_vec.h"

#define VL VEC_LANES

enum {
    RG_OB = 6, /* data gradient: input channels per tile */
    RG_NB = 4, /* and vectors of images; at most RG_SUMS sums: */
    /* AVX-512's 32 registers hold 24 sums, AVX2's 16 hold 12 (beside the loads) */
    RG_SUMS = VL == 16 ? 24 : 12,
    WG_OB = VL == 16 ? 4 : 2, /* weight gradient: output channels per tile */
    WG_TB = 5,                /* and taps of a kernel row */
};

/* Below this many multiply-adds per row of dx, rows are merged into chunks. */
#define ITEM_MACS (1 << 20)

typedef struct lanes_job {
    int64_t batch, nv; /* images, vectors of VL images */
    int64_t ic, oc, ih, iw, oh, ow, ph, pw, kh, kw;
    int64_t hp, wp;                /* the wgrad's padded image */
    const float *src;              /* transposes: from */
    float *dst;                    /* to */
    int64_t chans, h, w, tph, tpw; /* the transposed array; its padding */
    float *sums;                   /* to_lanes: NULL, or (chans, VL) lane sums */
    const float *bias;             /* from_lanes: NULL, or a value per channel to add, */
    bool relu;                     /* then max(x, 0) */
    const float *dyt, *xt, *wt;    /* transposed dy, image, weights */
    float *dxt;                    /* raise: transposed dx */
    float *dw;                     /* wgrad: dW */
    int64_t oblocks;
    atomic_bool failed;
} lanes_job_t;

/* The padding of one transposed plane (tph rows above and below, tpw
 * columns left and right) = 0. */
static void zero_padding(const lanes_job_t *j, float *plane) {
    const int64_t wp = j->w + 2 * j->tpw, vs = j->nv * VL, hp = j->h + 2 * j->tph;
    const size_t edge = (size_t)(j->tpw * vs) * sizeof(float);
    memset(plane, 0, (size_t)(j->tph * wp * vs) * sizeof(float));
    memset(plane + (j->tph + j->h) * wp * vs, 0, (size_t)(j->tph * wp * vs) * sizeof(float));
    for (int64_t y = j->tph; edge && y < hp - j->tph; y++) {
        memset(plane + y * wp * vs, 0, edge);
        memset(plane + (y * wp + j->tpw + j->w) * vs, 0, edge);
    }
}

/* Channel c of src (batch, chans, h, w) into dst (chans, h + 2 tph,
 * w + 2 tpw, nv, VL), zero in the padding and in the lanes past the batch;
 * sums (if any) += its vectors. The plane's pixels are taken VL at a time
 * whatever its rows (LeNet's second layer: rows of 8), each block one
 * VL x VL transpose. */
static VEC_TARGET void to_lanes_channel(const lanes_job_t *j, int64_t c) {
    const int64_t wp = j->w + 2 * j->tpw, vs = j->nv * VL, space = j->h * j->w;
    const int64_t cstride = j->chans * space;
    float *plane = j->dst + c * (j->h + 2 * j->tph) * wp * vs;
    zero_padding(j, plane);
    vf_t sum = vf_zero();
    for (int64_t p0 = 0; p0 < space; p0 += VL) {
        const int64_t cols = space - p0 < VL ? space - p0 : VL;
        for (int64_t v = 0; v < j->nv; v++) {
            vf_t r[VL], out[VL];
            const float *s = j->src + (v * VL * j->chans + c) * space + p0;
            for (int i = 0; i < VL; i++)
                r[i] = v * VL + i < j->batch ? vf_load_first(s + i * cstride, cols) : vf_zero();
            vf_transpose(r, out);
            for (int64_t k = 0, y = p0 / j->w, x = p0 % j->w; k < cols; k++) {
                vf_store(plane + ((y + j->tph) * wp + x + j->tpw) * vs + v * VL, out[k]);
                sum = vf_add(sum, out[k]);
                if (++x == j->w) x = 0, y++;
            }
        }
    }
    if (j->sums) vf_store(j->sums + c * VL, sum);
}

static void to_lanes_items(void *ctx, int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; c++) to_lanes_channel(ctx, c);
}

/* Channel c of src (chans, h, w, nv, VL) out to dst (batch, chans, h, w),
 * VL pixels at a time, plus the channel's bias, then max(x, 0) with relu. */
static VEC_TARGET void from_lanes_channel(const lanes_job_t *j, int64_t c) {
    const int64_t vs = j->nv * VL, space = j->h * j->w, cstride = j->chans * space;
    const vf_t add = vf_set1(j->bias ? j->bias[c] : 0.0f);
    for (int64_t p0 = 0; p0 < space; p0 += VL) {
        const int64_t cols = space - p0 < VL ? space - p0 : VL;
        for (int64_t v = 0; v < j->nv; v++) {
            vf_t r[VL], out[VL];
            const float *s = j->src + (c * space + p0) * vs + v * VL;
            for (int k = 0; k < VL; k++) r[k] = k < cols ? vf_load(s + k * vs) : vf_zero();
            vf_transpose(r, out);
            float *d = j->dst + (v * VL * j->chans + c) * space + p0;
            for (int i = 0; i < VL && v * VL + i < j->batch; i++) {
                vf_t x = vf_add(out[i], add);
                x = j->relu ? vf_max(x, vf_zero()) : x;
                if (cols == VL) /* plain: AVX2's masked stores are slow on Zen 3 */
                    vf_storeu(d + i * cstride, x);
                else
                    vf_store_first(d + i * cstride, cols, x);
            }
        }
    }
}

static void from_lanes_items(void *ctx, int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; c++) from_lanes_channel(ctx, c);
}

/* Run a transpose over the channels of j (src, dst, chans, h, w, padding set). */
static void run_transpose(lanes_job_t *j, deft_range_fn fn) {
    const int64_t floats = j->batch * j->h * j->w, least = 8192; /* floats per chunk */
    deft_parallel_for(j->chans, floats >= least ? 1 : (least + floats - 1) / floats, fn, j);
}

static void set_transpose(lanes_job_t *j, const float *src, float *dst, int64_t chans, int64_t h,
                          int64_t w, int64_t ph, int64_t pw, float *sums) {
    j->src = src, j->dst = dst, j->chans = chans, j->h = h, j->w = w;
    j->tph = ph, j->tpw = pw, j->sums = sums;
}

static void lanes_init(lanes_job_t *j, const deft_conv_geom_t *g) {
    memset(j, 0, sizeof *j);
    j->batch = g->batch, j->nv = (g->batch + VL - 1) / VL;
    j->ic = g->chan, j->oc = g->filt;
    j->ih = g->img[1], j->iw = g->img[2], j->oh = g->col[1], j->ow = g->col[2];
    j->ph = g->p[1], j->pw = g->p[2], j->kh = g->k[1], j->kw = g->k[2];
    j->hp = j->ih + 2 * j->ph, j->wp = j->iw + 2 * j->pw;
    atomic_init(&j->failed, false);
}

/* ---- the data gradient ---- */

/* dxt at pixels (i, x .. x + NP - 1) of OB channels from c0, NB vectors
 * from v0: the sum over output channels o and the taps (r, s) whose dy
 * pixel (i + ph - r, x + pw - s) is inside dy, for any of the NP pixels
 * (where it is inside for one, the other reads dy's zero column beside
 * it). Two pixels share each weight's broadcast: 10 loads for 24 FMAs at
 * LeNet's second layer (6 channels, 2 vectors of 16), against 8 for 12. wt
 * is (kh, kw, oc, ic). */
static VEC_ALWAYS VEC_TARGET void raise_tile(const lanes_job_t *j, int64_t i, int64_t x, int64_t c0,
                                             int64_t v0, int OB, int NB, int NP) {
    vf_t acc[RG_OB][2][RG_NB];
    for (int c = 0; c < OB; c++)
        for (int p = 0; p < NP; p++)
            for (int b = 0; b < NB; b++) acc[c][p][b] = vf_zero();
    int64_t r0 = i + j->ph - j->oh + 1, r1 = i + j->ph + 1;
    int64_t s0 = x + j->pw - j->ow + 1, s1 = x + j->pw + NP;
    r0 = r0 > 0 ? r0 : 0, r1 = r1 < j->kh ? r1 : j->kh;
    s0 = s0 > 0 ? s0 : 0, s1 = s1 < j->kw ? s1 : j->kw;
    const int64_t vs = j->nv * VL, owp = j->ow + 2;
    /* the output channels innermost: a loop of oc steps at a fixed stride
     * rather than of the 1 to kw taps in reach (86 -> 83 us at LeNet's) */
    const int64_t ostride = j->oh * owp * vs;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t s = s0; s < s1; s++) {
            const float *d = j->dyt + ((i + j->ph - r) * owp + x + j->pw + 1 - s) * vs + v0 * VL;
            const float *wk = j->wt + (r * j->kw + s) * j->oc * j->ic + c0;
            for (int64_t o = 0; o < j->oc; o++, d += ostride, wk += j->ic) {
                vf_t dv[2][RG_NB];
                for (int p = 0; p < NP; p++)
                    for (int b = 0; b < NB; b++) dv[p][b] = vf_load(d + p * vs + b * VL);
                for (int c = 0; c < OB; c++) {
                    const vf_t wv = vf_set1(wk[c]);
                    for (int p = 0; p < NP; p++)
                        for (int b = 0; b < NB; b++)
                            acc[c][p][b] = vf_fmadd(wv, dv[p][b], acc[c][p][b]);
                }
            }
        }
    for (int c = 0; c < OB; c++)
        for (int p = 0; p < NP; p++)
            for (int b = 0; b < NB; b++)
                vf_store(j->dxt + (((c0 + c) * j->ih + i) * j->iw + x + p) * vs + (v0 + b) * VL,
                         acc[c][p][b]);
}

typedef void (*raise_fn)(const lanes_job_t *, int64_t, int64_t, int64_t, int64_t);
#define RAISE_FN(OB, NB, NP)                                                                       \
    static VEC_TARGET void raise_##OB##_##NB##_##NP(const lanes_job_t *j, int64_t i, int64_t x,    \
                                                    int64_t c0, int64_t v0) {                      \
        raise_tile(j, i, x, c0, v0, OB, NB, NP);                                                   \
    }
#define RAISE_ROW(OB)                                                                              \
    RAISE_FN(OB, 1, 1)                                                                             \
    RAISE_FN(OB, 2, 1)                                                                             \
    RAISE_FN(OB, 3, 1) RAISE_FN(OB, 4, 1) RAISE_FN(OB, 1, 2) RAISE_FN(OB, 2, 2)
RAISE_ROW(1)
RAISE_ROW(2)
RAISE_ROW(3)
RAISE_ROW(4)
RAISE_ROW(5)
RAISE_ROW(6)
#define RAISE_ENTRY(OB, NP)                                                                        \
    { raise_##OB##_1_##NP, raise_##OB##_2_##NP, raise_##OB##_3_1, raise_##OB##_4_1 }
/* [pixels - 1][channels - 1][vectors - 1]; pairs of pixels take at most 2 vectors */
static const raise_fn raise_fns[2][RG_OB][RG_NB] = {
    {RAISE_ENTRY(1, 1), RAISE_ENTRY(2, 1), RAISE_ENTRY(3, 1), RAISE_ENTRY(4, 1), RAISE_ENTRY(5, 1),
     RAISE_ENTRY(6, 1)},
    {RAISE_ENTRY(1, 2), RAISE_ENTRY(2, 2), RAISE_ENTRY(3, 2), RAISE_ENTRY(4, 2), RAISE_ENTRY(5, 2),
     RAISE_ENTRY(6, 2)}};

/* Vectors per tile for OB channels and np pixels: at most RG_SUMS sums. */
static int64_t raise_vectors(int64_t ob, int64_t np) {
    const int64_t nb = RG_SUMS / (ob * np), most = np == 2 ? 2 : RG_NB;
    return nb < 1 ? 1 : nb < most ? nb : most;
}

/* Item i: row i of dx, every channel, pixel and vector: pairs of pixels,
 * the last one alone where the row is odd. */
static void raise_items(void *ctx, int64_t begin, int64_t end) {
    const lanes_job_t *j = ctx;
    for (int64_t i = begin; i < end; i++)
        for (int64_t c0 = 0; c0 < j->ic; c0 += RG_OB) {
            const int64_t ob = j->ic - c0 < RG_OB ? j->ic - c0 : RG_OB;
            for (int64_t x = 0; x < j->iw;) {
                const int64_t np = j->iw - x >= 2 ? 2 : 1, cap = raise_vectors(ob, np);
                for (int64_t v = 0; v < j->nv; v += cap) {
                    const int64_t nb = j->nv - v < cap ? j->nv - v : cap;
                    raise_fns[np - 1][ob - 1][nb - 1](j, i, x, c0, v);
                }
                x += np;
            }
        }
}

/* wt (kh, kw, oc, ic): a tap's channels side by side, for the broadcasts;
 * from w (oc, ic, taps), or with flip from w (ic, oc, taps) with the taps
 * reversed (a forward run as a data gradient). */
static void pack_weights(const lanes_job_t *j, const float *w, bool flip, float *wt) {
    const int64_t taps = j->kh * j->kw;
    for (int64_t o = 0; o < j->oc; o++)
        for (int64_t c = 0; c < j->ic; c++)
            for (int64_t t = 0; t < taps; t++)
                wt[(t * j->oc + o) * j->ic + c] =
                    flip ? w[(c * j->oc + o) * taps + taps - 1 - t] : w[(o * j->ic + c) * taps + t];
}

static int raise_run(const deft_conv_geom_t *g, const float *colside, const float *w, bool flip,
                     const float *bias, bool relu, float *image) {
    lanes_job_t j;
    lanes_init(&j, g);
    const int64_t vs = j.nv * VL, taps = j.kh * j.kw;
    const int64_t dysize = j.oc * j.oh * (j.ow + 2) * vs, dxsize = j.ic * j.ih * j.iw * vs;
    const int64_t wsize = (j.oc * taps * j.ic + VL - 1) / VL * VL;
    float *buf = deft_scratch_alloc((size_t)(dysize + dxsize + wsize) * sizeof(float));
    if (!buf) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for dy's lanes");
    float *dyt = buf, *dxt = buf + dysize, *wt = dxt + dxsize;
    pack_weights(&j, w, flip, wt);
    set_transpose(&j, colside, dyt, j.oc, j.oh, j.ow, 0, 1, NULL);
    run_transpose(&j, to_lanes_items);
    j.dyt = dyt, j.dxt = dxt, j.wt = wt;
    const int64_t row_macs = j.iw * j.ic * j.oc * taps * j.batch;
    deft_parallel_for(j.ih, row_macs >= ITEM_MACS ? 1 : ITEM_MACS / (row_macs + 1) + 1, raise_items,
                      &j);
    set_transpose(&j, dxt, image, j.ic, j.ih, j.iw, 0, 0, NULL);
    j.bias = bias, j.relu = relu;
    run_transpose(&j, from_lanes_items);
    deft_scratch_free(buf);
    return 0;
}

/* ---- the weight gradient ---- */

/* The lane sums of dW (OB output channels from o0, channel c, kernel row r,
 * TB taps from s0; sums (OB, kh, kw, VL) for the item's block) += dy times
 * the padded image's rows r on, over every row of dy (one load and store
 * of the sums per tile, not per row: LeNet's second layer 104 -> 80 us at
 * one thread, with the transposes split into chunks). */
static VEC_ALWAYS VEC_TARGET void wgrad_tile(const lanes_job_t *j, int64_t o0, int64_t c, int64_t r,
                                             int64_t s0, float *sums, int OB, int TB) {
    vf_t acc[WG_OB][WG_TB];
    const int64_t vs = j->nv * VL, taps = j->kh * j->kw, row = j->ow * vs;
    for (int o = 0; o < OB; o++)
        for (int t = 0; t < TB; t++)
            acc[o][t] = vf_load(sums + (o * taps + r * j->kw + s0 + t) * VL);
    const int64_t ostride = j->oh * row;
    for (int64_t y = 0; y < j->oh; y++) {
        const float *d = j->dyt + (o0 * j->oh + y) * row;
        const float *xr = j->xt + ((c * j->hp + y + r) * j->wp + s0) * vs;
        for (int64_t q = 0; q < row; q += VL) {
            vf_t dv[WG_OB];
            for (int o = 0; o < OB; o++) dv[o] = vf_load(d + o * ostride + q);
            for (int t = 0; t < TB; t++) {
                const vf_t xv = vf_load(xr + t * vs + q);
                for (int o = 0; o < OB; o++) acc[o][t] = vf_fmadd(dv[o], xv, acc[o][t]);
            }
        }
    }
    for (int o = 0; o < OB; o++)
        for (int t = 0; t < TB; t++)
            vf_store(sums + (o * taps + r * j->kw + s0 + t) * VL, acc[o][t]);
}

typedef void (*wgrad_fn)(const lanes_job_t *, int64_t, int64_t, int64_t, int64_t, float *);
#define WGRAD_FN(OB, TB)                                                                           \
    static VEC_TARGET void wgrad_##OB##_##TB(const lanes_job_t *j, int64_t o0, int64_t c,          \
                                             int64_t r, int64_t s0, float *sums) {                 \
        wgrad_tile(j, o0, c, r, s0, sums, OB, TB);                                                 \
    }
#define WGRAD_ROW(OB)                                                                              \
    WGRAD_FN(OB, 1) WGRAD_FN(OB, 2) WGRAD_FN(OB, 3) WGRAD_FN(OB, 4) WGRAD_FN(OB, 5)
#define WGRAD_ENTRY(OB)                                                                            \
    { wgrad_##OB##_1, wgrad_##OB##_2, wgrad_##OB##_3, wgrad_##OB##_4, wgrad_##OB##_5 }
WGRAD_ROW(1)
WGRAD_ROW(2)
#if VL == 16
WGRAD_ROW(3)
WGRAD_ROW(4)
static const wgrad_fn wgrad_fns[WG_OB][WG_TB] = {WGRAD_ENTRY(1), WGRAD_ENTRY(2), WGRAD_ENTRY(3),
                                                 WGRAD_ENTRY(4)};
#else
static const wgrad_fn wgrad_fns[WG_OB][WG_TB] = {WGRAD_ENTRY(1), WGRAD_ENTRY(2)};
#endif

/* Item (block b of output channels, input channel c): its dW entries. */
static VEC_TARGET void wgrad_item(lanes_job_t *j, int64_t item, float *sums) {
    const int64_t b = item / j->ic, c = item % j->ic, taps = j->kh * j->kw;
    const int64_t o0 = j->oc * b / j->oblocks, ob = j->oc * (b + 1) / j->oblocks - o0;
    memset(sums, 0, (size_t)(ob * taps * VL) * sizeof(float));
    for (int64_t r = 0; r < j->kh; r++)
        for (int64_t s0 = 0; s0 < j->kw; s0 += WG_TB) {
            const int64_t tb = j->kw - s0 < WG_TB ? j->kw - s0 : WG_TB;
            wgrad_fns[ob - 1][tb - 1](j, o0, c, r, s0, sums);
        }
    for (int64_t o = 0; o < ob; o++)
        for (int64_t t = 0; t < taps; t++)
            j->dw[((o0 + o) * j->ic + c) * taps + t] = vf_sum(vf_load(sums + (o * taps + t) * VL));
}

static void wgrad_items(void *ctx, int64_t begin, int64_t end) {
    lanes_job_t *j = ctx;
    float *sums = deft_scratch_alloc((size_t)(WG_OB * j->kh * j->kw * VL) * sizeof(float));
    if (!sums) {
        atomic_store(&j->failed, true);
        return;
    }
    for (int64_t item = begin; item < end; item++) wgrad_item(j, item, sums);
    deft_scratch_free(sums);
}

/* out[i] = the sum of the VL lanes of sums[i] (n of them). */
static VEC_TARGET void add_lanes(const float *sums, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = vf_sum(vf_load(sums + i * VL));
}

static int wgrad_run(const deft_conv_geom_t *g, const float *image, const float *colside, float *dw,
                     float *db) {
    lanes_job_t j;
    lanes_init(&j, g);
    const int64_t vs = j.nv * VL;
    const int64_t dysize = j.oc * j.oh * j.ow * vs, xsize = j.ic * j.hp * j.wp * vs;
    float *buf = deft_scratch_alloc((size_t)(dysize + xsize + j.oc * VL) * sizeof(float));
    if (!buf) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for dy's lanes");
    float *dyt = buf, *xt = buf + dysize, *dbs = xt + xsize;
    set_transpose(&j, colside, dyt, j.oc, j.oh, j.ow, 0, 0, dbs);
    run_transpose(&j, to_lanes_items);
    set_transpose(&j, image, xt, j.ic, j.ih, j.iw, j.ph, j.pw, NULL);
    run_transpose(&j, to_lanes_items);
    j.dyt = dyt, j.xt = xt, j.dw = dw;
    j.oblocks = (j.oc + WG_OB - 1) / WG_OB;
    deft_parallel_for(j.oblocks * j.ic, 1, wgrad_items, &j);
    if (db) add_lanes(dbs, j.oc, db);
    deft_scratch_free(buf);
    if (atomic_load(&j.failed))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for dW sums");
    return 0;
}

const deft_conv_lanes_t VEC_FN(deft_conv_lanes) = {
    .lanes = VL,
    .raise = raise_run,
    .wgrad = wgrad_run,
};
