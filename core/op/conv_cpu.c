/*
 * Convolution on the CPU: im2col tiles and OpenBLAS GEMMs (conv.h says
 * which product is which), a direct loop for depthwise convolutions.
 *
 * Threads: like linalg.c, OpenBLAS runs single-threaded and deft's pool
 * splits the work, here into (image, group, tile) items, so one set of
 * threads serves every kernel and none is oversubscribed. A tile is a few
 * rows of output, sized so that its im2col buffer (~256 KiB) stays in the
 * core's L2 cache between im2col writing it and the GEMM reading it.
 */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/op/conv.h"
#include "core/op/kernel.h"
#include "core/op/op.h"

#define T   float
#define SFX f
#include "core/op/conv_cpu_t.h"
#undef T
#undef SFX
#define T   double
#define SFX d
#include "core/op/conv_cpu_t.h"
#undef T
#undef SFX
#define T   uint16_t
#define SFX h
#define CONV_IM2COL_ONLY
#include "core/op/conv_cpu_t.h"
#undef CONV_IM2COL_ONLY
#undef T
#undef SFX

void deft_conv_im2col_half(const deft_conv_geom_t *g, const uint16_t *img, int64_t r0, int64_t r1,
                           uint16_t *col, int64_t ld) {
    im2col_h(g, img, r0, r1, col, ld);
}

void deft_conv_col2im_float(const deft_conv_geom_t *g, const float *col, int64_t r0, int64_t r1,
                            float *img) {
    col2im_f(g, col, r0, r1, img);
}

/* The element loops of one dtype. */
typedef struct conv_loops {
    size_t size;
    void (*im2col)(const deft_conv_geom_t *g, const void *img, int64_t r0, int64_t r1, void *col,
                   int64_t ld);
    void (*col2im)(const deft_conv_geom_t *g, const void *col, int64_t r0, int64_t r1, void *img);
    void (*fill_rows)(void *c, int64_t rows, int64_t cols, int64_t ld, const void *bias);
    void (*scatter_images)(const void *c, int64_t rows, int64_t images, int64_t space,
                           const void *bias, void *out, int64_t stride);
} conv_loops_t;

/* The typed loops behind void pointers (the drivers handle both dtypes alike). */
#define CONV_LOOPS(S, TYPE)                                                                        \
    static void im2col_any_##S(const deft_conv_geom_t *g, const void *img, int64_t r0, int64_t r1, \
                               void *col, int64_t ld) {                                            \
        im2col_##S(g, img, r0, r1, col, ld);                                                       \
    }                                                                                              \
    static void col2im_any_##S(const deft_conv_geom_t *g, const void *col, int64_t r0, int64_t r1, \
                               void *img) {                                                        \
        col2im_##S(g, col, r0, r1, img);                                                           \
    }                                                                                              \
    static void fill_rows_any_##S(void *c, int64_t rows, int64_t cols, int64_t ld,                 \
                                  const void *bias) {                                              \
        fill_rows_##S(c, rows, cols, ld, bias);                                                    \
    }                                                                                              \
    static void scatter_images_any_##S(const void *c, int64_t rows, int64_t images, int64_t space, \
                                       const void *bias, void *out, int64_t stride) {              \
        scatter_images_##S(c, rows, images, space, bias, out, stride);                             \
    }                                                                                              \
    static const conv_loops_t loops_##S = {sizeof(TYPE), im2col_any_##S, col2im_any_##S,           \
                                           fill_rows_any_##S, scatter_images_any_##S};
CONV_LOOPS(f, float)
CONV_LOOPS(d, double)

static const conv_loops_t *loops_for(deft_dtype_t dtype) {
    return dtype == DEFT_DT_FLOAT32 ? &loops_f : &loops_d;
}

/* C (m x n, leading dimension ldc) = op(A) op(B) + beta C, row-major. */
static void gemm(deft_dtype_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                 int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) { /* BLAS refuses a zero leading dimension: the product is empty */
        if (beta == 0) loops_for(dtype)->fill_rows(c, m, n, ldc, NULL);
        return;
    }
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    if (dtype == DEFT_DT_FLOAT32)
        cblas_sgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb,
                    (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb,
                    beta, c, (int)ldc);
}

/* The work of one call, shared by its parallel chunks. */
typedef struct conv_job {
    const deft_conv_geom_t *g;
    deft_dtype_t dtype;
    const conv_loops_t *loops;
    const char *image, *w, *bias, *colside;
    char *out;
    int64_t cg, fg, rows;  /* image and column-side channels per group, im2col rows */
    int64_t plane, space;  /* image and column-side spatial sizes */
    int64_t outer, tile;   /* outer rows of the column side, and per tile */
    int64_t ntiles, parts; /* tiles per (image, group); wgrad's partial sums */
    int64_t per;           /* images per GEMM in lower_batched_items */
    int64_t msplits;       /* runs of W's rows per tile in lower_items */
    bool pointwise;        /* im2col is the image itself (1x1 kernel, stride 1, no padding) */
    atomic_bool failed;    /* a chunk could not allocate its buffer */
} conv_job_t;

/* im2col tiles hold about this many bytes. */
#define TILE_BYTES (256 << 10)
/* Below this many multiply-adds per call, one thread does it all. */
#define PARALLEL_MACS (1 << 20)

static void job_init(conv_job_t *j, const deft_conv_geom_t *g, deft_dtype_t dtype) {
    memset(j, 0, sizeof *j);
    j->g = g;
    j->dtype = dtype;
    j->loops = loops_for(dtype);
    j->cg = g->chan / g->groups;
    j->fg = g->filt / g->groups;
    j->rows = deft_conv_col_rows(g);
    j->plane = deft_conv_img_size(g);
    j->space = deft_conv_col_size(g);
    j->outer = g->col[0] * g->col[1];
    int64_t row_bytes = j->rows * g->col[2] * (int64_t)j->loops->size;
    j->tile = row_bytes > 0 ? TILE_BYTES / row_bytes : j->outer;
    if (j->tile < 1) j->tile = 1;
    if (j->tile > j->outer) j->tile = j->outer;
    j->ntiles = j->tile > 0 ? (j->outer + j->tile - 1) / j->tile : 0;
    j->pointwise = deft_conv_pointwise(g);
    atomic_init(&j->failed, false);
    openblas_set_num_threads(1); /* every call: the host program may have changed it */
}

/* Items of `macs` multiply-adds each, in chunks worth running on a thread of their own. */
static int64_t grain_for(int64_t macs) {
    return macs >= PARALLEL_MACS ? 1 : PARALLEL_MACS / (macs > 0 ? macs : 1);
}

/* A chunk's im2col buffer (NULL when the image serves); false when out of memory. */
static bool tile_buffer(conv_job_t *j, void **buf) {
    *buf = NULL;
    if (j->pointwise) return true;
    *buf = malloc((size_t)(j->rows * j->tile * j->g->col[2]) * j->loops->size + 1);
    if (*buf) return true;
    atomic_store(&j->failed, true);
    return false;
}

/* Element `elems` of an array (NULL for an empty one, which nothing reads). */
static const char *at(const char *base, int64_t elems, size_t size) {
    return base ? base + (size_t)elems * size : NULL;
}

/* ---- lower: colside = W . im2col(image) + bias ---- */

static void lower_items(void *ctx, int64_t begin, int64_t end) {
    conv_job_t *j = ctx;
    const deft_conv_geom_t *g = j->g;
    const size_t es = j->loops->size;
    const int64_t ow_n = g->col[2];
    void *buf;
    if (!tile_buffer(j, &buf)) return;
    int64_t packed = -1; /* the tile in buf, as item / msplits */
    for (int64_t item = begin; item < end; item++) {
        int64_t tile = item / j->msplits, s = item % j->msplits;
        int64_t t = tile % j->ntiles, gi = tile / j->ntiles % g->groups;
        int64_t n = tile / j->ntiles / g->groups;
        int64_t r0 = t * j->tile, r1 = r0 + j->tile < j->outer ? r0 + j->tile : j->outer;
        int64_t cols = (r1 - r0) * ow_n;
        /* this item's rows of W: [f0, f1) of the group's */
        int64_t f0 = j->fg * s / j->msplits, f1 = j->fg * (s + 1) / j->msplits;
        const char *img = at(j->image, (n * g->chan + gi * j->cg) * j->plane, es);
        char *c = (char *)at(j->out, (n * g->filt + gi * j->fg + f0) * j->space + r0 * ow_n, es);
        const void *bias = j->bias ? at(j->bias, gi * j->fg + f0, es) : NULL;
        if (bias) j->loops->fill_rows(c, f1 - f0, cols, j->space, bias);
        const void *b = buf;
        int64_t ldb = cols;
        if (j->pointwise)
            b = at(img, r0 * ow_n, es), ldb = j->plane;
        else if (packed != tile)
            j->loops->im2col(g, img, r0, r1, buf, cols);
        packed = tile;
        gemm(j->dtype, false, false, f1 - f0, cols, j->rows,
             at(j->w, (gi * j->fg + f0) * j->rows, es), j->rows, b, ldb, bias ? 1.0 : 0.0, c,
             j->space);
    }
    free(buf);
}

/* Depthwise: one (image, channel) plane per item, straight loops. */
static void depthwise_items(void *ctx, int64_t begin, int64_t end) {
    conv_job_t *j = ctx;
    const deft_conv_geom_t *g = j->g;
    const int64_t ksize = deft_conv_kernel_size(g);
    for (int64_t item = begin; item < end; item++) {
        int64_t c = item % g->chan;
        const void *x = at(j->image, item * j->plane, j->loops->size);
        const void *w = at(j->w, c * ksize, j->loops->size);
        void *y = (char *)at(j->out, item * j->space, j->loops->size);
        if (j->dtype == DEFT_DT_FLOAT32) {
            const float *b = (const float *)j->bias;
            depthwise_f(g, x, w, b ? b[c] : 0.0f, y);
        } else {
            const double *b = (const double *)j->bias;
            depthwise_d(g, x, w, b ? b[c] : 0.0, y);
        }
    }
}

/* ---- lower, several images per GEMM ---- */

/* Where an image's output has fewer pixels than this, a GEMM per image is
 * too narrow (a 7x7 output gives 49 columns) and streams all of W, megabytes
 * in late layers, again for each image. Instead, the im2col matrices of
 * `per` images go side by side into one GEMM of about this many columns. */
#define BATCH_COLS 256
/* ... where a group's W has at least this many bytes: a smaller one stays in
 * cache from one image's GEMM to the next, and batching gained nothing
 * (measured: even at 128->128 3x3, 7x7; 2x at 512->512). */
#define BATCH_MIN_W_BYTES (512 << 10)
/* A block's buffers (its im2col matrix and its product) stay within this:
 * larger than a tile, since BLAS packs its operand in blocks anyway. */
#define BATCH_BYTES (8 << 20)

/* Images per GEMM for lower_batched_items, or 0 where one at a time serves. */
static int64_t batch_images(const conv_job_t *j) {
    const deft_conv_geom_t *g = j->g;
    if (j->space == 0 || j->space >= BATCH_COLS || g->batch < 2) return 0;
    if (j->fg * j->rows * (int64_t)j->loops->size < BATCH_MIN_W_BYTES) return 0;
    int64_t per = (BATCH_COLS + j->space - 1) / j->space;
    int64_t image_bytes = (j->rows + j->fg) * j->space * (int64_t)j->loops->size;
    if (per * image_bytes > BATCH_BYTES) per = BATCH_BYTES / image_bytes;
    if (per > g->batch) per = g->batch;
    /* fewer images per GEMM while that leaves a thread without a block */
    const int64_t threads = deft_parallel_budget();
    while (per > 1 && (g->batch + per - 1) / per * g->groups < threads) per--;
    return per >= 2 ? per : 0;
}

/* One item per (block of `per` images, group): product = W_g . [im2col of
 * each image], then each image's share of the product to its output rows. */
static void lower_batched_items(void *ctx, int64_t begin, int64_t end) {
    conv_job_t *j = ctx;
    const deft_conv_geom_t *g = j->g;
    const size_t es = j->loops->size;
    const int64_t per_cols = j->per * j->space;
    char *col = malloc((size_t)((j->rows + j->fg) * per_cols) * es);
    if (!col) {
        atomic_store(&j->failed, true);
        return;
    }
    char *product = col + (size_t)(j->rows * per_cols) * es;
    for (int64_t item = begin; item < end; item++) {
        int64_t gi = item % g->groups, n0 = item / g->groups * j->per;
        int64_t images = g->batch - n0 < j->per ? g->batch - n0 : j->per;
        int64_t cols = images * j->space;
        for (int64_t i = 0; i < images; i++) {
            const char *img = at(j->image, ((n0 + i) * g->chan + gi * j->cg) * j->plane, es);
            j->loops->im2col(g, img, 0, j->outer, col + (size_t)(i * j->space) * es, cols);
        }
        gemm(j->dtype, false, false, j->fg, cols, j->rows, at(j->w, gi * j->fg * j->rows, es),
             j->rows, col, cols, 0.0, product, cols);
        j->loops->scatter_images(
            product, j->fg, images, j->space, j->bias ? at(j->bias, gi * j->fg, es) : NULL,
            (char *)at(j->out, (n0 * g->filt + gi * j->fg) * j->space, es), g->filt * j->space);
    }
    free(col);
}

static int finish(conv_job_t *j) {
    if (!atomic_load(&j->failed)) return 0;
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "convolution: no memory for an im2col buffer");
}

int deft_conv_lower_cpu(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                        const void *w, const void *bias, void *colside,
                        const struct deft_content_key *wkey) {
    if (deft_dtype_is_half(dtype))
        return deft_conv_lower_half(g, dtype, image, w, bias, colside, wkey);
    /* first: at 1 thread the direct kernel beat the batched GEMM at every
     * small output measured (512->512 at 7x7: 97 against 85 GFLOP/s) */
    if (deft_conv_direct_fits(g, dtype))
        return deft_conv_direct_lower(g, image, w, bias, colside, wkey);
    if (deft_conv_small_fits(g, dtype))
        return deft_conv_small_lower(g, image, w, bias, false, colside);
    if (deft_conv_lanes_fits(g, dtype))
        return deft_conv_lanes_lower(g, image, w, bias, false, colside);
    if (deft_conv_stem_fits(g, dtype)) return deft_conv_stem_lower(g, image, w, bias, colside);
    conv_job_t j;
    job_init(&j, g, dtype);
    j.image = image, j.w = w, j.bias = bias, j.out = colside;
    if (g->groups == g->chan && g->filt == g->chan) {
        int64_t macs = j.space * deft_conv_kernel_size(g);
        deft_parallel_for(g->batch * g->chan, grain_for(macs), depthwise_items, &j);
        return 0;
    }
    if ((j.per = batch_images(&j)) > 0) {
        int64_t blocks = (g->batch + j.per - 1) / j.per;
        int64_t macs = j.fg * j.rows * j.per * j.space;
        deft_parallel_for(blocks * g->groups, grain_for(macs), lower_batched_items, &j);
        return finish(&j);
    }
    /* Few tiles (one image at 7x7 is one tile): W's rows are split too, in
     * runs of 16 or more, so that every thread has work. */
    const int64_t tiles = g->batch * g->groups * j.ntiles, want = 4 * deft_parallel_budget();
    j.msplits = tiles > 0 && tiles < want ? (want + tiles - 1) / tiles : 1;
    if (j.msplits > j.fg / 16) j.msplits = j.fg / 16 > 1 ? j.fg / 16 : 1;
    int64_t macs = j.fg * j.rows * j.tile * g->col[2] / j.msplits;
    deft_parallel_for(tiles * j.msplits, grain_for(macs), lower_items, &j);
    return finish(&j);
}

/* ---- raise: image = col2im(W^T . colside) + bias ---- */

static void raise_items(void *ctx, int64_t begin, int64_t end) {
    conv_job_t *j = ctx;
    const deft_conv_geom_t *g = j->g;
    const size_t es = j->loops->size;
    const int64_t ow_n = g->col[2];
    void *buf;
    if (!tile_buffer(j, &buf)) return;
    for (int64_t item = begin; item < end; item++) {
        int64_t n = item / g->groups, gi = item % g->groups;
        char *img = (char *)at(j->out, (n * g->chan + gi * j->cg) * j->plane, es);
        const void *bias = j->bias ? at(j->bias, gi * j->cg, es) : NULL;
        j->loops->fill_rows(img, j->cg, j->plane, j->plane, bias);
        const char *w = at(j->w, gi * j->fg * j->rows, es);
        /* tiles in turn: neighbouring tiles add into the same image rows */
        for (int64_t r0 = 0; r0 < j->outer; r0 += j->tile) {
            int64_t r1 = r0 + j->tile < j->outer ? r0 + j->tile : j->outer;
            int64_t cols = (r1 - r0) * ow_n;
            const char *dy = at(j->colside, (n * g->filt + gi * j->fg) * j->space + r0 * ow_n, es);
            if (j->pointwise) {
                gemm(j->dtype, true, false, j->cg, cols, j->fg, w, j->rows, dy, j->space, 1.0,
                     (char *)at(img, r0 * ow_n, es), j->plane);
            } else {
                gemm(j->dtype, true, false, j->rows, cols, j->fg, w, j->rows, dy, j->space, 0.0,
                     buf, cols);
                j->loops->col2im(g, buf, r0, r1, img);
            }
        }
    }
    free(buf);
}

int deft_conv_raise_cpu(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *colside,
                        const void *w, const void *bias, void *image) {
    if (deft_dtype_is_half(dtype)) return deft_conv_raise_half(g, dtype, colside, w, bias, image);
    if (deft_conv_direct_raise_fits(g, dtype))
        return deft_conv_direct_raise(g, colside, w, bias, image);
    if (deft_conv_lanes_raise_fits(g, dtype))
        return deft_conv_lanes_raise(g, colside, w, bias, image);
    if (deft_conv_small_raise_fits(g, dtype))
        return deft_conv_small_raise(g, colside, w, bias, image);
    conv_job_t j;
    job_init(&j, g, dtype);
    j.colside = colside, j.w = w, j.bias = bias, j.out = image;
    int64_t macs = j.fg * j.rows * j.space;
    deft_parallel_for(g->batch * g->groups, grain_for(macs), raise_items, &j);
    return finish(&j);
}

/* ---- wgrad: dW = colside . im2col(image)^T, summed over the batch ---- */

/* Part p sums images [p batch / parts, (p + 1) batch / parts) into its own
 * dW at out + p |W| (the output itself when there is one part). */
static void wgrad_parts(void *ctx, int64_t begin, int64_t end) {
    conv_job_t *j = ctx;
    const deft_conv_geom_t *g = j->g;
    const size_t es = j->loops->size;
    const int64_t ow_n = g->col[2], wsize = g->filt * j->rows;
    void *buf;
    if (!tile_buffer(j, &buf)) return;
    for (int64_t part = begin; part < end; part++) {
        char *dw = (char *)at(j->out, part * wsize, es);
        j->loops->fill_rows(dw, 1, wsize, wsize, NULL);
        for (int64_t n = part * g->batch / j->parts; n < (part + 1) * g->batch / j->parts; n++)
            for (int64_t gi = 0; gi < g->groups; gi++) {
                const char *img = at(j->image, (n * g->chan + gi * j->cg) * j->plane, es);
                char *dwg = (char *)at(dw, gi * j->fg * j->rows, es);
                for (int64_t r0 = 0; r0 < j->outer; r0 += j->tile) {
                    int64_t r1 = r0 + j->tile < j->outer ? r0 + j->tile : j->outer;
                    int64_t cols = (r1 - r0) * ow_n;
                    const char *dy =
                        at(j->colside, (n * g->filt + gi * j->fg) * j->space + r0 * ow_n, es);
                    const void *b = buf;
                    int64_t ldb = cols;
                    if (j->pointwise)
                        b = at(img, r0 * ow_n, es), ldb = j->plane;
                    else
                        j->loops->im2col(g, img, r0, r1, buf, cols);
                    gemm(j->dtype, false, true, j->fg, j->rows, cols, dy, j->space, b, ldb, 1.0,
                         dwg, j->rows);
                }
            }
    }
    free(buf);
}

/* dW alone, by the kernels other than the few-channel one. */
static int wgrad_other(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                       const void *colside, void *dw) {
    if (deft_dtype_is_half(dtype)) return deft_conv_wgrad_half(g, dtype, image, colside, dw);
    if (deft_conv_direct_wgrad_fits(g, dtype)) return deft_conv_direct_wgrad(g, image, colside, dw);
    conv_job_t j;
    job_init(&j, g, dtype);
    const int64_t wsize = g->filt * j.rows, macs = wsize * j.space;
    int64_t parts = macs >= PARALLEL_MACS ? deft_parallel_budget() : 1;
    if (parts > g->batch) parts = g->batch > 0 ? g->batch : 1;
    char *sum = dw;
    if (parts > 1 && !(sum = malloc((size_t)(parts * wsize) * j.loops->size))) parts = 1, sum = dw;
    j.image = image, j.colside = colside, j.out = sum, j.parts = parts;
    deft_parallel_for(parts, 1, wgrad_parts, &j);
    if (sum != dw) {
        if (!atomic_load(&j.failed) && dtype == DEFT_DT_FLOAT32)
            sum_parts_f((const float *)sum, parts, wsize, dw);
        else if (!atomic_load(&j.failed))
            sum_parts_d((const double *)sum, parts, wsize, dw);
        free(sum);
    }
    return finish(&j);
}

int deft_conv_wgrad_cpu(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                        const void *colside, void *dw, void *db) {
    if (!deft_conv_direct_wgrad_fits(g, dtype) && deft_conv_lanes_wgrad_fits(g, dtype))
        return deft_conv_lanes_wgrad(g, image, colside, dw, db);
    if (!deft_conv_direct_wgrad_fits(g, dtype) && deft_conv_small_fits(g, dtype))
        return deft_conv_small_wgrad(g, image, colside, dw, db);
    int status = wgrad_other(g, dtype, image, colside, dw);
    if (status == 0 && db)
        deft_conv_bias_grad_cpu(dtype, g->batch, g->filt, deft_conv_col_size(g), colside, db);
    return status;
}

void deft_conv_bias_grad_cpu(deft_dtype_t dtype, int64_t batch, int64_t channels, int64_t space,
                             const void *y, void *db) {
    if (deft_dtype_is_half(dtype))
        deft_conv_bias_grad_half(dtype, batch, channels, space, y, db);
    else if (dtype == DEFT_DT_FLOAT32)
        bias_grad_f(batch, channels, space, y, db);
    else
        bias_grad_d(batch, channels, space, y, db);
}
