/* Index operators: take (gather), one_hot and where. */
#include <math.h>
#include <string.h>

#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/math/index_math.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/strided.h"

/* ---- take ---- */

static const char *const take_modes[] = {"clip", "wrap", "raise", NULL};

static const deft_param_def_t take_params[] = {
    {"axis", DEFT_PARAM_INT, "0", "axis to gather along", NULL, false},
    {"mode", DEFT_PARAM_ENUM, "clip",
     "out-of-range indices: clip to the ends, wrap around, or raise an error", take_modes, false},
    {0}};

static int take_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int axis;
    const deft_shape_t *a = &in[0].shape, *idx = &in[1].shape;
    if (deft_op_check_dtype_arith(op, 1, in[1].dtype) ||
        deft_op_axis(op, "axis", p[0].i, a->ndim, &axis))
        return -1;
    int ndim = a->ndim - 1 + idx->ndim;
    if (ndim > DEFT_SHAPE_MAX_NDIM)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "the result would have %d dimensions, more than %d", ndim,
                             DEFT_SHAPE_MAX_NDIM);
    if (a->dims[axis] == 0 && deft_shape_size(idx) > 0)
        return deft_op_error(op, DEFT_ERR_INDEX, "cannot take from axis %d of size 0", axis);
    out[0].dtype = in[0].dtype;
    out[0].shape.ndim = 0;
    for (int d = 0; d < axis; d++) out[0].shape.dims[out[0].shape.ndim++] = a->dims[d];
    for (int d = 0; d < idx->ndim; d++) out[0].shape.dims[out[0].shape.ndim++] = idx->dims[d];
    for (int d = axis + 1; d < a->ndim; d++) out[0].shape.dims[out[0].shape.ndim++] = a->dims[d];
    size_t nbytes;
    if (deft_shape_nbytes(&out[0].shape, deft_dtype_size(out[0].dtype), &nbytes)) return -1;
    *nout = 1;
    return 0;
}

static int index_out_of_range(const deft_op_t *op, int64_t i, int64_t j, int axis, int64_t size) {
    return deft_op_error(op, DEFT_ERR_INDEX,
                         "index %lld (position %lld) is out of range for axis %d of size %lld",
                         (long long)i, (long long)j, axis, (long long)size);
}

static int take_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int axis;
    if (deft_op_axis(op, "axis", p[0].i, in[0].shape.ndim, &axis)) return -1;
    const deft_shape_t *a = &in[0].shape;
    int64_t size = a->dims[axis], count = deft_shape_size(&in[1].shape);
    const void *indices = deft_tensor_data(&in[1]);
    /* Check every index before writing, so a failed call leaves the output untouched. */
    for (int64_t j = 0; p[1].i == DEFT_TAKE_RAISE && j < count; j++) {
        int64_t i = deft_index_at(indices, in[1].dtype, j);
        if (i < 0 || i >= size) return index_out_of_range(op, i, j, axis, size);
    }
    /* A zero-size result has no data (nor, perhaps, the source). Otherwise no
     * dimension of a is 0, and the products below fit, as a's size does. */
    if (deft_shape_size(&out[0].shape) == 0) return 0;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= a->dims[d];
    for (int d = axis + 1; d < a->ndim; d++) inner *= a->dims[d];
    size_t row = (size_t)inner * deft_dtype_size(in[0].dtype);
    const char *src = deft_tensor_data(&in[0]);
    char *dst = deft_tensor_data(&out[0]);
    for (int64_t j = 0; j < count; j++) {
        int64_t i = deft_take_resolve(deft_index_at(indices, in[1].dtype, j), size, (int)p[1].i);
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)(o * count + j) * row, src + (size_t)(o * size + i) * row, row);
    }
    return 0;
}

/* ---- one_hot ---- */

static const deft_param_def_t one_hot_params[] = {
    {"depth", DEFT_PARAM_INT, NULL, "number of classes: the new last axis", NULL, false},
    {"on_value", DEFT_PARAM_FLOAT, "1", "value at the index", NULL, false},
    {"off_value", DEFT_PARAM_FLOAT, "0", "value elsewhere", NULL, false},
    {"dtype", DEFT_PARAM_DTYPE, "float32", "dtype of the result", NULL, false},
    {0}};

static int one_hot_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (deft_op_check_dtype_arith(op, 0, in[0].dtype)) return -1;
    if (p[0].i < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "depth is %lld, expected >= 1", (long long)p[0].i);
    if (in[0].shape.ndim == DEFT_SHAPE_MAX_NDIM)
        return deft_op_error(op, DEFT_ERR_VALUE, "the result would have more than %d dimensions",
                             DEFT_SHAPE_MAX_NDIM);
    out[0].shape = in[0].shape;
    out[0].shape.dims[out[0].shape.ndim++] = p[0].i;
    out[0].dtype = (deft_dtype_t)p[3].i;
    size_t nbytes;
    if (deft_shape_nbytes(&out[0].shape, deft_dtype_size(out[0].dtype), &nbytes)) return -1;
    *nout = 1;
    return 0;
}

/* Indices outside [0, depth) give a row of off_value, as in MXNet. */
static int one_hot_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    int64_t depth = p[0].i, count = deft_shape_size(&in[0].shape);
    void *y = deft_tensor_data(&out[0]);
    for (int64_t j = 0; j < count; j++) {
        double raw = deft_load_double(deft_tensor_data(&in[0]), in[0].dtype, j);
        for (int64_t k = 0; k < depth; k++)
            deft_store_double(y, out[0].dtype, j * depth + k, raw == (double)k ? p[1].f : p[2].f);
    }
    return 0;
}

/* ---- where ---- */

/* The condition may have any dtype (bool, as NumPy's, included), and so may x and y:
 * the kernel tests the condition against zero and copies elements. */
static int where_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    deft_shape_t xy;
    if (deft_op_check_same_dtype(op, 2, in + 1) ||
        deft_broadcast_shape(op, &in[1].shape, &in[2].shape, &xy) ||
        deft_broadcast_shape(op, &in[0].shape, &xy, &out[0].shape))
        return -1;
    out[0].dtype = in[1].dtype;
    *nout = 1;
    return 0;
}

typedef struct where_ctx {
    deft_dtype_t cond_dtype;
    size_t elem;
} where_ctx_t;

static void where_loop(const void *ctx, char *const *p, const int64_t *s, int64_t n) {
    const where_ctx_t *c = ctx;
    for (int64_t i = 0; i < n; i++) {
        bool take_x = deft_load_double(p[1], c->cond_dtype, i * s[1]) != 0;
        memcpy(p[0] + i * s[0] * (int64_t)c->elem,
               take_x ? p[2] + i * s[2] * (int64_t)c->elem : p[3] + i * s[3] * (int64_t)c->elem,
               c->elem);
    }
}

static int where_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    where_ctx_t c = {in[0].dtype, deft_dtype_size(out[0].dtype)};
    deft_strided_t it;
    deft_strided_init(&it, &out[0].shape, 4);
    deft_strided_set_dense(&it, 0, &out[0]);
    for (int k = 0; k < 3; k++) deft_strided_set_broadcast(&it, k + 1, &in[k]);
    deft_strided_run(&it, where_loop, &c);
    return 0;
}

/* ---- _backward_take: scatter-add of the gradient into zeros shaped like a ---- */

static int take_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    deft_desc_t taken;
    int n;
    if (take_infer(op, p, 2, (deft_desc_t[]){in[2], in[1]}, &n, &taken)) return -1;
    if (!deft_shape_equal(&taken.shape, &in[0].shape) || taken.dtype != in[0].dtype)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 does not have the shape of take's output");
    out[0] = in[2];
    *nout = 1;
    return 0;
}

static int take_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int axis;
    if (deft_op_axis(op, "axis", p[0].i, in[2].shape.ndim, &axis)) return -1;
    const deft_shape_t *a = &in[2].shape;
    if (deft_shape_size(a) == 0) return 0; /* nothing to write (products below could overflow) */
    int64_t outer = 1, inner = 1, size = a->dims[axis], count = deft_shape_size(&in[1].shape);
    for (int d = 0; d < axis; d++) outer *= a->dims[d];
    for (int d = axis + 1; d < a->ndim; d++) inner *= a->dims[d];
    void *dst = deft_tensor_data(&out[0]);
    const void *g = deft_tensor_data(&in[0]);
    for (int64_t i = 0; i < deft_shape_size(a); i++) deft_store_double(dst, out[0].dtype, i, 0.0);
    for (int64_t j = 0; j < count; j++) {
        int64_t i = deft_index_at(deft_tensor_data(&in[1]), in[1].dtype, j);
        if ((i < 0 || i >= size) && p[1].i == DEFT_TAKE_RAISE)
            continue; /* the forward call already failed */
        i = deft_take_resolve(i, size, (int)p[1].i);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < inner; k++) {
                int64_t at = (o * size + i) * inner + k, from = (o * count + j) * inner + k;
                deft_store_double(dst, out[0].dtype, at,
                                  deft_load_double(dst, out[0].dtype, at) +
                                      deft_load_double(g, in[0].dtype, from));
            }
    }
    return 0;
}

#ifdef DEFT_HAVE_CUDA
/* take's layout, for a (the source, of dtype `dtype`) and the indices. */
static int plan_take_gpu(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *a,
                         const deft_tensor_t *indices, deft_gpu_take_t *t, int *axis_out) {
    int axis;
    if (deft_op_axis(op, "axis", p[0].i, a->ndim, &axis)) return -1;
    *t = (deft_gpu_take_t){.index_dtype = indices->dtype,
                           .indices = deft_tensor_data(indices),
                           .outer = 1,
                           .size = a->dims[axis],
                           .count = deft_shape_size(&indices->shape),
                           .inner = 1,
                           .mode = (int)p[1].i};
    for (int d = 0; d < axis; d++) t->outer *= a->dims[d];
    for (int d = axis + 1; d < a->ndim; d++) t->inner *= a->dims[d];
    *axis_out = axis;
    return 0;
}

/* What take's GPU check keeps to word its failure, maybe later (flag.cuh). */
typedef struct take_report {
    const deft_op_t *op;
    int axis;
    int64_t size;
} take_report_t;

static int report_take(const void *ctx, int64_t j, double value) {
    const take_report_t *r = ctx;
    return index_out_of_range(r->op, deft_index_at(&value, DEFT_DT_FLOAT64, 0), j, r->axis,
                              r->size);
}

static int take_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_gpu_take_t t;
    int axis;
    if (plan_take_gpu(op, p, &in[0].shape, &in[1], &t, &axis)) return -1;
    t.dtype = in[0].dtype, t.src = deft_tensor_data(&in[0]), t.dst = deft_tensor_data(&out[0]);
    take_report_t r = {op, axis, t.size};
    deft_check_report_t how = {report_take, &r, sizeof r};
    return deft_gpu_take(deft_gpu_of(&in[0]), &t, &how);
}

static int take_backward_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                     const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_gpu_take_t t;
    int axis;
    if (plan_take_gpu(op, p, &in[2].shape, &in[1], &t, &axis)) return -1;
    t.dtype = out[0].dtype, t.src = deft_tensor_data(&in[0]), t.dst = deft_tensor_data(&out[0]);
    return deft_gpu_take_backward(deft_gpu_of(&out[0]), &t);
}

static int one_hot_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    deft_gpu_one_hot_t h = {out[0].dtype,
                            in[0].dtype,
                            deft_tensor_data(&in[0]),
                            deft_tensor_data(&out[0]),
                            deft_shape_size(&in[0].shape),
                            p[0].i,
                            p[1].f,
                            p[2].f};
    return deft_gpu_one_hot(deft_gpu_of(&out[0]), &h);
}

static int where_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    const deft_tensor_t *operands[3] = {&in[0], &in[1], &in[2]};
    if (deft_gpu_check_map(op, DEFT_GPU_FN_WHERE, out[0].dtype)) return -1; /* int8, bool */
    return deft_gpu_elementwise(DEFT_GPU_FN_WHERE, &out[0], 3, operands, NULL);
}
#endif

/* ---- gradients ---- */

static int grad_take(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 1), b->input(b, 0)};
    in_grads[0] =
        b->apply(b, "_backward_take", 3, in,
                 GRAD_PARAMS("axis", g_attr(b, "axis", "0"), "mode", g_attr(b, "mode", "clip")), 0);
    return 0; /* indices are not differentiable */
}

static int grad_where(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t cond = b->input(b, 0), g = b->out_grad(b, 0);
    deft_gref_t zero = g_op1(b, "zeros_like", g, GRAD_NONE);
    deft_gref_t to_x[3] = {cond, g, zero}, to_y[3] = {cond, zero, g};
    in_grads[1] = g_op2(b, "_reduce_to_like", b->apply(b, "where", 3, to_x, GRAD_NONE, 0),
                        b->input(b, 1), GRAD_NONE);
    in_grads[2] = g_op2(b, "_reduce_to_like", b->apply(b, "where", 3, to_y, GRAD_NONE, 0),
                        b->input(b, 2), GRAD_NONE);
    return 0;
}

static const char *const take_inputs[] = {"a", "indices", NULL};
static const char *const take_backward_inputs[] = {"grad", "indices", "a", NULL};
static const char *const indices_input[] = {"indices", NULL};
static const char *const where_inputs[] = {"condition", "x", "y", NULL};

static const deft_op_t index_ops[] = {
    {.name = "take",
     .description = "Gathers slices of a along an axis at the given indices.",
     .input_names = take_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = take_params,
     .infer = take_infer,
     .forward = take_forward,
     .forward_gpu = DEFT_GPU(take_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_take},
    {.name = "_backward_take",
     .description =
         "Gradient of take: the gradient added into zeros shaped like a, at the indices.",
     .input_names = take_backward_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = take_params,
     .infer = take_backward_infer,
     .forward = take_backward_forward,
     .forward_gpu = DEFT_GPU(take_backward_forward_gpu),
     .inplace_input = -1},
    {.name = "one_hot",
     .description = "One-hot encoding of integer indices along a new last axis.",
     .input_names = indices_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = one_hot_params,
     .infer = one_hot_infer,
     .forward = one_hot_forward,
     .forward_gpu = DEFT_GPU(one_hot_forward_gpu),
     .inplace_input = -1,
     .gradient = deft_gradient_zero},
    {.name = "where",
     .description = "Elements of x where condition is non-zero, else of y (with broadcasting).",
     .input_names = where_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .infer = where_infer,
     .forward = where_forward,
     .forward_gpu = DEFT_GPU(where_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_where},
};

DEFT_OP_FAMILY(deft_family_index, index_ops);
