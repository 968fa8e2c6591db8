/*
 * float16 and bfloat16 convolution on the CPU (conv.h's _half products).
 *
 * bfloat16, on a CPU with AVX512-BF16 (AMX where it has it), multiplies its
 * 16-bit operands as they are. im2col only moves elements, so it runs on the
 * bfloat16 words, a tile of output columns at a time (sized for the core's
 * L2), and each tile's product runs in gemm_bf16.c with float32 sums
 * against W packed once a call:
 *   - lower (the forward): the tile's sums plus the bias, rounded once into
 *     the output; small outputs put several images side by side in a tile;
 *   - raise (the data gradient): the tile's columns stay float32 (W^T dy),
 *     col2im sums them into a float32 image, which is rounded once;
 *   - wgrad: dW sums every tile's dy im2col(x)^T in float32 (a sum per
 *     thread, then theirs) and rounds once.
 * Products of fewer than MIN_FILTERS rows (depthwise and tiny layers) widen
 * instead, as does everything in float16 and on other CPUs: the operands are
 * widened to float32, the float32 kernels run (direct ones where they fit),
 * and the result is rounded once. Either way a result is the float32 result
 * rounded once, up to the order of its float32 sums, as PyTorch's CPU
 * bfloat16 convolution accumulates in float32.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/base/scratch.h"
#include "core/math/dtype_math.h"
#include "core/op/conv.h"
#include "core/op/conv_packed.h"
#include "core/op/gemm_bf16.h"
#include "core/op/half_compute.h"
#include "core/op/op.h"
#include "core/op/simd.h"

#if DEFT_SIMD_X86
#include <immintrin.h>
#endif

/* A group's filters below which its product widens: bfloat16 tiles of 16
 * rows or more (gemm_bf16.c) would run mostly empty. */
#define MIN_FILTERS 16
/* Below this many multiply-adds per (image, group), items share a thread. */
#define PARALLEL_MACS (1 << 20)

static int no_memory(const char *what) {
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for %s", what);
}

/* ---- widened: float32 operands, float32 kernels, the result rounded once ---- */

typedef enum product { LOWER, RAISE, WGRAD } product_t;

/* Elements of a product's operands: its source, W (or the column side for
 * wgrad), the bias, and its result. */
static void operand_sizes(const deft_conv_geom_t *g, product_t what, int64_t n[4]) {
    int64_t image = g->batch * g->chan * deft_conv_img_size(g);
    int64_t colside = g->batch * g->filt * deft_conv_col_size(g);
    int64_t w = g->filt * deft_conv_col_rows(g);
    n[0] = what == RAISE ? colside : image;
    n[1] = what == WGRAD ? colside : w;
    n[2] = what == LOWER ? g->filt : g->chan;
    n[3] = what == LOWER ? colside : what == RAISE ? image : w;
}

static int widened(product_t what, const deft_conv_geom_t *g, deft_dtype_t dtype, const void *src,
                   const void *w, const void *bias, void *dst) {
    const bool bf16 = dtype == DEFT_DT_BFLOAT16;
    int64_t n[4];
    operand_sizes(g, what, n);
    if (!bias) n[2] = 0;
    float *x = deft_scratch_alloc(sizeof(float) * (size_t)(n[0] + n[1] + n[2] + n[3]));
    if (!x) return no_memory("its float32 operands");
    float *wf = x + n[0], *b = wf + n[1], *y = b + n[2];
    deft_half_widen(src, 1, bf16, x, n[0]);
    deft_half_widen(w, 1, bf16, wf, n[1]);
    if (bias) deft_half_widen(bias, 1, bf16, b, n[2]);
    const deft_dtype_t f32 = DEFT_DT_FLOAT32;
    int status = what == LOWER   ? deft_conv_lower_cpu(g, f32, x, wf, bias ? b : NULL, y, NULL)
                 : what == RAISE ? deft_conv_raise_cpu(g, f32, x, wf, bias ? b : NULL, y)
                                 : deft_conv_wgrad_cpu(g, f32, x, wf, y, NULL);
    if (status == 0) deft_half_narrow(y, bf16, dst, 1, n[3]);
    deft_scratch_free(x);
    return status;
}

/* ---- bfloat16 products, tile by tile ---- */

/* A tile's columns: about this many, so that its im2col words and B's packed
 * copy (k x TILE_COLS bfloat16 each) stay in the core's L2 while every panel
 * of W passes over them; more where k is small (a stem's 147 taps), up to
 * TILE_BYTES of them, which saves per-tile work. */
#define TILE_COLS  256
#define TILE_BYTES (512 << 10)

/* One call's work: items of (image, group, tile), or for wgrad of a thread's
 * share of the images. */
typedef struct job {
    const deft_conv_geom_t *g;
    const uint16_t *src, *w; /* wgrad: the image and the column side */
    void *dst;
    deft_bf16_a_t *wp;        /* per group: W (lower) or W^T (raise), packed */
    deft_conv_packed_t *held; /* where wp's panels are kept between calls, or NULL */
    float *bias;              /* float32, or NULL */
    int64_t cg, fg, rows, plane, space, outer; /* per group: channels, filters, im2col rows */
    int64_t tile_rows, ntiles; /* outer rows per tile (col[2] columns each), tiles per image */
    int64_t per;               /* lower: whole images per tile, when more than one */
    int64_t msplits;           /* lower: runs of W's rows per tile */
    int64_t parts;             /* wgrad: float32 sums, one per thread */
    float *sums;               /* wgrad: parts x |W| */
    bool pointwise;            /* im2col is the image itself */
    atomic_bool failed;
} job_t;

static void job_init(job_t *j, const deft_conv_geom_t *g, const void *src, const void *w,
                     void *dst) {
    memset(j, 0, sizeof *j);
    j->g = g, j->src = src, j->w = w, j->dst = dst;
    j->cg = g->chan / g->groups, j->fg = g->filt / g->groups;
    j->rows = deft_conv_col_rows(g);
    j->plane = deft_conv_img_size(g), j->space = deft_conv_col_size(g);
    j->outer = g->col[0] * g->col[1];
    j->pointwise = deft_conv_pointwise(g);
    const int64_t ow = g->col[2];
    int64_t cols = TILE_BYTES / 4 / (j->rows > 0 ? j->rows : 1);
    if (cols < TILE_COLS) cols = TILE_COLS;
    j->tile_rows = ow > 0 && ow < cols ? cols / ow : 1;
    /* an even column count keeps wgrad's transposing packer on its fast path */
    if (ow % 2 && j->tile_rows > 1 && j->tile_rows % 2) j->tile_rows--;
    if (j->tile_rows > j->outer) j->tile_rows = j->outer > 0 ? j->outer : 1;
    j->ntiles = (j->outer + j->tile_rows - 1) / j->tile_rows;
    j->per = j->msplits = 1;
    atomic_init(&j->failed, false);
}

/* Whether bfloat16 products serve this geometry (else it widens). */
static bool direct_bf16(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    return dtype == DEFT_DT_BFLOAT16 && deft_gemm_bf16_available() && g->groups > 0 &&
           g->filt / g->groups >= MIN_FILTERS && deft_conv_col_rows(g) > 0 &&
           deft_conv_col_size(g) > 0;
}

/* Every group's W, packed as lay (laid out for one group) into dst. */
typedef struct pack_ctx {
    job_t *j;
    bool transposed;
    deft_bf16_a_t lay;
} pack_ctx_t;

static void pack_groups(void *arg, float *dst) {
    pack_ctx_t *p = arg;
    const job_t *j = p->j;
    for (int64_t gi = 0; gi < j->g->groups; gi++) {
        j->wp[gi] = p->lay;
        j->wp[gi].panels = (uint32_t *)dst + (size_t)gi * deft_gemm_bf16_a_words(&p->lay);
        deft_gemm_bf16_a_fill(&j->wp[gi], p->transposed, j->w + gi * j->fg * j->rows, j->rows);
    }
}

/* Each group's W (m x k = filters x im2col rows), or W^T for raise, packed
 * (kept between calls under wkey, the weights' contents, when given); and
 * the bias (`count` values, or none) in float32. */
static int prepare(job_t *j, bool transposed, const uint16_t *bias, int64_t count,
                   const deft_content_key_t *wkey) {
    const deft_conv_geom_t *g = j->g;
    j->wp = calloc((size_t)g->groups, sizeof *j->wp);
    j->bias = bias ? malloc(sizeof(float) * (size_t)count) : NULL;
    if (!j->wp || (bias && !j->bias)) return no_memory("its packed weights");
    for (int64_t i = 0; bias && i < count; i++) j->bias[i] = deft_bf16_to_float(bias[i]);
    pack_ctx_t ctx = {
        j, transposed,
        deft_gemm_bf16_a_layout(transposed ? j->rows : j->fg, transposed ? j->fg : j->rows)};
    const size_t words = deft_gemm_bf16_a_words(&ctx.lay);
#if DEFT_SIMD_X86 /* the kept copies (conv_packed.c) */
    if (wkey) {
        deft_conv_pack_key_t key = {*wkey, j->w, {g->filt, j->rows, g->groups, -1 - ctx.lay.amx}};
        const float *kept =
            deft_conv_packed_get(&key, words * (size_t)g->groups, pack_groups, &ctx, &j->held);
        if (!kept) return no_memory("its packed weights");
        for (int64_t gi = 0; gi < g->groups; gi++) {
            j->wp[gi] = ctx.lay;
            j->wp[gi].panels = (uint32_t *)kept + (size_t)gi * words;
        }
        return 0;
    }
#else
    (void)wkey;
#endif
    float *panels = deft_scratch_alloc(sizeof(uint32_t) * words * (size_t)g->groups);
    if (!panels) return no_memory("its packed weights");
    pack_groups(&ctx, panels);
    return 0;
}

static int finish(job_t *j, int status) {
    if (j->held)
        deft_conv_packed_release(j->held);
    else if (j->wp)
        deft_scratch_free(j->wp[0].panels); /* every group's, from prepare */
    free(j->wp);
    free(j->bias);
    if (status == 0 && atomic_load(&j->failed)) status = no_memory("a bfloat16 product's buffers");
    return status;
}

/* Items of `macs` multiply-adds each, in chunks worth a thread. */
static int64_t grain_for(int64_t macs) {
    return macs >= PARALLEL_MACS ? 1 : PARALLEL_MACS / (macs > 0 ? macs : 1);
}

/* A chunk's buffer of `bytes`, noting a failure. */
static void *chunk_buffer(job_t *j, size_t bytes) {
    void *buf = deft_scratch_alloc(bytes);
    if (!buf) atomic_store(&j->failed, true);
    return buf;
}

/* Tile t of an image: outer rows [*r0, *r1), returning its column count. */
static int64_t tile_span(const job_t *j, int64_t t, int64_t *r0, int64_t *r1) {
    *r0 = t * j->tile_rows;
    *r1 = *r0 + j->tile_rows < j->outer ? *r0 + j->tile_rows : j->outer;
    return (*r1 - *r0) * j->g->col[2];
}

static const uint16_t *image_of(const job_t *j, int64_t n, int64_t gi) {
    return j->src + (n * j->g->chan + gi * j->cg) * j->plane;
}

/* ---- im2col of 16-bit words ---- */

#if DEFT_SIMD_X86
/* Bits [a, b) of a mask, a and b in [0, 32]. */
static inline uint32_t bits(int64_t a, int64_t b) {
    if (a >= b) return 0;
    return (b - a >= 32 ? ~0u : (1u << (b - a)) - 1) << a;
}

/*
 * One row of im2col: dst[x] = src[x s + off] for x in [lo, hi), else 0, for
 * x < ow (src NULL: a row of padding). Stride 1 moves 32 words a step,
 * stride 2 sixteen, each the low half of a 32-bit word (VPMOVDW); masked
 * loads read only the taps, and their zeros are the padding.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,bmi2"))) static void
tap_row(uint16_t *dst, const uint16_t *src, int64_t off, int64_t s, int64_t lo, int64_t hi,
        int64_t ow) {
    if (!src) lo = hi = 0;
    if (s == 1) {
        for (int64_t x0 = 0; x0 < ow; x0 += 32) {
            uint32_t take = bits((lo > x0 ? lo : x0) - x0, (hi < x0 + 32 ? hi : x0 + 32) - x0);
            __m512i v =
                take ? _mm512_maskz_loadu_epi16(take, src + x0 + off) : _mm512_setzero_si512();
            _mm512_mask_storeu_epi16(dst + x0, bits(0, ow - x0), v);
        }
    } else if (s == 2) {
        for (int64_t x0 = 0; x0 < ow; x0 += 16) {
            uint32_t take = bits((lo > x0 ? lo : x0) - x0, (hi < x0 + 16 ? hi : x0 + 16) - x0);
            __m512i v =
                take ? _mm512_maskz_loadu_epi16(_pdep_u32(take, 0x55555555u), src + 2 * x0 + off)
                     : _mm512_setzero_si512();
            _mm256_mask_storeu_epi16(dst + x0, (__mmask16)bits(0, ow - x0),
                                     _mm512_cvtepi32_epi16(v));
        }
    } else {
        for (int64_t x = 0; x < ow; x++) dst[x] = x >= lo && x < hi ? src[x * s + off] : 0;
    }
}

/* Longest image row (in words) that im2col_stride2 splits on its stack. */
#define SPLIT_MAX 2048

/* A row of n words split into its even (ev) and odd (od) columns, each
 * padded past its end by up to 16 words. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
split_row(const uint16_t *row, int64_t n, uint16_t *ev, uint16_t *od) {
    for (int64_t i = 0; i < n; i += 32) {
        __m512i v = _mm512_maskz_loadu_epi16(bits(0, n - i < 32 ? n - i : 32), row + i);
        _mm256_storeu_si256((__m256i *)(ev + i / 2), _mm512_cvtepi32_epi16(v));
        _mm256_storeu_si256((__m256i *)(od + i / 2),
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
    }
}

/*
 * im2col at width stride 2 (a stem's 7x7 kernel): each image row a tap row
 * reads is split into its even and odd columns once, for all of the kernel's
 * columns, so that each tap's row is a run of one of them (tap x reads
 * column 2x + off: phase off & 1, at x + (off - (off & 1)) / 2).
 */
__attribute__((target("avx512f,avx512bw,avx512vl,bmi2"))) static void
im2col_stride2(const deft_conv_geom_t *g, const uint16_t *img, int64_t r0, int64_t r1,
               uint16_t *col, int64_t ld) {
    const int64_t cg = g->chan / g->groups, ow = g->col[2], iw = g->img[2];
    const int64_t plane = deft_conv_img_size(g), kw_n = g->k[2];
    uint16_t phase[2][SPLIT_MAX / 2 + 32];
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kh = 0; kh < g->k[1]; kh++) {
            uint16_t *taps = col + (c * g->k[1] + kh) * kw_n * ld;
            for (int64_t r = r0; r < r1; r++) {
                int64_t ih = r * g->s[1] - g->p[1] + kh * g->d[1];
                bool inside = ih >= 0 && ih < g->img[1];
                if (inside) split_row(img + c * plane + ih * iw, iw, phase[0], phase[1]);
                for (int64_t kw = 0; kw < kw_n; kw++) {
                    int64_t off = kw * g->d[2] - g->p[2], lo, hi, ph = off & 1;
                    deft_conv_tap_range(off, 2, iw, ow, &lo, &hi);
                    tap_row(taps + kw * ld + (r - r0) * ow, inside ? phase[ph] : NULL,
                            (off - ph) / 2, 1, lo, hi, ow);
                }
            }
        }
}

/*
 * The rows [r0, r1) of one tap where the image rows are as wide as the
 * output's and follow each other (stride 1 both ways): all the taps inside
 * the image are one run of it, copied at once, after which the columns that
 * fall in the padding are set to zero (a 3x3 kernel's one on either side).
 */
static void tap_rows_run(uint16_t *dst, const uint16_t *plane, const deft_conv_geom_t *g,
                         int64_t r0, int64_t r1, int64_t kh, int64_t off, int64_t lo, int64_t hi) {
    const int64_t ow = g->col[2], top = kh * g->d[1] - g->p[1]; /* image row of output row 0 */
    int64_t ra = -top > r0 ? -top : r0, rb = g->img[1] - top < r1 ? g->img[1] - top : r1;
    if (ra >= rb || lo >= hi) {
        memset(dst, 0, 2 * (size_t)((r1 - r0) * ow));
        return;
    }
    memset(dst, 0, 2 * (size_t)((ra - r0) * ow));
    uint16_t *first = dst + (ra - r0) * ow;
    memcpy(first + lo, plane + (ra + top) * ow + lo + off,
           2 * (size_t)((rb - ra - 1) * ow + hi - lo));
    for (int64_t r = 0; r < rb - ra; r++) {
        for (int64_t x = 0; x < lo; x++) first[r * ow + x] = 0;
        for (int64_t x = hi; x < ow; x++) first[r * ow + x] = 0;
    }
    memset(first + (rb - ra) * ow, 0, 2 * (size_t)((r1 - rb) * ow));
}

/* im2col (conv_cpu_t.h's) of a 2-D geometry, a row of taps at a time, or a
 * run of rows where tap_rows_run serves. */
__attribute__((target("avx512f,avx512bw,avx512vl,bmi2"))) static void
im2col_words_2d(const deft_conv_geom_t *g, const uint16_t *img, int64_t r0, int64_t r1,
                uint16_t *col, int64_t ld) {
    const int64_t cg = g->chan / g->groups, ow = g->col[2], iw = g->img[2], sw = g->s[2];
    const int64_t plane = deft_conv_img_size(g);
    const bool runs = sw == 1 && g->s[1] == 1 && iw == ow;
    if (sw == 2 && iw <= SPLIT_MAX) {
        im2col_stride2(g, img, r0, r1, col, ld);
        return;
    }
    uint16_t *row = col;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kh = 0; kh < g->k[1]; kh++)
            for (int64_t kw = 0; kw < g->k[2]; kw++, row += ld) {
                int64_t off = kw * g->d[2] - g->p[2], lo, hi;
                deft_conv_tap_range(off, sw, iw, ow, &lo, &hi);
                if (runs) {
                    tap_rows_run(row, img + c * plane, g, r0, r1, kh, off, lo, hi);
                    continue;
                }
                uint16_t *dst = row;
                for (int64_t r = r0; r < r1; r++, dst += ow) {
                    int64_t ih = r * g->s[1] - g->p[1] + kh * g->d[1];
                    bool inside = ih >= 0 && ih < g->img[1];
                    tap_row(dst, inside ? img + c * plane + ih * iw : NULL, off, sw, lo, hi, ow);
                }
            }
}
#endif

/* Outer rows [r0, r1) of one group of one image as im2col words. */
static void im2col_words(const deft_conv_geom_t *g, const uint16_t *img, int64_t r0, int64_t r1,
                         uint16_t *col, int64_t ld) {
#if DEFT_SIMD_X86
    /* 2-D (and 1-D): depth 1 */
    if (g->k[0] == 1 && g->col[0] == 1 && deft_gemm_bf16_available()) {
        im2col_words_2d(g, img, r0, r1, col, ld);
        return;
    }
#endif
    deft_conv_im2col_half(g, img, r0, r1, col, ld);
}

/* ---- col2im of float32 tiles ---- */

#if DEFT_SIMD_X86
__attribute__((target("avx512f"))) static void add_run(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i,
                         _mm512_add_ps(_mm512_loadu_ps(dst + i), _mm512_loadu_ps(src + i)));
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(
        dst + i, m,
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst + i), _mm512_maskz_loadu_ps(m, src + i)));
}

/*
 * col2im (conv_cpu_t.h's) of a 2-D geometry's float32 tile (outer rows
 * [r0, r1), its rows (r1 - r0) col[2] apart) into a group's image. Where
 * stride 1 keeps image rows adjacent, a tap's rows add as one run, once the
 * tile's columns that fell in the padding are zeroed (the tile is scratch).
 */
__attribute__((target("avx512f"))) static void
col2im_float_2d(const deft_conv_geom_t *g, float *col, int64_t r0, int64_t r1, float *img) {
    const int64_t cg = g->chan / g->groups, ow = g->col[2], iw = g->img[2], sw = g->s[2];
    const int64_t plane = deft_conv_img_size(g), ld = (r1 - r0) * ow;
    const bool runs = sw == 1 && g->s[1] == 1 && iw == ow;
    float *row = col;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kh = 0; kh < g->k[1]; kh++)
            for (int64_t kw = 0; kw < g->k[2]; kw++, row += ld) {
                int64_t off = kw * g->d[2] - g->p[2], lo, hi;
                deft_conv_tap_range(off, sw, iw, ow, &lo, &hi);
                const int64_t top = kh * g->d[1] - g->p[1]; /* image row of output row 0 */
                for (int64_t r = r0; r < r1; r++) {
                    int64_t ih = r * g->s[1] + top;
                    if (ih < 0 || ih >= g->img[1] || lo >= hi) continue;
                    const float *src = row + (r - r0) * ow;
                    float *dst = img + c * plane + ih * iw;
                    if (!runs) {
                        for (int64_t x = lo; x < hi; x++) dst[x * sw + off] += src[x];
                        continue;
                    }
                    /* the first row inside: this row and the rest inside, as one run */
                    int64_t rb = g->img[1] - top < r1 ? g->img[1] - top : r1;
                    float *first = row + (r - r0) * ow;
                    for (int64_t i = 0; i < rb - r; i++) {
                        for (int64_t x = 0; x < lo; x++) first[i * ow + x] = 0;
                        for (int64_t x = hi; x < ow; x++) first[i * ow + x] = 0;
                    }
                    add_run(dst + lo + off, first + lo, (rb - r - 1) * ow + hi - lo);
                    break;
                }
            }
}
#endif

/* col2im of a float32 tile of one group of one image. */
static void col2im_float(const deft_conv_geom_t *g, float *col, int64_t r0, int64_t r1,
                         float *img) {
#if DEFT_SIMD_X86
    if (g->k[0] == 1 && g->col[0] == 1 && deft_gemm_bf16_available()) {
        col2im_float_2d(g, col, r0, r1, img);
        return;
    }
#endif
    deft_conv_col2im_float(g, col, r0, r1, img);
}

/* ---- lower: colside = W . im2col(image) + bias ---- */

/* Part s of group gi's packed W (a run of its rows, from *f0). */
static deft_bf16_a_t w_part(const job_t *j, int64_t gi, int64_t s, int64_t *f0) {
    return deft_gemm_bf16_a_part(&j->wp[gi], s, j->msplits, f0);
}

/* Tile t of image n, rows of W's part s; buf holds im2col words already when `fresh`. */
static bool lower_tile(const job_t *j, int64_t n, int64_t gi, int64_t t, int64_t s, bool fresh,
                       uint16_t *buf) {
    const deft_conv_geom_t *g = j->g;
    int64_t r0, r1, cols = tile_span(j, t, &r0, &r1), f0;
    const uint16_t *img = image_of(j, n, gi), *b = buf;
    int64_t ldb = cols;
    if (j->pointwise)
        b = img + r0 * g->col[2], ldb = j->plane;
    else if (!fresh)
        im2col_words(g, img, r0, r1, buf, cols);
    deft_bf16_a_t w = w_part(j, gi, s, &f0);
    deft_bf16_out_t out = {.c = (uint16_t *)j->dst + (n * g->filt + gi * j->fg + f0) * j->space +
                                r0 * g->col[2],
                           .ldc = j->space,
                           .bias = j->bias ? j->bias + gi * j->fg + f0 : NULL};
    return deft_gemm_bf16_tile(&w, false, cols, b, ldb, &out) == 0;
}

/* Small outputs: the columns of `per` images side by side in one product
 * (one 7x7 image's 49 columns would stream all of W for little work), then
 * each image's share to its output. */
static bool lower_images(const job_t *j, int64_t n0, int64_t gi, int64_t s, bool fresh,
                         uint16_t *buf) {
    const deft_conv_geom_t *g = j->g;
    int64_t images = g->batch - n0 < j->per ? g->batch - n0 : j->per, cols = images * j->space, f0;
    uint16_t *product = buf + j->rows * j->per * j->space;
    for (int64_t i = 0; !fresh && i < images; i++)
        im2col_words(g, image_of(j, n0 + i, gi), 0, j->outer, buf + i * j->space, cols);
    deft_bf16_a_t w = w_part(j, gi, s, &f0);
    deft_bf16_out_t out = {
        .c = product, .ldc = cols, .bias = j->bias ? j->bias + gi * j->fg + f0 : NULL};
    if (deft_gemm_bf16_tile(&w, false, cols, buf, cols, &out)) return false;
    for (int64_t i = 0; i < images; i++)
        for (int64_t f = 0; f < w.m; f++)
            memcpy((uint16_t *)j->dst + ((n0 + i) * g->filt + gi * j->fg + f0 + f) * j->space,
                   product + f * cols + i * j->space, 2 * (size_t)j->space);
    return true;
}

/* Items (image or block of images, group, tile, part of W's rows): a
 * chunk's consecutive parts of one tile share its im2col words. */
static void lower_items(void *ctx, int64_t begin, int64_t end) {
    job_t *j = ctx;
    const int64_t cols = j->per > 1 ? j->per * j->space : j->tile_rows * j->g->col[2];
    uint16_t *buf = chunk_buffer(j, 2 * (size_t)((j->rows + j->fg) * cols));
    if (!buf) return;
    for (int64_t item = begin; item < end; item++) {
        int64_t s = item % j->msplits, tile = item / j->msplits;
        int64_t t = tile % j->ntiles, gi = tile / j->ntiles % j->g->groups;
        int64_t n = tile / j->ntiles / j->g->groups;
        bool fresh = s > 0 && item > begin;
        if (!(j->per > 1 ? lower_images(j, n * j->per, gi, s, fresh, buf)
                         : lower_tile(j, n, gi, t, s, fresh, buf)))
            atomic_store(&j->failed, true);
    }
    deft_scratch_free(buf);
}

int deft_conv_lower_half(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                         const void *w, const void *bias, void *colside,
                         const struct deft_content_key *wkey) {
    if (!direct_bf16(g, dtype)) return widened(LOWER, g, dtype, image, w, bias, colside);
    job_t j;
    job_init(&j, g, image, w, colside);
    const int64_t threads = deft_parallel_budget();
    if (j.space < TILE_COLS / 2 && g->batch > 1) {
        j.per = (TILE_COLS + j.space - 1) / j.space;
        /* fewer images per block while that leaves a thread without a block,
         * or, for a few blocks, one thread with more than the others */
        for (; j.per > 1; j.per--) {
            int64_t blocks = (g->batch + j.per - 1) / j.per * g->groups;
            if (blocks >= threads && (blocks % threads == 0 || blocks >= 4 * threads)) break;
        }
        if (j.per > 1) j.ntiles = 1;
    }
    /* Fewer tiles than threads (one small image): W's rows are split too, in
     * runs of whole panels (each run's items repeat the tile's im2col). */
    const int64_t tiles = (g->batch + j.per - 1) / j.per * g->groups * j.ntiles;
    const int64_t most = j.fg / 32 > 1 ? j.fg / 32 : 1;
    j.msplits = tiles < threads ? (threads + tiles - 1) / tiles : 1;
    if (j.msplits > most) j.msplits = most;
    int status = prepare(&j, false, bias, g->filt, wkey);
    if (status == 0)
        deft_parallel_for(tiles * j.msplits,
                          grain_for(j.fg * j.rows * j.space / j.ntiles * j.per / j.msplits),
                          lower_items, &j);
    return finish(&j, status);
}

/* ---- raise: image = col2im(W^T . colside) + bias, in float32 ---- */

static void raise_items(void *ctx, int64_t begin, int64_t end) {
    job_t *j = ctx;
    const deft_conv_geom_t *g = j->g;
    const int64_t ow = g->col[2];
    size_t col = j->pointwise ? 0 : (size_t)(j->rows * j->tile_rows * ow);
    float *dcol = chunk_buffer(j, sizeof(float) * (col + (size_t)(j->cg * j->plane)));
    if (!dcol) return;
    float *img = dcol + col;
    for (int64_t item = begin; item < end; item++) {
        int64_t n = item / g->groups, gi = item % g->groups;
        memset(img, 0, sizeof(float) * (size_t)(j->cg * j->plane));
        for (int64_t t = 0; t < j->ntiles; t++) {
            int64_t r0, r1, cols = tile_span(j, t, &r0, &r1);
            const uint16_t *dy = j->src + (n * g->filt + gi * j->fg) * j->space + r0 * ow;
            deft_bf16_out_t out = {.cf = j->pointwise ? img + r0 * ow : dcol,
                                   .ldc = j->pointwise ? j->plane : cols};
            if (deft_gemm_bf16_tile(&j->wp[gi], false, cols, dy, j->space, &out)) {
                atomic_store(&j->failed, true);
                break;
            }
            if (!j->pointwise) col2im_float(g, dcol, r0, r1, img);
        }
        for (int64_t c = 0; j->bias && c < j->cg; c++)
            for (int64_t x = 0; x < j->plane; x++) img[c * j->plane + x] += j->bias[gi * j->cg + c];
        uint16_t *out = (uint16_t *)j->dst + (n * g->chan + gi * j->cg) * j->plane;
        deft_half_narrow(img, true, out, 1, j->cg * j->plane);
    }
    deft_scratch_free(dcol);
}

int deft_conv_raise_half(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *colside,
                         const void *w, const void *bias, void *image) {
    if (!direct_bf16(g, dtype)) return widened(RAISE, g, dtype, colside, w, bias, image);
    job_t j;
    job_init(&j, g, colside, w, image);
    int status = prepare(&j, true, bias, g->chan, NULL);
    if (status == 0)
        deft_parallel_for(g->batch * g->groups, grain_for(j.fg * j.rows * j.space), raise_items,
                          &j);
    return finish(&j, status);
}

/* ---- wgrad: dW = colside . im2col(image)^T, summed over the batch in float32 ---- */

/* dW_g += dy_g . im2col^T over one tile of image n's columns. */
static bool wgrad_tile(const job_t *j, float *dw, int64_t n, int64_t gi, int64_t t, uint16_t *buf) {
    const deft_conv_geom_t *g = j->g;
    int64_t r0, r1, cols = tile_span(j, t, &r0, &r1);
    const uint16_t *img = image_of(j, n, gi), *b = buf;
    int64_t ldb = cols;
    if (j->pointwise)
        b = img + r0 * g->col[2], ldb = j->plane;
    else
        im2col_words(g, img, r0, r1, buf, cols);
    const uint16_t *dy = j->w + (n * g->filt + gi * j->fg) * j->space + r0 * g->col[2];
    deft_bf16_a_t a;
    if (deft_gemm_bf16_pack_a(false, j->fg, cols, dy, j->space, &a)) return false;
    deft_bf16_out_t out = {.cf = dw + gi * j->fg * j->rows, .ldc = j->rows, .add = true};
    int status = deft_gemm_bf16_tile(&a, true, j->rows, b, ldb, &out);
    deft_gemm_bf16_a_free(&a);
    return status == 0;
}

/* Part p sums images [p batch / parts, (p + 1) batch / parts) into its
 * float32 dW at sums + p |W|. */
static void wgrad_parts(void *ctx, int64_t begin, int64_t end) {
    job_t *j = ctx;
    const deft_conv_geom_t *g = j->g;
    const int64_t wsize = g->filt * j->rows;
    uint16_t *buf = chunk_buffer(j, 2 * (size_t)(j->rows * j->tile_rows * g->col[2]));
    if (!buf) return;
    for (int64_t part = begin; part < end; part++) {
        float *dw = j->sums + part * wsize;
        memset(dw, 0, sizeof(float) * (size_t)wsize);
        for (int64_t n = part * g->batch / j->parts; n < (part + 1) * g->batch / j->parts; n++)
            for (int64_t gi = 0; gi < g->groups; gi++)
                for (int64_t t = 0; t < j->ntiles; t++)
                    if (!wgrad_tile(j, dw, n, gi, t, buf)) atomic_store(&j->failed, true);
    }
    deft_scratch_free(buf);
}

int deft_conv_wgrad_half(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                         const void *colside, void *dw) {
    if (!direct_bf16(g, dtype)) return widened(WGRAD, g, dtype, image, colside, NULL, dw);
    job_t j;
    job_init(&j, g, image, colside, NULL);
    const int64_t wsize = g->filt * j.rows, macs = wsize * j.space * g->batch;
    j.parts = macs >= PARALLEL_MACS ? deft_parallel_budget() : 1;
    if (j.parts > g->batch) j.parts = g->batch > 0 ? g->batch : 1;
    if (!(j.sums = deft_scratch_alloc(sizeof(float) * (size_t)(j.parts * wsize))))
        return no_memory("its float32 weight gradient");
    deft_parallel_for(j.parts, 1, wgrad_parts, &j);
    for (int64_t p = 1; p < j.parts; p++)
        for (int64_t i = 0; i < wsize; i++) j.sums[i] += j.sums[p * wsize + i];
    if (!atomic_load(&j.failed)) deft_half_narrow(j.sums, true, dw, 1, wsize);
    deft_scratch_free(j.sums);
    return finish(&j, 0);
}

/* db[c]: float32 blocks of y summed in double, rounded once. */
void deft_conv_bias_grad_half(deft_dtype_t dtype, int64_t batch, int64_t channels, int64_t space,
                              const void *y, void *db) {
    enum { BLOCK = 256 };
    const bool bf16 = dtype == DEFT_DT_BFLOAT16;
    float block[BLOCK];
    for (int64_t c = 0; c < channels; c++) {
        double sum = 0;
        for (int64_t n = 0; n < batch; n++) {
            const uint16_t *plane = (const uint16_t *)y + (n * channels + c) * space;
            for (int64_t i = 0; i < space; i += BLOCK) {
                int64_t m = space - i < BLOCK ? space - i : BLOCK;
                deft_half_widen(plane + i, 1, bf16, block, m);
                for (int64_t k = 0; k < m; k++) sum += block[k];
            }
        }
        float s = (float)sum;
        deft_half_narrow(&s, bf16, (uint16_t *)db + c, 1, 1);
    }
}
