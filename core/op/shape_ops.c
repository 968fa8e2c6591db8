/*
 * Shape operators: Flatten, transpose, expand_dims, squeeze, slice,
 * slice_axis, Concat, stack, split and broadcast_to. Each infers its output
 * shape and moves the data with one strided copy (core/op/strided.h).
 */
#include <stdio.h>
#include <string.h>

#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/strided.h"

static const char *const variadic_input[] = {"data", NULL};
static const char *const grad_like[] = {"grad", "like", NULL};

static int too_many_dims(const deft_op_t *op, int ndim) {
    return deft_op_error(op, DEFT_ERR_VALUE, "the result would have %d dimensions, more than %d",
                         ndim, DEFT_SHAPE_MAX_NDIM);
}

/* Same elements, new shape: a plain copy. */
int deft_forward_copy(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    if (deft_tensor_data(&out[0]) == deft_tensor_data(&in[0])) return 0;
    return deft_device_copy(deft_tensor_data(&out[0]), out[0].device, deft_tensor_data(&in[0]),
                            in[0].device, deft_tensor_nbytes(&in[0]));
}

/* cpu(1) is an error, not a silent cpu(0) (a graph's "__device__" placement
 * of cpu(n) is the executor's business, not this parameter's). */
int deft_output_device_param0(const deft_op_t *op, const deft_param_value_t *p,
                              deft_device_t *out) {
    char what[96];
    snprintf(what, sizeof what, "the device of '%s'", op->name);
    return deft_device_check((int)p[0].t.v[0], (int)p[0].t.v[1], what, out);
}

static int flatten_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (in[0].shape.ndim == 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 is a scalar, expected >= 1-D");
    int64_t rest = 1;
    for (int d = 1; d < in[0].shape.ndim; d++) rest *= in[0].shape.dims[d];
    out[0].shape = (deft_shape_t){2, {in[0].shape.dims[0], rest}};
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

/* ---- transpose ---- */

static const deft_param_def_t transpose_params[] = {
    {"axes", DEFT_PARAM_TUPLE, "()", "permutation of the axes; () reverses them", NULL, false},
    {0}};

static int transpose_axes(const deft_op_t *op, const deft_param_value_t *p, int ndim, int *perm) {
    const deft_tuple_t *t = &p[0].t;
    if (t->n == 0) {
        for (int d = 0; d < ndim; d++) perm[d] = ndim - 1 - d;
        return 0;
    }
    if (t->n != ndim)
        return deft_op_error(op, DEFT_ERR_VALUE, "axes has %d entries, expected %d (one per axis)",
                             t->n, ndim);
    bool seen[DEFT_SHAPE_MAX_NDIM] = {false};
    for (int d = 0; d < ndim; d++) {
        if (deft_op_axis(op, "axes entry", t->v[d], ndim, &perm[d])) return -1;
        if (seen[perm[d]])
            return deft_op_error(op, DEFT_ERR_VALUE, "axes repeats axis %d", perm[d]);
        seen[perm[d]] = true;
    }
    return 0;
}

static int transpose_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int perm[DEFT_SHAPE_MAX_NDIM];
    if (transpose_axes(op, p, in[0].shape.ndim, perm)) return -1;
    out[0] = in[0];
    for (int d = 0; d < in[0].shape.ndim; d++) out[0].shape.dims[d] = in[0].shape.dims[perm[d]];
    *nout = 1;
    return 0;
}

static int transpose_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int perm[DEFT_SHAPE_MAX_NDIM];
    int64_t own[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM];
    if (transpose_axes(op, p, in[0].shape.ndim, perm)) return -1;
    deft_contiguous_strides(&in[0].shape, own);
    for (int d = 0; d < in[0].shape.ndim; d++) strides[d] = own[perm[d]];
    return deft_copy_strided(out[0].device, &out[0].shape, deft_tensor_data(&out[0]), NULL,
                             deft_tensor_data(&in[0]), strides, deft_dtype_size(in[0].dtype));
}

/* ---- expand_dims, squeeze ---- */

static const deft_param_def_t expand_params[] = {
    {"axis", DEFT_PARAM_INT, NULL, "position of the new axis, in [-ndim-1, ndim]", NULL, false},
    {0}};

static int expand_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int ndim = in[0].shape.ndim, axis;
    if (ndim == DEFT_SHAPE_MAX_NDIM) return too_many_dims(op, ndim + 1);
    if (deft_op_axis(op, "axis", p[0].i, ndim + 1, &axis)) return -1;
    out[0] = in[0];
    out[0].shape.ndim = ndim + 1;
    for (int d = ndim; d > axis; d--) out[0].shape.dims[d] = in[0].shape.dims[d - 1];
    out[0].shape.dims[axis] = 1;
    *nout = 1;
    return 0;
}

static const deft_param_def_t squeeze_params[] = {
    {"axis", DEFT_PARAM_TUPLE, "None", "axes of size 1 to remove; None removes all", NULL, true},
    {0}};

static int squeeze_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_shape_t *src = &in[0].shape;
    bool drop[DEFT_SHAPE_MAX_NDIM] = {false};
    for (int d = 0; p[0].none && d < src->ndim; d++) drop[d] = src->dims[d] == 1;
    for (int k = 0; !p[0].none && k < p[0].t.n; k++) {
        int axis;
        if (deft_op_axis(op, "axis", p[0].t.v[k], src->ndim, &axis)) return -1;
        if (src->dims[axis] != 1)
            return deft_op_error(op, DEFT_ERR_VALUE, "axis %d has size %lld, expected 1", axis,
                                 (long long)src->dims[axis]);
        drop[axis] = true;
    }
    out[0] = in[0];
    out[0].shape.ndim = 0;
    for (int d = 0; d < src->ndim; d++)
        if (!drop[d]) out[0].shape.dims[out[0].shape.ndim++] = src->dims[d];
    *nout = 1;
    return 0;
}

/* ---- slice, slice_axis ---- */

/* Python's slice.indices: clamp begin/end for `step` over a dimension of size n. */
static int64_t slice_length(int64_t n, int64_t *begin, int64_t end, int64_t step, bool has_begin,
                            bool has_end) {
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    int64_t b = has_begin ? *begin : (step > 0 ? 0 : n - 1);
    int64_t e = has_end ? end : (step > 0 ? n : -n - 1);
    if (has_begin) b = b < 0 ? (b + n < lo ? lo : b + n) : (b > hi ? hi : b);
    if (has_end)
        e = e < 0 ? (e + n < lo ? lo : e + n) : (e > hi ? hi : e);
    else if (step < 0)
        e = -1;
    *begin = b;
    /* Unsigned: any step, INT64_MIN and INT64_MAX included, without overflow. */
    int64_t span = step > 0 ? e - b : b - e; /* within [-n-1, n+1] */
    uint64_t magnitude = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
    return span > 0 ? (int64_t)(((uint64_t)span - 1) / magnitude + 1) : 0;
}

typedef struct slice_plan {
    int64_t begin[DEFT_SHAPE_MAX_NDIM], step[DEFT_SHAPE_MAX_NDIM];
    deft_shape_t shape;
} slice_plan_t;

static const deft_param_def_t slice_params[] = {
    {"begin", DEFT_PARAM_TUPLE, NULL, "first index per axis (None: from the start)", NULL, true},
    {"end", DEFT_PARAM_TUPLE, NULL, "end index per axis, excluded (None: to the end)", NULL, true},
    {"step", DEFT_PARAM_TUPLE, "()", "step per axis (None or missing: 1)", NULL, true},
    {0}};

static int plan_slice(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *src,
                      slice_plan_t *plan) {
    const deft_tuple_t *b = &p[0].t, *e = &p[1].t, *s = &p[2].t;
    if (b->n > src->ndim || e->n != b->n || s->n > b->n)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "begin, end and step have %d, %d and %d entries; expected begin and "
                             "end of equal length <= %d and step no longer",
                             b->n, e->n, s->n, src->ndim);
    plan->shape = *src;
    for (int d = 0; d < src->ndim; d++) {
        int64_t step = d < s->n && s->v[d] != DEFT_TUPLE_NONE ? s->v[d] : 1;
        if (step == 0) return deft_op_error(op, DEFT_ERR_VALUE, "step[%d] is 0", d);
        bool in_range = d < b->n;
        int64_t begin = in_range ? b->v[d] : 0;
        bool has_begin = in_range && begin != DEFT_TUPLE_NONE;
        bool has_end = in_range && e->v[d] != DEFT_TUPLE_NONE;
        plan->shape.dims[d] =
            slice_length(src->dims[d], &begin, has_end ? e->v[d] : 0, step, has_begin, has_end);
        plan->begin[d] = begin;
        /* Taking at most one element, the step moves nowhere: 1 keeps the
         * strides computed from it (size * step) from overflowing. */
        plan->step[d] = plan->shape.dims[d] > 1 ? step : 1;
    }
    return 0;
}

static int slice_copy(const slice_plan_t *plan, const deft_tensor_t *in, const deft_tensor_t *out) {
    int64_t own[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM], offset = 0;
    deft_contiguous_strides(&in->shape, own);
    for (int d = 0; d < in->shape.ndim; d++) {
        strides[d] = own[d] * plan->step[d];
        if (plan->shape.dims[d] > 0) offset += plan->begin[d] * own[d];
    }
    size_t elem = deft_dtype_size(in->dtype);
    if (deft_shape_size(&plan->shape) == 0) return 0;
    return deft_copy_strided(out->device, &plan->shape, deft_tensor_data(out), NULL,
                             (char *)deft_tensor_data(in) + offset * (int64_t)elem, strides, elem);
}

static int slice_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    slice_plan_t plan;
    if (plan_slice(op, p, &in[0].shape, &plan)) return -1;
    out[0].shape = plan.shape;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static int slice_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    slice_plan_t plan;
    if (plan_slice(op, p, &in[0].shape, &plan)) return -1;
    return slice_copy(&plan, &in[0], &out[0]);
}

/* ---- _slice_assign: the region a slice reads, overwritten ---- */

static const char *const slice_assign_inputs[] = {"data", "value", NULL};

/* The value (input 1) broadcasts to the region: NumPy rules, right-aligned. */
static int slice_assign_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    slice_plan_t plan;
    if (plan_slice(op, p, &in[0].shape, &plan)) return -1;
    const deft_shape_t *value = &in[1].shape;
    int lead = plan.shape.ndim - value->ndim;
    bool fits = lead >= 0;
    for (int d = 0; fits && d < value->ndim; d++)
        fits = value->dims[d] == 1 || value->dims[d] == plan.shape.dims[lead + d];
    if (!fits) {
        char region[DEFT_SHAPE_STR_MAX], value_s[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "a value of shape %s does not fit a region of %s",
                             deft_shape_format(value, value_s, sizeof value_s),
                             deft_shape_format(&plan.shape, region, sizeof region));
    }
    if (in[1].dtype != in[0].dtype)
        return deft_op_error(op, DEFT_ERR_TYPE, "value is %s, expected %s like data",
                             deft_dtype_name(in[1].dtype), deft_dtype_name(in[0].dtype));
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* Output = data with the region replaced; given data itself as output, in place. */
static int slice_assign_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    slice_plan_t plan;
    if (plan_slice(op, p, &in[0].shape, &plan)) return -1;
    size_t elem = deft_dtype_size(in[0].dtype);
    char *dst = deft_tensor_data(&out[0]);
    if (deft_copy_unless_same(&out[0], &in[0])) return -1;
    if (deft_shape_size(&plan.shape) == 0) return 0;
    int64_t own[DEFT_SHAPE_MAX_NDIM], dst_strides[DEFT_SHAPE_MAX_NDIM];
    int64_t value_own[DEFT_SHAPE_MAX_NDIM], src_strides[DEFT_SHAPE_MAX_NDIM], offset = 0;
    deft_contiguous_strides(&in[0].shape, own);
    deft_contiguous_strides(&in[1].shape, value_own);
    int lead = plan.shape.ndim - in[1].shape.ndim;
    for (int d = 0; d < plan.shape.ndim; d++) {
        dst_strides[d] = own[d] * plan.step[d];
        offset += plan.begin[d] * own[d];
        bool broadcast = d < lead || in[1].shape.dims[d - lead] == 1;
        src_strides[d] = broadcast ? 0 : value_own[d - lead];
    }
    return deft_copy_strided(out[0].device, &plan.shape, dst + offset * (int64_t)elem, dst_strides,
                             deft_tensor_data(&in[1]), src_strides, elem);
}

static const deft_param_def_t slice_axis_params[] = {
    {"axis", DEFT_PARAM_INT, NULL, "axis to slice", NULL, false},
    {"begin", DEFT_PARAM_INT, NULL, "first index (negative counts from the end)", NULL, false},
    {"end", DEFT_PARAM_INT, NULL, "end index, excluded (None: to the end)", NULL, true},
    {0}};

static int plan_slice_axis(const deft_op_t *op, const deft_param_value_t *p,
                           const deft_shape_t *src, slice_plan_t *plan) {
    int axis;
    if (deft_op_axis(op, "axis", p[0].i, src->ndim, &axis)) return -1;
    plan->shape = *src;
    for (int d = 0; d < src->ndim; d++) plan->begin[d] = 0, plan->step[d] = 1;
    int64_t begin = p[1].i;
    plan->shape.dims[axis] = slice_length(src->dims[axis], &begin, p[2].i, 1, true, !p[2].none);
    plan->begin[axis] = begin;
    return 0;
}

static int slice_axis_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    slice_plan_t plan;
    if (plan_slice_axis(op, p, &in[0].shape, &plan)) return -1;
    out[0].shape = plan.shape;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static int slice_axis_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    slice_plan_t plan;
    if (plan_slice_axis(op, p, &in[0].shape, &plan)) return -1;
    return slice_copy(&plan, &in[0], &out[0]);
}

/* ---- Concat, stack, split ---- */

static const deft_param_def_t concat_params[] = {
    {"dim", DEFT_PARAM_INT, "1", "axis to join along", NULL, false}, DEFT_NUM_ARGS_PARAM, {0}};
static const deft_param_def_t stack_params[] = {
    {"axis", DEFT_PARAM_INT, "0", "position of the new axis", NULL, false},
    DEFT_NUM_ARGS_PARAM,
    {0}};

static int same_shape_except(const deft_op_t *op, int nin, const deft_desc_t *in, int skip) {
    for (int i = 1; i < nin; i++) {
        bool ok = in[i].shape.ndim == in[0].shape.ndim;
        for (int d = 0; ok && d < in[0].shape.ndim; d++)
            ok = d == skip || in[i].shape.dims[d] == in[0].shape.dims[d];
        if (!ok) {
            char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input %d has shape %s, incompatible with input 0 of shape %s%s",
                                 i, deft_shape_format(&in[i].shape, b, sizeof b),
                                 deft_shape_format(&in[0].shape, a, sizeof a),
                                 skip >= 0 ? " (they may differ only along the joined axis)" : "");
        }
    }
    return 0;
}

static int concat_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int axis;
    if (deft_op_check_num_args(op, &p[1], nin) || deft_op_check_same_dtype(op, nin, in)) return -1;
    if (deft_op_axis(op, "dim", p[0].i, in[0].shape.ndim, &axis) ||
        same_shape_except(op, nin, in, axis))
        return -1;
    out[0] = in[0];
    for (int i = 1; i < nin; i++) out[0].shape.dims[axis] += in[i].shape.dims[axis];
    *nout = 1;
    return 0;
}

/* Copy each input into its place along `axis` of the output (axis < ndim), or of a new axis. */
static int join(const deft_tensor_t *in, int nin, const deft_tensor_t *out, int axis,
                bool new_axis) {
    int64_t out_strides[DEFT_SHAPE_MAX_NDIM], dst_strides[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(&out->shape, out_strides);
    size_t elem = deft_dtype_size(out->dtype);
    int64_t position = 0;
    for (int i = 0; i < nin; i++) {
        const deft_shape_t *shape = &in[i].shape;
        for (int d = 0; d < shape->ndim; d++)
            dst_strides[d] = out_strides[new_axis && d >= axis ? d + 1 : d];
        int64_t at = position;
        position += new_axis ? 1 : shape->dims[axis];
        if (deft_shape_size(shape) == 0) continue; /* its data may be NULL: no offsets from it */
        char *dst = (char *)deft_tensor_data(out) + at * out_strides[axis] * (int64_t)elem;
        if (deft_copy_strided(out->device, shape, dst, dst_strides, deft_tensor_data(&in[i]), NULL,
                              elem))
            return -1;
    }
    return 0;
}

static int concat_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    int axis;
    if (deft_op_axis(op, "dim", p[0].i, in[0].shape.ndim, &axis)) return -1;
    return join(in, nin, &out[0], axis, false);
}

static int stack_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int axis, ndim = in[0].shape.ndim;
    if (deft_op_check_num_args(op, &p[1], nin) || deft_op_check_same_dtype(op, nin, in) ||
        same_shape_except(op, nin, in, -1))
        return -1;
    if (ndim == DEFT_SHAPE_MAX_NDIM) return too_many_dims(op, ndim + 1);
    if (deft_op_axis(op, "axis", p[0].i, ndim + 1, &axis)) return -1;
    out[0].dtype = in[0].dtype;
    out[0].shape.ndim = ndim + 1;
    for (int d = 0, s = 0; d <= ndim; d++)
        out[0].shape.dims[d] = d == axis ? nin : in[0].shape.dims[s++];
    *nout = 1;
    return 0;
}

static int stack_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    int axis;
    if (deft_op_axis(op, "axis", p[0].i, in[0].shape.ndim + 1, &axis)) return -1;
    return join(in, nin, &out[0], axis, true);
}

static const deft_param_def_t split_params[] = {
    {"num_outputs", DEFT_PARAM_INT, NULL, "number of equal parts", NULL, false},
    {"axis", DEFT_PARAM_INT, "1", "axis to split", NULL, false},
    {"squeeze_axis", DEFT_PARAM_BOOL, "false", "remove the split axis (parts must have size 1)",
     NULL, false},
    {0}};

static int split_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int64_t parts = p[0].i;
    int axis;
    if (parts < 1 || parts > DEFT_OP_MAX_OUTPUTS)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_outputs is %lld, expected 1 to %d",
                             (long long)parts, DEFT_OP_MAX_OUTPUTS);
    if (deft_op_axis(op, "axis", p[1].i, in[0].shape.ndim, &axis)) return -1;
    int64_t size = in[0].shape.dims[axis];
    if (size % parts != 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "axis %d has size %lld, not divisible by %lld",
                             axis, (long long)size, (long long)parts);
    if (p[2].i && size / parts != 1)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "squeeze_axis needs parts of size 1, but they have size %lld",
                             (long long)(size / parts));
    for (int64_t k = 0; k < parts; k++) {
        out[k] = in[0];
        out[k].shape.dims[axis] = size / parts;
        if (p[2].i) {
            for (int d = axis; d + 1 < in[0].shape.ndim; d++)
                out[k].shape.dims[d] = in[0].shape.dims[d + 1];
            out[k].shape.ndim--;
        }
    }
    *nout = (int)parts;
    return 0;
}

static int split_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return p[0].i >= 1 && p[0].i <= DEFT_OP_MAX_OUTPUTS ? (int)p[0].i : 1;
}

static int split_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    int axis;
    if (deft_op_axis(op, "axis", p[1].i, in[0].shape.ndim, &axis)) return -1;
    int64_t own[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(&in[0].shape, own);
    deft_shape_t part = in[0].shape;
    part.dims[axis] /= nout;
    size_t elem = deft_dtype_size(in[0].dtype);
    for (int k = 0; k < nout && deft_shape_size(&part) > 0; k++) {
        const char *src = (const char *)deft_tensor_data(&in[0]) +
                          (int64_t)k * part.dims[axis] * own[axis] * (int64_t)elem;
        if (deft_copy_strided(out[k].device, &part, deft_tensor_data(&out[k]), NULL, src, own,
                              elem))
            return -1;
    }
    return 0;
}

/* ---- broadcast_to ---- */

static const deft_param_def_t broadcast_to_params[] = {
    {"shape", DEFT_PARAM_TUPLE, NULL, "target shape; 0 keeps the input's dimension", NULL, false},
    {0}};

static int broadcast_to_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_tuple_t *t = &p[0].t;
    const deft_shape_t *src = &in[0].shape;
    char s[DEFT_SHAPE_STR_MAX];
    if (t->n < src->ndim)
        return deft_op_error(op, DEFT_ERR_VALUE, "shape has %d dimensions, fewer than the input %s",
                             t->n, deft_shape_format(src, s, sizeof s));
    out[0].dtype = in[0].dtype;
    out[0].shape.ndim = t->n;
    for (int d = 0; d < t->n; d++) {
        int sd = d - (t->n - src->ndim);
        int64_t have = sd >= 0 ? src->dims[sd] : 1, want = t->v[d] == 0 ? have : t->v[d];
        if (want < 0 || (have != 1 && have != want))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "cannot broadcast %s to shape[%d] = %lld (input size %lld there)",
                                 deft_shape_format(src, s, sizeof s), d, (long long)t->v[d],
                                 (long long)have);
        out[0].shape.dims[d] = want;
    }
    *nout = 1;
    return 0;
}

int deft_forward_broadcast_input(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
#ifdef DEFT_HAVE_CUDA
    if (out[0].device.type == DEFT_DEV_GPU) {
        const deft_tensor_t *x = &in[0];
        return deft_gpu_elementwise(DEFT_GPU_FN_COPY, &out[0], 1, &x, NULL);
    }
#endif
    deft_strided_t it;
    deft_strided_init(&it, &out[0].shape, 2);
    deft_strided_set_dense(&it, 0, &out[0]);
    deft_strided_set_broadcast(&it, 1, &in[0]);
    deft_strided_run(&it, deft_copy_loop(deft_dtype_size(in[0].dtype)), NULL);
    return 0;
}

/* ---- backward operators ---- */

/* zeros shaped like input 1, with input 0 (the gradient) written into the slice */
static int slice_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    slice_plan_t plan;
    if ((op->data ? plan_slice_axis(op, p, &in[1].shape, &plan)
                  : plan_slice(op, p, &in[1].shape, &plan)))
        return -1;
    if (!deft_shape_equal(&plan.shape, &in[0].shape) || in[0].dtype != in[1].dtype) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 has shape %s, expected the slice's %s",
                             deft_shape_format(&in[0].shape, a, sizeof a),
                             deft_shape_format(&plan.shape, b, sizeof b));
    }
    out[0] = in[1];
    *nout = 1;
    return 0;
}

static int slice_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    slice_plan_t plan;
    if ((op->data ? plan_slice_axis(op, p, &in[1].shape, &plan)
                  : plan_slice(op, p, &in[1].shape, &plan)))
        return -1;
    size_t elem = deft_dtype_size(out[0].dtype);
    if (deft_device_zero(deft_tensor_data(&out[0]), out[0].device, deft_tensor_nbytes(&out[0])))
        return -1;
    if (deft_shape_size(&plan.shape) == 0) return 0;
    int64_t own[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM], offset = 0;
    deft_contiguous_strides(&in[1].shape, own);
    for (int d = 0; d < in[1].shape.ndim; d++) {
        strides[d] = own[d] * plan.step[d];
        offset += plan.begin[d] * own[d];
    }
    return deft_copy_strided(out[0].device, &plan.shape,
                             (char *)deft_tensor_data(&out[0]) + offset * (int64_t)elem, strides,
                             deft_tensor_data(&in[0]), NULL, elem);
}

/* _split_like(g, x0, x1, ...): g cut along `dim` into pieces shaped like the x's. */
static const deft_param_def_t split_like_params[] = {
    {"dim", DEFT_PARAM_INT, "1", "axis to cut along", NULL, false}, {0}};

static int split_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int axis;
    if (nin < 2)
        return deft_op_error(op, DEFT_ERR_VALUE, "needs the gradient and at least one input");
    if (deft_op_axis(op, "dim", p[0].i, in[0].shape.ndim, &axis) ||
        same_shape_except(op, nin, in, axis))
        return -1;
    int64_t total = 0;
    for (int i = 1; i < nin; i++) total += in[i].shape.dims[axis];
    if (total != in[0].shape.dims[axis])
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "the pieces add up to %lld along axis %d, but the "
                             "gradient has %lld",
                             (long long)total, axis, (long long)in[0].shape.dims[axis]);
    for (int i = 1; i < nin; i++) out[i - 1] = (deft_desc_t){in[i].shape, in[0].dtype};
    *nout = nin - 1;
    return 0;
}

static int split_like_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p;
    return num_inputs > 1 ? num_inputs - 1 : 1;
}

static int split_like_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    int axis;
    if (deft_op_axis(op, "dim", p[0].i, in[0].shape.ndim, &axis)) return -1;
    int64_t own[DEFT_SHAPE_MAX_NDIM], position = 0;
    deft_contiguous_strides(&in[0].shape, own);
    size_t elem = deft_dtype_size(in[0].dtype);
    for (int k = 0; k < nout; k++) {
        int64_t at = position;
        position += out[k].shape.dims[axis];
        if (deft_shape_size(&out[k].shape) == 0) continue; /* no offsets from a NULL pointer */
        const char *src = (const char *)deft_tensor_data(&in[0]) + at * own[axis] * (int64_t)elem;
        if (deft_copy_strided(out[k].device, &out[k].shape, deft_tensor_data(&out[k]), NULL, src,
                              own, elem))
            return -1;
    }
    return 0;
}

/* ---- gradients ---- */

int deft_gradient_reshape_back(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                               deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "reshape_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

static int grad_transpose(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                          deft_gref_t *in_grads) {
    (void)nin;
    const deft_tuple_t *t = &p[0].t;
    char axes[8 * 24] = "()"; /* reversing is its own inverse */
    if (t->n > 0) {
        int64_t inverse[DEFT_SHAPE_MAX_NDIM];
        for (int d = 0; d < t->n; d++) inverse[(t->v[d] + t->n) % t->n] = d;
        size_t used = (size_t)snprintf(axes, sizeof axes, "(");
        for (int d = 0; d < t->n; d++)
            used +=
                (size_t)snprintf(axes + used, sizeof axes - used, "%lld,", (long long)inverse[d]);
        snprintf(axes + used, sizeof axes - used, ")");
    }
    in_grads[0] = g_op1(b, "transpose", b->out_grad(b, 0), GRAD_PARAMS("axes", axes));
    return 0;
}

static int grad_slice(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_backward_slice", b->out_grad(b, 0), b->input(b, 0),
                        GRAD_PARAMS("begin", g_attr(b, "begin", "()"), "end",
                                    g_attr(b, "end", "()"), "step", g_attr(b, "step", "()")));
    return 0;
}

static int grad_slice_axis(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                           deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_backward_slice_axis", b->out_grad(b, 0), b->input(b, 0),
                        GRAD_PARAMS("axis", g_attr(b, "axis", "0"), "begin",
                                    g_attr(b, "begin", "0"), "end", g_attr(b, "end", "None")));
    return 0;
}

static int grad_concat(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)p;
    deft_gref_t in[DEFT_OP_MAX_INPUTS + 1];
    in[0] = b->out_grad(b, 0);
    for (int i = 0; i < nin && i < DEFT_OP_MAX_INPUTS; i++) in[i + 1] = b->input(b, i);
    deft_gref_t pieces =
        b->apply(b, "_split_like", nin + 1, in, GRAD_PARAMS("dim", g_attr(b, "dim", "1")), 0);
    for (int i = 0; i < nin; i++) in_grads[i] = (deft_gref_t){pieces.node, i};
    return 0;
}

static int grad_stack(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    (void)p;
    char count[16];
    snprintf(count, sizeof count, "%d", nin);
    deft_gref_t pieces = g_op1(
        b, "split", b->out_grad(b, 0),
        GRAD_PARAMS("num_outputs", count, "axis", g_attr(b, "axis", "0"), "squeeze_axis", "true"));
    for (int i = 0; i < nin; i++) in_grads[i] = (deft_gref_t){pieces.node, i};
    return 0;
}

static int grad_split(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    (void)nin;
    deft_gref_t parts[DEFT_OP_MAX_OUTPUTS];
    const char *axis = g_attr(b, "axis", "1");
    for (int k = 0; k < p[0].i && k < DEFT_OP_MAX_OUTPUTS; k++) {
        parts[k] = b->out_grad(b, k);
        if (p[2].i) parts[k] = g_op1(b, "expand_dims", parts[k], GRAD_PARAMS("axis", axis));
    }
    in_grads[0] = b->apply(b, "Concat", (int)p[0].i, parts, GRAD_PARAMS("dim", axis), 0);
    return 0;
}

static int grad_broadcast_to(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                             deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_reduce_to_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

#define SHAPE_OP(name_, doc, params_, infer_, forward_, inplace, grad)                             \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = deft_op_data_input, .min_inputs = 1,     \
        .max_inputs = 1, .params = params_, .infer = infer_, .forward = forward_,                  \
        .forward_gpu = DEFT_GPU(forward_), .inplace_input = inplace, .gradient = grad              \
    }
#define JOIN_OP(name_, doc, params_, infer_, forward_, grad)                                       \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = variadic_input, .min_inputs = 1,         \
        .max_inputs = DEFT_OP_MAX_INPUTS, .params = params_, .infer = infer_, .forward = forward_, \
        .forward_gpu = DEFT_GPU(forward_), .inplace_input = -1, .gradient = grad                   \
    }

static const deft_op_t shape_ops[] = {
    SHAPE_OP("BlockGrad",
             "The input unchanged, with no gradient flowing back through it "
             "(stop_gradient, detach).",
             NULL, deft_infer_same, deft_forward_copy, 0, deft_gradient_zero),
    SHAPE_OP("Flatten", "Collapses all axes but the first: (n, ...) to (n, rest).", NULL,
             flatten_infer, deft_forward_copy, 0, deft_gradient_reshape_back),
    SHAPE_OP("transpose", "Permutes the axes (reverses them when axes is empty).", transpose_params,
             transpose_infer, transpose_forward, -1, grad_transpose),
    SHAPE_OP("expand_dims", "Inserts an axis of size 1.", expand_params, expand_infer,
             deft_forward_copy, 0, deft_gradient_reshape_back),
    SHAPE_OP("squeeze", "Removes axes of size 1.", squeeze_params, squeeze_infer, deft_forward_copy,
             0, deft_gradient_reshape_back),
    SHAPE_OP("slice", "Python-style slicing with begin, end and step per axis.", slice_params,
             slice_infer, slice_forward, -1, grad_slice),
    {.name = "_slice_assign",
     .description = "data with the region slice(begin, end, step) would read replaced by value "
                    "(broadcast); in place when the output given is data itself.",
     .input_names = slice_assign_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = slice_params,
     .infer = slice_assign_infer,
     .forward = slice_assign_forward,
     .forward_gpu = DEFT_GPU(slice_assign_forward),
     .inplace_input = 0},
    SHAPE_OP("slice_axis", "Slices one axis from begin to end.", slice_axis_params,
             slice_axis_infer, slice_axis_forward, -1, grad_slice_axis),
    JOIN_OP("Concat", "Joins arrays along an existing axis.", concat_params, concat_infer,
            concat_forward, grad_concat),
    JOIN_OP("stack", "Joins arrays along a new axis.", stack_params, stack_infer, stack_forward,
            grad_stack),
    {.name = "split",
     .description = "Splits an array into equal parts along an axis.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = split_params,
     .infer = split_infer,
     .forward = split_forward,
     .forward_gpu = DEFT_GPU(split_forward),
     .inplace_input = -1,
     .num_outputs = split_num_outputs,
     .gradient = grad_split},
    {.name = "_backward_slice",
     .description = "Gradient of slice: zeros shaped like `like`, with grad in the slice.",
     .input_names = grad_like,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = slice_params,
     .infer = slice_backward_infer,
     .forward = slice_backward_forward,
     .forward_gpu = DEFT_GPU(slice_backward_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 1},
    {.name = "_backward_slice_axis",
     .description = "Gradient of slice_axis: zeros shaped like `like`, with grad in the slice.",
     .input_names = grad_like,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = slice_axis_params,
     .infer = slice_backward_infer,
     .forward = slice_backward_forward,
     .forward_gpu = DEFT_GPU(slice_backward_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 1,
     .data = "axis"},
    {.name = "_split_like",
     .description = "Cuts grad along dim into pieces shaped like the other inputs: the gradient "
                    "of Concat.",
     .input_names = variadic_input,
     .min_inputs = 2,
     .max_inputs = DEFT_OP_MAX_INPUTS,
     .params = split_like_params,
     .infer = split_like_infer,
     .forward = split_like_forward,
     .forward_gpu = DEFT_GPU(split_like_forward),
     .inplace_input = -1,
     .shape_inputs = ~1u, /* every input but grad */
     .num_outputs = split_like_num_outputs},
    SHAPE_OP("broadcast_to", "Broadcasts to a larger shape (NumPy rules).", broadcast_to_params,
             broadcast_to_infer, deft_forward_broadcast_input, -1, grad_broadcast_to),
};

DEFT_OP_FAMILY(deft_family_shape, shape_ops);
