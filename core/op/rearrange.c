/*
 * Rearranging operators: SwapAxis, tile, repeat, reverse, broadcast_axis,
 * depth_to_space and space_to_depth move elements and compute nothing.
 * Each is one or a few strided copies (deft_copy_strided), which run on
 * the CPU and the GPU alike, so there are no kernels of their own.
 *
 * The gradients of tile and repeat sum the copies back: _backward_tile and
 * _backward_repeat view the gradient in a shape where the copies have axes
 * of their own (a reshape: the gradient is contiguous) and run the `sum`
 * operator's kernel over those axes.
 */
#include <stdio.h>
#include <string.h>

#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/registry.h"
#include "core/op/strided.h"

/* Output shape checks shared by tile and repeat: the result must fit in memory's size_t. */
static int check_fits(const deft_op_t *op, const deft_shape_t *shape, deft_dtype_t dtype) {
    size_t nbytes;
    if (deft_shape_nbytes(shape, deft_dtype_size(dtype), &nbytes) == 0) return 0;
    char s[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE, "the result's shape %s is too large",
                         deft_shape_format(shape, s, sizeof s));
}

/* sum of `g` seen with shape `view` over the axes whose bits are set in `reduced`, into out. */
static int sum_view(const deft_tensor_t *g, const deft_shape_t *view, uint32_t reduced,
                    const deft_tensor_t *out) {
    /* Nothing to sum (every rep 1): a copy. sum's empty axis tuple would mean every axis. */
    if (reduced == 0)
        return deft_tensor_nbytes(out) == 0
                   ? 0
                   : deft_device_copy(deft_tensor_data(out), out->device, deft_tensor_data(g),
                                      g->device, deft_tensor_nbytes(out));
    char axes[8 * 4 + 3] = "(";
    for (int d = 0; d < view->ndim; d++)
        if ((reduced >> d) & 1u)
            snprintf(axes + strlen(axes), sizeof axes - strlen(axes), "%d,", d);
    strcat(axes, ")");
    deft_tensor_t seen = *g;
    seen.shape = *view;
    return deft_registry_run_kernel("sum", "axis", axes, &seen, out);
}

/* ---- SwapAxis ---- */

static const deft_param_def_t swapaxis_params[] = {
    {"dim1", DEFT_PARAM_INT, "0", "the first axis to swap", NULL, false},
    {"dim2", DEFT_PARAM_INT, "0", "the second axis to swap", NULL, false},
    {0}};

/* The permutation SwapAxis applies: identity but for the two axes. */
static int swap_perm(const deft_op_t *op, const deft_param_value_t *p, int ndim, int *perm) {
    int a, b;
    if (deft_op_axis(op, "dim1", p[0].i, ndim, &a) || deft_op_axis(op, "dim2", p[1].i, ndim, &b))
        return -1;
    for (int d = 0; d < ndim; d++) perm[d] = d;
    perm[a] = b, perm[b] = a;
    return 0;
}

static int swapaxis_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int perm[DEFT_SHAPE_MAX_NDIM];
    if (swap_perm(op, p, in[0].shape.ndim, perm)) return -1;
    out[0] = in[0];
    for (int d = 0; d < in[0].shape.ndim; d++) out[0].shape.dims[d] = in[0].shape.dims[perm[d]];
    *nout = 1;
    return 0;
}

static int swapaxis_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int perm[DEFT_SHAPE_MAX_NDIM];
    int64_t own[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM];
    if (swap_perm(op, p, in[0].shape.ndim, perm)) return -1;
    deft_contiguous_strides(&in[0].shape, own);
    for (int d = 0; d < in[0].shape.ndim; d++) strides[d] = own[perm[d]];
    return deft_copy_strided(out[0].device, &out[0].shape, deft_tensor_data(&out[0]), NULL,
                             deft_tensor_data(&in[0]), strides, deft_dtype_size(in[0].dtype));
}

static int grad_swapaxis(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                         deft_gref_t *in_grads) {
    (void)p, (void)nin; /* a swap is its own inverse */
    in_grads[0] =
        g_op1(b, "SwapAxis", b->out_grad(b, 0),
              GRAD_PARAMS("dim1", g_attr(b, "dim1", "0"), "dim2", g_attr(b, "dim2", "0")));
    return 0;
}

/* ---- reverse ---- */

static const deft_param_def_t reverse_params[] = {
    {"axis", DEFT_PARAM_TUPLE, NULL, "the axes to reverse (an axis listed twice is not reversed)",
     NULL, false},
    {0}};

/* Which axes end up reversed: each listing flips the axis once more, as in MXNet. */
static int reversed_axes(const deft_op_t *op, const deft_param_value_t *p, int ndim, bool *flip) {
    for (int d = 0; d < ndim; d++) flip[d] = false;
    for (int k = 0; k < p[0].t.n; k++) {
        int a;
        if (deft_op_axis(op, "axis", p[0].t.v[k], ndim, &a)) return -1;
        flip[a] = !flip[a];
    }
    return 0;
}

static int reverse_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    bool flip[DEFT_SHAPE_MAX_NDIM];
    if (reversed_axes(op, p, in[0].shape.ndim, flip)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* Read the input backwards along the reversed axes: negative strides from its last element. */
static int reverse_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const deft_shape_t *shape = &in[0].shape;
    bool flip[DEFT_SHAPE_MAX_NDIM];
    int64_t strides[DEFT_SHAPE_MAX_NDIM], start = 0;
    if (reversed_axes(op, p, shape->ndim, flip)) return -1;
    if (deft_shape_size(shape) == 0) return 0; /* no offsets from a NULL pointer */
    deft_contiguous_strides(shape, strides);
    for (int d = 0; d < shape->ndim; d++) {
        if (!flip[d]) continue;
        start += (shape->dims[d] - 1) * strides[d];
        strides[d] = -strides[d];
    }
    size_t elem = deft_dtype_size(in[0].dtype);
    return deft_copy_strided(out[0].device, shape, deft_tensor_data(&out[0]), NULL,
                             (char *)deft_tensor_data(&in[0]) + start * (int64_t)elem, strides,
                             elem);
}

static int grad_reverse(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] =
        g_op1(b, "reverse", b->out_grad(b, 0), GRAD_PARAMS("axis", g_attr(b, "axis", "()")));
    return 0;
}

/* ---- tile ---- */

static const deft_param_def_t tile_params[] = {
    {"reps", DEFT_PARAM_TUPLE, NULL,
     "copies along each axis, aligned to the last axis (the shorter of reps and the shape is "
     "padded with 1s in front)",
     NULL, false},
    {0}};

/* reps[k] for axis d of an ndim-dimensional result (1 where reps is shorter). */
static int64_t rep_at(const deft_tuple_t *reps, int ndim, int d) {
    int k = d - (ndim - reps->n);
    return k >= 0 ? reps->v[k] : 1;
}

/* `shape` with 1s in front, to ndim dimensions. */
static deft_shape_t padded(const deft_shape_t *shape, int ndim) {
    deft_shape_t out = {.ndim = ndim};
    int lead = ndim - shape->ndim;
    for (int d = 0; d < ndim; d++) out.dims[d] = d < lead ? 1 : shape->dims[d - lead];
    return out;
}

static int tile_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_tuple_t *reps = &p[0].t;
    for (int k = 0; k < reps->n; k++)
        if (reps->v[k] < 0)
            return deft_op_error(op, DEFT_ERR_VALUE, "reps[%d] is %lld, expected >= 0", k,
                                 (long long)reps->v[k]);
    int ndim = in[0].shape.ndim > reps->n ? in[0].shape.ndim : reps->n;
    out[0].shape = padded(&in[0].shape, ndim);
    out[0].dtype = in[0].dtype;
    for (int d = 0; d < ndim; d++) {
        if (__builtin_mul_overflow(out[0].shape.dims[d], rep_at(reps, ndim, d),
                                   &out[0].shape.dims[d]))
            return deft_op_error(op, DEFT_ERR_VALUE, "the result's axis %d would overflow", d);
    }
    *nout = 1;
    return check_fits(op, &out[0].shape, out[0].dtype);
}

/*
 * The input is copied once into the corner of the output where every copy
 * index is 0; then, from the last axis to the first, the filled part is
 * copied onto the rest of that axis, doubling each time. Every output
 * element is written once, in 1 + sum(log2 reps) strided copies of at most
 * ndim dimensions (a single copy would need two dimensions per axis).
 */
static int tile_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    const deft_shape_t *full = &out[0].shape;
    if (deft_shape_size(full) == 0) return 0;
    deft_shape_t block = padded(&in[0].shape, full->ndim);
    int64_t strides[DEFT_SHAPE_MAX_NDIM];
    deft_contiguous_strides(full, strides);
    size_t elem = deft_dtype_size(in[0].dtype);
    char *y = deft_tensor_data(&out[0]);
    if (deft_copy_strided(out[0].device, &block, y, strides, deft_tensor_data(&in[0]), NULL, elem))
        return -1;
    for (int d = full->ndim - 1; d >= 0; d--) {
        for (int64_t filled = block.dims[d]; filled < full->dims[d];) {
            int64_t rest = full->dims[d] - filled;
            block.dims[d] = filled < rest ? filled : rest;
            if (deft_copy_strided(out[0].device, &block, y + filled * strides[d] * (int64_t)elem,
                                  strides, y, strides, elem))
                return -1;
            filled += block.dims[d];
        }
        block.dims[d] = full->dims[d];
    }
    return 0;
}

/*
 * grad seen with the copy index of each tiled axis as an axis of its own,
 * (r, n) for an axis of r copies of n; neighbours that are both summed or
 * both kept merge into one (grad is contiguous, so any neighbours do).
 */
static int tile_view(const deft_op_t *op, const deft_tuple_t *reps, const deft_shape_t *g,
                     deft_shape_t *view, uint32_t *reduced) {
    int n = 0;
    bool last_reduced = false;
    *reduced = 0;
    for (int d = 0; d < g->ndim; d++) {
        int64_t r = rep_at(reps, g->ndim, d), size = g->dims[d] / r;
        for (int part = 0; part < 2; part++) {
            int64_t extent = part == 0 ? r : size;
            bool sum = part == 0;
            if (extent == 1) continue;
            if (n > 0 && sum == last_reduced) {
                view->dims[n - 1] *= extent;
                continue;
            }
            if (n == DEFT_SHAPE_MAX_NDIM)
                return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                                     "too many tiled axes for one pass; split reps over several "
                                     "calls (the gradient of tile does)");
            if (sum) *reduced |= 1u << n;
            view->dims[n++] = extent;
            last_reduced = sum;
        }
    }
    view->ndim = n;
    return 0;
}

/* _backward_tile(grad; reps): grad summed over its copies, in grad's rank. */
static int backward_tile_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_tuple_t *reps = &p[0].t;
    const deft_shape_t *g = &in[0].shape;
    char s[DEFT_SHAPE_STR_MAX];
    if (reps->n > g->ndim)
        return deft_op_error(op, DEFT_ERR_VALUE, "reps has %d entries, more than grad %s has axes",
                             reps->n, deft_shape_format(g, s, sizeof s));
    out[0] = in[0];
    for (int d = 0; d < g->ndim; d++) {
        int64_t r = rep_at(reps, g->ndim, d);
        if (r < 1 || g->dims[d] % r != 0)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "reps %lld for axis %d of grad %s, expected >= 1 and a divisor",
                                 (long long)r, d, deft_shape_format(g, s, sizeof s));
        out[0].shape.dims[d] = g->dims[d] / r;
    }
    deft_shape_t view; /* checked here, so that a call that cannot run fails at once */
    uint32_t reduced;
    *nout = 1;
    return tile_view(op, reps, g, &view, &reduced);
}

static int backward_tile_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_shape_t view;
    uint32_t reduced;
    if (tile_view(op, &p[0].t, &in[0].shape, &view, &reduced)) return -1;
    return sum_view(&in[0], &view, reduced, &out[0]);
}

/* At most this many tiled axes per _backward_tile node: their view always fits. */
#define TILED_AXES_PER_PASS 3

/* "(v0,v1,...)" */
static void format_tuple(const int64_t *v, int n, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int k = 0; k < n && used < len; k++)
        used += (size_t)snprintf(buf + used, len - used, "%lld,", (long long)v[k]);
    if (used < len) snprintf(buf + used, len - used, ")");
}

/* Sum the gradient over the copies, a few tiled axes per node, then back to
 * the input's shape (tile may have added leading axes). No copies: zeros. */
static int grad_tile(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)nin;
    const deft_tuple_t *reps = &p[0].t;
    int tiled[DEFT_SHAPE_MAX_NDIM], ntiled = 0;
    for (int k = 0; k < reps->n; k++) {
        if (reps->v[k] == 0) {
            in_grads[0] = g_op1(b, "zeros_like", b->input(b, 0), GRAD_NONE);
            return 0;
        }
        if (reps->v[k] > 1) tiled[ntiled++] = k;
    }
    deft_gref_t g = b->out_grad(b, 0);
    for (int first = 0; first < ntiled; first += TILED_AXES_PER_PASS) {
        int64_t part[DEFT_SHAPE_MAX_NDIM];
        for (int k = 0; k < reps->n; k++) part[k] = 1;
        for (int i = first; i < ntiled && i < first + TILED_AXES_PER_PASS; i++)
            part[tiled[i]] = reps->v[tiled[i]];
        char text[DEFT_SHAPE_MAX_NDIM * 24];
        format_tuple(part, reps->n, text, sizeof text);
        g = g_op1(b, "_backward_tile", g, GRAD_PARAMS("reps", text));
    }
    in_grads[0] = g_op2(b, "reshape_like", g, b->input(b, 0), GRAD_NONE);
    return 0;
}

/* ---- repeat ---- */

static const deft_param_def_t repeat_params[] = {
    {"repeats", DEFT_PARAM_INT, NULL, "times each element is repeated", NULL, false},
    {"axis", DEFT_PARAM_INT, "None", "axis to repeat along; None repeats the flattened array", NULL,
     true},
    {0}};

/* The array as (outer, inner) around the repeated axis, which outer ends with;
 * without an axis, (size, 1). */
static int repeat_split(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *shape,
                        int *axis, int64_t *outer, int64_t *inner) {
    *axis = -1;
    if (!p[1].none && deft_op_axis(op, "axis", p[1].i, shape->ndim, axis)) return -1;
    *outer = 1, *inner = 1;
    for (int d = 0; d < shape->ndim; d++)
        *(d > *axis && *axis >= 0 ? inner : outer) *= shape->dims[d];
    return 0;
}

static int repeat_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int axis;
    int64_t outer, inner, r = p[0].i;
    if (r < 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "repeats is %lld, expected >= 0", (long long)r);
    if (repeat_split(op, p, &in[0].shape, &axis, &outer, &inner)) return -1;
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    if (r == 0) { /* MXNet: an empty 1-D array, whatever the axis */
        out[0].shape = (deft_shape_t){1, {0}};
    } else if (axis < 0) {
        out[0].shape = (deft_shape_t){1, {outer}};
        axis = 0;
    }
    if (r > 0 && __builtin_mul_overflow(out[0].shape.dims[axis], r, &out[0].shape.dims[axis]))
        return deft_op_error(op, DEFT_ERR_VALUE, "the result's axis %d would overflow", axis);
    *nout = 1;
    return check_fits(op, &out[0].shape, out[0].dtype);
}

/* Output (outer, repeats, inner) from input (outer, inner): a copy reading each element r times. */
static int repeat_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int axis;
    int64_t outer, inner;
    if (repeat_split(op, p, &in[0].shape, &axis, &outer, &inner)) return -1;
    if (deft_shape_size(&out[0].shape) == 0) return 0;
    const deft_shape_t it = {3, {outer, p[0].i, inner}};
    const int64_t src[3] = {inner, 0, 1};
    return deft_copy_strided(out[0].device, &it, deft_tensor_data(&out[0]), NULL,
                             deft_tensor_data(&in[0]), src, deft_dtype_size(in[0].dtype));
}

/* _backward_repeat(grad; repeats, axis): grad summed over the repeats; without an axis, 1-D. */
static int backward_repeat_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    int axis = 0;
    int64_t r = p[0].i;
    const deft_shape_t *g = &in[0].shape;
    char s[DEFT_SHAPE_STR_MAX];
    if (r < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "repeats is %lld, expected >= 1", (long long)r);
    if (p[1].none && g->ndim != 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "grad %s is not 1-D, as it is when axis is None",
                             deft_shape_format(g, s, sizeof s));
    if (!p[1].none && deft_op_axis(op, "axis", p[1].i, g->ndim, &axis)) return -1;
    if (g->dims[axis] % r != 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "axis %d of grad %s is not a multiple of %lld",
                             axis, deft_shape_format(g, s, sizeof s), (long long)r);
    out[0] = in[0];
    out[0].shape.dims[axis] /= r;
    *nout = 1;
    return 0;
}

static int backward_repeat_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                   const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    int axis;
    int64_t outer, inner;
    if (repeat_split(op, p, &out[0].shape, &axis, &outer, &inner)) return -1;
    const deft_shape_t view = {3, {outer, p[0].i, inner}};
    return sum_view(&in[0], &view, 1u << 1, &out[0]);
}

static int grad_repeat(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)nin;
    if (p[0].i == 0) {
        in_grads[0] = g_op1(b, "zeros_like", b->input(b, 0), GRAD_NONE);
        return 0;
    }
    deft_gref_t g =
        g_op1(b, "_backward_repeat", b->out_grad(b, 0),
              GRAD_PARAMS("repeats", g_attr(b, "repeats", "1"), "axis", g_attr(b, "axis", "None")));
    in_grads[0] = p[1].none ? g_op2(b, "reshape_like", g, b->input(b, 0), GRAD_NONE) : g;
    return 0;
}

/* ---- broadcast_axis ---- */

static const deft_param_def_t broadcast_axis_params[] = {
    {"axis", DEFT_PARAM_TUPLE, "()", "the axes to broadcast (each of size 1)", NULL, false},
    {"size", DEFT_PARAM_TUPLE, "()", "their new sizes, one per axis", NULL, false},
    {0}};

static int broadcast_axis_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const deft_tuple_t *axes = &p[0].t, *sizes = &p[1].t;
    if (axes->n != sizes->n)
        return deft_op_error(op, DEFT_ERR_VALUE, "axis has %d entries but size has %d", axes->n,
                             sizes->n);
    out[0] = in[0];
    for (int k = 0; k < axes->n; k++) {
        int a;
        if (deft_op_axis(op, "axis", axes->v[k], in[0].shape.ndim, &a)) return -1;
        if (out[0].shape.dims[a] != 1)
            return deft_op_error(op, DEFT_ERR_VALUE, "axis %d has size %lld, expected 1", a,
                                 (long long)out[0].shape.dims[a]);
        if (sizes->v[k] < 0)
            return deft_op_error(op, DEFT_ERR_VALUE, "size[%d] is %lld, expected >= 0", k,
                                 (long long)sizes->v[k]);
        out[0].shape.dims[a] = sizes->v[k];
    }
    *nout = 1;
    return check_fits(op, &out[0].shape, out[0].dtype);
}

static int grad_broadcast_axis(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                               deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_reduce_to_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

/* ---- depth_to_space, space_to_depth ---- */

static const deft_param_def_t block_params[] = {
    {"block_size", DEFT_PARAM_INT, NULL, "side of the square blocks moved", NULL, false}, {0}};

static int block_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const bool to_space = op->data != NULL;
    const deft_shape_t *x = &in[0].shape;
    int64_t bs = p[0].i;
    char s[DEFT_SHAPE_STR_MAX];
    if (x->ndim != 4)
        return deft_op_error(op, DEFT_ERR_VALUE, "input %s is not 4-D (N, C, H, W)",
                             deft_shape_format(x, s, sizeof s));
    if (bs < 1 || bs > 65536)
        return deft_op_error(op, DEFT_ERR_VALUE, "block_size is %lld, expected 1 to 65536",
                             (long long)bs);
    for (int d = 0; d < 4; d++)
        if (x->dims[d] == 0)
            return deft_op_error(op, DEFT_ERR_VALUE, "input %s has size 0 on axis %d",
                                 deft_shape_format(x, s, sizeof s), d);
    if (to_space ? x->dims[1] % (bs * bs) != 0 : x->dims[2] % bs != 0 || x->dims[3] % bs != 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "input %s: %s not a multiple of %lld",
                             deft_shape_format(x, s, sizeof s),
                             to_space ? "the depth (axis 1) is" : "the height and width are",
                             (long long)(to_space ? bs * bs : bs));
    out[0] = in[0];
    out[0].shape.dims[1] = to_space ? x->dims[1] / (bs * bs) : x->dims[1] * bs * bs;
    for (int d = 2; d < 4; d++) out[0].shape.dims[d] = to_space ? x->dims[d] * bs : x->dims[d] / bs;
    *nout = 1;
    return 0;
}

/*
 * Both as one 6-D copy, walking the output in order. depth_to_space: output
 * (N, C', H, b1, W, b2) reads channel (b1 bs + b2) C' + c' at (h, w);
 * space_to_depth: output (N, b1, b2, C, H', W') reads channel c at
 * (h' bs + b1, w' bs + b2).
 */
static int block_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const int64_t *x = in[0].shape.dims, bs = p[0].i;
    int64_t s[4];
    deft_contiguous_strides(&in[0].shape, s);
    deft_shape_t it = {6, {0}};
    int64_t src[6];
    if (op->data) {
        int64_t c = x[1] / (bs * bs);
        memcpy(it.dims, (int64_t[]){x[0], c, x[2], bs, x[3], bs}, sizeof(int64_t[6]));
        memcpy(src, (int64_t[]){s[0], s[1], s[2], bs * c * s[1], s[3], c * s[1]}, sizeof src);
    } else {
        memcpy(it.dims, (int64_t[]){x[0], bs, bs, x[1], x[2] / bs, x[3] / bs}, sizeof(int64_t[6]));
        memcpy(src, (int64_t[]){s[0], s[2], s[3], s[1], bs * s[2], bs * s[3]}, sizeof src);
    }
    return deft_copy_strided(out[0].device, &it, deft_tensor_data(&out[0]), NULL,
                             deft_tensor_data(&in[0]), src, deft_dtype_size(in[0].dtype));
}

static int grad_block(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const char *inverse = b->op->data ? "space_to_depth" : "depth_to_space";
    in_grads[0] = g_op1(b, inverse, b->out_grad(b, 0),
                        GRAD_PARAMS("block_size", g_attr(b, "block_size", "1")));
    return 0;
}

#define MOVE_OP(name_, doc, params_, infer_, forward_, grad_, data_)                               \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = deft_op_data_input, .min_inputs = 1,     \
        .max_inputs = 1, .params = params_, .infer = infer_, .forward = forward_,                  \
        .forward_gpu = DEFT_GPU(forward_), .inplace_input = -1, .gradient = grad_, .data = data_   \
    }

#define SWAPAXIS_DOC "Interchanges two axes (dim1 and dim2)."
#define REVERSE_DOC  "Reverses the order of the elements along the given axes."
#define BCAST_DOC    "Broadcasts axes of size 1 to the given sizes."

static const deft_op_t rearrange_ops[] = {
    MOVE_OP("SwapAxis", SWAPAXIS_DOC, swapaxis_params, swapaxis_infer, swapaxis_forward,
            grad_swapaxis, NULL),
    MOVE_OP("reverse", REVERSE_DOC, reverse_params, reverse_infer, reverse_forward, grad_reverse,
            NULL),
    MOVE_OP("tile", "Repeats the whole array reps times along each axis.", tile_params, tile_infer,
            tile_forward, grad_tile, NULL),
    MOVE_OP("_backward_tile", "Gradient of tile: grad summed over its copies.", tile_params,
            backward_tile_infer, backward_tile_forward, NULL, NULL),
    MOVE_OP("repeat", "Repeats each element `repeats` times along an axis (None: flattened).",
            repeat_params, repeat_infer, repeat_forward, grad_repeat, NULL),
    MOVE_OP("_backward_repeat", "Gradient of repeat: grad summed over the repeats.", repeat_params,
            backward_repeat_infer, backward_repeat_forward, NULL, NULL),
    MOVE_OP("broadcast_axis", BCAST_DOC, broadcast_axis_params, broadcast_axis_infer,
            deft_forward_broadcast_input, grad_broadcast_axis, NULL),
    MOVE_OP("depth_to_space",
            "Moves depth into blocks of space: (N, C, H, W) to (N, C/bs^2, H bs, W bs).",
            block_params, block_infer, block_forward, grad_block, "to space"),
    MOVE_OP("space_to_depth",
            "Moves blocks of space into depth: (N, C, H, W) to (N, C bs^2, H/bs, W/bs).",
            block_params, block_infer, block_forward, grad_block, NULL),
};

DEFT_OP_FAMILY(deft_family_rearrange, rearrange_ops);
