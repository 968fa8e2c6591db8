/*
 * _linalg_gemm2 (alpha op(A) op(B)) and _linalg_gemm (alpha op(A) op(B) +
 * beta C), MXNet's batched matrix products: the matrices' rows lie along
 * `axis` and their columns along the last axis; every other axis is a batch
 * axis, of equal size in all inputs (no broadcasting). op transposes a
 * matrix when its transpose_ flag is set.
 *
 * The kernel is a plain loop accumulating in double, parallel over the
 * rows of all products: these operators are rare in models (deft's dot and
 * batch_dot, through BLAS, carry the common products), and a row axis other
 * than -2 leaves the matrices strided. The per-element arithmetic is
 * core/math/gemm_math.h, shared with the GPU kernel (linalg_gemm.cu), which
 * takes an output element per thread.
 */
#include "core/base/parallel.h"
#include "core/math/gemm_math.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"

/* p[0] transpose_a, p[1] transpose_b, p[2] alpha, p[3] axis, then beta for gemm. */
#define GEMM_COMMON_PARAMS                                                                         \
    {"transpose_a", DEFT_PARAM_BOOL, "False", "use A's transpose", NULL, false},                   \
        {"transpose_b", DEFT_PARAM_BOOL, "False", "use B's transpose", NULL, false},               \
        {"alpha", DEFT_PARAM_FLOAT, "1.0", "scale of the product", NULL, false}, {                 \
        "axis", DEFT_PARAM_INT, "-2", "axis of the matrices' rows (columns: the last)", NULL,      \
            false                                                                                  \
    }
static const deft_param_def_t gemm2_params[] = {GEMM_COMMON_PARAMS, {0}};
static const deft_param_def_t gemm_params[] = {
    GEMM_COMMON_PARAMS, {"beta", DEFT_PARAM_FLOAT, "1.0", "scale of C", NULL, false}, {0}};

static const char *const gemm2_inputs[] = {"A", "B", NULL};
static const char *const gemm_inputs[] = {"A", "B", "C", NULL};

/* The row axis of rank-ndim inputs; -1 naming the parameter when it is not one. */
static int row_axis(const deft_op_t *op, const deft_param_value_t *p, int ndim, int *axis) {
    *axis = (int)(p[3].i < 0 ? p[3].i + ndim : p[3].i);
    if (*axis >= 0 && *axis < ndim - 1) return 0;
    return deft_op_error(op, DEFT_ERR_VALUE,
                         "axis is %lld, expected a row axis in [%d, %d) for inputs of rank %d",
                         (long long)p[3].i, -ndim, ndim - 1, ndim);
}

static int shape_error(const deft_op_t *op, int input, const deft_shape_t *got,
                       const deft_shape_t *want, const char *why) {
    char sg[DEFT_SHAPE_STR_MAX], sw[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE, "input %d has shape %s, expected %s (%s)", input,
                         deft_shape_format(got, sg, sizeof sg),
                         deft_shape_format(want, sw, sizeof sw), why);
}

static int gemm_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    const deft_shape_t *a = &in[0].shape, *b = &in[1].shape;
    int ndim = a->ndim, axis;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) || deft_op_check_same_dtype(op, nin, in))
        return -1;
    if (ndim < 2)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 has rank %d, expected 2 or more", ndim);
    if (row_axis(op, p, ndim, &axis)) return -1;
    /* B as it should be: A's batch axes, and rows matching A's columns (both as used) */
    int64_t inner = p[0].i ? a->dims[axis] : a->dims[ndim - 1];
    deft_shape_t want_b = *a, c = *a;
    want_b.dims[p[1].i ? ndim - 1 : axis] = inner;
    want_b.dims[p[1].i ? axis : ndim - 1] = b->ndim == ndim ? b->dims[p[1].i ? axis : ndim - 1] : 0;
    if (!deft_shape_equal(b, &want_b))
        return shape_error(op, 1, b, &want_b, "A's batch axes, and B's rows A's columns");
    c.dims[axis] = p[0].i ? a->dims[ndim - 1] : a->dims[axis];
    c.dims[ndim - 1] = want_b.dims[p[1].i ? axis : ndim - 1];
    if (nin == 3 && !deft_shape_equal(&in[2].shape, &c))
        return shape_error(op, 2, &in[2].shape, &c, "the product's shape");
    out[0] = (deft_desc_t){c, in[0].dtype};
    *nout = 1;
    return 0;
}

static deft_gemm_layout_t layout(const deft_shape_t *shape, int axis) {
    deft_gemm_layout_t l = {.row_stride = 1};
    for (int d = 0; d < shape->ndim; d++) l.dims[d] = shape->dims[d];
    for (int d = axis + 1; d < shape->ndim; d++) l.row_stride *= shape->dims[d];
    return l;
}

/* The plan of a call; -1 naming the parameter on a bad axis. */
static int gemm_plan(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_tensor_t *in, const deft_tensor_t *out, deft_gemm_plan_t *g) {
    int ndim = in[0].shape.ndim, axis;
    if (row_axis(op, p, ndim, &axis)) return -1;
    *g = (deft_gemm_plan_t){.dtype = out[0].dtype,
                            .ndim = ndim,
                            .axis = axis,
                            .ta = p[0].i != 0,
                            .tb = p[1].i != 0,
                            .alpha = p[2].f,
                            .beta = nin == 3 ? p[4].f : 0,
                            .m = out[0].shape.dims[axis],
                            .n = out[0].shape.dims[ndim - 1],
                            .k = p[0].i ? in[0].shape.dims[axis] : in[0].shape.dims[ndim - 1],
                            .la = layout(&in[0].shape, axis),
                            .lb = layout(&in[1].shape, axis),
                            .ly = layout(&out[0].shape, axis),
                            .a = deft_tensor_data(&in[0]),
                            .b = deft_tensor_data(&in[1]),
                            .c = nin == 3 ? deft_tensor_data(&in[2]) : NULL,
                            .y = deft_tensor_data(&out[0])};
    return 0;
}

/* Rows [begin, end) of all products, a row being (batch, i). */
static void gemm_rows(void *arg, int64_t begin, int64_t end) {
    const deft_gemm_plan_t *g = arg;
    for (int64_t r = begin; r < end; r++) {
        int64_t batch = r / g->m, i = r % g->m;
        int64_t ba = deft_gemm_batch_offset(g, &g->la, batch),
                bb = deft_gemm_batch_offset(g, &g->lb, batch),
                by = deft_gemm_batch_offset(g, &g->ly, batch);
        for (int64_t j = 0; j < g->n; j++) deft_gemm_element(g, ba, bb, by, i, j);
    }
}

static int gemm_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    deft_gemm_plan_t g;
    if (gemm_plan(op, p, nin, in, out, &g)) return -1;
    int64_t rows = g.m ? deft_shape_size(&out[0].shape) / (g.n ? g.n : 1) : 0;
    if (g.n == 0) return 0;
    int64_t grain = DEFT_PARALLEL_GRAIN / (g.n * (g.k ? g.k : 1));
    deft_parallel_for(rows, grain < 1 ? 1 : grain, gemm_rows, &g);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int gemm_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    deft_gemm_plan_t g;
    if (gemm_plan(op, p, nin, in, out, &g)) return -1;
    return deft_gpu_linalg_gemm(out[0].device.id, &g, deft_shape_size(&out[0].shape));
}
#endif

/* ---- gradients: products of the head gradient g with the other operand ---- */

static deft_gref_t gemm2(deft_grad_builder_t *b, deft_gref_t x, deft_gref_t y, bool tx, bool ty) {
    return g_op2(b, "_linalg_gemm2", x, y,
                 GRAD_PARAMS("transpose_a", tx ? "True" : "False", "transpose_b",
                             ty ? "True" : "False", "alpha", g_attr(b, "alpha", "1.0"), "axis",
                             g_attr(b, "axis", "-2")));
}

/* For Y = alpha op(A) op(B): dA = alpha g op(B)^T, or its transpose when A
 * was transposed; dB = alpha op(A)^T g, likewise. gemm's C gets beta g. */
static int grad_gemm(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    bool ta = p[0].i != 0, tb = p[1].i != 0;
    deft_gref_t g = b->out_grad(b, 0), A = b->input(b, 0), B = b->input(b, 1);
    in_grads[0] = ta ? gemm2(b, B, g, tb, true) : gemm2(b, g, B, false, !tb);
    in_grads[1] = tb ? gemm2(b, g, A, true, ta) : gemm2(b, A, g, !ta, false);
    if (nin == 3) in_grads[2] = g_scale(b, g, p[4].f);
    return 0;
}

static const deft_op_t gemm_ops[] = {
    {.name = "_linalg_gemm2",
     .description = "Batched matrix product alpha op(A) op(B); rows along `axis`, columns along "
                    "the last axis.",
     .input_names = gemm2_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = gemm2_params,
     .infer = gemm_infer,
     .forward = gemm_forward,
     .forward_gpu = DEFT_GPU(gemm_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_gemm},
    {.name = "_linalg_gemm",
     .description = "Batched alpha op(A) op(B) + beta C; rows along `axis`, columns along the "
                    "last axis.",
     .input_names = gemm_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = gemm_params,
     .infer = gemm_infer,
     .forward = gemm_forward,
     .forward_gpu = DEFT_GPU(gemm_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_gemm},
};

DEFT_OP_FAMILY(deft_family_linalg_gemm, gemm_ops);
