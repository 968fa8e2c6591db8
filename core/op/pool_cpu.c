/*
 * Pooling and _backward_Pooling on the CPU (pool_cpu.h).
 *
 * The general loops take any dtype, type and rank: each output's window
 * comes from core/math/pool_math.h and its values are read as double.
 *
 * float32 1-D and 2-D max, average and sum pooling (what CNNs use) take
 * plane kernels instead. An output row's window covers the same input rows
 * for every column, so each of those rows is reduced into the output row
 * across the whole row at once: for the interior columns, whose windows lie
 * inside the input, that is a loop over columns with a fixed pattern of taps
 * (compiled with 2x2 and 3x3 stride-2 windows built in), which the compiler
 * vectorises; the few border columns clip their windows one by one. The
 * gradient runs the same walk backward. Max pooling's gradient goes to the
 * first maximum of each window in row-major order, as the general loops'.
 */
#include <stdatomic.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/op/kernel.h"
#include "core/op/pool_cpu.h"
#include "core/op/pool_vec.h"
#include "core/op/simd.h"

/* The helpers of the cloned plane kernels: inlined into each clone, so that they are
 * compiled for its target too (a helper left out of line gets the baseline's). */
#define CLONED_HELPER static inline __attribute__((always_inline))

static _Atomic int kernels = DEFT_POOL_VECTOR;

void deft_pool_kernels_set(deft_pool_kernels_t k) {
    atomic_store(&kernels, (int)k);
}

/* Whether the float32 plane kernels take this pooling (else the general loops). */
static bool fast_fits(const deft_pool_geom_t *g, deft_dtype_t dtype) {
    return atomic_load(&kernels) >= DEFT_POOL_PLANES && dtype == DEFT_DT_FLOAT32 && g->in[0] == 1 &&
           g->kernel[0] == 1 && g->type != DEFT_POOL_LP;
}

static int64_t plane_size(const deft_pool_geom_t *g, const int64_t *dims) {
    (void)g;
    return dims[0] * dims[1] * dims[2];
}

/* Planes per parallel chunk: about a grain of reads and writes for the general
 * loops; the plane kernels move data some ten times faster, so they take chunks
 * of two grains. LeNet's poolings (10-30 us on one thread) ran slower on two
 * threads while each call had to wake a helper; inside a graph run the helpers
 * now poll (parallel.h), and two grains made its step at 2 threads 4-6% faster
 * than eight. */
static int64_t plane_grain(const deft_pool_geom_t *g, bool fast) {
    int64_t window = g->kernel[0] * g->kernel[1] * g->kernel[2];
    int64_t work = plane_size(g, g->in) + plane_size(g, g->out) * window;
    return (fast ? 2 : 1) * DEFT_PARALLEL_GRAIN / (work + 1) + 1;
}

/* ---- the general loops ---- */

typedef struct general_job {
    const deft_pool_geom_t *g;
    deft_dtype_t dtype;
    const void *x;
    void *y;
} general_job_t;

static void general_planes(void *arg, int64_t begin, int64_t end) {
    const general_job_t *j = arg;
    const deft_pool_geom_t *g = j->g;
    int64_t out_plane = plane_size(g, g->out);
    for (int64_t i = begin * out_plane; i < end * out_plane; i++) {
        int64_t in_base, out_base;
        deft_pool_window_t w = deft_pool_locate(g, i, &in_base, &out_base);
        deft_store_double(j->y, j->dtype, i, deft_pool_value(g, j->x, j->dtype, in_base, &w));
    }
}

static void general_unpool_planes(void *arg, int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; plane++) deft_pool_unpool_plane(arg, plane);
}

/* ---- the float32 plane kernels ---- */

/* A float32 call: the geometry with what every row shares worked out once. */
typedef struct fast_job {
    const deft_pool_geom_t *g;
    int64_t lo, hi; /* the interior output columns: windows inside the input */
    bool max;
    bool relu;       /* then relu's gradient: _backward_Pooling_relu */
    bool rows_2x2;   /* 2x2/2 windows all inside the input, and vector rows to run them */
    float scale_2x2; /* what an average of such a window is scaled by */
    bool fold_3x2;   /* 3-wide stride-2 windows along w, and vector rows to fold them */
    bool unpool_3x2; /* fold_3x2's max gradient, with interior columns */
    const deft_pool_vec_t *vec; /* the vector rows of the SIMD level, or NULL */
    float scale_plane;          /* what an average of a window the size of the plane is scaled by */
    const float *x, *y, *dy;
    float *out; /* y forward, dx backward */
} fast_job_t;

/* Output columns [lo, hi) whose windows lie inside the input along w. */
static void interior_columns(const deft_pool_geom_t *g, int64_t *lo, int64_t *hi) {
    int64_t s = g->stride[2], first = (g->pad[2] + s - 1) / s;
    int64_t room = g->in[2] - g->kernel[2] + g->pad[2]; /* the last start + pad that fits */
    int64_t last = room < 0 ? -1 : room / s;
    *lo = first < g->out[2] ? first : g->out[2];
    *hi = last + 1 > *lo ? (last + 1 < g->out[2] ? last + 1 : g->out[2]) : *lo;
}

/* What an average divides output (oh's rows counted hcount, column of wcount) by. */
CLONED_HELPER float avg_scale(const deft_pool_geom_t *g, int64_t hcount, int64_t wcount) {
    if (g->type != DEFT_POOL_AVG) return 1;
    double divisor = (double)hcount * (double)wcount;
    return divisor != 0 ? (float)(1 / divisor) : 1; /* an empty window sums to 0 */
}

/* 2x2 windows with stride 2 inside the input: each input is in one window at most. */
static bool tiles_2x2(const deft_pool_geom_t *g) {
    return g->in[1] >= 2 * g->out[1] && g->in[2] >= 2 * g->out[2] && g->kernel[1] == 2 &&
           g->kernel[2] == 2 && g->stride[1] == 2 && g->stride[2] == 2 && g->pad[1] == 0 &&
           g->pad[2] == 0;
}

/* The vector rows of the SIMD level: 16 lanes on AVX-512, 8 on AVX2. */
static const deft_pool_vec_t *vector_rows(void) {
#if DEFT_SIMD_X86
    switch (deft_simd_level()) {
    case DEFT_SIMD_AVX512:
        return &deft_pool_vec_avx512;
    case DEFT_SIMD_AVX2:
        return &deft_pool_vec_avx2;
    default:
        break;
    }
#endif
    return NULL;
}

static fast_job_t fast_job(const deft_pool_geom_t *g) {
    fast_job_t j = {.g = g, .max = g->type == DEFT_POOL_MAX};
    interior_columns(g, &j.lo, &j.hi);
    j.vec = atomic_load(&kernels) >= DEFT_POOL_VECTOR ? vector_rows() : NULL;
    j.rows_2x2 = j.vec && tiles_2x2(g);
    /* The fold at 16 lanes only: at 8 the plane kernels' compiled one ran as
     * fast (Zen 3, one thread, the stem's 16x64x112x112 forward 7.5 ms, 8.2
     * with the vector fold); the max gradient ran alike (24.0, 23.5 ms). */
    const bool rows_3x2 = j.vec && g->kernel[2] == 3 && g->stride[2] == 2;
    j.fold_3x2 = rows_3x2 && j.vec->lanes == 16;
    j.unpool_3x2 = rows_3x2 && j.max && j.hi > j.lo;
    j.scale_2x2 = avg_scale(g, 2, 2), j.scale_plane = avg_scale(g, g->in[1], g->in[2]);
    return j;
}

#define LOWEST_F32 (-3.40282347e38f) /* an empty max window's value, as the general loops' */

CLONED_HELPER float max_f32(float v, float acc) {
    return v > acc ? v : acc; /* NaN never wins, as in the general loops */
}

/*
 * Fold the taps of n interior outputs from one input row into acc: output o
 * reads row[o * s + k], k < kw. Inlined with constant s and kw, the tap loop
 * unrolls and the column loop vectorises.
 */
CLONED_HELPER void fold_row(float *restrict acc, const float *restrict row, int64_t n, int64_t s,
                            int64_t kw, bool max) {
    for (int64_t o = 0; o < n; o++) {
        float a = acc[o];
        for (int64_t k = 0; k < kw; k++) a = max ? max_f32(row[o * s + k], a) : a + row[o * s + k];
        acc[o] = a;
    }
}

/* The same for any s and kw: taps outer, so the column loop still vectorises. */
CLONED_HELPER void fold_row_any(float *restrict acc, const float *restrict row, int64_t n,
                                int64_t s, int64_t kw, bool max) {
    for (int64_t k = 0; k < kw; k++)
        for (int64_t o = 0; o < n; o++)
            acc[o] = max ? max_f32(row[o * s + k], acc[o]) : acc[o] + row[o * s + k];
}

CLONED_HELPER void fold_interior(const fast_job_t *j, float *acc, const float *row) {
    int64_t s = j->g->stride[2], kw = j->g->kernel[2], n = j->hi - j->lo;
    if (n <= 0) return;
    acc += j->lo, row += j->lo * s - j->g->pad[2];
    if (j->fold_3x2) {
        j->vec->pool3x2_fold(acc, row, n, j->max);
        return;
    }
    if (s == 2 && kw == 2)
        j->max ? fold_row(acc, row, n, 2, 2, true) : fold_row(acc, row, n, 2, 2, false);
    else if (s == 2 && kw == 3)
        j->max ? fold_row(acc, row, n, 2, 3, true) : fold_row(acc, row, n, 2, 3, false);
    else if (s == 1 && kw == 3)
        j->max ? fold_row(acc, row, n, 1, 3, true) : fold_row(acc, row, n, 1, 3, false);
    else
        j->max ? fold_row_any(acc, row, n, s, kw, true) : fold_row_any(acc, row, n, s, kw, false);
}

/* A border column's window along w, clipped to the row; its count for an average. */
static int64_t border_window(const deft_pool_geom_t *g, int64_t ow, int64_t *lo, int64_t *hi) {
    int64_t padded = deft_pool_span(g, 2, ow, lo, hi);
    return g->count_include_pad ? padded : *hi - *lo;
}

/* Fold one input row into the border outputs [from, to), each window clipped to the row. */
CLONED_HELPER void fold_border(const fast_job_t *j, float *y, const float *row, int64_t from,
                               int64_t to) {
    for (int64_t ow = from; ow < to; ow++) {
        int64_t lo, hi;
        border_window(j->g, ow, &lo, &hi);
        for (int64_t w = lo; w < hi; w++) y[ow] = j->max ? max_f32(row[w], y[ow]) : y[ow] + row[w];
    }
}

CLONED_HELPER void scale_border(const deft_pool_geom_t *g, float *y, int64_t hcount, int64_t from,
                                int64_t to) {
    for (int64_t ow = from; ow < to; ow++) {
        int64_t lo, hi;
        y[ow] *= avg_scale(g, hcount, border_window(g, ow, &lo, &hi));
    }
}

/* Output row oh of one plane: its window's input rows folded in one by one. */
CLONED_HELPER void pool_row(const fast_job_t *j, const float *x, float *y, int64_t oh) {
    const deft_pool_geom_t *g = j->g;
    int64_t hlo, hhi, width = g->in[2], padded = deft_pool_span(g, 1, oh, &hlo, &hhi);
    int64_t hcount = g->count_include_pad ? padded : hhi - hlo;
    float init = j->max ? LOWEST_F32 : 0;
    for (int64_t ow = 0; ow < g->out[2]; ow++) y[ow] = init;
    for (int64_t h = hlo; h < hhi; h++) {
        const float *row = x + h * width;
        fold_interior(j, y, row);
        fold_border(j, y, row, 0, j->lo);
        fold_border(j, y, row, j->hi, g->out[2]);
    }
    if (g->type != DEFT_POOL_AVG) return;
    float inner = avg_scale(g, hcount, g->kernel[2]);
    for (int64_t ow = j->lo; ow < j->hi; ow++) y[ow] *= inner;
    scale_border(g, y, hcount, 0, j->lo);
    scale_border(g, y, hcount, j->hi, g->out[2]);
}

/*
 * A window that covers the whole plane (global pooling, or a kernel the size
 * of the unpadded input): one reduction over the contiguous plane, in 16
 * independent lanes so that it vectorises.
 */
CLONED_HELPER float reduce_plane(const float *x, int64_t n, bool max) {
    float lanes[16];
    for (int l = 0; l < 16; l++) lanes[l] = max ? LOWEST_F32 : 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            lanes[l] = max ? max_f32(x[i + l], lanes[l]) : lanes[l] + x[i + l];
    for (int l = 0; i < n; i++, l++) lanes[l] = max ? max_f32(x[i], lanes[l]) : lanes[l] + x[i];
    for (int half = 8; half > 0; half /= 2) /* a tree, not a chain of 15 dependent steps */
        for (int l = 0; l < half; l++)
            lanes[l] = max ? max_f32(lanes[l + half], lanes[l]) : lanes[l] + lanes[l + half];
    return lanes[0];
}

static bool window_is_plane(const deft_pool_geom_t *g) {
    return g->out[1] == 1 && g->out[2] == 1 && g->kernel[1] == g->in[1] &&
           g->kernel[2] == g->in[2] && g->pad[1] == 0 && g->pad[2] == 0;
}

/* Whether the vector rows take 2x2/2 windows that tile the planes exactly:
 * then planes follow each other as more rows of one plane, and a run of
 * them is one call (LeNet's second pool: 512 planes of 4 rows). */
static bool rows_span_planes(const fast_job_t *j) {
    const deft_pool_geom_t *g = j->g;
    return j->rows_2x2 && g->in[1] == 2 * g->out[1] && g->in[2] == 2 * g->out[2];
}

DEFT_CLONES static void fast_planes(void *arg, int64_t begin, int64_t end) {
    const fast_job_t *j = arg;
    const deft_pool_geom_t *g = j->g;
    int64_t in_plane = plane_size(g, g->in), out_plane = plane_size(g, g->out);
    if (rows_span_planes(j) && !window_is_plane(g)) {
        j->vec->pool2x2_plane(j->x + begin * in_plane, j->out + begin * out_plane, g->in[2],
                              (end - begin) * g->out[1], g->out[2], j->max, j->scale_2x2);
        return;
    }
    for (int64_t plane = begin; plane < end; plane++) {
        const float *x = j->x + plane * in_plane;
        float *y = j->out + plane * out_plane;
        if (window_is_plane(g)) {
            if (j->vec) {
                *y = j->vec->reduce(x, in_plane, j->max) * j->scale_plane;
                continue;
            }
            *y = reduce_plane(x, in_plane, j->max) * j->scale_plane;
            continue;
        }
        if (j->rows_2x2) {
            j->vec->pool2x2_plane(x, y, g->in[2], g->out[1], g->out[2], j->max, j->scale_2x2);
            continue;
        }
        for (int64_t oh = 0; oh < g->out[1]; oh++) pool_row(j, x, y + oh * g->out[2], oh);
    }
}

void deft_pool_cpu_forward(const deft_pool_geom_t *g, deft_dtype_t dtype, const void *x, void *y) {
    if (g->planes == 0 || plane_size(g, g->out) == 0) return;
    if (fast_fits(g, dtype)) {
        fast_job_t j = fast_job(g);
        j.x = x, j.out = y;
        deft_parallel_for(g->planes, plane_grain(g, true), fast_planes, &j);
        return;
    }
    general_job_t j = {g, dtype, x, y};
    deft_parallel_for(g->planes, plane_grain(g, false), general_planes, &j);
}

/* ---- backward ---- */

/* The first input of the window [hlo, hhi) x [wlo, whi) equal to the maximum target,
 * in row-major order, or NULL (every input NaN, or below float's lowest). */
CLONED_HELPER int64_t first_max(const float *x, int64_t width, int64_t hlo, int64_t hhi,
                                int64_t wlo, int64_t whi, float target) {
    for (int64_t h = hlo; h < hhi; h++)
        for (int64_t w = wlo; w < whi; w++)
            if (x[h * width + w] == target) return h * width + w;
    return -1;
}

/*
 * Output row oh's gradient, max pooling: each output's to its window's first
 * maximum, outputs in order as in the general loops. A plain search: with
 * overlapping windows (3x3/2) a vectorised one over the row's outputs
 * followed by a scatter measured 2-3x slower.
 */
CLONED_HELPER void unpool_max_row(const fast_job_t *j, const float *x, const float *y,
                                  const float *dy, float *dx, int64_t oh) {
    const deft_pool_geom_t *g = j->g;
    int64_t hlo, hhi;
    deft_pool_span(g, 1, oh, &hlo, &hhi);
    for (int64_t ow = 0; ow < g->out[2]; ow++) {
        if (ow == j->lo && j->unpool_3x2) { /* the interior at once, then the right border */
            j->vec->unpool3x2_max(x, g->in[2], hlo, hhi, j->lo * 2 - g->pad[2], y + j->lo,
                                  dy + j->lo, dx, j->hi - j->lo);
            ow = j->hi;
            if (ow >= g->out[2]) break;
        }
        int64_t lo = ow * g->stride[2] - g->pad[2], hi = lo + g->kernel[2];
        if (ow < j->lo || ow >= j->hi) border_window(g, ow, &lo, &hi);
        int64_t at = first_max(x, g->in[2], hlo, hhi, lo, hi, y[ow]);
        if (at >= 0) dx[at] += dy[ow];
    }
}

/*
 * The gradient when 2x2/2 windows tile the plane (tiles_2x2): every input
 * belongs to one window at most, so each is written once, with no search
 * and no zeroing first; inputs past the last window are zeroed. Max
 * pooling's gradient goes to the first tap equal to the output, as the
 * gradient left after each tap; with vector rows (AVX2, AVX-512) they run in
 * pool_vec_t.h, average pooling's too.
 */
CLONED_HELPER void unpool_2x2(const fast_job_t *j, const float *x, const float *y, const float *dy,
                              float *dx) {
    const deft_pool_geom_t *g = j->g;
    int64_t width = g->in[2], ow_n = g->out[2];
    if (j->rows_2x2)
        j->vec->unpool2x2_plane(x, y, dy, dx, width, g->out[1], ow_n, j->max, j->scale_2x2,
                                false); /* relu's gradient: a pass after it */
    for (int64_t oh = 0; oh < g->out[1]; oh++) {
        const float *x0 = x + 2 * oh * width, *x1 = x0 + width, *t = y + oh * ow_n;
        const float *d = dy + oh * ow_n;
        float *d0 = dx + 2 * oh * width, *d1 = d0 + width;
        if (!j->rows_2x2)
            for (int64_t o = 0; o < ow_n; o++) { /* max only: see unpool_tiles */
                float left = d[o], g0, g1, g2, g3;
                g0 = x0[2 * o] == t[o] ? left : 0, left = x0[2 * o] == t[o] ? 0 : left;
                g1 = x0[2 * o + 1] == t[o] ? left : 0, left = x0[2 * o + 1] == t[o] ? 0 : left;
                g2 = x1[2 * o] == t[o] ? left : 0, left = x1[2 * o] == t[o] ? 0 : left;
                g3 = x1[2 * o + 1] == t[o] ? left : 0;
                d0[2 * o] = g0, d0[2 * o + 1] = g1, d1[2 * o] = g2, d1[2 * o + 1] = g3;
            }
        for (int64_t w = 2 * ow_n; w < width; w++) d0[w] = d1[w] = 0;
    }
    int64_t rest = (g->in[1] - 2 * g->out[1]) * width; /* the rows below the last window */
    if (rest) memset(dx + 2 * g->out[1] * width, 0, sizeof(float) * (size_t)rest);
}

/* Whether unpool_2x2 takes the gradient: any type on vector rows, else max only. */
static bool unpool_tiles(const fast_job_t *j) {
    return j->rows_2x2 || (j->max && tiles_2x2(j->g));
}

/* Spread dy[o] * scale over the taps of n interior outputs on one row of dx. */
CLONED_HELPER void spread_row(float *restrict drow, const float *restrict dy, float scale,
                              int64_t n, int64_t s, int64_t kw) {
    for (int64_t k = 0; k < kw; k++)
        for (int64_t o = 0; o < n; o++) drow[o * s + k] += dy[o] * scale;
}

/* The border outputs [from, to) of one row spread over their clipped windows. */
CLONED_HELPER void spread_border(const deft_pool_geom_t *g, float *drow, const float *dy,
                                 int64_t hcount, int64_t from, int64_t to) {
    for (int64_t ow = from; ow < to; ow++) {
        int64_t lo, hi;
        float add = dy[ow] * avg_scale(g, hcount, border_window(g, ow, &lo, &hi));
        for (int64_t w = lo; w < hi; w++) drow[w] += add;
    }
}

/* Output row oh's gradient, average and sum pooling: spread over the window. */
CLONED_HELPER void unpool_spread_row(const fast_job_t *j, const float *dy, float *dx, int64_t oh) {
    const deft_pool_geom_t *g = j->g;
    int64_t hlo, hhi, width = g->in[2], s = g->stride[2], kw = g->kernel[2];
    int64_t padded = deft_pool_span(g, 1, oh, &hlo, &hhi);
    int64_t hcount = g->count_include_pad ? padded : hhi - hlo;
    float inner = avg_scale(g, hcount, kw);
    for (int64_t h = hlo; h < hhi; h++) {
        float *drow = dx + h * width;
        if (j->hi > j->lo && s == 2 && kw == 2)
            spread_row(drow + j->lo * 2 - g->pad[2], dy + j->lo, inner, j->hi - j->lo, 2, 2);
        else if (j->hi > j->lo)
            spread_row(drow + j->lo * s - g->pad[2], dy + j->lo, inner, j->hi - j->lo, s, kw);
        spread_border(g, drow, dy, hcount, 0, j->lo);
        spread_border(g, drow, dy, hcount, j->hi, g->out[2]);
    }
}

/* relu's gradient on planes [begin, end) of dx, in place (x relu's output),
 * while the pooling's gradient of those planes is still in cache. */
CLONED_HELPER void relu_grad_planes(const fast_job_t *j, int64_t begin, int64_t end) {
    const int64_t in_plane = plane_size(j->g, j->g->in);
    const float *x = j->x + begin * in_plane;
    float *dx = j->out + begin * in_plane;
    for (int64_t i = 0; i < (end - begin) * in_plane; i++) /* relu_grad (scalar_math.h) */
        dx[i] *= x[i] > 0 ? 1.0f : x[i] != x[i] ? x[i] : 0.0f;
}

/* Whether the vector rows take whole planes (and relu's gradient with them). */
static bool unpool_rows(const fast_job_t *j) {
    return rows_span_planes(j) && !window_is_plane(j->g);
}

/* The pooling's gradient of planes [begin, end) (inlined into each clone of
 * fast_unpool_planes); relu's too where unpool_rows. */
CLONED_HELPER void unpool_planes(const fast_job_t *j, int64_t begin, int64_t end) {
    const deft_pool_geom_t *g = j->g;
    int64_t in_plane = plane_size(g, g->in), out_plane = plane_size(g, g->out);
    if (unpool_rows(j)) {
        j->vec->unpool2x2_plane(j->x + begin * in_plane, j->y + begin * out_plane,
                                j->dy + begin * out_plane, j->out + begin * in_plane, g->in[2],
                                (end - begin) * g->out[1], g->out[2], j->max, j->scale_2x2,
                                j->relu);
        return;
    }
    for (int64_t plane = begin; plane < end; plane++) {
        const float *x = j->x + plane * in_plane, *y = j->y + plane * out_plane;
        const float *dy = j->dy + plane * out_plane;
        float *dx = j->out + plane * in_plane;
        if (unpool_tiles(j)) {
            unpool_2x2(j, x, y, dy, dx);
            continue;
        }
        if (!j->max && window_is_plane(g)) { /* global average: one value everywhere */
            float share = *dy * avg_scale(g, g->in[1], g->in[2]);
            for (int64_t i = 0; i < in_plane; i++) dx[i] = share;
            continue;
        }
        memset(dx, 0, sizeof(float) * (size_t)in_plane);
        for (int64_t oh = 0; oh < g->out[1]; oh++) {
            int64_t at = oh * g->out[2];
            if (j->max)
                unpool_max_row(j, x, y + at, dy + at, dx, oh);
            else
                unpool_spread_row(j, dy + at, dx, oh);
        }
    }
}

/* Planes per run when relu's gradient follows: about 16 KiB of dx, which the
 * relu pass then reads from the level-1 cache. */
static int64_t relu_run(const deft_pool_geom_t *g) {
    const int64_t planes = (16 << 10) / (int64_t)sizeof(float) / (plane_size(g, g->in) + 1);
    return planes > 1 ? planes : 1;
}

DEFT_CLONES static void fast_unpool_planes(void *arg, int64_t begin, int64_t end) {
    const fast_job_t *j = arg;
    if (!j->relu || unpool_rows(j)) {
        unpool_planes(j, begin, end);
        return;
    }
    for (int64_t from = begin, run = relu_run(j->g); from < end; from += run) {
        const int64_t to = end - from < run ? end : from + run;
        unpool_planes(j, from, to);
        relu_grad_planes(j, from, to);
    }
}

void deft_pool_cpu_backward(const deft_pool_grad_t *j) {
    const deft_pool_geom_t *g = &j->g;
    if (g->planes == 0 || plane_size(g, g->in) == 0) return;
    if (fast_fits(g, j->dtype)) {
        fast_job_t f = fast_job(g);
        f.x = j->x, f.y = j->y, f.dy = j->dy, f.out = j->dx, f.relu = j->relu;
        deft_parallel_for(g->planes, plane_grain(g, true), fast_unpool_planes, &f);
        return;
    }
    deft_parallel_for(g->planes, plane_grain(g, false), general_unpool_planes, (void *)j);
}
