/*
 * Reshape with MXNet 1.x's special values, and _np_reshape, NumPy's literal
 * shape. Both are the same bytes in a new shape: a copy, or nothing when
 * the output is the input's buffer.
 *
 * MXNet's values, read left to right against the input's dimensions:
 *   0  copies the next input dimension;
 *  -1  is inferred from the element count (one at most);
 *  -2  copies all remaining input dimensions;
 *  -3  merges the next two input dimensions into one;
 *  -4  splits the next input dimension into the two values that follow
 *      (one of them may be -1).
 * With reverse=true, both the input's dimensions and the values are read
 * right to left, as MXNet does.
 */
#include "core/op/grad.h"
#include "core/op/op.h"

static const deft_param_def_t reshape_params[] = {
    {"shape", DEFT_PARAM_TUPLE, NULL,
     "new shape; 0 copies an input dimension, -1 is inferred, -2 copies the rest, -3 merges "
     "two, -4 splits one into the next two values",
     NULL, false},
    {"reverse", DEFT_PARAM_BOOL, "false", "read the special values right to left", NULL, false},
    {0}};

static const char *const np_orders[] = {"C", NULL};
static const deft_param_def_t np_reshape_params[] = {
    {"newshape", DEFT_PARAM_TUPLE, NULL,
     "new shape, taken literally (0 is a size); one -1 is inferred", NULL, false},
    {"order", DEFT_PARAM_ENUM, "C", "element order: row-major (C) only", np_orders, false},
    {0}};

/* A shape being built, and where in the input's dimensions it has got to. */
typedef struct builder {
    const deft_op_t *op;
    const deft_shape_t *src;
    deft_shape_t shape;
    int src_dim, infer_at;
} builder_t;

static int push(builder_t *b, int64_t v) {
    if (b->shape.ndim == DEFT_SHAPE_MAX_NDIM)
        return deft_op_error(b->op, DEFT_ERR_VALUE, "the result would have more than %d dimensions",
                             DEFT_SHAPE_MAX_NDIM);
    b->shape.dims[b->shape.ndim++] = v;
    return 0;
}

/* The next input dimension, for value k of the shape. */
static int take_dim(builder_t *b, int k, int64_t v, int64_t *out) {
    if (b->src_dim >= b->src->ndim) {
        char s[DEFT_SHAPE_STR_MAX];
        return deft_op_error(b->op, DEFT_ERR_VALUE,
                             "shape[%d] is %lld, but the input %s has no dimension %d left", k,
                             (long long)v, deft_shape_format(b->src, s, sizeof s), b->src_dim);
    }
    *out = b->src->dims[b->src_dim++];
    return 0;
}

/* -3: the product of the next two input dimensions. */
static int merge_dims(builder_t *b, int k) {
    int64_t d = 0, e = 0;
    return take_dim(b, k, -3, &d) || take_dim(b, k, -3, &e) || push(b, d * e);
}

/* -4 at t[*k]: split the next input dimension into t[*k + 1] x t[*k + 2]. */
static int split_dim(builder_t *b, const deft_tuple_t *t, int *k) {
    int at = *k;
    int64_t d0 = 0, d1, d2;
    if (at + 2 >= t->n)
        return deft_op_error(b->op, DEFT_ERR_VALUE, "shape[%d] is -4, but two values must follow",
                             at);
    if (take_dim(b, at, -4, &d0)) return -1;
    d1 = t->v[at + 1], d2 = t->v[at + 2];
    *k = at + 2;
    if (d1 == -1 && d2 > 0 && d0 % d2 == 0) d1 = d0 / d2;
    if (d2 == -1 && d1 > 0 && d0 % d1 == 0) d2 = d0 / d1;
    if (d1 < 0 || d2 < 0 || d1 * d2 != d0)
        return deft_op_error(b->op, DEFT_ERR_VALUE,
                             "shape[%d] is -4: cannot split dimension %lld into (%lld, %lld)", at,
                             (long long)d0, (long long)t->v[at + 1], (long long)t->v[at + 2]);
    return push(b, d1) || push(b, d2);
}

/* One value of MXNet's shape (k may move past the values -4 consumes). */
static int legacy_value(builder_t *b, const deft_tuple_t *t, int *k) {
    int64_t v = t->v[*k], d = 0;
    switch (v) {
    case 0:
        return take_dim(b, *k, v, &d) || push(b, d);
    case -2:
        while (b->src_dim < b->src->ndim)
            if (push(b, b->src->dims[b->src_dim++])) return -1;
        return 0;
    case -3:
        return merge_dims(b, *k);
    case -4:
        return split_dim(b, t, k);
    default:
        break;
    }
    if (v < -4)
        return deft_op_error(b->op, DEFT_ERR_VALUE,
                             "shape[%d] is %lld, expected >= 0 or one of -1, -2, -3, -4", *k,
                             (long long)v);
    b->src_dim++;
    return push(b, v); /* v > 0, or -1: inferred at the end */
}

static int literal_value(builder_t *b, const deft_tuple_t *t, int k) {
    if (t->v[k] < -1)
        return deft_op_error(b->op, DEFT_ERR_VALUE, "newshape[%d] is %lld, expected >= 0 or -1", k,
                             (long long)t->v[k]);
    return push(b, t->v[k]);
}

/* Replace the one -1 so the element counts agree. */
static int infer_unknown(builder_t *b) {
    const char *param = b->op->params[0].name;
    int64_t want = deft_shape_size(b->src), have = 1;
    for (int d = 0; d < b->shape.ndim; d++) {
        if (b->shape.dims[d] != -1) {
            have *= b->shape.dims[d];
        } else if (b->infer_at >= 0) {
            return deft_op_error(b->op, DEFT_ERR_VALUE, "%s has more than one -1", param);
        } else {
            b->infer_at = d;
        }
    }
    if (b->infer_at >= 0) {
        if (have == 0 || want % have != 0)
            return deft_op_error(b->op, DEFT_ERR_VALUE,
                                 "cannot infer the -1 in %s: %lld elements do not divide into the "
                                 "given dimensions",
                                 param, (long long)want);
        b->shape.dims[b->infer_at] = want / have;
        have = want;
    }
    if (have != want) {
        char s[DEFT_SHAPE_STR_MAX], d[DEFT_SHAPE_STR_MAX];
        return deft_op_error(b->op, DEFT_ERR_VALUE, "cannot reshape %s (%lld elements) to %s",
                             deft_shape_format(b->src, s, sizeof s), (long long)want,
                             deft_shape_format(&b->shape, d, sizeof d));
    }
    return 0;
}

static void reverse_dims(int64_t *v, int n) {
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        int64_t x = v[i];
        v[i] = v[j], v[j] = x;
    }
}

/* One infer for both: op->data marks _np_reshape, whose 0 is a size and not a copy. */
static int reshape_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    const bool literal = op->data != NULL, reverse = !literal && p[1].i;
    deft_tuple_t t = p[0].t;
    deft_shape_t src = in[0].shape;
    if (reverse) reverse_dims(t.v, t.n), reverse_dims(src.dims, src.ndim);
    builder_t b = {.op = op, .src = &src, .infer_at = -1};
    for (int k = 0; k < t.n; k++)
        if (literal ? literal_value(&b, &t, k) : legacy_value(&b, &t, &k)) return -1;
    if (infer_unknown(&b)) return -1;
    if (reverse) reverse_dims(b.shape.dims, b.shape.ndim);
    out[0].shape = b.shape;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static const deft_op_t reshape_ops[] = {
    {.name = "Reshape",
     .description = "Same elements in a new shape, with MXNet's special values (0 copies a "
                    "dimension, -1 infers one, -2 copies the rest, -3 merges two, -4 splits one).",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = reshape_params,
     .infer = reshape_infer,
     .forward = deft_forward_copy,
     .forward_gpu = DEFT_GPU(deft_forward_copy),
     .inplace_input = 0,
     .gradient = deft_gradient_reshape_back},
    {.name = "_np_reshape",
     .description = "Same elements in a new shape, as NumPy's reshape: every entry of newshape "
                    "is a size (0 too), one -1 is inferred.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = np_reshape_params,
     .infer = reshape_infer,
     .forward = deft_forward_copy,
     .forward_gpu = DEFT_GPU(deft_forward_copy),
     .inplace_input = 0,
     .gradient = deft_gradient_reshape_back,
     .data = "literal"},
};

DEFT_OP_FAMILY(deft_family_reshape, reshape_ops);
