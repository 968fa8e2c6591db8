/*
 * Gathering by index arrays: pick (one element along an axis per index),
 * gather_nd and scatter_nd (slices addressed by the leading axes), and
 * slice_like (the leading corner of data shaped like another array), with
 * their gradients. Index inputs may be float32, float64, int32 or int64
 * (MXNet passes float32); every index is checked to be a whole number in
 * range before a kernel reads it (index_check.h).
 */
#include <string.h>

#include "core/math/gather_math.h"
#include "core/op/grad.h"
#include "core/op/index_check.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/pick.h"
#include "core/op/strided.h"

/* Outer and inner extents of `shape` around `axis`. */
static void split_at_axis(const deft_shape_t *shape, int axis, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= shape->dims[d];
    for (int d = axis + 1; d < shape->ndim; d++) *inner *= shape->dims[d];
}

/* ---- pick ---- */

static const char *const pick_modes[] = {"clip", "wrap", NULL}; /* DEFT_TAKE_CLIP, _WRAP */

const deft_param_def_t deft_pick_params[] = {
    {"axis", DEFT_PARAM_INT, "-1", "axis to pick along (None is not supported, as in MXNet)", NULL,
     true},
    {"keepdims", DEFT_PARAM_BOOL, "false", "keep the picked axis with size 1", NULL, false},
    {"mode", DEFT_PARAM_ENUM, "clip", "out-of-range indices: clip to the ends or wrap around",
     pick_modes, false},
    {0}};

static int pick_axis(const deft_op_t *op, const deft_param_value_t *p, int ndim, int *axis) {
    if (p[0].none)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "axis=None is not supported by pick, expected an axis");
    return deft_op_axis(op, "axis", p[0].i, ndim, axis);
}

/* `shape` without `axis`, or with it kept as size 1. */
static deft_shape_t reduced_shape(const deft_shape_t *shape, int axis, bool keep) {
    deft_shape_t r = *shape;
    r.dims[axis] = 1;
    if (!keep) {
        for (int d = axis; d + 1 < shape->ndim; d++) r.dims[d] = shape->dims[d + 1];
        r.ndim--;
    }
    return r;
}

/* data (in[0]) and index (in[1]) -> the picked result's shape and dtype. */
static int pick_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int axis;
    const deft_shape_t *data = &in[0].shape, *index = &in[1].shape;
    if (pick_axis(op, p, data->ndim, &axis) || deft_op_check_index_dtype(op, 1, in[1].dtype))
        return -1;
    /* the index has the result's shape, with or without the picked axis (as in MXNet) */
    deft_shape_t want = reduced_shape(data, axis, index->ndim == data->ndim);
    if (!deft_shape_equal(index, &want)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "input 1 (index) has shape %s, expected %s",
                             deft_shape_format(index, a, sizeof a),
                             deft_shape_format(&want, b, sizeof b));
    }
    if (data->dims[axis] == 0 && deft_shape_size(index) > 0)
        return deft_op_error(op, DEFT_ERR_INDEX, "cannot pick from axis %d of size 0", axis);
    out[0] = (deft_desc_t){reduced_shape(data, axis, p[1].i), in[0].dtype};
    *nout = 1;
    return 0;
}

/* The plan of pick over data's shape, index checked (whole numbers; clip and wrap take any). */
int deft_pick_plan(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *data,
                   const deft_tensor_t *index, deft_pick_plan_t *plan) {
    int axis;
    deft_index_check_t check;
    deft_index_check_init(&check, index, -DEFT_INDEX_UNBOUNDED, DEFT_INDEX_UNBOUNDED);
    if (pick_axis(op, p, data->ndim, &axis) || deft_check_indices(op, 1, index, &check)) return -1;
    *plan = (deft_pick_plan_t){.index = deft_tensor_data(index),
                               .index_dtype = index->dtype,
                               .size = data->dims[axis],
                               .mode = (int)p[2].i};
    split_at_axis(data, axis, &plan->outer, &plan->inner);
    return 0;
}

/* Forward (result[at] = data[source]) or backward (zeros, then grad[at] to data's source). */
static int run_pick(deft_pick_plan_t *plan, deft_device_t dev, bool backward) {
    int64_t count = plan->outer * plan->inner;
    if (count == 0) return 0;
#ifdef DEFT_HAVE_CUDA
    if (dev.type == DEFT_DEV_GPU) return deft_gpu_pick(dev.id, plan, backward);
#else
    (void)dev;
#endif
    size_t elem = deft_dtype_size(plan->dtype);
    for (int64_t at = 0; at < count; at++) {
        int64_t from = deft_pick_source(plan, at);
        if (backward)
            deft_copy_element(plan->dst, from, plan->src, at, elem);
        else
            deft_copy_element(plan->dst, at, plan->src, from, elem);
    }
    return 0;
}

static int pick_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pick_plan_t plan;
    if (deft_pick_plan(op, p, &in[0].shape, &in[1], &plan)) return -1;
    plan.src = deft_tensor_data(&in[0]), plan.dst = deft_tensor_data(&out[0]);
    plan.dtype = in[0].dtype;
    return run_pick(&plan, out[0].device, false);
}

/* _backward_pick(grad, index, data): zeros shaped like data, grad at the picked places. */
int deft_pick_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    deft_desc_t picked;
    int n;
    if (pick_infer(op, p, 2, (deft_desc_t[]){in[2], in[1]}, &n, &picked)) return -1;
    if (!deft_shape_equal(&picked.shape, &in[0].shape) || picked.dtype != in[0].dtype) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(
            op, DEFT_ERR_VALUE, "input 0 (grad) is %s %s, expected pick's %s %s",
            deft_shape_format(&in[0].shape, a, sizeof a), deft_dtype_name(in[0].dtype),
            deft_shape_format(&picked.shape, b, sizeof b), deft_dtype_name(picked.dtype));
    }
    out[0] = in[2];
    *nout = 1;
    return 0;
}

static int pick_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pick_plan_t plan;
    if (deft_pick_plan(op, p, &in[2].shape, &in[1], &plan) ||
        deft_device_zero(deft_tensor_data(&out[0]), out[0].device, deft_tensor_nbytes(&out[0])))
        return -1;
    plan.src = deft_tensor_data(&in[0]), plan.dst = deft_tensor_data(&out[0]);
    plan.dtype = out[0].dtype;
    return run_pick(&plan, out[0].device, true);
}

/* ---- gather_nd, scatter_nd and gather_nd's gradient ---- */

static const deft_param_def_t scatter_nd_params[] = {
    {"shape", DEFT_PARAM_TUPLE, NULL, "shape of the result", NULL, false}, {0}};

/* m, the rows of the indices (in[k]): the big array's leading axes they address. */
static int nd_rows(const deft_op_t *op, int k, const deft_desc_t *indices, int big_ndim,
                   const char *big, int *m) {
    if (deft_op_check_index_dtype(op, k, indices->dtype)) return -1;
    if (indices->shape.ndim < 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d (indices) has %d dimensions, expected at least 2", k,
                             indices->shape.ndim);
    int64_t rows = indices->shape.dims[0];
    if (rows < 1 || rows > big_ndim)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d (indices) addresses %lld axes (its first dimension), "
                             "expected 1 to %d (the dimensions of %s)",
                             k, (long long)rows, big_ndim, big);
    *m = (int)rows;
    return 0;
}

/* The small array's shape: the indices' columns, then the big array's unaddressed axes. */
static int nd_small_shape(const deft_op_t *op, const deft_shape_t *indices, const deft_shape_t *big,
                          int m, deft_shape_t *small) {
    int ndim = indices->ndim - 1 + big->ndim - m;
    if (ndim > DEFT_SHAPE_MAX_NDIM)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "the result would have %d dimensions, more than %d", ndim,
                             DEFT_SHAPE_MAX_NDIM);
    small->ndim = 0;
    for (int d = 1; d < indices->ndim; d++) small->dims[small->ndim++] = indices->dims[d];
    for (int d = m; d < big->ndim; d++) small->dims[small->ndim++] = big->dims[d];
    return 0;
}

static int gather_nd_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    int m = 0;
    if (nd_rows(op, 1, &in[1], in[0].shape.ndim, "data", &m) ||
        nd_small_shape(op, &in[1].shape, &in[0].shape, m, &out[0].shape))
        return -1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

/* in[0] the small array, in[1] the indices, `big` the shape scattered into. */
static int infer_scatter_into(const deft_op_t *op, const deft_desc_t *in, const deft_shape_t *big,
                              deft_desc_t *out) {
    int m = 0;
    deft_shape_t want;
    if (nd_rows(op, 1, &in[1], big->ndim, "the result", &m) ||
        nd_small_shape(op, &in[1].shape, big, m, &want))
        return -1;
    if (!deft_shape_equal(&want, &in[0].shape)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX], c[DEFT_SHAPE_STR_MAX],
            d[DEFT_SHAPE_STR_MAX];
        return deft_op_error(
            op, DEFT_ERR_VALUE,
            "input 0 (data) has shape %s, expected %s for indices of shape %s "
            "and a result of shape %s",
            deft_shape_format(&in[0].shape, a, sizeof a), deft_shape_format(&want, b, sizeof b),
            deft_shape_format(&in[1].shape, c, sizeof c), deft_shape_format(big, d, sizeof d));
    }
    size_t nbytes;
    out[0] = (deft_desc_t){*big, in[0].dtype};
    return deft_shape_nbytes(big, deft_dtype_size(in[0].dtype), &nbytes);
}

static int scatter_nd_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_tuple_t *t = &p[0].t;
    deft_shape_t big = {.ndim = t->n};
    for (int d = 0; d < t->n; d++) {
        if (t->v[d] < 0)
            return deft_op_error(op, DEFT_ERR_VALUE, "shape[%d] is %lld, expected >= 0", d,
                                 (long long)t->v[d]);
        big.dims[d] = t->v[d];
    }
    *nout = 1;
    return infer_scatter_into(op, in, &big, out);
}

/* _backward_gather_nd_like(grad, indices, like): the scatter-add into zeros shaped like `like`. */
static int scatter_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    *nout = 1;
    return infer_scatter_into(op, in, &in[2].shape, out);
}

/* The plan over the big array's shape, with the indices (input k) checked against it. */
static int plan_nd(const deft_op_t *op, const deft_shape_t *big, int k,
                   const deft_tensor_t *indices, deft_nd_plan_t *plan) {
    *plan = (deft_nd_plan_t){.index = deft_tensor_data(indices),
                             .index_dtype = indices->dtype,
                             .m = (int)indices->shape.dims[0],
                             .slice = 1,
                             .big = deft_shape_size(big)};
    plan->n = deft_shape_size(&indices->shape) / plan->m;
    for (int d = plan->m; d < big->ndim; d++) plan->slice *= big->dims[d];
    deft_index_check_t check;
    deft_index_check_init(&check, indices, 0, 0);
    check.group = plan->n > 0 ? plan->n : 1;
    for (int r = plan->m - 1; r >= 0; r--) {
        plan->dims[r] = big->dims[r];
        plan->strides[r] = r == plan->m - 1 ? plan->slice : plan->strides[r + 1] * big->dims[r + 1];
        check.lo[r] = -big->dims[r], check.hi[r] = big->dims[r] - 1;
    }
    return deft_check_indices(op, k, indices, &check);
}

/* Gather from, scatter into or scatter-add into the big array (zeroed first when `zero`). */
static int run_nd(deft_nd_plan_t *plan, deft_device_t dev, int mode, bool zero) {
    size_t elem = deft_dtype_size(plan->dtype);
    if (zero && deft_device_zero(plan->dst, dev, (size_t)plan->big * elem)) return -1;
    if (plan->n * plan->slice == 0) return 0;
#ifdef DEFT_HAVE_CUDA
    if (dev.type == DEFT_DEV_GPU) return deft_gpu_nd(dev.id, plan, mode);
#endif
    for (int64_t i = 0; i < plan->n; i++) {
        int64_t at = deft_nd_offset(plan, i);
        if (at < 0) continue; /* not after the check: an empty axis fails it */
        for (int64_t k = 0; k < plan->slice; k++) {
            int64_t big = at + k, small = i * plan->slice + k;
            if (mode == DEFT_ND_GATHER)
                deft_copy_element(plan->dst, small, plan->src, big, elem);
            else if (mode == DEFT_ND_SCATTER)
                deft_copy_element(plan->dst, big, plan->src, small, elem);
            else
                deft_store_double(plan->dst, plan->dtype, big,
                                  deft_load_double(plan->dst, plan->dtype, big) +
                                      deft_load_double(plan->src, plan->dtype, small));
        }
    }
    return 0;
}

static int gather_nd_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    deft_nd_plan_t plan;
    if (plan_nd(op, &in[0].shape, 1, &in[1], &plan)) return -1;
    plan.src = deft_tensor_data(&in[0]), plan.dst = deft_tensor_data(&out[0]);
    plan.dtype = in[0].dtype;
    return run_nd(&plan, out[0].device, DEFT_ND_GATHER, false);
}

/* scatter_nd, and with op->data set the scatter-add of gather_nd's gradient. */
static int scatter_nd_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    deft_nd_plan_t plan;
    if (plan_nd(op, &out[0].shape, 1, &in[1], &plan)) return -1;
    plan.src = deft_tensor_data(&in[0]), plan.dst = deft_tensor_data(&out[0]);
    plan.dtype = out[0].dtype;
    return run_nd(&plan, out[0].device, op->data ? DEFT_ND_SCATTER_ADD : DEFT_ND_SCATTER, true);
}

/* ---- _scatter_set_nd: data with the slices that indices address overwritten ---- */

/* MXNet's _scatter_set_nd names data's shape; deft reads it from data and checks it. */
static const deft_param_def_t scatter_set_params[] = {
    {"shape", DEFT_PARAM_TUPLE, "()", "shape of data (optional: checked when given)", NULL, false},
    {0}};

static int scatter_set_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int m = 0;
    deft_shape_t want, named = {.ndim = p[0].t.n};
    for (int d = 0; d < p[0].t.n && d < DEFT_SHAPE_MAX_NDIM; d++) named.dims[d] = p[0].t.v[d];
    if (p[0].t.n && !deft_shape_equal(&named, &in[0].shape)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "shape is %s, but input 0 (data) has shape %s",
                             deft_shape_format(&named, a, sizeof a),
                             deft_shape_format(&in[0].shape, b, sizeof b));
    }
    if (nd_rows(op, 2, &in[2], in[0].shape.ndim, "data", &m) ||
        nd_small_shape(op, &in[2].shape, &in[0].shape, m, &want))
        return -1;
    if (!deft_shape_equal(&want, &in[1].shape)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 1 (value) has shape %s, expected %s: the slices the indices "
                             "address",
                             deft_shape_format(&in[1].shape, a, sizeof a),
                             deft_shape_format(&want, b, sizeof b));
    }
    if (in[1].dtype != in[0].dtype)
        return deft_op_error(op, DEFT_ERR_TYPE, "input 1 (value) is %s, expected %s like data",
                             deft_dtype_name(in[1].dtype), deft_dtype_name(in[0].dtype));
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* Output = data, then value scattered over it; given data itself as output, in place. */
static int scatter_set_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    deft_nd_plan_t plan;
    if (plan_nd(op, &in[0].shape, 2, &in[2], &plan)) return -1;
    if (deft_copy_unless_same(&out[0], &in[0])) return -1;
    plan.src = deft_tensor_data(&in[1]), plan.dst = deft_tensor_data(&out[0]);
    plan.dtype = out[0].dtype;
    return run_nd(&plan, out[0].device, DEFT_ND_SCATTER, false);
}

/* ---- slice_like ---- */

static const deft_param_def_t slice_like_params[] = {
    {"axes", DEFT_PARAM_TUPLE, "()",
     "axes sliced to shape_like's size there (negative from the end); empty: every axis", NULL,
     false},
    {0}};

static int slice_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_shape_t *data = &in[0].shape, *like = &in[1].shape;
    const deft_tuple_t *axes = &p[0].t;
    deft_shape_t shape = *data;
    if (axes->n == 0 && data->ndim != like->ndim)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "axes is empty, so every axis is sliced, but data has %d dimensions "
                             "and shape_like %d",
                             data->ndim, like->ndim);
    for (int k = 0; k < (axes->n ? axes->n : data->ndim); k++) {
        int axis = k;
        if (axes->n && deft_op_axis(op, "axes", axes->v[k], data->ndim, &axis)) return -1;
        if (axis >= like->ndim)
            return deft_op_error(op, DEFT_ERR_INDEX,
                                 "axes[%d] is %lld, but shape_like has %d dimensions", k,
                                 (long long)axes->v[k], like->ndim);
        if (like->dims[axis] > data->dims[axis])
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "axis %d: shape_like has size %lld, more than data's %lld", axis,
                                 (long long)like->dims[axis], (long long)data->dims[axis]);
        shape.dims[axis] = like->dims[axis];
    }
    out[0] = (deft_desc_t){shape, in[0].dtype};
    *nout = 1;
    return 0;
}

/* The leading corner of data (begin 0, step 1 on every axis): a strided copy on any device. */
static int slice_like_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    if (deft_shape_size(&out[0].shape) == 0) return 0;
    int64_t own[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(&in[0].shape, own);
    return deft_copy_strided(out[0].device, &out[0].shape, deft_tensor_data(&out[0]), NULL,
                             deft_tensor_data(&in[0]), own, deft_dtype_size(in[0].dtype));
}

/* _backward_slice_like(grad, data): zeros shaped like data with grad in the leading corner. */
static int slice_like_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    const deft_shape_t *grad = &in[0].shape, *data = &in[1].shape;
    bool fits = grad->ndim == data->ndim && in[0].dtype == in[1].dtype;
    for (int d = 0; fits && d < grad->ndim; d++) fits = grad->dims[d] <= data->dims[d];
    if (!fits) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (grad) is %s %s, expected a corner of data's %s %s",
                             deft_shape_format(grad, a, sizeof a), deft_dtype_name(in[0].dtype),
                             deft_shape_format(data, b, sizeof b), deft_dtype_name(in[1].dtype));
    }
    out[0] = in[1];
    *nout = 1;
    return 0;
}

static int slice_like_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                       const deft_tensor_t *in, int nout,
                                       const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    if (deft_device_zero(deft_tensor_data(&out[0]), out[0].device, deft_tensor_nbytes(&out[0])))
        return -1;
    if (deft_shape_size(&in[0].shape) == 0) return 0;
    int64_t own[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(&out[0].shape, own);
    return deft_copy_strided(out[0].device, &in[0].shape, deft_tensor_data(&out[0]), own,
                             deft_tensor_data(&in[0]), NULL, deft_dtype_size(in[0].dtype));
}

/* ---- gradients ---- */

#define PICK_ATTRS(b)                                                                              \
    GRAD_PARAMS("axis", g_attr(b, "axis", "-1"), "keepdims", g_attr(b, "keepdims", "false"),       \
                "mode", g_attr(b, "mode", "clip"))

static int grad_pick(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 1), b->input(b, 0)};
    in_grads[0] = b->apply(b, "_backward_pick", 3, in, PICK_ATTRS(b), 0);
    return 0; /* the index is not differentiable */
}

/* _backward_pick is linear in grad: its gradient picks the head gradient again. */
static int grad_pick_backward(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                              deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "pick", b->out_grad(b, 0), b->input(b, 1), PICK_ATTRS(b));
    return 0;
}

static int grad_gather_nd(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                          deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 1), b->input(b, 0)};
    in_grads[0] = b->apply(b, "_backward_gather_nd_like", 3, in, GRAD_NONE, 0);
    return 0;
}

/* scatter_nd and the scatter-adds: the gradient gathers from the same places. */
static int grad_by_gather_nd(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                             deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "gather_nd", b->out_grad(b, 0), b->input(b, 1), GRAD_NONE);
    return 0;
}

static int grad_slice_like(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                           deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_backward_slice_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0; /* shape_like only lends its shape */
}

static int grad_slice_like_backward(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                                    deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "slice_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

static const char *const pick_inputs[] = {"data", "index", NULL};
static const char *const pick_backward_inputs[] = {"grad", "index", "data", NULL};
static const char *const nd_inputs[] = {"data", "indices", NULL};
static const char *const nd_like_inputs[] = {"grad", "indices", "like", NULL};
static const char *const scatter_set_inputs[] = {"data", "value", "indices", NULL};
static const char *const slice_like_inputs[] = {"data", "shape_like", NULL};
static const char *const slice_like_backward_inputs[] = {"grad", "data", NULL};

#define PICK_OP(name_)                                                                             \
    {                                                                                              \
        .name = name_,                                                                             \
        .description = "Picks one element along an axis per index: out[i, k] = "                   \
                       "data[i, index[i, k], k].",                                                 \
        .input_names = pick_inputs, .min_inputs = 2, .max_inputs = 2, .params = deft_pick_params,  \
        .infer = pick_infer, .forward = pick_forward, .forward_gpu = DEFT_GPU(pick_forward),       \
        .inplace_input = -1, .gradient = grad_pick                                                 \
    }

static const deft_op_t gather_ops[] = {
    PICK_OP("pick"),
    {.name = "_backward_pick",
     .description = "Gradient of pick: zeros shaped like data, with grad at the picked places.",
     .input_names = pick_backward_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = deft_pick_params,
     .infer = deft_pick_backward_infer,
     .forward = pick_backward_forward,
     .forward_gpu = DEFT_GPU(pick_backward_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 2,
     .gradient = grad_pick_backward},
    {.name = "gather_nd",
     .description = "Gathers the slices of data that the columns of indices (shape (M, ...)) "
                    "address by its first M axes.",
     .input_names = nd_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = gather_nd_infer,
     .forward = gather_nd_forward,
     .forward_gpu = DEFT_GPU(gather_nd_forward),
     .inplace_input = -1,
     .gradient = grad_gather_nd},
    {.name = "scatter_nd",
     .description = "Scatters data into zeros of the given shape, at the places gather_nd with "
                    "the same indices would read (a duplicate index keeps one of its values).",
     .input_names = nd_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = scatter_nd_params,
     .infer = scatter_nd_infer,
     .forward = scatter_nd_forward,
     .forward_gpu = DEFT_GPU(scatter_nd_forward),
     .inplace_input = -1,
     .gradient = grad_by_gather_nd},
    {.name = "_scatter_set_nd",
     .description = "data with the slices gather_nd(data, indices) would read replaced by value "
                    "(NumPy's data[indices] = value; a duplicate index keeps one of its values); "
                    "in place when the output given is data itself.",
     .input_names = scatter_set_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = scatter_set_params,
     .infer = scatter_set_infer,
     .forward = scatter_set_forward,
     .forward_gpu = DEFT_GPU(scatter_set_forward),
     .inplace_input = 0},
    {.name = "_backward_gather_nd",
     .description = "Gradient of gather_nd: data added into zeros of the given shape at the "
                    "indices (duplicates accumulate).",
     .input_names = nd_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = scatter_nd_params,
     .infer = scatter_nd_infer,
     .forward = scatter_nd_forward,
     .forward_gpu = DEFT_GPU(scatter_nd_forward),
     .inplace_input = -1,
     .data = "add",
     .gradient = grad_by_gather_nd},
    {.name = "_backward_gather_nd_like",
     .description = "_backward_gather_nd shaped like its third input: the gradient gather_nd "
                    "builds, where the shape is known only when the graph runs.",
     .input_names = nd_like_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .infer = scatter_like_infer,
     .forward = scatter_nd_forward,
     .forward_gpu = DEFT_GPU(scatter_nd_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 2,
     .data = "add",
     .gradient = grad_by_gather_nd},
    {.name = "slice_like",
     .description = "Slices data to the shape of shape_like on the given axes (all when empty), "
                    "from the start of each.",
     .input_names = slice_like_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = slice_like_params,
     .infer = slice_like_infer,
     .forward = slice_like_forward,
     .forward_gpu = DEFT_GPU(slice_like_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 1,
     .gradient = grad_slice_like},
    {.name = "_backward_slice_like",
     .description = "Gradient of slice_like: zeros shaped like data, with grad in its leading "
                    "corner.",
     .input_names = slice_like_backward_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = slice_like_backward_infer,
     .forward = slice_like_backward_forward,
     .forward_gpu = DEFT_GPU(slice_like_backward_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 1,
     .gradient = grad_slice_like_backward},
};

DEFT_OP_FAMILY(deft_family_gather, gather_ops);
