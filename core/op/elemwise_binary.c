/*
 * Elementwise binary operators with NumPy broadcasting (broadcast_add ...),
 * their same-shape forms (elemwise_add ...) and scalar forms (_plus_scalar
 * ...). The scalar math is in scalar_math.h; comparisons return 1 or 0 in
 * the input dtype, as MXNet's do.
 */
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/scalar_math.h"
#include "core/op/strided.h"

typedef struct binary_kernels {
    deft_inner_fn fn[DEFT_SLOTS];
} binary_kernels_t;

/* Special cases for the stride patterns that vectorise: dense, and either side a scalar. */
#define BINARY_LOOP(fn, T)                                                                         \
    DEFT_CLONES static void loop_##fn(const void *ctx, char *const *p, const int64_t *s,           \
                                      int64_t n) {                                                 \
        (void)ctx;                                                                                 \
        T *y = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                 \
            for (int64_t i = 0; i < n; i++) y[i] = fn(a[i], b[i]);                                 \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {                                          \
            const T bv = *b;                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = fn(a[i], bv);                                   \
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                                          \
            const T av = *a;                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = fn(av, b[i]);                                   \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) y[i * s[0]] = fn(a[i * s[1]], b[i * s[2]]);            \
        }                                                                                          \
    }

#define ALL_LOOPS(name, expr)                                                                      \
    BINARY_LOOP(deft_##name##_f, float)                                                            \
    BINARY_LOOP(deft_##name##_d, double)                                                           \
    BINARY_LOOP(deft_##name##_i32, int32_t)                                                        \
    BINARY_LOOP(deft_##name##_i64, int64_t)                                                        \
    BINARY_LOOP(deft_##name##_u8, uint8_t)                                                         \
    static const binary_kernels_t k_##name = {{loop_deft_##name##_f, loop_deft_##name##_d,         \
                                               loop_deft_##name##_i32, loop_deft_##name##_i64,     \
                                               loop_deft_##name##_u8}};
DEFT_BINARY_FLOAT_MATH(ALL_LOOPS)

static int check_dtype(const deft_op_t *op, int nin, const deft_desc_t *in) {
    if (deft_op_check_same_dtype(op, nin, in)) return -1;
    return deft_op_check_dtype_arith(op, 0, in[0].dtype);
}

int deft_broadcast_shape(const deft_op_t *op, const deft_shape_t *a, const deft_shape_t *b,
                         deft_shape_t *out) {
    int ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    deft_shape_t result = {.ndim = ndim};
    for (int d = 0; d < ndim; d++) {
        int da = d - (ndim - a->ndim), db = d - (ndim - b->ndim);
        int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
        if (x != y && x != 1 && y != 1) {
            char sa[DEFT_SHAPE_STR_MAX], sb[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input shapes %s and %s cannot be broadcast together (axis %d: "
                                 "%lld vs %lld)",
                                 deft_shape_format(a, sa, sizeof sa),
                                 deft_shape_format(b, sb, sizeof sb), d - ndim, (long long)x,
                                 (long long)y);
        }
        result.dims[d] = x == 1 ? y : x;
    }
    *out = result;
    return 0;
}

static int broadcast_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    if (check_dtype(op, nin, in) ||
        deft_broadcast_shape(op, &in[0].shape, &in[1].shape, &out[0].shape))
        return -1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static int same_shape_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    if (check_dtype(op, nin, in)) return -1;
    if (!deft_shape_equal(&in[0].shape, &in[1].shape)) {
        char sa[DEFT_SHAPE_STR_MAX], sb[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 1 has shape %s, expected %s (the shape of input 0; use the "
                             "broadcast_ form to broadcast)",
                             deft_shape_format(&in[1].shape, sb, sizeof sb),
                             deft_shape_format(&in[0].shape, sa, sizeof sa));
    }
    out[0] = in[0];
    *nout = 1;
    return 0;
}

static int binary_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    const binary_kernels_t *k = op->data;
    deft_inner_fn fn = k->fn[deft_dtype_slot(out[0].dtype)];
    int64_t n = deft_shape_size(&out[0].shape), na = deft_shape_size(&in[0].shape),
            nb = deft_shape_size(&in[1].shape);
    if ((na == n || na == 1) && (nb == n || nb == 1)) { /* same shapes, or a single value */
        char *ptrs[3] = {deft_tensor_data(&out[0]), deft_tensor_data(&in[0]),
                         deft_tensor_data(&in[1])};
        const int64_t strides[3] = {1, na == n ? 1 : 0, nb == n ? 1 : 0};
        deft_flat_run(fn, NULL, 3, ptrs, strides, deft_dtype_size(out[0].dtype), n);
        return 0;
    }
    deft_strided_t it;
    deft_strided_init(&it, &out[0].shape, 3);
    deft_strided_set_dense(&it, 0, &out[0]);
    deft_strided_set_broadcast(&it, 1, &in[0]);
    deft_strided_set_broadcast(&it, 2, &in[1]);
    deft_strided_run(&it, fn, NULL);
    return 0;
}

/* ---- scalar forms ---- */

typedef struct scalar_op {
    const binary_kernels_t *kernels;
    bool reversed; /* scalar is the left operand: _rminus_scalar is scalar - x */
} scalar_op_t;

static const deft_param_def_t scalar_params[] = {
    {"scalar", DEFT_PARAM_FLOAT, "1", "the scalar operand", NULL, false}, {0}};

static int scalar_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (deft_op_check_dtype_arith(op, 0, in[0].dtype)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* The scalar in the input's dtype (integers saturate), stored in `slot`. */
static void scalar_to_dtype(double value, deft_dtype_t dtype, void *slot) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        *(float *)slot = (float)value;
        break;
    case DEFT_DT_FLOAT64:
        *(double *)slot = value;
        break;
    case DEFT_DT_INT32:
        *(int32_t *)slot = deft_to_i32(value);
        break;
    case DEFT_DT_INT64:
        *(int64_t *)slot = deft_to_i64(value);
        break;
    default:
        *(uint8_t *)slot = deft_to_u8(value);
        break;
    }
}

static int scalar_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const scalar_op_t *s = op->data;
    _Alignas(8) char scalar[8];
    scalar_to_dtype(p[0].f, in[0].dtype, scalar);
    char *data = deft_tensor_data(&in[0]);
    char *ptrs[3] = {deft_tensor_data(&out[0]), s->reversed ? scalar : data,
                     s->reversed ? data : scalar};
    const int64_t strides[3] = {1, s->reversed ? 0 : 1, s->reversed ? 1 : 0};
    deft_flat_run(s->kernels->fn[deft_dtype_slot(in[0].dtype)], NULL, 3, ptrs, strides,
                  deft_dtype_size(in[0].dtype), deft_shape_size(&out[0].shape));
    return 0;
}

/* ---- the table ---- */

static const char *const lhs_rhs[] = {"lhs", "rhs", NULL};

#define BROADCAST_OP(name_, k, doc)                                                                \
    {                                                                                              \
        .name = "broadcast_" name_, .description = doc " with NumPy broadcasting.",                \
        .input_names = lhs_rhs, .min_inputs = 2, .max_inputs = 2, .infer = broadcast_infer,        \
        .forward = binary_forward, .inplace_input = 0, .data = &k                                  \
    }
#define ELEMWISE_OP(name_, k, doc)                                                                 \
    {                                                                                              \
        .name = "elemwise_" name_, .description = doc " of two arrays of the same shape.",         \
        .input_names = lhs_rhs, .min_inputs = 2, .max_inputs = 2, .infer = same_shape_infer,       \
        .forward = binary_forward, .inplace_input = 0, .data = &k,                                 \
        .infer_inputs = deft_infer_inputs_like_output                                              \
    }
#define SCALAR_OP(name_, k, rev, doc)                                                              \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = deft_op_data_input, .min_inputs = 1,     \
        .max_inputs = 1, .params = scalar_params, .infer = scalar_infer,                           \
        .forward = scalar_forward, .inplace_input = 0,                                             \
        .infer_inputs = deft_infer_inputs_like_output, .data = &(const scalar_op_t) {              \
            &k, rev                                                                                \
        }                                                                                          \
    }

static const deft_op_t binary_ops[] = {
    BROADCAST_OP("add", k_add, "Sum lhs + rhs"),
    BROADCAST_OP("sub", k_sub, "Difference lhs - rhs"),
    BROADCAST_OP("mul", k_mul, "Product lhs * rhs"),
    BROADCAST_OP("div", k_div, "Quotient lhs / rhs (integers: truncated, x / 0 = 0)"),
    BROADCAST_OP("power", k_power, "Power lhs ** rhs"),
    BROADCAST_OP("maximum", k_maximum, "Maximum (NaN wins)"),
    BROADCAST_OP("minimum", k_minimum, "Minimum (NaN wins)"),
    BROADCAST_OP("equal", k_equal, "1 where lhs == rhs, else 0,"),
    BROADCAST_OP("not_equal", k_not_equal, "1 where lhs != rhs, else 0,"),
    BROADCAST_OP("greater", k_greater, "1 where lhs > rhs, else 0,"),
    BROADCAST_OP("greater_equal", k_greater_equal, "1 where lhs >= rhs, else 0,"),
    BROADCAST_OP("lesser", k_lesser, "1 where lhs < rhs, else 0,"),
    BROADCAST_OP("lesser_equal", k_lesser_equal, "1 where lhs <= rhs, else 0,"),
    ELEMWISE_OP("add", k_add, "Sum"),
    ELEMWISE_OP("sub", k_sub, "Difference"),
    ELEMWISE_OP("mul", k_mul, "Product"),
    ELEMWISE_OP("div", k_div, "Quotient"),
    SCALAR_OP("_plus_scalar", k_add, false, "data + scalar."),
    SCALAR_OP("_minus_scalar", k_sub, false, "data - scalar."),
    SCALAR_OP("_rminus_scalar", k_sub, true, "scalar - data."),
    SCALAR_OP("_mul_scalar", k_mul, false, "data * scalar."),
    SCALAR_OP("_div_scalar", k_div, false, "data / scalar."),
    SCALAR_OP("_rdiv_scalar", k_div, true, "scalar / data."),
    SCALAR_OP("_power_scalar", k_power, false, "data ** scalar."),
    SCALAR_OP("_rpower_scalar", k_power, true, "scalar ** data."),
    SCALAR_OP("_maximum_scalar", k_maximum, false, "max(data, scalar), NaN wins."),
    SCALAR_OP("_minimum_scalar", k_minimum, false, "min(data, scalar), NaN wins."),
    SCALAR_OP("_equal_scalar", k_equal, false, "1 where data == scalar, else 0."),
    SCALAR_OP("_not_equal_scalar", k_not_equal, false, "1 where data != scalar, else 0."),
    SCALAR_OP("_greater_scalar", k_greater, false, "1 where data > scalar, else 0."),
    SCALAR_OP("_greater_equal_scalar", k_greater_equal, false, "1 where data >= scalar, else 0."),
    SCALAR_OP("_lesser_scalar", k_lesser, false, "1 where data < scalar, else 0."),
    SCALAR_OP("_lesser_equal_scalar", k_lesser_equal, false, "1 where data <= scalar, else 0."),
};

DEFT_OP_FAMILY(deft_family_binary, binary_ops);
