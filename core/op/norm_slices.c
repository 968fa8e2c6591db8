/*
 * The CPU side of normalisation over slices (norm_slices.h): each slice's
 * moments, output and gradient, in parallel over slices. The per-slice
 * loops are written once on deft_load_double and called with a constant
 * dtype, so each dtype compiles to its own typed loop.
 *
 * float32 slices that take one gamma element each (BatchNorm's channels,
 * InstanceNorm's and GroupNorm's blocks: CNNs' normalisations) take typed
 * loops instead: the slice is a few contiguous runs, the per-slice
 * constants are worked out once, and each run is one loop the compiler
 * vectorises. They compute in double like the general loops, in lanes of
 * independent sums, so they round alike and run at memory speed.
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/norm_slices.h"

void deft_norm_split(const deft_shape_t *shape, int axis, int64_t *outer, int64_t *channels,
                     int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= shape->dims[d];
    for (int d = axis + 1; d < shape->ndim; d++) *inner *= shape->dims[d];
    *channels = shape->dims[axis];
}

deft_norm_plan_t deft_norm_plan_channels(int64_t outer, int64_t channels, int64_t inner) {
    return (deft_norm_plan_t){.slices = channels,
                              .q = channels ? channels : 1,
                              .hi = 0,
                              .lo = inner,
                              .na = outer,
                              .stride = channels * inner,
                              .nb = inner,
                              .gq = channels ? channels : 1};
}

deft_norm_plan_t deft_norm_plan_lines(int64_t outer, int64_t channels, int64_t inner) {
    deft_norm_plan_t p = {
        .slices = outer * inner, .q = inner ? inner : 1, .hi = channels * inner, .lo = 1, .gq = 1};
    if (inner == 1) /* lines along the last axis are contiguous: walk them as one run */
        p.na = 1, p.stride = 0, p.nb = channels, p.gb = 1;
    else
        p.na = channels, p.stride = inner, p.nb = 1, p.ga = 1;
    return p;
}

deft_norm_plan_t deft_norm_plan_blocks(int64_t slices, int64_t size, int64_t gq) {
    return (deft_norm_plan_t){
        .slices = slices, .q = 1, .hi = size, .na = 1, .nb = size, .gq = gq ? gq : 1};
}

/* ---- forward ---- */

/* The mean and biased variance of a slice (0 and 0 when it is empty), in two passes. */
static inline void slice_moments(const deft_norm_plan_t *p, const void *x, deft_dtype_t dtype,
                                 int64_t start, double *mean, double *var) {
    double n = (double)deft_norm_count(p), sum = 0, squares = 0;
    if (n == 0) {
        *mean = *var = 0;
        return;
    }
    for (int64_t a = 0; a < p->na; a++)
        for (int64_t b = 0; b < p->nb; b++)
            sum += deft_load_double(x, dtype, start + a * p->stride + b);
    *mean = sum / n;
    for (int64_t a = 0; a < p->na; a++)
        for (int64_t b = 0; b < p->nb; b++) {
            double d = deft_load_double(x, dtype, start + a * p->stride + b) - *mean;
            squares += d * d;
        }
    *var = squares / n;
}

static inline void forward_slice(const deft_norm_forward_t *f, deft_dtype_t dtype, int64_t j) {
    const deft_norm_plan_t *p = &f->plan;
    int64_t start = deft_norm_start(p, j), e0 = j % p->gq;
    double mean = 0, var = 0;
    if (!f->use_moving) slice_moments(p, f->x, dtype, start, &mean, &var);
    double invstd = deft_norm_finish(f, dtype, j, &mean, var);
    for (int64_t a = 0; a < p->na; a++)
        for (int64_t b = 0; b < p->nb; b++)
            deft_norm_apply(f, dtype, start + a * p->stride + b, e0 + a * p->ga + b * p->gb, mean,
                            invstd);
}

/* ---- float32 slices with one gamma element each ---- */

static bool f32_by_slice(const deft_norm_plan_t *p, deft_dtype_t dtype) {
    return dtype == DEFT_DT_FLOAT32 && deft_norm_params_by_slice(p);
}

/* Sums in 8 independent double lanes: GCC's and Clang's vector extensions,
 * which each clone (DEFT_CLONES) compiles to its widest vectors. Plain loops
 * over a lane array vectorised alone but not after link-time inlining. */
enum { LANES = 8 };
typedef double lanes_t __attribute__((vector_size(LANES * sizeof(double))));
typedef float lanes_f32_t __attribute__((vector_size(LANES * sizeof(float))));

/* Vectors pass by pointer: by value, their ABI depends on the clone's target. */
static inline __attribute__((always_inline)) void load_lanes(lanes_t *v, const float *x) {
    lanes_f32_t f;
    memcpy(&f, x, sizeof f);
    *v = __builtin_convertvector(f, lanes_t);
}

static inline __attribute__((always_inline)) double add_lanes(const lanes_t *v) {
    double sum = 0;
    for (int l = 0; l < LANES; l++) sum += (*v)[l];
    return sum;
}

/* sum(x - shift) or, squared, sum((x - shift)^2) over the slice's runs. */
static inline __attribute__((always_inline)) double
slice_sum_f32(const deft_norm_plan_t *p, const float *x, double shift, bool squared) {
    lanes_t lanes = {0};
    double tail = 0;
    for (int64_t a = 0; a < p->na; a++) {
        const float *run = x + a * p->stride;
        int64_t b = 0;
        for (; b + LANES <= p->nb; b += LANES) {
            lanes_t d;
            load_lanes(&d, run + b);
            d -= shift;
            lanes += squared ? d * d : d;
        }
        for (; b < p->nb; b++) {
            double d = (double)run[b] - shift;
            tail += squared ? d * d : d;
        }
    }
    return add_lanes(&lanes) + tail;
}

DEFT_CLONES static void forward_slice_f32(const deft_norm_forward_t *f, int64_t j) {
    const deft_norm_plan_t *p = &f->plan;
    int64_t start = deft_norm_start(p, j), e = j % p->gq;
    const float *x = (const float *)f->x + start;
    float *y = (float *)f->y + start;
    double mean = 0, var = 0, n = (double)deft_norm_count(p);
    if (!f->use_moving && n > 0) {
        mean = slice_sum_f32(p, x, 0, false) / n;
        var = slice_sum_f32(p, x, mean, true) / n;
    }
    double invstd = deft_norm_finish(f, DEFT_DT_FLOAT32, j, &mean, var);
    /* y = (x - mean) * invstd * gamma + beta, as deft_norm_apply */
    double scale = invstd * (f->gamma ? ((const float *)f->gamma)[e] : 1);
    double beta = ((const float *)f->beta)[e];
    for (int64_t a = 0; a < p->na; a++) {
        const float *in = x + a * p->stride;
        float *out = y + a * p->stride;
        for (int64_t b = 0; b < p->nb; b++) out[b] = (float)(((double)in[b] - mean) * scale + beta);
    }
}

/* The backward's two sums over a slice: of g, and of g * (x - mean). */
static inline __attribute__((always_inline)) void backward_sums_f32(const deft_norm_plan_t *p,
                                                                    const float *g, const float *x,
                                                                    double mean, double *sum_g,
                                                                    double *sum_gx) {
    lanes_t lg = {0}, lgx = {0};
    double tg = 0, tgx = 0;
    for (int64_t a = 0; a < p->na; a++) {
        const float *gr = g + a * p->stride, *xr = x + a * p->stride;
        int64_t b = 0;
        for (; b + LANES <= p->nb; b += LANES) {
            lanes_t gv, xv;
            load_lanes(&gv, gr + b), load_lanes(&xv, xr + b);
            lg += gv;
            lgx += gv * (xv - mean);
        }
        for (; b < p->nb; b++) tg += gr[b], tgx += (double)gr[b] * ((double)xr[b] - mean);
    }
    *sum_g = add_lanes(&lg) + tg, *sum_gx = add_lanes(&lgx) + tgx;
}

/*
 * deft_norm_dx over a slice with its constants gathered: with batch
 * statistics dx = g * gamma * invstd - (x - mean) * invstd^2 * sum(dy xhat) / n
 * - invstd * sum(dy) / n; with constant ones the first term alone.
 */
DEFT_CLONES static void backward_slice_f32(const deft_norm_backward_t *bw, int64_t j) {
    const deft_norm_plan_t *p = &bw->plan;
    int64_t start = deft_norm_start(p, j), e = j % p->gq;
    const float *g = (const float *)bw->g + start, *x = (const float *)bw->x + start;
    float *dx = (float *)bw->dx + start;
    double mean, invstd, n = (double)deft_norm_count(p), sum_g = 0, sum_gx = 0;
    deft_norm_slice_stats(bw, DEFT_DT_FLOAT32, j, &mean, &invstd);
    double gamma = bw->gamma ? ((const float *)bw->gamma)[e] : 1;
    bool sums = bw->batch_stats || (bw->dgamma && deft_norm_slices_own_params(p));
    if (sums) backward_sums_f32(p, g, x, mean, &sum_g, &sum_gx);
    double a = gamma * invstd, bx = 0, c = 0;
    if (bw->batch_stats && n > 0) {
        bx = -(gamma * sum_gx * invstd) * invstd / n * invstd;
        c = -(gamma * sum_g) / n * invstd;
    }
    for (int64_t r = 0; r < p->na; r++) {
        const float *gr = g + r * p->stride, *xr = x + r * p->stride;
        float *out = dx + r * p->stride;
        for (int64_t b = 0; b < p->nb; b++)
            out[b] = (float)((double)gr[b] * a + ((double)xr[b] - mean) * bx + c);
    }
    if (bw->dgamma && deft_norm_slices_own_params(p)) {
        ((float *)bw->dgamma)[e] = bw->gamma ? (float)(sum_gx * invstd) : 0;
        ((float *)bw->dbeta)[e] = (float)sum_g;
    }
}

static void forward_range(void *arg, int64_t begin, int64_t end) {
    const deft_norm_forward_t *f = arg;
    bool fast = f32_by_slice(&f->plan, f->dtype);
    for (int64_t j = begin; j < end; j++) {
        if (fast)
            forward_slice_f32(f, j);
        else if (f->dtype == DEFT_DT_FLOAT32)
            forward_slice(f, DEFT_DT_FLOAT32, j);
        else
            forward_slice(f, DEFT_DT_FLOAT64, j);
    }
}

/* Slices per parallel chunk: about a grain of elements, two for the float32
 * loops, which run some four times faster (waking a thread costs 10-50 us). */
static int64_t slice_grain(const deft_norm_plan_t *p, deft_dtype_t dtype) {
    int64_t n = deft_norm_count(p), grain = (f32_by_slice(p, dtype) ? 2 : 1) * DEFT_PARALLEL_GRAIN;
    return n >= grain ? 1 : grain / (n ? n : 1);
}

int deft_norm_forward_cpu(const deft_norm_forward_t *f) {
    deft_parallel_for(f->plan.slices, slice_grain(&f->plan, f->dtype), forward_range, (void *)f);
    return 0;
}

/* ---- backward ---- */

static inline deft_norm_sums_t backward_sums(const deft_norm_backward_t *b, deft_dtype_t dtype,
                                             int64_t j, int64_t start, double mean, double invstd) {
    const deft_norm_plan_t *p = &b->plan;
    deft_norm_sums_t s = {0, 0, 0, 0};
    int64_t e0 = j % p->gq;
    for (int64_t a = 0; a < p->na; a++)
        for (int64_t c = 0; c < p->nb; c++)
            deft_norm_add_sums(b, dtype, start + a * p->stride + c, e0 + a * p->ga + c * p->gb,
                               mean, invstd, &s);
    return s;
}

static inline void backward_slice(const deft_norm_backward_t *b, deft_dtype_t dtype, int64_t j) {
    const deft_norm_plan_t *p = &b->plan;
    int64_t start = deft_norm_start(p, j), e0 = j % p->gq;
    double mean, invstd, n = (double)deft_norm_count(p);
    deft_norm_slice_stats(b, dtype, j, &mean, &invstd);
    deft_norm_sums_t s = backward_sums(b, dtype, j, start, mean, invstd);
    for (int64_t a = 0; a < p->na; a++)
        for (int64_t c = 0; c < p->nb; c++) {
            int64_t i = start + a * p->stride + c;
            deft_store_double(b->dx, dtype, i,
                              deft_norm_dx(b, dtype, i, e0 + a * p->ga + c * p->gb, mean, invstd, n,
                                           s.dy, s.dy_xhat));
        }
    if (b->dgamma && deft_norm_slices_own_params(p)) {
        deft_store_double(b->dgamma, dtype, e0, b->gamma ? s.g_xhat : 0);
        deft_store_double(b->dbeta, dtype, e0, s.g);
    }
}

static void backward_range(void *arg, int64_t begin, int64_t end) {
    const deft_norm_backward_t *b = arg;
    bool fast = f32_by_slice(&b->plan, b->dtype);
    for (int64_t j = begin; j < end; j++) {
        if (fast)
            backward_slice_f32(b, j);
        else if (b->dtype == DEFT_DT_FLOAT32)
            backward_slice(b, DEFT_DT_FLOAT32, j);
        else
            backward_slice(b, DEFT_DT_FLOAT64, j);
    }
}

/* The gradients of gamma and beta when slices share their elements: summed
 * over every slice, in double, by one thread. */
static int shared_param_grads(const deft_norm_backward_t *b) {
    const deft_norm_plan_t *p = &b->plan;
    double *sums = calloc((size_t)(2 * b->nparams + 1), sizeof *sums);
    if (!sums)
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate %lld gradient sums",
                          (long long)(2 * b->nparams));
    double *dgamma = sums, *dbeta = sums + b->nparams;
    for (int64_t j = 0; j < p->slices; j++) {
        int64_t start = deft_norm_start(p, j), e0 = j % p->gq;
        double mean, invstd;
        deft_norm_slice_stats(b, b->dtype, j, &mean, &invstd);
        for (int64_t a = 0; a < p->na; a++)
            for (int64_t c = 0; c < p->nb; c++) {
                int64_t i = start + a * p->stride + c, e = e0 + a * p->ga + c * p->gb;
                double g = deft_load_double(b->g, b->dtype, i);
                dgamma[e] += g * (deft_load_double(b->x, b->dtype, i) - mean) * invstd;
                dbeta[e] += g;
            }
    }
    for (int64_t e = 0; e < b->nparams; e++) {
        deft_store_double(b->dgamma, b->dtype, e, b->gamma ? dgamma[e] : 0);
        deft_store_double(b->dbeta, b->dtype, e, dbeta[e]);
    }
    free(sums);
    return 0;
}

int deft_norm_backward_cpu(const deft_norm_backward_t *b) {
    deft_parallel_for(b->plan.slices, slice_grain(&b->plan, b->dtype), backward_range, (void *)b);
    if (!b->dgamma || deft_norm_slices_own_params(&b->plan)) return 0;
    return shared_param_grads(b);
}

/* ---- what the operators share ---- */

int deft_norm_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    /* the forward operator checks data and gamma (its inputs 0 and 1), and
     * says what the statistics (its outputs 1 and 2) must be */
    const deft_op_t *forward = op->data;
    deft_desc_t forward_in[5] = {in[1], in[2], in[2], in[2], in[2]}, forward_out[3];
    int n;
    if (deft_op_check_same_dtype(op, 5, in) ||
        forward->infer(forward, p, forward->max_inputs, forward_in, &n, forward_out))
        return -1;
    char have[DEFT_SHAPE_STR_MAX], want[DEFT_SHAPE_STR_MAX];
    static const int checked[] = {0, 3, 4}; /* out_grad like data, the statistics */
    for (int c = 0; c < 3; c++) {
        int k = checked[c];
        const deft_shape_t *expected = k ? &forward_out[k - 2].shape : &in[1].shape;
        if (!deft_shape_equal(&in[k].shape, expected))
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d (%s) has shape %s, expected %s", k,
                                 op->input_names[k],
                                 deft_shape_format(&in[k].shape, have, sizeof have),
                                 deft_shape_format(expected, want, sizeof want));
    }
    out[0] = in[1];
    out[1] = out[2] = in[2];
    *nout = 3;
    return 0;
}

int deft_norm_gradient(deft_grad_builder_t *b, const char *backward_op, const char *const *keys,
                       deft_gref_t *in_grads) {
    const char *params[2 * DEFT_OP_MAX_PARAMS + 1];
    int np = 0;
    for (int k = 0; keys[k] && np < 2 * DEFT_OP_MAX_PARAMS; k++) {
        const char *value = b->attr(b, keys[k]);
        if (value) params[np++] = keys[k], params[np++] = value;
    }
    params[np] = NULL;
    deft_gref_t in[5] = {b->out_grad(b, 0), b->input(b, 0), b->input(b, 1), b->output(b, 1),
                         b->output(b, 2)};
    deft_gref_t r = b->apply(b, backward_op, 5, in, params, 0);
    for (int k = 0; k < 3; k++) in_grads[k] = (deft_gref_t){r.node, k};
    return 0;
}

int deft_norm_three_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p, (void)num_inputs;
    return 3;
}

int deft_norm_axis(int64_t axis, int ndim) {
    int64_t a = axis < 0 ? axis + ndim : axis;
    return a >= 0 && a < ndim ? (int)a : -1;
}

void deft_norm_infer_params(int nin, deft_desc_t *in, bool *known, int64_t n) {
    for (int k = 1; known[0] && k < nin; k++)
        if (!known[k]) {
            in[k] = (deft_desc_t){{1, {n}}, in[0].dtype};
            known[k] = true;
        }
}

int deft_norm_check_param(const deft_op_t *op, const deft_desc_t *in, int k, int64_t n) {
    if (in[k].shape.ndim == 1 && in[k].shape.dims[0] == n) return 0;
    char s[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE, "input %d (%s) has shape %s, expected (%lld,)", k,
                         op->input_names[k], deft_shape_format(&in[k].shape, s, sizeof s),
                         (long long)n);
}
