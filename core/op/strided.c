#include "core/op/strided.h"

#include <string.h>

#include "core/base/parallel.h"

/* Row-major strides of dims. A zero-size shape may have dimensions whose
 * product overflows before the zero: their strides saturate at INT64_MAX
 * (no element is ever reached through them) instead of wrapping. */
static void contiguous(const int64_t *dims, int ndim, int64_t *strides) {
    int64_t step = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = step;
        if (__builtin_mul_overflow(step, dims[d], &step)) step = INT64_MAX;
    }
}

void deft_contiguous_strides(const deft_shape_t *shape, int64_t *strides) {
    contiguous(shape->dims, shape->ndim, strides);
}

/* Only the first ndim entries of each array are ever read: no clearing needed. */
void deft_strided_init(deft_strided_t *it, const deft_shape_t *shape, int nops) {
    it->ndim = shape->ndim;
    it->nops = nops;
    for (int d = 0; d < shape->ndim; d++) it->dims[d] = shape->dims[d];
}

void deft_strided_set(deft_strided_t *it, int k, void *base, size_t elem, const int64_t *strides) {
    it->base[k] = base;
    it->elem[k] = elem;
    memcpy(it->strides[k], strides, (size_t)it->ndim * sizeof strides[0]);
}

void deft_strided_set_dense(deft_strided_t *it, int k, const deft_tensor_t *t) {
    it->base[k] = deft_tensor_data(t);
    it->elem[k] = deft_dtype_size(t->dtype);
    contiguous(it->dims, it->ndim, it->strides[k]);
}

void deft_strided_set_broadcast(deft_strided_t *it, int k, const deft_tensor_t *t) {
    int64_t own[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM] = {0};
    deft_contiguous_strides(&t->shape, own);
    int shift = it->ndim - t->shape.ndim;
    for (int d = 0; d < t->shape.ndim; d++) strides[d + shift] = t->shape.dims[d] == 1 ? 0 : own[d];
    deft_strided_set(it, k, deft_tensor_data(t), deft_dtype_size(t->dtype), strides);
}

void deft_strided_collapse(deft_strided_t *it) {
    int out = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->dims[d] == 1) continue;
        bool merge = out > 0;
        for (int k = 0; merge && k < it->nops; k++)
            merge = it->strides[k][out - 1] == it->strides[k][d] * it->dims[d];
        if (merge) {
            it->dims[out - 1] *= it->dims[d];
            for (int k = 0; k < it->nops; k++) it->strides[k][out - 1] = it->strides[k][d];
            continue;
        }
        it->dims[out] = it->dims[d];
        for (int k = 0; k < it->nops; k++) it->strides[k][out] = it->strides[k][d];
        out++;
    }
    if (out == 0) { /* a single element */
        it->dims[0] = 1;
        for (int k = 0; k < it->nops; k++) it->strides[k][0] = 1;
        out = 1;
    }
    it->ndim = out;
}

typedef struct run_ctx {
    const deft_strided_t *it;
    deft_inner_fn fn;
    const void *ctx;
    int64_t inner_strides[DEFT_STRIDED_MAX_OPS];
} run_ctx_t;

/* One dimension: the range is a span of that dimension, split across threads. */
static void run_flat(void *arg, int64_t begin, int64_t end) {
    const run_ctx_t *r = arg;
    char *ptrs[DEFT_STRIDED_MAX_OPS];
    for (int k = 0; k < r->it->nops; k++)
        ptrs[k] = r->it->base[k] + begin * r->inner_strides[k] * (int64_t)r->it->elem[k];
    r->fn(r->ctx, ptrs, r->inner_strides, end - begin);
}

/* Several dimensions: the range is a span of rows (all but the last dimension). */
static void run_rows(void *arg, int64_t begin, int64_t end) {
    const run_ctx_t *r = arg;
    const deft_strided_t *it = r->it;
    int last = it->ndim - 1;
    int64_t index[DEFT_SHAPE_MAX_NDIM];
    int64_t rem = begin;
    for (int d = last - 1; d >= 0; d--) {
        index[d] = rem % it->dims[d];
        rem /= it->dims[d];
    }
    for (int64_t row = begin; row < end; row++) {
        char *ptrs[DEFT_STRIDED_MAX_OPS];
        for (int k = 0; k < it->nops; k++) {
            int64_t offset = 0;
            for (int d = 0; d < last; d++) offset += index[d] * it->strides[k][d];
            ptrs[k] = it->base[k] + offset * (int64_t)it->elem[k];
        }
        r->fn(r->ctx, ptrs, r->inner_strides, it->dims[last]);
        for (int d = last - 1; d >= 0 && ++index[d] == it->dims[d]; d--) index[d] = 0;
    }
}

typedef struct flat_ctx {
    deft_inner_fn fn;
    const void *ctx;
    int nops;
    char *const *ptrs;
    const int64_t *strides;
    size_t elem;
} flat_ctx_t;

static void run_flat_span(void *arg, int64_t begin, int64_t end) {
    const flat_ctx_t *f = arg;
    char *ptrs[DEFT_STRIDED_MAX_OPS];
    for (int k = 0; k < f->nops; k++)
        ptrs[k] = f->ptrs[k] + begin * f->strides[k] * (int64_t)f->elem;
    f->fn(f->ctx, ptrs, f->strides, end - begin);
}

/* Out of line: inlined (link-time), the pool's set-up made every caller of
 * deft_flat_run save registers and grow its frame, a cost on each tiny call
 * (bench_graph's chain of 1-element nodes: 10 instructions of ~170 a node). */
__attribute__((noinline)) static void flat_run_parallel(deft_inner_fn fn, const void *ctx, int nops,
                                                        char *const *ptrs, const int64_t *strides,
                                                        size_t elem, int64_t n) {
    flat_ctx_t f = {fn, ctx, nops, ptrs, strides, elem};
    deft_parallel_for(n, DEFT_PARALLEL_GRAIN, run_flat_span, &f);
}

void deft_flat_run(deft_inner_fn fn, const void *ctx, int nops, char *const *ptrs,
                   const int64_t *strides, size_t elem, int64_t n) {
    if (n >= 2 * DEFT_PARALLEL_GRAIN)
        flat_run_parallel(fn, ctx, nops, ptrs, strides, elem, n);
    else if (n > 0)
        fn(ctx, ptrs, strides, n);
}

void deft_strided_run(deft_strided_t *it, deft_inner_fn fn, const void *ctx) {
    for (int d = 0; d < it->ndim; d++)
        if (it->dims[d] == 0) return;
    deft_strided_collapse(it);
    run_ctx_t r = {.it = it, .fn = fn, .ctx = ctx};
    int last = it->ndim - 1;
    for (int k = 0; k < it->nops; k++) r.inner_strides[k] = it->strides[k][last];
    if (it->ndim == 1) {
        deft_parallel_for(it->dims[0], DEFT_PARALLEL_GRAIN, run_flat, &r);
        return;
    }
    int64_t rows = 1;
    for (int d = 0; d < last; d++) rows *= it->dims[d];
    int64_t grain = DEFT_PARALLEL_GRAIN / it->dims[last];
    deft_parallel_for(rows, grain < 1 ? 1 : grain, run_rows, &r);
}

void deft_strided_to_gpu_map(deft_strided_t *it, deft_gpu_fn_t fn, const deft_dtype_t *dtypes,
                             const double *scalars, deft_gpu_map_t *m) {
    int64_t size = 1;
    for (int d = 0; d < it->ndim; d++)
        if (it->dims[d] == 0) size = 0;
    for (int d = 0; size > 0 && d < it->ndim; d++) size *= it->dims[d]; /* fits: a valid shape */
    if (size > 0) deft_strided_collapse(it);
    *m = (deft_gpu_map_t){.fn = fn, .ndim = it->ndim, .nops = it->nops, .size = size};
    for (int d = 0; d < it->ndim; d++) m->dims[d] = it->dims[d];
    for (int k = 0; scalars && k < DEFT_GPU_MAX_OPS; k++) m->scalars[k] = scalars[k];
    for (int k = 0; k < it->nops; k++) {
        m->base[k] = it->base[k];
        m->dtype[k] = dtypes[k];
        for (int d = 0; d < it->ndim; d++) m->strides[k][d] = it->strides[k][d];
    }
}
