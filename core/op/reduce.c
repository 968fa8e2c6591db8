/*
 * Reductions over axes: sum, mean, prod, nansum, nanprod, max, min, norm,
 * argmax, argmin. Shapes and dtypes are MXNet 1.x's: a reduction over every
 * axis has shape (1,), never (), and argmax/argmin give indices in the
 * input's dtype.
 *
 * Every reduction is computed on a (outer, inner) layout where the inner
 * span holds the reduced elements contiguously. Where the reduced axes are
 * not all innermost, float sums and means, and every kind but arg* whose
 * innermost axis is reduced, read the input in place (see "reductions that
 * read the input in place"); the rest first copy it with the reduced axes
 * moved last (one strided pass), which keeps one simple loop per reduction
 * instead of a loop nest per axis pattern. Float sums
 * accumulate in double; integer sums and products wrap in 64 bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/scratch.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/reduce.h"
#include "core/math/reduce_math.h"
#include "core/op/strided.h"

typedef struct reducer {
    deft_reduce_kind_t kind;
    bool float_only;     /* mean, norm */
    bool needs_elements; /* max, min, arg*: a zero-size reduction has no answer */
} reducer_t;

/* A float sum in double of `spans` spans of n elements, `stride` apart,
 * over 16 partial sums: vector lanes. */
#define SUM_SPAN(S, T)                                                                             \
    DEFT_CLONES static double sum_##S(const T *x, int64_t n, int64_t spans, int64_t stride) {      \
        double part[16] = {0}, sum = 0;                                                            \
        for (int64_t s = 0; s < spans; s++, x += stride) {                                         \
            int64_t i = 0;                                                                         \
            for (; i + 16 <= n; i += 16)                                                           \
                for (int j = 0; j < 16; j++) part[j] += x[i + j];                                  \
            for (; i < n; i++) sum += x[i];                                                        \
        }                                                                                          \
        for (int width = 8; width > 0; width /= 2) /* a tree: no chain of 16 dependent adds */     \
            for (int j = 0; j < width; j++) part[j] += part[j + width];                            \
        return sum + part[0];                                                                      \
    }
SUM_SPAN(f32, float)
SUM_SPAN(f64, double)

/* Max/min/argmax/argmin for floats: the first NaN wins, as in NumPy. */
#define FLOAT_SPAN(S, T)                                                                           \
    static void span_##S(deft_reduce_kind_t kind, const T *x, int64_t n, int64_t base,             \
                         deft_partial_t *p) {                                                      \
        switch (kind) {                                                                            \
        case DEFT_R_SUM:                                                                           \
        case DEFT_R_MEAN:                                                                          \
            p->f += sum_##S(x, n, 1, 0);                                                           \
            break;                                                                                 \
        case DEFT_R_PROD:                                                                          \
            for (int64_t i = 0; i < n; i++) p->f *= x[i];                                          \
            break;                                                                                 \
        case DEFT_R_NANSUM:                                                                        \
            for (int64_t i = 0; i < n; i++) p->f += x[i] == x[i] ? (double)x[i] : 0.0;             \
            break;                                                                                 \
        case DEFT_R_NANPROD:                                                                       \
            for (int64_t i = 0; i < n; i++) p->f *= x[i] == x[i] ? (double)x[i] : 1.0;             \
            break;                                                                                 \
        case DEFT_R_NORM:                                                                          \
            for (int64_t i = 0; i < n; i++) p->f += (double)x[i] * x[i];                           \
            break;                                                                                 \
        case DEFT_R_NORM1:                                                                         \
            for (int64_t i = 0; i < n; i++) p->f += fabs((double)x[i]);                            \
            break;                                                                                 \
        default:                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                double v = x[i];                                                                   \
                bool take = p->count == 0 && i == 0;                                               \
                if (!take && p->f == p->f)                                                         \
                    take = v != v ||                                                               \
                           ((kind == DEFT_R_MAX || kind == DEFT_R_ARGMAX) ? v > p->f : v < p->f);  \
                if (take) p->f = v, p->index = base + i;                                           \
            }                                                                                      \
        }                                                                                          \
        p->count += n;                                                                             \
    }

#define INT_SPAN(S, T)                                                                             \
    static void span_##S(deft_reduce_kind_t kind, const T *x, int64_t n, int64_t base,             \
                         deft_partial_t *p) {                                                      \
        for (int64_t i = 0; i < n; i++) {                                                          \
            int64_t v = x[i];                                                                      \
            switch (kind) {                                                                        \
            case DEFT_R_SUM:                                                                       \
            case DEFT_R_NANSUM:                                                                    \
                p->u += (uint64_t)v;                                                               \
                break;                                                                             \
            case DEFT_R_PROD:                                                                      \
            case DEFT_R_NANPROD:                                                                   \
                p->u *= (uint64_t)v;                                                               \
                break;                                                                             \
            case DEFT_R_MEAN: /* bool's, into a float */                                           \
                p->f += (double)v;                                                                 \
                break;                                                                             \
            default: {                                                                             \
                bool big = (kind == DEFT_R_MAX || kind == DEFT_R_ARGMAX);                          \
                if ((p->count == 0 && i == 0) || (big ? v > (int64_t)p->u : v < (int64_t)p->u))    \
                    p->u = (uint64_t)v, p->index = base + i;                                       \
            }                                                                                      \
            }                                                                                      \
        }                                                                                          \
        p->count += n;                                                                             \
    }

FLOAT_SPAN(f32, float)
FLOAT_SPAN(f64, double)
INT_SPAN(i32, int32_t)
INT_SPAN(i64, int64_t)
INT_SPAN(u8, uint8_t)

/* float16 / bfloat16: blocks widened to float32 and reduced as float32 (the
 * partial carries the element count and first index across blocks). */
static void span_half(deft_reduce_kind_t kind, bool bf16, const uint16_t *x, int64_t n,
                      int64_t base, deft_partial_t *p) {
    enum { BLOCK = 256 };
    float buf[BLOCK];
    for (int64_t start = 0; start < n; start += BLOCK) {
        int64_t m = n - start < BLOCK ? n - start : BLOCK;
        for (int64_t i = 0; i < m; i++)
            buf[i] = bf16 ? deft_bf16_to_float(x[start + i]) : deft_half_to_float(x[start + i]);
        span_f32(kind, buf, m, base + start, p);
    }
}

static bool reduces_as_float(deft_dtype_t dtype) {
    return deft_dtype_is_float(dtype) || deft_dtype_is_half(dtype);
}

static void reduce_span(deft_reduce_kind_t kind, deft_dtype_t dtype, const void *x, int64_t n,
                        int64_t base, deft_partial_t *p) {
    if (n == 0) return; /* x may be a zero-size array's NULL: no offset from it */
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        span_f32(kind, (const float *)x + base, n, base, p);
        break;
    case DEFT_DT_FLOAT64:
        span_f64(kind, (const double *)x + base, n, base, p);
        break;
    case DEFT_DT_INT32:
        span_i32(kind, (const int32_t *)x + base, n, base, p);
        break;
    case DEFT_DT_INT64:
        span_i64(kind, (const int64_t *)x + base, n, base, p);
        break;
    case DEFT_DT_FLOAT16:
    case DEFT_DT_BFLOAT16:
        span_half(kind, dtype == DEFT_DT_BFLOAT16, (const uint16_t *)x + base, n, base, p);
        break;
    default: /* uint8 and bool */
        span_u8(kind, (const uint8_t *)x + base, n, base, p);
        break;
    }
}

/* ---- parameters and shapes ---- */

typedef struct reduce_plan {
    uint32_t reduced; /* bit d: axis d is reduced */
    int64_t outer, span;
} reduce_plan_t;

static bool is_reduced(const reduce_plan_t *plan, int d) {
    return (plan->reduced >> d) & 1u;
}

/* The axes listed in a tuple, honouring `exclude`. Kept out of line, so that
 * plan_axes' common case (all axes) does not pay for its frame. */
__attribute__((noinline)) static int mark_listed_axes(const deft_op_t *op, const deft_tuple_t *axes,
                                                      bool exclude, int ndim, uint32_t *reduced) {
    *reduced = 0;
    for (int k = 0; k < axes->n; k++) {
        int a;
        if (deft_op_axis(op, "axis", axes->v[k], ndim, &a)) return -1;
        if ((*reduced >> a) & 1u)
            return deft_op_error(op, DEFT_ERR_VALUE, "axis %d is listed twice", a);
        *reduced |= 1u << a;
    }
    if (exclude) *reduced ^= (1u << ndim) - 1;
    return 0;
}

/* Mark reduced axes from an axis tuple (NULL: all, the common case, kept short). */
static int plan_axes(const deft_op_t *op, const deft_tuple_t *axes, bool exclude,
                     const deft_shape_t *shape, reduce_plan_t *plan) {
    if (!axes) {
        *plan = (reduce_plan_t){(1u << shape->ndim) - 1, 1, deft_shape_size(shape)};
        return 0;
    }
    if (mark_listed_axes(op, axes, exclude, shape->ndim, &plan->reduced)) return -1;
    plan->outer = plan->span = 1;
    for (int d = 0; d < shape->ndim; d++) {
        if (is_reduced(plan, d))
            plan->span *= shape->dims[d];
        else
            plan->outer *= shape->dims[d];
    }
    return 0;
}

/* MXNet 1.x has no rank-0 arrays: what would be one is (1,). */
static void reduced_shape(const reduce_plan_t *plan, const deft_shape_t *in, bool keepdims,
                          deft_shape_t *out) {
    out->ndim = 0;
    memset(out->dims, 0, sizeof out->dims);
    for (int d = 0; d < in->ndim; d++) {
        if (!is_reduced(plan, d))
            out->dims[out->ndim++] = in->dims[d];
        else if (keepdims)
            out->dims[out->ndim++] = 1;
    }
    if (out->ndim == 0) out->ndim = 1, out->dims[0] = 1;
}

/* A tuple `axis` parameter: NULL (every axis) for None and for (), as MXNet. */
static const deft_tuple_t *listed_axes(const deft_param_value_t *p) {
    return p[0].none || p[0].t.n == 0 ? NULL : &p[0].t;
}

/* Parameters: sum-like ops take (axis, keepdims, exclude); norm adds ord;
 * argmax/argmin take (axis, keepdims) with a single optional axis, given
 * back as a 1-tuple in `one`. The axes are NULL for all of them. */
static void read_axis_params(const deft_op_t *op, const deft_param_value_t *p,
                             const deft_tuple_t **axes, deft_tuple_t *one, bool *keepdims,
                             bool *exclude) {
    const reducer_t *r = op->data;
    *axes = p[0].none ? NULL : &p[0].t;
    *keepdims = p[1].i != 0;
    *exclude = false;
    if (r->kind == DEFT_R_ARGMAX || r->kind == DEFT_R_ARGMIN) {
        if (*axes) {
            one->n = 1;
            one->v[0] = p[0].i;
            *axes = one;
        }
        return;
    }
    *axes = listed_axes(p);
    if (r->kind != DEFT_R_NORM) *exclude = p[2].i != 0;
}

/* The dtype of a reduction of bool values, NumPy's (mean: deft's float32);
 * false where bool has no such reduction. */
static bool bool_result(deft_reduce_kind_t kind, deft_dtype_t *dtype) {
    switch (kind) {
    case DEFT_R_MAX:
    case DEFT_R_MIN:
        *dtype = DEFT_DT_BOOL;
        return true;
    case DEFT_R_SUM:
    case DEFT_R_NANSUM:
    case DEFT_R_PROD:
    case DEFT_R_NANPROD:
        *dtype = DEFT_DT_INT64;
        return true;
    case DEFT_R_MEAN:
        *dtype = DEFT_DT_FLOAT32;
        return true;
    default:
        return false;
    }
}

static int reduce_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const reducer_t *r = op->data;
    /* float16 and bfloat16 reduce through float32; bool has max and min (any,
     * all), and NumPy's sum and prod (int64 counts) and mean (deft's float32) */
    bool half = deft_dtype_is_half(in[0].dtype);
    deft_dtype_t out_dtype = in[0].dtype;
    bool bool_ok = in[0].dtype == DEFT_DT_BOOL && bool_result(r->kind, &out_dtype);
    if (!half && !bool_ok &&
        (r->float_only ? deft_op_check_dtype_float(op, 0, in[0].dtype)
                       : deft_op_check_dtype_arith(op, 0, in[0].dtype)))
        return -1;
    if (r->kind == DEFT_R_NORM && p[2].i != 1 && p[2].i != 2)
        return deft_op_error(op, DEFT_ERR_VALUE, "ord is %lld, expected 1 or 2", (long long)p[2].i);
    const deft_tuple_t *axes;
    deft_tuple_t one;
    bool keepdims, exclude;
    read_axis_params(op, p, &axes, &one, &keepdims, &exclude);
    reduce_plan_t plan;
    if (plan_axes(op, axes, exclude, &in[0].shape, &plan)) return -1;
    if (r->needs_elements && plan.span == 0 && plan.outer > 0)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "cannot reduce over a zero-size axis (it has no %s)", op->name);
    reduced_shape(&plan, &in[0].shape, keepdims, &out[0].shape);
    out[0].dtype = out_dtype;
    *nout = 1;
    return 0;
}

/* ---- the kernel ---- */

typedef struct reduce_ctx {
    const reducer_t *r;
    const void *x;
    deft_dtype_t dtype;
    int64_t span;
    const deft_tensor_t *out;
    deft_partial_t *partials; /* one per chunk, when one output is split across threads */
    int64_t chunk;
} reduce_ctx_t;

/* Row o of x (span elements each) to element o of y. */
static void reduce_row(deft_reduce_kind_t kind, deft_dtype_t dtype, const void *x, int64_t span,
                       int64_t o, const deft_tensor_t *y) {
    deft_partial_t p = deft_reduce_identity(kind);
    reduce_span(kind, dtype, x, span, o * span, &p);
    if (kind == DEFT_R_ARGMAX || kind == DEFT_R_ARGMIN) p.index -= o * span;
    deft_reduce_store(kind, &p, span, deft_tensor_data(y), o, y->dtype);
}

/* Float32 sums of rows shorter than sum_f32's 16 lanes (a loss's classes), as it adds them (one
 * double chain from 0 per row), without a call per row: the rows' chains overlap (32 rows of 10,
 * a softmax gradient's: 0.53 -> 0.2 us). */
static bool short_f32_sums(const reduce_ctx_t *c) {
    return c->dtype == DEFT_DT_FLOAT32 && c->span > 0 && c->span < 16 &&
           (c->r->kind == DEFT_R_SUM || c->r->kind == DEFT_R_MEAN);
}

static void sum_short_rows_f32(const reduce_ctx_t *c, int64_t begin, int64_t end) {
    const float *x = (const float *)c->x + begin * c->span;
    for (int64_t o = begin; o < end; o++, x += c->span) {
        deft_partial_t p = {0, 0, -1, c->span};
        for (int64_t i = 0; i < c->span; i++) p.f += x[i];
        deft_reduce_store(c->r->kind, &p, c->span, deft_tensor_data(c->out), o, c->out->dtype);
    }
}

static void reduce_rows(void *arg, int64_t begin, int64_t end) {
    const reduce_ctx_t *c = arg;
    if (short_f32_sums(c)) {
        sum_short_rows_f32(c, begin, end);
        return;
    }
    for (int64_t o = begin; o < end; o++)
        reduce_row(c->r->kind, c->dtype, c->x, c->span, o, c->out);
}

static void reduce_chunks(void *arg, int64_t begin, int64_t end) {
    const reduce_ctx_t *c = arg;
    for (int64_t k = begin; k < end; k++) {
        int64_t first = k * c->chunk, n = c->span - first < c->chunk ? c->span - first : c->chunk;
        c->partials[k] = deft_reduce_identity(c->r->kind);
        reduce_span(c->r->kind, c->dtype, c->x, n, first, &c->partials[k]);
    }
}

/* Copy x with the reduced axes moved innermost; NULL when out of memory. */
static void *move_reduced_last(const deft_tensor_t *x, const reduce_plan_t *plan) {
    size_t elem = deft_dtype_size(x->dtype);
    int64_t own[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM];
    deft_shape_t order = {.ndim = 0};
    deft_contiguous_strides(&x->shape, own);
    for (int pass = 0; pass < 2; pass++) {
        for (int d = 0; d < x->shape.ndim; d++) {
            if (is_reduced(plan, d) != (pass == 1)) continue;
            strides[order.ndim] = own[d];
            order.dims[order.ndim++] = x->shape.dims[d];
        }
    }
    void *copy = deft_scratch_alloc(deft_tensor_nbytes(x));
    if (copy) deft_copy_strided(x->device, &order, copy, NULL, deft_tensor_data(x), strides, elem);
    return copy;
}

static bool reduced_are_innermost(const reduce_plan_t *plan, const deft_shape_t *shape) {
    bool seen_reduced = false;
    for (int d = 0; d < shape->ndim; d++) {
        if (shape->dims[d] == 1) continue;
        if (is_reduced(plan, d))
            seen_reduced = true;
        else if (seen_reduced)
            return false;
    }
    return true;
}

/* A call's kind: norm with ord=1 is NORM1. */
static deft_reduce_kind_t call_kind(const deft_op_t *op, const deft_param_value_t *p) {
    deft_reduce_kind_t kind = ((const reducer_t *)op->data)->kind;
    return kind == DEFT_R_NORM && p[2].i == 1 ? DEFT_R_NORM1 : kind;
}

/* A call's plan over x's shape, and its kind. */
static int plan_reduction(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *x,
                          reduce_plan_t *plan, deft_reduce_kind_t *kind) {
    const deft_tuple_t *axes;
    deft_tuple_t one;
    bool keepdims, exclude;
    read_axis_params(op, p, &axes, &one, &keepdims, &exclude);
    *kind = call_kind(op, p);
    return plan_axes(op, axes, exclude, x, plan);
}

/* ---- reductions that read the input in place ----
 *
 * When the reduced axes are not innermost, copying the input transposed
 * costs more than the reduction (a (32,128) sum over axis 0, a dense bias
 * gradient: 3.0 us with the copy, 0.65 without). Two layouts read it in place:
 *  - the innermost run of axes is reduced (conv bias gradients: axes (0,2,3)
 *    of NCHW): each result sums contiguous spans, one per other reduced index;
 *  - the innermost run is kept (a sum over leading axes): each block of
 *    results adds whole rows into a block of accumulators, a vector loop.
 */

/* Axes with neighbours of the same kind merged (size-1 axes dropped),
 * innermost first, each with its stride in the input. */
typedef struct axis_run {
    int64_t len, stride;
} axis_run_t;

typedef struct run_layout {
    int nkept, nreduced;
    axis_run_t kept[DEFT_SHAPE_MAX_NDIM], reduced[DEFT_SHAPE_MAX_NDIM];
    bool inner_reduced; /* whether the innermost run is a reduced one */
} run_layout_t;

static void plan_runs(const deft_shape_t *shape, const reduce_plan_t *plan, run_layout_t *l) {
    l->nkept = l->nreduced = 0;
    int64_t stride = 1;
    int last = -1; /* the kind of the run being built: -1 none, 0 kept, 1 reduced */
    for (int d = shape->ndim - 1; d >= 0; stride *= shape->dims[d], d--) {
        if (shape->dims[d] == 1) continue;
        int r = is_reduced(plan, d);
        axis_run_t *runs = r ? l->reduced : l->kept;
        int *n = r ? &l->nreduced : &l->nkept;
        if (last == r) {
            runs[*n - 1].len *= shape->dims[d];
        } else {
            if (last < 0) l->inner_reduced = r;
            runs[(*n)++] = (axis_run_t){shape->dims[d], stride};
        }
        last = r;
    }
}

/* The input offset of index i of the runs (innermost fastest). */
static int64_t run_offset(const axis_run_t *runs, int n, int64_t i) {
    int64_t offset = 0;
    for (int k = 0; k < n && i > 0; k++) {
        offset += i % runs[k].len * runs[k].stride;
        i /= runs[k].len;
    }
    return offset;
}

/* An odometer over the runs' indices, with their offset (no division a step). */
typedef struct run_walk {
    int64_t index[DEFT_SHAPE_MAX_NDIM], offset;
} run_walk_t;

static void run_next(const axis_run_t *runs, int n, run_walk_t *w) {
    for (int k = 0; k < n; k++) {
        w->offset += runs[k].stride;
        if (++w->index[k] < runs[k].len) return;
        w->offset -= runs[k].stride * runs[k].len;
        w->index[k] = 0;
    }
}

/* `spans` spans of n elements from base, `stride` apart, into p. */
static void reduce_strided_spans(deft_reduce_kind_t kind, deft_dtype_t dtype, const void *x,
                                 int64_t n, int64_t spans, int64_t stride, int64_t base,
                                 deft_partial_t *p) {
    if ((kind == DEFT_R_SUM || kind == DEFT_R_MEAN) && n > 0 &&
        (dtype == DEFT_DT_FLOAT32 || dtype == DEFT_DT_FLOAT64)) { /* one call, one tree */
        p->f += dtype == DEFT_DT_FLOAT32 ? sum_f32((const float *)x + base, n, spans, stride)
                                         : sum_f64((const double *)x + base, n, spans, stride);
        p->count += n * spans;
        return;
    }
    for (int64_t s = 0; s < spans; s++) reduce_span(kind, dtype, x, n, base + s * stride, p);
}

enum { COLUMN_BLOCK = 512 }; /* accumulators of the columns layout, 4 KB on the stack */

typedef struct in_place_ctx {
    deft_reduce_kind_t kind;
    deft_dtype_t dtype, out_dtype; /* they differ for bool's sum, prod and mean */
    const void *x;
    void *y;
    const run_layout_t *l;
    int64_t count;         /* elements per result */
    int64_t block, blocks; /* columns layout: results per block, blocks per row of results */
} in_place_ctx_t;

/* Spans layout: results [begin, end). The spans of the next reduced run
 * go to one call; further reduced runs are walked. */
static void reduce_spans(void *arg, int64_t begin, int64_t end) {
    const in_place_ctx_t *c = arg;
    const run_layout_t *l = c->l;
    int64_t len = l->reduced[0].len; /* stride 1 */
    axis_run_t next = l->nreduced > 1 ? l->reduced[1] : (axis_run_t){1, 0};
    int64_t walks = c->count / len / next.len;
    for (int64_t o = begin; o < end; o++) {
        int64_t base = run_offset(l->kept, l->nkept, o);
        deft_partial_t p = deft_reduce_identity(c->kind);
        run_walk_t w = {{0}, 0};
        for (int64_t r = 0; r < walks; r++, run_next(l->reduced + 2, l->nreduced - 2, &w))
            reduce_strided_spans(c->kind, c->dtype, c->x, len, next.len, next.stride,
                                 base + w.offset, &p);
        deft_reduce_store(c->kind, &p, c->count, c->y, o, c->out_dtype);
    }
}

/* acc[j] += x[i * stride + j] over `rows` rows. */
#define ADD_ROWS(S, T)                                                                             \
    DEFT_CLONES static void add_rows_##S(double *acc, const T *x, int64_t n, int64_t rows,         \
                                         int64_t stride) {                                         \
        for (int64_t i = 0; i < rows; i++, x += stride)                                            \
            for (int64_t j = 0; j < n; j++) acc[j] += x[j];                                        \
    }
ADD_ROWS(f32, float)
ADD_ROWS(f64, double)

/* Columns layout: units [begin, end), each a block of up to c->block
 * consecutive results (one row of results has kept[0].len of them). */
static void reduce_columns(void *arg, int64_t begin, int64_t end) {
    const in_place_ctx_t *c = arg;
    const run_layout_t *l = c->l;
    const axis_run_t *rows = &l->reduced[0];
    int64_t width = l->kept[0].len, others = c->count / rows->len;
    size_t elem = deft_dtype_size(c->dtype);
    double acc[COLUMN_BLOCK];
    for (int64_t u = begin; u < end; u++) {
        int64_t q = u / c->blocks, first = u % c->blocks * c->block;
        int64_t n = width - first < c->block ? width - first : c->block;
        int64_t base = run_offset(l->kept + 1, l->nkept - 1, q) + first;
        memset(acc, 0, (size_t)n * sizeof *acc);
        run_walk_t w = {{0}, 0};
        for (int64_t r = 0; r < others; r++, run_next(l->reduced + 1, l->nreduced - 1, &w)) {
            const char *x = (const char *)c->x + (base + w.offset) * (int64_t)elem;
            if (c->dtype == DEFT_DT_FLOAT32)
                add_rows_f32(acc, (const float *)x, n, rows->len, rows->stride);
            else
                add_rows_f64(acc, (const double *)x, n, rows->len, rows->stride);
        }
        if (c->kind == DEFT_R_SUM && c->out_dtype == DEFT_DT_FLOAT32) { /* a bias gradient's */
            float *y = (float *)c->y + q * width + first; /* as deft_reduce_store, no switch */
            for (int64_t j = 0; j < n; j++) y[j] = (float)acc[j];
            continue;
        }
        for (int64_t j = 0; j < n; j++) {
            deft_partial_t p = {acc[j], 0, -1, c->count};
            deft_reduce_store(c->kind, &p, c->count, c->y, q * width + first + j, c->out_dtype);
        }
    }
}

/* Whether a reduction whose reduced axes are not innermost reads x in place. */
static bool reads_in_place(deft_reduce_kind_t kind, deft_dtype_t dtype, const run_layout_t *l) {
    if (kind == DEFT_R_ARGMAX || kind == DEFT_R_ARGMIN) return false; /* indices need order */
    if (l->inner_reduced) return true;
    return (kind == DEFT_R_SUM || kind == DEFT_R_MEAN) &&
           (dtype == DEFT_DT_FLOAT32 || dtype == DEFT_DT_FLOAT64);
}

static void reduce_in_place(deft_reduce_kind_t kind, const deft_tensor_t *x, const run_layout_t *l,
                            int64_t outer, int64_t span, const deft_tensor_t *y) {
    in_place_ctx_t c = {.kind = kind,
                        .dtype = x->dtype,
                        .out_dtype = y->dtype,
                        .x = deft_tensor_data(x),
                        .y = deft_tensor_data(y),
                        .l = l,
                        .count = span};
    int64_t units = outer;
    deft_range_fn fn = reduce_spans;
    int64_t per_unit = span;
    bool serial = outer * span < DEFT_PARALLEL_GRAIN; /* one thread's work: no pool */
    if (!l->inner_reduced) { /* narrower blocks where too few would keep threads idle */
        int64_t width = l->kept[0].len, rows = outer / width,
                min_units = serial ? 1 : 2 * deft_parallel_threads();
        c.block = COLUMN_BLOCK;
        while (c.block > 64 && rows * ((width + c.block - 1) / c.block) < min_units) c.block /= 2;
        c.blocks = (width + c.block - 1) / c.block;
        units = rows * c.blocks;
        per_unit = span * c.block;
        fn = reduce_columns;
    }
    int64_t grain = DEFT_PARALLEL_GRAIN / (per_unit ? per_unit : 1);
    if (serial)
        fn(&c, 0, units);
    else
        deft_parallel_for(units, grain < 1 ? 1 : grain, fn, &c);
}

/* The reduction of x to y by plan (outer results of span elements each). */
static int reduce_planned(const deft_op_t *op, const reducer_t *r, reduce_plan_t plan,
                          const deft_tensor_t *x, const deft_tensor_t *y) {
    if (plan.outer == 0) return 0;
    void *copy = NULL;
    reduce_ctx_t c = {
        .r = r, .x = deft_tensor_data(x), .dtype = x->dtype, .span = plan.span, .out = y};
    if (plan.span > 0 && !reduced_are_innermost(&plan, &x->shape)) {
        run_layout_t l;
        plan_runs(&x->shape, &plan, &l);
        if (reads_in_place(r->kind, x->dtype, &l)) {
            reduce_in_place(r->kind, x, &l, plan.outer, plan.span, y);
            return 0;
        }
        if (!(c.x = copy = move_reduced_last(x, &plan)))
            return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a %zu-byte buffer",
                                 deft_tensor_nbytes(x));
    }
    if (plan.outer * plan.span < DEFT_PARALLEL_GRAIN) { /* one thread's work: no pool */
        reduce_rows(&c, 0, plan.outer);
    } else if (plan.outer >= deft_parallel_threads() || plan.span < 4 * DEFT_PARALLEL_GRAIN) {
        int64_t grain = DEFT_PARALLEL_GRAIN / (plan.span ? plan.span : 1);
        deft_parallel_for(plan.outer, grain < 1 ? 1 : grain, reduce_rows, &c);
    } else { /* few long spans: split each across threads, then combine in order */
        c.chunk = DEFT_PARALLEL_GRAIN;
        int64_t chunks = (plan.span + c.chunk - 1) / c.chunk;
        c.partials = malloc((size_t)chunks * sizeof *c.partials);
        if (!c.partials) {
            deft_scratch_free(copy);
            return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "cannot allocate partial results");
        }
        const void *base = c.x;
        for (int64_t o = 0; o < plan.outer; o++) {
            c.x = (const char *)base + o * plan.span * (int64_t)deft_dtype_size(x->dtype);
            deft_parallel_for(chunks, 1, reduce_chunks, &c);
            deft_partial_t total = deft_reduce_identity(c.r->kind);
            for (int64_t k = 0; k < chunks; k++)
                deft_reduce_combine(c.r->kind, reduces_as_float(x->dtype), &total, &c.partials[k]);
            deft_reduce_store(c.r->kind, &total, plan.span, deft_tensor_data(y), o, y->dtype);
        }
        free(c.partials);
    }
    deft_scratch_free(copy);
    return 0;
}

static int reduce_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    if (p[0].none) { /* every axis: a small array (a loss, most often) is one row, no plan */
        int64_t n = deft_shape_size(&in[0].shape);
        if (n < DEFT_PARALLEL_GRAIN) {
            reduce_row(call_kind(op, p), in[0].dtype, deft_tensor_data(&in[0]), n, 0, &out[0]);
            return 0;
        }
    }
    reduce_plan_t plan;
    reducer_t r = *(const reducer_t *)op->data;
    if (plan_reduction(op, p, &in[0].shape, &plan, &r.kind)) return -1;
    return reduce_planned(op, &r, plan, &in[0], &out[0]);
}

int deft_reduce_sum_axes(const deft_op_t *op, const deft_tensor_t *x, uint32_t reduced,
                         const deft_tensor_t *y) {
    static const reducer_t sum = {DEFT_R_SUM, false, false};
    reduce_plan_t plan = {reduced, 1, 1};
    for (int d = 0; d < x->shape.ndim; d++) {
        if (is_reduced(&plan, d))
            plan.span *= x->shape.dims[d];
        else
            plan.outer *= x->shape.dims[d];
    }
    return reduce_planned(op, &sum, plan, x, y);
}

#ifdef DEFT_HAVE_CUDA
/* The same reduction on the GPU, reading the input in place: kept axes
 * index the results, reduced axes the elements of each. */
static int reduce_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    reduce_plan_t plan;
    deft_reduce_kind_t kind;
    if (in[0].dtype != out[0].dtype)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "of a bool array runs on the CPU only (a %s result); cast it to "
                             "int64 or float32 on the GPU first",
                             deft_dtype_name(out[0].dtype));
    if (plan_reduction(op, p, &in[0].shape, &plan, &kind)) return -1;
    deft_gpu_reduce_t r = {.kind = kind,
                           .dtype = in[0].dtype,
                           .x = deft_tensor_data(&in[0]),
                           .y = deft_tensor_data(&out[0])};
    deft_gpu_reduce_layout(&in[0].shape, plan.reduced, &r);
    return deft_gpu_reduce(deft_gpu_of(&in[0]), &r);
}
#endif

/* ---- _broadcast_reduced: spread a reduction's result back over its input ---- */

/* Parameters: axis, keepdims, exclude (as sum's), mean (divide by the reduced count). */
static const deft_param_def_t spread_params[] = {
    {"axis", DEFT_PARAM_TUPLE, "None", "the reduced axes", NULL, true},
    {"keepdims", DEFT_PARAM_BOOL, "false", "whether the reduction kept its axes", NULL, false},
    {"exclude", DEFT_PARAM_BOOL, "false", "whether axis listed the kept axes", NULL, false},
    {"mean", DEFT_PARAM_BOOL, "false", "divide by the number of reduced elements", NULL, false},
    {0}};

static int spread_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    reduce_plan_t plan;
    deft_shape_t expected;
    if (deft_op_check_dtype_float_or_half(op, 0, in[0].dtype) ||
        plan_axes(op, listed_axes(p), p[2].i != 0, &in[1].shape, &plan))
        return -1;
    reduced_shape(&plan, &in[1].shape, p[1].i != 0, &expected);
    if (deft_shape_size(&expected) != deft_shape_size(&in[0].shape)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 has shape %s, expected %s",
                             deft_shape_format(&in[0].shape, a, sizeof a),
                             deft_shape_format(&expected, b, sizeof b));
    }
    out[0] = (deft_desc_t){in[1].shape, in[0].dtype};
    *nout = 1;
    return 0;
}

/* The reduction's plan over x's shape, and the strides of its result over
 * that shape: 0 along reduced axes. */
static int spread_plan(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *x,
                       reduce_plan_t *plan, int64_t *strides) {
    if (plan_axes(op, listed_axes(p), p[2].i != 0, x, plan)) return -1;
    int64_t step = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        strides[d] = is_reduced(plan, d) ? 0 : step;
        /* a zero-size x may overflow before its zero: no element uses those strides */
        if (!is_reduced(plan, d) && __builtin_mul_overflow(step, x->dims[d], &step))
            step = INT64_MAX;
    }
    return 0;
}

static int spread_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    reduce_plan_t plan;
    int64_t strides[DEFT_SHAPE_MAX_NDIM];
    if (spread_plan(op, p, &in[1].shape, &plan, strides)) return -1;
    double scale = p[3].i && plan.span ? 1.0 / (double)plan.span : 1.0;
    int64_t n = deft_shape_size(&out[0].shape), index[DEFT_SHAPE_MAX_NDIM] = {0}, src = 0;
    const void *g = deft_tensor_data(&in[0]);
    void *y = deft_tensor_data(&out[0]);
    for (int64_t i = 0; i < n; i++) {
        deft_store_double(y, out[0].dtype, i, deft_load_double(g, in[0].dtype, src) * scale);
        for (int d = in[1].shape.ndim - 1; d >= 0; d--) {
            src += strides[d];
            if (++index[d] < in[1].shape.dims[d]) break;
            src -= strides[d] * in[1].shape.dims[d];
            index[d] = 0;
        }
    }
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int spread_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    reduce_plan_t plan;
    int64_t strides[DEFT_SHAPE_MAX_NDIM];
    if (spread_plan(op, p, &in[1].shape, &plan, strides)) return -1;
    static const int64_t none[DEFT_SHAPE_MAX_NDIM] = {0};
    double scalars[DEFT_GPU_MAX_OPS] = {[2] = p[3].i && plan.span ? 1.0 / (double)plan.span : 1.0};
    const deft_dtype_t dtypes[3] = {out[0].dtype, in[0].dtype, out[0].dtype};
    deft_strided_t it;
    deft_strided_init(&it, &out[0].shape, 3);
    deft_strided_set_dense(&it, 0, &out[0]);
    deft_strided_set(&it, 1, deft_tensor_data(&in[0]), deft_dtype_size(in[0].dtype), strides);
    deft_strided_set(&it, 2, NULL, deft_dtype_size(out[0].dtype), none);
    return deft_gpu_run_strided(&it, DEFT_GPU_FN_mul, dtypes, scalars, deft_gpu_of(&out[0]));
}
#endif

/* ---- gradients ---- */

/* value (shaped like the reduction's output) spread back over the input x. */
static deft_gref_t spread(deft_grad_builder_t *b, deft_gref_t value, bool mean) {
    return g_op2(b, "_broadcast_reduced", value, b->input(b, 0),
                 GRAD_PARAMS("axis", g_attr(b, "axis", "None"), "keepdims",
                             g_attr(b, "keepdims", "false"), "exclude",
                             g_attr(b, "exclude", "false"), "mean", mean ? "true" : "false"));
}

static int grad_sum(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                    deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = spread(b, b->out_grad(b, 0), false);
    return 0;
}

static int grad_mean(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = spread(b, b->out_grad(b, 0), true);
    return 0;
}

static int grad_prod(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) { /* g y / x */
    (void)p, (void)nin;
    deft_gref_t gy =
        g_mul(b, spread(b, b->out_grad(b, 0), false), spread(b, b->output(b, 0), false));
    in_grads[0] = g_op2(b, "elemwise_div", gy, b->input(b, 0), GRAD_NONE);
    return 0;
}

/* nansum: g where x is a number, 0 at NaN (x == x is the mask). */
static int grad_nansum(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t x = b->input(b, 0);
    in_grads[0] =
        g_mul(b, spread(b, b->out_grad(b, 0), false), g_op2(b, "_equal", x, x, GRAD_NONE));
    return 0;
}

/* nanprod: g y / x where x is a number, 0 at NaN (selected, since y / NaN is NaN). */
static int grad_nanprod(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t x = b->input(b, 0);
    deft_gref_t gy =
        g_mul(b, spread(b, b->out_grad(b, 0), false), spread(b, b->output(b, 0), false));
    deft_gref_t in[3] = {g_op2(b, "_equal", x, x, GRAD_NONE),
                         g_op2(b, "elemwise_div", gy, x, GRAD_NONE),
                         g_op1(b, "zeros_like", x, GRAD_NONE)};
    in_grads[0] = b->apply(b, "where", 3, in, GRAD_NONE, 0);
    return 0;
}

/* The spread's gradient folds back: the same reduction (sum, or mean when the
 * spread divided) over the same axes; the shape input gets none. This is what
 * second derivatives through sum and mean need. */
static int grad_spread(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)nin;
    in_grads[0] = g_op1(b, p[3].i ? "mean" : "sum", b->out_grad(b, 0),
                        GRAD_PARAMS("axis", g_attr(b, "axis", "None"), "keepdims",
                                    g_attr(b, "keepdims", "false"), "exclude",
                                    g_attr(b, "exclude", "false")));
    return 0;
}

/* max and min: the gradient goes to the elements equal to the result. */
static int grad_extreme(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t hit =
        g_op2(b, "broadcast_equal", b->input(b, 0), spread(b, b->output(b, 0), false), GRAD_NONE);
    in_grads[0] = g_mul(b, spread(b, b->out_grad(b, 0), false), hit);
    return 0;
}

static int grad_norm(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) { /* L2: g x / y; L1: g sign(x) */
    (void)nin;
    deft_gref_t g = spread(b, b->out_grad(b, 0), false), x = b->input(b, 0);
    in_grads[0] = p[2].i == 1 ? g_mul(b, g, g_op1(b, "sign", x, GRAD_NONE))
                              : g_op2(b, "elemwise_div", g_mul(b, g, x),
                                      spread(b, b->output(b, 0), false), GRAD_NONE);
    return 0;
}

/* ---- the table ---- */

#define AXIS_PARAM                                                                                 \
    { "axis", DEFT_PARAM_TUPLE, "None", "axes to reduce; None reduces all", NULL, true }
#define KEEPDIMS_PARAM                                                                             \
    { "keepdims", DEFT_PARAM_BOOL, "false", "keep reduced axes with size 1", NULL, false }

static const deft_param_def_t reduce_params[] = {
    AXIS_PARAM,
    KEEPDIMS_PARAM,
    {"exclude", DEFT_PARAM_BOOL, "false", "reduce over the axes not listed", NULL, false},
    {0}};
static const deft_param_def_t norm_params[] = {
    AXIS_PARAM, KEEPDIMS_PARAM, {"ord", DEFT_PARAM_INT, "2", "1 or 2", NULL, false}, {0}};
static const deft_param_def_t arg_params[] = {{"axis", DEFT_PARAM_INT, "None",
                                               "axis to search; None searches the flattened array",
                                               NULL, true},
                                              KEEPDIMS_PARAM,
                                              {0}};

#define REDUCE_OP(name_, params_, kind_, float_only_, needs_, doc, grad_)                          \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = deft_op_data_input, .min_inputs = 1,     \
        .max_inputs = 1, .params = params_, .infer = reduce_infer, .forward = reduce_forward,      \
        .forward_gpu = DEFT_GPU(reduce_forward_gpu), .inplace_input = -1, .gradient = grad_,       \
        .data = &(const reducer_t) {                                                               \
            kind_, float_only_, needs_                                                             \
        }                                                                                          \
    }

static const char *const grad_like[] = {"grad", "like", NULL};

static const deft_op_t reduce_ops[] = {
    {.name = "_broadcast_reduced",
     .description = "Spreads a reduction's result (or gradient) back over the reduced input's "
                    "shape, optionally divided by the reduced count: the gradient of sum and mean.",
     .input_names = grad_like,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = spread_params,
     .infer = spread_infer,
     .forward = spread_forward,
     .forward_gpu = DEFT_GPU(spread_forward_gpu),
     .inplace_input = -1,
     .shape_inputs = 1u << 1,
     .gradient = grad_spread},
    REDUCE_OP("sum", reduce_params, DEFT_R_SUM, false, false, "Sum over axes.", grad_sum),
    REDUCE_OP("mean", reduce_params, DEFT_R_MEAN, true, false, "Mean over axes.", grad_mean),
    REDUCE_OP("prod", reduce_params, DEFT_R_PROD, false, false, "Product over axes.", grad_prod),
    REDUCE_OP("nansum", reduce_params, DEFT_R_NANSUM, false, false,
              "Sum over axes, NaN counted as 0.", grad_nansum),
    REDUCE_OP("nanprod", reduce_params, DEFT_R_NANPROD, false, false,
              "Product over axes, NaN counted as 1.", grad_nanprod),
    REDUCE_OP("max", reduce_params, DEFT_R_MAX, false, true, "Maximum over axes (NaN wins).",
              grad_extreme),
    REDUCE_OP("min", reduce_params, DEFT_R_MIN, false, true, "Minimum over axes (NaN wins).",
              grad_extreme),
    REDUCE_OP("norm", norm_params, DEFT_R_NORM, true, false,
              "L2 (ord=2) or L1 (ord=1) norm over axes (all axes: of the flattened array).",
              grad_norm),
    REDUCE_OP("argmax", arg_params, DEFT_R_ARGMAX, false, true,
              "Index of the first maximum along an axis, in the input's dtype (a NaN counts as "
              "the maximum).",
              deft_gradient_zero),
    REDUCE_OP("argmin", arg_params, DEFT_R_ARGMIN, false, true,
              "Index of the first minimum along an axis, in the input's dtype (a NaN counts as "
              "the minimum).",
              deft_gradient_zero),
};

DEFT_OP_FAMILY(deft_family_reduce, reduce_ops);
